"""The TLX warp-specialized persistent fp8 GEMM (kernels/hopper/scaled_mm_ws.py) behind
ops.scaled_mm(kernel="tlx"), without a GPU.

In the interpreter (CPU tensors and NumPy arrays; tiles 32x64x32, four persistent programs, so
several tiles per program and a ring of two stages wrapping many times): M, N and K not
multiples of the tiles, e4m3 and e5m2 operands in every pairing, per-tensor, rowwise and mixed
scales, bias of each dtype, each output dtype, against torch._scaled_mm's semantics computed in
fp32 (the fp8 values upcast, the fp32 product, the scales, the bias, one rounding); in 2-CTA
clusters sharing B^T through multicast (CLUSTER_M=2), bit-exact, with planted synchronization
bugs reported. Compiled for sm_90a through ptxas: the fixed configurations (128x256x128 and
128x128x128) for each scale kind, bias and output dtype without spills and within the shared
memory, with fp8 wgmma reading B transposed and the producer / consumer register split of
gemm_ws.py; the tuning candidates (split, deferred, clustered) likewise."""

import importlib
import re

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

import warpweave as ww  # noqa: E402
import warpweave.language as tl  # noqa: E402
import warpweave.ops as ops  # noqa: E402
from warpweave import tlx  # noqa: E402
from warpweave.ops import _scaled_mm, _tuning  # noqa: E402
from warpweave.ops.kernels.hopper import gemm_ws as gemm_ws_kernels  # noqa: E402
from warpweave.ops.kernels.hopper import scaled_mm_ws as scaled_mm_ws_kernels  # noqa: E402

jit_module = importlib.import_module("warpweave.jit")
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


@pytest.fixture
def interpreter(monkeypatch):
    """CPU tensors run in the interpreter."""
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


@pytest.fixture
def launches(monkeypatch, interpreter):
    """The names and constexprs of the kernels the calls launch (still run)."""
    seen = []
    run = jit_module.JITFunction.run

    def recording_run(self, *args, **kwargs):
        seen.append((self.__name__, {k: v for k, v in kwargs.items() if k.isupper()}))
        return run(self, *args, **kwargs)

    monkeypatch.setattr(jit_module.JITFunction, "run", recording_run)
    return seen


def reference(a, b, scale_a, scale_b, bias, out_dtype):
    c = (a.float() @ b.float()) * scale_a.float() * scale_b.float()
    if bias is not None:
        c = c + bias.float()
    return c.to(out_dtype)


def assert_rounded_close(actual, expected, out_dtype):
    """Within one rounding of out_dtype of the fp32 reference (plus summation-order noise)."""
    ref = expected.float()
    tol = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}[out_dtype]
    torch.testing.assert_close(actual.float(), ref, atol=tol * ref.abs().max().item() + 1e-6,
                               rtol=tol)


def scales(kind, M, N):
    """scale_a, scale_b: per tensor, rowwise, or one of each."""
    rows = torch.rand(M, 1) + 0.5
    cols = torch.rand(1, N) + 0.5
    return {"tensor": (torch.tensor(0.75), torch.tensor(1.5)), "rowwise": (rows, cols),
            "mixed": (torch.tensor(0.75), cols)}[kind]


