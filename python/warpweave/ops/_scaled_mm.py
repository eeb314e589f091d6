"""Scaled fp8 GEMM: torch._scaled_mm's semantics. The tl kernels (kernels/scaled_mm.py) on any GPU
that multiplies fp8 (sm_89+; wgmma fp8 on sm_90a) and in the interpreter; the TLX
warp-specialized persistent kernel (kernels/hopper/scaled_mm_ws.py) on sm_90 GPUs where TMA can
address the operands, or in the interpreter with kernel="tlx". scaled_mm_mx: the mxfp8 GEMM
(e8m0 scales per 32 elements of K) of kernels/blackwell/scaled_mm_mx.py, on sm_100 GPUs or in
the interpreter."""

from __future__ import annotations

import warpweave as ww

from . import _common, _tuning
from ._common import _Place, _descriptor, _dtype_name, _is_numpy, _planned, _strides
from .kernels import scaled_mm as scaled_mm_kernels
from .kernels.blackwell import scaled_mm_mx as scaled_mm_mx_kernels
from .kernels.hopper import scaled_mm_ws as scaled_mm_ws_kernels

_FP8 = ("float8_e4m3fn", "float8_e5m2")
_OUT = ("bfloat16", "float16", "float32")
_BIAS = ("bfloat16", "float16", "float32")

# Tile shapes. GPU: 128x256 output tiles of 128-deep fp8 K steps (48 KB a stage, 4 stages), two
# warp groups of wgmma splitting BLOCK_M, software-pipelined (cp.async 2 steps ahead). Problems
# with fewer 128x256 tiles than SMs take 128x128 tiles (more programs to fill the GPU).
SCALED_MM_GPU_CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_warps=8,
                            num_stages=4)
SCALED_MM_GPU_SMALL_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8,
                                  num_warps=8, num_stages=4)
_INTERPRETER_CONFIG = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4, num_warps=4)

# Where scaled_mm takes the TLX warp-specialized persistent kernel (kernels/hopper/scaled_mm_ws.py)
# as its fixed configuration instead of the tl kernel: on sm_90 GPUs, for calls whose operands
# TMA can address (tlx_ok below). Its tiles: 128x256x128 (two 64x256 consumers, four 48 KB
# stages, C stored in eight 32-column chunks), or 128x128x128 (six 32 KB stages, four chunks) for
# products with fewer 128x256 tiles than SMs. The chunks are small enough to leave room for the
# scratch the epilogue's per-row / per-column vectors take (_TLX_EPILOGUE_SCRATCH); fp32 C's are
# twice as large and cost a stage (_fitted).
SCALED_MM_TLX_ON_SM90 = True
_common.routing_switches(__name__, "SCALED_MM_TLX_ON_SM90")
SCALED_MM_TLX_CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=16, NUM_STAGES=4,
                            EPI_SUBTILE=8)
SCALED_MM_TLX_SMALL_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=16,
                                  NUM_STAGES=6, EPI_SUBTILE=4)
# Promoted accumulation (use_fast_accum=False) on 128x256 tiles: each consumer's 64x256
# accumulator in two column halves, each stage's chain split in two through one 64x128 partial
# (gemm_ws.mma_tile_split); a tuning candidate beside the fixed 128x128 one.
SCALED_MM_TLX_SPLIT_CONFIG = dict(SCALED_MM_TLX_CONFIG, SPLIT_N=True)
# Fast accumulation with bf16 / fp16 C: each tile's store deferred until the next tile's first
# wgmma chain is in flight (DEFER_STORE; the tensor cores idle for the scaling and rounding
# only, not for the shared-memory writes and TMA stores); tuning candidates.
SCALED_MM_TLX_DEFER_CONFIG = dict(SCALED_MM_TLX_CONFIG, DEFER_STORE=True)
# kernel="tlx" in the interpreter (NumPy arrays, CPU tensors): small tiles, the same task layout.
_INTERPRETER_TLX_CONFIG = dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=32, GROUP_M=2, NUM_STAGES=2,
                               EPI_SUBTILE=8)


def _out_dtype_name(op: str, out_dtype) -> str:
    """'bfloat16' / 'float16' / 'float32' from a torch dtype, a NumPy dtype or a name."""
    if out_dtype is None:
        return "bfloat16"
    if isinstance(out_dtype, str):
        name = out_dtype
    elif type(out_dtype).__module__.startswith("torch"):
        name = str(out_dtype).replace("torch.", "")
    else:
        try:
            import numpy as np

            name = np.dtype(out_dtype).name
        except TypeError:
            name = repr(out_dtype)
    if name not in _OUT:
        raise ValueError(f"{op}: 'out_dtype' must be bfloat16, float16 or float32, got {name} "
                         f"(fp8 outputs are not produced)")
    return name


