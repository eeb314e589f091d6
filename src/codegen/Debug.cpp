// Lowering of tl.device_print and device-side asserts.
#include "codegen/Lowering.h"

namespace ww::codegen {

void FunctionLowering::lowerDebugOp(const ir::Op& op) {
  raiseError(op.loc(), std::string("'") + op.name() + "' is not supported by the " +
                           targetName(options_.target) + " PTX backend yet");
}

} // namespace ww::codegen
