"""kernels/hopper/grouped_mm_ws.py, ops.grouped_mm's TLX warp-specialized persistent kernels for
the ragged-M form and the ragged-K form (the weight gradient; the second half of the file, also
with a = x.t(), groups whose K ranges end inside a K step, infinities in the next group's data
that the partial step must not let in): in the interpreter through ops.grouped_mm(kernel="tlx")
on NumPy arrays (fp16) and CPU torch tensors (bf16), against a loop of matmuls over the groups
(exact: the operands are multiples of 1/8, so every product and sum is exact in fp32), over
ragged groups with empty ones, groups shorter than a tile, not multiples of it, one group, and
rows past the last group (zeros), b as the transpose of expert-major weights [G, N, K]; ragged K
groups starting at every column residue mod 8 (a's rows contiguous: boxes start 16-byte aligned
and the columns before the group are zeroed, infinities there included);
out-of-range offsets stay inside the arrays; which calls the kernel takes; and its sm_90a cubins
at the GPU configurations (no spills, the shared memory ops estimates, the masked stores
vectorized)."""

import importlib
import re

import numpy as np
import pytest

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

from warpweave import ops  # noqa: E402
from warpweave.ops import _grouped_mm, _matmul, _tuning  # noqa: E402
from warpweave.ops.kernels.hopper import grouped_mm_ws  # noqa: E402


def eighths(rng, shape):
    return (rng.integers(-8, 9, shape) / 8).astype(np.float16)


def reference(a, b, offs):
    """torch._grouped_mm's 2-D x 3-D result, in float64, with our zeros after the last group."""
    out = np.zeros((a.shape[0], b.shape[2]))
    start = 0
    for g, end in enumerate(offs):
        out[start:end] = a[start:end].astype(np.float64) @ b[g]
        start = end
    return out


# (group sizes, M_total, K, N): the interpreter's tiles are 32 x 32 x 16 on 4 programs.
CASES = [
    ([40, 0, 7, 33], 80, 32, 40),        # an empty group, one shorter than a tile, tail zeros
    ([5], 5, 16, 8),                     # G = 1, a single partial tile
    ([64], 64, 48, 64),                  # G = 1, whole tiles only
    ([0, 0, 3], 20, 48, 24),             # leading empty groups, 17 tail rows
    ([64, 1, 31, 0], 96, 16, 72),        # whole tiles, a 1-row group, a trailing empty group
    ([0, 0], 10, 16, 16),                # no rows in any group: all zeros
    ([17, 50, 33, 2, 0, 29], 140, 64, 56),  # many tiles per program, N not a multiple of 32
]


@pytest.mark.parametrize("sizes,M_total,K,N", CASES)
def test_ragged_groups_match_a_loop_of_matmuls(sizes, M_total, K, N):
    rng = np.random.default_rng(M_total * 7 + K + N)
    offs = np.cumsum(sizes).astype(np.int32)
    a, b = eighths(rng, (M_total, K)), eighths(rng, (len(sizes), K, N))
    out = ops.grouped_mm(a, b, offs, kernel="tlx")
    assert out.dtype == np.float16 and out.shape == (M_total, N)
    np.testing.assert_array_equal(out, reference(a, b, offs).astype(np.float16))
    # The tl kernel agrees.
    np.testing.assert_array_equal(ops.grouped_mm(a, b, offs, kernel="tl"), out)


def test_row_pitch_wider_than_k():
    # a's rows are a slice of wider rows: the descriptor takes its pitch (16-byte multiple).
    rng = np.random.default_rng(5)
    wide = eighths(rng, (70, 48))
    a, b = wide[:, :32], eighths(rng, (3, 32, 24))
    offs = np.array([20, 20, 61], np.int32)
    np.testing.assert_array_equal(ops.grouped_mm(a, b, offs, kernel="tlx"),
                                  reference(a, b, offs).astype(np.float16))


