// The clean-up pipeline run after specialization.
#include "transforms/Passes.h"

namespace ww::transforms {

void runCleanupPipeline(ir::Function& fn) {
  verify(fn);
  foldConstants(fn);
  verify(fn);
  eliminateCommonSubexpressions(fn);
  verify(fn);
  // CSE can expose new folds (two equal operands), folding leaves dead constants behind.
  foldConstants(fn);
  eliminateDeadCode(fn);
  verify(fn);
}

} // namespace ww::transforms
