// Lowering of scans (tl.cumsum, tl.cumprod, tl.associative_scan) along any axis of any layout
// whose axis bits each come from one register, lane or warp bit: a sequential scan over the
// thread's leading axis registers, then one doubling step per remaining axis bit, exchanging
// block totals between registers, lanes (shfl.sync) or warps (shared memory).
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"

#include "layout/Layouts.h"

#include <bit>
#include <optional>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

namespace {

/// The hardware bit that walks one bit of the scanned axis.
struct AxisBitHolder {
  const char* dim = nullptr; // kRegister, kLane or kWarp
  int bit = 0;
};

/// For every bit of the axis (low to high) the register, lane or warp bit whose basis moves
/// exactly that bit of the axis and nothing else; nullopt when some axis bit has none or a basis
/// moves the axis together with another dim (then the scan runs in a simpler layout).
std::optional<std::vector<AxisBitHolder>> axisBitHolders(const LinearLayout& l, int axis) {
  int rank = l.numOutDims();
  int axisBits = l.getOutDimSizeLog2(layout::dimName(axis));
  std::vector<AxisBitHolder> holders(axisBits);
  for (const char* dim : {layout::kRegister, layout::kLane, layout::kWarp}) {
    for (int bit = 0; bit < l.getInDimSizeLog2(dim); ++bit) {
      const auto& basis = l.getBasis(dim, bit);
      bool off = false;
      for (int d = 0; d < rank; ++d) off |= d != axis && basis[d] != 0;
      int32_t a = basis[axis];
      if (a == 0) continue;
      if (off || !std::has_single_bit(static_cast<uint32_t>(a))) return std::nullopt;
      int k = std::countr_zero(static_cast<uint32_t>(a));
      if (!holders[k].dim) holders[k] = {dim, bit};
    }
  }
  for (const auto& h : holders)
    if (!h.dim) return std::nullopt;
  if (l.getInDimSizeLog2(layout::kBlock) > 0) return std::nullopt;
  return holders;
}

} // namespace

