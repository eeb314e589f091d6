// Reductions, scans and dot in the interpreter.
//
// Order of combination (documented behaviour): reductions and scans combine the elements along
// the axis strictly in index order, left to right (right to left for reverse scans):
// acc = combine(acc, x[i]). Built-in kinds round to the accumulation type after every step, and
// custom combine regions run once per pair in that same order. argmax/argmin keep the lowest
// index among equal values. dot accumulates each output element over k in order, with one fused
// multiply-add per step in fp32 (fp64 for fp64 inputs, exact integers for integer inputs).
#include "interp/ElemTraits.h"
#include "interp/Elementwise.h"
#include "interp/Executor.h"
#include "ir/DotTypes.h"
#include "ir/OpAttrs.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace ww::interp {

using namespace detail;
using ir::OpCode;

namespace {

struct AxisSplit {
  int64_t outer = 1, length = 1, inner = 1;
  int64_t index(int64_t o, int64_t l, int64_t i) const { return (o * length + l) * inner + i; }
};

AxisSplit splitAt(const std::vector<int64_t>& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d < axis)
      s.outer *= shape[size_t(d)];
    else if (d == axis)
      s.length = shape[size_t(d)];
    else
      s.inner *= shape[size_t(d)];
  }
  return s;
}

/// Built-in sum / prod / max / min over the axis, or the inclusive scan of it, in x's element type.
template <typename E>
void foldBuiltin(const std::string& kind, const Tensor& x, Tensor& out, const AxisSplit& s,
                 bool scan, bool reverse) {
  using C = typename E::C;
  const auto* px = x.data<typename E::S>();
  auto* po = out.data<typename E::S>();
  // A reduce's sum / max / min or a scan's sum / prod: the verifier allows no other built-in
  // kind (Ops.def's allowed values; argmax / argmin and custom do not come here).
  enum { Sum, Prod, Max, Min };
  const auto k = kind == "sum" ? Sum : kind == "prod" ? Prod : kind == "max" ? Max : Min;
  // Every step rounds (or wraps) to the element type, as the GPU's combine does.
  auto step = [k](C acc, C v) -> C {
    switch (k) {
    case Sum:
      if constexpr (E::isFloat)
        return E::load(E::store(acc + v));
      else
        return E::load(E::store(C(uint64_t(acc) + uint64_t(v))));
    case Prod:
      if constexpr (E::isFloat)
        return E::load(E::store(acc * v));
      else
        return E::load(E::store(C(uint64_t(acc) * uint64_t(v))));
    case Max:
      if constexpr (E::isFloat)
        return floatMax(acc, v, false);
      else
        return std::max(acc, v);
    case Min:
      if constexpr (E::isFloat)
        return floatMin(acc, v, false);
      else
        return std::min(acc, v);
    }
    return acc;
  };
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      if (s.length == 0) continue;
      int64_t first = reverse ? s.length - 1 : 0, dir = reverse ? -1 : 1;
      C acc = E::load(px[s.index(o, first, i)]);
      if (scan) po[s.index(o, first, i)] = E::store(acc);
      for (int64_t n = 1; n < s.length; ++n) {
        int64_t l = first + dir * n;
        acc = step(acc, E::load(px[s.index(o, l, i)]));
        if (scan) po[s.index(o, l, i)] = E::store(acc);
      }
      if (!scan) po[o * s.inner + i] = E::store(acc);
    }
}

template <typename E>
void argFold(bool isMax, const Tensor& x, Tensor* values, Tensor& indices, const AxisSplit& s) {
  using C = typename E::C;
  const auto* px = x.data<typename E::S>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t best = 0;
      C bestValue = E::load(px[s.index(o, 0, i)]);
      for (int64_t l = 1; l < s.length; ++l) {
        C v = E::load(px[s.index(o, l, i)]);
        // NaN is a missing value (as fmaxf / fminf treat it, and tl.max / tl.min here): a NaN
        // best gives way to any number. Strict comparisons: ties keep the lowest index.
        bool better = bestValue != bestValue ? v == v : (isMax ? v > bestValue : v < bestValue);
        if (better) {
          bestValue = v;
          best = l;
        }
      }
      writeScalar(indices, o * s.inner + i, Scalar{false, best, 0});
      if (values) values->data<typename E::S>()[o * s.inner + i] = E::store(bestValue);
    }
}

} // namespace

std::vector<TensorPtr> Executor::combine(const ir::Block& region,
                                         const std::vector<TensorPtr>& args) {
  for (unsigned i = 0; i < region.numArgs(); ++i) set(region.arg(i), args[i]);
  const ir::Op* term = runBlock(region); // its yield (Ops.def's REGIONS line, verified)
  std::vector<TensorPtr> out;
  for (unsigned i = 0; i < term->numOperands(); ++i)
    out.push_back(tensorOf(*term, term->operand(i)));
  return out;
}

