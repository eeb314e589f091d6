"""TLX shared layout objects as constexpr kernel arguments and as tlx.local_alloc's layout=
(tlx.swizzled_layout, tlx.swizzled_shared_layout_encoding, tlx.padded_shared_layout_encoding),
and tlx.dump_layout. The buffer lies exactly in the given layout: the interpreter gives the
values back (its shared memory is logical), the sm_90a PTX addresses the buffer in that
layout (dump_layout shows the LinearLayout codegen uses; ptxas accepts the PTX); consumers that
cannot read a layout (TMA, wgmma) and layouts the PTX backend cannot express are errors at
their line. No GPU ran any of this."""
import importlib
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tlx_layout_constexpr_kernels as K  # noqa: E402

import warpweave as ww  # noqa: E402
import warpweave.tlx as tlx  # noqa: E402

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = str(Path(K.__file__))

SWIZZLE_306 = tlx.swizzled_layout(3, 0, 6, order=[1, 0])  # vec 1, perPhase 1, maxPhase 8
NVMMA_128 = tlx.swizzled_layout(3, 3, 3, order=[1, 0])  # fp16 rows of 64: the 128-byte swizzle
PADDED = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [128, 64], [1, 0])

LAYOUTS = [
    SWIZZLE_306, NVMMA_128,
    tlx.swizzled_layout.make_default(rank=2),
    tlx.swizzled_shared_layout_encoding.make_default(rank=2),
    tlx.swizzled_shared_layout_encoding(8, 1, 8, [1, 0], [1, 1], [1, 1], [1, 1], [1, 0]),
    tlx.swizzled_shared_layout_encoding(1, 2, 4, [0, 1], [1, 1], [1, 1], [1, 1], [1, 0]),
]


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


@pytest.fixture
def fresh(monkeypatch):
    # dump_layout prints while compiling: no kernel from the disk cache.
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def sm90(kernel, *values, num_warps=4):
    return kernel.compile_for(list(values), False, (num_warps, 3, 1), target="sm_90a")


# ---- interpreter: values --------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS + [
    PADDED, tlx.padded_shared_layout_encoding.with_identity_for([(32, 1), (256, 3)], [128, 64])],
    ids=repr)
def test_roundtrip_values_in_the_interpreter(interpret, layout):
    out = np.zeros(128 * 64, np.float16)
    K.roundtrip[(1,)](out, layout)
    np.testing.assert_array_equal(out, np.arange(128 * 64).astype(np.float16))


def test_multibuffer_and_loop_values_in_the_interpreter(interpret):
    x = (np.arange(64 * 64, dtype=np.float32) % 97) / 8
    out = np.zeros_like(x)
    K.multibuffer[(1,)](x, out, SWIZZLE_306)
    np.testing.assert_array_equal(out, 3 * x)
    x = x[:64 * 32].copy()
    out = np.zeros_like(x)
    K.in_loop[(1,)](x, out, tlx.swizzled_layout(2, 0, 5, order=[1, 0]), 4)
    np.testing.assert_array_equal(out, 4 * x)


def test_layout_written_in_the_kernel(interpret):
    out = np.zeros(128 * 64, np.float16)
    K.literal_in_kernel[(1,)](out)
    np.testing.assert_array_equal(out, np.arange(128 * 64).astype(np.float16))


# ---- the constexpr path ---------------------------------------------------------------------

def test_the_layout_is_part_of_the_cache_key(requires_ptxas, fresh):
    out = np.zeros(128 * 64, np.float16)
    a = sm90(K.roundtrip, out, SWIZZLE_306)
    assert sm90(K.roundtrip, out, tlx.swizzled_layout(3, 0, 6, order=(1, 0))) is a  # equal value
    b = sm90(K.roundtrip, out, NVMMA_128)
    assert b is not a and a.asm["ptx"] != b.asm["ptx"]
    p1 = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [128, 64], [1, 0])
    assert p1 == PADDED and hash(p1) == hash(PADDED)
    assert p1 != tlx.padded_shared_layout_encoding.with_identity_for([(64, 4)], [128, 64])


def test_signature_text_spells_the_constructor():
    assert ww.jit.__module__  # the module imported
    from warpweave.jit import literal
    assert literal(SWIZZLE_306) == "tlx.swizzled_layout(3, 0, 6, order=(1, 0, ))"
    assert literal(tlx.swizzled_shared_layout_encoding.make_default(2)).startswith(
        "tlx.swizzled_shared_layout_encoding(1, 1, 1, (1, 0, ), ")


# ---- sm_90a PTX -----------------------------------------------------------------------------

def test_given_nvmma_swizzle_is_the_compilers_own(requires_ptxas, fresh):
    # Swizzle<3,3,3> over fp16 rows of 64 is the 128-byte NVMMA swizzle the compiler picks for
    # this tile by itself: the same shared-memory accesses (16-byte vectors, one XOR pattern).
    out = np.zeros(128 * 64, np.float16)
    given = sm90(K.roundtrip, out, NVMMA_128).asm["ptx"]
    default = sm90(K.roundtrip_default, out).asm["ptx"]
    for inst in ("st.shared.v4.b32", "ld.shared.v4.b32", "xor.b32"):
        assert given.count(inst) == default.count(inst) > 0, inst