@pytest.mark.parametrize("sizes,M_total,K,N", [
    ([40, 0, 7, 33, 0], 90, 40, 40),   # K and N not multiples of the 16 x 32 tiles
    ([5, 20, 0], 30, 24, 48),
    ([64, 0], 64, 32, 64),
])
def test_b_as_the_transpose_of_expert_major_weights(sizes, M_total, K, N):
    # b = w.transpose(1, 2) of a contiguous w [G, N, K] (and the backward's dA): read K-major,
    # any K a multiple of 8. A tile's rows of w past N are the next expert's and reach only
    # columns past N, never stored: the last expert (no rows) is all infinities, and every
    # stored value stays exact.
    rng = np.random.default_rng(K * N)
    offs = np.cumsum(sizes).astype(np.int32)
    a, w = eighths(rng, (M_total, K)), eighths(rng, (len(sizes), N, K))
    w[-1] = np.inf
    b = w.transpose(0, 2, 1)
    out = ops.grouped_mm(a, b, offs, kernel="tlx")
    np.testing.assert_array_equal(out, reference(a, b, offs).astype(np.float16))


def test_bfloat16_torch_cpu_tensors(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    rng = np.random.default_rng(9)
    sizes = [9, 0, 40, 23]
    offs = np.cumsum(sizes).astype(np.int32)
    a, b = eighths(rng, (80, 32)), eighths(rng, (4, 32, 48))
    out = ops.grouped_mm(torch.from_numpy(a).bfloat16(), torch.from_numpy(b).bfloat16(),
                         torch.from_numpy(offs), kernel="tlx")
    assert out.dtype == torch.bfloat16
    expected = torch.from_numpy(reference(a, b, offs)).bfloat16()
    assert torch.equal(out, expected)


@pytest.mark.parametrize("offs", [[4, 4, 99], [-5, 7, 2], [30, 10, 12], [0, 0, -1]])
def test_out_of_range_offsets_stay_inside_the_arrays(offs):
    # The interpreter reports any access outside the arrays; rows are clamped to [0, M_total].
    rng = np.random.default_rng(2)
    a, b = eighths(rng, (40, 16)), eighths(rng, (3, 16, 8))
    out = ops.grouped_mm(a, b, np.array(offs, np.int32), kernel="tlx")
    assert out.shape == (40, 8) and np.all(np.isfinite(out.astype(np.float32)))


def test_calls_the_kernel_does_not_take_are_refused():
    a, b, offs = np.ones((8, 24), np.float16), np.ones((2, 24, 8), np.float16), \
        np.array([3, 8], np.int32)
    with pytest.raises(ValueError, match=r"kernel='tlx' needs .*K a multiple of 16"):
        ops.grouped_mm(a, b, offs, kernel="tlx")  # K = 24
    b32 = np.ones((2, 32, 8), np.float16)
    with pytest.raises(ValueError, match=r"kernel='tlx' needs"):
        ops.grouped_mm(np.ones((8, 32), np.float32), b32.astype(np.float32), offs, kernel="tlx")
    with pytest.raises(ValueError, match=r"kernel='tlx' needs"):  # b's rows strided
        ops.grouped_mm(np.ones((8, 32), np.float16), np.ones((2, 32, 16), np.float16)[:, :, ::2],
                       offs, kernel="tlx")
    with pytest.raises(ValueError, match=r"kernel='tlx' needs"):  # K % 8 (b's transpose)
        ops.grouped_mm(np.ones((8, 20), np.float16), np.ones((2, 8, 20), np.float16)
                       .transpose(0, 2, 1), offs, kernel="tlx")
    with pytest.raises(ValueError, match=r"'kernel' must be None, 'tl' or 'tlx'"):
        ops.grouped_mm(a, b, offs, kernel="ws")


def test_the_interpreter_takes_the_tl_kernel_unless_asked(monkeypatch):
    launched = []
    real = _grouped_mm._launch_tlx
    monkeypatch.setattr(_grouped_mm, "_launch_tlx",
                        lambda *args: launched.append(1) or real(*args))
    a, b, offs = np.ones((8, 32), np.float16), np.ones((2, 32, 8), np.float16), \
        np.array([3, 8], np.int32)
    ops.grouped_mm(a, b, offs)
    assert launched == []
    ops.grouped_mm(a, b, offs, kernel="tlx")
    assert launched == [1]


# ------------------------------------------------------------------------------------------------
# Ragged K (2-D a [M, K_total] x 2-D b [K_total, N] -> [G, M, N]: the weight gradient)
# ------------------------------------------------------------------------------------------------


def reference_k(a, b, offs):
    """torch._grouped_mm's 2-D x 2-D result in float64: out[g] = a[:, cols of g] @ b[rows of g]
    (an empty group gives zeros)."""
    out = np.zeros((len(offs), a.shape[0], b.shape[1]))
    start = 0
    with np.errstate(invalid="ignore", over="ignore"):
        for g, end in enumerate(offs):
            out[g] = a[:, start:end].astype(np.float64) @ b[start:end].astype(np.float64)
            start = end
    return out


def a_layout(a, layout):
    """a [M, K] as it is ("k": its rows contiguous) or as the transpose of x [K, M] with
    contiguous rows ("m": the weight gradient's x.t()), x's pitch M rounded up to 8 elements
    (TMA's 16 bytes)."""
    if layout == "k":
        return a
    M, K = a.shape
    x = np.full((K, -(-M // 8) * 8), np.nan, a.dtype)
    x[:, :M] = a.T
    return x[:, :M].T


# (group sizes, K_total, M, N): the interpreter's tiles are 32 x 32 x 16 on 4 programs, so a
# group's K range ends inside a 16-wide K step unless its size and start are multiples of 16.
K_CASES = [
    ([20, 0, 1, 16, 9], 48, 40, 48),   # an empty group, 1-column groups, unaligned starts
    ([5], 8, 5, 8),                    # G = 1, one partial K step, one partial tile
    ([32], 32, 64, 64),                # G = 1, whole K steps and tiles only
    ([0, 0, 3], 16, 24, 40),           # leading empty groups, 13 columns past the last group
    ([16, 1, 31, 0], 48, 96, 72),      # whole steps, then steps that start mid-box
    ([0, 0], 8, 10, 16),               # no columns in any group: all zeros
    ([17, 50, 33, 2, 0, 29], 136, 70, 56),  # many tiles per program, M and N partial tiles
    # Groups starting at every column residue mod 8 (0, 1, 3, 6, 2, 7, 5, 4, 4): with a's rows
    # contiguous the boxes start at the column rounded down to 8, and the previous group's
    # columns they read first must be zeroed (their products would break exactness).
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], 48, 40, 48),
    # A group from column 7 over two K steps (its head zeroed in the first, its tail in the
    # second), a 1-column group, an empty one, 5 columns from column 29 (head and tail in one
    # step), then 30 columns and 8 past the last group.
    ([7, 18, 1, 0, 3, 5, 30], 72, 33, 40),
]


@pytest.mark.parametrize("layout", ["k", "m"])
@pytest.mark.parametrize("sizes,K_total,M,N", K_CASES)
def test_ragged_k_matches_a_loop_of_matmuls(sizes, K_total, M, N, layout):
    rng = np.random.default_rng(K_total * 7 + M + N)
    offs = np.cumsum(sizes).astype(np.int32)
    a, b = a_layout(eighths(rng, (M, K_total)), layout), eighths(rng, (K_total, N))
    out = ops.grouped_mm(a, b, offs, kernel="tlx")
    assert out.dtype == np.float16 and out.shape == (len(sizes), M, N)
    np.testing.assert_array_equal(out, reference_k(a, b, offs).astype(np.float16))
    # The tl kernel agrees.
    np.testing.assert_array_equal(ops.grouped_mm(a, b, offs, kernel="tl"), out)


@pytest.mark.parametrize("layout", ["k", "m"])
def test_ragged_k_steps_past_a_group_read_nothing_of_the_next(layout):
    # A group's last K step reads on into the next group's columns of a and rows of b (and past
    # the last group, into columns no group owns): here all infinities, of opposite signs in a
    # and b. Zeroed before the MMA, they reach no other group: those stay exact and finite, and
    # the infinite group is what the float64 loop gives (NaN where +inf meets -inf).
    rng = np.random.default_rng(11)
    sizes, K_total, M, N = [20, 0, 1, 5, 9, 3], 48, 40, 48
    offs = np.cumsum(sizes).astype(np.int32)
    a, b = eighths(rng, (M, K_total)), eighths(rng, (K_total, N))
    a[:, 21:26], b[21:26] = np.inf, -np.inf  # group 3
    a[:, 38:], b[38:] = np.inf, np.inf       # past the last group (38)
    a = a_layout(a, layout)
    out = ops.grouped_mm(a, b, offs, kernel="tlx")
    ref = reference_k(a, b, offs).astype(np.float16)
    np.testing.assert_array_equal(out, ref)  # (NaNs at the same places)
    finite = [bool(np.isfinite(out[g].astype(np.float32)).all()) for g in range(len(sizes))]
    assert finite == [True, True, True, False, True, True]


@pytest.mark.parametrize("layout", ["k", "m"])
def test_ragged_k_steps_before_a_group_read_nothing_of_the_previous(layout):
    # With a's rows contiguous a group's first K step starts at its first column rounded down
    # to 8 (a TMA box's start along its inner dimension must be 16-byte aligned), so it reads
    # up to 7 columns of a and rows of b of the groups before it: here group 1's infinities
    # (opposite signs in a and b). Group 3 (from column 25) and group 4 (from 28) read column
    # 24, group 5 (from 37) nothing of them; zeroed before the MMA, they reach no other group,
    # and the empty group 2 (at column 25) stays zero. Infinities past the last group too.
    rng = np.random.default_rng(12)
    sizes, K_total, M, N = [19, 6, 0, 3, 9, 5], 48, 40, 48
    offs = np.cumsum(sizes).astype(np.int32)
    a, b = eighths(rng, (M, K_total)), eighths(rng, (K_total, N))
    a[:, 19:25], b[19:25] = np.inf, -np.inf  # group 1
    a[:, 42:], b[42:] = -np.inf, np.inf      # past the last group (42)
    a = a_layout(a, layout)
    out = ops.grouped_mm(a, b, offs, kernel="tlx")
    ref = reference_k(a, b, offs).astype(np.float16)
    np.testing.assert_array_equal(out, ref)  # (NaNs at the same places)
    finite = [bool(np.isfinite(out[g].astype(np.float32)).all()) for g in range(len(sizes))]
    assert finite == [True, False, True, True, True, True]
    assert not np.any(out[2])


@pytest.mark.parametrize("layout", ["k", "m"])
def test_ragged_k_bfloat16_torch_cpu_tensors(monkeypatch, layout):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    rng = np.random.default_rng(9)
    sizes = [9, 0, 40, 23, 1]
    offs = np.cumsum(sizes).astype(np.int32)
    a, b = eighths(rng, (48, 80)), eighths(rng, (80, 40))
    ta = torch.from_numpy(a).bfloat16()
    ta = ta if layout == "k" else ta.t().contiguous().t()
    out = ops.grouped_mm(ta, torch.from_numpy(b).bfloat16(), torch.from_numpy(offs),
                         kernel="tlx")
    assert out.dtype == torch.bfloat16 and out.shape == (5, 48, 40)
    assert torch.equal(out, torch.from_numpy(reference_k(a, b, offs)).bfloat16())


@pytest.mark.parametrize("offs", [[4, 4, 99], [-5, 7, 2], [30, 10, 12], [0, 0, -1]])
def test_ragged_k_out_of_range_offsets_stay_inside_the_arrays(offs):
    # The interpreter reports any access outside the arrays; columns are clamped to
    # [0, K_total] as the tl kernel clamps them, and the two kernels agree.
    rng = np.random.default_rng(3)
    a, b = eighths(rng, (24, 40)), eighths(rng, (40, 16))
    offs = np.array(offs, np.int32)
    out = ops.grouped_mm(a, b, offs, kernel="tlx")
    assert out.shape == (3, 24, 16) and np.all(np.isfinite(out.astype(np.float32)))
    np.testing.assert_array_equal(out, ops.grouped_mm(a, b, offs, kernel="tl"))


def test_ragged_k_calls_the_kernel_does_not_take_are_refused():
    offs = np.array([3, 8], np.int32)
    h = np.float16
    for a, b in [(np.ones((8, 8), np.float32), np.ones((8, 16), np.float32)),  # fp32
                 (np.ones((8, 12), h)[:, :8], np.ones((8, 16), h)),  # a's pitch: 24 bytes
                 (np.ones((8, 8), h), np.ones((8, 12), h)),  # N % 8
                 (np.ones((8, 8), h), np.ones((8, 32), h)[:, ::2]),  # b's columns strided
                 (np.ones((16, 16), h)[::2, ::2], np.ones((8, 16), h))]:  # a strided both ways
        with pytest.raises(ValueError, match=r"kernel='tlx' needs .*'a' with contiguous columns"):
            ops.grouped_mm(a, b, offs, kernel="tlx")


def test_ragged_k_in_the_interpreter_takes_the_tl_kernel_unless_asked(monkeypatch):
    launched = []
    real = _grouped_mm._launch_tlx_ragged_k
    monkeypatch.setattr(_grouped_mm, "_launch_tlx_ragged_k",
                        lambda *args: launched.append(args[7]) or real(*args))
    a, b, offs = np.ones((8, 16), np.float16), np.ones((16, 8), np.float16), \
        np.array([3, 16], np.int32)
    ops.grouped_mm(a, b, offs)
    assert launched == []
    ops.grouped_mm(a, b, offs, kernel="tlx")
    ops.grouped_mm(np.ones((16, 8), np.float16).T, b, offs, kernel="tlx")
    assert launched == [False, True]  # a_mmajor for the transpose


# ------------------------------------------------------------------------------------------------
# sm_90a
# ------------------------------------------------------------------------------------------------


def signature(cfg, dtype, b_kmajor):
    half, bn, bk, sub = cfg["BLOCK_M"] // 2, cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["EPI_SUBTILE"]
    flags = (", RASTER_N=1" if cfg.get("RASTER_N") else "") + (", B_KMAJOR=1" if b_kmajor else "")
    b_block = f"{bn}x{bk}" if b_kmajor else f"{bk}x{bn}"
    return (f"a_desc:desc<{dtype},{half}x{bk}>, "
            f"b_desc:desc<{dtype},{b_block}>, c_desc:desc<{dtype},{half}x{bn // sub}>, "
            f"c_ptr:*{dtype}:16, offs_ptr:*i32:16, G:i32, M_total:i32, N:i32:16, K:i32:16, "
            f"BLOCK_M={cfg['BLOCK_M']}, BLOCK_N={bn}, BLOCK_K={cfg['BLOCK_K']}, "
            f"GROUP_M={cfg['GROUP_M']}, NUM_STAGES={cfg['NUM_STAGES']}, NUM_SMS=132, "
            f"EPI_SUBTILE={sub}{flags}")


@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("index", range(len(_grouped_mm.GROUPED_MM_TLX_CONFIGS)))
@pytest.mark.parametrize("dtype,b_kmajor", [("bf16", False), ("fp16", False), ("bf16", True)])
def test_gpu_configurations_compile_for_sm90a_without_spills(index, dtype, b_kmajor):
    cfg = _grouped_mm.GROUPED_MM_TLX_CONFIGS[index]
    env = grouped_mm_ws.grouped_mm_ws_kernel.environment()
    k = native_loader.native().compile(env.files, "grouped_mm_ws_kernel",
                                       signature(cfg, dtype, b_kmajor), env.globals,
                                       target="sm_90a", num_warps=4, stage="cubin")
    print(f"{cfg} {dtype} b_kmajor={b_kmajor}: {k.registers} registers, {k.spill_bytes} spill "
          f"bytes, {k.shared_bytes} B shared")
    assert k.spill_bytes == 0
    # 12 warps: the producer drops to 40 registers, the two consumers rise to 232.
    assert "setmaxnreg.dec.sync.aligned.u32 40" in k.ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232" in k.ptx
    assert k.shared_bytes <= 232448
    # ops' estimate (the ring and the C chunk buffers) is what the tuning filters on; the masked
    # path reuses the chunk buffers, so no conversion scratch is added beside them.
    estimate = _matmul._shared_bytes(_tuning.Candidate("tlx_ws", **cfg, SMEM_EPILOGUE=True), 2)
    assert 0 <= k.shared_bytes - estimate <= 2048
    ptx = k.ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in ptx
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n" + str(cfg["BLOCK_N"]), ptx)
    # Every TMA offset is provably 16-byte aligned (a's rows contiguous: the group's start
    # rounded down as a product): no run-time alignment check before the copies.
    assert "__assertfail" not in ptx
    # A group's last rows leave through masked 16-byte stores.
    assert "st.global.v4.b32" in ptx



def signature_k(cfg, dtype, a_mmajor):
    half, bn, bk, sub = cfg["BLOCK_M"] // 2, cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["EPI_SUBTILE"]
    flags = (", RASTER_N=1" if cfg.get("RASTER_N") else "") + (", A_MMAJOR=1" if a_mmajor else "")
    a_block = f"{bk}x{half}" if a_mmajor else f"{half}x{bk}"
    return (f"a_desc:desc<{dtype},{a_block}>, b_desc:desc<{dtype},{bk}x{bn}>, "
            f"c_desc:desc<{dtype},{half}x{bn // sub}>, c_ptr:*{dtype}:16, offs_ptr:*i32:16, "
            f"G:i32, M:i32, N:i32:16, K_total:i32, BLOCK_M={cfg['BLOCK_M']}, BLOCK_N={bn}, "
            f"BLOCK_K={bk}, GROUP_M={cfg['GROUP_M']}, NUM_STAGES={cfg['NUM_STAGES']}, "
            f"NUM_SMS=132, EPI_SUBTILE={sub}{flags}")


@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("index", range(len(_grouped_mm.GROUPED_MM_TLX_CONFIGS)))
@pytest.mark.parametrize("dtype,a_mmajor", [("bf16", True), ("fp16", True), ("bf16", False)])
def test_ragged_k_configurations_compile_for_sm90a_without_spills(index, dtype, a_mmajor):
    cfg = _grouped_mm.GROUPED_MM_TLX_CONFIGS[index]
    env = grouped_mm_ws.grouped_mm_ragged_k_ws_kernel.environment()
    k = native_loader.native().compile(env.files, "grouped_mm_ragged_k_ws_kernel",
                                       signature_k(cfg, dtype, a_mmajor), env.globals,
                                       target="sm_90a", num_warps=4, stage="cubin")
    print(f"{cfg} {dtype} a_mmajor={a_mmajor}: {k.registers} registers, {k.spill_bytes} spill "
          f"bytes, {k.shared_bytes} B shared")
    assert k.spill_bytes == 0
    assert "setmaxnreg.dec.sync.aligned.u32 40" in k.ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232" in k.ptx
    # The tail's zeroing loads and stores its stage in place: no scratch beside the ring and the
    # C chunk buffers (the same estimate as the ragged-M kernel's).
    estimate = _matmul._shared_bytes(_tuning.Candidate("tlx_ws", **cfg, SMEM_EPILOGUE=True), 2)
    assert 0 <= k.shared_bytes - estimate <= 2048
    ptx = k.ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in ptx
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n" + str(cfg["BLOCK_N"]), ptx)
    # Every TMA offset is provably 16-byte aligned (a's rows contiguous: the group's start
    # rounded down as a product): no run-time alignment check before the copies.
    assert "__assertfail" not in ptx
    # The two consumers meet after zeroing a tail (named barrier 8, their 256 threads), the
    # generic stores fenced for wgmma's reads first.
    assert re.search(r"fence\.proxy\.async\.shared::cta;\s*(\.loc [^\n]*\s*)?bar\.sync 8, 256;",
                     ptx)
