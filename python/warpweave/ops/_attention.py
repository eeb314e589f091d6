"""Attention: the tl FlashAttention-2 kernel (kernels/attention.py, software-pipelined on sm_90a,
any GPU) and the Hopper warp-specialized ping-pong kernel (kernels/hopper/attention_ws.py, sm_90
GPUs only)."""

from __future__ import annotations

import math

import warpweave as ww

from . import _common
from ._common import (_HALF_FLOATS, _Place, _check_dtype, _check_ndim, _check_shape,
                      _contiguous, _descriptor, _dtype_name, _strides, _tma_operand)
from .kernels import attention as attention_kernels
from .kernels import attention_bwd as attention_bwd_kernels
from .kernels.hopper import attention_ws as attention_ws_kernels


def _check_attention_args(op, q, k, v, causal, sm_scale, head_dims) -> tuple:
    """(dtype name, q's shape, sm_scale) of an attention call, after checking q, k and v (one
    shape [Z, H, N_CTX, HEAD_DIM] and one 16-bit float dtype, HEAD_DIM one of `head_dims`),
    causal and sm_scale (default 1 / sqrt(HEAD_DIM))."""
    dt = _check_dtype(op, "q", q, _HALF_FLOATS)
    _check_ndim(op, "q", q, (4,), " [Z, H, N_CTX, HEAD_DIM]")
    for name, t in (("k", k), ("v", v)):
        if _dtype_name(t) != dt:
            raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(t)} but 'q' has {dt}")
        _check_shape(op, name, t, tuple(q.shape), " (q's shape)")
    head_dim = q.shape[3]
    if head_dim not in head_dims:
        raise ValueError(f"{op}: 'q' has HEAD_DIM {head_dim}; the kernel takes "
                         f"{', '.join(map(str, head_dims[:-1]))} or {head_dims[-1]}")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    if not isinstance(sm_scale, (int, float)) or not math.isfinite(sm_scale):
        raise ValueError(f"{op}: 'sm_scale' must be a finite number, got {sm_scale!r}")
    if not isinstance(causal, bool):
        raise ValueError(f"{op}: 'causal' must be True or False, got {causal!r}")
    return dt, tuple(q.shape), sm_scale


# Where ops.attention takes the warp-specialized TLX kernel (attention_tlx) instead of the tl one:
# on sm_90 GPUs, for the shapes it takes (HEAD_DIM 64 or 128, N_CTX a multiple of 128).
ATTENTION_TLX_ON_SM90 = True


def attention(q, k, v, causal=False, sm_scale=None, return_lse=False, kernel=None):
    """softmax(q @ k^T * sm_scale [+ causal mask]) @ v for q, k, v [Z, H, N_CTX, HEAD_DIM], all
    fp16 or all bf16, of one shape, with HEAD_DIM a power of two in 16..256. sm_scale defaults to
    1 / sqrt(HEAD_DIM). Returns out (q's dtype, contiguous), and with return_lse also the fp32
    [Z, H, N_CTX] base-2 log-sum-exp of the scaled scores. kernel: None picks (the TLX
    warp-specialized kernel on sm_90 GPUs where it applies, see ATTENTION_TLX_ON_SM90; the tl
    kernel elsewhere and in the interpreter), "tl" or "tlx" force one."""
    op = "attention"
    if kernel not in (None, "tl", "tlx"):
        raise ValueError(f"{op}: 'kernel' must be None, 'tl' or 'tlx', got {kernel!r}")
    place = _Place(op, {"q": q, "k": k, "v": v})
    dt, (z, h, n_ctx, head_dim), sm_scale = _check_attention_args(
        op, q, k, v, causal, sm_scale, (16, 32, 64, 128, 256))
    if kernel == "tlx" or (kernel is None and ATTENTION_TLX_ON_SM90 and head_dim in (64, 128)
                           and n_ctx > 0 and n_ctx % 128 == 0 and _common._is_sm90(place)):
        return attention_tlx(q, k, v, sm_scale=sm_scale, return_lse=return_lse, causal=causal)
    q, k, v = (t if _strides(t)[3] == 1 and min(_strides(t)) >= 0 else _contiguous(t)
               for t in (q, k, v))
    out = place.empty((z, h, n_ctx, head_dim), dt)
    lse = place.empty((z * h, n_ctx), "float32")
    if z * h > 0 and n_ctx > 0:
        if place.on_gpu:
            # 8 warps (two warp groups of 64 query rows) for every head size; on sm_90a the
            # loop is software-pipelined (K and V copied three blocks ahead into four slots, Q
            # in shared memory): 145 registers at HEAD_DIM=64, 191-192 at 128, no spills
            # (ptxas, tests/python/test_attention_pipeline.py). The registers allow one program
            # per SM either way, so the deeper copies' shared memory (96 / 192 KB) costs none.
            config = dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=4)
        else:
            config = dict(BLOCK_M=32, BLOCK_N=16, num_warps=4)
        sq, sk, sv, so = (_strides(t) for t in (q, k, v, out))
        place.launch(
            attention_kernels.attention_fwd_kernel, lambda m: (ww.cdiv(n_ctx, m["BLOCK_M"]), z * h),
            q, k, v, out, lse, float(sm_scale), sq[0], sq[1], sq[2], sk[0], sk[1], sk[2],
            sv[0], sv[1], sv[2], so[0], so[1], so[2], h, n_ctx,
            HEAD_DIM=head_dim, CAUSAL=causal, **config)
    if return_lse:
        return out, lse.reshape(z, h, n_ctx)
    return out


