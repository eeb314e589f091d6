"""TLX values that host code builds (tlx-unit-b, issue 16): task descriptions, storage-alias
specs, reuse groups, buffer descriptions, enums with `.value`, Config register-count checks, the
local_alloc signature and CompiledKernel.metadata."""

import inspect

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


def test_async_task_default_registers_both_spellings():
    assert tlx.async_task("default", num_regs=128).num_regs == 128
    t = tlx.async_task("default", registers=96)
    assert (t.num_regs, t.is_default, t.replicate) == (96, True, 1)


def test_async_task_worker_fields():
    t = tlx.async_task(num_warps=2, num_regs=tl.constexpr(40), replicate=3,
                       warp_group_start_id=4)
    assert (t.num_warps, t.num_regs, t.replicate, t.warp_group_start_id) == (2, 40, 3, 4)
    assert not t.is_default
    assert tlx.async_task([2, 1, 2]).task_ids == [1, 2]
    with t as entered:
        assert entered is t


@pytest.mark.parametrize("args,kwargs", [((), {"num_warps": 1, "num_regs": 25}),
                                         (("default",), {"registers": 30})])
def test_async_task_rejects_register_counts_not_multiple_of_8(args, kwargs):
    with pytest.raises(ValueError, match="divisible by 8"):
        tlx.async_task(*args, **kwargs)


def test_async_tasks_options():
    r = tlx.async_tasks(exclusive=True, mbarrier_try_wait_suspend_ns=100)
    assert (r.exclusive, r.mbarrier_try_wait_suspend_ns) == (True, 100)
    with pytest.raises(ValueError, match="non-negative"):
        tlx.async_tasks(mbarrier_try_wait_suspend_ns=-1)


@pytest.mark.parametrize("kwargs", [{"minRegAutoWS": 25}, {"maxRegAutoWS": 153}])
def test_config_rejects_register_counts_not_multiple_of_8(kwargs):
    with pytest.raises(ValueError, match="divisible by 8"):
        ww.Config({}, **kwargs)
    ok = ww.Config({}, minRegAutoWS=24, maxRegAutoWS=240)
    assert (ok.minRegAutoWS, ok.maxRegAutoWS) == (24, 240)


def test_enum_values_and_members():
    assert [k.value for k in tlx.storage_kind] == ["smem", "tmem", "smemCluster"]
    assert list(tlx.reuse_group_type) == [tlx.reuse_group_type.shared,
                                          tlx.reuse_group_type.distinct]
    assert tlx.reuse_group_type.distinct.value == "distinct"


def test_storage_alias_spec_type():
    sized = tlx.storage_alias_spec_type(tlx.storage_kind.tmem, 8192)
    assert sized == tlx.storage_alias_spec_type(tlx.storage_kind.tmem, 8192)
    assert sized != tlx.storage_alias_spec_type(tlx.storage_kind.tmem)
    assert sized != tlx.storage_alias_spec_type(tlx.storage_kind.smem, 8192)
    assert sized.mangle() == "storage_alias_spec_tmem_8192"
    assert tlx.storage_alias_spec_type(tlx.storage_kind.smem).mangle() == "storage_alias_spec_smem"
    assert "size" not in repr(tlx.storage_alias_spec_type(tlx.storage_kind.smem))


def test_buffer_types_mangle_apart():
    # Buffers of int64 and mbarriers share a mangled name (the same element type and shape); a
    # CLC response, whose int64 element type only stands in for 16 opaque bytes, has its own.
    smem = tlx.storage_kind.smem
    for num in (0, 1, 3):
        mbar = tlx.mbarrier_type(num, None, smem).mangle()
        words = tlx.buffered_tensor_type(tl.int64, [1], num, smem).mangle()
        clc = tlx.clc_response_type(num, None).mangle()
        assert mbar == words and clc != mbar and clc == f"clc_response_{num}"
    assert tlx.buffered_tensor_type(tl.float16, [64, 32], 0, smem).mangle() == "buffered_fp16S64_32"
    assert tlx.buffered_tensor_type(tl.bfloat16, [8], 2, smem).mangle() == "buffered_bf16S8_2"
    assert tlx.mbarrier_type(2, None, smem, is_warp_barrier=True).is_warp_barrier
    assert [t.mangle() for t in (tl.int1, tl.uint8, tl.int32, tl.float32)] == \
        ["u1", "u8", "i32", "fp32"]


def test_storage_alias_spec_record_is_immutable_and_refuses_cluster_storage():
    spec = tlx.storage_alias_spec_type_class(handle=None, storage=tlx.storage_kind.smem,
                                             buffer_size_bytes=4096)
    assert spec.type == tlx.storage_alias_spec_type(tlx.storage_kind.smem, 4096)
    assert "4096" in repr(spec) and "smem" in repr(spec)
    with pytest.raises(AttributeError):
        spec.buffer_size_bytes = 1
    with pytest.raises(ValueError, match="smemCluster"):
        tlx.storage_alias_spec_type_class(handle=None, storage=tlx.storage_kind.smemCluster)


def _buffer():
    return tlx.buffered_tensor(None, tl.float16, [64, 64], 2, tlx.storage_kind.smem,
                               tlx.swizzled_shared_layout_encoding.make_default(rank=2))


