"""Element-wise vector addition, out[i] = x[i] + y[i] for 0 <= i < n.

add_kernel: one program per BLOCK consecutive elements.
    grid = (cdiv(n, BLOCK),)
    constexprs: BLOCK, a power of two (1024 is a good default)
    signature: x_ptr:*fp32:16, y_ptr:*fp32:16, out_ptr:*fp32:16, n:i32, BLOCK=1024

add_kernel_persistent: a fixed number of programs stride over the whole vector, which keeps the
launch small for very long vectors.
    grid = (min(NUM_SMS * 4, cdiv(n, BLOCK)),)
    constexprs: BLOCK
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@ww.jit
def add_kernel_persistent(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    first_block = tl.program_id(axis=0)
    num_blocks = tl.cdiv(n, BLOCK)
    for block in range(first_block, num_blocks, tl.num_programs(axis=0)):
        # 64-bit offsets: a persistent kernel is meant for vectors that may pass 2**31 elements.
        offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)
