// tlx.vote_ballot_sync as TLX lowers it: each thread votes with its predicate (the OR of the
// elements of a tensor predicate it holds), and the result is its warp's ballot (bit l set when
// lane l voted true and is in the mask), in every element a thread holds. Which thread holds
// which element is the layout the compiler gives the tensor (layout assignment, for sm_100a in a
// kernel that uses tensor memory and sm_90a otherwise), so the interpreter asks that layout; an
// element several threads hold takes the ballot of the first of them. A scalar predicate is the
// same in every thread, or one value per thread (PerThread.cpp).
#include "interp/Executor.h"
#include "layout/LayoutAssignment.h"
#include "layout/LinearLayout.h"

namespace ww::interp {

const layout::LayoutMap& Executor::kernelLayouts(const ir::Op& op, const std::string& why) {
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
      fail(op.loc(), why +
                         ", which depends on the layout the compiler gives it; layout "
                         "assignment failed here: " +
                         e.what());
    }
  }
  return *static_cast<const layout::LayoutMap*>(k_.layouts.get());
}

std::vector<std::vector<int64_t>> Executor::threadElements(const ir::Op& op, const ir::Value* v,
                                                           const std::string& why) {
  const layout::LayoutMap& layouts = kernelLayouts(op, why);
  if (!layouts.hasLayout(v)) fail(op.loc(), why + ": the tensor has no layout in " + where());
  const layout::LinearLayout& l = layouts.layout(v);
  const std::vector<int64_t>& shape = v->type().shape;
  const int rank = int(shape.size());
  const int regs = l.getInDimSize(layout::kRegister), lanes = l.getInDimSize(layout::kLane),
            warps = l.getInDimSize(layout::kWarp);
  std::vector<std::vector<int64_t>> held(size_t(warps) * 32);
  for (int w = 0; w < warps; ++w)
    for (int lane = 0; lane < lanes && lane < 32; ++lane)
      for (int r = 0; r < regs; ++r) {
        layout::LinearLayout::NamedValues c =
            l.apply({{layout::kRegister, r}, {layout::kLane, lane}, {layout::kWarp, w}});
        int64_t flat = 0;
        for (int d = 0; d < rank; ++d) {
          int32_t x = 0;
          for (const auto& [name, value] : c)
            if (name == layout::dimName(d)) x = value;
          flat = flat * shape[size_t(d)] + x;
        }
        held[size_t(w) * 32 + size_t(lane)].push_back(flat);
      }
  return held;
}

void Executor::execVoteBallot(const ir::Op& op) {
  const ir::Value* predValue = op.operand(1);
  const uint32_t mask = uint32_t(scalarInt(op, 0));
  if (!predValue->type().isTensor()) {
    // Every lane holds the same predicate.
    Tensor out = Tensor::ofType(op.result()->type());
    *out.data<int32_t>() = int32_t(readScalar(*tensor(op, 1), 0).asInt() != 0 ? mask : 0);
    set(op.result(), std::make_shared<Tensor>(std::move(out)));
    return;
  }
  const std::vector<std::vector<int64_t>> held =
      threadElements(op, predValue, "tlx.vote_ballot_sync of a tensor predicate");
  TensorPtr pred = tensor(op, 1);
  std::vector<uint32_t> ballots(held.size() / 32, 0);
  for (size_t t = 0; t < held.size(); ++t) {
    bool vote = false;
    for (int64_t e : held[t]) vote |= readScalar(*pred, e).asInt() != 0;
    if (vote && (mask >> (t % 32) & 1)) ballots[t / 32] |= uint32_t(1) << (t % 32);
  }
  Tensor out = Tensor::ofType(op.result()->type());
  std::vector<bool> done(size_t(out.numel()), false);
  for (size_t t = 0; t < held.size(); ++t)
    for (int64_t e : held[t]) {
      if (done[size_t(e)]) continue;
      done[size_t(e)] = true;
      out.data<int32_t>()[e] = int32_t(ballots[t / 32]);
    }
  set(op.result(), std::make_shared<Tensor>(std::move(out)));
}

} // namespace ww::interp
