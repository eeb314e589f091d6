// Reductions: combine within each thread (max/min as a shallow tree), then across lanes with
// shfl.sync.bfly, then across warps through shared memory; sum/max/min/argmax/argmin and custom
// combine regions.
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"

#include "layout/Layouts.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

// The verifier has checked the region against Ops.def's REGIONS line: present for kind "custom",
// taking a scalar per input twice (a..., b...) and yielding one per input, of its element type.
Regs FunctionLowering::inlineCombine(const ir::Op& op, const Regs& lhs, const Regs& rhs) {
  const ir::Block& region = *op.region(0);
  for (size_t i = 0; i < lhs.size(); ++i) bind(region.arg(i), {lhs[i]});
  for (size_t i = 0; i < rhs.size(); ++i) bind(region.arg(lhs.size() + i), {rhs[i]});
  for (const auto& inner : region.ops())
    if (inner.get() != region.terminator()) lowerOp(*inner);
  const ir::Op* yield = region.terminator();
  Regs out;
  for (unsigned i = 0; i < yield->numOperands(); ++i)
    out.push_back(regsOf(yield->operand(i)).at(0));
  return out;
}

namespace {

/// Moves a value of class `c` across lanes with shfl.sync.bfly (64-bit values in two halves,
/// 16-bit and predicate values widened to 32 bits).
std::string butterfly(PtxBuilder& b, const std::string& x, RegClass c, int laneMask) {
  auto shfl = [&](const std::string& v32, RegClass cls) {
    std::string d = b.newReg(cls);
    b.inst("shfl.sync.bfly.b32", {d, v32, immInt(laneMask), "31", "-1"});
    return d;
  };
  switch (c) {
  case RegClass::B32:
  case RegClass::F32:
    return shfl(b.materialize(x, c), c);
  case RegClass::B16: {
    std::string w = b.pure("cvt.u32.u16", RegClass::B32, {b.materialize(x, c)});
    return b.pure("cvt.u16.u32", RegClass::B16, {shfl(w, RegClass::B32)});
  }
  case RegClass::Pred: {
    std::string w = b.pure("selp.u32", RegClass::B32, {"1", "0", b.materialize(x, c)});
    return b.pure("setp.ne.u32", RegClass::Pred, {shfl(w, RegClass::B32), "0"});
  }
  case RegClass::B64:
  case RegClass::F64: {
    std::string lo = b.newReg(RegClass::B32), hi = b.newReg(RegClass::B32);
    b.inst("mov.b64", {"{" + lo + ", " + hi + "}", b.materialize(x, c)});
    std::string slo = shfl(lo, RegClass::B32), shi = shfl(hi, RegClass::B32);
    return b.pure(c == RegClass::F64 ? "mov.b64" : "mov.b64", c, {"{" + slo + ", " + shi + "}"});
  }
  }
  throw std::logic_error("butterfly: unknown register class");
}

} // namespace