def _scale_kind(op: str, name: str, scale, rows: int, along: str) -> bool:
    """Whether scale is per row (True) or per tensor (False), after checking it: fp32, one
    element, or [rows, 1] for scale_a / [1, rows] for scale_b, contiguous."""
    if _dtype_name(scale) != "float32":
        raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(scale)}; scales are float32")
    shape = tuple(scale.shape)
    numel = 1
    for d in shape:
        numel *= d
    if numel == 1 and rows != 1 or shape in ((), (1,), (1, 1)):
        return False
    want = (rows, 1) if along == "a" else (1, rows)
    if shape != want:
        what = "M, 1" if along == "a" else "1, N"
        raise ValueError(f"{op}: '{name}' has shape {shape}; expected one element (per-tensor "
                         f"scaling) or [{what}] = {list(want)} (rowwise scaling)")
    if len(shape) == 2 and rows > 1 and _strides(scale)[0 if along == "a" else 1] != 1:
        raise ValueError(f"{op}: '{name}' must be contiguous, got strides {_strides(scale)}")
    return True


def scaled_mm(a, b, scale_a, scale_b, out_dtype=None, bias=None, kernel=None,
              use_fast_accum=False):
    """(a @ b) * scale_a * scale_b (+ bias) for fp8 a [M, K] and b [K, N], as torch._scaled_mm:
    a and b float8_e4m3fn or float8_e5m2 (any pair: torch refuses e5m2 x e5m2, this op takes
    it), a row-major (K contiguous), b column-major (K contiguous: b = bt.t() for a
    contiguous bt [N, K]); products summed in fp32; scale_a and scale_b float32, each either
    one element (per-tensor scaling) or scale_a [M, 1] and scale_b [1, N] (rowwise scaling;
    one of each kind may be mixed); bias [N] (bfloat16, float16 or float32) added in fp32;
    the result rounded once to out_dtype: bfloat16 (the default: torch's default, the fp8
    input dtype, is not produced), float16 or float32. NumPy arrays (ml_dtypes fp8) run in the
    interpreter, CUDA tensors on the GPU. kernel: None (on GPUs the fastest configuration of
    the kernels for the shape, tuned once per shape: warpweave.ops._tuning; with
    WARPWEAVE_OPS_TUNING=0 the fixed one: the "tlx" kernel on sm_90 where it applies
    (SCALED_MM_TLX_ON_SM90), else the "tl" kernel, which the interpreter also runs), "tl" (A and
    B^T tiles loaded through pointers: cp.async stages on sm_90a), "tma" (the same loop over
    host TMA descriptors; K a multiple of 16), "tlx" (the TLX warp-specialized persistent
    kernel: sm_90 CUDA tensors or the interpreter; K a multiple of 16, 16-byte aligned bases
    and row pitches of a, b and the result).
    use_fast_accum: torch._scaled_mm's (default False). Hopper's fp8 wgmma sums its k32 steps
    with reduced precision; False promotes, as torch does: every 128 elements of K are summed
    into a fresh partial accumulator that is added to the fp32 result (the TLX kernel on
    128x128 tiles, the tl kernels through tl.dot's max_num_imprecise_acc), torch's default
    accuracy. True accumulates in the wgmma registers across all of K (faster, torch's
    use_fast_accum=True accuracy). The interpreter sums exactly either way."""
    op = "scaled_mm"
    out = _out_dtype_name(op, out_dtype)
    if kernel not in (None, "tl", "tma", "tlx"):
        raise ValueError(f"{op}: 'kernel' must be None, 'tl', 'tma' or 'tlx', got {kernel!r}")
    return _scaled_mm(a, b, scale_a, scale_b, bias, out, kernel, bool(use_fast_accum))


