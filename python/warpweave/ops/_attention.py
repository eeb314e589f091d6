"""Attention: the tl FlashAttention-2 kernel (kernels/attention.py, software-pipelined on sm_90a,
any GPU), the Hopper warp-specialized ping-pong kernel (kernels/hopper/attention_ws.py, sm_90
GPUs only), and variable-length attention over packed sequences (kernels/attention_varlen.py,
FlashAttention's flash_attn_varlen_func), each with its backward."""

from __future__ import annotations

import math

import warpweave as ww

from . import _common
from ._common import (_HALF_FLOATS, _Place, _check_dtype, _check_ndim, _check_shape,
                      _contiguous, _descriptor, _dtype_name, _strides, _tma_operand)
from .kernels import attention as attention_kernels
from .kernels import attention_bwd as attention_bwd_kernels
from .kernels import attention_varlen as attention_varlen_kernels
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


# ------------------------------------------------------------------------------------------------
# Variable-length attention (kernels/attention_varlen.py): FlashAttention's flash_attn_varlen_func
# ------------------------------------------------------------------------------------------------


# GPU configurations by HEAD_DIM. Forward: the dense kernel's (attention() above) up to 128; at 256
# its 128 x 64 tiles spill (255 registers, 1112 bytes on sm_90a, ptxas) where 128 x 32 do not
# (232 registers, 224 KB shared). Backward: attention_bwd's correctness-first blocks up to 128
# (not tuned on a GPU); at 256 the dK / dV kernel takes 32-query blocks (250 registers, no
# spills) and the dQ kernel 32-key blocks (182), where 64 x 64 spill 948 and 144 bytes.
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


def _host_ints(t):
    """t's values as a NumPy array when they can be read without a device synchronization (a
    NumPy array or a CPU tensor), else None."""
    if _common._is_numpy(t):
        return t
    if t.device.type == "cpu":
        return t.numpy()
    return None


def _check_varlen_args(op, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                       causal, sm_scale) -> tuple:
    """(dtype name, (total_q, H, HEAD_DIM), (total_k, H_KV), B, sm_scale) of a varlen attention
    call after checking its arguments; the values of cu_seqlens are checked against the totals
    and the max_seqlen where they are in host memory (NumPy arrays, CPU tensors)."""
    dt = _check_dtype(op, "q", q, _HALF_FLOATS)
    _check_ndim(op, "q", q, (3,), " [total_q, H, HEAD_DIM]")
    total_q, h, head_dim = q.shape
    for name, t in (("k", k), ("v", v)):
        if _dtype_name(t) != dt:
            raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(t)} but 'q' has {dt}")
        _check_ndim(op, name, t, (3,), " [total_k, H_KV, HEAD_DIM]")
    total_k, h_kv = k.shape[0], k.shape[1]
    if k.shape[2] != head_dim:
        raise ValueError(f"{op}: 'k' has shape {tuple(k.shape)}; its HEAD_DIM must be q's "
                         f"({head_dim})")
    _check_shape(op, "v", v, tuple(k.shape), " (k's shape)")
    if h_kv == 0 or h % h_kv:
        raise ValueError(f"{op}: 'k' has {h_kv} heads; q's head count ({h}) must be a multiple "
                         f"of it (grouped-query attention)")
    if head_dim not in (16, 32, 64, 128, 256):
        raise ValueError(f"{op}: 'q' has HEAD_DIM {head_dim}; the kernel takes 16, 32, 64, 128 "
                         f"or 256")
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
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, (int, float)) or \
            not math.isfinite(sm_scale):
        raise ValueError(f"{op}: 'sm_scale' must be a finite number, got {sm_scale!r}")
    if not isinstance(causal, bool):
        raise ValueError(f"{op}: 'causal' must be True or False, got {causal!r}")
    return dt, (total_q, h, head_dim), (total_k, h_kv), cu_seqlens_q.shape[0] - 1, sm_scale


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
    dt, (total_q, h, head_dim), (_total_k, h_kv), batch, sm_scale = _check_varlen_args(
        op, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, sm_scale)
    q, k, v = (t if _strides(t)[2] == 1 and min(_strides(t)) >= 0 else _contiguous(t)
               for t in (q, k, v))
    cu_seqlens_q, cu_seqlens_k = _contiguous(cu_seqlens_q), _contiguous(cu_seqlens_k)
    out = place.empty((total_q, h, head_dim), dt)
    lse = place.empty((h, total_q), "float32")
    if total_q > 0 and batch * h > 0 and max_seqlen_q > 0:
        config = (ATTENTION_VARLEN_GPU_CONFIGS[head_dim] if place.on_gpu
                  else dict(BLOCK_M=32, BLOCK_N=16, num_warps=4))
        sq, sk, sv, so = (_strides(t) for t in (q, k, v, out))
        place.launch(
            attention_varlen_kernels.attention_varlen_fwd_kernel,
            lambda m: (ww.cdiv(max_seqlen_q, m["BLOCK_M"]), batch * h),
            q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, float(sm_scale),
            sq[0], sq[1], sk[0], sk[1], sv[0], sv[1], so[0], so[1], h, h // h_kv, total_q,
            HEAD_DIM=head_dim, CAUSAL=causal, **config)
    if return_lse:
        return out, lse
    return out


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
    dt, (total_q, h, head_dim), (total_k, h_kv), batch, sm_scale = _check_varlen_args(
        op, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, sm_scale)
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
    dkdv_config, dq_config = (ATTENTION_VARLEN_BWD_GPU_CONFIGS[head_dim] if place.on_gpu
                              else (_INTERPRETER_BWD_CONFIG,) * 2)
    delta = place.empty((h, total_q), "float32")
    lse2 = place.empty((h, total_q), "float32")
    if total_q > 0:
        place.launch(attention_varlen_kernels.attention_varlen_bwd_preprocess_kernel,
                     lambda m: (ww.cdiv(total_q, m["BLOCK_M"]), h), out, do, lse, delta, lse2,
                     h, total_q, HEAD_DIM=head_dim, BLOCK_M=dq_config["BLOCK_M"],
                     num_warps=dq_config["num_warps"])
    sq, sk, sv, sdo = (_strides(t) for t in (q, k, v, do))
    if max_seqlen_k > 0:
        sdk, sdv = _strides(dk), _strides(dv)
        place.launch(attention_varlen_kernels.attention_varlen_bwd_dkdv_kernel,
                     lambda m: (ww.cdiv(max_seqlen_k, m["BLOCK_N"]), batch * h_kv),
                     q, k, v, do, lse2, delta, dk, dv, cu_seqlens_q, cu_seqlens_k,
                     float(sm_scale), sq[0], sq[1], sk[0], sk[1], sv[0], sv[1], sdo[0], sdo[1],
                     sdk[0], sdk[1], sdv[0], sdv[1], h_kv, total_q, GROUP=h // h_kv,
                     HEAD_DIM=head_dim, CAUSAL=causal, **dkdv_config)
    if max_seqlen_q > 0 and total_q > 0:
        sdq = _strides(dq)
        place.launch(attention_varlen_kernels.attention_varlen_bwd_dq_kernel,
                     lambda m: (ww.cdiv(max_seqlen_q, m["BLOCK_M"]), batch * h),
                     q, k, v, do, lse2, delta, dq, cu_seqlens_q, cu_seqlens_k,
                     float(sm_scale), sq[0], sq[1], sk[0], sk[1], sv[0], sv[1], sdo[0], sdo[1],
                     sdq[0], sdq[1], h, h // h_kv, total_q, HEAD_DIM=head_dim, CAUSAL=causal,
                     **dq_config)
    return dq, dk, dv
