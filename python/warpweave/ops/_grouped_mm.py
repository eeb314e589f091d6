"""Grouped GEMM for mixture-of-experts layers (kernels/grouped_mm.py): torch._grouped_mm's
semantics for 2-D x 3-D (ragged M, one launch over all groups) and 2-D x 2-D (ragged K, the
weight gradient), on any GPU and in the interpreter; on sm_90 GPUs both forms also with the TLX
warp-specialized persistent kernels (kernels/hopper/grouped_mm_ws.py), where TMA can address
their operands."""

from __future__ import annotations

import warpweave as ww

from . import _common, _tuning
from ._common import _HALF_FLOATS, _Place, _dtype_name, _itemsize, _planned, _strides
from ._matmul import _shared_bytes
from .kernels import grouped_mm as grouped_mm_kernels
from .kernels.hopper import grouped_mm_ws as grouped_mm_ws_kernels

_DTYPES = _HALF_FLOATS + ("float32",)

# GPU: kernels/matmul.py's tiles (128x256x32, 5 stages, two warp groups of wgmma on sm_90a).
GROUPED_MM_GPU_CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, num_warps=8, num_stages=5)
GROUPED_MM_RAGGED_K_GPU_CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, num_warps=8,
                                      num_stages=5)
_INTERPRETER_CONFIG = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, num_warps=4)

# Where either form may take its TLX warp-specialized kernel (GROUPED_MM_TLX_CONFIGS, the first
# the fixed choice) instead of the tl kernel: on sm_90 GPUs, for fp16 / bf16 operands TMA can
# address (ragged M, _tlx_b_layout: a's rows contiguous, b contiguous with K a multiple of
# BLOCK_K (64) or the transpose of a contiguous [G, N, K], 16-byte aligned bases, N and K
# multiples of 8; ragged K, _tlx_ragged_k_a_layout: a's columns or rows contiguous, b's rows
# contiguous, 16-byte pitches and bases, N a multiple of 8).
GROUPED_MM_TLX_ON_SM90 = True
_common.routing_switches(__name__, "GROUPED_MM_TLX_ON_SM90")

# gemm_ws.py's tiles (ops.matmul's TLX_GEMM_CONFIGS["ws"]: 128x256x64, 4 stages, C in four
# 64-column chunks); 8 tile-rows per raster group; tile-columns grouped (RASTER_N); 128x128 tiles
# in 5 stages, C in two chunks (N = 1408, DeepSeek's, is 11 of them but 5.5 256-wide tiles).
GROUPED_MM_TLX_CONFIGS = [
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16, NUM_STAGES=4, EPI_SUBTILE=4),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=4, EPI_SUBTILE=4),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16, NUM_STAGES=4, EPI_SUBTILE=4,
         RASTER_N=True),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=16, NUM_STAGES=5, EPI_SUBTILE=2),
]
# The interpreter's (kernel="tlx" on NumPy arrays): small tiles, two stages, four programs.
_TLX_INTERPRETER_CONFIG = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, NUM_STAGES=2,
                               EPI_SUBTILE=2)


def grouped_mm(a, b, offs, kernel=None):
    """torch._grouped_mm(a, b, offs) for
      - a [M_total, K] (2-D) and b [G, K, N] (3-D): out [M_total, N], the rows of group g
        (offs[g-1] <= row < offs[g], offs[-1] read as 0) multiplied by b[g]; rows from
        offs[G-1] to M_total are zeros (torch leaves them uninitialized);
      - a [M, K_total] and b [K_total, N] (both 2-D): out [G, M, N], out[g] = a[:, cols of g]
        @ b[rows of g] over the same ragged split of K; an empty group gives zeros.
    offs: int32 [G], the cumulative ends of the groups (non-decreasing, at most the ragged
    dimension; empty groups allowed). a and b: one dtype, float16, bfloat16 or float32 (torch
    takes bfloat16 only), any strides; sums in fp32, the result in a's dtype. One launch over
    all groups; offs is read on the device only (no host synchronization). NumPy arrays run in
    the interpreter, CUDA tensors on the GPU, with tiles tuned once per power-of-two bucket of
    the ragged dimension (warpweave.ops._tuning). kernel: None picks (on sm_90 GPUs the TLX
    warp-specialized kernel's and the tl kernel's configurations where the TLX kernel applies
    (GROUPED_MM_TLX_ON_SM90: fp16 / bf16, 16-byte aligned, N a multiple of 8; ragged M: K a
    multiple of 8, a's rows contiguous, b contiguous with K a multiple of 64 or the transpose of
    a contiguous [G, N, K]; ragged K: a's columns contiguous (x.t() of a contiguous x, the
    weight gradient's) or its rows, b's rows contiguous, 16-byte row pitches), tuned;
    WARPWEAVE_OPS_TUNING=0 takes the TLX kernel where it applies; the tl kernel elsewhere and in
    the interpreter), "tl" the tl kernel, "tlx" the TLX kernel (sm_90 CUDA tensors, or NumPy
    arrays in the interpreter; ragged M there with K a multiple of 16)."""
    if kernel not in (None, "tl", "tlx"):
        raise ValueError(f"grouped_mm: 'kernel' must be None, 'tl' or 'tlx', got {kernel!r}")
    return _grouped_mm(a, b, offs, kernel)


