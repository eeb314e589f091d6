// tlx.async_dot and tlx.async_dot_wait: wgmma.mma_async straight from TLX buffers (sm_90a).
#include "codegen/Lowering.h"
#include "codegen/Wgmma.h"

#include <climits>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

// ---------------------------------------------------------------------------------------------
// tlx.async_dot: wgmma.mma_async straight from TLX buffers. The allocator gives 2-D buffers the
// NVMMA layout (contiguous last dim, 1024-byte aligned, swizzled in rows of S bytes, wider
// rows split into column blocks of S bytes); the matrix descriptors describe that layout: A
// [M, K] is K-major, B [K, N] is N-major (transposed-B mode). The accumulator registers stay
// in flight until async_dot_wait.
// ---------------------------------------------------------------------------------------------

namespace {

/// Whether an op other than `user`, in `block` or nested in it, reads `v`.
bool readElsewhere(const ir::Block& block, const ir::Value* v, const ir::Op* user) {
  for (const auto& op : block.ops()) {
    if (op.get() != user)
      for (const ir::Value* operand : op->operands())
        if (operand == v) return true;
    for (unsigned i = 0; i < op->numRegions(); ++i)
      if (readElsewhere(*op->region(i), v, user)) return true;
  }
  return false;
}

/// Whether async_dot `op` may accumulate straight into its accumulator operand's registers:
/// nothing else in `body` reads that value (or, through async_dot_wait, the value it renames).
/// Copying the accumulator instead would read the registers of a wgmma still in flight, and
/// ptxas then serializes every wgmma of the kernel.
bool accumulatesInPlace(const ir::Block& body, const ir::Op& op) {
  const ir::Value* acc = op.operand(2);
  const ir::Op* user = &op;
  while (true) {
    if (readElsewhere(body, acc, user)) return false;
    const ir::Op* def = acc->def();
    if (!def || def->code() != OpCode::AsyncDotWait) return true;
    unsigned i = 0;
    while (def->result(i) != acc) ++i;
    acc = def->operand(i);
    user = def;
  }
}

/// Whether `v` is the all-zero constant that async_dot without `acc` accumulates onto.
bool isZeroConstant(const ir::Value* v) {
  const ir::Op* def = v->def();
  if (!def || def->code() != OpCode::Constant) return false;
  const ir::Attr* a = def->attr("value");
  if (!a) return false;
  if (const double* f = std::get_if<double>(a)) return *f == 0.0;
  return def->intAttr("value") == 0;
}

} // namespace

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
  if ((at.elem != DType::F16 && at.elem != DType::BF16) || bt.elem != at.elem)
    raiseError(op.loc(), "tlx.async_dot of " + at.str() + " and " + bt.str() +
                             " is not supported yet; use fp16 or bf16 operands of one type");
  if (rt.elem != DType::F32)
    raiseError(op.loc(), "tlx.async_dot accumulates in fp32 only, got " + rt.str());
  // B is N-major as allocated ([K, N], N contiguous), or K-major when it is local_trans of an
  // [N, K] buffer (K^T in attention).
  const ir::Op* bDef = op.operand(1)->def();
  bool bKMajor = bDef && bDef->code() == OpCode::LocalTrans &&
                 bDef->intsAttr("order") == std::vector<int64_t>{1, 0} &&
                 isPlainBuffer(bDef->operand(0));
  if ((!aInRegs && !isPlainBuffer(op.operand(0))) || (!bKMajor && !isPlainBuffer(op.operand(1))))
    raiseError(op.loc(), "tlx.async_dot operands must be buffers from tlx.local_alloc, their "
                         "local_view, or (for B) its 2-D local_trans; other views are not "
                         "supported yet");
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
  // Each wgmma: instrN / 2 accumulator registers, and 4 of A when A comes from registers.
  requireLaunchRegisters(op, wgmmaRegisterNeed(instrN / 2, aInRegs ? 4 : 0),
                         "tlx.async_dot's m64n" + std::to_string(instrN) + " wgmma");
  int bytes = ir::byteWidth(at.elem);
  int64_t instrK = 32 / bytes;
  int64_t sa = aAlloc.swizzleBytes, sb = bAlloc.swizzleBytes;
  int64_t rowA = sa / bytes, rowB = sb / bytes;
  // Byte offsets of elements in the unswizzled NVMMA layout (the hardware applies the swizzle
  // to the address bits, so descriptor start addresses use these).
  auto aByte = [&](int64_t m, int64_t k) { return ((k / rowA) * M + m) * sa + (k % rowA) * bytes; };
  auto bByte = [&](int64_t k, int64_t n) {
    if (bKMajor) return ((k / rowB) * N + n) * sb + (k % rowB) * bytes;
    return ((n / rowB) * K + k) * sb + (n % rowB) * bytes;
  };

  unsigned next = 3;
  // A zero accumulator (S = Q K^T) is never written to registers: each tile's first k step
  // ignores it (scale-d = 0). Not under `pred`, where the zeros must pass through.
  bool zeroAcc = isZeroConstant(op.operand(2)) && !op.intAttr("has_pred");
  std::string firstAccumulate = b_.pure("setp.ne.u32", RegClass::Pred, {zeroAcc ? "0" : "1", "0"});
  if (op.intAttr("has_use_acc")) {
    std::string useAcc = b_.materialize(operand(op, next++).at(0), RegClass::Pred);
    if (!zeroAcc) firstAccumulate = useAcc;
  }
  std::string skip;
  if (op.intAttr("has_pred")) {
    skip = b_.newLabel("async_dot_skip");
  }
  Regs acc = operand(op, 2);
  Regs live(acc.size());
  bool inPlace = accumulatesInPlace(fn_.body, op);
  for (size_t r = 0; r < acc.size(); ++r) {
    if (zeroAcc) {
      live[r] = b_.newReg(RegClass::F32);
      continue;
    }
    if (inPlace && !acc[r].empty() && acc[r][0] == '%') {
      live[r] = acc[r];
      continue;
    }
    live[r] = b_.newReg(RegClass::F32);
    b_.inst("mov.f32", {live[r], b_.materialize(acc[r], RegClass::F32)});
  }
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
  // A in registers: the thread's four 32-bit words of each (64-row, 16-k) tile, in the
  // fragment order of mma.sync's m16n8k16 A (each warp of the group holds 16 rows).
  std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> aWords;
  if (aInRegs) {
    const LinearLayout& aL = dl->a;
    requireFragmentLanes(aL, 1, 2, 0, "wgmma A operand");
    const Regs& a = operand(op, 0);
    std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> aElems;
    int32_t aDup = aL.freeVariableMask(layout::kRegister);
    for (int32_t r = 0; r < aL.getInDimSize(layout::kRegister); ++r) {
      if (r & aDup) continue;
      auto c = registerCoords(aL, r);
      auto& t = aElems[{c[0] / 64 * 64, c[1] / 16}];
      t.resize(8);
      int idx = (c[1] % 2) + 2 * ((c[0] % 16) / 8) + 4 * ((c[1] % 16) / 8);
      t.at(idx) = a.at(r);
    }
    for (auto& [key, elems] : aElems)
      for (int i = 0; i < 4; ++i) {
        if (elems[2 * i].empty() || elems[2 * i + 1].empty())
          throw std::logic_error("codegen: wgmma A fragment not covered by registers");
        std::string lo = b_.materialize(elems[2 * i], RegClass::B16);
        std::string hi = b_.materialize(elems[2 * i + 1], RegClass::B16);
        aWords[key].push_back(b_.pure("mov.b32", RegClass::B32, {"{" + lo + ", " + hi + "}"}));
      }
  }
  std::string bBase = b_.materialize(regsOf(op.operand(1)).at(0), RegClass::B32);
  // A (K-major): LBO unused (1), SBO = next 8 rows. B (N-major): LBO = next column block of
  // the swizzle width along N, SBO = next 8 rows along K.
  uint64_t aFixed = (uint64_t(1) << 16) | (uint64_t((8 * sa) >> 4) << 32) | swizzleModeBits(sa);
  uint64_t bFixed = (uint64_t(bKMajor ? 1 : (K * sb) >> 4) << 16) |
                    (uint64_t((8 * sb) >> 4) << 32) | swizzleModeBits(sb);
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
  std::string abType = at.elem == DType::F16 ? "f16" : "bf16";
  std::string opcode = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(instrN) + "k" +
                       std::to_string(instrK) + ".f32." + abType + "." + abType;
  b_.inst("wgmma.fence.sync.aligned", {});
  for (const auto& [origin, regs] : tiles) {
    std::string accumulate = firstAccumulate;
    std::string list = wgmmaAccumulatorList(regs, live);
    for (int64_t k0 = 0; k0 < K; k0 += instrK) {
      int64_t bOff = bByte(k0, origin.second);
      std::string db = bSteps ? wgmmaDescriptorStep(b_, bDescBase, bOff)
                              : descriptor(bHw, bBits, bBase, bOff, bFixed);
      std::string bTrans = bKMajor ? "0" : "1"; // B transposed unless it is K-major
      if (aInRegs) {
        auto words = aWords.find({origin.first, k0 / 16});
        if (words == aWords.end())
          throw std::logic_error("codegen: wgmma A fragment missing for a tile");
        std::string aList = "{";
        for (size_t i = 0; i < words->second.size(); ++i)
          aList += (i ? ", " : "") + words->second[i];
        aList += "}";
        b_.inst(opcode, {list, aList, db, accumulate, "1", "1", bTrans});
      } else {
        int64_t aOff = aByte(origin.first, k0);
        std::string da = aSteps ? wgmmaDescriptorStep(b_, aDescBase, aOff)
                                : descriptor(aHw, aBits, aBase, aOff, aFixed);
        b_.inst(opcode, {list, da, db, accumulate, "1", "1", "0", bTrans}); // A K-major
      }
      // Later k steps add to what the first wrote.
      accumulate = b_.pure("setp.ne.u32", RegClass::Pred, {"1", "0"});
    }
  }
  b_.inst("wgmma.commit_group.sync.aligned", {});
  if (!skip.empty()) b_.label(skip);
  int32_t dup = accL.freeVariableMask(layout::kRegister);
  for (int32_t r = 0; r < static_cast<int32_t>(live.size()); ++r)
    if (r & dup) live[r] = live[r & ~dup];
  bind(op.result(), std::move(live));
}

void FunctionLowering::lowerAsyncDotWait(const ir::Op& op) {
  if (options_.target != Target::SM90a)
    raiseError(op.loc(), "tlx.async_dot_wait waits for wgmma, which only sm_90a has");
  int64_t pendings = op.intAttr("pendings");
  if (pendings < 0 || pendings > 7)
    raiseError(op.loc(), "tlx.async_dot_wait(" + std::to_string(pendings) +
                             ") is out of range; wgmma.wait_group takes 0 to 7");
  b_.inst("wgmma.wait_group.sync.aligned", {immInt(pendings)});
  for (unsigned i = 0; i < op.numResults() && i < op.numOperands(); ++i)
    bind(op.result(i), operand(op, i));
}

} // namespace ww::codegen