def test_reuse_group_tree_and_errors():
    a, b, c = _buffer(), _buffer(), _buffer()
    inner = tlx.reuse_group(b, c, group_type=tlx.reuse_group_type.distinct)
    outer = tlx.reuse_group(a, inner, group_size=2)
    assert outer.group_type == tlx.reuse_group_type.shared  # the default
    assert outer.args == (a, inner) and outer.group_size == 2
    assert outer.args[1].group_type == tlx.reuse_group_type.distinct
    with pytest.raises(ValueError, match="at least one element"):
        tlx.reuse_group()
    with pytest.raises(TypeError, match="must be buffered_tensor or reuse_group"):
        tlx.reuse_group("x")
    with pytest.raises(ValueError, match="positive integer"):
        tlx.reuse_group(a, group_size=0)


def test_default_shared_layout():
    layout = tlx.swizzled_shared_layout_encoding.make_default(rank=3)
    assert (layout.vectorSize, layout.perPhase, layout.maxPhase) == (1, 1, 1)
    assert list(layout.order) == [2, 1, 0]
    assert list(layout.make_permute([1, 0, 2]).order) == [1, 2, 0]


def test_local_alloc_signature_names_reuse_types():
    from warpweave.language.extra.tlx.mem_ops import local_alloc

    assert local_alloc is tlx.local_alloc
    reuse = str(inspect.signature(local_alloc).parameters["reuse"].annotation)
    assert "buffered_tensor" in reuse and "storage_alias_spec" in reuse
    with pytest.raises(RuntimeError, match="inside a @ww.jit kernel"):
        local_alloc((16,), tl.float32, 1)


@ww.jit
def _store_pid(out):
    tl.store(out + tl.program_id(0), tl.program_id(0))


def test_compiled_kernel_metadata():
    out = np.zeros(4, dtype=np.int32)
    k = _store_pid[(4,)](out, num_warps=2, ctas_per_cga=(2, 1, 1))
    assert out.tolist() == [0, 1, 2, 3]
    md = k.metadata
    assert (md.num_warps, md.num_ctas, md.ctas_per_cga, md.cluster_dims) == (2, 1, (2, 1, 1),
                                                                             (2, 1, 1))
    assert md.num_stages == 3 and md.shared == k.shared and md.name == "_store_pid"
    assert _store_pid[(1,)](out).metadata.ctas_per_cga == (1, 1, 1)


def test_host_task_objects_still_compile_in_kernels():
    @ww.jit
    def ws(out):
        with tlx.async_tasks():
            with tlx.async_task("default"):
                tl.store(out, 1)
            with tlx.async_task(num_warps=4):
                tl.store(out + 1, 2)

    out = np.zeros(2, dtype=np.int32)
    ws[(1,)](out)
    assert out.tolist() == [1, 2]


def test_swizzled_layout_resolves_per_row_phase_from_the_shape():
    enc = tlx.swizzled_layout(3, 0, 6, order=[1, 0])._to_encoding(shape=[128, 64])
    assert (enc.vectorSize, enc.perPhase, enc.maxPhase, enc.order) == (1, 1, 8, [1, 0])
    enc = tlx.swizzled_layout(2, 1, 3, order=[1, 0])._to_encoding(shape=[8, 8])
    assert (enc.vectorSize, enc.perPhase, enc.maxPhase) == (2, 2, 4)
    with pytest.raises(AssertionError):
        tlx.swizzled_layout(2, 0, 0, order=[1, 0])._to_encoding(shape=[4, 8])
    with pytest.raises(ValueError, match="buffer shape"):
        tlx.swizzled_layout(1, 0, 4)._to_encoding()


def test_layout_of_a_swizzle_is_a_shared_layout():
    plain = tlx.layout(tlx.swizzled_layout.make_default(rank=2))
    assert type(plain) is tlx.swizzled_shared_layout_encoding
    assert isinstance(plain, tlx.shared_layout_encoding)
    real = tlx.swizzled_layout(2, 0, 2, order=[1, 0])
    assert tlx.layout(real) is real
    reg = tlx.layout(shape=((32, 4), (8,)), stride=((1, 32), (128,)))
    assert reg.thread_shape == (32, 4) and reg.value_stride == (128,)
    assert not isinstance(reg, tlx.shared_layout_encoding)
    with pytest.raises(AssertionError):
        tlx.layout()


def test_padded_and_linear_shared_layouts_keep_their_fields():
    bases = [[0, 1], [0, 2], [1, 0]]
    enc = tlx.padded_shared_layout_encoding.with_bases([(256, 8)], bases, [2, 4])
    assert (enc.intervals, enc.paddings, enc.order, enc.block_bases) == ([256], [8], [1, 0], [])
    assert enc.offset_bases == bases and enc.intervals_paddings == [(256, 8)]
    ident = tlx.padded_shared_layout_encoding.with_identity_for([(64, 4)], [32, 64], [0, 1])
    assert (ident.order, ident.offset_bases, ident.shape) == ([0, 1], None, [32, 64])
    lin = tlx.shared_linear_layout_encoding(offset_bases=bases, alignment=32)
    assert (lin.offset_bases, lin.block_bases, lin.alignment) == (bases, [], 32)
    with pytest.raises(AssertionError):
        tlx.shared_linear_layout_encoding(offset_bases=bases, alignment=24)


def test_amd_mfma_layout_tiles_per_warp_follow_the_warp_axes():
    assert tlx.amd_mfma_layout(4, [16, 16, 32], False, [2, 2]).tiles_per_warp == [1, 1]
    assert tlx.amd_mfma_layout(4, [32, 32, 16], True, [4, 1],
                               tiles_per_warp=[2, 1]).tiles_per_warp == [2, 1]
    with pytest.raises(AssertionError):
        tlx.amd_mfma_layout(4, [8, 8, 4], True, [4, 1])
