"""Vector add: the first kernel through every stage of warpweave.

    python examples/vector_add.py            # on the GPU when one is present, else the interpreter
    WARPWEAVE_INTERPRET=1 python examples/vector_add.py   # force the interpreter
    wwc examples/vector_add.py --kernel add_kernel \\
        --signature "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32:16,BLOCK=1024" \\
        --target sm_90a --emit ptx -o add.ptx
"""
import argparse
import os
import sys

import numpy as np

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


def add(x, y, out, block=1024):
    """out = x + y for 1-D NumPy arrays (interpreter) or CUDA tensors (GPU)."""
    n = x.shape[0]
    grid = lambda meta: (ww.cdiv(n, meta["BLOCK"]),)
    add_kernel[grid](x, y, out, n, BLOCK=block)
    return out


def _gpu_available():
    if os.environ.get("WARPWEAVE_INTERPRET", "0") not in ("", "0"):
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_003, help="elements (odd on purpose)")
    parser.add_argument("--block", type=int, default=1024)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.n, dtype=np.float32)
    y = rng.standard_normal(args.n, dtype=np.float32)
    expected = x + y

    if _gpu_available():
        import torch

        where = f"GPU ({torch.cuda.get_device_name()})"
        xd, yd = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        out = torch.full_like(xd, float("nan"))  # poisoned: every element must be written
        add(xd, yd, out, args.block)
        torch.cuda.synchronize()
        got = out.cpu().numpy()
    else:
        where = "interpreter (no GPU: set up a CUDA machine to run on the GPU)"
        got = np.full_like(x, np.nan)
        add(x, y, got, args.block)

    ok = np.array_equal(got, expected)
    bad = int(np.count_nonzero(got != expected))
    print(f"vector add of {args.n} fp32 elements on the {where}: "
          f"{'correct' if ok else f'WRONG ({bad} elements differ)'} against NumPy")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
