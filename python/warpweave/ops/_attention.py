"""Attention: the tl FlashAttention-2 kernel (kernels/attention.py, software-pipelined on sm_90a,
any GPU), the Hopper warp-specialized ping-pong kernel (kernels/hopper/attention_ws.py, sm_90
GPUs only), the Blackwell warp-specialized forward (kernels/blackwell/attention_ws.py, sm_100
GPUs only), and variable-length attention over packed sequences (kernels/attention_varlen.py,
FlashAttention's flash_attn_varlen_func), each with its backward."""

from __future__ import annotations

import math

import warpweave as ww

from . import _common, _tuning
from ._common import (_HALF_FLOATS, _Place, _check_dtype, _check_ndim, _check_shape,
                      _contiguous, _descriptor, _dtype_name, _itemsize, _planned, _strides,
                      _tma_operand)
from .kernels import attention as attention_kernels
from .kernels import attention_bwd as attention_bwd_kernels
from .kernels import attention_varlen as attention_varlen_kernels
from .kernels.hopper import attention_bwd_ws as attention_bwd_ws_kernels
from .kernels.hopper import attention_ws as attention_ws_kernels
from .kernels.blackwell import attention_bwd_ws as attention_bwd_ws_sm100_kernels
from .kernels.blackwell import attention_ws as attention_ws_sm100_kernels


def _check_attention_args(op, q, k, v, causal, sm_scale, head_dims, varlen=None) -> tuple:
    """(dtype name, sm_scale) of an attention call, after checking q, k and v (one 16-bit float
    dtype, HEAD_DIM one of `head_dims`), causal and sm_scale (a finite number, not a bool;
    default 1 / sqrt(HEAD_DIM)). Dense (varlen None): q, k, v of one shape [Z, H, N_CTX,
    HEAD_DIM]. Packed sequences (varlen = (cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
    max_seqlen_k)): q [total_q, H, HEAD_DIM], k and v [total_k, H_KV, HEAD_DIM] with H a
    multiple of H_KV, int32 cu_seqlens [B + 1] each, max_seqlen non-negative ints; the values
    of cu_seqlens are checked against the totals and the max_seqlen where they are in host
    memory (NumPy arrays, CPU tensors)."""
    dt = _check_dtype(op, "q", q, _HALF_FLOATS)
    if varlen is None:
        _check_ndim(op, "q", q, (4,), " [Z, H, N_CTX, HEAD_DIM]")
        for name, t in (("k", k), ("v", v)):
            if _dtype_name(t) != dt:
                raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(t)} but 'q' has {dt}")
            _check_shape(op, name, t, tuple(q.shape), " (q's shape)")
    else:
        _check_ndim(op, "q", q, (3,), " [total_q, H, HEAD_DIM]")
        for name, t in (("k", k), ("v", v)):
            if _dtype_name(t) != dt:
                raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(t)} but 'q' has {dt}")
            _check_ndim(op, name, t, (3,), " [total_k, H_KV, HEAD_DIM]")
        if k.shape[2] != q.shape[2]:
            raise ValueError(f"{op}: 'k' has shape {tuple(k.shape)}; its HEAD_DIM must be q's "
                             f"({q.shape[2]})")
        _check_shape(op, "v", v, tuple(k.shape), " (k's shape)")
        h, h_kv = q.shape[1], k.shape[1]
        if h_kv == 0 or h % h_kv:
            raise ValueError(f"{op}: 'k' has {h_kv} heads; q's head count ({h}) must be a "
                             f"multiple of it (grouped-query attention)")
    head_dim = q.shape[-1]
    if head_dim not in head_dims:
        raise ValueError(f"{op}: 'q' has HEAD_DIM {head_dim}; the kernel takes "
                         f"{', '.join(map(str, head_dims[:-1]))} or {head_dims[-1]}")
    if varlen is not None:
        _check_cu_seqlens(op, q.shape[0], k.shape[0], *varlen)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, (int, float)) or \
            not math.isfinite(sm_scale):
        raise ValueError(f"{op}: 'sm_scale' must be a finite number, got {sm_scale!r}")
    if not isinstance(causal, bool):
        raise ValueError(f"{op}: 'causal' must be True or False, got {causal!r}")
    return dt, sm_scale


def _check_cu_seqlens(op, total_q, total_k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                      max_seqlen_k):
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _check_dtype(op, name, t, ("int32",))
        _check_ndim(op, name, t, (1,), " [B + 1] (prefix sums of the sequence lengths)")
        if t.shape[0] < 1:
            raise ValueError(f"{op}: '{name}' is empty; it needs B + 1 entries (prefix sums "
                             f"starting at 0)")
    if cu_seqlens_k.shape[0] != cu_seqlens_q.shape[0]:
        raise ValueError(f"{op}: 'cu_seqlens_k' has {cu_seqlens_k.shape[0]} entries but "
                         f"'cu_seqlens_q' has {cu_seqlens_q.shape[0]}; both need B + 1")
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{op}: '{name}' must be a non-negative int, got {value!r}")
    for name, t, total, longest in (("cu_seqlens_q", cu_seqlens_q, total_q, max_seqlen_q),
                                    ("cu_seqlens_k", cu_seqlens_k, total_k, max_seqlen_k)):
        values = _host_ints(t)
        if values is None:
            continue  # (on the GPU: reading them would synchronize; the caller vouches)
        values = values.astype("int64")
        lengths = values[1:] - values[:-1]
        if values[0] != 0 or (lengths < 0).any() or values[-1] != total:
            raise ValueError(f"{op}: '{name}' must rise from 0 to {total} (the rows of "
                             f"{'q' if name[-1] == 'q' else 'k'}), got {values.tolist()}")
        if len(lengths) and lengths.max() > longest:
            raise ValueError(f"{op}: 'max_seqlen_{name[-1]}' is {longest} but '{name}' holds "
                             f"a sequence of {lengths.max()}")


def _host_ints(t):
    """t's values as a NumPy array when they can be read without a device synchronization (a
    NumPy array or a CPU tensor), else None."""
    if _common._is_numpy(t):
        return t
    if t.device.type == "cpu":
        return t.numpy()
    return None


# Where ops.attention may take the warp-specialized TLX kernel (attention_tlx; the fixed choice
# where it applies) instead of the tl one: on sm_90 GPUs, for the shapes it takes (HEAD_DIM 64
# or 128, N_CTX a multiple of 128).
ATTENTION_TLX_ON_SM90 = True
# Likewise for the Blackwell warp-specialized forward (kernels/blackwell/attention_ws.py) on GPUs
# of compute capability 10.x compiling for sm_100a, for the same shapes. No Blackwell GPU has run
# it (interpreter and ptxas only: tests/python/test_blackwell_attention_ws.py).
ATTENTION_TLX_ON_SM100 = True

