"""torch.ops.warpweave.*: the ops of warpweave.ops as torch.library custom ops.

Each op has a real implementation (CUDA tensors run the kernels on the GPU; CPU tensors run them
in the CPU interpreter, through NumPy views of the tensors), a fake (meta) implementation that
gives the outputs' shapes, dtypes and devices without running anything (so torch.compile and
FakeTensor tracing see through the op: torch.compile(fullgraph=True) of a model that calls them
traces without graph breaks), and, where PyTorch differentiates through it, an autograd formula
(register_autograd) whose backward calls the op's backward kernel as another custom op:

    op                                          backward
    add(x, y)                                   (dy, dy)
    softmax(x)                                  softmax_bwd(dy, y)
    layernorm(x, w, b, eps) -> (y, mean, rstd)  layernorm_bwd(dy, x, w, mean, rstd) -> dx, dw, db
    matmul(a, b, bias, activation)              matmul of the transposes (bias: a column sum)
    embedding_bag(weight, indices, offsets,     embedding_bag_bwd(...) -> (grad_weight,
                  per_sample_weights, mode)       grad_per_sample_weights)
    attention(q, k, v, causal, sm_scale)        attention_bwd(do, q, k, v, out, lse, causal,
        -> (out, lse)                             sm_scale) -> (dq, dk, dv)
    attention_varlen(q, k, v, cu_seqlens_q,     attention_varlen_bwd(do, q, k, v, out, lse,
        cu_seqlens_k, max_seqlen_q,               cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
        max_seqlen_k, causal, sm_scale)           max_seqlen_k, causal, sm_scale)
        -> (out, lse [H, total_q])                -> (dq, dk, dv)
    row_sum(x), row_max(x) -> (values, indices) row_sum: broadcast; row_max: none
    scaled_mm(a, b, scale_a, scale_b, bias,     none (torch._scaled_mm has none)
              out_dtype, use_fast_accum) (fp8)
    scaled_mm_mx(a, b, a_scales, b_scales,      none
                 out_dtype) (mxfp8)
    grouped_mm(a, b, offs)                      grouped_mm of the transposes: 2-D x 3-D gives
                                                  dA (2-D x 3-D) and dB (ragged K, 2-D x 2-D),
                                                  2-D x 2-D the other way round

layernorm's mean and rstd and the attentions' lse are outputs for the backward; gradients flowing
into them are not propagated (they are marked non-differentiable). matmul's bias is added (and
the activation applied after it) by PyTorch after the kernel, in fp32, not fused into the kernel.

Argument errors are ValueErrors naming the op (warpweave::NAME) and the argument, from the fake
implementation too, so a compiled model reports them while it is traced.
"""

from __future__ import annotations

from typing import Optional

import torch

from . import _attention, _elementwise, _embedding_bag, _grouped_mm, _layernorm, _matmul
from . import _reduction, _scaled_mm, _softmax

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_HALF = (torch.float16, torch.bfloat16)
_INDEX = (torch.int32, torch.int64)
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_FP8_NUMPY = {torch.float8_e4m3fn: "float8_e4m3fn", torch.float8_e5m2: "float8_e5m2"}
_registered = False


# ------------------------------------------------------------------------------------------------
# Where a call runs: CUDA tensors on the GPU, CPU tensors in the interpreter (as NumPy arrays)
# ------------------------------------------------------------------------------------------------


def _device_of(op: str, tensors: dict) -> str:
    """'cuda' or 'cpu' for a call's tensors (None entries skipped); a ValueError naming the op
    and the argument for other devices or a mix."""
    first = None
    for name, t in tensors.items():
        if t is None:
            continue
        kind = t.device.type
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"warpweave::{op}: '{name}' is on {t.device}; the op takes CPU "
                             f"tensors (run in the interpreter) or CUDA tensors (GPU)")
        if first is None:
            first = (name, t.device)
        elif t.device != first[1]:
            raise ValueError(f"warpweave::{op}: '{name}' is on {t.device} but '{first[0]}' is on "
                             f"{first[1]}; put every tensor on one device")
    return "cuda" if first is not None and first[1].type == "cuda" else "cpu"


def _to_numpy(t):
    if t is None:
        return None
    t = t.detach()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype in _FP8_NUMPY:
        import ml_dtypes

        # (a view of the bytes keeps the strides: b of scaled_mm is column-major)
        return t.view(torch.uint8).numpy().view(getattr(ml_dtypes, _FP8_NUMPY[t.dtype]))
    if t.dtype == getattr(torch, "float8_e8m0fnu", None):
        return t.view(torch.uint8).numpy()  # e8m0 scales: the exponent bytes, as uint8
    return t.numpy()


