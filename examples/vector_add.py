"""Vector add: the first kernel through every stage of warpweave.

    python examples/vector_add.py              # on the GPU when present, else the interpreter
    WARPWEAVE_INTERPRET=1 python examples/vector_add.py
    wwc examples/vector_add.py --kernel add_kernel \
        --signature "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32:16,BLOCK=1024" \
        --target sm_90a --emit ptx -o add.ptx
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


def add(x, y, block=1024):
    out = x.new_empty(x.shape) if hasattr(x, "new_empty") else type(x)(x.shape)
    n = x.numel() if hasattr(x, "numel") else x.size
    grid = lambda meta: (tl.cdiv(n, meta["BLOCK"]),)
    add_kernel[grid](x, y, out, n, BLOCK=block)
    return out


if __name__ == "__main__":
    import sys
    from warpweave._demo import run_vector_add_demo

    sys.exit(run_vector_add_demo(add_kernel))
