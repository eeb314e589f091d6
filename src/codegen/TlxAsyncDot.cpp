// tlx.async_dot and tlx.async_dot_wait: wgmma.mma_async straight from TLX buffers (sm_90a).
#include "codegen/Lowering.h"
#include "codegen/Wgmma.h"
#include "ir/DotTypes.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"

#include <algorithm>
#include <climits>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

// ---------------------------------------------------------------------------------------------
// tlx.async_dot: wgmma.mma_async straight from TLX buffers. The allocator gives 2-D buffers the
// NVMMA layout (contiguous last dim, 1024-byte aligned, swizzled in rows of S bytes, wider
// rows split into column blocks of S bytes); the matrix descriptors describe that layout: A
// [M, K] is K-major, B [K, N] is N-major (transposed-B mode), and a local_trans view swaps
// that (a column-major A held as [K, M], transposed-A mode; B held as [N, K], K-major). 8-bit
// operands must be K-major. The accumulator registers stay in flight until async_dot_wait.
// ---------------------------------------------------------------------------------------------

namespace {

/// Every op of `within`, nested ones too, that reads `v`.
void readersOf(const ir::Block& within, const ir::Value* v, std::vector<const ir::Op*>& out) {
  for (const auto& op : within.ops()) {
    for (const ir::Value* operand : op->operands())
      if (operand == v) {
        out.push_back(op.get());
        break;
      }
    for (unsigned i = 0; i < op->numRegions(); ++i) readersOf(*op->region(i), v, out);
  }
}

/// Whether an op other than `user`, in `block` or nested in it, reads `v`.
bool readElsewhere(const ir::Block& block, const ir::Value* v, const ir::Op* user) {
  std::vector<const ir::Op*> readers;
  readersOf(block, v, readers);
  return std::any_of(readers.begin(), readers.end(), [&](const ir::Op* r) { return r != user; });
}

/// The op of `block` that is `op` or holds it, or nullptr when `op` lies outside `block`.
const ir::Op* enclosingIn(const ir::Block& block, const ir::Op* op) {
  while (op && op->parentBlock() != &block) {
    const ir::Block* b = op->parentBlock();
    op = b ? b->parentOp() : nullptr;
  }
  return op;
}

/// Whether `r`'s results lie in registers of their own, never in those of its operand `v`:
/// arithmetic, and a wgmma that reads `v` as an operand rather than accumulating into it.
bool computesFresh(const ir::Op& r, const ir::Value* v) {
  OpCode c = r.code();
  if (c == OpCode::AsyncDot) return r.operand(2) != v;
  return ir::isElementwise(c) && !ir::isValueHint(c) && c != OpCode::Cast && c != OpCode::Bitcast;
}

/// Whether `v`, or any value computed from it (which may share its registers: a reshape or an
/// identity layout conversion renames them), is read by an op other than `except` outside
/// `block` or at or after its position `at`.
bool readFrom(const ir::Block& body, const ir::Block& block, size_t at, const ir::Value* v,
              const ir::Op* except, std::set<const ir::Value*>& seen) {
  if (!seen.insert(v).second) return false;
  std::vector<const ir::Op*> readers;
  readersOf(body, v, readers);
  for (const ir::Op* r : readers) {
    if (r == except) continue;
    const ir::Op* holder = enclosingIn(block, r);
    if (!holder || ir::positionOf(block, holder) >= at) return true;
    if (computesFresh(*r, v) && r == holder) continue;
    for (const ir::Op* produced : {r, holder})
      for (unsigned k = 0; k < produced->numResults(); ++k)
        if (readFrom(body, block, at, produced->result(k), except, seen)) return true;
  }
  return false;
}

} // namespace

