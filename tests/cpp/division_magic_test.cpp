// Division of 32-bit integers by a constant through a multiply-high (support/MathExtras.h, used by
// codegen/ScalarOps.cpp): the instruction sequence the codegen emits, replayed here step by step,
// gives the truncating quotient for every divisor tried and for dividends at the edges of the
// range and spread over it.
#include "support/MathExtras.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace ww;

namespace {

/// mul.hi.s32 / add.s32 / shr.s32 / shr.u32 / add.s32, as ScalarOps.cpp emits them.
int32_t signedQuotient(int32_t n, uint32_t d) {
  DivisionMagic m = signedDivisionMagic(d);
  int32_t q =
      static_cast<int32_t>((int64_t(n) * int64_t(static_cast<int32_t>(m.multiplier))) >> 32);
  if (static_cast<int32_t>(m.multiplier) < 0) q = static_cast<int32_t>(uint32_t(q) + uint32_t(n));
  q >>= m.shift;
  return static_cast<int32_t>(uint32_t(q) + (uint32_t(n) >> 31));
}

/// mul.hi.u32 / sub / shr.u32 1 / add / shr.u32, as ScalarOps.cpp emits them.
uint32_t unsignedQuotient(uint32_t n, uint32_t d) {
  DivisionMagic m = unsignedDivisionMagic(d);
  uint32_t hi = static_cast<uint32_t>((uint64_t(n) * m.multiplier) >> 32);
  return (hi + ((n - hi) >> 1)) >> m.shift;
}

std::vector<uint32_t> divisors() {
  std::vector<uint32_t> ds;
  for (uint32_t d = 3; d < 1000; ++d)
    if (!isPowerOf2(d)) ds.push_back(d);
  for (uint32_t d : {641u, 1000003u, 0x7ffffu, 0x40000001u, 0x55555555u, 0x7ffffffeu, 0x7fffffffu})
    ds.push_back(d);
  return ds;
}

std::vector<uint32_t> dividends() {
  std::vector<uint32_t> ns;
  for (int64_t v = -300; v <= 300; ++v) ns.push_back(static_cast<uint32_t>(v));
  for (uint32_t v : {0x7fffffffu, 0x80000000u, 0x80000001u, 0xfffffffeu, 0x7ffffffeu, 0x40000000u})
    ns.push_back(v);
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) ns.push_back(rng());
  return ns;
}

} // namespace

TEST(DivisionMagic, SignedQuotientsTruncate) {
  for (uint32_t d : divisors())
    for (uint32_t u : dividends()) {
      int32_t n = static_cast<int32_t>(u);
      ASSERT_EQ(signedQuotient(n, d), n / int32_t(d)) << n << " / " << d;
    }
}

TEST(DivisionMagic, UnsignedQuotients) {
  std::vector<uint32_t> ds = divisors();
  for (uint32_t d : {0x80000001u, 0xfffffffdu, 0xffffffffu, 0xc0000000u + 5}) ds.push_back(d);
  for (uint32_t d : ds)
    for (uint32_t n : dividends()) ASSERT_EQ(unsignedQuotient(n, d), n / d) << n << " / " << d;
}

TEST(DivisionMagic, KnownMultipliers) {
  // Hacker's Delight, table 10-1: 3 -> 0x55555556 >> 0, 7 -> 0x92492493 >> 2.
  EXPECT_EQ(signedDivisionMagic(3).multiplier, 0x55555556u);
  EXPECT_EQ(signedDivisionMagic(3).shift, 0);
  EXPECT_EQ(signedDivisionMagic(7).multiplier, 0x92492493u);
  EXPECT_EQ(signedDivisionMagic(7).shift, 2);
}