def _fp8_operands(op, a, b):
    """(M, N, K) of fp8 operands a [M, K] and b [K, N], each float8_e4m3fn or float8_e5m2."""
    for name, t in (("a", a), ("b", b)):
        if _dtype_name(t) not in _FP8:
            raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(t)}; expected "
                             f"float8_e4m3fn or float8_e5m2")
        if t.ndim != 2:
            raise ValueError(f"{op}: '{name}' must be 2-D, got shape {tuple(t.shape)}")
    M, K = a.shape
    if b.shape[0] != K:
        raise ValueError(f"{op}: 'b' has shape {tuple(b.shape)} but 'a' has {tuple(a.shape)}; "
                         f"b's first dimension must equal a's second ({K})")
    return M, b.shape[1], K


@_planned
def _scaled_mm(a, b, scale_a, scale_b, bias, out, kernel, fast):
    op = "scaled_mm"
    place = _Place(op, {"a": a, "b": b, "scale_a": scale_a, "scale_b": scale_b, "bias": bias})
    M, N, K = _fp8_operands(op, a, b)
    sa, sb = _strides(a), _strides(b)
    empty = M == 0 or N == 0 or K == 0
    if not empty and not (sa[1] == 1 and (M == 1 or sa[0] >= K)):
        raise ValueError(f"{op}: 'a' must be row-major (K contiguous), got strides {sa}; pass "
                         f"a contiguous [M, K] array")
    if not empty and not (sb[0] == 1 and (N == 1 or sb[1] >= K)):
        raise ValueError(f"{op}: 'b' must be column-major (K contiguous), got strides {sb}; "
                         f"pass b as bt.t() (or bt.T) of a contiguous [N, K] array")
    rowwise_a = _scale_kind(op, "scale_a", scale_a, M, "a")
    rowwise_b = _scale_kind(op, "scale_b", scale_b, N, "b")
    if bias is not None:
        if _dtype_name(bias) not in _BIAS:
            raise ValueError(f"{op}: 'bias' has dtype {_dtype_name(bias)}; expected bfloat16, "
                             f"float16 or float32")
        if tuple(bias.shape) != (N,):
            raise ValueError(f"{op}: 'bias' must have shape ({N},) (b's second dimension), "
                             f"got {tuple(bias.shape)}")
        if N > 1 and _strides(bias)[0] != 1:
            raise ValueError(f"{op}: 'bias' must be contiguous, got strides {_strides(bias)}")
    c = place.empty((M, N), out)
    if M == 0 or N == 0:
        return c
    if kernel == "tma" and K % 16:
        raise ValueError(f"{op}: kernel='tma' needs K a multiple of 16 (16-byte rows), got "
                         f"K={K}")
    tma_ok = K % 16 == 0 and all(
        _common._address(t) % 16 == 0 and (rows == 1 or stride % 16 == 0)
        for t, rows, stride in ((a, M, sa[0]), (b, N, sb[1])))
    out_size = _OUT_BYTES[out]
    tlx_ok = tma_ok and (N * out_size) % 16 == 0
    if kernel == "tlx" and not tlx_ok:
        raise ValueError(f"{op}: kernel='tlx' needs K a multiple of 16, N * {out_size} bytes a "
                         f"multiple of 16 and 16-byte aligned bases and row pitches of 'a' and "
                         f"'b' (TMA), got M={M}, N={N}, K={K}")
    sc = _strides(c)
    # FAST_ACCUM comes with each candidate's configuration.
    flags = dict(ROWWISE_A=rowwise_a, ROWWISE_B=rowwise_b, HAS_BIAS=bias is not None)
    scale_a, scale_b = scale_a.reshape(-1), scale_b.reshape(-1)

    def launch(candidate, go):
        config = candidate.config
        grid = (ww.cdiv(M, config["BLOCK_M"]) * ww.cdiv(N, config["BLOCK_N"]),)
        if candidate.kernel == "tlx":
            _launch_tlx(place, go, a, b.T if _is_numpy(b) else b.t(), c, scale_a, scale_b,
                        bias, flags, config)
        elif candidate.kernel == "tma":
            block_m, block_n, block_k = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
            bt = b.T if _is_numpy(b) else b.t()
            go(scaled_mm_kernels.scaled_mm_tma_kernel, grid,
               _descriptor(a, [block_m, block_k]), _descriptor(bt, [block_n, block_k]), c,
               scale_a, scale_b, bias, M, N, K, sc[0], sc[1], **flags, **config)
        else:
            go(scaled_mm_kernels.scaled_mm_kernel, grid,
               a, b, c, scale_a, scale_b, bias, M, N, K, sa[0], sa[1], sb[0], sb[1], sc[0],
               sc[1], **flags, **config)

    if not place.on_gpu:
        config = _INTERPRETER_TLX_CONFIG if kernel == "tlx" else _INTERPRETER_CONFIG
        launch(_tuning.Candidate(kernel or "tl", **config, FAST_ACCUM=fast), place.launch)
        return c
    rowwise = rowwise_a or rowwise_b
    candidates = _candidates(place, M, N, K, kernel, tma_ok, tlx_ok, out_size, fast, rowwise)
    chosen = _tuning.choose(
        place, op, (_dtype_name(a), _dtype_name(b), out, M, N, K, fast, rowwise), candidates,
        candidates[0],
        launch, [_KERNELS[name] for name in dict.fromkeys(c.kernel for c in candidates)])
    launch(chosen, place.launch)
    return c


