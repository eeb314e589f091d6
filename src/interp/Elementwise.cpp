#include "interp/Elementwise.h"
#include "interp/ElemTraits.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace ww::interp {
using namespace detail;
namespace num = ir::numerics;

using ir::DType;
using ir::OpCode;

namespace {

template <typename E, typename F>
TensorPtr map2(const Tensor& a, const Tensor& b, const ir::Type& rt, F f) {
  auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
  int64_t n = r->numel();
  int64_t ma = broadcastMask(a, n), mb = broadcastMask(b, n);
  const auto* pa = a.data<typename E::S>();
  const auto* pb = b.data<typename E::S>();
  auto* pr = r->template data<typename E::S>();
  for (int64_t i = 0; i < n; ++i) pr[i] = E::store(f(E::load(pa[i & ma]), E::load(pb[i & mb])));
  return r;
}

template <typename E, typename F> TensorPtr map1(const Tensor& a, const ir::Type& rt, F f) {
  auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
  int64_t n = r->numel();
  int64_t ma = broadcastMask(a, n);
  const auto* pa = a.data<typename E::S>();
  auto* pr = r->template data<typename E::S>();
  for (int64_t i = 0; i < n; ++i) pr[i] = E::store(f(E::load(pa[i & ma])));
  return r;
}

template <typename E>
TensorPtr binaryFloat(OpCode op, const Tensor& a, const Tensor& b, const ir::Type& rt, bool nan) {
  using C = typename E::C;
  switch (op) {
  case OpCode::Add:
    return map2<E>(a, b, rt, [](C x, C y) { return x + y; });
  case OpCode::Sub:
    return map2<E>(a, b, rt, [](C x, C y) { return x - y; });
  case OpCode::Mul:
    return map2<E>(a, b, rt, [](C x, C y) { return x * y; });
  case OpCode::Div:
    return map2<E>(a, b, rt, [](C x, C y) { return x / y; });
  case OpCode::Rem:
    return map2<E>(a, b, rt, [](C x, C y) { return C(std::fmod(x, y)); });
  case OpCode::FloorDiv:
    return map2<E>(a, b, rt, [](C x, C y) { return C(std::floor(x / y)); });
  case OpCode::Max:
    return map2<E>(a, b, rt, [nan](C x, C y) { return floatMax(x, y, nan); });
  case OpCode::Min:
    return map2<E>(a, b, rt, [nan](C x, C y) { return floatMin(x, y, nan); });
  case OpCode::Pow:
    return map2<E>(a, b, rt, [](C x, C y) { return C(std::pow(x, y)); });
  default:
    throw std::logic_error(std::string("op '") + ir::opName(op) + "' does not apply to floats");
  }
}

template <typename E>
TensorPtr binaryInt(OpCode op, const Tensor& a, const Tensor& b, const ir::Type& rt) {
  using C = typename E::C;
  using U = uint64_t;
  constexpr int W = E::bits;
  switch (op) {
  // Wrapping arithmetic: compute in uint64 (defined overflow), truncate on store.
  case OpCode::Add:
    return map2<E>(a, b, rt, [](C x, C y) { return C(U(x) + U(y)); });
  case OpCode::Sub:
    return map2<E>(a, b, rt, [](C x, C y) { return C(U(x) - U(y)); });
  case OpCode::Mul:
    return map2<E>(a, b, rt, [](C x, C y) { return C(U(x) * U(y)); });
  // Division, shifts, min / max, pow, umulhi: the shared contract (ir/ScalarNumerics.h).
  case OpCode::Div:
    return map2<E>(a, b, rt, [](C x, C y) { return num::intDiv(x, y); });
  case OpCode::Rem:
    return map2<E>(a, b, rt, [](C x, C y) { return num::intRem(x, y); });
  case OpCode::FloorDiv:
    return map2<E>(a, b, rt, [](C x, C y) { return num::intFloorDiv(x, y); });
  case OpCode::And:
    return map2<E>(a, b, rt, [](C x, C y) { return C(x & y); });
  case OpCode::Or:
    return map2<E>(a, b, rt, [](C x, C y) { return C(x | y); });
  case OpCode::Xor:
    return map2<E>(a, b, rt, [](C x, C y) { return C(x ^ y); });
  case OpCode::Shl:
    return map2<E>(a, b, rt, [](C x, C y) { return num::shiftLeft(x, y, W); });
  case OpCode::Shr:
    return map2<E>(a, b, rt, [](C x, C y) { return num::shiftRight(x, y, W); });
  case OpCode::Max:
    return map2<E>(a, b, rt, [](C x, C y) { return num::intMax(x, y); });
  case OpCode::Min:
    return map2<E>(a, b, rt, [](C x, C y) { return num::intMin(x, y); });
  case OpCode::Pow:
    return map2<E>(a, b, rt, [](C x, C y) { return num::intPow(x, y); });
  case OpCode::Umulhi:
    return map2<E>(a, b, rt, [](C x, C y) { return num::umulhi(x, y, W); });
  default:
    throw std::logic_error(std::string("op '") + ir::opName(op) + "' does not apply to integers");
  }
}

} // namespace

