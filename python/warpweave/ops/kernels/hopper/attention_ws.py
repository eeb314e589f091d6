"""Hopper fused attention forward, warp-specialized with ping-pong consumers (FlashAttention-3
style), written with TLX:

    out = softmax(Q @ K^T * sm_scale) @ V,   lse = row-wise log2-sum-exp2 of the scaled scores

Q, K, V, out are [Z, H, N_CTX, HEAD_DIM] fp16 or bf16, contiguous, seen by the host descriptors
as 2-D [Z * H * N_CTX, HEAD_DIM]; lse is fp32 [Z * H, N_CTX]. CAUSAL masks keys after the
query; only the key blocks on the program's diagonal, and block 0, pay for the mask. N_CTX must be a
multiple of 2 * BLOCK_M and of BLOCK_N: tiles never straddle two heads. Rows of 256 bytes
(HEAD_DIM=128) travel as two 128-byte column blocks per TMA copy.

Each program owns 2 * BLOCK_M query rows of one (batch, head):
  - the producer (default task, 4 warps, 24 registers) loads both Q tiles once, then streams
    K and V tiles through a NUM_STAGES ring with TMA;
  - two consumer warp groups (one task replicated twice, 240 registers) each own BLOCK_M rows and
    run the online softmax over all keys, software-pipelined by one key block: in step i a
    consumer issues S_i = Q K_i^T (wgmma from shared memory) and O += P_{i-1} V_{i-1} (P from
    registers) back to back, waits for S_i alone (wgmma.wait_group 1) and computes
    P_i = exp2(S_i * scale - m * scale) (max on the raw scores, one FMA per score) while
    P_{i-1} V_{i-1} is still running, then waits for it and rescales O. O leaves through the
    consumer's Q buffer with TMA.
Ping-pong: the consumers take turns to issue their step's two MMAs, so that one warp group's
softmax (exp2 on the SFU) overlaps the other's MMAs on the tensor cores. Two named barriers
carry the turn; each consumer waits on its own (TURN_BAR + replica) before issuing, then
arrives on the other's. Consumer 1 hands the first turn to consumer 0 and skips its last
hand-over, so every wait is matched by exactly one arrive (256 threads = both warp groups).
Every consumer takes num_kv + 1 turns: S_0 alone, num_kv - 1 paired steps, the last P V alone.

K/V stages: k_full / v_full (1 arrival, the producer's expect-bytes) and k_empty / v_empty
(2 arrivals: both consumers read every K and V tile). Q: q_full[replica].
    grid = (N_CTX // (2 * BLOCK_M), Z * H)
    constexprs: HEAD_DIM (64 or 128), BLOCK_M=64 (per consumer; 128 would not leave registers for
                S, P and O at HEAD_DIM=128), BLOCK_N=128, NUM_STAGES=2, CAUSAL (False)
    descriptors: q_desc and o_desc block [BLOCK_M, HEAD_DIM], k_desc and v_desc block
                 [BLOCK_N, HEAD_DIM]
    signature: q_desc:desc<fp16,64x128>, k_desc:desc<fp16,128x128>, v_desc:desc<fp16,128x128>,
               o_desc:desc<fp16,64x128>, lse_ptr:*fp32:16, sm_scale:fp32, N_CTX:i32:16,
               HEAD_DIM=128, BLOCK_M=64, BLOCK_N=128, NUM_STAGES=2, CAUSAL=0
    launch: num_warps=4 (the default task; the consumers add 8 warps)
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


TURN_BAR: tl.constexpr = 8  # named barriers 8 and 9 (id 0 is the CTA-wide barrier)
BOTH_GROUPS: tl.constexpr = 256


@ww.jit
def wait_turn(me):
    """Blocks until the other consumer has issued its MMAs of the step."""
    tlx.named_barrier_wait(TURN_BAR + me, BOTH_GROUPS)


@ww.jit
def pass_turn(me, last):
    """Hands the tensor cores to the other consumer. Consumer 1 gave consumer 0 its first turn
    up front, so it skips the hand-over after its last issue: every wait gets one arrive."""
    if me == 0:
        tlx.named_barrier_arrive(TURN_BAR + 1, BOTH_GROUPS)
    elif not last:
        tlx.named_barrier_arrive(TURN_BAR, BOTH_GROUPS)


@ww.jit
def online_softmax(qk, m_i, l_i, qk_scale, i, offs_m, dtype: tl.constexpr,
                   BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """Folds the raw scores of key block i into the running row max m_i (raw units) and sum
    l_i. The scale rides in the exponent: one FMA per score before exp2."""
    if MASKED:
        keys = i * BLOCK_N + tl.arange(0, BLOCK_N)
        qk = tl.where(offs_m[:, None] >= keys[None, :], qk, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(qk, axis=1))
    m_scaled = m_new * qk_scale
    p = tl.exp2(tl.fma(qk, qk_scale, -m_scaled[:, None]))
    alpha = tl.exp2(tl.fma(m_i, qk_scale, -m_scaled))
    l_i = l_i * alpha + tl.sum(p, axis=1)
    return p.to(dtype), l_i, m_new, alpha


@ww.jit
def attend_block(acc, p, l_i, m_i, q, k_bufs, v_bufs, k_full, v_full, k_empty, v_empty, i, me,
                 qk_scale, offs_m, dtype: tl.constexpr, BLOCK_N: tl.constexpr,
                 NUM_STAGES: tl.constexpr, MASKED: tl.constexpr):
    """One pipelined step: in one turn issue S_i = Q K_i^T and O += P_{i-1} V_{i-1}; wait for
    S_i alone and run its softmax while P_{i-1} V_{i-1} is still on the tensor cores, then
    rescale O once that MMA is done."""
    stage = i % NUM_STAGES
    parity = (i // NUM_STAGES) & 1
    prev = (i - 1) % NUM_STAGES
    prev_parity = ((i - 1) // NUM_STAGES) & 1
    tlx.barrier_wait(tlx.local_view(k_full, stage), parity)
    tlx.barrier_wait(tlx.local_view(v_full, prev), prev_parity)
    k_t = tlx.local_trans(tlx.local_view(k_bufs, stage))
    wait_turn(me)
    qk = tlx.async_dot(q, k_t)
    acc = tlx.async_dot(p, tlx.local_view(v_bufs, prev), acc)
    pass_turn(me, False)
    qk = tlx.async_dot_wait(1, qk)
    tlx.barrier_arrive(tlx.local_view(k_empty, stage))
    p, l_i, m_i, alpha = online_softmax(qk, m_i, l_i, qk_scale, i, offs_m, dtype, BLOCK_N,
                                        MASKED)
    acc = tlx.async_dot_wait(0, acc)
    tlx.barrier_arrive(tlx.local_view(v_empty, prev))
    acc = acc * alpha[:, None]
    return acc, p, l_i, m_i


@ww.jit
def load_q_and_kv(q_desc, k_desc, v_desc, q_bufs, k_bufs, v_bufs, q_full, k_full, v_full, k_empty,
                  v_empty, q_row, kv_row, num_kv, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  NUM_STAGES: tl.constexpr, Q_BYTES: tl.constexpr, KV_BYTES: tl.constexpr):
    """The load task of a program with two BLOCK_M-row Q tiles: both Q tiles once, then the K and
    V blocks through the NUM_STAGES ring, each stage refilled once its consumers released it."""
    for c in tl.static_range(2):
        q_bar = tlx.local_view(q_full, c)
        tlx.barrier_expect_bytes(q_bar, Q_BYTES)
        tlx.async_descriptor_load(q_desc, tlx.local_view(q_bufs, c),
                                  [q_row + c * BLOCK_M, 0], q_bar)
    for i in range(0, num_kv):
        stage = i % NUM_STAGES
        free_parity = ((i // NUM_STAGES) & 1) ^ 1
        row = kv_row + i * BLOCK_N
        tlx.barrier_wait(tlx.local_view(k_empty, stage), free_parity)
        k_bar = tlx.local_view(k_full, stage)
        tlx.barrier_expect_bytes(k_bar, KV_BYTES)
        tlx.async_descriptor_load(k_desc, tlx.local_view(k_bufs, stage), [row, 0], k_bar)
        tlx.barrier_wait(tlx.local_view(v_empty, stage), free_parity)
        v_bar = tlx.local_view(v_full, stage)
        tlx.barrier_expect_bytes(v_bar, KV_BYTES)
        tlx.async_descriptor_load(v_desc, tlx.local_view(v_bufs, stage), [row, 0], v_bar)


@ww.jit
def program_rows(N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """The rows of a program that takes 2 * BLOCK_M queries of head tl.program_id(1) (over q / k /
    v seen as [Z * H * N_CTX, HEAD_DIM]): (its first query row within the head, that row in the
    flattened q, the head's first key row, the key blocks it visits, the blocks before the first
    that straddles a causal diagonal; without CAUSAL all of them). Causal programs further down
    the sequence have more keys to visit, so they are started first."""
    off_hz = tl.program_id(1)
    start = tl.program_id(0)
    if CAUSAL:
        start = tl.num_programs(0) - 1 - start
    first_row = start * (2 * BLOCK_M)
    num_kv = N_CTX // BLOCK_N
    num_full = num_kv
    if CAUSAL:
        # Keys up to the program's last query row; blocks from num_full on are masked.
        num_kv = tl.cdiv(first_row + 2 * BLOCK_M, BLOCK_N)
        num_full = first_row // BLOCK_N
    return first_row, off_hz * N_CTX + first_row, off_hz * N_CTX, num_kv, num_full


@ww.jit
def attention_ws_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, sm_scale, N_CTX,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr = False):
    dtype: tl.constexpr = tlx.dtype_of(q_desc)
    Q_BYTES: tl.constexpr = BLOCK_M * HEAD_DIM * tlx.size_of(dtype)
    KV_BYTES: tl.constexpr = BLOCK_N * HEAD_DIM * tlx.size_of(dtype)

    # (the same count of key blocks for both consumers keeps their turns paired)
    off_hz = tl.program_id(1)
    first_row, q_row, kv_row, num_kv, num_full = program_rows(N_CTX, BLOCK_M, BLOCK_N, CAUSAL)

    q_bufs = tlx.local_alloc((BLOCK_M, HEAD_DIM), dtype, 2)
    k_bufs = tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, NUM_STAGES)
    v_bufs = tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, NUM_STAGES)
    q_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    k_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    v_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    k_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    v_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=24):
            load_q_and_kv(q_desc, k_desc, v_desc, q_bufs, k_bufs, v_bufs, q_full, k_full, v_full,
                          k_empty, v_empty, q_row, kv_row, num_kv, BLOCK_M, BLOCK_N, NUM_STAGES,
                          Q_BYTES, KV_BYTES)

        with tlx.async_task(num_warps=4, registers=240, replicate=2):
            me = tlx.async_task_replica_id()
            qk_scale = sm_scale * 1.4426950408889634  # log2(e): softmax in base 2
            offs_m = first_row + me * BLOCK_M + tl.arange(0, BLOCK_M)
            m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
            l_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
            acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
            tlx.barrier_wait(tlx.local_view(q_full, me), 0)
            q = tlx.local_view(q_bufs, me)
            if me == 1:
                tlx.named_barrier_arrive(TURN_BAR, BOTH_GROUPS)
            # Key block 0: S_0 alone (there is no P V to pair it with yet).
            tlx.barrier_wait(tlx.local_view(k_full, 0), 0)
            wait_turn(me)
            qk = tlx.async_dot(q, tlx.local_trans(tlx.local_view(k_bufs, 0)))
            pass_turn(me, False)
            qk = tlx.async_dot_wait(0, qk)
            tlx.barrier_arrive(tlx.local_view(k_empty, 0))
            # Causal: the mask is a no-op on a block that is wholly visible, so block 0 always
            # takes it rather than branch on whether it sits on the diagonal.
            p, l_i, m_i, alpha = online_softmax(qk, m_i, l_i, qk_scale, 0, offs_m, dtype,
                                                BLOCK_N, CAUSAL)
            for i in range(1, num_full):
                acc, p, l_i, m_i = attend_block(acc, p, l_i, m_i, q, k_bufs, v_bufs, k_full,
                                                v_full, k_empty, v_empty, i, me, qk_scale,
                                                offs_m, dtype, BLOCK_N, NUM_STAGES, False)
            for i in range(max(num_full, 1), num_kv):
                acc, p, l_i, m_i = attend_block(acc, p, l_i, m_i, q, k_bufs, v_bufs, k_full,
                                                v_full, k_empty, v_empty, i, me, qk_scale,
                                                offs_m, dtype, BLOCK_N, NUM_STAGES, True)
            # The last block's P V, in the last turn.
            last = num_kv - 1
            stage = last % NUM_STAGES
            tlx.barrier_wait(tlx.local_view(v_full, stage), (last // NUM_STAGES) & 1)
            wait_turn(me)
            acc = tlx.async_dot(p, tlx.local_view(v_bufs, stage), acc)
            pass_turn(me, True)
            acc = tlx.async_dot_wait(0, acc)
            tlx.barrier_arrive(tlx.local_view(v_empty, stage))

            tl.store(lse_ptr + off_hz * N_CTX + offs_m, m_i * qk_scale + tl.log2(l_i))
            # O leaves through this consumer's Q buffer (no longer read), so the epilogue needs
            # no shared memory beyond Q, K and V.
            out = acc / l_i[:, None]
            tlx.local_store(q, out.to(dtype))
            tlx.async_descriptor_store(o_desc, q, [q_row + me * BLOCK_M, 0])
            tlx.async_descriptor_store_wait(0)
