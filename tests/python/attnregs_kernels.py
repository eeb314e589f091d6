"""A flash-attention forward kernel reading Q, K, V and writing O through host tensor
descriptors (the form of Triton's fused-attention tutorial on Hopper), shared by
tests/python/test_attention_tma_pipeline.py and tests/gpu/test_attention_tma_pipeline_gpu.py.

Rows of all heads are stacked: Q, K, V and O are [Z * H * N_CTX, HEAD_DIM] views; N_CTX is a
multiple of BLOCK_M and BLOCK_N. CAUSAL runs the off-diagonal blocks in one loop and the
diagonal block in a second, masked one. attention_device_desc_fwd is the same kernel over
descriptors it makes itself (tensor maps in set_allocator's scratch on sm_90a)."""

import warpweave as ww
import warpweave.language as tl


@ww.jit
def _attend(acc, row_sum, row_max, q, k_desc, v_desc, first_row, lo, hi, scale, rows,
            BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    k_row = first_row + lo
    v_row = first_row + lo
    for start in tl.range(lo, hi, BLOCK_N):
        k = k_desc.load([k_row, 0]).T
        s = tl.dot(q, k)
        if MASKED:
            cols = start + tl.arange(0, BLOCK_N)
            s = s * scale + tl.where(rows[:, None] >= cols[None, :], 0.0, -1.0e6)
            new_max = tl.maximum(row_max, tl.max(s, 1))
            s -= new_max[:, None]
        else:
            new_max = tl.maximum(row_max, tl.max(s, 1) * scale)
            s = s * scale - new_max[:, None]
        p = tl.math.exp2(s)
        alpha = tl.math.exp2(row_max - new_max)
        p_sum = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = v_desc.load([v_row, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)
        row_sum = row_sum * alpha + p_sum
        row_max = new_max
        k_row += BLOCK_N
        v_row += BLOCK_N
    return acc, row_sum, row_max


@ww.jit
def attention_tma_fwd(q_desc, k_desc, v_desc, o_desc, lse_ptr, sm_scale, H, N_CTX,
                      HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      CAUSAL: tl.constexpr):
    block_m = tl.program_id(0)
    head = tl.program_id(1)
    first_row = head * N_CTX
    q_row = first_row + block_m * BLOCK_M
    rows = block_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.full([BLOCK_M], 1.0, tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    scale = sm_scale * 1.44269504
    q = q_desc.load([q_row, 0])
    if CAUSAL:
        acc, row_sum, row_max = _attend(acc, row_sum, row_max, q, k_desc, v_desc, first_row, 0,
                                        block_m * BLOCK_M, scale, rows, BLOCK_N, False)
        acc, row_sum, row_max = _attend(acc, row_sum, row_max, q, k_desc, v_desc, first_row,
                                        block_m * BLOCK_M, (block_m + 1) * BLOCK_M, scale, rows,
                                        BLOCK_N, True)
    else:
        acc, row_sum, row_max = _attend(acc, row_sum, row_max, q, k_desc, v_desc, first_row, 0,
                                        N_CTX, scale, rows, BLOCK_N, False)
    lse = row_max + tl.math.log2(row_sum)
    tl.store(lse_ptr + head * N_CTX + rows, lse)
    o_desc.store([q_row, 0], (acc / row_sum[:, None]).to(tl.float16))


@ww.jit
def attention_device_desc_fwd(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, sm_scale, H, N_CTX,
                              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """attention_tma_fwd over descriptors made here (the Hopper warp-specialized form of
    Triton's fused-attention tutorial): Q, K, V, O are [H * N_CTX, HEAD_DIM] row-major."""
    rows = H * N_CTX
    q_desc = tl.make_tensor_descriptor(q_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(o_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    attention_tma_fwd(q_desc, k_desc, v_desc, o_desc, lse_ptr, sm_scale, H, N_CTX, HEAD_DIM,
                      BLOCK_M, BLOCK_N, CAUSAL)
