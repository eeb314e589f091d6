"""Routing shared by the row ops (softmax, layer norm forward and backward): the TMA row-streaming
kernels (kernels/hopper/softmax_tma.py, layernorm_tma.py), rows split over thread-block clusters
(kernels/hopper/rows_cluster.py) and rows held in shared memory over clusters
(kernels/hopper/rows_smem.py), each for sm_90+ GPUs, with the interpreter running them at small
sizes."""

from __future__ import annotations

import warpweave as ww

from . import _common
from ._common import (_FLOATS, _HALF_FLOATS, _MAX_SHARED_PER_BLOCK, _descriptor, _dtype_name,
                      _is_numpy, _itemsize, _resident_clusters, _strides)


def _row_descriptor(x2, tiles):
    """The TMA descriptor whose [TILE_R, TILE_C] blocks are the rows of x2 (see _tma_row_tiles)."""
    tile_r, tile_c = tiles
    return _descriptor(x2.reshape(x2.shape[0] * tile_r, tile_c), [tile_r, tile_c])


def _tma_row_tiles(place, x2):
    """(TILE_R, TILE_C) when each row of the 2-D array x2 can be copied by one TMA copy as a
    [TILE_R, TILE_C] block of x2 viewed as [n_rows * TILE_R, TILE_C] (TILE_C: 128 bytes of
    elements, the buffer's swizzle span): rows contiguous and back to back, TILE_R a power of two
    from 8 (one swizzle atom) to 256 (the TMA box limit), a 16-byte aligned base, a GPU with
    TMA; else None."""
    if place.on_gpu and place.kind == "torch" and not _common._sm90_or_later(place):
        return None
    n_rows, n_cols = x2.shape
    tile_c = 128 // _itemsize(x2)
    tile_r = n_cols // tile_c
    address = x2.ctypes.data if _is_numpy(x2) else x2.data_ptr()
    # The row coordinate n_rows * TILE_R is 32-bit.
    if (n_rows == 0 or n_cols % tile_c or tile_r & (tile_r - 1) or not 8 <= tile_r <= 256
            or _strides(x2) != (n_cols, 1) or address % 16 or n_rows * tile_r >= 1 << 31):
        return None
    return tile_r, tile_c


def _tma_rows_fit(x2, config, inputs: int) -> bool:
    """Whether a TMA row kernel takes x2's rows on config's warps: each thread holds at most 64
    of the row's fp32 values (layernorm_fwd_tma_kernel at 16384 columns on 4 warps, 128 per
    thread, spilled 1168 bytes), and its shared memory fits one block: num_stages row buffers
    per input, two output rows with tma_store, and the fp32 row of scratch its row reduction
    takes (the compiler's figure: layernorm_bwd_tma_kernel at 16384 fp16 columns, 2 stages with
    TMA stores, needs 6 * 32 KB + 64 KB + 1 KB = 263168 bytes). Other rows stay on the register
    kernels."""
    n_cols = x2.shape[1]
    if n_cols > 64 * 32 * (config.get("num_warps") or 4):
        return False
    rows = inputs * (config.get("num_stages") or 2) + (2 if config.get("tma_store") else 0)
    return rows * n_cols * _itemsize(x2) + 4 * n_cols + 2048 <= _MAX_SHARED_PER_BLOCK


