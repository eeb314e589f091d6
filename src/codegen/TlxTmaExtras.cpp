// Lowering of the TMA-adjacent TLX ops (sm_90a and later): prefetch hints (prefetch.global,
// prefetch.tensormap, cp.async.bulk.prefetch.tensor), 1-D bulk copies (cp.async.bulk) and
// tensor maps that in-kernel descriptors build in global scratch for TMA copies.
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"
#include "ir/TensorMaps.h"

#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

namespace {

int swizzleModeCode(int swizzleBytes) {
  switch (swizzleBytes) {
  case 32:
    return 1;
  case 64:
    return 2;
  case 128:
    return 3;
  default:
    return 0;
  }
}

} // namespace

std::string FunctionLowering::l2CachePolicy(const ir::Op& op) {
  std::string evict;
  switch (op.code()) {
  case OpCode::AsyncDescLoad:
    evict = ir::attr::AsyncDescLoad::evict(op);
    break;
  case OpCode::AsyncDescStore:
    evict = ir::attr::AsyncDescStore::evict(op);
    break;
  case OpCode::AsyncDescPrefetch:
    evict = ir::attr::AsyncDescPrefetch::evict(op);
    break;
  default:
    throw std::logic_error(std::string("codegen: an L2 cache policy for '") + op.name() +
                           "', which has no [evict]");
  }
  if (evict != "evict_first" && evict != "evict_last") return {};
  return b_.pure("createpolicy.fractional.L2::" + evict + ".b64", RegClass::B64, {"1.0"});
}

int FunctionLowering::tmaSwizzleOf(const ir::Value* desc) {
  int swizzle = 0;
  bool found = false;
  ir::walk(fn_.body, [&](const ir::Op& use) {
    bool copy = use.code() == OpCode::AsyncDescLoad || use.code() == OpCode::AsyncDescStore;
    if (found || !copy || use.operand(0) != desc || !isPlainBuffer(use.operand(1))) return;
    swizzle = allocationOf(use, 1).swizzleBytes;
    found = true;
  });
  // Without TLX copies, a descriptor only stored through stages its tiles swizzled.
  return found ? swizzle : storeStagingSwizzle(desc);
}

FunctionLowering::TmaBoxes FunctionLowering::tmaBoxes(const ir::Type& dt, int swizzle) {
  TmaBoxes t;
  const int rank = static_cast<int>(dt.shape.size());
  const int64_t elemBytes = ir::byteWidth(dt.elem);
  // One column block of the tile (all of it when rows fit the swizzle span).
  std::vector<int64_t> region = dt.shape;
  int64_t columnBlocks = 1;
  if (swizzle && region.back() * elemBytes > swizzle) {
    region.back() = swizzle / elemBytes;
    columnBlocks = dt.shape.back() / region.back();
  }
  t.box = region;
  for (int d = rank - 1; d >= 0; --d) {
    if (t.box[d] <= 256) continue;
    if (t.box[d] % 256)
      t.problem = "dimension " + std::to_string(d) + " of " + std::to_string(t.box[d]) +
                  " elements is not a multiple of the 256-element TMA box";
    t.box[d] = 256;
    for (int o = 0; o < d; ++o) t.box[o] = 1;
    break;
  }
  int64_t boxBytes = elemBytes, regionBytes = elemBytes, chunks = 1;
  std::vector<int64_t> grid(rank);
  for (int d = 0; d < rank; ++d) {
    boxBytes *= t.box[d];
    regionBytes *= region[d];
    grid[d] = region[d] / t.box[d];
    chunks *= grid[d];
  }
  if (t.problem.empty() && chunks > 1 && boxBytes % (swizzle ? 8 * swizzle : 128))
    t.problem = "its boxes of " + std::to_string(boxBytes) + " bytes would not start on " +
                (swizzle ? "a swizzle atom (" + std::to_string(8 * swizzle) + " bytes)"
                         : std::string("128-byte boundaries"));
  for (int64_t c = 0; c < columnBlocks; ++c)
    for (int64_t k = 0; k < chunks; ++k) {
      std::vector<int64_t> coords(rank);
      for (int d = rank - 1; d >= 0; --d) {
        int64_t inner = 1;
        for (int e = d + 1; e < rank; ++e) inner *= grid[e];
        coords[d] = (k / inner) % grid[d] * t.box[d];
      }
      coords.back() += c * region.back();
      t.copies.emplace_back(std::move(coords), c * regionBytes + k * boxBytes);
    }
  return t;
}

