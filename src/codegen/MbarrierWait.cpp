// The wait loop of tlx.barrier_wait: try_wait.parity until the phase with the wanted parity has
// completed.
#include "codegen/Lowering.h"

namespace ww::codegen {

void FunctionLowering::waitForBarrierPhase(const ir::Op& op, const std::string& bar,
                                           const std::string& phase) {
  (void)op;
  // try_wait suspends for a system-dependent time; retry until the phase with this parity
  // has completed.
  std::string retry = b_.newLabel("wait_retry");
  std::string done = b_.newReg(RegClass::Pred);
  b_.label(retry);
  b_.inst("mbarrier.try_wait.parity.shared::cta.b64", {done, bar, phase});
  b_.inst("bra", {retry}, done, /*negateGuard=*/true);
}

} // namespace ww::codegen