void Executor::execReduce(const ir::Op& op) {
  const bool scan = op.code() == OpCode::Scan;
  const bool reverse = scan && ir::attr::Scan::reverse(op);
  std::vector<TensorPtr> xs;
  for (unsigned i = 0; i < op.numOperands(); ++i) xs.push_back(tensor(op, i));
  const std::vector<int64_t>& shape = xs[0]->shape;
  int64_t axis = scan ? ir::attr::Scan::axis(op) : ir::attr::Reduce::axis(op);
  if (axis < 0) axis += int64_t(shape.size()); // then in range: Ops.def's DropAxis / HasAxis
  AxisSplit s = splitAt(shape, axis);
  std::string kind = scan ? ir::attr::Scan::kind(op) : ir::attr::Reduce::kind(op);

  if (kind == "argmax" || kind == "argmin") {
    const ir::Type& indexType = op.result(op.numResults() - 1)->type();
    auto indices = std::make_shared<Tensor>(Tensor::ofType(indexType));
    std::shared_ptr<Tensor> values;
    if (op.numResults() == 2)
      values = std::make_shared<Tensor>(Tensor::ofType(op.result(0)->type()));
    dispatch(computeType(*xs[0]), [&](auto e) {
      argFold<decltype(e)>(kind == "argmax", *xs[0], values.get(), *indices, s);
    });
    if (values) set(op.result(0), TensorPtr(values));
    set(op.result(op.numResults() - 1), TensorPtr(indices));
    return;
  }
  if (kind != "custom") {
    const ir::Type& rt = op.result()->type();
    TensorPtr x = xs[0];
    if (x->elem != rt.elem) x = evalCast(*x, rt.withShape(x->shape), Rounding::NearestEven);
    auto out = std::make_shared<Tensor>(Tensor::ofType(rt));
    dispatch(computeType(*x),
             [&](auto e) { foldBuiltin<decltype(e)>(kind, *x, *out, s, scan, reverse); });
    set(op.result(), TensorPtr(out));
    return;
  }

  // Custom combine region: region(a..., b...) yields the combined values.
  const size_t n = xs.size();
  std::vector<std::shared_ptr<Tensor>> outs;
  for (unsigned r = 0; r < op.numResults(); ++r)
    outs.push_back(std::make_shared<Tensor>(Tensor::ofType(op.result(r)->type())));
  auto element = [&](size_t operand, int64_t flat) {
    const Tensor& x = *xs[operand];
    auto t = std::make_shared<Tensor>(x.elem, x.pointer, std::vector<int64_t>{});
    size_t w = size_t(x.elemBytes());
    std::memcpy(t->bytes.data(), x.bytes.data() + size_t(flat) * w, w);
    return TensorPtr(t);
  };
  auto put = [&](size_t r, int64_t flat, const TensorPtr& v) {
    size_t w = size_t(outs[r]->elemBytes());
    std::memcpy(outs[r]->bytes.data() + size_t(flat) * w, v->bytes.data(), w);
  };
  const ir::Block& region = *op.region(0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      if (s.length == 0) continue;
      int64_t first = reverse ? s.length - 1 : 0, dir = reverse ? -1 : 1;
      std::vector<TensorPtr> acc;
      for (size_t k = 0; k < n; ++k) acc.push_back(element(k, s.index(o, first, i)));
      if (scan)
        for (size_t k = 0; k < n; ++k) put(k, s.index(o, first, i), acc[k]);
      for (int64_t step = 1; step < s.length; ++step) {
        int64_t l = first + dir * step;
        std::vector<TensorPtr> args = acc;
        for (size_t k = 0; k < n; ++k) args.push_back(element(k, s.index(o, l, i)));
        acc = combine(region, args);
        if (scan)
          for (size_t k = 0; k < n; ++k) put(k, s.index(o, l, i), acc[k]);
      }
      if (!scan)
        for (size_t k = 0; k < n; ++k) put(k, o * s.inner + i, acc[k]);
    }
  for (unsigned r = 0; r < op.numResults(); ++r) set(op.result(r), TensorPtr(outs[r]));
}

