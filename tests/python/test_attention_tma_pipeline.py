"""The flash-attention loop over host tensor descriptors (Triton's fused-attention tutorial on
Hopper) is software-pipelined for sm_90a: K and V arrive by TMA into multi-buffered swizzled
buffers, each slot completing on its own barrier, Q is stored once into a swizzled buffer, and
both dots are async wgmma (P @ V with P from registers). The sm_90a Tile IR runs in the
interpreter against a float64 NumPy reference; the PTX at the tutorial's test configuration
assembles for sm_90a without spills."""

import math
import os
import re
import sys

import numpy as np
import pytest

import warpweave as ww

pytest.importorskip("warpweave._native")

sys.path.insert(0, os.path.dirname(__file__))
from attnregs_kernels import attention_device_desc_fwd, attention_tma_fwd  # noqa: E402


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def reference(q, k, v, causal, sm_scale):
    s = np.einsum("hmd,hnd->hmn", q.astype(np.float64), k.astype(np.float64)) * sm_scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    total = p.sum(axis=-1, keepdims=True)
    lse2 = (m[..., 0] + np.log(total[..., 0])) / math.log(2.0)
    return np.einsum("hmn,hnd->hmd", p / total, v.astype(np.float64)), lse2


def descriptors(q, k, v, o, block_m, block_n):
    rows, d = q.shape[0] * q.shape[1], q.shape[2]
    flat = [t.reshape(rows, d) for t in (q, k, v, o)]
    return (ww.TensorDescriptor.from_tensor(flat[0], [block_m, d]),
            ww.TensorDescriptor.from_tensor(flat[1], [block_n, d]),
            ww.TensorDescriptor.from_tensor(flat[2], [block_n, d]),
            ww.TensorDescriptor.from_tensor(flat[3], [block_m, d]))


