#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"

#include "layout/Layouts.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <bit>
#include <map>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

namespace {

const char* const kSharedBase = "global_smem";

int log2Exact(int64_t v) {
  return std::countr_zero(static_cast<uint64_t>(v));
}

/// The register holding one element of a value of type `t`.
RegClass elemClass(const ir::Type& t) {
  return regClassOf(t.elem, t.pointer);
}

/// Bytes one element takes in memory (i1 as a byte, pointers as 8).
int memBytes(const ir::Type& t) {
  return t.elemBytes();
}

} // namespace

std::string memType(const ir::Type& t) {
  if (t.pointer) return "b64";
  switch (t.elem) {
  case DType::I1:
  case DType::U8:
    return "u8";
  case DType::I8:
    return "s8";
  case DType::F8E4M3:
  case DType::F8E5M2:
  case DType::F8E4B15:
  case DType::F8E4B8:
  case DType::F8E5B16:
    return "b8";
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  default:
    return bitType(t.elem);
  }
}

namespace {

/// The basis values of every bit of `inDim` along every out dim ([bit][outDim]).
std::vector<std::vector<int32_t>> basesOf(const LinearLayout& l, const std::string& inDim) {
  std::vector<std::vector<int32_t>> out;
  for (int bit = 0; bit < l.getInDimSizeLog2(inDim); ++bit) out.push_back(l.getBasis(inDim, bit));
  return out;
}

/// A layout with the same in dims as `hw` whose every basis is transformed by `f` (coords of
/// hw's outputs -> coords of `outDims`).
template <typename F>
LinearLayout mapBases(const LinearLayout& hw, const std::vector<int64_t>& outShape, F&& f) {
  LinearLayout::Bases bases;
  for (const auto& in : hw.inDimNames()) {
    std::vector<std::vector<int32_t>> vs;
    for (const auto& b : basesOf(hw, in)) vs.push_back(f(b));
    bases.emplace_back(in, std::move(vs));
  }
  LinearLayout::NamedSizes outs;
  for (size_t d = 0; d < outShape.size(); ++d)
    outs.emplace_back(layout::dimName(static_cast<int>(d)), static_cast<int32_t>(outShape[d]));
  return LinearLayout(std::move(bases), std::move(outs));
}

/// Row-major linear index of `coords` in `shape` (powers of two: bit concatenation, so this is
/// linear over GF(2) and may be applied to bases).
int64_t rowMajor(const std::vector<int32_t>& coords, const std::vector<int64_t>& shape) {
  int64_t idx = 0;
  for (size_t d = 0; d < shape.size(); ++d) idx = idx * shape[d] + coords[d];
  return idx;
}

std::vector<int32_t> fromRowMajor(int64_t idx, const std::vector<int64_t>& shape) {
  std::vector<int32_t> c(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = static_cast<int32_t>(idx % shape[d]);
    idx /= shape[d];
  }
  return c;
}

} // namespace

int64_t maxSharedBytes(Target target) {
  return target == Target::SM80 ? 166912 : 232448;
}

std::vector<int32_t> registerCoords(const LinearLayout& l, int32_t reg) {
  std::vector<int32_t> c(l.numOutDims(), 0);
  for (int bit = 0; bit < l.getInDimSizeLog2(layout::kRegister); ++bit)
    if (reg >> bit & 1) {
      const auto& basis = l.getBasis(layout::kRegister, bit);
      for (size_t d = 0; d < c.size(); ++d) c[d] ^= basis[d];
    }
  return c;
}

std::vector<int32_t> constancyRepresentatives(const LinearLayout& l,
                                              const std::vector<int64_t>& constancy) {
  int32_t n = l.getInDimSize(layout::kRegister);
  std::vector<int32_t> rep(n);
  std::map<std::vector<int32_t>, int32_t> firstOfBlock;
  for (int32_t r = 0; r < n; ++r) {
    std::vector<int32_t> block = registerCoords(l, r);
    for (size_t d = 0; d < block.size(); ++d) {
      // Runs of the largest power of two dividing the constancy (AxisInfo's are powers of two).
      uint64_t c = d < constancy.size() && constancy[d] > 1 ? constancy[d] : 1;
      block[d] >>= std::min(std::countr_zero(c), 31);
    }
    rep[r] = firstOfBlock.emplace(std::move(block), r).first->second;
  }
  return rep;
}

// ---------------------------------------------------------------------------------------------
// Set-up and driving
// ---------------------------------------------------------------------------------------------

FunctionLowering::FunctionLowering(const ir::Function& fn, const CompileOptions& options,
                                   const SourceManager* sources)
    : fn_(fn), options_(options), sources_(sources) {
  if (!isPowerOf2(fn.numWarps) || fn.numWarps > 32)
    raiseError(fn.loc, "num_warps=" + std::to_string(fn.numWarps) +
                           " is not supported; use a power of two from 1 to 32");
  refuseRemoteStoresOn(fn, options.target);
  CompileOptions layoutOptions = options;
  layoutOptions.numWarps = fn.numWarps;
  layouts_ = layout::assignLayouts(fn, layoutOptions);
  sharedBytes_ = layouts_.sharedBytes();
  planTensorMemory();
  totalWarps_ = fn.numWarps;
  bool tasks = false;
  ir::walk(fn.body, [&](const ir::Op& op) {
    for (const ir::Value* v : op.operands()) ++uses_[v];
    tasks |= op.code() == OpCode::AsyncTasks;
  });
  // The warps and registers of the launch come from the async tasks' plan (TlxTasks.cpp).
  if (tasks) {
    taskPlan_ = ir::planAsyncTasks(fn);
    totalWarps_ = taskPlan_->totalWarps;
    maxRegisters_ = taskPlan_->maxRegisters;
  }
}

void FunctionLowering::bind(const ir::Value* v, Regs regs) {
  values_[v] = std::move(regs);
}

const Regs& FunctionLowering::regsOf(const ir::Value* v) const {
  auto it = values_.find(v);
  if (it == values_.end())
    throw std::logic_error("codegen: value used before it was lowered (" + v->type().str() + ")");
  return it->second;
}

const layout::LinearLayout& FunctionLowering::layoutOf(const ir::Value* v) const {
  if (auto it = rematLayouts_.find(v); it != rematLayouts_.end()) return it->second;
  return layouts_.layout(v);
}

const layout::LinearLayout& FunctionLowering::operandLayoutOf(const ir::Op& op, unsigned i) const {
  if (!rematLayouts_.empty()) return layoutOf(op.operand(i));
  return layouts_.operandLayout(op, i);
}

Regs FunctionLowering::rematerialize(const layout::Conversion& c) {
  // Lower the chain again with its new layouts, then restore the original registers.
  std::unordered_map<const ir::Value*, Regs> saved;
  for (const auto& [v, l] : c.remat) {
    if (auto it = values_.find(v); it != values_.end()) saved[v] = it->second;
    rematLayouts_[v] = l;
  }
  for (const auto& [v, l] : c.remat) {
    if (!v->def()) throw std::logic_error("codegen: rematerialization of a block argument");
    lowerOp(*v->def());
  }
  Regs out = regsOf(c.value);
  for (const auto& [v, l] : c.remat) {
    rematLayouts_.erase(v);
    if (auto it = saved.find(v); it != saved.end()) values_[v] = it->second;
  }
  return out;
}

void FunctionLowering::convertInvariantsBefore(const ir::Op& loop) {
  // Registers a converted value adds for the whole loop: small vectors (a row statistic
  // broadcast against a tile, attention's m and Di) pay for themselves at once; a large tile
  // converted once per iteration may fit where its converted copy held across the loop spills.
  constexpr int32_t kMaxHeldRegisters = 16;
  if (!rematLayouts_.empty()) return;
  for (const layout::Conversion& c : layouts_.conversions()) {
    if (c.hoistBefore != &loop || (c.kind != layout::ConversionKind::SharedMemory &&
                                   c.kind != layout::ConversionKind::WarpShuffle))
      continue;
    const LinearLayout& to = layouts_.operandLayout(*c.user, c.operandIndex);
    if (to.getInDimSize(layout::kRegister) > kMaxHeldRegisters) continue;
    auto& perOp = converted_[c.user];
    if (perOp.count(c.operandIndex)) continue;
    DType elem = c.value->type().pointer ? DType::I64 : c.value->type().elem;
    perOp[c.operandIndex] = convert(regsOf(c.value), layoutOf(c.value), to, elem, *c.user);
  }
}

const Regs& FunctionLowering::operand(const ir::Op& op, unsigned i) {
  const ir::Value* v = op.operand(i);
  if (!rematLayouts_.empty() || !v->type().isTensor() || !layouts_.hasLayout(v) ||
      !layouts_.needsConversion(op, i))
    return regsOf(v);
  auto& perOp = converted_[&op];
  if (auto it = perOp.find(i); it != perOp.end()) return it->second;
  for (const layout::Conversion& c : layouts_.conversions())
    if (c.user == &op && c.operandIndex == i && c.kind == layout::ConversionKind::Rematerialize &&
        !c.remat.empty())
      return perOp[i] = rematerialize(c);
  DType elem = v->type().pointer ? DType::I64 : v->type().elem;
  Regs regs = convert(regsOf(v), layoutOf(v), operandLayoutOf(op, i), elem, op);
  return perOp[i] = std::move(regs);
}

