// Small integer helpers every stage uses (layouts, codegen, the specializer, the passes), defined
// once here rather than in each file that needs them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace ww {

/// Whether v is 1, 2, 4, ... (zero and negatives are not).
constexpr bool isPowerOf2(int64_t v) {
  return v > 0 && (v & (v - 1)) == 0;
}

/// v rounded up to a multiple of a (a > 0; v >= 0).
constexpr int64_t alignTo(int64_t v, int64_t a) {
  return (v + a - 1) / a * a;
}

/// The lowest offset, a multiple of `alignment`, where `size` units overlap none of the
/// [begin, end) intervals of `busy`: first-fit placement (shared-memory tenants, the pipeliner's
/// tensor-memory columns).
inline int64_t firstFitOffset(std::vector<std::pair<int64_t, int64_t>> busy, int64_t size,
                              int64_t alignment) {
  std::sort(busy.begin(), busy.end());
  int64_t at = 0;
  for (const auto& [lo, hi] : busy) {
    if (alignTo(at, alignment) + size <= lo) break;
    at = std::max(at, hi);
  }
  return alignTo(at, alignment);
}

/// Multiplier and shift that turn a 32-bit division by a constant into a multiply-high (Hacker's
/// Delight, chapter 10): ptxas expands div / rem by an immediate into a reciprocal-based division
/// (I2F, MUFU.RCP, a chain of IMADs) instead.
struct DivisionMagic {
  uint32_t multiplier = 0;
  int shift = 0;
};

/// For signed division by d >= 2: q = mulhi.s32(n, multiplier), plus n when the multiplier is
/// negative as an int32, shifted right arithmetically by `shift`, plus 1 when n < 0.
constexpr DivisionMagic signedDivisionMagic(uint32_t d) {
  const uint32_t two31 = 0x80000000u;
  const uint32_t anc = two31 - 1 - two31 % d;
  int p = 31;
  uint32_t q1 = two31 / anc, r1 = two31 - q1 * anc;
  uint32_t q2 = two31 / d, r2 = two31 - q2 * d;
  uint32_t delta = 0;
  do {
    ++p;
    q1 *= 2;
    r1 *= 2;
    if (r1 >= anc) ++q1, r1 -= anc;
    q2 *= 2;
    r2 *= 2;
    if (r2 >= d) ++q2, r2 -= d;
    delta = d - r2;
  } while (q1 < delta || (q1 == delta && r1 == 0));
  return {q2 + 1, p - 32};
}

/// For unsigned division by d >= 2, not a power of two (Granlund and Montgomery):
/// t = mulhi.u32(n, multiplier), q = (t + ((n - t) >> 1)) >> shift.
constexpr DivisionMagic unsignedDivisionMagic(uint32_t d) {
  int l = 0;
  while (l < 32 && (uint64_t(1) << l) < d) ++l;
  uint64_t m = ((uint64_t(1) << 32) * ((uint64_t(1) << l) - d)) / d + 1;
  return {static_cast<uint32_t>(m), l - 1};
}

} // namespace ww