@pytest.mark.parametrize("heads,n_ctx,causal,stages", [
    (2, 64, False, 3),    # a single key block: the prologue's second copy is predicated off
    (1, 128, False, 3),   # two key blocks, as many as the copies issued ahead
    (1, 256, False, 3),   # the slots wrap: the barriers' phases flip
    (1, 192, False, 2),   # num_stages=2 pipelines with three slots too
    (1, 192, True, 3),    # causal: two loops, the second reusing Q's buffer
])
def test_pipelined_tma_attention_in_interpreter(heads, n_ctx, causal, stages):
    rng = np.random.default_rng(7)
    d, block_m, block_n = 16, 64, 16
    q, k, v = (rng.standard_normal((heads, n_ctx, d)).astype(np.float16) for _ in range(3))
    o = np.zeros_like(q)
    lse = np.zeros((heads, n_ctx), np.float32)
    sm_scale = 0.5
    dq, dk, dv, do = descriptors(q, k, v, o, block_m, block_n)
    compiled = attention_tma_fwd[(n_ctx // block_m, heads)](
        dq, dk, dv, do, lse, sm_scale, heads, n_ctx, HEAD_DIM=d, BLOCK_M=block_m,
        BLOCK_N=block_n, CAUSAL=causal, num_warps=4, num_stages=stages)
    assert compiled.interpret
    ir = compiled.kernel.tile_ir
    loops = 2 if causal else 1
    assert ir.count(" = dot ") == 0, ir
    assert ir.count("async_dot ") == 2 * loops
    # Q once, then K and V: two ahead in the prologue, one in the loop.
    assert ir.count("async_desc_load ") == 1 + 2 * 3 * loops
    assert ir.count(f"local_alloc {{storage = \"smem\"}} : buffer<1x{block_m}x{d}xfp16, smem>") == 1
    # Q's barrier; K and V: one ring of barriers and buffers, which causal attention's second
    # loop reuses.
    assert ir.count("alloc_barriers") == 3
    assert ir.count(f"local_alloc {{storage = \"smem\"}} : buffer<3x{block_n}x{d}xfp16, smem>") == 2
    ref, lse_ref = reference(q, k, v, causal, sm_scale)
    np.testing.assert_allclose(o.astype(np.float64), ref, atol=2e-3, rtol=2e-2)
    np.testing.assert_allclose(lse, lse_ref, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("causal", [False, True])
def test_pipelined_tma_attention_two_warp_groups_in_interpreter(causal):
    # With two warp groups each retires only its own MMAs: the copies that overwrite the slot
    # the other group's P @ V read wait for a CTA barrier (the interpreter reports the race
    # otherwise).
    rng = np.random.default_rng(5)
    heads, n_ctx, d, block_m, block_n = 1, 256, 16, 128, 16
    q, k, v = (rng.standard_normal((heads, n_ctx, d)).astype(np.float16) for _ in range(3))
    o = np.zeros_like(q)
    lse = np.zeros((heads, n_ctx), np.float32)
    dq, dk, dv, do = descriptors(q, k, v, o, block_m, block_n)
    compiled = attention_tma_fwd[(n_ctx // block_m, heads)](
        dq, dk, dv, do, lse, 0.5, heads, n_ctx, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
        CAUSAL=causal, num_warps=8, num_stages=3)
    assert compiled.interpret and compiled.kernel.tile_ir.count("async_dot ") == 2 * (1 + causal)
    ref, lse_ref = reference(q, k, v, causal, 0.5)
    np.testing.assert_allclose(o.astype(np.float64), ref, atol=2e-3, rtol=2e-2)
    np.testing.assert_allclose(lse, lse_ref, atol=1e-3, rtol=1e-3)


def compile_sm90a(head_dim, block_m, block_n, stages, warps, causal=False):
    rows = 4 * 1024
    x = np.zeros((rows, head_dim), np.float16)
    dq = ww.TensorDescriptor.from_tensor(x, [block_m, head_dim])
    dk = ww.TensorDescriptor.from_tensor(x, [block_n, head_dim])
    lse = np.zeros(rows, np.float32)
    values = attention_tma_fwd.bind((dq, dk, dk, dq, lse, 0.5, 4, 1024),
                                    dict(HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n,
                                         CAUSAL=causal))
    return attention_tma_fwd.compile_for(values, False, (warps, stages, 1), target="sm_90a")


needs_ptxas = pytest.mark.usefixtures("requires_ptxas")  # the compiles run it (conftest.py)


@needs_ptxas
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("causal", [False, True])
def test_tutorial_configuration_is_pipelined_with_tma(stages, causal):
    # Triton's tutorial 06 test configuration: BLOCK_M=128, BLOCK_N=64, HEAD_DIM=128, 4 warps.
    kernel = compile_sm90a(128, 128, 64, stages, 4, causal).kernel
    ptx = kernel.ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier" in ptx
    assert "mbarrier.try_wait.parity" in ptx
    # S = Q K^T from two swizzled buffers; P @ V with A (P) from registers: the A operand is a
    # brace list of eight 32-bit registers (fp16 pairs), not a shared-memory descriptor.
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16 \{[^}]*\}, "
                     r"\{%r\d+, %r\d+, %r\d+, %r\d+\}", ptx), "P @ V does not take P from registers"
    # K and V are read by the MMAs where TMA put them: no shared-memory loads in the loop.
    loop = ptx[ptx.index("wgmma.fence"):ptx.rindex("wgmma.wait_group")]
    assert "ld.shared" not in loop


@needs_ptxas
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("causal", [False, True])
def test_tutorial_configuration_compiles_without_spills(stages, causal):
    kernel = compile_sm90a(128, 128, 64, stages, 4, causal).kernel
    print(f"stages {stages} causal {causal}: {kernel.registers} registers, "
          f"{kernel.spill_bytes} spill bytes, {kernel.shared_bytes} B shared")
    assert kernel.spill_bytes == 0
    # The accumulator is scaled by alpha and accumulated by the P @ V wgmma in the loop-carried
    # registers themselves: no copy of it (128 movs) at the end of the iteration.
    ptx = kernel.ptx
    for end in re.finditer(r"bra\.uni (\$L_for_\d+);", ptx):
        tail = ptx[ptx.rindex("wgmma.commit_group", 0, end.start()):end.start()]
        assert tail.count("mov.f32") <= 8, tail


def loop_bodies(ptx):
    """Each `for` loop of the PTX, from its label to its back edge."""
    return [ptx[ptx.index(m.group(1) + ":"):m.end()]
            for m in re.finditer(r"bra\.uni (\$L_for_\d+);", ptx)]


@needs_ptxas
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_p_v_retired_by_the_next_iterations_wait(head_dim, causal):
    # Triton's schedule: P @ V stays in flight into the next iteration, where one wgmma wait
    # retires it with S = Q K^T; the copies into the slot it read go out after that wait.
    ptx = compile_sm90a(head_dim, 128, 64, 3, 4, causal).kernel.ptx
    bodies = loop_bodies(ptx)
    assert len(bodies) == (2 if causal else 1)
    for body in bodies:
        assert body.count("wgmma.wait_group") == 1, body
        assert body.index("wgmma.wait_group") < body.index("cp.async.bulk.tensor")
        assert body.count("wgmma.commit_group") == 2
    # The last P @ V of each loop is retired after it, before the next loop or the epilogue's
    # stores read the accumulator.
    for end in re.finditer(r"(\$L_endfor_\d+):", ptx):
        after = ptx[end.end():]
        limit = min(after.find(m) for m in ("$L_for_", "st.shared") if m in after)
        assert after.index("wgmma.wait_group.sync.aligned 0;") < limit, after


@needs_ptxas
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_q_arrives_by_tma_into_its_buffer(head_dim, causal):
    # Q goes by TMA straight into its swizzled buffer (as Triton does), not through registers
    # and a store: no shared-memory traffic of the threads before the first loop, and no
    # staging tile beside Q's buffer.
    kernel = compile_sm90a(head_dim, 128, 64, 3, 4, causal).kernel
    assert "local_store" not in kernel.tile_ir
    prologue = kernel.ptx[:kernel.ptx.index("$L_for_")]
    assert "st.shared" not in prologue and "ld.shared" not in prologue
    tile = 128 * head_dim * 2
    ring = 3 * 2 * 64 * head_dim * 2
    assert kernel.shared_bytes <= tile + ring + 2048, kernel.shared_bytes
    params = {name: ty for name, ty, _, _ in kernel.params}
    assert "swizzle=128" in params["q_desc"], params


# ---- the same kernel over descriptors made in the kernel (tensor maps the kernel writes) ----


@pytest.mark.parametrize("heads,n_ctx,causal", [(1, 256, False), (1, 192, True), (2, 64, False)])
def test_device_descriptor_attention_in_interpreter(heads, n_ctx, causal):
    rng = np.random.default_rng(11)
    d, block_m, block_n = 16, 64, 16
    q, k, v = (rng.standard_normal((heads, n_ctx, d)).astype(np.float16) for _ in range(3))
    o = np.zeros_like(q)
    lse = np.zeros((heads, n_ctx), np.float32)
    compiled = attention_device_desc_fwd[(n_ctx // block_m, heads)](
        q, k, v, o, lse, 0.5, heads, n_ctx, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
        CAUSAL=causal, num_warps=4, num_stages=3)
    ir = compiled.kernel.tile_ir
    loops = 2 if causal else 1
    # K and V arrive by TMA through the maps made before the loops, as with host descriptors.
    assert ir.count("make_desc") == 4
    assert ir.count("async_desc_load ") == 1 + 2 * 3 * loops and ir.count(" = dot ") == 0
    ref, lse_ref = reference(q, k, v, causal, 0.5)
    np.testing.assert_allclose(o.astype(np.float64), ref, atol=2e-3, rtol=2e-2)
    np.testing.assert_allclose(lse, lse_ref, atol=1e-3, rtol=1e-3)


@needs_ptxas
@pytest.mark.parametrize("causal", [False, True])
def test_device_descriptor_attention_is_pipelined_with_tma(causal):
    x = np.zeros((4 * 1024, 128), np.float16)
    lse = np.zeros(4 * 1024, np.float32)
    values = attention_device_desc_fwd.bind((x, x, x, x, lse, 0.5, 4, 1024),
                                            dict(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=64,
                                                 CAUSAL=causal))
    kernel = attention_device_desc_fwd.compile_for(values, False, (4, 3, 1),
                                                   target="sm_90a").kernel
    ptx = kernel.ptx
    assert kernel.spill_bytes == 0
    # Four maps, written before the first loop; the loops read K and V by TMA only.
    first_loop = ptx.index("$L_for_")
    assert ptx.count("tensormap.replace.tile.global_address") == 4
    assert ptx.rindex("tensormap.replace") < first_loop
    assert "ld.global" not in ptx and "cp.async.cg" not in ptx
    assert "mbarrier.try_wait.parity" in ptx[first_loop:]
    assert kernel.global_scratch_size == 4 * 128


# ---- Q read by the loop's TMA copy and, through the same descriptor, by a desc_load ----


@ww.jit
def attention_q_kept(q_desc, k_desc, v_desc, o_desc, N_CTX, HEAD_DIM: ww.language.constexpr,
                     BLOCK_M: ww.language.constexpr, BLOCK_N: ww.language.constexpr):
    tl = ww.language
    row = tl.program_id(0) * BLOCK_M
    q = q_desc.load([row, 0])
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.full([BLOCK_M], 1.0, tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        s = tl.dot(q, k_desc.load([start, 0]).T)
        m_ij = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        acc = tl.dot(p.to(tl.float16), v_desc.load([start, 0]), acc * alpha[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_ij
    o_desc.store([row, 0], (acc / l_i[:, None] + q.to(tl.float32)).to(tl.float16))


def test_q_kept_in_registers_too():
    # Q also read after the loop: its desc_load stays beside the TMA copy into Q's buffer and
    # reads the tile in the swizzle that copy fixed for the descriptor.
    n, d, bm, bn = 128, 64, 64, 32
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((n, d)).astype(np.float16) for _ in range(3))
    o = np.zeros_like(q)
    descs = [ww.TensorDescriptor.from_tensor(t, [b, d]) for t, b in ((q, bm), (k, bn), (v, bn),
                                                                     (o, bm))]
    compiled = attention_q_kept[(n // bm,)](*descs, n, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                                            num_warps=4, num_stages=3)
    ir = compiled.kernel.tile_ir
    assert ir.count(" = desc_load ") == 1 and ir.count("async_desc_load ") == 1 + 2 * 3
    s = q.astype(np.float64) @ k.astype(np.float64).T
    p = np.exp2(s - s.max(1, keepdims=True))  # the kernel's exp2 of unscaled scores
    ref = (p / p.sum(1, keepdims=True)) @ v.astype(np.float64) + q
    np.testing.assert_allclose(o.astype(np.float64), ref, atol=1e-2, rtol=1e-2)


@needs_ptxas
def test_q_kept_in_registers_compiles_with_one_swizzle():
    x = np.zeros((1024, 64), np.float16)
    d64 = ww.TensorDescriptor.from_tensor(x, [64, 64])
    d32 = ww.TensorDescriptor.from_tensor(x, [32, 64])
    values = attention_q_kept.bind((d64, d32, d32, d64, 1024),
                                   dict(HEAD_DIM=64, BLOCK_M=64, BLOCK_N=32))
    kernel = attention_q_kept.compile_for(values, False, (4, 3, 1), target="sm_90a").kernel
    assert kernel.spill_bytes == 0
    params = {name: ty for name, ty, _, _ in kernel.params}
    assert "swizzle=128" in params["q_desc"], params
