"""Row reductions: row_sum and row_max (kernels/reduction.py)."""

from __future__ import annotations

import warpweave as ww

from ._common import (_FLOATS, _Place, _check_dtype, _check_ndim, _is_numpy, _planned,
                      _resident_programs, _rows_unit_stride, _strides)
from .kernels import reduction as reduction_kernels


def _reduction_config(n_cols: int, on_gpu: bool, vector_rows: bool = True) -> dict:
    if on_gpu:
        # 4096 elements per step: narrow rows trade columns for rows instead of masking most of
        # a wide block. Two rows of 2048 per step on the H200 (16384x4096 fp32): row_max 3.64
        # TB/s against 3.46 for four of 1024, row_sum 3.70 against 3.65 (bench/sweep_memory.py).
        block_n = 2048 if n_cols >= 2048 else min(1024, max(16, ww.next_power_of_2(n_cols)))
        # Rows the loads cannot take 16 bytes at a time (see _rows_vectorizable) load one
        # element per instruction, each with its own address: at 4096 elements the narrow
        # blocks took 96 to 254 registers (sm_90a, fp32, 32 x 128: 254, two programs an SM),
        # at 1024 they take 32 to 40 (64 x 16: 72).
        elements = 4096 if vector_rows or block_n >= 1024 else 1024
        return dict(BLOCK_M=max(1, elements // block_n), BLOCK_N=block_n, num_warps=4)
    return dict(BLOCK_M=4, BLOCK_N=min(256, max(16, ww.next_power_of_2(n_cols))), num_warps=4)


def _rows_vectorizable(x) -> bool:
    """Whether the specializer can prove x's rows 16-byte aligned (column count, row stride
    and base address multiples of 16), which the row kernels' vector loads need."""
    address = x.ctypes.data if _is_numpy(x) else x.data_ptr()
    return x.shape[1] % 16 == 0 and _strides(x)[0] % 16 == 0 and address % 16 == 0


def _reduction_chunks(place, partial_kernel, key, n_rows, n_cols, config, args) -> int:
    """Column chunks per row: 1 while the row programs alone fill the GPU (4 per SM), else
    enough chunks for about one full wave of resident partial programs, each chunk at least
    four blocks of columns wide (fewer, longer chunks would leave the combine less to do but
    the SMs idle)."""
    row_programs = ww.cdiv(n_rows, config["BLOCK_M"])
    most = n_cols // (4 * config["BLOCK_N"])
    if row_programs >= 4 * place.num_sms() or most <= 1:
        return 1
    resident = _resident_programs(place, partial_kernel, (*key, tuple(sorted(config.items()))),
                                  args, **config)
    return min(most, ww.cdiv(place.num_sms() * min(8, resident), row_programs))


def _reduction_chunk_cols(n_cols: int, n_chunks: int, block_n: int) -> tuple:
    """(columns per chunk, chunk count): chunks whole blocks wide, none left empty."""
    chunk_cols = ww.cdiv(ww.cdiv(n_cols, n_chunks), block_n) * block_n
    return chunk_cols, ww.cdiv(n_cols, chunk_cols)


@_planned
def row_sum(x, config=None):
    """Sum of each row of a 2-D x (fp16, bf16 or fp32; rows may be strided), accumulated and
    returned in fp32, shape [n_rows]. `config` (for bench/sweep_memory.py) overrides BLOCK_M,
    BLOCK_N, num_warps and chunks (column chunks per row, split across programs and combined
    by a second launch; by default from the SM count, 1 when the rows fill the GPU)."""
    op = "row_sum"
    place = _Place(op, {"x": x})
    _check_dtype(op, "x", x, _FLOATS)
    _check_ndim(op, "x", x, (2,))
    x = _rows_unit_stride(x)
    n_rows, n_cols = x.shape
    out = place.empty((n_rows,), "float32")
    if n_rows == 0:
        return out
    config = {**_reduction_config(n_cols, place.on_gpu, _rows_vectorizable(x)), **(config or {})}
    n_chunks = config.pop("chunks", None) or _reduction_chunks(
        place, reduction_kernels.row_sum_partial_kernel, (op, str(x.dtype)), n_rows, n_cols, config,
        (x, out, n_rows, n_cols, _strides(x)[0], n_cols))
    if n_chunks > 1:
        chunk_cols, n_chunks = _reduction_chunk_cols(n_cols, n_chunks, config["BLOCK_N"])
    if n_chunks > 1:
        partial = place.empty((n_rows, n_chunks), "float32")
        place.launch(
            reduction_kernels.row_sum_partial_kernel,
            lambda m: (ww.cdiv(n_rows, m["BLOCK_M"]), n_chunks),
            x, partial, n_rows, n_cols, _strides(x)[0], chunk_cols, **config)
        # Summing the partials in chunk order, one program per rows: deterministic. Few rows of
        # a block each (the combine moves little; 128 rows of 32 chunks took 254 registers).
        block_c = min(1024, max(16, ww.next_power_of_2(n_chunks)))
        place.launch(reduction_kernels.row_sum_kernel, lambda m: (ww.cdiv(n_rows, m["BLOCK_M"]),),
                     partial, out, n_rows, n_chunks, n_chunks,
                     BLOCK_M=max(1, min(16, 2048 // block_c)), BLOCK_N=block_c, num_warps=4)
        return out
    place.launch(reduction_kernels.row_sum_kernel, lambda m: (ww.cdiv(n_rows, m["BLOCK_M"]),),
                 x, out, n_rows, n_cols, _strides(x)[0], **config)
    return out


@_planned
def row_max(x, config=None):
    """(values, indices) of each row's maximum of a 2-D x (fp16, bf16 or fp32): values fp32,
    indices int32, the first column holding the maximum (NaN compares false, so it never
    replaces a number). Rows must not be empty. `config` (for bench/sweep_memory.py) overrides
    BLOCK_M, BLOCK_N, num_warps and chunks (as row_sum's)."""
    op = "row_max"
    place = _Place(op, {"x": x})
    _check_dtype(op, "x", x, _FLOATS)
    _check_ndim(op, "x", x, (2,))
    x = _rows_unit_stride(x)
    n_rows, n_cols = x.shape
    if n_cols == 0 and n_rows > 0:
        raise ValueError(f"{op}: 'x' has empty rows (shape {tuple(x.shape)}); a maximum needs at "
                         f"least one column")
    values = place.empty((n_rows,), "float32")
    indices = place.empty((n_rows,), "int32")
    if n_rows == 0:
        return values, indices
    config = {**_reduction_config(n_cols, place.on_gpu, _rows_vectorizable(x)), **(config or {})}
    n_chunks = config.pop("chunks", None) or _reduction_chunks(
        place, reduction_kernels.row_max_partial_kernel, (op, str(x.dtype)), n_rows, n_cols, config,
        (x, values, indices, n_rows, n_cols, _strides(x)[0], n_cols))
    if n_chunks > 1:
        chunk_cols, n_chunks = _reduction_chunk_cols(n_cols, n_chunks, config["BLOCK_N"])
    if n_chunks > 1:
        partial = place.empty((n_rows, n_chunks), "float32")
        partial_index = place.empty((n_rows, n_chunks), "int32")
        place.launch(
            reduction_kernels.row_max_partial_kernel,
            lambda m: (ww.cdiv(n_rows, m["BLOCK_M"]), n_chunks),
            x, partial, partial_index, n_rows, n_cols, _strides(x)[0], chunk_cols, **config)
        block_c = max(16, ww.next_power_of_2(n_chunks))
        block_m = max(1, min(16, 2048 // block_c))
        place.launch(reduction_kernels.row_max_combine_kernel, (ww.cdiv(n_rows, block_m),),
                     partial, partial_index, values, indices, n_rows, n_chunks, BLOCK_M=block_m,
                     BLOCK_C=block_c, num_warps=4)
        return values, indices
    place.launch(reduction_kernels.row_max_kernel, lambda m: (ww.cdiv(n_rows, m["BLOCK_M"]),),
                 x, values, indices, n_rows, n_cols, _strides(x)[0], **config)
    return values, indices
