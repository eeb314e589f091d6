// Global-memory loads, stores and atomics: vectorized by the layout and AxisInfo, predicated by
// masks, with cache and eviction hints.
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

namespace {

/// Whether every op of `block` (and nested regions) that reads `desc` is a register store
/// through it (a descriptor's .store): then its tensor map may take any swizzle.
bool onlyStoredThrough(const ir::Block& block, const ir::Value* desc) {
  for (const auto& op : block.ops()) {
    for (unsigned i = 0; i < op->numOperands(); ++i)
      if (op->operand(i) == desc && (op->code() != OpCode::DescStore || i != 0)) return false;
    for (unsigned r = 0; r < op->numRegions(); ++r)
      if (!onlyStoredThrough(*op->region(r), desc)) return false;
  }
  return true;
}

std::string vecSuffix(int n) {
  return n == 1 ? std::string() : ".v" + std::to_string(n);
}

std::string braceList(const std::vector<std::string>& regs) {
  if (regs.size() == 1) return regs[0];
  std::string s = "{";
  for (size_t i = 0; i < regs.size(); ++i) s += (i ? ", " : "") + regs[i];
  return s + "}";
}

/// How one vector access moves `v` elements of `bytes` each: as `count` values of `type` in
/// registers of class `cls` (elements themselves, or 32-bit words packing 2 or 4 of them).
struct AccessShape {
  int count = 1;
  std::string type;
  RegClass cls = RegClass::B32;
  int elemsPerWord = 1; // > 1: packed words
};

AccessShape accessShape(const ir::Type& t, int v) {
  AccessShape s;
  int bytes = t.elemBytes();
  if (bytes >= 4 || v * bytes < 4) {
    s.count = v;
    s.cls = t.elem == DType::I1 ? RegClass::B16 : regClassOf(t.elem, t.pointer);
    if (t.pointer)
      s.type = "b64";
    else if (t.elem == DType::F32 || t.elem == DType::F64)
      // Into .f32 / .f64 registers (a bit type takes any of its size), as Triton writes them.
      s.type = bytes == 4 ? "b32" : "b64";
    else if (t.elem == DType::I8)
      s.type = "s8";
    else if (t.elem == DType::I1 || bytes == 1)
      s.type = "u8";
    else
      s.type = bitType(t.elem);
    return s;
  }
  s.elemsPerWord = 4 / bytes;
  s.count = v / s.elemsPerWord;
  s.type = "b32";
  s.cls = RegClass::B32;
  return s;
}

} // namespace

namespace {

/// Splits packed 32-bit words into 16- or 8-bit elements (8-bit ones normalized for `elem`).
std::vector<std::string> unpackWords(PtxBuilder& b, const std::vector<std::string>& words,
                                     int elemsPerWord, DType elem) {
  std::vector<std::string> out;
  for (const auto& w : words) {
    if (elemsPerWord == 2) {
      std::string lo = b.newReg(RegClass::B16), hi = b.newReg(RegClass::B16);
      b.inst("mov.b32", {"{" + lo + ", " + hi + "}", w});
      out.push_back(lo);
      out.push_back(hi);
      continue;
    }
    for (int k = 0; k < 4; ++k) {
      std::string shifted = k ? b.pure("shr.u32", RegClass::B32, {w, immInt(8 * k)}) : w;
      std::string h = b.pure("cvt.u16.u32", RegClass::B16, {shifted});
      if (elem == DType::I8)
        h = b.pure("cvt.s16.s8", RegClass::B16, {h});
      else
        h = b.pure("and.b16", RegClass::B16, {h, "255"});
      out.push_back(h);
    }
  }
  return out;
}

std::string packWord(PtxBuilder& b, const std::vector<std::string>& elems) {
  if (elems.size() == 2) {
    std::string lo = b.materialize(elems[0], RegClass::B16);
    std::string hi = b.materialize(elems[1], RegClass::B16);
    return b.pure("mov.b32", RegClass::B32, {"{" + lo + ", " + hi + "}"});
  }
  std::string acc;
  for (size_t k = 0; k < elems.size(); ++k) {
    std::string w = b.pure("cvt.u32.u16", RegClass::B32, {b.materialize(elems[k], RegClass::B16)});
    w = b.pure("and.b32", RegClass::B32, {w, "255"});
    if (k) w = b.pure("shl.b32", RegClass::B32, {w, immInt(8 * static_cast<int64_t>(k))});
    acc = k ? b.pure("or.b32", RegClass::B32, {acc, w}) : w;
  }
  return acc;
}

} // namespace

