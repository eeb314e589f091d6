"""The Blackwell library GEMM (issue 19): warpweave.ops.kernels.blackwell.gemm_ws, a persistent
warp-specialized fp16 / bf16 GEMM with TMEM accumulators (a 1-warp TMA producer, a 1-warp tcgen05
MMA task, an epilogue warp group; two accumulators so a tile's epilogue overlaps the next tile's
MMAs), tiles from cluster launch control or static persistence, and a 2-CTA mode (CTA pairs
sharing one tcgen05.mma.cta_group::2, B split between them), reached through ops.matmul_tlx
("bw_ws", "bw_ws_2cta") and ops.matmul on sm_100 GPUs.

Checked in the interpreter (race checks on) against float64 NumPy on data whose sums are exact
in fp32: ragged M / N / K edges, several tiles per program (static persistence over the
interpreter's 4 SMs; CLC, where the first program cancels and takes later ones), seeded CLC
schedules; planted synchronization bugs (tests/python/blackwell_gemm_ws_plants.py) reported at
their lines; each configuration compiled for sm_100a and assembled by ptxas (registers, no
spills, shared memory). No Blackwell GPU ran any of this."""
import importlib
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.ops as ops
from warpweave.ops import _common, _matmul
from warpweave.ops.kernels.blackwell import gemm_ws

import blackwell_gemm_ws_plants as plants
from blackwell_testing import descriptor, eighths, line_of

ml_dtypes = pytest.importorskip("ml_dtypes")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


def operands(M, N, K, dtype, seed):
    rng = np.random.default_rng(seed)
    return eighths(rng, (M, K)).astype(dtype), eighths(rng, (K, N)).astype(dtype)


def expected(a, b):
    # Products of eighths summed over K <= 256 are exact in fp32: one rounding to C's dtype.
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)


# (variant, config overrides, M, N, K, dtype). The interpreter's GPU has 4 SMs: static
# persistence takes 9 tiles (3 x 3 at 128x256) over 4 programs; with CLC one program per tile
# is launched and the interpreter's first program cancels the others and takes their tiles.
CASES = [
    ("bw_ws", {}, 300, 520, 200, "float16"),
    ("bw_ws", {"USE_CLC": False}, 300, 520, 200, "bfloat16"),
    ("bw_ws_2cta", {}, 300, 520, 200, "float16"),
    ("bw_ws_2cta", {"USE_CLC": False}, 300, 520, 200, "bfloat16"),
    # Smaller tiles and other depths: 128x64x32, 2 stages, C whole / in eight chunks.
    ("bw_ws", {"BLOCK_N": 64, "BLOCK_K": 32, "NUM_STAGES": 2, "EPI_SUBTILE": 1}, 200, 104, 72,
     "float16"),
    ("bw_ws_2cta", {"BLOCK_N": 128, "BLOCK_K": 32, "NUM_STAGES": 3, "EPI_SUBTILE": 8,
                    "USE_CLC": False}, 520, 264, 40, "bfloat16"),
]


@pytest.mark.parametrize("variant,config,M,N,K,dtype", CASES)
def test_matches_numpy(interpret, variant, config, M, N, K, dtype):
    a, b = operands(M, N, K, DTYPES[dtype], M + N + K)
    c = ops.matmul_tlx(a, b, variant, config)
    assert c.dtype == a.dtype and c.shape == (M, N)
    np.testing.assert_array_equal(c, expected(a, b))


@pytest.mark.parametrize("variant", ["bw_ws", "bw_ws_2cta"])
def test_seeded_clc_schedules(interpret, monkeypatch, variant):
    # Seeded runs let try_cancel take random clusters, or fail while tiles remain (those
    # programs then start): every tile is still stored once, exactly.
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", "3")
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", "3")
    config = {"BLOCK_N": 64, "BLOCK_K": 32, "NUM_STAGES": 2, "EPI_SUBTILE": 2}
    a, b = operands(400, 200, 96, np.float16, 7)
    np.testing.assert_array_equal(ops.matmul_tlx(a, b, variant, config), expected(a, b))


