"""Mixed mxfp4 x mxfp8 tlx.async_dot_scaled (tcgen05.mma kind::mxf8f6f4, the e2m1 operand loaded
padded by TMA's CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B) on a Blackwell (sm_100) GPU, against the
same product computed in float64 on the host. Ready for a Blackwell GPU; nothing here has run on
one yet (it skips on the H200). The operands are those of tests/python/test_blackwell_fp4.py,
whose sums are exact in fp32, so the result must match exactly."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((10, 0), "the mixed fp4 x fp8 MMA needs sm_100a (tcgen05)")
if torch.cuda.get_device_capability()[0] != 10:
    pytest.skip("compiled for sm_100a only", allow_module_level=True)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import test_blackwell_fp4 as t  # noqa: E402

import warpweave as ww  # noqa: E402


def cuda_descriptor(array, block):
    x = torch.from_numpy(array.view("uint8")).cuda()
    if array.dtype != "uint8":
        x = x.view(torch.float8_e4m3fn if array.dtype == t.NP_FP8["e4m3"] else torch.float8_e5m2)
    return ww.TensorDescriptor.from_tensor(x, block)


@pytest.mark.parametrize("a_fmt,b_fmt", t.MIXED)
@pytest.mark.parametrize("M,N,K,BN,BK,tmem", [(128, 128, 128, 128, 128, False),
                                              (256, 256, 512, 128, 256, True)])
def test_mixed_gemm_on_blackwell(monkeypatch, a_fmt, b_fmt, M, N, K, BN, BK, tmem):
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    a, b, av, bv, sa, sb = t.mixed_operands(M, N, K, a_fmt, b_fmt, 1)
    rn, rk = (BN + 127) // 128, (BK // 32 + 3) // 4
    sa_l = t.to_cublas_layout(t.pad(sa, ww.cdiv(M, 128) * 128))
    sb_l = t.to_cublas_layout(t.pad(sb, ww.cdiv(N, BN) * rn * 128))
    a_fp4 = a_fmt == "e2m1"
    c = torch.full((M, N), float("nan"), device="cuda")
    t.fk.mixed_gemm[(ww.cdiv(M, 128), ww.cdiv(N, BN))](
        cuda_descriptor(a, [128, BK // 2] if a_fp4 else [128, BK]),
        cuda_descriptor(b, [BK, BN] if a_fp4 else [BN, BK // 2]),
        cuda_descriptor(sa_l, [1, 1, rk, 2, 256]), cuda_descriptor(sb_l, [1, rn, rk, 2, 256]),
        c, M, N, K, A_FMT=a_fmt, B_FMT=b_fmt, A_FP4=a_fp4, BN=BN, BK=BK, TMEM_SCALES=tmem,
        num_warps=4)
    ref = t.mixed_reference(av, bv, sa, sb).astype("float32")
    assert torch.equal(c.cpu(), torch.from_numpy(ref))
