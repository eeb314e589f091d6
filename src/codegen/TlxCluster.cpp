// Lowering of thread-block cluster queries and the cluster-wide barrier (sm_90a and later):
// cluster_cta_rank, cluster_size_1d, cluster_barrier.
#include "codegen/Lowering.h"

#include <stdexcept>

namespace ww::codegen {

using ir::OpCode;

void FunctionLowering::lowerTlxCluster(const ir::Op& op) {
  if (options_.target == Target::SM80)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' needs thread-block clusters, which sm_80 does not have; compile "
                             "for sm_90a or sm_100a");
  switch (op.code()) {
  case OpCode::ClusterCtaRank:
    return bind(op.result(), {b_.pure("mov.u32", RegClass::B32, {"%cluster_ctarank"})});
  case OpCode::ClusterSize:
    return bind(op.result(), {b_.pure("mov.u32", RegClass::B32, {"%cluster_nctarank"})});
  case OpCode::ClusterBarrier: {
    // Every thread of every CTA of the cluster arrives: inside async tasks, as in TLX, every task
    // must call it (a task's warps alone would wait forever).
    // Release/acquire: shared-memory writes and mbarrier inits before the barrier are visible to
    // the cluster's other CTAs after it. .aligned (the threads of a warp execute it together)
    // holds for straight-line kernel code, not inside run-time branches, loops and tasks.
    std::string aligned = op.parentBlock() == &fn_.body && !taskWarps_ ? ".aligned" : "";
    b_.inst("barrier.cluster.arrive.release" + aligned, {});
    b_.inst("barrier.cluster.wait.acquire" + aligned, {});
    return agentSynced();
  }
  default:
    throw std::logic_error("codegen: not a cluster op");
  }
}

} // namespace ww::codegen
