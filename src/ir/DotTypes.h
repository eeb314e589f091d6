// How a tl.dot's operand types map onto the tensor cores, with Triton's rules: the layout pass,
// the software pipeliner and the codegen read it here so that they agree on which instruction a
// dot becomes.
//
// 8-bit operands (fp8 e4m3 / e5m2, int8 / uint8) take k32 instructions (wgmma m64nNk32,
// mma.sync m16n8k32 for int8), and wgmma reads them from shared memory K-major only. int8
// operands accumulate into int32 (s32 wgmma / mma.sync), fp8 ones into fp32 (or fp16 on wgmma).
// fp16 operands accumulate into fp32 or fp16 (the f16 forms of wgmma and mma.sync); bf16 ones
// into fp32 only, as Triton's rules have it (the specializer refuses the rest).
//
// fp8 (fp8e4nv = e4m3, fp8e5 = e5m2): on sm_90a a wgmma (.e4m3 / .e5m2, mixed allowed) unless
// its max_num_imprecise_acc is below 32 with an fp32 result (Triton then upcasts to fp16 and uses
// mma.sync). Hopper's fp8 wgmma accumulates with reduced precision: with max_num_imprecise_acc
// <= K, every max_num_imprecise_acc elements of K are summed into a separate zeroed partial
// accumulator that is then added to the fp32 result (Triton's needsPartialAccumulator). Without
// the attribute the limit is Triton's sm_90 default, 2**30 (no partial accumulator).
#pragma once

#include "ir/IR.h"
#include "ir/OpAttrs.h"

#include <cstdint>
#include <optional>

namespace ww::ir {

/// The fp8 types tensor cores multiply (e4m3, e5m2); ir::isFp8 also counts e4b15 / e4b8 /
/// e5b16.
inline bool isMmaFp8(DType t) {
  return t == DType::F8E4M3 || t == DType::F8E5M2;
}

/// A dot (or async_dot) whose two operands are fp8 that tensor cores multiply.
inline bool isFp8Dot(const Type& a, const Type& b) {
  return isMmaFp8(a.elem) && isMmaFp8(b.elem);
}

/// The integer types tensor cores multiply: int8 (.s8) and uint8 (.u8).
inline bool isMmaInt8(DType t) {
  return t == DType::I8 || t == DType::U8;
}

/// A dot (or async_dot) of int8 / uint8 operands into int32: wgmma .s32 and mma.sync m16n8k32
/// .s32 take either signedness for each operand (the specializer, like Triton, asks for one
/// dtype).
inline bool isInt8Dot(const Type& a, const Type& b, const Type& result) {
  return isMmaInt8(a.elem) && isMmaInt8(b.elem) && result.elem == DType::I32;
}

/// A dot (or async_dot) of fp16 operands into an fp16 accumulator: wgmma m64nNk16.f16 and
/// mma.sync m16n8k16 .f16, whose accumulator registers hold two fp16 elements each.
inline bool isHalfAccumulateDot(const Type& a, const Type& b, const Type& result) {
  return a.elem == DType::F16 && b.elem == DType::F16 && result.elem == DType::F16;
}

/// Operand types of 8 bits that tensor cores read (fp8 e4m3 / e5m2, int8 / uint8): k32
/// instructions, and K-major only when wgmma reads them from shared memory.
inline bool isMmaEightBit(DType t) {
  return isMmaFp8(t) || isMmaInt8(t);
}

/// The dot's max_num_imprecise_acc; nullopt when absent (no limit).
inline std::optional<int64_t> maxNumImpreciseAcc(const Op& dot) {
  if (dot.code() != OpCode::Dot || !dot.hasAttr(attr::Dot::kmaxNumImpreciseAcc))
    return std::nullopt;
  return attr::Dot::maxNumImpreciseAcc(dot);
}

/// Whether an fp8 dot into fp32 must not use wgmma (max_num_imprecise_acc < 32): Triton's MMAv2
/// fallback, fp16 operands on mma.sync.
inline bool fp8DotAvoidsWgmma(const Op& dot) {
  const Type& a = dot.operand(0)->type();
  const Type& b = dot.operand(1)->type();
  std::optional<int64_t> limit = maxNumImpreciseAcc(dot);
  return isFp8Dot(a, b) && dot.result()->type().elem == DType::F32 && limit && *limit < 32;
}

/// The K elements after which an fp8 wgmma dot adds its partial accumulator into the fp32
/// result; 0 when it accumulates in place (no limit, or the limit exceeds K).
inline int64_t fp8PartialAccumulatorChunk(const Op& dot) {
  const Type& a = dot.operand(0)->type();
  if (!isFp8Dot(a, dot.operand(1)->type()) || dot.result()->type().elem != DType::F32) return 0;
  std::optional<int64_t> limit = maxNumImpreciseAcc(dot);
  if (!limit || *limit > a.shape.back()) return 0;
  return *limit;
}

/// The K elements each partial accumulator of such a dot sums: the limit rounded up to whole
/// k32 wgmma steps, at most K, as the codegen and the interpreter chunk K; 0 without partial
/// accumulators.
inline int64_t fp8PartialAccumulatorSpan(const Op& dot) {
  int64_t limit = fp8PartialAccumulatorChunk(dot);
  if (limit == 0) return 0;
  int64_t rounded = (limit + 31) / 32 * 32;
  int64_t K = dot.operand(0)->type().shape.back();
  return rounded < K ? rounded : K;
}

} // namespace ww::ir
