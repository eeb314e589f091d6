"""tlx.stoch_round(src, dst_dtype, rand_bits): fp32 to fp16 / bf16 / fp8 (e4m3, e5m2) with the
stochastic rounding of sm_100a's cvt.rs.satfinite, each element by the low bits of its own
uint32 random word. The interpreter against a NumPy reference of the PTX ISA's rule (written
here on the fp32 bit fields, apart from the C++ one): exact values, thresholds and ties,
saturation, signs, NaN, subnormal results, unbiasedness over every random value, partial pairs;
the PTX backend's instructions and ptxas for sm_100a; the refusal on sm_90a / sm_80 and the
located argument errors."""

import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import tlx_stoch_round_kernels as sk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(sk.__file__)

# name: (tl dtype, exponent bits, mantissa bits, bias, random bits used, largest finite, NaN,
#        the unsigned integer of its width, its NumPy counterpart, its cvt.rs form)
FORMATS = {
    "fp16": ("tl.float16", 5, 10, 15, 13, 0x7BFF, 0x7FFF, "tl.uint16", np.uint16, "f16x2"),
    "bf16": ("tl.bfloat16", 8, 7, 127, 16, 0x7F7F, 0x7FFF, "tl.uint16", np.uint16, "bf16x2"),
    "fp8e4nv": ("tl.float8e4nv", 4, 3, 7, 16, 0x7E, 0x7F, "tl.uint8", np.uint8, "e4m3x4"),
    "fp8e5": ("tl.float8e5", 5, 2, 15, 16, 0x7B, 0x7F, "tl.uint8", np.uint8, "e5m2x4"),
}
NAMES = list(FORMATS)


def reference_bits(x, r, name):
    """The PTX ISA's .rs rounding of fp32 `x` with random word `r`, on integers: |x| = M * 2^E
    split at the destination's quantum (its binade's last place, or the subnormal one) into
    units and a fraction; the low `n` bits of r are added to the fraction's top n bits and the
    carry out rounds the magnitude away from zero. satfinite clamps to the largest finite value
    (infinities too); NaN is the format's NaN."""
    _, ebits, mbits, bias, n, largest, nan, *_ = FORMATS[name]
    total = 1 + ebits + mbits
    b = int(np.float32(x).view(np.uint32))
    sign = (b >> 31) << (total - 1)
    exp, man = (b >> 23) & 0xFF, b & 0x7FFFFF
    if exp == 0xFF:
        return nan if man else sign | largest
    if exp == 0 and man == 0:
        return sign
    M, E = (man, -149) if exp == 0 else (man | 0x800000, exp - 150)
    q = max(M.bit_length() - 1 + E, 1 - bias) - mbits  # the quantum is 2^q
    s = q - E  # bits of M below the quantum
    if s <= 0:
        units, top = M << -s, 0
    else:
        units, frac = M >> s, M & ((1 << s) - 1)
        top = frac >> (s - n) if s >= n else frac << (n - s)
    units += (top + (int(r) & ((1 << n) - 1))) >> n
    if units == 0:
        return sign
    if units >> (mbits + 1):  # the carry reached the next binade
        units >>= 1
        q += 1
    if units < (1 << mbits):
        mag = units  # subnormal
    else:
        mag = ((q + mbits + bias) << mbits) | (units - (1 << mbits))
    return sign | min(mag, largest)


def reference(x, r, name):
    return np.array([reference_bits(a, b, name) for a, b in zip(x, r)], FORMATS[name][8])


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


def run(name, x, r, num_warps=4):
    x = np.asarray(x, np.float32)
    r = np.asarray(r, np.uint32)
    fmt = FORMATS[name]
    y = np.zeros(x.size, fmt[8])
    sk.stoch_round_bits[(1,)](x, r, y, N=x.size, DST=eval_dtype(fmt[0]),
                              BITS=eval_dtype(fmt[7]), num_warps=num_warps)
    return y


def eval_dtype(text):
    import warpweave.language as tl  # noqa: F401  (the names below are tl's)

    return eval(text)