void FunctionLowering::lowerLoad(const ir::Op& op) {
  const ir::Type& rt = op.result()->type();
  // The verifier keeps cache and evict within Ops.def's values, each a PTX qualifier.
  bool hasMask = ir::attr::Load::hasMask(op), hasOther = ir::attr::Load::hasOther(op);
  const Regs& ptrs = operand(op, 0);
  const Regs* mask = hasMask ? &operand(op, 1) : nullptr;
  const Regs* other = hasOther ? &operand(op, hasMask ? 2 : 1) : nullptr;
  std::string cache = ir::attr::Load::cache(op), evict = ir::attr::Load::evict(op);
  bool isVolatile = ir::attr::Load::isVolatile(op);
  std::string opcode = isVolatile ? "ld.volatile.global" : "ld.global";
  if (!cache.empty() && !isVolatile) opcode += "." + cache;
  std::string policy;
  if (!evict.empty() && !isVolatile) {
    policy = b_.pure("createpolicy.fractional.L2::" + evict + ".b64", RegClass::B64, {"1.0"});
    opcode += ".L2::cache_hint";
  }

  const LinearLayout* l = rt.isTensor() ? &layoutOf(op.result()) : nullptr;
  int32_t n = l ? l->getInDimSize(layout::kRegister) : 1;
  int32_t dup = l ? l->freeVariableMask(layout::kRegister) : 0;
  int32_t v = l ? layouts_.vectorElems(op) : 1;
  int bytes = rt.elemBytes();
  while (v > 1 && v * bytes > 16) v /= 2;
  if (rt.elem == DType::I1 || v < 1) v = 1;
  AccessShape shape = accessShape(rt, v);
  RegClass cls = regClassOf(rt.elem, rt.pointer);
  ScalarContext cx = scalarContext(op);
  Regs out(n);
  for (int32_t r = 0; r < n; r += v) {
    if (r & dup) continue;
    std::vector<std::string> dst;
    for (int k = 0; k < shape.count; ++k) dst.push_back(b_.newReg(shape.cls));
    std::string guard;
    if (mask) {
      guard = b_.materialize(mask->at(mask->size() == 1 ? 0 : r), RegClass::Pred);
      // Masked-off lanes keep `other` (zero when absent).
      for (int k = 0; k < shape.count; ++k) {
        std::string fill = "0";
        if (shape.elemsPerWord > 1) {
          std::vector<std::string> parts;
          for (int e = 0; e < shape.elemsPerWord; ++e)
            parts.push_back(
                other ? other->at(other->size() == 1 ? 0 : r + k * shape.elemsPerWord + e) : "0");
          fill = other ? packWord(b_, parts) : "0";
        } else if (other) {
          fill = other->at(other->size() == 1 ? 0 : r + k);
          if (rt.elem == DType::I1)
            fill = b_.pure("selp.u16", RegClass::B16,
                           {"1", "0", b_.materialize(fill, RegClass::Pred)});
        } else if (shape.cls == RegClass::F32) {
          fill = immF32(0);
        } else if (shape.cls == RegClass::F64) {
          fill = immF64(0);
        }
        b_.inst(movOpcode(shape.cls), {dst[k], fill});
      }
    }
    std::vector<std::string> operands{
        braceList(dst),
        "[" + b_.materialize(ptrs.at(ptrs.size() == 1 ? 0 : r), RegClass::B64) + "]"};
    if (!policy.empty()) operands.push_back(policy);
    b_.inst(opcode + vecSuffix(shape.count) + "." + shape.type, operands, guard);
    std::vector<std::string> elems =
        shape.elemsPerWord > 1 ? unpackWords(b_, dst, shape.elemsPerWord, rt.elem) : dst;
    for (int32_t k = 0; k < v; ++k) {
      std::string e = elems[k];
      if (rt.elem == DType::I1) e = b_.pure("setp.ne.u16", RegClass::Pred, {e, "0"});
      out[r + k] = e;
    }
  }
  for (int32_t r = 0; r < n; ++r)
    if (r & dup) out[r] = out[r & ~dup];
  (void)cls;
  (void)cx;
  bind(op.result(), std::move(out));
}

