// Tests of src/layout: LinearLayout algebra against brute-force enumeration, the concrete layouts
// against the PTX ISA fragment tables and the swizzle definitions, the bank-conflict model,
// AxisInfo on realistic index computations, and layout assignment of whole kernels built with
// ir::Builder.
#include "frontend/Diagnostics.h"
#include "frontend/Parser.h"
#include "ir/Builder.h"
#include "layout/AxisInfo.h"
#include "layout/LayoutAssignment.h"
#include "layout/Layouts.h"
#include "layout/LinearLayout.h"
#include "specialize/Specializer.h"
#include "transforms/Passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

using namespace ww;
using namespace ww::layout;
using ir::DType;
using ir::OpCode;
using ir::Type;
using LL = LinearLayout;

namespace ww::layout {
// Readable gtest failure messages.
void PrintTo(const LinearLayout& l, std::ostream* os) {
  *os << "\n" << l.str();
}
} // namespace ww::layout

namespace {

/// Enumerates every input of `l` (in dim order, first dim fastest) and calls fn(ins, outs).
template <typename F> void forEachInput(const LL& l, F fn) {
  int64_t total = l.getTotalInDimSize();
  for (int64_t flat = 0; flat < total; ++flat) {
    std::vector<int32_t> ins;
    int64_t rest = flat;
    for (const auto& name : l.inDimNames()) {
      int32_t size = l.getInDimSize(name);
      ins.push_back(static_cast<int32_t>(rest % size));
      rest /= size;
    }
    fn(ins, l.apply(ins));
  }
}

/// A random layout with the given in dims (log2 sizes) and out dims (log2 sizes).
LL randomLayout(std::mt19937& rng, const std::vector<std::pair<std::string, int>>& ins,
                const std::vector<std::pair<std::string, int>>& outs) {
  LL::Bases bases;
  for (const auto& [name, bits] : ins) {
    std::vector<std::vector<int32_t>> dim;
    for (int b = 0; b < bits; ++b) {
      std::vector<int32_t> basis;
      for (const auto& [oname, obits] : outs)
        basis.push_back(static_cast<int32_t>(rng() & ((1u << obits) - 1)));
      dim.push_back(basis);
    }
    bases.emplace_back(name, dim);
  }
  LL::NamedSizes outDims;
  for (const auto& [name, bits] : outs) outDims.emplace_back(name, 1 << bits);
  return LL(bases, outDims);
}

/// A random bijective layout: a random invertible matrix built from row operations on the
/// identity, so every input bit maps somewhere and the map stays full rank.
LL randomBijection(std::mt19937& rng, int inBitsA, int inBitsB) {
  int n = inBitsA + inBitsB;
  std::vector<uint32_t> cols(n);
  for (int i = 0; i < n; ++i) cols[i] = 1u << i;
  for (int step = 0; step < 4 * n; ++step) {
    int a = rng() % n, b = rng() % n;
    if (a != b) cols[a] ^= cols[b];
  }
  std::shuffle(cols.begin(), cols.end(), rng);
  // Split the n output bits into out dims "x" (3 bits) and "y" (rest).
  int xBits = std::min(3, n);
  LL::Bases bases;
  std::vector<std::vector<int32_t>> a, b;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> basis{static_cast<int32_t>(cols[i] & ((1u << xBits) - 1)),
                               static_cast<int32_t>(cols[i] >> xBits)};
    (i < inBitsA ? a : b).push_back(basis);
  }
  bases.emplace_back("p", a);
  bases.emplace_back("q", b);
  return LL(bases, LL::NamedSizes{{"x", 1 << xBits}, {"y", 1 << (n - xBits)}});
}

// ---------------------------------------------------------------------------------------------
// algebra
// ---------------------------------------------------------------------------------------------

TEST(LinearLayout, OneDimensionalConstructors) {
  LL id = LL::identity1D(8, "in", "out");
  for (int32_t i = 0; i < 8; ++i) EXPECT_EQ(id.apply(std::vector<int32_t>{i})[0], i);
  LL z = LL::zeros1D(8, "in", "out");
  EXPECT_EQ(z.getOutDimSize("out"), 1);
  for (int32_t i = 0; i < 8; ++i) EXPECT_EQ(z.apply(std::vector<int32_t>{i})[0], 0);
  LL s = LL::strided1D(4, 8, "in", "out");
  EXPECT_EQ(s.getOutDimSize("out"), 32);
  for (int32_t i = 0; i < 4; ++i) EXPECT_EQ(s.apply(std::vector<int32_t>{i})[0], 8 * i);
  EXPECT_THROW(LL::identity1D(6, "in", "out"), std::logic_error);
}

TEST(LinearLayout, ProductStacksOuterAboveInner) {
  // register -> dim0 (4), lane -> dim0 (8) above it, lane -> dim1 (2) next.
  LL l = LL::identity1D(4, "register", "dim0") * LL::identity1D(8, "lane", "dim0") *
         LL::identity1D(2, "lane", "dim1");
  EXPECT_EQ(l.getOutDimSize("dim0"), 32);
  EXPECT_EQ(l.getOutDimSize("dim1"), 2);
  EXPECT_EQ(l.getInDimSize("lane"), 16);
  forEachInput(l, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
    EXPECT_EQ(out[0], in[0] + 4 * (in[1] % 8));
    EXPECT_EQ(out[1], in[1] / 8);
  });
}

TEST(LinearLayout, ComposeMatchesBruteForce) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 20; ++trial) {
    LL inner = randomLayout(rng, {{"a", 3}, {"b", 2}}, {{"x", 3}, {"y", 2}});
    LL outer = randomLayout(rng, {{"x", 3}, {"y", 2}}, {{"u", 4}, {"v", 1}});
    LL c = inner.compose(outer);
    forEachInput(inner, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& mid) {
      EXPECT_EQ(c.apply(in), outer.apply(mid));
    });
  }
}

TEST(LinearLayout, InvertRoundTripsBijections) {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 20; ++trial) {
    LL l = randomBijection(rng, 3, 3);
    ASSERT_TRUE(l.isSurjective() && l.isInjective());
    LL inv = l.invert();
    std::set<std::vector<int32_t>> images;
    forEachInput(l, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
      images.insert(out);
      auto back = inv.apply(out);
      EXPECT_EQ(back, in);
    });
    EXPECT_EQ(static_cast<int64_t>(images.size()), l.getTotalOutDimSize());
  }
}

TEST(LinearLayout, PseudoinvertIsARightInverseWithFreeBitsZero) {
  std::mt19937 rng(3);
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    LL l = randomLayout(rng, {{"register", 3}, {"lane", 3}}, {{"x", 2}, {"y", 2}});
    if (!l.isSurjective()) {
      EXPECT_THROW(l.pseudoinvert(), std::logic_error);
      continue;
    }
    ++checked;
    LL p = l.pseudoinvert();
    int32_t freeRegs = l.freeVariableMask("register"), freeLanes = l.freeVariableMask("lane");
    forEachInput(p, [&](const std::vector<int32_t>& y, const std::vector<int32_t>& x) {
      EXPECT_EQ(l.apply(x), y);
      EXPECT_EQ(x[0] & freeRegs, 0);
      EXPECT_EQ(x[1] & freeLanes, 0);
    });
  }
  EXPECT_GT(checked, 5);
}

TEST(LinearLayout, InvertAndComposeFindsTheHolderOfEachElement) {
  // Two different distributions of a 16x16 tensor over 4 registers x 32 lanes x 2 warps.
  LL src = blockedLayout({16, 16}, {1, 4}, {8, 4}, {2, 1}, {1, 0});
  LL dst = blockedLayout({16, 16}, {4, 1}, {4, 8}, {1, 2}, {0, 1});
  LL c = src.invertAndCompose(dst);
  forEachInput(src, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
    EXPECT_EQ(dst.apply(c.apply(in)), out);
  });
}

TEST(LinearLayout, ReshapeTransposeSublayoutFlatten) {
  std::mt19937 rng(4);
  LL l = randomLayout(rng, {{"register", 2}, {"lane", 3}}, {{"x", 2}, {"y", 3}});
  // reshapeIns to one dim and back is the identity.
  LL flat = l.reshapeIns({{"all", 32}});
  EXPECT_EQ(flat.reshapeIns({{"register", 4}, {"lane", 8}}), l);
  forEachInput(l, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
    // Flattened outs: first out dim minor.
    int32_t f = flat.flattenOuts().apply(std::vector<int32_t>{in[0] + 4 * in[1]})[0];
    EXPECT_EQ(f, out[0] + 4 * out[1]);
    auto t = l.transposeOuts({"y", "x"}).apply(in);
    EXPECT_EQ(t[0], out[1]);
    EXPECT_EQ(t[1], out[0]);
  });
  EXPECT_EQ(l.reshapeOuts({{"z", 32}}).reshapeOuts({{"x", 4}, {"y", 8}}), l);
  LL sub = l.sublayout({"lane"}, {"y"});
  EXPECT_EQ(sub.numInDims(), 1);
  EXPECT_EQ(sub.numOutDims(), 1);
  for (int32_t lane = 0; lane < 8; ++lane)
    EXPECT_EQ(sub.apply(std::vector<int32_t>{lane})[0], l.apply(std::vector<int32_t>{0, lane})[1]);
  EXPECT_TRUE(l.transposeOuts({"y", "x"}).equalIgnoringDimOrder(l));
  EXPECT_FALSE(l.transposeOuts({"y", "x"}) == l);
}

TEST(LinearLayout, FreeVariablesAndConsecutiveRegisters) {
  // Registers: bits 0,1 -> columns 1,2; bit 2 duplicates bit 0 XOR bit 1; lane bit 4 is zero.
  LL l(LL::Bases{{"register", {{0, 1}, {0, 2}, {0, 3}}},
                 {"lane", {{0, 4}, {1, 0}, {2, 0}, {4, 0}, {0, 0}}}},
       LL::NamedSizes{{"dim0", 8}, {"dim1", 8}});
  EXPECT_EQ(l.freeVariableMask("register"), 0b100);
  EXPECT_EQ(l.freeVariableMask("lane"), 0b10000);
  EXPECT_EQ(l.numConsecutiveInOut(), 4);
  EXPECT_EQ(l.numConsecutiveInOut("dim1"), 4);
  EXPECT_EQ(l.numConsecutiveInOut("dim0"), 1);
  EXPECT_FALSE(l.isInjective());
  EXPECT_TRUE(l.isSurjective());
  EXPECT_NE(l.str().find("register: [0,1] [0,2] [0,3]"), std::string::npos);
}

TEST(LinearLayout, MalformedBasesAreRejected) {
  EXPECT_THROW(LL(LL::Bases{{"register", {{8}}}}, LL::NamedSizes{{"dim0", 8}}), std::logic_error);
  EXPECT_THROW(LL(LL::Bases{{"register", {{1, 0}}}}, LL::NamedSizes{{"dim0", 8}}),
               std::logic_error);
  EXPECT_THROW(LL::identity1D(4, "a", "x").invert().compose(LL::identity1D(2, "y", "z")),
               std::logic_error);
}

// ---------------------------------------------------------------------------------------------
// distributed layouts
// ---------------------------------------------------------------------------------------------

/// Triton's blocked layout written out directly (an independent reference): the coordinate of
/// (register, lane, warp) for a tensor that is an exact multiple of the CTA tile.
std::vector<int32_t>
blockedReference(const std::vector<int64_t>& shape, const std::vector<int32_t>& spt,
                 const std::vector<int32_t>& tpw, const std::vector<int32_t>& wpc,
                 const std::vector<int32_t>& order, int32_t reg, int32_t lane, int32_t warp) {
  size_t rank = shape.size();
  std::vector<int32_t> coord(rank, 0);
  // Decompose register into (within sizePerThread) then (repetition), both in `order`.
  int32_t r = reg;
  std::vector<int32_t> inThread(rank), rep(rank);
  for (int32_t d : order) {
    inThread[d] = r % spt[d];
    r /= spt[d];
  }
  for (int32_t d : order) {
    int32_t tile = spt[d] * tpw[d] * wpc[d];
    int32_t reps = static_cast<int32_t>(shape[d] / tile);
    rep[d] = r % reps;
    r /= reps;
  }
  int32_t l = lane, w = warp;
  for (int32_t d : order) {
    int32_t laneD = l % tpw[d];
    l /= tpw[d];
    int32_t warpD = w % wpc[d];
    w /= wpc[d];
    int32_t tile = spt[d] * tpw[d] * wpc[d];
    coord[d] = rep[d] * tile + warpD * spt[d] * tpw[d] + laneD * spt[d] + inThread[d];
  }
  return coord;
}