void FunctionLowering::lowerBlock(const ir::Block& block) {
  // A block starts at a join of paths (loop back edges, branches): no barrier is known met.
  sharedSinceBarrier_ = anySharedSinceBarrier_ = true;
  for (const auto& op : block.ops()) {
    lowerOp(*op);
    switch (op->code()) {
    case OpCode::For:
    case OpCode::If:
    case OpCode::While:
    case OpCode::AsyncTasks:
      sharedSinceBarrier_ = anySharedSinceBarrier_ = true;
      break;
    default:
      break;
    }
  }
}

std::string FunctionLowering::movOpcode(RegClass c) const {
  static const char* const movs[] = {"mov.pred", "mov.b16", "mov.b32",
                                     "mov.b64",  "mov.f32", "mov.f64"};
  return movs[static_cast<int>(c)];
}

void FunctionLowering::lowerOp(const ir::Op& op) {
  if (rematLayouts_.empty()) reuseBarrier(op);
  const uint64_t syncsBefore = agentSyncs_;
  dispatchOp(op);
  if (ir::lowersWithAgentBarrier(op.code()) && agentSyncs_ == syncsBefore)
    throw std::logic_error(std::string("codegen: '") + op.name() +
                           "' has Ops.def's AgentBarrier trait, but its lowering synced no agent "
                           "(barrier(), or agentSynced() / agentSyncNotNeeded() where it may)");
}

void FunctionLowering::dispatchOp(const ir::Op& op) {
  b_.setLoc(op.loc());
  if (ir::accessesSharedBuffers(op.code())) sharedSinceBarrier_ = anySharedSinceBarrier_ = true;
  // Value hints are elementwise too but only forward their operand (handled below); a stochastic
  // rounding converts two of a thread's elements per instruction.
  if (op.code() == OpCode::StochRound) return lowerStochRound(op);
  if (ir::isElementwise(op.code()) && !ir::isValueHint(op.code())) return lowerElementwise(op);
  switch (op.code()) {
  case OpCode::Constant:
    return lowerConstant(op);
  case OpCode::ProgramId:
  case OpCode::NumPrograms: {
    int64_t axis = op.code() == OpCode::ProgramId ? ir::attr::ProgramId::axis(op)
                                                  : ir::attr::NumPrograms::axis(op);
    if (axis < 0 || axis > 2)
      raiseError(op.loc(),
                 std::string(op.name()) + " axis must be 0, 1 or 2, not " + std::to_string(axis));
    std::string sreg =
        std::string(op.code() == OpCode::ProgramId ? "%ctaid." : "%nctaid.") + "xyz"[axis];
    return bind(op.result(), {b_.pure("mov.u32", RegClass::B32, {sreg})});
  }
  case OpCode::ThreadId: {
    if (ir::attr::ThreadId::axis(op) != 0) return bind(op.result(), {"0"});
    return bind(op.result(), {tid()});
  }
  case OpCode::Arange:
    return lowerArange(op);
  case OpCode::Splat:
  case OpCode::Broadcast:
  case OpCode::ExpandDims:
  case OpCode::Reshape:
  case OpCode::Permute:
  case OpCode::Join:
  case OpCode::Split:
  case OpCode::Cat:
    return lowerShapeOp(op);
  case OpCode::MultipleOf:
  case OpCode::MaxContiguous:
    return bind(op.result(), operand(op, 0));
  case OpCode::Load:
    return lowerLoad(op);
  case OpCode::Store:
    return lowerStore(op);
  case OpCode::AtomicRMW:
  case OpCode::AtomicCas:
    return lowerAtomic(op);
  case OpCode::DescLoad:
  case OpCode::DescStore:
    return lowerDescriptorCopy(op);
  case OpCode::Reduce:
    return lowerReduce(op);
  case OpCode::Scan:
    return lowerScan(op);
  case OpCode::Print:
  case OpCode::Assert:
    return lowerDebugOp(op);
  case OpCode::DumpLayout: // printed / checked and removed by the compile (driver/Compile.cpp)
  case OpCode::AssertSameLayout:
    return;
  case OpCode::Dot:
    return lowerDot(op);
  case OpCode::For:
    return lowerFor(op);
  case OpCode::If:
    return lowerIf(op);
  case OpCode::While:
    return lowerWhile(op);
  case OpCode::DebugBarrier:
    // One the hazard pass inserted is already met when a barrier of the op before (a
    // reduction's, a conversion's through shared memory) came after every shared-buffer access.
    if (ir::attr::DebugBarrier::smemHazard(op) && !sharedSinceBarrier_) return agentSyncNotNeeded();
    return barrier();
  case OpCode::LocalAlloc:
  case OpCode::LocalView:
  case OpCode::LocalTrans:
  case OpCode::LocalLoad:
  case OpCode::LocalStore:
  case OpCode::LocalSlice:
  case OpCode::LocalReinterpret:
    return lowerTlxBuffer(op);
  case OpCode::LocalGather:
  case OpCode::LocalScatter:
    return lowerLocalGatherScatter(op);
  case OpCode::Gather:
    return lowerGather(op);
  case OpCode::Histogram:
    return lowerHistogram(op);
  case OpCode::MapElementwise:
    return lowerMapElementwise(op);
  case OpCode::AllocBarriers:
  case OpCode::BarrierExpectBytes:
  case OpCode::BarrierWait:
  case OpCode::BarrierArrive:
  case OpCode::NamedBarrierWait:
  case OpCode::NamedBarrierArrive:
  case OpCode::Fence:
    return lowerTlxBarrier(op);
  case OpCode::AsyncDescLoad:
  case OpCode::AsyncDescStore:
  case OpCode::AsyncDescStoreWait:
    return lowerTlxDescriptorCopy(op);
  case OpCode::AsyncLoad:
  case OpCode::AsyncCommitGroup:
  case OpCode::AsyncWaitGroup:
    return lowerTlxAsyncCopy(op);
  case OpCode::Prefetch:
  case OpCode::PrefetchTensormap:
  case OpCode::AsyncDescPrefetch:
  case OpCode::AsyncBulkLoad:
  case OpCode::AsyncBulkStore:
    return lowerTlxTmaExtras(op);
  case OpCode::MakeDescriptor:
    return lowerDeviceTensorMap(op);
  case OpCode::ClusterCtaRank:
  case OpCode::ClusterSize:
  case OpCode::ClusterBarrier:
    return lowerTlxCluster(op);
  case OpCode::AsyncRemoteStore:
  case OpCode::RemoteStore:
  case OpCode::AsyncRemoteCopy:
    return lowerTlxRemoteStore(op);
  case OpCode::AsyncDot:
    return lowerAsyncDot(op);
  case OpCode::AsyncTasks:
    return lowerAsyncTasks(op);
  case OpCode::AsyncDotWait:
    return lowerAsyncDotWait(op);
  case OpCode::Clock64: {
    // Each read is its own instruction: two reads around the work they time are not one value
    // (pure() would share the first read's register, and the elapsed time would be 0).
    std::string clock = b_.newReg(RegClass::B64);
    b_.inst("mov.u64", {clock, "%clock64"});
    return bind(op.result(), {clock});
  }
  case OpCode::VoteBallot:
    return lowerVoteBallot(op);
  case OpCode::InlineAsm:
    return lowerInlineAsm(op);
  case OpCode::Return:
    drainBulkStoreRead(); // the tile stays in shared memory until the TMA has read it
    releaseTensorMemory();
    return b_.inst("ret", {});
  case OpCode::Tcgen05Mma:
  case OpCode::Tcgen05Commit:
    return lowerTcgen05(op);
  case OpCode::TmemCopy:
    return lowerTmemScaleCopy(op);
  case OpCode::ClcTryCancel:
  case OpCode::ClcQuery:
    return lowerClc(op);
  case OpCode::Yield:
  case OpCode::Condition:
    throw std::logic_error("codegen: terminator lowered outside its parent op");
  default:
    raiseError(op.loc(), std::string("'") + op.name() + "' is not supported by the " +
                             targetName(options_.target) + " PTX backend yet");
  }
}

// ---------------------------------------------------------------------------------------------
// Thread-index arithmetic
// ---------------------------------------------------------------------------------------------

std::string FunctionLowering::tid() {
  std::string t = b_.pure("mov.u32", RegClass::B32, {"%tid.x"});
  // Inside an async task, layouts count threads from the task's first warp.
  if (taskFirstWarp_) t = b_.pure("sub.u32", RegClass::B32, {t, immInt(taskFirstWarp_ * 32)});
  return t;
}

std::string FunctionLowering::warpTid() {
  std::string w = warpIndex_;
  if (taskFirstWarp_) w = b_.pure("sub.u32", RegClass::B32, {w, immInt(taskFirstWarp_)});
  return b_.pure("shl.b32", RegClass::B32, {w, "5"});
}

std::vector<int32_t> FunctionLowering::tidImages(const LinearLayout& l,
                                                 const std::string& outDim) const {
  int warpBits = log2Exact(warps());
  std::vector<int32_t> images(5 + warpBits, 0);
  if (!l.hasOutDim(outDim)) return images;
  for (int i = 0; i < std::min(5, l.getInDimSizeLog2(layout::kLane)); ++i)
    images[i] = l.getBasis(layout::kLane, i, outDim);
  for (int i = 0; i < std::min(warpBits, l.getInDimSizeLog2(layout::kWarp)); ++i)
    images[5 + i] = l.getBasis(layout::kWarp, i, outDim);
  return images;
}