TensorPtr evalBinary(OpCode op, const Tensor& a, const Tensor& b, const ir::Type& rt,
                     bool propagateNan) {
  return dispatch(computeType(a), [&](auto e) -> TensorPtr {
    using E = decltype(e);
    if constexpr (E::isFloat)
      return binaryFloat<E>(op, a, b, rt, propagateNan);
    else
      return binaryInt<E>(op, a, b, rt);
  });
}

TensorPtr evalUnary(OpCode op, const Tensor& a, const ir::Type& rt) {
  return dispatch(computeType(a), [&](auto e) -> TensorPtr {
    using E = decltype(e);
    using C = typename E::C;
    if constexpr (E::isFloat) {
      switch (op) {
      case OpCode::Neg:
        return map1<E>(a, rt, [](C x) { return -x; });
      case OpCode::Abs:
        return map1<E>(a, rt, [](C x) { return std::fabs(x); });
      case OpCode::Exp:
        return map1<E>(a, rt, [](C x) { return std::exp(x); });
      case OpCode::Exp2:
        return map1<E>(a, rt, [](C x) { return std::exp2(x); });
      case OpCode::Log:
        return map1<E>(a, rt, [](C x) { return std::log(x); });
      case OpCode::Log2:
        return map1<E>(a, rt, [](C x) { return std::log2(x); });
      case OpCode::Sqrt:
        return map1<E>(a, rt, [](C x) { return std::sqrt(x); });
      case OpCode::Rsqrt:
        return map1<E>(a, rt, [](C x) { return C(1) / std::sqrt(x); });
      case OpCode::Sin:
        return map1<E>(a, rt, [](C x) { return std::sin(x); });
      case OpCode::Cos:
        return map1<E>(a, rt, [](C x) { return std::cos(x); });
      case OpCode::Tanh:
        return map1<E>(a, rt, [](C x) { return std::tanh(x); });
      case OpCode::Erf:
        return map1<E>(a, rt, [](C x) { return std::erf(x); });
      case OpCode::Floor:
        return map1<E>(a, rt, [](C x) { return std::floor(x); });
      case OpCode::Ceil:
        return map1<E>(a, rt, [](C x) { return std::ceil(x); });
      case OpCode::Sigmoid:
        return map1<E>(a, rt, [](C x) { return C(1) / (C(1) + std::exp(-x)); });
      default:
        break;
      }
    } else {
      using U = uint64_t;
      switch (op) {
      case OpCode::Neg:
        return map1<E>(a, rt, [](C x) { return C(U(0) - U(x)); });
      case OpCode::Not:
        return map1<E>(a, rt, [](C x) { return C(~x); });
      case OpCode::Abs:
        return map1<E>(a, rt, [](C x) -> C {
          if constexpr (E::isUnsigned)
            return x;
          else
            return x < 0 ? C(U(0) - U(x)) : x;
        });
      default:
        break;
      }
    }
    throw std::logic_error(std::string("op '") + ir::opName(op) + "' does not apply to " +
                           std::string(ir::sigName(a.elem)));
  });
}

TensorPtr evalFma(const Tensor& a, const Tensor& b, const Tensor& c, const ir::Type& rt) {
  return dispatch(computeType(a), [&](auto e) -> TensorPtr {
    using E = decltype(e);
    using C = typename E::C;
    auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
    int64_t n = r->numel();
    int64_t ma = broadcastMask(a, n), mb = broadcastMask(b, n), mc = broadcastMask(c, n);
    const auto* pa = a.data<typename E::S>();
    const auto* pb = b.data<typename E::S>();
    const auto* pc = c.data<typename E::S>();
    auto* pr = r->template data<typename E::S>();
    for (int64_t i = 0; i < n; ++i) {
      C x = E::load(pa[i & ma]), y = E::load(pb[i & mb]), z = E::load(pc[i & mc]);
      if constexpr (E::isFloat)
        pr[i] = E::store(std::fma(x, y, z));
      else
        pr[i] = E::store(C(uint64_t(x) * uint64_t(y) + uint64_t(z)));
    }
    return r;
  });
}