TEST(Layouts, BlockedMatchesReference) {
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int32_t> spt, tpw, wpc, order;
  };
  std::vector<Case> cases = {
      {{1024}, {4}, {32}, {4}, {0}},
      {{64, 64}, {1, 4}, {4, 8}, {4, 1}, {1, 0}},
      {{32, 128}, {2, 2}, {8, 4}, {2, 2}, {0, 1}},
      {{16, 8, 128}, {1, 1, 4}, {2, 2, 8}, {1, 2, 2}, {2, 0, 1}},
  };
  for (const Case& c : cases) {
    LL l = blockedLayout(c.shape, c.spt, c.tpw, c.wpc, c.order);
    EXPECT_TRUE(l.isInjective() && l.isSurjective()) << l.str();
    forEachInput(l, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
      EXPECT_EQ(out, blockedReference(c.shape, c.spt, c.tpw, c.wpc, c.order, in[0], in[1], in[2]));
    });
  }
}

TEST(Layouts, BlockedSmallerThanTileBroadcasts) {
  // 16 elements over 4 warps x 32 lanes: lanes 16.. and every warp hold copies.
  LL l = blockedLayout({16}, {1}, {32}, {4}, {0});
  EXPECT_EQ(l.getOutDimSize("dim0"), 16);
  EXPECT_EQ(l.freeVariableMask("lane"), 0b10000);
  EXPECT_EQ(l.freeVariableMask("warp"), 0b11);
  EXPECT_TRUE(l.isSurjective());
  // A register-sized excess is dropped, not duplicated.
  LL r = blockedLayout({4}, {8}, {1}, {1}, {0});
  EXPECT_EQ(r.getInDimSize("register"), 4);
}

TEST(Layouts, DefaultBlockedForVectorAdd) {
  LL l = defaultBlockedLayout({1024}, 4, 4);
  EXPECT_EQ(l, blockedLayout({1024}, {4}, {32}, {4}, {0}));
  EXPECT_EQ(l.getInDimSize("register"), 8);
  EXPECT_EQ(l.numConsecutiveInOut(), 4);
}

TEST(Layouts, SliceProjectsTheParent) {
  LL parent = blockedLayout({32, 64}, {1, 4}, {4, 8}, {2, 2}, {1, 0});
  for (int dim = 0; dim < 2; ++dim) {
    LL s = sliceLayout(parent, dim);
    ASSERT_EQ(s.numOutDims(), 1);
    EXPECT_EQ(s.getOutDimSize("dim0"), parent.getOutDimSize(dimName(1 - dim)));
    // Every thread's slice elements are exactly the projections of its parent elements.
    std::map<std::pair<int32_t, int32_t>, std::set<int32_t>> parentProj, sliceElems;
    forEachInput(parent, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
      parentProj[{in[1], in[2]}].insert(out[1 - dim]);
    });
    forEachInput(s, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
      sliceElems[{in[1], in[2]}].insert(out[0]);
    });
    EXPECT_EQ(parentProj, sliceElems);
    // No duplicated registers remain.
    EXPECT_EQ(s.freeVariableMask("register"), 0);
  }
  // expand_dims of the slice broadcasts back to the parent without data movement.
  LL back = expandDimsLayout(sliceLayout(parent, 1), 1);
  EXPECT_EQ(layoutShape(back), (std::vector<int64_t>{32, 1}));
  EXPECT_TRUE(isBroadcastWithoutMovement(back, parent));
  EXPECT_FALSE(
      isBroadcastWithoutMovement(back, blockedLayout({32, 64}, {4, 1}, {8, 4}, {1, 4}, {0, 1})));
  LL stretched = broadcastLayout(back, {32, 64});
  EXPECT_TRUE(isBroadcastWithoutMovement(back, stretched));
}

TEST(Layouts, PermuteAndReshapeKeepElementsInPlace) {
  LL l = blockedLayout({8, 32}, {1, 4}, {4, 8}, {2, 1}, {1, 0});
  LL p = permuteLayout(l, {1, 0});
  forEachInput(l, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
    auto q = p.apply(in);
    EXPECT_EQ(q[0], out[1]);
    EXPECT_EQ(q[1], out[0]);
  });
  LL r = reshapeLayout(l, {256});
  forEachInput(l, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
    EXPECT_EQ(r.apply(in)[0], out[0] * 32 + out[1]);
  });
}

TEST(Layouts, ConversionKinds) {
  LL a = blockedLayout({64, 64}, {1, 4}, {4, 8}, {4, 1}, {1, 0});
  EXPECT_EQ(conversionKind(a, a), ConversionKind::None);
  // Same threads, registers reordered: a register permutation.
  LL regsSwapped(
      LL::Bases{{"register",
                 {a.getBasis("register", 2), a.getBasis("register", 0), a.getBasis("register", 1),
                  a.getBasis("register", 3), a.getBasis("register", 4)}},
                {"lane", a.getBases()[1].second},
                {"warp", a.getBases()[2].second}},
      LL::NamedSizes{{"dim0", 64}, {"dim1", 64}});
  EXPECT_EQ(conversionKind(a, regsSwapped), ConversionKind::Registers);
  // Same warp rows, elements exchanged between lanes of each warp: shuffles.
  LL b = blockedLayout({64, 64}, {1, 2}, {4, 8}, {4, 1}, {1, 0});
  EXPECT_EQ(conversionKind(a, b), ConversionKind::WarpShuffle);
  // Warps along the other dim: shared memory.
  LL c = blockedLayout({64, 64}, {1, 4}, {4, 8}, {1, 4}, {1, 0});
  EXPECT_EQ(conversionKind(a, c), ConversionKind::SharedMemory);
}

/// Checks a shuffle plan element by element: every destination (register, lane, warp) reads, from
/// the source register and lane the plan names in its own warp, the element gatherMap names.
void expectShufflePlanMoves(const LL& src, const LL& gatherMap,
                            const std::vector<int32_t>& constant, int numWarps,
                            const WarpShufflePlan& plan) {
  ASSERT_EQ(plan.srcRegister.size(), size_t(gatherMap.getInDimSize("register")));
  ASSERT_EQ(plan.laneImages.size(), size_t(5 + std::countr_zero(unsigned(numWarps))));
  int32_t srcWarps = src.getInDimSize("warp");
  for (int32_t r = 0; r < gatherMap.getInDimSize("register"); ++r)
    for (int32_t lane = 0; lane < 32; ++lane)
      for (int32_t warp = 0; warp < numWarps; ++warp) {
        int32_t tid = lane | warp << 5, from = plan.laneXor[r], reg = plan.srcRegister[r];
        for (size_t i = 0; i < plan.laneImages.size(); ++i)
          if (tid >> i & 1) {
            from ^= plan.laneImages[i];
            reg ^= plan.registerImages[i];
          }
        ASSERT_GE(from, 0);
        ASSERT_LT(from, 32);
        ASSERT_LT(reg, src.getInDimSize("register"));
        auto got = src.apply({reg, from, warp & (srcWarps - 1)});
        auto want = gatherMap.apply({r, lane, warp & (gatherMap.getInDimSize("warp") - 1)});
        for (size_t d = 0; d < want.size(); ++d) want[d] ^= constant[d];
        ASSERT_EQ(got, want) << "register " << r << " lane " << lane << " warp " << warp;
      }
}

TEST(Layouts, WarpShufflePlanReadsEveryElementFromItsWarp) {
  // A row of indices held by every warp (lanes along it) moved into the row slice of a
  // [32, 128] tile whose rows are spread over registers, lane bit 4 and the warps.
  LL tile = blockedLayout({32, 128}, {1, 8}, {2, 16}, {4, 1}, {1, 0});
  LL rows = sliceLayout(tile, 1);
  LL loaded = blockedLayout({32}, {1}, {32}, {4}, {0});
  auto plan = warpShufflePlan(loaded, rows, {0}, 4);
  ASSERT_TRUE(plan.has_value());
  EXPECT_FALSE(plan->isLocal());
  expectShufflePlanMoves(loaded, rows, {0}, 4, *plan);
  // The same with a constant offset (split's second half, say) and 8 warps of copies.
  LL row64 = blockedLayout({64}, {2}, {32}, {8}, {0});
  LL sliced = sliceLayout(blockedLayout({64, 64}, {1, 4}, {4, 8}, {8, 1}, {1, 0}), 1);
  plan = warpShufflePlan(row64, sliced, {5}, 8);
  ASSERT_TRUE(plan.has_value());
  expectShufflePlanMoves(row64, sliced, {5}, 8, *plan);
  // Identical layouts: nothing moves.
  plan = warpShufflePlan(tile, tile, {0, 0}, 4);
  ASSERT_TRUE(plan.has_value());
  EXPECT_TRUE(plan->isLocal());
  expectShufflePlanMoves(tile, tile, {0, 0}, 4, *plan);
}

TEST(Layouts, WarpShufflePlanOfRandomLanePermutations) {
  // Destinations that mix each warp's lanes and registers at random (invertibly): always a plan.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    int numWarps = 1 << (trial % 3);
    LL src = blockedLayout({16, 64}, {1, 2}, {4, 8}, {numWarps, 1}, {1, 0});
    auto regs = src.getBases()[0].second, lanes = src.getBases()[1].second,
         warps = src.getBases()[2].second;
    // Random invertible lane mixing: each lane basis XORed with a random earlier one.
    std::vector<std::vector<int32_t>> newLanes = lanes;
    std::shuffle(newLanes.begin(), newLanes.end(), rng);
    for (size_t j = 1; j < newLanes.size(); ++j)
      if (rng() & 1)
        for (size_t d = 0; d < 2; ++d) newLanes[j][d] ^= newLanes[rng() % j][d];
    // Registers may pick up lane bases (another lane supplies them).
    std::vector<std::vector<int32_t>> newRegs = regs;
    for (auto& rb : newRegs)
      if (rng() & 1) {
        const auto& lb = lanes[rng() % lanes.size()];
        for (size_t d = 0; d < 2; ++d) rb[d] ^= lb[d];
      }
    LL dst(LL::Bases{{"register", newRegs}, {"lane", newLanes}, {"warp", warps}},
           LL::NamedSizes{{"dim0", 16}, {"dim1", 64}});
    // Rows 4 and 8 may be warp bits: the constant stays within what each warp holds.
    std::vector<int32_t> constant{int32_t(rng() % 4), int32_t(rng() % 64)};
    auto plan = warpShufflePlan(src, dst, constant, numWarps);
    ASSERT_TRUE(plan.has_value()) << "trial " << trial;
    expectShufflePlanMoves(src, dst, constant, numWarps, *plan);
  }
}

TEST(Layouts, WarpShufflePlanRefusesWhatShufflesCannotDo) {
  // Warps along the other dim: elements cross warps.
  LL a = blockedLayout({64, 64}, {1, 4}, {4, 8}, {4, 1}, {1, 0});
  LL c = blockedLayout({64, 64}, {1, 4}, {4, 8}, {1, 4}, {1, 0});
  EXPECT_FALSE(warpShufflePlan(a, c, {0, 0}, 4).has_value());
  // Elements only a warp of the source holds, wanted by every warp.
  LL spread = blockedLayout({128}, {1}, {32}, {4}, {0});
  LL everywhere = blockedLayout({128}, {4}, {32}, {1}, {0}).withInDimSize("warp", 4);
  EXPECT_FALSE(warpShufflePlan(spread, everywhere, {0}, 4).has_value());
}

TEST(Layouts, WarpShufflePlanPicksTheSourceRegisterPerLane) {
  // A transpose within one warp: which source register a lane needs depends on the lane.
  LL rowsInLanes = blockedLayout({32, 32}, {1, 1}, {1, 32}, {1, 1}, {1, 0});
  LL colsInLanes = blockedLayout({32, 32}, {1, 1}, {32, 1}, {1, 1}, {0, 1});
  auto plan = warpShufflePlan(rowsInLanes, colsInLanes, {0, 0}, 1);
  ASSERT_TRUE(plan.has_value());
  expectShufflePlanMoves(rowsInLanes, colsInLanes, {0, 0}, 1, *plan);
}

// ---------------------------------------------------------------------------------------------
// tensor-core layouts, checked against the PTX ISA fragment formulas
// ---------------------------------------------------------------------------------------------

