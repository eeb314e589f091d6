"""tl.histogram as its own op: counts against NumPy in the interpreter for every integer type
(negative and out-of-range values count nowhere, masked-off elements neither, inputs shorter than
the threads), and the GPU lowering: shared-memory counters bumped by `red.shared.add.u32` (one
per element a thread owns, not a compare per bin), warp-aggregated increments in the SASS as in
Triton, compiled for sm_90a, sm_80 and sm_100a."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave.tools import disasm

pytest.importorskip("warpweave._native")


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


@ww.jit
def hist_kernel(x_ptr, z_ptr, m_ptr, M: tl.constexpr, N: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.arange(0, M)
    x = tl.load(x_ptr + offs)
    if MASKED:
        z = tl.histogram(x, N, mask=tl.load(m_ptr + offs) != 0)
    else:
        z = tl.histogram(x, N)
    tl.store(z_ptr + tl.arange(0, N), z)


def reference(x, n, mask=None):
    v = x.astype(np.int64) if x.dtype != np.uint64 else x.astype(np.float64)
    keep = (v >= 0) & (v < n)
    if mask is not None:
        keep &= mask != 0
    return np.bincount(v[keep].astype(np.int64), minlength=n)[:n].astype(np.int32)


CASES = [(2048, 2, np.int32), (1024, 8, np.int64), (1024, 128, np.int16), (256, 512, np.int8),
         (32, 512, np.uint8), (8, 2, np.int32), (64, 16, np.uint32), (128, 64, np.uint64)]


@pytest.mark.parametrize("M,N,dtype", CASES)
@pytest.mark.parametrize("masked", [False, True])
def test_counts_match_numpy_in_the_interpreter(M, N, dtype, masked):
    rng = np.random.default_rng(M * N)
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -5), min(int(info.max), N + 5)
    x = rng.integers(lo, hi + 1, size=M).astype(dtype)
    if info.max >= 2**63:
        x[0] = np.uint64(2**63 + 3)  # reads negative as a signed 64-bit value: still no bin
    m = rng.integers(0, 2, size=M).astype(np.int32)
    z = np.full(N, -1, np.int32)
    hist_kernel[(1,)](x, z, m, M=M, N=N, MASKED=masked)
    np.testing.assert_array_equal(z, reference(x, N, m if masked else None))


def test_one_bin_writes_one_counter():
    # Triton's silent-data-corruption case: an input of one element equal to 1 with one bin.
    x = np.ones(1, np.int32)
    z = np.ones(2, np.int32)
    hist_kernel[(1,)](x, z, x, M=1, N=1, MASKED=False)
    assert z.tolist() == [0, 1]


def compiled(M, N, target="sm_90a", num_warps=4, dtype=np.int32):
    x = np.zeros(M, dtype)
    z = np.zeros(N, np.int32)
    m = np.zeros(M, np.int32)
    values = hist_kernel.bind((x, z, m), dict(M=M, N=N, MASKED=True))
    hist_kernel.cache.clear()
    return hist_kernel.compile_for(values, False, (num_warps, 1, 1), target=target)


@pytest.mark.parametrize("M,N", [(1024, 2), (1024, 512), (8, 512)])
def test_each_owned_element_is_one_shared_increment(M, N):
    ptx = compiled(M, N).asm["ptx"]
    incs = [ln for ln in ptx.splitlines() if "red.shared.add.u32" in ln]
    # 128 threads: a thread owns M / 128 elements (at least one, the rest are copies it skips).
    assert len(incs) == max(1, M // 128)
    assert all(ln.strip().startswith("@%p") and ln.rstrip().endswith(", 1;") for ln in incs)
    # No compare of each element with each bin: the PTX does not grow with the bins.
    assert len(ptx) < 3 * len(compiled(M, 2).asm["ptx"])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64])
def test_operands_are_converted_before_the_bins_are_zeroed(dtype):
    # An int8 input and an int32 mask load in different layouts: the mask is converted to the
    # input's through the scratch region. That must happen before the bins take the region (on
    # an H100 it ran after and its bytes landed in the counters).
    lines = compiled(1024, 128, dtype=dtype).asm["ptx"].splitlines()
    zeros = {ln.split()[1].rstrip(",") for ln in lines if ln.strip().startswith("mov.b32")
             and ln.rstrip().endswith(", 0;")}
    first_inc = next(i for i, ln in enumerate(lines) if "red.shared.add.u32" in ln)
    stores = [ln for ln in lines[:first_inc] if "st.shared" in ln]
    assert stores and all(ln.rstrip().rstrip(";").split(",")[-1].strip() in zeros
                          for ln in stores[-1:])
    assert not any("st.shared" in ln for ln in lines[first_inc:])


@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("target", ["sm_90a", "sm_80", "sm_100a"])
def test_compiles_for_every_target(target):
    k = compiled(1024, 128, target=target)
    assert "red.shared.add.u32" in k.asm["ptx"] and len(k.asm["cubin"]) > 0


@pytest.mark.usefixtures("requires_ptxas")
def test_sass_has_warp_aggregated_increments():
    if disasm.find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit) on this machine")
    assert "ATOMS.POPC.INC" in compiled(1024, 64).asm["sass"]


def test_bins_past_shared_memory_are_a_clear_error():
    with pytest.raises(Exception, match=r"needs 524288 bytes of shared memory") as info:
        compiled(1024, 131072)
    # The histogram is named as the cause, at its line (not the stages the message suggests).
    assert "test_histogram.py:27:13: note: 'histogram' here takes 524288 of those bytes" in str(
        info.value)
