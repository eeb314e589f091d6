"""Embedding bag: out[b, :] = sum over i in [offsets[b], offsets[b+1]) of s_i * weight[indices[i], :]

with s_i = per_sample_weights[i] when HAS_SAMPLE_WEIGHTS, else 1, divided by the bag size when
MEAN (an empty bag gives zeros). weight is [num_embeddings, D] with row stride stride_w; indices
are int32 or int64; offsets (int32 or int64) has num_bags + 1 entries, CSR style. Sums are fp32
and stored in out's element type.

Each program gathers BLOCK_I rows of its bag at a time as one [BLOCK_I, BLOCK_D] tile (a whole
bag at once when BLOCK_I covers it), so that all of its row loads are in flight together. The
programs are small (one warp, 64 registers for a [32, 64] tile) so that many bags are in flight
on each SM.
Columns are split across the second grid axis.
    grid = (num_bags, cdiv(D, BLOCK_D))
    constexprs: BLOCK_I (e.g. 32), BLOCK_D (e.g. 64), HAS_SAMPLE_WEIGHTS, MEAN
    signature: weight_ptr:*fp16:16, indices_ptr:*i64:16, offsets_ptr:*i64:16,
               sample_weights_ptr:*fp32:16, out_ptr:*fp16:16, D:i32:16, stride_w:i32:16,
               stride_out:i32:16, BLOCK_I=32, BLOCK_D=128, HAS_SAMPLE_WEIGHTS=False, MEAN=False
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def embedding_bag_kernel(weight_ptr, indices_ptr, offsets_ptr, sample_weights_ptr, out_ptr,
                         D, stride_w, stride_out,
                         BLOCK_I: tl.constexpr, BLOCK_D: tl.constexpr,
                         HAS_SAMPLE_WEIGHTS: tl.constexpr, MEAN: tl.constexpr):
    bag = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    col_mask = cols < D
    begin = tl.load(offsets_ptr + bag)
    end = tl.load(offsets_ptr + bag + 1)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for start in range(begin, end, BLOCK_I):
        positions = start + tl.arange(0, BLOCK_I)
        in_bag = positions < end
        rows = tl.load(indices_ptr + positions, mask=in_bag, other=0).to(tl.int64)
        tile_mask = in_bag[:, None] & col_mask[None, :]
        tile = tl.load(weight_ptr + rows[:, None] * stride_w + cols[None, :], mask=tile_mask,
                       other=0.0).to(tl.float32)
        if HAS_SAMPLE_WEIGHTS:
            scale = tl.load(sample_weights_ptr + positions, mask=in_bag, other=0.0)
            tile = tile * scale.to(tl.float32)[:, None]
        acc += tl.sum(tile, axis=0)
    total = acc
    if MEAN:
        count = (end - begin).to(tl.float32)
        total = total / tl.maximum(count, 1.0)
    out_row = out_ptr + bag.to(tl.int64) * stride_out
    tl.store(out_row + cols, total.to(out_ptr.dtype.element_ty), mask=col_mask)


@ww.jit
def embedding_bag_bwd_kernel(grad_out_ptr, indices_ptr, offsets_ptr, sample_weights_ptr,
                             weight_ptr, grad_weight_ptr, grad_sample_weights_ptr,
                             D, stride_grad_out, stride_w, stride_grad_w,
                             BLOCK_I: tl.constexpr, BLOCK_D: tl.constexpr,
                             HAS_SAMPLE_WEIGHTS: tl.constexpr, MEAN: tl.constexpr,
                             SAMPLE_WEIGHTS_GRAD: tl.constexpr):
    """The gradients of embedding_bag_kernel: grad_weight[indices[i], :] += s_i * g_b for each
    position i of bag b, g_b = grad_out[b, :] (divided by the bag size when MEAN), added with fp32
    atomics into grad_weight (fp32, zeroed by the caller: rows repeat across bags); with
    SAMPLE_WEIGHTS_GRAD also grad_sample_weights[i] += dot(g_b, weight[indices[i], :]) over this
    program's columns (fp32 atomics, zeroed by the caller).
        grid = (num_bags, cdiv(D, BLOCK_D))"""
    bag = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    col_mask = cols < D
    begin = tl.load(offsets_ptr + bag)
    end = tl.load(offsets_ptr + bag + 1)
    g = tl.load(grad_out_ptr + bag.to(tl.int64) * stride_grad_out + cols, mask=col_mask,
                other=0.0).to(tl.float32)
    if MEAN:
        g = g / tl.maximum((end - begin).to(tl.float32), 1.0)
    for start in range(begin, end, BLOCK_I):
        positions = start + tl.arange(0, BLOCK_I)
        in_bag = positions < end
        rows = tl.load(indices_ptr + positions, mask=in_bag, other=0).to(tl.int64)
        tile_mask = in_bag[:, None] & col_mask[None, :]
        contribution = tl.zeros([BLOCK_I, BLOCK_D], dtype=tl.float32) + g[None, :]
        if HAS_SAMPLE_WEIGHTS:
            scale = tl.load(sample_weights_ptr + positions, mask=in_bag, other=0.0)
            contribution = contribution * scale.to(tl.float32)[:, None]
        # Relaxed: the sums are only read after the launch, so nothing needs ordering around
        # them (the default acq_rel would fence every add).
        tl.atomic_add(grad_weight_ptr + rows[:, None] * stride_grad_w + cols[None, :],
                      contribution, mask=tile_mask, sem="relaxed")
        if SAMPLE_WEIGHTS_GRAD:
            tile = tl.load(weight_ptr + rows[:, None] * stride_w + cols[None, :], mask=tile_mask,
                           other=0.0).to(tl.float32)
            tl.atomic_add(grad_sample_weights_ptr + positions, tl.sum(tile * g[None, :], axis=1),
                          mask=in_bag, sem="relaxed")
