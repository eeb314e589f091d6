// Lowering of the distributed-shared-memory stores of a thread-block cluster (sm_90a and later):
// tlx.async_remote_shmem_store (st.async, completing its bytes on the peer's mbarrier) and
// tlx.remote_shmem_store (st.shared::cluster), both to a buffer's offset in a peer CTA.
#include "codegen/Lowering.h"
#include "ir/OpTraits.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

namespace {

/// A local_alloc or a local_view of one: its elements sit where the allocation's layout puts
/// them, at the same offsets in every CTA of the cluster.
bool isAllocationOrView(const ir::Value* v) {
  const ir::Op* def = v->def();
  while (def && def->code() == OpCode::LocalView) def = def->operand(0)->def();
  return def && def->code() == OpCode::LocalAlloc;
}

bool isRemoteStore(OpCode c) {
  return c == OpCode::AsyncRemoteStore || c == OpCode::RemoteStore || c == OpCode::AsyncRemoteCopy;
}

/// Whether `op` follows another remote store of its block with only register arithmetic in
/// between: that store's bar.sync already ordered the agent's earlier shared-memory reads, and
/// nothing since has read shared memory, so a kernel pushing to every peer in turn pays for one.
bool followsRemoteStore(const ir::Op& op) {
  const ir::Block* block = op.parentBlock();
  if (!block) return false;
  const ir::Op* previous = nullptr;
  for (const auto& o : block->ops()) {
    if (o.get() == &op) break;
    bool registersOnly =
        o->numRegions() == 0 &&
        (ir::isElementwise(o->code()) || ir::isShapeOp(o->code()) || ir::isBufferView(o->code()) ||
         o->code() == OpCode::Constant || o->code() == OpCode::ClusterCtaRank ||
         o->code() == OpCode::ClusterSize || o->code() == OpCode::ProgramId);
    if (isRemoteStore(o->code()))
      previous = o.get();
    else if (!registersOnly)
      previous = nullptr;
  }
  return previous != nullptr;
}

/// The PTX type of one stored unit: the element's own 32- or 64-bit type, or b32 words packing
/// pairs of 16-bit elements.
std::string unitType(DType elem, int elemBytes, bool packed) {
  if (packed) return "b32";
  switch (elem) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  default:
    return elemBytes == 8 ? "b64" : elemBytes == 4 ? "b32" : elemBytes == 2 ? "b16" : "u8";
  }
}

} // namespace

void refuseRemoteStoresOn(const ir::Function& fn, Target target) {
  ir::walk(fn.body, [&](const ir::Op& op) {
    if (!isRemoteStore(op.code())) return;
    if (target == Target::SM80)
      raiseError(op.loc(), std::string("tlx.") + op.name() +
                               " needs sm_90 or later (thread-block clusters and distributed "
                               "shared memory); compile for sm_90a or sm_100a");
  });
}