@pytest.mark.parametrize("ta,tb", [(E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3), (E5M2, E5M2)])
@pytest.mark.parametrize("kind", ["tensor", "rowwise", "mixed"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("bias_dtype", [None, torch.bfloat16, torch.float32])
def test_tlx_kernel_in_the_interpreter(launches, ta, tb, kind, out_dtype, bias_dtype):
    torch.manual_seed(7)
    M, N, K = 100, 136, 80  # 4 x 3 tiles of 32x64 over 4 programs; K: 2.5 k-steps of 32
    a = torch.randn(M, K).to(ta)
    bt = torch.randn(N, K).to(tb)
    sa, sb = scales(kind, M, N)
    bias = None if bias_dtype is None else torch.randn(N).to(bias_dtype)
    out = ops.scaled_mm(a, bt.t(), sa, sb, out_dtype=out_dtype, bias=bias, kernel="tlx")
    assert [name for name, _ in launches] == ["scaled_mm_ws_kernel"]
    meta = launches[0][1]
    assert (meta["ROWWISE_A"], meta["ROWWISE_B"], meta["HAS_BIAS"]) == (
        kind == "rowwise", kind != "tensor", bias is not None)
    assert out.dtype == out_dtype and out.shape == (M, N)
    assert_rounded_close(out, reference(a, bt.t(), sa, sb, bias, out_dtype), out_dtype)


@pytest.mark.parametrize("kernel", ["tlx", "tl", "tma"])
@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("kind,out_dtype,bias_dtype", [
    ("rowwise", torch.float32, torch.bfloat16), ("tensor", torch.bfloat16, None),
    ("mixed", torch.float16, torch.float32)])
def test_both_accumulations_in_the_interpreter(launches, kernel, fast, kind, out_dtype,
                                               bias_dtype):
    # use_fast_accum only changes how the hardware sums (the interpreter sums exactly): both
    # settings give torch._scaled_mm's result at ragged shapes through every kernel, and the
    # kernels are told which (FAST_ACCUM).
    torch.manual_seed(11)
    M, N, K = 70, 72, 112  # 3 x 2 tiles of 32x64 (3 x 3 of 32x32); K: 3.5 k-steps of 32
    a = torch.randn(M, K).to(E4M3)
    bt = torch.randn(N, K).to(E5M2)
    sa, sb = scales(kind, M, N)
    bias = None if bias_dtype is None else torch.randn(N).to(bias_dtype)
    out = ops.scaled_mm(a, bt.t(), sa, sb, out_dtype=out_dtype, bias=bias, kernel=kernel,
                        use_fast_accum=fast)
    assert [meta["FAST_ACCUM"] for _, meta in launches] == [fast]
    assert_rounded_close(out, reference(a, bt.t(), sa, sb, bias, out_dtype), out_dtype)
    # The custom op takes torch._scaled_mm's argument too.
    lib = torch.ops.warpweave.scaled_mm(a, bt.t(), sa, sb, bias, out_dtype, use_fast_accum=fast)
    assert_rounded_close(lib, reference(a, bt.t(), sa, sb, bias, out_dtype), out_dtype)


@pytest.mark.parametrize("K", [32, 64, 96, 128, 160])
def test_promoted_pipeline_at_every_stage_count(launches, K):
    # Promoted accumulation (mma_tile's PROMOTE) issues a tile's first stage before its loop
    # over pairs of stages and ends with a last pair or a last single stage: 1 to 5 k-steps of
    # 32, several tiles per program (the stage ring's steps carry from tile to tile), exact
    # integer products so that any stage summed twice or left out shows.
    torch.manual_seed(K)
    M, N = 128, 256  # 4 x 4 tiles of 32x64 over 4 programs
    a = torch.randint(-4, 5, (M, K)).float().to(E4M3)
    bt = torch.randint(-4, 5, (N, K)).float().to(E4M3)
    one = torch.tensor(1.0)
    out = ops.scaled_mm(a, bt.t(), one, one, out_dtype=torch.float32, kernel="tlx")
    assert [meta["FAST_ACCUM"] for _, meta in launches] == [False]
    torch.testing.assert_close(out, a.float() @ bt.float().t(), rtol=0, atol=0)


@pytest.mark.parametrize("kind,out_dtype,bias_dtype", [
    ("rowwise", torch.float32, torch.bfloat16), ("tensor", torch.bfloat16, None),
    ("mixed", torch.float16, torch.float32)])
@pytest.mark.parametrize("K", [32, 112])
@pytest.mark.parametrize("variant", [dict(SPLIT_N=True), dict(EARLY_SCALES=True),
                                     dict(SPLIT_N=True, EARLY_SCALES=True), dict(STREAM=True)])
def test_promoted_variants_in_the_interpreter(launches, monkeypatch, kind, out_dtype, bias_dtype,
                                              K, variant):
    # SPLIT_N (promoted accumulation on tiles split into column halves, gemm_ws.mma_tile_split):
    # each half's scales, bias and chunked stores; EARLY_SCALES: a tile's scales and bias
    # loaded before its main loop; STREAM: a program's k-steps of all its tiles as one stream
    # (K = 32: every k-step ends a tile). At ragged shapes, several tiles per program.
    monkeypatch.setattr(_scaled_mm, "_INTERPRETER_TLX_CONFIG",
                        dict(_scaled_mm._INTERPRETER_TLX_CONFIG, **variant))
    torch.manual_seed(K)
    M, N = 100, 200  # 4 x 4 tiles of 32x64, the last column of tiles 8 wide
    a = torch.randn(M, K).to(E4M3)
    bt = torch.randn(N, K).to(E5M2)
    sa, sb = scales(kind, M, N)
    bias = None if bias_dtype is None else torch.randn(N).to(bias_dtype)
    out = ops.scaled_mm(a, bt.t(), sa, sb, out_dtype=out_dtype, bias=bias, kernel="tlx")
    assert [meta["FAST_ACCUM"] for _, meta in launches] == [False]
    assert all(launches[0][1][k] == v for k, v in variant.items())
    assert_rounded_close(out, reference(a, bt.t(), sa, sb, bias, out_dtype), out_dtype)


def exact_operands(M, N, K, kind, bias_dtype, seed):
    """Small integer fp8 operands, power-of-two scales and an integer bias: every fp32 value of
    the product is exact, so a correct kernel gives torch's rounding of it bit for bit."""
    torch.manual_seed(seed)
    a = torch.randint(-3, 4, (M, K)).float().to(E4M3)
    bt = torch.randint(-3, 4, (N, K)).float().to(E5M2)
    rows = 2.0 ** torch.randint(-2, 2, (M, 1)).float()
    cols = 2.0 ** torch.randint(-2, 2, (1, N)).float()
    sa, sb = {"tensor": (torch.tensor(0.5), torch.tensor(2.0)), "rowwise": (rows, cols),
              "mixed": (torch.tensor(0.25), cols)}[kind]
    bias = None if bias_dtype is None else torch.randint(-4, 5, (N,)).to(bias_dtype)
    return a, bt, sa, sb, bias


@pytest.mark.parametrize("kind,out_dtype,bias_dtype", [
    ("rowwise", torch.bfloat16, torch.bfloat16), ("tensor", torch.float16, None),
    ("mixed", torch.bfloat16, torch.float32)])
@pytest.mark.parametrize("K", [32, 64, 112])
@pytest.mark.parametrize("M,N", [(100, 200), (40, 72)])
@pytest.mark.parametrize("early,raster", [(False, False), (True, False), (True, True)])
def test_deferred_store_in_the_interpreter(launches, monkeypatch, kind, out_dtype, bias_dtype,
                                           K, M, N, early, raster):
    # DEFER_STORE (fast accumulation, 16-bit C): each tile's rounded result is stored after
    # the next tile's first stage was issued; a program's last tile after its own. 4 x 4 tiles
    # of 32x64 over 4 programs (4 each: three deferred stores, then the last), or 2 x 2 (one
    # tile each: only the last tile's path), ragged in M and N; K = 32: a tile is its first
    # stage only, 64: two, 112: 3.5. Small integers and power-of-two scales: every fp32 value
    # is exact, so the result is torch's rounding of the exact product, bit for bit.
    # early: each tile's vectors loaded before its chains (EARLY_SCALES), once the previous
    # tile's rounded C is stored; raster: tiles grouped by columns (RASTER_N), so a program's
    # consecutive tiles change rows, and its vectors with them.
    monkeypatch.setattr(_scaled_mm, "_INTERPRETER_TLX_CONFIG",
                        dict(_scaled_mm._INTERPRETER_TLX_CONFIG, DEFER_STORE=True,
                             EARLY_SCALES=early, RASTER_N=raster))
    a, bt, sa, sb, bias = exact_operands(M, N, K, kind, bias_dtype, K + M)
    out = ops.scaled_mm(a, bt.t(), sa, sb, out_dtype=out_dtype, bias=bias, kernel="tlx",
                        use_fast_accum=True)
    assert [(meta["FAST_ACCUM"], meta["DEFER_STORE"], meta["EARLY_SCALES"], meta["RASTER_N"])
            for _, meta in launches] == [(True, True, early, raster)]
    torch.testing.assert_close(out, reference(a, bt.t(), sa, sb, bias, out_dtype), rtol=0,
                               atol=0)


CLUSTER_VARIANTS = [dict(FAST_ACCUM=True), dict(FAST_ACCUM=True, EARLY_SCALES=True),
                    dict(FAST_ACCUM=True, DEFER_STORE=True),
                    dict(FAST_ACCUM=True, DEFER_STORE=True, EARLY_SCALES=True),
                    dict(FAST_ACCUM=True, DEFER_STORE=True, RASTER_N=True),
                    dict(FAST_ACCUM=False), dict(FAST_ACCUM=False, SPLIT_N=True)]


def run_in_clusters(monkeypatch, variant, M, N, K, kind, out_dtype, bias_dtype, seed=0):
    """ops.scaled_mm(kernel="tlx") in the interpreter with CLUSTER_M=2 and `variant` (its
    FAST_ACCUM the call's use_fast_accum, the rest constexprs of the interpreter's tiles);
    returns the result and the reference."""
    variant = dict(variant)
    fast = variant.pop("FAST_ACCUM")
    monkeypatch.setattr(_scaled_mm, "_INTERPRETER_TLX_CONFIG",
                        dict(_scaled_mm._INTERPRETER_TLX_CONFIG, CLUSTER_M=2, **variant))
    a, bt, sa, sb, bias = exact_operands(M, N, K, kind, bias_dtype, seed)
    out = ops.scaled_mm(a, bt.t(), sa, sb, out_dtype=out_dtype, bias=bias, kernel="tlx",
                        use_fast_accum=fast)
    return out, reference(a, bt.t(), sa, sb, bias, out_dtype)


@pytest.mark.parametrize("kind,out_dtype,bias_dtype", [
    ("rowwise", torch.bfloat16, torch.bfloat16), ("tensor", torch.float16, None),
    ("mixed", torch.bfloat16, torch.float32)])
@pytest.mark.parametrize("K", [32, 112])
@pytest.mark.parametrize("M,N", [(70, 200), (128, 136), (40, 72), (20, 64)])
@pytest.mark.parametrize("variant", CLUSTER_VARIANTS, ids=lambda v: "-".join(
    f"{k}={int(x)}" for k, x in v.items()))
def test_clusters_in_the_interpreter(launches, monkeypatch, kind, out_dtype, bias_dtype, K, M, N,
                                     variant):
    # CLUSTER_M=2: 2-CTA clusters on M-neighbour tiles of 32x64, each CTA loading one row half
    # of the B^T tile into both CTAs' stage; four programs, two clusters. 70 x 200: 3 x 4 tiles,
    # 2 x 4 cluster tiles, 4 a cluster, the second cluster-row's rank-1 tile past M; 128 x 136:
    # 4 x 3 tiles, 3 a cluster, ragged N; 40 x 72: one cluster tile a cluster (DEFER_STORE's
    # last-tile path only); 20 x 64: one tile-row, every rank-1 tile past M. A CTA with no rows
    # of C must still multicast its half and reach the cluster barrier: the interpreter reports
    # a deadlock or a race otherwise. K = 32: one stage a tile, 112: 3.5. Exact values, so the
    # result is torch's rounding of the exact product, bit for bit.
    out, ref = run_in_clusters(monkeypatch, variant, M, N, K, kind, out_dtype, bias_dtype,
                               seed=M + K)
    ((name, meta),) = launches
    assert name == "scaled_mm_ws_kernel" and meta["CLUSTER_M"] == 2
    assert all(meta[k] == v for k, v in variant.items())
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_clusters_under_seeded_schedules(launches, monkeypatch):
    # Other interleavings of the two clusters' CTAs and tasks: the same bits, no race reported.
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", "5")
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", "6")
    out, ref = run_in_clusters(monkeypatch, dict(FAST_ACCUM=True, DEFER_STORE=True), 70, 200, 64,
                               "rowwise", torch.bfloat16, torch.bfloat16)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@ww.jit
def release_without_peer(empty_bars, stage, rank, CLUSTER: tl.constexpr):
    """gemm_ws.release planted without its remote arrive on the peer CTA's empty barrier."""
    tlx.barrier_arrive(tlx.local_view(empty_bars, stage))


@ww.jit
def ring_of_local_readers(a_dtype: tl.constexpr, b_dtype: tl.constexpr, c_dtype: tl.constexpr,
                          HALF_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          NUM_STAGES: tl.constexpr, B_KMAJOR: tl.constexpr,
                          READERS: tl.constexpr, EPI_SUBTILE: tl.constexpr):
    """gemm_ws.alloc_ring planted with empty barriers for this CTA's two consumers only."""
    return gemm_ws_kernels.alloc_ring(a_dtype, b_dtype, c_dtype, HALF_M, BLOCK_N, BLOCK_K,
                                      NUM_STAGES, B_KMAJOR, 2, EPI_SUBTILE)


@pytest.mark.parametrize("local_ring", [False, True])
def test_clusters_without_the_peer_release_are_reported(interpreter, monkeypatch, local_ring):
    # Without the consumers' arrive on the peer's empty barrier, its producer waits for 2 of
    # its 4 arrivals forever: a located deadlock. With the ring's empty barriers also counting
    # this CTA's consumers only, nothing waits, but the peer's producer multicasts the next trip
    # around the ring into this CTA's stage before this CTA's consumers released it: a race on
    # the stage between the peer's two loads.
    monkeypatch.setattr(gemm_ws_kernels, "release", release_without_peer)
    if local_ring:
        monkeypatch.setattr(scaled_mm_ws_kernels, "alloc_ring", ring_of_local_readers)
    # A kernel's compiled forms are kept until a global value it was compiled with is rebound,
    # not a helper function: the planted helpers are compiled into a fresh JITFunction.
    monkeypatch.setattr(scaled_mm_ws_kernels, "scaled_mm_ws_kernel",
                        ww.jit(scaled_mm_ws_kernels.scaled_mm_ws_kernel.fn))
    with pytest.raises(ww.InterpreterError) as e:
        run_in_clusters(monkeypatch, dict(FAST_ACCUM=True, DEFER_STORE=True), 70, 200, 64,
                        "tensor", torch.bfloat16, None)
    msg = str(e.value)
    if local_ring:
        assert "async_desc_load overwrites shared memory that async_desc_load by program" in msg
        assert "gemm_ws.py" in msg.splitlines()[0]
    else:
        assert "deadlock" in msg.splitlines()[0]
        assert re.search(r"waits on barrier \d of 'empty_bars'.*2 of 4 arrivals pending", msg)


def test_tlx_kernel_on_numpy_arrays_and_single_rows():
    rng = np.random.default_rng(3)
    for M, N, K in [(1, 8, 16), (33, 8, 48), (64, 200, 256)]:
        a = rng.standard_normal((M, K)).astype(ml_dtypes.float8_e4m3fn)
        bt = rng.standard_normal((N, K)).astype(ml_dtypes.float8_e5m2)
        sa, sb = rng.random((M, 1), np.float32) + 0.5, rng.random((1, N), np.float32) + 0.5
        bias = rng.standard_normal(N).astype(np.float32)
        out = ops.scaled_mm(a, bt.T, sa, sb, out_dtype=np.float32, bias=bias, kernel="tlx")
        ref = (a.astype(np.float32) @ bt.astype(np.float32).T) * sa * sb + bias
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_tlx_kernel_refuses_what_tma_cannot_address(interpreter):
    a = torch.randn(16, 40).to(E4M3)
    bt = torch.randn(16, 40).to(E4M3)
    one = torch.tensor(1.0)
    with pytest.raises(ValueError, match=r"scaled_mm: kernel='tlx' needs K a multiple of 16"):
        ops.scaled_mm(a, bt.t(), one, one, kernel="tlx")
    a = torch.randn(16, 32).to(E4M3)
    bt = torch.randn(12, 32).to(E4M3)  # bf16 rows of C of 24 bytes
    with pytest.raises(ValueError, match=r"N \* 2 bytes a multiple of 16"):
        ops.scaled_mm(a, bt.t(), one, one, kernel="tlx")
    with pytest.raises(ValueError, match=r"'kernel' must be None, 'tl', 'tma' or 'tlx'"):
        ops.scaled_mm(a, bt.t(), one, one, kernel="ws")
    # kernel=None in the interpreter: the tl kernel, as before.
    assert ops.scaled_mm(a, bt.t(), one, one).shape == (16, 12)


# ------------------------------------------------------------------------------------------------
# Compiled for sm_90a
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4096, 4096, 1024), (512, 512, 512)])  # 128x256 / 128x128
@pytest.mark.parametrize("kind", ["tensor", "rowwise"])
@pytest.mark.parametrize("out_dtype", [ml_dtypes.bfloat16, np.float16, np.float32])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("fast", [False, True])
def test_fixed_configurations_compile_for_sm90a_without_spills(monkeypatch, ptxas, sm90_compiles,
                                                               shape, kind, out_dtype, with_bias,
                                                               fast):
    compiled = sm90_compiles
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    M, N, K = shape
    a = np.ones((M, K), ml_dtypes.float8_e4m3fn)
    bt = np.ones((N, K), ml_dtypes.float8_e5m2)
    rowwise = kind == "rowwise"
    sa = np.ones((M, 1) if rowwise else (1,), np.float32)
    sb = np.ones((1, N) if rowwise else (1,), np.float32)
    bias = np.ones(N, ml_dtypes.bfloat16) if with_bias else None
    ops.scaled_mm(a, bt.T, sa, sb, out_dtype=out_dtype, bias=bias, use_fast_accum=fast)
    chosen = _tuning.decisions["scaled_mm"].chosen
    assert chosen.kernel == "tlx" and chosen["FAST_ACCUM"] == fast
    # Promoted accumulation keeps a partial beside the accumulator: 128x128 tiles only.
    assert chosen["BLOCK_N"] == (256 if M == 4096 and fast else 128)
    assert chosen["NUM_STAGES"] == {(256, 2): 4, (256, 4): 3, (128, 2): 6, (128, 4): 5}[
        chosen["BLOCK_N"], np.dtype(out_dtype).itemsize]
    (kernel,) = compiled
    assert kernel.fn.__name__ == "scaled_mm_ws_kernel"
    assert kernel.n_spills == 0
    assert kernel.shared <= _tuning._TARGET_SHARED["sm_90a"]
    # The host's estimate covers what the compiler allocates.
    assert kernel.shared <= _scaled_mm._tlx_shared_bytes(chosen.config,
                                                         np.dtype(out_dtype).itemsize)
    ptx = kernel.asm["ptx"]
    ptx = ptx if isinstance(ptx, str) else ptx.decode()
    n = chosen["BLOCK_N"]
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k32\.f32\.e4m3\.e5m2", ptx)
    assert "setmaxnreg.dec.sync.aligned.u32 40" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx  # C leaves through TMA stores
    # No wgmma reads registers of one in flight, none is serialized, no wait is injected
    # (ptxas's wgmma performance notes C7510-C7519).
    assert not re.search(r"C751\d", ptxas(ptx, "sm_90a", verbose=True).log)
    chains = wgmma_chains(ptx)
    assert chains and all(len(c) == 4 for c in chains)  # BLOCK_K = 128: four k32 steps
    if chosen.config.get("DEFER_STORE"):
        return  # its chains and waits: test_deferred_store_compiles_for_sm90a_without_spills
    # Promoted: per consumer, the first stage's (odd partial), the even and odd partials of
    # the loop's pairs of stages and the even partial of a last pair; fast: one chain per
    # consumer.
    assert len(chains) == (2 if fast else 8)
    waits = [int(w) for w in re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);", ptx)]
    if fast:
        # One accumulator across K: every step accumulates (scale-d 1 / the carried predicate).
        assert not any(promoted_chain(ptx, c) for c in chains)
        assert sorted(waits) == [0, 0, 1, 1]
    else:
        assert all(promoted_chain(ptx, c) for c in chains)
        # Per consumer: the loop waits for the previous stage's chain with this one in
        # flight, twice a pair (wait 1), as does a last pair's first stage; only the last
        # stage of a tile drains (wait 0), after a last pair or after the loop.
        assert sorted(waits) == [0] * 4 + [1] * 6


