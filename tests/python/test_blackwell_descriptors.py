"""The tcgen05 instruction descriptor and shared-memory descriptors in warpweave's PTX for sm_100a
(issue 19), decoded field by field with the PTX ISA's tables, not with the encoder's own code:

- Instruction descriptor for .kind::f16 / .kind::tf32 / .kind::f8f6f4 (PTX ISA 9.7.16.4.2,
  Table 42): bits 0-1 sparsity selector, 2 sparsity, 3 saturate, 4-5 dtype (F32 = 1), 6
  reserved, 7-9 atype and 10-12 btype (f16: F16 = 0, BF16 = 1; tf32: TF32 = 2; f8f6f4: E4M3 =
  0, E5M2 = 1), 13 / 14 negate A / B, 15 / 16 transpose A / B (1: MN-major), 17-22 N >> 3, 23
  reserved, 24-28 M >> 4, 29 reserved, 30-31 max shift (.ws only).
- Shared-memory descriptor (PTX ISA, tcgen05 "Shared memory descriptor"): bits 0-13 start
  address >> 4, 16-29 leading-dimension byte offset >> 4, 32-45 stride-dimension byte offset
  >> 4, 46-48 the fixed constant 0b001 (the field wgmma's descriptor lacks), 49-51 base offset,
  52 leading-dimension stride mode, 53-60 fixed 0, 61-63 swizzle (0 none, 1 128-byte with 32-byte
  atoms, 2 128-byte, 4 64-byte, 6 32-byte). For K-major swizzled operands the stride offset is
  8 rows of the swizzle width; for MN-major ones the leading offset steps from one swizzle-wide
  column block to the next (the block holds every K row) and the stride offset is 8 K rows.

Also the values: each form runs in the interpreter against NumPy. No Blackwell GPU ran this."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww

import blackwell_descriptor_kernels as dk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


def field(v, lo, hi):
    return (v >> lo) & ((1 << (hi - lo + 1)) - 1)


def decode_idesc(v):
    return {"sparse_sel": field(v, 0, 1), "sparse": field(v, 2, 2), "saturate": field(v, 3, 3),
            "dtype": field(v, 4, 5), "r6": field(v, 6, 6), "atype": field(v, 7, 9),
            "btype": field(v, 10, 12), "neg_a": field(v, 13, 13), "neg_b": field(v, 14, 14),
            "trans_a": field(v, 15, 15), "trans_b": field(v, 16, 16), "n": field(v, 17, 22) << 3,
            "r23": field(v, 23, 23), "m": field(v, 24, 28) << 4, "r29": field(v, 29, 29),
            "shift": field(v, 30, 31)}


def decode_sdesc(v):
    return {"start": field(v, 0, 13), "lbo": field(v, 16, 29) << 4, "sbo": field(v, 32, 45) << 4,
            "version": field(v, 46, 48), "base_offset": field(v, 49, 51),
            "lbo_mode": field(v, 52, 52), "fixed0": field(v, 53, 60),
            "swizzle": field(v, 61, 63)}


# tcgen05's 3-bit swizzle codes (PTX ISA): bytes -> code.
SWIZZLE = {128: 2, 64: 4, 32: 6}
# (warpweave dtype name, numpy dtype or None, kind, type code)
FORMS = {
    "fp16": (np.float16, "f16", 0),
    "bf16": (None, "f16", 1),
    "fp32": (np.float32, "tf32", 2),
    "fp8e4nv": (None, "f8f6f4", 0),
    "fp8e5": (None, "f8f6f4", 1),
}


def compile_one(dtype, BN, BK, b_k_major):
    path = Path(dk.__file__)
    b_block = f"{BN}x{BK}" if b_k_major else f"{BK}x{BN}"
    sig = (f"a_desc:desc<{dtype},128x{BK}>,b_desc:desc<{dtype},{b_block}>,c_ptr:*fp32:16,"
           f"BM=128,BN={BN},BK={BK},B_K_MAJOR={int(b_k_major)}")
    return native_loader.native().compile([(str(path), path.read_text())], "one_mma", sig, {},
                                          target="sm_100a", num_warps=4, stage="ptx").ptx


def immediate_of(ptx, reg, op):
    """The immediate `op` combines into `reg` (mov.b32 reg, IMM or or.b64 reg, src, IMM)."""
    m = re.search(rf"{op} {re.escape(reg)}, (?:%\w+, )?(-?\d+);", ptx)
    assert m, f"no '{op} {reg}, ...' in the PTX"
    return int(m.group(1)) & ((1 << 64) - 1)


def mma_operands(ptx, kind):
    mmas = re.findall(rf"tcgen05\.mma\.cta_group::1\.kind::{kind} \[(%r\d+)\], (%rd\d+), "
                      rf"(%rd\d+), (%r\d+), (%p\d+);", ptx)
    assert mmas, f"no tcgen05.mma ... kind::{kind} in the PTX"
    return mmas


def fixed_bits(ptx, desc_reg):
    """The constant part of a shared-memory descriptor: the or.b64 that made the first one."""
    # The first MMA's descriptors are the or.b64 results; later ones add K steps to them.
    return immediate_of(ptx, desc_reg, "or.b64")


@pytest.mark.parametrize("dtype,BN,BK,b_k_major", [
    ("fp16", 64, 32, False),   # B N-major, 128-byte rows; A K-major 64-byte rows
    ("fp16", 128, 64, True),   # both K-major, 128-byte rows
    ("bf16", 256, 16, False),  # N = 256, A rows of 32 bytes
    ("fp32", 32, 32, True),    # tf32: K-major only
    ("fp8e4nv", 64, 128, True),
    ("fp8e5", 16, 64, True),   # N = 16, the smallest the backend issues
    ("fp8e4nv", 64, 128, False),  # 8-bit B MN-major: tcgen05 has the transpose wgmma lacks
    ("fp8e5", 128, 64, False),
])
def test_descriptors_decode_as_the_isa_says(ptxas, dtype, BN, BK, b_k_major):
    ptx = compile_one(dtype, BN, BK, b_k_major)
    _, kind, code = FORMS[dtype]
    mmas = mma_operands(ptx, kind)
    elem = {"fp16": 2, "bf16": 2, "fp32": 4}.get(dtype, 1)
    assert len(mmas) == BK * elem // 32  # one MMA per 32 bytes of K
    d = decode_idesc(immediate_of(ptx, mmas[0][3], "mov.b32"))
    assert d == {"sparse_sel": 0, "sparse": 0, "saturate": 0, "dtype": 1, "r6": 0,
                 "atype": code, "btype": code, "neg_a": 0, "neg_b": 0, "trans_a": 0,
                 "trans_b": 0 if b_k_major else 1, "n": BN, "r23": 0, "m": 128, "r29": 0,
                 "shift": 0}
    a = decode_sdesc(fixed_bits(ptx, mmas[0][1]))
    b = decode_sdesc(fixed_bits(ptx, mmas[0][2]))
    for s in (a, b):
        assert s["version"] == 1 and s["base_offset"] == 0 and s["lbo_mode"] == 0
        assert s["fixed0"] == 0 and s["start"] == 0  # the address is or-ed in at run time
    # A: [128, BK] K-major, rows of BK * elem bytes (at most 128) swizzled at that width.
    a_row = min(128, BK * elem)
    assert a["swizzle"] == SWIZZLE[a_row]
    assert a["sbo"] == 8 * a_row
    if b_k_major:
        b_row = min(128, BK * elem)
        assert b["swizzle"] == SWIZZLE[b_row] and b["sbo"] == 8 * b_row
    else:
        b_row = min(128, BN * elem)
        assert b["swizzle"] == SWIZZLE[b_row]
        assert b["sbo"] == 8 * b_row            # 8 K rows
        assert b["lbo"] == BK * b_row           # the next column block, after every K row
    # Later MMAs step the start address (in 16-byte units) and nothing else: 32 bytes along a
    # K-major row; 32 / elem K rows of b_row bytes in an MN-major tile.
    instr_k = 32 // elem
    for i, (_, da, db, _, _) in enumerate(mmas[1:], 1):
        for reg, first, step in ((da, mmas[0][1], 32 * i),
                                 (db, mmas[0][2], 32 * i if b_k_major else instr_k * i * b_row)):
            m = re.search(rf"add\.s64 {re.escape(reg)}, {re.escape(first)}, (\d+);", ptx)
            assert m and int(m.group(1)) == step // 16, (reg, step)
    ptxas(ptx, arch="sm_100a")


def eighths(rng, shape, dt):
    return (rng.integers(-8, 9, shape) / 8).astype(dt)


def descriptor(t, block):
    return ww.TensorDescriptor(t, list(t.shape), [int(s) // t.itemsize for s in t.strides], block)


@pytest.mark.parametrize("dtype,BN,BK,b_k_major", [
    ("fp16", 64, 32, False), ("fp16", 128, 64, True), ("fp32", 32, 32, True)])
def test_forms_compute_the_product(monkeypatch, dtype, BN, BK, b_k_major):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    np_dt = FORMS[dtype][0]
    rng = np.random.default_rng(BN + BK)
    a = eighths(rng, (128, BK), np_dt)
    b = eighths(rng, (BK, BN), np_dt)
    bt = np.ascontiguousarray(b.T) if b_k_major else b
    c = np.zeros((128, BN), np.float32)
    dk.one_mma[(1,)](descriptor(a, [128, BK]), descriptor(bt, list(bt.shape)), c, BM=128, BN=BN,
                     BK=BK, B_K_MAJOR=b_k_major, num_warps=4)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64))
