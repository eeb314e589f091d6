// tl.dot: wgmma on sm_90a (fp16/bf16, tf32, fp8 e4m3 / e5m2, int8 / uint8 into int32, fp16 into
// fp16), mma.sync.aligned.m16n8k16 (fp16/bf16, fp16 into fp16, and fp8 upcast to fp16 exactly as
// Triton's MMAv2 path does), m16n8k32 (int8 / uint8 into int32) and m16n8k8 (tf32) on tensor cores,
// with operands moved into the fragment layouts; per-element FMAs for the other types.
#include "codegen/Lowering.h"
#include "codegen/Wgmma.h"
#include "ir/DotTypes.h"
#include "ir/OpAttrs.h"

#include "layout/LayoutAssignment.h"
#include "layout/Layouts.h"
#include "support/MathExtras.h"

#include <bit>
#include <map>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

namespace {

/// fp8 values as fp16 (exact): e5m2 is the high byte of an fp16, e4m3 goes through cvt (sm_89+).
Regs upcastFp8ToF16(ScalarContext& cx, const Regs& regs, DType t) {
  Regs out;
  out.reserve(regs.size());
  for (const auto& x : regs) {
    if (t == DType::F8E5M2)
      out.push_back(cx.b.pure("shl.b16", RegClass::B16, {cx.b.materialize(x, RegClass::B16), "8"}));
    else
      out.push_back(emitCast(cx, x, t, DType::F16));
  }
  return out;
}

/// What the tensor-core lowerings take, for the errors of dots left to per-thread FMAs.
constexpr const char* kMmaTypes =
    "tensor cores take float16 / bfloat16, fp8 (fp8e4nv / fp8e5) and float32 (tf32) operands "
    "into float32, float16 ones into float16 and int8 / uint8 ones into int32, in tiles with M a "
    "multiple of 16 and N of 8";

/// Accumulator registers a thread of a dot looping over K may hold (32-bit ones; fp64 and
/// 64-bit integers take two). A thread addresses 255 registers: past twice that, most of the
/// accumulator would live in local memory, read and written again for every k-step.
constexpr int64_t kFmaLoopAccumulatorRegisters = 512;

/// Products (FMAs) a thread of one iteration of a dot's loop over K: the k-steps it unrolls
/// give ptxas independent FMAs to schedule and A's rows in vectors along K.
constexpr int64_t kFmaLoopBodyProducts = 512;

/// The bits of `x`, from bit 0 up, placed at the set bits of `mask` in turn.
int32_t depositBits(int32_t x, int32_t mask) {
  int32_t out = 0;
  for (int i = 0, o = 0; i < 31; ++i)
    if (mask >> i & 1) out |= (x >> o++ & 1) << i;
  return out;
}

} // namespace