void FunctionLowering::lowerReduce(const ir::Op& op) {
  int64_t axis = ir::attr::Reduce::axis(op);
  std::string kind = ir::attr::Reduce::kind(op);
  const ir::Type& in0 = op.operand(0)->type();
  int rank = static_cast<int>(in0.shape.size());
  if (axis < 0) axis += rank; // then in [0, rank): Ops.def's DropAxis rule, verified
  // The kind is one of Ops.def's allowed values (the verifier's attribute check).
  bool isArg = kind == "argmax" || kind == "argmin";
  const LinearLayout& S = operandLayoutOf(op, 0);
  std::string axisName = layout::dimName(static_cast<int>(axis));
  int32_t numRegs = S.getInDimSize(layout::kRegister);
  int32_t dup = S.freeVariableMask(layout::kRegister);

  // The reduced tuple: the inputs, plus the index along the axis for argmax/argmin.
  std::vector<Regs> inputs;
  std::vector<DType> types;
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    if (operandLayoutOf(op, i) != S)
      throw std::logic_error("codegen: reduce operands in different layouts");
    inputs.push_back(operand(op, i));
    types.push_back(op.operand(i)->type().elem);
  }
  if (isArg && inputs.size() == 1) {
    Regs idx;
    for (int32_t r = 0; r < numRegs; ++r) idx.push_back(coordinate(S, static_cast<int>(axis), r));
    inputs.push_back(idx);
    types.push_back(DType::I32);
  }
  if (isArg && inputs.size() != 2)
    raiseError(op.loc(), "reduce kind '" + kind + "' takes values (and optionally indices)");

  auto combine = [&](const Regs& a, const Regs& b) -> Regs {
    ScalarContext cx = scalarContext(op);
    if (kind == "custom") return inlineCombine(op, a, b);
    if (isArg) {
      ir::Op gt(OpCode::Cmp, op.loc()), eq(OpCode::Cmp, op.loc()), lt(OpCode::Cmp, op.loc());
      ir::attr::Cmp::set::pred(gt, kind == "argmax" ? "gt" : "lt");
      ir::attr::Cmp::set::pred(eq, "eq");
      ir::attr::Cmp::set::pred(lt, "lt");
      std::string better = emitElementwise(cx, gt, {b[0], a[0]}, {types[0], types[0]}, DType::I1);
      std::string same = emitElementwise(cx, eq, {b[0], a[0]}, {types[0], types[0]}, DType::I1);
      std::string earlier = emitElementwise(cx, lt, {b[1], a[1]}, {types[1], types[1]}, DType::I1);
      if (ir::isFloat(types[0])) {
        // NaN is skipped, as by tl.max / tl.min (and the interpreter's fold): a NaN candidate
        // gives way to any number, and two NaNs tie. (x != x is unordered: true for NaN.)
        ir::Op ne(OpCode::Cmp, op.loc());
        ir::attr::Cmp::set::pred(ne, "ne");
        std::string aNan = emitElementwise(cx, ne, {a[0], a[0]}, {types[0], types[0]}, DType::I1);
        std::string bNan = emitElementwise(cx, ne, {b[0], b[0]}, {types[0], types[0]}, DType::I1);
        std::string bNum = b_.pure("not.pred", RegClass::Pred, {bNan});
        better = b_.pure("or.pred", RegClass::Pred,
                         {better, b_.pure("and.pred", RegClass::Pred, {aNan, bNum})});
        same = b_.pure("or.pred", RegClass::Pred,
                       {same, b_.pure("and.pred", RegClass::Pred, {aNan, bNan})});
      }
      std::string tie = b_.pure("and.pred", RegClass::Pred, {same, earlier});
      std::string take = b_.pure("or.pred", RegClass::Pred, {better, tie});
      ir::Op sel(OpCode::Select, op.loc());
      return {
          emitElementwise(cx, sel, {take, b[0], a[0]}, {DType::I1, types[0], types[0]}, types[0]),
          emitElementwise(cx, sel, {take, b[1], a[1]}, {DType::I1, types[1], types[1]}, types[1])};
    }
    OpCode code = kind == "sum" ? OpCode::Add : kind == "max" ? OpCode::Max : OpCode::Min;
    ir::Op comb(code, op.loc());
    Regs out;
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(emitElementwise(cx, comb, {a[i], b[i]}, {types[i], types[i]}, types[i]));
    return out;
  };

  // 1. Within the thread: registers with equal coordinates off the axis form one group.
  std::map<std::vector<int32_t>, size_t> groupOf;
  std::vector<std::vector<Regs>> members;
  std::vector<size_t> regGroup(numRegs);
  int axisIdx = static_cast<int>(axis);
  for (int32_t r = 0; r < numRegs; ++r) {
    std::vector<int32_t> key(rank, 0);
    for (int bit = 0; bit < S.getInDimSizeLog2(layout::kRegister); ++bit)
      if (r >> bit & 1) {
        const auto& basis = S.getBasis(layout::kRegister, bit);
        for (int d = 0; d < rank; ++d) key[d] ^= basis[d];
      }
    key[axisIdx] = 0;
    auto [it, fresh] = groupOf.emplace(key, members.size());
    regGroup[r] = it->second;
    if (!fresh && (r & dup)) continue; // a copy of a register already combined
    Regs elem;
    for (const auto& in : inputs) elem.push_back(in.at(r));
    if (fresh) members.emplace_back();
    members[it->second].push_back(std::move(elem));
  }
  // max and min combine a group's registers as kChains chains over consecutive runs of them,
  // whose results meet in a balanced tree (order kept: the combine need only be associative);
  // the result is then about n / kChains + log2(kChains) dependent combines from the inputs
  // instead of n - 1. An attention row max over a wgmma accumulator (32 registers a row) was 31
  // dependent max.f32 at the head of the softmax's critical path (every exp2 of the row waits
  // for it); now it is 3 + 3. Not a full tree: ptxas schedules one breadth first and the
  // memory-bound softmax at 64 registers a thread spilled; kChains partials bound what stays
  // live. Sums keep one chain: their rounding stays as it was, and the layernorms at 64
  // registers spilled even with 8 partial sums (a softmax's row sum follows its exp2s, whose
  // latency hides the chain's).
  constexpr size_t kChains = 8;
  bool minMax = kind == "max" || kind == "min";
  std::function<Regs(size_t, size_t, const std::vector<Regs>&)> tree =
      [&](size_t lo, size_t n, const std::vector<Regs>& m) -> Regs {
    if (n == 1) return m[lo];
    size_t half = std::bit_floor(n - 1);
    Regs left = tree(lo, half, m);
    return combine(left, tree(lo + half, n - half, m));
  };
  std::vector<Regs> acc;
  for (const auto& m : members) {
    size_t run = minMax ? (m.size() + kChains - 1) / kChains : m.size();
    std::vector<Regs> partials;
    for (size_t lo = 0; lo < m.size(); lo += run) {
      Regs p = m[lo];
      for (size_t i = lo + 1; i < std::min(lo + run, m.size()); ++i) p = combine(p, m[i]);
      partials.push_back(std::move(p));
    }
    acc.push_back(tree(0, partials.size(), partials));
  }

  // Lane and warp bits must each move along the axis only or off it only.
  auto axisBits = [&](const char* dim) {
    int32_t mask = 0;
    for (int bit = 0; bit < S.getInDimSizeLog2(dim); ++bit) {
      const auto& basis = S.getBasis(dim, bit);
      bool on = basis[axisIdx] != 0, off = false;
      for (int d = 0; d < rank; ++d) off |= d != axisIdx && basis[d] != 0;
      if (on && off)
        throw std::logic_error("codegen: reduce over a layout mixing the axis with other dims");
      if (on) mask |= 1 << bit;
    }
    return mask;
  };
  int32_t laneAxis = axisBits(layout::kLane), warpAxis = axisBits(layout::kWarp);

  // 2. Across lanes: a butterfly per lane bit along the axis leaves the result in every lane.
  for (int bit = 0; bit < 5; ++bit) {
    if (!(laneAxis >> bit & 1)) continue;
    for (auto& g : acc) {
      Regs other;
      for (size_t i = 0; i < g.size(); ++i)
        other.push_back(butterfly(b_, g[i], regClassOf(types[i]), 1 << bit));
      g = combine(g, other);
    }
  }

  // 3. Across warps: each warp's partial goes to shared memory, slot [element][warp along axis].
  std::vector<int64_t> reducedShape;
  for (int d = 0; d < rank; ++d)
    if (d != axisIdx) reducedShape.push_back(in0.shape[d]);
  if (warpAxis) {
    int numAxisWarps = 1 << std::popcount(static_cast<uint32_t>(warpAxis));
    int64_t reducedElems = 1;
    for (int64_t s : reducedShape) reducedElems *= s;
    // Offsets of one slot per element, in units of one value; values of each input are 8 bytes
    // apart per slot so that any type fits.
    int64_t slots = reducedElems * numAxisWarps;
    int64_t inputsBytes = slots * 8;
    int64_t base = scratch(inputsBytes * static_cast<int64_t>(types.size()));
    auto reducedIndex = [&](const std::vector<int32_t>& c) {
      int64_t idx = 0;
      for (int d = 0, k = 0; d < rank; ++d)
        if (d != axisIdx) idx = idx * reducedShape[k++] + c[d];
      return idx;
    };
    // tid images: lane/warp bits off the axis select the element, warp bits on it the slot.
    std::vector<int32_t> images(5 + std::countr_zero(static_cast<uint32_t>(warps())), 0);
    int warpAxisRank = 0;
    for (int bit = 0; bit < S.getInDimSizeLog2(layout::kLane) && bit < 5; ++bit)
      if (!(laneAxis >> bit & 1))
        images[bit] =
            static_cast<int32_t>(reducedIndex(S.getBasis(layout::kLane, bit)) * numAxisWarps * 8);
    for (int bit = 0; bit < S.getInDimSizeLog2(layout::kWarp); ++bit) {
      if (5 + bit >= static_cast<int>(images.size())) break;
      if (warpAxis >> bit & 1)
        images[5 + bit] = (1 << warpAxisRank++) * 8;
      else
        images[5 + bit] =
            static_cast<int32_t>(reducedIndex(S.getBasis(layout::kWarp, bit)) * numAxisWarps * 8);
    }
    int32_t hwBits = 0;
    std::string hw = tidLinear(images, &hwBits);
    // Only lane 0 of the axis lanes writes (the others hold the same values).
    std::string writer;
    if (laneAxis) {
      std::string bits = b_.pure("and.b32", RegClass::B32, {tid(), immInt(laneAxis)});
      writer = b_.pure("setp.eq.u32", RegClass::Pred, {bits, "0"});
    }
    std::vector<int64_t> groupOffset(acc.size());
    for (int32_t r = 0; r < numRegs; ++r) {
      if (r & dup) continue;
      groupOffset[regGroup[r]] =
          reducedIndex([&] {
            std::vector<int32_t> c(rank, 0);
            for (int bit = 0; bit < S.getInDimSizeLog2(layout::kRegister); ++bit)
              if (r >> bit & 1) {
                const auto& basis = S.getBasis(layout::kRegister, bit);
                for (int d = 0; d < rank; ++d) c[d] ^= basis[d];
              }
            return c;
          }()) *
          numAxisWarps * 8;
    }
    barrier();
    for (size_t g = 0; g < acc.size(); ++g)
      for (size_t i = 0; i < types.size(); ++i) {
        RegClass c = regClassOf(types[i]);
        std::string v = b_.materialize(acc[g][i], c);
        std::string mt = c == RegClass::F32   ? "f32"
                         : c == RegClass::F64 ? "f64"
                                              : bitType(types[i]);
        if (c == RegClass::Pred) {
          v = b_.pure("selp.u16", RegClass::B16, {"1", "0", v});
          mt = "b16";
        }
        std::string addr =
            sharedAddress(xorConst(hw, hwBits, static_cast<int32_t>(groupOffset[g])));
        b_.inst("st.shared." + mt,
                {"[" + addr + "+" + std::to_string(base + i * inputsBytes) + "]", v}, writer);
      }
    barrier();
    // Every thread combines the partials of its elements in warp order.
    std::vector<int32_t> readImages = images;
    for (int bit = 0; bit < S.getInDimSizeLog2(layout::kWarp); ++bit)
      if (warpAxis >> bit & 1 && 5 + bit < static_cast<int>(readImages.size()))
        readImages[5 + bit] = 0;
    int32_t readBits = 0;
    std::string readHw = tidLinear(readImages, &readBits);
    for (size_t g = 0; g < acc.size(); ++g) {
      Regs total;
      for (int w = 0; w < numAxisWarps; ++w) {
        Regs part;
        for (size_t i = 0; i < types.size(); ++i) {
          RegClass c = regClassOf(types[i]);
          std::string mt = c == RegClass::F32   ? "f32"
                           : c == RegClass::F64 ? "f64"
                                                : bitType(types[i]);
          std::string d = b_.newReg(c == RegClass::Pred ? RegClass::B16 : c);
          if (c == RegClass::Pred) mt = "b16";
          std::string addr = sharedAddress(
              xorConst(readHw, readBits, static_cast<int32_t>(groupOffset[g] + w * 8)));
          b_.inst("ld.shared." + mt,
                  {d, "[" + addr + "+" + std::to_string(base + i * inputsBytes) + "]"});
          if (c == RegClass::Pred) d = b_.pure("setp.ne.u16", RegClass::Pred, {d, "0"});
          part.push_back(d);
        }
        total = w == 0 ? part : combine(total, part);
      }
      acc[g] = total;
    }
  }

  // The outputs of the reduction (argmax/argmin give the index only).
  std::vector<size_t> outputs;
  if (isArg && op.numResults() == 1)
    outputs = {1};
  else
    for (unsigned i = 0; i < op.numResults(); ++i) outputs.push_back(i);

  if (rank == 1) {
    for (size_t k = 0; k < outputs.size(); ++k) bind(op.result(k), {acc.at(0).at(outputs[k])});
    return;
  }
  // 4. The thread now holds each reduced element of its groups: as a layout, S with the axis
  // dropped (lanes and warps along it hold copies). Move that to the result's layout.
  LinearLayout::Bases bases;
  for (const auto& in : S.inDimNames()) {
    std::vector<std::vector<int32_t>> vs;
    for (int bit = 0; bit < S.getInDimSizeLog2(in); ++bit) {
      std::vector<int32_t> basis = S.getBasis(in, bit);
      basis.erase(basis.begin() + axisIdx);
      vs.push_back(basis);
    }
    bases.emplace_back(in, std::move(vs));
  }
  LinearLayout::NamedSizes outs;
  for (size_t d = 0; d < reducedShape.size(); ++d)
    outs.emplace_back(layout::dimName(static_cast<int>(d)), static_cast<int32_t>(reducedShape[d]));
  LinearLayout held(std::move(bases), std::move(outs));
  for (size_t k = 0; k < outputs.size(); ++k) {
    Regs regs(numRegs);
    for (int32_t r = 0; r < numRegs; ++r) regs[r] = acc[regGroup[r]][outputs[k]];
    const LinearLayout& R = layoutOf(op.result(k));
    bind(op.result(k), gather(regs, held, R, std::vector<int32_t>(reducedShape.size(), 0),
                              types[outputs[k]], op));
  }
}

} // namespace ww::codegen