void FunctionLowering::lowerTlxTmaExtras(const ir::Op& op) {
  if (options_.target == Target::SM80)
    raiseError(op.loc(), std::string("'") + op.name() + "' needs sm_90a or sm_100a (" +
                             (op.code() == OpCode::Prefetch ? "prefetch hints are emitted there"
                                                            : "the Tensor Memory Accelerator") +
                             ")");
  switch (op.code()) {
  case OpCode::Prefetch: {
    const std::string opcode = "prefetch.global." + ir::attr::Prefetch::level(op);
    bool hasMask = ir::attr::Prefetch::hasMask(op);
    const Regs& ptrs = operand(op, 0);
    const Regs* mask = hasMask ? &operand(op, 1) : nullptr;
    const ir::Value* ptr = op.operand(0);
    const LinearLayout* l = ptr->type().isTensor() ? &operandLayoutOf(op, 0) : nullptr;
    int32_t dup = l ? l->freeVariableMask(layout::kRegister) : 0;
    std::string owner = l ? ownerPredicate(*l) : electedThread();
    for (size_t r = 0; r < ptrs.size(); ++r) {
      if (static_cast<int32_t>(r) & dup) continue;
      std::string guard = owner;
      if (mask) {
        std::string m = b_.materialize(mask->at(mask->size() == 1 ? 0 : r), RegClass::Pred);
        guard = guard.empty() ? m : b_.pure("and.pred", RegClass::Pred, {guard, m});
      }
      b_.inst(opcode, {bracketed(b_.materialize(ptrs[r], RegClass::B64))}, guard);
    }
    return;
  }
  case OpCode::PrefetchTensormap:
    // A generic address: a host descriptor's is its kernel parameter's, an in-kernel one's its
    // global scratch.
    b_.inst("prefetch.tensormap", {bracketed(operand(op, 0).at(0))}, electedThread());
    return;
  case OpCode::AsyncDescPrefetch: {
    const ir::Type& dt = op.operand(0)->type();
    int rank = static_cast<int>(dt.shape.size());
    bool hasPred = ir::attr::AsyncDescPrefetch::hasPred(op);
    if (rank < 1 || rank > 5 || op.numOperands() != 1u + rank + (hasPred ? 1 : 0))
      throw std::logic_error("codegen: malformed async_desc_prefetch");
    std::string leader = electedThread();
    if (hasPred)
      leader = b_.pure("and.pred", RegClass::Pred,
                       {leader, b_.materialize(operand(op, 1 + rank).at(0), RegClass::Pred)});
    std::string tmap = operand(op, 0).at(0);
    std::vector<std::string> offsets(rank);
    for (int d = 0; d < rank; ++d)
      offsets[d] = b_.materialize(operand(op, 1 + d).at(0), RegClass::B32);
    std::string policy = l2CachePolicy(op);
    std::string opcode =
        "cp.async.bulk.prefetch.tensor." + std::to_string(rank) + "d.L2.global.tile";
    if (!policy.empty()) opcode += ".L2::cache_hint";
    // The tensor map's box is one column block of a swizzled tile: prefetch each block. One
    // instruction covers the whole tile otherwise.
    for (const auto& copy : tmaBoxes(dt, tmaSwizzleOf(op.operand(0))).copies) {
      std::string coords = "{";
      for (int d = rank - 1; d >= 0; --d) {
        std::string x = offsets[d];
        if (int64_t delta = copy.first[d])
          x = b_.pure("add.s32", RegClass::B32, {x, immInt(delta)});
        coords += x + (d ? ", " : "}");
      }
      std::vector<std::string> operands = {bracketed(tmap + ", " + coords)};
      if (!policy.empty()) operands.push_back(policy);
      b_.inst(opcode, operands, leader);
    }
    return;
  }
  case OpCode::AsyncBulkLoad:
  case OpCode::AsyncBulkStore: {
    bool isLoad = op.code() == OpCode::AsyncBulkLoad;
    if (!isPlainBuffer(op.operand(1)))
      raiseError(op.loc(), std::string(isLoad ? "tlx.async_load(bulk=True)" : "tlx.async_store") +
                               " needs a buffer from tlx.local_alloc or its local_view, not a "
                               "transposed, sliced or reinterpreted view");
    allocationOf(op, 1);
    std::string global = bracketed(b_.materialize(operand(op, 0).at(0), RegClass::B64));
    std::string shared =
        bracketed(sharedAddress(b_.materialize(regsOf(op.operand(1)).at(0), RegClass::B32)));
    std::string bytes = b_.materialize(operand(op, isLoad ? 3 : 2).at(0), RegClass::B32);
    std::string leader = electedThread();
    if (isLoad) {
      // The .shared::cta destination is PTX ISA 8.6.
      needsPtx86_ = true;
      b_.inst("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes",
              {shared, global, bytes, barrierAddress(op, 2)}, leader);
      return;
    }
    // Every thread's generic-proxy writes of the buffer are visible to the bulk copy.
    b_.inst("fence.proxy.async.shared::cta", {});
    barrier();
    b_.inst("cp.async.bulk.global.shared::cta.bulk_group", {global, shared, bytes}, leader);
    // One bulk group per store, as async_descriptor_store's: async_descriptor_store_wait counts.
    b_.inst("cp.async.bulk.commit_group", {}, leader);
    return;
  }
  default:
    throw std::logic_error("codegen: not a TMA-adjacent op");
  }
}