# ------------------------------------------------------------------------------------------------
# Candidates (warpweave.ops._tuning): the fixed configuration first
# ------------------------------------------------------------------------------------------------

# Beside the two fixed tile shapes: 256x128 tiles (the same 48 KB stages, A's side doubled),
# 64-deep K steps in 6 stages (tiles of short-K products start sooner), and 128x128 tiles in 6
# stages. Each for both kernels (pointer loads and TMA descriptors).
_CONFIGS = [
    SCALED_MM_GPU_CONFIG,
    SCALED_MM_GPU_SMALL_CONFIG,
    dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=4),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=6),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=6),
]

# The TLX kernel: its two fixed tile shapes, each also with 8 tile-rows per group and with
# tile-columns grouped instead (RASTER_N) (128x128 for promoted accumulation); for promoted
# accumulation only, 128x256 split into column halves (SPLIT_N), also with RASTER_N; for fast
# accumulation with 16-bit C only, both tile shapes with deferred stores (DEFER_STORE), 128x256
# also with RASTER_N, and the 128x256 ones with their vectors loaded early (EARLY_SCALES), the
# first of those also with C stored evict-first in L2 (C_EVICT_FIRST: the fixed configuration
# with rowwise scales, see _candidates).
# Not candidates: the kernel's 2-CTA clusters on M-neighbour tiles sharing the B^T tile through
# multicast (CLUSTER_M=2: 32 KB a stage from L2 per CTA instead of 48 KB, as torch's CUTLASS
# rowwise kernel shares B). Correct on an H100 (bit-equal to the fixed configuration) but slower
# there in session 31, beside torch._scaled_mm(use_fast_accum=True) in one run: 16384x8192x1024
# 0.70-0.75x rowwise / 0.82-0.84x tensorwise, 8192^3 0.60-0.63x / 0.69-0.71x, where the
# unclustered kernel ran 0.94-1.00x / 1.07-1.09x and 0.90-0.97x / 0.98-1.07x. Those clusters
# paid a MEMBAR.ALL.GPU at every stage release and an L1 invalidation at every producer wait
# (cluster-scoped barriers, removed in session 34): not yet measured without them.
_TLX_CONFIGS = [
    SCALED_MM_TLX_CONFIG,
    SCALED_MM_TLX_SMALL_CONFIG,
    dict(SCALED_MM_TLX_CONFIG, GROUP_M=8),
    dict(SCALED_MM_TLX_CONFIG, RASTER_N=True),
    dict(SCALED_MM_TLX_SMALL_CONFIG, GROUP_M=8),
    dict(SCALED_MM_TLX_SMALL_CONFIG, RASTER_N=True),
    SCALED_MM_TLX_SPLIT_CONFIG,
    dict(SCALED_MM_TLX_SPLIT_CONFIG, RASTER_N=True),
    SCALED_MM_TLX_DEFER_CONFIG,
    dict(SCALED_MM_TLX_DEFER_CONFIG, RASTER_N=True),
    dict(SCALED_MM_TLX_SMALL_CONFIG, DEFER_STORE=True),
    dict(SCALED_MM_TLX_DEFER_CONFIG, EARLY_SCALES=True),
    dict(SCALED_MM_TLX_DEFER_CONFIG, RASTER_N=True, EARLY_SCALES=True),
    dict(SCALED_MM_TLX_DEFER_CONFIG, EARLY_SCALES=True, C_EVICT_FIRST=True),
]

_KERNELS = {"tl": scaled_mm_kernels.scaled_mm_kernel,
            "tma": scaled_mm_kernels.scaled_mm_tma_kernel,
            "tlx": scaled_mm_ws_kernels.scaled_mm_ws_kernel}

_OUT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