def test_edges_and_errors(interpret):
    a, b = operands(3, 8, 16, np.float16, 1)
    np.testing.assert_array_equal(ops.matmul_tlx(a, b, "bw_ws"), expected(a, b))
    empty = ops.matmul_tlx(np.ones((5, 0), np.float16), np.ones((0, 8), np.float16), "bw_ws")
    np.testing.assert_array_equal(empty, np.zeros((5, 8), np.float16))
    assert ops.matmul_tlx(np.ones((0, 16), np.float16), b, "bw_ws").shape == (0, 8)
    with pytest.raises(ValueError, match="unknown config entries \\['SPLIT_K'\\]"):
        ops.matmul_tlx(a, b, "bw_ws", {"SPLIT_K": 2})
    with pytest.raises(ValueError, match="'variant' must be one of .*'bw_ws_2cta'"):
        ops.matmul_tlx(a, b, "bw_wss")
    with pytest.raises(ValueError, match="not a multiple of 16 bytes"):
        ops.matmul_tlx(np.ones((4, 12), np.float16), np.ones((12, 8), np.float16), "bw_ws")
    # Tiles the MMAs and TMA boxes cannot take are refused on the host, naming the entry.
    for cfg, msg in (({"BLOCK_N": 100}, "BLOCK_N must be a multiple of 16 in 16..256"),
                     ({"BLOCK_M": 64}, "BLOCK_M must be 128"),
                     ({"BLOCK_K": 24}, "BLOCK_K must be a positive multiple of 16, got 24"),
                     ({"EPI_SUBTILE": 3}, "EPI_SUBTILE must split BLOCK_N=256")):
        with pytest.raises(ValueError, match=re.escape("matmul_tlx: " + msg)):
            ops.matmul_tlx(a, b, "bw_ws", cfg)
    with pytest.raises(ValueError, match=re.escape("(of 32 with PAIR), got 48")):
        ops.matmul_tlx(a, b, "bw_ws_2cta", {"BLOCK_N": 48, "EPI_SUBTILE": 2})


# ---- planted bugs ----

def run_planted(plant, use_clc):
    M, N, K = 300, 128, 64
    a, b = np.ones((M, K), np.float16), np.ones((K, N), np.float16)
    c = np.zeros((M, N), np.float16)
    tiles = 3 * 2
    plants.gemm_ws_planted[(tiles if use_clc else 1,)](
        descriptor(a, [128, 32]), descriptor(b, [32, 64]), descriptor(c, [128, 32]), M, N, K,
        BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, GROUP_M=1, NUM_STAGES=2, NUM_ACC=2, EPI_SUBTILE=2,
        USE_CLC=use_clc, PLANT=plant, num_warps=4)
    return c


@pytest.mark.parametrize("use_clc", [False, True])
def test_unplanted_variant_runs_clean(interpret, use_clc):
    np.testing.assert_array_equal(run_planted(0, use_clc), np.full((300, 128), 64, np.float16))


@pytest.mark.parametrize("use_clc", [False, True])
def test_accumulator_signalled_before_the_mmas_complete_is_reported(interpret, use_clc):
    # A plain arrive after issuing instead of a commit: the epilogue's TMEM read races the MMA.
    with pytest.raises(ww.InterpreterError) as e:
        run_planted(3, use_clc)
    msg = str(e.value)
    read = line_of(gemm_ws.store_acc, "part = tlx.local_load(")
    assert f"gemm_ws.py:{read}:" in msg.splitlines()[0]
    assert "local_load reads tensor memory that tcgen05_mma by async task 1 is still writing" \
        in msg
    assert f"blackwell_gemm_ws_plants.py:{line_of(plants.mma_planted, 'tlx.async_dot(')}:" in msg


def test_mma_overwriting_an_unread_accumulator_is_reported(interpret):
    # Three tiles in one program, two accumulators: tile 2's MMA writes accumulator 0 while the
    # epilogue may still be reading tile 0 from it.
    with pytest.raises(ww.InterpreterError) as e:
        run_planted(2, False)
    msg = str(e.value)
    mma = line_of(plants.mma_planted, "tlx.async_dot(")
    assert f"blackwell_gemm_ws_plants.py:{mma}:" in msg.splitlines()[0]
    assert "tcgen05_mma overwrites tensor memory that local_load by default task read" in msg
    assert f"gemm_ws.py:{line_of(gemm_ws.store_acc, 'part = tlx.local_load(')}:" in msg


def test_epilogue_not_waiting_for_the_commit_is_reported(interpret):
    # The epilogue runs ahead of the MMAs: its arrivals on acc_empty come a phase early, and the
    # MMA task's wait for a free accumulator never passes (reported as a deadlock there).
    with pytest.raises(ww.InterpreterError) as e:
        run_planted(1, False)
    msg = str(e.value)
    wait = line_of(gemm_ws.acquire_acc, "tlx.barrier_wait(")
    assert f"gemm_ws.py:{wait}:" in msg.splitlines()[0] and "deadlock" in msg
    assert "'acc_empty'" in msg


