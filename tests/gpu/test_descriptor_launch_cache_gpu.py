"""Host TensorDescriptors launched as the TLX tutorials' wrappers launch them, on an sm_90 GPU:
new descriptors with a dummy block per call, an autotuner whose configs' pre_hook sets the block
shapes, a grid function. The tensor maps are cached by what decides them; every call must still
compute with its own tensors and the chosen config's block shapes (outputs start as NaN, so an
unwritten or stale tile fails). tests/python/test_descriptor_launch_cache.py checks the same
caching through the stand-in driver."""

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((9, 0), "TLX warp-specialized GEMM needs sm_90")

import warpweave as ww  # noqa: E402
from warpweave.ops.kernels.hopper.gemm_ws import gemm_ws_kernel  # noqa: E402

if torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("gemm_ws_kernel is an sm_90a kernel", allow_module_level=True)

BASE = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SMEM_EPILOGUE=True, EPI_SUBTILE=4)
hooked = []


def set_blocks(nargs):
    hooked.append((nargs["NUM_STAGES"], nargs["GROUP_M"]))
    half, bk, bn = nargs["BLOCK_M"] // 2, nargs["BLOCK_K"], nargs["BLOCK_N"]
    nargs["a_desc"].block_shape = [half, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [half, bn // nargs["EPI_SUBTILE"]]


tuned = ww.autotune(
    configs=[ww.Config(dict(BASE, NUM_STAGES=s, GROUP_M=g), num_warps=4, num_stages=1,
                       pre_hook=set_blocks) for s, g in ((3, 8), (4, 16))],
    key=["M", "N", "K"], use_cuda_graph=True)(gemm_ws_kernel)


def wrapper(a, b, c=None):
    M, K = a.shape
    N = b.shape[1]
    if c is None:
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    sms = torch.cuda.get_device_properties("cuda").multi_processor_count
    dummy = [1, 1]
    descs = (ww.TensorDescriptor(a, [M, K], [K, 1], dummy),
             ww.TensorDescriptor(b, [K, N], [N, 1], dummy),
             ww.TensorDescriptor(c, [M, N], [N, 1], dummy))
    tuned[lambda meta: (min(sms, ww.cdiv(M, meta["BLOCK_M"]) * ww.cdiv(N, meta["BLOCK_N"])),)](
        *descs, M, N, K, NUM_SMS=sms)
    return c


def check(c, a, b):
    ref = (a.float() @ b.float())
    err = ((c.float() - ref).norm() / ref.norm()).item()
    assert not torch.isnan(c).any() and err < 2e-3, f"rel err {err}"


def test_every_call_computes_with_its_own_tensors():
    a = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 768, device="cuda", dtype=torch.float16)
    check(wrapper(a, b), a, b)  # tunes
    for _ in range(3):  # new outputs (often at the same address), new descriptors
        check(wrapper(a, b), a, b)
    # Other inputs of the same shape: the same config, new maps.
    a2, b2 = torch.randn_like(a), torch.randn_like(b)
    check(wrapper(a2, b2), a2, b2)
    # Into a slice of a larger buffer: another address, same geometry.
    big = torch.full((2048, 768), float("nan"), device="cuda", dtype=torch.float16)
    c = wrapper(a, b, big[1024:])
    torch.cuda.synchronize()
    check(c, a, b)
    assert torch.isnan(big[:1024]).all()
    # Another shape: tuned again, its own maps; then the first shape again.
    a3 = torch.randn(640, 512, device="cuda", dtype=torch.float16)
    check(wrapper(a3, b), a3, b)
    check(wrapper(a, b), a, b)
    # The pre_hook ran on every launch (tuning runs included), always with a tuned config.
    assert set(hooked) <= {(3, 8), (4, 16)} and len(hooked) >= 7