void FunctionLowering::lowerStore(const ir::Op& op) {
  const ir::Value* value = op.operand(1);
  const ir::Type& vt = value->type();
  bool hasMask = ir::attr::Store::hasMask(op);
  const Regs& ptrs = operand(op, 0);
  const Regs& vals = operand(op, 1);
  const Regs* mask = hasMask ? &operand(op, 2) : nullptr;
  std::string cache = ir::attr::Store::cache(op), evict = ir::attr::Store::evict(op);
  std::string opcode = "st.global";
  if (!cache.empty()) opcode += "." + cache;
  std::string policy;
  if (!evict.empty()) {
    policy = b_.pure("createpolicy.fractional.L2::" + evict + ".b64", RegClass::B64, {"1.0"});
    opcode += ".L2::cache_hint";
  }
  const ir::Value* ptr = op.operand(0);
  const LinearLayout* l = ptr->type().isTensor() ? &operandLayoutOf(op, 0) : nullptr;
  int32_t n = l ? l->getInDimSize(layout::kRegister) : 1;
  int32_t dup = l ? l->freeVariableMask(layout::kRegister) : 0;
  int32_t v = l ? layouts_.vectorElems(op) : 1;
  int bytes = vt.elemBytes();
  while (v > 1 && v * bytes > 16) v /= 2;
  if (vt.elem == DType::I1 || v < 1) v = 1;
  AccessShape shape = accessShape(vt, v);
  // Threads holding copies of an element leave the store to one of them.
  std::string owner = l ? ownerPredicate(*l) : b_.pure("setp.eq.u32", RegClass::Pred, {tid(), "0"});
  RegClass cls = regClassOf(vt.elem, vt.pointer);
  for (int32_t r = 0; r < n; r += v) {
    if (r & dup) continue;
    std::vector<std::string> words;
    for (int k = 0; k < shape.count; ++k) {
      if (shape.elemsPerWord > 1) {
        std::vector<std::string> parts;
        for (int e = 0; e < shape.elemsPerWord; ++e)
          parts.push_back(vals.at(vals.size() == 1 ? 0 : r + k * shape.elemsPerWord + e));
        words.push_back(packWord(b_, parts));
      } else {
        std::string x = vals.at(vals.size() == 1 ? 0 : r + k);
        if (vt.elem == DType::I1)
          x = b_.pure("selp.u16", RegClass::B16, {"1", "0", b_.materialize(x, RegClass::Pred)});
        else
          x = b_.materialize(x, cls);
        words.push_back(x);
      }
    }
    std::string guard = owner;
    if (mask) {
      std::string m = b_.materialize(mask->at(mask->size() == 1 ? 0 : r), RegClass::Pred);
      guard = guard.empty() ? m : b_.pure("and.pred", RegClass::Pred, {guard, m});
    }
    std::vector<std::string> operands{
        "[" + b_.materialize(ptrs.at(ptrs.size() == 1 ? 0 : r), RegClass::B64) + "]",
        braceList(words)};
    if (!policy.empty()) operands.push_back(policy);
    b_.inst(opcode + vecSuffix(shape.count) + "." + shape.type, operands, guard);
  }
}