def pad(values, fill):
    """`values` padded to a power-of-two length with `fill`."""
    n = 1 << max(0, (len(values) - 1).bit_length())
    return list(values) + [fill] * (n - len(values))


# ---------------------------------------------------------------------------------------------
# Interpreter against the reference
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_representable_values_never_move(interpret, name):
    # Every finite encoding of the destination (sign, subnormals, the largest), read as fp32,
    # stays itself whatever the random bits.
    fmt = FORMATS[name]
    codes = np.arange(0, 1 << (1 + fmt[1] + fmt[2]), dtype=np.int64)
    if name == "fp16":
        values = codes.astype(np.uint16).view(np.float16).astype(np.float32)
    elif name == "bf16":
        values = (codes.astype(np.uint32) << 16).view(np.float32)
    else:
        values = np.array([decode_fp8(int(c), name) for c in codes], np.float32)
    keep = np.isfinite(values)
    values, codes = values[keep], codes[keep]
    for r in (0, 0xFFFFFFFF, 0x5A5A5A5A):
        x = pad(values, 0.0)
        got = run(name, x, [r] * len(x))[:len(values)]
        np.testing.assert_array_equal(got, codes.astype(fmt[8]), err_msg=f"rbits {r:#x}")


def decode_fp8(code, name):
    _, ebits, mbits, bias, *_ = FORMATS[name]
    sign = -1.0 if code >> 7 else 1.0
    e, m = (code >> mbits) & ((1 << ebits) - 1), code & ((1 << mbits) - 1)
    if name == "fp8e4nv" and e == 15 and m == 7 or name == "fp8e5" and e == 31:
        return np.nan
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - mbits)
    return sign * (1 + m / (1 << mbits)) * 2.0 ** (e - bias)


# x halfway between 1 and the next value up (its fraction's top bits 1000...0): it rounds up
# exactly when the random bits reach 2^(n-1). fp8 keeps the top 16 of its 20 (e4m3) or 21 (e5m2)
# discarded bits, fp16 all 13, bf16 all 16.
HALF_ULP_ABOVE_ONE = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8, "fp8e4nv": 2.0 ** -4, "fp8e5": 2.0 ** -3}
ONE = {"fp16": 0x3C00, "bf16": 0x3F80, "fp8e4nv": 0x38, "fp8e5": 0x3C}


@pytest.mark.parametrize("name", NAMES)
def test_tie_rounds_up_exactly_from_half_the_random_range(interpret, name):
    n = FORMATS[name][4]
    x = 1.0 + HALF_ULP_ABOVE_ONE[name]
    rs = [0, (1 << (n - 1)) - 1, 1 << (n - 1), (1 << n) - 1,
          # only the low n bits count
          ((0xFFFFFFFF << n) & 0xFFFFFFFF) | ((1 << (n - 1)) - 1), (1 << n) | (1 << (n - 1)), 0, 0]
    got = run(name, [x] * 8, rs)
    one = ONE[name]
    want = [one, one, one + 1, one + 1, one, one + 1, one, one]
    np.testing.assert_array_equal(got, np.array(want, FORMATS[name][8]))
    # Negative values round their magnitude the same way.
    sign = 0x8000 if FORMATS[name][8] is np.uint16 else 0x80
    np.testing.assert_array_equal(run(name, [-x] * 8, rs), np.array(want, FORMATS[name][8]) | sign)


