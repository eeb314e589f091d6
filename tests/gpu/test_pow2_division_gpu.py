"""Integer division and remainder by powers of two on the GPU (lowered to shifts and masks, not
div/rem): Triton's truncating semantics on negative, positive and extreme int32 and int64 values,
against PyTorch."""

import pytest

from gpu_requirements import require_cuda

import warpweave as ww
import warpweave.language as tl

torch = require_cuda()


@ww.jit
def pow2_div_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x // 2)
    tl.store(out_ptr + N + offs, x % 2)
    tl.store(out_ptr + 2 * N + offs, x // 8)
    tl.store(out_ptr + 3 * N + offs, x % 8)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_division_by_powers_of_two_truncates(dtype):
    n = 1024
    info = torch.iinfo(dtype)
    x = torch.randint(-5000, 5000, (n,), device="cuda", dtype=dtype)
    x[:6] = torch.tensor([info.min, info.max, -1, -7, -8, -9], dtype=dtype)
    out = torch.full((4 * n,), 12345, device="cuda", dtype=dtype)
    pow2_div_kernel[(1,)](x, out, N=n)
    torch.cuda.synchronize()
    want = [torch.div(x, d, rounding_mode="trunc") if op == "div" else torch.fmod(x, d)
            for d in (2, 8) for op in ("div", "rem")]
    for i, ref in enumerate(want):
        assert torch.equal(out[i * n:(i + 1) * n], ref), i