void FunctionLowering::lowerDot(const ir::Op& op) {
  const ir::Type& at = op.operand(0)->type();
  const ir::Type& bt = op.operand(1)->type();
  const ir::Type& rt = op.result()->type();
  if (at.shape.size() != 2 || bt.shape.size() != 2)
    raiseError(op.loc(), "dot takes 2-D operands, got " + at.str() + " and " + bt.str());
  int64_t M = at.shape[0], K = at.shape[1], N = bt.shape[1];
  if (bt.shape[0] != K)
    raiseError(op.loc(), "dot operand shapes " + at.str() + " and " + bt.str() + " do not chain");
  // Triton's rule for NVIDIA targets (its min_dot_size): any M and N, K at least one 256-bit MMA
  // k-step of the operand type (the interpreter, like Triton's, takes any K).
  int bits = ir::bitWidth(at.elem);
  int64_t minK = bits == 8 ? 32 : bits == 16 ? 16 : bits == 32 ? 8 : 4;
  if (K < minK)
    raiseError(op.loc(), "tl.dot of " + std::string(ir::tlName(at.elem)) + " operands needs K >= " +
                             std::to_string(minK) + " on " + targetName(options_.target) +
                             " (as Triton's NVIDIA back end), got K = " + std::to_string(K) +
                             "; M and N may be as small as 1");
  DType accType = rt.elem;
  std::string precision = ir::attr::Dot::inputPrecision(op);
  const LinearLayout& D = layoutOf(op.result());
  Regs accIn = operand(op, 2);
  ScalarContext cx = scalarContext(op);

  // fp16 / bf16 into fp32, or fp16 into fp16 (the f16 MMA forms, two elements a register).
  bool halfAcc = ir::isHalfAccumulateDot(at, bt, rt);
  bool sixteen = ((at.elem == DType::F16 || at.elem == DType::BF16) && bt.elem == at.elem &&
                  accType == DType::F32) ||
                 halfAcc;
  bool tf32 = at.elem == DType::F32 && bt.elem == DType::F32 && accType == DType::F32 &&
              precision != "ieee";
  // fp8 (e4m3, e5m2, mixed) into fp32, or into fp16 on wgmma (which then sums in fp32 and rounds
  // once at the end).
  bool fp8 = ir::isFp8Dot(at, bt);
  bool fp8Wgmma =
      fp8 && (accType == DType::F32 || accType == DType::F16) && !ir::fp8DotAvoidsWgmma(op);
  // int8 / uint8 into int32: wgmma .s32 (k32) on sm_90a, mma.sync m16n8k32 elsewhere.
  bool int8 = ir::isInt8Dot(at, bt, rt);
  int64_t wgmmaK = fp8 || int8 ? 32 : sixteen ? 16 : 8;
  if ((sixteen || tf32 || fp8Wgmma || int8) && options_.target == Target::SM90a &&
      warps() % 4 == 0 && M % 64 == 0 && N % 8 == 0 && K % wgmmaK == 0)
    return lowerDotWgmma(op, operand(op, 0), operand(op, 1), accIn);
  // Elsewhere an fp8 dot into fp32 multiplies fp16 operands (the upcast is exact), as Triton's
  // MMAv2 path does on targets without fp8 mma.sync; Triton refuses fp8e4nv below sm_89.
  bool fp8Mma = fp8 && accType == DType::F32;
  if (fp8Mma && options_.target == Target::SM80 &&
      (at.elem == DType::F8E4M3 || bt.elem == DType::F8E4M3))
    raiseError(op.loc(), "tl.dot of " + std::string(ir::tlName(at.elem)) + " and " +
                             std::string(ir::tlName(bt.elem)) +
                             " operands is not supported on sm_80: fp8e4nv needs sm_89 or newer "
                             "(Triton's fp8 types on sm_80 are fp8e5 and fp8e4b15); use fp8e5 or "
                             "float16 operands, or compile for sm_90a");
  if (fp8Mma) sixteen = true; // the fragments hold the fp16 upcasts
  // Bits of each fragment element (8: int8, 16: fp16 / bf16 / fp8 upcasts, 32: tf32) and the
  // elements a 32-bit fragment word packs; an instruction takes 8 words' worth of K.
  int elemBits = int8 ? 8 : sixteen ? 16 : 32;
  int perWord = 32 / elemBits;
  int64_t instrK = 8 * perWord;
  if ((sixteen || tf32 || int8) && M % 16 == 0 && N % 8 == 0 && K % instrK == 0) {
    // Tensor cores: A, B and the accumulator in the mma.sync fragment layouts.
    const layout::DotLayouts* dl = layouts_.dot(op);
    std::vector<int32_t> warps =
        dl && !dl->warpsPerCTA.empty() ? dl->warpsPerCTA : std::vector<int32_t>{};
    if (warps.size() != 2 || static_cast<int64_t>(warps[0]) * 16 > M ||
        static_cast<int64_t>(warps[1]) * 8 > N) {
      // Split the warps over M first, as far as 16-row tiles allow.
      int w = this->warps();
      int wm = 1;
      while (wm < w && (wm * 2) * 16 <= M) wm *= 2;
      int wn = w / wm;
      while (wn > 1 && wn * 8 > N) wn /= 2;
      warps = {wm, wn};
    }
    LinearLayout accL =
        dl && dl->kind == layout::MmaKind::MmaSync && dl->acc.getTotalInDimSize() > 0
            ? dl->acc
            : layout::mmaSyncAccumulatorLayout({M, N}, warps);
    LinearLayout aL = dl && dl->kind == layout::MmaKind::MmaSync
                          ? dl->a
                          : layout::mmaSyncOperandLayout(0, {M, K}, warps, elemBits);
    LinearLayout bL = dl && dl->kind == layout::MmaKind::MmaSync
                          ? dl->b
                          : layout::mmaSyncOperandLayout(1, {K, N}, warps, elemBits);
    requireFragmentLanes(accL, 1, 2, 0, "accumulator");
    requireFragmentLanes(aL, 1, perWord, 0, "A operand");
    requireFragmentLanes(bL, 0, perWord, 1, "B operand");
    Regs a = convert(operand(op, 0), operandLayoutOf(op, 0), aL, at.elem, op);
    Regs b = convert(operand(op, 1), operandLayoutOf(op, 1), bL, bt.elem, op);
    if (fp8Mma) {
      a = upcastFp8ToF16(cx, a, at.elem);
      b = upcastFp8ToF16(cx, b, bt.elem);
    }
    Regs acc = convert(accIn, operandLayoutOf(op, 2), accL, accType, op);

    // Elements of each instruction tile, in the fragment order of the PTX ISA tables, from the
    // register part of the coordinates (lane 0 of each warp holds element 0 of every tile).
    std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> aTiles, bTiles, cTiles;
    std::map<std::pair<int64_t, int64_t>, std::vector<int32_t>> cRegs;
    for (int32_t r = 0; r < aL.getInDimSize(layout::kRegister); ++r) {
      auto c = registerCoords(aL, r);
      auto& t = aTiles[{c[0] / 16, c[1] / instrK}];
      t.resize(4 * perWord);
      t.at(layout::mmaSyncFragmentIndex(0, c[0], c[1], elemBits)) = a[r];
    }
    for (int32_t r = 0; r < bL.getInDimSize(layout::kRegister); ++r) {
      auto c = registerCoords(bL, r);
      auto& t = bTiles[{c[0] / instrK, c[1] / 8}];
      t.resize(2 * perWord);
      t.at(layout::mmaSyncFragmentIndex(1, c[0], c[1], elemBits)) = b[r];
    }
    for (int32_t r = 0; r < accL.getInDimSize(layout::kRegister); ++r) {
      auto c = registerCoords(accL, r);
      auto& t = cTiles[{c[0] / 16, c[1] / 8}];
      auto& ri = cRegs[{c[0] / 16, c[1] / 8}];
      t.resize(4);
      ri.resize(4, -1);
      int idx = layout::mmaSyncFragmentIndex(2, c[0], c[1], 32);
      t[idx] = acc[r];
      ri[idx] = r;
    }
    // The fragments' types: fp8 operands went up to fp16.
    DType aType = fp8Mma ? DType::F16 : at.elem, bType = fp8Mma ? DType::F16 : bt.elem;
    std::string accName = mmaTypeName(accType, true);
    // Integer products saturate (.satfinite), as Triton's int8 mma.sync does.
    std::string opcode = "mma.sync.aligned.m16n8k" + std::to_string(instrK) + ".row.col." +
                         (ir::isInt(accType) ? "satfinite." : "") + accName + "." +
                         mmaTypeName(aType) + "." + mmaTypeName(bType) + "." + accName;
    // f32, b32 for int32, and b32 words of two fp16 elements for an fp16 accumulator.
    const RegClass accClass = halfAcc ? RegClass::B32 : regClassOf(accType);
    auto pack = [&](const std::vector<std::string>& elems, size_t i) {
      if (perWord == 1) {
        std::string f = b_.materialize(elems.at(i), RegClass::F32);
        return b_.pure("cvt.rna.tf32.f32", RegClass::B32, {f});
      }
      return packFragmentWord(b_, elems, i * static_cast<size_t>(perWord), perWord);
    };
    int64_t kTiles = 0;
    for (const auto& [key, _] : aTiles) kTiles = std::max(kTiles, key.second + 1);
    Regs result(acc.size());
    for (auto& [tile, cur] : cTiles) {
      std::vector<std::string> c = cur;
      if (halfAcc)
        c = packHalfAccumulator(b_, c); // {c0, c1} and {c2, c3}: two f16x2 words
      else
        for (auto& x : c) x = b_.materialize(x, accClass);
      for (int64_t kt = 0; kt < kTiles; ++kt) {
        auto ai = aTiles.find({tile.first, kt});
        auto bi = bTiles.find({kt, tile.second});
        if (ai == aTiles.end() || bi == bTiles.end())
          throw std::logic_error("codegen: dot operand fragments do not cover the tile");
        std::vector<std::string> aw, bw;
        for (int i = 0; i < 4; ++i) aw.push_back(pack(ai->second, i));
        for (int i = 0; i < 2; ++i) bw.push_back(pack(bi->second, i));
        std::vector<std::string> d;
        for (size_t i = 0; i < c.size(); ++i) d.push_back(b_.newReg(accClass));
        b_.inst(opcode, {registerList(d), registerList(aw), registerList(bw), registerList(c)});
        c = d;
      }
      if (halfAcc) c = unpackHalfAccumulator(b_, c);
      const auto& ri = cRegs[tile];
      for (int i = 0; i < 4; ++i) result.at(ri[i]) = c[i];
    }
    // Duplicate registers of the accumulator layout follow their canonical register.
    int32_t dup = accL.freeVariableMask(layout::kRegister);
    for (size_t r = 0; r < result.size(); ++r)
      if (result[r].empty()) result[r] = result[r & ~static_cast<size_t>(dup)];
    return bind(op.result(), convert(result, accL, D, accType, op));
  }

  // Per-element FMAs in the result's layout: thread (m, n) reads row m of A and column n of B.
  if (!ir::isFloat(accType) && !ir::isInt(accType))
    raiseError(op.loc(), "dot accumulates in numbers, got " + rt.str());
  int kBits = 0;
  while ((int64_t(1) << kBits) < K) ++kBits;
  if ((int64_t(1) << kBits) != K)
    raiseError(op.loc(), "dot needs a power-of-two K, got " + std::to_string(K));
  int32_t R = D.getInDimSize(layout::kRegister);
  const int64_t products = static_cast<int64_t>(R) * K;
  // The layout pass planned the loop (it leaves the operands where they are); a dot it did not
  // plan as FMAs (its operands in MMA layouts) loops when this count of the kernel's unrolled
  // products, kept the same way, is past the budget.
  const layout::DotLayouts* dl = layouts_.dot(op);
  hasFmaDots_ = true;
  if ((dl && dl->fmaLoop) || !layout::unrollsFmaDot(products, fmaDotProducts_))
    return lowerDotFmaLoop(op, D, convert(accIn, operandLayoutOf(op, 2), D, accType, op));
  fmaDotProducts_ += products;
  auto operandMap = [&](bool isA) {
    LinearLayout::Bases bases;
    for (const auto& in : D.inDimNames()) {
      std::vector<std::vector<int32_t>> vs;
      for (int bit = 0; bit < D.getInDimSizeLog2(in); ++bit) {
        const auto& c = D.getBasis(in, bit);
        vs.push_back(isA ? std::vector<int32_t>{c[0], 0} : std::vector<int32_t>{0, c[1]});
      }
      if (in == layout::kRegister)
        for (int j = 0; j < kBits; ++j)
          vs.push_back(isA ? std::vector<int32_t>{0, 1 << j} : std::vector<int32_t>{1 << j, 0});
      bases.emplace_back(in, std::move(vs));
    }
    LinearLayout::NamedSizes outs = {{layout::dimName(0), static_cast<int32_t>(isA ? M : K)},
                                     {layout::dimName(1), static_cast<int32_t>(isA ? K : N)}};
    return LinearLayout(std::move(bases), std::move(outs));
  };
  Regs aG = gather(operand(op, 0), operandLayoutOf(op, 0), operandMap(true), {0, 0}, at.elem, op);
  Regs bG = gather(operand(op, 1), operandLayoutOf(op, 1), operandMap(false), {0, 0}, bt.elem, op);
  Regs acc = convert(accIn, operandLayoutOf(op, 2), D, accType, op);
  ir::Op fma(OpCode::Fma, op.loc());
  for (int32_t r = 0; r < R; ++r) {
    std::string x = acc[r];
    for (int64_t k = 0; k < K; ++k) {
      std::string av = emitCast(cx, aG[r + k * R], at.elem, accType);
      std::string bv = emitCast(cx, bG[r + k * R], bt.elem, accType);
      x = emitElementwise(cx, fma, {av, bv, x}, {accType, accType, accType}, accType);
    }
    acc[r] = x;
  }
  bind(op.result(), std::move(acc));
}

