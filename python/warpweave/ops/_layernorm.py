"""Layer norm forward and backward over the last dimension: the register kernels
(kernels/layernorm.py) and, on sm_90+ GPUs, the TMA, cluster and shared-memory row kernels
(kernels/hopper; routing shared with softmax in _rows.py)."""

from __future__ import annotations

import math

import warpweave as ww

from . import _common, _rows
from ._common import (_FLOATS, _MAX_SHARED_PER_BLOCK, _Place, _as_rows, _check_dtype,
                      _check_shape, _contiguous, _dtype_name, _itemsize, _numel, _planned,
                      _resident_clusters, _resident_programs, _strides)
from ._rows import (_cluster_ctas, _cluster_warps, _register_fallback, _row_descriptor,
                    _row_slices, _row_split, _smem_rows_meta, _tma_row_defaults, _tma_row_tiles,
                    _tma_rows_fit)
from .kernels import layernorm as layernorm_kernels
from .kernels.hopper import layernorm_tma as layernorm_tma_kernels
from .kernels.hopper import rows_cluster as rows_cluster_kernels
from .kernels.hopper import rows_smem as rows_smem_kernels


# Rows up to this long, and up to LAYERNORM_FUSED_MAX_BYTES, are normalized by the one-pass
# persistent kernel; longer rows are read three times. ptxas -v on 32 warps at 16384 columns:
# fp16 62 registers, no spills; fp32 132 bytes spilled.
LAYERNORM_FUSED_MAX_COLS = 16384
LAYERNORM_FUSED_MAX_BYTES = 32768

# Backward rows up to this long keep their dw and db sums in registers beside the row (16 warps at
# 8192 columns: 102 registers); longer rows leave them to layernorm_bwd_partials_kernel, as
# holding them spilled (16384 fp16 columns: 2856 bytes on 16 warps, 192 on 32 with the sums
# taken early, and the 0.11x-of-copy time on the H200).
LAYERNORM_BWD_PARTIALS_MAX_COLS = 8192


def _layernorm_fwd_smem_defaults(place, x2, w, b) -> dict:
    """The layer norm forward's configuration for rows wider than the TMA kernels take (32 KB)
    on sm_90+ GPUs, else {}: rows held in shared memory (kernels/hopper/rows_smem.py) over the
    fewest CTAs (2 to 16) whose ring of two slices and w and b slices fit, in chunks of 8 KB,
    8 warps. Measured on the H200 against a copy of the same bytes (bench/sweep_memory.py
    --table smem, fp16): 0.85x at 4096x32768 (2 CTAs; with or without w and b in shared
    memory), 0.75x at 2048x100000 (4 CTAs, where 2 without them ran 0.56x), against 0.68 /
    0.44x for the register kernels; one CTA a row (three 64 KB slices) ran 0.70x."""
    item = _itemsize(x2)
    n_cols = x2.shape[1]
    if n_cols * item <= 32768 or not _common._sm90_or_later(place):
        return {}
    block = 8192 // item
    wb_item = max(_itemsize(w), _itemsize(b))
    for split in (2, 4, 8, 16):
        chunks = ww.cdiv(ww.cdiv(ww.cdiv(n_cols, split), 16) * 16, block)
        if (2 * item + 2 * wb_item) * chunks * block + 2048 <= _MAX_SHARED_PER_BLOCK:
            return dict(smem=True, wb_smem=True, split=split, block=block, num_stages=2,
                        num_warps=8)
    return {}


def _layernorm_fwd_block(n_cols: int) -> int:
    # Longer rows are walked 8192 columns at a time: ptxas -v gives 96 registers per thread for
    # an fp16 block of 8192 on 8 warps but 222 for 32768, which leaves one program per SM.
    return min(ww.next_power_of_2(n_cols), 8192)