void FunctionLowering::lowerTlxRemoteStore(const ir::Op& op) {
  bool async = op.code() == OpCode::AsyncRemoteStore;
  const std::string what = std::string("tlx.") + op.name();
  if (fn_.numCtas <= 1) {
    // As in TLX, a kernel without a cluster compiles (the store may sit in a branch that a
    // 1-CTA launch never takes, as a rank != 0 test). The H200 raised an illegal instruction
    // for st.async launched without a cluster, even into the CTA's own shared memory: a store
    // that runs reports its line and traps instead.
    const SourceLoc& l = op.loc();
    std::string where = fn_.name;
    if (sources_ && l.valid() && l.file < sources_->numFiles())
      where = sources_->path(l.file) + ":" + std::to_string(l.line);
    b_.printf(PtxBuilder::escapePrintf(where + ": " + ir::remoteStoreWithoutClusterMessage(op)) +
                  "\n",
              {}, electedThread());
    b_.inst("trap", {});
    return agentSyncNotNeeded(); // the kernel ends here
  }
  if (op.code() == OpCode::AsyncRemoteCopy) return lowerTlxRemoteCopy(op);
  // sm_80 was refused before lowering began (refuseRemoteStoresOn).
  const ir::Value* dst = op.operand(0);
  const ir::Value* src = op.operand(1);
  if (!isAllocationOrView(dst))
    raiseError(op.loc(), what + "'s dst must be a buffer from tlx.local_alloc or a local_view of "
                                "one; slices, transposes and reinterprets are not supported");
  const layout::SharedAllocation& alloc = allocationOf(op, 0);
  if (!alloc.padding.empty())
    raiseError(op.loc(), what + " into " + dst->type().str() +
                             " allocated with layout=" + alloc.userLayout +
                             " is not supported by the PTX backend: padded buffers are written "
                             "by tlx.local_store only");
  if (alloc.layout.numOutDims() == 0 || alloc.layout.getTotalOutDimSize() == 0)
    raiseError(op.loc(), what + " into a buffer of shape " + dst->type().str() +
                             " is not supported; use power-of-two dims");
  if (!src->type().isTensor())
    throw std::logic_error("codegen: a remote store of a scalar (the specializer broadcasts it)");
  const int64_t clusterSize = std::max(1, fn_.numCtas);
  if (std::optional<int64_t> r = ir::constantInt(op.operand(2)); r && *r >= clusterSize)
    raiseError(op.loc(), what + "'s remote_cta_rank " + std::to_string(*r) +
                             " is outside the cluster of " + std::to_string(clusterSize) + " CTA" +
                             (clusterSize == 1 ? "" : "s") + " (ranks 0.." +
                             std::to_string(clusterSize - 1) +
                             "); launch with ctas_per_cga=(n, 1, 1) for clusters of n");
  DType elem = dst->type().elem;
  int bytes = ir::byteWidth(elem);
  const LinearLayout& l = operandLayoutOf(op, 1);
  LinearLayout coordsToOffset = alloc.layout.invert();
  OffsetFn offsetOf = [&coordsToOffset](const std::vector<int32_t>& c) -> int64_t {
    return coordsToOffset.apply(c).at(0);
  };
  // Elements per store: consecutive in the thread's registers and in the buffer, at most 16
  // bytes; st.async moves 32- and 64-bit units only, so 16-bit elements go as packed pairs.
  int32_t v = sharedVectorWidth(l, offsetOf, bytes);
  bool packed = bytes == 2 && v >= 2;
  if (async && (bytes == 1 || (bytes == 2 && !packed)))
    raiseError(op.loc(), what + " of " + src->type().str() +
                             ": st.async stores 4- and 8-byte units, and " +
                             (bytes == 1 ? std::string("8-bit elements are not packed into them")
                                         : "no thread holds 2 consecutive elements of this "
                                           "layout to pack into one") +
                             "; store a 32-bit type (e.g. .to(tl.float32))");
  if (bytes == 1) v = 1;

  // Every thread of the agent is past its earlier reads of the buffer before any of them writes
  // it (a CTA that pushes to itself, or a peer that reuses a slot), as the interpreter runs the
  // agent's store as one step.
  if (!followsRemoteStore(op))
    barrier();
  else
    agentSyncNotNeeded();

  const Regs& values = operand(op, 1);
  RegClass cls = regClassOf(elem);
  // The peer's addresses: the buffer's and the barrier's local shared-memory addresses mapped to
  // CTA `rank` (the shared::cluster window keeps each CTA's shared memory contiguous, so one mapa
  // of the buffer's base serves every element).
  std::string rank = b_.materialize(operand(op, 2).at(0), RegClass::B32);
  std::string localBase = sharedAddress(b_.materialize(regsOf(dst).at(0), RegClass::B32));
  std::string remoteBase = b_.pure("mapa.shared::cluster.u32", RegClass::B32, {localBase, rank});
  std::string remoteBar;
  if (async) {
    allocationOf(op, 3);
    std::string localBar =
        sharedAddress(b_.materialize(regsOf(op.operand(3)).at(0), RegClass::B32));
    remoteBar = bracketed(b_.pure("mapa.shared::cluster.u32", RegClass::B32, {localBar, rank}));
  }
  int32_t hwBits = 0;
  std::string hw = tidLinear(offsetImages(l, offsetOf, bytes), &hwBits);
  // Each element once: threads holding copies of an element (lanes or warps the layout
  // broadcasts over) leave it to the first of them, and duplicate registers are skipped, so the
  // bytes stored are exactly those the peer's barrier_expect_bytes counts.
  std::string owner = ownerPredicate(l);
  int32_t dup = l.freeVariableMask(layout::kRegister);
  std::string opcode =
      async ? "st.async.shared::cluster.mbarrier::complete_tx::bytes" : "st.shared::cluster";
  for (int32_t r = 0; r < l.getInDimSize(layout::kRegister); r += v) {
    if (r & dup) continue;
    int64_t off = offsetOf(registerCoords(l, r)) * bytes;
    std::string addr = xorConst(hw, hwBits, static_cast<int32_t>(off));
    addr = addr == "0" ? remoteBase : b_.pure("add.s32", RegClass::B32, {remoteBase, addr});
    std::vector<std::string> units;
    for (int32_t k = 0; k < v; ++k) {
      std::string x = b_.materialize(values.at(static_cast<size_t>(r + k)), cls);
      if (elem == DType::I1) x = b_.pure("selp.u16", RegClass::B16, {"1", "0", x});
      units.push_back(x);
    }
    if (packed) {
      std::vector<std::string> words;
      for (size_t k = 0; k + 1 < units.size(); k += 2)
        words.push_back(
            b_.pure("mov.b32", RegClass::B32, {"{" + units[k] + ", " + units[k + 1] + "}"}));
      units = std::move(words);
    }
    std::string list;
    for (size_t k = 0; k < units.size(); ++k) list += (k ? ", " : "") + units[k];
    if (units.size() > 1) list = "{" + list + "}";
    std::string vec = units.size() == 1 ? "" : units.size() == 2 ? ".v2" : ".v4";
    std::vector<std::string> operands{bracketed(addr), list};
    if (async) operands.push_back(remoteBar);
    b_.inst(opcode + vec + "." + unitType(elem, bytes, packed), operands, owner);
  }
}