# The tl kernel's fixed GPU configuration: 8 warps (two warp groups of 64 query rows) for every
# head size; on sm_90a the loop is software-pipelined (K and V copied three blocks ahead into
# four slots, Q in shared memory): 145 registers at HEAD_DIM=64, 191-192 at 128, no spills
# (ptxas, tests/python/test_attention_pipeline.py). The registers allow one program per SM
# either way, so the deeper copies' shared memory (96 / 192 KB) costs none.
ATTENTION_GPU_CONFIG = dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=4)
_INTERPRETER_CONFIG = dict(BLOCK_M=32, BLOCK_N=16, num_warps=4)
# The TLX kernel's: 64 query rows per consumer warp group (its S and O tiles, 64x128 and
# 64xHEAD_DIM fp32, then fit in registers beside P), 128-key blocks in a 2-stage ring.
ATTENTION_TLX_CONFIG = dict(BLOCK_M=64, BLOCK_N=128, NUM_STAGES=2)
# The Blackwell kernel's: 128 query rows per softmax warp group (one tensor-memory lane a row;
# S, P and O live in tensor memory, not registers), 128-key blocks, K and V in a 2-stage ring
# (199 KB of shared memory at HEAD_DIM 128; a third stage does not fit), 3 stages at HEAD_DIM 64
# (131 KB: its tensor memory, 384 columns allocated as 512, already allows one program per SM
# only, so the shared memory costs no occupancy). N_CTX not a multiple of 256 takes 64-row
# sub-tiles (the PTX ISA's 64-lane layout), so every multiple of 128 is served.
ATTENTION_TLX_SM100_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, NUM_STAGES=2)


def _sm100_config(n_ctx, head_dim) -> dict:
    """The Blackwell kernel's configuration for N_CTX (a multiple of 128) and HEAD_DIM."""
    config = dict(ATTENTION_TLX_SM100_CONFIG)
    if n_ctx % (2 * config["BLOCK_M"]):
        config["BLOCK_M"] = 64
    if head_dim == 64:
        config["NUM_STAGES"] = 3
    return config


@_planned
def attention(q, k, v, causal=False, sm_scale=None, return_lse=False, kernel=None):
    """softmax(q @ k^T * sm_scale [+ causal mask]) @ v for q, k, v [Z, H, N_CTX, HEAD_DIM], all
    fp16 or all bf16, of one shape, with HEAD_DIM a power of two in 16..256. sm_scale defaults to
    1 / sqrt(HEAD_DIM). Returns out (q's dtype, contiguous), and with return_lse also the fp32
    [Z, H, N_CTX] base-2 log-sum-exp of the scaled scores. kernel: None picks (on GPUs the
    fastest of the tl kernel's and, on sm_90 where it applies (ATTENTION_TLX_ON_SM90), the TLX
    warp-specialized kernel's block sizes, on sm_100 (ATTENTION_TLX_ON_SM100) the Blackwell
    kernel's fixed configuration, tuned once per shape: warpweave.ops._tuning;
    WARPWEAVE_OPS_TUNING=0 takes the TLX kernel where it applies and the tl kernel elsewhere;
    the tl kernel in the interpreter), "tl" or "tlx" restrict it to one kernel ("tlx": the
    warp-specialized kernel of the call's GPU, Blackwell's on sm_100, Hopper's elsewhere and in
    the interpreter); "tlx_blackwell" the Blackwell kernel (on an sm_100 GPU, or in the interpreter
    with NumPy arrays or CPU tensors)."""
    op = "attention"
    if kernel not in (None, "tl", "tlx", "tlx_blackwell"):
        raise ValueError(f"{op}: 'kernel' must be None, 'tl', 'tlx' or 'tlx_blackwell', got "
                         f"{kernel!r}")
    place = _Place(op, {"q": q, "k": k, "v": v})
    dt, sm_scale = _check_attention_args(op, q, k, v, causal, sm_scale, (16, 32, 64, 128, 256))
    z, h, n_ctx, head_dim = q.shape
    shape_fits = head_dim in (64, 128) and n_ctx > 0 and n_ctx % 128 == 0 and z * h > 0
    on_sm100 = _common._is_sm100(place)
    if kernel == "tlx_blackwell" and place.on_gpu and not on_sm100:
        raise ValueError(f"{op}: kernel='tlx_blackwell' needs a compute capability 10 GPU "
                         f"compiling for sm_100a (or the interpreter); use kernel='tl'")
    if kernel == "tlx" and on_sm100:
        kernel = "tlx_blackwell"
    tlx_fits = shape_fits and _common._is_sm90(place)
    sm100_fits = shape_fits and on_sm100
    if (kernel == "tlx" and not tlx_fits) or (kernel == "tlx_blackwell" and not sm100_fits):
        # The interpreter, and shapes (or GPUs) attention_tlx refuses (with the reason).
        return attention_tlx(q, k, v, sm_scale=sm_scale, return_lse=return_lse, causal=causal,
                             arch="sm_100" if kernel == "tlx_blackwell" else "sm_90")
    tlx = kernel == "tlx" or (kernel is None and ATTENTION_TLX_ON_SM90 and tlx_fits)
    sm100 = kernel == "tlx_blackwell" or (kernel is None and ATTENTION_TLX_ON_SM100 and sm100_fits)
    q, k, v = (t if _strides(t)[3] == 1 and min(_strides(t)) >= 0 else _contiguous(t)
               for t in (q, k, v))
    out = place.empty((z, h, n_ctx, head_dim), dt)
    lse = place.empty((z * h, n_ctx), "float32")
    if z * h > 0 and n_ctx > 0:
        def launch(candidate, go):
            if candidate.kernel in ("tlx", "tlx_blackwell"):
                _launch_tlx(place, go, op, q, k, v, out, lse, sm_scale, causal,
                            candidate.config, _FORWARD_KERNELS[candidate.kernel])
                return
            sq, sk, sv, so = (_strides(t) for t in (q, k, v, out))
            go(attention_kernels.attention_fwd_kernel,
               (ww.cdiv(n_ctx, candidate["BLOCK_M"]), z * h),
               q, k, v, out, lse, float(sm_scale), sq[0], sq[1], sq[2], sk[0], sk[1], sk[2],
               sv[0], sv[1], sv[2], so[0], so[1], so[2], h, n_ctx,
               HEAD_DIM=head_dim, CAUSAL=causal, **candidate.config)

        if not place.on_gpu:
            launch(_tuning.Candidate("tl", **_INTERPRETER_CONFIG), place.launch)
        else:
            candidates = _forward_candidates(place, head_dim, _itemsize(q),
                                             tl=kernel not in ("tlx", "tlx_blackwell"), tlx=tlx,
                                             sm100=sm100 and _sm100_config(n_ctx, head_dim))
            chosen = _tuning.choose(
                place, op, (dt, causal, _tuning.pow2_bucket(z * h), n_ctx, head_dim),
                candidates, candidates[0], launch,
                [_FORWARD_KERNELS[name] for name in dict.fromkeys(c.kernel for c in candidates)])
            launch(chosen, place.launch)
    if return_lse:
        return out, lse.reshape(z, h, n_ctx)
    return out


