// Lowering of TLX TMA copies (sm_90a and later): async_descriptor_load into a buffer with an
// mbarrier (multicast to CTAs of a cluster), async_descriptor_store and its wait.
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <utility>
#include <vector>

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
    b_.inst("cp.async.bulk.wait_group.read", {immInt(ir::attr::AsyncDescStoreWait::pendings(op))},
            electedThread());
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
  requireNvmmaUserLayout(op, 1, /*rowMajorToo=*/true);
  const layout::SharedAllocation& a = allocationOf(op, 1);
  const ir::Type& bt = op.operand(1)->type();
  int rank = static_cast<int>(dt.shape.size());
  unsigned firstOffset = isLoad ? 3 : 2;
  bool hasPred = isLoad && ir::attr::AsyncDescLoad::hasPred(op);
  unsigned runtimeTargets =
      isLoad ? static_cast<unsigned>(ir::attr::AsyncDescLoad::multicastOperands(op)) : 0;
  unsigned firstTarget = firstOffset + rank + (hasPred ? 1 : 0);
  if (rank < 1 || rank > 5 || op.numOperands() != firstTarget + runtimeTargets)
    raiseError(op.loc(), std::string("'") + op.name() + "' through a descriptor of block rank " +
                             std::to_string(rank) + " takes " + std::to_string(rank) + " offsets");
  if (!ir::sameTmaTile(dt.shape, bt.shape) || bt.elem != dt.elem)
    raiseError(op.loc(), std::string("'") + op.name() + "' between " + dt.str() + " and " +
                             bt.str() + ": the buffer must have the descriptor's block shape " +
                             "(leading 1s aside) and element type");
  // A padded e2m1 buffer (the operand of a mixed block-scaled MMA; LayoutAssignment.h) is
  // filled by TMA's CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, whose elements are the 4-bit values:
  // the copy is of [.., 2 K] values a byte each in shared memory, its K coordinate twice the
  // packed one, in boxes of 128 values (the one width that type takes) of a 128-byte swizzle.
  const bool padded = a.fp4Padded;
  ir::Type ct = dt;
  if (padded) {
    bool isArg = false;
    for (const ir::KernelArg& arg : fn_.args) isArg |= arg.value == op.operand(0);
    if (!isArg)
      raiseError(op.loc(), std::string("'") + op.name() +
                               "' fills the padded e2m1 operand of a mixed tlx.async_dot_scaled, "
                               "which the sm_100a backend loads through a descriptor passed as a "
                               "kernel argument only (encoded by the host as 4-bit values)");
    ct.shape.back() *= 2;
  }
  auto [known, fresh] = descriptorFp4Padded_.emplace(op.operand(0), padded);
  if (!fresh && known->second != padded)
    raiseError(op.loc(), "one descriptor loads both padded e2m1 tiles (the operand of a mixed "
                         "tlx.async_dot_scaled) and plain ones; use a separate descriptor for "
                         "each kind of tile");
  // A swizzled buffer whose rows are wider than its swizzle span is laid out as column blocks
  // of that span (each block all rows x S bytes); a TMA box cannot be wider than its swizzle, so
  // the host encodes the box one block wide and each copy here moves one column block.
  int64_t elemBytes = ir::byteWidth(ct.elem);
  int64_t innerBytes = ct.shape.back() * elemBytes;
  if (a.swizzleBytes && innerBytes > a.swizzleBytes) {
    int64_t rows = 1;
    for (int d = 0; d + 1 < rank; ++d) rows *= dt.shape[d];
    int64_t blockBytes = rows * a.swizzleBytes;
    // Each block must start on a swizzle atom (8 rows of S bytes, at most 1024 bytes). A block
    // of more dims is one of rows when its outer dims are 1 ([1, 1, M, N] for an [M, N] tile).
    bool rowsOnly = rank >= 2;
    for (int d = 0; d + 2 < rank; ++d) rowsOnly &= dt.shape[d] == 1;
    if (!rowsOnly || innerBytes % a.swizzleBytes || blockBytes % (8 * a.swizzleBytes))
      raiseError(op.loc(), std::string("'") + op.name() + "' of a " + dt.str() +
                               " block: rows of " + std::to_string(innerBytes) +
                               " bytes are copied as column blocks of the buffer's " +
                               std::to_string(a.swizzleBytes) +
                               "-byte swizzle, which needs a 2-D block (or outer dims of 1) with a "
                               "multiple of 8 rows "
                               "and rows a multiple of " +
                               std::to_string(a.swizzleBytes) + " bytes");
  }
  // Blocks longer than 256 elements along a dim go as several boxes (one mbarrier, whose
  // expected bytes count them all; one bulk group per store).
  const TmaBoxes boxes = tmaBoxes(ct, a.swizzleBytes);
  if (!boxes.problem.empty())
    raiseError(op.loc(), std::string("'") + op.name() + "' of a " + dt.str() +
                             " block splits into TMA boxes of at most 256 elements per "
                             "dimension, but " +
                             boxes.problem);
  // Multicast: the copy lands at the buffer's offset in every CTA of the mask (cluster ranks)
  // and completes the barrier at the same offset in each of them.
  int64_t multicastMask = isLoad ? ir::attr::AsyncDescLoad::multicastMask(op) : 0;
  bool multicast = multicastMask || runtimeTargets;
  if (multicast) {
    if (fn_.numCtas < 2)
      raiseError(op.loc(), std::string("'") + op.name() +
                               "' with multicast_targets needs a cluster launch; launch with "
                               "ctas_per_cga of 2 or more, or load without multicast_targets");
    if (multicastMask >> fn_.numCtas)
      raiseError(op.loc(), std::string("'") + op.name() + "' multicasts to CTA ranks beyond the " +
                               std::to_string(fn_.numCtas) + " CTAs of the cluster");
  }
  requireDescriptorSwizzle(op, op.operand(0), a.swizzleBytes);
  std::string tmap = operand(op, 0).at(0);
  std::vector<std::string> offsets(rank);
  for (int d = 0; d < rank; ++d)
    offsets[d] = b_.materialize(operand(op, firstOffset + d).at(0), RegClass::B32);
  if (padded)
    offsets[rank - 1] = b_.pure("shl.b32", RegClass::B32, {offsets[rank - 1], "1"});
  else
    checkTmaBoxStart(op, op.operand(firstOffset + rank - 1), offsets[rank - 1], dt.elem);
  std::string buffer = b_.materialize(regsOf(op.operand(1)).at(0), RegClass::B32);
  std::string dims = std::to_string(rank) + "d";
  std::string leader = electedThread();
  // The tensor map and shared address of one box: coordinates innermost first.
  auto blockOperands = [&](const std::pair<std::vector<int64_t>, int64_t>& copy) {
    std::string coords = "{";
    for (int d = rank - 1; d >= 0; --d) {
      std::string x = offsets[d];
      if (int64_t delta = copy.first[d]) x = b_.pure("add.s32", RegClass::B32, {x, immInt(delta)});
      coords += x + (d ? ", " : "}");
    }
    std::string offset =
        copy.second ? b_.pure("add.s32", RegClass::B32, {buffer, immInt(copy.second)}) : buffer;
    return std::pair{"[" + tmap + ", " + coords + "]", bracketed(sharedAddress(offset))};
  };
  // eviction_policy: an L2 cache hint through a createpolicy register (the last operand).
  std::string policy = l2CachePolicy(op);
  const std::string hint = policy.empty() ? "" : ".L2::cache_hint";
  if (isLoad) {
    if (hasPred) {
      std::string p = b_.materialize(operand(op, firstOffset + rank).at(0), RegClass::Pred);
      leader = b_.pure("and.pred", RegClass::Pred, {leader, p});
    }
    // The barrier's expected bytes are the whole block's: every box completes a part.
    std::string bar = barrierAddress(op, 2);
    std::string opcode =
        "cp.async.bulk.tensor." + dims + ".shared::cluster.global.mbarrier::complete_tx::bytes";
    if (ir::attr::AsyncDescLoad::twoCtas(op)) {
      // A CTA pair's operand (two_ctas): the box lands in this CTA's buffer and completes its
      // bytes on the barrier at the same offset in the pair's leader (cluster rank & ~1), which
      // .cta_group::2 lets the copy signal.
      if (options_.target != Target::SM100a)
        raiseError(op.loc(), std::string("'") + op.name() +
                                 "' with two_ctas=True loads a Blackwell CTA pair's operand "
                                 "(.cta_group::2), which only sm_100a has; compile for sm_100a");
      if (fn_.numCtas < 2 || fn_.numCtas % 2)
        raiseError(op.loc(), std::string("'") + op.name() +
                                 "' with two_ctas=True runs on a pair of CTAs: launch with "
                                 "clusters of an even number of CTAs, ctas_per_cga=(2, 1, 1)");
      std::string rank = b_.pure("mov.u32", RegClass::B32, {"%cluster_ctarank"});
      std::string leaderRank = b_.pure("and.b32", RegClass::B32, {rank, "0xFFFFFFFE"});
      std::string local = sharedAddress(b_.materialize(regsOf(op.operand(2)).at(0), RegClass::B32));
      bar = bracketed(b_.pure("mapa.shared::cluster.u32", RegClass::B32, {local, leaderRank}));
      opcode += ".cta_group::2";
    }
    std::string mask;
    if (multicast) {
      opcode += ".multicast::cluster";
      // The constant ranks' bits, then 1 << rank for each rank known at run time. A rank past
      // the cluster is the kernel's error (the interpreter reports it); here its bit is dropped
      // with the bits above 15.
      std::string bits = immInt(multicastMask);
      for (unsigned t = 0; t < runtimeTargets; ++t) {
        std::string rank = b_.materialize(operand(op, firstTarget + t).at(0), RegClass::B32);
        std::string bit = b_.pure("shl.b32", RegClass::B32, {"1", rank});
        bits = multicastMask || t
                   ? b_.pure("or.b32", RegClass::B32, {b_.materialize(bits, RegClass::B32), bit})
                   : bit;
      }
      mask = runtimeTargets ? b_.pure("cvt.u16.u32", RegClass::B16, {bits})
                            : b_.pure("mov.b16", RegClass::B16, {bits});
    }
    for (const auto& copy : boxes.copies) {
      auto [global, tile] = blockOperands(copy);
      std::vector<std::string> operands = {tile, global, bar};
      if (multicast) operands.push_back(mask);
      if (!policy.empty()) operands.push_back(policy);
      b_.inst(opcode + hint, operands, leader);
    }
    return;
  }
  // Every thread's generic-proxy writes of the buffer are visible to the bulk copy.
  b_.inst("fence.proxy.async.shared::cta", {});
  barrier();
  // store_reduce: the TMA reduction combines the box into global memory (PTX ISA,
  // cp.reduce.async.bulk.tensor: the operation after the state spaces, its type the map's).
  const std::string reduce = ir::attr::AsyncDescStore::reduce(op);
  const std::string store =
      reduce.empty() ? "cp.async.bulk.tensor." + dims + ".global.shared::cta"
                     : "cp.reduce.async.bulk.tensor." + dims + ".global.shared::cta." + reduce;
  for (const auto& copy : boxes.copies) {
    auto [global, tile] = blockOperands(copy);
    std::vector<std::string> operands = {global, tile};
    if (!policy.empty()) operands.push_back(policy);
    b_.inst(store + ".tile.bulk_group" + hint, operands, leader);
  }
  // One bulk group per store, so that async_descriptor_store_wait(n) counts stores.
  b_.inst("cp.async.bulk.commit_group", {}, leader);
}