void FunctionLowering::lowerAtomic(const ir::Op& op) {
  bool isCas = op.code() == OpCode::AtomicCas;
  const ir::Value* ptr = op.operand(0);
  const ir::Type& vt = op.operand(1)->type();
  DType elem = vt.elem;
  std::string kind = isCas ? "cas" : ir::attr::AtomicRMW::kind(op);
  // Absent: Ops.def's defaults, acq_rel at gpu scope (Triton's).
  std::string sem = isCas ? ir::attr::AtomicCas::sem(op) : ir::attr::AtomicRMW::sem(op);
  std::string scope = isCas ? ir::attr::AtomicCas::scope(op) : ir::attr::AtomicRMW::scope(op);
  const Regs& ptrs = operand(op, 0);
  const Regs& vals = operand(op, 1);
  const Regs* cmpVals = isCas ? &operand(op, 1) : nullptr;
  const Regs* newVals = isCas ? &operand(op, 2) : nullptr;
  const Regs* mask = !isCas && ir::attr::AtomicRMW::hasMask(op) ? &operand(op, 2) : nullptr;
  bool resultUsed = op.numResults() > 0 && uses_.count(op.result()) > 0;

  int bits = ir::bitWidth(elem);
  bool isF = ir::isFloat(elem);
  if (elem == DType::I1 || ir::bitWidth(elem) == 8 || (bits == 16 && !isF && kind != "cas"))
    raiseError(op.loc(), "atomic_" + kind + " is not supported on " +
                             std::string(ir::tlName(elem)) +
                             "; use 32- or 64-bit integers or floats");
  std::string type;
  bool floatMinMax = false;
  if (kind == "add") {
    if (elem == DType::F16 || elem == DType::BF16) {
      if (elem == DType::BF16 && options_.target == Target::SM80)
        raiseError(op.loc(), "atomic_add on bfloat16 needs sm_90a or newer");
      type = elem == DType::F16 ? "noftz.f16" : "noftz.bf16";
    } else {
      type = isF ? arithType(elem) : (bits == 64 ? "u64" : "u32");
    }
  } else if (kind == "max" || kind == "min") {
    if (isF) {
      if (elem != DType::F32 && elem != DType::F64)
        raiseError(op.loc(), "atomic_" + kind + " on " + std::string(ir::tlName(elem)) +
                                 " is not supported; use float32, float64 or integers");
      floatMinMax = true;
    } else {
      type = arithType(elem);
    }
  } else if (kind == "and" || kind == "or" || kind == "xor" || kind == "xchg" || kind == "cas") {
    type = "b" + std::to_string(bits);
  } else {
    raiseError(op.loc(),
               "atomic kind '" + kind + "' is not one of add, max, min, and, or, xor, xchg");
  }
  std::string ptxOp = kind == "xchg" ? "exch" : kind;

  const LinearLayout* l = ptr->type().isTensor() ? &operandLayoutOf(op, 0) : nullptr;
  int32_t n = l ? l->getInDimSize(layout::kRegister) : 1;
  int32_t dup = l ? l->freeVariableMask(layout::kRegister) : 0;
  std::string owner = l ? ownerPredicate(*l) : b_.pure("setp.eq.u32", RegClass::Pred, {tid(), "0"});
  RegClass cls = regClassOf(elem);
  // Always an atom with the op's own semantics, as Triton's PTX has it, also where the result is
  // unused: a red has no acquire, so acq_rel (the default) would lose it; ptxas still issues
  // a RED for an atom whose result is dead where the semantics allow.
  std::string semQ = "." + sem, scopeQ = "." + scope;
  // Qualifiers in the order Triton's PTX has them (ptxas takes any): a compare-and-swap
  // `atom.global.acquire.gpu.cas`, other read-modify-writes `atom.global.gpu.acquire.add`.
  const std::string casQ = semQ + scopeQ, rmwQ = scopeQ + semQ;
  Regs out(n);
  for (int32_t r = 0; r < n; ++r) {
    if (r & dup) continue;
    std::string guard = owner;
    if (mask) {
      std::string m = b_.materialize(mask->at(mask->size() == 1 ? 0 : r), RegClass::Pred);
      guard = guard.empty() ? m : b_.pure("and.pred", RegClass::Pred, {guard, m});
    }
    std::string addr = "[" + b_.materialize(ptrs.at(ptrs.size() == 1 ? 0 : r), RegClass::B64) + "]";
    auto at = [&](const Regs& rs) { return b_.materialize(rs.at(rs.size() == 1 ? 0 : r), cls); };
    if (isCas) {
      std::string d = b_.newReg(cls == RegClass::F32   ? RegClass::B32
                                : cls == RegClass::F64 ? RegClass::B64
                                                       : cls);
      std::string c = at(*cmpVals), v = at(*newVals);
      if (cls == RegClass::F32 || cls == RegClass::F64) {
        RegClass ic = cls == RegClass::F32 ? RegClass::B32 : RegClass::B64;
        std::string mv = cls == RegClass::F32 ? "mov.b32" : "mov.b64";
        c = b_.pure(mv, ic, {c});
        v = b_.pure(mv, ic, {v});
        b_.inst("atom.global" + casQ + ".cas." + type, {d, addr, c, v}, guard);
        out[r] = b_.pure(mv, cls, {d});
      } else {
        b_.inst("atom.global" + casQ + ".cas." + type, {d, addr, c, v}, guard);
        out[r] = d;
      }
      continue;
    }
    std::string x = at(vals);
    if (floatMinMax) {
      // IEEE floats order like sign-magnitude integers: non-negative values by signed max/min
      // of their bits, negative ones by unsigned min/max.
      // (float32 and float64 alike: 64-bit atom min / max exist for both signednesses.)
      const std::string w = std::to_string(bits);
      RegClass ic = bits == 64 ? RegClass::B64 : RegClass::B32;
      std::string bitsReg = b_.pure("mov.b" + w, ic, {x});
      std::string nonNeg = b_.pure("setp.ge.s" + w, RegClass::Pred, {bitsReg, "0"});
      std::string gPos =
          guard.empty() ? nonNeg : b_.pure("and.pred", RegClass::Pred, {guard, nonNeg});
      std::string negP = b_.pure("not.pred", RegClass::Pred, {nonNeg});
      std::string gNeg = guard.empty() ? negP : b_.pure("and.pred", RegClass::Pred, {guard, negP});
      std::string posOp = (kind == "max" ? "max.s" : "min.s") + w;
      std::string negOp = (kind == "max" ? "min.u" : "max.u") + w;
      std::string d1 = b_.newReg(ic), d2 = b_.newReg(ic);
      b_.inst("atom.global" + rmwQ + "." + posOp, {d1, addr, bitsReg}, gPos);
      b_.inst("atom.global" + rmwQ + "." + negOp, {d2, addr, bitsReg}, gNeg);
      std::string sel = b_.pure("selp.b" + w, ic, {d1, d2, nonNeg});
      out[r] = b_.pure("mov.b" + w, cls, {sel});
      continue;
    }
    std::string d = b_.newReg(cls);
    std::string ty = type;
    if (kind == "xchg" && (cls == RegClass::F32 || cls == RegClass::F64)) {
      RegClass ic = cls == RegClass::F32 ? RegClass::B32 : RegClass::B64;
      std::string mv = cls == RegClass::F32 ? "mov.b32" : "mov.b64";
      std::string di = b_.newReg(ic);
      b_.inst("atom.global" + rmwQ + ".exch." + ty, {di, addr, b_.pure(mv, ic, {x})}, guard);
      out[r] = b_.pure(mv, cls, {di});
      continue;
    }
    b_.inst("atom.global" + rmwQ + "." + ptxOp + "." + ty, {d, addr, x}, guard);
    out[r] = d;
  }
  if (op.numResults() == 0) return;
  if (!l && resultUsed) {
    // A scalar atomic ran in thread 0: every thread reads its result through shared memory.
    int bytes = ir::byteWidth(elem);
    int64_t base = scratch(bytes);
    std::string addr = "[" + sharedAddress("0") + "+" + std::to_string(base) + "]";
    std::string mt = memType(ir::Type::scalar(elem));
    barrier();
    b_.inst("st.shared." + mt, {addr, out[0]}, owner);
    barrier();
    std::string d = b_.newReg(cls);
    b_.inst("ld.shared." + mt, {d, addr});
    out[0] = d;
  }
  if (l && resultUsed && !owner.empty()) {
    // Several threads hold each element (a tensor smaller than the threads' layout covers): the
    // owner's atomic ran, and its result reaches the other holders through shared memory, as
    // Triton shares it.
    OffsetFn offsets = rowMajorOffsets(ptr->type().shape);
    int64_t base = scratch(ptr->type().numElements() * ir::byteWidth(elem));
    barrier(); // earlier readers of the scratch region are done
    storeShared(out, *l, offsets, base, elem, {}, 0, nullptr, owner);
    barrier();
    out = loadShared(*l, offsets, base, 0, elem);
  }
  for (int32_t r = 0; r < n; ++r)
    if (r & dup) out[r] = out[r & ~dup];
  for (auto& o : out)
    if (o.empty()) o = "0";
  bind(op.result(), std::move(out));
}

