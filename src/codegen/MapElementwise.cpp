// Lowering of tl.map_elementwise (the map_elementwise op): every operand is in one layout, so a
// thread's register k of each operand is one element; the scalar region is inlined once per
// `pack` consecutive registers, its block arguments bound to them, and its yields become the
// results' registers. Control flow in the region branches per thread. A thread whose register
// count is not a multiple of `pack` repeats its last element in the final instance (as
// inline_asm_elementwise does) and keeps only the real elements' results.
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"

#include <algorithm>

namespace ww::codegen {

void FunctionLowering::lowerMapElementwise(const ir::Op& op) {
  const int32_t pack = static_cast<int32_t>(ir::attr::MapElementwise::pack(op));
  const ir::Block& region = *op.region(0);
  const unsigned numInputs = op.numOperands();
  // The verifier has checked the region against Ops.def's REGIONS line: `pack` scalar arguments
  // per input, and a yield of `pack` scalars per result.
  const ir::Value* first = op.numResults() ? op.result(0) : nullptr;
  const int32_t n =
      first && first->type().isTensor() ? layoutOf(first).getInDimSize(layout::kRegister) : 1;
  std::vector<Regs> inputs;
  for (unsigned i = 0; i < numInputs; ++i) inputs.push_back(operand(op, i));
  std::vector<Regs> results(op.numResults(), Regs(size_t(n)));
  for (int32_t base = 0; base < n; base += pack) {
    for (unsigned i = 0; i < numInputs; ++i)
      for (int32_t j = 0; j < pack; ++j)
        bind(region.arg(i * unsigned(pack) + unsigned(j)),
             {inputs[i].at(size_t(std::min(base + j, n - 1)))});
    b_.pushScope();
    for (const auto& inner : region.ops())
      if (inner.get() != region.terminator()) lowerOp(*inner);
    const ir::Op* yield = region.terminator();
    for (unsigned r = 0; r < op.numResults(); ++r)
      for (int32_t j = 0; j < pack && base + j < n; ++j) {
        results[r][size_t(base + j)] =
            regsOf(yield->operand(r * unsigned(pack) + unsigned(j))).at(0);
      }
    b_.popScope();
  }
  for (unsigned r = 0; r < op.numResults(); ++r) bind(op.result(r), std::move(results[r]));
}

} // namespace ww::codegen