void FunctionLowering::lowerScan(const ir::Op& op) {
  const ir::Type& in0 = op.operand(0)->type(); // a tensor: Ops.def's OPERANDS line, verified
  int rank = static_cast<int>(in0.shape.size());
  int64_t axisAttr = ir::attr::Scan::axis(op);
  // In [0, rank) after this: Ops.def's HasAxis rule, verified.
  int axis = static_cast<int>(axisAttr < 0 ? axisAttr + rank : axisAttr);
  std::string kind = ir::attr::Scan::kind(op); // sum, prod or custom: Ops.def's, verified
  bool reverse = ir::attr::Scan::reverse(op);

  std::vector<DType> types;
  std::vector<Regs> inputs;
  const LinearLayout& given = operandLayoutOf(op, 0);
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    if (operandLayoutOf(op, i) != given)
      throw std::logic_error("codegen: scan operands in different layouts");
    const ir::Type& t = op.operand(i)->type();
    types.push_back(t.pointer ? DType::I64 : t.elem);
    inputs.push_back(operand(op, i));
  }
  // Layouts whose axis bits are not each one hardware bit scan in a blocked layout instead.
  LinearLayout l = given;
  std::optional<std::vector<AxisBitHolder>> found = axisBitHolders(l, axis);
  if (!found) {
    l = layout::defaultBlockedLayout(in0.shape, warps());
    found = axisBitHolders(l, axis);
    if (!found) throw std::logic_error("codegen: no scan layout for " + in0.str());
    for (size_t i = 0; i < inputs.size(); ++i)
      inputs[i] = convert(inputs[i], given, l, types[i], op);
  }
  // An axis of one element has no bits: every element is its own scan.
  const std::vector<AxisBitHolder>& holders = *found;
  int32_t numRegs = l.getInDimSize(layout::kRegister);
  size_t n = types.size();

  auto combine = [&](const Regs& earlier, const Regs& later) -> Regs {
    if (kind == "custom") return inlineCombine(op, earlier, later);
    ScalarContext cx = scalarContext(op);
    ir::Op comb(kind == "sum" ? OpCode::Add : OpCode::Mul, op.loc());
    Regs out;
    for (size_t i = 0; i < n; ++i)
      out.push_back(
          emitElementwise(cx, comb, {earlier[i], later[i]}, {types[i], types[i]}, types[i]));
    return out;
  };
  auto select = [&](const std::string& pred, const Regs& a, const Regs& b) -> Regs {
    ScalarContext cx = scalarContext(op);
    ir::Op sel(OpCode::Select, op.loc());
    Regs out;
    for (size_t i = 0; i < n; ++i)
      out.push_back(
          emitElementwise(cx, sel, {pred, a[i], b[i]}, {DType::I1, types[i], types[i]}, types[i]));
    return out;
  };

  // s[r]: the scan of r's element within its aligned block of 2^k axis positions (in scan order);
  // t[r]: that block's total. Both start as the element itself (k = 0).
  std::vector<Regs> s(numRegs), t(numRegs);
  for (int32_t r = 0; r < numRegs; ++r)
    for (size_t i = 0; i < n; ++i) s[r].push_back(inputs[i].at(r));

  // Leading axis bits held by registers: a sequential scan over each chunk of registers.
  int k = 0;
  int32_t chunkRegBits = 0;
  std::vector<int> chunkBit; // register bit of axis bit j
  while (k < static_cast<int>(holders.size()) && holders[k].dim == layout::kRegister) {
    chunkBit.push_back(holders[k].bit);
    chunkRegBits |= 1 << holders[k].bit;
    ++k;
  }
  int32_t chunk = int32_t(1) << k;
  auto chunkReg = [&](int32_t base, int32_t pos) {
    int32_t r = base;
    for (int j = 0; j < k; ++j)
      if (pos >> j & 1) r |= 1 << chunkBit[j];
    return r;
  };
  for (int32_t base = 0; base < numRegs; ++base) {
    if (base & chunkRegBits) continue;
    Regs running;
    for (int32_t step = 0; step < chunk; ++step) {
      int32_t r = chunkReg(base, reverse ? chunk - 1 - step : step);
      running = step == 0 ? s[r] : combine(running, s[r]);
      s[r] = running;
    }
    for (int32_t pos = 0; pos < chunk; ++pos) t[chunkReg(base, pos)] = running;
  }

  // The remaining axis bits, low to high: the block of 2^(k+1) positions joins r's block with its
  // partner block (axis bit k flipped); the later block in scan order prefixes the earlier total.
  for (; k < static_cast<int>(holders.size()); ++k) {
    const AxisBitHolder& h = holders[k];
    std::vector<Regs> partner(numRegs);
    std::string laterPred; // set at run time for lane and warp bits
    bool laterIfSet = !reverse;
    if (h.dim == layout::kRegister) {
      for (int32_t r = 0; r < numRegs; ++r) partner[r] = t[r ^ (1 << h.bit)];
    } else if (h.dim == layout::kLane) {
      std::string laneId = b_.pure("and.b32", RegClass::B32, {tid(), "31"});
      std::string from = b_.pure("xor.b32", RegClass::B32, {laneId, immInt(1 << h.bit)});
      for (int32_t r = 0; r < numRegs; ++r)
        for (size_t i = 0; i < n; ++i)
          partner[r].push_back(shuffleFromLane(t[r][i], regClassOf(types[i]), from));
      std::string bit = b_.pure("and.b32", RegClass::B32, {tid(), immInt(1 << h.bit)});
      laterPred = b_.pure(laterIfSet ? "setp.ne.u32" : "setp.eq.u32", RegClass::Pred, {bit, "0"});
    } else {
      // Through shared memory: slot (thread, register, input), 8 bytes each.
      int threads = numThreads();
      int64_t perInput = int64_t(threads) * numRegs * 8;
      int64_t base = scratch(perInput * static_cast<int64_t>(n));
      std::string mine = b_.pure("mul.lo.u32", RegClass::B32, {tid(), immInt(numRegs * 8)});
      std::string other = b_.pure("xor.b32", RegClass::B32, {tid(), immInt(32 << h.bit)});
      std::string theirs = b_.pure("mul.lo.u32", RegClass::B32, {other, immInt(numRegs * 8)});
      std::string myAddr = sharedAddress(mine), theirAddr = sharedAddress(theirs);
      auto memType = [&](size_t i) {
        RegClass c = regClassOf(types[i]);
        return c == RegClass::Pred  ? std::string("b16")
               : c == RegClass::F32 ? std::string("f32")
               : c == RegClass::F64 ? std::string("f64")
                                    : bitType(types[i]);
      };
      barrier(); // earlier readers of the scratch region are done
      for (int32_t r = 0; r < numRegs; ++r)
        for (size_t i = 0; i < n; ++i) {
          RegClass c = regClassOf(types[i]);
          std::string v = b_.materialize(t[r][i], c);
          if (c == RegClass::Pred) v = b_.pure("selp.u16", RegClass::B16, {"1", "0", v});
          b_.inst("st.shared." + memType(i),
                  {"[" + myAddr + "+" + std::to_string(base + i * perInput + r * 8) + "]", v});
        }
      barrier();
      for (int32_t r = 0; r < numRegs; ++r)
        for (size_t i = 0; i < n; ++i) {
          RegClass c = regClassOf(types[i]);
          std::string d = b_.newReg(c == RegClass::Pred ? RegClass::B16 : c);
          b_.inst("ld.shared." + memType(i),
                  {d, "[" + theirAddr + "+" + std::to_string(base + i * perInput + r * 8) + "]"});
          if (c == RegClass::Pred) d = b_.pure("setp.ne.u16", RegClass::Pred, {d, "0"});
          partner[r].push_back(d);
        }
      std::string bit = b_.pure("and.b32", RegClass::B32, {tid(), immInt(32 << h.bit)});
      laterPred = b_.pure(laterIfSet ? "setp.ne.u32" : "setp.eq.u32", RegClass::Pred, {bit, "0"});
    }
    for (int32_t r = 0; r < numRegs; ++r) {
      if (laterPred.empty()) {
        bool later = ((r >> h.bit) & 1) == (laterIfSet ? 1 : 0);
        Regs joined = later ? combine(partner[r], t[r]) : combine(t[r], partner[r]);
        if (later) s[r] = combine(partner[r], s[r]);
        t[r] = joined;
        continue;
      }
      Regs asLater = combine(partner[r], t[r]);
      Regs asEarlier = kind == "custom" ? combine(t[r], partner[r]) : asLater;
      s[r] = select(laterPred, combine(partner[r], s[r]), s[r]);
      t[r] = kind == "custom" ? select(laterPred, asLater, asEarlier) : asLater;
    }
  }

  for (size_t i = 0; i < n; ++i) {
    Regs out(numRegs);
    for (int32_t r = 0; r < numRegs; ++r) out[r] = s[r][i];
    const LinearLayout& want = layoutOf(op.result(static_cast<unsigned>(i)));
    bind(op.result(static_cast<unsigned>(i)),
         l == want ? out : convert(out, l, want, types[i], op));
  }
}

} // namespace ww::codegen