TensorPtr computeDot(const Tensor& a, const Tensor& b, const Tensor* acc,
                     const std::string& precision, const ir::Type& rt, int64_t kBegin,
                     int64_t kEnd) {
  const size_t rank = a.shape.size();
  if (rank < 2 || b.shape.size() != rank)
    throw std::logic_error("dot: operands must be 2-D (or 3-D batched) of one rank");
  const int64_t M = a.shape[rank - 2], K = a.shape[rank - 1], N = b.shape[rank - 1];
  const int64_t batch = rank == 3 ? a.shape[0] : 1;
  if (b.shape[rank - 2] != K) throw std::logic_error("dot: inner dimensions differ");
  if (kEnd < 0) kEnd = K;
  if (ir::isFloat(rt.elem)) {
    const bool wide = a.elem == ir::DType::F64 || b.elem == ir::DType::F64;
    std::vector<double> av = widenToDoubles(a), bv = widenToDoubles(b);
    if (precision == "tf32" && a.elem == ir::DType::F32)
      for (double& v : av) v = truncateToTf32(float(v));
    if (precision == "tf32" && b.elem == ir::DType::F32)
      for (double& v : bv) v = truncateToTf32(float(v));
    ir::Type accType = rt.withElem(wide ? ir::DType::F64 : ir::DType::F32);
    auto out = std::make_shared<Tensor>(Tensor::ofType(accType));
    if (acc) out = std::const_pointer_cast<Tensor>(evalCast(*acc, accType, Rounding::NearestEven));
    // Two values of at most 11 significant bits (16- and 8-bit floats, tf32) multiply exactly in
    // fp32, so a multiply and then an add round once, as the fused multiply-add does (but where
    // the product leaves fp32's range), and the loop vectorizes, which std::fma's library call
    // does not without FMA code generation.
    auto narrow = [&](ir::DType e) {
      return e == ir::DType::F16 || e == ir::DType::BF16 ||
             (ir::isFloat(e) && ir::byteWidth(e) == 1) ||
             (e == ir::DType::F32 && precision == "tf32");
    };
    // out += a b in the accumulator's type T, from operands held as S.
    auto kernel = [&](auto* po, const auto& as, const auto& bs, auto fused) {
      using T = std::remove_pointer_t<decltype(po)>;
      for (int64_t z = 0; z < batch; ++z)
        for (int64_t m = 0; m < M; ++m) {
          T* row = po + (z * M + m) * N;
          for (int64_t k = kBegin; k < kEnd; ++k) {
            const T x = T(as[size_t((z * M + m) * K + k)]);
            const auto* brow = bs.data() + (z * K + k) * N;
            for (int64_t n = 0; n < N; ++n) {
              if constexpr (decltype(fused)::value)
                row[n] = std::fma(x, T(brow[n]), row[n]);
              else
                row[n] += x * T(brow[n]);
            }
          }
        }
    };
    if (wide) {
      kernel(out->data<double>(), av, bv, std::true_type{});
    } else if (narrow(a.elem) && narrow(b.elem)) {
      const std::vector<float> af(av.begin(), av.end()), bf(bv.begin(), bv.end());
      kernel(out->data<float>(), af, bf, std::false_type{});
    } else {
      kernel(out->data<float>(), av, bv, std::true_type{});
    }
    if (accType.elem == rt.elem) return out;
    return evalCast(*out, rt, Rounding::NearestEven);
  }
  std::vector<int64_t> av = widenToInts(a), bv = widenToInts(b);
  std::vector<int64_t> sums(size_t(batch * M * N), 0);
  if (acc) sums = widenToInts(*acc);
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = kBegin; k < kEnd; ++k)
        for (int64_t n = 0; n < N; ++n)
          sums[size_t((z * M + m) * N + n)] +=
              av[size_t((z * M + m) * K + k)] * bv[size_t((z * K + k) * N + n)];
  auto out = std::make_shared<Tensor>(Tensor::ofType(rt));
  for (size_t i = 0; i < sums.size(); ++i) writeScalar(*out, int64_t(i), Scalar{false, sums[i], 0});
  return out;
}

void Executor::execDot(const ir::Op& op) {
  TensorPtr acc = op.numOperands() > 2 ? tensor(op, 2) : nullptr;
  const std::string& precision = ir::attr::Dot::inputPrecision(op);
  const ir::Type& rt = op.result()->type();
  // An fp8 dot with max_num_imprecise_acc <= K (ir/DotTypes.h) sums each span of K into a zeroed
  // fp32 partial and adds that into the accumulator, as its wgmma lowering does: the same
  // arithmetic as the pipelined form (async_dot into a partial, then an fp32 add), so the two
  // agree bit for bit.
  const int64_t span = ir::fp8PartialAccumulatorSpan(op);
  if (span == 0 || op.operand(0)->type().shape.size() != 2 || rt.elem != ir::DType::F32) {
    set(op.result(), computeDot(*tensor(op, 0), *tensor(op, 1), acc.get(), precision, rt));
    return;
  }
  const int64_t K = op.operand(0)->type().shape[1];
  TensorPtr sum =
      acc ? acc : computeDot(*tensor(op, 0), *tensor(op, 1), nullptr, precision, rt, 0, 0);
  for (int64_t k0 = 0; k0 < K; k0 += span) {
    TensorPtr partial = computeDot(*tensor(op, 0), *tensor(op, 1), nullptr, precision, rt, k0,
                                   std::min(K, k0 + span));
    auto out = std::make_shared<Tensor>(Tensor::ofType(rt));
    const float* s = sum->data<float>();
    const float* p = partial->data<float>();
    float* o = out->data<float>();
    for (int64_t i = 0, n = out->numel(); i < n; ++i) o[i] = s[i] + p[i];
    sum = out;
  }
  set(op.result(), sum);
}

} // namespace ww::interp
