// tlx.local_gather and tlx.local_scatter: shared-memory reads and writes at run-time indices
// along one axis of a buffer, with torch.gather / Tensor.scatter_ semantics:
//   gather:  out[i0, .., ik, ..] = buf[i0, .., indices[i0, .., ik, ..], ..]   (k = axis)
//   scatter: buf[i0, .., indices[i0, .., ik, ..], ..] = values[i0, .., ik, ..]
// The indices have the buffer's rank and at most its extent along the other axes.
#include "specialize/SpecializerImpl.h"

#include "ir/OpAttrs.h"

namespace ww::specialize {

using ir::DType;
using ir::OpCode;

Val Specializer::callTlxGatherScatter(const std::string& name, CallSite& call) {
  const bool gather = name == "local_gather";
  const std::string fn = "tlx." + name;
  BoundArgs a = gather ? BoundArgs(call, {"src", "indices", "axis", "token="})
                       : BoundArgs(call, {"dst", "src", "indices", "axis", "token="});
  const char* bufArg = gather ? "src" : "dst";
  ir::Value* buf = requireBuffer(a.get(bufArg), a.loc(bufArg), fn + "'s " + bufArg);
  const ir::Type& bt = buf->type();
  if (bt.count != 1)
    raiseError(a.loc(bufArg), fn + " needs a single buffer, got " + bt.str() +
                                  "; select one with bufs[i] or tlx.local_view(bufs, i)");
  if (bt.space != ir::MemorySpace::Shared)
    raiseError(a.loc(bufArg), fn + " only supports shared memory, got " + bt.str());
  const int64_t rank = static_cast<int64_t>(bt.shape.size());
  int64_t axis = constInt(a.get("axis"), a.loc("axis"), fn + "'s axis", a.expr("axis"));
  if (axis < -rank || axis >= rank)
    raiseError(a.loc("axis"), fn + "'s axis " + std::to_string(axis) + " is out of range for " +
                                  bt.str() + " (valid: 0.." + std::to_string(rank - 1) + ")");
  if (axis < 0) axis += rank;

  ir::Value* idx = requireTensorOrScalar(a.get("indices"), a.loc("indices"), fn + "'s indices");
  const ir::Type& it = idx->type();
  if (it.pointer || !ir::isInt(it.elem) || it.elem == DType::I1)
    raiseError(a.loc("indices"), fn + "'s indices must be an integer tensor, got " + it.str());
  if (static_cast<int64_t>(it.shape.size()) != rank)
    raiseError(a.loc("indices"), fn + "'s indices " + it.str() + " must have the rank of the " +
                                     "buffer " + bt.str() + " (" + std::to_string(rank) + ")");
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && it.shape[size_t(d)] > bt.shape[size_t(d)])
      raiseError(a.loc("indices"), fn + "'s indices " + it.str() + " are larger than the buffer " +
                                       bt.str() + " along axis " + std::to_string(d) +
                                       ", which is not the gathered axis " + std::to_string(axis));
  const std::vector<ir::NamedAttr> attrs = {gather ? ir::attr::LocalGather::make::axis(axis)
                                                   : ir::attr::LocalScatter::make::axis(axis)};
  if (gather)
    return Val::runtime(
        b.create1(OpCode::LocalGather, {buf, idx}, ir::Type::tensor(bt.elem, it.shape), attrs));

  const Val& v = a.get("src");
  ir::Value* x = v.isNumber() ? constant(v, ir::Type::tensor(bt.elem, it.shape))
                              : requireTensorOrScalar(v, a.loc("src"), fn + "'s values");
  if (x->type().pointer)
    raiseError(a.loc("src"), fn + "'s values must be numbers, got " + x->type().str());
  if (x->type().shape != it.shape) x = broadcastTo(x, it.shape, a.loc("src"));
  if (x->type().elem != bt.elem)
    raiseError(a.loc("src"), fn + ": the values are " + x->type().str() + " but the buffer holds " +
                                 std::string(ir::tlName(bt.elem)) + "; convert them with .to(...)");
  b.create(OpCode::LocalScatter, {buf, x, idx}, {}, attrs);
  return Val::none();
}

} // namespace ww::specialize
