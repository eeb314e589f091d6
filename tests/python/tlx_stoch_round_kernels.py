"""tlx.stoch_round kernels for tests/python/test_tlx_stoch_round.py: fp32 values and their uint32
random bits in, the rounded encodings out (stored bitcast to an unsigned integer of the
destination's width, so NumPy reads fp8 and bf16 bits without those dtypes)."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def stoch_round_bits(x_ptr, r_ptr, y_ptr, N: tl.constexpr, DST: tl.constexpr,
                     BITS: tl.constexpr):
    """y[i] = the encoding of x[i] rounded to DST with rand bits r[i]; BITS: DST's unsigned
    integer of the same width (tl.uint16 or tl.uint8)."""
    offs = tl.arange(0, N)
    y = tlx.stoch_round(tl.load(x_ptr + offs), DST, tl.load(r_ptr + offs))
    tl.store(y_ptr + offs, y.to(BITS, bitcast=True))


@ww.jit
def stoch_round_masked(x_ptr, r_ptr, y_ptr, SIZE: tl.constexpr, N: tl.constexpr,
                       DST: tl.constexpr, BITS: tl.constexpr):
    """The first SIZE of N lanes (SIZE not a multiple of the instructions' pairs), as TLX's
    partial-pack test masks them."""
    offs = tl.arange(0, N)
    mask = offs < SIZE
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    r = tl.load(r_ptr + offs, mask=mask, other=0)
    y = tlx.stoch_round(x, DST, r)
    tl.store(y_ptr + offs, y.to(BITS, bitcast=True), mask=mask)


@ww.jit
def stoch_round_2d(x_ptr, r_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr, DST: tl.constexpr,
                   BITS: tl.constexpr):
    """An [R, C] tile: rows and columns are dealt to threads and registers by the layout."""
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    y = tlx.stoch_round(tl.load(x_ptr + offs), DST, tl.load(r_ptr + offs))
    tl.store(y_ptr + offs, y.to(BITS, bitcast=True))


@ww.jit
def stoch_round_scalar(x_ptr, r_ptr, y_ptr, DST: tl.constexpr, BITS: tl.constexpr):
    """One value and its random word as scalars."""
    y = tlx.stoch_round(tl.load(x_ptr), DST, tl.load(r_ptr))
    tl.store(y_ptr, y.to(BITS, bitcast=True))


@ww.jit
def stoch_round_seeded(x_ptr, y_ptr, seed, N: tl.constexpr, DST: tl.constexpr,
                       BITS: tl.constexpr):
    """Random bits from tl.randint (uint32), as TLX's README draws them."""
    offs = tl.arange(0, N)
    rbits = tl.randint(seed, offs)
    y = tlx.stoch_round(tl.load(x_ptr + offs), DST, rbits)
    tl.store(y_ptr + offs, y.to(BITS, bitcast=True))


@ww.jit
def stoch_round_bad(x_ptr, y_ptr, N: tl.constexpr, SRC: tl.constexpr, DST: tl.constexpr,
                    RB: tl.constexpr, RN: tl.constexpr):
    """For the errors: x converted to SRC, DST, random bits of dtype RB and RN elements."""
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs).to(SRC)
    r = tl.zeros((RN,), RB)
    y = tlx.stoch_round(x, DST, r)
    tl.store(y_ptr + offs, y.to(tl.float32))


@ww.jit
def stoch_round_scalar_bits(x_ptr, y_ptr, N: tl.constexpr):
    """For the error: a tensor rounded with one scalar word."""
    offs = tl.arange(0, N)
    y = tlx.stoch_round(tl.load(x_ptr + offs), tl.float16, tl.load(x_ptr).to(tl.uint32))
    tl.store(y_ptr + offs, y.to(tl.float32))