@pytest.mark.parametrize("name", NAMES)
def test_threshold_is_the_fractions_complement(interpret, name):
    # A fraction with top bits T rounds up for random bits r >= 2^n - T: each side of it.
    n = FORMATS[name][4]
    ulp = 2 * HALF_ULP_ABOVE_ONE[name]
    xs, rs, want = [], [], []
    for t in (1, 3, (1 << n) // 3, (1 << n) - 1):
        x = np.float32(1.0 + ulp * t / (1 << n))
        assert float(x) == 1.0 + ulp * t / (1 << n)  # exact in fp32
        for r, up in (((1 << n) - t - 1, 0), ((1 << n) - t, 1)):
            xs.append(x)
            rs.append(r)
            want.append(ONE[name] + up)
    got = run(name, pad(xs, 0.0), pad(rs, 0))[:len(xs)]
    np.testing.assert_array_equal(got, np.array(want, FORMATS[name][8]))


def test_fp8_ignores_the_discarded_bits_below_its_random_ones(interpret):
    # 1 + 2^-23: one unit in the lowest place. fp16 sees it in its 13 discarded bits (and rounds
    # up with the largest random value); fp8 adds its 16 random bits to the top 16 of its 20 or
    # 21, where the unit does not reach: never up.
    x = [1.0 + 2.0 ** -23, 1.0 + 2.0 ** -20, 1.0 + 2.0 ** -19, 0.0]
    r = [0xFFFFFFFF] * 4
    np.testing.assert_array_equal(run("fp16", x, r), [0x3C01, 0x3C01, 0x3C01, 0])
    np.testing.assert_array_equal(run("fp8e4nv", x, r), [0x38, 0x38, 0x39, 0])
    np.testing.assert_array_equal(run("fp8e5", x, r), [0x3C, 0x3C, 0x3C, 0])


@pytest.mark.parametrize("name", NAMES)
def test_saturation_nan_and_zeros(interpret, name):
    fmt = FORMATS[name]
    largest, nan = fmt[5], fmt[6]
    sign = 0x8000 if fmt[8] is np.uint16 else 0x80
    big = {"fp16": 65504.0, "bf16": 3.3895313892515355e38, "fp8e4nv": 448.0,
           "fp8e5": 57344.0}[name]
    between = {"fp16": 65519.0, "bf16": float(np.uint32(0x7F7F8000).view(np.float32)),
               "fp8e4nv": 460.0, "fp8e5": 60000.0}[name]  # past the largest, below a step up
    x = [big, between, between, -between, 3.0e38, np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45,
         -1e-45, big, -big, 1.0, -1.0]
    r = [0xFFFFFFFF, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 0xFFFFFFFF, 0x1234, 0xFFFFFFFF,
         0xFFFFFFFF, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF]
    got = run(name, x, r)
    want = [largest, largest, largest, sign | largest, largest, largest, sign | largest, nan, 0,
            sign, 0, sign, largest, sign | largest, ONE[name], sign | ONE[name]]
    if name == "bf16":
        want[4] = reference_bits(3.0e38, 0, name)  # 3e38 is finite in bf16
        want[10] = reference_bits(1e-45, 0, name)  # the fp32 subnormal is a bf16 one
        want[11] = reference_bits(-1e-45, 0, name)
    np.testing.assert_array_equal(got, np.array(want, fmt[8]))
    np.testing.assert_array_equal(got, reference(np.float32(x), r, name))


@pytest.mark.parametrize("name", NAMES)
def test_subnormal_results(interpret, name):
    # Half the smallest subnormal: up exactly from half the random range; twice and 1.5 times it.
    _, _, mbits, bias, n, *_ = FORMATS[name]
    tiny = 2.0 ** (1 - bias - mbits)
    x = [tiny / 2, tiny / 2, tiny * 1.5, tiny * 1.5, tiny * 2, tiny / 4, tiny / 4, -tiny / 2]
    r = [(1 << (n - 1)) - 1, 1 << (n - 1), (1 << (n - 1)) - 1, 1 << (n - 1), 0xFFFFFFFF,
         (3 << (n - 2)) - 1, 3 << (n - 2), 1 << (n - 1)]
    sign = 0x8000 if FORMATS[name][8] is np.uint16 else 0x80
    np.testing.assert_array_equal(run(name, x, r),
                                  np.array([0, 1, 1, 2, 2, 0, 1, sign | 1], FORMATS[name][8]))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e3, 2.0 ** -13, 2.0 ** -130, 5e4, 1e37])