std::string FunctionLowering::tidLinear(const std::vector<int32_t>& images, int32_t* possibleBits) {
  std::string acc = "0";
  int32_t accBits = 0;
  int n = static_cast<int>(images.size());
  // Images of warp bits only (a warp group's tile origin, say) come from the uniform warp index.
  bool warpBitsOnly = std::all_of(images.begin(), images.begin() + std::min(n, 5),
                                  [](int32_t img) { return img == 0; });
  auto source = [&] { return warpBitsOnly ? warpTid() : tid(); };
  for (int i = 0; i < n;) {
    int32_t img = images[i];
    if (img == 0) {
      ++i;
      continue;
    }
    std::string term;
    int32_t termBits;
    if (std::has_single_bit(static_cast<uint32_t>(img))) {
      // A run of tid bits i..j mapping to consecutive powers of two is one shifted bit field.
      int k = std::countr_zero(static_cast<uint32_t>(img));
      int j = i;
      while (j + 1 < n && images[j + 1] != 0 &&
             static_cast<int64_t>(images[j + 1]) == 2 * static_cast<int64_t>(images[j]))
        ++j;
      int len = j - i + 1;
      bool top = j == n - 1;
      std::string field = source();
      if (!(i == 0 && top))
        field = b_.pure("and.b32", RegClass::B32,
                        {field, immInt(static_cast<int64_t>(((1u << len) - 1) << i))});
      if (k > i)
        field = b_.pure("shl.b32", RegClass::B32, {field, immInt(k - i)});
      else if (k < i)
        field = b_.pure("shr.u32", RegClass::B32, {field, immInt(i - k)});
      term = field;
      termBits = static_cast<int32_t>(((1u << len) - 1) << k);
      i = j + 1;
    } else {
      std::string bit = b_.pure("and.b32", RegClass::B32, {source(), immInt(int64_t(1) << i)});
      std::string set = b_.pure("setp.ne.u32", RegClass::Pred, {bit, "0"});
      term = b_.pure("selp.b32", RegClass::B32, {immInt(img), "0", set});
      termBits = img;
      ++i;
    }
    if (acc == "0") {
      acc = term;
    } else {
      acc = b_.pure((accBits & termBits) ? "xor.b32" : "add.s32", RegClass::B32, {acc, term});
    }
    accBits |= termBits;
  }
  if (possibleBits) *possibleBits = accBits;
  return acc;
}

std::string FunctionLowering::xorConst(const std::string& base, int32_t possibleBits,
                                       int32_t constant) {
  if (constant == 0) return base;
  if (base == "0") return immInt(constant);
  return b_.pure((possibleBits & constant) ? "xor.b32" : "add.s32", RegClass::B32,
                 {base, immInt(constant)});
}

std::string FunctionLowering::coordinate(const LinearLayout& l, int d, int32_t reg) {
  int32_t bits = 0;
  std::string hw = tidLinear(tidImages(l, layout::dimName(d)), &bits);
  return xorConst(hw, bits, registerCoords(l, reg)[d]);
}

std::string FunctionLowering::ownerPredicate(const LinearLayout& l) {
  int32_t laneFree = l.hasInDim(layout::kLane) ? l.freeVariableMask(layout::kLane) : 0;
  int32_t warpFree = l.hasInDim(layout::kWarp) ? l.freeVariableMask(layout::kWarp) : 0;
  // Warps past the layout's warp bits (a layout for fewer warps) hold duplicates too.
  int warpBits = l.hasInDim(layout::kWarp) ? l.getInDimSizeLog2(layout::kWarp) : 0;
  for (int i = warpBits; i < log2Exact(warps()); ++i) warpFree |= 1 << i;
  int64_t mask = (laneFree & 31) | (int64_t(warpFree) << 5);
  if (mask == 0) return {};
  std::string bits = b_.pure("and.b32", RegClass::B32, {tid(), immInt(mask)});
  return b_.pure("setp.eq.u32", RegClass::Pred, {bits, "0"});
}

bool FunctionLowering::isDuplicateRegister(const LinearLayout& l, int32_t reg) const {
  return (reg & l.freeVariableMask(layout::kRegister)) != 0;
}

// ---------------------------------------------------------------------------------------------
// Data movement
// ---------------------------------------------------------------------------------------------

void FunctionLowering::barrier() {
  sharedSinceBarrier_ = anySharedSinceBarrier_ = fencedBarrier_ = false;
  ++agentSyncs_;
  // Straight after the same threads met, with nothing emitted since, they have met (a TMA
  // store wait's barrier followed by a local_store's had written `bar.sync 15, 128` twice).
  int id = taskBarrierId_ >= 0 ? taskBarrierId_ : 0;
  if (b_.body().size() == bodyAtBarrier_ && id == barrierIdAtBody_) return;
  // Inside an async task only its own warps meet: a named barrier of its thread count.
  if (taskBarrierId_ >= 0)
    b_.inst("bar.sync", {immInt(taskBarrierId_), immInt(numThreads())});
  else
    b_.inst("bar.sync", {"0"});
  bodyAtBarrier_ = b_.body().size();
  barrierIdAtBody_ = id;
}

void FunctionLowering::reuseBarrier(const ir::Op& op) {
  const layout::ReuseBarrier* reuse = layouts_.reuseBarrierBefore(op);
  if (!reuse) return;
  // Straight after a barrier of every thread, with no access since, the order is already there;
  // a proxy fence must still come between the accesses and a barrier.
  if (!reuse->proxyFence && b_.body().size() == bodyAtBarrier_) return;
  // So is one after a barrier of every thread (behind a proxy fence where one is asked for)
  // with no shared-memory access since: the loop-exit drain of a pipelined K loop (its
  // cp.async.wait_group's fence and barrier) before the epilogue's conversion through scratch.
  if (taskBarrierId_ < 0 && !anySharedSinceBarrier_ && (fencedBarrier_ || !reuse->proxyFence))
    return;
  b_.setLoc(op.loc());
  // A local_store into shared memory (Tlx.cpp) and a descriptor copy through the scratch region
  // (Memory.cpp) meet the CTA before they touch shared memory.
  bool meetsFirst =
      (op.code() == OpCode::LocalStore && op.operand(0)->type().space != ir::MemorySpace::Tmem) ||
      op.code() == OpCode::DescLoad || op.code() == OpCode::DescStore;
  if (reuse->proxyFence && !meetsFirst) return proxyFenceAndBarrier();
  if (reuse->proxyFence) b_.inst("fence.proxy.async.shared::cta", {});
  if (!meetsFirst) barrier();
}

void FunctionLowering::proxyFenceAndBarrier() {
  b_.inst("fence.proxy.async.shared::cta", {});
  barrier();
  fencedBarrier_ = true;
}

bool FunctionLowering::drainBulkStoreRead() {
  if (!bulkStoreReadPending_) return false;
  bulkStoreReadPending_ = false;
  b_.inst("cp.async.bulk.wait_group.read", {"0"}, electedThread());
  return true;
}

bool FunctionLowering::bulkStoreReadAtLoopHead(std::initializer_list<const ir::Block*> regions) {
  if (taskBarrierId_ < 0) return false; // stores outside tasks wait at once
  bool stores = false, claims = false;
  for (const ir::Block* region : regions)
    ir::walk(*region, [&](const ir::Op& op) {
      stores = stores || op.code() == OpCode::DescStore;
      claims = claims || layouts_.mayUseScratch(op);
    });
  if (stores) {
    bulkStoreReadPending_ = true;
    return false;
  }
  if (!bulkStoreReadPending_) return false;
  if (!claims) return true;
  drainBulkStoreRead();
  barrier();
  return false;
}

int64_t FunctionLowering::scratch(int64_t bytes) {
  // The issuing thread's wait, then the task's threads meet: nobody writes the tile's bytes
  // before the TMA has read them.
  if (drainBulkStoreRead()) barrier();
  usesShared_ = true;
  // The layout pass places the scratch it planned at 128 bytes or more; a conversion it did not
  // plan (scratchOffset() is then the unaligned end of the buffers) still needs vector alignment.
  int64_t offset = scratchBase_ >= 0 ? scratchBase_ : alignTo(layouts_.scratchOffset(), 128);
  sharedBytes_ = std::max(sharedBytes_, offset + bytes);
  return offset;
}

std::string FunctionLowering::sharedAddress(const std::string& byteOffset) {
  usesShared_ = anySharedSinceBarrier_ = true;
  std::string base = b_.pure("mov.u32", RegClass::B32, {kSharedBase});
  return b_.pure("add.s32", RegClass::B32, {base, byteOffset});
}

Regs FunctionLowering::convert(const Regs& src, const LinearLayout& from, const LinearLayout& to,
                               DType elem, const ir::Op& at) {
  if (from == to) return src;
  return gather(src, from, to, std::vector<int32_t>(from.numOutDims(), 0), elem, at);
}