def _from_numpy(a):
    import numpy as np

    if a is None:
        return None
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _run(op: str, fn, tensors: dict, **values):
    """fn(**tensors, **values) on the call's device; the result's arrays as torch tensors."""
    if _device_of(op, tensors) == "cuda":
        return fn(**tensors, **values)
    out = fn(**{n: _to_numpy(t) for n, t in tensors.items()}, **values)
    if isinstance(out, tuple):
        return tuple(_from_numpy(a) for a in out)
    return _from_numpy(out)


def _check_err(fn, op: str):
    """Runs fn() turning a wrapper's ValueError ("softmax: ...") into one naming the custom op."""
    try:
        return fn()
    except ValueError as e:
        raise ValueError(f"warpweave::{op} -> {e}") from None


# ------------------------------------------------------------------------------------------------
# Checks the fake implementations make (the real ones are the wrappers' own)
# ------------------------------------------------------------------------------------------------


def _names(dtypes) -> str:
    return " or ".join(str(d).replace("torch.", "") for d in dtypes)


def _check_dtype(op, name, t, allowed):
    if t.dtype not in allowed:
        raise ValueError(f"warpweave::{op}: '{name}' has dtype {str(t.dtype).replace('torch.', '')}"
                         f"; expected {_names(allowed)}")


def _check_ndim(op, name, t, ndim, what=""):
    if t.dim() != ndim:
        raise ValueError(f"warpweave::{op}: '{name}' must be {ndim}-D{what}, got shape "
                         f"{tuple(t.shape)}")


def _check_same(op, name, t, ref_name, ref, dtype=True):
    if dtype and t.dtype != ref.dtype:
        raise ValueError(f"warpweave::{op}: '{name}' has dtype {t.dtype} but '{ref_name}' has "
                         f"{ref.dtype}")
    if tuple(t.shape) != tuple(ref.shape):
        raise ValueError(f"warpweave::{op}: '{name}' has shape {tuple(t.shape)} but "
                         f"'{ref_name}' has {tuple(ref.shape)}")


def _check_attention(op, q, k, v):
    _check_dtype(op, "q", q, _HALF)
    _check_ndim(op, "q", q, 4, " [Z, H, N_CTX, HEAD_DIM]")
    _check_same(op, "k", k, "q", q)
    _check_same(op, "v", v, "q", q)
    if q.shape[3] not in (16, 32, 64, 128, 256):
        raise ValueError(f"warpweave::{op}: 'q' has HEAD_DIM {q.shape[3]}; the kernel takes 16, "
                         f"32, 64, 128 or 256")


def _check_attention_varlen(op, q, k, v, cu_seqlens_q, cu_seqlens_k, more=None):
    _device_of(op, {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q,
                    "cu_seqlens_k": cu_seqlens_k, **(more or {})})
    _check_dtype(op, "q", q, _HALF)
    _check_ndim(op, "q", q, 3, " [total_q, H, HEAD_DIM]")
    _check_ndim(op, "k", k, 3, " [total_k, H_KV, HEAD_DIM]")
    _check_same(op, "v", v, "k", k)
    if k.dtype != q.dtype:
        raise ValueError(f"warpweave::{op}: 'k' has dtype {k.dtype} but 'q' has {q.dtype}")
    if k.shape[2] != q.shape[2]:
        raise ValueError(f"warpweave::{op}: 'k' has shape {tuple(k.shape)}; its HEAD_DIM must "
                         f"be q's ({q.shape[2]})")
    if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise ValueError(f"warpweave::{op}: 'k' has {k.shape[1]} heads; q's head count "
                         f"({q.shape[1]}) must be a multiple of it (grouped-query attention)")
    if q.shape[2] not in (16, 32, 64, 128, 256):
        raise ValueError(f"warpweave::{op}: 'q' has HEAD_DIM {q.shape[2]}; the kernel takes 16, "
                         f"32, 64, 128 or 256")
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _check_dtype(op, name, t, (torch.int32,))
        _check_ndim(op, name, t, 1, " [B + 1] (prefix sums of the sequence lengths)")
    if cu_seqlens_k.shape[0] != cu_seqlens_q.shape[0]:
        raise ValueError(f"warpweave::{op}: 'cu_seqlens_k' has {cu_seqlens_k.shape[0]} entries "
                         f"but 'cu_seqlens_q' has {cu_seqlens_q.shape[0]}; both need B + 1")


# ------------------------------------------------------------------------------------------------
# The ops
# ------------------------------------------------------------------------------------------------


