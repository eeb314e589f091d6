// tlx.vote_ballot_sync over a tensor predicate, as TLX lowers it: each thread votes with the OR
// of the elements of pred it holds, and every element it holds gets its warp's ballot (bit l set
// when lane l voted true and is in the mask). Which thread holds which element is the layout the
// compiler gives pred (layout assignment, for sm_100a in a kernel that uses tensor memory and
// sm_90a otherwise), so the interpreter asks that layout; an element several threads hold gets
// the ballot of the first of them. A scalar predicate has one value per thread, which the
// interpreter, running a warp group as one agent, does not have: refused (execPerThreadOp).
#include "interp/Executor.h"
#include "layout/LayoutAssignment.h"
#include "layout/LinearLayout.h"

namespace ww::interp {

void Executor::execVoteBallot(const ir::Op& op) {
  const ir::Value* predValue = op.operand(1);
  if (!predValue->type().isTensor()) return execPerThreadOp(op);
  if (!k_.layouts) {
    bool tmem = false;
    ir::walk(k_.fn->body, [&](const ir::Op& o) {
      for (const auto& r : o.results()) tmem |= r->type().space == ir::MemorySpace::Tmem;
    });
    CompileOptions options;
    options.target = tmem ? Target::SM100a : Target::SM90a;
    options.numWarps = k_.fn->numWarps;
    try {
      k_.layouts =
          std::make_shared<const layout::LayoutMap>(layout::assignLayouts(*k_.fn, options));
    } catch (const std::exception& e) {
      fail(op.loc(), std::string("tlx.vote_ballot_sync of a tensor: the ballot depends on the "
                                 "layout the compiler gives the predicate, which it could not "
                                 "assign here: ") +
                         e.what());
    }
  }
  const auto& layouts = *static_cast<const layout::LayoutMap*>(k_.layouts.get());
  if (!layouts.hasLayout(predValue))
    fail(op.loc(), "tlx.vote_ballot_sync of a tensor: its predicate has no layout in " + where());
  const layout::LinearLayout& l = layouts.layout(predValue);
  TensorPtr pred = tensor(op, 1);
  const uint32_t mask = uint32_t(scalarInt(op, 0));
  const std::vector<int64_t>& shape = pred->shape;
  const int rank = int(shape.size());
  const int regs = l.getInDimSize(layout::kRegister), lanes = l.getInDimSize(layout::kLane),
            warps = l.getInDimSize(layout::kWarp);
  // Flat element index of the coordinates the layout gives (register, lane, warp) of block 0.
  auto elementOf = [&](int r, int lane, int w) {
    layout::LinearLayout::NamedValues c =
        l.apply({{layout::kRegister, r}, {layout::kLane, lane}, {layout::kWarp, w}});
    int64_t flat = 0;
    for (int d = 0; d < rank; ++d) {
      int32_t x = 0;
      for (const auto& [name, v] : c)
        if (name == layout::dimName(d)) x = v;
      flat = flat * shape[size_t(d)] + x;
    }
    return flat;
  };
  std::vector<uint32_t> ballots(size_t(warps), 0);
  for (int w = 0; w < warps; ++w)
    for (int lane = 0; lane < lanes && lane < 32; ++lane) {
      bool vote = false;
      for (int r = 0; r < regs; ++r) vote |= readScalar(*pred, elementOf(r, lane, w)).asInt() != 0;
      if (vote && (mask >> lane & 1)) ballots[size_t(w)] |= uint32_t(1) << lane;
    }
  Tensor out = Tensor::ofType(op.result()->type());
  std::vector<bool> done(size_t(out.numel()), false);
  for (int w = 0; w < warps; ++w)
    for (int lane = 0; lane < lanes; ++lane)
      for (int r = 0; r < regs; ++r) {
        const int64_t e = elementOf(r, lane, w);
        if (done[size_t(e)]) continue;
        done[size_t(e)] = true;
        out.data<int32_t>()[e] = int32_t(ballots[size_t(w)]);
      }
  set(op.result(), std::make_shared<Tensor>(std::move(out)));
}

} // namespace ww::interp
