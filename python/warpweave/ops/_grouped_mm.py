"""Grouped GEMM for mixture-of-experts layers (kernels/grouped_mm.py): torch._grouped_mm's
semantics for 2-D x 3-D (ragged M, one launch over all groups) and 2-D x 2-D (ragged K, the
weight gradient), on any GPU and in the interpreter."""

from __future__ import annotations

import warpweave as ww

from . import _tuning
from ._common import _HALF_FLOATS, _Place, _dtype_name, _itemsize, _planned, _strides
from .kernels import grouped_mm as grouped_mm_kernels

_DTYPES = _HALF_FLOATS + ("float32",)

# GPU: kernels/matmul.py's tiles (128x256x32, 5 stages, two warp groups of wgmma on sm_90a).
GROUPED_MM_GPU_CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, num_warps=8, num_stages=5)
GROUPED_MM_RAGGED_K_GPU_CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, num_warps=8,
                                      num_stages=5)
_INTERPRETER_CONFIG = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, num_warps=4)


def grouped_mm(a, b, offs):
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
    the ragged dimension (warpweave.ops._tuning)."""
    return _grouped_mm(a, b, offs)


@_planned
def _grouped_mm(a, b, offs):
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
        return _ragged_m(op, place, a, b, offs, dt, G)
    return _ragged_k(op, place, a, b, offs, dt, G)


def _ragged_m(op, place, a, b, offs, dt, G):
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

    def launch(candidate, go):
        config = candidate.config
        go(grouped_mm_kernels.grouped_mm_kernel,
           ((ww.cdiv(M_total, config["BLOCK_M"]) + G) * ww.cdiv(N, config["BLOCK_N"]),),
           a, b, c, offs, G, M_total, N, K, sa[0], sa[1], sb[0], sb[1], sb[2], sc[0], sc[1],
           BLOCK_G=ww.next_power_of_2(G + 1), PRECISION=_precision(dt), **config)

    # Tuned per power-of-two bucket of the ragged rows (the group sizes are on the device).
    _choose_and_launch(place, "grouped_mm", (dt, G, _tuning.pow2_bucket(M_total), N, K),
                       GROUPED_MM_GPU_CONFIG, _itemsize(a), launch,
                       grouped_mm_kernels.grouped_mm_kernel)
    return c


def _ragged_k(op, place, a, b, offs, dt, G):
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

    def launch(candidate, go):
        config = candidate.config
        go(grouped_mm_kernels.grouped_mm_ragged_k_kernel,
           (ww.cdiv(M, config["BLOCK_M"]) * ww.cdiv(N, config["BLOCK_N"]), G),
           a, b, c, offs, M, N, K_total, sa[0], sa[1], sb[0], sb[1], sc[0], sc[1], sc[2],
           PRECISION=_precision(dt), **config)

    # Tuned per power-of-two bucket of the ragged K.
    _choose_and_launch(place, "grouped_mm_ragged_k",
                       (dt, G, M, N, _tuning.pow2_bucket(K_total)),
                       GROUPED_MM_RAGGED_K_GPU_CONFIG, _itemsize(a), launch,
                       grouped_mm_kernels.grouped_mm_ragged_k_kernel)
    return c


# Beside the fixed tiles: 128x128 tiles 64 deep in 4 stages (twice the programs), 128x256x64 in
# 3, and one warp group on 64x128 tiles (groups of a few dozen rows waste less of a tile).
_CONFIGS = [
    GROUPED_MM_GPU_CONFIG,
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3),
    dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4),
]


def _choose_and_launch(place, op, key, fixed, itemsize, launch, kernel):
    """Launches the interpreter's configuration, or the GPU configuration warpweave.ops._tuning
    chooses among `fixed` (first) and those of _CONFIGS whose stages of A and B tiles fit the
    GPU's shared memory."""
    if not place.on_gpu:
        launch(_tuning.Candidate("tl", **_INTERPRETER_CONFIG), place.launch)
        return
    default = _tuning.Candidate("tl", **fixed)
    candidates = [default] + [
        _tuning.Candidate("tl", **cfg) for cfg in _CONFIGS
        if cfg != fixed and _tuning.fits(place, cfg["num_stages"] * itemsize * cfg["BLOCK_K"] *
                                         (cfg["BLOCK_M"] + cfg["BLOCK_N"]))]
    launch(_tuning.choose(place, op, key, candidates, default, launch, [kernel]), place.launch)


def _precision(dt):
    """fp32 operands are multiplied in full precision (torch's semantics), not tf32."""
    return "ieee" if dt == "float32" else None