def attention_tlx(q, k, v, sm_scale=None, return_lse=False, causal=False, arch=None):
    """Attention with a warp-specialized TLX kernel in its fixed configuration: arch "sm_90" the
    Hopper ping-pong kernel (kernels/hopper/attention_ws.py, ATTENTION_TLX_CONFIG), "sm_100" the
    Blackwell one (kernels/blackwell/attention_ws.py, ATTENTION_TLX_SM100_CONFIG), None the one
    of the call's GPU (the Hopper kernel in the interpreter). q, k, v [Z, H, N_CTX, HEAD_DIM]
    fp16 or bf16 (CUDA tensors on a GPU of that architecture; NumPy arrays or CPU tensors in the
    interpreter), HEAD_DIM 64 or 128, N_CTX a multiple of 128. Same results as
    attention(causal=causal)."""
    op = "attention_tlx"
    if arch not in (None, "sm_90", "sm_100"):
        raise ValueError(f"{op}: 'arch' must be None, 'sm_90' or 'sm_100', got {arch!r}")
    place = _Place(op, {"q": q, "k": k, "v": v})
    dt, sm_scale = _check_attention_args(op, q, k, v, causal, sm_scale, (64, 128))
    z, h, n_ctx, head_dim = q.shape
    if n_ctx % 128 or n_ctx == 0:
        raise ValueError(f"{op}: 'q' has N_CTX {n_ctx}; the kernel needs a positive multiple of "
                         f"128 (use attention() for other lengths)")
    if arch is None:
        arch = "sm_100" if _common._is_sm100(place) else "sm_90"
    if arch == "sm_100" and place.on_gpu and not _common._is_sm100(place):
        raise ValueError(f"{op}: arch='sm_100' needs a GPU of compute capability 10.x compiling "
                         f"for sm_100a (or the interpreter: NumPy arrays, or CPU tensors with "
                         f"WARPWEAVE_INTERPRET=1)")
    out = place.empty((z, h, n_ctx, head_dim), dt)
    lse = place.empty((z * h, n_ctx), "float32")
    if arch == "sm_100":
        _launch_tlx(place, _tuning.direct, op, q, k, v, out, lse, sm_scale, causal,
                    _sm100_config(n_ctx, head_dim),
                    attention_ws_sm100_kernels.attention_ws_kernel)
    else:
        _launch_tlx(place, _tuning.direct, op, q, k, v, out, lse, sm_scale, causal,
                    ATTENTION_TLX_CONFIG)
    if return_lse:
        return out, lse.reshape(z, h, n_ctx)
    return out


