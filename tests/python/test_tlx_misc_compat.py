"""TLX's smaller builtins as TLX's own unit tests use them: tlx.get_fp8_format_name (and the
bare reason chained as a CompilationError's __cause__), tlx.fence scopes ("gpu", "sys",
"async_shared"; scope= or kind=), tlx.remote_view refused by every barrier operation, one
register per mbarrier init, and the loop-carried type message Triton users grep for."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from tlx_misc_compat_kernels import fp8_format_name

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(__file__).with_name("tlx_misc_compat_kernels.py")


def compile_here(kernel, signature, num_ctas=1):
    files = [(str(KERNELS), KERNELS.read_text())]
    return native_loader.native().compile(files, kernel, signature, {}, target="sm_90a",
                                          num_warps=4, num_ctas=num_ctas, stage="cubin")


@pytest.mark.parametrize("dtype,name", [(tl.float8e5, "e5m2"), (tl.float8e4nv, "e4m3")])
def test_fp8_format_name(dtype, name):
    out = np.zeros(1, np.int32)
    fp8_format_name[(1,)](out, DTYPE=dtype, EXPECTED=name)
    assert out[0] == 1


@pytest.mark.parametrize("dtype", [tl.float32, tl.float16, tl.int32])
def test_fp8_format_name_of_other_dtypes(dtype):
    with pytest.raises(ww.CompilationError) as info:
        fp8_format_name[(1,)](np.zeros(1, np.int32), DTYPE=dtype, EXPECTED="e5m2")
    assert "tlx_misc_compat_kernels.py:" in str(info.value)
    # The bare reason, without location, is the error's cause (as Triton chains it).
    cause = str(info.value.__cause__)
    assert cause.startswith("tlx.get_fp8_format_name only supports tl.float8e5 (e5m2) and "
                            "tl.float8e4nv (e4m3), but got")
    assert ":" not in cause.split(",")[0]


def test_fence_scopes_ptx():
    ptx = compile_here("fence_scopes", "ptr:*i32:16").ptx
    assert ptx.count("fence.acq_rel.gpu;") == 1
    assert ptx.count("fence.acq_rel.sys;") == 1
    assert "fence.proxy.async.shared::cta;" in ptx
    # In program order between the atomics they separate.
    atoms = [m.start() for m in re.finditer(r"(atom|red)\.\S*global", ptx)]
    assert atoms[0] < ptx.index("fence.acq_rel.gpu") < atoms[1] < ptx.index("fence.acq_rel.sys")


def test_fence_scopes_interp():
    x = np.zeros(3, np.int32)
    from tlx_misc_compat_kernels import fence_scopes
    fence_scopes[(1,)](x, num_warps=1)
    assert list(x) == [1, 1, 1]


def test_fence_bad_scope():
    with pytest.raises(Exception, match=r"tlx\.fence's scope must be \"gpu\", \"sys\", "
                                        r"\"async_shared\" or \"mbarrier_init_cluster\", got"):
        compile_here("fence_bad_scope", "ptr:*i32:16")


def test_barrier_wait_refuses_remote_view():
    with pytest.raises(Exception) as info:
        compile_here("wait_on_remote_view", "", num_ctas=2)
    msg = str(info.value)
    assert "tlx.barrier_wait does not support a tlx.remote_view of an mbarrier" in msg
    assert "tlx_misc_compat_kernels.py:" in msg


def test_barrier_arrive_refuses_remote_view_and_names_remote_cta_rank():
    with pytest.raises(Exception, match="remote_cta_rank="):
        compile_here("arrive_on_remote_view", "", num_ctas=2)


def test_each_mbarrier_init_has_its_own_register():
    ptx = compile_here("three_barrier_allocs", "out_ptr:*i32:16").ptx
    inits = re.findall(r"mbarrier\.init\.shared::cta\.b64 \[(%r\d+)\], (\d+);", ptx)
    assert [count for _, count in inits] == ["1", "2", "2"]
    assert len({reg for reg, _ in inits}) == 3
    # Both groups' inits come before one fence and one meeting, which the second group emits:
    # nothing between the two allocations can use a barrier. In a one-CTA launch the release
    # fence and the CTA's barrier publish them (no proxy fence, as CUTLASS and Triton have it).
    assert ptx.count("fence.mbarrier_init.release.cluster") == 1
    assert "fence.proxy.async.shared::cta" not in ptx
    fence = ptx.index("fence.mbarrier_init")
    assert ptx.rindex("mbarrier.init.shared") < fence < ptx.index("mbarrier.arrive")


def test_barrier_groups_that_a_use_separates_each_meet():
    ptx = compile_here("barrier_groups_used_between", "out_ptr:*i32:16").ptx
    start = ptx[:ptx.rindex("mbarrier.init")]
    assert start.count("fence.mbarrier_init.release.cluster") == 1  # the first group's, before
    assert ptx.count("fence.mbarrier_init.release.cluster") == 2  # the arrive that uses it


def test_loop_carried_type_change_message():
    with pytest.raises(ww.CompilationError) as info:
        compile_here("buffer_view_changes_type", "")
    msg = str(info.value)
    assert "loop-carried 'x' changes type from buffer<2x16x16xi16, smem> to " \
           "buffer<1x16x16xi16, smem> in the loop body. Please make sure that the type stays " \
           "consistent" in msg


@pytest.mark.parametrize("policy", ["", "evict_first", "evict_last"])
def test_descriptor_store_takes_an_eviction_policy(policy):
    # Recorded on the store as on the load (the PTX has no L2 cache hint yet); the copy is
    # the same whatever the hint.
    sig = f"in_desc:desc<fp16,64x64>, out_desc:desc<fp16,64x64>, POLICY='{policy}'"
    files = [(str(KERNELS), KERNELS.read_text())]
    ir = native_loader.native().compile(files, "store_with_eviction_policy", sig, {},
                                        target="sm_90a", stage="tile-ir").tile_ir
    store = [line for line in ir.splitlines() if " async_desc_store " in line][0]
    assert (f'evict = "{policy}"' in store) == bool(policy)
    assert compile_here("store_with_eviction_policy", sig).cubin
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float16)
    y = np.zeros_like(x)
    from tlx_misc_compat_kernels import store_with_eviction_policy
    store_with_eviction_policy[(1,)](ww.TensorDescriptor.from_tensor(x, [64, 64]),
                                     ww.TensorDescriptor.from_tensor(y, [64, 64]), POLICY=policy)
    np.testing.assert_array_equal(x, y)


def test_descriptor_store_refuses_other_policies():
    sig = "in_desc:desc<fp16,64x64>, out_desc:desc<fp16,64x64>, POLICY='evict_normal'"
    with pytest.raises(Exception, match="eviction_policy must be"):
        compile_here("store_with_eviction_policy", sig)
