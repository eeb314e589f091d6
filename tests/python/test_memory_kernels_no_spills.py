"""The configurations warpweave.ops launches for softmax and layer norm at bench/bench_kernels.py's
full sizes, compiled for sm_90a as on a 132-SM H200 (no GPU: ptxas): none spills registers, and
the TMA options fall back to the register kernels where their shared buffers do not fit. The
wide-row paths those configurations take are checked for results in the interpreter."""

import os
import sys

import numpy as np
import pytest

from test_kernels_interp import (TOL, assert_close, layernorm_bwd_ref, layernorm_ref, randn,
                                 softmax_ref)
from warpweave import ops
from warpweave.ops import _common, _layernorm, _rows

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if os.path.join(ROOT, "bench") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench_kernels  # noqa: E402

pytest.importorskip("warpweave._native")

SOFTMAX_SHAPES = [(32768, 4096), (65536, 1024), (4096, 32768), (2048, 100000), (16384, 4096)]
LAYERNORM_SHAPES = [(32768, 4096), (65536, 1024), (8192, 16384), (16384, 4096)]


def empty(shape, dtype):
    # Never touched: the launches only compile.
    return np.empty(shape, dtype)


def softmax_call(shape, dtype, config):
    return lambda: ops.softmax(empty(shape, dtype), config=config)


def layernorm_fwd_call(shape, dtype, config):
    n = shape[1]
    return lambda: ops.layernorm_fwd(empty(shape, dtype), empty(n, dtype), empty(n, dtype),
                                     config=config)


def layernorm_bwd_call(shape, dtype, config):
    n = shape[1]
    return lambda: ops.layernorm_bwd(empty(shape, dtype), empty(shape, dtype), empty(n, dtype),
                                     empty(shape[0], np.float32), empty(shape[0], np.float32),
                                     config=config)


def cases():
    for variant in ("default", "tma"):
        for dtype in (np.float16, np.float32):
            for shape in SOFTMAX_SHAPES:
                config = bench_kernels.TMA_CONFIGS["softmax"] if variant == "tma" else None
                name = f"softmax-{variant}-{np.dtype(dtype).name}-{shape[0]}x{shape[1]}"
                yield pytest.param(softmax_call(shape, dtype, config), id=name)
        for shape in LAYERNORM_SHAPES:
            for name, call in (("layernorm_fwd", layernorm_fwd_call),
                               ("layernorm_bwd", layernorm_bwd_call)):
                config = bench_kernels.TMA_CONFIGS[name] if variant == "tma" else None
                yield pytest.param(call(shape, np.float16, config),
                                   id=f"{name}-{variant}-float16-{shape[0]}x{shape[1]}")


def wide_dtype_cases():
    # The wide-row paths in the dtypes the benchmark does not time (tests/gpu runs them).
    import ml_dtypes

    for dtype in (np.float32, ml_dtypes.bfloat16):
        name = np.dtype(dtype).name
        yield pytest.param(softmax_call((600, 32768), dtype, None), id=f"softmax-{name}-32768")
        yield pytest.param(softmax_call((300, 16384), dtype, None), id=f"softmax-{name}-16384")
        yield pytest.param(softmax_call((40, 100000), dtype, None), id=f"softmax-{name}-100000")
        for shape in ((1000, 16384), (300, 12000)):
            yield pytest.param(layernorm_fwd_call(shape, dtype, None),
                               id=f"layernorm_fwd-{name}-{shape[1]}")
            yield pytest.param(layernorm_bwd_call(shape, dtype, None),
                               id=f"layernorm_bwd-{name}-{shape[1]}")


@pytest.mark.parametrize("call", list(cases()) + list(wide_dtype_cases()))
def test_benchmark_configurations_do_not_spill(gpu_compiles, call):
    gpu_compiles.target = "sm_90a"
    gpu_compiles.kernels = []
    call()
    assert gpu_compiles.kernels, "the wrapper launched nothing"
    for kernel in gpu_compiles.kernels:
        assert kernel.n_spills == 0, (
            f"{kernel.fn.__name__} (num_warps={kernel.options[0]}): {kernel.n_regs} "
            f"registers, {kernel.n_spills} spill bytes")