/// Whether async_dot `op` may accumulate straight into its accumulator operand's registers:
/// nothing else in `body` reads that value (or, through async_dot_wait, the value it renames),
/// or every other reader comes before `op` in its block (see below). Copying the accumulator
/// instead would read the registers of a wgmma still in flight, and ptxas then serializes every
/// wgmma of the kernel.
bool accumulatesInPlace(const ir::Block& body, const ir::Op& op) {
  // The accumulator value and the ones async_dot_wait renamed it from.
  std::vector<std::pair<const ir::Value*, const ir::Op*>> chain; // value, its reader in the chain
  const ir::Value* acc = op.operand(2);
  const ir::Op* user = &op;
  while (true) {
    chain.emplace_back(acc, user);
    const ir::Op* def = acc->def();
    if (!def || def->code() != OpCode::AsyncDotWait) break;
    unsigned i = 0;
    while (def->result(i) != acc) ++i;
    acc = def->operand(i);
    user = def;
  }
  bool unshared = true;
  for (const auto& [v, reader] : chain) unshared &= !readElsewhere(body, v, reader);
  if (unshared) return true;
  // Read by other ops too: still in place when they all come before `op` in its block and
  // nothing computed from them is read after it (the old value is dead once `op` issues), and
  // the values live in that block (a loop body's in-place write must not clobber a value
  // defined outside it, which the next iteration reads again).
  const ir::Block* block = op.parentBlock();
  if (!block) return false;
  size_t at = ir::positionOf(*block, &op);
  for (const auto& [v, reader] : chain) {
    bool local =
        v->isBlockArg() ? v->ownerBlock() == block : v->def() && v->def()->parentBlock() == block;
    if (!local) return false;
    std::set<const ir::Value*> seen;
    if (readFrom(body, *block, at, v, reader, seen)) return false;
  }
  return true;
}

bool isUnsharedAsyncDotResult(const ir::Block& body, const ir::Value* v, const ir::Op* user) {
  unsigned uses = 0;
  for (const ir::Value* operand : user->operands()) uses += operand == v;
  if (uses != 1) return false;
  while (true) {
    if (readElsewhere(body, v, user)) return false;
    const ir::Op* def = v->def();
    if (!def) return false;
    if (def->code() == OpCode::AsyncDot) return true;
    unsigned i = 0;
    while (def->result(i) != v) ++i;
    if (def->code() == OpCode::For) {
      // A loop's result is the register its body carried: the accumulator it yields, when
      // that is one (the next loop then carries it on, as the masked and unmasked key loops of
      // an attention kernel do).
      const ir::Op* yield = def->region(0)->terminator();
      if (!yield || yield->code() != OpCode::Yield || i >= yield->numOperands()) return false;
      v = yield->operand(i);
      user = yield;
      continue;
    }
    if (def->code() != OpCode::AsyncDotWait) return false;
    if (i >= def->numOperands()) return false;
    v = def->operand(i);
    user = def;
  }
}

namespace {

/// How an async_dot operand lies in shared memory: `ok` when it is a buffer as allocated (from
/// local_alloc, its local_view or a whole-tile slice) or the 2-D local_trans of one; `kMajor`
/// when K is its contiguous dim. Buffers keep their last dim contiguous: A [M, K] and the
/// local_trans of a [N, K] B are K-major, B [K, N] and the local_trans of a [K, M] A
/// (a column-major A) are MN-major.
struct SmemOperand {
  bool ok = false;
  bool kMajor = false;
};

SmemOperand smemOperand(const ir::Value* v, bool isA) {
  if (isPlainBuffer(v)) return {true, isA};
  const ir::Op* def = v->def();
  if (def && def->code() == OpCode::LocalTrans &&
      ir::attr::LocalTrans::order(*def) == std::vector<int64_t>{1, 0} &&
      isPlainBuffer(def->operand(0)))
    return {true, !isA};
  return {};
}

/// Whether `v` is the all-zero constant that async_dot without `acc` accumulates onto.
bool isZeroConstant(const ir::Value* v) {
  const ir::Op* def = v->def();
  if (!def || def->code() != OpCode::Constant) return false;
  const ir::Attr* a = def->attr(ir::attr::Constant::kvalue);
  if (!a) return false;
  if (const double* f = std::get_if<double>(a)) return *f == 0.0;
  const int64_t* i = std::get_if<int64_t>(a);
  return i && *i == 0;
}

} // namespace

const Regs& FunctionLowering::halfWordsOf(const ir::Value* v) const {
  auto it = halfWords_.find(v);
  if (it == halfWords_.end())
    throw std::logic_error("codegen: packed fp16 accumulator used before it was lowered (" +
                           v->type().str() + ")");
  return it->second;
}