void FunctionLowering::lowerDotFmaLoop(const ir::Op& op, const LinearLayout& D, const Regs& acc) {
  const ir::Type& at = op.operand(0)->type();
  const ir::Type& bt = op.operand(1)->type();
  const ir::Type& rt = op.result()->type();
  const int64_t M = at.shape[0], K = at.shape[1], N = bt.shape[1];
  const DType accType = rt.elem;
  const std::string what = "tl.dot of " + at.str() + " by " + bt.str() + " into " + rt.str();

  // Each register basis of the accumulator's layout (a blocked one) moves along one dim: the
  // thread's rows and columns are its row bits times its column bits. A zero basis is a copy.
  int32_t rowMask = 0, colMask = 0;
  const int32_t dup = D.freeVariableMask(layout::kRegister);
  for (int bit = 0; bit < D.getInDimSizeLog2(layout::kRegister); ++bit) {
    const auto& c = D.getBasis(layout::kRegister, bit);
    if (c[0] != 0 && c[1] != 0)
      throw std::logic_error("codegen: a dot's FMA loop takes an accumulator layout whose "
                             "register bases move along one dim each:\n" +
                             D.str());
    if (!(dup >> bit & 1)) (c[0] != 0 ? rowMask : colMask) |= 1 << bit;
  }
  const int32_t rows = 1 << std::popcount(static_cast<uint32_t>(rowMask));
  const int32_t cols = 1 << std::popcount(static_cast<uint32_t>(colMask));
  const int64_t accRegs = int64_t(rows) * cols * std::max(1, ir::byteWidth(accType) / 4);
  if (accRegs > kFmaLoopAccumulatorRegisters)
    raiseError(op.loc(), what + " has no tensor-core form on " + targetName(options_.target) +
                             " and needs " + std::to_string(accRegs) +
                             " accumulator registers a thread for per-thread FMAs, at most " +
                             std::to_string(kFmaLoopAccumulatorRegisters) +
                             " (a thread has 255); use smaller tiles, more warps (num_warps), or " +
                             "operand types that take tensor cores: " + kMmaTypes);
  const int ab = ir::Type::scalar(at.elem).elemBytes(), bb = ir::Type::scalar(bt.elem).elemBytes();
  const int64_t aBytes = alignTo(M * K * ab, 16), bBytes = K * N * bb;
  const int64_t maxShared = maxSharedBytes(options_.target);
  if (aBytes + bBytes > maxShared)
    raiseError(op.loc(), what + " has no tensor-core form on " + targetName(options_.target) +
                             " and its per-thread FMAs read A and B from shared memory: " +
                             std::to_string(aBytes + bBytes) + " bytes, more than the " +
                             std::to_string(maxShared) +
                             " a block may use; use a smaller K or smaller tiles, or operand "
                             "types that take tensor cores: " +
                             kMmaTypes);

  // k-steps an iteration unrolls, a power of two dividing K.
  int64_t steps = 1;
  while (steps * 2 <= std::min<int64_t>(K, 8) && steps * 2 * rows * cols <= kFmaLoopBodyProducts)
    steps *= 2;
  // What a thread reads of one iteration's k-steps: A's elements (its rows, the steps: register
  // j + steps * row) and B's (its columns, the steps: register col + cols * j), the lanes and
  // warps over the rows (columns) as in the accumulator.
  auto slice = [&](bool isA) {
    LinearLayout::Bases bases;
    for (const auto& in : D.inDimNames()) {
      std::vector<std::vector<int32_t>> vs;
      auto project = [&](const std::vector<int32_t>& c) {
        return isA ? std::vector<int32_t>{c[0], 0} : std::vector<int32_t>{0, c[1]};
      };
      auto kStep = [&](int j) {
        return isA ? std::vector<int32_t>{0, 1 << j} : std::vector<int32_t>{1 << j, 0};
      };
      const bool regs = in == layout::kRegister;
      if (regs && isA)
        for (int j = 0; (int64_t(1) << j) < steps; ++j) vs.push_back(kStep(j));
      for (int bit = 0; bit < D.getInDimSizeLog2(in); ++bit)
        if (!regs || ((isA ? rowMask : colMask) >> bit & 1))
          vs.push_back(project(D.getBasis(in, bit)));
      if (regs && !isA)
        for (int j = 0; (int64_t(1) << j) < steps; ++j) vs.push_back(kStep(j));
      bases.emplace_back(in, std::move(vs));
    }
    LinearLayout::NamedSizes outs = {{layout::dimName(0), static_cast<int32_t>(isA ? M : K)},
                                     {layout::dimName(1), static_cast<int32_t>(isA ? K : N)}};
    return LinearLayout(std::move(bases), std::move(outs));
  };
  const LinearLayout aL = slice(true), bL = slice(false);
  // Both staged row-major: a thread reads its rows of A along K in vectors, and a warp's lanes
  // read B's consecutive columns of one k-step (bank-conflict free), or A's row all at once.
  const OffsetFn aOffset = rowMajorOffsets({M, K}), bOffset = rowMajorOffsets({K, N});

  const int64_t base = scratch(aBytes + bBytes);
  const int64_t aBase = base, bBase = base + aBytes;
  // Earlier readers of the scratch region are done (already where no thread touched shared
  // memory since a barrier of all); the region's next writer waits for this dot's reads.
  if (taskBarrierId_ >= 0 || anySharedSinceBarrier_) barrier();
  storeShared(regsOf(op.operand(0)), layoutOf(op.operand(0)), aOffset, aBase, at.elem);
  storeShared(regsOf(op.operand(1)), layoutOf(op.operand(1)), bOffset, bBase, bt.elem);
  barrier();

  // The thread's part of each address is in a pointer that advances `steps` of K each
  // iteration; the register's part, on other bits in a blocked layout, is an immediate. A
  // vector holds one row's k-steps of A, or one k-step's columns of B.
  SharedAccess aAccess = sharedAccess(aL, aOffset, ab, nullptr);
  SharedAccess bAccess = sharedAccess(bL, bOffset, bb, nullptr);
  aAccess.vector = std::min<int32_t>(aAccess.vector, static_cast<int32_t>(steps));
  bAccess.vector = std::min(bAccess.vector, cols);
  auto immediate = [](const LinearLayout& l, const OffsetFn& offsetOf, const SharedAccess& a,
                      int32_t r) {
    int64_t off = offsetOf(registerCoords(l, r)) * a.bytes;
    if (off & a.hwBits)
      throw std::logic_error("codegen: a dot's FMA loop reads shared memory at offsets that mix "
                             "register and thread bits");
    return off;
  };
  std::string aPtr = b_.newReg(RegClass::B32), bPtr = b_.newReg(RegClass::B32);
  b_.inst("add.s32", {aPtr, sharedAddress(aAccess.hw), immInt(aBase)});
  b_.inst("add.s32", {bPtr, sharedAddress(bAccess.hw), immInt(bBase)});
  std::string aEnd = b_.newReg(RegClass::B32);
  b_.inst("add.s32", {aEnd, aPtr, immInt(K * ab)});

  // The accumulator in registers of its own, written once per iteration: a loop's accumulator
  // argument that nothing else reads (`acc = tl.dot(a, b, acc)`) in its own registers, as
  // lowerDotWgmma does, so that the loop around carries them without copies in and out.
  const RegClass accClass = regClassOf(accType);
  const bool inPlace = op.operand(2)->def() == nullptr && accumulatesInPlace(fn_.body, op);
  Regs live(acc.size());
  for (size_t r = 0; r < acc.size(); ++r) {
    if (r & static_cast<size_t>(dup)) continue;
    if (inPlace && isRegisterOf(acc[r], accClass)) {
      live[r] = acc[r];
      continue;
    }
    live[r] = b_.newReg(accClass);
    b_.inst(movOpcode(accClass),
            {live[r], isImmediate(acc[r]) ? acc[r] : b_.materialize(acc[r], accClass)});
  }

  std::string head = b_.newLabel("dot_k");
  b_.pushScope();
  b_.label(head);
  Regs aVals(aL.getInDimSize(layout::kRegister)), bVals(bL.getInDimSize(layout::kRegister));
  auto load = [&](bool isA, int32_t r) {
    const LinearLayout& l = isA ? aL : bL;
    const SharedAccess& a = isA ? aAccess : bAccess;
    int64_t off = immediate(l, isA ? aOffset : bOffset, a, r);
    Regs got = loadSharedVector((isA ? aPtr : bPtr) + "+" + std::to_string(off), a.vector,
                                isA ? at.elem : bt.elem);
    for (int32_t k = 0; k < a.vector; ++k) (isA ? aVals : bVals)[r + k] = got[k];
  };
  // Values in SSA form within the iteration: the pure instructions emitted here (the operand
  // casts, the low-precision FMA's conversions) read the carried registers before their update.
  Regs x = live;
  ir::Op fma(OpCode::Fma, op.loc());
  ScalarContext cx = scalarContext(op);
  auto multiplyAdd = [&](int32_t row, int32_t col, int64_t j) {
    int32_t r = depositBits(row, rowMask) | depositBits(col, colMask);
    std::string av = emitCast(cx, aVals[j + steps * row], at.elem, accType);
    std::string bv = emitCast(cx, bVals[col + cols * j], bt.elem, accType);
    x[r] = emitElementwise(cx, fma, {av, bv, x[r]}, {accType, accType, accType}, accType);
  };
  // The operand with fewer distinct rows (columns) a thread is read whole first; the other one
  // row (vector of columns) at a time, just before the FMAs that take it, so that few of its
  // values are live at once. Each accumulator still sums over k in ascending order.
  if (rows >= cols) {
    for (int32_t r = 0; r < bL.getInDimSize(layout::kRegister); r += bAccess.vector) load(false, r);
    for (int32_t row = 0; row < rows; ++row) {
      for (int32_t j = 0; j < steps; j += aAccess.vector) load(true, j + steps * row);
      for (int64_t j = 0; j < steps; ++j)
        for (int32_t col = 0; col < cols; ++col) multiplyAdd(row, col, j);
    }
  } else {
    for (int32_t r = 0; r < aL.getInDimSize(layout::kRegister); r += aAccess.vector) load(true, r);
    for (int32_t col0 = 0; col0 < cols; col0 += bAccess.vector) {
      for (int64_t j = 0; j < steps; ++j) load(false, col0 + cols * static_cast<int32_t>(j));
      for (int32_t col = col0; col < col0 + bAccess.vector; ++col)
        for (int64_t j = 0; j < steps; ++j)
          for (int32_t row = 0; row < rows; ++row) multiplyAdd(row, col, j);
    }
  }
  for (size_t r = 0; r < live.size(); ++r)
    if (!live[r].empty()) b_.inst(movOpcode(accClass), {live[r], x[r]});
  b_.inst("add.s32", {aPtr, aPtr, immInt(steps * ab)});
  b_.inst("add.s32", {bPtr, bPtr, immInt(steps * N * bb)});
  std::string more = b_.newReg(RegClass::Pred);
  b_.inst("setp.lt.u32", {more, aPtr, aEnd});
  b_.inst("bra.uni", {head}, more);
  b_.popScope();

  for (size_t r = 0; r < live.size(); ++r)
    if (live[r].empty()) live[r] = live[r & ~static_cast<size_t>(dup)];
  bind(op.result(), std::move(live));
}