def _launch_tlx(place, go, op, q, k, v, out, lse, sm_scale, causal, config,
                kernel=attention_ws_kernels.attention_ws_kernel):
    """Launches `kernel`, kernels/hopper/attention_ws.py's or kernels/blackwell/attention_ws.py's
    (one signature and grid), with `config` (BLOCK_M query rows per consumer / softmax group,
    BLOCK_N-key blocks, NUM_STAGES; N_CTX a multiple of 2 * BLOCK_M and of BLOCK_N) through
    go(kernel, grid, *args, **meta), over descriptors of q, k, v and out seen as [rows,
    HEAD_DIM]."""
    z, h, n_ctx, head_dim = q.shape
    q2, k2, v2 = (_tma_operand(op, name, t, place).reshape(-1, head_dim)
                  for name, t in (("q", q), ("k", k), ("v", v)))
    o2 = out.reshape(-1, head_dim)
    block_m, block_n = config["BLOCK_M"], config["BLOCK_N"]
    descs = [_descriptor(t, [rows, head_dim])
             for t, rows in ((q2, block_m), (k2, block_n), (v2, block_n), (o2, block_m))]
    go(kernel, (n_ctx // (2 * block_m), z * h), *descs, lse, float(sm_scale), n_ctx,
       HEAD_DIM=head_dim, CAUSAL=bool(causal), num_warps=4, **config)


@_planned
def attention_bwd(do, q, k, v, out, lse, causal=False, sm_scale=None, kernel=None):
    """Gradients (dq, dk, dv) of attention(q, k, v, causal, sm_scale) given the gradient `do` of
    its output, the output `out` and its lse (attention(..., return_lse=True)'s [Z, H, N_CTX]
    base-2 log-sum-exp). q, k, v, do, out [Z, H, N_CTX, HEAD_DIM] fp16 or bf16 of one shape,
    HEAD_DIM a power of two in 16..256; gradients in q's dtype, contiguous. kernel: None picks
    the tl kernels (kernels/attention_bwd.py: a dK / dV and a dQ kernel, block sizes tuned once
    per shape on GPUs, warpweave.ops._tuning), or on sm_90 where the TLX kernel applies the
    faster of the two when tuning (the TLX kernel untimed only where ATTENTION_BWD_TLX_ON_SM90);
    "tl" the tl kernels only; "tlx" the warp-specialized kernel of the GPU: the Hopper one
    (kernels/hopper/attention_bwd_ws.py: HEAD_DIM 64 or 128, N_CTX a multiple of 128; on an sm_90
    GPU or in the interpreter), on a compute capability 10 GPU compiling for sm_100a the
    Blackwell one (kernels/blackwell/attention_bwd_ws.py, same shapes; also where kernel=None
    and ATTENTION_BWD_TLX_ON_SM100); "tlx_blackwell" the Blackwell one (on such a GPU or in the
    interpreter)."""
    op = "attention_bwd"
    if kernel not in (None, "tl", "tlx", "tlx_blackwell"):
        raise ValueError(f"{op}: 'kernel' must be None, 'tl', 'tlx' or 'tlx_blackwell', got "
                         f"{kernel!r}")
    place = _Place(op, {"do": do, "q": q, "k": k, "v": v, "out": out, "lse": lse})
    dt, sm_scale = _check_attention_args(op, q, k, v, causal, sm_scale, (16, 32, 64, 128, 256))
    z, h, n_ctx, head_dim = q.shape
    for name, t in (("do", do), ("out", out)):
        if _dtype_name(t) != dt:
            raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(t)} but 'q' has {dt}")
        _check_shape(op, name, t, (z, h, n_ctx, head_dim), " (q's shape)")
    _check_dtype(op, "lse", lse, ("float32",))
    _check_shape(op, "lse", lse, (z, h, n_ctx), " [Z, H, N_CTX]")
    tlx_shape = head_dim in (64, 128) and n_ctx % ATTENTION_BWD_TLX_CONFIG["BLOCK_N"] == 0
    sm100 = _common._is_sm100(place)
    if kernel in ("tlx", "tlx_blackwell"):
        if not tlx_shape:
            raise ValueError(f"{op}: kernel={kernel!r} takes HEAD_DIM 64 or 128 and N_CTX a "
                             f"multiple of {ATTENTION_BWD_TLX_CONFIG['BLOCK_N']}, got HEAD_DIM "
                             f"{head_dim} and N_CTX {n_ctx} (use kernel='tl')")
        if kernel == "tlx_blackwell" and place.on_gpu and not sm100:
            raise ValueError(f"{op}: kernel='tlx_blackwell' needs a compute capability 10 GPU "
                             f"compiling for sm_100a (or the interpreter); use kernel='tl'")
        if kernel == "tlx" and place.on_gpu and not (sm100 or _common._is_sm90(place)):
            raise ValueError(f"{op}: kernel='tlx' needs an sm_90 GPU compiling for sm_90a or a "
                             f"compute capability 10 GPU compiling for sm_100a (or the "
                             f"interpreter); use kernel='tl'")
    q, k, v, do, out, lse = (_contiguous(t) for t in (q, k, v, do, out, lse))
    dq = place.empty((z, h, n_ctx, head_dim), dt)
    dk = place.empty((z, h, n_ctx, head_dim), dt)
    dv = place.empty((z, h, n_ctx, head_dim), dt)
    if z * h == 0 or n_ctx == 0:
        return dq, dk, dv
    delta = place.empty((z * h, n_ctx), "float32")
    # The fixed GPU configuration, both kernels: 64 x 64 blocks, 4 warps up to HEAD_DIM 64.
    fixed = (dict(BLOCK_M=64, BLOCK_N=64, num_warps=4 if head_dim <= 64 else 8) if place.on_gpu
             else _INTERPRETER_BWD_CONFIG)

    def launch_dkdv(candidate, go):
        go(attention_bwd_kernels.attention_bwd_dkdv_kernel,
           (ww.cdiv(n_ctx, candidate["BLOCK_N"]), z * h), q, k, v, do, lse, delta, dk, dv,
           float(sm_scale), n_ctx, HEAD_DIM=head_dim, CAUSAL=causal, **candidate.config)

    def launch_dq(candidate, go):
        go(attention_bwd_kernels.attention_bwd_dq_kernel,
           (ww.cdiv(n_ctx, candidate["BLOCK_M"]), z * h), q, k, v, do, lse, delta, dq,
           float(sm_scale), n_ctx, HEAD_DIM=head_dim, CAUSAL=causal, **candidate.config)

    def launch_preprocess(go):
        go(attention_bwd_kernels.attention_bwd_preprocess_kernel,
           (ww.cdiv(n_ctx, fixed["BLOCK_M"]), z * h), out, do, delta, n_ctx,
           HEAD_DIM=head_dim, BLOCK_M=fixed["BLOCK_M"], num_warps=fixed["num_warps"])

    if kernel == "tlx_blackwell" or (sm100 and kernel == "tlx") or (
            kernel is None and sm100 and tlx_shape and ATTENTION_BWD_TLX_ON_SM100):
        _launch_bwd_tlx_sm100(place, op, q, k, v, do, out, lse, delta, dq, dk, dv, sm_scale,
                              causal)
        return dq, dk, dv
    key = (dt, causal, _tuning.pow2_bucket(z * h), n_ctx, head_dim)
    tlx = kernel == "tlx" or (kernel is None and tlx_shape and _common._is_sm90(place))
    if not tlx:
        launch_preprocess(place.launch)
        _bwd_choose_and_launch(place, op, key, head_dim, _itemsize(q), fixed, fixed, launch_dkdv,
                               launch_dq, attention_bwd_kernels.attention_bwd_dkdv_kernel,
                               attention_bwd_kernels.attention_bwd_dq_kernel)
        return dq, dk, dv

    dq_accum = place.empty((z * h * n_ctx, head_dim), "float32")
    default = _BWD_TLX_DEFAULTS[head_dim]
    tlx_candidates = [_tuning.Candidate("tlx", **cfg)
                      for cfg in [default] + [c for c in _BWD_TLX_CONFIGS if c != default]
                      if cfg is default or not place.on_gpu or
                      _tuning.fits(place, _bwd_tlx_shared(cfg, head_dim, _itemsize(q)))]
    candidates = tlx_candidates
    if kernel is None:
        # The tl pair as one candidate, in the block sizes tuned for it (part of its name, so
        # that the choice between the kernels is kept per tl configuration).
        dkdv_c, dq_c = _bwd_choose(place, op, key, head_dim, _itemsize(q), fixed, fixed,
                                   launch_dkdv, launch_dq,
                                   attention_bwd_kernels.attention_bwd_dkdv_kernel,
                                   attention_bwd_kernels.attention_bwd_dq_kernel)
        tl = _tuning.Candidate("tl", dkdv=repr(dkdv_c), dq=repr(dq_c))
        candidates = [tl] + tlx_candidates if not ATTENTION_BWD_TLX_ON_SM90 else \
            tlx_candidates + [tl]

    def launch(candidate, go):
        if candidate.kernel == "tl":
            launch_preprocess(go)
            launch_dkdv(dkdv_c, go)
            launch_dq(dq_c, go)
            return
        _launch_bwd_tlx(place, go, op, q, k, v, do, out, lse, delta, dq_accum, dq, dk, dv,
                        sm_scale, causal, candidate.config)

    if not place.on_gpu:
        launch(candidates[0], place.launch)
    else:
        chosen = _tuning.choose(
            place, f"{op}_kernel" if kernel is None else f"{op}_tlx", key, candidates,
            candidates[0], launch,
            [attention_bwd_kernels.attention_bwd_preprocess_kernel,
             attention_bwd_kernels.attention_bwd_dkdv_kernel,
             attention_bwd_kernels.attention_bwd_dq_kernel,
             attention_bwd_ws_kernels.attention_bwd_ws_preprocess_kernel,
             attention_bwd_ws_kernels.attention_bwd_ws_kernel,
             attention_bwd_ws_kernels.attention_bwd_ws_postprocess_kernel])
        launch(chosen, place.launch)
    return dq, dk, dv