@pytest.mark.parametrize("kind", ["tensor", "rowwise"])
@pytest.mark.parametrize("out_dtype", [ml_dtypes.bfloat16, np.float32])
@pytest.mark.parametrize("spec", ["tlx(BLOCK_N=256, SPLIT_N=True)",
                                  "tlx(BLOCK_N=128, EARLY_SCALES=True)",
                                  "tlx(BLOCK_N=256, SPLIT_N=True, EARLY_SCALES=True)",
                                  "tlx(BLOCK_N=128, STREAM=True)"])
def test_promoted_variants_compile_for_sm90a_without_spills(monkeypatch, ptxas, sm90_compiles,
                                                             kind, out_dtype, spec):
    # SPLIT_N: promoted accumulation on 128x256 tiles in column halves, one 64x128 partial,
    # two n128 chains a stage, each waited for and added into its half before the next.
    # EARLY_SCALES (added to the candidates here): a tile's scales and bias loaded before its
    # main loop, held through it. STREAM (likewise): mma_tile's PROMOTE chains and waits over
    # all of a program's tiles, the epilogue inside the loop.
    compiled = sm90_compiles
    monkeypatch.setattr(_scaled_mm, "_TLX_CONFIGS", _scaled_mm._TLX_CONFIGS + [
        dict(_scaled_mm.SCALED_MM_TLX_SMALL_CONFIG, EARLY_SCALES=True),
        dict(_scaled_mm.SCALED_MM_TLX_SPLIT_CONFIG, EARLY_SCALES=True),
        dict(_scaled_mm.SCALED_MM_TLX_SMALL_CONFIG, STREAM=True)])
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "scaled_mm=" + spec)
    M, N, K = 4096, 4096, 1024
    a = np.ones((M, K), ml_dtypes.float8_e4m3fn)
    bt = np.ones((N, K), ml_dtypes.float8_e4m3fn)
    rowwise = kind == "rowwise"
    sa = np.ones((M, 1) if rowwise else (1,), np.float32)
    sb = np.ones((1, N) if rowwise else (1,), np.float32)
    bias = np.ones(N, ml_dtypes.bfloat16)
    ops.scaled_mm(a, bt.T, sa, sb, out_dtype=out_dtype, bias=bias)
    chosen = _tuning.decisions["scaled_mm"].chosen
    split = "SPLIT_N" in spec
    assert chosen["FAST_ACCUM"] is False and chosen.config.get("SPLIT_N", False) == split
    assert chosen.config.get("EARLY_SCALES", False) == ("EARLY_SCALES" in spec)
    assert chosen.config.get("STREAM", False) == ("STREAM" in spec)
    (kernel,) = compiled
    assert kernel.n_spills == 0
    assert kernel.shared <= _scaled_mm._tlx_shared_bytes(chosen.config,
                                                         np.dtype(out_dtype).itemsize)
    ptx = kernel.asm["ptx"]
    ptx = ptx if isinstance(ptx, str) else ptx.decode()
    assert "setmaxnreg.inc.sync.aligned.u32 232" in ptx
    assert not re.search(r"C751\d", ptxas(ptx, "sm_90a", verbose=True).log)
    chains = wgmma_chains(ptx)
    assert all(len(c) == 4 for c in chains) and all(promoted_chain(ptx, c) for c in chains)
    assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", ptx)) == {
        "m64n128k32"}
    waits = sorted(re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);", ptx))
    if split:
        # Per consumer the left and the right half's chain, each into the one partial and
        # waited for before the next.
        assert len(chains) == 4 and len({tuple(c[0][1]) for c in chains}) == 2
        assert waits == ["0"] * 4
    else:
        assert len(chains) == 8 and waits == ["0"] * 4 + ["1"] * 6


