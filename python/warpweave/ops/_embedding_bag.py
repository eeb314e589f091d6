"""Embedding bag (kernels/embedding_bag.py)."""

from __future__ import annotations

import warpweave as ww

from ._common import (_FLOATS, _INDEX_TYPES, _Place, _check_dtype, _check_ndim, _check_shape,
                      _contiguous, _dtype_name, _rows_unit_stride, _strides)
from .kernels import embedding_bag as embedding_bag_kernels


def _check_bag_inputs(op, weight, indices, offsets, mode):
    """The checks the forward and the backward share; returns weight's element type."""
    dt = _check_dtype(op, "weight", weight, _FLOATS)
    _check_ndim(op, "weight", weight, (2,), " [num_embeddings, D]")
    _check_dtype(op, "indices", indices, _INDEX_TYPES)
    _check_dtype(op, "offsets", offsets, _INDEX_TYPES)
    _check_ndim(op, "indices", indices, (1,))
    _check_ndim(op, "offsets", offsets, (1,), " (num_bags + 1 entries)")
    if mode not in ("sum", "mean"):
        raise ValueError(f"{op}: 'mode' must be 'sum' or 'mean', got {mode!r}")
    if offsets.shape[0] < 1:
        raise ValueError(f"{op}: 'offsets' needs num_bags + 1 entries (at least 1), got none")
    return dt


def embedding_bag(weight, indices, offsets, per_sample_weights=None, mode="sum", config=None):
    """out[b] = sum over i in [offsets[b], offsets[b+1]) of s_i * weight[indices[i]], with s_i =
    per_sample_weights[i] (or 1), divided by the bag size when mode="mean" (an empty bag gives
    zeros). offsets are CSR style, num_bags + 1 entries (torch's include_last_offset=True).
    weight [num_embeddings, D] fp16/bf16/fp32; indices, offsets int32/int64; per_sample_weights
    float, one per index. Returns [num_bags, D] in weight's dtype, summed in fp32.

    With NumPy inputs the indices and offsets are checked against the table; with CUDA tensors
    they are not (that would synchronize the GPU), as with torch. `config` (for
    bench/sweep_memory.py) overrides BLOCK_I, BLOCK_D and num_warps."""
    config = config or {}
    op = "embedding_bag"
    place = _Place(op, {"weight": weight, "indices": indices, "offsets": offsets,
                        "per_sample_weights": per_sample_weights})
    dt = _check_bag_inputs(op, weight, indices, offsets, mode)
    if per_sample_weights is not None:
        _check_dtype(op, "per_sample_weights", per_sample_weights, _FLOATS)
        _check_shape(op, "per_sample_weights", per_sample_weights, tuple(indices.shape),
                     " (one weight per index)")
    num_embeddings, dim = weight.shape
    num_bags = offsets.shape[0] - 1
    if place.kind == "numpy":
        import numpy as np

        if num_bags > 0 and (offsets[0] < 0 or offsets[-1] > indices.shape[0] or
                             np.any(np.diff(offsets) < 0)):
            raise ValueError(f"{op}: 'offsets' must be non-decreasing within [0, "
                             f"{indices.shape[0]}] (the number of indices)")
        if indices.size and (indices.min() < 0 or indices.max() >= num_embeddings):
            raise ValueError(f"{op}: 'indices' must lie in [0, {num_embeddings}) (weight's "
                             f"rows), got values in [{indices.min()}, {indices.max()}]")
    out = place.empty((num_bags, dim), dt)
    if num_bags == 0 or dim == 0:
        return out
    weight = _rows_unit_stride(weight)
    has_weights = per_sample_weights is not None
    # One warp per [BLOCK_I, 64] tile: on the H200 (1M x 128 fp16, 32768 bags of 32) 4.06 TB/s
    # against 2.04 for two warps on [32, 128] tiles and 3.95 for one warp on them
    # (bench/sweep_memory.py): more, smaller programs keep more bags in flight per SM.
    block_d = config.get("BLOCK_D") or min(64, max(16, ww.next_power_of_2(dim)))
    # A whole bag of the average size in one tile (its row loads all in flight together), from
    # the shapes alone: reading the offsets would synchronize the GPU.
    average_bag = ww.cdiv(indices.shape[0], num_bags)
    block_i = config.get("BLOCK_I") or min(32, max(8, ww.next_power_of_2(average_bag)))
    place.launch(
        embedding_bag_kernels.embedding_bag_kernel,
        lambda m: (num_bags, ww.cdiv(dim, m["BLOCK_D"])),
        weight, _contiguous(indices), _contiguous(offsets),
        _contiguous(per_sample_weights) if has_weights else weight, out,
        dim, _strides(weight)[0], dim,
        BLOCK_I=block_i, BLOCK_D=block_d, HAS_SAMPLE_WEIGHTS=has_weights, MEAN=mode == "mean",
        num_warps=config.get("num_warps") or 1)
    return out