Regs FunctionLowering::gather(const Regs& src, const LinearLayout& srcLayout,
                              const LinearLayout& gatherMap, const std::vector<int32_t>& constant,
                              DType elem, const ir::Op& at) {
  int32_t numRegs = gatherMap.getInDimSize(layout::kRegister);
  Regs out(numRegs);
  // Within the thread: every lane/warp bit moves to the same src element as in the src layout,
  // and each dst register's element is one of the thread's src registers.
  bool local = true;
  for (const char* dim : {layout::kLane, layout::kWarp}) {
    auto sb = basesOf(srcLayout, dim), tb = basesOf(gatherMap, dim);
    size_t n = std::max(sb.size(), tb.size());
    std::vector<int32_t> zero(srcLayout.numOutDims(), 0);
    for (size_t i = 0; i < n && local; ++i)
      local = (i < sb.size() ? sb[i] : zero) == (i < tb.size() ? tb[i] : zero);
  }
  if (local) {
    std::map<std::vector<int32_t>, int32_t> holder;
    for (int32_t r = srcLayout.getInDimSize(layout::kRegister); r-- > 0;)
      holder[registerCoords(srcLayout, r)] = r;
    for (int32_t r = 0; r < numRegs && local; ++r) {
      std::vector<int32_t> c = registerCoords(gatherMap, r);
      for (size_t d = 0; d < c.size(); ++d) c[d] ^= constant[d];
      auto it = holder.find(c);
      if (it == holder.end())
        local = false;
      else
        out[r] = src.at(it->second);
    }
    if (local) return out;
  }

  int bytes = memBytes(ir::Type::scalar(elem));
  if (auto plan = layout::warpShufflePlan(srcLayout, gatherMap, constant, warps());
      plan && shufflesAreCheaper(*plan, srcLayout, gatherMap, bytes))
    return shuffle(src, *plan, gatherMap, elem);

  // Through shared memory, swizzled so that the writes (src's vectors) and the reads (dst's)
  // avoid bank conflicts; a tensor larger than the scratch bound goes through in rounds.
  layout::ConversionRounds rounds = layout::conversionRounds(
      srcLayout, gatherMap, constant, layout::kMaxConversionScratchBytes / bytes);
  int64_t base = scratch(rounds.elements() * bytes);
  // 16-bit values in an MMA accumulator's pattern (pairs, 4 lanes to a row of 8) are written
  // 8x8 matrices at a time by stmatrix where the layout chosen for its rows allows, 16 bytes a
  // row instead of 4 a thread (Triton writes such tiles as 16-byte vectors too).
  std::optional<LinearLayout> matrices;
  if (options_.target == Target::SM90a && bytes == 2)
    matrices = layout::stmatrixAccessLayout(rounds.src);
  LinearLayout toOffset =
      layout::conversionSharedLayout(matrices ? *matrices : rounds.src, rounds.dst, bytes).invert();
  OffsetFn offsetOf = [&](const std::vector<int32_t>& c) {
    return static_cast<int64_t>(toOffset.apply(c).at(0));
  };
  if (matrices && !matrixRowsFit(rounds.src, offsetOf)) {
    matrices.reset();
    toOffset = layout::conversionSharedLayout(rounds.src, rounds.dst, bytes).invert();
  }
  int64_t constantOffset = offsetOf(rounds.project(constant));
  int32_t srcRegs = rounds.src.getInDimSize(layout::kRegister);
  int32_t dstRegs = rounds.dst.getInDimSize(layout::kRegister);
  for (int64_t round = 0; round < rounds.rounds(); ++round) {
    Regs part(srcRegs);
    for (int32_t r = 0; r < srcRegs; ++r) part[r] = src.at(rounds.fullRegister(r, round, true));
    // Earlier readers of the scratch region are done (already where no thread touched shared
    // memory since a barrier of all: after a pipelined loop's exit drain, say).
    if (taskBarrierId_ >= 0 || anySharedSinceBarrier_) barrier();
    if (matrices)
      storeSharedMatrices(part, rounds.src, offsetOf, base, elem);
    else
      storeShared(part, rounds.src, offsetOf, base, elem);
    barrier();
    Regs got = loadShared(rounds.dst, offsetOf, base, constantOffset, elem);
    for (int32_t r = 0; r < dstRegs; ++r) out[rounds.fullRegister(r, round, false)] = got[r];
  }
  (void)at;
  return out;
}

bool FunctionLowering::shufflesAreCheaper(const layout::WarpShufflePlan& plan,
                                          const LinearLayout& srcLayout,
                                          const LinearLayout& gatherMap, int bytes) const {
  // One shfl per 32-bit word of each moved register, against vector stores and loads through
  // shared memory plus two bar.sync (counted as 8 instructions each).
  bool sameLane = plan.isLocal();
  int32_t dup = gatherMap.freeVariableMask(layout::kRegister);
  int64_t candidates = int64_t(1) << registerChoices(plan).size();
  int64_t shuffles = 0;
  for (size_t r = 0; r < plan.laneXor.size(); ++r)
    if (!(static_cast<int32_t>(r) & dup) && !(sameLane && plan.laneXor[r] == 0))
      shuffles += (bytes > 4 ? 2 : 1) * candidates + (candidates - 1);
  int32_t maxVec = std::max(1, 16 / bytes);
  auto accesses = [&](const LinearLayout& l) {
    int32_t regs = l.getInDimSize(layout::kRegister) >>
                   std::popcount(static_cast<uint32_t>(l.freeVariableMask(layout::kRegister)));
    return std::max<int64_t>(1, regs / std::min(maxVec, l.numConsecutiveInOut()));
  };
  return shuffles <= accesses(srcLayout) + accesses(gatherMap) + 16;
}

Regs FunctionLowering::shuffle(const Regs& src, const layout::WarpShufflePlan& plan,
                               const LinearLayout& gatherMap, DType elem) {
  int32_t numRegs = gatherMap.getInDimSize(layout::kRegister);
  int32_t dup = gatherMap.freeVariableMask(layout::kRegister);
  bool sameLane = plan.isLocal();
  int32_t laneBits = 0;
  std::string lane;
  RegClass cls = regClassOf(elem);
  // Threads that need different source registers for one destination register: every
  // candidate register is shuffled and each thread keeps its own (R(tid) == candidate).
  std::vector<int32_t> choices = registerChoices(plan);
  std::vector<int32_t> candidates{0};
  for (int32_t g : choices)
    for (size_t i = 0, n = candidates.size(); i < n; ++i) candidates.push_back(candidates[i] ^ g);
  std::vector<std::string> isCandidate(candidates.size());
  if (candidates.size() > 1) {
    std::string regOfThread = tidLinear(plan.registerImages, nullptr);
    for (size_t c = 1; c < candidates.size(); ++c)
      isCandidate[c] = b_.pure("setp.eq.u32", RegClass::Pred, {regOfThread, immInt(candidates[c])});
  }
  Regs out(numRegs);
  for (int32_t r = 0; r < numRegs; ++r) {
    if (r & dup) {
      out[r] = out[r & ~dup];
      continue;
    }
    if (sameLane && plan.laneXor[r] == 0) {
      out[r] = src.at(plan.srcRegister[r]);
      continue;
    }
    if (lane.empty()) lane = tidLinear(plan.laneImages, &laneBits);
    std::string from = xorConst(lane, laneBits, plan.laneXor[r]);
    for (size_t c = 0; c < candidates.size(); ++c) {
      std::string moved = shuffleFromLane(src.at(plan.srcRegister[r] ^ candidates[c]), cls, from);
      if (c == 0)
        out[r] = moved;
      else if (cls == RegClass::Pred)
        out[r] =
            b_.pure("or.pred", RegClass::Pred,
                    {b_.pure("and.pred", RegClass::Pred, {isCandidate[c], moved}),
                     b_.pure("and.pred", RegClass::Pred,
                             {b_.pure("not.pred", RegClass::Pred, {isCandidate[c]}), out[r]})});
      else
        out[r] = b_.pure("selp." + bitType(elem == DType::I1 ? DType::I32 : elem), cls,
                         {moved, out[r], isCandidate[c]});
    }
  }
  return out;
}

std::vector<int32_t> FunctionLowering::registerChoices(const layout::WarpShufflePlan& plan) {
  // A basis (over GF(2)) of the registers the thread bits can add to a source register.
  std::vector<int32_t> basis; // highest bits distinct, kept in decreasing order
  for (int32_t img : plan.registerImages) {
    for (int32_t g : basis) img = std::min(img, img ^ g);
    if (!img) continue;
    basis.push_back(img);
    std::sort(basis.begin(), basis.end(), std::greater<int32_t>());
  }
  return basis;
}

std::string FunctionLowering::shuffleFromLane(const std::string& x, RegClass c,
                                              const std::string& lane) {
  auto shfl = [&](const std::string& v32, RegClass cls) {
    std::string d = b_.newReg(cls);
    b_.inst("shfl.sync.idx.b32", {d, v32, lane, "31", "-1"});
    return d;
  };
  switch (c) {
  case RegClass::B32:
  case RegClass::F32:
    return shfl(b_.materialize(x, c), c);
  case RegClass::B16: {
    std::string w = b_.pure("cvt.u32.u16", RegClass::B32, {b_.materialize(x, c)});
    return b_.pure("cvt.u16.u32", RegClass::B16, {shfl(w, RegClass::B32)});
  }
  case RegClass::Pred: {
    std::string w = b_.pure("selp.u32", RegClass::B32, {"1", "0", b_.materialize(x, c)});
    return b_.pure("setp.ne.u32", RegClass::Pred, {shfl(w, RegClass::B32), "0"});
  }
  case RegClass::B64:
  case RegClass::F64: {
    std::string lo = b_.newReg(RegClass::B32), hi = b_.newReg(RegClass::B32);
    b_.inst("mov.b64", {"{" + lo + ", " + hi + "}", b_.materialize(x, c)});
    std::string slo = shfl(lo, RegClass::B32), shi = shfl(hi, RegClass::B32);
    return b_.pure("mov.b64", c, {"{" + slo + ", " + shi + "}"});
  }
  }
  throw std::logic_error("shuffleFromLane: unknown register class");
}