@_planned
def _grouped_mm(a, b, offs, kernel):
    op = "grouped_mm"
    place = _Place(op, {"a": a, "b": b, "offs": offs})
    dt = _dtype_name(a)
    if dt not in _DTYPES:
        raise ValueError(f"{op}: 'a' has dtype {dt}; expected float16, bfloat16 or float32")
    if _dtype_name(b) != dt:
        raise ValueError(f"{op}: 'b' has dtype {_dtype_name(b)} but 'a' has {dt}; both must "
                         f"have one dtype")
    if _dtype_name(offs) != "int32":
        raise ValueError(f"{op}: 'offs' has dtype {_dtype_name(offs)}; expected int32 "
                         f"(cumulative group ends)")
    if offs.ndim != 1:
        raise ValueError(f"{op}: 'offs' must be 1-D [G] (cumulative group ends), got shape "
                         f"{tuple(offs.shape)}")
    if a.ndim != 2 or b.ndim not in (2, 3):
        raise ValueError(f"{op}: takes a 2-D 'a' with a 3-D 'b' [G, K, N] (ragged rows of a) "
                         f"or a 2-D 'b' [K_total, N] (ragged K), got shapes {tuple(a.shape)} "
                         f"and {tuple(b.shape)}")
    G = offs.shape[0]
    if G == 0:
        raise ValueError(f"{op}: 'offs' is empty; it needs one entry per group (G >= 1)")
    if len(_strides(offs)) and _strides(offs)[0] != 1 and G > 1:
        raise ValueError(f"{op}: 'offs' must be contiguous, got strides {_strides(offs)}")
    if b.ndim == 3:
        return _ragged_m(op, place, a, b, offs, dt, G, kernel)
    return _ragged_k(op, place, a, b, offs, dt, G, kernel)


def _ragged_m(op, place, a, b, offs, dt, G, kernel):
    M_total, K = a.shape
    if b.shape[0] != G:
        raise ValueError(f"{op}: 'b' has {b.shape[0]} groups (shape {tuple(b.shape)}) but "
                         f"'offs' has {G} entries")
    if b.shape[1] != K:
        raise ValueError(f"{op}: 'b' has shape {tuple(b.shape)} but 'a' has "
                         f"{tuple(a.shape)}; b's K dimension (1) must equal a's second ({K})")
    N = b.shape[2]
    c = place.empty((M_total, N), dt)
    if M_total == 0 or N == 0:
        return c
    sa, sb, sc = _strides(a), _strides(b), _strides(c)
    interpreter_tlx = kernel == "tlx" and not place.on_gpu
    block_k = (_TLX_INTERPRETER_CONFIG if interpreter_tlx
               else GROUPED_MM_TLX_CONFIGS[0])["BLOCK_K"]
    b_layout = _tlx_b_layout(a, b, c, dt, N, K, block_k)
    if kernel == "tlx" and not (b_layout and (interpreter_tlx or _common._is_sm90(place))):
        raise ValueError(f"{op}: kernel='tlx' needs an sm_90 GPU (or NumPy arrays in the "
                         f"interpreter), float16 or bfloat16 operands, 'a' with contiguous rows, "
                         f"'b' contiguous (then K a multiple of {block_k}) or the transpose of "
                         f"a contiguous [G, N, K] (K a multiple of 8), N a multiple of 8, "
                         f"16-byte aligned bases; got {dt}, K={K}, N={N}, strides {sa} and "
                         f"{sb}")

    def launch(candidate, go):
        config = candidate.config
        if candidate.kernel == "tlx_ws":
            _launch_tlx(place, go, a, b, c, offs, G, b_layout == "k", config)
            return
        go(grouped_mm_kernels.grouped_mm_kernel,
           ((ww.cdiv(M_total, config["BLOCK_M"]) + G) * ww.cdiv(N, config["BLOCK_N"]),),
           a, b, c, offs, G, M_total, N, K, sa[0], sa[1], sb[0], sb[1], sb[2], sc[0], sc[1],
           BLOCK_G=ww.next_power_of_2(G + 1), PRECISION=_precision(dt), **config)

    if interpreter_tlx:
        launch(_tuning.Candidate("tlx_ws", **_TLX_INTERPRETER_CONFIG), place.launch)
        return c
    use_tlx = kernel == "tlx" or (kernel is None and GROUPED_MM_TLX_ON_SM90 and b_layout
                                  and _common._is_sm90(place))
    tlx = _tlx_candidates(place, N, _itemsize(a)) if use_tlx else []
    # Tuned per power-of-two bucket of the ragged rows (the group sizes are on the device).
    _choose_and_launch(place, "grouped_mm",
                       (dt, G, _tuning.pow2_bucket(M_total), N, K, b_layout or ""),
                       GROUPED_MM_GPU_CONFIG, _itemsize(a), launch,
                       grouped_mm_kernels.grouped_mm_kernel, tlx, tl=kernel != "tlx")
    return c


