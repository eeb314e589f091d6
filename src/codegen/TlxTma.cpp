// Lowering of TLX TMA copies (sm_90a and later): async_descriptor_load into a buffer with an
// mbarrier, async_descriptor_store and its wait.
#include "codegen/Lowering.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

void FunctionLowering::requireDescriptorSwizzle(const ir::Op& op, const ir::Value* desc,
                                                int swizzleBytes) {
  auto [it, inserted] = descriptorSwizzle_.emplace(desc, swizzleBytes);
  if (!inserted && it->second != swizzleBytes)
    raiseError(op.loc(), "one descriptor is used by TMA copies with shared tiles of " +
                             std::to_string(it->second) + "-byte and " +
                             std::to_string(swizzleBytes) +
                             "-byte swizzle; use a separate descriptor for each kind of tile");
}

void FunctionLowering::lowerTlxDescriptorCopy(const ir::Op& op) {
  if (options_.target == Target::SM80)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' needs the Tensor Memory Accelerator of sm_90a or sm_100a");
  if (op.code() == OpCode::AsyncDescStoreWait) {
    // Only the issuing thread tracks its bulk groups; the others wait for it at the barrier
    // before they may overwrite the source buffers.
    b_.inst("cp.async.bulk.wait_group.read", {immInt(op.intAttr("pendings"))}, electedThread());
    barrier();
    return;
  }
  bool isLoad = op.code() == OpCode::AsyncDescLoad;
  const ir::Type& dt = op.operand(0)->type();
  if (dt.kind != ir::TypeKind::Descriptor)
    throw std::logic_error("codegen: TMA copy without a descriptor operand");
  if (!isPlainBuffer(op.operand(1)))
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' needs a buffer from tlx.local_alloc or its local_view, not a "
                             "transposed, sliced or reinterpreted view");
  const layout::SharedAllocation& a = allocationOf(op, 1);
  const ir::Type& bt = op.operand(1)->type();
  int rank = static_cast<int>(dt.shape.size());
  unsigned firstOffset = isLoad ? 3 : 2;
  bool hasPred = isLoad && op.intAttr("has_pred") != 0;
  if (rank < 1 || rank > 5 || op.numOperands() != firstOffset + rank + (hasPred ? 1 : 0))
    raiseError(op.loc(), std::string("'") + op.name() + "' through a descriptor of block rank " +
                             std::to_string(rank) + " takes " + std::to_string(rank) + " offsets");
  if (bt.shape != dt.shape || bt.elem != dt.elem)
    raiseError(op.loc(), std::string("'") + op.name() + "' between " + dt.str() + " and " +
                             bt.str() + ": the buffer must have the descriptor's block shape " +
                             "and element type");
  int64_t innerBytes = dt.shape.back() * ir::byteWidth(dt.elem);
  if (a.swizzleBytes && innerBytes > a.swizzleBytes)
    raiseError(op.loc(), std::string("'") + op.name() + "' of a " + dt.str() + " block: rows of " +
                             std::to_string(innerBytes) + " bytes wider than the buffer's " +
                             std::to_string(a.swizzleBytes) +
                             "-byte swizzle are not supported yet; use a block whose innermost "
                             "dim spans at most " +
                             std::to_string(a.swizzleBytes) + " bytes");
  if (isLoad && op.intAttr("multicast_mask"))
    raiseError(op.loc(), "multicast TMA loads are not supported by the " +
                             std::string(targetName(options_.target)) +
                             " PTX backend yet; load without multicast_mask");
  requireDescriptorSwizzle(op, op.operand(0), a.swizzleBytes);
  std::string tmap = operand(op, 0).at(0);
  std::string coords = "{";
  for (int d = rank - 1; d >= 0; --d) {
    std::string c = b_.materialize(operand(op, firstOffset + d).at(0), RegClass::B32);
    coords += c + (d ? ", " : "}");
  }
  std::string buffer = b_.materialize(regsOf(op.operand(1)).at(0), RegClass::B32);
  std::string tile = bracketed(sharedAddress(buffer));
  std::string dims = std::to_string(rank) + "d";
  std::string leader = electedThread();
  if (isLoad) {
    if (hasPred) {
      std::string p = b_.materialize(operand(op, firstOffset + rank).at(0), RegClass::Pred);
      leader = b_.pure("and.pred", RegClass::Pred, {leader, p});
    }
    std::string bar = barrierAddress(op, 2);
    return b_.inst("cp.async.bulk.tensor." + dims +
                       ".shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                   {tile, "[" + tmap + ", " + coords + "]", bar}, leader);
  }
  // Every thread's generic-proxy writes of the buffer are visible to the bulk copy.
  b_.inst("fence.proxy.async.shared::cta", {});
  barrier();
  b_.inst("cp.async.bulk.tensor." + dims + ".global.shared::cta.tile.bulk_group",
          {"[" + tmap + ", " + coords + "]", tile}, leader);
  b_.inst("cp.async.bulk.commit_group", {}, leader);
}

} // namespace ww::codegen