# The largest output tile (BLOCK_M * BLOCK_N) of promoted accumulation (use_fast_accum=False):
# 128x128, each TLX consumer's 64x128 accumulator and two partials 3 * 64 registers (a 64x256
# accumulator and partial would take 256 of the 232 and spill); the tl kernels' pipelined
# promoted loop likewise (the accumulator and one partial). The TLX kernel's SPLIT_N
# configurations take 128x256 (2 * 64 + 64).
_PROMOTED_TILES = 128 * 128


# Shared memory the TLX kernel needs beyond its buffers: barriers, and the scratch through which
# the compiler moves the loaded per-row / per-column scales and the bias into the accumulator's
# layout (3 KB at 128x256 for sm_90a).
_TLX_EPILOGUE_SCRATCH = 4096


def _tlx_shared_bytes(cfg, out_size) -> int:
    """The TLX kernel's shared memory: its fp8 stages of A and B^T tiles, C's chunk buffers and
    _TLX_EPILOGUE_SCRATCH."""
    bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
    sub = cfg["EPI_SUBTILE"]
    c_bufs = 2 * (bm // 2) * bn if sub == 1 else 4 * (bm // 2) * (bn // sub)
    return (cfg["NUM_STAGES"] * (bm + bn) * cfg["BLOCK_K"] + c_bufs * out_size
            + _TLX_EPILOGUE_SCRATCH)


def _fitted(place, cfg, out_size) -> dict:
    """A TLX configuration with its stages cut to what the GPU's shared memory holds (fp32 C),
    at least 2."""
    cfg = dict(cfg)
    while cfg["NUM_STAGES"] > 2 and not _tuning.fits(place, _tlx_shared_bytes(cfg, out_size)):
        cfg["NUM_STAGES"] -= 1
    return cfg


def _launch_tlx(place, go, a, bt, c, scale_a, scale_b, bias, flags, config):
    """Launches the TLX kernel (kernels/hopper/scaled_mm_ws.py) on TMA-addressable a [M, K],
    bt [N, K] (B^T, K contiguous) and c: one persistent program per SM, or per tile where there
    are fewer; with CLUSTER_M=2 in 2-CTA clusters (whole clusters, each CTA loading one row half
    of the B^T tile)."""
    (M, K), N = a.shape, bt.shape[0]
    block_m, block_n, block_k = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    cluster = config.get("CLUSTER_M", 1)
    a_desc = _descriptor(a, [block_m // 2, block_k])
    bt_desc = _descriptor(bt, [block_n // cluster, block_k])
    c_desc = _descriptor(c, [block_m // 2, block_n // config["EPI_SUBTILE"]])
    # NUM_SMS counts the CTAs of the clusters that fit on the GPU.
    sms = place.num_sms() // cluster * cluster
    work = ww.cdiv(ww.cdiv(M, block_m), cluster) * ww.cdiv(N, block_n)
    extra = {"ctas_per_cga": (cluster, 1, 1)} if cluster > 1 else {}
    # DEFER_STORE packs C's 16-bit pairs with PTX on GPUs (the interpreter runs no PTX).
    ptx = dict(PACK_PTX=True) if config.get("DEFER_STORE") and place.on_gpu else {}
    go(scaled_mm_ws_kernels.scaled_mm_ws_kernel, (min(sms // cluster, work) * cluster,), a_desc,
       bt_desc, c_desc, scale_a, scale_b, bias, M, N, K, **config, **flags, **ptx, NUM_SMS=sms,
       num_warps=4, **extra)


def _candidates(place, M, N, K, kernel, tma_ok, tlx_ok, out_size, fast=False,
                rowwise=False) -> list:
    """The configurations scaled_mm may launch for an [M, K] x [K, N] product on the call's GPU:
    first the fixed one, then each configuration with the kernels `kernel` allows that fits the
    GPU's shared memory (fp8 stages of A and B tiles; the TLX kernel's C buffers too), without
    256-wide or 256-row tiles where N or M is at most 128. The fixed one: 128x256 tiles, or
    128x128 where the product has fewer 128x256 tiles than the GPU has SMs; of the TLX kernel
    where kernel="tlx" or, with kernel=None, on sm_90 where `tlx_ok` (TMA-addressable a, b and
    C: K a multiple of 16, 16-byte aligned bases and row pitches), else of the pointer-load
    kernel unless kernel="tma". kernel=None tries the TMA kernels where `tma_ok`.
    Promoted accumulation (fast False, use_fast_accum=False) keeps a partial accumulator beside
    the fp32 one: only 128x128 tiles fit without spills (_PROMOTED_TILES), so the fixed
    configurations are the 128x128 ones; 128x256 tiles split into column halves (SPLIT_N) are
    candidates of promoted accumulation only, deferred stores (DEFER_STORE) of fast
    accumulation with bf16 / fp16 C only, 2-CTA clusters (CLUSTER_M=2, none in _TLX_CONFIGS)
    of fast accumulation with more than one tile-row only. Every candidate carries FAST_ACCUM=fast: a call never
    launches a configuration of the other accumulation."""
    big = fast and ww.cdiv(M, 128) * ww.cdiv(N, 256) >= place.num_sms()
    tlx = kernel == "tlx" or (kernel is None and tlx_ok and SCALED_MM_TLX_ON_SM90
                              and _common._is_sm90(place))
    if tlx:
        fixed = SCALED_MM_TLX_CONFIG if big else SCALED_MM_TLX_SMALL_CONFIG
        # Promoted: a tile's row / column scales and bias are loaded before its main loop
        # (EARLY_SCALES). H200, against torch._scaled_mm, rowwise: 0.95x -> 0.99x at 8192^3,
        # 0.91x -> 0.99x at 16384x8192x1024; tensorwise within noise (0.95-0.96x either way).
        early = {} if fast else {"EARLY_SCALES": True}
        # Fast, 16-bit C, 128x256: stores deferred (DEFER_STORE), bit-identical to the plain
        # epilogue. H200, same run, vs torch._scaled_mm(use_fast_accum=True), plain -> deferred:
        # 16384x8192x1024 tensorwise 0.92x -> 1.01x, rowwise 0.82x -> 0.92x; 4096^3 and 8192^3
        # 0.97-1.03x -> 0.99-1.03x. With the tile's vectors loaded before its chains
        # (EARLY_SCALES; session 31, H100, two runs, deferred -> deferred + early): rowwise
        # 16384x8192x1024 0.93x -> 0.99x, 4096^3 1.06x -> 1.10x, 8192^3 0.96x -> 0.97x in one
        # run and 0.97x -> 0.90x in the other (where every candidate ran slower), tensorwise
        # unchanged (its scales are one value each).
        if fast and big and out_size == 2:
            early = {"DEFER_STORE": True, "EARLY_SCALES": True}
            # Rowwise scales: C stored evict-first in L2 as well (C_EVICT_FIRST). Session 32,
            # H100, against torch._scaled_mm(use_fast_accum=True), do_bench after its L2 flush
            # (warm L2 in brackets): 16384x8192x1024 0.945x -> 0.979x (0.935x -> 0.940x),
            # 8192^3 0.888x -> 0.951x (0.961x -> 0.964x); tensorwise 1.002x -> 0.992x and
            # 1.023x -> 1.001x (warm +0.5 %), so it stays without.
            if rowwise:
                early["C_EVICT_FIRST"] = True
        default = _tuning.Candidate("tlx", **_fitted(place, fixed, out_size), FAST_ACCUM=fast,
                                    **early)
    else:
        fixed = SCALED_MM_GPU_CONFIG if big else SCALED_MM_GPU_SMALL_CONFIG
        default = _tuning.Candidate(kernel or "tl", **fixed, FAST_ACCUM=fast)
    if kernel:
        kernels = [kernel]
    else:
        kernels = (["tlx"] if tlx else []) + ["tl"] + (["tma"] if tma_ok else [])
    out = [default]
    for name in kernels:
        for cfg in _TLX_CONFIGS if name == "tlx" else _CONFIGS:
            if name == "tlx":
                cfg = _fitted(place, cfg, out_size)
                shared = _tlx_shared_bytes(cfg, out_size)
            else:
                shared = cfg["num_stages"] * (cfg["BLOCK_M"] + cfg["BLOCK_N"]) * cfg["BLOCK_K"]
            c = _tuning.Candidate(name, **cfg, FAST_ACCUM=fast)
            if c in out or (cfg["BLOCK_N"] > 128 >= N) or (cfg["BLOCK_M"] > 128 >= M):
                continue
            if cfg.get("SPLIT_N") and fast:
                continue
            if cfg.get("DEFER_STORE") and not (fast and out_size == 2):
                continue
            # Clusters: fast accumulation, and M wide enough for a cluster's two tile-rows.
            if cfg.get("CLUSTER_M", 1) > 1 and not (fast and M > cfg["BLOCK_M"]):
                continue
            if (not fast and cfg["BLOCK_M"] * cfg["BLOCK_N"] > _PROMOTED_TILES
                    and not cfg.get("SPLIT_N")):
                continue
            if _tuning.fits(place, shared):
                out.append(c)
    return out


# ------------------------------------------------------------------------------------------------
# mxfp8 (Blackwell block-scaled MMA)
# ------------------------------------------------------------------------------------------------

# kernels/blackwell/scaled_mm_mx.py's configurations: 128x128x128 tiles (two TMEM accumulators
# of 128 columns plus the columns the MMA copies the scales into; 256-wide tiles need 524 of the
# 512), C in four 32-column chunks. One CTA: 6 stages of 33 KB (A, B^T and both scale tiles);
# CTA pairs hold half of B^T's rows each (25 KB stages): 8. No Blackwell GPU has run it: checked
# by ptxas for sm_100a and in the interpreter (tests/python/test_blackwell_scaled_mm_mx.py).
SCALED_MM_MX_CONFIGS = {
    "mx": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, NUM_STAGES=6, NUM_ACC=2,
               EPI_SUBTILE=4, USE_CLC=True, PAIR=False),
    "mx_2cta": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, NUM_STAGES=8, NUM_ACC=2,
                    EPI_SUBTILE=4, USE_CLC=True, PAIR=True),
}

_E8M0 = ("uint8", "float8_e8m0fnu")


def _mx_stages(cfg, out_size) -> int:
    """NUM_STAGES cut to what shared memory holds beside C's two chunk buffers (fp32 C is twice
    as large as 16-bit C): at least 2."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    stage = (bm + bn // (2 if cfg["PAIR"] else 1)) * bk + (bm + bn) // 128 * (bk // 128) * 512
    rest = 2 * bm * (bn // cfg["EPI_SUBTILE"]) * out_size + 2048  # barriers, CLC responses
    stages = cfg["NUM_STAGES"]
    while stages > 2 and stages * stage + rest > 232448:
        stages -= 1
    return stages


def _mx_blocked(op: str, name: str, scales, rows: int, K: int):
    """[rows, K / 32] e8m0 scales as the kernel reads them: the cuBLAS block-scaled layout
    [1, rows / 128, K / 128, 2, 256] over rows rounded up to 128 and K / 32 up to 4 (padded with
    127, 2^0), as torch's to_blocked / cuBLAS's 32_4_4 swizzle lays them out."""
    if _dtype_name(scales) not in _E8M0:
        raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(scales)}; e8m0 scales are uint8 "
                         f"(or float8_e8m0fnu): one exponent byte, 2^(s - 127)")
    want = (rows, K // 32)
    if tuple(scales.shape) != want:
        raise ValueError(f"{op}: '{name}' has shape {tuple(scales.shape)}; expected {list(want)}"
                         f" (one scale per 32 elements of K for each row)")
    rp, cp = ww.cdiv(rows, 128) * 128, ww.cdiv(K // 32, 4) * 4
    if _is_numpy(scales):
        import numpy as np

        padded = np.full((rp, cp), 127, np.uint8)
        padded[:rows, :K // 32] = scales.view(np.uint8)
        out = padded.reshape(rp // 128, 4, 32, cp // 4, 4).transpose(0, 3, 2, 1, 4)
        return np.ascontiguousarray(out).reshape(1, rp // 128, cp // 4, 2, 256)
    import torch

    padded = torch.full((rp, cp), 127, dtype=torch.uint8, device=scales.device)
    padded[:rows, :K // 32] = scales.view(torch.uint8)
    out = padded.reshape(rp // 128, 4, 32, cp // 4, 4).permute(0, 3, 2, 1, 4)
    return out.contiguous().reshape(1, rp // 128, cp // 4, 2, 256)


def scaled_mm_mx(a, b, a_scales, b_scales, out_dtype=None, variant="mx", config=None):
    """The mxfp8 product (a * a_scales) @ (b * b_scales): a [M, K] and b [K, N] float8_e4m3fn or
    float8_e5m2 (each its own), a row-major (K contiguous) and b column-major (K contiguous:
    b = bt.t() for a contiguous bt [N, K]), as scaled_mm takes them; the scales e8m0 exponents
    (uint8, or float8_e8m0fnu: 2^(s - 127), 255 NaN), one per 32 consecutive elements of K:
    a_scales [M, K / 32] (a_scales[m, j] scales a[m, 32 j : 32 j + 32]) and b_scales [N, K / 32]
    (b_scales[n, j] scales b[32 j : 32 j + 32, n]), plain row-major arrays (they are rearranged
    into the hardware's block-scaled layout here, a copy the size of the scales); K a multiple
    of 32. Products summed in fp32, the result rounded once to out_dtype: bfloat16 (the default),
    float16 or float32. Runs kernels/blackwell/scaled_mm_mx.py: CUDA tensors on a compute
    capability 10.x GPU compiling for sm_100a, or NumPy arrays (ml_dtypes fp8) in the
    interpreter. variant "mx" (one CTA per 128x128 tile) or "mx_2cta" (CTA pairs sharing each
    MMA); `config` overrides entries of SCALED_MM_MX_CONFIGS[variant] (e.g. USE_CLC=False)."""
    op = "scaled_mm_mx"
    out = _out_dtype_name(op, out_dtype)
    if variant not in SCALED_MM_MX_CONFIGS:
        raise ValueError(f"{op}: 'variant' must be one of {sorted(SCALED_MM_MX_CONFIGS)}, got "
                         f"{variant!r}")
    unknown = set(config or {}) - set(SCALED_MM_MX_CONFIGS[variant])
    if unknown:
        raise ValueError(f"{op}: unknown config entries {sorted(unknown)}; it takes "
                         f"{sorted(SCALED_MM_MX_CONFIGS[variant])}")
    place = _Place(op, {"a": a, "b": b, "a_scales": a_scales, "b_scales": b_scales})
    M, N, K = _fp8_operands(op, a, b)
    if K % 32:
        raise ValueError(f"{op}: K must be a multiple of 32 (one e8m0 scale per 32 elements), "
                         f"got K={K}")
    sa, sb = _strides(a), _strides(b)
    if M and K and not (sa[1] == 1 and (M == 1 or sa[0] >= K)):
        raise ValueError(f"{op}: 'a' must be row-major (K contiguous), got strides {sa}")
    if N and K and not (sb[0] == 1 and (N == 1 or sb[1] >= K)):
        raise ValueError(f"{op}: 'b' must be column-major (K contiguous), got strides {sb}; "
                         f"pass b as bt.t() (or bt.T) of a contiguous [N, K] array")
    if place.on_gpu and not _common._is_sm100(place):
        raise ValueError(f"{op}: needs a compute capability 10.x GPU compiling for sm_100a "
                         f"(tcgen05 block-scaled MMA), or NumPy arrays (the interpreter)")
    a_blocked = _mx_blocked(op, "a_scales", a_scales, M, K)
    b_blocked = _mx_blocked(op, "b_scales", b_scales, N, K)
    c = place.empty((M, N), out)
    if M == 0 or N == 0:
        return c
    if K == 0:
        c[...] = 0
        return c
    out_size = _OUT_BYTES[out]
    bt = b.T if _is_numpy(b) else b.t()
    for name, t, rows, pitch in (("a", a, M, sa[0]), ("b", bt, N, sb[1])):
        if _common._address(t) % 16 or (rows > 1 and pitch % 16):
            raise ValueError(f"{op}: '{name}' needs a 16-byte aligned base and row pitch (TMA), "
                             f"got pitch {pitch}")
    if (N * out_size) % 16:
        raise ValueError(f"{op}: N * {out_size} bytes (the {out} result's rows) must be a "
                         f"multiple of 16 (TMA), got N={N}")
    cfg = dict(SCALED_MM_MX_CONFIGS[variant], **(config or {}))
    cfg["NUM_STAGES"] = _mx_stages(cfg, out_size)
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    extra = {"ctas_per_cga": (2, 1, 1)} if cfg["PAIR"] else {}
    from ._matmul import _bw_grid

    _tuning.direct(scaled_mm_mx_kernels.scaled_mm_mx_kernel, (_bw_grid(place, M, N, cfg),),
                   _descriptor(a, [bm, bk]),
                   _descriptor(bt, [bn // (2 if cfg["PAIR"] else 1), bk]),
                   _descriptor(a_blocked, [1, bm // 128, bk // 128, 2, 256]),
                   _descriptor(b_blocked, [1, bn // 128, bk // 128, 2, 256]),
                   _descriptor(c, [bm, bn // cfg["EPI_SUBTILE"]]), M, N, K, **cfg, num_warps=4,
                   **extra)
    return c