def test_random_values_match_the_reference(interpret, rng, name, scale):
    x = (rng.standard_normal(1024) * scale).astype(np.float32)
    r = rng.integers(0, 1 << 32, 1024, dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(run(name, x, r), reference(x, r, name))


@pytest.mark.parametrize("name", NAMES)
def test_random_bit_patterns_match_the_reference(interpret, rng, name):
    # Every kind of fp32: NaNs, infinities, subnormals, huge and tiny values.
    x = rng.integers(0, 1 << 32, 2048, dtype=np.uint64).astype(np.uint32).view(np.float32)
    r = rng.integers(0, 1 << 32, 2048, dtype=np.uint64).astype(np.uint32)
    got = run(name, x, r)
    np.testing.assert_array_equal(got, reference(x, r, name))


@pytest.mark.parametrize("name", NAMES)
def test_unbiased_over_every_random_value(interpret, name):
    # Over all 2^n random values the mean of the rounded values is x itself, for an x whose
    # discarded bits the random ones cover (a quarter and 3/8 of a place above 1, and below -1).
    n = FORMATS[name][4]
    ulp = 2 * HALF_ULP_ABOVE_ONE[name]
    r = np.arange(1 << n, dtype=np.uint32)
    for x in (1.0 + ulp / 4, 1.0 + 3 * ulp / 8, -(1.0 + ulp / 4)):
        got = run(name, np.full(1 << n, x, np.float32), r)
        up = int(np.count_nonzero(got != got[0]))
        assert up == round((1 << n) * abs(abs(x) - 1.0) / ulp), (x, up)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("size", [130, 65, 17, 1])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_partial_pairs_under_a_mask(interpret, rng, name, size, num_warps):
    # TLX's partial-pack sizes: the lanes past `size` are masked off; each lane is its own.
    n = 1 << max(0, (size - 1).bit_length())
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    r = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    fmt = FORMATS[name]
    y = np.full(n, 0x5A, fmt[8])
    sk.stoch_round_masked[(1,)](x, r, y, SIZE=size, N=n, DST=eval_dtype(fmt[0]),
                                BITS=eval_dtype(fmt[7]), num_warps=num_warps)
    np.testing.assert_array_equal(y[:size], reference(x[:size], r[:size], name))
    assert (y[size:] == 0x5A).all()


@pytest.mark.parametrize("name", NAMES)
def test_tile_and_scalar(interpret, rng, name):
    fmt = FORMATS[name]
    x = (rng.standard_normal((16, 8)) * 5).astype(np.float32)
    r = rng.integers(0, 1 << 32, (16, 8), dtype=np.uint64).astype(np.uint32)
    y = np.zeros((16, 8), fmt[8])
    sk.stoch_round_2d[(1,)](x, r, y, R=16, C=8, DST=eval_dtype(fmt[0]), BITS=eval_dtype(fmt[7]))
    np.testing.assert_array_equal(y.ravel(), reference(x.ravel(), r.ravel(), name))
    y1 = np.zeros(1, fmt[8])
    sk.stoch_round_scalar[(1,)](x[0, :1].copy(), r[0, :1].copy(), y1, DST=eval_dtype(fmt[0]),
                                BITS=eval_dtype(fmt[7]))
    assert y1[0] == reference_bits(x[0, 0], r[0, 0], name)


def test_tl_randint_words_round_each_value_by_its_own_bits(interpret):
    # tl.randint's uint32 words, as TLX's README draws them: two seeds give different roundings,
    # each the reference's for the word tl.randint gives that lane.
    import warpweave.language as tl

    x = (np.arange(256, dtype=np.float32) * 0.37 + 0.01).astype(np.float32)
    outs = []
    for seed in (12345, 67890):
        y = np.zeros(256, np.uint8)
        sk.stoch_round_seeded[(1,)](x, y, seed, N=256, DST=tl.float8e5, BITS=tl.uint8)
        outs.append(y)
        for v, got in zip(x, y):
            down, up = reference_bits(v, 0, "fp8e5"), reference_bits(v, 0xFFFFFFFF, "fp8e5")
            assert got in (down, up)
    assert np.count_nonzero(outs[0] != outs[1]) > 25


# ---------------------------------------------------------------------------------------------
# PTX backend
# ---------------------------------------------------------------------------------------------


def compile_here(kernel, signature, target="sm_100a", num_warps=4, stage="ptx"):
    result = native_loader.native().compile([(str(KERNELS), KERNELS.read_text())], kernel,
                                            signature, {}, target=target, num_warps=num_warps,
                                            stage=stage)
    return result if isinstance(result, str) else result.ptx


def bits_sig(name, n):
    fmt = FORMATS[name]
    return f"x_ptr:*fp32:16,r_ptr:*u32:16,y_ptr:*{'u16' if fmt[8] is np.uint16 else 'u8'}:16," \
           f"N={n},DST={fmt[0]},BITS={fmt[7]}"


def cvts(ptx, name):
    form = FORMATS[name][9]
    if form.endswith("x4"):
        pattern = (r"cvt\.rs\.satfinite\." + form + r"\.f32 (%r\d+), \{(%f\d+), (%f\d+), (%f\d+), "
                   r"(%f\d+)\}, (%r\d+);")
    else:
        pattern = r"cvt\.rs\.satfinite\." + form + r"\.f32 (%r\d+), (%f\d+), (%f\d+), (%r\d+);"
    return re.findall(pattern, ptx)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n,num_warps,per_thread", [(256, 1, 8), (256, 4, 2), (32, 1, 1)])
def test_ptx_pairs_a_threads_elements_and_assembles(ptxas, name, n, num_warps, per_thread):
    ptx = compile_here("stoch_round_bits", bits_sig(name, n), num_warps=num_warps)
    found = cvts(ptx, name)
    assert len(found) == (per_thread + 1) // 2, ptx
    assert "cvt.rs" in ptx and len(re.findall(r"cvt\.rs\.", ptx)) == len(found), ptx
    prmts = re.findall(r"prmt\.b32 (%r\d+), (%r\d+), (%r\d+), 0x5410;", ptx)
    assert len(prmts) == len(found), ptx
    by_dest = {d: (lo, hi) for d, lo, hi in prmts}
    for c in found:
        rbits = c[-1]
        assert rbits in by_dest, ptx
        if FORMATS[name][9].endswith("x4"):
            zero, first, zero2, second = c[1:5]
            # The pair in operands b and f, zeros (one register) in a and e.
            assert zero == zero2 and re.search(rf"mov\.f32 {zero}, 0f00000000;", ptx), ptx
        else:
            first, second = c[1:3]
        if per_thread == 1:
            # A lone element pairs with itself, its random word in both halves.
            assert first == second and by_dest[rbits][0] == by_dest[rbits][1], ptx
        else:
            assert first != second and by_dest[rbits][0] != by_dest[rbits][1], ptx
    ptxas(ptx, arch="sm_100a")


@pytest.mark.parametrize("name", NAMES)
def test_ptx_of_masked_tiles_and_scalars_assembles(ptxas, name):
    fmt = FORMATS[name]
    dst = f"DST={fmt[0]},BITS={fmt[7]}"
    y = "u16" if fmt[8] is np.uint16 else "u8"
    for kernel, sig, warps in [
            ("stoch_round_masked", f"x_ptr:*fp32:16,r_ptr:*u32:16,y_ptr:*{y}:16,SIZE=65,N=128,"
             + dst, 1),
            ("stoch_round_2d", f"x_ptr:*fp32:16,r_ptr:*u32:16,y_ptr:*{y}:16,R=16,C=8," + dst, 4),
            ("stoch_round_scalar", f"x_ptr:*fp32:16,r_ptr:*u32:16,y_ptr:*{y}:16," + dst, 4)]:
        ptx = compile_here(kernel, sig, num_warps=warps)
        assert cvts(ptx, name), (kernel, ptx)
        ptxas(ptx, arch="sm_100a")


def call_loc(kernel, text, arg=None):
    """FILE:LINE:COL of `arg` (or of the call `text` itself) on the line holding `text`."""
    lines, first = inspect.getsourcelines(kernel.fn if hasattr(kernel, "fn") else kernel)
    for i, line in enumerate(lines):
        if text in line:
            col = line.index(arg if arg else text) + 1
            return f"{KERNELS.name}:{first + i}:{col}:"
    raise AssertionError(text)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_other_targets_are_refused_at_the_call(target):
    with pytest.raises(Exception) as e:
        compile_here("stoch_round_bits", bits_sig("fp16", 256), target=target)
    msg = str(e.value)
    assert "tlx.stoch_round needs sm_100a" in msg and target in msg, msg
    assert call_loc(sk.stoch_round_bits, "tlx.stoch_round(") in msg, msg


BAD = "x_ptr:*fp32:16,y_ptr:*fp32:16,N=64,SRC={src},DST={dst},RB={rb},RN={rn}"


@pytest.mark.parametrize("src,dst,rb,rn,arg,fragment", [
    ("tl.float16", "tl.float8e5", "tl.uint32", 64, "x,",
     "tlx.stoch_round rounds float32 values (stochastic rounding from fp32 only); src is "
     "tensor<64xfp16>"),
    ("tl.bfloat16", "tl.float16", "tl.uint32", 64, "x,", "src is tensor<64xbf16>"),
    ("tl.float32", "tl.int32", "tl.uint32", 64, "DST",
     "stochastic rounding to int32 is not supported; dst_dtype must be tl.float8e5, "
     "tl.float8e4nv, tl.float16 or tl.bfloat16"),
    ("tl.float32", "tl.float32", "tl.uint32", 64, "DST", "stochastic rounding to float32"),
    ("tl.float32", "tl.float8e4b15", "tl.uint32", 64, "DST", "stochastic rounding to float8e4b15"),
    ("tl.float32", "tl.float16", "tl.int64", 64, "r)",
     "rand_bits must be 32-bit integers, one per element (uint32, as tl.randint gives); got "
     "tensor<64xi64>"),
    ("tl.float32", "tl.float16", "tl.uint16", 64, "r)", "got tensor<64xu16>"),
    ("tl.float32", "tl.float16", "tl.float32", 64, "r)", "got tensor<64xfp32>"),
    ("tl.float32", "tl.float16", "tl.int32", 32, "r)",
     "rand_bits is tensor<32xi32>; it must have src's shape (tensor<64xfp32>)"),
])
def test_invalid_arguments_are_located_errors(src, dst, rb, rn, arg, fragment):
    with pytest.raises(Exception) as e:
        compile_here("stoch_round_bad", BAD.format(src=src, dst=dst, rb=rb, rn=rn))
    msg = str(e.value)
    assert fragment in msg, msg
    assert call_loc(sk.stoch_round_bad, "tlx.stoch_round(", arg) in msg, msg


def test_a_scalar_word_for_a_tensor_is_refused():
    with pytest.raises(Exception) as e:
        compile_here("stoch_round_scalar_bits", "x_ptr:*fp32:16,y_ptr:*fp32:16,N=64")
    msg = str(e.value)
    assert "src and rand_bits must both be tensors or both scalars" in msg, msg
    assert call_loc(sk.stoch_round_scalar_bits, "tlx.stoch_round(", "tl.load(x_ptr).") in msg, msg


def test_wrong_argument_kinds():
    # A dtype that is not one, and a missing argument, are errors at the call.
    call = "    tl.store(y_ptr, tlx.stoch_round(x, x, 1).to(tl.float32))\n"
    src = ("import warpweave as ww\nimport warpweave.language as tl\n"
           "import warpweave.language.extra.tlx as tlx\n\n\n@ww.jit\n"
           "def k(x_ptr, y_ptr):\n"
           "    x = tl.load(x_ptr)\n" + call)
    with pytest.raises(Exception) as e:
        native_loader.native().compile([("k.py", src)], "k", "x_ptr:*fp32,y_ptr:*fp32", {},
                                       target="sm_100a", num_warps=4, stage="ptx")
    msg = str(e.value)
    assert f"k.py:9:{call.index('x, 1') + 1}:" in msg and "dst_dtype must be a dtype" in msg, msg