std::vector<int32_t> FunctionLowering::offsetImages(const LinearLayout& l, const OffsetFn& offsetOf,
                                                    int bytes) const {
  std::vector<int32_t> images(5 + log2Exact(warps()), 0);
  auto lanes = basesOf(l, layout::kLane), warps = basesOf(l, layout::kWarp);
  for (size_t i = 0; i < lanes.size() && i < 5; ++i)
    images[i] = static_cast<int32_t>(offsetOf(lanes[i]) * bytes);
  for (size_t i = 0; i < warps.size() && 5 + i < images.size(); ++i)
    images[5 + i] = static_cast<int32_t>(offsetOf(warps[i]) * bytes);
  return images;
}

int32_t FunctionLowering::sharedVectorWidth(const LinearLayout& l, const OffsetFn& offsetOf,
                                            int bytes, bool fromRegisters) const {
  // Leading register bits at consecutive offsets, every other basis aligned to the vector; at
  // most 16 bytes, and through registers at most 4 elements (16-bit ones go as packed 32-bit
  // words, so up to 8 of them fill 16 bytes).
  auto regs = basesOf(l, layout::kRegister);
  int k = 0;
  int maxLog2 = !fromRegisters ? std::countr_zero(static_cast<unsigned>(16 / bytes))
                : bytes == 2   ? 3
                               : 2;
  while (k < static_cast<int>(regs.size()) && (int64_t(1) << (k + 1)) * bytes <= 16 &&
         k < maxLog2 && offsetOf(regs[k]) == (int64_t(1) << k))
    ++k;
  auto aligned = [&](int kk) {
    int64_t v = int64_t(1) << kk;
    for (const char* dim : {layout::kRegister, layout::kLane, layout::kWarp}) {
      auto bs = basesOf(l, dim);
      for (size_t i = (dim == layout::kRegister ? kk : 0); i < bs.size(); ++i)
        if (offsetOf(bs[i]) % v) return false;
    }
    return true;
  };
  while (k > 0 && !aligned(k)) --k;
  return int32_t(1) << k;
}

int64_t FunctionLowering::paddedOffset(int64_t x, const Padding& padding) {
  int64_t out = x;
  for (const auto& [interval, pad] : padding) out += x / interval * pad;
  return out;
}

std::string FunctionLowering::paddedThreadOffset(const LinearLayout& l, const OffsetFn& offsetOf,
                                                 const Padding& padding, int bytes, int32_t* v) {
  // A vector stays contiguous within an interval, and aligned when every padding keeps it so.
  for (const auto& [interval, pad] : padding)
    while (*v > 1 && (*v > interval || pad % *v != 0)) *v /= 2;
  int32_t bits = 0;
  std::string t = b_.materialize(tidLinear(offsetImages(l, offsetOf, 1), &bits), RegClass::B32);
  std::string padded = t;
  for (const auto& [interval, pad] : padding) {
    std::string rows = b_.pure("shr.u32", RegClass::B32,
                               {t, immInt(std::countr_zero(static_cast<uint64_t>(interval)))});
    padded = b_.pure("mad.lo.s32", RegClass::B32, {rows, immInt(pad), padded});
  }
  return b_.pure("mul.lo.s32", RegClass::B32, {padded, immInt(bytes)});
}

FunctionLowering::SharedAccess FunctionLowering::sharedAccess(const LinearLayout& l,
                                                              const OffsetFn& offsetOf, int bytes,
                                                              const Padding* padding) {
  SharedAccess a;
  a.padding = padding;
  a.bytes = bytes;
  a.vector = sharedVectorWidth(l, offsetOf, bytes);
  a.hw = padding ? paddedThreadOffset(l, offsetOf, *padding, bytes, &a.vector)
                 : tidLinear(offsetImages(l, offsetOf, bytes), &a.hwBits);
  return a;
}

std::pair<std::string, int64_t>
FunctionLowering::sharedElementAddress(const SharedAccess& a, const LinearLayout& l,
                                       const OffsetFn& offsetOf, int32_t r, int64_t constantOffset,
                                       const std::string& baseReg) {
  int64_t off = (offsetOf(registerCoords(l, r)) ^ constantOffset) * a.bytes;
  std::string addr;
  if (a.padding) {
    addr = sharedAddress(a.hw);
    off = paddedOffset(off / a.bytes, *a.padding) * a.bytes;
  } else {
    addr = sharedAddress(xorConst(a.hw, a.hwBits, static_cast<int32_t>(off)));
    off = 0;
  }
  if (!baseReg.empty()) addr = b_.pure("add.s32", RegClass::B32, {addr, baseReg});
  return {addr, off};
}

void FunctionLowering::storeShared(const Regs& regs, const LinearLayout& l,
                                   const OffsetFn& offsetOf, int64_t base, DType elem,
                                   const std::string& baseReg, int64_t constantOffset,
                                   const Padding* padding, const std::string& guard) {
  ir::Type t = ir::Type::scalar(elem);
  int bytes = memBytes(t);
  RegClass cls = regClassOf(elem);
  SharedAccess access = sharedAccess(l, offsetOf, bytes, padding);
  int32_t& v = access.vector;
  // A vector's elements stay consecutive after the XOR only if it leaves their low bits alone.
  while (v > 1 && constantOffset % v != 0) v /= 2;
  int32_t dup = l.freeVariableMask(layout::kRegister);
  for (int32_t r = 0; r < l.getInDimSize(layout::kRegister); r += v) {
    if (r & dup) continue;
    auto [addr, off] = sharedElementAddress(access, l, offsetOf, r, constantOffset, baseReg);
    std::vector<std::string> elems;
    for (int32_t k = 0; k < v; ++k) {
      std::string x = b_.materialize(regs.at(r + k), cls);
      if (elem == DType::I1) x = b_.pure("selp.u16", RegClass::B16, {"1", "0", x});
      elems.push_back(x);
    }
    std::string type = memType(t);
    if (bytes == 2 && v >= 2) { // pairs of 16-bit elements as 32-bit words
      std::vector<std::string> words;
      for (int32_t k = 0; k < v; k += 2)
        words.push_back(
            b_.pure("mov.b32", RegClass::B32, {"{" + elems[k] + ", " + elems[k + 1] + "}"}));
      elems = std::move(words);
      type = "b32";
    }
    size_t n = elems.size();
    std::string vals;
    for (size_t k = 0; k < n; ++k) vals += (k ? ", " : "") + elems[k];
    if (n > 1) vals = "{" + vals + "}";
    std::string vec = n == 1 ? "" : n == 2 ? ".v2" : ".v4";
    b_.inst("st.shared" + vec + "." + type,
            {"[" + addr + "+" + std::to_string(base + off) + "]", vals}, guard);
  }
}

FunctionLowering::OffsetFn FunctionLowering::rowMajorOffsets(const std::vector<int64_t>& shape) {
  return [shape](const std::vector<int32_t>& c) { return rowMajor(c, shape); };
}

bool FunctionLowering::matrixRowsFit(const LinearLayout& l, const OffsetFn& offsetOf) const {
  auto regs = basesOf(l, layout::kRegister), lanes = basesOf(l, layout::kLane);
  if (regs.empty() || lanes.size() != 5) return false;
  // Register 0 and lanes 0-1: a row's 8 consecutive elements; every other basis (the rows,
  // matrices, register groups and warps) a multiple of 16 bytes away.
  if (offsetOf(regs[0]) != 1 || offsetOf(lanes[0]) != 2 || offsetOf(lanes[1]) != 4) return false;
  for (const char* dim : {layout::kRegister, layout::kLane, layout::kWarp})
    if (l.hasInDim(dim)) {
      auto bs = basesOf(l, dim);
      for (size_t i = dim == layout::kRegister ? 1
                      : dim == layout::kLane   ? 2
                                               : 0;
           i < bs.size(); ++i)
        if (offsetOf(bs[i]) % 8) return false;
    }
  // Registers of one instruction that hold copies would need their own rows.
  int32_t matrixRegs = int32_t(1) << std::min<size_t>(regs.size(), 3);
  return (l.freeVariableMask(layout::kRegister) & (matrixRegs - 1)) == 0;
}

