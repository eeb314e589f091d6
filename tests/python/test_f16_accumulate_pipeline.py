"""fp16 accumulators on sm_90a's asynchronous wgmma (tests/python/f16_accumulate_kernels.py;
eight_bit_dot_kernels.matmul with ACC = tl.float16).

The software pipeline takes matmul K loops accumulating in fp16 as it takes fp32 ones: the
loads become cp.async (through descriptors: TMA) copies into num_stages buffers and the dot an
async wgmma m64nNk16.f16.f16.f16 with one MMA in flight (wgmma.wait_group 1), its accumulator
carried across iterations as wgmma's packed words (instrN / 4 registers of two fp16 a tile)
and unpacked once, after the loop's last wait. ptxas takes the kernels without spills or serialized
wgmmas at 128x128x64 / 4 warps and 128x256x64 / 8 warps, 3 stages. The interpreter runs the
pipelined sm_90a Tile IR: its results equal those of the plain form (num_stages=1, a
synchronous tl.dot per iteration) bit for bit, and a float32 NumPy product within fp16
accumulation's error.

tlx.async_dot into an fp16 register accumulator: the same wgmma; a loop carries the packed
words from one wait to the next MMA (no unpacking and packing per iteration)."""

import importlib
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

import eight_bit_dot_kernels as ek
import f16_accumulate_kernels as fk
from mma_testing import compiled, mmas

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

WGMMA = r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f16\.f16\.f16"


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def operands(M, N, K, rng=None):
    """A [M, K] and B [K, N] with entries of about K^-1/4: sums of order 1 at every K."""
    if rng is None:
        return np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)
    scale = K**-0.25
    return ((rng.standard_normal((M, K)) * scale).astype(np.float16),
            (rng.standard_normal((K, N)) * scale).astype(np.float16))


