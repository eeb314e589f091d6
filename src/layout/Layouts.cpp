// Concrete layouts as LinearLayouts: blocked, slice, broadcast, MMA fragments, shared swizzles,
// and the bank-conflict model used to choose swizzles.
#include "layout/Layouts.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

namespace ww::layout {

namespace {

int log2Of(int64_t v) {
  int l = 0;
  while ((int64_t(1) << l) < v) ++l;
  return l;
}

void requirePowerOf2(int64_t v, const char* what) {
  if (!isPowerOf2(v))
    throw std::logic_error(std::string("layout: ") + what + " " + std::to_string(v) +
                           " is not a power of two");
}

/// Makes `ll` (out dims dim0.. covering a CTA tile) cover exactly `shape`: dims larger than the
/// tile repeat it in registers (dims visited in `order`, so order[0]'s repetitions get the low
/// register bits); dims smaller drop the register bits past the shape and zero the lane/warp/
/// block bits past it (those hardware units then hold copies).
LinearLayout fitToShape(const LinearLayout& ll, const std::vector<int64_t>& shape,
                        const std::vector<int32_t>& order) {
  int rank = static_cast<int>(shape.size());
  LinearLayout result = ll;
  for (int32_t d : order) {
    std::string name = dimName(d);
    int64_t tile = result.getOutDimSize(name);
    if (shape[d] > tile)
      result *= LinearLayout::identity1D(static_cast<int32_t>(shape[d] / tile), kRegister, name);
  }
  LinearLayout::Bases bases;
  for (auto& [inDim, dimBases] : result.getBases()) {
    std::vector<std::vector<int32_t>> kept;
    for (auto basis : dimBases) {
      bool outside = false;
      for (int d = 0; d < rank; ++d)
        if (basis[d] >= shape[d]) {
          outside = true;
          basis[d] = 0;
        }
      if (outside && inDim == kRegister) continue;
      kept.push_back(std::move(basis));
    }
    bases.emplace_back(inDim, std::move(kept));
  }
  LinearLayout::NamedSizes outs;
  for (int d = 0; d < rank; ++d) outs.emplace_back(dimName(d), static_cast<int32_t>(shape[d]));
  return LinearLayout(std::move(bases), std::move(outs));
}

/// Puts the out dims in tensor order dim0..dim<rank-1> (adding absent ones with size 1).
LinearLayout inTensorOrder(LinearLayout ll, int rank) {
  for (int d = 0; d < rank; ++d)
    if (!ll.hasOutDim(dimName(d))) ll = ll.withOutDimSize(dimName(d), 1);
  return ll.transposeOuts(dimNames(rank));
}

/// Ensures the standard in dims register, lane, warp exist (warp/lane may be size 1), in order.
LinearLayout withStandardIns(LinearLayout ll) {
  std::vector<std::string> order;
  for (const char* d : {kRegister, kLane, kWarp, kBlock}) {
    if (!ll.hasInDim(d) && d != std::string(kBlock)) ll = ll.withInDimSize(d, 1);
    if (ll.hasInDim(d)) order.push_back(d);
  }
  return ll.transposeIns(order);
}

/// Copies `ll` with basis entry of out dim `dim` cleared and that dim resized to 1 (register
/// bases that become free are dropped).
LinearLayout collapseDim(const LinearLayout& ll, int dim) {
  int rank = ll.numOutDims();
  LinearLayout::Bases bases;
  for (auto& [inDim, dimBases] : ll.getBases()) {
    std::vector<std::vector<int32_t>> kept;
    for (auto basis : dimBases) {
      basis[dim] = 0;
      kept.push_back(std::move(basis));
    }
    bases.emplace_back(inDim, std::move(kept));
  }
  LinearLayout::NamedSizes outs;
  for (int d = 0; d < rank; ++d)
    outs.emplace_back(dimName(d), d == dim ? 1 : ll.getOutDimSize(dimName(d)));
  LinearLayout collapsed(std::move(bases), std::move(outs));
  // Drop register bits that are now duplicates of lower register bits.
  int32_t freeRegs = collapsed.sublayout({kRegister}, dimNames(rank)).freeVariableMask(kRegister);
  LinearLayout::Bases pruned;
  for (auto& [inDim, dimBases] : collapsed.getBases()) {
    if (inDim != kRegister) {
      pruned.emplace_back(inDim, dimBases);
      continue;
    }
    std::vector<std::vector<int32_t>> kept;
    for (size_t bit = 0; bit < dimBases.size(); ++bit)
      if (!(freeRegs >> bit & 1)) kept.push_back(dimBases[bit]);
    pruned.emplace_back(inDim, std::move(kept));
  }
  LinearLayout::NamedSizes outs2;
  for (int d = 0; d < rank; ++d)
    outs2.emplace_back(dimName(d), collapsed.getOutDimSize(dimName(d)));
  return LinearLayout(std::move(pruned), std::move(outs2));
}

} // namespace

// ---------------------------------------------------------------------------------------------
// blocked, slice, broadcast
// ---------------------------------------------------------------------------------------------

LinearLayout tmemRegisterLayout(const std::vector<int64_t>& shape, int numWarps) {
  const int32_t groups = std::max(1, numWarps / 4);
  const int32_t cols = static_cast<int32_t>(shape.at(1) / groups);
  if (shape.at(0) == 64)
    // 64 rows (tcgen05.ld / st .16x32bx2): rows 16 w .. 16 w + 15 in lanes 0-15 of warp w's
    // quarter; threads 0-15 take the first half of the group's columns, 16-31 the second.
    return blockedLayout(shape, {1, std::max(1, cols / 2)}, {16, 2}, {4, groups}, {0, 1});
  return blockedLayout(shape, {1, std::max(1, cols)}, {32, 1}, {4, groups}, {0, 1});
}

LinearLayout tmemPairRegisterLayout(const std::vector<int64_t>& shape, int numWarps, bool lhs) {
  const int32_t cols = static_cast<int32_t>(shape.at(1));
  const int32_t laneCols = lhs ? cols : cols / 2;
  // Lane row 64 is the tile's column laneCols (accumulator) or row 0 again (A): a linear map of
  // the lanes' coordinates, applied to each basis.
  LinearLayout::Bases bases = tmemRegisterLayout({128, laneCols}, numWarps).getBases();
  for (auto& named : bases)
    for (std::vector<int32_t>& b : named.second)
      if (b[0] & 64) {
        b[0] &= 63;
        if (!lhs) b[1] ^= laneCols;
      }
  return LinearLayout(std::move(bases),
                      LinearLayout::NamedSizes{{dimName(0), 64}, {dimName(1), cols}});
}

LinearLayout flatOffsetLayout(const std::vector<int64_t>& shape,
                              const std::vector<int64_t>& regOffsets,
                              const std::vector<int64_t>& laneOffsets,
                              const std::vector<int64_t>& warpOffsets) {
  const int rank = static_cast<int>(shape.size());
  int64_t numel = 1;
  for (int64_t d : shape) {
    requirePowerOf2(d, "tensor dim");
    numel *= d;
  }
  // Row-major: the last dim holds the lowest bits of a flat offset.
  auto coords = [&](int64_t flat) {
    if (flat < 0 || flat >= numel)
      throw std::logic_error("flatOffsetLayout: offset " + std::to_string(flat) +
                             " outside the tile");
    std::vector<int32_t> c(size_t(rank), 0);
    for (int d = rank - 1; d >= 0; --d) {
      c[size_t(d)] = static_cast<int32_t>(flat % shape[size_t(d)]);
      flat /= shape[size_t(d)];
    }
    return c;
  };
  LinearLayout::Bases bases;
  for (auto [name, offsets] : {std::pair{kRegister, &regOffsets}, std::pair{kLane, &laneOffsets},
                               std::pair{kWarp, &warpOffsets}}) {
    std::vector<std::vector<int32_t>> b;
    for (int64_t f : *offsets) b.push_back(coords(f));
    bases.emplace_back(name, std::move(b));
  }
  LinearLayout::NamedSizes outs;
  for (int d = 0; d < rank; ++d)
    outs.emplace_back(dimName(d), static_cast<int32_t>(shape[size_t(d)]));
  return LinearLayout(std::move(bases), std::move(outs));
}

std::optional<TmemColumnBits> tmemColumnBits(const LinearLayout& l,
                                             const std::vector<int64_t>& shape, int elemBytes) {
  if (shape.size() != 2 || shape[0] != 128 ||
      (elemBytes != 1 && elemBytes != 2 && elemBytes != 4) || l.numOutDims() != 2 ||
      l.getInDimSizeLog2(kLane) != 5 || l.getInDimSizeLog2(kWarp) < 2)
    return std::nullopt;
  for (int i = 0; i < 5; ++i)
    if (l.getBasis(kLane, i) != std::vector<int32_t>{1 << i, 0}) return std::nullopt;
  for (int i = 0; i < 2; ++i)
    if (l.getBasis(kWarp, i) != std::vector<int32_t>{32 << i, 0}) return std::nullopt;
  TmemColumnBits out;
  int32_t used = 0;
  auto column = [&](const std::vector<int32_t>& b, std::vector<int32_t>& into) {
    if (b[0] != 0 || b[1] <= 0 || (b[1] & (b[1] - 1)) != 0 || (used & b[1])) return false;
    used |= b[1];
    into.push_back(b[1]);
    return true;
  };
  for (int i = 0; i < l.getInDimSizeLog2(kRegister); ++i)
    if (!column(l.getBasis(kRegister, i), out.reg)) return std::nullopt;
  for (int i = 2; i < l.getInDimSizeLog2(kWarp); ++i)
    if (!column(l.getBasis(kWarp, i), out.warpGroup)) return std::nullopt;
  // The columns one 32-bit column packs (bits below 4 / elemBytes) are the thread's own.
  for (int32_t bit = 1; bit < 4 / elemBytes; bit <<= 1)
    if (std::find(out.reg.begin(), out.reg.end(), bit) == out.reg.end()) return std::nullopt;
  return out;
}

LinearLayout blockedLayout(const std::vector<int64_t>& shape,
                           const std::vector<int32_t>& sizePerThread,
                           const std::vector<int32_t>& threadsPerWarp,
                           const std::vector<int32_t>& warpsPerCTA,
                           const std::vector<int32_t>& order) {
  size_t rank = shape.size();
  if (sizePerThread.size() != rank || threadsPerWarp.size() != rank || warpsPerCTA.size() != rank ||
      order.size() != rank)
    throw std::logic_error("blockedLayout: parameter ranks differ from the shape's");
  for (size_t d = 0; d < rank; ++d) {
    requirePowerOf2(shape[d], "tensor dim");
    requirePowerOf2(sizePerThread[d], "sizePerThread");
    requirePowerOf2(threadsPerWarp[d], "threadsPerWarp");
    requirePowerOf2(warpsPerCTA[d], "warpsPerCTA");
  }
  LinearLayout ll;
  for (int32_t d : order) ll *= LinearLayout::identity1D(sizePerThread[d], kRegister, dimName(d));
  for (int32_t d : order) ll *= LinearLayout::identity1D(threadsPerWarp[d], kLane, dimName(d));
  for (int32_t d : order) ll *= LinearLayout::identity1D(warpsPerCTA[d], kWarp, dimName(d));
  ll = inTensorOrder(ll, static_cast<int>(rank));
  return withStandardIns(fitToShape(ll, shape, order));
}

LinearLayout blockedLayoutForShape(const std::vector<int64_t>& shape,
                                   const std::vector<int32_t>& sizePerThread,
                                   const std::vector<int32_t>& order, int numWarps) {
  int rank = static_cast<int>(shape.size());
  std::vector<int32_t> spt = sizePerThread, tpw(rank, 1), wpc(rank, 1);
  for (int d = 0; d < rank; ++d) spt[d] = static_cast<int32_t>(std::min<int64_t>(spt[d], shape[d]));
  int32_t lanes = 32, warps = numWarps;
  for (int32_t d : order) {
    int64_t room = std::max<int64_t>(1, shape[d] / spt[d]);
    tpw[d] = static_cast<int32_t>(std::clamp<int64_t>(room, 1, lanes));
    lanes /= tpw[d];
  }
  tpw[order.back()] *= lanes;
  for (int32_t d : order) {
    int64_t room = std::max<int64_t>(1, shape[d] / (int64_t(spt[d]) * tpw[d]));
    wpc[d] = static_cast<int32_t>(std::clamp<int64_t>(room, 1, warps));
    warps /= wpc[d];
  }
  wpc[order.back()] *= warps;
  return blockedLayout(shape, spt, tpw, wpc, order);
}

LinearLayout defaultBlockedLayout(const std::vector<int64_t>& shape, int numWarps,
                                  int32_t vecElems) {
  int rank = static_cast<int>(shape.size());
  std::vector<int32_t> order, spt(rank, 1);
  for (int d = rank - 1; d >= 0; --d) order.push_back(d);
  spt[rank - 1] = vecElems;
  return blockedLayoutForShape(shape, spt, order, numWarps);
}

LinearLayout sliceLayout(const LinearLayout& parent, int dim) {
  int rank = parent.numOutDims();
  if (dim < 0 || dim >= rank) throw std::logic_error("sliceLayout: dim out of range");
  LinearLayout collapsed = collapseDim(parent, dim);
  std::vector<std::string> keep;
  for (int d = 0; d < rank; ++d)
    if (d != dim) keep.push_back(dimName(d));
  LinearLayout sliced = collapsed.sublayout(collapsed.inDimNames(), keep);
  for (int d = dim + 1; d < rank; ++d) sliced = sliced.renameOutDim(dimName(d), dimName(d - 1));
  return sliced;
}

LinearLayout expandDimsLayout(const LinearLayout& layout, int dim) {
  int rank = layout.numOutDims();
  if (dim < 0 || dim > rank) throw std::logic_error("expandDimsLayout: dim out of range");
  LinearLayout::Bases bases;
  for (auto& [inDim, dimBases] : layout.getBases()) {
    for (auto& basis : dimBases) basis.insert(basis.begin() + dim, 0);
    bases.emplace_back(inDim, std::move(dimBases));
  }
  LinearLayout::NamedSizes outs;
  for (int d = 0, src = 0; d <= rank; ++d)
    outs.emplace_back(dimName(d), d == dim ? 1 : layout.getOutDimSize(dimName(src++)));
  return LinearLayout(std::move(bases), std::move(outs));
}

std::vector<int64_t> layoutShape(const LinearLayout& l) {
  std::vector<int64_t> shape;
  for (int32_t s : l.outDimSizes()) shape.push_back(s);
  return shape;
}

LinearLayout broadcastLayout(const LinearLayout& src, const std::vector<int64_t>& shape) {
  int rank = src.numOutDims();
  if (static_cast<int>(shape.size()) != rank)
    throw std::logic_error("broadcastLayout: rank differs");
  LinearLayout result = src;
  for (int d = rank - 1; d >= 0; --d) {
    int32_t have = src.getOutDimSize(dimName(d));
    if (have == shape[d]) continue;
    if (have != 1) throw std::logic_error("broadcastLayout: only size-1 dims can be stretched");
    requirePowerOf2(shape[d], "tensor dim");
    result *= LinearLayout::identity1D(static_cast<int32_t>(shape[d]), kRegister, dimName(d));
  }
  return result.transposeOuts(dimNames(rank));
}

LinearLayout permuteLayout(const LinearLayout& layout, const std::vector<int64_t>& order) {
  int rank = layout.numOutDims();
  if (static_cast<int>(order.size()) != rank)
    throw std::logic_error("permuteLayout: order rank differs");
  LinearLayout::Bases bases;
  for (auto& [inDim, dimBases] : layout.getBases()) {
    for (auto& basis : dimBases) {
      std::vector<int32_t> permuted;
      for (int64_t from : order) permuted.push_back(basis.at(from));
      basis = std::move(permuted);
    }
    bases.emplace_back(inDim, std::move(dimBases));
  }
  LinearLayout::NamedSizes outs;
  for (int i = 0; i < rank; ++i)
    outs.emplace_back(dimName(i), layout.getOutDimSize(dimName(static_cast<int>(order[i]))));
  return LinearLayout(std::move(bases), std::move(outs));
}

LinearLayout reshapeLayout(const LinearLayout& layout, const std::vector<int64_t>& shape) {
  int rank = layout.numOutDims();
  std::vector<std::string> reversed;
  for (int d = rank - 1; d >= 0; --d) reversed.push_back(dimName(d));
  LinearLayout::NamedSizes newDims; // minor first
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    requirePowerOf2(shape[d], "tensor dim");
    newDims.emplace_back(dimName(d), static_cast<int32_t>(shape[d]));
  }
  LinearLayout ll = layout.transposeOuts(reversed).reshapeOuts(newDims);
  return ll.transposeOuts(dimNames(static_cast<int>(shape.size())));
}