void FunctionLowering::planPackedHalfAccumulators() {
  std::unordered_set<const ir::Value*>& packed = packedHalfValues_;
  packed.clear();
  std::unordered_map<const ir::Value*, std::vector<std::pair<const ir::Op*, unsigned>>> readers;
  std::vector<const ir::Op*> dots;
  ir::walk(fn_.body, [&](const ir::Op& op) {
    for (unsigned i = 0; i < op.numOperands(); ++i) readers[op.operand(i)].emplace_back(&op, i);
    if (op.code() == OpCode::AsyncDot) dots.push_back(&op);
  });
  auto enclosingFor = [](const ir::Op& op) -> const ir::Op* {
    const ir::Op* loop = op.parentBlock() ? op.parentBlock()->parentOp() : nullptr;
    return loop && loop->code() == OpCode::For ? loop : nullptr;
  };
  // A loop carries value k as words when its body argument is kept packed; its result is
  // unpacked after the loop where its readers want elements.
  auto slotPacked = [&](const ir::Op& loop, unsigned k) {
    return packed.count(loop.region(0)->arg(k + 1)) != 0;
  };
  // The candidates: fp16 results of async_dots (their layouts without broadcast copies, which
  // words would not keep in step) and every value their words reach through async_dot_wait and
  // for loops.
  std::vector<const ir::Value*> work;
  auto add = [&](const ir::Value* v) {
    if (packed.insert(v).second) work.push_back(v);
  };
  for (const ir::Op* dot : dots) {
    const ir::Value* r = dot->result();
    if (!ir::isHalfAccumulateDot(dot->operand(0)->type(), dot->operand(1)->type(), r->type()) ||
        !layouts_.hasLayout(r))
      continue;
    const LinearLayout& l = layouts_.layout(r);
    if (pairsHalfAccumulatorRegisters(l) && l.freeVariableMask(layout::kRegister) == 0) add(r);
  }
  while (!work.empty()) {
    const ir::Value* v = work.back();
    work.pop_back();
    for (const auto& [op, i] : readers[v]) {
      if (op->code() == OpCode::AsyncDotWait && i < op->numResults()) add(op->result(i));
      if (const ir::Op* loop = op->code() == OpCode::Yield ? enclosingFor(*op) : nullptr) {
        add(loop->region(0)->arg(i + 1));
        add(loop->result(i));
      }
    }
  }
  // Minus, until none is left to drop, those read by an op that wants elements (or in another
  // layout) and those whose words' source is dropped.
  auto takesWords = [&](const ir::Op& op, unsigned i) {
    if (layouts_.needsConversion(op, i)) return false;
    switch (op.code()) {
    case OpCode::AsyncDot:
      return i == 2 && ir::isHalfAccumulateDot(op.operand(0)->type(), op.operand(1)->type(),
                                               op.result()->type());
    case OpCode::AsyncDotWait:
      return true;
    case OpCode::For:
      return i >= 3 && slotPacked(op, i - 3);
    case OpCode::Yield: {
      const ir::Op* loop = enclosingFor(op);
      return loop && slotPacked(*loop, i);
    }
    default:
      return false;
    }
  };
  auto wordsFed = [&](const ir::Value* v) {
    const ir::Op* loop = v->isBlockArg() ? v->ownerBlock()->parentOp() : v->def();
    unsigned k = v->isBlockArg() ? v->index() - 1 : 0;
    if (!v->isBlockArg()) {
      if (loop->code() == OpCode::AsyncDot) return true;
      while (loop->result(k) != v) ++k;
      if (loop->code() == OpCode::AsyncDotWait) return packed.count(loop->operand(k)) != 0;
      if (!slotPacked(*loop, k)) return false;
    }
    return packed.count(loop->region(0)->terminator()->operand(k)) != 0;
  };
  for (bool dropped = true; dropped;) {
    dropped = false;
    for (auto it = packed.begin(); it != packed.end();) {
      bool keep = wordsFed(*it);
      for (const auto& [op, i] : readers[*it]) keep = keep && takesWords(*op, i);
      if (keep) {
        ++it;
      } else {
        it = packed.erase(it);
        dropped = true;
      }
    }
  }
}