TEST(Layouts, MmaSyncAccumulatorMatchesPtxTable) {
  // PTX ISA, mma.m16n8k16 accumulators: groupID = lane >> 2, tig = lane % 4;
  // row = groupID (c0, c1) or groupID + 8 (c2, c3); col = tig * 2 + (i & 1).
  LL l = mmaSyncAccumulatorLayout({16, 8}, {1, 1});
  EXPECT_EQ(l.getInDimSize("register"), 4);
  for (int32_t lane = 0; lane < 32; ++lane)
    for (int32_t i = 0; i < 4; ++i) {
      auto out = l.apply(std::vector<int32_t>{i, lane, 0});
      EXPECT_EQ(out[0], (lane >> 2) + (i >= 2 ? 8 : 0));
      EXPECT_EQ(out[1], (lane % 4) * 2 + (i & 1));
    }
  // Warps tile N first; the CTA tile repeats in registers over a larger tensor.
  LL big = mmaSyncAccumulatorLayout({64, 64}, {2, 2});
  EXPECT_TRUE(big.isInjective() && big.isSurjective());
  EXPECT_EQ(big.apply(std::vector<int32_t>{0, 0, 1}), (std::vector<int32_t>{0, 8}));
  EXPECT_EQ(big.apply(std::vector<int32_t>{0, 0, 2}), (std::vector<int32_t>{16, 0}));
  EXPECT_EQ(big.getInDimSize("register"), 4 * 2 * 4);
}

TEST(Layouts, MmaSyncOperandsMatchPtxTables) {
  // A, m16n8k16 f16: row = groupID for a0,a1,a4,a5 else +8; col = tig*2 + (i&1), +8 for i >= 4.
  LL a = mmaSyncOperandLayout(0, {16, 16}, {1, 1}, 16);
  for (int32_t lane = 0; lane < 32; ++lane)
    for (int32_t i = 0; i < 8; ++i) {
      auto out = a.apply(std::vector<int32_t>{i, lane, 0});
      EXPECT_EQ(out[0], (lane >> 2) + ((i % 4) >= 2 ? 8 : 0));
      EXPECT_EQ(out[1], (lane % 4) * 2 + (i & 1) + (i >= 4 ? 8 : 0));
    }
  // B, m16n8k16 f16: row(k) = tig*2 + (i&1), +8 for i >= 2; col(n) = groupID.
  LL b = mmaSyncOperandLayout(1, {16, 8}, {1, 1}, 16);
  for (int32_t lane = 0; lane < 32; ++lane)
    for (int32_t i = 0; i < 4; ++i) {
      auto out = b.apply(std::vector<int32_t>{i, lane, 0});
      EXPECT_EQ(out[0], (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0));
      EXPECT_EQ(out[1], lane >> 2);
    }
  // A, m16n8k8 tf32: row = groupID for a0,a2 else +8; col = tig for a0,a1, tig+4 for a2,a3.
  LL t = mmaSyncOperandLayout(0, {16, 8}, {1, 1}, 32);
  for (int32_t lane = 0; lane < 32; ++lane)
    for (int32_t i = 0; i < 4; ++i) {
      auto out = t.apply(std::vector<int32_t>{i, lane, 0});
      EXPECT_EQ(out[0], (lane >> 2) + (i % 2 ? 8 : 0));
      EXPECT_EQ(out[1], (lane % 4) + (i >= 2 ? 4 : 0));
    }
  // A, m16n8k32 8-bit: row = groupID for i in [0,4) or [8,12) else +8; col = tig*4 + (i&3),
  // +16 for i >= 8.
  LL e = mmaSyncOperandLayout(0, {16, 32}, {1, 1}, 8);
  for (int32_t lane = 0; lane < 32; ++lane)
    for (int32_t i = 0; i < 16; ++i) {
      auto out = e.apply(std::vector<int32_t>{i, lane, 0});
      EXPECT_EQ(out[0], (lane >> 2) + ((i % 8) >= 4 ? 8 : 0));
      EXPECT_EQ(out[1], (lane % 4) * 4 + (i & 3) + (i >= 8 ? 16 : 0));
    }
  // With 2x2 warps, A is shared by the two warps along N and B by the two along M.
  LL a4 = mmaSyncOperandLayout(0, {32, 16}, {2, 2}, 16);
  EXPECT_EQ(a4.freeVariableMask("warp"), 0b01);
  LL b4 = mmaSyncOperandLayout(1, {16, 16}, {2, 2}, 16);
  EXPECT_EQ(b4.freeVariableMask("warp"), 0b10);
}