def _define():
    lib_op = torch.library.custom_op

    # add ---------------------------------------------------------------------------------------
    @lib_op("warpweave::add", mutates_args=())
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _check_err(lambda: _run("add", _elementwise.add, {"x": x, "y": y}), "add")

    @add.register_fake
    def _(x, y):
        _device_of("add", {"x": x, "y": y})
        _check_dtype("add", "x", x, _FLOATS + (torch.float64, torch.int32, torch.int64))
        _check_same("add", "y", y, "x", x)
        return x.new_empty(x.shape)

    def add_backward(ctx, grad):
        return grad, grad

    add.register_autograd(add_backward)

    # softmax -----------------------------------------------------------------------------------
    @lib_op("warpweave::softmax", mutates_args=())
    def softmax(x: torch.Tensor) -> torch.Tensor:
        return _check_err(lambda: _run("softmax", _softmax.softmax, {"x": x}), "softmax")

    @softmax.register_fake
    def _(x):
        _device_of("softmax", {"x": x})
        _check_dtype("softmax", "x", x, _FLOATS)
        if x.dim() < 1:
            raise ValueError("warpweave::softmax: 'x' must have at least one dimension")
        return x.new_empty(x.shape)

    @lib_op("warpweave::softmax_bwd", mutates_args=())
    def softmax_bwd(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _check_err(lambda: _run("softmax_bwd", _softmax.softmax_bwd, {"dy": dy, "y": y}),
                          "softmax_bwd")

    @softmax_bwd.register_fake
    def _(dy, y):
        _device_of("softmax_bwd", {"dy": dy, "y": y})
        _check_dtype("softmax_bwd", "y", y, _FLOATS)
        _check_same("softmax_bwd", "dy", dy, "y", y)
        return y.new_empty(y.shape)

    def softmax_setup(ctx, inputs, output):
        ctx.save_for_backward(output)

    def softmax_backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch.ops.warpweave.softmax_bwd(grad.to(y.dtype).contiguous(), y)

    softmax.register_autograd(softmax_backward, setup_context=softmax_setup)

    # layer norm --------------------------------------------------------------------------------
    @lib_op("warpweave::layernorm", mutates_args=())
    def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                  eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return _check_err(lambda: _run("layernorm", _layernorm.layernorm_fwd,
                                       {"x": x, "w": weight, "b": bias}, eps=eps), "layernorm")

    @layernorm.register_fake
    def _(x, weight, bias, eps=1e-5):
        op = "layernorm"
        _device_of(op, {"x": x, "weight": weight, "bias": bias})
        _check_dtype(op, "x", x, _FLOATS)
        _check_dtype(op, "weight", weight, _FLOATS)
        _check_dtype(op, "bias", bias, _FLOATS)
        if x.dim() < 1:
            raise ValueError(f"warpweave::{op}: 'x' must have at least one dimension")
        for name, t in (("weight", weight), ("bias", bias)):
            if tuple(t.shape) != (x.shape[-1],):
                raise ValueError(f"warpweave::{op}: '{name}' must have shape ({x.shape[-1]},) "
                                 f"(x's last dimension), got {tuple(t.shape)}")
        stats = x.shape[:-1]
        return (x.new_empty(x.shape), x.new_empty(stats, dtype=torch.float32),
                x.new_empty(stats, dtype=torch.float32))

    @lib_op("warpweave::layernorm_bwd", mutates_args=())
    def layernorm_bwd(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                      rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return _check_err(lambda: _run("layernorm_bwd", _layernorm.layernorm_bwd,
                                       {"dy": dy, "x": x, "w": weight, "mean": mean,
                                        "rstd": rstd}), "layernorm_bwd")

    @layernorm_bwd.register_fake
    def _(dy, x, weight, mean, rstd):
        op = "layernorm_bwd"
        _device_of(op, {"dy": dy, "x": x, "weight": weight, "mean": mean, "rstd": rstd})
        _check_dtype(op, "x", x, _FLOATS)
        _check_same(op, "dy", dy, "x", x)
        _check_dtype(op, "weight", weight, _FLOATS)
        _check_dtype(op, "mean", mean, (torch.float32,))
        _check_dtype(op, "rstd", rstd, (torch.float32,))
        return x.new_empty(x.shape), weight.new_empty(weight.shape), weight.new_empty(weight.shape)

    def layernorm_setup(ctx, inputs, output):
        x, weight, _bias, _eps = inputs
        _y, mean, rstd = output
        ctx.mark_non_differentiable(mean, rstd)
        ctx.save_for_backward(x, weight, mean, rstd)

    def layernorm_backward(ctx, dy, _dmean, _drstd):
        x, weight, mean, rstd = ctx.saved_tensors
        dy = torch.zeros_like(x) if dy is None else dy.to(x.dtype).contiguous()
        dx, dw, db = torch.ops.warpweave.layernorm_bwd(dy, x, weight, mean, rstd)
        return dx, dw, db, None

    layernorm.register_autograd(layernorm_backward, setup_context=layernorm_setup)

    # matmul ------------------------------------------------------------------------------------
    def apply_bias_activation(c, bias, activation):
        c = c.float() + bias.float()
        if activation == "relu":
            c = torch.relu(c)
        elif activation == "leaky_relu":
            c = torch.nn.functional.leaky_relu(c, 0.01)
        return c

    @lib_op("warpweave::matmul", mutates_args=())
    def matmul(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None,
               activation: Optional[str] = None) -> torch.Tensor:
        op = "matmul"
        if bias is None:
            return _check_err(lambda: _run(op, _matmul.matmul, {"a": a, "b": b},
                                           activation=activation), op)
        _check_bias(op, a, b, bias, activation)
        c = _check_err(lambda: _run(op, _matmul.matmul, {"a": a, "b": b}), op)
        return apply_bias_activation(c, bias, activation).to(c.dtype)

    def _check_bias(op, a, b, bias, activation):
        _device_of(op, {"a": a, "b": b, "bias": bias})
        if activation not in (None, "relu", "leaky_relu"):
            raise ValueError(f"warpweave::{op}: 'activation' must be None, 'relu' or "
                             f"'leaky_relu', got {activation!r}")
        if bias is not None:
            _check_dtype(op, "bias", bias, _FLOATS)
            if b.dim() == 2 and tuple(bias.shape) != (b.shape[1],):
                raise ValueError(f"warpweave::{op}: 'bias' must have shape ({b.shape[1]},) "
                                 f"(b's second dimension), got {tuple(bias.shape)}")

    @matmul.register_fake
    def _(a, b, bias=None, activation=None):
        op = "matmul"
        _check_bias(op, a, b, bias, activation)
        _check_dtype(op, "a", a, _HALF)
        if b.dtype != a.dtype:
            raise ValueError(f"warpweave::{op}: 'b' has dtype {b.dtype} but 'a' has {a.dtype}; "
                             f"both must be float16 or both bfloat16")
        _check_ndim(op, "a", a, 2)
        _check_ndim(op, "b", b, 2)
        if b.shape[0] != a.shape[1]:
            raise ValueError(f"warpweave::{op}: 'b' has shape {tuple(b.shape)} but 'a' has "
                             f"{tuple(a.shape)}; b's first dimension must equal a's second")
        return a.new_empty((a.shape[0], b.shape[1]))

    def matmul_setup(ctx, inputs, output):
        a, b, bias, activation = inputs
        ctx.activation = activation
        ctx.has_bias = bias is not None
        ctx.bias_dtype = bias.dtype if bias is not None else None
        ctx.save_for_backward(a, b, output if activation is not None else None)

    def matmul_backward(ctx, grad):
        a, b, out = ctx.saved_tensors
        grad = grad.to(a.dtype)
        if ctx.activation == "relu":
            grad = torch.where(out > 0, grad, torch.zeros_like(grad))
        elif ctx.activation == "leaky_relu":
            grad = torch.where(out > 0, grad, grad * 0.01)
        grad = grad.contiguous()
        da = torch.ops.warpweave.matmul(grad, b.t()) if ctx.needs_input_grad[0] else None
        db = torch.ops.warpweave.matmul(a.t(), grad) if ctx.needs_input_grad[1] else None
        dbias = grad.float().sum(0).to(ctx.bias_dtype) if ctx.has_bias else None
        return da, db, dbias, None

    matmul.register_autograd(matmul_backward, setup_context=matmul_setup)

    # embedding bag -----------------------------------------------------------------------------
    @lib_op("warpweave::embedding_bag", mutates_args=())
    def embedding_bag(weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor,
                      per_sample_weights: Optional[torch.Tensor] = None,
                      mode: str = "sum") -> torch.Tensor:
        return _check_err(lambda: _run("embedding_bag", _embedding_bag.embedding_bag,
                                       {"weight": weight, "indices": indices, "offsets": offsets,
                                        "per_sample_weights": per_sample_weights}, mode=mode),
                          "embedding_bag")

    def check_embedding_bag(op, weight, indices, offsets, per_sample_weights, mode):
        _device_of(op, {"weight": weight, "indices": indices, "offsets": offsets,
                        "per_sample_weights": per_sample_weights})
        _check_dtype(op, "weight", weight, _FLOATS)
        _check_ndim(op, "weight", weight, 2, " [num_embeddings, D]")
        _check_dtype(op, "indices", indices, _INDEX)
        _check_dtype(op, "offsets", offsets, _INDEX)
        _check_ndim(op, "indices", indices, 1)
        _check_ndim(op, "offsets", offsets, 1, " (num_bags + 1 entries)")
        if mode not in ("sum", "mean"):
            raise ValueError(f"warpweave::{op}: 'mode' must be 'sum' or 'mean', got {mode!r}")
        if offsets.shape[0] < 1:
            raise ValueError(f"warpweave::{op}: 'offsets' needs num_bags + 1 entries (at least "
                             f"1), got none")
        if per_sample_weights is not None:
            _check_dtype(op, "per_sample_weights", per_sample_weights, _FLOATS)
            if tuple(per_sample_weights.shape) != tuple(indices.shape):
                raise ValueError(f"warpweave::{op}: 'per_sample_weights' must have shape "
                                 f"{tuple(indices.shape)} (one weight per index), got "
                                 f"{tuple(per_sample_weights.shape)}")

    @embedding_bag.register_fake
    def _(weight, indices, offsets, per_sample_weights=None, mode="sum"):
        check_embedding_bag("embedding_bag", weight, indices, offsets, per_sample_weights, mode)
        return weight.new_empty((offsets.shape[0] - 1, weight.shape[1]))

    @lib_op("warpweave::embedding_bag_bwd", mutates_args=())
    def embedding_bag_bwd(grad_out: torch.Tensor, weight: torch.Tensor, indices: torch.Tensor,
                          offsets: torch.Tensor, per_sample_weights: Optional[torch.Tensor],
                          mode: str, sample_weights_grad: bool
                          ) -> tuple[torch.Tensor, torch.Tensor]:
        op = "embedding_bag_bwd"
        gw, gs = _check_err(lambda: _run(
            op, _embedding_bag.embedding_bag_bwd,
            {"grad_out": grad_out, "weight": weight, "indices": indices, "offsets": offsets,
             "per_sample_weights": per_sample_weights}, mode=mode,
            sample_weights_grad=sample_weights_grad), op)
        if gs is None:  # (an empty tensor stands for "not asked")
            gs = weight.new_empty((0,))
        return gw, gs

    @embedding_bag_bwd.register_fake
    def _(grad_out, weight, indices, offsets, per_sample_weights, mode, sample_weights_grad):
        op = "embedding_bag_bwd"
        check_embedding_bag(op, weight, indices, offsets, per_sample_weights, mode)
        _check_dtype(op, "grad_out", grad_out, _FLOATS)
        gs = (per_sample_weights.new_empty(indices.shape)
              if sample_weights_grad and per_sample_weights is not None
              else weight.new_empty((0,)))
        return weight.new_empty(weight.shape), gs

    def embedding_bag_setup(ctx, inputs, output):
        weight, indices, offsets, per_sample_weights, mode = inputs
        ctx.mode = mode
        ctx.save_for_backward(weight, indices, offsets, per_sample_weights)

    def embedding_bag_backward(ctx, grad):
        weight, indices, offsets, per_sample_weights = ctx.saved_tensors
        want_sample = per_sample_weights is not None and ctx.needs_input_grad[3]
        gw, gs = torch.ops.warpweave.embedding_bag_bwd(
            grad.contiguous(), weight, indices, offsets, per_sample_weights, ctx.mode,
            want_sample)
        return gw, None, None, gs if want_sample else None, None

    embedding_bag.register_autograd(embedding_bag_backward, setup_context=embedding_bag_setup)

    # attention ---------------------------------------------------------------------------------
    @lib_op("warpweave::attention", mutates_args=())
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                  sm_scale: Optional[float] = None) -> tuple[torch.Tensor, torch.Tensor]:
        return _check_err(lambda: _run("attention", _attention.attention,
                                       {"q": q, "k": k, "v": v}, causal=causal,
                                       sm_scale=sm_scale, return_lse=True), "attention")

    @attention.register_fake
    def _(q, k, v, causal=False, sm_scale=None):
        _device_of("attention", {"q": q, "k": k, "v": v})
        _check_attention("attention", q, k, v)
        return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)

    @lib_op("warpweave::attention_bwd", mutates_args=())
    def attention_bwd(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      out: torch.Tensor, lse: torch.Tensor, causal: bool = False,
                      sm_scale: Optional[float] = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return _check_err(lambda: _run("attention_bwd", _attention.attention_bwd,
                                       {"do": do, "q": q, "k": k, "v": v, "out": out,
                                        "lse": lse}, causal=causal, sm_scale=sm_scale),
                          "attention_bwd")

    @attention_bwd.register_fake
    def _(do, q, k, v, out, lse, causal=False, sm_scale=None):
        op = "attention_bwd"
        _device_of(op, {"do": do, "q": q, "k": k, "v": v, "out": out, "lse": lse})
        _check_attention(op, q, k, v)
        _check_same(op, "do", do, "q", q)
        _check_same(op, "out", out, "q", q)
        return q.new_empty(q.shape), q.new_empty(q.shape), q.new_empty(q.shape)

    def attention_setup(ctx, inputs, output):
        q, k, v, causal, sm_scale = inputs
        out, lse = output
        ctx.mark_non_differentiable(lse)
        ctx.causal = causal
        ctx.sm_scale = sm_scale
        ctx.save_for_backward(q, k, v, out, lse)

    def attention_backward(ctx, do, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        do = torch.zeros_like(out) if do is None else do.to(out.dtype).contiguous()
        dq, dk, dv = torch.ops.warpweave.attention_bwd(do, q, k, v, out, lse, ctx.causal,
                                                       ctx.sm_scale)
        return dq, dk, dv, None, None

    attention.register_autograd(attention_backward, setup_context=attention_setup)

    # variable-length attention -----------------------------------------------------------------
    @lib_op("warpweave::attention_varlen", mutates_args=())
    def attention_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                         max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                         sm_scale: Optional[float] = None) -> tuple[torch.Tensor, torch.Tensor]:
        op = "attention_varlen"
        return _check_err(lambda: _run(op, _attention.attention_varlen,
                                       {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q,
                                        "cu_seqlens_k": cu_seqlens_k},
                                       max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                                       causal=causal, sm_scale=sm_scale, return_lse=True), op)

    @attention_varlen.register_fake
    def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
          sm_scale=None):
        _check_attention_varlen("attention_varlen", q, k, v, cu_seqlens_q, cu_seqlens_k)
        return q.new_empty(q.shape), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)

    @lib_op("warpweave::attention_varlen_bwd", mutates_args=())
    def attention_varlen_bwd(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                             v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                             cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                             max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                             sm_scale: Optional[float] = None
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        op = "attention_varlen_bwd"
        return _check_err(lambda: _run(op, _attention.attention_varlen_bwd,
                                       {"do": do, "q": q, "k": k, "v": v, "out": out,
                                        "lse": lse, "cu_seqlens_q": cu_seqlens_q,
                                        "cu_seqlens_k": cu_seqlens_k},
                                       max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                                       causal=causal, sm_scale=sm_scale), op)

    @attention_varlen_bwd.register_fake
    def _(do, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
          causal=False, sm_scale=None):
        op = "attention_varlen_bwd"
        _check_attention_varlen(op, q, k, v, cu_seqlens_q, cu_seqlens_k,
                                {"do": do, "out": out, "lse": lse})
        _check_same(op, "do", do, "q", q)
        _check_same(op, "out", out, "q", q)
        _check_dtype(op, "lse", lse, (torch.float32,))
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)

    def attention_varlen_setup(ctx, inputs, output):
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, sm_scale = inputs
        out, lse = output
        ctx.mark_non_differentiable(lse)
        ctx.varlen_args = (max_seqlen_q, max_seqlen_k, causal, sm_scale)
        ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k)

    def attention_varlen_backward(ctx, do, _dlse):
        q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
        do = torch.zeros_like(out) if do is None else do.to(out.dtype).contiguous()
        dq, dk, dv = torch.ops.warpweave.attention_varlen_bwd(
            do, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, *ctx.varlen_args)
        return dq, dk, dv, None, None, None, None, None, None

    attention_varlen.register_autograd(attention_varlen_backward,
                                       setup_context=attention_varlen_setup)

    # row reductions ----------------------------------------------------------------------------
    @lib_op("warpweave::row_sum", mutates_args=())
    def row_sum(x: torch.Tensor) -> torch.Tensor:
        return _check_err(lambda: _run("row_sum", _reduction.row_sum, {"x": x}), "row_sum")

    @row_sum.register_fake
    def _(x):
        _device_of("row_sum", {"x": x})
        _check_dtype("row_sum", "x", x, _FLOATS)
        _check_ndim("row_sum", "x", x, 2)
        return x.new_empty((x.shape[0],), dtype=torch.float32)

    def row_sum_setup(ctx, inputs, output):
        (x,) = inputs
        ctx.shape, ctx.dtype = x.shape, x.dtype

    def row_sum_backward(ctx, grad):
        return grad[:, None].expand(ctx.shape).to(ctx.dtype)

    row_sum.register_autograd(row_sum_backward, setup_context=row_sum_setup)

    @lib_op("warpweave::row_max", mutates_args=())
    def row_max(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _check_err(lambda: _run("row_max", _reduction.row_max, {"x": x}), "row_max")

    @row_max.register_fake
    def _(x):
        _device_of("row_max", {"x": x})
        _check_dtype("row_max", "x", x, _FLOATS)
        _check_ndim("row_max", "x", x, 2)
        return (x.new_empty((x.shape[0],), dtype=torch.float32),
                x.new_empty((x.shape[0],), dtype=torch.int32))


def _define_gemms():
    lib_op = torch.library.custom_op

    # scaled fp8 GEMM ---------------------------------------------------------------------------
    @lib_op("warpweave::scaled_mm", mutates_args=())
    def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                  scale_b: torch.Tensor, bias: Optional[torch.Tensor] = None,
                  out_dtype: Optional[torch.dtype] = None,
                  use_fast_accum: bool = False) -> torch.Tensor:
        op = "scaled_mm"
        check_scaled_mm(a, b, scale_a, scale_b, bias, out_dtype)
        return _check_err(lambda: _run(op, _scaled_mm.scaled_mm,
                                       {"a": a, "b": b, "scale_a": scale_a, "scale_b": scale_b,
                                        "bias": bias}, out_dtype=out_dtype,
                                       use_fast_accum=use_fast_accum), op)

    def check_scaled_mm(a, b, scale_a, scale_b, bias, out_dtype):
        op = "scaled_mm"
        _device_of(op, {"a": a, "b": b, "scale_a": scale_a, "scale_b": scale_b, "bias": bias})
        _check_dtype(op, "a", a, _FP8)
        _check_dtype(op, "b", b, _FP8)
        _check_ndim(op, "a", a, 2, " [M, K]")
        _check_ndim(op, "b", b, 2, " [K, N]")
        if b.shape[0] != a.shape[1]:
            raise ValueError(f"warpweave::{op}: 'b' has shape {tuple(b.shape)} but 'a' has "
                             f"{tuple(a.shape)}; b's first dimension must equal a's second")
        if out_dtype is not None and out_dtype not in _FLOATS:
            raise ValueError(f"warpweave::{op}: 'out_dtype' must be bfloat16, float16 or "
                             f"float32, got {out_dtype} (fp8 outputs are not produced)")
        _check_dtype(op, "scale_a", scale_a, (torch.float32,))
        _check_dtype(op, "scale_b", scale_b, (torch.float32,))
        if bias is not None:
            _check_dtype(op, "bias", bias, _FLOATS)
            if tuple(bias.shape) != (b.shape[1],):
                raise ValueError(f"warpweave::{op}: 'bias' must have shape ({b.shape[1]},) "
                                 f"(b's second dimension), got {tuple(bias.shape)}")

    @scaled_mm.register_fake
    def _(a, b, scale_a, scale_b, bias=None, out_dtype=None, use_fast_accum=False):
        check_scaled_mm(a, b, scale_a, scale_b, bias, out_dtype)
        return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or torch.bfloat16)

    # mxfp8 GEMM (block-scaled; Blackwell) -----------------------------------------------------
    @lib_op("warpweave::scaled_mm_mx", mutates_args=())
    def scaled_mm_mx(a: torch.Tensor, b: torch.Tensor, a_scales: torch.Tensor,
                     b_scales: torch.Tensor, out_dtype: Optional[torch.dtype] = None
                     ) -> torch.Tensor:
        op = "scaled_mm_mx"
        check_scaled_mm_mx(a, b, a_scales, b_scales, out_dtype)
        return _check_err(lambda: _run(op, _scaled_mm.scaled_mm_mx,
                                       {"a": a, "b": b, "a_scales": a_scales,
                                        "b_scales": b_scales}, out_dtype=out_dtype), op)

    def check_scaled_mm_mx(a, b, a_scales, b_scales, out_dtype):
        op = "scaled_mm_mx"
        _device_of(op, {"a": a, "b": b, "a_scales": a_scales, "b_scales": b_scales})
        _check_dtype(op, "a", a, _FP8)
        _check_dtype(op, "b", b, _FP8)
        _check_ndim(op, "a", a, 2, " [M, K]")
        _check_ndim(op, "b", b, 2, " [K, N]")
        if b.shape[0] != a.shape[1]:
            raise ValueError(f"warpweave::{op}: 'b' has shape {tuple(b.shape)} but 'a' has "
                             f"{tuple(a.shape)}; b's first dimension must equal a's second")
        if a.shape[1] % 32:
            raise ValueError(f"warpweave::{op}: K must be a multiple of 32 (one e8m0 scale per "
                             f"32 elements), got K={a.shape[1]}")
        if out_dtype is not None and out_dtype not in _FLOATS:
            raise ValueError(f"warpweave::{op}: 'out_dtype' must be bfloat16, float16 or "
                             f"float32, got {out_dtype}")
        scale_types = tuple(t for t in (torch.uint8, getattr(torch, "float8_e8m0fnu", None))
                            if t is not None)
        for name, t, rows in (("a_scales", a_scales, a.shape[0]), ("b_scales", b_scales,
                                                                   b.shape[1])):
            _check_dtype(op, name, t, scale_types)
            if tuple(t.shape) != (rows, a.shape[1] // 32):
                raise ValueError(f"warpweave::{op}: '{name}' must have shape "
                                 f"({rows}, {a.shape[1] // 32}) (one scale per 32 elements of "
                                 f"K), got {tuple(t.shape)}")

    @scaled_mm_mx.register_fake
    def _(a, b, a_scales, b_scales, out_dtype=None):
        check_scaled_mm_mx(a, b, a_scales, b_scales, out_dtype)
        return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or torch.bfloat16)

    # grouped GEMM ------------------------------------------------------------------------------
    @lib_op("warpweave::grouped_mm", mutates_args=())
    def grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        op = "grouped_mm"
        check_grouped_mm(a, b, offs)
        return _check_err(lambda: _run(op, _grouped_mm.grouped_mm,
                                       {"a": a, "b": b, "offs": offs}), op)

    def check_grouped_mm(a, b, offs):
        op = "grouped_mm"
        _device_of(op, {"a": a, "b": b, "offs": offs})
        _check_dtype(op, "a", a, _FLOATS)
        if b.dtype != a.dtype:
            raise ValueError(f"warpweave::{op}: 'b' has dtype {b.dtype} but 'a' has {a.dtype}; "
                             f"both must have one dtype")
        _check_dtype(op, "offs", offs, (torch.int32,))
        _check_ndim(op, "offs", offs, 1, " [G] (cumulative group ends)")
        _check_ndim(op, "a", a, 2)
        if offs.shape[0] == 0:
            raise ValueError(f"warpweave::{op}: 'offs' is empty; it needs one entry per group")
        if b.dim() == 3:
            if b.shape[0] != offs.shape[0] or b.shape[1] != a.shape[1]:
                raise ValueError(f"warpweave::{op}: 'b' has shape {tuple(b.shape)}; with 'a' "
                                 f"{tuple(a.shape)} and {offs.shape[0]} groups it must be "
                                 f"[{offs.shape[0]}, {a.shape[1]}, N]")
        elif b.dim() == 2:
            if b.shape[0] != a.shape[1]:
                raise ValueError(f"warpweave::{op}: 'b' has shape {tuple(b.shape)} but 'a' "
                                 f"has {tuple(a.shape)}; b's first dimension must equal a's "
                                 f"second (the ragged K)")
        else:
            raise ValueError(f"warpweave::{op}: 'b' must be 3-D [G, K, N] or 2-D [K_total, N], "
                             f"got shape {tuple(b.shape)}")

    @grouped_mm.register_fake
    def _(a, b, offs):
        check_grouped_mm(a, b, offs)
        if b.dim() == 3:
            return a.new_empty((a.shape[0], b.shape[2]))
        return a.new_empty((offs.shape[0], a.shape[0], b.shape[1]))

    def grouped_mm_setup(ctx, inputs, output):
        a, b, offs = inputs
        ctx.save_for_backward(a, b, offs)

    def grouped_mm_backward(ctx, grad):
        a, b, offs = ctx.saved_tensors
        grad = grad.to(a.dtype)
        gmm = torch.ops.warpweave.grouped_mm
        da = db = None
        if b.dim() == 3:  # out [M_total, N] = rows of group g @ b[g]
            if ctx.needs_input_grad[0]:
                da = gmm(grad, b.transpose(1, 2), offs)
            if ctx.needs_input_grad[1]:
                db = gmm(a.t(), grad, offs)  # ragged K: [G, K, N]
        else:  # out [G, M, N] = a[:, cols of g] @ b[rows of g]
            if ctx.needs_input_grad[0]:
                da = gmm(b, grad.transpose(1, 2), offs).t()  # [K_total, M] -> [M, K_total]
            if ctx.needs_input_grad[1]:
                db = gmm(a.t(), grad, offs)  # [K_total, N]
        return da, db, None

    grouped_mm.register_autograd(grouped_mm_backward, setup_context=grouped_mm_setup)


def register() -> None:
    """Defines torch.ops.warpweave.* once per process."""
    global _registered
    if _registered:
        return
    _registered = True
    if hasattr(torch.ops, "warpweave") and hasattr(torch.ops.warpweave, "softmax"):
        return  # (another copy of this module defined them)
    _define()
    _define_gemms()

