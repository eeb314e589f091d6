"""A kernel whose wgmma result stays in flight across loops (CPU codegen and interpreter tests in
test_tlx_hopper_codegen.py): the pattern of an attention backward that issues the next block's
scores before it finishes the current block."""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def carried_scores(a_ptr, b_ptr, out_ptr, N, SPLIT, BLOCK: tl.constexpr):
    """out = (N + 1) * (a @ b) for [BLOCK, BLOCK] fp16 a and b: the product is issued once before
    two loops and again at the end of every iteration into the same registers
    (use_acc=False), after the iteration has read the value the wait returned; the first loop
    runs SPLIT iterations and hands the product in flight to the second."""
    rows = tl.arange(0, BLOCK)
    offs = rows[:, None] * BLOCK + rows[None, :]
    a = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 1)
    b = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 1)
    a0 = tlx.local_view(a, 0)
    b0 = tlx.local_view(b, 0)
    tlx.local_store(a0, tl.load(a_ptr + offs))
    tlx.local_store(b0, tl.load(b_ptr + offs))
    tlx.fence_async_shared()
    total = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
    s = tlx.async_dot(a0, b0)
    for i in range(0, SPLIT):
        s = tlx.async_dot_wait(0, s)
        total += s
        s = tlx.async_dot(a0, b0, s, use_acc=False)
    for i in range(SPLIT, N):
        s = tlx.async_dot_wait(0, s)
        total += s
        s = tlx.async_dot(a0, b0, s, use_acc=False)
    s = tlx.async_dot_wait(0, s)
    total += s
    tl.store(out_ptr + offs, total)