void FunctionLowering::lowerDeviceTensorMap(const ir::Op& op) {
  if (options_.target == Target::SM80)
    raiseError(op.loc(), "'make_desc': a tensor descriptor made in the kernel and used by TMA "
                         "copies or prefetches needs sm_90a or sm_100a; sm_80 has no TMA");
  const ir::Type& dt = op.result()->type();
  const int rank = static_cast<int>(dt.shape.size());
  const int64_t slotCount = ir::attr::MakeDescriptor::slotCount(op);
  if (rank < 1 || rank > 5 || op.numOperands() != 1u + 2 * rank + (slotCount > 0 ? 1u : 0u))
    throw std::logic_error("codegen: malformed make_desc");
  if (std::string problem = ir::tensorMapProblem(op); !problem.empty())
    raiseError(op.loc(), problem);
  const int elemType = ir::tensorMapElemType(dt.elem);
  const int64_t elemBytes = ir::byteWidth(dt.elem);
  // Every copy through the map (TLX's, the pipeliner's, desc.load / desc.store's) uses its
  // swizzle: recorded here, before any of them is lowered.
  const int swizzle = tmaSwizzleOf(op.result());
  requireDescriptorSwizzle(op, op.result(), swizzle);
  const TmaBoxes boxes = tmaBoxes(dt, swizzle);
  if (!boxes.problem.empty())
    raiseError(op.loc(), "a tensor descriptor of " + dt.str() +
                             " cannot be split into TMA boxes (at most 256 elements per "
                             "dimension): " +
                             boxes.problem);

  // This program's 128 bytes of slot `slot`: slots are laid out one after another, each
  // holding every program's tensor map (program ids linearized x fastest). A descriptor made in
  // a tlx.allocate_tensor_descriptor slot is written to that allocation's slots (reserved at
  // their first use), at the index its last operand holds, which may be chosen at run time.
  int64_t slot;
  if (slotCount > 0) {
    auto [it, fresh] = descriptorStorage_.try_emplace(ir::attr::MakeDescriptor::slotStorage(op),
                                                      deviceTensorMaps_);
    if (fresh) deviceTensorMaps_ += static_cast<int>(slotCount);
    slot = it->second;
  } else {
    slot = deviceTensorMaps_++;
  }
  needsPtx86_ = true;
  std::string scratch = b_.pure("ld.param.u64", RegClass::B64, {bracketed(scratchParam_)});
  auto special = [&](const char* reg) { return b_.pure("mov.u32", RegClass::B32, {reg}); };
  std::string pid = b_.pure("mad.lo.u32", RegClass::B32,
                            {special("%ctaid.z"), special("%nctaid.y"), special("%ctaid.y")});
  pid = b_.pure("mad.lo.u32", RegClass::B32, {pid, special("%nctaid.x"), special("%ctaid.x")});
  std::string index = b_.pure("cvt.u64.u32", RegClass::B64, {pid});
  if (slot) {
    std::string programs =
        b_.pure("mul.lo.u32", RegClass::B32, {special("%nctaid.x"), special("%nctaid.y")});
    programs = b_.pure("mul.lo.u32", RegClass::B32, {programs, special("%nctaid.z")});
    std::string before = b_.pure("mul.wide.u32", RegClass::B64,
                                 {programs, b_.materialize(immInt(slot), RegClass::B32)});
    index = b_.pure("add.u64", RegClass::B64, {index, before});
  }
  if (slotCount > 0) {
    // Slot `slot + i` of the allocation: i whole slots (every program's) further on.
    std::string programs =
        b_.pure("mul.lo.u32", RegClass::B32, {special("%nctaid.x"), special("%nctaid.y")});
    programs = b_.pure("mul.lo.u32", RegClass::B32, {programs, special("%nctaid.z")});
    std::string i = b_.materialize(operand(op, 1 + 2 * rank).at(0), RegClass::B32);
    index = b_.pure("add.u64", RegClass::B64,
                    {index, b_.pure("mul.wide.u32", RegClass::B64, {programs, i})});
  }
  std::string addr =
      b_.pure("mad.lo.u64", RegClass::B64, {index, b_.materialize("128", RegClass::B64), scratch});

  // One thread writes the map: zeros, then each field (tensormap.replace), then releases it to
  // the tensormap proxy; after the barrier every thread acquires it before any TMA use.
  std::string leader = electedThread();
  std::string zero = b_.materialize("0", RegClass::B32);
  std::string zeros = "{" + zero + ", " + zero + ", " + zero + ", " + zero + "}";
  for (int i = 0; i < 8; ++i)
    b_.inst("st.global.v4.b32", {bracketed(addr + "+" + std::to_string(16 * i)), zeros}, leader);
  const std::string at = bracketed(addr);
  auto replace = [&](const std::string& field, const char* type, std::vector<std::string> args) {
    args.insert(args.begin(), at);
    b_.inst("tensormap.replace.tile." + field + ".global.b1024." + type, args, leader);
  };
  replace("global_address", "b64", {b_.materialize(operand(op, 0).at(0), RegClass::B64)});
  replace("rank", "b32", {immInt(rank - 1)});
  // Dimensions innermost first, as the driver's encoding lists them.
  for (int i = 0; i < rank; ++i)
    replace("box_dim", "b32", {immInt(i), immInt(boxes.box[rank - 1 - i])});
  for (int i = 0; i < rank; ++i)
    replace("global_dim", "b32",
            {immInt(i), b_.materialize(operand(op, rank - i).at(0), RegClass::B32)});
  for (int i = 0; i + 1 < rank; ++i) {
    // Strides of the outer dimensions, in bytes (the innermost is 1 element).
    std::string stride = b_.materialize(operand(op, 2 * rank - 1 - i).at(0), RegClass::B64);
    replace("global_stride", "b64",
            {immInt(i), b_.pure("mul.lo.s64", RegClass::B64, {stride, immInt(elemBytes)})});
  }
  for (int i = 0; i < rank; ++i) replace("element_stride", "b32", {immInt(i), "1"});
  replace("elemtype", "b32", {immInt(elemType)});
  replace("interleave_layout", "b32", {"0"});
  replace("swizzle_mode", "b32", {immInt(swizzleModeCode(swizzle))});
  replace("fill_mode", "b32", {"0"});
  b_.inst("fence.proxy.tensormap::generic.release.gpu", {}, leader);
  barrier();
  b_.inst("fence.proxy.tensormap::generic.acquire.gpu", {at, "128"});
  // An empty bulk group waited for right after: Triton's guard against ptxas dropping the
  // ordering the acquire gives (its TMAToLLVM.cpp).
  b_.inst("cp.async.bulk.commit_group", {});
  b_.inst("cp.async.bulk.wait_group.read", {"0"});
  bind(op.result(), {addr});
}

} // namespace ww::codegen
