"""Attention loops written with tl.dot on sm_100a (issue 19): the pipeliner takes the loop of
Triton's fused-attention form (S = Q K^T, softmax, O = P V + O) as it does on sm_90a (Q in a
swizzled buffer, K and V copied ahead by cp.async or TMA), and issues both dots as tcgen05.mma
into tensor memory: S read back by tcgen05.ld, P stored into tensor memory as the second MMA's A,
O accumulated there across the loop (loaded only where the loop rescales it). Without it the dots
stayed mma.sync with both accumulators in registers: TLX's cross-attention tutorial spilled up to
21 KB a thread at 128 x 128 tiles.

- The sm_100a Tile IR runs in the interpreter against float64 NumPy references: an MMA lands
  when a later commit completes, so reading S before its wait, or overwriting P or a K / V slot
  an MMA still reads, would be reported.
- The PTX assembles with ptxas for sm_100a without spills at the tile sizes attention uses.

No Blackwell GPU ran any of this."""
import importlib
import math
import re
from pathlib import Path

import numpy as np
import pytest

import attnregs_kernels
import blackwell_tl_attention_kernels as kernels
from test_attention_tma_pipeline import reference as softmax_reference

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

TMA_PATH = Path(attnregs_kernels.__file__)
PATH = Path(kernels.__file__)


def compile_kernel(path, name, sig, target="sm_100a", num_warps=4, num_stages=3,
                   stage="tile-ir"):
    return native_loader.native().compile([(str(path), path.read_text())], name, sig, {},
                                          target=target, num_warps=num_warps,
                                          num_stages=num_stages, stage=stage)


def tma_sig(d, bm, bn, causal):
    return (f"q_desc:desc<fp16,{bm}x{d}>,k_desc:desc<fp16,{bn}x{d}>,"
            f"v_desc:desc<fp16,{bn}x{d}>,o_desc:desc<fp16,{bm}x{d}>,lse_ptr:*fp32:16,"
            f"sm_scale:fp32,H:i32,N_CTX:i32,HEAD_DIM={d},BLOCK_M={bm},BLOCK_N={bn},"
            f"CAUSAL={int(causal)}")


def ptr_sig(d, bm, bn, dtype="fp16"):
    return (f"q_ptr:*{dtype}:16,k_ptr:*{dtype}:16,v_ptr:*{dtype}:16,o_ptr:*{dtype}:16,"
            f"sm_scale:fp32,N_CTX:i32,HEAD_DIM={d},BLOCK_M={bm},BLOCK_N={bn}")


def silu_sig(d, bm, bn):
    return (f"q_desc:desc<fp16,{bm}x{d}>,k_desc:desc<fp16,{bn}x{d}>,"
            f"v_desc:desc<fp16,{bn}x{d}>,o_ptr:*fp32:16,alpha:fp32,N_CTX:i32,HEAD_DIM={d},"
            f"BLOCK_M={bm},BLOCK_N={bn}")


def buf(x, writable=False):
    return (x.ctypes.data, x.nbytes, writable)


def desc(t):
    rows = t.shape[0] * t.shape[1]
    flat = t.reshape(rows, t.shape[2])
    return (flat.ctypes.data, flat.nbytes, [rows, t.shape[2]], [t.shape[2], 1])


def assert_rewritten(ir, loops):
    assert " = dot " not in ir, ir
    assert ir.count("tcgen05_mma") == 2 * loops
    # S (fp32), P (16-bit, the second MMA's A) and O (fp32) in tensor memory, once per kernel:
    # causal attention's second loop takes over the first one's.
    assert len(re.findall(r'local_alloc \{storage = "tmem"[,}]', ir)) == 3, ir
    # P V is committed by the next S MMA, the last one after the loop.
    assert ir.count("tcgen05_commit") == loops