void FunctionLowering::lowerDotWgmma(const ir::Op& op, const Regs& aIn, const Regs& bIn,
                                     const Regs& accIn) {
  const ir::Type& at = op.operand(0)->type();
  const ir::Type& bt = op.operand(1)->type();
  const ir::Type& rt = op.result()->type();
  int64_t M = at.shape[0], K = at.shape[1], N = bt.shape[1];
  bool sixteen = at.elem != DType::F32; // no tf32 rounding
  int bytes = ir::byteWidth(at.elem);
  int64_t instrK = 32 / bytes; // 32 bytes of K per instruction
  int64_t e = 16 / bytes;      // elements per 16-byte row of a core matrix

  // Warp groups along M as far as 64-row tiles allow, then along N.
  int groups = warps() / 4;
  int groupsM = 1;
  while (groupsM * 2 <= groups && M % (64 * groupsM * 2) == 0) groupsM *= 2;
  int groupsN = groups / groupsM;
  while (groupsN > 1 && N % (8 * groupsN) != 0) groupsN /= 2;
  std::vector<int32_t> warps = {4 * groupsM, groupsN};
  int32_t instrN = layout::wgmmaInstrN(N, groupsN);
  const layout::DotLayouts* dl = layouts_.dot(op);
  LinearLayout accL;
  if (dl && dl->kind == layout::MmaKind::Wgmma && dl->warpsPerCTA.size() == 2 && dl->instrN >= 8 &&
      dl->acc.getTotalInDimSize() > 0) {
    accL = dl->acc;
    warps = dl->warpsPerCTA;
    instrN = dl->instrN;
  } else {
    accL = layout::wgmmaAccumulatorLayout({M, N}, instrN, warps);
  }
  requireFragmentLanes(accL, 1, 2, 0, "wgmma accumulator");
  // An fp16 accumulator of fp16 operands is wgmma's f16 one: instrN / 4 registers of two
  // elements, packed around the dot. An fp8 dot's is widened to fp32 (it sums in fp32 and rounds
  // once at the end).
  bool packedAcc = ir::isHalfAccumulateDot(at, bt, rt);
  bool widenedAcc = rt.elem == DType::F16 && !packedAcc;
  requireLaunchRegisters(op, wgmmaRegisterNeed(instrN / (packedAcc ? 4 : 2), 0),
                         "tl.dot's m64n" + std::to_string(instrN) + " wgmma");

  // Operands staged K-major in core matrices of 8 rows x 16 bytes, no swizzle: element (r, k)
  // of an R x K operand (B is stored transposed, N x K) at
  // ((r / 8) * (K / e) + k / e) * 8e + (r % 8) * e + k % e.
  auto coreMatrixOffset = [K, e](int64_t r, int64_t k) {
    return ((r / 8) * (K / e) + k / e) * (8 * e) + (r % 8) * e + k % e;
  };
  OffsetFn aOffset = [&](const std::vector<int32_t>& c) { return coreMatrixOffset(c[0], c[1]); };
  OffsetFn bOffset = [&](const std::vector<int32_t>& c) { return coreMatrixOffset(c[1], c[0]); };
  int64_t aBytes = M * K * bytes, bBytes = K * N * bytes;
  int64_t base = scratch(aBytes + bBytes);
  int64_t aBase = base, bBase = base + aBytes;
  // tf32 reads fp32 bits and ignores the low mantissa bits: round to nearest first (as
  // cvt.rna.tf32.f32 does on the mma.sync path).
  auto toTf32 = [&](const Regs& regs) {
    if (sixteen) return regs;
    Regs out;
    for (const auto& x : regs) {
      std::string t =
          b_.pure("cvt.rna.tf32.f32", RegClass::B32, {b_.materialize(x, RegClass::F32)});
      out.push_back(b_.pure("mov.b32", RegClass::F32, {t}));
    }
    return out;
  };
  barrier(); // earlier readers of the scratch region are done
  storeShared(toTf32(aIn), operandLayoutOf(op, 0), aOffset, aBase, at.elem);
  storeShared(toTf32(bIn), operandLayoutOf(op, 1), bOffset, bBase, bt.elem);
  // Generic-proxy writes become visible to the async proxy that wgmma reads through.
  b_.inst("fence.proxy.async.shared::cta", {});
  barrier();

  Regs acc = convert(accIn, operandLayoutOf(op, 2), accL, rt.elem, op);
  // The accumulator registers are read and written in place by wgmma: private copies (the
  // packed words of an fp16 accumulator are fresh registers).
  // A loop's accumulator argument that nothing else reads (`acc = tl.dot(a, b, acc)`, or
  // `acc += tl.dot(a, b)` after combine-dot-add) is summed into in place: the loop then carries
  // wgmma's own registers, without a copy in and another back per iteration. (A region
  // argument's registers are its own; an op result's may be shared with another value.)
  bool inPlace =
      rt.elem != DType::F16 && op.operand(2)->def() == nullptr && accumulatesInPlace(fn_.body, op);
  // fp32 registers, or b32 ones for an int32 accumulator (wgmma .s32).
  const RegClass accClass = widenedAcc ? RegClass::F32 : regClassOf(rt.elem);
  Regs live(acc.size());
  for (size_t r = 0; r < acc.size(); ++r) {
    if (packedAcc || (inPlace && isRegisterOf(acc[r], accClass))) {
      live[r] = acc[r];
      continue;
    }
    live[r] = b_.newReg(accClass);
    if (widenedAcc)
      b_.inst("cvt.f32.f16", {live[r], b_.materialize(acc[r], RegClass::B16)});
    else
      b_.inst(accClass == RegClass::F32 ? "mov.f32" : "mov.b32", {live[r], acc[r]});
  }
  // fp8 with max_num_imprecise_acc <= K: k-steps sum into zeroed partial registers, added to
  // the result in fp32 after each `span` elements of K (the limit in whole k-steps; the last span
  // may be shorter), as Triton's wgmma lowering does and as the interpreter and the pipelined
  // loop chunk K (ir/DotTypes.h).
  const int64_t span = ir::fp8PartialAccumulatorSpan(op);

  WgmmaTiles tiles = wgmmaTiles(accL, instrN);
  int32_t dup = accL.freeVariableMask(layout::kRegister);

  // Each warp group's tile origin comes from the warp bits above the group (bits 0-1 pick the
  // warp's 16 rows inside the instruction).
  auto groupImages = [&](bool isA) {
    std::vector<int32_t> images(5 + std::countr_zero(static_cast<uint32_t>(this->warps())), 0);
    for (int bit = 2; bit < accL.getInDimSizeLog2(layout::kWarp); ++bit) {
      if (5 + bit >= static_cast<int>(images.size())) break;
      const auto& basis = accL.getBasis(layout::kWarp, bit);
      int64_t off = isA ? coreMatrixOffset(basis[0], 0) : coreMatrixOffset(basis[1], 0);
      images[5 + bit] = static_cast<int32_t>(off * bytes);
    }
    return images;
  };
  int32_t aBits = 0, bBits = 0;
  std::string aHw = tidLinear(groupImages(true), &aBits);
  std::string bHw = tidLinear(groupImages(false), &bBits);
  // Descriptor: start address >> 4 in bits 0-13, LBO (next core matrix along K: 128 bytes) in
  // 16-29, SBO (next 8 rows: K/e core matrices) in 32-45, no swizzle.
  uint64_t fixedBits = (uint64_t(128 >> 4) << 16) | (uint64_t((K / e * 128) >> 4) << 32);
  auto descriptor = [&](const std::string& hw, int32_t hwBits, int64_t regionBase,
                        int64_t byteOffset) {
    std::string addr = sharedAddress(xorConst(hw, hwBits, static_cast<int32_t>(byteOffset)));
    addr = b_.pure("add.s32", RegClass::B32, {addr, immInt(regionBase)});
    return wgmmaDescriptor(b_, addr, fixedBits);
  };
  std::string opcode = wgmmaOpcode(instrN, at.elem, bt.elem, widenedAcc ? DType::F32 : rt.elem);
  // A and B are K-major: no transpose.
  const std::vector<std::string> immediates = wgmmaImmediates(at.elem, false, false, false);
  std::string accumulate = b_.pure("setp.ne.u32", RegClass::Pred, {"1", "0"});
  auto issue = [&](const std::pair<int64_t, int64_t>& origin, const std::string& list, int64_t k0,
                   const std::string& scaleD) {
    std::string da = descriptor(aHw, aBits, aBase, coreMatrixOffset(origin.first, k0) * bytes);
    std::string db = descriptor(bHw, bBits, bBase, coreMatrixOffset(origin.second, k0) * bytes);
    std::vector<std::string> operands{list, da, db, scaleD};
    operands.insert(operands.end(), immediates.begin(), immediates.end());
    b_.inst(opcode, operands);
  };
  if (span == 0) {
    // Each tile's packed f16x2 words (fp16 into fp16), unpacked once the dot is done.
    std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> words;
    if (packedAcc)
      for (const auto& [origin, regs] : tiles) {
        std::vector<std::string> elems;
        for (int32_t r : regs) elems.push_back(r < 0 ? std::string() : live[r]);
        words[origin] = packHalfAccumulator(b_, elems);
      }
    b_.inst("wgmma.fence.sync.aligned", {});
    for (const auto& [origin, regs] : tiles) {
      std::string list = packedAcc ? registerList(words[origin]) : wgmmaAccumulatorList(regs, live);
      for (int64_t k0 = 0; k0 < K; k0 += instrK) issue(origin, list, k0, accumulate);
    }
    b_.inst("wgmma.commit_group.sync.aligned", {});
    b_.inst("wgmma.wait_group.sync.aligned", {"0"});
    for (const auto& [origin, w] : words) {
      std::vector<std::string> elems = unpackHalfAccumulator(b_, w);
      const auto& regs = tiles.at(origin);
      for (size_t i = 0; i < regs.size(); ++i) live[regs[i]] = elems[i];
    }
  } else {
    std::string fresh = b_.pure("setp.ne.u32", RegClass::Pred, {"0", "0"});
    for (int64_t c0 = 0; c0 < K; c0 += span) {
      const int64_t c1 = std::min(K, c0 + span);
      Regs partial(live.size());
      for (auto& p : partial) p = b_.newReg(RegClass::F32);
      b_.inst("wgmma.fence.sync.aligned", {});
      for (const auto& [origin, regs] : tiles) {
        std::string list = wgmmaAccumulatorList(regs, partial);
        for (int64_t k0 = c0; k0 < c1; k0 += instrK)
          issue(origin, list, k0, k0 == c0 ? fresh : accumulate);
      }
      b_.inst("wgmma.commit_group.sync.aligned", {});
      b_.inst("wgmma.wait_group.sync.aligned", {"0"});
      for (const auto& [origin, regs] : tiles)
        for (int32_t r : regs) b_.inst("add.f32", {live[r], live[r], partial[r]});
    }
  }
  for (int32_t r = 0; r < static_cast<int32_t>(live.size()); ++r)
    if (r & dup) live[r] = live[r & ~dup];
  if (widenedAcc)
    for (auto& x : live) x = b_.pure("cvt.rn.f16.f32", RegClass::B16, {x});
  bind(op.result(), convert(live, accL, layoutOf(op.result()), rt.elem, op));
}

} // namespace ww::codegen