// ---------------------------------------------------------------------------------------------
// Tensor descriptors (TMA): a block moves between global and shared memory with
// cp.async.bulk.tensor; completion of loads through an mbarrier's transaction count. The tile
// is row-major in shared memory, dense or in the NVMMA swizzle its tensor map declares (a
// block longer than 256 elements along a dim, or rows wider than the swizzle, go as several
// boxes: tmaBoxes). Host descriptors (kernel arguments) and tensor maps written in the kernel
// (make_desc, lowerDeviceTensorMap) take the same copies.
// ---------------------------------------------------------------------------------------------

int FunctionLowering::storeStagingSwizzle(const ir::Value* desc) {
  const ir::Type& dt = desc->type();
  int bytes = ir::byteWidth(dt.elem);
  bool stored = false;
  ir::walk(fn_.body, [&](const ir::Op& op) {
    stored |= op.code() == OpCode::DescStore && op.operand(0) == desc;
  });
  if (!stored || dt.shape.size() != 2 || dt.shape[0] < 8 ||
      !std::has_single_bit(uint64_t(dt.shape[0])) || !std::has_single_bit(uint64_t(dt.shape[1])) ||
      !onlyStoredThrough(fn_.body, desc))
    return 0;
  return layout::nvmmaSwizzleBytes(dt.shape, bytes);
}

