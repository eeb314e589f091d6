"""Softmax over the last dimension: the register kernels (kernels/softmax.py: one-pass rows, the
two-pass online kernel for long rows) and, on sm_90+ GPUs, the TMA, cluster and shared-memory row
kernels (kernels/hopper; routing shared with layer norm in _rows.py)."""

from __future__ import annotations

import warpweave as ww

from . import _common, _rows
from ._common import (_FLOATS, _Place, _as_rows, _check_dtype, _check_shape, _dtype_name,
                      _itemsize, _planned, _resident_clusters, _resident_programs, _strides)
from ._rows import (_cluster_ctas, _cluster_warps, _register_fallback, _row_descriptor,
                    _row_slices, _row_split, _smem_rows_meta, _tma_row_defaults, _tma_row_tiles,
                    _tma_rows_fit)
from .kernels import softmax as softmax_kernels
from .kernels.hopper import rows_cluster as rows_cluster_kernels
from .kernels.hopper import rows_smem as rows_smem_kernels
from .kernels.hopper import softmax_tma as softmax_tma_kernels


# Rows up to this many columns keep the whole row in one block (softmax_kernel, up to 32 warps
# and no rows loaded ahead: 32768 fp32 columns take 63 registers per thread, no spills); longer
# rows take the two-pass online kernel, whose block size does not grow with the row.
SOFTMAX_FUSED_MAX_COLS = 32768


def _softmax_warps(block: int) -> int:
    if block >= 32768:
        return 32
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


