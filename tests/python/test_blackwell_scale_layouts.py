"""Block scales of tlx.async_dot_scaled in the layouts TLX's own unit tests use (blackwell_scale_
layout_kernels.py): the interpreter's values against a float64 NumPy reference, the PTX checked
against the PTX ISA and assembled by ptxas for sm_100a, and the layouts the hardware cannot take
refused at the kernel's line and column.

A [rows, cols] uint8 scale tile in tensor memory keeps scale c of row r in byte c % 4 of 32-bit
column (c // 4 * rows + r) // 32, lane r % 32 of every lane quarter (rows 64 or a multiple of
128); an MMA reading cols' scales a row for its rows reads scale word w at column w * R / 32,
R = rows * cols / cols', as TLX's MMA strides the words by the tile's columns: the tests' reference
reads the scales the MMA finds at each column, lane and byte, written here from that definition.
No Blackwell GPU ran any of this."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww

import blackwell_scale_layout_kernels as lk
from blackwell_testing import descriptor, line_of

ml_dtypes = pytest.importorskip("ml_dtypes")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

E4M3 = ml_dtypes.float8_e4m3fn


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


def column_of(rows, r, c):
    return (c // 4 * rows + r) // 32


def columns(tile):
    """{(column, lane, byte): scale} of a [rows, cols] tensor-memory scale tile."""
    rows, cols = tile.shape
    return {(column_of(rows, r, c), r % 32, c % 4): tile[r, c]
            for r in range(rows) for c in range(cols)}


def as_read(tile, rows, cols):
    """The [rows, cols] scales an MMA finds in the columns of `tile`."""
    at = columns(tile)
    return np.array([[at[(column_of(rows, r, c), r % 32, c % 4)] for c in range(cols)]
                     for r in range(rows)], np.uint8)


def to_cublas_layout(scales):
    """[rows, cols] scales in the cuBLAS block-scaled layout, [rows / 128, cols / 4, 512]: row
    32 i + l's scales 4 j..4 j + 3 at byte 16 l + 4 i + j of chunk (row block, scale word)."""
    rows, cols = scales.shape
    out = np.zeros((rows // 128, cols // 4, 512), np.uint8)
    for r in range(rows):
        for c in range(cols):
            out[r // 128, c // 4, (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4] = scales[r, c]
    return out


def operands(M, N, K, seed):
    # Multiples of 1/8 in [-1, 1] times powers of two: sums over K exact in fp32.
    rng = np.random.default_rng(seed)
    a = (rng.integers(-8, 9, (M, K)) / 8).astype(E4M3)
    b = (rng.integers(-8, 9, (N, K)) / 8).astype(E4M3)
    return a, b, rng


def reference(a, b, sa, sb):
    """(A * A_scale) @ (B * B_scale)^T in float64, the scales [M, K / 32] and [N, K / 32]."""
    K = a.shape[1]
    af = a.astype(np.float64) * np.repeat(2.0 ** (sa[:, :K // 32].astype(np.float64) - 127), 32, 1)
    bf = b.astype(np.float64) * np.repeat(2.0 ** (sb[:, :K // 32].astype(np.float64) - 127), 32, 1)
    return af @ bf.T


# ---- tensor-memory scale tiles from registers ----

@pytest.mark.parametrize("R,C", [(64, 4), (64, 16), (128, 8), (256, 4), (256, 16), (512, 4)])
def test_scale_tiles_round_trip(interpret, R, C):
    x = np.random.default_rng(R + C).integers(0, 256, (R, C)).astype(np.uint8)
    out = np.zeros_like(x)
    lk.scales_round_trip[(1,)](x, out, R=R, C=C, num_warps=4)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("K,N,sa_shape,sb_shape,num", [
    (256, 64, (128, 8), (64, 8), 1),     # B of N = 64: a 64-row tile, two columns a word
    (512, 64, (128, 16), (64, 16), 1),   # TLX's test_tmem_scale_subslice_compile shapes
    (256, 128, (128, 8), (256, 4), 2),   # TLX's test_tmem_buffer_scales_two_entries: B [K, N / 32]
    (256, 128, (128, 8), (64, 16), 1),   # fewer rows, more scales: read as [128, 8]
    (256, 128, (128, 16), (256, 8), 1),  # more than the MMA reads: word w at column 8 w
])
def test_mma_reads_the_columns_of_tensor_memory_scales(interpret, K, N, sa_shape, sb_shape, num):
    a, b, rng = operands(128, N, K, K + N + sa_shape[1] + sb_shape[0])
    sa = rng.integers(124, 131, sa_shape).astype(np.uint8)
    sb = rng.integers(124, 131, sb_shape).astype(np.uint8)
    rows_a, rows_b = sa.size // (K // 32), sb.size // (K // 32)
    # The MMA reads the first 128 (N) rows of what it finds.
    ref = reference(a, b, as_read(sa, rows_a, K // 32)[:128], as_read(sb, rows_b, K // 32)[:N])
    c = np.full((128, N), np.nan, np.float32)
    lk.mma_tmem_scales[(1,)](a.astype(np.float32), descriptor(b, [N, K]), sa, sb, c, K=K, N=N,
                             SA_R=sa_shape[0], SA_C=sa_shape[1], SB_R=sb_shape[0],
                             SB_C=sb_shape[1], NUM=num, num_warps=4)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def test_a_256_row_tile_of_4_scales_is_not_a_128_row_tile_of_8():
    # The reference's own check: the MMA reads rows 128-255's scales as scales 4-7.
    tile = np.arange(256 * 4, dtype=np.int64).reshape(256, 4) % 251
    read = as_read(tile.astype(np.uint8), 128, 8)
    np.testing.assert_array_equal(read[:, :4], tile[:128])
    np.testing.assert_array_equal(read[:, 4:], tile[128:])


@pytest.mark.parametrize("n", [1, 2])
def test_tmem_copy_of_chunk_rows_fills_the_first_scale_words(interpret, n):
    # [32 n, 16]: n chunks of 128 rows x 4 scales, chunk i scale word i of the [128, 16 n] tile.
    scales = np.random.default_rng(n).integers(0, 200, (128, 4 * n)).astype(np.uint8)
    src = to_cublas_layout(scales).reshape(32 * n, 16)
    out = np.zeros((128, 16 * n), np.uint8)
    lk.copy_chunk_rows[(1,)](src, out, N_CHUNKS=n, num_warps=4)
    np.testing.assert_array_equal(out[:, :4 * n], scales)
    assert (out[:, 4 * n:] == 0xEE).all()


def test_tmem_copy_into_subslices(interpret):
    K, N = 512, 128
    a, b, rng = operands(128, N, K, 21)
    sa = rng.integers(124, 131, (128, K // 32)).astype(np.uint8)
    sb = rng.integers(124, 131, (128, K // 32)).astype(np.uint8)
    c = np.full((128, N), np.nan, np.float32)
    sa_l = to_cublas_layout(sa).reshape(1, 1, K // 128, 2, 256)
    sb_l = to_cublas_layout(sb).reshape(1, 1, K // 128, 2, 256)
    lk.mma_subslice_scales[(1,)](
        descriptor(a, [128, K]), descriptor(b, [N, K]), descriptor(sa_l, [1, 1, K // 256, 2, 256]),
        descriptor(sb_l, [1, 1, K // 128, 2, 256]), c, K=K, N=N, num_warps=4)
    np.testing.assert_array_equal(c, reference(a, b, sa, sb).astype(np.float32))


@pytest.mark.parametrize("K,N", [(128, 128), (256, 256), (512, 64)])
def test_shared_scales_as_4d_tiles(interpret, K, N):
    a, b, rng = operands(128, N, K, K + N)
    rn = (N + 127) // 128
    sa = rng.integers(124, 131, (128, K // 32)).astype(np.uint8)
    sb = rng.integers(124, 131, (rn * 128, K // 32)).astype(np.uint8)
    sa_l = to_cublas_layout(sa).reshape(1, K // 128, 2, 256)
    sb_l = to_cublas_layout(sb).reshape(rn, K // 128, 2, 256)
    c = np.full((128, N), np.nan, np.float32)
    lk.mma_4d_smem_scales[(1,)](
        descriptor(a, [128, K]), descriptor(b, [N, K]), descriptor(sa_l, [1, K // 128, 2, 256]),
        descriptor(sb_l, [rn, K // 128, 2, 256]), c, K=K, N=N, num_warps=4)
    np.testing.assert_array_equal(c, reference(a, b, sa, sb[:N]).astype(np.float32))


# ---- PTX for sm_100a ----

def compile_kernel(name, signature, num_warps=4):
    path = Path(lk.__file__)
    result = native_loader.native().compile([(str(path), path.read_text())], name, signature, {},
                                            target="sm_100a", num_warps=num_warps, stage="ptx")
    return result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]


def tmem_sig(K, N, sa, sb, num=1):
    return (f"a_ptr:*fp32:16,b_desc:desc<fp8e4nv,{N}x{K}>,sa_ptr:*u8:16,sb_ptr:*u8:16,"
            f"c_ptr:*fp32:16,K={K},N={N},SA_R={sa[0]},SA_C={sa[1]},SB_R={sb[0]},SB_C={sb[1]},"
            f"NUM={num}")


MMA = re.compile(r"tcgen05\.mma\.cta_group::1\.kind::mxf8f6f4\.block_scale\.scale_vec::1X "
                 r"\[%r\d+\], \[%r\d+\], %rd\d+, %r\d+, \[(%r\d+)\], \[(%r\d+)\], %p\d+;")


def scale_columns(ptx, regs):
    """The column offset of each scale address from the first: `add.u32 %rX, %rBase, n`."""
    base = regs[0]
    out = []
    for r in regs:
        if r == base:
            out.append(0)
            continue
        m = re.search(rf"add\.u32 {re.escape(r)}, {re.escape(base)}, (\d+);", ptx)
        assert m, f"{r} is not {base} plus a constant"
        out.append(int(m.group(1)))
    return out


@pytest.mark.parametrize("K,N,sa,sb,stride_a,stride_b", [
    (256, 64, (128, 8), (64, 8), 4, 2),     # 64 rows: a word every two columns
    (256, 128, (128, 8), (256, 4), 4, 4),   # read as [128, 8]
    (256, 128, (128, 16), (256, 8), 8, 8),  # read as [256, 8]
    (512, 256, (128, 16), (256, 16), 4, 8),
])
def test_scale_word_columns_in_the_ptx(ptxas, K, N, sa, sb, stride_a, stride_b):
    # PTX ISA: the MMA reads the scale word at its [scale-A-tmem] / [scale-B-tmem] address; K
    # step s reads word s // 4 (byte s % 4, the instruction descriptor's scale-factor ID).
    ptx = compile_kernel("mma_tmem_scales", tmem_sig(K, N, sa, sb))
    mmas = MMA.findall(ptx)
    assert len(mmas) == K // 32
    cols_a = scale_columns(ptx, [m[0] for m in mmas])
    cols_b = scale_columns(ptx, [m[1] for m in mmas])
    assert cols_a == [s // 4 * stride_a for s in range(K // 32)]
    assert cols_b == [s // 4 * stride_b for s in range(K // 32)]
    ptxas(ptx, arch="sm_100a")


@pytest.mark.parametrize("R,C", [(64, 16), (128, 8), (256, 4), (512, 4)])
def test_scale_tile_round_trip_ptx(ptxas, R, C):
    # The tile's R * C / 128 columns: stored by every warp into its lane quarter (the duplicate
    # the MMA reads) and loaded back, in tcgen05 .32x32b messages of up to 32 columns.
    ptx = compile_kernel("scales_round_trip", f"in_ptr:*u8:16,out_ptr:*u8:16,R={R},C={C}")
    ncols = R * C // 128
    st = re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.x(\d+)\.b32", ptx)
    ld = re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x(\d+)\.b32", ptx)
    assert sum(map(int, st)) == ncols and sum(map(int, ld)) == ncols
    assert "tcgen05.wait::st.sync.aligned" in ptx and "tcgen05.wait::ld.sync.aligned" in ptx
    ptxas(ptx, arch="sm_100a")


def test_subslice_copies_and_4d_scales_ptx(ptxas):
    ptx = compile_kernel("mma_subslice_scales",
                         "a_desc:desc<fp8e4nv,128x512>,b_desc:desc<fp8e4nv,128x512>,"
                         "sa_desc:desc<u8,1x1x2x2x256>,sb_desc:desc<u8,1x1x4x2x256>,"
                         "c_ptr:*fp32:16,K=512,N=128")
    cps = re.findall(r"tcgen05\.cp\.cta_group::1\.32x128b\.warpx4 \[(%r\d+)\], %rd\d+;", ptx)
    assert len(cps) == 8  # A: two halves of 2 chunks; B: 4 chunks
    # The second half lands 8 columns (scales 8-15 of 128 rows) after the first.
    assert re.search(rf"add\.u32 %r\d+, %r\d+, 8;", ptx)
    ptxas(ptx, arch="sm_100a")
    ptx = compile_kernel("mma_4d_smem_scales",
                         "a_desc:desc<fp8e4nv,128x256>,b_desc:desc<fp8e4nv,256x256>,"
                         "sa_desc:desc<u8,1x2x2x256>,sb_desc:desc<u8,2x2x2x256>,"
                         "c_ptr:*fp32:16,K=256,N=256")
    assert len(re.findall(r"tcgen05\.cp\.cta_group::1\.32x128b\.warpx4", ptx)) == 2 + 4
    ptxas(ptx, arch="sm_100a")


def test_copy_chunk_rows_ptx(ptxas):
    ptx = compile_kernel("copy_chunk_rows", "in_ptr:*u8:16,out_ptr:*u8:16,N_CHUNKS=2")
    cps = re.findall(r"tcgen05\.cp\.cta_group::1\.32x128b\.warpx4 \[(%r\d+)\], (%rd\d+);", ptx)
    assert len(cps) == 2
    # Chunk 1: 4 columns on, 512 bytes on in shared memory (descriptor address >> 4: 32).
    assert re.search(rf"add\.u32 {re.escape(cps[1][0])}, {re.escape(cps[0][0])}, 4;", ptx)
    assert re.search(rf"add\.s64 {re.escape(cps[1][1])}, {re.escape(cps[0][1])}, 32;", ptx)
    ptxas(ptx, arch="sm_100a")


def test_triton_dialect_text_names_the_scale_layout():
    # asm["ttgir"]: scale tiles in Triton's scales encoding, TLX's subslices as tmem_subslice
    # with their first column N.
    path = Path(lk.__file__)
    kernel = native_loader.native().compile(
        [(str(path), path.read_text())], "mma_subslice_scales",
        "a_desc:desc<fp8e4nv,128x512>,b_desc:desc<fp8e4nv,128x512>,sa_desc:desc<u8,1x1x2x2x256>,"
        "sb_desc:desc<u8,1x1x4x2x256>,c_ptr:*fp32:16,K=512,N=128", {}, target="sm_100a",
        num_warps=4, stage="tile-ir")
    tile_ir = kernel if isinstance(kernel, str) else kernel.tile_ir
    ir = native_loader.native().triton_dialect_text(tile_ir, "sm_100a")
    sub = [line for line in ir.splitlines() if "ttng.tmem_subslice" in line]
    assert len(sub) == 2 and "N = 0 : i32" in sub[0] and "N = 8 : i32" in sub[1]
    assert "-> !ttg.memdesc<128x8xi8, #ttng.tensor_memory_scales_encoding<>" in sub[1]


# ---- located errors ----

def compile_source(tmp_path, body, interpret_too=True):
    """Compiles k(x_ptr) with `body` for sm_100a, expecting an error; returns its text."""
    src = tmp_path / "k.py"
    src.write_text("import warpweave as ww\nimport warpweave.language as tl\n"
                   "from warpweave import tlx\n\n\n@ww.jit\ndef k(x_ptr):\n" + body)
    with pytest.raises(Exception) as info:
        native_loader.native().compile([(str(src), src.read_text())], "k", "x_ptr:*fp32:16", {},
                                       target="sm_100a", stage="ptx")
    return str(info.value)


MMA_BODY = (
    "    a = tlx.local_view(tlx.local_alloc((128, 256), tl.float8e4nv, 1), 0)\n"
    "    b = tlx.local_view(tlx.local_alloc((256, {N}), tl.float8e4nv, 1), 0)\n"
    "    sa = tlx.local_view(tlx.local_alloc((128, 8), tl.uint8, 1, tlx.storage_kind.tmem), 0)\n"
    "    sb = tlx.local_view(tlx.local_alloc({SB}, tl.uint8, 1, tlx.storage_kind.tmem), 0)\n"
    "    d = tlx.local_view(tlx.local_alloc((128, {N}), tl.float32, 1, tlx.storage_kind.tmem), 0)\n"
    "    tlx.async_dot_scaled(a, b, d, sa, 'e4m3', sb, 'e4m3')\n")


@pytest.mark.parametrize("N,SB", [(128, "(64, 8)"), (256, "(128, 8)"), (64, "(64, 4)")])
def test_too_few_scale_rows_are_refused(tmp_path, N, SB):
    # B of N = 128 reads 128 rows: a [64, 8] tile holds 64 (as does [64, 4] for 8 scales a row).
    msg = compile_source(tmp_path, MMA_BODY.format(N=N, SB=SB))
    assert "k.py:13:47:" in msg and "B_scale in tensor memory" in msg
    assert f"such as [{N if N >= 128 else 64}, 8]" in msg


def test_misaligned_scale_subslice_is_refused(tmp_path):
    msg = compile_source(tmp_path, (
        "    s = tlx.local_view(tlx.local_alloc((128, 16), tl.uint8, 1, tlx.storage_kind.tmem), 0)\n"
        "    v = tlx.subslice(s, 2, 4)\n"
        "    tlx.local_store(v, tl.full((128, 4), 1, tl.uint8))\n"))
    assert "k.py:9:" in msg and "multiple of 4 scales" in msg


def test_misaligned_scale_subslice_is_refused_by_the_interpreter(interpret):
    with pytest.raises(ww.InterpreterError) as e:
        lk_bad_subslice[(1,)](np.zeros(1, np.float32))
    assert f"test_blackwell_scale_layouts.py:{line_of(lk_bad_subslice, 'tlx.subslice')}:" \
        in str(e.value)
    assert "multiple of 4 scales" in str(e.value)


@ww.jit
def lk_bad_subslice(x_ptr):
    s = ww.tlx.local_view(ww.tlx.local_alloc((128, 16), ww.language.uint8, 1,
                                             ww.tlx.storage_kind.tmem), 0)
    v = ww.tlx.subslice(s, 6, 4)
    ww.tlx.local_store(v, ww.language.full((128, 4), 1, ww.language.uint8))


def test_tmem_copy_into_64_rows_is_refused(tmp_path):
    # tcgen05.cp.32x128b.warpx4 writes 128 rows' scales (four columns) a chunk; TLX refuses too.
    msg = compile_source(tmp_path, (
        "    s = tlx.local_view(tlx.local_alloc((1, 1, 1, 2, 256), tl.uint8, 1), 0)\n"
        "    t = tlx.local_view(tlx.local_alloc((64, 8), tl.uint8, 1, tlx.storage_kind.tmem), 0)\n"
        "    tlx.tmem_copy(s, t)\n"))
    assert "k.py:10:" in msg and "rows a multiple of 128" in msg


def test_chunk_rows_must_match_the_destination(tmp_path):
    msg = compile_source(tmp_path, (
        "    s = tlx.local_view(tlx.local_alloc((32, 16), tl.uint8, 1), 0)\n"
        "    t = tlx.local_view(tlx.local_alloc((128, 32), tl.uint8, 1, tlx.storage_kind.tmem), 0)\n"
        "    tlx.tmem_copy(s, t)\n"))
    assert "k.py:10:19:" in msg and "[64, 16]" in msg and "got buffer<1x32x16xu8, smem>" in msg