def compile_fast_4096(monkeypatch, ptxas, compiled, spec, kind, out_dtype, with_bias):
    """ops.scaled_mm at 4096x4096x1024 with fast accumulation compiled for sm_90a in the
    configuration `spec` names: (chosen candidate, PTX), after checking that it spills nothing,
    fits the shared memory _tlx_shared_bytes counts, raises the consumers to 232 registers and
    that ptxas serializes no wgmma."""
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "scaled_mm=" + spec)
    M, N, K = 4096, 4096, 1024
    a = np.ones((M, K), ml_dtypes.float8_e4m3fn)
    bt = np.ones((N, K), ml_dtypes.float8_e4m3fn)
    rowwise = kind == "rowwise"
    sa = np.ones((M, 1) if rowwise else (1,), np.float32)
    sb = np.ones((1, N) if rowwise else (1,), np.float32)
    bias = np.ones(N, ml_dtypes.bfloat16) if with_bias else None
    ops.scaled_mm(a, bt.T, sa, sb, out_dtype=out_dtype, bias=bias, use_fast_accum=True)
    chosen = _tuning.decisions["scaled_mm"].chosen
    (kernel,) = compiled
    assert kernel.n_spills == 0
    assert kernel.shared <= _scaled_mm._tlx_shared_bytes(chosen.config,
                                                         np.dtype(out_dtype).itemsize)
    ptx = kernel.asm["ptx"]
    ptx = ptx if isinstance(ptx, str) else ptx.decode()
    assert "setmaxnreg.inc.sync.aligned.u32 232" in ptx
    log = ptxas(ptx, "sm_90a", verbose=True)
    assert not re.search(r"C751\d", log.log) and log.spill_bytes == 0
    return chosen, ptx