bool FunctionLowering::storeSharedMatrices(const Regs& regs, const LinearLayout& l,
                                           const OffsetFn& offsetOf, int64_t base, DType elem) {
  if (!matrixRowsFit(l, offsetOf)) return false;
  const int bytes = 2;
  auto regBases = basesOf(l, layout::kRegister), lanes = basesOf(l, layout::kLane);
  int matrixBits = static_cast<int>(std::min<size_t>(regBases.size() - 1, 2));
  // Lane i gives the address of row i % 8 of matrix i / 8: its row bits are the fragment's
  // lanes 2-4, its matrix bits the registers 1-2.
  std::vector<int32_t> images = offsetImages(l, offsetOf, bytes);
  for (int i = 0; i < 5; ++i) {
    const std::vector<int32_t>* b = i < 3                ? &lanes[2 + i]
                                    : i - 3 < matrixBits ? &regBases[1 + (i - 3)]
                                                         : nullptr;
    images[i] = b ? static_cast<int32_t>(offsetOf(*b) * bytes) : 0;
  }
  int32_t hwBits = 0;
  std::string hw = tidLinear(images, &hwBits);
  RegClass cls = regClassOf(elem);
  int32_t dup = l.freeVariableMask(layout::kRegister);
  int32_t step = int32_t(2) << matrixBits;
  static const char* const shapes[] = {".x1", ".x2", ".x4"};
  // The window's base is 1024-aligned: XORing offset bits below 1024 commutes with adding it,
  // and bits the thread's part never sets add. Each matrix group then costs one XOR at most,
  // its other bits and `base` going into the instruction's immediate.
  std::string rows = sharedAddress(hw);
  for (int32_t r = 0; r < l.getInDimSize(layout::kRegister); r += step) {
    if (r & dup) continue;
    int64_t off = offsetOf(registerCoords(l, r)) * bytes;
    int64_t mixed = off & hwBits, added = off ^ mixed;
    std::string addr = rows;
    if (mixed >= 1024) {
      addr = sharedAddress(xorConst(hw, hwBits, static_cast<int32_t>(off)));
      added = 0;
    } else if (mixed) {
      addr = b_.pure("xor.b32", RegClass::B32, {rows, immInt(mixed)});
    }
    addr += "+" + std::to_string(added + base);
    std::string vals;
    for (int32_t k = 0; k < step; k += 2) {
      std::string lo = b_.materialize(regs.at(r + k), cls);
      std::string hi = b_.materialize(regs.at(r + k + 1), cls);
      vals += (k ? ", " : "") + b_.pure("mov.b32", RegClass::B32, {"{" + lo + ", " + hi + "}"});
    }
    b_.inst(std::string("stmatrix.sync.aligned.m8n8") + shapes[matrixBits] + ".shared.b16",
            {"[" + addr + "]", "{" + vals + "}"});
  }
  return true;
}

Regs FunctionLowering::loadShared(const LinearLayout& l, const OffsetFn& offsetOf, int64_t base,
                                  int64_t constantOffset, DType elem, const std::string& baseReg,
                                  const Padding* padding) {
  int32_t numRegs = l.getInDimSize(layout::kRegister);
  int32_t dup = l.freeVariableMask(layout::kRegister);
  SharedAccess access = sharedAccess(l, offsetOf, memBytes(ir::Type::scalar(elem)), padding);
  const int32_t v = access.vector;
  Regs out(numRegs);
  for (int32_t r = 0; r < numRegs; r += v) {
    if (r & dup) continue;
    auto [addr, off] = sharedElementAddress(access, l, offsetOf, r, constantOffset, baseReg);
    Regs got = loadSharedVector(addr + "+" + std::to_string(base + off), v, elem);
    for (int32_t k = 0; k < v; ++k) out[r + k] = got[k];
  }
  for (int32_t r = 0; r < numRegs; ++r)
    if (r & dup) out[r] = out[r & ~dup];
  return out;
}

Regs FunctionLowering::loadSharedVector(const std::string& address, int32_t v, DType elem) {
  ir::Type t = ir::Type::scalar(elem);
  RegClass cls = regClassOf(elem);
  bool packed = memBytes(t) == 2 && v >= 2; // pairs of 16-bit elements as 32-bit words
  int32_t n = packed ? v / 2 : v;
  Regs dst;
  std::string list;
  for (int32_t k = 0; k < n; ++k) {
    dst.push_back(b_.newReg(packed ? RegClass::B32 : elem == DType::I1 ? RegClass::B16 : cls));
    list += (k ? ", " : "") + dst.back();
  }
  if (n > 1) list = "{" + list + "}";
  std::string vec = n == 1 ? "" : n == 2 ? ".v2" : ".v4";
  b_.inst("ld.shared" + vec + "." + (packed ? std::string("b32") : memType(t)),
          {list, "[" + address + "]"});
  if (packed) {
    Regs halves;
    for (const auto& w : dst) {
      std::string lo = b_.newReg(RegClass::B16), hi = b_.newReg(RegClass::B16);
      b_.inst("mov.b32", {"{" + lo + ", " + hi + "}", w});
      // Packing the pair again (a vector store of what was loaded) reads the word itself.
      b_.remember("mov.b32", RegClass::B32, {"{" + lo + ", " + hi + "}"}, w);
      halves.push_back(lo);
      halves.push_back(hi);
    }
    dst = std::move(halves);
  }
  Regs out(v);
  for (int32_t k = 0; k < v; ++k)
    out[k] = elem == DType::I1 ? b_.pure("setp.ne.u16", RegClass::Pred, {dst[k], "0"}) : dst[k];
  return out;
}

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

void FunctionLowering::lowerConstant(const ir::Op& op) {
  const ir::Type& t = op.result()->type();
  const ir::Attr* a = op.attr(ir::attr::Constant::kvalue);
  if (!a) throw std::logic_error("codegen: constant without a value");
  bool isF = std::holds_alternative<double>(*a);
  ScalarContext cx = scalarContext(op);
  std::string c = emitConstant(cx, isF ? std::get<double>(*a) : 0, isF ? 0 : std::get<int64_t>(*a),
                               isF, t.elem);
  if (!t.isTensor()) return bind(op.result(), {c});
  int32_t n = layoutOf(op.result()).getInDimSize(layout::kRegister);
  bind(op.result(), Regs(n, c));
}

void FunctionLowering::lowerArange(const ir::Op& op) {
  const LinearLayout& l = layoutOf(op.result());
  int64_t start = ir::attr::Arange::start(op);
  Regs regs;
  for (int32_t r = 0; r < l.getInDimSize(layout::kRegister); ++r) {
    std::string c = coordinate(l, 0, r);
    if (start != 0)
      c = isImmediate(c) ? immInt(std::stoll(c) + start)
                         : b_.pure("add.s32", RegClass::B32, {c, immInt(start)});
    regs.push_back(c);
  }
  bind(op.result(), std::move(regs));
}

namespace {

/// True when `op` sits in the body of a for or while loop (at any depth).
bool insideLoop(const ir::Op& op) {
  for (const ir::Block* b = op.parentBlock(); b && b->parentOp(); b = b->parentOp()->parentBlock())
    if (b->parentOp()->code() == OpCode::For || b->parentOp()->code() == OpCode::While) return true;
  return false;
}

} // namespace

void FunctionLowering::lowerElementwise(const ir::Op& op) {
  const ir::Type& rt = op.result()->type();
  std::vector<const Regs*> args;
  std::vector<DType> types;
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    args.push_back(&operand(op, i));
    const ir::Type& t = op.operand(i)->type();
    types.push_back(t.pointer ? DType::I64 : t.elem);
  }
  ScalarContext cx = scalarContext(op);
  int32_t n = rt.isTensor() ? layoutOf(op.result()).getInDimSize(layout::kRegister) : 1;
  Regs out(n);
  if (op.code() == OpCode::AddPtr) {
    // ptr + offset * sizeof(elem), with the offset widened to 64 bits by its signedness.
    int bytes = memBytes(ir::Type::scalar(rt.elem));
    DType offType = types.at(1);
    for (int32_t r = 0; r < n; ++r) {
      const std::string& p = (*args[0])[args[0]->size() == 1 ? 0 : r];
      const std::string& o = (*args[1])[args[1]->size() == 1 ? 0 : r];
      std::string wide;
      if (isImmediate(o)) {
        wide = immInt(std::stoll(o) * bytes);
      } else if (ir::bitWidth(offType) == 64) {
        // (A multiply by 1 left for ptxas made it compute every address of a loop's cp.async
        // copies with IMAD.WIDE at the loop's top: 20 more registers.)
        wide = bytes == 1 ? o : b_.pure("mul.lo.s64", RegClass::B64, {o, immInt(bytes)});
      } else {
        std::string sign = ir::isSigned(offType) ? "s" : "u";
        std::string o32 = o;
        if (regClassOf(offType) == RegClass::B16)
          o32 = b_.pure("cvt." + sign + "32." + sign + "16", RegClass::B32, {o});
        wide = bytes == 1 ? b_.pure("cvt." + sign + "64." + sign + "32", RegClass::B64, {o32})
                          : b_.pure("mul.wide." + sign + "32", RegClass::B64, {o32, immInt(bytes)});
      }
      out[r] = wide == "0"
                   ? p
                   : b_.pure("add.s64", RegClass::B64, {b_.materialize(p, RegClass::B64), wide});
    }
    return bind(op.result(), std::move(out));
  }
  // In loop bodies, elements AxisInfo knows to be equal (a k-mask `offs_k < K - k * BK` with K
  // a multiple of 16 is constant over 16 rows) are computed once per thread, as in Triton's
  // K loops: a thread holding rows r and r + 8 of such a mask sets one predicate for both.
  // Straight-line code keeps one value per element: there the saving is paid once, and sharing
  // the prologue masks of the layernorm backward kernel made ptxas pick 80 registers and spill.
  std::vector<int32_t> rep(n);
  for (int32_t r = 0; r < n; ++r) rep[r] = r;
  if (rt.isTensor() && insideLoop(op)) {
    std::vector<int64_t> constancy = layouts_.axisInfo(op.result()).constancy;
    if (std::any_of(constancy.begin(), constancy.end(), [](int64_t c) { return c > 1; }))
      rep = constancyRepresentatives(layoutOf(op.result()), constancy);
  }
  for (int32_t r = 0; r < n; ++r) {
    if (rep[r] != r) {
      out[r] = out[rep[r]];
      continue;
    }
    std::vector<std::string> elems;
    for (const Regs* a : args) elems.push_back(a->size() == 1 ? (*a)[0] : a->at(r));
    out[r] = emitElementwise(cx, op, elems, types, rt.pointer ? DType::I64 : rt.elem);
  }
  bind(op.result(), std::move(out));
}