void FunctionLowering::lowerDescriptorCopy(const ir::Op& op) {
  bool isLoad = op.code() == OpCode::DescLoad;
  if (options_.target == Target::SM80)
    raiseError(op.loc(), std::string(isLoad ? "descriptor load" : "descriptor store") +
                             " needs the Tensor Memory Accelerator of sm_90a or sm_100a; on "
                             "sm_80 use tl.load/tl.store with pointers");
  const ir::Type& dt = op.operand(0)->type();
  if (dt.kind != ir::TypeKind::Descriptor)
    throw std::logic_error("codegen: descriptor op without a descriptor operand");
  int rank = static_cast<int>(dt.shape.size());
  unsigned firstOffset = isLoad ? 1 : 2;
  if (rank < 1 || rank > 5 || op.numOperands() != firstOffset + rank)
    raiseError(op.loc(), "a descriptor of block rank " + std::to_string(rank) + " takes " +
                             std::to_string(rank) + " offsets, got " +
                             std::to_string(op.numOperands() - firstOffset));
  ir::Type elemType = ir::Type::scalar(dt.elem);
  int bytes = elemType.elemBytes();
  int64_t elems = 1;
  for (int64_t s : dt.shape) elems *= s;
  int64_t tileBytes = elems * bytes;
  if (dt.shape.back() * bytes % 16 != 0)
    raiseError(op.loc(), "descriptor block " + dt.str() +
                             ": the innermost block dim must span a multiple of 16 bytes");
  // The swizzle of the tile in shared memory is the tensor map's: fixed where the descriptor's
  // swizzle is known (a tensor map written in the kernel, a descriptor an earlier copy used),
  // else chosen here for a kernel argument's map. A store through a kernel argument's
  // descriptor that nothing else uses stages its tile in the NVMMA swizzle (rows wider than the
  // swizzle as column blocks, one TMA box each): the accumulator's rows then land in distinct
  // banks, where unswizzled rows of 128 bytes put the 8 rows of each 32-bit store in one bank.
  // Loads of a descriptor not seen before read dense tiles.
  bool isArgument = std::any_of(fn_.args.begin(), fn_.args.end(),
                                [&](const ir::KernelArg& a) { return a.value == op.operand(0); });
  int swizzle = 0;
  bool fixed = false;
  if (auto known = descriptorSwizzle_.find(op.operand(0)); known != descriptorSwizzle_.end()) {
    // (only 2-D tiles are read and written swizzled here: another rank keeps 0, and
    // requireDescriptorSwizzle below reports the mismatch)
    swizzle = rank == 2 ? known->second : 0;
    fixed = true;
  } else if (!isLoad && isArgument) {
    swizzle = storeStagingSwizzle(op.operand(0));
  }
  // Scratch: the tile (128-byte aligned), then, for a load, the mbarrier it completes on (a
  // store waits on its bulk group and needs none). A swizzled tile must start on
  // 1024 bytes (whole swizzle atoms); where the scratch region does not and the swizzle is
  // still open, the descriptor's first store stays unswizzled rather than make the kernel's
  // shared memory grow, and its later stores follow the first's choice (one tensor map serves
  // them all). A fixed swizzle aligns the tile.
  // This op's own barrier below meets the threads after the issuing thread's wait.
  drainBulkStoreRead();
  int64_t start = scratch(0);
  if (!fixed && start % 1024 != 0) swizzle = 0;
  int64_t align = swizzle ? 1024 : 128;
  int64_t base = alignTo(start, align);
  int64_t barrierOffset = base + alignTo(tileBytes, 16);
  scratch((isLoad ? barrierOffset + 16 : base + tileBytes) - start);
  std::vector<int64_t> shape = dt.shape;
  OffsetFn tileOffset = [&shape](const std::vector<int32_t>& c) {
    int64_t idx = 0;
    for (size_t d = 0; d < shape.size(); ++d) idx = idx * shape[d] + c[d];
    return idx;
  };
  if (swizzle) {
    LinearLayout toOffset = layout::nvmmaSharedLayout(shape, bytes, swizzle).invert();
    tileOffset = [toOffset](const std::vector<int32_t>& c) -> int64_t {
      return toOffset.apply({c.at(0), c.at(1)}).at(0);
    };
  }
  requireDescriptorSwizzle(op, op.operand(0), swizzle);
  const TmaBoxes boxes = tmaBoxes(dt, swizzle);
  if (!boxes.problem.empty())
    raiseError(op.loc(), "descriptor block " + dt.str() +
                             " splits into TMA boxes of at most 256 elements per dimension, "
                             "but " +
                             boxes.problem);
  std::string tmap = operand(op, 0).at(0);
  std::vector<std::string> offsets(rank);
  for (int d = 0; d < rank; ++d)
    offsets[d] = b_.materialize(operand(op, firstOffset + d).at(0), RegClass::B32);
  checkTmaBoxStart(op, op.operand(firstOffset + rank - 1), offsets[rank - 1], dt.elem);
  std::string smemBase = sharedAddress("0");
  // The tensor map and shared address of one box: coordinates innermost first.
  auto boxOperands = [&](const std::pair<std::vector<int64_t>, int64_t>& copy) {
    std::string coords = "{";
    for (int d = rank - 1; d >= 0; --d) {
      std::string x = offsets[d];
      if (int64_t delta = copy.first[d]) x = b_.pure("add.s32", RegClass::B32, {x, immInt(delta)});
      coords += x + (d ? ", " : "}");
    }
    return std::pair{"[" + tmap + ", " + coords + "]",
                     "[" + smemBase + "+" + std::to_string(base + copy.second) + "]"};
  };
  std::string leader = b_.pure("setp.eq.u32", RegClass::Pred, {tid(), "0"});
  std::string mbar = "[" + smemBase + "+" + std::to_string(barrierOffset) + "]";
  std::string dims = std::to_string(rank) + "d";
  // Earlier users of the scratch region are done (FunctionLowering::reuseBarrier relies on it).
  barrier();
  if (isLoad) {
    b_.inst("mbarrier.init.shared::cta.b64", {mbar, "1"}, leader);
    b_.inst("fence.mbarrier_init.release.cluster", {});
    barrier();
    // The barrier's expected bytes are the whole tile's: every box completes a part (boxes
    // past the tensor's edges count whole, filled with zeros).
    b_.inst("mbarrier.arrive.expect_tx.shared::cta.b64", {"_", mbar, immInt(tileBytes)}, leader);
    for (const auto& copy : boxes.copies) {
      auto [global, tile] = boxOperands(copy);
      b_.inst("cp.async.bulk.tensor." + dims +
                  ".shared::cluster.global.mbarrier::complete_tx::bytes",
              {tile, global, mbar}, leader);
    }
    // Every thread waits for phase 0 of the barrier to complete.
    std::string retry = b_.newLabel("tma_wait");
    std::string done = b_.newReg(RegClass::Pred);
    b_.label(retry);
    b_.inst("mbarrier.try_wait.parity.shared::cta.b64", {done, mbar, "0"});
    b_.inst("bra", {retry}, done, /*negateGuard=*/true);
    Regs regs = loadShared(layoutOf(op.result()), tileOffset, base, 0, dt.elem);
    barrier();
    b_.inst("mbarrier.inval.shared::cta.b64", {mbar}, leader);
    return bind(op.result(), std::move(regs));
  }
  const ir::Type& vt = op.operand(1)->type();
  if (vt.shape != dt.shape || vt.elem != dt.elem)
    raiseError(op.loc(), "descriptor store of " + vt.str() + " through " + dt.str() +
                             ": the value must have the descriptor's block shape and type");
  // A 16-bit MMA accumulator (an epilogue's `c_desc.store(acc.to(fp16))`) goes in 8x8 matrices
  // by stmatrix, 16 bytes a row, where its rows lie whole in the tile's layout: one instruction
  // where 4-byte st.shared took four, each with its own swizzled address.
  const Regs& value = operand(op, 1);
  const LinearLayout& valueLayout = operandLayoutOf(op, 1);
  if (options_.target == Target::SM80 || bytes != 2 ||
      !storeSharedMatrices(value, valueLayout, tileOffset, base, dt.elem))
    storeShared(value, valueLayout, tileOffset, base, dt.elem);
  // Generic-proxy writes become visible to the bulk copy (async proxy).
  b_.inst("fence.proxy.async.shared::cta", {});
  barrier();
  for (const auto& copy : boxes.copies) {
    auto [global, tile] = boxOperands(copy);
    b_.inst("cp.async.bulk.tensor." + dims + ".global.shared::cta.tile.bulk_group", {global, tile},
            leader);
  }
  b_.inst("cp.async.bulk.commit_group", {}, leader);
  // The tile may be overwritten once the copy has read it: in an async task the wait moves to
  // the region's next claim (drainBulkStoreRead), elsewhere it comes now.
  if (taskBarrierId_ >= 0)
    bulkStoreReadPending_ = true;
  else
    b_.inst("cp.async.bulk.wait_group.read", {"0"}, leader);
}

} // namespace ww::codegen
