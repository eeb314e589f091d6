"""A NumPy model of Triton's random numbers (tl.randint / randint4x / rand / randn / philox /
philox_impl / uint_to_uniform_float / pair_uniform_to_normal), written from the Philox
definition (Salmon et al., SC'11) and Triton's documented contract, independently of the
compiler: the tests compare warpweave's results with it bit for bit."""

import numpy as np

MASK32 = (1 << 32) - 1
MASK64 = (1 << 64) - 1

# (round multiplier for word 0, round multiplier for word 2, key increment 0, key increment 1)
PHILOX_4X32 = (0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85)
PHILOX_4X64 = (0xD2E7470EE14C6C93, 0xCA5A826395121157, 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B)


def philox4x32(c0, c1, c2, c3, k0, k1, rounds=10):
    """Philox 4x32 on arrays of 32-bit words (any integer dtype, read modulo 2**32): the four
    result words as uint32 arrays. Products are formed in uint64, where 32x32 bits fit."""
    m0, m2, inc0, inc1 = (np.uint64(x) for x in PHILOX_4X32)
    w = [np.asarray(c).astype(np.uint64) & np.uint64(MASK32) for c in (c0, c1, c2, c3)]
    k = [np.uint64(int(x) & MASK32) for x in (k0, k1)]
    lo32 = np.uint64(MASK32)
    for _ in range(rounds):
        p0 = m0 * w[0]
        p2 = m2 * w[2]
        w = [(p2 >> np.uint64(32)) ^ w[1] ^ k[0], p2 & lo32,
             (p0 >> np.uint64(32)) ^ w[3] ^ k[1], p0 & lo32]
        k = [(k[0] + inc0) & lo32, (k[1] + inc1) & lo32]
    return tuple(x.astype(np.uint32) for x in w)


def philox4x64(c0, c1, c2, c3, k0, k1, rounds=10):
    """Philox 4x64 with Python integers, element by element (128-bit products): uint64 arrays."""
    m0, m2, inc0, inc1 = PHILOX_4X64
    cols = [np.broadcast_to(np.asarray(c), np.broadcast(c0, c1, c2, c3).shape).ravel()
            for c in (c0, c1, c2, c3)]
    out = [[], [], [], []]
    for j in range(cols[0].size):
        w = [int(col[j]) & MASK64 for col in cols]
        a, b = int(k0) & MASK64, int(k1) & MASK64
        for _ in range(rounds):
            p0, p2 = m0 * w[0], m2 * w[2]
            w = [(p2 >> 64) ^ w[1] ^ a, p2 & MASK64, (p0 >> 64) ^ w[3] ^ b, p0 & MASK64]
            a, b = (a + inc0) & MASK64, (b + inc1) & MASK64
        for i in range(4):
            out[i].append(w[i])
    shape = np.broadcast(c0, c1, c2, c3).shape
    return tuple(np.array(o, dtype=np.uint64).reshape(shape) for o in out)


def seed_key(seed):
    """The two 32-bit key words of a seed: its low and high words as a 64-bit two's-complement
    integer (a negative seed is sign-extended first)."""
    s = int(seed) & MASK64
    return s & MASK32, s >> 32


def randint4x(seed, offsets, rounds=10):
    """Counter (offset's low word, its high word for 64-bit offsets, 0, 0), key from the seed."""
    offsets = np.asarray(offsets)
    lo = offsets.astype(np.uint64) & np.uint64(MASK32)  # signed ones sign-extend first
    if offsets.dtype.itemsize > 4:
        hi = (offsets >> offsets.dtype.type(32)).astype(np.uint64) & np.uint64(MASK32)
    else:
        hi = np.zeros(offsets.shape, np.uint64)
    zero = np.zeros(offsets.shape, np.uint64)
    k0, k1 = seed_key(seed)
    return philox4x32(lo, hi, zero, zero, k0, k1, rounds)


def randint(seed, offsets, rounds=10):
    return randint4x(seed, offsets, rounds)[0]


def uint_to_uniform_float(x):
    """A 32- or 64-bit integer read as signed, x < 0 folded to ~x, times the largest scale that
    keeps the result below 1 in float32: float32 in [0, 1)."""
    x = np.asarray(x)
    wide = x.dtype.itemsize == 8
    s = x.view(np.int64 if wide else np.int32)
    s = np.where(s < 0, ~s, s)
    scale = np.float32(1.0842020432385337e-19 if wide else 4.6566127342e-10)
    return s.astype(np.float32) * scale


def rand(seed, offsets, rounds=10):
    return uint_to_uniform_float(randint(seed, offsets, rounds))


def pair_uniform_to_normal(u1, u2):
    """Box-Muller in float64 (the kernel's float32 log / sqrt / cos / sin are compared with a
    tolerance)."""
    u1 = np.maximum(np.float32(1.0e-7), np.asarray(u1, np.float32)).astype(np.float64)
    th = np.float64(np.float32(6.283185307179586) * np.asarray(u2, np.float32))
    r = np.sqrt(-2.0 * np.log(u1))
    return r * np.cos(th), r * np.sin(th)


def randn(seed, offsets, rounds=10):
    i = randint4x(seed, offsets, rounds)
    return pair_uniform_to_normal(uint_to_uniform_float(i[0]), uint_to_uniform_float(i[1]))[0]


def offsets_of(dtype, n=256, base=0):
    """n offsets of `dtype` from `base`, with the dtype's extremes mixed in."""
    info = np.iinfo(dtype)
    x = (np.arange(n, dtype=np.int64) + base).astype(dtype)
    x[-4:] = [info.min, info.max, info.min + 1, info.max // 3]
    return x