void FunctionLowering::lowerAsyncDot(const ir::Op& op) {
  if (options_.target != Target::SM90a)
    raiseError(op.loc(), "tlx.async_dot lowers to wgmma, which only sm_90a has; compile for "
                         "sm_90a");
  const ir::Type& at = op.operand(0)->type();
  const ir::Type& bt = op.operand(1)->type();
  const ir::Type& rt = op.result()->type();
  // A from registers (e.g. P in attention) or, like B, from a buffer.
  bool aInRegs = at.kind != ir::TypeKind::Buffer;
  if (bt.kind != ir::TypeKind::Buffer)
    raiseError(op.loc(), "tlx.async_dot needs B in a shared-memory buffer");
  bool sixteen = (at.elem == DType::F16 || at.elem == DType::BF16) && bt.elem == at.elem;
  bool int8 = ir::isMmaInt8(at.elem) && ir::isMmaInt8(bt.elem);
  if (!sixteen && !ir::isFp8Dot(at, bt) && !int8)
    raiseError(op.loc(), "tlx.async_dot of " + at.str() + " and " + bt.str() +
                             " is not supported; wgmma takes fp16 or bf16 operands of one type, "
                             "fp8 ones (fp8e4nv / fp8e5) or int8 / uint8 ones");
  // fp16 operands may accumulate into fp16: wgmma's f16 form, whose accumulator registers each
  // hold two elements (packed words, see packedHalfValues_).
  const bool halfAcc = ir::isHalfAccumulateDot(at, bt, rt);
  if (!halfAcc && rt.elem != (int8 ? DType::I32 : DType::F32))
    raiseError(op.loc(), std::string("tlx.async_dot of ") +
                             (int8 ? "int8 operands accumulates in int32"
                                   : "floating operands accumulates in fp32 (fp16 operands also "
                                     "in fp16)") +
                             " only, got " + rt.str());
  SmemOperand aS = aInRegs ? SmemOperand{true, true} : smemOperand(op.operand(0), true);
  SmemOperand bS = smemOperand(op.operand(1), false);
  if (!aS.ok || !bS.ok)
    raiseError(op.loc(), "tlx.async_dot operands must be buffers from tlx.local_alloc, their "
                         "local_view, or the 2-D local_trans of one; other views are not "
                         "supported yet");
  // wgmma reads 8-bit (and tf32) operands K-major only: it has no transpose for them.
  if (!wgmmaCanTranspose(at.elem) && (!aS.kMajor || !bS.kMajor)) {
    std::string why = !aS.kMajor ? "A is the local_trans of a [K, M] buffer (M contiguous); "
                                   "store A as an [M, K] buffer"
                                 : "B is a [K, N] buffer (N contiguous); store B as an [N, K] "
                                   "buffer and pass its tlx.local_trans";
    raiseError(op.loc(), "tlx.async_dot of " + std::string(ir::sigName(at.elem)) + " and " +
                             std::string(ir::sigName(bt.elem)) +
                             " operands: wgmma reads 8-bit operands from shared memory with K "
                             "contiguous only, but " +
                             why);
  }
  if (!aInRegs) requireNvmmaUserLayout(op, 0, false);
  requireNvmmaUserLayout(op, 1, false);
  const layout::SharedAllocation& bAlloc = allocationOf(op, 1);
  const layout::SharedAllocation& aAlloc = aInRegs ? bAlloc : allocationOf(op, 0);
  if (!aAlloc.swizzleBytes || !bAlloc.swizzleBytes)
    raiseError(op.loc(), "tlx.async_dot operands " + at.str() + " and " + bt.str() +
                             " need rows of at least 32 bytes (a swizzled NVMMA layout)");
  int64_t M = at.shape[0], K = at.shape[1], N = bt.shape[1];
  const layout::DotLayouts* dl = layouts_.dot(op);
  if (!dl || dl->kind != layout::MmaKind::Wgmma || dl->instrN < 8 || M % 64 != 0)
    raiseError(op.loc(),
               "tlx.async_dot of a " + std::to_string(M) + "x" + std::to_string(N) +
                   " tile does not map onto wgmma with num_warps=" + std::to_string(warps()) +
                   "; use M a multiple of 64 and num_warps a multiple of 4");
  const LinearLayout& accL = dl->acc;
  int32_t instrN = dl->instrN;
  if (halfAcc && !pairsHalfAccumulatorRegisters(accL))
    throw std::logic_error("codegen: async_dot's fp16 accumulator layout does not pair its "
                           "registers as wgmma's f16 words: " +
                           accL.str());
  // Each wgmma: instrN / 2 accumulator registers (instrN / 4 packed fp16 ones), and 4 of A when
  // A comes from registers.
  requireLaunchRegisters(op, wgmmaRegisterNeed(instrN / (halfAcc ? 4 : 2), aInRegs ? 4 : 0),
                         "tlx.async_dot's m64n" + std::to_string(instrN) + " wgmma");
  int bytes = ir::byteWidth(at.elem);
  int64_t instrK = 32 / bytes; // 32 bytes of K per instruction (rows of 32 bytes or more)
  int64_t sa = aAlloc.swizzleBytes, sb = bAlloc.swizzleBytes;
  // Byte offsets of elements in the unswizzled NVMMA layout (the hardware applies the swizzle
  // to the address bits, so descriptor start addresses use these): element (mn, k) of an
  // operand whose M or N extent is `extent`, K contiguous in rows of `s` bytes or the other way.
  auto tileByte = [&](const SmemOperand& o, int64_t s, int64_t extent, int64_t mn, int64_t k) {
    int64_t row = s / bytes;
    if (o.kMajor) return ((k / row) * extent + mn) * s + (k % row) * bytes;
    return ((mn / row) * K + k) * s + (mn % row) * bytes;
  };
  auto aByte = [&](int64_t m, int64_t k) { return tileByte(aS, sa, M, m, k); };
  auto bByte = [&](int64_t k, int64_t n) { return tileByte(bS, sb, N, n, k); };

  unsigned next = 3;
  // A zero accumulator (S = Q K^T) is never written to registers: each tile's first k step
  // ignores it (scale-d = 0). Not under `pred`, where the zeros must pass through.
  bool zeroAcc = isZeroConstant(op.operand(2)) && !ir::attr::AsyncDot::hasPred(op);
  std::string firstAccumulate = b_.pure("setp.ne.u32", RegClass::Pred, {zeroAcc ? "0" : "1", "0"});
  if (ir::attr::AsyncDot::hasUseAcc(op)) {
    std::string useAcc = b_.materialize(operand(op, next++).at(0), RegClass::Pred);
    if (!zeroAcc) firstAccumulate = useAcc;
  }
  std::string skip;
  if (ir::attr::AsyncDot::hasPred(op)) {
    skip = b_.newLabel("async_dot_skip");
  }
  // The accumulator's registers, written in place by the wgmmas: an fp16 one's packed words
  // (word w: elements 2w and 2w + 1), as it arrives when kept packed or packed here.
  const bool packedIn = packedHalfValues_.count(op.operand(2)) != 0;
  Regs acc;
  if (packedIn) {
    acc = halfWordsOf(op.operand(2));
  } else {
    acc = operand(op, 2);
    if (halfAcc) acc = zeroAcc ? Regs(acc.size() / 2) : packHalfAccumulator(b_, acc);
  }
  Regs live(acc.size());
  // Words packed here are fresh registers already.
  bool inPlace = (halfAcc && !packedIn) || accumulatesInPlace(fn_.body, op);
  // f32, b32 for int32 and for fp16 words.
  const RegClass accClass = halfAcc ? RegClass::B32 : regClassOf(rt.elem);
  for (size_t r = 0; r < acc.size(); ++r) {
    if (zeroAcc) {
      live[r] = b_.newReg(accClass);
      continue;
    }
    if (inPlace && !acc[r].empty() && acc[r][0] == '%') {
      live[r] = acc[r];
      continue;
    }
    live[r] = b_.newReg(accClass);
    b_.inst(accClass == RegClass::F32 ? "mov.f32" : "mov.b32",
            {live[r], b_.materialize(acc[r], accClass)});
  }
  // Each tile's accumulator operand: its fragment registers, or for fp16 the words of each
  // fragment pair (fragment elements 2i and 2i + 1 are registers 2w and 2w + 1).
  auto accumulatorList = [&](const std::vector<int32_t>& regs) {
    if (!halfAcc) return wgmmaAccumulatorList(regs, live);
    std::vector<std::string> words;
    for (size_t i = 0; i < regs.size(); i += 2) {
      if (regs[i] < 0 || regs[i] % 2 != 0 || regs[i + 1] != regs[i] + 1)
        throw std::logic_error("codegen: wgmma f16 fragment pair is not a packed word");
      words.push_back(live.at(static_cast<size_t>(regs[i] / 2)));
    }
    return registerList(words);
  };
  if (!skip.empty())
    b_.inst("bra", {skip}, b_.materialize(operand(op, next).at(0), RegClass::Pred), true);

  // Each warp group's tile origin from the warp bits above the group.
  auto groupImages = [&](bool isA) {
    std::vector<int32_t> images(5 + std::countr_zero(static_cast<uint32_t>(warps())), 0);
    for (int bit = 2; bit < accL.getInDimSizeLog2(layout::kWarp); ++bit) {
      if (5 + bit >= static_cast<int>(images.size())) break;
      const auto& basis = accL.getBasis(layout::kWarp, bit);
      images[5 + bit] = static_cast<int32_t>(isA ? aByte(basis[0], 0) : bByte(0, basis[1]));
    }
    return images;
  };
  int32_t aBits = 0, bBits = 0;
  std::string aHw = aInRegs ? std::string("0") : tidLinear(groupImages(true), &aBits);
  std::string bHw = tidLinear(groupImages(false), &bBits);
  std::string aBase =
      aInRegs ? std::string() : b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
  // A in registers: the thread's four 32-bit words of each (64-row, instrK) tile, in the
  // fragment order of mma.sync's m16n8k16 (16-bit) or m16n8k32 (8-bit) A, each warp of the
  // group holding 16 rows: a word packs `perWord` consecutive k of one row.
  std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> aWords;
  if (aInRegs) {
    const LinearLayout& aL = dl->a;
    const int perWord = 4 / ir::byteWidth(at.elem);
    const int64_t kStep = 8 * perWord; // instrK
    requireFragmentLanes(aL, 1, perWord, 0, "wgmma A operand");
    const Regs& a = operand(op, 0);
    std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> aElems;
    int32_t aDup = aL.freeVariableMask(layout::kRegister);
    for (int32_t r = 0; r < aL.getInDimSize(layout::kRegister); ++r) {
      if (r & aDup) continue;
      auto c = registerCoords(aL, r);
      auto& t = aElems[{c[0] / 64 * 64, c[1] / kStep}];
      t.resize(4 * perWord);
      t.at(layout::mmaSyncFragmentIndex(0, c[0], c[1], 8 * ir::byteWidth(at.elem))) = a.at(r);
    }
    for (auto& [key, elems] : aElems)
      for (int i = 0; i < 4; ++i)
        aWords[key].push_back(
            packFragmentWord(b_, elems, static_cast<size_t>(perWord * i), perWord));
  }
  std::string bBase = b_.materialize(regsOf(op.operand(1)).at(0), RegClass::B32);
  uint64_t aFixed = wgmmaLayoutBits(aS.kMajor, static_cast<int>(sa), K);
  uint64_t bFixed = wgmmaLayoutBits(bS.kMajor, static_cast<int>(sb), K);
  auto descriptor = [&](const std::string& hw, int32_t hwBits, const std::string& buffer,
                        int64_t byteOffset, uint64_t fixedBits) {
    std::string addr = sharedAddress(xorConst(hw, hwBits, static_cast<int32_t>(byteOffset)));
    return wgmmaDescriptor(b_, b_.pure("add.s32", RegClass::B32, {addr, buffer}), fixedBits);
  };
  const WgmmaTiles tiles = wgmmaTiles(accL, instrN);
  // Each operand's descriptors are one base descriptor (the warp group's origin in the buffer,
  // built once per async_dot) plus a 64-bit add per tile and k step, rather than a descriptor
  // rebuilt from the address each step. That needs every step to add to the warp group's
  // offset: a step sharing bits with it is xor'ed in (xorConst), and then the operand keeps
  // the full descriptor per step.
  auto stepsFromBase = [&](int32_t hwBits, auto byteOffsetOf) {
    for (const auto& [origin, regs] : tiles)
      for (int64_t k0 = 0; k0 < K; k0 += instrK) {
        int64_t off = byteOffsetOf(origin, k0);
        if ((off & hwBits) != 0 || !isWgmmaDescriptorStep(off) || off > INT32_MAX) return false;
      }
    return true;
  };
  using Origin = std::pair<int64_t, int64_t>;
  bool aSteps = !aInRegs && stepsFromBase(aBits, [&](const Origin& o, int64_t k0) {
    return aByte(o.first, k0);
  });
  bool bSteps =
      stepsFromBase(bBits, [&](const Origin& o, int64_t k0) { return bByte(k0, o.second); });
  std::string aDescBase = aSteps ? descriptor(aHw, aBits, aBase, 0, aFixed) : std::string();
  std::string bDescBase = bSteps ? descriptor(bHw, bBits, bBase, 0, bFixed) : std::string();
  std::string opcode = wgmmaOpcode(instrN, at.elem, bt.elem, rt.elem);
  const std::vector<std::string> immediates =
      wgmmaImmediates(at.elem, aInRegs, !aS.kMajor, !bS.kMajor);
  b_.inst("wgmma.fence.sync.aligned", {});
  for (const auto& [origin, regs] : tiles) {
    std::string accumulate = firstAccumulate;
    std::string list = accumulatorList(regs);
    for (int64_t k0 = 0; k0 < K; k0 += instrK) {
      int64_t bOff = bByte(k0, origin.second);
      std::string db = bSteps ? wgmmaDescriptorStep(b_, bDescBase, bOff)
                              : descriptor(bHw, bBits, bBase, bOff, bFixed);
      if (aInRegs) {
        auto words = aWords.find({origin.first, k0 / instrK});
        if (words == aWords.end())
          throw std::logic_error("codegen: wgmma A fragment missing for a tile");
        std::vector<std::string> operands{list, registerList(words->second), db, accumulate};
        operands.insert(operands.end(), immediates.begin(), immediates.end());
        b_.inst(opcode, operands);
      } else {
        int64_t aOff = aByte(origin.first, k0);
        std::string da = aSteps ? wgmmaDescriptorStep(b_, aDescBase, aOff)
                                : descriptor(aHw, aBits, aBase, aOff, aFixed);
        std::vector<std::string> operands{list, da, db, accumulate};
        operands.insert(operands.end(), immediates.begin(), immediates.end());
        b_.inst(opcode, operands);
      }
      // Later k steps add to what the first wrote.
      accumulate = b_.pure("setp.ne.u32", RegClass::Pred, {"1", "0"});
    }
  }
  b_.inst("wgmma.commit_group.sync.aligned", {});
  if (!skip.empty()) b_.label(skip);
  int32_t dup = accL.freeVariableMask(layout::kRegister);
  if (halfAcc && packedHalfValues_.count(op.result())) {
    halfWords_[op.result()] = std::move(live);
    return;
  }
  // Elements read while the MMA may be in flight: ptxas waits for it first.
  if (halfAcc) live = unpackHalfAccumulator(b_, live);
  for (int32_t r = 0; r < static_cast<int32_t>(live.size()); ++r)
    if (r & dup) live[r] = live[r & ~dup];
  bind(op.result(), std::move(live));
}