// ---------------------------------------------------------------------------------------------
// Shape ops
// ---------------------------------------------------------------------------------------------

void FunctionLowering::lowerShapeOp(const ir::Op& op) {
  const ir::Value* res = op.result();
  if (op.code() == OpCode::Splat) {
    const Regs& s = operand(op, 0);
    int32_t n = layoutOf(res).getInDimSize(layout::kRegister);
    return bind(res, Regs(n, s.at(0)));
  }
  const ir::Value* src = op.operand(0);
  const LinearLayout& srcLayout = operandLayoutOf(op, 0);
  const std::vector<int64_t>& srcShape = src->type().shape;
  DType elem = src->type().pointer ? DType::I64 : src->type().elem;
  std::vector<int32_t> zero(srcShape.size(), 0);
  auto selectByBit = [&](const LinearLayout& dst, int dim, int32_t bitValue, const Regs& lo,
                         const Regs& hi) {
    // out[r] = hi[r] where the coordinate along `dim` has `bitValue` set, else lo[r].
    Regs out(lo.size());
    int32_t hwBits = 0;
    std::string hw = tidLinear(tidImages(dst, layout::dimName(dim)), &hwBits);
    for (size_t r = 0; r < lo.size(); ++r) {
      int32_t regPart = registerCoords(dst, static_cast<int32_t>(r))[dim];
      if (!(hwBits & bitValue)) {
        out[r] = (regPart & bitValue) ? hi[r] : lo[r];
        continue;
      }
      std::string c = xorConst(hw, hwBits, regPart);
      std::string bit = b_.pure("and.b32", RegClass::B32, {c, immInt(bitValue)});
      std::string set = b_.pure("setp.ne.u32", RegClass::Pred, {bit, "0"});
      ScalarContext cx = scalarContext(op);
      ir::Op sel(OpCode::Select, op.loc());
      out[r] = emitElementwise(cx, sel, {set, hi[r], lo[r]}, {DType::I1, elem, elem}, elem);
    }
    return out;
  };

  switch (op.code()) {
  case OpCode::Broadcast:
  case OpCode::ExpandDims:
  case OpCode::Reshape:
  case OpCode::Permute: {
    const LinearLayout& dst = layoutOf(res);
    const std::vector<int64_t>& dstShape = res->type().shape;
    std::vector<int64_t> order =
        op.code() == OpCode::Permute ? ir::attr::Permute::order(op) : std::vector<int64_t>{};
    int64_t axis = op.code() == OpCode::ExpandDims ? ir::attr::ExpandDims::axis(op) : 0;
    if (op.code() == OpCode::ExpandDims && axis < 0) axis += static_cast<int64_t>(dstShape.size());
    LinearLayout map = mapBases(dst, srcShape, [&](const std::vector<int32_t>& c) {
      std::vector<int32_t> s(srcShape.size(), 0);
      switch (op.code()) {
      case OpCode::Broadcast:
        for (size_t d = 0; d < s.size(); ++d) s[d] = srcShape[d] == 1 ? 0 : c[d];
        break;
      case OpCode::ExpandDims:
        for (size_t d = 0, k = 0; d < c.size(); ++d)
          if (static_cast<int64_t>(d) != axis) s[k++] = c[d];
        break;
      case OpCode::Reshape:
        s = fromRowMajor(rowMajor(c, dstShape), srcShape);
        break;
      default:
        for (size_t d = 0; d < c.size(); ++d) s[order.at(d)] = c[d];
        break;
      }
      return s;
    });
    if (op.code() == OpCode::Permute && order.size() != srcShape.size())
      raiseError(op.loc(), "permute order has " + std::to_string(order.size()) +
                               " entries for a tensor of rank " + std::to_string(srcShape.size()));
    return bind(res, gather(operand(op, 0), srcLayout, map, zero, elem, op));
  }
  case OpCode::Join: {
    // result[..., j] = (j ? b : a)[...]
    const LinearLayout& dst = layoutOf(res);
    int last = static_cast<int>(res->type().shape.size()) - 1;
    LinearLayout map = mapBases(dst, srcShape, [&](const std::vector<int32_t>& c) {
      return std::vector<int32_t>(c.begin(), c.begin() + last);
    });
    Regs lo = gather(operand(op, 0), srcLayout, map, zero, elem, op);
    Regs hi = gather(operand(op, 1), operandLayoutOf(op, 1), map, zero, elem, op);
    return bind(res, selectByBit(dst, last, 1, lo, hi));
  }
  case OpCode::Cat: {
    const LinearLayout& dst = layoutOf(res);
    int64_t half = srcShape.at(0);
    if (!isPowerOf2(half))
      raiseError(op.loc(), "cat needs power-of-two shapes, got " + src->type().str());
    LinearLayout map = mapBases(dst, srcShape, [&](const std::vector<int32_t>& c) {
      std::vector<int32_t> s = c;
      s[0] &= static_cast<int32_t>(half - 1);
      return s;
    });
    Regs lo = gather(operand(op, 0), srcLayout, map, zero, elem, op);
    Regs hi = gather(operand(op, 1), operandLayoutOf(op, 1), map, zero, elem, op);
    return bind(res, selectByBit(dst, 0, static_cast<int32_t>(half), lo, hi));
  }
  case OpCode::Split: {
    for (unsigned k = 0; k < 2; ++k) {
      const LinearLayout& dst = layoutOf(op.result(k));
      LinearLayout map = mapBases(dst, srcShape, [&](const std::vector<int32_t>& c) {
        std::vector<int32_t> s = c;
        s.push_back(0);
        return s;
      });
      std::vector<int32_t> constant = zero;
      constant.back() = static_cast<int32_t>(k);
      bind(op.result(k), gather(operand(op, 0), srcLayout, map, constant, elem, op));
    }
    return;
  }
  default:
    throw std::logic_error("lowerShapeOp: not a shape op");
  }
}

// ---------------------------------------------------------------------------------------------
// Entry point
// ---------------------------------------------------------------------------------------------

namespace {

std::string paramDecl(const ir::KernelArg& a, const std::string& name) {
  const ir::Type& t = a.type;
  if (t.kind == ir::TypeKind::Descriptor) return ".param .align 64 .b8 " + name + "[128]";
  if (t.pointer) return ".param .u64 " + name;
  switch (t.elem) {
  case DType::I1:
  case DType::I8:
  case DType::U8:
    return ".param .u8 " + name;
  case DType::F8E4M3: // one byte, as the launchers pack it (paramBytes)
  case DType::F8E5M2:
  case DType::F8E4B15:
  case DType::F8E4B8:
  case DType::F8E5B16:
    return ".param .b8 " + name;
  case DType::I16:
  case DType::U16:
  case DType::F16:
  case DType::BF16:
    return ".param .b16 " + name;
  case DType::I64:
  case DType::U64:
    return ".param .u64 " + name;
  case DType::F32:
    return ".param .f32 " + name;
  case DType::F64:
    return ".param .f64 " + name;
  default:
    return ".param .u32 " + name;
  }
}

int paramBytes(const ir::KernelArg& a) {
  if (a.type.kind == ir::TypeKind::Descriptor) return 128;
  return a.type.elemBytes();
}

std::string sanitize(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "k_" + out;
  return out;
}

const char* ptxVersion(Target t) {
  switch (t) {
  case Target::SM80:
    return "8.4";
  case Target::SM90a:
    return "8.4";
  case Target::SM100a:
    return "8.7";
  }
  return "8.4";
}

} // namespace