void FunctionLowering::lowerTlxRemoteCopy(const ir::Op& op) {
  const std::string what = std::string("tlx.") + op.name();
  // As TLX lowers it: one bulk copy of src's bytes, from src's start to dst's start (a slice's
  // offset included). That moves elements to their places when both views are contiguous bytes
  // laid out alike, say a [128, 64] buffer into rows 128..255 of a [256, 64] one with the same
  // swizzle (TLX's attention backward exchanges dS so); anything else would scatter them.
  std::optional<LinearLayout> dstBytes = contiguousViewBytes(op, 0);
  std::optional<LinearLayout> srcBytes = contiguousViewBytes(op, 1);
  for (unsigned i : {0u, 1u})
    if (!(i == 0 ? dstBytes : srcBytes))
      raiseError(op.loc(), what + "'s " + (i == 0 ? "dst " : "src ") + op.operand(i)->type().str() +
                               " is not one contiguous range of shared memory; the bulk copy "
                               "moves bytes, so use a buffer, a local_view of one, or a slice of "
                               "whole rows at a multiple of the swizzle period");
  if (op.operand(0)->type().shape != op.operand(1)->type().shape || !(*dstBytes == *srcBytes))
    raiseError(op.loc(), what + ": dst " + op.operand(0)->type().str() + " and src " +
                             op.operand(1)->type().str() +
                             " are laid out differently in shared memory (shape or swizzle), so "
                             "copying src's bytes would not put its elements at dst's places");
  const ir::Type& st = op.operand(1)->type();
  int64_t bytes = ir::byteWidth(st.elem);
  for (int64_t d : st.shape) bytes *= d;
  const int64_t clusterSize = std::max(1, fn_.numCtas);
  if (std::optional<int64_t> r = ir::constantInt(op.operand(2)); r && *r >= clusterSize)
    raiseError(op.loc(), what + "'s remote_cta_rank " + std::to_string(*r) +
                             " is outside the cluster of " + std::to_string(clusterSize) +
                             " CTAs (ranks 0.." + std::to_string(clusterSize - 1) + ")");
  allocationOf(op, 0);
  allocationOf(op, 1);
  allocationOf(op, 3);
  // Every thread's earlier writes of src (and their proxy fences) are done before one thread
  // starts the copy, which reads src through the async proxy.
  barrier();
  std::string rank = b_.materialize(operand(op, 2).at(0), RegClass::B32);
  auto local = [&](unsigned i) {
    return sharedAddress(b_.materialize(regsOf(op.operand(i)).at(0), RegClass::B32));
  };
  std::string dst = b_.pure("mapa.shared::cluster.u32", RegClass::B32, {local(0), rank});
  std::string bar = b_.pure("mapa.shared::cluster.u32", RegClass::B32, {local(3), rank});
  b_.inst("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes",
          {bracketed(dst), bracketed(local(1)), immInt(bytes), bracketed(bar)}, electedThread());
}

} // namespace ww::codegen
