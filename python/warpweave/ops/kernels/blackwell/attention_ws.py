"""Blackwell (sm_100a) fused attention forward, warp-specialized, with S, P and O in tensor memory
(tcgen05), written with TLX:

    out = softmax(Q @ K^T * sm_scale) @ V,   lse = row-wise log2-sum-exp2 of the scaled scores

The inputs and outputs are the Hopper kernel's (kernels/hopper/attention_ws.py), so the backward
and ops.attention's autograd take them unchanged: Q, K, V, out [Z, H, N_CTX, HEAD_DIM] fp16 or
bf16, contiguous, seen by the host descriptors as 2-D [Z * H * N_CTX, HEAD_DIM]; lse fp32
[Z * H, N_CTX], base 2. N_CTX must be a multiple of 2 * BLOCK_M and of BLOCK_N (tiles never
straddle two heads). CAUSAL masks keys after the query.

Each program owns 2 * BLOCK_M query rows of one (batch, head), two sub-tiles of BLOCK_M rows
(BLOCK_M 128: one tensor-memory lane per row; 64 takes the PTX ISA's 64-row layout). Tasks:
  - load (1 warp): both Q sub-tiles once, then K and V through a NUM_STAGES ring with TMA;
  - MMA (1 warp) issues every tcgen05 MMA, in the order
        PV_{j-1}(0), S_j(0), PV_{j-1}(1), S_j(1)
    so that the tensor cores run one sub-tile's MMAs while the other's softmax works (the
    ping-pong is the dependence order: no turn barriers);
  - softmax (two 4-warp groups, one per sub-tile; tensor-memory row r is thread r's): reads S_j,
    folds it into the running max m and sum l, publishes alpha = exp2(scale * (m_old - m_new))
    as soon as the max is known, then computes P = exp2(scale * S - scale * m) and writes it in
    fp16 / bf16 over the upper half of S's own columns, where PV_j reads it as the MMA's A;
  - correction (the default task, 4 warps): rescales O[c] by alpha in tensor memory (32
    columns at a time) while the softmax group is still on its exp2s, so the O round trip is
    off the softmax's path; it also runs the epilogue (O / l through the Q buffer and TMA).
Ordering that no barrier carries, because one thread's tcgen05 MMAs run in issue order and a
commit tracks every earlier MMA of the thread: S_{j+1}(c) overwrites P_j(c) only after PV_j(c)
read it, and S_j(c)'s commit (s_full) also says PV_{j-1}(c) finished, so alpha_full (which the
softmax arrives on after that wait) lets the correction read O[c].

Barriers (arrive count 1; a task arrives once however many warps it has):
  q_full[c]; k_full / v_full[stage] (the loader's expect-bytes); k_empty / v_empty[stage] (the
  commit of S_j(1) / PV_j(1): sub-tile 0's MMA on the same tile was issued before it);
  s_full[c] (commit of S_j(c)); alpha_full[c] (softmax -> correction, steps j >= 1);
  o_fixed[c] (correction -> MMA: O[c] ready for PV_j; step 0 arrives without work, so its
  phases follow p_full's); p_full[c] (softmax -> MMA); o_done[c] (commit of the last PV(c));
  l_full[c] (softmax -> epilogue: the row sums).
Tensor memory: S[c] [BLOCK_M, BLOCK_N] fp32 (P[c] over its upper half), O[c] [BLOCK_M,
HEAD_DIM] fp32: 2 * (BLOCK_N + HEAD_DIM) columns, 512 at HEAD_DIM 128.
    grid = (N_CTX // (2 * BLOCK_M), Z * H)
    constexprs: HEAD_DIM (64 or 128), BLOCK_M (128, or 64), BLOCK_N=128, NUM_STAGES=2,
                CAUSAL (False)
    descriptors: q_desc and o_desc block [BLOCK_M, HEAD_DIM], k_desc and v_desc block
                 [BLOCK_N, HEAD_DIM]
    launch: num_warps=4 (the default task; softmax adds 8 warps, load and MMA one each)
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from ..hopper.attention_ws import load_q_and_kv, program_rows


@ww.jit
def softmax_step(s_tile, p_tile, alpha_buf, alpha_full, p_full, m_i, l_i, qk_scale, j, offs_m,
                 dtype: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
                 FIRST: tl.constexpr):
    """Folds S_j (already committed) into m_i (raw units) and l_i, hands alpha to the
    correction (not on the first block: O holds nothing yet) and P_j to the MMA task."""
    qk = tlx.local_load(s_tile)
    if MASKED:
        keys = j * BLOCK_N + tl.arange(0, BLOCK_N)
        qk = tl.where(offs_m[:, None] >= keys[None, :], qk, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(qk, axis=1))
    m_scaled = m_new * qk_scale
    alpha = tl.exp2(tl.fma(m_i, qk_scale, -m_scaled))
    if not FIRST:
        tlx.local_store(alpha_buf, alpha)
        tlx.barrier_arrive(alpha_full)
    p = tl.exp2(tl.fma(qk, qk_scale, -m_scaled[:, None]))
    l_i = l_i * alpha + tl.sum(p, axis=1)
    tlx.local_store(p_tile, p.to(dtype))
    tlx.barrier_arrive(p_full)
    return m_new, l_i


@ww.jit
def attention_ws_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, sm_scale, N_CTX,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr = False):
    dtype: tl.constexpr = tlx.dtype_of(q_desc)
    Q_BYTES: tl.constexpr = BLOCK_M * HEAD_DIM * tlx.size_of(dtype)
    KV_BYTES: tl.constexpr = BLOCK_N * HEAD_DIM * tlx.size_of(dtype)
    SLICE: tl.constexpr = 32  # O columns the correction and the epilogue take at a time

    # (the same count of key blocks for both sub-tiles: they share every K and V tile)
    off_hz = tl.program_id(1)
    first_row, q_row, kv_row, num_kv, num_full = program_rows(N_CTX, BLOCK_M, BLOCK_N, CAUSAL)

    q_bufs = tlx.local_alloc((BLOCK_M, HEAD_DIM), dtype, 2)
    k_bufs = tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, NUM_STAGES)
    v_bufs = tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, NUM_STAGES)
    alpha_bufs = tlx.local_alloc((BLOCK_M,), tl.float32, 2)
    l_bufs = tlx.local_alloc((BLOCK_M,), tl.float32, 2)
    s_tiles = tlx.local_alloc((BLOCK_M, BLOCK_N), tl.float32, 2, tlx.storage_kind.tmem)
    # Four fp16 tiles over the two S tiles: p_tiles[2c + 1] is S[c]'s upper half.
    p_tiles = tlx.local_alloc((BLOCK_M, BLOCK_N), dtype, 4, tlx.storage_kind.tmem,
                              reuse=s_tiles)
    o_tiles = tlx.local_alloc((BLOCK_M, HEAD_DIM), tl.float32, 2, tlx.storage_kind.tmem)

    q_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    k_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    v_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    k_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    v_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    s_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    p_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    alpha_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    o_fixed = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    o_done = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    l_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)

    with tlx.async_tasks():
        # Correction and epilogue.
        with tlx.async_task("default"):
            for c in tl.static_range(2):
                tlx.barrier_arrive(tlx.local_view(o_fixed, c))  # step 0: O is not read
            for j in range(1, num_kv):
                phase = (j - 1) & 1
                for c in tl.static_range(2):
                    tlx.barrier_wait(tlx.local_view(alpha_full, c), phase)
                    alpha = tlx.local_load(tlx.local_view(alpha_bufs, c))
                    o_tile = tlx.local_view(o_tiles, c)
                    for s in tl.static_range(HEAD_DIM // SLICE):
                        part = tlx.local_slice(o_tile, [0, s * SLICE], [BLOCK_M, SLICE])
                        tlx.local_store(part, tlx.local_load(part) * alpha[:, None])
                    tlx.barrier_arrive(tlx.local_view(o_fixed, c))
            for c in tl.static_range(2):
                tlx.barrier_wait(tlx.local_view(l_full, c), 0)
                inv_l = 1.0 / tlx.local_load(tlx.local_view(l_bufs, c))
                tlx.barrier_wait(tlx.local_view(o_done, c), 0)
                # Every MMA that read Q[c] has completed: O leaves through it.
                q = tlx.local_view(q_bufs, c)
                o_tile = tlx.local_view(o_tiles, c)
                for s in tl.static_range(HEAD_DIM // SLICE):
                    part = tlx.local_load(
                        tlx.local_slice(o_tile, [0, s * SLICE], [BLOCK_M, SLICE]))
                    tlx.local_store(tlx.local_slice(q, [0, s * SLICE], [BLOCK_M, SLICE]),
                                    (part * inv_l[:, None]).to(dtype))
                tlx.async_descriptor_store(o_desc, q, [q_row + c * BLOCK_M, 0])
            tlx.async_descriptor_store_wait(0)

        # Softmax, one warp group per sub-tile.
        with tlx.async_task(num_warps=4, registers=192, replicate=2):
            me = tlx.async_task_replica_id()
            qk_scale = sm_scale * 1.4426950408889634  # log2(e): softmax in base 2
            offs_m = first_row + me * BLOCK_M + tl.arange(0, BLOCK_M)
            m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
            l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
            s_tile = tlx.local_view(s_tiles, me)
            p_tile = tlx.local_view(p_tiles, 2 * me + 1)
            alpha_buf = tlx.local_view(alpha_bufs, me)
            s_bar = tlx.local_view(s_full, me)
            a_bar = tlx.local_view(alpha_full, me)
            p_bar = tlx.local_view(p_full, me)
            # Block 0 (causal: the mask is a no-op on a wholly visible block, so block 0 takes
            # it rather than branch on whether it sits on a diagonal).
            tlx.barrier_wait(s_bar, 0)
            m_i, l_i = softmax_step(s_tile, p_tile, alpha_buf, a_bar, p_bar, m_i, l_i, qk_scale,
                                    0, offs_m, dtype, BLOCK_N, CAUSAL, True)
            for j in range(1, num_full):
                tlx.barrier_wait(s_bar, j & 1)
                m_i, l_i = softmax_step(s_tile, p_tile, alpha_buf, a_bar, p_bar, m_i, l_i,
                                        qk_scale, j, offs_m, dtype, BLOCK_N, False, False)
            for j in range(max(num_full, 1), num_kv):
                tlx.barrier_wait(s_bar, j & 1)
                m_i, l_i = softmax_step(s_tile, p_tile, alpha_buf, a_bar, p_bar, m_i, l_i,
                                        qk_scale, j, offs_m, dtype, BLOCK_N, True, False)
            tlx.local_store(tlx.local_view(l_bufs, me), l_i)
            tlx.barrier_arrive(tlx.local_view(l_full, me))
            tl.store(lse_ptr + off_hz * N_CTX + offs_m, m_i * qk_scale + tl.log2(l_i))

        # MMA issue.
        with tlx.async_task(num_warps=1, registers=24):
            for c in tl.static_range(2):
                tlx.barrier_wait(tlx.local_view(q_full, c), 0)
            tlx.barrier_wait(tlx.local_view(k_full, 0), 0)
            k_t = tlx.local_trans(tlx.local_view(k_bufs, 0))
            tlx.async_dot(tlx.local_view(q_bufs, 0), k_t, tlx.local_view(s_tiles, 0),
                          use_acc=False, mBarriers=[tlx.local_view(s_full, 0)])
            tlx.async_dot(tlx.local_view(q_bufs, 1), k_t, tlx.local_view(s_tiles, 1),
                          use_acc=False,
                          mBarriers=[tlx.local_view(s_full, 1), tlx.local_view(k_empty, 0)])
            for j in range(1, num_kv):
                stage = j % NUM_STAGES
                prev = (j - 1) % NUM_STAGES
                phase = (j - 1) & 1
                tlx.barrier_wait(tlx.local_view(k_full, stage), (j // NUM_STAGES) & 1)
                tlx.barrier_wait(tlx.local_view(v_full, prev), ((j - 1) // NUM_STAGES) & 1)
                k_t = tlx.local_trans(tlx.local_view(k_bufs, stage))
                v = tlx.local_view(v_bufs, prev)
                # Sub-tile 0: P_{j-1} V_{j-1}, then S_j over P_{j-1}'s columns (in order).
                tlx.barrier_wait(tlx.local_view(p_full, 0), phase)
                tlx.barrier_wait(tlx.local_view(o_fixed, 0), phase)
                tlx.async_dot(tlx.local_view(p_tiles, 1), v, tlx.local_view(o_tiles, 0),
                              use_acc=j > 1, force_async=True)
                tlx.async_dot(tlx.local_view(q_bufs, 0), k_t, tlx.local_view(s_tiles, 0),
                              use_acc=False, mBarriers=[tlx.local_view(s_full, 0)])
                # Sub-tile 1: the same; its commits release V_{j-1} and K_j.
                tlx.barrier_wait(tlx.local_view(p_full, 1), phase)
                tlx.barrier_wait(tlx.local_view(o_fixed, 1), phase)
                tlx.async_dot(tlx.local_view(p_tiles, 3), v, tlx.local_view(o_tiles, 1),
                              use_acc=j > 1, mBarriers=[tlx.local_view(v_empty, prev)])
                tlx.async_dot(tlx.local_view(q_bufs, 1), k_t, tlx.local_view(s_tiles, 1),
                              use_acc=False,
                              mBarriers=[tlx.local_view(s_full, 1),
                                         tlx.local_view(k_empty, stage)])
            # The last block's P V.
            last = num_kv - 1
            stage = last % NUM_STAGES
            phase = last & 1
            tlx.barrier_wait(tlx.local_view(v_full, stage), (last // NUM_STAGES) & 1)
            v = tlx.local_view(v_bufs, stage)
            for c in tl.static_range(2):
                tlx.barrier_wait(tlx.local_view(p_full, c), phase)
                tlx.barrier_wait(tlx.local_view(o_fixed, c), phase)
                tlx.async_dot(tlx.local_view(p_tiles, 2 * c + 1), v, tlx.local_view(o_tiles, c),
                              use_acc=last > 0, mBarriers=[tlx.local_view(o_done, c)])

        # TMA loads.
        with tlx.async_task(num_warps=1, registers=24):
            load_q_and_kv(q_desc, k_desc, v_desc, q_bufs, k_bufs, v_bufs, q_full, k_full, v_full,
                          k_empty, v_empty, q_row, kv_row, num_kv, BLOCK_M, BLOCK_N, NUM_STAGES,
                          Q_BYTES, KV_BYTES)
