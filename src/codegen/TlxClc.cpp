// Lowering of cluster launch control (sm_100a): clc_try_cancel and clc_query, as TLX lowers
// them (clusterlaunchcontrol.try_cancel / query_cancel, PTX ISA 8.6).
#include "codegen/Lowering.h"

#include <stdexcept>

namespace ww::codegen {

using ir::OpCode;

void FunctionLowering::lowerClc(const ir::Op& op) {
  if (options_.target != Target::SM100a)
    raiseError(op.loc(), std::string("tlx.") +
                             (op.code() == OpCode::ClcTryCancel ? "clc_producer" : "clc_consumer") +
                             " lowers to cluster launch control (clusterlaunchcontrol), which "
                             "only sm_100a (Blackwell) has; compile for sm_100a");
  const layout::SharedAllocation& a = allocationOf(op, 0);
  if (a.alignment % 16 != 0)
    throw std::logic_error("codegen: a CLC response that is not 16-byte aligned");
  std::string response =
      bracketed(sharedAddress(b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32)));
  if (op.code() == OpCode::ClcTryCancel) {
    // One thread of the agent, in the CTAs whose %cluster_ctaid.x is 0; in a cluster launch the
    // response and its complete_tx reach every CTA of the cluster (multicast::cluster::all).
    std::string issue = electedThread();
    if (fn_.numCtas > 1) {
      std::string x = b_.pure("mov.u32", RegClass::B32, {"%cluster_ctaid.x"});
      std::string first = b_.pure("setp.eq.u32", RegClass::Pred, {x, "0"});
      issue = b_.pure("and.pred", RegClass::Pred, {issue, first});
    }
    std::string opcode = "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_"
                         "tx::bytes" +
                         std::string(fn_.numCtas > 1 ? ".multicast::cluster::all" : "") + ".b128";
    return b_.inst(opcode, {response, barrierAddress(op, 1)}, issue);
  }
  // Every thread decodes the response: x, y, z of the canceled cluster's first CTA, or -1.
  Regs ids;
  for (unsigned i = 0; i < 3; ++i) {
    ids.push_back(b_.newReg(RegClass::B32));
    b_.inst("mov.b32", {ids.back(), "-1"});
  }
  b_.raw("{");
  b_.raw(".reg .b128 %clc_response;");
  b_.raw(".reg .pred %clc_canceled;");
  b_.inst("ld.shared.b128", {"%clc_response", response});
  b_.inst("clusterlaunchcontrol.query_cancel.is_canceled.pred.b128",
          {"%clc_canceled", "%clc_response"});
  b_.inst("clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128",
          {"{" + ids[0] + ", " + ids[1] + ", " + ids[2] + ", _}", "%clc_response"},
          "%clc_canceled");
  b_.raw("}");
  for (unsigned i = 0; i < 3; ++i) bind(op.result(i), {ids[i]});
}

} // namespace ww::codegen
