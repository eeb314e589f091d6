// Interpreter semantics of gather (tl.gather), histogram (tl.histogram) and map_elementwise
// (tl.map_elementwise). gather
// reports an index outside the source's axis, which has no defined value on the GPU, instead of
// reading past it. map_elementwise runs its region once per group of `pack` consecutive elements
// (row-major); a last group cut short repeats its last element, as the PTX lowering does, and
// only the results of real elements are kept.
#include "interp/Executor.h"
#include "ir/OpAttrs.h"

#include <cstring>

namespace ww::interp {

void Executor::execGather(const ir::Op& op) {
  TensorPtr src = tensor(op, 0);
  TensorPtr idx = tensor(op, 1);
  const int64_t axis = ir::attr::Gather::axis(op);
  const size_t rank = idx->shape.size();
  const int64_t extent = src->shape.at(size_t(axis));
  const std::vector<int64_t> strides = rowMajorStrides(src->shape);
  Tensor out(src->elem, src->pointer, idx->shape);
  const size_t w = size_t(src->elemBytes());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t at = readScalar(*idx, i).i;
    if (at < 0 || at >= extent)
      fail(op.loc(), "tl.gather index " + std::to_string(at) + " at " + formatIndex(idx->shape, i) +
                         " is out of range for axis " + std::to_string(axis) +
                         " of the source, of extent " + std::to_string(extent) + ", in " + where());
    int64_t flat = 0, rest = i;
    for (size_t d = rank; d-- > 0;) {
      int64_t c = rest % idx->shape[d];
      rest /= idx->shape[d];
      flat += (int64_t(d) == axis ? at : c) * strides[d];
    }
    std::memcpy(out.bytes.data() + size_t(i) * w, src->bytes.data() + size_t(flat) * w, w);
  }
  set(op.result(), std::make_shared<Tensor>(std::move(out)));
}

void Executor::execHistogram(const ir::Op& op) {
  TensorPtr x = tensor(op, 0);
  TensorPtr mask = ir::attr::Histogram::hasMask(op) ? tensor(op, 1) : nullptr;
  const int64_t bins = ir::attr::Histogram::bins(op);
  Tensor out = Tensor::ofType(op.result()->type());
  std::vector<int32_t> counts(size_t(bins), 0);
  for (int64_t i = 0; i < x->numel(); ++i) {
    if (mask && readScalar(*mask, i).i == 0) continue;
    int64_t v = readScalar(*x, i).i; // a u64 past 2^63 reads negative: outside the bins too
    if (v >= 0 && v < bins) ++counts[size_t(v)];
  }
  for (int64_t b = 0; b < bins; ++b) {
    Scalar count;
    count.i = counts[size_t(b)];
    writeScalar(out, b, count);
  }
  set(op.result(), std::make_shared<Tensor>(std::move(out)));
}

void Executor::execMapElementwise(const ir::Op& op) {
  const int64_t pack = ir::attr::MapElementwise::pack(op);
  std::vector<TensorPtr> xs;
  for (unsigned i = 0; i < op.numOperands(); ++i) xs.push_back(tensor(op, i));
  std::vector<std::shared_ptr<Tensor>> outs;
  for (unsigned r = 0; r < op.numResults(); ++r)
    outs.push_back(std::make_shared<Tensor>(Tensor::ofType(op.result(r)->type())));
  const int64_t n = outs.empty() ? (xs.empty() ? 1 : xs[0]->numel()) : outs[0]->numel();
  auto element = [](const Tensor& x, int64_t flat) {
    auto t = std::make_shared<Tensor>(x.elem, x.pointer, std::vector<int64_t>{});
    size_t w = size_t(x.elemBytes());
    std::memcpy(t->bytes.data(), x.bytes.data() + size_t(flat) * w, w);
    return TensorPtr(t);
  };
  const ir::Block& region = *op.region(0);
  for (int64_t base = 0; base < n; base += pack) {
    std::vector<TensorPtr> args;
    for (const TensorPtr& x : xs)
      for (int64_t j = 0; j < pack; ++j) args.push_back(element(*x, std::min(base + j, n - 1)));
    std::vector<TensorPtr> got = combine(region, args);
    for (size_t r = 0; r < outs.size(); ++r)
      for (int64_t j = 0; j < pack && base + j < n; ++j) {
        const Tensor& v = *got.at(r * size_t(pack) + size_t(j));
        size_t w = size_t(outs[r]->elemBytes());
        std::memcpy(outs[r]->bytes.data() + size_t(base + j) * w, v.bytes.data(), w);
      }
  }
  for (size_t r = 0; r < outs.size(); ++r) set(op.result(unsigned(r)), TensorPtr(outs[r]));
}

} // namespace ww::interp
