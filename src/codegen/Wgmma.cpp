// Shared wgmma / mma.sync helpers (see Wgmma.h).
#include "codegen/Wgmma.h"

#include "codegen/Lowering.h"
#include "codegen/PtxBuilder.h"

#include "layout/Layouts.h"

#include <stdexcept>
#include <string>

namespace ww::codegen {

using layout::LinearLayout;

WgmmaTiles wgmmaTiles(const LinearLayout& accL, int32_t instrN) {
  WgmmaTiles tiles;
  int32_t dup = accL.freeVariableMask(layout::kRegister);
  for (int32_t r = 0; r < accL.getInDimSize(layout::kRegister); ++r) {
    if (r & dup) continue;
    auto c = registerCoords(accL, r);
    auto& t = tiles[{c[0] / 64 * 64, c[1] / instrN * instrN}];
    t.resize(instrN / 2, -1);
    int idx = (c[1] % 2) + 2 * ((c[0] % 16) / 8) + 4 * ((c[1] % instrN) / 8);
    t.at(idx) = r;
  }
  return tiles;
}

void requireFragmentLanes(const LinearLayout& l, int tigDim, int32_t tigStep, int groupDim,
                          const char* what) {
  auto expect = [&](int bit, int dim, int32_t value) {
    const auto& basis = l.getBasis(layout::kLane, bit);
    for (int d = 0; d < l.numOutDims(); ++d)
      if (basis[d] != (d == dim ? value : 0))
        throw std::logic_error(std::string("codegen: ") + what +
                               " layout does not match the mma.sync fragment: " + l.str());
  };
  expect(0, tigDim, tigStep);
  expect(1, tigDim, 2 * tigStep);
  expect(2, groupDim, 1);
  expect(3, groupDim, 2);
  expect(4, groupDim, 4);
}

std::string registerList(const std::vector<std::string>& regs) {
  std::string list = "{";
  for (size_t i = 0; i < regs.size(); ++i) list += (i ? ", " : "") + regs[i];
  return list + "}";
}

std::string wgmmaAccumulatorList(const std::vector<int32_t>& regs,
                                 const std::vector<std::string>& live) {
  std::vector<std::string> picked;
  for (int32_t r : regs) {
    if (r < 0) throw std::logic_error("codegen: wgmma tile not covered by registers");
    picked.push_back(live[static_cast<size_t>(r)]);
  }
  return registerList(picked);
}

std::string mmaTypeName(ir::DType t, bool accumulator) {
  switch (t) {
  case ir::DType::F16:
    return "f16";
  case ir::DType::BF16:
    return "bf16";
  case ir::DType::F32:
    return accumulator ? "f32" : "tf32";
  case ir::DType::F8E4M3:
    return "e4m3";
  case ir::DType::F8E5M2:
    return "e5m2";
  case ir::DType::I8:
    return "s8";
  case ir::DType::U8:
    return "u8";
  case ir::DType::I32:
    return "s32";
  default:
    return "";
  }
}

std::string wgmmaOpcode(int32_t instrN, ir::DType a, ir::DType b, ir::DType acc) {
  int64_t instrK = 32 / ir::byteWidth(a); // 32 bytes of K per instruction
  // Integer products saturate at int32's bounds (.satfinite) rather than wrap, as Triton's
  // int8 dots do on NVIDIA GPUs.
  return "wgmma.mma_async.sync.aligned.m64n" + std::to_string(instrN) + "k" +
         std::to_string(instrK) + "." + mmaTypeName(acc, true) + "." + mmaTypeName(a) + "." +
         mmaTypeName(b) + (ir::isInt(acc) ? ".satfinite" : "");
}

std::vector<std::string> wgmmaImmediates(ir::DType t, bool aInRegisters, bool aTrans, bool bTrans) {
  std::vector<std::string> out;
  if (ir::isInt(t)) return out;
  out = {"1", "1"};
  if (wgmmaCanTranspose(t)) {
    if (!aInRegisters) out.push_back(aTrans ? "1" : "0");
    out.push_back(bTrans ? "1" : "0");
  }
  return out;
}

std::string packFragmentWord(PtxBuilder& b, const std::vector<std::string>& elems, size_t first,
                             int perWord) {
  for (int j = 0; j < perWord; ++j)
    if (elems.at(first + j).empty())
      throw std::logic_error("codegen: mma fragment word not covered by registers");
  if (perWord == 2) {
    std::string lo = b.materialize(elems[first], RegClass::B16);
    std::string hi = b.materialize(elems[first + 1], RegClass::B16);
    return b.pure("mov.b32", RegClass::B32, {"{" + lo + ", " + hi + "}"});
  }
  if (perWord != 4)
    throw std::logic_error("codegen: mma fragment words pack 2 or 4 elements, not " +
                           std::to_string(perWord));
  // Four bytes (each the low byte of a 16-bit register), lowest k in the lowest byte.
  std::string x[4];
  for (int j = 0; j < 4; ++j)
    x[j] = b.pure("cvt.u32.u16", RegClass::B32, {b.materialize(elems[first + j], RegClass::B16)});
  // prmt picks bytes of {b, a} (a: 0-3, b: 4-7) by the selector's nibbles.
  std::string lo = b.pure("prmt.b32", RegClass::B32, {x[0], x[1], "64"}); // 0x0040
  std::string hi = b.pure("prmt.b32", RegClass::B32, {x[2], x[3], "64"}); // 0x0040
  return b.pure("prmt.b32", RegClass::B32, {lo, hi, "21520"});            // 0x5410
}

std::vector<std::string> packHalfAccumulator(PtxBuilder& b, const std::vector<std::string>& elems) {
  if (elems.size() % 2 != 0)
    throw std::logic_error("codegen: an fp16 accumulator packs an even number of elements");
  // Fresh registers, not packFragmentWord's shared pure values: wgmma writes its accumulator in
  // place, so two words of equal elements (a zero accumulator) must not be one register.
  std::vector<std::string> words;
  for (size_t i = 0; i < elems.size(); i += 2) {
    if (elems[i].empty() || elems[i + 1].empty())
      throw std::logic_error("codegen: fp16 accumulator word not covered by registers");
    std::string lo = b.materialize(elems[i], RegClass::B16);
    std::string hi = b.materialize(elems[i + 1], RegClass::B16);
    words.push_back(b.newReg(RegClass::B32));
    b.inst("mov.b32", {words.back(), "{" + lo + ", " + hi + "}"});
  }
  return words;
}

std::vector<std::string> unpackHalfAccumulator(PtxBuilder& b,
                                               const std::vector<std::string>& words) {
  std::vector<std::string> elems;
  for (const auto& w : words) {
    std::string lo = b.newReg(RegClass::B16), hi = b.newReg(RegClass::B16);
    b.inst("mov.b32", {"{" + lo + ", " + hi + "}", w});
    elems.push_back(lo);
    elems.push_back(hi);
  }
  return elems;
}

bool pairsHalfAccumulatorRegisters(const LinearLayout& accL) {
  if (accL.getInDimSizeLog2(layout::kRegister) < 1 || accL.numOutDims() != 2) return false;
  const auto& step = accL.getBasis(layout::kRegister, 0);
  return step[0] == 0 && step[1] == 1;
}

bool wgmmaCanTranspose(ir::DType t) {
  return t == ir::DType::F16 || t == ir::DType::BF16;
}

uint64_t wgmmaLayoutBits(bool kMajor, int swizzleBytes, int64_t kRows) {
  // K-major: an instruction's K (32 bytes) lies inside one swizzle row, so the leading offset
  // is unused (1). MN-major: the leading offset steps to the next column block along M / N.
  uint64_t leading = kMajor ? 1 : uint64_t(kRows * swizzleBytes) >> 4;
  uint64_t stride = uint64_t(8 * swizzleBytes) >> 4;
  return (leading << 16) | (stride << 32) | swizzleModeBits(swizzleBytes);
}

uint64_t swizzleModeBits(int bytes) {
  uint64_t mode = bytes == 128 ? 1 : bytes == 64 ? 2 : 3;
  return mode << 62;
}

std::string wgmmaDescriptor(PtxBuilder& b, const std::string& address, uint64_t fixedBits) {
  std::string field = b.pure("shr.u32", RegClass::B32, {address, "4"});
  field = b.pure("and.b32", RegClass::B32, {field, "16383"});
  std::string wide = b.pure("cvt.u64.u32", RegClass::B64, {field});
  return b.pure("or.b64", RegClass::B64, {wide, immInt(static_cast<int64_t>(fixedBits))});
}

bool isWgmmaDescriptorStep(int64_t byteOffset) {
  return byteOffset >= 0 && byteOffset % 16 == 0;
}

std::string wgmmaDescriptorStep(PtxBuilder& b, const std::string& base, int64_t byteOffset) {
  if (!isWgmmaDescriptorStep(byteOffset))
    throw std::logic_error("codegen: wgmma descriptor step of " + std::to_string(byteOffset) +
                           " bytes is not a non-negative multiple of 16");
  if (byteOffset == 0) return base;
  return b.pure("add.s64", RegClass::B64, {base, immInt(byteOffset >> 4)});
}

} // namespace ww::codegen