def call_args(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = np.full((M, N), np.nan, np.float16)
    return (a, b, c, M, N, K, a.strides[0] // 2, a.strides[1] // 2, b.strides[0] // 2,
            b.strides[1] // 2, c.strides[0] // 2, c.strides[1] // 2)


def compile_matmul(BM, BN, BK, warps, stages, add=False, M=512, N=512, K=512):
    a, b = operands(M, N, K)
    return compiled(fk.matmul_f16_acc, call_args(a, b), dict(BM=BM, BN=BN, BK=BK, ADD=add),
                    "sm_90a", warps, stages)


def loop_body(ptx):
    """The PTX of the (one) K loop's body: from its head to its back edge."""
    return ptx.split("$L_for_", 1)[1].split("bra.uni", 1)[0]


def check_pipelined(k, BM, BN, BK, warps, stages):
    ir = k.tile_ir
    assert " = dot " not in ir, ir
    assert "async_dot " in ir and "{pendings = 1}" in ir, ir
    assert f"buffer<{stages}x{BM}x{BK}xfp16, smem>" in ir, ir
    assert f"buffer<{stages}x{BK}x{BN}xfp16, smem>" in ir, ir
    ptx = k.ptx
    assert "cp.async.cg.shared.global" in ptx
    names = mmas(ptx)
    assert len(names) == 1 and re.fullmatch(WGMMA, names[0]), names
    instr_n = int(re.fullmatch(WGMMA, names[0]).group(1))
    # The accumulator operand: instrN / 4 words, each two fp16 elements.
    lists = re.findall(r"wgmma\.mma_async\S+ \{([^}]*)\}", ptx)
    assert {len(x.split(",")) for x in lists} == {instr_n // 4}
    body = loop_body(ptx)
    # One MMA in flight: the loop waits for the previous one only, never for all.
    assert body.count("wgmma.wait_group.sync.aligned 1;") == 1, body
    assert "wgmma.wait_group.sync.aligned 0;" not in body, body
    assert "wgmma.commit_group.sync.aligned;" in body
    # The loop carries the packed words: nothing in it unpacks or packs the accumulator.
    assert not re.search(r"mov\.b32 \{%\w+, %\w+\}, %r\d+;", body), body
    assert not re.search(r"mov\.b32 %r\d+, \{%\w+, %\w+\};", body), body
    # After the loop, the last MMA is retired before the words are unpacked.
    after = ptx.split("$L_endfor_", 1)[1]
    assert after.index("wgmma.wait_group.sync.aligned 0;") < after.index("mov.b32 {")
    return instr_n


@pytest.mark.parametrize("BM,BN,BK,warps", [(128, 128, 64, 4), (128, 256, 64, 8),
                                            (64, 64, 32, 4), (128, 64, 32, 8)])
@pytest.mark.parametrize("add", [False, True], ids=["acc", "add"])
def test_k_loop_is_pipelined(BM, BN, BK, warps, add, ptxas):
    k = compile_matmul(BM, BN, BK, warps, 3, add)
    check_pipelined(k, BM, BN, BK, warps, 3)
    log = ptxas(k.ptx, "sm_90a", verbose=True).log
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", log), log
    # No wgmma reads registers of one in flight: none serialized, no wait injected (C751x).
    assert "serialized" not in log and not re.search(r"C751\d", log), log


@pytest.mark.parametrize("stages", [2, 4])
def test_stages(stages):
    k = compile_matmul(128, 128, 64, 4, stages)
    check_pipelined(k, 128, 128, 64, 4, stages)
    # stages - 1 iterations copied ahead, then one copy an iteration: A and B each.
    assert k.tile_ir.count("async_load ") == 2 * stages


def test_b_given_transposed_is_pipelined():
    """eight_bit_dot_kernels.matmul: B as the transpose of an [N, K] tile (K-major)."""
    a, bt = np.zeros((256, 256), np.float16), np.zeros((256, 256), np.float16)
    args = (a, bt, np.zeros((256, 256), np.float16), 256, 256, 256)
    k = compiled(ek.matmul, args, dict(BM=128, BN=128, BK=64, ACC=tl.float16), "sm_90a", 4, 3)
    ir = k.tile_ir
    assert " = dot " not in ir and "async_dot " in ir and "local_trans" in ir, ir
    assert re.fullmatch(WGMMA, mmas(k.ptx)[0])
    assert k.spill_bytes == 0


@pytest.mark.parametrize("BM,BN,BK,warps", [(128, 128, 64, 4), (128, 256, 64, 8)])
def test_registers_against_the_plain_form(BM, BN, BK, warps):
    """num_stages=1 keeps the synchronous tl.dot (the plain form); 3 stages pipeline it. Neither
    spills; the counts are printed for the record."""
    plain = compile_matmul(BM, BN, BK, warps, 1)
    assert " = dot " in plain.tile_ir and "async_dot" not in plain.tile_ir
    assert "wgmma.wait_group.sync.aligned 0;" in loop_body(plain.ptx)
    piped = compile_matmul(BM, BN, BK, warps, 3)
    assert plain.spill_bytes == 0 and piped.spill_bytes == 0
    print(f"{BM}x{BN}x{BK} {warps} warps: plain {plain.registers} registers, "
          f"3 stages {piped.registers} registers")


def test_fp32_accumulator_kernel_is_unchanged_by_the_f16_path():
    """The same loop into fp32 (eight_bit_dot_kernels.matmul, ACC = tl.float32) keeps its f32
    wgmma and never packs."""
    args = (np.zeros((256, 256), np.float16), np.zeros((256, 256), np.float16),
            np.zeros((256, 256), np.float32), 256, 256, 256)
    k = compiled(ek.matmul, args, dict(BM=128, BN=128, BK=64), "sm_90a", 4, 3)
    assert mmas(k.ptx) == ["wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"]
    assert not re.search(r"mov\.b32 \{%\w+, %\w+\}", k.ptx)


def tma_args(a, b, BM, BN, BK):
    M, K = a.shape
    N = b.shape[1]
    c = np.full((M, N), np.nan, np.float16)
    descs = (ww.TensorDescriptor.from_tensor(a, [BM, BK]),
             ww.TensorDescriptor.from_tensor(np.ascontiguousarray(b.T), [BN, BK]),
             ww.TensorDescriptor.from_tensor(c, [BM, BN]))
    return descs + (K, ), c


@pytest.mark.parametrize("BM,BN,BK,warps", [(128, 128, 64, 4), (128, 256, 64, 8)])
def test_tma_k_loop_is_pipelined(BM, BN, BK, warps, ptxas):
    """Loads through host descriptors: TMA copies into the stages, one barrier a slot."""
    args, _ = tma_args(*operands(1024, 1024, 1024), BM, BN, BK)
    k = compiled(fk.tma_matmul_f16_acc, args, dict(BM=BM, BN=BN, BK=BK), "sm_90a", warps, 3)
    ir = k.tile_ir
    assert " = dot " not in ir and " desc_load " not in ir, ir
    assert ir.count("async_desc_load ") == 2 * 3 and "{pendings = 1}" in ir, ir
    body = loop_body(k.ptx)
    assert re.search(WGMMA, body) and "cp.async.bulk.tensor" in body
    assert body.count("wgmma.wait_group.sync.aligned 1;") == 1
    assert "wgmma.wait_group.sync.aligned 0;" not in body
    log = ptxas(k.ptx, "sm_90a", verbose=True).log
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", log), log
    assert "serialized" not in log and not re.search(r"C751\d", log), log


# ---- the interpreter, which runs the pipelined sm_90a Tile IR ----------------------------------


def run(a, b, BM, BN, BK, warps, stages, add=False):
    args = call_args(a, b)
    M, N = args[3], args[4]
    grid = (-(-M // BM), -(-N // BN))
    fk.matmul_f16_acc[grid](*args, BM=BM, BN=BN, BK=BK, ADD=add, num_warps=warps,
                            num_stages=stages)
    return args[2]


def close_to_f32(c, a, b):
    """fp16 accumulation against the float32 product: one fp16 rounding of the running sum per
    K step (a tl.dot in the interpreter, an instruction on the GPU), a random walk growing as
    sqrt(K)."""
    assert c.dtype == np.float16 and np.isfinite(c).all()
    ref = a.astype(np.float32) @ b.astype(np.float32)
    K = a.shape[1]
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=1e-2,
                               atol=1e-2 * max(1.0, (K / 128)**0.5))


@pytest.mark.parametrize("M,N,K,BM,BN,BK,warps,stages", [
    (200, 136, 328, 64, 64, 32, 4, 3),     # ragged M / N / K, masked, several tiles
    (130, 70, 40, 64, 64, 32, 4, 4),       # two K steps, copies past the end predicated off
    (128, 128, 1024, 128, 128, 64, 4, 3),  # the GPU tile, 16 K steps
    (100, 260, 96, 64, 128, 32, 8, 3),
])
@pytest.mark.parametrize("add", [False, True], ids=["acc", "add"])
def test_interpreter_matches_the_plain_form(rng, M, N, K, BM, BN, BK, warps, stages, add):
    a, b = operands(M, N, K, rng)
    piped = run(a, b, BM, BN, BK, warps, stages, add)
    plain = run(a, b, BM, BN, BK, warps, 1, add)
    # Each iteration's dot rounds its sum to fp16 once, pipelined or not.
    np.testing.assert_array_equal(piped, plain)
    close_to_f32(piped, a, b)


@pytest.mark.parametrize("M,N,K,stages", [(200, 136, 328, 3), (130, 72, 40, 4)])
def test_tma_k_loop_in_interpreter(rng, M, N, K, stages):
    a, b = operands(M, N, K, rng)
    args, c = tma_args(a, b, 64, 64, 32)
    compiled = fk.tma_matmul_f16_acc[(-(-M // 64), -(-N // 64))](*args, BM=64, BN=64, BK=32,
                                                                 num_warps=4, num_stages=stages)
    assert compiled.interpret and "async_desc_load " in compiled.kernel.tile_ir
    close_to_f32(c, a, b)


def test_interpreted_ir_is_the_pipelined_one():
    """What the interpreter runs for the launches above: sm_90a's Tile IR, pipelined."""
    k = compile_matmul(64, 64, 32, 4, 3, M=200, N=136, K=328)
    assert "async_dot " in k.tile_ir and "async_load " in k.tile_ir


# ---- tlx.async_dot into an fp16 accumulator -----------------------------------------------------


def tlx_args(BM, BN, K, rng=None):
    a, b = operands(BM, BN, K, rng)
    return (a, b, np.full((BM, BN), np.nan, np.float16), K), a, b


@pytest.mark.parametrize("BM,BN,BK,warps", [(64, 64, 32, 4), (128, 128, 64, 4), (128, 256, 64, 8)])
def test_tlx_async_dot_accumulates_in_fp16(BM, BN, BK, warps, ptxas):
    args, _, _ = tlx_args(BM, BN, 256)
    k = compiled(fk.tlx_f16_acc, args, dict(BM=BM, BN=BN, BK=BK), "sm_90a", warps)
    names = mmas(k.ptx)
    assert len(names) == 1 and re.fullmatch(WGMMA, names[0]), names
    # The loop carries the words its wait returned, accumulating into them in place: no
    # instruction of the loop but the wgmmas names them (no unpacking, packing or copy).
    body = loop_body(k.ptx)
    assert "wgmma.wait_group.sync.aligned 0;" in body
    words = set()
    for x in re.findall(r"wgmma\.mma_async\S+ \{([^}]*)\}", body):
        words |= set(x.split(", "))
    others = [ln for ln in body.splitlines() if "wgmma.mma_async" not in ln]
    assert not [ln for ln in others if set(re.findall(r"%r\d+\b", ln)) & words], body
    log = ptxas(k.ptx, "sm_90a", verbose=True).log
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", log), log
    assert "serialized" not in log and not re.search(r"C751\d", log), log


@pytest.mark.parametrize("K", [32, 256])
def test_tlx_async_dot_into_fp16_in_interpreter(rng, K):
    args, a, b = tlx_args(64, 64, K, rng)
    fk.tlx_f16_acc[(1, )](*args, BM=64, BN=64, BK=32, num_warps=4)
    close_to_f32(args[2], a, b)