def test_unswizzled_layout_has_no_xor(requires_ptxas, fresh):
    out = np.zeros(128 * 64, np.float16)
    ptx = sm90(K.roundtrip, out, tlx.swizzled_layout.make_default(rank=2)).asm["ptx"]
    assert "xor.b32" not in ptx and "st.shared.v4.b32" in ptx


def test_swizzle_306_addresses(requires_ptxas, fresh, capfd):
    # vec 1: the swizzle permutes single elements within runs of 8, so no access is wider than
    # one element, and row r's element c lies at r * 64 + (c ^ (r % 8)).
    out = np.zeros(128 * 64, np.float16)
    ptx = sm90(K.roundtrip, out, SWIZZLE_306).asm["ptx"]
    assert "st.shared.v" not in ptx and "st.shared.b16" in ptx
    # In the store's layout thread-id bits 3, 4 and 5 pick rows 1, 2 and 4: each adds row r's
    # bytes with column bit r swizzled in, (64 r + r) * 2 = 130, 260, 520 (unswizzled: 128,
    # 256, 512).
    for image in (130, 260, 520):
        assert re.search(rf"selp\.b32 %r\d+, {image}, 0,", ptx), image
    assert not re.search(r"selp\.b32 %r\d+, (128|256|512), 0,", ptx)
    sm90(K.dump_swizzled, SWIZZLE_306)
    err = capfd.readouterr().err
    assert "cute: Sw<3,0,6> o _0 o (_128,_64):(_64,_1)" in err
    # Offset bits 6-8 (rows 1, 2, 4) carry the row's phase into columns 1, 2, 4.
    assert "- offset: [0,1] [0,2] [0,4] [0,8] [0,16] [0,32] [1,1] [2,2] [4,4] [8,0]" in err


def test_padded_addresses(requires_ptxas, fresh, capfd):
    # [(64, 8)] over rows of 64 fp16: row r starts at r * 72 elements (144 bytes). The thread's
    # offset x becomes x + (x >> 6) * 8; each register group of 16 rows lies 16 * 144 bytes on;
    # 8 elements of padding keep 16-byte vectors aligned.
    out = np.zeros(128 * 64, np.float16)
    c = sm90(K.roundtrip, out, PADDED)
    ptx = c.asm["ptx"]
    assert "shr.u32" in ptx and ", 8, " in ptx
    stores = [line for line in ptx.splitlines() if "st.shared.v4.b32" in line]
    assert len(stores) == 8 and all(f"+{16 * 144 * i}]" in stores[i] for i in range(8))
    assert c.metadata.shared >= 128 * 72 * 2
    sm90(K.dump_swizzled, tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)],
                                                                             [128, 64]))
    err = capfd.readouterr().err
    assert "padding: 8 elements after every 64" in err
    assert "cute: (_128,_64):(_72,_1)" in err


def test_padded_multibuffer_values_and_ptx(interpret, requires_ptxas, fresh):
    pad = tlx.padded_shared_layout_encoding.with_identity_for([(32, 4)], [64, 64])
    x = (np.arange(64 * 64, dtype=np.float32) % 97) / 8
    out = np.zeros_like(x)
    K.multibuffer[(1,)](x, out, pad)
    np.testing.assert_array_equal(out, 3 * x)
    c = K.multibuffer.compile_for([x, out, pad], False, (4, 3, 1), target="sm_90a")
    # Two buffers of 64 x (64 + 2 * 4) fp32 each.
    assert c.metadata.shared >= 2 * 64 * 72 * 4 and "st.shared.v4" in c.asm["ptx"]


def test_multibuffer_and_loop_ptx(requires_ptxas, fresh):
    x = np.zeros(64 * 64, np.float32)
    ptx = sm90(K.multibuffer, x, x, SWIZZLE_306).asm["ptx"]
    assert "xor.b32" in ptx
    ptx = sm90(K.in_loop, x, x, tlx.swizzled_layout(2, 0, 5, order=[1, 0]), 4).asm["ptx"]
    assert "xor.b32" in ptx


def test_wgmma_and_tma_read_an_nvmma_equal_layout(requires_ptxas, fresh):
    out = np.zeros(64 * 64, np.float32)
    ptx = sm90(K.wgmma_from, out, NVMMA_128, NVMMA_128).asm["ptx"]
    assert "wgmma.mma_async" in ptx
    x = np.zeros((64, 64), np.float16)
    desc = ww.TensorDescriptor(x, [64, 64], [64, 1], [64, 64])
    for layout in (NVMMA_128, tlx.swizzled_layout.make_default(rank=2)):
        assert "cp.async.bulk.tensor" in sm90(K.tma_into, desc, out, layout).asm["ptx"]


# ---- errors ---------------------------------------------------------------------------------

