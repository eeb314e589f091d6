"""tlx.storage_alias_spec, tlx.reuse_group and spec.set_buffer_overlap: allocations sharing one
shared-memory region, placed as TLX places them (shared groups at one offset per buffer index,
distinct groups one after another, group_size subtiles). The interpreter runs the kernels
against NumPy; sm_90a PTX goes through ptxas; the refused definitions give located errors."""

import importlib
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww  # noqa: F401
from tlx_alias_kernels import (alias_group_size, alias_nested, alias_no_overlap,
                               alias_reuse_buffer, alias_same_type, alias_uneven_subtiles,
                               alias_wide_narrow)

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(__file__).with_name("tlx_alias_kernels.py")
R = C = 64


def compile_here(kernel, signature, stage="cubin"):
    files = [(str(KERNELS), KERNELS.read_text())]
    return native_loader.native().compile(files, kernel, signature, {}, target="sm_90a",
                                          num_warps=4, stage=stage)


def test_shared_group_same_type_interp():
    out = np.zeros((4, R, C), np.float16)
    alias_same_type[(1,)](out, R=R, C=C, DISTINCT=False)
    # x[i] and y[i] are the same bytes: the later store wins for both names.
    for k, want in enumerate([10.0, 30.0, 10.0, 30.0]):
        np.testing.assert_array_equal(out[k], np.full((R, C), want, np.float16))


def test_distinct_group_same_type_interp():
    out = np.zeros((4, R, C), np.float16)
    alias_same_type[(1,)](out, R=R, C=C, DISTINCT=True)
    for k, want in enumerate([-1.0, 30.0, 10.0, 20.0]):
        np.testing.assert_array_equal(out[k], np.full((R, C), want, np.float16))


def test_shared_group_narrow_reads_wide_interp():
    out = np.zeros((2, R, C), np.int32)
    alias_wide_narrow[(1,)](out, R=R, C=C)
    # narrow[i] starts at wide[i] (spaced as the wide buffers): the low and high halves of the
    # little-endian words i * 65536 + 7 + i.
    for i in range(2):
        want = np.tile(np.array([7 + i, i], np.int32), (R, C // 2))
        np.testing.assert_array_equal(out[i], want)


def test_nested_shared_distinct_interp():
    out = np.zeros(R * C * 2, np.float32)
    alias_nested[(1,)](out, R=R, C=C)
    half = R * C // 2
    np.testing.assert_array_equal(out[:half], 5.0)  # q[0]: the half of s[0] p[0] leaves alone
    q1 = out[half:2 * half]
    assert len(np.unique(q1)) == half and set(q1.tolist()) <= set(range(R * C))
    s0 = out[R * C:]
    two = np.frombuffer(np.array([0x40004000], np.uint32).tobytes(), np.float32)[0]
    assert np.count_nonzero(s0 == two) == half and np.count_nonzero(s0 == 5.0) == half


def test_group_size_subtiles_interp():
    out = np.zeros((2, R, C), np.int32)
    alias_group_size[(1,)](out, R=R, C=C)
    # acc[j] holds sub[2j] and sub[2j + 1], half its bytes each.
    for j in range(2):
        lo, hi = (2 * j + 1) * 0x10001, (2 * j + 2) * 0x10001
        assert np.count_nonzero(out[j] == lo) == R * C // 2
        assert np.count_nonzero(out[j] == hi) == R * C // 2


def test_half_filling_subtiles_lie_where_tlx_puts_them_interp():
    # big: 2 x [64, 64] int32 (16 KiB each); sub: 4 x [32, 64] int16 (4 KiB), group_size 2 in a
    # place of 16 KiB per index: 8 KiB per subtile, two of sub's buffers (s = 2), and TLX's
    # index rewriting puts sub[i] at its physical buffer 2 i + (i % 2): bytes 0, 12288, 16384,
    # 28672, i.e. rows 0..15 and 48..63 of each big buffer (row-major in the interpreter).
    out = np.zeros((2, R, C), np.int32)
    alias_uneven_subtiles[(1,)](out, R=R)
    for j in range(2):
        lo, hi = (2 * j + 1) * 0x10001, (2 * j + 2) * 0x10001
        np.testing.assert_array_equal(out[j, :16], lo)
        np.testing.assert_array_equal(out[j, 16:48], -1)
        np.testing.assert_array_equal(out[j, 48:], hi)


def test_reuse_of_a_shared_buffer_interp():
    out = np.zeros(2 * R * C, np.float32)
    alias_reuse_buffer[(1,)](out, R=R, C=C)
    np.testing.assert_array_equal(out[:R * C], 3.0)
    pair = np.frombuffer(np.array([3.0, 3.0], np.float16).tobytes(), np.float32)[0]
    np.testing.assert_array_equal(out[R * C:R * C + R * C // 2], pair)


def test_reuse_of_a_shared_buffer_takes_no_memory_of_its_own():
    result = compile_here("alias_reuse_buffer", "out_ptr:*fp32,R=64,C=64", stage="ptx")
    used = result["shared_bytes"] if isinstance(result, dict) else result.shared_bytes
    assert 2 * 64 * 64 * 2 <= used < 3 * 64 * 64 * 2  # q's two buffers; o and w add nothing


def test_spec_without_overlap_interp():
    out = np.zeros(64, np.int32)
    alias_no_overlap[(1,)](out, N=64)
    np.testing.assert_array_equal(out, np.int32(0x3F800000))


@pytest.mark.parametrize("kernel,sig", [
    ("alias_same_type", "out_ptr:*fp16,R=64,C=64,DISTINCT=0"),
    ("alias_same_type", "out_ptr:*fp16,R=64,C=64,DISTINCT=1"),
    ("alias_wide_narrow", "out_ptr:*i32,R=64,C=64"),
    ("alias_nested", "out_ptr:*fp32,R=64,C=64"),
    ("alias_group_size", "out_ptr:*i32,R=64,C=64"),
    ("alias_no_overlap", "out_ptr:*i32,N=64"),
    ("alias_uneven_subtiles", "out_ptr:*i32,R=64"),
    ("alias_reuse_buffer", "out_ptr:*fp32,R=64,C=64"),
])
def test_alias_kernels_ptxas_sm90a(kernel, sig):
    compile_here(kernel, sig)


def test_region_is_shared_in_ptx():
    # Two shared 2 x 64 x 64 fp16 allocations take 16 KiB, not 32; distinct ones 32 KiB.
    shared = compile_here("alias_same_type", "out_ptr:*fp16,R=64,C=64,DISTINCT=0", stage="ptx")
    distinct = compile_here("alias_same_type", "out_ptr:*fp16,R=64,C=64,DISTINCT=1", stage="ptx")
    s_bytes = shared["shared_bytes"] if isinstance(shared, dict) else shared.shared_bytes
    d_bytes = distinct["shared_bytes"] if isinstance(distinct, dict) else distinct.shared_bytes
    assert s_bytes < 32768 <= d_bytes


@pytest.mark.parametrize("kernel,sig,message", [
    ("alias_misplaced_member", "R=64", "which TLX requires to be multiples of its buffer size"),
    ("alias_foreign_buffer", "R=64", "made with reuse= this storage_alias_spec"),
    ("alias_small_size", "R=64", "buffer_size_bytes=1024 is too small"),
    ("alias_storage_mismatch", "R=64", "storage kinds must match"),
])
def test_refused_overlaps(kernel, sig, message):
    with pytest.raises(Exception) as err:
        compile_here(kernel, sig, stage="ptx")
    text = str(err.value)
    assert message in text and "tlx_alias_kernels.py:" in text
