// Lowering of tlx.async_load (cp.async) with its commit and wait groups.
#include "codegen/Lowering.h"

namespace ww::codegen {

void FunctionLowering::lowerTlxAsyncCopy(const ir::Op& op) {
  raiseError(op.loc(), std::string("'") + op.name() + "' is not supported by the " +
                           targetName(options_.target) + " PTX backend yet");
}

} // namespace ww::codegen