def test_wide_rows_take_the_register_kernels_when_tma_buffers_do_not_fit(gpu_compiles):
    gpu_compiles.target = "sm_90a"
    gpu_compiles.kernels = []
    layernorm_bwd_call((8192, 16384), np.float16, bench_kernels.TMA_CONFIGS["layernorm_bwd"])()
    names = [kernel.fn.__name__ for kernel in gpu_compiles.kernels]
    assert names == ["layernorm_bwd_dx_kernel", "layernorm_bwd_partials_kernel",
                     "layernorm_bwd_dwdb_kernel"]
    # Rows whose buffers fit still take the TMA kernel.
    gpu_compiles.kernels = []
    layernorm_bwd_call((8192, 4096), np.float16, bench_kernels.TMA_CONFIGS["layernorm_bwd"])()
    assert gpu_compiles.kernels[0].fn.__name__ == "layernorm_bwd_tma_kernel"


def test_layernorm_bwd_wide_rows_take_dw_db_from_a_second_kernel(rng):
    # Past LAYERNORM_BWD_PARTIALS_MAX_COLS the dx kernel keeps no sums; odd sizes mask both the
    # row tiles and the column blocks of layernorm_bwd_partials_kernel.
    m, n = 37, _layernorm.LAYERNORM_BWD_PARTIALS_MAX_COLS + 77
    x = randn(rng, (m, n), "float32", scale=2.0)
    w, b, dy = randn(rng, (n,), "float32"), randn(rng, (n,), "float32"), randn(rng, (m, n),
                                                                                 "float32")
    _, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd)
    dx_ref, dw_ref, db_ref = layernorm_bwd_ref(dy, x, w, mean, rstd)
    assert_close(dx, dx_ref, TOL["float32"], "dx")
    assert_close(dw, dw_ref, TOL["float32"], "dw")
    assert_close(db, db_ref, TOL["float32"], "db")


@pytest.mark.parametrize("rows_ahead", [0, 1, 2])
def test_softmax_rows_ahead(rng, rows_ahead):
    x = randn(rng, (23, 300), "float32", scale=3.0)
    out = ops.softmax(x, config=dict(rows_ahead=rows_ahead))
    assert_close(out, softmax_ref(x), TOL["float32"], f"rows_ahead={rows_ahead}")


def test_wide_row_gpu_configurations_compute_the_same_results(rng, monkeypatch):
    # GPU block sizes, warps and grids (a 132-SM H200) run in the interpreter on rows as wide as
    # the benchmark's: fused softmax at 32768 columns (no rows ahead in fp32), the online
    # kernel's 8192-column blocks, the fused layer norm at 16384.
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))
    monkeypatch.setattr(_common._Place, "num_sms", lambda self: 132)
    x = randn(rng, (3, 32768), "float32", scale=3.0)
    # The interpreter sums a row's 32768 fp32 terms one after another (error growing with the
    # count: 1.3e-6 at 4096 columns, 2.9e-5 at 32768, whatever the rows ahead), hence 1e-4.
    assert_close(ops.softmax(x), softmax_ref(x), 1e-4, "fused 32768")
    x = randn(rng, (2, 20000), "float16", scale=3.0)
    assert_close(ops.softmax(x), softmax_ref(x), TOL["float16"], "online")
    x = randn(rng, (3, 16384), "float16", scale=2.0)
    w, b = randn(rng, (16384,), "float16"), randn(rng, (16384,), "float16")
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5)
    y_ref, mean_ref, rstd_ref = layernorm_ref(x, w, b, 1e-5)
    assert_close(y, y_ref, TOL["float16"], "layernorm y")
    assert_close(rstd, rstd_ref, TOL["float32"], "layernorm rstd")
    # The benchmark's TMA configuration falls back to the register kernels at these rows.
    dy = randn(rng, (3, 16384), "float16")
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd,
                                   config=bench_kernels.TMA_CONFIGS["layernorm_bwd"])
    dx_ref, dw_ref, db_ref = layernorm_bwd_ref(dy, x, w, mean, rstd)
    assert_close(dx, dx_ref, TOL["float16"], "dx")
    assert_close(dw, dw_ref, TOL["float16"], "dw")
    assert_close(db, db_ref, TOL["float16"], "db")