/// (row, col) of fragment element i held by `lane` in one mma.sync instruction tile, from the
/// PTX ISA tables ("Matrix fragments for mma.m16n8k8 / k16 / k32"): operand 0 is A (rows M,
/// cols K), 1 is B (rows K, cols N), 2 the 16 x 8 accumulator.
std::pair<int64_t, int64_t> ptxFragmentElement(int operand, int elemBits, int32_t lane, int i) {
  int32_t group = lane >> 2, tig = lane % 4;
  if (operand == 2) return {group + (i >= 2 ? 8 : 0), tig * 2 + (i & 1)};
  if (elemBits == 32) { // m16n8k8 tf32
    if (operand == 0) return {group + (i % 2 ? 8 : 0), tig + (i >= 2 ? 4 : 0)};
    return {tig + (i >= 1 ? 4 : 0), group};
  }
  if (elemBits == 16) { // m16n8k16 f16 / bf16
    if (operand == 0) return {group + ((i % 4) >= 2 ? 8 : 0), tig * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
    return {tig * 2 + (i & 1) + (i >= 2 ? 8 : 0), group};
  }
  // m16n8k32 s8 / u8 (and e4m3 / e5m2): A rows groupID for a0..a3 and a8..a11, else +8;
  // cols tig * 4 + (i & 3), +16 for i >= 8. B rows tig * 4 + (i & 3), +16 for i >= 4.
  if (operand == 0) return {group + ((i % 8) >= 4 ? 8 : 0), tig * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
  return {tig * 4 + (i & 3) + (i >= 4 ? 16 : 0), group};
}

TEST(Layouts, MmaSyncFragmentIndexFollowsPtxTables) {
  // Every element of every lane's fragment lands at its own index, for each instruction shape,
  // and the register layouts put that element where the table says (8-bit B too).
  for (int bits : {8, 16, 32}) {
    int per = 32 / bits;
    int64_t instrK = 8 * per;
    for (int operand : {0, 1, 2}) {
      int count = operand == 0 ? 4 * per : operand == 1 ? 2 * per : 4;
      for (int32_t lane = 0; lane < 32; ++lane) {
        std::set<int> seen;
        for (int i = 0; i < count; ++i) {
          auto [row, col] = ptxFragmentElement(operand, bits, lane, i);
          EXPECT_EQ(mmaSyncFragmentIndex(operand, row, col, bits), i)
              << "operand " << operand << ", " << bits << "-bit, lane " << lane;
          // Coordinates of another tile of the same operand map to the same index.
          int64_t rowStep = operand == 1 ? instrK : 16, colStep = operand == 0 ? instrK : 8;
          EXPECT_EQ(mmaSyncFragmentIndex(operand, row + 3 * rowStep, col + 5 * colStep, bits), i);
          seen.insert(i);
        }
        EXPECT_EQ(static_cast<int>(seen.size()), count);
      }
      if (operand == 2) continue;
      std::vector<int64_t> shape =
          operand == 0 ? std::vector<int64_t>{16, instrK} : std::vector<int64_t>{instrK, 8};
      LL l = mmaSyncOperandLayout(operand, shape, {1, 1}, bits);
      ASSERT_EQ(l.getInDimSize("register"), count);
      for (int32_t lane = 0; lane < 32; ++lane)
        for (int32_t r = 0; r < count; ++r) {
          auto out = l.apply(std::vector<int32_t>{r, lane, 0});
          EXPECT_EQ(mmaSyncFragmentIndex(operand, out[0], out[1], bits), r)
              << "operand " << operand << ", " << bits << "-bit, lane " << lane;
          auto [row, col] = ptxFragmentElement(operand, bits, lane, r);
          EXPECT_EQ(out[0], row);
          EXPECT_EQ(out[1], col);
        }
    }
  }
}

TEST(Layouts, WgmmaAccumulatorMatchesPtxTable) {
  // wgmma m64nNk16 D: warp w of the group owns rows 16w..16w+15; row = 16w + groupID +
  // 8 * ((i >> 1) & 1); col = 8 * (i >> 2) + tig * 2 + (i & 1).
  LL l = wgmmaAccumulatorLayout({64, 64}, 64, {4, 1});
  EXPECT_EQ(l.getInDimSize("register"), 32);
  EXPECT_EQ(l.getInDimSize("warp"), 4);
  for (int32_t w = 0; w < 4; ++w)
    for (int32_t lane = 0; lane < 32; ++lane)
      for (int32_t i = 0; i < 32; ++i) {
        auto out = l.apply(std::vector<int32_t>{i, lane, w});
        EXPECT_EQ(out[0], 16 * w + (lane >> 2) + 8 * ((i >> 1) & 1));
        EXPECT_EQ(out[1], 8 * (i >> 2) + (lane % 4) * 2 + (i & 1));
      }
  // Two warp groups along M for a 128x128 tile with n=128 instructions.
  LL two = wgmmaAccumulatorLayout({128, 128}, 128, {8, 1});
  EXPECT_TRUE(two.isInjective() && two.isSurjective());
  EXPECT_EQ(two.apply(std::vector<int32_t>{0, 0, 4}), (std::vector<int32_t>{64, 0}));
  EXPECT_EQ(wgmmaInstrN(256, 1), 256);
  EXPECT_EQ(wgmmaInstrN(128, 2), 64);
  EXPECT_EQ(wgmmaInstrN(4, 1), 0);
  // The register A operand: per warp the mma.sync A fragment, warps stacked along M.
  LL a = wgmmaOperandALayout({64, 16}, {4, 1}, 16);
  LL frag = mmaSyncOperandLayout(0, {16, 16}, {1, 1}, 16);
  forEachInput(a, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
    auto f = frag.apply(std::vector<int32_t>{in[0], in[1], 0});
    EXPECT_EQ(out[0], f[0] + 16 * in[2]);
    EXPECT_EQ(out[1], f[1]);
  });
}

// ---------------------------------------------------------------------------------------------
// shared memory
// ---------------------------------------------------------------------------------------------

TEST(Layouts, NvmmaSwizzleMatchesCutlassDefinition) {
  // Swizzle<B,4,3> on byte addresses: bits [4, 4+B) ^= bits [7, 7+B), B = log2(swizzle / 16).
  for (int swizzle : {0, 32, 64, 128}) {
    for (int elemBytes : {1, 2, 4}) {
      int64_t cols = swizzle ? 2 * swizzle / elemBytes : 64, rows = 32;
      LL l = nvmmaSharedLayout({rows, cols}, elemBytes, swizzle);
      ASSERT_TRUE(l.isInjective() && l.isSurjective());
      LL toOffset = l.invert();
      int bits = swizzle ? __builtin_ctz(swizzle / 16) : 0;
      int64_t rowElems = swizzle ? swizzle / elemBytes : cols;
      for (int32_t r = 0; r < rows; ++r)
        for (int32_t c = 0; c < cols; ++c) {
          int64_t byte =
              ((c / rowElems) * rows * rowElems + r * rowElems + c % rowElems) * elemBytes;
          byte ^= ((byte >> 7) & ((1 << bits) - 1)) << 4;
          EXPECT_EQ(toOffset.apply(std::vector<int32_t>{r, c})[0], byte / elemBytes)
              << "swizzle " << swizzle << " elem " << elemBytes << " at " << r << "," << c;
        }
    }
  }
  // Known points of the 128-byte fp16 swizzle: row 1's first chunk moves to chunk 1, its
  // second chunk to chunk 0.
  LL sw = nvmmaSharedLayout({64, 64}, 2, 128).invert();
  EXPECT_EQ(sw.apply(std::vector<int32_t>{1, 0})[0], 64 + 8);
  EXPECT_EQ(sw.apply(std::vector<int32_t>{1, 8})[0], 64);
  EXPECT_EQ(sw.apply(std::vector<int32_t>{7, 0})[0], 7 * 64 + 7 * 8);
  EXPECT_EQ(sw.apply(std::vector<int32_t>{8, 0})[0], 8 * 64);
  EXPECT_EQ(nvmmaSwizzleBytes({64, 64}, 2), 128);
  EXPECT_EQ(nvmmaSwizzleBytes({64, 16}, 2), 32);
  EXPECT_EQ(nvmmaSwizzleBytes({64, 8}, 2), 0);
  EXPECT_THROW(nvmmaSharedLayout({64, 16}, 2, 128), std::logic_error);
}

/// The padded e2m1 tile of a mixed block-scaled MMA: byte b of the [rows, 2 cols] 128-byte
/// swizzled tile holds packed byte (b & 7) | (b >> 4) << 3 of its row, or padding (bit 3 set).
TEST(Layouts, Fp4PaddedLayoutLeavesEightBytesOfEverySixteenEmpty) {
  const int64_t rows = 16, cols = 128;
  LL l = fp4PaddedSharedLayout(rows, cols);
  LL padded = nvmmaSharedLayout({rows, 2 * cols}, 1, 128);
  EXPECT_EQ(l.getInDimSize(kOffset), rows * 2 * cols);
  EXPECT_FALSE(l.isInjective());
  EXPECT_TRUE(l.isSurjective());
  for (int32_t off = 0; off < rows * 2 * cols; ++off) {
    std::vector<int32_t> at = padded.apply(std::vector<int32_t>{off});
    std::vector<int32_t> got = l.apply(std::vector<int32_t>{off});
    EXPECT_EQ(got[0], at[0]) << off;
    EXPECT_EQ(got[1], (at[1] & 7) | ((at[1] >> 4) << 3)) << off;
    // The data byte off & ~8 and its padding twin off | 8 name the same packed byte.
    EXPECT_EQ(l.apply(std::vector<int32_t>{off & ~8}), l.apply(std::vector<int32_t>{off | 8}));
  }
  // Row 0, bytes 8-15 of the tile (values 16-31) lie in the second 16-byte chunk.
  EXPECT_EQ(l.apply(std::vector<int32_t>{16}), (std::vector<int32_t>{0, 8}));
  EXPECT_THROW(fp4PaddedSharedLayout(16, 32), std::logic_error);
}

/// ldmatrix-style reads of a 64x64 fp16 tile: lanes 0-7 read 16-byte rows 0-7 of one column
/// chunk, lanes 8-31 the next chunks: eight 16-byte vectors per phase.
LL ldmatrixReads() {
  return LL::identity1D(8, kRegister, dimName(1)) * LL::identity1D(8, kLane, dimName(0)) *
         LL::identity1D(4, kLane, dimName(1)) * LL::identity1D(8, kRegister, dimName(0)) *
         LL::identity1D(2, kRegister, dimName(1));
}

TEST(Layouts, SwizzleRemovesBankConflicts) {
  LL reads = ldmatrixReads().transposeOuts({dimName(0), dimName(1)});
  ASSERT_EQ(layoutShape(reads), (std::vector<int64_t>{64, 64}));
  // 32 lanes x 16 bytes = 512 bytes = 4 wavefronts at best.
  int plain = sharedAccessWavefronts(reads, nvmmaSharedLayout({64, 64}, 2, 0), 2, 8);
  int swizzled = sharedAccessWavefronts(reads, nvmmaSharedLayout({64, 64}, 2, 128), 2, 8);
  EXPECT_EQ(swizzled, 4);
  EXPECT_EQ(plain, 32); // eight rows 128 bytes apart hit the same banks in every phase
  // Row-major 4-wide fp32 writes by a coalesced blocked layout are conflict-free as is.
  LL blocked = blockedLayout({64, 64}, {1, 4}, {2, 16}, {4, 1}, {1, 0});
  EXPECT_EQ(sharedAccessWavefronts(blocked, swizzledSharedLayout({64, 64}, 1, 1, 1, {1, 0}), 4, 4),
            4);
}

TEST(Layouts, ConversionSharedLayoutIsConflictFreeBothWays) {
  // Transposing access: writes by rows (4 x fp32 vectors along dim1), reads by columns (4 x
  // fp32 along dim0 per thread, lanes along dim1).
  LL rows = blockedLayout({64, 64}, {1, 4}, {4, 8}, {4, 1}, {1, 0});
  LL cols = blockedLayout({64, 64}, {4, 1}, {8, 4}, {1, 4}, {0, 1});
  LL plain = swizzledSharedLayout({64, 64}, 1, 1, 1, {1, 0});
  int plainCost =
      sharedAccessWavefronts(rows, plain, 4, 4) + sharedAccessWavefronts(cols, plain, 4, 1);
  LL chosen = conversionSharedLayout(rows, cols, 4);
  ASSERT_TRUE(chosen.isInjective() && chosen.isSurjective());
  int writes = sharedAccessWavefronts(rows, chosen, 4, 4);
  int reads = sharedAccessWavefronts(cols, chosen, 4, 1);
  EXPECT_LT(writes + reads, plainCost);
  EXPECT_EQ(writes, 4); // 512 bytes in 16-byte vectors
  EXPECT_EQ(reads, 1);  // 32 lanes x 4 bytes
}

TEST(Layouts, StmatrixAccessOfWgmmaAccumulator) {
  // A 128x256 fp32 accumulator of 8 warps (m64n256 per warp group), stored as fp16 by a
  // coalesced layout (8 consecutive elements a thread): the epilogue of a tl.dot GEMM.
  LL acc = wgmmaAccumulatorLayout({128, 256}, 256, {8, 1});
  auto access = stmatrixAccessLayout(acc);
  ASSERT_TRUE(access.has_value());
  // Every element once, as in `acc`; rows of 8 consecutive elements, 4 matrices per access.
  EXPECT_TRUE(access->isInjective() && access->isSurjective());
  EXPECT_EQ(access->getInDimSize(kRegister), acc.getInDimSize(kRegister));
  EXPECT_EQ(access->numConsecutiveInOut(dimName(1)), 8);
  LL stores = blockedLayoutForShape({128, 256}, {1, 8}, {1, 0}, 8);
  LL chosen = conversionSharedLayout(*access, stores, 2);
  // Both ways conflict-free: 32 rows of 16 bytes, 32 lanes x 16 bytes, 4 wavefronts each.
  EXPECT_EQ(sharedAccessWavefronts(*access, chosen, 2, 8), 4);
  EXPECT_EQ(sharedAccessWavefronts(stores, chosen, 2, 8), 4);
  // A layout whose pairs do not sit 4 lanes to a row of 8 has no stmatrix form.
  EXPECT_FALSE(stmatrixAccessLayout(stores).has_value());
}

// ---------------------------------------------------------------------------------------------
// AxisInfo and layout assignment on kernels built with ir::Builder
// ---------------------------------------------------------------------------------------------

/// A kernel function under construction: adds arguments as body block arguments.
struct KernelBuilder {
  ir::Function fn;
  ir::Builder b{&fn.body};
  ir::Value* arg(const std::string& name, Type t, int divisibility) {
    ir::Value* v = fn.body.addArg(t, name);
    fn.args.push_back(ir::KernelArg{name, t, divisibility, false, v});
    return v;
  }
};

/// examples/vector_add.py as the specializer produces it.
struct VectorAdd {
  KernelBuilder k;
  ir::Value *offsets, *mask, *xPtrs, *x, *sum;
  ir::Op *loadX, *store;
  VectorAdd(int ptrDiv, int nDiv, int64_t block = 1024) {
    auto& b = k.b;
    ir::Value* xp = k.arg("x_ptr", Type::ptr(DType::F32), ptrDiv);
    ir::Value* yp = k.arg("y_ptr", Type::ptr(DType::F32), ptrDiv);
    ir::Value* op = k.arg("out_ptr", Type::ptr(DType::F32), ptrDiv);
    ir::Value* n = k.arg("n", Type::scalar(DType::I32), nDiv);
    ir::Value* pid = b.programId(0);
    ir::Value* start = b.binary(OpCode::Mul, pid, b.i32(block));
    offsets = b.binary(OpCode::Add, b.splat(start, {block}), b.arange(0, block));
    mask = b.cmp("lt", offsets, b.splat(n, {block}));
    xPtrs = b.addPtr(b.splat(xp, {block}), offsets);
    x = b.load(xPtrs, mask);
    loadX = x->def();
    ir::Value* y = b.load(b.addPtr(b.splat(yp, {block}), offsets), mask);
    sum = b.binary(OpCode::Add, x, y);
    b.store(b.addPtr(b.splat(op, {block}), offsets), sum, mask);
    store = k.fn.body.ops().back().get();
    b.ret();
  }
};

TEST(AxisInfo, VectorAddProvesSixteenByteAccesses) {
  VectorAdd va(16, 16);
  AxisInfoAnalysis ai(va.k.fn);
  AxisInfo off = ai.get(va.offsets);
  EXPECT_EQ(off.contiguity[0], 1024);
  EXPECT_EQ(off.divisibility[0], 1024);
  AxisInfo ptrs = ai.get(va.xPtrs);
  EXPECT_EQ(ptrs.contiguity[0], 1024);
  EXPECT_EQ(ptrs.divisibility[0], 16); // bytes
  EXPECT_EQ(ai.get(va.mask).constancy[0], 16);
  EXPECT_EQ(ai.vectorElems(va.xPtrs, va.mask, 0), 4);
  EXPECT_EQ(ai.pointerAlignmentElems(va.xPtrs, 0), 4);
}

TEST(AxisInfo, UnalignedInputsLimitTheVector) {
  VectorAdd unalignedPtr(1, 16);
  AxisInfoAnalysis a1(unalignedPtr.k.fn);
  EXPECT_EQ(a1.vectorElems(unalignedPtr.xPtrs, unalignedPtr.mask, 0), 1);
  VectorAdd unalignedN(16, 1);
  AxisInfoAnalysis a2(unalignedN.k.fn);
  EXPECT_EQ(a2.get(unalignedN.mask).constancy[0], 1);
  EXPECT_EQ(a2.vectorElems(unalignedN.xPtrs, unalignedN.mask, 0), 1);
  EXPECT_EQ(a2.vectorElems(unalignedN.xPtrs, nullptr, 0), 4);
  VectorAdd eight(8, 16);
  AxisInfoAnalysis a3(eight.k.fn);
  EXPECT_EQ(a3.vectorElems(eight.xPtrs, eight.mask, 0), 2);
}

TEST(AxisInfo, MatmulPointerGrid) {
  // a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :], fp16, BLOCK_M=128, K=64.
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* a = k.arg("a_ptr", Type::ptr(DType::F16), 16);
  ir::Value* stride = k.arg("stride_am", Type::scalar(DType::I32), 16);
  ir::Value* pid = b.programId(0);
  ir::Value* offsM = b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, pid, b.i32(128)), {128}),
                              b.arange(0, 128));
  ir::Value* offsK = b.arange(0, 64);
  ir::Value* m2 = b.create1(OpCode::ExpandDims, {offsM}, Type::tensor(DType::I32, {128, 1}),
                            {{"axis", int64_t(1)}});
  ir::Value* rowOff = b.binary(OpCode::Mul, m2, b.splat(stride, {128, 1}));
  ir::Value* rowOffB = b.create1(OpCode::Broadcast, {rowOff}, Type::tensor(DType::I32, {128, 64}));
  ir::Value* k2 = b.create1(OpCode::ExpandDims, {offsK}, Type::tensor(DType::I32, {1, 64}),
                            {{"axis", int64_t(0)}});
  ir::Value* k2b = b.create1(OpCode::Broadcast, {k2}, Type::tensor(DType::I32, {128, 64}));
  ir::Value* idx = b.binary(OpCode::Add, rowOffB, k2b);
  ir::Value* ptrs = b.addPtr(b.splat(a, {128, 64}), idx);
  b.ret();
  AxisInfoAnalysis ai(k.fn);
  AxisInfo rows = ai.get(rowOffB);
  EXPECT_EQ(rows.contiguity, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(rows.constancy[1], 64);
  EXPECT_EQ(rows.divisibility[1], 16);
  AxisInfo p = ai.get(ptrs);
  EXPECT_EQ(p.contiguity[1], 64);
  EXPECT_EQ(p.contiguity[0], 1);
  EXPECT_EQ(p.divisibility[1], 16); // bytes: a_ptr's 16-byte alignment bounds the row starts
  EXPECT_EQ(ai.vectorElems(ptrs, nullptr, 1), 8);
  EXPECT_EQ(ai.vectorElems(ptrs, nullptr, 0), 1);
}

TEST(AxisInfo, HintsDivisionAndLoops) {
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* n = k.arg("n", Type::scalar(DType::I32), 1);
  ir::Value* hinted =
      b.create1(OpCode::MultipleOf, {n}, n->type(), {{"values", std::vector<int64_t>{8}}});
  ir::Value* r = b.arange(0, 64);
  ir::Value* quarter = b.binary(OpCode::Div, r, b.splat(b.i32(4), {64}));
  ir::Value* rem = b.binary(OpCode::Rem, r, b.splat(b.i32(16), {64}));
  // for i in range(0, n, 32): acc = acc + 32   (i is a multiple of 32, acc stays a multiple of 32)
  ir::Op* loop =
      b.create(OpCode::For, {b.i32(0), n, b.i32(32), b.i32(0)}, {Type::scalar(DType::I32)});
  ir::Block* body = loop->addRegion();
  ir::Value* iv = body->addArg(Type::scalar(DType::I32), "i");
  ir::Value* acc = body->addArg(Type::scalar(DType::I32), "acc");
  body->setParentOp(loop);
  ir::Builder inner(body);
  ir::Value* next = inner.binary(OpCode::Add, acc, inner.i32(32));
  inner.create(OpCode::Yield, {next}, {});
  b.ret();
  AxisInfoAnalysis ai(k.fn);
  EXPECT_EQ(ai.get(hinted).divisibility[0], 8);
  EXPECT_EQ(ai.get(quarter).constancy[0], 4);
  EXPECT_EQ(ai.get(quarter).contiguity[0], 1);
  EXPECT_EQ(ai.get(rem).contiguity[0], 16);
  EXPECT_EQ(ai.get(iv).divisibility[0], 32);
  EXPECT_EQ(ai.get(acc).divisibility[0], 32);
  EXPECT_EQ(ai.get(loop->result(0)).divisibility[0], 32);
  EXPECT_FALSE(ai.get(acc).constantValue.has_value());
}