const char* conversionKindName(ConversionKind k) {
  switch (k) {
  case ConversionKind::None:
    return "none";
  case ConversionKind::Registers:
    return "registers";
  case ConversionKind::WarpShuffle:
    return "shuffle";
  case ConversionKind::SharedMemory:
    return "shared";
  case ConversionKind::Rematerialize:
    return "remat";
  }
  return "?";
}

ConversionKind conversionKind(const LinearLayout& src, const LinearLayout& dst) {
  if (src == dst) return ConversionKind::None;
  if (isBroadcastWithoutMovement(src, dst)) return ConversionKind::Registers;
  // Shuffles suffice when warps (and CTAs) map identically and every element a warp needs in
  // dst is one that warp holds in src: dst's register and lane bases lie in the span of src's.
  int rank = dst.numOutDims();
  for (const char* hw : {kWarp, kBlock}) {
    if (src.getInDimSizeLog2(hw) != dst.getInDimSizeLog2(hw)) return ConversionKind::SharedMemory;
    for (int bit = 0; bit < dst.getInDimSizeLog2(hw); ++bit)
      if (dst.getBasis(hw, bit) != src.getBasis(hw, bit)) return ConversionKind::SharedMemory;
  }
  std::set<std::vector<int32_t>> span{std::vector<int32_t>(rank, 0)};
  for (const char* hw : {kRegister, kLane})
    for (int bit = 0; bit < src.getInDimSizeLog2(hw); ++bit) {
      const auto& b = src.getBasis(hw, bit);
      std::vector<std::vector<int32_t>> added;
      for (const auto& v : span) {
        std::vector<int32_t> w = v;
        for (int d = 0; d < rank; ++d) w[d] ^= b[d];
        added.push_back(std::move(w));
      }
      span.insert(added.begin(), added.end());
    }
  for (const char* hw : {kRegister, kLane})
    for (int bit = 0; bit < dst.getInDimSizeLog2(hw); ++bit)
      if (!span.count(dst.getBasis(hw, bit))) return ConversionKind::SharedMemory;
  return ConversionKind::WarpShuffle;
}