def _softmax_rows_ahead(block: int, dt: str) -> int:
    """Rows softmax_kernel loads ahead: 2 while the rows in registers (those ahead and the fp32
    one reduced) stay within half the register file; ptxas -v on 32 warps at BLOCK=32768:
    fp16 one row ahead 64 registers, fp32 none ahead 63, one ahead 64 with 500 bytes spilled.
    bf16 widens to fp32 in more registers than fp16: one row ahead at 32768 spilled 16 bytes."""
    if dt == "bfloat16" and block >= 32768:
        return 0
    itemsize = 4 if dt == "float32" else 2
    return max(0, min(2, 131072 // (block * itemsize) - 1))


# The online softmax's block and warps on the GPU: 47 registers per thread (fp16, 58 fp32) on 32
# warps, so one program per SM, whose row (200 KB at 100000 fp16 columns) stays in L2 for the
# second pass; 4096 columns on 16 warps kept four rows per SM in flight, more than L2 holds.
SOFTMAX_ONLINE_BLOCK = 8192
SOFTMAX_ONLINE_WARPS = 32


@_planned
def softmax(x, online=None, config=None):
    """Softmax over the last dimension of x (fp16, bf16 or fp32), computed in fp32 and returned
    in x's dtype and shape. `online` forces (True) or forbids (False) the two-pass kernel for
    long rows; by default rows longer than SOFTMAX_FUSED_MAX_COLS take it. `config` (for
    bench/sweep_memory.py) overrides num_warps and programs_per_sm; tma=True streams rows
    through shared memory with TMA where one copy moves a row (sm_90 and later; contiguous rows
    of 8 to 256 times 128 bytes, a power of two, whose shared buffers fit; num_stages rows
    loading per program, tma_store writes them back by TMA too; other rows stay on the register
    kernel). rows_ahead (0-2) overrides the rows the register kernel loads ahead. On sm_90+ GPUs
    16-bit rows longer than ROWS_CLUSTER_DEFAULTS["softmax"]["from_cols"] are split over the CTAs
    of a thread-block cluster and read once (kernels/hopper/rows_cluster.py); config's
    cluster=C (2 to 16) forces that split, 0 forbids it, and with it rows_per_cluster (or
    clusters, or programs_per_sm: see _cluster_launch), num_warps, rows_ahead (0-2) and
    defer_store apply to that kernel. Without a config, sm_90+ GPUs take the TMA kernel at rows
    of 2 to 32 KB (_tma_row_defaults), as layernorm_fwd and layernorm_bwd do, and wider rows
    held in shared memory over clusters (kernels/hopper/rows_smem.py, _softmax_smem_defaults);
    config=dict(smem=True, ...) forces that kernel (see _softmax_smem; unroll=U unrolls its
    passes over a slice's chunks), config=dict(tma=False)
    keeps the register kernel."""
    config = config or {}
    place = _Place("softmax", {"x": x})
    dt = _check_dtype("softmax", "x", x, _FLOATS)
    shape = tuple(x.shape)
    x2 = _as_rows("softmax", "x", x)
    n_rows, n_cols = x2.shape
    out = place.empty((n_rows, n_cols), dt)
    if n_rows == 0 or n_cols == 0:
        return out.reshape(shape)
    if not config and not online:
        config = _tma_row_defaults("softmax", place, x2) or _softmax_smem_defaults(place, x2)
    in_stride = _strides(x2)[0]
    if config.get("smem"):
        _softmax_smem(place, x2, out, in_stride, config)
        return out.reshape(shape)
    ctas = 0 if online else _cluster_ctas("softmax", place, n_cols, dt, config)
    cluster_asked = bool(config.get("cluster"))
    if online is None:
        # The fused kernel's row offsets are 32-bit.
        online = n_cols > SOFTMAX_FUSED_MAX_COLS or n_rows * max(in_stride, n_cols) >= 1 << 31
    split = _row_split("softmax", config)
    tiles = None
    if config.get("tma") and n_cols % split == 0 and _strides(x2) == (n_cols, 1):
        # With split > 1 the TMA kernel takes each row as `split` slices.
        x_rows = _row_slices(x2, split)
        tiles = _tma_row_tiles(place, x_rows)
        if tiles is not None and not _tma_rows_fit(x_rows, config, inputs=1):
            tiles = None
    config = _register_fallback(config, tiles)
    if ctas and (tiles is None or cluster_asked):
        # Each row split over a cluster of `ctas` CTAs, read once (kernels/hopper/rows_cluster.py).
        slice_cols, rows_per_cluster, n_clusters, meta = _rows._cluster_launch(
            "softmax", place, n_rows, n_cols, ctas, config, _cluster_warps)
        scratch = place.empty((n_rows, ctas, 2), "float32")
        place.launch(rows_cluster_kernels.softmax_cluster_kernel, (n_clusters * ctas,),
                     out, x2, scratch, in_stride, n_cols, n_rows, rows_per_cluster, n_cols,
                     slice_cols, **meta)
    elif not online and tiles is not None:
        # Rows stream through a ring of shared buffers (kernels/hopper/softmax_tma.py); the
        # default at rows of 2-16 KB on sm_90+ (_tma_row_defaults). Its per-launch timings once
        # scattered between runs (2.66-3.57 TB/s at 16384x4096): the wrapper's host cost, ~75 us
        # a call against ~20 for the register kernel's, shows when it exceeds the GPU time of the
        # L2 flush before each timed run; as CUDA-graph replays it is steady.
        tile_r, tile_c = tiles
        warps = config.get("num_warps") or 4
        stages = config.get("num_stages") or 2
        args = (_row_descriptor(x_rows, tiles), _row_descriptor(_row_slices(out, split), tiles),
                out, n_rows)
        meta = dict(TILE_R=tile_r, TILE_C=tile_c, NUM_STAGES=stages, num_warps=warps,
                    TMA_STORE=bool(config.get("tma_store")),
                    STORE_EVICT=config.get("store_evict", ""), SPLIT=split, PEERS=split)
        if split > 1:
            meta["ctas_per_cga"] = (split, 1, 1)
        key = ("softmax_tma", dt, n_cols, stages, warps, split)
        if split > 1 and not config.get("programs_per_sm"):
            # The clusters that fit at once (a cluster sits in one GPC).
            clusters = _resident_clusters(place, softmax_tma_kernels.softmax_tma_kernel, key, args,
                                          split, **meta)
        else:
            programs = place.num_sms() * (config.get("programs_per_sm") or min(
                8, _resident_programs(place, softmax_tma_kernels.softmax_tma_kernel, key, args,
                                     **meta)))
            clusters = programs // split
        clusters = max(1, min(n_rows, clusters))
        place.launch(softmax_tma_kernels.softmax_tma_kernel, (clusters * split,), *args, **meta)
    elif not online:
        block = ww.next_power_of_2(n_cols)
        # With two rows in flight per program, ptxas -v gives 62 registers per thread at
        # BLOCK=4096 on 8 warps (fp16): four programs per SM, 64 KB of loads in flight. (16 warps
        # would take 32 registers for the same bytes in flight, but twice the per-row
        # reduction work across warps.)
        warps = config.get("num_warps") or _softmax_warps(block)
        ahead = config.get("rows_ahead", _softmax_rows_ahead(block, dt))
        args = (out, x2, in_stride, n_cols, n_rows, n_cols)
        programs = place.num_sms() * (config.get("programs_per_sm") or _resident_programs(
            place, softmax_kernels.softmax_kernel, ("softmax", dt, block, warps, ahead), args,
            BLOCK=block, ROWS_AHEAD=ahead, num_warps=warps))
        place.launch(softmax_kernels.softmax_kernel, (min(n_rows, programs),), *args, BLOCK=block,
                     ROWS_AHEAD=ahead, num_warps=warps)
    else:
        if place.on_gpu:
            block, warps = SOFTMAX_ONLINE_BLOCK, SOFTMAX_ONLINE_WARPS
        else:
            block = min(256, ww.next_power_of_2(n_cols))
            warps = _softmax_warps(block)
        place.launch(softmax_kernels.softmax_online_kernel, (n_rows,),
                     out, x2, in_stride, n_cols, n_cols, BLOCK=block, num_warps=warps)
    return out.reshape(shape)


def _softmax_smem_defaults(place, x2) -> dict:
    """The smem softmax's configuration for rows wider than the TMA kernels take (32 KB) on
    sm_90+ GPUs, else {}: the fewest CTAs per row (1, 2, 4 or 16) whose slices (in chunks of
    8 KB) fit a ring of two or three in 216 KB, 8 warps (16 at 4 CTAs a row). Measured on the
    H200 against a copy of the same bytes (bench/sweep_memory.py --table smem): 0.90x at
    4096x32768 fp16 (one CTA a row, three slices of 64 KB), 0.87x at 2048x100000 fp16 (2 CTAs,
    two of 104 KB) and 0.92x in fp32 (4 CTAs of 16 warps), 0.80 / 0.79x at 1024x262144 fp16 /
    fp32 (16 CTAs), where the kernels before ran 0.84x, 0.61x, 0.62x and 0.73 / 0.65x."""
    item = _itemsize(x2)
    n_cols = x2.shape[1]
    if n_cols * item <= 32768 or not _common._sm90_or_later(place):
        return {}
    block = 8192 // item
    if item == 4 and n_cols * item <= 65536:
        # fp32 rows of 64 KB ran 0.96x over 2 CTAs with four 32 KB slices in 16 KB chunks,
        # against 0.90x for one CTA a row (8192x16384; in fp16 one CTA a row stayed ahead).
        return dict(smem=True, split=2, block=4096, num_stages=4, num_warps=8)
    # (Past 4 CTAs a row, 16 (a non-portable cluster size) with three slices beat 8 with two or
    # three: 0.80 / 0.78 / 0.73x at 1024x262144 fp16, 0.79x in fp32 where 8 do not fit.)
    # The passes over a slice's chunks unrolled (unroll, as the sweep's unroll=U entries ran on
    # the H200 against the same configuration without): 2048x100000 fp16 over 2 CTAs 0.87-0.88x
    # of copy at 4 against 0.85-0.86x, 1024x262144 over 16 CTAs 0.80x at 4 (fp16) and 0.81x at
    # 2 (fp32) against 0.79 / 0.78x; one CTA a row (4096x32768 fp16) and 4 (2048x100000 fp32)
    # within the run's noise.
    unroll = {2: 4, 16: 4 if item == 2 else 2}
    for split in (1, 2, 4, 16):
        slice_bytes = ww.cdiv(ww.cdiv(ww.cdiv(n_cols, split), 16) * 16, block) * 8192
        stages = min(3, 221184 // slice_bytes)
        if stages >= 2:
            return dict(smem=True, split=split, block=block, num_stages=stages,
                        num_warps=16 if split == 4 else 8, unroll=unroll.get(split, 1))
    return {}


def _softmax_smem(place, x2, out, in_stride: int, config) -> None:
    """Softmax with each row's slices held in shared memory (kernels/hopper/rows_smem.py), as
    _smem_rows_meta configures it; config's dsmem=False exchanges the partials through global
    scratch and a cluster barrier a row instead of the peers' shared memory."""
    n_rows, n_cols = x2.shape
    dsmem = bool(config.get("dsmem", True))
    split = config.get("split", 2)  # (checked by _smem_rows_meta)
    # The scratch exchange's slots (dsmem=False; unused, and not allocated, otherwise).
    scratch = (place.empty((n_rows, split, 2), "float32")
               if type(split) is int and split > 1 and not dsmem else out)

    def args_of(slice_cols):
        return (out, x2, scratch, in_stride, n_cols, n_rows, n_cols, slice_cols)

    kernel = rows_smem_kernels.softmax_smem_kernel
    grid, meta, slice_cols = _smem_rows_meta("softmax", place, x2, config, kernel, args_of,
                                             DSMEM=dsmem)
    place.launch(kernel, grid, *args_of(slice_cols), **meta)


def softmax_bwd(dy, y):
    """The gradient of softmax over the last dimension, dx = y * (dy - sum(dy * y)), given y =
    softmax(x) and the gradient dy of y (same shape and dtype: fp16, bf16 or fp32); computed in
    fp32 (kernels/softmax.py's softmax_bwd_kernel) and returned in y's dtype and shape."""
    op = "softmax_bwd"
    place = _Place(op, {"dy": dy, "y": y})
    dt = _check_dtype(op, "y", y, _FLOATS)
    if _dtype_name(dy) != dt:
        raise ValueError(f"{op}: 'dy' has dtype {_dtype_name(dy)} but 'y' has {dt}")
    shape = tuple(y.shape)
    _check_shape(op, "dy", dy, shape, " (y's shape)")
    y2 = _as_rows(op, "y", y)
    dy2 = _as_rows(op, "dy", dy)
    n_rows, n_cols = y2.shape
    dx = place.empty((n_rows, n_cols), dt)
    if n_rows == 0 or n_cols == 0:
        return dx.reshape(shape)
    block = min(ww.next_power_of_2(n_cols), 8192 if place.on_gpu else 256)
    place.launch(softmax_kernels.softmax_bwd_kernel, (n_rows,), dx, dy2, y2, _strides(dy2)[0],
                 _strides(y2)[0], n_cols, n_cols, BLOCK=block, num_warps=_softmax_warps(block))
    return dx.reshape(shape)