# ---- sm_100a: PTX and ptxas ----

@pytest.fixture
def sm100_compiles(monkeypatch, gpu_compiles):
    """gpu_compiles (each launch compiles to a cubin instead) for sm_100a, on a GPU that the
    library takes for a Blackwell one."""
    gpu_compiles.target = "sm_100a"
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    monkeypatch.setattr(_common, "_is_sm90", lambda place: False)
    monkeypatch.setattr(_common, "_is_sm100", lambda place: True)
    return gpu_compiles.kernels


# (variant, config overrides, dtype) -> what ptxas must report: every configuration within
# the kernel's 248 registers (.maxnreg: 65,536 over its 8 warps, the producer's and the MMA
# warp's group at 48 by setmaxnreg), no spills, within 232,448 bytes of shared memory.
COMPILES = [
    ("bw_ws", {}, "float16"),
    ("bw_ws", {"USE_CLC": False}, "bfloat16"),
    ("bw_ws_2cta", {}, "float16"),
    ("bw_ws_2cta", {"USE_CLC": False}, "bfloat16"),
    ("bw_ws", {"BLOCK_N": 128, "NUM_STAGES": 6, "EPI_SUBTILE": 2}, "float16"),
    ("bw_ws", {"BLOCK_K": 128, "NUM_STAGES": 2, "EPI_SUBTILE": 8}, "bfloat16"),
]


@pytest.mark.parametrize("variant,config,dtype", COMPILES)
def test_compiles_for_sm100a_without_spills(sm100_compiles, variant, config, dtype):
    a = np.zeros((1024, 512), DTYPES[dtype])
    b = np.zeros((512, 768), DTYPES[dtype])
    ops.matmul_tlx(a, b, variant, config)
    (compiled,) = sm100_compiles
    k = compiled.kernel
    print(f"{variant} {config} {dtype}: {k.registers} registers, {k.spill_bytes} spill bytes, "
          f"{k.shared_bytes} B shared")
    assert k.spill_bytes == 0
    assert k.registers <= 248
    assert k.shared_bytes <= 232448
    ptx = k.ptx
    assert re.search(r"^\.maxnreg 248$", ptx, re.M)
    assert "setmaxnreg.dec.sync.aligned.u32 48;" in ptx
    cfg = dict(_matmul.BW_GEMM_CONFIGS[variant], **config)
    pair = cfg["PAIR"]
    group = "cta_group::2" if pair else "cta_group::1"
    assert re.search(r"tcgen05\.mma\." + group + r"\.kind::f16", ptx)
    assert re.search(r"tcgen05\.commit\." + group, ptx)
    assert ("clusterlaunchcontrol.try_cancel" in ptx) == cfg["USE_CLC"]
    # The epilogue reads each column chunk in whole messages of at most half its registers.
    chunk = cfg["BLOCK_N"] // cfg["EPI_SUBTILE"]
    sizes = [int(n) for n in re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x(\d+)\.b32",
                                        ptx)]
    assert sizes and sum(sizes) == cfg["BLOCK_N"] and max(sizes) <= min(chunk, 128)


def test_matmul_routes_to_the_blackwell_gemm_on_sm100(sm100_compiles):
    a = np.zeros((256, 128), np.float16)
    b = np.zeros((128, 256), np.float16)
    ops.matmul(a, b)
    ops.matmul(a, b, kernel="tlx")
    assert [c.kernel.name for c in sm100_compiles] == ["gemm_ws_kernel"] * 2
    assert "tcgen05.mma" in sm100_compiles[0].kernel.ptx
    # Not where it does not apply: an activation, or rows TMA cannot address.
    sm100_compiles.clear()
    ops.matmul(a, b, activation="relu")
    ops.matmul(np.zeros((256, 12), np.float16), np.zeros((12, 256), np.float16))
    assert [c.kernel.name for c in sm100_compiles] == ["matmul_kernel", "matmul_kernel"]


def test_switch_off_keeps_the_tl_kernel(sm100_compiles, monkeypatch):
    monkeypatch.setattr(_matmul, "MATMUL_TLX_ON_SM100", False)
    ops.matmul(np.zeros((256, 128), np.float16), np.zeros((128, 256), np.float16))
    assert [c.kernel.name for c in sm100_compiles] == ["matmul_kernel"]