TensorPtr evalCmp(const std::string& pred, const Tensor& a, const Tensor& b, const ir::Type& rt) {
  std::optional<num::CmpPred> p = num::parseCmpPred(pred);
  if (!p) throw std::logic_error("cmp: unknown predicate '" + pred + "'");
  return dispatch(computeType(a), [&](auto e) -> TensorPtr {
    using E = decltype(e);
    auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
    int64_t n = r->numel();
    int64_t ma = broadcastMask(a, n), mb = broadcastMask(b, n);
    const auto* pa = a.data<typename E::S>();
    const auto* pb = b.data<typename E::S>();
    auto* pr = r->template data<uint8_t>();
    auto loop = [&](auto pc) {
      for (int64_t i = 0; i < n; ++i)
        pr[i] = num::compare(decltype(pc)::value, E::load(pa[i & ma]), E::load(pb[i & mb]));
    };
    // One loop per predicate, so that the comparison is not chosen per element.
    switch (*p) {
    case num::CmpPred::EQ:
      loop(std::integral_constant<num::CmpPred, num::CmpPred::EQ>{});
      break;
    case num::CmpPred::NE:
      loop(std::integral_constant<num::CmpPred, num::CmpPred::NE>{});
      break;
    case num::CmpPred::LT:
      loop(std::integral_constant<num::CmpPred, num::CmpPred::LT>{});
      break;
    case num::CmpPred::LE:
      loop(std::integral_constant<num::CmpPred, num::CmpPred::LE>{});
      break;
    case num::CmpPred::GT:
      loop(std::integral_constant<num::CmpPred, num::CmpPred::GT>{});
      break;
    case num::CmpPred::GE:
      loop(std::integral_constant<num::CmpPred, num::CmpPred::GE>{});
      break;
    }
    return r;
  });
}

namespace {
template <typename S>
void selectLoop(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& r) {
  int64_t n = r.numel();
  int64_t mc = broadcastMask(cond, n), ma = broadcastMask(a, n), mb = broadcastMask(b, n);
  const uint8_t* pc = cond.data<uint8_t>();
  const S* pa = a.data<S>();
  const S* pb = b.data<S>();
  S* pr = r.data<S>();
  for (int64_t i = 0; i < n; ++i) pr[i] = pc[i & mc] ? pa[i & ma] : pb[i & mb];
}
} // namespace

TensorPtr evalSelect(const Tensor& cond, const Tensor& a, const Tensor& b, const ir::Type& rt) {
  auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
  switch (r->elemBytes()) {
  case 1:
    selectLoop<uint8_t>(cond, a, b, *r);
    break;
  case 2:
    selectLoop<uint16_t>(cond, a, b, *r);
    break;
  case 4:
    selectLoop<uint32_t>(cond, a, b, *r);
    break;
  case 8:
    selectLoop<uint64_t>(cond, a, b, *r);
    break;
  default:
    throw std::logic_error("select: unsupported element width");
  }
  return r;
}

std::vector<int64_t> widenToInts(const Tensor& t) {
  return dispatch(computeType(t), [&](auto e) {
    using E = decltype(e);
    std::vector<int64_t> out(size_t(t.numel()));
    const auto* p = t.data<typename E::S>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (E::isFloat)
        out[i] = static_cast<int64_t>(E::load(p[i]));
      else
        out[i] = static_cast<int64_t>(E::load(p[i]));
    }
    return out;
  });
}

std::vector<double> widenToDoubles(const Tensor& t) {
  return dispatch(computeType(t), [&](auto e) {
    using E = decltype(e);
    std::vector<double> out(size_t(t.numel()));
    const auto* p = t.data<typename E::S>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(E::load(p[i]));
    return out;
  });
}

TensorPtr evalCast(const Tensor& x, const ir::Type& rt, Rounding rounding) {
  auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
  const int64_t n = r->numel();
  const int64_t mx = broadcastMask(x, n);
  DType src = computeType(x), dst = computeType(*r);
  bool srcFloat = ir::isFloat(src);
  std::vector<int64_t> ints;
  std::vector<double> reals;
  if (srcFloat)
    reals = widenToDoubles(x);
  else
    ints = widenToInts(x);
  dispatch(dst, [&](auto e) {
    using E = decltype(e);
    using S = typename E::S;
    S* pr = r->template data<S>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t j = i & mx;
      if constexpr (E::isFloat) {
        // The conversions of the shared contract, which round as the codegen's cvt chain does.
        if (srcFloat) {
          if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>)
            pr[i] = S(num::castFloatToFloat(reals[j], src, dst, rounding));
          else
            pr[i] = S(num::castFloatToSmallFloat(reals[j], src, dst, rounding));
        } else {
          pr[i] = E::store(typename E::C(num::castIntToFloat(ints[j], src, dst, rounding)));
        }
      } else if (dst == DType::I1) {
        pr[i] = srcFloat ? S(reals[j] != 0) : S(ints[j] != 0);
      } else if (srcFloat) {
        if constexpr (E::isUnsigned)
          pr[i] = S(floatToUintSaturating(reals[j], dst));
        else
          pr[i] = S(floatToIntSaturating(reals[j], dst));
      } else {
        pr[i] = S(ints[j]); // modular truncation; widening was done by the source's signedness
      }
    }
  });
  return r;
}