@pytest.mark.parametrize("kind", ["tensor", "rowwise"])
@pytest.mark.parametrize("out_dtype", [ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("spec", ["tlx(BLOCK_N=256, DEFER_STORE=True)",
                                  "tlx(BLOCK_N=256, RASTER_N=True, DEFER_STORE=True)",
                                  "tlx(BLOCK_N=128, DEFER_STORE=True)",
                                  "tlx(BLOCK_N=256, DEFER_STORE=True, EARLY_SCALES=True)",
                                  "tlx(BLOCK_N=256, RASTER_N=True, DEFER_STORE=True, "
                                  "EARLY_SCALES=True)",
                                  "tlx(BLOCK_N=256, DEFER_STORE=True, C_EVICT_FIRST=True)"])
def test_deferred_store_compiles_for_sm90a_without_spills(monkeypatch, ptxas, sm90_compiles,
                                                          kind, out_dtype, with_bias, spec):
    # DEFER_STORE's candidates (fast accumulation, 16-bit C): the accumulator (128 registers
    # at 128x256) and the previous tile's rounded C (64) live together within the consumers'
    # 232 without spills, and ptxas follows the wgmma chains: the first stage's before the
    # program's tiles, each tile's other stages' (one loop, entered and continued with one
    # chain in flight), and the next tile's first stage's issued before the deferred store.
    chosen, ptx = compile_fast_4096(monkeypatch, ptxas, sm90_compiles, spec, kind, out_dtype,
                                    with_bias)
    assert chosen["FAST_ACCUM"] is True and chosen["DEFER_STORE"] is True
    # C_EVICT_FIRST: every TMA store of C carries an evict-first L2 policy (loads do not).
    stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\S*", ptx)
    evicting = chosen.config.get("C_EVICT_FIRST", False)
    assert stores and all(op.endswith(".L2::cache_hint") == evicting for op in stores)
    assert ("createpolicy.fractional.L2::evict_first" in ptx) == evicting
    n = chosen["BLOCK_N"]
    assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", ptx)) == {
        f"m64n{n}k32"}
    chains = wgmma_chains(ptx)
    assert all(len(c) == 4 for c in chains)
    # Per consumer: the first tile's first stage and each next tile's (fresh: scale-d 0), and
    # the accumulating stages of the loops of the deferred tiles and of the last tile.
    assert len(chains) == 8
    fresh = [predicate_value(ptx, c[0][0]) is False for c in chains]
    assert sorted(fresh) == [False] * 4 + [True] * 4
    waits = sorted(int(w) for w in re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);", ptx))
    # Per consumer: both loops' wait(1) and their tiles' drains.
    assert waits == [0] * 4 + [1] * 4
    # The deferred tile's pairs are rounded and packed by one instruction each, and written to
    # shared memory 32 bits at a time.
    assert ("cvt.rn.bf16x2.f32" if out_dtype == ml_dtypes.bfloat16 else "cvt.rn.f16x2.f32") in ptx
    assert "st.shared.b16" not in ptx


# The kernel's 2-CTA configurations (not tuning candidates: slower on an H100, _scaled_mm.py's
# _TLX_CONFIGS comment), offered by the tests that compile them through ops.scaled_mm.
CLUSTER_CONFIGS = [dict(_scaled_mm.SCALED_MM_TLX_CONFIG, CLUSTER_M=2),
                   dict(_scaled_mm.SCALED_MM_TLX_DEFER_CONFIG, CLUSTER_M=2),
                   dict(_scaled_mm.SCALED_MM_TLX_DEFER_CONFIG, EARLY_SCALES=True, CLUSTER_M=2)]


@pytest.fixture
def cluster_candidates(monkeypatch):
    monkeypatch.setattr(_scaled_mm, "_TLX_CONFIGS", _scaled_mm._TLX_CONFIGS + CLUSTER_CONFIGS)


@pytest.mark.parametrize("kind", ["tensor", "rowwise"])
@pytest.mark.parametrize("out_dtype", [ml_dtypes.bfloat16, np.float32])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("spec", ["tlx(CLUSTER_M=2)", "tlx(CLUSTER_M=2, DEFER_STORE=True)",
                                  "tlx(CLUSTER_M=2, EARLY_SCALES=True)"])
def test_cluster_configurations_compile_for_sm90a_without_spills(monkeypatch, ptxas,
                                                                 sm90_compiles,
                                                                 cluster_candidates, kind,
                                                                 out_dtype, with_bias, spec):
    # CLUSTER_M=2's configurations (fast accumulation: 128x256 plain, deferred stores, deferred
    # with early scales; the deferred ones 16-bit C only) at 4096x4096x1024: launched in 2-CTA
    # clusters, each CTA's B^T half multicast into both CTAs (one box [128, 128] a rank), the
    # consumers' stage releases arriving on the peer's empty barrier too, the CTAs meeting at a
    # cluster barrier; within the consumers' 232 registers without spills, no wgmma serialized.
    if spec != "tlx(CLUSTER_M=2)" and out_dtype == np.float32:
        pytest.skip("DEFER_STORE is a candidate of 16-bit C only")
    chosen, ptx = compile_fast_4096(monkeypatch, ptxas, sm90_compiles, spec, kind, out_dtype,
                                    with_bias)
    assert chosen["FAST_ACCUM"] is True and chosen["CLUSTER_M"] == 2
    assert chosen.config.get("DEFER_STORE", False) == ("DEFER_STORE" in spec or
                                                       "EARLY_SCALES" in spec)
    assert ".reqnctapercluster 2, 1, 1" in ptx
    # Only B^T's halves are multicast (A's halves are this CTA's own): one load of a [128, 128]
    # box (128-byte rows) in each rank's branch (slice offsets are compile-time constants).
    multicasts = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\S*"
                            r"\.multicast::cluster", ptx)
    assert len(multicasts) == 2
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster", ptx)) == 2 + 2
    assert re.search(r"mbarrier\.arrive\S*\.shared::cluster", ptx)  # the peer's release
    assert "barrier.cluster.arrive" in ptx and "barrier.cluster.wait" in ptx
    assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", ptx)) == {
        "m64n256k32"}
    chains = wgmma_chains(ptx)
    assert all(len(c) == 4 for c in chains)
    assert len(chains) == (8 if chosen.config.get("DEFER_STORE") else 2)