@_planned
def layernorm_fwd(x, w, b, eps=1e-5, config=None):
    """Layer norm over the last dimension: returns (y, mean, rstd), y in x's dtype and shape,
    mean and rstd fp32 with one entry per row (x's leading dimensions). `config` (for
    bench/sweep_memory.py) overrides num_warps and programs_per_sm; tma=True (with num_stages,
    tma_store) streams rows through shared memory with TMA, as softmax's option does; cluster=C
    splits each row over a thread-block cluster, as softmax's option does (not a default: see
    ROWS_CLUSTER_DEFAULTS); smem=True holds rows in shared memory over clusters, as softmax's
    smem option does (split, block, num_stages, num_warps, clusters, and wb_smem: w and b
    slices in shared memory too), the default on sm_90+ GPUs for rows wider than 32 KB
    (_layernorm_fwd_smem_defaults)."""
    config = config or {}
    op = "layernorm_fwd"
    place = _Place(op, {"x": x, "w": w, "b": b})
    dt = _check_dtype(op, "x", x, _FLOATS)
    _check_dtype(op, "w", w, _FLOATS)
    _check_dtype(op, "b", b, _FLOATS)
    if not isinstance(eps, (int, float)) or not eps >= 0 or not math.isfinite(eps):
        raise ValueError(f"{op}: 'eps' must be a finite number >= 0, got {eps!r}")
    shape = tuple(x.shape)
    x2 = _contiguous(_as_rows(op, "x", x))
    n_rows, n_cols = x2.shape
    _check_shape(op, "w", w, (n_cols,), " (x's last dimension)")
    _check_shape(op, "b", b, (n_cols,), " (x's last dimension)")
    if n_cols == 0:
        raise ValueError(f"{op}: 'x' has an empty last dimension; there is nothing to normalize")
    if not config and n_rows > 0:
        config = _tma_row_defaults(op, place, x2) or _layernorm_fwd_smem_defaults(place, x2, w, b)
    y = place.empty((n_rows, n_cols), dt)
    mean = place.empty((n_rows,), "float32")
    rstd = place.empty((n_rows,), "float32")
    if config.get("smem") and n_rows > 0:
        # Rows held in shared memory over clusters (kernels/hopper/rows_smem.py).
        w2, b2 = _contiguous(w), _contiguous(b)

        def args_of(slice_cols):
            return (x2, y, w2, b2, mean, rstd, _strides(x2)[0], n_cols, n_rows, n_cols,
                    slice_cols, float(eps))

        kernel = rows_smem_kernels.layernorm_fwd_smem_kernel
        # wb_smem=True: each CTA keeps its w and b slices in shared memory for all its rows.
        wb_smem = bool(config.get("wb_smem", False))
        grid, meta, slice_cols = _smem_rows_meta(
            op, place, x2, config, kernel, args_of, resident_slices=2 if wb_smem else 0,
            resident_itemsize=max(_itemsize(w2), _itemsize(b2)), WB_SMEM=wb_smem)
        place.launch(kernel, grid, *args_of(slice_cols), **meta)
        return y.reshape(shape), mean.reshape(shape[:-1]), rstd.reshape(shape[:-1])
    ctas = _cluster_ctas(op, place, n_cols, dt, config) if n_rows > 0 else 0
    cluster_asked = bool(config.get("cluster"))
    tiles = _tma_row_tiles(place, x2) if config.get("tma") and n_rows > 0 else None
    if tiles is not None and not _tma_rows_fit(x2, config, inputs=1):
        tiles = None
    config = _register_fallback(config, tiles)
    if ctas and (tiles is None or cluster_asked):
        # Each row split over a cluster of `ctas` CTAs, read once (kernels/hopper/rows_cluster.py).
        slice_cols, rows_per_cluster, n_clusters, meta = _rows._cluster_launch(
            op, place, n_rows, n_cols, ctas, config, _cluster_warps)
        scratch = place.empty((n_rows, ctas, 2), "float32")
        place.launch(rows_cluster_kernels.layernorm_fwd_cluster_kernel, (n_clusters * ctas,),
                     x2, y, _contiguous(w), _contiguous(b), mean, rstd, scratch, n_cols, n_rows,
                     rows_per_cluster, n_cols, slice_cols, float(eps), **meta)
    elif tiles is not None:
        # Rows stream through a ring of shared buffers (kernels/hopper/layernorm_tma.py); the
        # default at rows of 2-16 KB on sm_90+ (_tma_row_defaults; on the per-launch scatter see
        # softmax's).
        tile_r, tile_c = tiles
        warps = config.get("num_warps") or 4
        stages = config.get("num_stages") or 2
        args = (_row_descriptor(x2, tiles), _row_descriptor(y, tiles), y, _contiguous(w),
                _contiguous(b), mean, rstd, n_rows, float(eps))
        meta = dict(TILE_R=tile_r, TILE_C=tile_c, NUM_STAGES=stages, num_warps=warps,
                    TMA_STORE=bool(config.get("tma_store")),
                    STORE_EVICT=config.get("store_evict", ""))
        programs = place.num_sms() * (config.get("programs_per_sm") or _resident_programs(
            place, layernorm_tma_kernels.layernorm_fwd_tma_kernel,
            ("layernorm_fwd_tma", dt, _dtype_name(w), n_cols, stages, warps), args, **meta))
        place.launch(layernorm_tma_kernels.layernorm_fwd_tma_kernel, (min(n_rows, programs),),
                     *args, **meta)
    elif (n_rows > 0 and n_cols <= LAYERNORM_FUSED_MAX_COLS
          and ww.next_power_of_2(n_cols) * _itemsize(x2) <= LAYERNORM_FUSED_MAX_BYTES):
        # The row fits one block: persistent programs read each row once.
        block = ww.next_power_of_2(n_cols)
        # ptxas -v: 80 registers per thread at BLOCK=4096 on 8 warps (fp16, two rows in flight):
        # three programs per SM; 62 at 16384 on 32 warps.
        warps = config.get("num_warps") or min(max(block // 512, 1), 32)
        args = (x2, y, _contiguous(w), _contiguous(b), mean, rstd, n_cols, n_rows, n_cols,
                float(eps))
        programs = place.num_sms() * (config.get("programs_per_sm") or _resident_programs(
            place, layernorm_kernels.layernorm_fwd_fused_kernel,
            ("layernorm_fwd", dt, _dtype_name(w), block, warps), args, BLOCK=block,
            num_warps=warps))
        place.launch(layernorm_kernels.layernorm_fwd_fused_kernel, (min(n_rows, programs),),
                     *args, BLOCK=block, num_warps=warps)
    elif n_rows > 0:
        block = _layernorm_fwd_block(n_cols)
        place.launch(layernorm_kernels.layernorm_fwd_kernel, (n_rows,),
                     x2, y, _contiguous(w), _contiguous(b), mean, rstd, n_cols, n_cols, float(eps),
                     BLOCK=block, num_warps=min(max(block // 256, 1), 8))
    return y.reshape(shape), mean.reshape(shape[:-1]), rstd.reshape(shape[:-1])


def _layernorm_bwd_warps(block: int) -> int:
    # The program keeps dw and db rows in registers besides x and dy. At BLOCK=4096 (fp16) 8 warps
    # without rows loaded ahead take 124 registers (ptxas -v), two programs per SM: on the H200
    # 2.92 TB/s against 1.58 for one 32-warp program per SM loading three rows ahead
    # (bench/sweep_memory.py, 16384x4096); 16 warps one row ahead with dw and db summed before
    # the row reduction (64 registers, two per SM) 3.01-3.07 in three runs. (The TMA kernel with
    # TMA stores, 8 warps, 2 stages, 2 per SM: 3.60 as CUDA-graph replays against 3.23 for
    # this one, but 1.45 and 3.03 per launch with do_bench: its wrapper's host cost; it is
    # the default on sm_90+, see _tma_row_defaults.) Past 4096 columns 16 warps, and 32
    # past LAYERNORM_BWD_PARTIALS_MAX_COLS, where the kernel holds only the row (16384 fp16
    # columns one row ahead: 64 registers, no spills).
    if block < 4096:
        return 4 if block <= 1024 else 8
    return 16 if block <= LAYERNORM_BWD_PARTIALS_MAX_COLS else 32


@_planned
def layernorm_bwd(dy, x, w, mean, rstd, config=None):
    """Gradients of layernorm_fwd: returns (dx, dw, db); dx in x's dtype and shape, dw and db in
    w's dtype. mean and rstd are layernorm_fwd's fp32 outputs. Rows must fit one block (up to
    65536 bytes of x's elements) unless split over a cluster. `config` (for
    bench/sweep_memory.py) overrides num_warps, prefetch (rows loaded ahead, 0-3),
    accumulate_early (dw and db summed before the row reduction), programs_per_sm (0: as many as
    fit), block_n and block_p (columns per program and partial rows per step of the dw/db sum);
    tma=True streams x and dy through shared memory with TMA, num_stages rows loading per
    program (sm_90a; inputs softmax's tma option does not take ignore it), with split=C each row
    over a C-CTA cluster. cluster=C splits
    each row over a thread-block cluster, as softmax's option does, rows of any width included
    (each cluster leaves one row of dw / db partials). On sm_90+ GPUs rows of 32 to 128 KB take
    the TMA kernel split over clusters of row bytes / 16 KB CTAs by default (_tma_row_defaults),
    wider ones the cluster split."""
    config = config or {}
    op = "layernorm_bwd"
    place = _Place(op, {"dy": dy, "x": x, "w": w, "mean": mean, "rstd": rstd})
    dt = _check_dtype(op, "x", x, _FLOATS)
    if _dtype_name(dy) != dt:
        raise ValueError(f"{op}: 'dy' has dtype {_dtype_name(dy)} but 'x' has {dt}")
    wdt = _check_dtype(op, "w", w, _FLOATS)
    _check_dtype(op, "mean", mean, ("float32",))
    _check_dtype(op, "rstd", rstd, ("float32",))
    shape = tuple(x.shape)
    _check_shape(op, "dy", dy, shape, " (x's shape)")
    x2 = _contiguous(_as_rows(op, "x", x))
    dy2 = _contiguous(_as_rows(op, "dy", dy))
    n_rows, n_cols = x2.shape
    if n_cols == 0:
        raise ValueError(f"{op}: 'x' has an empty last dimension")
    _check_shape(op, "w", w, (n_cols,), " (x's last dimension)")
    for name, stat in (("mean", mean), ("rstd", rstd)):
        if _numel(stat) != n_rows:
            raise ValueError(f"{op}: '{name}' must have one entry per row of x ({n_rows}), got "
                             f"shape {tuple(stat.shape)}")
    if not config and n_rows > 0:
        config = _tma_row_defaults(op, place, x2)
    block = ww.next_power_of_2(n_cols)
    ctas = _cluster_ctas(op, place, n_cols, dt, config)
    cluster_asked = bool(config.get("cluster"))
    if not ctas and block > 65536 // _itemsize(x2):
        raise ValueError(f"{op}: 'x' rows of {n_cols} columns do not fit one block; the backward "
                         f"kernel takes rows of up to {65536 // _itemsize(x2)} elements")
    dx = place.empty((n_rows, n_cols), dt)
    dw = place.empty((n_cols,), wdt)
    db = place.empty((n_cols,), wdt)
    if n_rows == 0:
        dw[...] = 0
        db[...] = 0
        return dx.reshape(shape), dw, db
    # Past LAYERNORM_BWD_PARTIALS_MAX_COLS the dx kernel keeps no dw and db sums (a second kernel
    # takes them from x and dy: two more reads of the rows, but no spills).
    sums_in_dx = block <= LAYERNORM_BWD_PARTIALS_MAX_COLS
    split = _row_split(op, config)
    tiles = None
    if config.get("tma") and n_cols % split == 0:
        # With split > 1 the TMA kernel takes each row as `split` slices.
        x_rows, dy_rows = _row_slices(x2, split), _row_slices(dy2, split)
        tiles = _tma_row_tiles(place, x_rows)
        # The TMA kernel keeps dw and db sums of its columns in registers, and its buffers must
        # fit shared memory: other rows take the register kernels.
        if tiles is not None and (
                ww.next_power_of_2(n_cols // split) > LAYERNORM_BWD_PARTIALS_MAX_COLS
                or not _tma_rows_fit(x_rows, config, inputs=2)
                or _tma_row_tiles(place, dy_rows) != tiles):
            tiles = None
    config = _register_fallback(config, tiles)
    w2, mean2, rstd2 = _contiguous(w), _contiguous(mean.reshape(-1)), _contiguous(rstd.reshape(-1))
    if ctas and (tiles is None or cluster_asked):
        # Each row split over a cluster of `ctas` CTAs (kernels/hopper/rows_cluster.py): x and dy
        # read once; each cluster leaves one row of dw / db partials.
        # 16 warps a CTA up to 4096-column slices, 32 past: a slice of x, dy and the dw / db
        # sums, one row ahead, take 64 registers a thread at 4096 and 8192 fp16 columns (fp32:
        # 76, and none ahead at 8192, where one ahead spilled 92 bytes, bf16 16; 100000 fp16
        # columns over 13 CTAs one ahead spilled 76).
        slice_cols, rows_per_cluster, n_clusters, meta = _rows._cluster_launch(
            op, place, n_rows, n_cols, ctas, config, lambda block: 16 if block <= 4096 else 32,
            wide_ahead_block=8192 if dt != "float16" or ctas > 8 else 0)
        # dsmem=True: the row sums pushed into the peers' shared memory (st.async) rather than
        # exchanged through global scratch and a cluster barrier a row (an option: 0.19x of copy
        # at 2048x100000 fp16 on the H200 against 0.18x; ptxas spills 484 bytes against 424 at
        # 262144 columns over 16 CTAs, not timed).
        meta["DSMEM"] = bool(config.get("dsmem", False))
        scratch = dx if meta["DSMEM"] else place.empty((n_rows, ctas, 2), "float32")
        partial_dw = place.empty((n_clusters, n_cols), "float32")
        partial_db = place.empty((n_clusters, n_cols), "float32")
        place.launch(rows_cluster_kernels.layernorm_bwd_cluster_kernel, (n_clusters * ctas,),
                     dx, dy2, partial_dw, partial_db, x2, w2, mean2, rstd2, scratch, n_cols, n_rows,
                     rows_per_cluster, n_cols, slice_cols, **meta)
        _layernorm_bwd_dwdb(place, config, partial_dw, partial_db, dw, db, n_clusters, n_cols)
        return dx.reshape(shape), dw, db
    warps = config.get("num_warps") or _layernorm_bwd_warps(block)
    # Rows are loaded ahead only in the narrower blocks; at 4096 columns a second program per SM
    # hides more latency than rows loaded ahead within one (on 16 warps with dw and db summed
    # early, 64 registers, one row ahead still fits two programs per SM). Without the sums, 16384
    # columns on 32 warps: 16-bit rows one ahead 64 registers; fp32 rows none ahead 56, one
    # ahead 416 bytes spilled.
    wide_ahead = 1 if _itemsize(x2) == 2 else 0
    prefetch = config.get("prefetch", 3 if block <= 2048 else 1 if block == 4096 else
                          0 if sums_in_dx else wide_ahead)
    accumulate_early = config.get("accumulate_early", block == 4096)
    # As many programs per SM as fit up to 4096 columns (at 1024 fp16 columns on 4 warps three
    # rows ahead, 94 registers: five, where two left 8 warps per SM to hide the latency of each
    # row's reduction; 0.47x of copy on the H200 at 65536x1024), one past it;
    # programs_per_sm=0 asks for as many as the compiled kernel's registers allow.
    per_sm = config.get("programs_per_sm", 0 if block <= 4096 else 1)
    if tiles is not None:
        # x and dy rows stream through rings of shared buffers (kernels/hopper/layernorm_tma.py);
        # each persistent program keeps its dw and db sums in registers.
        tile_r, tile_c = tiles
        stages = config.get("num_stages") or 2
        tma_meta = dict(TILE_R=tile_r, TILE_C=tile_c, NUM_STAGES=stages, num_warps=warps,
                        TMA_STORE=bool(config.get("tma_store")),
                        STORE_EVICT=config.get("store_evict", ""), SPLIT=split, PEERS=split)
        if split > 1:
            tma_meta["ctas_per_cga"] = (split, 1, 1)
        dx_rows = _row_slices(dx, split)

        def tma_args(partial_dw, partial_db):
            return (_row_descriptor(x_rows, tiles), _row_descriptor(dy_rows, tiles),
                    _row_descriptor(dx_rows, tiles), dx, partial_dw, partial_db, w2, mean2,
                    rstd2, n_rows)

        def stand_in_args():
            stand_in = place.empty((1,), "float32")
            return tma_args(stand_in, stand_in)

        key = ("layernorm_bwd_tma", dt, wdt, n_cols, stages, warps, split)
        # (per_sm defaults to 1 past 4096 columns; 4-CTA clusters of one CTA per SM fit 30 at
        # once on the H200, not 132 / 4: only an explicit programs_per_sm overrides the count.)
        if split > 1 and not config.get("programs_per_sm"):
            # The clusters that fit at once (a cluster sits in one GPC).
            clusters = _resident_clusters(place, layernorm_tma_kernels.layernorm_bwd_tma_kernel,
                                          key, stand_in_args, split, **tma_meta)
        else:
            clusters = place.num_sms() * (per_sm or _resident_programs(
                place, layernorm_tma_kernels.layernorm_bwd_tma_kernel, key, stand_in_args,
                **tma_meta)) // split
        # One partial row per program, or per cluster of `split` programs.
        n_partials = max(1, min(n_rows, clusters))
        partial_dw = place.empty((n_partials, n_cols), "float32")
        partial_db = place.empty((n_partials, n_cols), "float32")
        place.launch(layernorm_tma_kernels.layernorm_bwd_tma_kernel, (n_partials * split,),
                     *tma_args(partial_dw, partial_db), **tma_meta)
        _layernorm_bwd_dwdb(place, config, partial_dw, partial_db, dw, db, n_partials, n_cols)
        return dx.reshape(shape), dw, db
    meta = dict(BLOCK=block, PREFETCH=prefetch,
                ACCUMULATE_EARLY=bool(accumulate_early), PARTIALS=sums_in_dx, num_warps=warps)
    if not place.on_gpu:
        target_programs = 8
    elif per_sm:
        target_programs = place.num_sms() * per_sm
    else:
        # Compiled (not launched) with stand-in partial buffers and a row count that is not 1.
        def stand_in_args():
            stand_in = place.empty((1,), "float32")
            return (dx, dy2, stand_in, stand_in, x2, w2, mean2, rstd2, n_cols, n_rows, n_cols, 3)

        target_programs = place.num_sms() * _resident_programs(
            place, layernorm_kernels.layernorm_bwd_dx_kernel,
            ("layernorm_bwd", dt, wdt, block, prefetch, meta["ACCUMULATE_EARLY"], sums_in_dx,
             warps), stand_in_args, **meta)
    # Every program takes an equal share of the rows: one wave of programs.
    rows_per_program = ww.cdiv(n_rows, target_programs)
    n_programs = ww.cdiv(n_rows, rows_per_program)
    if sums_in_dx:
        partial_dw = place.empty((n_programs, n_cols), "float32")
        partial_db = place.empty((n_programs, n_cols), "float32")
        place.launch(layernorm_kernels.layernorm_bwd_dx_kernel, (n_programs,),
                     dx, dy2, partial_dw, partial_db, x2, w2, mean2, rstd2, n_cols, n_rows, n_cols,
                     rows_per_program, **meta)
        _layernorm_bwd_dwdb(place, config, partial_dw, partial_db, dw, db, n_programs, n_cols)
        return dx.reshape(shape), dw, db
    stand_in = place.empty((1,), "float32")
    place.launch(layernorm_kernels.layernorm_bwd_dx_kernel, (n_programs,),
                 dx, dy2, stand_in, stand_in, x2, w2, mean2, rstd2, n_cols, n_rows, n_cols,
                 rows_per_program, **meta)
    # Tiles of 16 rows by 256 columns on 8 warps (64 registers, no spills at fp16): about eight
    # programs per SM over the column blocks and row chunks; each chunk leaves one partial row.
    block_r = 16
    block_n = 256 if place.on_gpu else min(64, ww.next_power_of_2(n_cols))
    col_blocks = ww.cdiv(n_cols, block_n)
    chunks = max(1, min(ww.cdiv(n_rows, block_r), ww.cdiv(place.num_sms() * 8, col_blocks)))
    chunk_rows = ww.cdiv(ww.cdiv(n_rows, chunks), block_r) * block_r
    n_partials = ww.cdiv(n_rows, chunk_rows)
    partial_dw = place.empty((n_partials, n_cols), "float32")
    partial_db = place.empty((n_partials, n_cols), "float32")
    place.launch(layernorm_kernels.layernorm_bwd_partials_kernel, (col_blocks, n_partials),
                 partial_dw, partial_db, dy2, x2, mean2, rstd2, n_cols, n_rows, n_cols, chunk_rows,
                 BLOCK_R=block_r, BLOCK_N=block_n, num_warps=8 if place.on_gpu else 4)
    _layernorm_bwd_dwdb(place, config, partial_dw, partial_db, dw, db, n_partials, n_cols)
    return dx.reshape(shape), dw, db


def _layernorm_bwd_dwdb(place, config, partial_dw, partial_db, dw, db, n_partials, n_cols):
    """dw and db from the backward kernels' per-program partial sums."""
    # Narrow column blocks: enough programs to spread the partial sums over the SMs, and many
    # partial rows per step in flight. On the H200 (bench/sweep_memory.py's dwdb_alone, 264 x 4096
    # partials) 256 partial rows of 8 columns per step take 9.8 us, 64 of 16 11.3, 32 of 32 14.9.
    # Past 512 partial rows (the TMA kernel's 8 programs per SM at 1024 columns leave 1056),
    # 1024 per step: 11.7 us against 14.5 for 256 at 1056 x 1024 (0.85x of a copy for the whole
    # backward at 65536x1024 fp16 against 0.84x).
    block_n = config.get("block_n") or (
        8 if place.on_gpu else min(128, ww.next_power_of_2(n_cols)))
    block_p = config.get("block_p") or (
        (1024 if n_partials > 512 else 256) if place.on_gpu else 32)
    place.launch(layernorm_kernels.layernorm_bwd_dwdb_kernel, (ww.cdiv(n_cols, block_n),),
                 partial_dw, partial_db, dw, db, n_partials, n_cols, BLOCK_P=block_p,
                 BLOCK_N=block_n, num_warps=4 if block_p * block_n <= 4096 else 8)