@pytest.mark.parametrize("heads,n_ctx,causal,stages,d,bm,bn", [
    (2, 64, False, 3, 16, 64, 16),     # one query block per head; copies past the end
    (1, 256, False, 3, 16, 64, 16),    # the slots wrap: the ring's phases flip
    (1, 192, False, 2, 32, 64, 32),    # num_stages=2
    (1, 192, True, 3, 16, 64, 16),     # causal: two loops, one ring and one set of TMEM tiles
    (1, 256, True, 2, 64, 128, 64),    # 128-row tiles
])
def test_tma_softmax_attention_in_interpreter(heads, n_ctx, causal, stages, d, bm, bn):
    k = compile_kernel(TMA_PATH, "attention_tma_fwd", tma_sig(d, bm, bn, causal),
                       num_stages=stages)
    assert_rewritten(k.tile_ir, 2 if causal else 1)
    rng = np.random.default_rng(7)
    q, kk, v = (rng.standard_normal((heads, n_ctx, d)).astype(np.float16) for _ in range(3))
    o = np.zeros_like(q)
    lse = np.zeros((heads, n_ctx), np.float32)
    k.interpret((n_ctx // bm, heads, 1),
                [desc(q), desc(kk), desc(v), desc(o), buf(lse, True), 0.5, heads, n_ctx])
    ref, lse_ref = softmax_reference(q, kk, v, causal, 0.5)
    np.testing.assert_allclose(o.astype(np.float64), ref, atol=4e-3, rtol=4e-3)
    np.testing.assert_allclose(lse, lse_ref, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("heads,n_ctx,d,bm,bn,stages", [
    (2, 77, 16, 64, 16, 3),    # keys and rows past N_CTX masked, five key blocks
    (1, 130, 32, 128, 32, 2),  # 128-row tiles, one row past a block
    (1, 1, 16, 64, 16, 3),     # one key: every prologue copy but the first past the end
])
def test_pointer_softmax_attention_in_interpreter(heads, n_ctx, d, bm, bn, stages):
    k = compile_kernel(PATH, "attention_ptr_fwd", ptr_sig(d, bm, bn), num_stages=stages)
    ir = k.tile_ir
    assert_rewritten(ir, 1)
    assert "async_load" in ir and "async_desc_load" not in ir
    rng = np.random.default_rng(3)
    q, kk, v = (rng.standard_normal((heads, n_ctx, d)).astype(np.float16) for _ in range(3))
    o = np.full_like(q, np.nan)
    k.interpret((-(-n_ctx // bm), heads, 1), [buf(q), buf(kk), buf(v), buf(o, True), 0.5, n_ctx])
    ref, _ = softmax_reference(q, kk, v, False, 0.5)
    np.testing.assert_allclose(o.astype(np.float64), ref, atol=4e-3, rtol=4e-3)


def silu_reference(q, k, v, alpha):
    s = np.einsum("hmd,hnd->hmn", q.astype(np.float64), k.astype(np.float64)) * alpha
    act = (s / (1 + np.exp(-s))).astype(np.float16).astype(np.float64)
    return np.einsum("hmn,hnd->hmd", act, v.astype(np.float64)) / q.shape[1]


@pytest.mark.parametrize("heads,n_ctx,d,bm,bn", [(2, 128, 16, 64, 32), (1, 256, 32, 128, 64)])
def test_accumulate_only_attention_keeps_o_in_tensor_memory(heads, n_ctx, d, bm, bn):
    """acc += tl.dot(act, v): the loop never reads O, so no tcgen05.ld of it until the end."""
    k = compile_kernel(PATH, "silu_attention_fwd", silu_sig(d, bm, bn))
    ir = k.tile_ir
    assert_rewritten(ir, 1)
    loop = ir[ir.index(" = for "):]
    loop = loop[:loop.index("\n  }")]
    assert loop.count("local_load") == 1  # S only
    rng = np.random.default_rng(11)
    q, kk, v = (rng.standard_normal((heads, n_ctx, d)).astype(np.float16) for _ in range(3))
    o = np.full((heads, n_ctx, d), np.nan, np.float32)
    k.interpret((n_ctx // bm, heads, 1), [desc(q), desc(kk), desc(v), buf(o, True), 0.25, n_ctx])
    np.testing.assert_allclose(o, silu_reference(q, kk, v, 0.25), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("heads,n_ctx,d,bm,bn", [(1, 256, 128, 64, 128), (2, 128, 64, 64, 64)])
def test_transposed_attention_in_interpreter(heads, n_ctx, d, bm, bn):
    """S^T = K Q^T, O^T += V^T P^T: K and V^T are the MMAs' A operands, Q^T a view of Q's
    buffer, and P^T (the second MMA's B, which tensor memory cannot hold) goes through shared
    memory."""
    k = compile_kernel(PATH, "silu_attention_t_fwd", silu_sig(d, bm, bn))
    ir = k.tile_ir
    assert " = dot " not in ir and ir.count("tcgen05_mma") == 2
    assert len(re.findall(r'local_alloc \{storage = "tmem"[,}]', ir)) == 2  # S^T and O^T
    assert "attn_p_t" in ir and 'fence {kind = "async_shared"}' in ir
    rng = np.random.default_rng(13)
    q, kk, v = (rng.standard_normal((heads, n_ctx, d)).astype(np.float16) for _ in range(3))
    o = np.full((heads, d, n_ctx), np.nan, np.float32)
    k.interpret((n_ctx // bm, heads, 1), [desc(q), desc(kk), desc(v), buf(o, True), 0.25, n_ctx])
    np.testing.assert_allclose(o.transpose(0, 2, 1), silu_reference(q, kk, v, 0.25), atol=2e-3,
                               rtol=2e-3)


def by_length_sig(d, bm, bn, bm1, bn1):
    return (f"q_desc:desc<fp16,{bm}x{d}>,k_desc:desc<fp16,{bn}x{d}>,v_desc:desc<fp16,{bn}x{d}>,"
            f"q1_desc:desc<fp16,{bm1}x{d}>,k1_desc:desc<fp16,{bn1}x{d}>,"
            f"v1_desc:desc<fp16,{bn1}x{d}>,o_ptr:*fp32:16,alpha:fp32,N_CTX:i32,HEAD_DIM={d},"
            f"BLOCK_M={bm},BLOCK_N={bn},BLOCK_M1={bm1},BLOCK_N1={bn1}")


def tmem_tiles(ir):
    """(name, first column, columns) of each tensor-memory tile of the pipeliner's region."""
    tiles = []
    for name, offset, n, elem in re.findall(
            r'%\d+_(\w+) = local_alloc \{storage = "tmem", alias = \d+, alias_offset = (\d+)\} '
            r': buffer<1x\d+x(\d+)x(\w+), tmem>', ir):
        tiles.append((name, int(offset), int(n) * (2 if elem == "fp32" else 1) // 2))
    return tiles


@pytest.mark.parametrize("d,bm,bn,bm1,bn1,stages", [
    (128, 128, 128, 64, 64, 2),  # TLX cross-attention's configuration: 544 columns in all
    (128, 128, 64, 64, 64, 4),
])
def test_attention_loops_in_two_branches_share_tensor_and_shared_memory(ptxas, d, bm, bn, bm1,
                                                                         bn1, stages):
    """The two loops of a kernel that picks its tiles by the sequence length lie in the two
    branches of an if: only one runs, so both take tcgen05 with their S, P and O over the same
    tensor-memory columns and their K / V rings over the same shared memory. Budgeted as if
    both ran, the second loop had stayed mma.sync (and spilled)."""
    k = compile_kernel(PATH, "silu_attention_by_length", by_length_sig(d, bm, bn, bm1, bn1),
                       num_stages=stages, stage="ptx")
    ir = k.tile_ir
    assert " = dot " not in ir and ir.count("tcgen05_mma") == 4
    tiles = tmem_tiles(ir)
    assert [t[0] for t in tiles].count("attn_s_tmem") == 2, tiles
    # Each loop's tiles from column 0: the region is the larger loop's, within 512 columns.
    assert sorted(t[1] for t in tiles if t[0] == "attn_s_tmem") == [0, 0]
    assert max(t[1] + t[2] for t in tiles) <= 512
    assert k.shared_bytes <= 232448
    run = ptxas(k.ptx, arch="sm_100a", verbose=True)
    assert run.spill_bytes == 0, run.log


@pytest.mark.parametrize("n_ctx,block", [(64, 64), (128, 128), (256, 128)])
def test_attention_loops_in_two_branches_in_interpreter(n_ctx, block):
    """Either branch's loop gives silu_attention_fwd's result: one 64-row block through the *1
    descriptors, or 128-row blocks (N_CTX a multiple of the block, as the kernel asks)."""
    d = 32
    k = compile_kernel(PATH, "silu_attention_by_length", by_length_sig(d, 128, 64, 64, 32),
                       num_stages=2)
    assert k.tile_ir.count("tcgen05_mma") == 4
    rng = np.random.default_rng(17)
    heads = 2
    q, kk, v = (rng.standard_normal((heads, n_ctx, d)).astype(np.float16) for _ in range(3))
    o = np.full((heads, n_ctx, d), np.nan, np.float32)
    args = [desc(q), desc(kk), desc(v)] * 2 + [buf(o, True), 0.25, n_ctx]
    k.interpret((-(-n_ctx // block), heads, 1), args)
    np.testing.assert_allclose(o, silu_reference(q, kk, v, 0.25), atol=2e-3, rtol=2e-3)


def masked_silu_t_reference(q, k, v, alpha):
    s = np.einsum("hnd,hmd->hnm", k.astype(np.float64), q.astype(np.float64)) * alpha
    act = (s / (1 + np.exp(-s))).astype(np.float16).astype(np.float64)
    return np.einsum("hnd,hnm->hdm", v.astype(np.float64), act) / q.shape[1]


def masked_silu_t_sig(d, bm, bn, recompute=0, fast_tanh=0):
    return (f"q_desc:desc<fp16,{bm}x{d}>,k_desc:desc<fp16,{bn}x{d}>,v_desc:desc<fp16,{bn}x{d}>,"
            f"o_ptr:*fp32:16,alpha:fp32,N_CTX:i32,HEAD_DIM={d},BLOCK_M={bm},BLOCK_N={bn},"
            f"RECOMPUTE_OFFSETS={recompute},FAST_TANH={fast_tanh}")


def test_cross_attention_transposed_form_takes_tcgen05_at_128x128(ptxas):
    """TLX cross-attention's TRANS form at 128 x 128, D 128: K / V stages, Q and P^T fit beside
    the output's conversion only because nothing in the loop uses the scratch region. Its query
    mask's offsets are carried through the loop unchanged (assigned in the loop under a false
    constexpr): forwarded to the loop's entry value, the mask is recomputed in the tile's layout
    instead of converted through shared memory every iteration, and its inline tanh.approx
    works on registers."""
    k = compile_kernel(PATH, "masked_silu_attention_t_fwd",
                       masked_silu_t_sig(128, 128, 128, fast_tanh=1), num_stages=2, stage="ptx")
    ir = k.tile_ir
    assert " = dot " not in ir and ir.count("tcgen05_mma") == 2, ir
    assert k.shared_bytes <= 232448
    assert "tanh.approx.f32" in k.ptx
    run = ptxas(k.ptx, arch="sm_100a", verbose=True)
    assert run.spill_bytes == 0, run.log


@pytest.mark.parametrize("n_ctx,recompute,fast_tanh", [(200, 0, 1), (128, 1, 0)])
def test_masked_transposed_attention_in_interpreter(n_ctx, recompute, fast_tanh):
    d, bm, bn = 64, 64, 64  # (K and V^T are the MMAs' A operands: 64 rows at least)
    k = compile_kernel(PATH, "masked_silu_attention_t_fwd",
                       masked_silu_t_sig(d, bm, bn, recompute, fast_tanh), num_stages=2)
    assert k.tile_ir.count("tcgen05_mma") == 2
    rng = np.random.default_rng(23)
    heads = 2
    q, kk, v = (rng.standard_normal((heads, n_ctx, d)).astype(np.float16) for _ in range(3))
    o = np.full((heads, d, n_ctx), np.nan, np.float32)
    k.interpret((-(-n_ctx // bm), heads, 1), [desc(q), desc(kk), desc(v), buf(o, True), 0.25,
                                              n_ctx])
    np.testing.assert_allclose(o, masked_silu_t_reference(q, kk, v, 0.25), atol=4e-3, rtol=4e-3)


def test_a_loop_that_may_use_scratch_keeps_the_epilogues_room(ptxas):
    """A load in the loop besides K and V may arrive in a layout S^T's is converted from
    through the scratch region, which the layout pass then places above the stages: the
    epilogue's room is kept beside them, so this 128 x 128 transposed loop (which would need
    263,168 bytes taken at two stages) stays mma.sync and compiles."""
    sig = ("q_desc:desc<fp16,128x128>,k_desc:desc<fp16,128x128>,v_desc:desc<fp16,128x128>,"
           "bias_ptr:*fp32:16,o_ptr:*fp32:16,N_CTX:i32,HEAD_DIM=128,BLOCK_M=128,BLOCK_N=128")
    k = compile_kernel(PATH, "biased_silu_attention_t_fwd", sig, num_stages=2, stage="ptx")
    assert k.shared_bytes <= 232448
    ptxas(k.ptx, arch="sm_100a")  # (fails the test with its log where ptxas refuses it)


@pytest.mark.parametrize("kernel,sig,warps", [
    ("tma", tma_sig(128, 128, 128, False), 4),
    ("tma", tma_sig(128, 128, 128, True), 4),
    ("tma", tma_sig(64, 128, 128, True), 4),
    ("tma", tma_sig(128, 128, 64, False), 8),
    ("ptr", ptr_sig(128, 128, 64), 4),
    ("silu", silu_sig(128, 128, 128), 4),
    ("silu_t", silu_sig(128, 64, 128), 4),
    # 128 x 128 transposed: K / V stages, Q and P^T fit only with the output's conversion over
    # the dead stages (the loop's elementwise work uses no scratch)
    ("silu_t", silu_sig(128, 128, 128), 4),
])
def test_tcgen05_attention_ptx_without_spills(ptxas, kernel, sig, warps):
    path, name = {"tma": (TMA_PATH, "attention_tma_fwd"), "ptr": (PATH, "attention_ptr_fwd"),
                  "silu": (PATH, "silu_attention_fwd"),
                  "silu_t": (PATH, "silu_attention_t_fwd")}[kernel]
    ptx = compile_kernel(path, name, sig, num_warps=warps, stage="ptx").ptx
    assert "mma.sync" not in ptx
    mmas = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[(%r\d+)\], (\S+), ", ptx)
    assert mmas
    # P V reads its A operand from tensor memory ([address]), S = Q K^T from a descriptor; in
    # the transposed form both A operands (K, V^T) are descriptors.
    assert any(a.startswith("%rd") for _, a in mmas)
    assert any(a.startswith("[") for _, a in mmas) == (kernel != "silu_t")
    assert "tcgen05.ld" in ptx and "tcgen05.st" in ptx and "tcgen05.commit" in ptx
    run = ptxas(ptx, arch="sm_100a", verbose=True)
    assert run.spill_bytes == 0, run.log


def test_two_warps_stay_mma_sync():
    """tcgen05.ld reads by whole warp groups: a 2-warp kernel keeps both dots mma.sync."""
    ir = compile_kernel(PATH, "attention_ptr_fwd", ptr_sig(32, 64, 32), num_warps=2).tile_ir
    assert "tcgen05_mma" not in ir and ir.count(" = dot ") == 2


def test_sm90a_keeps_wgmma():
    ir = compile_kernel(TMA_PATH, "attention_tma_fwd", tma_sig(64, 128, 64, False),
                        target="sm_90a").tile_ir
    assert "tcgen05" not in ir and ir.count("async_dot ") == 2


@pytest.mark.parametrize("target,tcgen05", [("sm_100a", True), ("sm_90a", False), ("sm_80", False)])
def test_interpreter_runs_the_stand_in_targets_tile_ir(monkeypatch, target, tcgen05):
    """A launch on NumPy arrays runs the Tile IR of the GPU the interpreter stands in for:
    sm_100a's tcgen05 attention under WARPWEAVE_TARGET=sm_100a, sm_90a's otherwise (sm_80 has
    no TLX ops to stage the loop with)."""
    monkeypatch.setenv("WARPWEAVE_TARGET", target)
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    rng = np.random.default_rng(5)
    heads, n_ctx, d = 1, 100, 32
    q, kk, v = (rng.standard_normal((heads, n_ctx, d)).astype(np.float16) for _ in range(3))
    o = np.zeros_like(q)
    compiled = kernels.attention_ptr_fwd[(2, heads)](q, kk, v, o, 0.5, n_ctx, HEAD_DIM=d,
                                                    BLOCK_M=64, BLOCK_N=32, num_warps=4,
                                                    num_stages=3)
    ir = compiled.kernel.tile_ir
    assert ("tcgen05_mma" in ir) == tcgen05
    assert ("async_dot " in ir) != tcgen05
    ref, _ = softmax_reference(q, kk, v, False, 0.5)
    np.testing.assert_allclose(o.astype(np.float64), ref, atol=4e-3, rtol=4e-3)