namespace {

/// Solves linear systems over GF(2): which XOR of the given generators (tensor coordinates
/// flattened to bits) equals a target. Each generator carries a tag naming it (a bit of a
/// register mask or of a lane mask); a solution is the XOR of the tags it uses.
class Gf2Solver {
public:
  struct Tag {
    int32_t regs = 0, lanes = 0;
  };
  void add(uint64_t v, Tag tag) {
    for (const auto& [pivot, row] : rows_)
      if (v >> pivot & 1) {
        v ^= row.first;
        tag.regs ^= row.second.regs;
        tag.lanes ^= row.second.lanes;
      }
    if (v == 0) return; // a combination of earlier generators (a duplicate)
    int pivot = 63 - std::countl_zero(v);
    // Keep every stored row free of the new pivot so that one pass reduces a target.
    for (auto& [p, row] : rows_)
      if (row.first >> pivot & 1) {
        row.first ^= v;
        row.second.regs ^= tag.regs;
        row.second.lanes ^= tag.lanes;
      }
    rows_.emplace(pivot, std::make_pair(v, tag));
  }
  std::optional<Tag> solve(uint64_t target) const {
    Tag t;
    for (const auto& [pivot, row] : rows_)
      if (target >> pivot & 1) {
        target ^= row.first;
        t.regs ^= row.second.regs;
        t.lanes ^= row.second.lanes;
      }
    if (target != 0) return std::nullopt;
    return t;
  }

private:
  std::map<int, std::pair<uint64_t, Tag>, std::greater<int>> rows_;
};

} // namespace