def attention_tlx(q, k, v, sm_scale=None, return_lse=False, causal=False):
    """Attention with the Hopper warp-specialized ping-pong kernel
    (kernels/hopper/attention_ws.py): q, k, v [Z, H, N_CTX, HEAD_DIM] fp16 or bf16 (CUDA tensors on
    an sm_90 GPU; NumPy arrays in the interpreter), HEAD_DIM 64 or 128, N_CTX a multiple of 128.
    Same results as attention(causal=causal)."""
    op = "attention_tlx"
    place = _Place(op, {"q": q, "k": k, "v": v})
    dt, (z, h, n_ctx, head_dim), sm_scale = _check_attention_args(op, q, k, v, causal, sm_scale,
                                                                   (64, 128))
    # 64 query rows per consumer warp group: its S and O tiles (64x128 and 64xHEAD_DIM fp32)
    # then fit in registers beside P.
    block_m, block_n = 64, 128
    if n_ctx % block_n or n_ctx == 0:
        raise ValueError(f"{op}: 'q' has N_CTX {n_ctx}; the kernel needs a positive multiple of "
                         f"{block_n} (use attention() for other lengths)")
    q2, k2, v2 = (_tma_operand(op, name, t, place).reshape(-1, head_dim)
                  for name, t in (("q", q), ("k", k), ("v", v)))
    out = place.empty((z, h, n_ctx, head_dim), dt)
    lse = place.empty((z * h, n_ctx), "float32")
    o2 = out.reshape(-1, head_dim)
    descs = [_descriptor(t, [rows, head_dim])
             for t, rows in ((q2, block_m), (k2, block_n), (v2, block_n), (o2, block_m))]
    attention_ws_kernels.attention_ws_kernel[(n_ctx // (2 * block_m), z * h)](
        *descs, lse, float(sm_scale), n_ctx, HEAD_DIM=head_dim, BLOCK_M=block_m,
        BLOCK_N=block_n, NUM_STAGES=2, CAUSAL=bool(causal), num_warps=4)
    if return_lse:
        return out, lse.reshape(z, h, n_ctx)
    return out


def attention_bwd(do, q, k, v, out, lse, causal=False, sm_scale=None):
    """Gradients (dq, dk, dv) of attention(q, k, v, causal, sm_scale) given the gradient `do` of
    its output, the output `out` and its lse (attention(..., return_lse=True)'s [Z, H, N_CTX]
    base-2 log-sum-exp); kernels/attention_bwd.py. q, k, v, do, out [Z, H, N_CTX, HEAD_DIM] fp16
    or bf16 of one shape, HEAD_DIM a power of two in 16..256; gradients in q's dtype,
    contiguous."""
    op = "attention_bwd"
    place = _Place(op, {"do": do, "q": q, "k": k, "v": v, "out": out, "lse": lse})
    dt, (z, h, n_ctx, head_dim), sm_scale = _check_attention_args(
        op, q, k, v, causal, sm_scale, (16, 32, 64, 128, 256))
    for name, t in (("do", do), ("out", out)):
        if _dtype_name(t) != dt:
            raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(t)} but 'q' has {dt}")
        _check_shape(op, name, t, (z, h, n_ctx, head_dim), " (q's shape)")
    _check_dtype(op, "lse", lse, ("float32",))
    _check_shape(op, "lse", lse, (z, h, n_ctx), " [Z, H, N_CTX]")
    q, k, v, do, out, lse = (_contiguous(t) for t in (q, k, v, do, out, lse))
    dq = place.empty((z, h, n_ctx, head_dim), dt)
    dk = place.empty((z, h, n_ctx, head_dim), dt)
    dv = place.empty((z, h, n_ctx, head_dim), dt)
    if z * h == 0 or n_ctx == 0:
        return dq, dk, dv
    delta = place.empty((z * h, n_ctx), "float32")
    if place.on_gpu:
        # Correctness-first GPU configuration (not tuned; see tests/gpu/test_ops_library_gpu.py).
        block_m, block_n = 64, 64
        warps = 4 if head_dim <= 64 else 8
    else:
        block_m, block_n, warps = 16, 16, 4
    place.launch(attention_bwd_kernels.attention_bwd_preprocess_kernel,
                 (ww.cdiv(n_ctx, block_m), z * h), out, do, delta, n_ctx,
                 HEAD_DIM=head_dim, BLOCK_M=block_m, num_warps=warps)
    meta = dict(HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                num_warps=warps)
    place.launch(attention_bwd_kernels.attention_bwd_dkdv_kernel,
                 (ww.cdiv(n_ctx, block_n), z * h), q, k, v, do, lse, delta, dk, dv,
                 float(sm_scale), n_ctx, **meta)
    place.launch(attention_bwd_kernels.attention_bwd_dq_kernel,
                 (ww.cdiv(n_ctx, block_m), z * h), q, k, v, do, lse, delta, dq,
                 float(sm_scale), n_ctx, **meta)
    return dq, dk, dv