# ------------------------------------------------------------------------------------------------
# Rows split over a thread-block cluster (python/warpweave/ops/kernels/hopper/rows_cluster.py): what ops launches on an
# sm_90 GPU at the benchmark's wide rows, compiled as there.
# ------------------------------------------------------------------------------------------------

def cluster_cases():
    # (call, shape, config): what ops launches at the benchmark's wide rows, and the cluster
    # configurations the GPU tests force where the split is not the default (fp32 softmax, layer
    # norm forward).
    import ml_dtypes

    for dtype in (np.float16, ml_dtypes.bfloat16, np.float32):
        name = np.dtype(dtype).name
        for label, call, shape, config in (
                # (Softmax rows of 100000 default to rows_smem's kernel: forced here.)
                ("softmax", softmax_call, (2048, 100000), dict(cluster=8)),
                ("layernorm_fwd", layernorm_fwd_call, (2048, 100000), dict(cluster=8)),
                # (16-bit rows of 16384 default to the TMA kernel over 2-CTA clusters.)
                ("layernorm_bwd", layernorm_bwd_call, (8192, 16384), dict(cluster=2)),
                # Rows past one block, which only the cluster split takes in the backward.
                ("layernorm_bwd", layernorm_bwd_call, (2048, 100000), None)):
            yield pytest.param(call, shape, dtype, config,
                               id=f"{label}-{name}-{shape[0]}x{shape[1]}")


@pytest.fixture
def sm90_wrappers(gpu_compiles, monkeypatch):
    """gpu_compiles, with the wrappers routing rows as on an sm_90 GPU (where NumPy arrays never
    take the cluster kernels)."""
    monkeypatch.setattr(_common, "_sm90_or_later", lambda place: True)
    gpu_compiles.target = "sm_90a"
    gpu_compiles.kernels = []
    return gpu_compiles


@pytest.mark.parametrize("call,shape,dtype,config", list(cluster_cases()))
def test_cluster_split_configurations_do_not_spill(sm90_wrappers, call, shape, dtype, config):
    call(shape, dtype, config)()
    names = [kernel.fn.__name__ for kernel in sm90_wrappers.kernels]
    assert names[0].endswith("_cluster_kernel"), names
    for kernel in sm90_wrappers.kernels:
        assert kernel.n_spills == 0, (
            f"{kernel.fn.__name__} (num_warps={kernel.options[0]}): {kernel.n_regs} "
            f"registers, {kernel.n_spills} spill bytes")
    cluster = sm90_wrappers.kernels[0]
    # The partials cross CTAs through a cluster barrier (release / acquire) and L2 loads; the
    # slices load as 16-byte vectors (slice starts are multiples of 16 columns).
    ptx = cluster.kernel.ptx
    assert "barrier.cluster.arrive.release" in ptx and "barrier.cluster.wait.acquire" in ptx
    assert "ld.global.cg" in ptx
    assert ".v4.b32" in ptx or ".v4.u32" in ptx or ".v4.f32" in ptx, "no 16-byte vector loads"
    assert cluster.options[2] >= 2, f"launched in clusters of {cluster.options[2]}"


@pytest.mark.parametrize("call,name,config", [
    (softmax_call, "softmax_smem_kernel", dict(split=2, unroll=4)),
    (softmax_call, "softmax_smem_kernel", dict(split=2, unroll=13)),
    (layernorm_fwd_call, "layernorm_fwd_smem_kernel", dict(split=4, wb_smem=True, unroll=2)),
    (layernorm_fwd_call, "layernorm_fwd_smem_kernel", dict(split=4, wb_smem=True, unroll=7)),
])
def test_smem_rows_unrolled_passes_compile_without_spills(sm90_wrappers, call, name, config):
    call((2048, 100000), np.float16, dict(smem=True, block=4096, num_stages=2, num_warps=8,
                                          **config))()
    kernel = next(k for k in sm90_wrappers.kernels if k.fn.__name__ == name)
    assert f"UNROLL={config['unroll']}" in kernel.signature and kernel.n_spills == 0, (
        kernel.signature, kernel.n_spills)


