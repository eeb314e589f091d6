// Lowering of tl.histogram (the histogram op): the bins are u32 counters in the scratch region of
// shared memory. The agent zeroes them, each thread adds one for each element it owns (a
// `red.shared.add.u32` by 1, which ptxas turns into a warp-aggregated ATOMS.POPC.INC, as
// Triton's lowering gives), then each thread reads the bins its result registers hold. Work
// and shared traffic grow with the elements, not elements x bins as a compare-and-reduce does.
#include "codegen/Lowering.h"
#include "codegen/ScalarOps.h"
#include "ir/OpAttrs.h"

namespace ww::codegen {

using ir::DType;
using layout::LinearLayout;

void FunctionLowering::lowerHistogram(const ir::Op& op) {
  const int64_t bins = ir::attr::Histogram::bins(op);
  const bool masked = ir::attr::Histogram::hasMask(op);
  // The operands first: converting one to the layout it is read in may go through the scratch
  // region, which must not happen once the bins live there.
  const Regs& xs = operand(op, 0);
  const Regs* mask = masked ? &operand(op, 1) : nullptr;
  const LinearLayout& out = layoutOf(op.result());
  const OffsetFn binOffsets = rowMajorOffsets({bins});
  const int64_t base = scratch(bins * 4);

  barrier(); // earlier readers of the scratch region are done
  const std::string zero = b_.materialize("0", RegClass::B32);
  storeShared(Regs(size_t(out.getInDimSize(layout::kRegister)), zero), out, binOffsets, base,
              DType::I32);
  barrier();

  // Each element once: threads and registers that hold a copy of another's element add nothing.
  const LinearLayout& in = operandLayoutOf(op, 0);
  const DType elem = op.operand(0)->type().elem;
  const bool wide = ir::bitWidth(elem) == 64;
  const std::string owner = ownerPredicate(in);
  ScalarContext cx = scalarContext(op);
  for (int32_t r = 0; r < static_cast<int32_t>(xs.size()); ++r) {
    if (isDuplicateRegister(in, r)) continue;
    // Widened with the element's signedness, a negative value compares above every bin.
    std::string x = emitCast(cx, xs[size_t(r)], elem, wide ? DType::I64 : DType::I32);
    x = b_.materialize(x, wide ? RegClass::B64 : RegClass::B32);
    std::string guard =
        b_.pure(wide ? "setp.lt.u64" : "setp.lt.u32", RegClass::Pred, {x, std::to_string(bins)});
    if (wide) x = b_.pure("cvt.u32.u64", RegClass::B32, {x});
    if (mask)
      guard = b_.pure(
          "and.pred", RegClass::Pred,
          {guard, b_.materialize(mask->at(mask->size() == 1 ? 0 : size_t(r)), RegClass::Pred)});
    if (!owner.empty()) guard = b_.pure("and.pred", RegClass::Pred, {guard, owner});
    std::string addr = sharedAddress(b_.pure("shl.b32", RegClass::B32, {x, "2"}));
    b_.inst("red.shared.add.u32", {"[" + addr + "+" + std::to_string(base) + "]", "1"}, guard);
  }
  barrier();
  // The reads are done before the scratch region's next writer (which starts with a barrier).
  bind(op.result(), loadShared(out, binOffsets, base, 0, DType::I32));
}

} // namespace ww::codegen