TEST(AxisInfo, RemainderByARunTimeDivisorKeepsRunsOfItsDivisibility) {
  // (pid * 256 + arange(256)) % N with N a multiple of 16 (an i32:16 argument) wraps only at
  // multiples of N: runs of 16 stay contiguous, so offs % N vectorizes as Triton's does.
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* n16 = k.arg("N", Type::scalar(DType::I32), 16);
  ir::Value* n = k.arg("n", Type::scalar(DType::I32), 1);
  ir::Value* pid = b.programId(0);
  ir::Value* offs = b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, pid, b.i32(256)), {256}),
                             b.arange(0, 256));
  ir::Value* wrapped = b.binary(OpCode::Rem, offs, b.splat(n16, {256}));
  ir::Value* unknown = b.binary(OpCode::Rem, offs, b.splat(n, {256}));
  ir::Value* byTensor = b.binary(OpCode::Rem, offs, b.arange(0, 256));
  b.ret();
  AxisInfoAnalysis ai(k.fn);
  EXPECT_EQ(ai.get(wrapped).contiguity[0], 16);
  EXPECT_EQ(ai.get(wrapped).divisibility[0], 16);
  EXPECT_EQ(ai.get(unknown).contiguity[0], 1);
  EXPECT_EQ(ai.get(byTensor).contiguity[0], 1); // a divisor that varies along the run
}

TEST(AxisInfo, ValueMinusItsRemainderIsAMultipleOfTheDivisor) {
  // x - x % 8 (a TMA box start rounded down to 16 bytes of fp16) is a multiple of 8, for a
  // scalar of unknown value and elementwise for a tensor; x - y % 8 is not.
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* x = k.arg("x", Type::scalar(DType::I32), 1);
  ir::Value* y = k.arg("y", Type::scalar(DType::I32), 1);
  ir::Value* down = b.binary(OpCode::Sub, x, b.binary(OpCode::Rem, x, b.i32(8)));
  ir::Value* byTwelve = b.binary(OpCode::Sub, x, b.binary(OpCode::Rem, x, b.i32(12)));
  ir::Value* other = b.binary(OpCode::Sub, x, b.binary(OpCode::Rem, y, b.i32(8)));
  ir::Value* t = b.binary(OpCode::Mul, b.arange(0, 64), b.splat(x, {64}));
  ir::Value* tDown = b.binary(OpCode::Sub, t, b.binary(OpCode::Rem, t, b.splat(b.i32(16), {64})));
  b.ret();
  AxisInfoAnalysis ai(k.fn);
  EXPECT_EQ(ai.get(down).divisibility[0], 8);
  EXPECT_EQ(ai.get(byTwelve).divisibility[0], 4);
  EXPECT_EQ(ai.get(other).divisibility[0], 1);
  EXPECT_EQ(ai.get(tDown).divisibility[0], 16);
  EXPECT_EQ(ai.get(tDown).contiguity[0], 1);
}

TEST(LayoutAssignment, VectorAddGetsSixteenByteBlockedLayout) {
  VectorAdd va(16, 16);
  CompileOptions opts;
  opts.target = Target::SM90a;
  opts.numWarps = 4;
  LayoutMap map = assignLayouts(va.k.fn, opts);
  LL expected = blockedLayout({1024}, {4}, {32}, {4}, {0});
  EXPECT_EQ(map.layout(va.x), expected) << map.layout(va.x).str();
  EXPECT_EQ(map.layout(va.offsets), expected);
  EXPECT_EQ(map.layout(va.mask), expected);
  EXPECT_EQ(map.layout(va.sum), expected);
  EXPECT_EQ(expected.getInDimSize(kRegister), 8); // 2 repetitions of 4
  EXPECT_TRUE(map.conversions().empty());
  EXPECT_EQ(map.vectorElems(*va.loadX), 4);
  EXPECT_EQ(map.vectorElems(*va.store), 4);
  EXPECT_EQ(map.sharedBytes(), 0);
  EXPECT_EQ(map.axisInfo(va.xPtrs).divisibility[0], 16);
}

TEST(LayoutAssignment, VectorAddUnalignedFallsBackToScalarAccesses) {
  VectorAdd va(16, 1);
  CompileOptions opts;
  LayoutMap map = assignLayouts(va.k.fn, opts);
  EXPECT_EQ(map.vectorElems(*va.loadX), 1);
  EXPECT_EQ(map.layout(va.x).numConsecutiveInOut(), 1);
  EXPECT_TRUE(map.conversions().empty());
}

TEST(LayoutAssignment, NonPowerOfTwoBlockIsAUserError) {
  KernelBuilder k;
  k.b.setLoc(SourceLoc{0, 7, 5});
  k.b.arange(0, 100);
  k.b.ret();
  try {
    assignLayouts(k.fn, CompileOptions{});
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.diagnostic().loc.line, 7u);
    EXPECT_NE(e.diagnostic().message.find("powers of two"), std::string::npos);
  }
}

/// Row softmax over a [BM, BN] tile: loads, max over axis 1, x - max[:, None], exp, sum, divide.
struct Softmax {
  KernelBuilder k;
  ir::Value *x, *mx, *mxb, *y;
  Softmax(int64_t BM, int64_t BN) {
    auto& b = k.b;
    ir::Value* in = k.arg("in_ptr", Type::ptr(DType::F32), 16);
    ir::Value* out = k.arg("out_ptr", Type::ptr(DType::F32), 16);
    ir::Value* stride = k.arg("stride", Type::scalar(DType::I32), 16);
    auto expand = [&](ir::Value* v, int64_t axis) {
      std::vector<int64_t> shape = v->type().shape;
      shape.insert(shape.begin() + axis, 1);
      return b.create1(OpCode::ExpandDims, {v}, v->type().withShape(shape), {{"axis", axis}});
    };
    auto stretch = [&](ir::Value* v) {
      return b.create1(OpCode::Broadcast, {v}, v->type().withShape({BM, BN}));
    };
    ir::Value* rows = expand(b.arange(0, BM), 1);
    ir::Value* rowOff = stretch(b.binary(OpCode::Mul, rows, b.splat(stride, {BM, 1})));
    ir::Value* idx = b.binary(OpCode::Add, rowOff, stretch(expand(b.arange(0, BN), 0)));
    x = b.load(b.addPtr(b.splat(in, {BM, BN}), idx));
    auto reduce = [&](ir::Value* v, const char* kind) {
      return b.create1(OpCode::Reduce, {v}, Type::tensor(DType::F32, {BM}),
                       {{"axis", int64_t(1)}, {"kind", std::string(kind)}});
    };
    mx = reduce(x, "max");
    mxb = stretch(expand(mx, 1));
    ir::Value* e = b.create1(OpCode::Exp, {b.binary(OpCode::Sub, x, mxb)}, x->type());
    y = b.binary(OpCode::Div, e, stretch(expand(reduce(e, "sum"), 1)));
    b.store(b.addPtr(b.splat(out, {BM, BN}), idx), y);
    b.ret();
  }
};

TEST(LayoutAssignment, SoftmaxReductionsUseSliceLayoutsWithoutConversions) {
  // 4 rows of 128: one warp per row, 4 fp32 per thread per vector.
  Softmax sm(4, 128);
  CompileOptions opts;
  opts.numWarps = 4;
  LayoutMap map = assignLayouts(sm.k.fn, opts);
  const LL& lx = map.layout(sm.x);
  EXPECT_EQ(lx, blockedLayout({4, 128}, {1, 4}, {1, 32}, {4, 1}, {1, 0})) << lx.str();
  EXPECT_EQ(map.vectorElems(*sm.x->def()), 4);
  EXPECT_EQ(map.layout(sm.mx), sliceLayout(lx, 1));
  EXPECT_EQ(map.layout(sm.mxb), lx);
  EXPECT_EQ(map.layout(sm.y), lx);
  EXPECT_TRUE(map.conversions().empty()) << map.str(sm.k.fn);
  // Each row lives in one warp: the reductions need no shared memory.
  EXPECT_EQ(map.scratchBytesFor(*sm.mx->def()), 0);
  EXPECT_EQ(map.sharedBytes(), 0);
}

TEST(LayoutAssignment, SoftmaxRowsSpanningWarpsGetReductionScratch) {
  // 4 rows of 256 over 4 warps: the coalesced layout puts 2 warps along each row, so the
  // reduction combines 2 partials per row through shared memory.
  Softmax sm(4, 256);
  CompileOptions opts;
  opts.numWarps = 4;
  LayoutMap map = assignLayouts(sm.k.fn, opts);
  const LL& lx = map.layout(sm.x);
  EXPECT_EQ(lx, blockedLayout({4, 256}, {1, 4}, {1, 32}, {2, 2}, {1, 0})) << lx.str();
  EXPECT_EQ(map.layout(sm.mx), sliceLayout(lx, 1));
  EXPECT_TRUE(map.conversions().empty()) << map.str(sm.k.fn);
  EXPECT_EQ(map.scratchBytesFor(*sm.mx->def()), 4 * 2 * 4);
  EXPECT_EQ(map.scratchBytes(), 32);
  EXPECT_EQ(map.sharedBytes(), map.scratchOffset() + 32);
}

/// acc = zeros; acc = dot(a, b, acc) with a, b loaded from row-major fp16 tiles; store acc.
struct DotKernel {
  KernelBuilder k;
  ir::Value *a, *bv, *acc, *res;
  ir::Op* dot;
  DotKernel(int64_t M, int64_t N, int64_t K) {
    auto& b = k.b;
    ir::Value* ap = k.arg("a_ptr", Type::ptr(DType::F16), 16);
    ir::Value* bp = k.arg("b_ptr", Type::ptr(DType::F16), 16);
    ir::Value* cp = k.arg("c_ptr", Type::ptr(DType::F32), 16);
    auto grid = [&](int64_t R, int64_t C) {
      ir::Value* r = b.create1(OpCode::ExpandDims, {b.arange(0, R)},
                               Type::tensor(DType::I32, {R, 1}), {{"axis", int64_t(1)}});
      ir::Value* rr =
          b.create1(OpCode::Broadcast, {b.binary(OpCode::Mul, r, b.splat(b.i32(C), {R, 1}))},
                    Type::tensor(DType::I32, {R, C}));
      ir::Value* c = b.create1(OpCode::ExpandDims, {b.arange(0, C)},
                               Type::tensor(DType::I32, {1, C}), {{"axis", int64_t(0)}});
      ir::Value* cc = b.create1(OpCode::Broadcast, {c}, Type::tensor(DType::I32, {R, C}));
      return b.binary(OpCode::Add, rr, cc);
    };
    a = b.load(b.addPtr(b.splat(ap, {M, K}), grid(M, K)));
    bv = b.load(b.addPtr(b.splat(bp, {K, N}), grid(K, N)));
    acc = b.constFloat(0.0, Type::tensor(DType::F32, {M, N}));
    res = b.create1(OpCode::Dot, {a, bv, acc}, Type::tensor(DType::F32, {M, N}),
                    {{"input_precision", std::string("tf32")}});
    dot = res->def();
    b.store(b.addPtr(b.splat(cp, {M, N}), grid(M, N)), res);
    b.ret();
  }
};