@pytest.mark.parametrize("shape,dtype", [((2048, 100000), np.float16), ((1500, 70000), np.float16)])
def test_layernorm_bwd_cluster_dsmem_exchange_compiles_without_spills(sm90_wrappers, shape, dtype):
    # dsmem=True: each row's two sums pushed into every peer's shared memory by st.async and
    # waited for on an mbarrier, instead of scratch stores, a cluster barrier and L2 loads.
    layernorm_bwd_call(shape, dtype, dict(dsmem=True))()
    kernel = sm90_wrappers.kernels[0]
    assert kernel.fn.__name__ == "layernorm_bwd_cluster_kernel", kernel.fn.__name__
    assert "DSMEM=True" in kernel.signature and kernel.n_spills == 0, (kernel.signature,
                                                                       kernel.n_spills)
    ptx = kernel.kernel.ptx
    assert "st.async.shared::cluster.mbarrier::complete_tx::bytes" in ptx
    assert "ld.global.cg" not in ptx


def test_cluster_split_options_in_sweep_configurations(sm90_wrappers):
    # The sweep's forcing keys: cluster=C at any C from 2 to 16 (7 slices of 100000 columns take
    # 14288-column slices in 16384 lanes), rows per cluster or clusters, rows ahead.
    softmax_call((2048, 100000), np.float16, dict(cluster=7, num_warps=16))()
    layernorm_fwd_call((8192, 16384), np.float16,
                       dict(cluster=2, programs_per_sm=1, rows_ahead=1))()
    layernorm_bwd_call((8192, 16384), np.float16, dict(cluster=8, rows_per_cluster=64))()
    softmax_call((4096, 32768), np.float16, dict(cluster=2, num_warps=32, rows_ahead=2))()
    assert [k.options[2] for k in sm90_wrappers.kernels if k.options[2] > 1] == [7, 2, 8, 2]
    for kernel in sm90_wrappers.kernels:
        assert kernel.n_spills == 0, f"{kernel.fn.__name__}: {kernel.n_spills} spill bytes"


def test_cluster_config_errors_name_the_key():
    x = np.ones((4, 64), np.float32)
    for bad in (17, -1, 2.0, True):
        with pytest.raises(ValueError, match="config 'cluster'"):
            ops.softmax(x, config=dict(cluster=bad))


def test_cluster_split_defaults_on_sm90(sm90_wrappers):
    # Softmax rows past 32 KB take rows_smem's kernel (one CTA a row at 64 KB, clusters wider);
    # backward rows of 32 and 64 KB the TMA kernel over clusters of 2 and 4 CTAs (16 KB slices),
    # wider ones the rows_cluster split; the layer norm forward's the TMA kernel at 16384
    # columns, rows_smem's past it.
    softmax_call((2048, 100000), np.float16, None)()
    softmax_call((2048, 100000), np.float32, None)()
    softmax_call((4096, 32768), np.float16, None)()
    layernorm_fwd_call((8192, 16384), np.float16, None)()
    layernorm_fwd_call((2048, 100000), np.float16, None)()
    layernorm_bwd_call((8192, 8192), np.float16, None)()
    layernorm_bwd_call((8192, 16384), np.float16, None)()
    layernorm_bwd_call((4096, 32768), np.float16, None)()
    # (A kernel whose grid follows its registers is compiled twice: warmup, then launch.)
    names = [k.fn.__name__ for i, k in enumerate(sm90_wrappers.kernels)
             if i == 0 or k is not sm90_wrappers.kernels[i - 1]]
    assert names == ["softmax_smem_kernel", "softmax_smem_kernel", "softmax_smem_kernel",
                     "layernorm_fwd_tma_kernel", "layernorm_fwd_smem_kernel",
                     "layernorm_bwd_tma_kernel", "layernorm_bwd_dwdb_kernel",
                     "layernorm_bwd_tma_kernel", "layernorm_bwd_dwdb_kernel",
                     "layernorm_bwd_tma_kernel", "layernorm_bwd_dwdb_kernel"], names
    # (warps, CTAs per row): softmax 100000 fp16 over 2 CTAs, fp32 over 4 of 16 warps, 32768
    # fp16 one CTA; backward at 8192 / 16384 / 32768 columns on 8 warps over 1 / 2 / 4 CTAs.
    smem = [k for k in sm90_wrappers.kernels if k.fn.__name__ == "softmax_smem_kernel"]
    assert sorted({(k.options[0], k.options[2]) for k in smem}) == [(8, 1), (8, 2), (16, 4)]
    split = [k for k in sm90_wrappers.kernels if k.fn.__name__ == "layernorm_bwd_tma_kernel"]
    assert sorted({(k.options[0], k.options[2]) for k in split}) == [(8, 1), (8, 2), (8, 4)]
    for k in smem + split:
        assert k.n_spills == 0, f"{k.fn.__name__}: {k.n_spills} spill bytes"
        if k.options[2] > 1:
            # The partials travel through the peers' shared memory, not a cluster barrier a row.
            assert "st.async.shared::cluster.mbarrier::complete_tx::bytes" in k.kernel.ptx
    # The slices arrive as 16-byte copies.
    assert all("cp.async.cg.shared.global" in k.kernel.ptx for k in smem)


