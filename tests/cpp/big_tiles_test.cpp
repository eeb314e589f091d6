// Tests of big tiles: conversions through shared memory in rounds (layout::conversionRounds)
// checked element by element against the full layouts, and that a conversion too large for one
// pass reserves a bounded scratch.
#include "layout/Layouts.h"
#include "layout/LinearLayout.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

using namespace ww;
using namespace ww::layout;

namespace {

/// Every (round, thread, per-round register) of one side names the element that the full
/// layout gives the full register, projected; the dropped coordinate bits spell the round.
/// Returns, per round, the full coordinates that side touches.
std::vector<std::set<std::vector<int32_t>>> checkSide(const ConversionRounds& plan,
                                                      const LinearLayout& full, bool ofSrc) {
  const LinearLayout& part = ofSrc ? plan.src : plan.dst;
  std::vector<std::set<std::vector<int32_t>>> touched(plan.rounds());
  int32_t lanes = full.getInDimSize(kLane), warps = full.getInDimSize(kWarp);
  EXPECT_EQ(part.getInDimSize(kRegister) * plan.rounds(), full.getInDimSize(kRegister));
  for (int64_t round = 0; round < plan.rounds(); ++round)
    for (int32_t w = 0; w < warps; ++w)
      for (int32_t l = 0; l < lanes; ++l)
        for (int32_t r = 0; r < part.getInDimSize(kRegister); ++r) {
          int32_t fr = plan.fullRegister(r, round, ofSrc);
          std::vector<int32_t> c = full.apply({fr, l, w});
          EXPECT_EQ(plan.project(c), part.apply({r, l, w}));
          for (size_t i = 0; i < plan.dropped.size(); ++i) {
            auto [d, bit] = plan.dropped[i];
            EXPECT_EQ((c[d] & bit) != 0, ((round >> i) & 1) != 0);
          }
          touched[round].insert(c);
        }
  return touched;
}

TEST(ConversionRounds, WgmmaAccumulatorToBlockedGoesInBoundedRounds) {
  // The 512x512 result of a wgmma tl.dot (4 warps) stored through a coalesced layout.
  LinearLayout acc = wgmmaAccumulatorLayout({512, 512}, 256, {4, 1});
  LinearLayout blocked = defaultBlockedLayout({512, 512}, 4, 8);
  const int64_t limit = kMaxConversionScratchBytes / 2; // fp16 elements
  ConversionRounds plan = conversionRounds(acc, blocked, {0, 0}, limit);
  EXPECT_LE(plan.elements(), limit);
  EXPECT_EQ(plan.elements() * plan.rounds(), 512 * 512);
  EXPECT_GT(plan.rounds(), 1);
  auto wrote = checkSide(plan, acc, true);
  auto read = checkSide(plan, blocked, false);
  // Each round reads exactly what it wrote, and the per-round scratch holds it one to one.
  for (int64_t round = 0; round < plan.rounds(); ++round) {
    EXPECT_EQ(wrote[round], read[round]);
    EXPECT_EQ(static_cast<int64_t>(wrote[round].size()), plan.elements());
  }
  EXPECT_TRUE(plan.src.isSurjective());
  EXPECT_TRUE(plan.dst.isSurjective());
}

TEST(ConversionRounds, SmallConversionsStayOnePass) {
  LinearLayout acc = wgmmaAccumulatorLayout({128, 128}, 128, {4, 1});
  LinearLayout blocked = defaultBlockedLayout({128, 128}, 4, 8);
  ConversionRounds plan = conversionRounds(acc, blocked, {0, 0}, kMaxConversionScratchBytes / 4);
  EXPECT_EQ(plan.rounds(), 1);
  EXPECT_EQ(plan.src, acc);
  EXPECT_EQ(plan.dst, blocked);
}

TEST(ConversionRounds, TransposedBlockedLayoutsShareOnlyRegisterBits) {
  // Row-major and column-major blocked layouts of a 256x256 fp32 tile: rounds iterate bits both
  // keep in registers; the result must still cover the tile exactly once per round.
  LinearLayout rows = blockedLayout({256, 256}, {1, 4}, {1, 32}, {4, 1}, {1, 0});
  LinearLayout cols = blockedLayout({256, 256}, {4, 1}, {32, 1}, {1, 4}, {0, 1});
  ConversionRounds plan = conversionRounds(rows, cols, {0, 0}, 16 * 1024);
  EXPECT_EQ(plan.elements() * plan.rounds(), 256 * 256);
  EXPECT_LE(plan.elements(), 16 * 1024);
  EXPECT_EQ(plan.rounds(), 4); // row 128 and column 128: registers in both
  auto wrote = checkSide(plan, rows, true);
  auto read = checkSide(plan, cols, false);
  for (int64_t round = 0; round < plan.rounds(); ++round) EXPECT_EQ(wrote[round], read[round]);
}

TEST(ConversionRounds, ConstantBitsAreNeverIterated) {
  LinearLayout acc = wgmmaAccumulatorLayout({512, 512}, 256, {4, 1});
  LinearLayout blocked = defaultBlockedLayout({512, 512}, 4, 8);
  ConversionRounds plan = conversionRounds(acc, blocked, {256, 0}, 32 * 1024);
  for (auto [d, bit] : plan.dropped) EXPECT_FALSE(d == 0 && bit == 256);
  EXPECT_EQ(plan.project({256, 0})[0] != 0, true);
}

} // namespace