bool WarpShufflePlan::isLocal() const {
  for (int32_t x : laneXor)
    if (x) return false;
  for (size_t i = 0; i < laneImages.size(); ++i)
    if (laneImages[i] != (i < 5 ? int32_t(1) << i : 0) || registerImages[i] != 0) return false;
  return true;
}

std::optional<WarpShufflePlan> warpShufflePlan(const LinearLayout& src,
                                               const LinearLayout& gatherMap,
                                               const std::vector<int32_t>& constant, int numWarps) {
  int rank = src.numOutDims();
  if (gatherMap.numOutDims() != rank || static_cast<int>(constant.size()) != rank) return {};
  if (src.getInDimSizeLog2(kBlock) > 0 || gatherMap.getInDimSizeLog2(kBlock) > 0) return {};
  // Coordinates as one bit string: each dim's bits above the previous dims'.
  std::vector<int> shift(rank);
  int totalBits = 0;
  for (int d = 0; d < rank; ++d) {
    shift[d] = totalBits;
    totalBits += src.getOutDimSizeLog2(dimName(d));
  }
  if (totalBits > 62) return {};
  auto flat = [&](const std::vector<int32_t>& c) {
    uint64_t v = 0;
    for (int d = 0; d < rank; ++d) v |= uint64_t(static_cast<uint32_t>(c[d])) << shift[d];
    return v;
  };
  auto basisOr0 = [&](const LinearLayout& l, const char* dim, int bit) -> uint64_t {
    return bit < l.getInDimSizeLog2(dim) ? flat(l.getBasis(dim, bit)) : 0;
  };
  int laneBits = std::min(5, src.getInDimSizeLog2(kLane));
  Gf2Solver lanesOnly, regsFirst, regsAndLanes;
  for (int i = 0; i < src.getInDimSizeLog2(kRegister); ++i) {
    regsFirst.add(flat(src.getBasis(kRegister, i)), {int32_t(1) << i, 0});
    regsAndLanes.add(flat(src.getBasis(kRegister, i)), {int32_t(1) << i, 0});
  }
  for (int j = 0; j < laneBits; ++j) {
    lanesOnly.add(flat(src.getBasis(kLane, j)), {0, int32_t(1) << j});
    regsAndLanes.add(flat(src.getBasis(kLane, j)), {0, int32_t(1) << j});
  }
  // Destination register bits move to other source registers and lanes (preferably registers
  // only); lane and warp bits preferably to lanes only (each other source register they reach
  // costs one more shuffle per destination register). Data stays in its warp.
  auto solveRegister = [&](uint64_t target) {
    auto t = regsFirst.solve(target);
    return t ? t : regsAndLanes.solve(target);
  };
  auto solveThreadBit = [&](uint64_t target) {
    auto t = lanesOnly.solve(target);
    return t ? t : regsAndLanes.solve(target);
  };
  int warpBits = std::countr_zero(static_cast<uint32_t>(std::max(1, numWarps)));
  if (src.getInDimSizeLog2(kWarp) > warpBits || gatherMap.getInDimSizeLog2(kWarp) > warpBits)
    return {};
  WarpShufflePlan plan;
  plan.laneImages.assign(5 + warpBits, 0);
  plan.registerImages.assign(5 + warpBits, 0);
  for (int i = 0; i < 5 + warpBits; ++i) {
    uint64_t target = i < 5 ? basisOr0(gatherMap, kLane, i)
                            : basisOr0(gatherMap, kWarp, i - 5) ^ basisOr0(src, kWarp, i - 5);
    auto t = solveThreadBit(target);
    if (!t) return {};
    plan.laneImages[i] = t->lanes;
    plan.registerImages[i] = t->regs;
  }
  auto base = solveRegister(flat(constant));
  if (!base) return {};
  std::vector<Gf2Solver::Tag> regImages;
  for (int i = 0; i < gatherMap.getInDimSizeLog2(kRegister); ++i) {
    auto t = solveRegister(flat(gatherMap.getBasis(kRegister, i)));
    if (!t) return {};
    regImages.push_back(*t);
  }
  int32_t numRegs = gatherMap.getInDimSize(kRegister);
  for (int32_t r = 0; r < numRegs; ++r) {
    Gf2Solver::Tag t = *base;
    for (size_t i = 0; i < regImages.size(); ++i)
      if (r >> i & 1) {
        t.regs ^= regImages[i].regs;
        t.lanes ^= regImages[i].lanes;
      }
    plan.srcRegister.push_back(t.regs);
    plan.laneXor.push_back(t.lanes);
  }
  return plan;
}