TEST(LayoutAssignment, DotOnHopperUsesWgmma) {
  DotKernel dk(128, 128, 64);
  CompileOptions opts;
  opts.target = Target::SM90a;
  opts.numWarps = 8;
  LayoutMap map = assignLayouts(dk.k.fn, opts);
  const DotLayouts* dl = map.dot(*dk.dot);
  ASSERT_NE(dl, nullptr);
  EXPECT_EQ(dl->kind, MmaKind::Wgmma);
  EXPECT_EQ(dl->warpsPerCTA, (std::vector<int32_t>{8, 1}));
  EXPECT_EQ(dl->instrN, 128);
  EXPECT_EQ(dl->instrK, 16);
  EXPECT_EQ(dl->acc, wgmmaAccumulatorLayout({128, 128}, 128, {8, 1}));
  EXPECT_EQ(map.layout(dk.res), dl->acc);
  // The zero accumulator is created directly in the wgmma layout.
  EXPECT_EQ(map.layout(dk.acc), dl->acc);
  EXPECT_FALSE(map.needsConversion(*dk.dot, 2));
  // Operands are staged in 128-byte-swizzled shared memory (64 fp16 = 128 bytes per row).
  EXPECT_EQ(dl->swizzleBytesA, 128);
  EXPECT_EQ(dl->swizzleBytesB, 128);
  EXPECT_FALSE(map.needsConversion(*dk.dot, 0));
  EXPECT_EQ(map.scratchBytesFor(*dk.dot), 128 * 64 * 2 + 64 * 128 * 2);
  EXPECT_EQ(map.scratchOffset() % 1024, 0);
  // The result is stored through a coalesced layout: one conversion, at the store.
  ASSERT_EQ(map.conversions().size(), 1u);
  EXPECT_EQ(map.conversions()[0].value, dk.res);
  EXPECT_EQ(map.conversions()[0].user->code(), OpCode::Store);
}

TEST(LayoutAssignment, DotOnAmpereUsesMmaSyncWithOperandConversions) {
  DotKernel dk(64, 64, 32);
  CompileOptions opts;
  opts.target = Target::SM80;
  opts.numWarps = 4;
  LayoutMap map = assignLayouts(dk.k.fn, opts);
  const DotLayouts* dl = map.dot(*dk.dot);
  ASSERT_NE(dl, nullptr);
  EXPECT_EQ(dl->kind, MmaKind::MmaSync);
  EXPECT_EQ(dl->warpsPerCTA, (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(dl->instrK, 16);
  EXPECT_TRUE(map.needsConversion(*dk.dot, 0));
  EXPECT_TRUE(map.needsConversion(*dk.dot, 1));
  EXPECT_FALSE(map.needsConversion(*dk.dot, 2));
  EXPECT_EQ(map.operandLayout(*dk.dot, 0), dl->a);
  EXPECT_EQ(map.operandLayout(*dk.dot, 1), dl->b);
  EXPECT_EQ(map.layout(dk.res), mmaSyncAccumulatorLayout({64, 64}, {2, 2}));
  for (const Conversion& c : map.conversions()) {
    // The conversion maps every element to a holder in the target layout.
    LL where = c.src.invertAndCompose(c.dst);
    forEachInput(c.src, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
      EXPECT_EQ(c.dst.apply(where.apply(in)), out);
    });
  }
  EXPECT_GT(map.scratchBytes(), 0);
  // sm_100a takes the mma.sync path for now.
  opts.target = Target::SM100a;
  EXPECT_EQ(assignLayouts(dk.k.fn, opts).dot(*dk.dot)->kind, MmaKind::MmaSync);
}

TEST(LayoutAssignment, SharedAllocationsAreAlignedAndResolveViews) {
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* bars =
      b.create1(OpCode::AllocBarriers, {}, Type::barrier(3), {{"arrive_count", int64_t(1)}});
  ir::Value* bufs = b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {128, 64}, 3));
  ir::Value* view =
      b.create1(OpCode::LocalView, {bufs, b.i32(1)}, Type::buffer(DType::F16, {128, 64}, 1));
  b.ret();
  LayoutMap map = assignLayouts(k.fn, CompileOptions{});
  const SharedAllocation* barAlloc = map.sharedAllocation(bars);
  const SharedAllocation* bufAlloc = map.sharedAllocation(bufs);
  ASSERT_TRUE(barAlloc && bufAlloc);
  EXPECT_EQ(barAlloc->bytes(), 24);
  EXPECT_EQ(bufAlloc->offset % 1024, 0);
  EXPECT_GE(bufAlloc->offset, barAlloc->offset + barAlloc->bytes());
  EXPECT_EQ(bufAlloc->bytesPerBuffer, 128 * 64 * 2);
  EXPECT_EQ(bufAlloc->swizzleBytes, 128);
  EXPECT_EQ(bufAlloc->layout, nvmmaSharedLayout({128, 64}, 2, 128));
  EXPECT_EQ(map.sharedAllocation(view), bufAlloc);
  EXPECT_EQ(map.sharedBytes(), bufAlloc->offset + 3 * 128 * 64 * 2);
}

} // namespace

namespace {

/// for k in range(0, 4): acc = dot(load(a), load(b), acc); then store(acc) — a K loop.
TEST(LayoutAssignment, DotAccumulatorStaysInPlaceAcrossALoop) {
  KernelBuilder k;
  auto& b = k.b;
  const int64_t M = 128, N = 64, K = 32;
  ir::Value* ap = k.arg("a_ptr", Type::ptr(DType::BF16), 16);
  ir::Value* bp = k.arg("b_ptr", Type::ptr(DType::BF16), 16);
  ir::Value* cp = k.arg("c_ptr", Type::ptr(DType::F32), 16);
  auto grid = [&](ir::Builder& bb, int64_t R, int64_t C) {
    ir::Value* r = bb.create1(OpCode::ExpandDims, {bb.arange(0, R)},
                              Type::tensor(DType::I32, {R, 1}), {{"axis", int64_t(1)}});
    ir::Value* rr =
        bb.create1(OpCode::Broadcast, {bb.binary(OpCode::Mul, r, bb.splat(bb.i32(C), {R, 1}))},
                   Type::tensor(DType::I32, {R, C}));
    ir::Value* c = bb.create1(OpCode::ExpandDims, {bb.arange(0, C)},
                              Type::tensor(DType::I32, {1, C}), {{"axis", int64_t(0)}});
    return bb.binary(OpCode::Add, rr,
                     bb.create1(OpCode::Broadcast, {c}, Type::tensor(DType::I32, {R, C})));
  };
  ir::Value* zero = b.constFloat(0.0, Type::tensor(DType::F32, {M, N}));
  ir::Op* loop = b.create(OpCode::For, {b.i32(0), b.i32(4), b.i32(1), zero},
                          {Type::tensor(DType::F32, {M, N})});
  ir::Block* body = loop->addRegion();
  body->addArg(Type::scalar(DType::I32), "k");
  ir::Value* acc = body->addArg(Type::tensor(DType::F32, {M, N}), "acc");
  ir::Builder in(body);
  ir::Value* a = in.load(in.addPtr(in.splat(ap, {M, K}), grid(in, M, K)));
  ir::Value* bt = in.load(in.addPtr(in.splat(bp, {K, N}), grid(in, K, N)));
  ir::Value* next = in.create1(OpCode::Dot, {a, bt, acc}, acc->type());
  in.create(OpCode::Yield, {next}, {});
  b.store(b.addPtr(b.splat(cp, {M, N}), grid(b, M, N)), loop->result(0));
  b.ret();

  for (Target target : {Target::SM90a, Target::SM80}) {
    CompileOptions opts;
    opts.target = target;
    opts.numWarps = 4;
    LayoutMap map = assignLayouts(k.fn, opts);
    const DotLayouts* dl = map.dot(*next->def());
    ASSERT_NE(dl, nullptr);
    EXPECT_EQ(dl->kind, target == Target::SM90a ? MmaKind::Wgmma : MmaKind::MmaSync);
    EXPECT_EQ(map.layout(zero), dl->acc);
    EXPECT_EQ(map.layout(acc), dl->acc);
    EXPECT_EQ(map.layout(loop->result(0)), dl->acc);
    EXPECT_FALSE(map.needsConversion(*loop, 3));
    EXPECT_FALSE(map.needsConversion(*next->def(), 2));
    EXPECT_FALSE(map.needsConversion(*body->terminator(), 0));
    // Only the epilogue store converts the accumulator.
    int accConversions = 0;
    for (const Conversion& c : map.conversions())
      if (c.value == loop->result(0)) ++accConversions;
    EXPECT_EQ(accConversions, 1);
  }
}

TEST(LayoutAssignment, LoopInvariantOperandConversionsAreHoisted) {
  // q is loaded once before the loop and used by mma.sync in every iteration (sm_80): its
  // conversion to the A fragment belongs before the loop; k, loaded in the loop, converts there.
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* qp = k.arg("q_ptr", Type::ptr(DType::F16), 16);
  ir::Value* kp = k.arg("k_ptr", Type::ptr(DType::F16), 16);
  auto tileIdx = [](ir::Builder& bb) {
    return bb.create1(OpCode::Reshape, {bb.arange(0, 64 * 64)}, Type::tensor(DType::I32, {64, 64}));
  };
  ir::Value* q = b.load(b.addPtr(b.splat(qp, {64, 64}), tileIdx(b)));
  ir::Value* zero = b.constFloat(0.0, Type::tensor(DType::F32, {64, 64}));
  ir::Op* loop = b.create(OpCode::For, {b.i32(0), b.i32(8), b.i32(1), zero}, {zero->type()});
  ir::Block* body = loop->addRegion();
  body->addArg(Type::scalar(DType::I32), "i");
  ir::Value* acc = body->addArg(zero->type(), "acc");
  ir::Builder in(body);
  ir::Op* ifOp = in.create(OpCode::If, {k.arg("flag", Type::scalar(DType::I1), 1)}, {zero->type()});
  ir::Builder thenB(ifOp->addRegion());
  ir::Value* kt = thenB.load(thenB.addPtr(thenB.splat(kp, {64, 64}), tileIdx(thenB)));
  ir::Value* d = thenB.create1(OpCode::Dot, {q, kt, acc}, acc->type());
  thenB.create(OpCode::Yield, {d}, {});
  ir::Builder elseB(ifOp->addRegion());
  elseB.create(OpCode::Yield, {acc}, {});
  in.create(OpCode::Yield, {ifOp->result(0)}, {});
  b.ret();
  CompileOptions opts;
  opts.target = Target::SM80;
  LayoutMap map = assignLayouts(k.fn, opts);
  ASSERT_TRUE(map.needsConversion(*d->def(), 0));
  ASSERT_TRUE(map.needsConversion(*d->def(), 1));
  for (const Conversion& c : map.conversions()) {
    if (c.value == q) {
      EXPECT_EQ(c.hoistBefore, loop);
    }
    if (c.value == kt) {
      EXPECT_EQ(c.hoistBefore, nullptr);
    }
  }
}

TEST(LayoutAssignment, FullReductionToAScalarNeedsOnePartialPerWarp) {
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* xp = k.arg("x_ptr", Type::ptr(DType::F32), 16);
  ir::Value* x = b.load(b.addPtr(b.splat(xp, {2048}), b.arange(0, 2048)));
  ir::Value* total = b.create1(OpCode::Reduce, {x}, Type::scalar(DType::F32),
                               {{"axis", int64_t(0)}, {"kind", std::string("sum")}});
  ir::Value* scan =
      b.create1(OpCode::Scan, {x}, x->type(), {{"axis", int64_t(0)}, {"kind", std::string("sum")}});
  b.ret();
  CompileOptions opts;
  opts.numWarps = 8;
  LayoutMap map = assignLayouts(k.fn, opts);
  EXPECT_FALSE(map.hasLayout(total));
  EXPECT_EQ(map.scratchBytesFor(*total->def()), 8 * 4 / 16 * 16 + 16 * ((8 * 4) % 16 != 0));
  EXPECT_EQ(map.layout(scan), map.layout(x));
  EXPECT_GT(map.scratchBytesFor(*scan->def()), 0);
  EXPECT_THROW(map.layout(total), std::logic_error);
}

TEST(LayoutAssignment, ShapeOpsMoveNoData) {
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* xp = k.arg("x_ptr", Type::ptr(DType::F16), 16);
  ir::Value* idx =
      b.create1(OpCode::Reshape, {b.arange(0, 64 * 32)}, Type::tensor(DType::I32, {64, 32}));
  ir::Value* x = b.load(b.addPtr(b.splat(xp, {64, 32}), idx));
  ir::Value* t = b.create1(OpCode::Permute, {x}, Type::tensor(DType::F16, {32, 64}),
                           {{"order", std::vector<int64_t>{1, 0}}});
  ir::Value* j = b.create1(OpCode::Join, {x, x}, Type::tensor(DType::F16, {64, 32, 2}));
  ir::Op* split = b.create(OpCode::Split, {j}, {x->type(), x->type()});
  ir::Value* r = b.create1(OpCode::Reshape, {x}, Type::tensor(DType::F16, {2048}));
  b.ret();
  LayoutMap map = assignLayouts(k.fn, CompileOptions{});
  const LL& lx = map.layout(x);
  // Every shape op's result holds, in each register, the element its operand held there.
  auto sameData = [&](const LL& from, const LL& to, auto coordMap) {
    forEachInput(from, [&](const std::vector<int32_t>& in, const std::vector<int32_t>& out) {
      EXPECT_EQ(to.apply(in), coordMap(out));
    });
  };
  sameData(lx, map.layout(t), [](auto c) { return std::vector<int32_t>{c[1], c[0]}; });
  sameData(lx, map.layout(r), [](auto c) { return std::vector<int32_t>{c[0] * 32 + c[1]}; });
  EXPECT_EQ(map.layout(split->result(0)), lx);
  EXPECT_EQ(map.layout(split->result(1)), lx);
  EXPECT_EQ(map.layout(j).getInDimSize(kRegister), 2 * lx.getInDimSize(kRegister));
  EXPECT_TRUE(map.conversions().empty()) << map.str(k.fn);
}

TEST(LayoutAssignment, TransposedStoreIsConvertedThroughSharedMemory) {
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* xp = k.arg("x_ptr", Type::ptr(DType::F32), 16);
  ir::Value* yp = k.arg("y_ptr", Type::ptr(DType::F32), 16);
  auto grid = [&]() {
    return b.create1(OpCode::Reshape, {b.arange(0, 64 * 64)}, Type::tensor(DType::I32, {64, 64}));
  };
  ir::Value* x = b.load(b.addPtr(b.splat(xp, {64, 64}), grid()));
  ir::Value* t =
      b.create1(OpCode::Permute, {x}, x->type(), {{"order", std::vector<int64_t>{1, 0}}});
  b.store(b.addPtr(b.splat(yp, {64, 64}), grid()), t);
  ir::Op* store = k.fn.body.ops().back().get();
  b.ret();
  LayoutMap map = assignLayouts(k.fn, CompileOptions{});
  ASSERT_TRUE(map.needsConversion(*store, 1)) << map.str(k.fn);
  const Conversion& c = map.conversions().at(0);
  EXPECT_EQ(c.kind, ConversionKind::SharedMemory);
  EXPECT_EQ(c.dst, map.operandLayout(*store, 0));
  EXPECT_EQ(map.scratchBytesFor(*store), 64 * 64 * 4);
  EXPECT_EQ(map.vectorElems(*store), 4);
  // A swizzle for that conversion keeps both sides conflict-free.
  LL smem = conversionSharedLayout(c.src, c.dst, 4);
  EXPECT_EQ(sharedAccessWavefronts(c.dst, smem, 4, 4), 4);
  EXPECT_LE(sharedAccessWavefronts(c.src, smem, 4, 1), 2);
}

TEST(LayoutAssignment, SharedIndexVectorsAreRecomputedNotMoved) {
  // x[r, c] with r and c the same arange(0, 64): rows want it in one layout, columns in another.
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* xp = k.arg("x_ptr", Type::ptr(DType::F32), 16);
  ir::Value* yp = k.arg("y_ptr", Type::ptr(DType::F32), 16);
  ir::Value* r = b.arange(0, 64);
  auto tile = Type::tensor(DType::I32, {64, 64});
  ir::Value* rows =
      b.create1(OpCode::Broadcast,
                {b.binary(OpCode::Mul,
                          b.create1(OpCode::ExpandDims, {r}, Type::tensor(DType::I32, {64, 1}),
                                    {{"axis", int64_t(1)}}),
                          b.splat(b.i32(64), {64, 1}))},
                tile);
  ir::Value* cols = b.create1(OpCode::Broadcast,
                              {b.create1(OpCode::ExpandDims, {r}, Type::tensor(DType::I32, {1, 64}),
                                         {{"axis", int64_t(0)}})},
                              tile);
  ir::Value* idx = b.binary(OpCode::Add, rows, cols);
  ir::Value* x = b.load(b.addPtr(b.splat(xp, {64, 64}), idx));
  b.store(b.addPtr(b.splat(yp, {64, 64}), idx), x);
  b.ret();
  LayoutMap map = assignLayouts(k.fn, CompileOptions{});
  ASSERT_EQ(map.conversions().size(), 1u) << map.str(k.fn);
  const Conversion& c = map.conversions()[0];
  EXPECT_EQ(c.kind, ConversionKind::Rematerialize);
  ASSERT_FALSE(c.remat.empty());
  EXPECT_EQ(c.remat.back().first, c.value);
  EXPECT_EQ(c.remat.back().second, c.dst);
  // The plan recomputes the shared arange (in the other layout) and what was built from it.
  bool hasArange = false;
  for (const auto& [v, l] : c.remat) {
    EXPECT_EQ(layoutShape(l), v->type().shape);
    hasArange |= v == r;
    OpCode code = v->def()->code();
    EXPECT_TRUE(code == OpCode::Arange || code == OpCode::Splat || code == OpCode::Constant ||
                code == OpCode::ExpandDims || code == OpCode::Broadcast || code == OpCode::Mul)
        << v->def()->name();
  }
  EXPECT_TRUE(hasArange);
  EXPECT_EQ(map.scratchBytes(), 0);
  // Both index vectors are slices of the load's coalesced layout, so the tile needs no movement.
  EXPECT_EQ(map.layout(idx), map.layout(x));
}

TEST(LayoutAssignment, AsyncTasksUseTheirOwnWarps) {
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* xp = k.arg("x_ptr", Type::ptr(DType::F32), 16);
  ir::Op* tasks = b.create(OpCode::AsyncTasks, {}, {});
  ir::Builder tb(tasks->addRegion());
  ir::Value* loaded[2];
  int64_t warps[2] = {4, 1};
  for (int t = 0; t < 2; ++t) {
    ir::Op* task = tb.create(OpCode::AsyncTask, {}, {},
                             {{"default", int64_t(t == 0)}, {"num_warps", warps[t]}});
    ir::Builder in(task->addRegion());
    loaded[t] = in.load(in.addPtr(in.splat(xp, {256}), in.arange(0, 256)));
  }
  b.ret();
  CompileOptions opts;
  opts.numWarps = 4;
  LayoutMap map = assignLayouts(k.fn, opts);
  EXPECT_EQ(map.layout(loaded[0]).getInDimSize(kWarp), 4);
  EXPECT_EQ(map.layout(loaded[1]).getInDimSize(kWarp), 1);
  EXPECT_EQ(map.layout(loaded[1]), blockedLayout({256}, {4}, {32}, {1}, {0}));
  EXPECT_TRUE(map.layout(loaded[1]).isInjective());
}

TEST(LayoutAssignment, LocalLoadsFromSwizzledBuffersAreConflictFree) {
  // tlx.local_alloc((128, 64), fp16) gets the 128-byte NVMMA swizzle; local_load reads it in
  // 16-byte vectors along rows, which that swizzle serves without bank conflicts.
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* buf = b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {128, 64}, 2));
  ir::Value* view =
      b.create1(OpCode::LocalView, {buf, b.i32(0)}, Type::buffer(DType::F16, {128, 64}, 1));
  ir::Value* tile = b.create1(OpCode::LocalLoad, {view}, Type::tensor(DType::F16, {128, 64}));
  b.ret();
  LayoutMap map = assignLayouts(k.fn, CompileOptions{});
  const LL& regs = map.layout(tile);
  EXPECT_EQ(regs.numConsecutiveInOut(), 8);
  const SharedAllocation* alloc = map.sharedAllocation(view);
  ASSERT_NE(alloc, nullptr);
  EXPECT_EQ(alloc->swizzleBytes, 128);
  // 32 lanes x 16 bytes = 4 wavefronts at best; the same tile unswizzled needs more.
  EXPECT_EQ(sharedAccessWavefronts(regs, alloc->layout, 2, 8), 4);
  // Column reads (lane i reads row i): 32 rows 128 bytes apart all hit one bank unswizzled;
  // the swizzle spreads each group of 8 rows over 8 chunks, leaving 4 rows per bank.
  LL columnReads = blockedLayout({128, 64}, {1, 64}, {32, 1}, {4, 1}, {1, 0});
  EXPECT_EQ(sharedAccessWavefronts(columnReads, nvmmaSharedLayout({128, 64}, 2, 0), 2, 1), 32);
  EXPECT_EQ(sharedAccessWavefronts(columnReads, alloc->layout, 2, 1), 4);
}