PtxKernel FunctionLowering::run() {
  PtxKernel k;
  k.entry = sanitize(fn_.name);
  k.numWarps = fn_.numWarps;
  b_.enableLineInfo(options_.lineInfo);
  if (options_.lineInfo && sources_) {
    std::map<uint32_t, int> seen;
    ir::walk(fn_.body, [&](const ir::Op& op) {
      SourceLoc l = op.loc();
      if (!l.valid() || seen.count(l.file) || l.file >= sources_->numFiles()) return;
      seen[l.file] = b_.addFile(sources_->path(l.file));
      b_.mapFile(l.file, seen[l.file]);
    });
  }

  // Parameters: loaded once at entry.
  std::vector<std::string> decls;
  for (size_t i = 0; i < fn_.args.size(); ++i) {
    const ir::KernelArg& a = fn_.args[i];
    if (!a.value) continue;
    std::string pname = k.entry + "_param_" + std::to_string(decls.size());
    decls.push_back(paramDecl(a, pname));
    k.params.push_back({a.name, a.type.str(), paramBytes(a), a.divisibility});
    if (a.type.kind == ir::TypeKind::Descriptor) {
      // Shared-memory tiles of descriptor copies are dense row-major: the host encodes the
      // tensor map without swizzle (read from the type by the launchers).
      std::string& type = k.params.back().type;
      type.insert(type.size() - 1, ", swizzle=0");
      // TMA reads the CUtensorMap through a generic address of the kernel parameter.
      std::string addr = b_.pure("mov.b64", RegClass::B64, {pname});
      bind(a.value, {b_.pure("cvta.param.u64", RegClass::B64, {addr})});
      continue;
    }
    RegClass c = elemClass(a.type);
    std::string ty = decls.back().substr(7, decls.back().find(' ', 7) - 7); // ".u64" etc.
    if (a.type.elem == DType::I1 && !a.type.pointer) {
      std::string byte = b_.pure("ld.param.u8", RegClass::B16, {"[" + pname + "]"});
      bind(a.value, {b_.pure("setp.ne.u16", RegClass::Pred, {byte, "0"})});
    } else if (c == RegClass::B16) {
      bind(a.value, {b_.pure("ld.param" + ty, RegClass::B16, {"[" + pname + "]"})});
    } else {
      bind(a.value, {b_.pure("ld.param" + ty, c, {"[" + pname + "]"})});
    }
  }

  scratchParam_ = k.entry + "_param_global_scratch";
  // Every lane of a warp reads lane 0's warp index: ptxas then treats it, and what is computed
  // from it, as warp-uniform (as Triton does). Dropped below when nothing uses it.
  warpIndex_ = b_.newReg(RegClass::B32);
  b_.inst("shfl.sync.idx.b32",
          {warpIndex_,
           b_.pure("shr.u32", RegClass::B32, {b_.pure("mov.u32", RegClass::B32, {"%tid.x"}), "5"}),
           "0", "31", "-1"});
  planPackedHalfAccumulators();
  lowerBlock(fn_.body);
  b_.eliminateDeadInstructions();
  if (deviceTensorMaps_) {
    // The launcher passes the global scratch (set_allocator's) last: grid-many times
    // globalScratchBytes.
    decls.push_back(".param .u64 " + scratchParam_);
    k.params.push_back({kGlobalScratchParam, "ptr<i8>", 8, 128});
    k.globalScratchBytes = 128 * deviceTensorMaps_;
  }
  // Descriptors that TMA copies into swizzled TLX buffers declare that swizzle to the host.
  for (size_t i = 0, p = 0; i < fn_.args.size(); ++i) {
    const ir::KernelArg& a = fn_.args[i];
    if (!a.value) continue;
    auto it = descriptorSwizzle_.find(a.value);
    if (it != descriptorSwizzle_.end() && it->second) {
      std::string& type = k.params.at(p).type;
      size_t at = type.find("swizzle=0");
      if (at != std::string::npos) type.replace(at, 9, "swizzle=" + std::to_string(it->second));
    }
    // Loads into padded e2m1 tiles: the host encodes 4-bit values, 16 to 16 bytes (TlxTma.cpp).
    if (auto f = descriptorFp4Padded_.find(a.value); f != descriptorFp4Padded_.end() && f->second)
      k.params.at(p).type.insert(k.params.at(p).type.size() - 1, ", fp4_padded");
    ++p;
  }

  std::string out;
  out += "//\n// Generated by warpweave\n//\n\n";
  std::string version = ptxVersion(options_.target);
  if (needsPtx86_ && version < "8.6") version = "8.6"; // cp.async.bulk into .shared::cta
  out += ".version " + version + "\n";
  out += ".target " + std::string(targetName(options_.target)) + "\n";
  out += ".address_size 64\n\n";
  // 1024-byte alignment lets TMA tiles and swizzled operands sit at aligned offsets.
  if (usesShared_) out += ".extern .shared .align 1024 .b8 " + std::string(kSharedBase) + "[];\n\n";
  out += ".visible .entry " + k.entry + "(";
  for (size_t i = 0; i < decls.size(); ++i) out += (i ? ",\n\t" : "\n\t") + decls[i];
  out += decls.empty() ? ")\n" : "\n)\n";
  out += ".reqntid " + std::to_string(totalWarps_ * 32) + ", 1, 1\n";
  if (fn_.numCtas > 1) {
    if (options_.target == Target::SM80)
      raiseError(fn_.loc, "kernel '" + fn_.name + "' is compiled for clusters of " +
                              std::to_string(fn_.numCtas) +
                              " CTAs (ctas_per_cga / num_ctas), which sm_80 does not have; "
                              "compile for sm_90a or sm_100a, or use one CTA per cluster");
    // The cluster shape, declared as nvcc declares __cluster_dims__: the same (x, y, z) shape
    // that the launcher passes to cuLaunchKernelEx (Launcher.cpp); the two must agree.
    out += ".explicitcluster\n";
    out += ".reqnctapercluster " + std::to_string(fn_.clusterDims[0]) + ", " +
           std::to_string(fn_.clusterDims[1]) + ", " + std::to_string(fn_.clusterDims[2]) + "\n";
  }
  // setmaxnreg only moves registers within the budget the launch grants every thread.
  if (maxRegisters_ && options_.maxRegisters)
    raiseError(fn_.loc, "kernel '" + fn_.name +
                            "' was given maxnreg=" + std::to_string(options_.maxRegisters) +
                            ", but its async tasks' register budgets set the launch's registers "
                            "per thread (" +
                            std::to_string(maxRegisters_) +
                            "); leave maxnreg out, or change the tasks' registers=");
  if (maxRegisters_)
    out += ".maxnreg " + std::to_string(maxRegisters_) + "\n";
  else if (options_.maxRegisters)
    out += ".maxnreg " + std::to_string(options_.maxRegisters) + "\n";
  else if (int cap = registersPerThreadLimit())
    out += ".maxnreg " + std::to_string(cap) + "\n";
  out += "{\n";
  out += b_.regDeclarations();
  out += "\n";
  if (options_.fpFusion) contractMulAdd(b_.mutableBody());
  // Measured where it pays (sm_100a's tensor-memory softmax kernels spilled without it); on
  // sm_90a it moves no register count, only ptxas's schedule of kernels timed on the H200 as
  // they are, so it stays off there until it is timed too.
  if (options_.target == Target::SM100a) {
    sinkSingleUses(b_.mutableBody());
    hoistDyingCombines(b_.mutableBody());
  }
  out += b_.body();
  out += "}\n";
  std::string files = b_.fileDirectives();
  if (!files.empty()) out += "\n" + files;
  k.numWarps = totalWarps_;
  k.ptx = std::move(out);
  // Checked in 64 bits before PtxKernel's int holds it (4 GiB once wrapped to 0 there).
  int64_t shared = alignTo(sharedBytes_, 16);
  int64_t maxShared = maxSharedBytes(options_.target);
  if (shared > maxShared) {
    // An op whose scratch alone is most of it (a histogram of many bins, a large conversion)
    // is named: the stages and blocks the message suggests are then not the cause.
    std::vector<Diagnostic> notes;
    if (const ir::Op* user = layouts_.largestScratchUser())
      if (int64_t bytes = layouts_.scratchBytesFor(*user);
          bytes * 2 > shared && user->loc().valid())
        notes.push_back(note(user->loc(), std::string("'") + user->name() + "' here takes " +
                                              std::to_string(bytes) +
                                              " of those bytes as scratch for its own work"));
    raiseError(fn_.loc,
               "kernel '" + fn_.name + "' needs " + std::to_string(shared) + kSharedMemoryOverflow +
                   std::to_string(maxShared) + " a block may use on " +
                   targetName(options_.target) + "; use fewer pipeline stages or smaller blocks",
               std::move(notes));
  }
  k.sharedBytes = static_cast<int>(shared);
  return k;
}

// ptxas for sm_100a (12.8 to 13.0), given no register limit, aims at more resident CTAs than the
// kernel can use and spills for them: 4-warp tl.dot kernels came out at 32 registers with
// 12-43 KB (capped by what their shared memory leaves resident, at 80 with 6-12 KB). (A 4-warp
// pipelined GEMM's 168 registers and 1,408 bytes of spills were its x128 tcgen05.ld messages':
// tmemMessageRegisters.) So a kernel without register budgets of its own
// gets the most a thread of its block may have (255, or 65,536 over its threads), as sm_90a's
// ptxas mostly gives without being told. sm_90a's ptxas does the same to long straight-line
// per-element FMA dots, so kernels with those get the cap on every target: told only .reqntid,
// ptxas 13 held a 64x64x32 fp32 dot at 4 warps (1,024 products a thread) to 32 registers and
// 17 KB of spills (255 registers and 3.3 KB with the cap), a 64x128x64 one to 32 registers,
// 39 KB and 10 s of ptxas (16 KB and 6 s). Other kernels: 0 (nothing written).
int FunctionLowering::registersPerThreadLimit() const {
  if (options_.target != Target::SM100a && !hasFmaDots_) return 0;
  constexpr int kRegistersPerSm = 65536;
  int perThread = kRegistersPerSm / (totalWarps_ * 32) / 8 * 8;
  return std::min(255, perThread);
}

PtxKernel emitPtx(const ir::Function& fn, const CompileOptions& options,
                  const SourceManager* sources) {
  FunctionLowering lowering(fn, options, sources);
  return lowering.run();
}

} // namespace ww::codegen