def _launch_bwd_tlx(place, go, op, q, k, v, do, out, lse, delta, dq_accum, dq, dk, dv, sm_scale,
                    causal, config):
    """Launches kernels/hopper/attention_bwd_ws.py's three kernels with `config` (BLOCK_M query
    rows a step, BLOCK_N keys a program, NUM_STAGES) through go(kernel, grid, *args, **meta):
    delta and a zeroed dq_accum, the warp-specialized kernel over descriptors of q, k, v, do,
    dq_accum, dk and dv seen as [rows, HEAD_DIM], then dQ from dq_accum. The arrays are
    contiguous; N_CTX a multiple of BLOCK_N."""
    z, h, n_ctx, head_dim = q.shape
    q2, k2, v2, do2 = (_tma_operand(op, name, t, place).reshape(-1, head_dim)
                       for name, t in (("q", q), ("k", k), ("v", v), ("do", do)))
    dk2, dv2 = dk.reshape(-1, head_dim), dv.reshape(-1, head_dim)
    block_m, block_n = config["BLOCK_M"], config["BLOCK_N"]
    descs = [_descriptor(t, block) for t, block in (
        (q2, [block_m, head_dim]), (k2, [block_n // 2, head_dim]), (v2, [block_n // 2, head_dim]),
        (do2, [block_m, head_dim]),
        (dq_accum, _bwd_tlx_dq_tile(block_m, head_dim, config.get("DQ_SPLIT", -1))),
        (dk2, [block_n // 2, head_dim]), (dv2, [block_n // 2, head_dim]))]
    rows = (n_ctx // block_m, z * h)
    go(attention_bwd_ws_kernels.attention_bwd_ws_preprocess_kernel, rows, out, do, delta,
       dq_accum, n_ctx, HEAD_DIM=head_dim, BLOCK_M=block_m, num_warps=4)
    go(attention_bwd_ws_kernels.attention_bwd_ws_kernel, (n_ctx // block_n, z * h), *descs, lse,
       delta, float(sm_scale), n_ctx, HEAD_DIM=head_dim, CAUSAL=bool(causal), num_warps=4,
       **config)
    go(attention_bwd_ws_kernels.attention_bwd_ws_postprocess_kernel, rows, dq_accum, dq,
       float(sm_scale), n_ctx, HEAD_DIM=head_dim, BLOCK_M=block_m, num_warps=4)


# Where attention_bwd (kernel=None) launches the Blackwell warp-specialized backward
# (kernels/blackwell/attention_bwd_ws.py, untimed: no Blackwell GPU has run it) rather than the
# tl kernels: on compute capability 10 GPUs compiling for sm_100a, for the shapes it takes
# (HEAD_DIM 64 or 128, N_CTX a multiple of 128).
ATTENTION_BWD_TLX_ON_SM100 = True
# Its configuration per HEAD_DIM: 128 keys a program (tcgen05's M), 64-query steps (S^T, dP^T,
# dV, dK and dQ then fill the 512 tensor-memory columns at HEAD_DIM 128), Q / dO in a NUM_STAGES
# ring (at HEAD_DIM 128, 3 stages take 226 KB of the 227 KB of shared memory, 2 take 194 KB;
# at 64, 3 take 130 KB: ptxas, sm_100a).
ATTENTION_BWD_SM100_CONFIGS = {64: dict(BLOCK_M=64, BLOCK_N=128, NUM_STAGES=3),
                               128: dict(BLOCK_M=64, BLOCK_N=128, NUM_STAGES=2)}


def _launch_bwd_tlx_sm100(place, op, q, k, v, do, out, lse, delta, dq, dk, dv, sm_scale, causal):
    """kernels/blackwell/attention_bwd_ws.py in its configuration for HEAD_DIM, between the
    Hopper backward's preprocess (delta, and a zeroed fp32 dq_accum) and postprocess (dQ =
    sm_scale * dq_accum) kernels, over descriptors of q, k, v, do, dq_accum, dk and dv seen as
    [rows, HEAD_DIM]. The arrays are contiguous; N_CTX a multiple of 128."""
    z, h, n_ctx, head_dim = q.shape
    config = ATTENTION_BWD_SM100_CONFIGS[head_dim]
    block_m, block_n = config["BLOCK_M"], config["BLOCK_N"]
    dq_accum = place.empty((z * h * n_ctx, head_dim), "float32")
    q2, k2, v2, do2 = (_tma_operand(op, name, t, place).reshape(-1, head_dim)
                       for name, t in (("q", q), ("k", k), ("v", v), ("do", do)))
    descs = [_descriptor(t, [rows, head_dim]) for t, rows in (
        (q2, block_m), (k2, block_n), (v2, block_n), (do2, block_m), (dq_accum, block_m),
        (dk.reshape(-1, head_dim), block_n), (dv.reshape(-1, head_dim), block_n))]
    rows = (n_ctx // block_m, z * h)
    place.launch(attention_bwd_ws_kernels.attention_bwd_ws_preprocess_kernel, rows, out, do,
                 delta, dq_accum, n_ctx, HEAD_DIM=head_dim, BLOCK_M=block_m, num_warps=4)
    place.launch(attention_bwd_ws_sm100_kernels.attention_bwd_ws_kernel,
                 (n_ctx // block_n, z * h), *descs, lse, delta, float(sm_scale), n_ctx,
                 HEAD_DIM=head_dim, CAUSAL=bool(causal), num_warps=4, **config)
    place.launch(attention_bwd_ws_kernels.attention_bwd_ws_postprocess_kernel, rows, dq_accum,
                 dq, float(sm_scale), n_ctx, HEAD_DIM=head_dim, BLOCK_M=block_m, num_warps=4)


# ------------------------------------------------------------------------------------------------
# Candidates (warpweave.ops._tuning): the fixed configuration first
# ------------------------------------------------------------------------------------------------
#
# Shared memory, in elements of HEAD_DIM (as ptxas reports it for sm_90a): the forward kernels
# hold two BLOCK_M-row tiles (Q and the output's staging; the TLX kernel's two consumers' Q) and
# num_stages K and V blocks of BLOCK_N rows; the backward kernels three tiles of the loop-
# invariant block (BLOCK_N keys for dK / dV, BLOCK_M queries for dQ) and num_stages (3 unless
# given) pairs of the stepped one.


def _forward_shared(cfg, head_dim, itemsize) -> int:
    stages = cfg.get("num_stages", cfg.get("NUM_STAGES"))
    return itemsize * head_dim * (2 * cfg["BLOCK_M"] + 2 * stages * cfg["BLOCK_N"])


# tl forward (BLOCK_M a multiple of BLOCK_N): 128x128 blocks in 3 stages up to HEAD_DIM 64 (half
# the key steps), one warp group on 64x64 blocks (twice the programs: short sequences, few
# heads), and from HEAD_DIM 128 on, 32-key blocks in 3 stages (fewer registers; no spills at
# 256, where the fixed 128x64 spill).
_FORWARD_CONFIGS = [
    (lambda d: d <= 64, dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3)),
    (lambda d: True, dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=4)),
    (lambda d: d >= 128, dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3)),
]
# TLX forward: a third K / V stage (226 KB at HEAD_DIM 128), and 64-key blocks in 2 or 3 stages
# (N_CTX a multiple of 128 covers both block sizes).
_TLX_CONFIGS = [
    dict(BLOCK_M=64, BLOCK_N=128, NUM_STAGES=3),
    dict(BLOCK_M=64, BLOCK_N=64, NUM_STAGES=2),
    dict(BLOCK_M=64, BLOCK_N=64, NUM_STAGES=3),
]
_FORWARD_KERNELS = {"tl": attention_kernels.attention_fwd_kernel,
                    "tlx": attention_ws_kernels.attention_ws_kernel,
                    "tlx_blackwell": attention_ws_sm100_kernels.attention_ws_kernel}

# Backward (dK / dV kernel: BLOCK_N keys a program, BLOCK_M-query steps; dQ kernel: BLOCK_M
# queries a program, BLOCK_N-key steps), beside the fixed 64 x 64 blocks: the other warp count;
# for dK / dV 32-query steps and, up to HEAD_DIM 64, 128 keys a program; for dQ 128 queries a
# program (up to HEAD_DIM 128) and 32-key steps.
_DKDV_CONFIGS = [
    (lambda d: d <= 128, dict(BLOCK_M=64, BLOCK_N=64, num_warps=4)),
    (lambda d: d <= 128, dict(BLOCK_M=64, BLOCK_N=64, num_warps=8)),
    (lambda d: d <= 128, dict(BLOCK_M=32, BLOCK_N=64, num_warps=4)),
    (lambda d: True, dict(BLOCK_M=32, BLOCK_N=64, num_warps=8)),
    (lambda d: d <= 64, dict(BLOCK_M=64, BLOCK_N=128, num_warps=8)),
    (lambda d: d <= 64, dict(BLOCK_M=32, BLOCK_N=128, num_warps=8)),
]
_DQ_CONFIGS = [
    (lambda d: d <= 128, dict(BLOCK_M=64, BLOCK_N=64, num_warps=4)),
    (lambda d: d <= 128, dict(BLOCK_M=64, BLOCK_N=64, num_warps=8)),
    (lambda d: d <= 128, dict(BLOCK_M=128, BLOCK_N=64, num_warps=8)),
    (lambda d: d <= 128, dict(BLOCK_M=64, BLOCK_N=32, num_warps=4)),
    (lambda d: True, dict(BLOCK_M=64, BLOCK_N=32, num_warps=8)),
    (lambda d: d <= 128, dict(BLOCK_M=128, BLOCK_N=32, num_warps=8)),
]


def _forward_candidates(place, head_dim, itemsize, tl, tlx, fixed=ATTENTION_GPU_CONFIG,
                        sm100=None) -> list:
    """The forward configurations for HEAD_DIM on the call's GPU, the fixed one first (the
    Blackwell kernel's `sm100` configuration where given, the Hopper TLX kernel's where `tlx`,
    else the tl kernel's `fixed`): the tl kernel's where `tl`, the TLX kernel's where `tlx`,
    those that fit the GPU's shared memory."""
    out = [_tuning.Candidate("tlx_blackwell", **sm100)] if sm100 else []
    if tlx:
        out += [_tuning.Candidate("tlx", **cfg) for cfg in [ATTENTION_TLX_CONFIG] + _TLX_CONFIGS
                if cfg is ATTENTION_TLX_CONFIG or
                _tuning.fits(place, _forward_shared(cfg, head_dim, itemsize))]
    if tl:
        out.append(_tuning.Candidate("tl", **fixed))
        out += [_tuning.Candidate("tl", **cfg) for applies, cfg in _FORWARD_CONFIGS
                if applies(head_dim) and cfg != fixed and
                _tuning.fits(place, _forward_shared(cfg, head_dim, itemsize))]
    return out


def _bwd_candidates(place, head_dim, itemsize, fixed, configs, invariant, stepped) -> list:
    """`fixed`, then those of `configs` that apply to HEAD_DIM and fit the GPU's shared memory
    (`invariant` / `stepped`: the block-size names of the loop-invariant and the stepped
    operands)."""
    default = _tuning.Candidate("tl", **fixed)
    return [default] + [
        c for c in (_tuning.Candidate("tl", **cfg) for applies, cfg in configs
                    if applies(head_dim))
        if c != default and _tuning.fits(place, itemsize * head_dim * (
            3 * c[invariant] + 2 * c.get("num_stages", 3) * c[stepped]))]


def _bwd_choose(place, op, key, head_dim, itemsize, fixed_dkdv, fixed_dq, launch_dkdv,
                launch_dq, dkdv_kernel, dq_kernel) -> tuple:
    """The (dK / dV, dQ) candidates _bwd_choose_and_launch would launch, without launching them
    (timing them where warpweave.ops._tuning does)."""
    chosen = []
    for name, fixed, configs, invariant, stepped, launch, kernel in (
            ("dkdv", fixed_dkdv, _DKDV_CONFIGS, "BLOCK_N", "BLOCK_M", launch_dkdv, dkdv_kernel),
            ("dq", fixed_dq, _DQ_CONFIGS, "BLOCK_M", "BLOCK_N", launch_dq, dq_kernel)):
        candidates = _bwd_candidates(place, head_dim, itemsize, fixed, configs, invariant,
                                     stepped)
        chosen.append(_tuning.choose(place, f"{op}_{name}", key, candidates, candidates[0],
                                     launch, [kernel]))
    return tuple(chosen)


def _bwd_choose_and_launch(place, op, key, head_dim, itemsize, fixed_dkdv, fixed_dq,
                           launch_dkdv, launch_dq, dkdv_kernel, dq_kernel):
    """Launches the dK / dV kernel and then the dQ kernel (those whose launch function is not
    None), each in its interpreter configuration (`fixed_*`) or in the GPU configuration
    warpweave.ops._tuning chooses (ops `op`_dkdv and `op`_dq; `fixed_*` the fixed ones)."""
    for name, fixed, configs, invariant, stepped, launch, kernel in (
            ("dkdv", fixed_dkdv, _DKDV_CONFIGS, "BLOCK_N", "BLOCK_M", launch_dkdv, dkdv_kernel),
            ("dq", fixed_dq, _DQ_CONFIGS, "BLOCK_M", "BLOCK_N", launch_dq, dq_kernel)):
        if launch is None:
            continue
        if not place.on_gpu:
            launch(_tuning.Candidate("tl", **fixed), place.launch)
            continue
        candidates = _bwd_candidates(place, head_dim, itemsize, fixed, configs, invariant,
                                     stepped)
        launch(_tuning.choose(place, f"{op}_{name}", key, candidates, candidates[0], launch,
                              [kernel]), place.launch)


# ------------------------------------------------------------------------------------------------
# Variable-length attention (kernels/attention_varlen.py): FlashAttention's flash_attn_varlen_func
# ------------------------------------------------------------------------------------------------


# Fixed GPU configurations by HEAD_DIM (the first candidates of the per-shape tuning, which
# also tries the dense kernels' candidates above). Forward: the dense kernel's (attention()
# above) up to 128; at 256 its 128 x 64 tiles spill (255 registers, 1112 bytes on sm_90a, ptxas)
# where 128 x 32 do not (232 registers, 224 KB shared). Backward: attention_bwd's fixed blocks
# up to 128; at 256 the dK / dV kernel takes 32-query blocks (250 registers, no spills) and the
# dQ kernel 32-key blocks (182), where 64 x 64 spill 948 and 144 bytes.
ATTENTION_VARLEN_GPU_CONFIGS = {
    **{d: dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=4) for d in (16, 32, 64, 128)},
    256: dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3),
}
ATTENTION_VARLEN_BWD_GPU_CONFIGS = {  # {HEAD_DIM: (dK / dV kernel, dQ kernel)}
    **{d: (dict(BLOCK_M=64, BLOCK_N=64, num_warps=4),) * 2 for d in (16, 32, 64)},
    128: (dict(BLOCK_M=64, BLOCK_N=64, num_warps=8),) * 2,
    256: (dict(BLOCK_M=32, BLOCK_N=64, num_warps=8), dict(BLOCK_M=64, BLOCK_N=32, num_warps=8)),
}
_INTERPRETER_BWD_CONFIG = dict(BLOCK_M=16, BLOCK_N=16, num_warps=4)

# Where attention_bwd (kernel=None) launches the TLX warp-specialized backward
# (kernels/hopper/attention_bwd_ws.py) untimed rather than the tl kernels: on sm_90 GPUs for the
# shapes it takes (HEAD_DIM 64 or 128, N_CTX a multiple of 128). On the H200 at Z4 H32 S4096
# D128 fp16 it ran 0.92x SDPA (cuDNN) and 0.96x causal in its first form, where the tl pair ran
# 0.32x; with tuning on the tl pair stays a candidate.
ATTENTION_BWD_TLX_ON_SM90 = True
_common.routing_switches(__name__, "ATTENTION_TLX_ON_SM90", "ATTENTION_TLX_ON_SM100",
                         "ATTENTION_BWD_TLX_ON_SM100", "ATTENTION_BWD_TLX_ON_SM90")
# Its configurations: BLOCK_M queries a step, 128 keys a program (64 per consumer warp group),
# Q and dO in a NUM_STAGES ring; DEFER_DK leaves each query block's dK MMA running into the
# next block, DQ_SPLIT=2 (DQ_ROWS) splits dQ's query rows between the consumers; 128-query
# steps fit in shared memory at HEAD_DIM 64 only.
ATTENTION_BWD_TLX_CONFIG = dict(BLOCK_M=64, BLOCK_N=128, NUM_STAGES=2)
_BWD_TLX_CONFIGS = [ATTENTION_BWD_TLX_CONFIG,
                    dict(BLOCK_M=64, BLOCK_N=128, NUM_STAGES=3),
                    dict(BLOCK_M=64, BLOCK_N=128, NUM_STAGES=2, DEFER_DK=True),
                    dict(BLOCK_M=64, BLOCK_N=128, NUM_STAGES=3, DEFER_DK=True),
                    dict(BLOCK_M=128, BLOCK_N=128, NUM_STAGES=2),
                    dict(BLOCK_M=128, BLOCK_N=128, NUM_STAGES=2, DQ_SPLIT=2),
                    dict(BLOCK_M=128, BLOCK_N=128, NUM_STAGES=3, DQ_SPLIT=2)]
# The fixed (untuned) one per HEAD_DIM. H200, Z4 H32 S4096 fp16, against cuDNN's backward in
# one run (.gpurun-style variant timing, medians of 3 interleaved rounds), non-causal / causal:
# HEAD_DIM 128: 64-query steps, 2 stages 0.93x / 0.87x, with DEFER_DK 0.96x / 0.98x;
# HEAD_DIM 64: 64-query steps 0.82x / 0.82x, DEFER_DK 0.86x / 0.85x, 128-query steps 0.92x /
# 0.94x, split by rows 0.98x / 0.96x, with 3 stages 0.99x / 1.00x.
_BWD_TLX_DEFAULTS = {64: dict(BLOCK_M=128, BLOCK_N=128, NUM_STAGES=3, DQ_SPLIT=2),
                     128: dict(BLOCK_M=64, BLOCK_N=128, NUM_STAGES=2, DEFER_DK=True)}


def _bwd_tlx_dq_tile(block_m, head_dim, dq_split=-1):
    """[rows, columns] of the fp32 dQ tile one consumer of kernels/hopper/attention_bwd_ws.py
    reduce-adds per query block (its DQ_TILE_ROWS / DQ_TILE_COLS; dq_desc's block shape)."""
    k = attention_bwd_ws_kernels
    mode = dq_split if dq_split != k.DQ_AUTO else (k.DQ_COLUMNS if head_dim == 128 else k.DQ_OWN)
    return [block_m // 2 if mode == k.DQ_ROWS else block_m,
            head_dim // 2 if mode == k.DQ_COLUMNS else head_dim]


def _bwd_tlx_shared(cfg, head_dim, itemsize) -> int:
    """The TLX backward's buffers: K and V (BLOCK_N rows), NUM_STAGES Q and dO tiles, four dS
    tiles and two fp32 dQ tiles, plus 2 KB for barriers (ptxas: 199 KB at HEAD_DIM 128, 2
    stages)."""
    bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
    dq_rows, dq_cols = _bwd_tlx_dq_tile(bm, head_dim, cfg.get("DQ_SPLIT", -1))
    return (itemsize * (head_dim * (2 * bn + 2 * cfg["NUM_STAGES"] * bm) + 4 * (bn // 2) * bm)
            + 4 * 2 * dq_rows * dq_cols + 2048)


@_planned
def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     causal=False, sm_scale=None, return_lse=False):
    """Attention over B sequences of different lengths packed along the token dimension, with
    the semantics of FlashAttention's flash_attn_varlen_func (kernels/attention_varlen.py):

      q [total_q, H, HEAD_DIM], k and v [total_k, H_KV, HEAD_DIM], all fp16 or all bf16,
        HEAD_DIM a power of two in 16..256, H a multiple of H_KV (grouped-query attention:
        query head h reads key / value head h // (H // H_KV));
      cu_seqlens_q, cu_seqlens_k int32 [B + 1]: sequence b owns q's rows cu_seqlens_q[b] ..
        cu_seqlens_q[b + 1] and k's / v's rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1]; both
        rise from 0 to total_q / total_k; sequences may be empty;
      max_seqlen_q, max_seqlen_k: at least the longest sequence's lengths (they size the grid);
      causal: the mask is aligned to the bottom right corner of each sequence's Lq x Lk score
        matrix, as in FlashAttention >= 2.1: query i sees key j when j <= i + Lk - Lq (the
        usual lower triangle when Lq == Lk; with Lq > Lk the first Lq - Lk queries see no key);
      sm_scale: defaults to 1 / sqrt(HEAD_DIM).

    Returns out [total_q, H, HEAD_DIM] (q's dtype, contiguous), and with return_lse also the
    fp32 [H, total_q] log-sum-exp of the scaled scores (natural log, FlashAttention's
    softmax_lse layout). A query that sees no key gets zeros and an lse of +inf. The cu_seqlens
    values are checked where they are in host memory (NumPy arrays, CPU tensors); on the GPU
    they are read by the kernels only (no synchronization), and rows past max_seqlen are not
    computed. NumPy arrays run in the interpreter, CUDA tensors on the GPU."""
    op = "attention_varlen"
    place = _Place(op, {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q,
                        "cu_seqlens_k": cu_seqlens_k})
    dt, sm_scale = _check_attention_args(
        op, q, k, v, causal, sm_scale, (16, 32, 64, 128, 256),
        varlen=(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k))
    total_q, h, head_dim = q.shape
    h_kv, batch = k.shape[1], cu_seqlens_q.shape[0] - 1
    q, k, v = (t if _strides(t)[2] == 1 and min(_strides(t)) >= 0 else _contiguous(t)
               for t in (q, k, v))
    cu_seqlens_q, cu_seqlens_k = _contiguous(cu_seqlens_q), _contiguous(cu_seqlens_k)
    out = place.empty((total_q, h, head_dim), dt)
    lse = place.empty((h, total_q), "float32")
    if total_q > 0 and batch * h > 0 and max_seqlen_q > 0:
        sq, sk, sv, so = (_strides(t) for t in (q, k, v, out))

        def launch(candidate, go):
            go(attention_varlen_kernels.attention_varlen_fwd_kernel,
               (ww.cdiv(max_seqlen_q, candidate["BLOCK_M"]), batch * h),
               q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, float(sm_scale),
               sq[0], sq[1], sk[0], sk[1], sv[0], sv[1], so[0], so[1], h, h // h_kv, total_q,
               HEAD_DIM=head_dim, CAUSAL=causal, **candidate.config)

        if not place.on_gpu:
            launch(_tuning.Candidate("tl", **_INTERPRETER_CONFIG), place.launch)
        else:
            candidates = _forward_candidates(place, head_dim, _itemsize(q), tl=True, tlx=False,
                                             fixed=ATTENTION_VARLEN_GPU_CONFIGS[head_dim])
            key = _varlen_key(dt, causal, head_dim, h, h_kv, total_q, max_seqlen_q,
                              max_seqlen_k)
            launch(_tuning.choose(place, op, key, candidates, candidates[0], launch,
                                  [attention_varlen_kernels.attention_varlen_fwd_kernel]),
                   place.launch)
    if return_lse:
        return out, lse
    return out


def _varlen_key(dt, causal, head_dim, h, h_kv, total_q, max_seqlen_q, max_seqlen_k) -> tuple:
    """The tuning key of a variable-length call: power-of-two buckets of the packed rows and of
    the longest sequences, which vary from batch to batch."""
    return (dt, causal, head_dim, h, h_kv, _tuning.pow2_bucket(total_q),
            _tuning.pow2_bucket(max_seqlen_q), _tuning.pow2_bucket(max_seqlen_k))


@_planned
def attention_varlen_bwd(do, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                         max_seqlen_k, causal=False, sm_scale=None):
    """Gradients (dq, dk, dv) of attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k,
    max_seqlen_q, max_seqlen_k, causal, sm_scale) given the gradient `do` of its output, the
    output `out` and its lse (attention_varlen(..., return_lse=True)'s fp32 [H, total_q]);
    kernels/attention_varlen.py. do and out have q's shape and dtype; the gradients are
    contiguous, in q's dtype, dk and dv summed over the query heads that share a key / value
    head."""
    op = "attention_varlen_bwd"
    place = _Place(op, {"do": do, "q": q, "k": k, "v": v, "out": out, "lse": lse,
                        "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k})
    dt, sm_scale = _check_attention_args(
        op, q, k, v, causal, sm_scale, (16, 32, 64, 128, 256),
        varlen=(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k))
    total_q, h, head_dim = q.shape
    total_k, h_kv = k.shape[:2]
    batch = cu_seqlens_q.shape[0] - 1
    for name, t in (("do", do), ("out", out)):
        if _dtype_name(t) != dt:
            raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(t)} but 'q' has {dt}")
        _check_shape(op, name, t, (total_q, h, head_dim), " (q's shape)")
    _check_dtype(op, "lse", lse, ("float32",))
    _check_shape(op, "lse", lse, (h, total_q), " [H, total_q]")
    q, k, v = (t if _strides(t)[2] == 1 and min(_strides(t)) >= 0 else _contiguous(t)
               for t in (q, k, v))
    do, out, lse, cu_seqlens_q, cu_seqlens_k = (
        _contiguous(t) for t in (do, out, lse, cu_seqlens_q, cu_seqlens_k))
    dq = place.empty((total_q, h, head_dim), dt)
    dk = place.empty((total_k, h_kv, head_dim), dt)
    dv = place.empty((total_k, h_kv, head_dim), dt)
    if batch * h == 0:
        return dq, dk, dv
    dkdv_fixed, dq_fixed = (ATTENTION_VARLEN_BWD_GPU_CONFIGS[head_dim] if place.on_gpu
                            else (_INTERPRETER_BWD_CONFIG,) * 2)
    delta = place.empty((h, total_q), "float32")
    lse2 = place.empty((h, total_q), "float32")
    if total_q > 0:
        place.launch(attention_varlen_kernels.attention_varlen_bwd_preprocess_kernel,
                     lambda m: (ww.cdiv(total_q, m["BLOCK_M"]), h), out, do, lse, delta, lse2,
                     h, total_q, HEAD_DIM=head_dim, BLOCK_M=dq_fixed["BLOCK_M"],
                     num_warps=dq_fixed["num_warps"])
    sq, sk, sv, sdo = (_strides(t) for t in (q, k, v, do))
    sdk, sdv, sdq = _strides(dk), _strides(dv), _strides(dq)

    def launch_dkdv(candidate, go):
        go(attention_varlen_kernels.attention_varlen_bwd_dkdv_kernel,
           (ww.cdiv(max_seqlen_k, candidate["BLOCK_N"]), batch * h_kv),
           q, k, v, do, lse2, delta, dk, dv, cu_seqlens_q, cu_seqlens_k,
           float(sm_scale), sq[0], sq[1], sk[0], sk[1], sv[0], sv[1], sdo[0], sdo[1],
           sdk[0], sdk[1], sdv[0], sdv[1], h_kv, total_q, GROUP=h // h_kv,
           HEAD_DIM=head_dim, CAUSAL=causal, **candidate.config)

    def launch_dq(candidate, go):
        go(attention_varlen_kernels.attention_varlen_bwd_dq_kernel,
           (ww.cdiv(max_seqlen_q, candidate["BLOCK_M"]), batch * h),
           q, k, v, do, lse2, delta, dq, cu_seqlens_q, cu_seqlens_k,
           float(sm_scale), sq[0], sq[1], sk[0], sk[1], sv[0], sv[1], sdo[0], sdo[1],
           sdq[0], sdq[1], h, h // h_kv, total_q, HEAD_DIM=head_dim, CAUSAL=causal,
           **candidate.config)

    key = _varlen_key(dt, causal, head_dim, h, h_kv, total_q, max_seqlen_q, max_seqlen_k)
    _bwd_choose_and_launch(
        place, op, key, head_dim, _itemsize(q), dkdv_fixed, dq_fixed,
        launch_dkdv if max_seqlen_k > 0 else None,
        launch_dq if max_seqlen_q > 0 and total_q > 0 else None,
        attention_varlen_kernels.attention_varlen_bwd_dkdv_kernel,
        attention_varlen_kernels.attention_varlen_bwd_dq_kernel)
    return dq, dk, dv