def _tlx_b_layout(a, b, c, dt, N, K, block_k):
    """How the TLX kernel reads b for the ragged-M call, or None where it cannot run it: "n" for
    a contiguous b [G, K, N] (viewed as [G * K, N]; K a multiple of block_k, so that no K step
    crosses into the next group), "k" for the transpose of a contiguous [G, N, K] (viewed as
    [G * N, K]; K a multiple of 8). Both need TMA-addressable fp16 / bf16 operands: a's rows
    contiguous with a 16-byte pitch, N a multiple of 8, 16-byte aligned bases."""
    sa, sb = _strides(a), _strides(b)
    G = b.shape[0]
    if not (dt in _HALF_FLOATS and K > 0 and K % 8 == 0 and N % 8 == 0
            and sa[1] == 1 and (a.shape[0] == 1 or (sa[0] % 8 == 0 and sa[0] >= K))
            and all(_common._address(t) % 16 == 0 for t in (a, b, c))):
        return None
    if sb[2] == 1 and sb[1] == N and (G == 1 or sb[0] == K * N) and K % block_k == 0:
        return "n"
    if sb[1] == 1 and sb[2] == K and (G == 1 or sb[0] == K * N):
        return "k"
    return None


def _launch_tlx(place, go, a, b, c, offs, G, b_kmajor, config):
    """Launches kernels/hopper/grouped_mm_ws.py with `config` through go(kernel, grid, ...):
    descriptors over a, over b as [G * K, N] (b_kmajor: b's transpose as [G * N, K]) and over c;
    a persistent grid of the device's SMs."""
    (M_total, K), N = a.shape, b.shape[2]
    cfg = dict(config)
    block_m, block_n, block_k = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    half = block_m // 2
    pitch = _strides(a)[0] if M_total > 1 else K  # (one row: any stride)
    a_desc = ww.TensorDescriptor(a, [M_total, K], [pitch, 1], [half, block_k])
    if b_kmajor:
        b_desc = ww.TensorDescriptor(b, [G * N, K], [K, 1], [block_n, block_k])
    else:
        b_desc = ww.TensorDescriptor(b, [G * K, N], [N, 1], [block_k, block_n])
    c_desc = ww.TensorDescriptor(c, [M_total, N], [N, 1], [half, block_n // cfg["EPI_SUBTILE"]])
    sms = cfg.pop("NUM_SMS", None) or place.num_sms()
    work = (ww.cdiv(M_total, block_m) + G) * ww.cdiv(N, block_n)
    go(grouped_mm_ws_kernels.grouped_mm_ws_kernel, (min(sms, work),), a_desc, b_desc, c_desc, c,
       offs, G, M_total, N, K, **cfg, NUM_SMS=sms, B_KMAJOR=b_kmajor, num_warps=4)


def _tlx_candidates(place, N, itemsize) -> list:
    """The TLX kernel's configurations for a call (the fixed one first): those that fit the
    GPU's shared memory, without 256-wide tiles where N <= 128."""
    out = []
    for i, cfg in enumerate(GROUPED_MM_TLX_CONFIGS):
        # (ops.matmul's estimate for gemm_ws.py's: the same ring and C chunk buffers)
        shared = _shared_bytes(_tuning.Candidate("tlx_ws", **cfg, SMEM_EPILOGUE=True), itemsize)
        if i == 0 or (cfg["BLOCK_N"] <= max(_tuning.pow2_bucket(N), 128)
                      and _tuning.fits(place, shared)):
            out.append(_tuning.Candidate("tlx_ws", **cfg))
    return out


def _ragged_k(op, place, a, b, offs, dt, G, kernel):
    M, K_total = a.shape
    if b.shape[0] != K_total:
        raise ValueError(f"{op}: 'b' has shape {tuple(b.shape)} but 'a' has "
                         f"{tuple(a.shape)}; b's first dimension must equal a's second "
                         f"({K_total}), the ragged K")
    N = b.shape[1]
    c = place.empty((G, M, N), dt)
    if M == 0 or N == 0:
        return c
    sa, sb, sc = _strides(a), _strides(b), _strides(c)
    interpreter_tlx = kernel == "tlx" and not place.on_gpu
    a_layout = _tlx_ragged_k_a_layout(a, b, c, dt, M, N, K_total)
    if kernel == "tlx" and not (a_layout and (interpreter_tlx or _common._is_sm90(place))):
        raise ValueError(f"{op}: kernel='tlx' needs an sm_90 GPU (or NumPy arrays in the "
                         f"interpreter), float16 or bfloat16 operands, 'a' with contiguous "
                         f"columns or contiguous rows, 'b' with contiguous rows, N a multiple of "
                         f"8, 16-byte row pitches and bases, K_total > 0; got {dt}, M={M}, "
                         f"K_total={K_total}, N={N}, strides {sa} and {sb}")

    def launch(candidate, go):
        config = candidate.config
        if candidate.kernel == "tlx_ws":
            _launch_tlx_ragged_k(place, go, a, b, c, offs, G, a_layout == "m", config)
            return
        go(grouped_mm_kernels.grouped_mm_ragged_k_kernel,
           (ww.cdiv(M, config["BLOCK_M"]) * ww.cdiv(N, config["BLOCK_N"]), G),
           a, b, c, offs, M, N, K_total, sa[0], sa[1], sb[0], sb[1], sc[0], sc[1], sc[2],
           PRECISION=_precision(dt), **config)

    if interpreter_tlx:
        launch(_tuning.Candidate("tlx_ws", **_TLX_INTERPRETER_CONFIG), place.launch)
        return c
    use_tlx = kernel == "tlx" or (kernel is None and GROUPED_MM_TLX_ON_SM90 and a_layout
                                  and _common._is_sm90(place))
    tlx = _tlx_candidates(place, N, _itemsize(a)) if use_tlx else []
    # Tuned per power-of-two bucket of the ragged K.
    _choose_and_launch(place, "grouped_mm_ragged_k",
                       (dt, G, M, N, _tuning.pow2_bucket(K_total), a_layout or ""),
                       GROUPED_MM_RAGGED_K_GPU_CONFIG, _itemsize(a), launch,
                       grouped_mm_kernels.grouped_mm_ragged_k_kernel, tlx, tl=kernel != "tlx",
                       tlx_kernel=grouped_mm_ws_kernels.grouped_mm_ragged_k_ws_kernel)
    return c


def _tlx_ragged_k_a_layout(a, b, c, dt, M, N, K_total):
    """How the TLX kernel reads a for the ragged-K call, or None where it cannot run it: "k"
    for a with contiguous rows (a [M, K_total], K along a row), "m" for a with contiguous
    columns (a = x.t() of a contiguous x [K_total, M], the weight gradient's activations; the A
    stages then hold A^T tiles). Both need TMA-addressable fp16 / bf16 operands: b's rows
    contiguous, 16-byte row pitches (N a multiple of 8: c [G, M, N] is viewed as [G * M, N]),
    16-byte aligned bases. K_total and M may be any size: TMA zero-fills past them, and a
    group's K range may start and end anywhere (the kernel zeroes what its last step reads past
    it and, in the "k" layout, where K is the inner dimension of a's TMA boxes and their starts
    must be 16-byte aligned, what its first step, started at a multiple of 8 columns, reads
    before it)."""
    sa, sb = _strides(a), _strides(b)
    if not (dt in _HALF_FLOATS and K_total > 0 and N % 8 == 0 and sb[1] == 1
            and (K_total == 1 or (sb[0] % 8 == 0 and sb[0] >= N))
            and all(_common._address(t) % 16 == 0 for t in (a, b, c))):
        return None
    if sa[1] == 1 and (M == 1 or (sa[0] % 8 == 0 and sa[0] >= K_total)):
        return "k"
    if sa[0] == 1 and (K_total == 1 or (sa[1] % 8 == 0 and sa[1] >= M)):
        return "m"
    return None


def _launch_tlx_ragged_k(place, go, a, b, c, offs, G, a_mmajor, config):
    """Launches kernels/hopper/grouped_mm_ws.py's ragged-K kernel with `config` through
    go(kernel, grid, ...): descriptors over a (a_mmajor: over its transpose [K_total, M]), over
    b [K_total, N] and over c as [G * M, N]; a persistent grid of the device's SMs."""
    (M, K_total), N = a.shape, b.shape[1]
    cfg = dict(config)
    block_m, block_n, block_k = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    half = block_m // 2
    sa, sb = _strides(a), _strides(b)
    if a_mmajor:
        pitch = sa[1] if K_total > 1 else M  # (one column: any stride)
        a_desc = ww.TensorDescriptor(a, [K_total, M], [pitch, 1], [block_k, half])
    else:
        pitch = sa[0] if M > 1 else K_total
        a_desc = ww.TensorDescriptor(a, [M, K_total], [pitch, 1], [half, block_k])
    b_desc = ww.TensorDescriptor(b, [K_total, N], [sb[0] if K_total > 1 else N, 1],
                                 [block_k, block_n])
    c_desc = ww.TensorDescriptor(c, [G * M, N], [N, 1], [half, block_n // cfg["EPI_SUBTILE"]])
    sms = cfg.pop("NUM_SMS", None) or place.num_sms()
    work = G * ww.cdiv(M, block_m) * ww.cdiv(N, block_n)
    go(grouped_mm_ws_kernels.grouped_mm_ragged_k_ws_kernel, (min(sms, work),), a_desc, b_desc,
       c_desc, c, offs, G, M, N, K_total, **cfg, NUM_SMS=sms, A_MMAJOR=a_mmajor, num_warps=4)


# Beside the fixed tiles: 128x128 tiles 64 deep in 4 stages (twice the programs), 128x256x64 in
# 3, and one warp group on 64x128 tiles (groups of a few dozen rows waste less of a tile).
_CONFIGS = [
    GROUPED_MM_GPU_CONFIG,
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3),
    dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4),
]


def _choose_and_launch(place, op, key, fixed, itemsize, launch, kernel, tlx=(), tl=True,
                       tlx_kernel=grouped_mm_ws_kernels.grouped_mm_ws_kernel):
    """Launches the interpreter's configuration, or the GPU configuration warpweave.ops._tuning
    chooses among the TLX kernel's candidates `tlx` (the first the default where there are any)
    and, where `tl`, `fixed` and those of _CONFIGS whose stages of A and B tiles fit the GPU's
    shared memory."""
    if not place.on_gpu:
        launch(_tuning.Candidate("tl", **_INTERPRETER_CONFIG), place.launch)
        return
    candidates = list(tlx)
    if tl:
        candidates += [_tuning.Candidate("tl", **fixed)] + [
            _tuning.Candidate("tl", **cfg) for cfg in _CONFIGS
            if cfg != fixed and _tuning.fits(place, cfg["num_stages"] * itemsize *
                                             cfg["BLOCK_K"] * (cfg["BLOCK_M"] + cfg["BLOCK_N"]))]
    kernels = [kernel] + ([tlx_kernel] if tlx else [])
    chosen = _tuning.choose(place, op, key, candidates, candidates[0], launch, kernels)
    launch(chosen, place.launch)


def _precision(dt):
    """fp32 operands are multiplied in full precision (torch's semantics), not tf32."""
    return "ieee" if dt == "float32" else None
