// Element traits of the interpreter's typed loops: how each DType is stored (S) and computed (C).
// Small floats compute in double and round once on the way back, which matches one rounding of
// the native fp16/bf16/fp8 operation. Private to src/interp.
#pragma once

#include "interp/RtValue.h"

#include <cmath>
#include <stdexcept>
#include <type_traits>

namespace ww::interp::detail {

using ir::DType;

template <typename Storage, typename Compute, int Bits> struct IntElem {
  using S = Storage;
  using C = Compute;
  static constexpr bool isFloat = false;
  static constexpr bool isUnsigned = std::is_unsigned_v<Compute>;
  static constexpr int bits = Bits;
  static C load(S s) { return C(s); }
  static S store(C c) { return S(c); }
};
struct BoolElem : IntElem<uint8_t, int64_t, 1> {
  static S store(C c) { return S(c & 1); }
};
struct F32Elem {
  using S = float;
  using C = float;
  static constexpr bool isFloat = true;
  static C load(S s) { return s; }
  static S store(C c) { return c; }
};
struct F64Elem {
  using S = double;
  using C = double;
  static constexpr bool isFloat = true;
  static C load(S s) { return s; }
  static S store(C c) { return c; }
};
template <DType D, typename Storage> struct SmallFloatElem {
  using S = Storage;
  using C = double;
  static constexpr bool isFloat = true;
  static C load(S s) { return decodeSmallFloat(D, s); }
  static S store(C c) { return S(encodeSmallFloat(D, c)); }
};
struct BF16Elem : SmallFloatElem<DType::BF16, uint16_t> {
  static C load(S s) { return bf16ToFloat(s); }
};

/// Calls f(Traits{}) for the traits of `t`.
template <typename F> decltype(auto) dispatch(DType t, F&& f) {
  switch (t) {
  case DType::I1:
    return f(BoolElem{});
  case DType::I8:
    return f(IntElem<int8_t, int64_t, 8>{});
  case DType::I16:
    return f(IntElem<int16_t, int64_t, 16>{});
  case DType::I32:
    return f(IntElem<int32_t, int64_t, 32>{});
  case DType::I64:
    return f(IntElem<int64_t, int64_t, 64>{});
  case DType::U8:
    return f(IntElem<uint8_t, uint64_t, 8>{});
  case DType::U16:
    return f(IntElem<uint16_t, uint64_t, 16>{});
  case DType::U32:
    return f(IntElem<uint32_t, uint64_t, 32>{});
  case DType::U64:
    return f(IntElem<uint64_t, uint64_t, 64>{});
  case DType::F8E4M3:
    return f(SmallFloatElem<DType::F8E4M3, uint8_t>{});
  case DType::F8E5M2:
    return f(SmallFloatElem<DType::F8E5M2, uint8_t>{});
  case DType::F16:
    return f(SmallFloatElem<DType::F16, uint16_t>{});
  case DType::BF16:
    return f(BF16Elem{});
  case DType::F32:
    return f(F32Elem{});
  case DType::F64:
    return f(F64Elem{});
  case DType::F8E4B15:
    return f(SmallFloatElem<DType::F8E4B15, uint8_t>{});
  case DType::F8E4B8:
    return f(SmallFloatElem<DType::F8E4B8, uint8_t>{});
  case DType::F8E5B16:
    return f(SmallFloatElem<DType::F8E5B16, uint8_t>{});
  }
  throw std::logic_error("unknown dtype");
}

/// The element type to compute with: pointers are unsigned 64-bit addresses.
inline DType computeType(const Tensor& t) {
  return t.pointer ? DType::U64 : t.elem;
}

/// Index mask that makes a one-element operand broadcast: i & 0 == 0.
inline int64_t broadcastMask(const Tensor& operand, int64_t n) {
  if (operand.numel() == n) return ~int64_t(0);
  if (operand.numel() == 1) return 0;
  throw std::logic_error("elementwise operand shape does not match the result");
}

// Op arithmetic is the shared contract of ir/ScalarNumerics.h (constant folding uses it too).
using ir::numerics::floatMax;
using ir::numerics::floatMin;

} // namespace ww::interp::detail
