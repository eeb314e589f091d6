"""Host tensor descriptors (ww.TensorDescriptor over NumPy arrays) in the interpreter: desc.load /
desc.store and TLX async_descriptor_load / async_descriptor_store, with TMA's out-of-bounds
rules (a load fills what lies outside the tensor with zeros, a store drops it)."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

pytest.importorskip("warpweave._native")


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


@ww.jit
def scale_tiles(in_desc, out_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    tile = in_desc.load([pid_m * BLOCK_M, pid_n * BLOCK_N])
    out_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], tile * 2.0)


@ww.jit
def load_box(in_desc, out_ptr, row, col, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    tile = in_desc.load([row, col])
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(out_ptr + offs, tile)


@ww.jit
def tlx_copy(in_desc, out_desc, BLOCK: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    row = tl.program_id(0) * BLOCK
    tlx.barrier_expect_bytes(tlx.local_view(bars, 0), BLOCK * BLOCK * 4)
    tlx.async_descriptor_load(in_desc, tlx.local_view(bufs, 0), [row, 0], tlx.local_view(bars, 0))
    tlx.barrier_wait(tlx.local_view(bars, 0), 0)
    tlx.async_descriptor_store(out_desc, tlx.local_view(bufs, 0), [row, 0])
    tlx.async_descriptor_store_wait(0)


@ww.jit
def store_box(out_desc, row, col, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    out_desc.store([row, col], tl.full([BLOCK_M, BLOCK_N], 1.0, tl.float16))


@ww.jit
def tlx_copy_at(in_desc, out_desc, load_col, store_col, BLOCK: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(tlx.local_view(bars, 0), BLOCK * BLOCK * 2)
    tlx.async_descriptor_load(in_desc, tlx.local_view(bufs, 0), [0, load_col],
                              tlx.local_view(bars, 0))
    tlx.barrier_wait(tlx.local_view(bars, 0), 0)
    tlx.async_descriptor_store(out_desc, tlx.local_view(bufs, 0), [0, store_col])
    tlx.async_descriptor_store_wait(0)


@ww.jit
def ring_sum(x_desc, out_ptr, NUM_TILES: tl.constexpr, BLOCK: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float32, 2)
    full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(NUM_TILES):
                s = i % 2
                tlx.barrier_wait(tlx.local_view(empty, s), ((i // 2) & 1) ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 4)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0],
                                          tlx.local_view(full, s))
        with tlx.async_task(num_warps=4):
            acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
            for i in range(NUM_TILES):
                s = i % 2
                tlx.barrier_wait(tlx.local_view(full, s), (i // 2) & 1)
                acc += tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
            offs = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
            tl.store(out_ptr + offs, acc)


def test_load_and_store_boxes_cover_a_ragged_tensor():
    x = np.arange(10 * 12, dtype=np.float32).reshape(10, 12)
    # The output is a view into a larger array: a store past its edges must leave the rest.
    canvas = np.full((12, 16), -1.0, np.float32)
    out = canvas[:10, :12]
    in_desc = ww.TensorDescriptor.from_tensor(x, [4, 8])
    out_desc = ww.TensorDescriptor(out, [10, 12], [16, 1], [4, 8])
    compiled = scale_tiles[(3, 2)](in_desc, out_desc, BLOCK_M=4, BLOCK_N=8)
    assert compiled.interpret
    np.testing.assert_array_equal(out, 2 * x)
    assert (canvas[10:, :] == -1).all() and (canvas[:, 12:] == -1).all()


# Column offsets are multiples of 4 float32s: TMA boxes start on 16-byte boundaries of a row.
@pytest.mark.parametrize("row,col", [(8, 8), (-2, 0), (0, -4), (9, 8)])
def test_a_load_fills_outside_the_tensor_with_zeros(row, col):
    x = np.arange(1, 10 * 12 + 1, dtype=np.float32).reshape(10, 12)
    out = np.full((4, 8), -1.0, np.float32)
    load_box[(1,)](ww.TensorDescriptor.from_tensor(x, [4, 8]), out, row, col, BLOCK_M=4,
                   BLOCK_N=8)
    expected = np.zeros((4, 8), np.float32)
    for i in range(4):
        for j in range(8):
            r, c = row + i, col + j
            if 0 <= r < 10 and 0 <= c < 12:
                expected[i, j] = x[r, c]
    np.testing.assert_array_equal(out, expected)


def test_a_descriptor_over_part_of_an_array_sees_only_its_shape():
    big = np.arange(16 * 16, dtype=np.float32).reshape(16, 16)
    out = np.full((4, 8), -1.0, np.float32)
    # A 6 x 6 window starting at row 2, column 4: TMA bounds are the window's, not the array's.
    window = ww.TensorDescriptor(big[2:, 4:], [6, 6], [16, 1], [4, 8])
    load_box[(1,)](window, out, 4, 0, BLOCK_M=4, BLOCK_N=8)
    expected = np.zeros((4, 8), np.float32)
    expected[:2, :6] = big[6:8, 4:10]
    np.testing.assert_array_equal(out, expected)


def test_tlx_async_descriptor_copies_clip_at_the_edge():
    x = np.random.default_rng(0).standard_normal((20, 8)).astype(np.float32)
    canvas = np.full((24, 8), 7.0, np.float32)
    in_desc = ww.TensorDescriptor.from_tensor(x, [8, 8])
    out_desc = ww.TensorDescriptor(canvas, [20, 8], [8, 1], [8, 8])
    tlx_copy[(3,)](in_desc, out_desc, BLOCK=8)
    np.testing.assert_array_equal(canvas[:20], x)
    assert (canvas[20:] == 7.0).all()


def test_descriptors_the_gpu_would_refuse_are_refused():
    x = np.zeros((8, 10), np.float32)
    out = np.zeros((4, 8), np.float32)
    with pytest.raises(ww.LaunchError, match="stride of dimension 0 is 40 bytes"):
        load_box[(1,)](ww.TensorDescriptor(x, [8, 10], [10, 1], [4, 8]), out, 0, 0, BLOCK_M=4,
                       BLOCK_N=8)
    with pytest.raises(ww.LaunchError, match="16-byte aligned"):
        shifted = np.zeros(8 * 16 + 1, np.float32)[1:].reshape(8, 16)  # 4 bytes off
        load_box[(1,)](ww.TensorDescriptor(shifted, [8, 16], [16, 1], [4, 8]), out, 0, 0,
                       BLOCK_M=4, BLOCK_N=8)
    x = np.zeros((8, 16), np.float32)
    with pytest.raises(ww.LaunchError, match="innermost"):
        load_box[(1,)](ww.TensorDescriptor(x.T, [16, 8], [1, 16], [4, 8]), out, 0, 0,
                       BLOCK_M=4, BLOCK_N=8)


def test_a_box_starting_off_a_16_byte_boundary_is_reported():
    # The H200 stops a kernel whose TMA box starts off a 16-byte boundary of the innermost
    # dimension ("an illegal instruction"); the interpreter names the copy and its line.
    x = np.zeros((8, 16), np.float32)
    out = np.zeros((4, 8), np.float32)
    with pytest.raises(ww.InterpreterError) as info:
        load_box[(1,)](ww.TensorDescriptor.from_tensor(x, [4, 8]), out, 0, 3, BLOCK_M=4,
                       BLOCK_N=8)
    msg = str(info.value)
    assert "test_host_descriptors_interp.py:" in msg
    assert "desc.load starts its [4, 8] box at offset 3" in msg
    assert "12 bytes into a row" in msg and "a multiple of 4 float32 elements" in msg
    # Rows may start anywhere: only the innermost offset is bound.
    load_box[(1,)](ww.TensorDescriptor.from_tensor(x, [4, 8]), out, 3, 4, BLOCK_M=4, BLOCK_N=8)
    h = np.zeros((16, 32), np.float16)
    with pytest.raises(ww.InterpreterError, match=r"desc\.store starts .* offset 12 .* multiple of "
                                                  r"8 float16 elements"):
        store_box[(1,)](ww.TensorDescriptor.from_tensor(h, [8, 16]), 0, 12, BLOCK_M=8,
                        BLOCK_N=16)


@pytest.mark.parametrize("load_col,store_col,construct", [
    (5, 0, "tlx.async_descriptor_load"), (0, -3, "tlx.async_descriptor_store")])
def test_tlx_async_copies_off_a_16_byte_boundary_are_reported(load_col, store_col, construct):
    x = np.arange(16 * 32, dtype=np.float16).reshape(16, 32)
    y = np.zeros((16, 32), np.float16)
    with pytest.raises(ww.InterpreterError, match=construct + r" starts its \[16, 16\] box at "
                                                  r"offset -?\d"):
        tlx_copy_at[(1,)](ww.TensorDescriptor.from_tensor(x, [16, 16]),
                          ww.TensorDescriptor.from_tensor(y, [16, 16]), load_col, store_col,
                          BLOCK=16)
    # Offsets of 8 float16s (16 bytes) copy, clipped at the edges as TMA clips.
    tlx_copy_at[(1,)](ww.TensorDescriptor.from_tensor(x, [16, 16]),
                      ww.TensorDescriptor.from_tensor(y, [16, 16]), 8, -8, BLOCK=16)
    np.testing.assert_array_equal(y[:, :8], x[:, 16:24])
    assert not y[:, 8:].any()


def test_a_box_beyond_the_array_memory_is_reported():
    x = np.zeros((4, 16), np.float32)
    out = np.zeros((4, 8), np.float32)
    # The descriptor claims 8 rows of a 4-row array: the interpreter catches the overrun.
    with pytest.raises(ww.InterpreterError, match="out-of-bounds"):
        load_box[(1,)](ww.TensorDescriptor(x, [8, 16], [16, 1], [4, 8]), out, 4, 0, BLOCK_M=4,
                       BLOCK_N=8)


def test_torch_cpu_tensors_work_under_warpweave_interpret(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    x = torch.arange(10 * 12, dtype=torch.float32).reshape(10, 12)
    out = torch.zeros(10, 12)
    scale_tiles[(3, 2)](ww.TensorDescriptor.from_tensor(x, [4, 8]),
                        ww.TensorDescriptor.from_tensor(out, [4, 8]), BLOCK_M=4, BLOCK_N=8)
    assert torch.equal(out, 2 * x)


def test_warp_specialized_ring_reads_a_ragged_tensor_through_a_host_descriptor():
    # 37 rows in 5 tiles of 8: the last tile's three missing rows add zeros.
    x = np.random.default_rng(1).standard_normal((37, 8)).astype(np.float32)
    out = np.zeros((8, 8), np.float32)
    ring_sum[(1,)](ww.TensorDescriptor.from_tensor(x, [8, 8]), out, NUM_TILES=5, BLOCK=8)
    padded = np.zeros((40, 8), np.float32)
    padded[:37] = x
    np.testing.assert_allclose(out, padded.reshape(5, 8, 8).sum(axis=0), rtol=1e-6)
