// Lowering of cluster queries and cluster-wide barriers.
#include "codegen/Lowering.h"

namespace ww::codegen {

void FunctionLowering::lowerTlxCluster(const ir::Op& op) {
  raiseError(op.loc(), std::string("'") + op.name() + "' is not supported by the " +
                           targetName(options_.target) + " PTX backend yet");
}

} // namespace ww::codegen