def _tma_row_defaults(op: str, place, x2) -> dict:
    """The configuration a call without one (config=None) takes on an sm_90+ GPU: the TMA row
    kernel where it was faster than the register kernel on the H200, at contiguous rows of 2 to
    32 KB, else {} (the register kernels' own defaults). The backward's rows of 32 KB are split
    over a 2-CTA cluster: one CTA's registers do not hold the dw / db sums of 16384 columns
    (0.61x of a same-size copy at 8192x16384 fp16 per launch, against 0.42x for the rows_cluster
    kernel and 0.35x for the register kernels before this session). Measured as CUDA-graph
    replays (bench/sweep_memory.py --graph, fp16, against the copy of the same bytes): softmax
    0.92 / 0.87 / 0.87 / 0.89x at 1024 / 4096 / 8192 / 16384 columns (register kernel 0.90 /
    0.84 / 0.86 / 0.87x); layer norm forward 0.88 / 0.89 / 0.86 / 0.88x (0.84 / 0.84 / 0.83 /
    0.69x); backward 0.86x at 1024 on 4 warps, 2 stages, 0.96x at 4096 on 8 warps with TMA
    stores and two programs per SM, 0.92x at 8192 on 8 warps, 3 stages (0.74 / 0.81 / 0.66x).
    Rows (or slices) of 32 KB take 8 warps: the kernels hold at most 64 of a row's fp32 values
    a thread. (Softmax rows of 64 KB split over 2-CTA clusters, 8 warps, 2 stages, ran 0.78x at
    4096x32768 fp16 and 0.87x at 8192x16384 fp32, where the register kernel ran 0.86 / 0.91x:
    not a default.)"""
    if not _common._sm90_or_later(place):
        return {}
    row_bytes = x2.shape[1] * _itemsize(x2)
    # The backward's rows past 16 KB are split over clusters into slices of 16 KB.
    split = max(1, row_bytes // 16384) if op == "layernorm_bwd" else 1
    if (not 2048 <= row_bytes <= (131072 if op == "layernorm_bwd" else 32768)
            or split not in (1, 2, 4, 8)  # cluster sizes the TMA kernel takes (_row_split)
            or _strides(x2) != (x2.shape[1], 1) or x2.shape[1] % split):
        return {}
    if _tma_row_tiles(place, _row_slices(x2, split)) is None:
        return {}
    if split > 1:
        # Each CTA streams its slices as one CTA does rows of 16 KB.
        return dict(tma=True, split=split, num_warps=8, num_stages=3)
    if op != "layernorm_bwd":
        return dict(tma=True, num_warps=4 if row_bytes <= 16384 else 8, num_stages=2)
    if row_bytes <= 4096:
        return dict(tma=True, num_warps=4, num_stages=2)
    if row_bytes <= 8192:
        return dict(tma=True, tma_store=True, num_warps=8, num_stages=2, programs_per_sm=2)
    return dict(tma=True, num_warps=8, num_stages=3)


def _row_split(op: str, config) -> int:
    """config's `split`: the CTAs of a cluster that share each row in the TMA row kernels."""
    split = config.get("split", 1)
    if type(split) is not int or split not in (1, 2, 4, 8):
        raise ValueError(f"{op}: config 'split' must be 1, 2, 4 or 8 (the CTAs of a cluster that "
                         f"share each row in the TMA kernel), got {split!r}")
    return split


def _row_slices(t, split: int):
    """The rows of the contiguous 2-D array t as `split` slices each: [n_rows * split, n_cols /
    split] (t itself for split 1)."""
    if split == 1:
        return t
    return t.reshape(t.shape[0] * split, t.shape[1] // split)


def _register_fallback(config, tiles):
    """The configuration of the register kernel that takes rows the TMA option asked for but the
    TMA kernel cannot take: its own defaults, since the warps, stages and programs per SM given
    with tma=True are the TMA kernel's (4 warps on 32768 fp16 columns spilled 14 KB)."""
    return {} if config.get("tma") and tiles is None else config


# Wide rows on sm_90+ GPUs are split over the CTAs of a thread-block cluster
# (kernels/hopper/rows_cluster.py): each CTA holds a slice of the row in registers, the width at
# which the one-CTA kernels already run near the copy bandwidth, and the CTAs exchange partial
# statistics per row. Per op: rows longer than `from_cols` take it, in clusters of
# cdiv(n_cols, slice_cols) CTAs, at most max_ctas (8 is the portable cluster size; up to
# ROWS_CLUSTER_MAX_CTAS, 16 on sm_90, the launcher allows non-portable sizes).
# Each cluster takes rows_per_cluster consecutive rows, or, with programs_per_sm, one share of
# the rows per cluster when num_sms * programs_per_sm / C clusters take them all (the backward's
# clusters each leave one row of dw / db partials: few clusters); rows_ahead: rows a CTA keeps
# loading. Rows of `dtypes` longer than from_cols take the split by default (None: only when
# config asks). On the H200 (bench/sweep_memory.py and bench_kernels.py, fp16):
# - softmax at 2048x100000 over 8 CTAs of 8 warps, one row per cluster: 2.53-2.57 TB/s (0.61x
#   copy) against 2.33-2.37 for the online kernel; 13 CTAs 2.55-2.61, 16 2.54-2.56; clusters
#   taking 4-8 rows each with rows loaded ahead 1.4-2.4. In fp32 2.39 (0.56x), where the online
#   kernel gave 2.55 (0.60x, an earlier run): fp32 stays on it. At 4096x32768 the one-CTA kernel
#   stays ahead (3.47 against 2.63).
# - layer norm backward at 8192x16384 over 2 CTAs of 32 warps, one cluster per 2 SMs:
#   1.74-1.85 (0.42-0.45x) against 1.49-1.50 (0.36x) for the dx + partials kernels.
# - layer norm forward at 8192x16384: the fused one-CTA kernel 2.86-2.88 (0.69x), the best split
#   2.14-2.23 (8 CTAs of 4 warps, 4 of 4); at 2048x100000 the split (8 CTAs of 8 warps) gave 1.33
#   (0.32x), not timed against the three-pass kernel: not a default.
ROWS_CLUSTER_MAX_CTAS = 16
ROWS_CLUSTER_DEFAULTS = {
    "softmax": dict(from_cols=32768, dtypes=_HALF_FLOATS, slice_cols=12800,
                    max_ctas=8, rows_per_cluster=1, programs_per_sm=0, rows_ahead=0,
                    defer_store=False),
    "layernorm_fwd": dict(from_cols=None, dtypes=_FLOATS, slice_cols=12800, max_ctas=8,
                          rows_per_cluster=1, programs_per_sm=0, rows_ahead=0,
                          defer_store=False),
    # Deferred dx stores: 8192-column fp16 slices one row ahead spilled 8 bytes without.
    "layernorm_bwd": dict(from_cols=8192, dtypes=_FLOATS, slice_cols=8192, max_ctas=16,
                          rows_per_cluster=0, programs_per_sm=1, rows_ahead=1, defer_store=True),
}


def _cluster_ctas(op: str, place, n_cols: int, dt: str, config) -> int:
    """CTAs per cluster that split each row of `op` (0: the one-CTA kernels take the rows):
    config's `cluster` (0 or 1: never; 2 to ROWS_CLUSTER_MAX_CTAS: always, the interpreter
    included), else ROWS_CLUSTER_DEFAULTS on sm_90+ GPUs for rows of dtype `dt`."""
    ctas = config.get("cluster")
    if ctas is not None:
        if (isinstance(ctas, bool) or not isinstance(ctas, int)
                or not 0 <= ctas <= ROWS_CLUSTER_MAX_CTAS):
            raise ValueError(f"{op}: config 'cluster' must be an int from 0 to "
                             f"{ROWS_CLUSTER_MAX_CTAS} (CTAs per row; 0 or 1: no cluster), got "
                             f"{ctas!r}")
        return ctas if ctas >= 2 else 0
    defaults = ROWS_CLUSTER_DEFAULTS[op]
    if (defaults["from_cols"] is None or n_cols <= defaults["from_cols"]
            or dt not in defaults["dtypes"] or not _common._sm90_or_later(place)):
        return 0
    return max(2, min(defaults["max_ctas"], ww.cdiv(n_cols, defaults["slice_cols"])))


def _cluster_launch(op: str, place, n_rows: int, n_cols: int, ctas: int, config,
                    warps_for_block, wide_ahead_block: int = 0):
    """(slice_cols, rows_per_cluster, n_clusters, launch options) of a rows_cluster kernel:
    slices of cdiv(n_cols, ctas) columns rounded up to 16 (16-byte vectors at every slice
    start); each cluster takes rows_per_cluster consecutive rows (config's; else one share of
    the rows per cluster when config's `clusters`, or programs_per_sm CTAs per SM, set the
    cluster count; else the op's defaults), loading the op's default rows_ahead when it has more
    than one (none from wide_ahead_block lanes on when that is given); num_warps, rows_ahead and
    defer_store (a row's output stored after the next row's cluster barrier) override."""
    defaults = ROWS_CLUSTER_DEFAULTS[op]
    slice_cols = ww.cdiv(ww.cdiv(n_cols, ctas), 16) * 16
    block = ww.next_power_of_2(slice_cols)
    rows_per_cluster = config.get("rows_per_cluster")
    if not rows_per_cluster:
        clusters = config.get("clusters") or place.num_sms() * config.get(
            "programs_per_sm", defaults["programs_per_sm"]) // ctas
        rows_per_cluster = ww.cdiv(n_rows, clusters) if clusters else defaults["rows_per_cluster"]
    rows_per_cluster = max(1, min(n_rows, rows_per_cluster))
    ahead = defaults["rows_ahead"] if not 0 < wide_ahead_block <= block else 0
    meta = dict(BLOCK=block, C=ctas, PEERS=ww.next_power_of_2(ctas),
                ROWS_AHEAD=config.get("rows_ahead", ahead if rows_per_cluster > 1 else 0),
                DEFER_STORE=bool(config.get("defer_store", defaults["defer_store"])),
                num_warps=config.get("num_warps") or warps_for_block(block),
                ctas_per_cga=(ctas, 1, 1))
    return slice_cols, rows_per_cluster, ww.cdiv(n_rows, rows_per_cluster), meta


def _cluster_warps(block: int) -> int:
    # A warp per 2048 lanes (4 to 16): 12512-column fp16 slices in 16384 lanes on 8 warps.
    return min(max(block // 2048, 4), 16)


def _smem_rows_meta(op: str, place, x2, config, kernel, args_of, resident_slices: int = 0,
                    resident_itemsize: int = 0, **constexprs) -> tuple:
    """(grid, meta, slice_cols) of a rows_smem kernel from config: split (CTAs of a cluster per
    row, 1 to 16), block (columns per chunk, a power of two from 16), num_stages (slices in each
    CTA's ring, at least 2), num_warps, unroll (the passes' loop_unroll_factor) and the
    persistent grid's clusters (default: as many as fit at once, at most one per row);
    `constexprs` join meta. args_of(slice_cols) gives the
    kernel's arguments (for the occupancy query)."""
    n_rows, n_cols = x2.shape
    split = config.get("split", 2)
    if type(split) is not int or not 1 <= split <= ROWS_CLUSTER_MAX_CTAS:
        raise ValueError(f"{op}: config 'split' must be an int from 1 to "
                         f"{ROWS_CLUSTER_MAX_CTAS} (CTAs per row), got {split!r}")
    block = config.get("block", 4096)
    stages = config.get("num_stages", 2)
    if type(block) is not int or block < 16 or block & (block - 1):
        raise ValueError(f"{op}: config 'block' must be a power of two >= 16, got {block!r}")
    if type(stages) is not int or stages < 2:
        raise ValueError(f"{op}: config 'num_stages' must be an int >= 2, got {stages!r}")
    slice_cols = ww.cdiv(ww.cdiv(n_cols, split), 16) * 16
    chunks = ww.cdiv(slice_cols, block)
    # The ring of slices, and `resident_slices` more slices of `resident_itemsize` bytes an
    # element that the kernel keeps for every row (the layer norm's w and b with WB_SMEM).
    ring_bytes = (stages * _itemsize(x2) + resident_slices * resident_itemsize) * chunks * block
    if ring_bytes + 2048 > _MAX_SHARED_PER_BLOCK:
        raise ValueError(f"{op}: config {config!r} needs {ring_bytes} bytes of shared memory "
                         f"for its ring at {n_cols} columns (at most "
                         f"{_MAX_SHARED_PER_BLOCK - 2048}); raise split or lower num_stages")
    # unroll=U: the passes over a slice's whole chunks unrolled U times.
    unroll = config.get("unroll", 1)
    if type(unroll) is not int or unroll < 1:
        raise ValueError(f"{op}: config 'unroll' must be an int >= 1 (the loop_unroll_factor of "
                         f"the passes over a slice's chunks), got {unroll!r}")
    meta = dict(BLOCK=block, K=chunks, NUM_STAGES=stages, C=split,
                PEERS=ww.next_power_of_2(split), STORE_EVICT=config.get("store_evict", ""),
                num_warps=config.get("num_warps") or 8, UNROLL=unroll, **constexprs)
    if split > 1:
        meta["ctas_per_cga"] = (split, 1, 1)
    clusters = config.get("clusters") or _resident_clusters(
        place, kernel, (kernel.__name__, _dtype_name(x2), n_cols, split, block, stages,
                        meta["num_warps"], unroll, tuple(sorted(constexprs.items()))),
        lambda: args_of(slice_cols), split, **meta)
    return (max(1, min(n_rows, clusters)) * split,), meta, slice_cols
