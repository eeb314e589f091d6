// Whole-tensor kernels of the interpreter for elementwise ops, comparisons, casts and constants:
// one typed loop per (op, element type), scalar operands broadcast.
#pragma once

#include "interp/RtValue.h"
#include "ir/IR.h"

namespace ww::interp {

/// add sub mul div rem floordiv and or xor shl shr max min pow umulhi on a's element type.
/// `propagateNan` selects NaN-propagating max/min (tl.maximum(propagate_nan=ALL)).
TensorPtr evalBinary(ir::OpCode op, const Tensor& a, const Tensor& b, const ir::Type& result,
                     bool propagateNan);
/// neg not abs and the float math functions (exp ... sigmoid).
TensorPtr evalUnary(ir::OpCode op, const Tensor& a, const ir::Type& result);
TensorPtr evalFma(const Tensor& a, const Tensor& b, const Tensor& c, const ir::Type& result);
/// pred: eq ne lt le gt ge; floats compare ordered (NaN only satisfies ne).
TensorPtr evalCmp(const std::string& pred, const Tensor& a, const Tensor& b,
                  const ir::Type& result);
TensorPtr evalSelect(const Tensor& cond, const Tensor& a, const Tensor& b, const ir::Type& result);
TensorPtr evalCast(const Tensor& x, const ir::Type& result, Rounding rounding);
/// tlx.stoch_round: fp32 `x` to `result`'s fp16 / bf16 / fp8 element type, each element rounded
/// with the low bits of its `rbits` element (32-bit integers), as ir::numerics::
/// encodeStochasticRound defines.
TensorPtr evalStochRound(const Tensor& x, const Tensor& rbits, const ir::Type& result);
TensorPtr evalBitcast(const Tensor& x, const ir::Type& result);
/// ptr + offset * sizeof(pointee), wrapping as 64-bit address arithmetic.
TensorPtr evalAddPtr(const Tensor& ptr, const Tensor& offset, const ir::Type& result);
/// A scalar or splatted tensor of `type` holding `value` (int64_t or double attribute).
TensorPtr makeConstant(const ir::Type& type, const ir::Attr& value);
/// A tensor of `type` with every element equal to element 0 of `scalar`, converted.
TensorPtr splatScalar(const Tensor& scalar, const ir::Type& type);

/// The elements widened to int64 (sign- or zero-extended by type; pointers as addresses).
std::vector<int64_t> widenToInts(const Tensor& t);
/// The elements as exact doubles (floats) or converted integers.
std::vector<double> widenToDoubles(const Tensor& t);

} // namespace ww::interp