def test_deferred_store_and_cluster_candidates_are_of_fast_calls_only(monkeypatch):
    from warpweave.ops import _common

    monkeypatch.setattr(_common, "_is_sm90", lambda place: True)

    class Place:
        def num_sms(self):
            return 132

    monkeypatch.setattr(_tuning, "fits", lambda place, shared: shared <= 232448)
    for fast, out_size in [(True, 2), (True, 4), (False, 2)]:
        found = _scaled_mm._candidates(Place(), 8192, 8192, 8192, "tlx", True, True, out_size,
                                       fast)
        deferred = [c for c in found if c.config.get("DEFER_STORE")]
        # The fixed configuration (128x256 at this size) defers its stores, with the tile's
        # vectors loaded early, where it can.
        assert bool(found[0].config.get("DEFER_STORE")) == (fast and out_size == 2)
        assert bool(found[0].config.get("EARLY_SCALES")) == (not fast or out_size == 2)
        assert found[0].config["BLOCK_N"] == (256 if fast else 128)
        # 128x256 plain and rastered along N, each with and without EARLY_SCALES, the plain one
        # with early scales also storing C evict-first, and 128x128.
        assert len(deferred) == (6 if (fast and out_size == 2) else 0)
        assert not any(c.config.get("CLUSTER_M") for c in found)
        # With rowwise scales the fixed deferred configuration also stores C evict-first; the
        # candidates are the same set.
        rowwise = _scaled_mm._candidates(Place(), 8192, 8192, 8192, "tlx", True, True, out_size,
                                         fast, True)
        assert bool(rowwise[0].config.get("C_EVICT_FIRST")) == (fast and out_size == 2)
        assert not found[0].config.get("C_EVICT_FIRST")
        assert sorted(map(repr, rowwise)) == sorted(map(repr, found))
    # Offered 2-CTA configurations are kept for fast accumulation only, and only where a
    # cluster's second CTA has a tile-row: the plain 128x256 one with any C, the deferred ones
    # with 16-bit C.
    monkeypatch.setattr(_scaled_mm, "_TLX_CONFIGS", _scaled_mm._TLX_CONFIGS + CLUSTER_CONFIGS)
    for fast, out_size in [(True, 2), (True, 4), (False, 2)]:
        found = _scaled_mm._candidates(Place(), 8192, 8192, 8192, "tlx", True, True, out_size,
                                       fast)
        clustered = [c for c in found if c.config.get("CLUSTER_M")]
        assert all(c["CLUSTER_M"] == 2 and c["BLOCK_N"] == 256 for c in clustered)
        assert len(clustered) == ((3 if out_size == 2 else 1) if fast else 0)
    found = _scaled_mm._candidates(Place(), 128, 8192, 8192, "tlx", True, True, 2, True)
    assert found and not any(c.config.get("CLUSTER_M") for c in found)


