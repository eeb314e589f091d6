// Lowering of scans (tl.cumsum, tl.cumprod, tl.associative_scan).
#include "codegen/Lowering.h"

namespace ww::codegen {

void FunctionLowering::lowerScan(const ir::Op& op) {
  raiseError(op.loc(), std::string("'") + op.name() + "' is not supported by the " +
                           targetName(options_.target) + " PTX backend yet");
}

} // namespace ww::codegen