def embedding_bag_bwd(grad_out, weight, indices, offsets, per_sample_weights=None, mode="sum",
                      sample_weights_grad=False):
    """Gradients of embedding_bag(weight, indices, offsets, per_sample_weights, mode) given the
    gradient grad_out [num_bags, D] of its output: returns (grad_weight [num_embeddings, D] in
    weight's dtype, grad_per_sample_weights [num_indices] in per_sample_weights' dtype or None).
    The latter is computed only with sample_weights_grad=True (and per_sample_weights given).
    Rows are summed with fp32 atomics (kernels/embedding_bag.py's embedding_bag_bwd_kernel), so
    the order of the additions, and the last bits of a repeated row's sum, can vary on the
    GPU."""
    op = "embedding_bag_bwd"
    place = _Place(op, {"grad_out": grad_out, "weight": weight, "indices": indices,
                        "offsets": offsets, "per_sample_weights": per_sample_weights})
    dt = _check_bag_inputs(op, weight, indices, offsets, mode)
    num_embeddings, dim = weight.shape
    num_bags = offsets.shape[0] - 1
    _check_dtype(op, "grad_out", grad_out, _FLOATS)
    _check_shape(op, "grad_out", grad_out, (num_bags, dim), " [num_bags, D]")
    has_weights = per_sample_weights is not None
    if has_weights:
        _check_dtype(op, "per_sample_weights", per_sample_weights, _FLOATS)
        _check_shape(op, "per_sample_weights", per_sample_weights, tuple(indices.shape),
                     " (one weight per index)")
    want_sample_grad = bool(sample_weights_grad) and has_weights
    grad_weight = place.empty((num_embeddings, dim), "float32")
    grad_weight[...] = 0
    grad_sample = None
    if want_sample_grad:
        grad_sample = place.empty(tuple(indices.shape), "float32")
        grad_sample[...] = 0
    if num_bags > 0 and dim > 0 and indices.shape[0] > 0:
        weight = _rows_unit_stride(weight)
        grad_out = _rows_unit_stride(grad_out)
        block_d = min(64, max(16, ww.next_power_of_2(dim)))
        average_bag = ww.cdiv(indices.shape[0], num_bags)
        block_i = min(32, max(8, ww.next_power_of_2(average_bag)))
        place.launch(
            embedding_bag_kernels.embedding_bag_bwd_kernel, (num_bags, ww.cdiv(dim, block_d)),
            grad_out, _contiguous(indices), _contiguous(offsets),
            _contiguous(per_sample_weights) if has_weights else grad_weight, weight, grad_weight,
            grad_sample if want_sample_grad else grad_weight,
            dim, _strides(grad_out)[0], _strides(weight)[0], dim,
            BLOCK_I=block_i, BLOCK_D=block_d, HAS_SAMPLE_WEIGHTS=has_weights,
            MEAN=mode == "mean", SAMPLE_WEIGHTS_GRAD=want_sample_grad, num_warps=1)
    if dt != "float32":
        cast = place.empty((num_embeddings, dim), dt)
        cast[...] = grad_weight
        grad_weight = cast
    if grad_sample is not None and _dtype_name(per_sample_weights) != "float32":
        cast = place.empty(tuple(indices.shape), _dtype_name(per_sample_weights))
        cast[...] = grad_sample
        grad_sample = cast
    return grad_weight, grad_sample
