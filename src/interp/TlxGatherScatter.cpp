// Interpreter semantics of tlx.local_gather and tlx.local_scatter: the whole buffer is read (or
// read, updated and written back) as one access, so the race checker sees what local_load and
// local_store would; indices outside the buffer are reported, not wrapped.
#include "interp/Executor.h"
#include "ir/OpAttrs.h"

#include <cstring>

namespace ww::interp {

using ir::OpCode;

void Executor::execLocalGatherScatter(const ir::Op& op) {
  const bool gather = op.code() == OpCode::LocalGather;
  const BufferView& v = buffer(op, 0);
  TensorPtr idx = tensor(op, gather ? 1 : 2);
  const int64_t axis = gather ? ir::attr::LocalGather::axis(op) : ir::attr::LocalScatter::axis(op);
  const std::vector<int64_t>& bshape = v.shape;
  const int64_t extent = bshape.at(size_t(axis));
  checkViewElements(op, v, v.tileElements());
  const ir::Type whole = ir::Type::tensor(v.elem, bshape);
  const std::vector<int64_t> bstrides = rowMajorStrides(bshape);
  const size_t rank = bshape.size();

  // The flat buffer element element `i` of the indices addresses.
  auto target = [&](int64_t i) {
    int64_t at = readScalar(*idx, i).i;
    if (at < 0 || at >= extent)
      fail(op.loc(), std::string(op.name()) + " index " + std::to_string(at) + " at " +
                         formatIndex(idx->shape, i) + " is out of range for axis " +
                         std::to_string(axis) + " of extent " + std::to_string(extent) + " in " +
                         where());
    int64_t flat = 0, rest = i;
    for (size_t d = rank; d-- > 0;) {
      int64_t c = rest % idx->shape[d];
      rest /= idx->shape[d];
      flat += (int64_t(d) == axis ? at : c) * bstrides[d];
    }
    return flat;
  };

  const int w = v.elemBytes();
  if (gather) {
    checkedRead(op, v, 1);
    TensorPtr all = readBuffer(v, whole);
    Tensor out(v.elem, false, idx->shape);
    for (int64_t i = 0; i < out.numel(); ++i)
      std::memcpy(out.bytes.data() + size_t(i * w), all->bytes.data() + size_t(target(i) * w),
                  size_t(w));
    set(op.result(), std::make_shared<Tensor>(std::move(out)));
    return;
  }
  TensorPtr values = tensor(op, 1);
  checkedWrite(op, v, 1);
  Tensor all = *readBuffer(v, whole);
  for (int64_t i = 0; i < idx->numel(); ++i)
    std::memcpy(all.bytes.data() + size_t(target(i) * w), values->bytes.data() + size_t(i * w),
                size_t(w));
  writeBuffer(v, all);
}

} // namespace ww::interp