void FunctionLowering::checkTmaBoxStart(const ir::Op& op, const ir::Value* inner,
                                        const std::string& reg, ir::DType elem) {
  const int64_t multiple = ir::tmaOffsetMultiple(elem);
  if (multiple <= 1) return;
  const std::string rule = "the innermost offset of a TMA copy (" + ir::tmaCopyName(op) +
                           ") must be 16-byte aligned, a multiple of " + std::to_string(multiple) +
                           " " + std::string(ir::tlName(elem)) + " elements";
  const layout::AxisInfo info = layouts_.axisInfo(inner);
  if (info.constantValue) {
    if (*info.constantValue % multiple != 0)
      raiseError(op.loc(), rule + "; it is " + std::to_string(*info.constantValue) +
                               " (the GPU would stop the kernel with an illegal instruction)");
    return;
  }
  if (!info.divisibility.empty() && info.divisibility[0] % multiple == 0) return;
  std::string low = b_.pure("and.b32", RegClass::B32, {reg, immInt(multiple - 1)});
  std::string bad = b_.pure("setp.ne.u32", RegClass::Pred, {low, "0"});
  std::string ok = b_.newLabel("tma_aligned");
  b_.inst("bra", {ok}, bad, /*negateGuard=*/true);
  assertFailure(op.loc(), rule);
  b_.label(ok);
}

} // namespace ww::codegen