bool isBroadcastWithoutMovement(const LinearLayout& src, const LinearLayout& dst) {
  int rank = dst.numOutDims();
  if (src.numOutDims() != rank) return false;
  std::vector<bool> stretched(rank);
  for (int d = 0; d < rank; ++d) {
    int32_t s = src.getOutDimSize(dimName(d)), t = dst.getOutDimSize(dimName(d));
    if (s != t && s != 1) return false;
    stretched[d] = s != t;
  }
  auto zeroed = [&](std::vector<int32_t> basis) {
    for (int d = 0; d < rank; ++d)
      if (stretched[d]) basis[d] = 0;
    return basis;
  };
  for (const char* hw : {kLane, kWarp, kBlock}) {
    if (src.getInDimSizeLog2(hw) != dst.getInDimSizeLog2(hw)) return false;
    for (int bit = 0; bit < dst.getInDimSizeLog2(hw); ++bit)
      if (zeroed(dst.getBasis(hw, bit)) != src.getBasis(hw, bit)) return false;
  }
  // Register bases must land (stretched coordinates zeroed) in the span of src's registers.
  std::vector<std::vector<int32_t>> span{std::vector<int32_t>(rank, 0)};
  for (int bit = 0; bit < src.getInDimSizeLog2(kRegister); ++bit) {
    const auto& b = src.getBasis(kRegister, bit);
    size_t n = span.size();
    for (size_t i = 0; i < n; ++i) {
      std::vector<int32_t> v = span[i];
      for (int d = 0; d < rank; ++d) v[d] ^= b[d];
      span.push_back(std::move(v));
    }
  }
  std::set<std::vector<int32_t>> reachable(span.begin(), span.end());
  for (int bit = 0; bit < dst.getInDimSizeLog2(kRegister); ++bit)
    if (!reachable.count(zeroed(dst.getBasis(kRegister, bit)))) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// tensor cores
// ---------------------------------------------------------------------------------------------

namespace {

void require2D(const std::vector<int64_t>& shape, const std::vector<int32_t>& warpsPerCTA,
               const char* who) {
  if (shape.size() != 2 || warpsPerCTA.size() != 2)
    throw std::logic_error(std::string(who) + ": needs a 2-D shape and 2 warp counts");
  requirePowerOf2(shape[0], "tensor dim");
  requirePowerOf2(shape[1], "tensor dim");
  requirePowerOf2(warpsPerCTA[0], "warpsPerCTA");
  requirePowerOf2(warpsPerCTA[1], "warpsPerCTA");
}

/// The 16 x (8*kPerReg*2) A fragment of one warp (rows dim0, K dim1) or the K x 8 B fragment
/// (K dim0, cols dim1), per the PTX ISA mma.m16n8k* tables: kPerReg consecutive K elements per
/// 32-bit register, lanes 0-3 of a group step K, groupID (lane / 4) steps M or N.
LinearLayout mmaFragment(int operandIndex, int32_t kPerReg) {
  using LL = LinearLayout;
  if (operandIndex == 0)
    return LL::identity1D(kPerReg, kRegister, dimName(1)) * LL::identity1D(4, kLane, dimName(1)) *
           LL::identity1D(8, kLane, dimName(0)) * LL::identity1D(2, kRegister, dimName(0)) *
           LL::identity1D(2, kRegister, dimName(1));
  return LL::identity1D(kPerReg, kRegister, dimName(0)) * LL::identity1D(4, kLane, dimName(0)) *
         LL::identity1D(8, kLane, dimName(1)) * LL::identity1D(2, kRegister, dimName(0));
}

/// The 16 x 8 accumulator fragment of one warp: c0,c1 at (groupID, 2*tig + {0,1}), c2,c3 eight
/// rows below.
LinearLayout accumulatorFragment() {
  using LL = LinearLayout;
  return LL::identity1D(2, kRegister, dimName(1)) * LL::identity1D(4, kLane, dimName(1)) *
         LL::identity1D(8, kLane, dimName(0)) * LL::identity1D(2, kRegister, dimName(0));
}

int32_t elementsPerRegister(int elemBits) {
  if (elemBits != 8 && elemBits != 16 && elemBits != 32)
    throw std::logic_error("mma operand: element width " + std::to_string(elemBits) +
                           " not supported (8, 16 or 32 bits)");
  return 32 / elemBits;
}

} // namespace

LinearLayout mmaSyncAccumulatorLayout(const std::vector<int64_t>& shape,
                                      const std::vector<int32_t>& warpsPerCTA) {
  require2D(shape, warpsPerCTA, "mmaSyncAccumulatorLayout");
  using LL = LinearLayout;
  LL ll = accumulatorFragment() * LL::identity1D(warpsPerCTA[1], kWarp, dimName(1)) *
          LL::identity1D(warpsPerCTA[0], kWarp, dimName(0));
  return withStandardIns(fitToShape(inTensorOrder(ll, 2), shape, {1, 0}));
}

LinearLayout mmaSyncOperandLayout(int operandIndex, const std::vector<int64_t>& shape,
                                  const std::vector<int32_t>& warpsPerCTA, int elemBits) {
  require2D(shape, warpsPerCTA, "mmaSyncOperandLayout");
  using LL = LinearLayout;
  LL ll = mmaFragment(operandIndex, elementsPerRegister(elemBits));
  // Warp ids run along N first (as in the accumulator); A is shared by the warps along N and B
  // by the warps along M.
  if (operandIndex == 0)
    ll = ll * LL::zeros1D(warpsPerCTA[1], kWarp, dimName(0)) *
         LL::identity1D(warpsPerCTA[0], kWarp, dimName(0));
  else
    ll = ll * LL::identity1D(warpsPerCTA[1], kWarp, dimName(1)) *
         LL::zeros1D(warpsPerCTA[0], kWarp, dimName(1));
  // K is the fastest repetition for both operands.
  std::vector<int32_t> order =
      operandIndex == 0 ? std::vector<int32_t>{1, 0} : std::vector<int32_t>{0, 1};
  return withStandardIns(fitToShape(inTensorOrder(ll, 2), shape, order));
}

int mmaSyncFragmentIndex(int operandIndex, int64_t row, int64_t col, int elemBits) {
  if (operandIndex == 2) return static_cast<int>((col % 2) + 2 * ((row % 16) / 8));
  const int64_t per = elementsPerRegister(elemBits), instrK = 8 * per;
  // A: per consecutive k of one row per word, words stepping the row by 8, then K by half the
  // instruction's K. B: per consecutive k per word, the second word half the K further.
  if (operandIndex == 0)
    return static_cast<int>((col % per) + per * ((row % 16) / 8) +
                            2 * per * ((col % instrK) / (instrK / 2)));
  return static_cast<int>((row % per) + per * ((row % instrK) / (instrK / 2)));
}

LinearLayout wgmmaAccumulatorLayout(const std::vector<int64_t>& shape, int32_t instrN,
                                    const std::vector<int32_t>& warpsPerCTA) {
  require2D(shape, warpsPerCTA, "wgmmaAccumulatorLayout");
  if (warpsPerCTA[0] % 4 != 0)
    throw std::logic_error("wgmmaAccumulatorLayout: warps along M must be a multiple of 4");
  if (instrN < 8 || instrN > 256 || !isPowerOf2(instrN))
    throw std::logic_error("wgmmaAccumulatorLayout: instrN must be a power of two in [8, 256]");
  using LL = LinearLayout;
  // d[i]: row = groupID + 8*((i >> 1) & 1), col = 2*tig + (i & 1) + 8*(i >> 2); warp w of the
  // group owns rows 16w..16w+15.
  LL ll = accumulatorFragment() * LL::identity1D(instrN / 8, kRegister, dimName(1)) *
          LL::identity1D(warpsPerCTA[0], kWarp, dimName(0)) *
          LL::identity1D(warpsPerCTA[1], kWarp, dimName(1));
  return withStandardIns(fitToShape(inTensorOrder(ll, 2), shape, {1, 0}));
}

LinearLayout wgmmaOperandALayout(const std::vector<int64_t>& shape,
                                 const std::vector<int32_t>& warpsPerCTA, int elemBits) {
  require2D(shape, warpsPerCTA, "wgmmaOperandALayout");
  using LL = LinearLayout;
  LL ll = mmaFragment(0, elementsPerRegister(elemBits)) *
          LL::identity1D(warpsPerCTA[0], kWarp, dimName(0)) *
          LL::zeros1D(warpsPerCTA[1], kWarp, dimName(0));
  return withStandardIns(fitToShape(inTensorOrder(ll, 2), shape, {1, 0}));
}

int32_t wgmmaInstrN(int64_t shapeN, int32_t warpsN) {
  int64_t perGroup = shapeN / std::max<int32_t>(1, warpsN);
  if (perGroup < 8) return 0;
  int32_t n = 8;
  while (n * 2 <= 256 && perGroup % (n * 2) == 0) n *= 2;
  return n;
}

// ---------------------------------------------------------------------------------------------
// shared memory
// ---------------------------------------------------------------------------------------------

namespace {

/// Builds offset -> coords from a linear coords -> offset map given per coordinate bit.
/// `offsetOfUnit(d, bit)` is the element offset of the coordinate with only bit `bit` of dim `d`
/// set.
template <typename F>
LinearLayout sharedFromCoordinateMap(const std::vector<int64_t>& shape, F offsetOfUnit) {
  int rank = static_cast<int>(shape.size());
  int64_t total = 1;
  for (int64_t s : shape) {
    requirePowerOf2(s, "shared tile dim");
    total *= s;
  }
  LinearLayout::Bases bases;
  for (int d = 0; d < rank; ++d) {
    std::vector<std::vector<int32_t>> dimBases;
    for (int bit = 0; bit < log2Of(shape[d]); ++bit)
      dimBases.push_back({static_cast<int32_t>(offsetOfUnit(d, bit))});
    bases.emplace_back(dimName(d), std::move(dimBases));
  }
  LinearLayout forward(std::move(bases),
                       LinearLayout::NamedSizes{{kOffset, static_cast<int32_t>(total)}});
  return forward.invert();
}

} // namespace

LinearLayout nvmmaSharedLayout(const std::vector<int64_t>& shape, int elemBytes, int swizzleBytes,
                               const std::vector<int32_t>& order) {
  if (shape.size() == 1)
    return LinearLayout::identity1D(static_cast<int32_t>(shape[0]), kOffset, dimName(0));
  if (shape.size() != 2 || order.size() != 2)
    throw std::logic_error("nvmmaSharedLayout: needs a 1-D or 2-D tile");
  if (swizzleBytes != 0 && swizzleBytes != 32 && swizzleBytes != 64 && swizzleBytes != 128)
    throw std::logic_error("nvmmaSharedLayout: swizzle must be 0, 32, 64 or 128 bytes");
  requirePowerOf2(elemBytes, "element bytes");
  int contig = order[0], strided = order[1];
  int64_t cols = shape[contig], rows = shape[strided];
  int64_t rowElems = swizzleBytes == 0 ? cols : swizzleBytes / elemBytes;
  if (cols < rowElems)
    throw std::logic_error("nvmmaSharedLayout: contiguous dim of " + std::to_string(cols) +
                           " elements is narrower than the " + std::to_string(swizzleBytes) +
                           "-byte swizzle row");
  int swizzleBits = swizzleBytes == 0 ? 0 : log2Of(swizzleBytes / 16);
  auto byteOffset = [&](int64_t row, int64_t col) {
    int64_t block = col / rowElems, inRow = col % rowElems;
    int64_t byte = ((block * rows + row) * rowElems + inRow) * elemBytes;
    int64_t mask = (int64_t(1) << swizzleBits) - 1;
    return byte ^ (((byte >> 7) & mask) << 4);
  };
  return sharedFromCoordinateMap(shape, [&](int d, int bit) {
    int64_t unit = int64_t(1) << bit;
    int64_t byte = d == contig ? byteOffset(0, unit) : byteOffset(unit, 0);
    return byte / elemBytes;
  });
}

LinearLayout fp4PaddedSharedLayout(int64_t rows, int64_t cols) {
  if (cols % 64 != 0)
    throw std::logic_error("fp4PaddedSharedLayout: rows of " + std::to_string(cols) +
                           " bytes are not whole 128-value TMA boxes");
  // Byte offset -> (row, padded byte), then padded byte p -> tile byte: bits 0-2 stay, bit 3
  // (the second half of a 16-byte chunk, padding) drops, bits 4 and up move down one.
  const LinearLayout padded = nvmmaSharedLayout({rows, 2 * cols}, 1, 128);
  LinearLayout::Bases bases;
  for (const auto& [in, vectors] : padded.getBases()) {
    std::vector<std::vector<int32_t>> mapped;
    for (const std::vector<int32_t>& v : vectors) {
      const int32_t p = v.at(1);
      mapped.push_back({v.at(0), (p & 7) | ((p >> 4) << 3)});
    }
    bases.emplace_back(in, std::move(mapped));
  }
  return LinearLayout(std::move(bases),
                      LinearLayout::NamedSizes{{dimName(0), static_cast<int32_t>(rows)},
                                               {dimName(1), static_cast<int32_t>(cols)}});
}

int nvmmaSwizzleBytes(const std::vector<int64_t>& shape, int elemBytes,
                      const std::vector<int32_t>& order) {
  if (shape.size() != 2) return 0;
  int64_t rowBytes = shape[order[0]] * elemBytes;
  for (int s : {128, 64, 32})
    if (rowBytes >= s) return s;
  return 0;
}

int64_t sharedTileAlignment(const std::vector<int64_t>& shape, int elemBytes) {
  bool pow2 = std::all_of(shape.begin(), shape.end(), isPowerOf2);
  bool swizzled = pow2 && shape.size() == 2 && shape[0] >= 8 && nvmmaSwizzleBytes(shape, elemBytes);
  return swizzled ? 1024 : 128;
}

LinearLayout swizzledSharedLayout(const std::vector<int64_t>& shape, int32_t vec, int32_t perPhase,
                                  int32_t maxPhase, const std::vector<int32_t>& order) {
  int rank = static_cast<int>(shape.size());
  if (static_cast<int>(order.size()) != rank)
    throw std::logic_error("swizzledSharedLayout: order rank differs from the shape's");
  requirePowerOf2(vec, "vec");
  requirePowerOf2(perPhase, "perPhase");
  requirePowerOf2(maxPhase, "maxPhase");
  // Element strides of the dims, order[0] fastest (no padding).
  std::vector<int64_t> stride(rank);
  int64_t s = 1;
  for (int32_t d : order) {
    stride[d] = s;
    s *= shape[d];
  }
  int contig = order[0];
  int64_t cols = shape[contig];
  int rowBit0 = log2Of(perPhase), phaseBits = log2Of(maxPhase), vecBits = log2Of(vec);
  int colBits = log2Of(cols);
  return sharedFromCoordinateMap(shape, [&](int d, int bit) -> int64_t {
    int64_t off = stride[d] << bit;
    if (rank >= 2 && d == order[1]) {
      int phaseBit = bit - rowBit0;
      // Row bit `bit` flips phase bit phaseBit, which XORs the vector index within the row.
      if (phaseBit >= 0 && phaseBit < phaseBits && vecBits + phaseBit < colBits)
        off ^= int64_t(1) << (vecBits + phaseBit);
    }
    return off;
  });
}

int sharedAccessWavefronts(const LinearLayout& distributed, const LinearLayout& shared,
                           int elemBytes, int32_t vecElems) {
  // Every access of the warp is the lane-0 access XORed with a constant in offset space (the
  // maps are linear), which permutes banks without changing conflicts: analysing the accesses
  // of register group 0 of warp 0 is exact for all of them.
  LinearLayout toOffset = distributed.compose(shared.invert());
  int32_t lanes = distributed.getInDimSize(kLane);
  int vecBytes = vecElems * elemBytes;
  int lanesPerPhase = vecBytes >= 16 ? 8 : vecBytes >= 8 ? 16 : 32;
  int wavefronts = 0;
  for (int32_t phaseStart = 0; phaseStart < lanes; phaseStart += lanesPerPhase) {
    std::map<int64_t, std::set<int64_t>> wordsPerBank;
    for (int32_t lane = phaseStart; lane < std::min(lanes, phaseStart + lanesPerPhase); ++lane)
      for (int32_t r = 0; r < vecElems; ++r) {
        auto out = toOffset.apply({{kRegister, r}, {kLane, lane}});
        int64_t byte = int64_t(out[0].second) * elemBytes;
        for (int64_t b = byte / 4; b <= (byte + elemBytes - 1) / 4; ++b)
          wordsPerBank[b % 32].insert(b);
      }
    size_t worst = 1;
    for (const auto& [bank, words] : wordsPerBank) worst = std::max(worst, words.size());
    wavefronts += static_cast<int>(worst);
  }
  return wavefronts;
}

std::optional<LinearLayout> stmatrixAccessLayout(const LinearLayout& src) {
  int rank = src.numOutDims();
  if (rank < 1 || !src.hasInDim(kRegister) || !src.hasInDim(kLane) ||
      src.getInDimSizeLog2(kLane) != 5 || src.getInDimSizeLog2(kRegister) < 1)
    return std::nullopt;
  auto bases = [&](const char* dim) {
    std::vector<std::vector<int32_t>> out;
    for (int bit = 0; bit < src.getInDimSizeLog2(dim); ++bit) out.push_back(src.getBasis(dim, bit));
    return out;
  };
  auto regs = bases(kRegister), lanes = bases(kLane);
  auto fastest = [&](const std::vector<int32_t>& b, int32_t v) {
    for (int d = 0; d < rank; ++d)
      if (b[d] != (d == rank - 1 ? v : 0)) return false;
    return true;
  };
  if (!fastest(regs[0], 1) || !fastest(lanes[0], 2) || !fastest(lanes[1], 4)) return std::nullopt;
  size_t matrixBits = std::min<size_t>(regs.size() - 1, 2);
  std::vector<std::vector<int32_t>> accessRegs{regs[0], lanes[0], lanes[1]};
  accessRegs.insert(accessRegs.end(), regs.begin() + 1 + matrixBits, regs.end());
  std::vector<std::vector<int32_t>> accessLanes{lanes[2], lanes[3], lanes[4]};
  for (size_t i = 0; i < 2; ++i)
    accessLanes.push_back(i < matrixBits ? regs[1 + i] : std::vector<int32_t>(rank, 0));
  LinearLayout::Bases out;
  for (const std::string& dim : src.inDimNames()) {
    if (dim == kRegister)
      out.emplace_back(dim, accessRegs);
    else if (dim == kLane)
      out.emplace_back(dim, accessLanes);
    else
      out.emplace_back(dim, bases(dim.c_str()));
  }
  LinearLayout::NamedSizes outDims;
  for (int d = 0; d < rank; ++d) outDims.emplace_back(src.outDimNames()[d], src.outDimSizes()[d]);
  return LinearLayout(std::move(out), std::move(outDims));
}

LinearLayout conversionSharedLayout(const LinearLayout& src, const LinearLayout& dst,
                                    int elemBytes) {
  std::vector<int64_t> shape = layoutShape(src);
  int rank = static_cast<int>(shape.size());
  std::vector<int32_t> order;
  for (int d = rank - 1; d >= 0; --d) order.push_back(d);
  std::string fastest = dimName(rank - 1);
  int32_t maxVec = std::max(1, 16 / elemBytes);
  int32_t vecW = std::min(src.numConsecutiveInOut(fastest), maxVec);
  int32_t vecR = std::min(dst.numConsecutiveInOut(fastest), maxVec);
  vecW = static_cast<int32_t>(std::min<int64_t>(vecW, shape[rank - 1]));
  vecR = static_cast<int32_t>(std::min<int64_t>(vecR, shape[rank - 1]));
  LinearLayout best = swizzledSharedLayout(shape, 1, 1, 1, order);
  if (rank < 2) return best;
  int bestCost = sharedAccessWavefronts(src, best, elemBytes, vecW) +
                 sharedAccessWavefronts(dst, best, elemBytes, vecR);
  for (int32_t vec : {vecW, vecR})
    for (int32_t perPhase = 1; perPhase <= 8; perPhase *= 2)
      for (int32_t maxPhase = 2; maxPhase <= 32; maxPhase *= 2) {
        if (int64_t(vec) * maxPhase > shape[rank - 1]) break;
        LinearLayout cand = swizzledSharedLayout(shape, vec, perPhase, maxPhase, order);
        int cost = sharedAccessWavefronts(src, cand, elemBytes, vecW) +
                   sharedAccessWavefronts(dst, cand, elemBytes, vecR);
        if (cost < bestCost) {
          bestCost = cost;
          best = cand;
        }
      }
  return best;
}

std::vector<int32_t> ConversionRounds::project(std::vector<int32_t> coord) const {
  // Highest bits first, so that the lower bits of one dim keep their positions.
  for (size_t i = dropped.size(); i-- > 0;) {
    auto [d, bit] = dropped[i];
    int32_t c = coord.at(d);
    coord[d] = (c & (bit - 1)) | ((c >> 1) & ~(bit - 1));
  }
  return coord;
}

int32_t ConversionRounds::fullRegister(int32_t r, int64_t round, bool ofSrc) const {
  const std::vector<int>& bits = ofSrc ? srcRegisterBits : dstRegisterBits;
  std::vector<std::pair<int, int32_t>> inserts;
  for (size_t i = 0; i < bits.size(); ++i)
    inserts.emplace_back(bits[i], static_cast<int32_t>((round >> i) & 1));
  std::sort(inserts.begin(), inserts.end());
  for (auto [p, v] : inserts) {
    int32_t low = r & ((int32_t(1) << p) - 1);
    r = low | (v << p) | ((r >> p) << (p + 1));
  }
  return r;
}

ConversionRounds conversionRounds(const LinearLayout& src, const LinearLayout& dst,
                                  const std::vector<int32_t>& constant, int64_t maxElements) {
  ConversionRounds plan;
  plan.src = src;
  plan.dst = dst;
  int rank = src.numOutDims();
  if (dst.numOutDims() != rank || !src.hasInDim(kRegister) || !dst.hasInDim(kRegister)) return plan;
  // A coordinate bit may be iterated when exactly one register basis of each layout is that
  // bit alone and no other basis of either layout touches it.
  auto uses = [&](const LinearLayout& l, int d, int32_t bit) {
    int n = 0;
    for (const auto& [name, bases] : l.getBases())
      for (const auto& b : bases) n += (b[d] & bit) != 0;
    return n;
  };
  auto singleRegister = [&](const LinearLayout& l, int d, int32_t bit) {
    for (int i = 0; i < l.getInDimSizeLog2(kRegister); ++i) {
      const auto& b = l.getBasis(kRegister, i);
      bool only = true;
      for (int o = 0; o < rank; ++o) only = only && b[o] == (o == d ? bit : 0);
      if (only) return i;
    }
    return -1;
  };
  int64_t elements = src.getTotalOutDimSize();
  // Outer dims and high bits first: they are the least likely to be vectorized.
  for (int d = 0; d < rank && elements > maxElements; ++d) {
    for (int32_t bit = src.outDimSizes()[d] / 2; bit >= 1 && elements > maxElements; bit /= 2) {
      if (d < static_cast<int>(constant.size()) && (constant[d] & bit)) continue;
      if (uses(src, d, bit) != 1 || uses(dst, d, bit) != 1) continue;
      int rs = singleRegister(src, d, bit), rd = singleRegister(dst, d, bit);
      if (rs < 0 || rd < 0) continue;
      plan.srcRegisterBits.push_back(rs);
      plan.dstRegisterBits.push_back(rd);
      plan.dropped.emplace_back(d, bit);
      elements /= 2;
    }
  }
  if (plan.dropped.empty()) return plan;
  // `dropped` in ascending (dim, bit) order for project(); the register bits follow it.
  std::vector<size_t> order(plan.dropped.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return plan.dropped[a] < plan.dropped[b]; });
  ConversionRounds sorted;
  for (size_t i : order) {
    sorted.dropped.push_back(plan.dropped[i]);
    sorted.srcRegisterBits.push_back(plan.srcRegisterBits[i]);
    sorted.dstRegisterBits.push_back(plan.dstRegisterBits[i]);
  }
  auto reduce = [&](const LinearLayout& l, const std::vector<int>& removed) {
    LinearLayout::Bases bases = l.getBases();
    for (auto& [name, list] : bases) {
      std::vector<std::vector<int32_t>> kept;
      for (size_t i = 0; i < list.size(); ++i) {
        if (name == kRegister &&
            std::find(removed.begin(), removed.end(), static_cast<int>(i)) != removed.end())
          continue;
        kept.push_back(sorted.project(list[i]));
      }
      list = std::move(kept);
    }
    LinearLayout::NamedSizes outs;
    for (int d = 0; d < rank; ++d) {
      int32_t size = l.outDimSizes()[d];
      for (auto [dd, bit] : sorted.dropped) size /= dd == d ? 2 : 1;
      outs.emplace_back(l.outDimNames()[d], size);
    }
    return LinearLayout(std::move(bases), std::move(outs));
  };
  sorted.src = reduce(src, sorted.srcRegisterBits);
  sorted.dst = reduce(dst, sorted.dstRegisterBits);
  return sorted;
}

} // namespace ww::layout