def error_of(kernel, *values):
    with pytest.raises(Exception) as info:
        sm90(kernel, *values)
    return str(info.value)


def test_wgmma_refuses_other_swizzles(fresh):
    msg = error_of(K.wgmma_from, np.zeros(64 * 64, np.float32), SWIZZLE_306, NVMMA_128)
    assert f"{KERNELS}:93:" in msg and "tlx.async_dot" in msg
    assert "tlx.swizzled_layout(3, 0, 6, order=[1, 0])" in msg
    assert "tlx.swizzled_layout(3, 3, 3, order=[1, 0])" in msg  # what would be accepted


def test_tma_refuses_other_swizzles(fresh):
    x = np.zeros((64, 64), np.float16)
    desc = ww.TensorDescriptor(x, [64, 64], [64, 1], [64, 64])
    msg = error_of(K.tma_into, desc, np.zeros(64 * 64, np.float32), SWIZZLE_306)
    assert f"{KERNELS}:76:" in msg and "tlx.async_descriptor_load" in msg
    assert "NVMMA" in msg and "tlx.swizzled_layout(3, 3, 3, order=[1, 0])" in msg


def test_padded_is_refused_where_the_ptx_backend_cannot_address_it(fresh):
    x = np.zeros((64, 64), np.float16)
    desc = ww.TensorDescriptor(x, [64, 64], [64, 1], [64, 64])
    pad = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [64, 64])
    msg = error_of(K.tma_into, desc, np.zeros(64 * 64, np.float32), pad)
    assert f"{KERNELS}:76:" in msg and "padded_shared_layout_encoding([(64, 8)]" in msg
    msg = error_of(K.wgmma_from, np.zeros(64 * 64, np.float32), NVMMA_128, pad)
    assert f"{KERNELS}:93:" in msg and "padded_shared_layout_encoding" in msg
    msg = error_of(K.sliced, np.zeros(64 * 32, np.float32),
                   tlx.padded_shared_layout_encoding.with_identity_for([(64, 4)], [64, 64]))
    assert f"{KERNELS}:124:" in msg and "local_load / tlx.local_store" in msg


def test_sliced_swizzled_buffer(interpret):
    out = np.zeros(64 * 32, np.float32)
    K.sliced[(1,)](out, SWIZZLE_306)
    np.testing.assert_array_equal(out.reshape(64, 32), np.arange(64 * 64).reshape(64, 64)[:, 32:])


@pytest.mark.parametrize("layout, words", [
    (tlx.swizzled_layout(2, 0, 0, order=[1, 0]), "perPhase < 1"),
    (tlx.swizzled_layout(1, 0, 6, order=[0, 1, 2]), "not a permutation"),
    (tlx.layout(shape=((32, 4), (64,)), stride=((64, 2048), (1,))), "register layout"),
    (tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [64, 64]), "[64, 64] tile"),
    (tlx.swizzled_shared_layout_encoding(1, 1, 1, [1, 0], [2, 1], [1, 1], [1, 1], [1, 0]),
     "over CTAs"),
], ids=["phase", "order", "register", "shape", "cta"])
def test_bad_layouts_are_located_errors(interpret, layout, words):
    with pytest.raises(Exception) as info:
        K.roundtrip[(1,)](np.zeros(128 * 64, np.float16), layout)
    msg = str(info.value)
    assert f"{KERNELS}:" in msg and words in msg, msg


def test_a_layout_needs_a_constexpr_parameter():
    @ww.jit
    def k(x, SW):
        pass
    with pytest.raises(TypeError, match="constexpr") as info:
        k[(1,)](np.zeros(4, np.float32), SWIZZLE_306)
    assert "swizzled_layout(Swizzle<3,0,6>, order=[1, 0])" in str(info.value)


# ---- dump_layout ----------------------------------------------------------------------------

def test_dump_layout_register_and_shared(requires_ptxas, fresh, capfd):
    compiled = sm90(K.dump, 64)
    err = capfd.readouterr().err
    assert "tlx.dump_layout of tensor<64xi32> (sm_90a, 4 warps)" in err
    # TLX prints the same for this tensor: 32 lanes of stride 1, a warp of stride 32, a
    # broadcast warp bit, one register; and the unswizzled 64-element buffer.
    assert "cute: ((_32,_2,_2),_1):((_1,_32,_0),_0)" in err
    assert "cute: _64:_1" in err
    assert "dump_layout" not in compiled.asm["ttir"]


def test_dump_layout_in_the_interpreter(interpret, fresh, capfd):
    K.dump[(1,)](64)
    assert "cute: ((_32,_2,_2),_1):((_1,_32,_0),_0)" in capfd.readouterr().err


def test_dump_layout_of_the_compilers_swizzle(requires_ptxas, fresh, capfd):
    sm90(K.dump_swizzled, NVMMA_128)
    err = capfd.readouterr().err
    assert "cute: Sw<3,3,3> o _0 o (_128,_64):(_64,_1)" in err
    assert "cute: ((_32,_4),_64):((_1,_32),_128)" in err  # the zeros tile's blocked layout