TEST(LayoutAssignment, IfResultsShareOneLayout) {
  KernelBuilder k;
  auto& b = k.b;
  ir::Value* xp = k.arg("x_ptr", Type::ptr(DType::F32), 16);
  ir::Value* flag = k.arg("flag", Type::scalar(DType::I1), 1);
  ir::Value* x = b.load(b.addPtr(b.splat(xp, {256}), b.arange(0, 256)));
  ir::Op* branch = b.create(OpCode::If, {flag}, {x->type()});
  ir::Builder thenB(branch->addRegion());
  thenB.create(OpCode::Yield, {thenB.binary(OpCode::Add, x, x)}, {});
  ir::Builder elseB(branch->addRegion());
  elseB.create(OpCode::Yield, {elseB.constFloat(1.0, x->type())}, {});
  b.store(b.addPtr(b.splat(xp, {256}), b.arange(0, 256)), branch->result(0));
  b.ret();
  LayoutMap map = assignLayouts(k.fn, CompileOptions{});
  EXPECT_EQ(map.layout(branch->result(0)), map.layout(x));
  EXPECT_TRUE(map.conversions().empty()) << map.str(k.fn);
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The kernels in kernels/, through the front end and the specializer
// ---------------------------------------------------------------------------------------------

namespace {

struct RealKernel {
  const char* file;
  const char* kernel;
  const char* signature;
  int numWarps;
};

const RealKernel kRealKernels[] = {
    {"python/warpweave/ops/kernels/vector_add.py", "add_kernel",
     "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32:16,BLOCK=1024", 4},
    {"python/warpweave/ops/kernels/softmax.py", "softmax_kernel",
     "out_ptr:*fp16:16,in_ptr:*fp16:16,in_row_stride:i32:16,out_row_stride:i32:16,n_rows:i32,"
     "n_cols:i32:16,BLOCK=1024",
     4},
    {"python/warpweave/ops/kernels/softmax.py", "softmax_online_kernel",
     "out_ptr:*fp32:16,in_ptr:*fp32:16,in_row_stride:i32,out_row_stride:i32,n_cols:i32,BLOCK=4096",
     4},
    {"python/warpweave/ops/kernels/layernorm.py", "layernorm_fwd_kernel",
     "x_ptr:*fp16:16,y_ptr:*fp16:16,w_ptr:*fp16:16,b_ptr:*fp16:16,mean_ptr:*fp32:16,"
     "rstd_ptr:*fp32:16,stride:i32:16,n_cols:i32:16,eps:fp32,BLOCK=1024",
     4},
    {"python/warpweave/ops/kernels/layernorm.py", "layernorm_bwd_dx_kernel",
     "dx_ptr:*fp16:16,dy_ptr:*fp16:16,partial_dw_ptr:*fp32:16,partial_db_ptr:*fp32:16,"
     "x_ptr:*fp16:16,w_ptr:*fp16:16,mean_ptr:*fp32:16,rstd_ptr:*fp32:16,stride:i32,n_rows:i32,"
     "n_cols:i32,rows_per_program:i32,BLOCK=1024",
     4},
    {"python/warpweave/ops/kernels/matmul.py", "matmul_kernel",
     "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32:16,N:i32:16,K:i32:16,stride_am:i32:16,"
     "stride_ak:i32:1,stride_bk:i32:16,stride_bn:i32:1,stride_cm:i32:16,stride_cn:i32:1,"
     "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,ACTIVATION=\"leaky_relu\"",
     8},
    {"python/warpweave/ops/kernels/reduction.py", "row_max_kernel",
     "x_ptr:*fp32:16,out_ptr:*fp32:16,out_index_ptr:*i32:16,n_rows:i32,n_cols:i32,"
     "stride_row:i32,BLOCK_M=4,BLOCK_N=1024",
     4},
    {"python/warpweave/ops/kernels/embedding_bag.py", "embedding_bag_kernel",
     "weight_ptr:*fp16:16,indices_ptr:*i64:16,offsets_ptr:*i64:16,sample_weights_ptr:*fp32:16,"
     "out_ptr:*fp16:16,D:i32,stride_w:i32,stride_out:i32,BLOCK_I=8,BLOCK_D=128,"
     "HAS_SAMPLE_WEIGHTS=True,MEAN=True",
     4},
    {"python/warpweave/ops/kernels/attention.py", "attention_fwd_kernel",
     "q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,out_ptr:*fp16:16,lse_ptr:*fp32:16,"
     "sm_scale:fp32,stride_qz:i32,stride_qh:i32,stride_qm:i32,stride_kz:i32,stride_kh:i32,"
     "stride_kn:i32,stride_vz:i32,stride_vh:i32,stride_vn:i32,stride_oz:i32,stride_oh:i32,"
     "stride_om:i32,H:i32,N_CTX:i32,HEAD_DIM=128,BLOCK_M=128,BLOCK_N=64,CAUSAL=True",
     8},
    {"python/warpweave/ops/kernels/hopper/gemm_pipelined.py", "gemm_pipelined_kernel",
     "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x128>,c_desc:desc<fp16,128x128>,M:i32,N:i32,"
     "K:i32,BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,NUM_STAGES=4",
     4},
    {"python/warpweave/ops/kernels/hopper/gemm_ws.py", "gemm_ws_kernel",
     "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x128>,c_desc:desc<fp16,128x128>,M:i32,N:i32,"
     "K:i32,BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,NUM_STAGES=4,NUM_SMS=132",
     4},
    {"python/warpweave/ops/kernels/hopper/attention_ws.py", "attention_ws_kernel",
     "q_desc:desc<fp16,128x128>,k_desc:desc<fp16,128x128>,v_desc:desc<fp16,128x128>,"
     "o_desc:desc<fp16,128x128>,lse_ptr:*fp32:16,sm_scale:fp32,N_CTX:i32:16,HEAD_DIM=128,"
     "BLOCK_M=128,BLOCK_N=128,NUM_STAGES=2",
     4},
};

/// Parses and specializes one kernel (cleanup passes applied) with the sibling files its relative
/// imports name; null with a message on failure. `modules` (empty) receives the parsed files.
std::unique_ptr<ir::Function> specializeKernel(const RealKernel& k, SourceManager& sm,
                                               std::vector<ast::Module>& modules,
                                               std::string& error) {
  try {
    std::vector<SourceFile> files =
        readSourceWithImports(std::string(WW_SOURCE_DIR) + "/" + k.file);
    modules.reserve(files.size()); // the specializer keeps the modules' addresses
    specialize::SpecializeInput in;
    for (const SourceFile& f : files) {
      modules.push_back(frontend::parseModule(sm, sm.addFile(f.path, f.text)));
      in.modules.push_back(&modules.back());
    }
    in.sources = &sm;
    in.kernel = k.kernel;
    in.signature = parseSignature(k.signature);
    in.options.numWarps = k.numWarps;
    std::unique_ptr<ir::Function> fn = specialize::specialize(in);
    transforms::runCleanupPipeline(*fn);
    return fn;
  } catch (CompileError& e) {
    e.render(sm);
    error = e.what();
  } catch (const std::exception& e) {
    error = e.what();
  }
  return nullptr;
}

TEST(LayoutAssignmentOnKernels, EveryTensorGetsALayoutOnEveryTarget) {
  for (const RealKernel& k : kRealKernels) {
    SCOPED_TRACE(std::string(k.file) + ":" + k.kernel);
    SourceManager sm;
    std::vector<ast::Module> modules;
    std::string error;
    std::unique_ptr<ir::Function> fn = specializeKernel(k, sm, modules, error);
    if (!fn) {
      ADD_FAILURE() << "front end or specializer failed (not a layout problem):\n" << error;
      continue;
    }
    bool hopperOnly = std::string(k.file).find("hopper/") != std::string::npos;
    for (Target target : {Target::SM90a, Target::SM80, Target::SM100a}) {
      if (hopperOnly && target != Target::SM90a) continue; // wgmma/TMA kernels
      CompileOptions opts;
      opts.target = target;
      opts.numWarps = fn->numWarps;
      auto start = std::chrono::steady_clock::now();
      LayoutMap map;
      try {
        map = assignLayouts(*fn, opts);
      } catch (CompileError& e) {
        e.render(sm);
        ADD_FAILURE() << targetName(target) << ": " << e.what();
        continue;
      }
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      RecordProperty(std::string(k.kernel) + "_" + targetName(target) + "_ms", std::to_string(ms));
      int missing = 0;
      ir::walk(fn->body, [&](const ir::Op& op) {
        for (unsigned i = 0; i < op.numResults(); ++i)
          if (op.result(i)->type().isTensor() && !map.hasLayout(op.result(i))) {
            ++missing;
            ADD_FAILURE() << targetName(target) << ": no layout for the result of " << op.name();
          }
        for (unsigned r = 0; r < op.numRegions(); ++r)
          for (unsigned a = 0; a < op.region(r)->numArgs(); ++a)
            if (op.region(r)->arg(a)->type().isTensor() && !map.hasLayout(op.region(r)->arg(a)))
              ADD_FAILURE() << targetName(target) << ": no layout for a region argument of "
                            << op.name();
        // Every operand a consumer reads has a layout of the operand's shape.
        for (unsigned i = 0; i < op.numOperands(); ++i) {
          if (op.operand(i)->type().isTensor() && map.hasLayout(op.operand(i))) {
            EXPECT_EQ(layoutShape(map.operandLayout(op, i)), op.operand(i)->type().shape);
          }
        }
      });
      EXPECT_EQ(missing, 0);
      int kinds[5] = {0, 0, 0, 0, 0};
      for (const Conversion& c : map.conversions()) ++kinds[static_cast<int>(c.kind)];
      // A one-line summary per kernel and target; WW_LAYOUT_DUMP=1 prints every layout too.
      std::printf("%-26s %-8s %6.2f ms  conversions: %d regs, %d shuffles, %d smem, %d remat; "
                  "shared %lld B (scratch %lld)\n",
                  k.kernel, targetName(target), ms, kinds[1], kinds[2], kinds[3], kinds[4],
                  static_cast<long long>(map.sharedBytes()),
                  static_cast<long long>(map.scratchBytes()));
      if (std::getenv("WW_LAYOUT_DUMP")) std::printf("%s\n", map.str(*fn).c_str());
      for (const Conversion& c : map.conversions()) {
        EXPECT_NE(c.src, c.dst);
        EXPECT_EQ(layoutShape(c.src), layoutShape(c.dst));
      }
      EXPECT_LE(map.sharedBytes(), 227 * 1024) << "more shared memory than an H100/H200 CTA has:\n"
                                               << map.str(*fn);
    }
  }
}

TEST(LayoutAssignmentOnKernels, OnHopperOnlyEpiloguesMoveDataThroughSharedMemory) {
  // matmul, attention and the warp-specialized attention keep every tile in the layout its
  // producer gave it inside the loops; index vectors shared between row and column uses are
  // recomputed; only results headed for global memory are re-laid-out through shared memory.
  for (const char* name : {"matmul_kernel", "attention_fwd_kernel", "attention_ws_kernel"}) {
    SCOPED_TRACE(name);
    const RealKernel* k = nullptr;
    for (const RealKernel& c : kRealKernels)
      if (std::string(c.kernel) == name) k = &c;
    ASSERT_NE(k, nullptr);
    SourceManager sm;
    std::vector<ast::Module> modules;
    std::string error;
    std::unique_ptr<ir::Function> fn = specializeKernel(*k, sm, modules, error);
    ASSERT_TRUE(fn) << error;
    CompileOptions opts;
    opts.target = Target::SM90a;
    opts.numWarps = fn->numWarps;
    LayoutMap map = assignLayouts(*fn, opts);
    int shared = 0;
    for (const Conversion& c : map.conversions()) {
      if (c.kind == ConversionKind::SharedMemory) {
        ++shared;
        EXPECT_EQ(c.user->code(), OpCode::Store)
            << "a " << c.value->type().str() << " moves at " << c.user->name() << "\n"
            << map.str(*fn);
      }
      if (c.kind == ConversionKind::Rematerialize) {
        ASSERT_FALSE(c.remat.empty());
        EXPECT_EQ(c.remat.back().first, c.value);
        EXPECT_EQ(c.remat.back().second, c.dst);
      }
    }
    EXPECT_GE(shared, 1);
    EXPECT_LE(shared, 2);
  }
}

TEST(LayoutAssignmentOnKernels, KeyChoicesOnRealKernels) {
  auto assign = [](const RealKernel& k, Target target, SourceManager& sm,
                   std::vector<ast::Module>& modules, std::unique_ptr<ir::Function>& fn) {
    std::string error;
    fn = specializeKernel(k, sm, modules, error);
    EXPECT_TRUE(fn) << error;
    CompileOptions opts;
    opts.target = target;
    opts.numWarps = fn ? fn->numWarps : 4;
    return fn ? assignLayouts(*fn, opts) : LayoutMap{};
  };
  {
    // Vector add: every load and store moves 16 bytes per vector.
    SourceManager sm;
    std::vector<ast::Module> modules;
    std::unique_ptr<ir::Function> fn;
    LayoutMap map = assign(kRealKernels[0], Target::SM90a, sm, modules, fn);
    ASSERT_TRUE(fn);
    int accesses = 0;
    ir::walk(fn->body, [&](const ir::Op& op) {
      if (op.code() == OpCode::Load || op.code() == OpCode::Store) {
        ++accesses;
        EXPECT_EQ(map.vectorElems(op), 4) << op.name();
      }
    });
    EXPECT_EQ(accesses, 3);
    EXPECT_TRUE(map.conversions().empty());
  }
  {
    // Matmul: wgmma on sm_90a, mma.sync on sm_80; 8 fp16 (16 bytes) per operand load.
    for (Target target : {Target::SM90a, Target::SM80}) {
      SourceManager sm;
      std::vector<ast::Module> modules;
      std::unique_ptr<ir::Function> fn;
      LayoutMap map = assign(kRealKernels[5], target, sm, modules, fn);
      ASSERT_TRUE(fn);
      int dots = 0, loads = 0;
      ir::walk(fn->body, [&](const ir::Op& op) {
        if (op.code() == OpCode::Dot) {
          ++dots;
          ASSERT_NE(map.dot(op), nullptr);
          EXPECT_EQ(map.dot(op)->kind, target == Target::SM90a ? MmaKind::Wgmma : MmaKind::MmaSync);
          EXPECT_FALSE(map.needsConversion(op, 2)) << "the accumulator should stay in place";
        }
        if (op.code() == OpCode::Load && op.result()->type().elem == DType::F16) {
          ++loads;
          EXPECT_EQ(map.vectorElems(op), 8);
        }
      });
      EXPECT_EQ(dots, 1);
      EXPECT_EQ(loads, 2);
    }
  }
}

} // namespace

// tcgen05.ld / st .32x32b move a [128, N] tensor-memory tile straight to / from a layout that keeps
// tcgen05's rows; 16-bit and 8-bit elements pack 2 / 4 to a 32-bit column, and those columns must
// be one thread's registers.
TEST(TmemColumnBits, KeepsRowsAndPackedColumnsInOneThread) {
  // [128, 64] over 8 warps: lanes and warp bits 0-1 on rows, warp bit 2 on column 16, the
  // registers on columns 1, 2, 4, 8 and 32 (flat offsets row * 64 + column).
  LinearLayout separable =
      flatOffsetLayout({128, 64}, {1, 2, 4, 8, 32}, {64, 128, 256, 512, 1024}, {2048, 4096, 16});
  for (int bytes : {1, 2, 4}) {
    auto bits = tmemColumnBits(separable, {128, 64}, bytes);
    ASSERT_TRUE(bits) << bytes;
    EXPECT_EQ(bits->reg, (std::vector<int32_t>{1, 2, 4, 8, 32}));
    EXPECT_EQ(bits->warpGroup, (std::vector<int32_t>{16}));
  }
  // Column 1 on the warp group bit: 32-bit elements go column by column; packed ones cannot.
  LinearLayout splitPairs =
      flatOffsetLayout({128, 64}, {2, 4, 8, 16, 32}, {64, 128, 256, 512, 1024}, {2048, 4096, 1});
  EXPECT_TRUE(tmemColumnBits(splitPairs, {128, 64}, 4));
  EXPECT_FALSE(tmemColumnBits(splitPairs, {128, 64}, 2));
  EXPECT_FALSE(tmemColumnBits(splitPairs, {128, 64}, 1));
  // Column 2 on the warp group bit: 16-bit elements pack columns 0-1 in a thread, 8-bit not.
  LinearLayout splitQuads =
      flatOffsetLayout({128, 64}, {1, 4, 8, 16, 32}, {64, 128, 256, 512, 1024}, {2048, 4096, 2});
  EXPECT_TRUE(tmemColumnBits(splitQuads, {128, 64}, 2));
  EXPECT_FALSE(tmemColumnBits(splitQuads, {128, 64}, 1));
  // Lanes along the columns do not keep tcgen05's rows; neither do 64-row tiles.
  LinearLayout columnLanes =
      flatOffsetLayout({128, 64}, {64, 128, 256, 512, 1024}, {1, 2, 4, 8, 16}, {2048, 4096, 32});
  EXPECT_FALSE(tmemColumnBits(columnLanes, {128, 64}, 4));
  EXPECT_EQ(tmemColumnBits(tmemRegisterLayout({128, 64}, 8), {128, 64}, 2)->reg.size(), 5u);
  EXPECT_FALSE(tmemColumnBits(tmemRegisterLayout({64, 64}, 4), {64, 64}, 4));
}