def test_numpy_rows_keep_the_one_cta_kernels(gpu_compiles):
    # Without an sm_90 GPU (here NumPy arrays under gpu_compiles) the wide rows take the kernels
    # they took before the cluster split.
    gpu_compiles.target = "sm_90a"
    gpu_compiles.kernels = []
    softmax_call((2048, 100000), np.float16, None)()
    layernorm_bwd_call((8192, 16384), np.float16, None)()
    assert [k.fn.__name__ for k in gpu_compiles.kernels] == [
        "softmax_online_kernel", "layernorm_bwd_dx_kernel", "layernorm_bwd_partials_kernel",
        "layernorm_bwd_dwdb_kernel"]


@pytest.mark.parametrize("call,shape,dtype,kernel,warps,stages,ctas", [
    (softmax_call, (65536, 1024), np.float16, "softmax_tma_kernel", 4, 2, 1),
    (softmax_call, (32768, 4096), np.float16, "softmax_tma_kernel", 4, 2, 1),
    (softmax_call, (32768, 4096), np.float32, "softmax_tma_kernel", 4, 2, 1),
    (softmax_call, (8192, 8192), np.float16, "softmax_tma_kernel", 4, 2, 1),
    (softmax_call, (8192, 8192), np.float32, "softmax_tma_kernel", 8, 2, 1),  # 32 KB rows
    (softmax_call, (4096, 16384), np.float16, "softmax_tma_kernel", 8, 2, 1),
    (softmax_call, (4096, 32768), np.float16, "softmax_smem_kernel", 8, 3, 1),  # 64 KB rows
    (softmax_call, (4096, 16384), np.float32, "softmax_smem_kernel", 8, 4, 2),
    (softmax_call, (1024, 262144), np.float16, "softmax_smem_kernel", 8, 3, 16),  # 512 KB rows
    (softmax_call, (1024, 262144), np.float32, "softmax_smem_kernel", 8, 3, 16),
    (softmax_call, (8192, 512), np.float16, "softmax_kernel", None, None, 1),  # 1 KB rows
    (layernorm_fwd_call, (32768, 4096), np.float16, "layernorm_fwd_tma_kernel", 4, 2, 1),
    (layernorm_fwd_call, (8192, 16384), np.float16, "layernorm_fwd_tma_kernel", 8, 2, 1),
    # Rows past 32 KB: held in shared memory with w and b, over 2 / 4 CTAs.
    (layernorm_fwd_call, (4096, 32768), np.float16, "layernorm_fwd_smem_kernel", 8, 2, 2),
    (layernorm_fwd_call, (2048, 100000), np.float16, "layernorm_fwd_smem_kernel", 8, 2, 4),
    (layernorm_fwd_call, (1024, 32768), np.float32, "layernorm_fwd_smem_kernel", 8, 2, 4),
    (layernorm_bwd_call, (8192, 16384), np.float16, "layernorm_bwd_tma_kernel", 8, 3, 2),
    (layernorm_bwd_call, (4096, 8192), np.float32, "layernorm_bwd_tma_kernel", 8, 3, 2),
    (layernorm_bwd_call, (65536, 1024), np.float16, "layernorm_bwd_tma_kernel", 4, 2, 1),
    (layernorm_bwd_call, (32768, 4096), np.float16, "layernorm_bwd_tma_kernel", 8, 2, 1),
    (layernorm_bwd_call, (8192, 8192), np.float16, "layernorm_bwd_tma_kernel", 8, 3, 1),
])
def test_tma_row_kernels_are_the_sm90_defaults(sm90_wrappers, call, shape, dtype, kernel, warps,
                                               stages, ctas):
    # Rows of 2 to 32 KB take the TMA kernels at the configurations measured best on the H200
    # (_rows._tma_row_defaults), without spills, the backward's rows of 32 KB split over 2-CTA
    # clusters; other rows keep the register kernels.
    call(shape, dtype, None)()
    first = sm90_wrappers.kernels[0]
    assert first.fn.__name__ == kernel
    assert first.options[2] == ctas, first.options
    if warps is not None:
        assert first.options[0] == warps and f"NUM_STAGES={stages}," in first.signature + ",", (
            first.options, first.signature)
    for compiled in sm90_wrappers.kernels:
        assert compiled.n_spills == 0, (compiled.fn.__name__, compiled.n_spills)