def wgmma_chains(ptx):
    """The wgmma instructions between each wgmma.fence and its commit: (scale-d operand,
    accumulator list, the adds after the chain's wait_group into other registers)."""
    lines = ptx.splitlines()
    chains, cur = [], None
    for i, line in enumerate(lines):
        line = line.strip()
        if line.startswith("wgmma.fence"):
            cur = []
        elif line.startswith("wgmma.mma_async") and cur is not None:
            accs = re.search(r"\{([^}]*)\}", line).group(1).replace(" ", "").split(",")
            scale_d = line.split("}")[1].split(",")[3].strip()
            cur.append((scale_d, accs, i))
        elif line.startswith("wgmma.commit_group") and cur is not None:
            chains.append(cur)
            cur = None
    return chains


def predicate_value(ptx, pred):
    """The constant `setp.ne.u32 pred, X, 0` sets: True, False or None (computed at run time)."""
    m = re.search(re.escape(pred) + r", (\d+), 0;", ptx)
    return None if m is None else m.group(1) != "0"


def promoted_chain(ptx, chain):
    """Whether a wgmma chain sums into a fresh partial (first step scale-d 0, the rest 1) that
    is added, after its wait, into other fp32 registers (the accumulator): one add.f32 per
    partial register."""
    first, rest = chain[0], chain[1:]
    if predicate_value(ptx, first[0]) is not False:
        return False
    if any(predicate_value(ptx, s) is not True for s, _, _ in rest):
        return False
    partial = set(first[1])
    adds = set()
    # Up to the next wgmma that writes these registers (or the end).
    for line in ptx.splitlines()[chain[-1][2] + 1:]:
        if line.strip().startswith("wgmma.mma_async") and set(
                re.search(r"\{([^}]*)\}", line).group(1).replace(" ", "").split(",")) == partial:
            break
        m = re.match(r"\s*add\.f32 (%f\d+), (%f\d+), (%f\d+);", line)
        if m and m.group(3) in partial and m.group(1) not in partial:
            adds.add(m.group(3))
    return adds == partial
