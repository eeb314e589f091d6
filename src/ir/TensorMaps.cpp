// The tensor-map rules of in-kernel descriptors (see TensorMaps.h).
#include "ir/TensorMaps.h"

#include "ir/OpAttrs.h"

#include <optional>

namespace ww::ir {

int tensorMapElemType(DType t) {
  switch (t) {
  case DType::F16:
    return 6;
  case DType::BF16:
    return 10;
  case DType::F32:
    return 7;
  case DType::F64:
    return 9;
  case DType::I32:
    return 3;
  case DType::U32:
    return 2;
  case DType::I64:
    return 5;
  case DType::U64:
    return 4;
  case DType::I16:
  case DType::U16:
    return 1;
  case DType::I8:
  case DType::U8:
  case DType::F8E4M3:
  case DType::F8E5M2:
  case DType::F8E4B15:
  case DType::F8E4B8:
  case DType::F8E5B16:
    return 0;
  default:
    return -1;
  }
}

namespace {

/// The constant integer `v` holds, looking through integer casts (the descriptor's strides are
/// cast to i64 where they are made, before any folding).
std::optional<int64_t> constantThroughCasts(const Value* v) {
  while (v->def() && v->def()->code() == OpCode::Cast && isInt(v->type().elem) &&
         isInt(v->def()->operand(0)->type().elem))
    v = v->def()->operand(0);
  return constantInt(v);
}

} // namespace

std::string tensorMapProblem(const Op& make) {
  const Type& dt = make.result()->type();
  const size_t rank = dt.shape.size();
  if (rank < 1 || rank > 5) return "a tensor descriptor used by TMA has rank 1 to 5";
  if (make.numOperands() < 1 + 2 * rank) return "a malformed make_desc";
  if (tensorMapElemType(dt.elem) < 0)
    return "a tensor descriptor of " + dt.str() + " cannot be used by TMA";
  if (constantThroughCasts(make.operand(2 * rank)) != 1)
    return "a tensor descriptor used by TMA copies needs the innermost stride to be the constant "
           "1 (tl.constexpr(1) or the literal 1)";
  const int64_t elemBytes = byteWidth(dt.elem);
  if (dt.shape.back() * elemBytes < 16 || dt.shape.back() * elemBytes % 16)
    return "a tensor descriptor used by TMA copies needs at least 16 bytes in the last block "
           "dimension, got " +
           std::to_string(dt.shape.back()) + " x " + std::to_string(elemBytes);
  for (size_t d = 0; d < rank; ++d)
    if (dt.shape[d] > 256 && dt.shape[d] % 256)
      return "block dimension " + std::to_string(d) + " of " + std::to_string(dt.shape[d]) +
             " elements is not a multiple of the 256-element TMA box";
  return {};
}

} // namespace ww::ir