def test_tma_row_defaults_stay_off_with_a_config_and_off_sm90(gpu_compiles, monkeypatch):
    # An explicit config (here only tma=False) keeps the register kernels; so does a GPU before
    # sm_90 (the wrappers' capability check says no).
    monkeypatch.setattr(_common, "_sm90_or_later", lambda place: True)
    gpu_compiles.target = "sm_90a"
    gpu_compiles.kernels = []
    softmax_call((32768, 4096), np.float16, dict(tma=False))()
    assert gpu_compiles.kernels[0].fn.__name__ == "softmax_kernel"
    monkeypatch.setattr(_common, "_sm90_or_later", lambda place: False)
    gpu_compiles.target = "sm_80"
    gpu_compiles.kernels = []
    layernorm_bwd_call((32768, 4096), np.float16, None)()
    assert gpu_compiles.kernels[0].fn.__name__ == "layernorm_bwd_dx_kernel"


@pytest.mark.parametrize("shape,config,ctas", [
    ((4096, 32768), dict(smem=True, split=1, block=4096, num_stages=3), 1),
    ((2048, 100000), dict(smem=True, split=2, block=4096, num_stages=2), 2),
    ((1024, 262144), dict(smem=True, split=16, block=4096, num_stages=3), 16),
])
def test_layernorm_fwd_smem_option_compiles_without_spills(sm90_wrappers, shape, config, ctas):
    # The option (not a default yet): rows of 16-bit values in shared memory over clusters, the
    # slices arriving as 16-byte copies, the (mean, M2) pairs pushed to the peers' shared memory.
    layernorm_fwd_call(shape, np.float16, config)()
    kernel = sm90_wrappers.kernels[-1]
    assert kernel.fn.__name__ == "layernorm_fwd_smem_kernel" and kernel.options[2] == ctas
    assert kernel.n_spills == 0, f"{kernel.n_regs} registers, {kernel.n_spills} spill bytes"
    ptx = kernel.kernel.ptx
    assert "cp.async.cg.shared.global" in ptx
    assert ("st.async.shared::cluster" in ptx) == (ctas > 1)


@pytest.mark.parametrize("shape,config,ctas", [
    ((4096, 32768), dict(smem=True, wb_smem=True, split=2, block=4096, num_stages=2), 2),
    ((4096, 32768), dict(smem=True, wb_smem=True, split=4, block=4096, num_stages=3), 4),
    ((2048, 100000), dict(smem=True, wb_smem=True, split=4, block=4096, num_stages=2), 4),
])
def test_layernorm_fwd_smem_wb_smem_compiles_without_spills(sm90_wrappers, shape, config, ctas):
    # wb_smem=True: each CTA copies its w and b slices into shared memory once (16-byte cp.async
    # copies beside the ring's) and the output pass reads them there, so the kernel has no
    # global loads left (without it, w and b are ld.global.v4 for every row).
    layernorm_fwd_call(shape, np.float16, config)()
    kernel = sm90_wrappers.kernels[-1]
    assert kernel.fn.__name__ == "layernorm_fwd_smem_kernel" and kernel.options[2] == ctas
    assert "WB_SMEM=True" in kernel.signature, kernel.signature
    assert kernel.n_spills == 0, f"{kernel.n_regs} registers, {kernel.n_spills} spill bytes"
    ptx = kernel.kernel.ptx
    assert "cp.async.cg.shared.global" in ptx
    assert "ld.global" not in ptx