TensorPtr evalStochRound(const Tensor& x, const Tensor& rbits, const ir::Type& rt) {
  if (x.elem != DType::F32 || x.pointer || ir::byteWidth(rbits.elem) != 4 || !ir::isInt(rbits.elem))
    throw std::logic_error("stoch_round: operands are not fp32 values and 32-bit random bits");
  auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
  const int64_t n = r->numel();
  const int64_t mx = broadcastMask(x, n), mr = broadcastMask(rbits, n);
  const float* px = x.data<float>();
  const uint32_t* pr = rbits.data<uint32_t>();
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = num::encodeStochasticRound(rt.elem, px[i & mx], pr[i & mr]);
    if (ir::byteWidth(rt.elem) == 1)
      r->data<uint8_t>()[i] = static_cast<uint8_t>(bits);
    else
      r->data<uint16_t>()[i] = static_cast<uint16_t>(bits);
  }
  return r;
}

TensorPtr evalBitcast(const Tensor& x, const ir::Type& rt) {
  auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
  if (r->bytes.size() != x.bytes.size())
    throw std::logic_error("bitcast between types of different widths");
  r->bytes = x.bytes;
  return r;
}

TensorPtr evalAddPtr(const Tensor& ptr, const Tensor& offset, const ir::Type& rt) {
  auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
  int64_t n = r->numel();
  int64_t mp = broadcastMask(ptr, n), mo = broadcastMask(offset, n);
  std::vector<int64_t> off = widenToInts(offset);
  const uint64_t* pp = ptr.data<uint64_t>();
  uint64_t* pr = r->data<uint64_t>();
  uint64_t scale = uint64_t(ir::byteWidth(rt.elem));
  for (int64_t i = 0; i < n; ++i) pr[i] = pp[i & mp] + uint64_t(off[size_t(i & mo)]) * scale;
  return r;
}

TensorPtr makeConstant(const ir::Type& type, const ir::Attr& value) {
  Tensor scalar;
  if (auto* i = std::get_if<int64_t>(&value)) {
    scalar = Tensor(DType::I64, false, {});
    *scalar.data<int64_t>() = *i;
  } else if (auto* d = std::get_if<double>(&value)) {
    scalar = Tensor(DType::F64, false, {});
    *scalar.data<double>() = *d;
  } else {
    throw std::logic_error("constant: the value attribute is neither int nor float");
  }
  return splatScalar(scalar, type);
}

TensorPtr splatScalar(const Tensor& scalar, const ir::Type& type) {
  if (scalar.elem == type.elem && scalar.pointer == type.pointer) {
    auto r = std::make_shared<Tensor>(Tensor::ofType(type));
    size_t w = size_t(r->elemBytes());
    for (int64_t i = 0; i < r->numel(); ++i)
      std::memcpy(r->bytes.data() + size_t(i) * w, scalar.bytes.data(), w);
    return r;
  }
  return evalCast(scalar, type, Rounding::NearestEven);
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

std::string formatIndex(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::ostringstream os;
  os << '[';
  for (size_t d = 0; d < idx.size(); ++d) os << (d ? ", " : "") << idx[d];
  os << ']';
  return os.str();
}

Scalar readScalar(const Tensor& t, int64_t index) {
  return dispatch(computeType(t), [&](auto e) {
    using E = decltype(e);
    Scalar s;
    auto v = E::load(t.data<typename E::S>()[index]);
    if constexpr (E::isFloat) {
      s.isFloat = true;
      s.f = double(v);
    } else {
      s.i = int64_t(v);
    }
    return s;
  });
}

void writeScalar(Tensor& t, int64_t index, const Scalar& v) {
  DType dst = computeType(t);
  dispatch(dst, [&](auto e) {
    using E = decltype(e);
    using S = typename E::S;
    S& out = t.data<S>()[index];
    if constexpr (E::isFloat) {
      out = E::store(typename E::C(v.isFloat ? v.f : double(v.i)));
    } else if (dst == DType::I1) {
      out = S(v.isFloat ? v.f != 0 : v.i != 0);
    } else if (v.isFloat) {
      if constexpr (E::isUnsigned)
        out = S(floatToUintSaturating(v.f, dst));
      else
        out = S(floatToIntSaturating(v.f, dst));
    } else {
      out = S(v.i);
    }
  });
}

} // namespace ww::interp
