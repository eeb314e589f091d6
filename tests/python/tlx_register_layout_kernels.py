"""Small kernels of our own for tests/python/test_tlx_register_layout.py: tlx.local_load with a
kernel-given register layout (tlx.layout's CuTe-style shape / stride) from shared and tensor
memory. A layout does not change values: each kernel writes what it loaded (and a sum with a
tensor in the compiler's own layout, so that the value converts on its way)."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx

# [64, 64] over 4 warps: lanes down the rows, warp bit 0 to row 32, warp bit 1 to column 16;
# each thread holds columns 0-15 and 32-47 of its row (from its warp's column offset).
SPLIT_COLUMNS = tlx.layout(shape=((32, 2, 2), (16, 2)), stride=((64, 2048, 16), (1, 32)))

# [128, 64] over 8 warps, the shape of TLX's attention-backward "separable" layouts: warps 0-3
# of each warp group take rows 32 (w % 4) + lane, the warp group bit column 16, each thread
# columns 0-15 and 32-47 of its row. tcgen05.ld gives warp group g columns 32 g to 32 g + 31.
SEPARABLE = tlx.layout(shape=((32, 4, 2), (16, 2)), stride=((64, 2048, 16), (1, 32)))
# [128, 64] over 8 warps exactly as tcgen05.ld delivers it.
TCGEN05_ROWS = tlx.layout(shape=((32, 4, 2), (32, )), stride=((64, 2048, 32), (1, )))
# [128, 64] over 8 warps with lanes along the columns: not a tcgen05.ld pattern (it is read in
# tcgen05's layout and converted).
COLUMN_LANES = tlx.layout(shape=((32, 4, 2), (32, )), stride=((1, 2048, 32), (64, )))


@ww.jit
def smem_load_in_layout(x_ptr, out_ptr):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    tile = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
    tlx.local_store(tile, tl.load(x_ptr + offs))
    v = tlx.local_load(tile, layout=SPLIT_COLUMNS)
    tl.store(out_ptr + offs, v * 2.0 + tl.load(x_ptr + offs))


@ww.jit
def tmem_load_in_layout(x_ptr, out_ptr, MODE: tl.constexpr):
    offs = tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :]
    tile = tlx.local_view(tlx.local_alloc((128, 64), tl.float32, 1, tlx.storage_kind.tmem), 0)
    tlx.local_store(tile, tl.load(x_ptr + offs))
    if MODE == 0:
        v = tlx.local_load(tile, layout=TCGEN05_ROWS)
    elif MODE == 1:
        v = tlx.local_load(tile, layout=SEPARABLE)
    else:
        v = tlx.local_load(tile, layout=COLUMN_LANES)
    tl.store(out_ptr + offs, v * 2.0 + tl.load(x_ptr + offs))
# [128, 64] over 8 warps with the warp group bit on column 1 and the registers on columns 2-32:
# tcgen05 could write 32-bit elements so (runs of one column), but 16-bit and 8-bit ones pack
# columns 0-1 (and 2-3) into one 32-bit column that this layout splits between warp groups.
SPLIT_PAIRS = tlx.layout(shape=((32, 4, 2), (32, )), stride=((64, 2048, 1), (2, )))


@ww.jit
def tmem_store_in_layout(x_ptr, out_ptr, MODE: tl.constexpr, DTYPE: tl.constexpr):
    # Loads x from tensor memory in a layout (MODE 0: the compiler's own), stores it, cast to
    # DTYPE and doubled, to a second tile of tensor memory in that layout, reads that back in
    # the compiler's layout and writes it plus x.
    offs = tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :]
    src = tlx.local_view(tlx.local_alloc((128, 64), tl.float32, 1, tlx.storage_kind.tmem), 0)
    dst = tlx.local_view(tlx.local_alloc((128, 64), DTYPE, 1, tlx.storage_kind.tmem), 0)
    tlx.local_store(src, tl.load(x_ptr + offs))
    if MODE == 0:
        v = tlx.local_load(src)
    elif MODE == 1:
        v = tlx.local_load(src, layout=SEPARABLE)
    elif MODE == 2:
        v = tlx.local_load(src, layout=COLUMN_LANES)
    else:
        v = tlx.local_load(src, layout=SPLIT_PAIRS)
    tlx.local_store(dst, (v * 2.0).to(DTYPE))
    tl.store(out_ptr + offs, tlx.local_load(dst).to(tl.float32) + tl.load(x_ptr + offs))
