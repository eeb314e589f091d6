"""Triton versions of the kernel library, the reference column of bench_kernels.py: the same
algorithms as python/warpweave/ops/kernels/*.py written for Triton 3.x (after the Triton tutorials' designs: grouped
GEMM, fused row softmax, row-per-program layer norm, FlashAttention-2 style forward), each with a
host wrapper taking CUDA torch tensors and returning new outputs.

Only imported when Triton is installed (bench_kernels.py skips the column otherwise).
"""

import torch
import triton
import triton.language as tl

# ------------------------------------------------------------------------------------------------
# Element-wise add
# ------------------------------------------------------------------------------------------------


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, num_warps=4)
    return out


# ------------------------------------------------------------------------------------------------
# Softmax: one row per block, programs loop over rows
# ------------------------------------------------------------------------------------------------


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(in_ptr + row.to(tl.int64) * in_stride + cols, mask=mask,
                    other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        y = e / tl.sum(e, axis=0)
        tl.store(out_ptr + row.to(tl.int64) * out_stride + cols, y.to(out_ptr.dtype.element_ty),
                 mask=mask)


_NUM_SMS = {}


def _num_sms(device):
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _NUM_SMS:
        _NUM_SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _NUM_SMS[idx]


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    grid = (min(n_rows, _num_sms(x.device) * max(1, 32 // warps)),)
    _softmax_kernel[grid](out, x, x.stride(0), out.stride(0), n_rows, n_cols, BLOCK=block,
                          num_warps=warps)
    return out


# ------------------------------------------------------------------------------------------------
# Layer norm forward and backward
# ------------------------------------------------------------------------------------------------


@triton.jit
def _layernorm_fwd_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n_cols, eps,
                          BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * stride
    y_row = y_ptr + row.to(tl.int64) * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        d = tl.where(mask, tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def layernorm_fwd(x, w, b, eps=1e-5):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    rstd = torch.empty_like(mean)
    block = min(triton.next_power_of_2(n_cols), 65536 // x.element_size())
    _layernorm_fwd_kernel[(n_rows,)](x, y, w, b, mean, rstd, x.stride(0), n_cols, eps,
                                     BLOCK=block, num_warps=min(max(block // 256, 1), 8))
    return y, mean, rstd


@triton.jit
def _layernorm_bwd_dx_kernel(dx_ptr, dy_ptr, pdw_ptr, pdb_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr,
                             stride, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(pid * ROWS, tl.minimum(pid * ROWS + ROWS, n_rows)):
        off = row.to(tl.int64) * stride
        x = tl.load(x_ptr + off + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + off + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - tl.load(mean_ptr + row)) * rstd, 0.0)
        wdy = w * dy
        c1 = tl.sum(xhat * wdy, axis=0) / n_cols
        c2 = tl.sum(wdy, axis=0) / n_cols
        tl.store(dx_ptr + off + cols, ((wdy - (xhat * c1 + c2)) * rstd).to(
            dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
        db += dy
    tl.store(pdw_ptr + pid * n_cols + cols, dw, mask=mask)
    tl.store(pdb_ptr + pid * n_cols + cols, db, mask=mask)


@triton.jit
def _layernorm_bwd_dwdb_kernel(pdw_ptr, pdb_ptr, dw_ptr, db_ptr, n_partials, n_cols,
                               BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_partials, BLOCK_P):
        parts = start + tl.arange(0, BLOCK_P)
        mask = (parts[:, None] < n_partials) & (cols[None, :] < n_cols)
        offs = parts[:, None] * n_cols + cols[None, :]
        dw += tl.load(pdw_ptr + offs, mask=mask, other=0.0)
        db += tl.load(pdb_ptr + offs, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=cols < n_cols)
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=cols < n_cols)


def layernorm_bwd(dy, x, w, mean, rstd):
    n_rows, n_cols = x.shape
    dx = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    target = _num_sms(x.device) * 4
    rows = min(triton.next_power_of_2(triton.cdiv(n_rows, target)), 256)
    n_partials = triton.cdiv(n_rows, rows)
    pdw = torch.empty(n_partials, n_cols, device=x.device, dtype=torch.float32)
    pdb = torch.empty_like(pdw)
    _layernorm_bwd_dx_kernel[(n_partials,)](dx, dy, pdw, pdb, x, w, mean, rstd, x.stride(0),
                                            n_rows, n_cols, ROWS=rows, BLOCK=block,
                                            num_warps=min(max(block // 256, 1), 8))
    dw = torch.empty_like(w)
    db = torch.empty_like(w)
    _layernorm_bwd_dwdb_kernel[(triton.cdiv(n_cols, 128),)](pdw, pdb, dw, db, n_partials, n_cols,
                                                            BLOCK_P=32, BLOCK_N=128)
    return dx, dw, db


# ------------------------------------------------------------------------------------------------
# Matmul: grouped tile order, fp32 accumulation (the tutorial's autotuned design)
# ------------------------------------------------------------------------------------------------


def _matmul_configs():
    out = []
    for bm, bn, bk, stages, warps in ((128, 256, 64, 3, 8), (256, 128, 64, 3, 8),
                                      (128, 128, 64, 4, 8), (128, 128, 64, 3, 4)):
        out.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                                 num_stages=stages, num_warps=warps))
    return out


@triton.autotune(configs=_matmul_configs(), key=["M", "N", "K"])
@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_pid_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1))
    return c


# ------------------------------------------------------------------------------------------------
# Attention forward: online softmax over key blocks; causal programs split off the diagonal band
# ------------------------------------------------------------------------------------------------


@triton.jit
def _attend(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, lo, hi,
            qk_scale, N_CTX, BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        keys = start_n + offs_n
        valid = keys < N_CTX
        k = tl.load(k_base + keys[None, :] * stride_kn + offs_d[:, None], mask=valid[None, :],
                    other=0.0)
        qk = tl.dot(q, k) * qk_scale
        if DIAGONAL:
            qk = tl.where(offs_m[:, None] >= keys[None, :], qk, -1.0e6)
        qk = tl.where(valid[None, :], qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + keys[:, None] * stride_vn + offs_d[None, :], mask=valid[:, None],
                    other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, stride_qz, stride_qh, stride_qm,
                      stride_kz, stride_kh, stride_kn, stride_vz, stride_vh, stride_vn,
                      stride_oz, stride_oh, stride_om, H, N_CTX, HEAD_DIM: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    z = (off_hz // H).to(tl.int64)
    h = (off_hz % H).to(tl.int64)
    q_base = q_ptr + z * stride_qz + h * stride_qh
    k_base = k_ptr + z * stride_kz + h * stride_kh
    v_base = v_ptr + z * stride_vz + h * stride_vh
    o_base = o_ptr + z * stride_oz + h * stride_oh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows_ok = offs_m < N_CTX
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :], mask=rows_ok[:, None],
                other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        band = start_m * BLOCK_M
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m,
                                offs_d, 0, band, qk_scale, N_CTX, BLOCK_N, False)
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m,
                                offs_d, band, band + BLOCK_M, qk_scale, N_CTX, BLOCK_N, True)
    else:
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m,
                                offs_d, 0, N_CTX, qk_scale, N_CTX, BLOCK_N, False)
    out = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=rows_ok[:, None])


def attention(q, k, v, causal, sm_scale):
    z, h, n_ctx, head_dim = q.shape
    out = torch.empty_like(q)
    block_m, block_n = 128, 64
    grid = (triton.cdiv(n_ctx, block_m), z * h)
    _attention_kernel[grid](q, k, v, out, sm_scale, q.stride(0), q.stride(1), q.stride(2),
                            k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1),
                            v.stride(2), out.stride(0), out.stride(1), out.stride(2), h, n_ctx,
                            HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                            num_warps=8 if head_dim >= 128 else 4, num_stages=3)
    return out


# ------------------------------------------------------------------------------------------------
# Embedding bag (sum), CSR offsets
# ------------------------------------------------------------------------------------------------


@triton.jit
def _embedding_bag_kernel(w_ptr, idx_ptr, off_ptr, out_ptr, D, stride_w, BLOCK_I: tl.constexpr,
                          BLOCK_D: tl.constexpr):
    bag = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    col_ok = cols < D
    begin = tl.load(off_ptr + bag)
    end = tl.load(off_ptr + bag + 1)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for start in range(begin, end, BLOCK_I):
        pos = start + tl.arange(0, BLOCK_I)
        ok = pos < end
        rows = tl.load(idx_ptr + pos, mask=ok, other=0).to(tl.int64)
        tile = tl.load(w_ptr + rows[:, None] * stride_w + cols[None, :],
                       mask=ok[:, None] & col_ok[None, :], other=0.0)
        acc += tl.sum(tile.to(tl.float32), axis=0)
    tl.store(out_ptr + bag.to(tl.int64) * D + cols, acc.to(out_ptr.dtype.element_ty), mask=col_ok)


def embedding_bag(weight, indices, offsets):
    num_bags = offsets.numel() - 1
    dim = weight.shape[1]
    out = torch.empty(num_bags, dim, device=weight.device, dtype=weight.dtype)
    block_d = min(128, triton.next_power_of_2(dim))
    _embedding_bag_kernel[(num_bags, triton.cdiv(dim, block_d))](
        weight, indices, offsets, out, dim, weight.stride(0), BLOCK_I=8, BLOCK_D=block_d,
        num_warps=4)
    return out


# ------------------------------------------------------------------------------------------------
# Row reductions
# ------------------------------------------------------------------------------------------------


@triton.jit
def _row_sum_kernel(x_ptr, out_ptr, n_rows, n_cols, stride, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    base = x_ptr + rows.to(tl.int64)[:, None] * stride
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        acc += tl.load(base + cols[None, :], mask=(rows[:, None] < n_rows) &
                       (cols[None, :] < n_cols), other=0.0).to(tl.float32)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1), mask=rows < n_rows)


@triton.jit
def _row_max_kernel(x_ptr, out_ptr, idx_ptr, n_rows, n_cols, stride, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    base = x_ptr + rows.to(tl.int64)[:, None] * stride
    best = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    best_idx = tl.zeros([BLOCK_M], dtype=tl.int32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(base + cols[None, :], mask=(rows[:, None] < n_rows) & (cols[None, :] < n_cols),
                    other=-float("inf")).to(tl.float32)
        blk, blk_idx = tl.max(x, axis=1, return_indices=True)
        better = blk > best
        best_idx = tl.where(better, start + blk_idx, best_idx)
        best = tl.where(better, blk, best)
    tl.store(out_ptr + rows, best, mask=rows < n_rows)
    tl.store(idx_ptr + rows, best_idx, mask=rows < n_rows)


def row_sum(x):
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    _row_sum_kernel[(triton.cdiv(n_rows, 4),)](x, out, n_rows, n_cols, x.stride(0), BLOCK_M=4,
                                               BLOCK_N=1024, num_warps=4)
    return out


def row_max(x):
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    idx = torch.empty(n_rows, device=x.device, dtype=torch.int32)
    _row_max_kernel[(triton.cdiv(n_rows, 4),)](x, out, idx, n_rows, n_cols, x.stride(0),
                                               BLOCK_M=4, BLOCK_N=1024, num_warps=4)
    return out, idx