void FunctionLowering::lowerAsyncDotWait(const ir::Op& op) {
  if (options_.target != Target::SM90a)
    raiseError(op.loc(), "tlx.async_dot_wait waits for wgmma, which only sm_90a has");
  int64_t pendings = ir::attr::AsyncDotWait::pendings(op);
  if (pendings < 0 || pendings > 7)
    raiseError(op.loc(), "tlx.async_dot_wait(" + std::to_string(pendings) +
                             ") is out of range; wgmma.wait_group takes 0 to 7");
  b_.inst("wgmma.wait_group.sync.aligned", {immInt(pendings)});
  for (unsigned i = 0; i < op.numResults() && i < op.numOperands(); ++i) {
    const ir::Value* v = op.operand(i);
    if (!packedHalfValues_.count(v)) {
      bind(op.result(i), operand(op, i));
    } else if (packedHalfValues_.count(op.result(i))) {
      halfWords_[op.result(i)] = halfWordsOf(v);
    } else {
      // Its readers want elements: unpacked here, after the wait, as the plain tl.dot lowering
      // unpacks after its own (an MMA this wait leaves in flight is waited for by ptxas).
      bind(op.result(i), unpackHalfAccumulator(b_, halfWordsOf(v)));
    }
  }
}

} // namespace ww::codegen
