// Blackwell (sm_100a) tensor memory and tcgen05: TMEM buffers (local_alloc with storage tmem, their
// views and column slices), their loads and stores (tcgen05.ld / tcgen05.st with their waits),
// the MMA into a TMEM accumulator (tcgen05.mma) and its commits (tcgen05.commit).
//
// Tensor memory is 128 lanes of 512 32-bit columns per CTA. The kernel allocates the columns all
// its TMEM buffers need once, at its first TMEM local_alloc (tcgen05.alloc by warp 0, which then
// gives up its permit to allocate more), and frees them before it returns (tcgen05.dealloc by
// warp 0 after every warp has met). A [128, N] tile of 32-bit elements takes N columns, row r in
// lane r; a TMEM buffer value is one register, its TMEM address (lane << 16 | column).
//
// Ordering: every tcgen05 op that follows a thread synchronization (barrier wait, bar.sync)
// starts with tcgen05.fence::after_thread_sync, and every load / store ends with its wait and
// tcgen05.fence::before_thread_sync, so that the mbarrier / bar.sync ordering the kernel writes
// carries over to the tensor core.
#include "codegen/Lowering.h"
#include "codegen/Wgmma.h"
#include "ir/BlockScaled.h"
#include "ir/OpAttrs.h"
#include "ir/TmemPairs.h"

#include <algorithm>
#include <bit>
#include <map>
#include <stdexcept>
#include <unordered_set>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

bool isTmemValue(const ir::Value* v) {
  return v->type().kind == ir::TypeKind::Buffer && v->type().space == ir::MemorySpace::Tmem;
}

namespace {

/// The user error for a TMEM tile the backend cannot place.
void requireTmemTile(const ir::Op& at, const ir::Type& t) {
  const int bytes = ir::byteWidth(t.elem);
  if (ir::isTmemScaleTile(t)) return;
  if (bytes == 1) {
    // fp8 tiles: four to a 32-bit column, [128, N] (an MMA's A, TLX's P of mxfp8 attention).
    if (!(t.elem == DType::F8E4M3 || t.elem == DType::F8E5M2) || t.shape.size() != 2 ||
        t.shape[0] != 128 || t.shape[1] < 4 || !std::has_single_bit(uint64_t(t.shape[1])))
      raiseError(at.loc(),
                 std::string("'") + at.name() + "' of the tensor-memory buffer " + t.str() +
                     ": the sm_100a backend places 8-bit tensor-memory buffers as "
                     "block scales (uint8 [rows, cols], rows 64 or a multiple of 128 "
                     "and cols of 4) or as fp8 [128, N] tiles (N a power of two, at least "
                     "4; four to a 32-bit column)");
    return;
  }
  if (t.shape.size() != 2 || (t.shape[0] != 128 && t.shape[0] != 64) ||
      (bytes != 4 && bytes != 2) || t.shape[1] < 1 || !std::has_single_bit(uint64_t(t.shape[1])) ||
      t.shape[1] * bytes < 4 * (t.shape[0] == 64 ? 2 : 1))
    raiseError(at.loc(), std::string("'") + at.name() + "' of the tensor-memory buffer " + t.str() +
                             " is not supported by the sm_100a backend yet: it places [128, N] "
                             "and [64, N] tiles of 32-bit (fp32, int32) or 16-bit elements, N a "
                             "power of two, 16-bit ones two to a 32-bit column ([64, N]: at "
                             "least two columns)");
}

} // namespace

void FunctionLowering::planTensorMemory() {
  // CTA pairs: every tcgen05 op of a kernel uses one cta_group (PTX ISA, tcgen05.alloc), so one
  // two-CTA MMA or commit makes all of them the pair's.
  const ir::Op* pairedAt = nullptr;
  ir::walk(fn_.body, [&](const ir::Op& op) {
    if (!pairedAt && ((op.code() == OpCode::Tcgen05Mma && ir::attr::Tcgen05Mma::twoCtas(op)) ||
                      (op.code() == OpCode::Tcgen05Commit && ir::attr::Tcgen05Commit::twoCtas(op))))
      pairedAt = &op;
  });
  pairedMma_ = pairedAt != nullptr;
  if (pairedAt && options_.target == Target::SM100a && (fn_.numCtas < 2 || fn_.numCtas % 2))
    raiseError(pairedAt->loc(),
               std::string("tlx.") +
                   (pairedAt->code() == OpCode::Tcgen05Mma ? "async_dot" : "tcgen05_commit") +
                   " with two_ctas=True runs on a pair of CTAs: launch with "
                   "clusters of an even number of CTAs, ctas_per_cga=(2, 1, 1) "
                   "(this kernel has " +
                   std::to_string(std::max(1, fn_.numCtas)) + " per cluster)");
  pairSplit_ = ir::pairSplitAllocs(fn_.body);
  pairLhs_ = ir::pairLhsAllocs(fn_.body);
  auto columnsOf = [&](const ir::Op& alloc) {
    return ir::tmemColumns(alloc.result()->type(), pairSplit_.count(&alloc) != 0);
  };
  ir::walk(fn_.body, [&](const ir::Op& op) {
    if (op.code() != OpCode::LocalAlloc || !isTmemValue(op.result())) return;
    const ir::Type& t = op.result()->type();
    requireTmemTile(op, t);
    if (ir::attr::LocalAlloc::hasReuse(op)) {
      // reuse=: these buffers overlay the reused allocation's columns from its first one.
      const ir::Value* reused = op.operand(0);
      const ir::Type& rt = reused->type();
      if (pairSplit_.count(&op))
        raiseError(op.loc(),
                   "tlx.local_alloc of " + t.str() +
                       " with reuse= of a buffer is the "
                       "accumulator of a CTA pair's M = 64 MMA; the sm_100a backend places "
                       "those on their own or in a storage_alias_spec");
      if (ir::tmemColumns(t) * t.count > columnsOf(*reused->def()) * rt.count)
        raiseError(op.loc(), "tlx.local_alloc of " + t.str() + " reuses " + rt.str() +
                                 ", but needs " + std::to_string(ir::tmemColumns(t) * t.count) +
                                 " tensor-memory columns where that allocation has " +
                                 std::to_string(columnsOf(*reused->def()) * rt.count));
      tmemOffsets_[op.result()] = tmemOffsets_.at(reused);
      return;
    }
    if (const int64_t id = ir::attr::LocalAlloc::alias(op); id >= 0) {
      // A storage_alias_spec member: the spec's columns are placed at its first member, as
      // many as every member's last buffer needs (and alias_bytes); each member at its
      // alias_offset in them (specialize/TlxStorageAlias.cpp).
      auto [region, fresh] = tmemAliasRegions_.try_emplace(id, tmemColumns_);
      if (fresh) {
        int64_t cols = 0;
        ir::walk(fn_.body, [&](const ir::Op& m) {
          if (m.code() != OpCode::LocalAlloc || ir::attr::LocalAlloc::alias(m) != id) return;
          const ir::Type& mt = m.result()->type();
          const int64_t unit = columnsOf(m);
          const int64_t stride =
              ir::attr::LocalAlloc::aliasStride(m) ? ir::attr::LocalAlloc::aliasStride(m) : unit;
          const int64_t group = ir::attr::LocalAlloc::aliasGroup(m);
          cols = std::max(cols, ir::attr::LocalAlloc::aliasBytes(m));
          for (int64_t i = 0; i < mt.count; ++i)
            cols = std::max(cols, ir::attr::LocalAlloc::aliasOffset(m) + i * stride +
                                      (i % group) * unit + unit);
        });
        tmemColumns_ += cols;
      }
      tmemOffsets_[op.result()] = region->second + ir::attr::LocalAlloc::aliasOffset(op);
      const int64_t stride = ir::attr::LocalAlloc::aliasStride(op);
      tmemSpacing_[op.result()] = {stride ? stride : columnsOf(op),
                                   ir::attr::LocalAlloc::aliasGroup(op)};
    } else {
      tmemOffsets_[op.result()] = tmemColumns_;
      tmemColumns_ += columnsOf(op) * t.count;
      if (pairSplit_.count(&op)) tmemSpacing_[op.result()] = {columnsOf(op), 1};
    }
    if (tmemColumns_ > 512)
      raiseError(op.loc(), "the kernel's tensor-memory buffers need " +
                               std::to_string(tmemColumns_) +
                               " columns, more than the 512 of a CTA's tensor memory");
  });
  // A block-scaled MMA with scales in shared memory copies them into columns of its own
  // (tcgen05.cp) before each issue, as Triton does.
  ir::walk(fn_.body, [&](const ir::Op& op) {
    if (op.code() != OpCode::Tcgen05Mma || !ir::attr::Tcgen05Mma::hasScales(op)) return;
    const int64_t cols = ir::scaleColumns(op);
    const int64_t bRows = (op.operand(2)->type().shape[1] + 127) / 128 * 128;
    std::pair<int64_t, int64_t> own{-1, -1};
    for (unsigned s = 0; s < 2; ++s) {
      if (isTmemValue(op.operand(3 + s))) continue;
      (s ? own.second : own.first) = tmemColumns_;
      tmemColumns_ += (s ? bRows : 128) * cols / 128;
    }
    scaleColumns_[&op] = own;
    if (tmemColumns_ > 512)
      raiseError(op.loc(), "the kernel's tensor-memory buffers and the columns its block-scaled "
                           "MMAs copy their shared-memory scales into need " +
                               std::to_string(tmemColumns_) +
                               " columns, more than the 512 of a CTA's tensor memory");
  });
}

std::string FunctionLowering::tensorMemoryBase(const ir::Op& at) {
  if (!tmemBase_.empty()) return tmemBase_;
  if (taskWarps_ || at.parentBlock() != &fn_.body)
    raiseError(at.loc(), "a tensor-memory local_alloc must be at the top level of the kernel, "
                         "outside control flow and async tasks (every warp allocates it)");
  // Columns are allocated in powers of two, 32 at least.
  tmemAllocColumns_ = std::max<int64_t>(32, int64_t(std::bit_ceil(uint64_t(tmemColumns_))));
  int64_t slot = scratch(16);
  std::string addr = sharedAddress(immInt(slot));
  std::string warp0 = b_.pure("setp.lt.u32", RegClass::Pred, {tid(), "32"});
  std::string skip = b_.newLabel("tmem_alloc_done");
  b_.inst("bra", {skip}, warp0, true);
  // A CTA pair's allocation is collective: warp 0 of each CTA of the pair allocates.
  const std::string group = pairedMma_ ? ".cta_group::2" : ".cta_group::1";
  b_.inst("tcgen05.alloc" + group + ".sync.aligned.shared::cta.b32",
          {bracketed(addr), immInt(tmemAllocColumns_)});
  b_.inst("tcgen05.relinquish_alloc_permit" + group + ".sync.aligned", {});
  b_.label(skip);
  b_.inst("tcgen05.fence::before_thread_sync", {});
  barrier();
  b_.inst("tcgen05.fence::after_thread_sync", {});
  tmemBase_ = b_.newReg(RegClass::B32);
  b_.inst("ld.shared.b32", {tmemBase_, bracketed(addr)});
  // The slot is scratch: every thread has read it before anything reuses it.
  barrier();
  return tmemBase_;
}

void FunctionLowering::releaseTensorMemory() {
  if (tmemBase_.empty() || taskWarps_) return;
  b_.inst("tcgen05.fence::before_thread_sync", {});
  if (pairedMma_) {
    // The pair deallocates together, once neither CTA touches its tensor memory any more (the
    // leader's MMAs write the peer's): every thread of the cluster meets first.
    b_.inst("barrier.cluster.arrive.release", {});
    b_.inst("barrier.cluster.wait.acquire", {});
  } else {
    b_.inst("bar.sync", {"0"});
  }
  b_.inst("tcgen05.fence::after_thread_sync", {});
  std::string warp0 = b_.pure("setp.lt.u32", RegClass::Pred, {tid(), "32"});
  std::string skip = b_.newLabel("tmem_dealloc_done");
  b_.inst("bra", {skip}, warp0, true);
  b_.inst(std::string("tcgen05.dealloc") + (pairedMma_ ? ".cta_group::2" : ".cta_group::1") +
              ".sync.aligned.b32",
          {tmemBase_, immInt(tmemAllocColumns_)});
  b_.label(skip);
}

// A task's tensor-memory buffers are the allocation's base plus a column, computed before the
// tasks (every warp allocates). Held from there, each address is live across every task that
// runs before the one using it, in registers that the smaller setmaxnreg budgets must hold too:
// in TLX's 2-CTA attention backward ptxas spilled three of them at the 88-register tasks. An
// add in the task itself leaves the base the only register the tasks share.
std::vector<std::pair<const ir::Value*, Regs>>
FunctionLowering::rebindTmemAddresses(const ir::Block& task) {
  std::vector<std::pair<const ir::Value*, Regs>> saved;
  if (tmemBase_.empty()) return saved;
  std::unordered_set<const ir::Value*> seen;
  ir::walk(task, [&](const ir::Op& op) {
    for (const ir::Value* v : op.operands()) {
      auto col = tmemOffsets_.find(v);
      if (col == tmemOffsets_.end() || col->second == 0 || !seen.insert(v).second) continue;
      auto bound = values_.find(v);
      if (bound == values_.end()) continue; // allocated in no scope the task sees
      saved.emplace_back(v, bound->second);
      // Not pure(): hash-consing would hand back the register computed before the tasks.
      std::string address = b_.newReg(RegClass::B32);
      b_.inst("add.u32", {address, tmemBase_, immInt(col->second)});
      bound->second = {address};
    }
  });
  return saved;
}

/// The tensor-memory allocation `v` views: through local_view / local_slice and values chosen
/// at run time (their first choice: chosen views of one buffer ring alike).
const ir::Value* FunctionLowering::tmemRoot(const ir::Value* v) {
  for (int guard = 0; guard < 1000; ++guard) {
    const ir::Op* def = v->def();
    if (def && (def->code() == OpCode::LocalView || def->code() == OpCode::LocalSlice)) {
      v = def->operand(0);
      continue;
    }
    std::vector<const ir::Value*> chosen = chosenValues(v);
    if (chosen.empty()) return v;
    v = chosen.front();
  }
  return v;
}

void FunctionLowering::lowerTmemBuffer(const ir::Op& op) {
  if (options_.target != Target::SM100a)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' of a tensor-memory buffer needs sm_100a (Blackwell); compile for "
                             "sm_100a or use tlx.storage_kind.smem");
  switch (op.code()) {
  case OpCode::LocalAlloc: {
    std::string base = tensorMemoryBase(op);
    int64_t col = tmemOffsets_.at(op.result());
    return bind(op.result(), {col ? b_.pure("add.u32", RegClass::B32, {base, immInt(col)}) : base});
  }
  case OpCode::LocalView: {
    if (ir::attr::LocalView::subview(op))
      raiseError(op.loc(), "indexing rows of a tensor-memory buffer view is not supported; use "
                           "tlx.local_slice");
    std::string base = b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
    std::string index = b_.materialize(operand(op, 1).at(0), RegClass::B32);
    const int64_t unit = ir::tmemColumns(op.operand(0)->type(), pairSplit(op.operand(0)));
    TmemSpacing spacing{unit, 1};
    if (auto it = tmemSpacing_.find(tmemRoot(op.operand(0))); it != tmemSpacing_.end())
      spacing = it->second;
    std::string col = b_.pure("mad.lo.s32", RegClass::B32, {index, immInt(spacing.stride), base});
    if (spacing.group > 1)
      col = b_.pure("mad.lo.s32", RegClass::B32,
                    {groupIndex(index, spacing.group), immInt(unit), col});
    return bind(op.result(), {col});
  }
  case OpCode::LocalSlice: {
    const ir::Type& src = op.operand(0)->type();
    if (pairSplit(op.operand(0)))
      raiseError(op.loc(),
                 "tlx.local_slice of " + src.str() +
                     ", the accumulator of a CTA "
                     "pair's M = 64 MMA (128 lanes of half its columns), is not supported "
                     "by the sm_100a backend yet; slice a [128, N / 2] buffer that shares "
                     "its columns (storage_alias_spec)");
    std::vector<int64_t> offsets = ir::attr::LocalSlice::offsets(op),
                         sizes = ir::attr::LocalSlice::sizes(op);
    if (offsets.size() != 2 || offsets[0] != 0 || sizes[0] != src.shape[0])
      raiseError(op.loc(), "tlx.local_slice of the tensor-memory buffer " + src.str() +
                               " must keep every row (lane) and slice columns only");
    int64_t col = offsets[1] * ir::byteWidth(src.elem) / 4;
    if (ir::isTmemScaleTile(src)) {
      // Block scales: whole 32-bit words of every row (ir/BlockScaled.h), the view's words at
      // the tile's column pitch.
      if (offsets[1] % 4 != 0 || sizes[1] % 4 != 0)
        raiseError(op.loc(), "tlx.local_slice of the tensor-memory block scales " + src.str() +
                                 " takes scales [" + std::to_string(offsets[1]) + ", " +
                                 std::to_string(offsets[1] + sizes[1]) +
                                 "): a slice of block scales starts and ends at a 32-bit column "
                                 "word, a multiple of 4 scales");
      col = ir::scaleTileColumn(src.shape[0], 0, offsets[1]);
    } else if (ir::byteWidth(src.elem) == 1) {
      raiseError(op.loc(), "tlx.local_slice of the 8-bit tensor-memory buffer " + src.str() +
                               " is not supported by the sm_100a backend yet");
    }
    requireTmemTile(op, op.result()->type());
    std::string base = regsOf(op.operand(0)).at(0);
    return bind(op.result(), {col ? b_.pure("add.u32", RegClass::B32,
                                            {b_.materialize(base, RegClass::B32), immInt(col)})
                                  : base});
  }
  case OpCode::LocalTrans:
  case OpCode::LocalReinterpret:
    raiseError(op.loc(), std::string("tlx.") + op.name() +
                             " of a tensor-memory buffer is not supported by the sm_100a "
                             "backend yet");
  case OpCode::LocalLoad:
  case OpCode::LocalStore:
    return lowerTmemCopy(op);
  default:
    throw std::logic_error("codegen: not a TMEM buffer op");
  }
}

bool FunctionLowering::pairSplit(const ir::Value* v) {
  const ir::Op* def = tmemRoot(v)->def();
  return def && pairSplit_.count(def);
}

bool FunctionLowering::pairLhs(const ir::Value* v) {
  const ir::Op* def = tmemRoot(v)->def();
  return def && pairLhs_.count(def) && v->type().shape.size() == 2 && v->type().shape[0] == 64;
}

std::string FunctionLowering::warpLanesAddress(const ir::Op& op, const std::string& warp) {
  // A warp reaches the 32 lanes of its quarter (warp % 4) of tensor memory: lane bits << 16.
  std::string quad = b_.pure("and.b32", RegClass::B32, {warp, "3"});
  std::string laneBits = b_.pure("shl.b32", RegClass::B32, {quad, "21"});
  return b_.pure("add.u32", RegClass::B32,
                 {b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32), laneBits});
}

// Registers of one tcgen05.ld / st message, sized as Triton sizes them (TensorMemoryUtils.cpp,
// getVec): at most half of what a thread may hold where the message is issued (its task's
// setmaxnreg budget, the kernel's .maxnreg, 256 at most), and half that again when a thread has
// all 256 and the access needs more than one message. A message takes that many consecutive
// registers, which ptxas finds late in a full register file only by spilling: TLX's pipelined
// GEMM at BN 256 (a [128, 256] fp32 accumulator, 256 registers a thread) took 168 registers
// and 1,408 bytes of spills in x128 messages without .maxnreg, and 166 and none in x64 ones.
int64_t FunctionLowering::tmemMessageRegisters(int64_t perThread, bool packedStore) const {
  // A store of 16-bit / 8-bit elements sends words packed here, new registers made while the
  // elements they come from (the fp32 values converted) are still live: a message takes them
  // as one block of consecutive registers, which ptxas must free among those values (moves,
  // temporaries) before the store. Eight-word messages leave it free to place each block where
  // the values of its columns die. The attention softmax's P store (128 fp32 columns a thread
  // converted to fp16 at setmaxnreg 152): x64 made ptxas 13.0 spill 60-168 bytes in TLX's
  // blackwell_fa_ws_persistent / _pipelined (causal), x8 none; x16 / x32 / x4 kept or added
  // spills (tests/python/test_blackwell_softmax_registers.py).
  if (packedStore) return std::min<int64_t>(8, tmemMessageRegisters(perThread));
  int limit = 256;
  if (maxRegisters_)
    limit = maxRegisters_;
  else if (int cap = registersPerThreadLimit(); cap && cap < 255)
    limit = cap; // .maxnreg of many warps (Triton's module would leave ptxas 256)
  if (taskRegisters_) limit = std::min(limit, taskRegisters_);
  int64_t half = limit / 2;
  if (limit == 256 && perThread > half) half /= 2;
  return std::min<int64_t>(128, int64_t(std::bit_floor(uint64_t(std::max<int64_t>(1, half)))));
}

void FunctionLowering::lowerTmemCopy(const ir::Op& op) {
  const bool load = op.code() == OpCode::LocalLoad;
  const ir::Type& vt = op.operand(0)->type();
  requireTmemTile(op, vt);
  if (ir::isTmemScaleTile(vt)) return lowerTmemScalesLoadStore(op);
  // A CTA pair's [64, N] accumulator or A tile (ir/TmemPairs.h) moves as the tile of 128 lanes
  // it is, [128, N / 2] or [128, K]: the same registers, which its values' layout
  // (layout::tmemPairRegisterLayout) names by the [64, N] tile's coordinates.
  const bool split = pairSplit(op.operand(0)), lhs = !split && pairLhs(op.operand(0));
  ir::Type bt = vt;
  if (split) bt.shape = {128, vt.shape[1] / 2};
  if (lhs) bt.shape[0] = 128;
  if (warps() % 4 != 0 || taskFirstWarp_ % 4 != 0)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' of tensor memory runs on whole warp groups: each warp of a group "
                             "reaches its own 32 lanes; use num_warps a multiple of 4 (this code "
                             "has " +
                             std::to_string(warps()) + ")");
  const ir::Value* value = load ? op.result() : op.operand(1);
  const LinearLayout lanes = layout::tmemRegisterLayout(bt.shape, warps());
  const LinearLayout l =
      split || lhs ? layout::tmemPairRegisterLayout(vt.shape, warps(), lhs) : lanes;
  // A load the kernel gave another layout (tlx.local_load's layout=) reads in tcgen05's and
  // converts below (layout assignment planned the conversion's scratch at this op).
  // A store of a value in a layout that keeps tcgen05's rows writes its column runs as they are
  // (layout assignment let it keep that layout); any other stored value came converted.
  const LinearLayout& wanted = load ? layoutOf(value) : operandLayoutOf(op, 1);
  if (!(wanted == l)) {
    if (split || lhs) {
      // Layout assignment found the tile's allocation through local_view / local_slice; a view
      // chosen at run time it could not see.
      if (!(load && ir::attr::LocalLoad::hasLayout(op)))
        raiseError(op.loc(), std::string("'") + op.name() + "' of " + vt.str() +
                                 ", a CTA pair's M = 64 " + (split ? "accumulator" : "A tile") +
                                 " chosen at run time, is not supported by the sm_100a backend; "
                                 "use a local_view of its allocation");
    } else if (auto bits = layout::tmemColumnBits(wanted, bt.shape, ir::byteWidth(bt.elem))) {
      return lowerTmemColumns(op, *bits);
    } else if (!(load && ir::attr::LocalLoad::hasLayout(op))) {
      throw std::logic_error("codegen: a TMEM load / store value not in the tcgen05 layout");
    }
  }
  // Each thread's row and its warp group's columns. [128, N]: .32x32b, row 32 (w % 4) + lane,
  // the group's columns in order. [64, N]: .16x32bx2, row 16 (w % 4) + lane % 16 in lane
  // 32 (w % 4) + lane % 16 (the PTX ISA's layout F), threads 16-31 the second half of the
  // columns (immHalfSplitoff). 16-bit elements go two to a 32-bit column (packed, the lower
  // column in the low half).
  const bool rows64 = bt.shape[0] == 64;
  const int bytes = ir::byteWidth(bt.elem);
  const int64_t groups = warps() / 4;
  if (bt.shape[1] % groups != 0 || bt.shape[1] / groups * bytes % 4 != 0)
    raiseError(op.loc(), std::string("'") + op.name() + "' of the tensor-memory buffer " +
                             vt.str() + " with " + std::to_string(warps()) + " warps: its " +
                             std::to_string(groups) + " warp groups each move an equal share of " +
                             "its " + std::to_string(bt.shape[1]) +
                             " columns, in whole 32-bit columns of tensor memory; use a tile " +
                             "of at least " + std::to_string(groups * 4 / bytes) +
                             " columns or 4 warps");
  const int64_t cols = bt.shape[1] / groups;            // elements of the group's columns
  const int64_t cells = cols * bytes / 4;               // their 32-bit TMEM columns
  const int64_t perThread = rows64 ? cells / 2 : cells; // 32-bit registers a thread moves
  const int64_t elemsPerThread = rows64 ? cols / 2 : cols;
  std::vector<int32_t> regOfCol(size_t(elemsPerThread), -1);
  for (int32_t r = 0; r < lanes.getInDimSize(layout::kRegister); ++r) {
    std::vector<int32_t> c = registerCoords(lanes, r);
    if (c[0] != 0 || c[1] >= elemsPerThread || regOfCol[size_t(c[1])] >= 0)
      throw std::logic_error("codegen: unexpected tcgen05 register layout");
    regOfCol[size_t(c[1])] = r;
  }
  std::string warp = b_.pure("shr.u32", RegClass::B32, {tid(), "5"});
  std::string addr = warpLanesAddress(op, warp);
  if (groups > 1) {
    std::string group = b_.pure("shr.u32", RegClass::B32, {warp, "2"});
    addr = b_.pure("mad.lo.s32", RegClass::B32, {group, immInt(cells), addr});
  }
  const RegClass rc = regClassOf(bt.elem, false);
  Regs regs; // the thread's elements, by register of the layout
  Regs words = Regs(size_t(perThread));
  if (load) {
    regs.resize(size_t(l.getInDimSize(layout::kRegister)));
    for (auto& r : regs) r = b_.newReg(rc);
    for (auto& w : words) w = bytes == 4 ? std::string() : b_.newReg(RegClass::B32);
  } else {
    const Regs& src = operand(op, 1);
    for (const std::string& s : src) regs.push_back(b_.materialize(s, rc));
  }
  // The 32-bit word of register j of the message: the element itself, or two packed.
  auto word = [&](int64_t j) -> std::string {
    if (bytes == 4) return regs.at(size_t(regOfCol[size_t(j)]));
    if (load) return words[size_t(j)];
    if (bytes == 1) { // fp8: four to a word, the lowest column in the lowest byte
      std::string x[4];
      for (int i = 0; i < 4; ++i) x[i] = regs.at(size_t(regOfCol[size_t(4 * j + i)]));
      return packBytes(b_, x);
    }
    std::string w = b_.newReg(RegClass::B32);
    b_.inst("mov.b32", {w, "{" + regs.at(size_t(regOfCol[size_t(2 * j)])) + ", " +
                               regs.at(size_t(regOfCol[size_t(2 * j + 1)])) + "}"});
    return w;
  };
  if (!load) barrier(); // the agent's earlier accesses to the tile are done (as local_store's)
  b_.inst("tcgen05.fence::after_thread_sync", {});
  const int64_t message = tmemMessageRegisters(perThread, !load && bytes < 4);
  for (int64_t c0 = 0; c0 < perThread; c0 += message) {
    int64_t n = std::min<int64_t>(message, perThread - c0);
    std::string list = "{";
    for (int64_t j = 0; j < n; ++j) list += (j ? ", " : "") + word(c0 + j);
    list += "}";
    std::string at = c0 ? b_.pure("add.u32", RegClass::B32, {addr, immInt(c0)}) : addr;
    std::string shape = (rows64 ? ".16x32bx2.x" : ".32x32b.x") + std::to_string(n) + ".b32";
    // .16x32bx2: the second half of the columns, immHalfSplitoff further along.
    std::vector<std::string> operands = load ? std::vector<std::string>{list, bracketed(at)}
                                             : std::vector<std::string>{bracketed(at)};
    if (rows64) operands.push_back(immInt(perThread));
    if (!load) operands.push_back(list);
    b_.inst(std::string(load ? "tcgen05.ld" : "tcgen05.st") + ".sync.aligned" + shape, operands);
  }
  b_.inst(load ? "tcgen05.wait::ld.sync.aligned" : "tcgen05.wait::st.sync.aligned", {});
  b_.inst("tcgen05.fence::before_thread_sync", {});
  if (load) {
    for (int64_t j = 0; bytes == 2 && j < perThread; ++j)
      b_.inst("mov.b32", {"{" + regs.at(size_t(regOfCol[size_t(2 * j)])) + ", " +
                              regs.at(size_t(regOfCol[size_t(2 * j + 1)])) + "}",
                          words[size_t(j)]});
    for (int64_t j = 0; bytes == 1 && j < perThread; ++j)
      for (int i = 0; i < 4; ++i)
        unpackByte(b_, words[size_t(j)], i, regs.at(size_t(regOfCol[size_t(4 * j + i)])));
    if (!(wanted == l)) regs = convert(regs, l, wanted, bt.elem, op);
    return bind(op.result(), std::move(regs));
  }
  // The stores are visible to the thread that issues the next MMA only after the agent meets.
  barrier();
  b_.inst("tcgen05.fence::after_thread_sync", {});
}

void FunctionLowering::lowerTmemColumns(const ir::Op& op, const layout::TmemColumnBits& bits) {
  // Register r holds column col(r) (the OR of its set bits' columns) of the thread's row, plus
  // its warp group's column offset. 16-bit / 8-bit elements go 2 / 4 to a 32-bit column (the
  // lower element column in the lower bits), all of them the thread's (tmemColumnBits); runs
  // of consecutive 32-bit columns go in one message each.
  const bool load = op.code() == OpCode::LocalLoad;
  const DType elem = op.operand(0)->type().elem;
  const int bytes = ir::byteWidth(elem);
  const int32_t pack = 4 / bytes;
  const int32_t numRegs = int32_t(1) << bits.reg.size();
  std::vector<int32_t> colOf(size_t(numRegs), 0);
  for (int32_t r = 0; r < numRegs; ++r)
    for (size_t i = 0; i < bits.reg.size(); ++i)
      if ((r >> i) & 1) colOf[size_t(r)] |= bits.reg[i];
  std::map<int32_t, int32_t> regOfCol; // the thread's element columns in order
  for (int32_t r = 0; r < numRegs; ++r) regOfCol[colOf[size_t(r)]] = r;
  // The thread's 32-bit columns in order, each with its elements' registers (lowest first).
  std::vector<int32_t> wordCol;
  std::vector<std::vector<int32_t>> wordRegs;
  for (auto [col, r] : regOfCol) {
    if (col % pack == 0) {
      wordCol.push_back(col / pack);
      wordRegs.emplace_back();
    }
    wordRegs.back().push_back(r);
  }
  std::string warp = b_.pure("shr.u32", RegClass::B32, {tid(), "5"});
  std::string addr = warpLanesAddress(op, warp);
  for (size_t i = 0; i < bits.warpGroup.size(); ++i) {
    std::string bit = b_.pure("bfe.u32", RegClass::B32, {warp, immInt(int64_t(i) + 2), "1"});
    addr = b_.pure("mad.lo.s32", RegClass::B32, {bit, immInt(bits.warpGroup[i] / pack), addr});
  }
  const RegClass rc = regClassOf(elem, false);
  Regs regs; // the thread's elements, by register of the layout
  Regs words(wordCol.size());
  if (load) {
    regs.resize(size_t(numRegs));
    for (auto& r : regs) r = b_.newReg(rc);
    for (auto& w : words) w = bytes == 4 ? std::string() : b_.newReg(RegClass::B32);
  } else {
    for (const std::string& s : operand(op, 1)) regs.push_back(b_.materialize(s, rc));
  }
  // The 32-bit word of 32-bit column j of the thread: the element itself, or two / four packed.
  auto word = [&](size_t j) -> std::string {
    const std::vector<int32_t>& e = wordRegs[j];
    if (bytes == 4) return regs.at(size_t(e[0]));
    if (load) return words[j];
    if (bytes == 1) {
      std::string x[4];
      for (int i = 0; i < 4; ++i) x[i] = regs.at(size_t(e[size_t(i)]));
      return packBytes(b_, x);
    }
    std::string w = b_.newReg(RegClass::B32);
    b_.inst("mov.b32", {w, "{" + regs.at(size_t(e[0])) + ", " + regs.at(size_t(e[1])) + "}"});
    return w;
  };
  if (!load) barrier(); // the agent's earlier accesses to the tile are done (as local_store's)
  b_.inst("tcgen05.fence::after_thread_sync", {});
  const size_t numWords = wordCol.size();
  const int64_t message = tmemMessageRegisters(int64_t(numWords), !load && bytes < 4);
  for (size_t k = 0; k < numWords;) {
    size_t run = 1; // consecutive 32-bit columns from k on
    while (k + run < numWords && wordCol[k + run] == wordCol[k] + int32_t(run)) ++run;
    const size_t n = std::min<size_t>(size_t(message), std::bit_floor(run));
    std::string list = "{";
    for (size_t j = 0; j < n; ++j) list += (j ? ", " : "") + word(k + j);
    list += "}";
    const int32_t col = wordCol[k];
    std::string at = col ? b_.pure("add.u32", RegClass::B32, {addr, immInt(col)}) : addr;
    const std::string shape = ".sync.aligned.32x32b.x" + std::to_string(n) + ".b32";
    if (load)
      b_.inst("tcgen05.ld" + shape, {list, bracketed(at)});
    else
      b_.inst("tcgen05.st" + shape, {bracketed(at), list});
    k += n;
  }
  b_.inst(load ? "tcgen05.wait::ld.sync.aligned" : "tcgen05.wait::st.sync.aligned", {});
  b_.inst("tcgen05.fence::before_thread_sync", {});
  if (!load) {
    // The stores are visible to the thread that issues the next MMA only after the agent meets.
    barrier();
    b_.inst("tcgen05.fence::after_thread_sync", {});
    return;
  }
  for (size_t j = 0; bytes == 2 && j < numWords; ++j)
    b_.inst("mov.b32",
            {"{" + regs.at(size_t(wordRegs[j][0])) + ", " + regs.at(size_t(wordRegs[j][1])) + "}",
             words[j]});
  for (size_t j = 0; bytes == 1 && j < numWords; ++j)
    for (int i = 0; i < 4; ++i)
      unpackByte(b_, words[j], i, regs.at(size_t(wordRegs[j][size_t(i)])));
  return bind(op.result(), std::move(regs));
}

namespace {

/// The kind:: of a tcgen05.mma of operands `a` x `b` and the instruction descriptor's A / B
/// format field value for it; empty when unsupported.
std::pair<std::string, int> mmaKind(DType a, DType b) {
  if (a != b &&
      !((a == DType::F8E4M3 || a == DType::F8E5M2) && (b == DType::F8E4M3 || b == DType::F8E5M2)))
    return {"", 0};
  switch (a) {
  case DType::F16:
    return {"f16", 0};
  case DType::BF16:
    return {"f16", 1};
  case DType::F32:
    return {"tf32", 2};
  case DType::F8E4M3:
    return {"f8f6f4", 0};
  case DType::F8E5M2:
    return {"f8f6f4", 1};
  default:
    return {"", 0};
  }
}

int mmaFormat(DType t) {
  return t == DType::BF16 || t == DType::F8E5M2 ? 1 : t == DType::F32 ? 2 : 0;
}

} // namespace

uint32_t tcgen05InstrDescriptor(DType a, DType b, DType d, bool aMnMajor, bool bMnMajor, int64_t M,
                                int64_t N) {
  // PTX ISA, tcgen05 instruction descriptor (kind::f16 / tf32 / f8f6f4): bits 4-5 the format
  // of D (1: f32), 7-9 of A, 10-12 of B, 15 / 16 A / B MN-major ("transpose"), 17-22 N >> 3,
  // 24-28 M >> 4; dense, no negation, no saturation.
  uint32_t desc = 0;
  desc |= uint32_t(d == DType::F32 ? 1 : 0) << 4;
  desc |= uint32_t(mmaFormat(a)) << 7;
  desc |= uint32_t(mmaFormat(b)) << 10;
  desc |= uint32_t(aMnMajor) << 15;
  desc |= uint32_t(bMnMajor) << 16;
  desc |= uint32_t(N >> 3) << 17;
  desc |= uint32_t(M >> 4) << 24;
  return desc;
}

std::string FunctionLowering::leadsCtaPair() {
  std::string rank = b_.pure("mov.u32", RegClass::B32, {"%cluster_ctarank"});
  std::string odd = b_.pure("and.b32", RegClass::B32, {rank, "1"});
  return b_.pure("setp.eq.u32", RegClass::Pred, {odd, "0"});
}

std::string FunctionLowering::ctaPairMask() {
  // The cluster ranks (rank & ~1) and (rank | 1) as a 16-bit CTA mask.
  std::string rank = b_.pure("mov.u32", RegClass::B32, {"%cluster_ctarank"});
  std::string first = b_.pure("and.b32", RegClass::B32, {rank, "0xFFFFFFFE"});
  std::string bits = b_.pure("shl.b32", RegClass::B32, {"3", first});
  return b_.pure("cvt.u16.u32", RegClass::B16, {bits});
}

void FunctionLowering::tcgen05Commit(const std::string& bar, const std::string& guard,
                                     const std::string& pairMask) {
  if (!pairedMma_) {
    b_.inst("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64", {bar}, guard);
    return;
  }
  // The pair's commit arrives on the barrier at this offset in both CTAs of the pair.
  b_.inst("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster."
          "b64",
          {bar, pairMask}, guard);
}

void FunctionLowering::lowerTcgen05(const ir::Op& op) {
  if (options_.target != Target::SM100a)
    raiseError(op.loc(), std::string("tlx.") +
                             (op.code() == OpCode::Tcgen05Mma ? "async_dot into tensor memory"
                                                              : "tcgen05_commit") +
                             " lowers to tcgen05, which only sm_100a (Blackwell) has; compile for "
                             "sm_100a");
  // One thread issues; of a CTA pair, one thread of the leader.
  std::string elected = electedThread();
  // (Registers computed before the branches below: a value first computed on a skipped path
  // would be reused, undefined, after it.)
  std::string pairMask;
  if (pairedMma_) {
    elected = b_.pure("and.pred", RegClass::Pred, {elected, leadsCtaPair()});
    pairMask = ctaPairMask();
  }
  if (op.code() == OpCode::Tcgen05Commit) {
    std::string skip = b_.newLabel("tcgen05_commit_skip");
    if (ir::attr::Tcgen05Commit::hasPred(op)) {
      std::string p = b_.materialize(operand(op, 1).at(0), RegClass::Pred);
      b_.inst("bra", {skip}, p, true);
    }
    tcgen05Commit(barrierAddress(op, 0), elected, pairMask);
    b_.label(skip);
    return;
  }
  const bool pair = ir::attr::Tcgen05Mma::twoCtas(op);
  if (pair != pairedMma_)
    raiseError(op.loc(), "tlx.async_dot into tensor memory without two_ctas=True in a kernel "
                         "whose other tcgen05 ops are a CTA pair's: every tcgen05 op of a kernel "
                         "uses one cta_group (PTX ISA); pass two_ctas=True here too");
  const ir::Type& at = op.operand(0)->type();
  const ir::Type& bt = op.operand(1)->type();
  const ir::Type& ct = op.operand(2)->type();
  // A from tensor memory ([a-tmem]): 16-bit elements two to a column, fp8 four, K along the
  // columns.
  const bool aTmem = at.space == ir::MemorySpace::Tmem;
  if (aTmem) {
    requireTmemTile(op, at);
    if (ir::byteWidth(at.elem) != 2 && at.elem != DType::F8E4M3 && at.elem != DType::F8E5M2)
      raiseError(op.loc(), "tlx.async_dot with A " + at.str() +
                               " in tensor memory: the sm_100a backend reads A from tensor "
                               "memory as fp16 or bf16 (two to a 32-bit column) or fp8 (four)");
    // A CTA pair's M = 128 MMA reads each CTA's A from its own tensor memory at the same
    // address; an M = 64 one would read TLX's TwoCTA_LHS layout (rows duplicated into lanes
    // 64-127), which is not built.
    // A pair's [64, K] A: rows in lanes r and 64 + r (ir/TmemPairs.h), read from its columns
    // as a [128, K] tile's.
    if (pair && at.shape[0] != 128 && !pairLhs(op.operand(0)))
      raiseError(op.loc(), "tlx.async_dot with two_ctas=True and a [64, K] A in tensor memory "
                           "chosen at run time is not supported by the sm_100a backend; pass a "
                           "local_view of its allocation");
    if (at.shape[0] != ct.shape[0])
      raiseError(op.loc(), "tlx.async_dot with A " + at.str() + " in tensor memory into " +
                               ct.str() +
                               ": A and the accumulator take the same lanes, so "
                               "they need the same rows");
  }
  auto [kind, fmt] = mmaKind(at.elem, bt.elem);
  (void)fmt;
  // tlx.async_dot_scaled (TlxTcgen05Scaled.cpp): fp8 operands with e8m0 scales of 32 elements,
  // or e2m1 ones (uint8 buffers, two to a byte along K) with e8m0 scales of 32 or ue4m3 of 16,
  // or one of each (mixed: kind::mxf8f6f4, the e2m1 one padded to a byte a value).
  const bool scaled = ir::attr::Tcgen05Mma::hasScales(op);
  const bool fp4 = scaled && ir::isFp4ScaledMma(op);
  const bool mixed = scaled && ir::isMixedFp4ScaledMma(op);
  if (scaled) {
    auto fp8 = [](DType t) { return t == DType::F8E4M3 || t == DType::F8E5M2; };
    const bool aFp4 = ir::isFp4Operand(op, 0);
    const bool mixedOk = mixed && (aFp4 ? at.elem == DType::U8 && !aTmem && fp8(bt.elem)
                                        : fp8(at.elem) && bt.elem == DType::U8);
    if (at.shape[0] != 128 ||
        (kind != "f8f6f4" && !(fp4 && at.elem == DType::U8 && bt.elem == DType::U8 && !aTmem) &&
         !mixedOk))
      raiseError(op.loc(), "tlx.async_dot_scaled of " + at.str() + " and " + bt.str() +
                               ": the sm_100a backend issues the block-scaled MMA with M = 128 "
                               "(per CTA), e4m3 / e5m2 operands, e2m1 ones packed in uint8 "
                               "shared-memory buffers, or one e2m1 and one e4m3 / e5m2");
    kind = tcgen05ScaledKind(op);
  }
  if (kind.empty())
    raiseError(op.loc(), "tlx.async_dot of " + at.str() + " and " + bt.str() +
                             " into tensor memory is not supported; tcgen05.mma takes fp16 or "
                             "bf16 operands of one type, fp32 (as tf32), or fp8 ones");
  if (ct.elem != DType::F32)
    raiseError(op.loc(),
               "tlx.async_dot into tensor memory accumulates in fp32 only, got " + ct.str());
  requireTmemTile(op, ct);
  // Per CTA: A [M, K], B [K, bN], acc [M, N]; a pair's instruction is 2M x N, each CTA holding
  // half of B's columns (bN = N / 2).
  // The PTX ISA's shapes (kind::f16 / tf32 / f8f6f4, dense): M = 64 with N a multiple of 8, M =
  // 128 with N a multiple of 16, up to 256; a pair's M = 256 (128 per CTA), N a multiple of 16.
  // A pair's M = 64 (per CTA) is the instruction's M = 128 over the pair: each CTA's [64, N]
  // accumulator lies in 128 lanes of N / 2 columns (the PTX ISA's data-path layout for it;
  // TLX's TwoCTA_RHS), which the allocation's placement gave it (ir/TmemPairs.h).
  // K in bytes of a row of A's tile: packed fp4's K / 2, or, for the mixed MMA, K (its e2m1
  // operand is padded to a byte a value).
  const int64_t M = at.shape[0], K = mixed ? ir::scaledMmaK(op) : at.shape[1], bN = bt.shape[1],
                N = ct.shape[1];
  const int64_t nStep = M == 64 && !pair ? 8 : 16;
  if (!(M == 128 || M == 64) || N < nStep || N > 256 || N % nStep != 0 || (pair ? 2 * bN : bN) != N)
    raiseError(op.loc(), "tlx.async_dot of a " + std::to_string(M) + "x" + std::to_string(N) +
                             " tile into tensor memory: the sm_100a backend issues tcgen05.mma "
                             "with M = 128 and N a multiple of 16, or M = 64 and N a multiple of "
                             "8, up to 256" +
                             (pair ? std::string(" (a CTA pair's: 128 or 64 rows per CTA, 256 or "
                                                 "128 x N with N a multiple of 16, B [K, N/2] per "
                                                 "CTA)")
                                   : std::string()));
  if (pair && M == 64 && !pairSplit(op.operand(2)))
    raiseError(op.loc(), "tlx.async_dot with two_ctas=True into the [64, N] accumulator " +
                             ct.str() +
                             ": the sm_100a backend places a CTA pair's M = 64 accumulator "
                             "(128 lanes of N / 2 columns) only for a view of one tensor-memory "
                             "allocation (tlx.local_alloc, its local_view), not one chosen at "
                             "run time");
  // Operand layouts in shared memory, as for wgmma (TlxAsyncDot.cpp): A [M, K] K-major, B
  // [K, N] N-major, a 2-D local_trans view swaps that.
  auto operandMajor = [&](const ir::Value* v, bool isA, bool* kMajor) {
    if (isPlainBuffer(v)) {
      *kMajor = isA;
      return true;
    }
    const ir::Op* def = v->def();
    if (def && def->code() == OpCode::LocalTrans &&
        ir::attr::LocalTrans::order(*def) == std::vector<int64_t>{1, 0} &&
        isPlainBuffer(def->operand(0))) {
      *kMajor = !isA;
      return true;
    }
    return false;
  };
  bool aK = true, bK = false;
  if ((!aTmem && !operandMajor(op.operand(0), true, &aK)) ||
      !operandMajor(op.operand(1), false, &bK))
    raiseError(op.loc(), "tlx.async_dot operands must be buffers from tlx.local_alloc, their "
                         "local_view, or the 2-D local_trans of one");
  // tcgen05.mma has no transpose for e2m1 (PTX ISA, .kind::mxf4 / mxf4nvf4): both K-major.
  // The mixed MMA's e2m1 operand is K-major too (TMA writes it padded along K).
  if ((fp4 && (!aK || !bK)) ||
      (mixed && ((ir::isFp4Operand(op, 0) && !aK) || (ir::isFp4Operand(op, 1) && !bK))))
    raiseError(op.loc(), "tlx.async_dot_scaled of e2m1 " + at.str() + " and " + bt.str() +
                             ": tcgen05.mma reads fp4 operands with K contiguous only; A an "
                             "[M, K / 2] buffer, B the tlx.local_trans of an [N, K / 2] one");
  // The mixed MMA's e2m1 operand must lie padded (LayoutAssignment's fp4Padded).
  if (mixed && !allocationOf(op, ir::isFp4Operand(op, 0) ? 0 : 1).fp4Padded)
    raiseError(op.loc(), "tlx.async_dot_scaled of " + at.str() + " and " + bt.str() +
                             ": the e2m1 operand of the mixed MMA must be a tlx.local_alloc "
                             "buffer (its local_view or local_trans) laid out padded");
  int bytes = ir::byteWidth(at.elem);
  // tcgen05 reads 16- and 8-bit operands K-major or MN-major (the instruction descriptor's
  // transpose bits; unlike wgmma, whose 8-bit operands are K-major only), as Triton's MMAv5
  // lowering issues them for .kind::f16, f8f6f4 and mxf8f6f4; tf32 stays K-major here.
  if (bytes == 4 && (!aK || !bK))
    raiseError(op.loc(), std::string(scaled ? "tlx.async_dot_scaled" : "tlx.async_dot") + " of " +
                             at.str() + " and " + bt.str() +
                             ": the sm_100a backend issues tcgen05.mma of tf32 operands with K "
                             "contiguous only; store B as an [N, K] buffer and pass its "
                             "tlx.local_trans");
  if (!aTmem) requireNvmmaUserLayout(op, 0, false);
  requireNvmmaUserLayout(op, 1, false);
  const layout::SharedAllocation& bAlloc = allocationOf(op, 1);
  const int64_t sa = aTmem ? 0 : allocationOf(op, 0).swizzleBytes, sb = bAlloc.swizzleBytes;
  if ((!aTmem && !sa) || !sb)
    raiseError(op.loc(), "tlx.async_dot operands " + at.str() + " and " + bt.str() +
                             " need rows of at least 32 bytes (a swizzled NVMMA layout)");
  const int64_t instrK = 32 / bytes;
  auto tileByte = [&](bool kMajor, int64_t s, int64_t extent, int64_t mn, int64_t k) {
    int64_t row = s / bytes;
    if (kMajor) return ((k / row) * extent + mn) * s + (k % row) * bytes;
    return ((mn / row) * K + k) * s + (mn % row) * bytes;
  };
  // Shared-memory descriptors: wgmma's fields plus the tcgen05 version field (bits 46-48 = 1).
  // A pair's descriptors are this CTA's tiles; the tensor core reads the peer's at the same
  // shared-memory offsets.
  const uint64_t version = uint64_t(1) << 46;
  const uint64_t bFixed = wgmmaLayoutBits(bK, static_cast<int>(sb), K) | version;
  std::string aDesc, aTmemAddr;
  if (aTmem) {
    aTmemAddr = b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
  } else {
    const uint64_t aFixed = wgmmaLayoutBits(aK, static_cast<int>(sa), K) | version;
    std::string aBase = sharedAddress(b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32));
    aDesc = wgmmaDescriptor(b_, aBase, aFixed);
  }
  std::string bBase = sharedAddress(b_.materialize(regsOf(op.operand(1)).at(0), RegClass::B32));
  std::string bDesc = wgmmaDescriptor(b_, bBase, bFixed);
  const uint32_t idesc =
      tcgen05InstrDescriptor(at.elem, bt.elem, ct.elem, !aK, !bK, pair ? 2 * M : M, N);
  std::string idescReg =
      scaled ? std::string() : b_.materialize(immInt(int64_t(idesc)), RegClass::B32);
  std::string dAddr = b_.materialize(regsOf(op.operand(2)).at(0), RegClass::B32);

  unsigned next = scaled ? 5 : 3;
  std::string firstAccumulate = b_.pure("setp.ne.u32", RegClass::Pred, {"1", "0"});
  if (ir::attr::Tcgen05Mma::hasUseAcc(op))
    firstAccumulate = b_.materialize(operand(op, next++).at(0), RegClass::Pred);
  // The synchronous form waits on an mbarrier of its own in scratch shared memory: initialized
  // here, committed to after the MMA, waited on by every thread, invalidated after.
  const bool sync = ir::attr::Tcgen05Mma::sync(op);
  std::string syncBar;
  if (sync) {
    syncBar = bracketed(sharedAddress(immInt(scratch(8))));
    barrier(); // earlier users of the scratch region are done
    b_.inst("mbarrier.init.shared::cta.b64", {syncBar, "1"}, electedThread());
    barrier();
  }
  std::string skip = b_.newLabel("tcgen05_mma_skip");
  if (ir::attr::Tcgen05Mma::hasPred(op))
    b_.inst("bra", {skip}, b_.materialize(operand(op, next++).at(0), RegClass::Pred), true);
  b_.inst("bra", {skip}, elected, true);
  // What is computed from here to the label runs only in the issuing thread: nothing of it may be
  // reused after the label.
  b_.pushScope();
  b_.inst("tcgen05.fence::after_thread_sync", {});
  std::string accumulate = firstAccumulate;
  const std::string opcode =
      std::string("tcgen05.mma") + (pair ? ".cta_group::2" : ".cta_group::1") + ".kind::" + kind;
  // A in tensor memory: K step k0 starts k0 * bytes / 4 columns further.
  std::vector<std::string> aSteps;
  for (int64_t k0 = 0; aTmem && k0 < K; k0 += instrK)
    aSteps.push_back(bracketed(
        k0 ? b_.pure("add.u32", RegClass::B32, {aTmemAddr, immInt(k0 * bytes / 4)}) : aTmemAddr));
  // Block scales: K step s (32 elements) reads scale byte s % 4 of scale word s / 4, the word's
  // rows 32 to a column (ir/BlockScaled.h).
  std::pair<ScaleOperand, ScaleOperand> scaleAddr;
  std::vector<std::string> scaledIdesc;
  if (scaled) {
    scaleAddr = scaleOperands(op);
    // Instruction s reads scales s * per .. s * per + per - 1 of a row: 32-bit column word
    // (s * per) / 4, from the sub-column (byte) (s * per) % 4 the descriptor's IDs name.
    const int64_t per = scalesPerScaledMma(op);
    for (int64_t id = 0; id < 4; id += per)
      scaledIdesc.push_back(b_.materialize(
          immInt(int64_t(tcgen05ScaledInstrDescriptor(
              ir::attr::Tcgen05Mma::aFormat(op), ir::attr::Tcgen05Mma::bFormat(op),
              ir::hasUe4m3Scales(op), !aK, !bK, pair ? 2 * M : M, N, int(id), int(id)))),
          RegClass::B32));
  }
  for (int64_t k0 = 0; k0 < K; k0 += instrK) {
    std::string da = aTmem ? aSteps[size_t(k0 / instrK)]
                           : wgmmaDescriptorStep(b_, aDesc, tileByte(aK, sa, M, 0, k0));
    std::string db = wgmmaDescriptorStep(b_, bDesc, tileByte(bK, sb, bN, 0, k0));
    if (scaled) {
      const int64_t first = k0 / instrK * scalesPerScaledMma(op), word = first / 4;
      auto column = [&](const std::string& base, int64_t c) {
        return bracketed(c ? b_.pure("add.u32", RegClass::B32, {base, immInt(c)}) : base);
      };
      b_.inst(opcode,
              {bracketed(dAddr), da, db, scaledIdesc[size_t(first % 4 / scalesPerScaledMma(op))],
               column(scaleAddr.first.address, word * scaleAddr.first.wordColumns),
               column(scaleAddr.second.address, word * scaleAddr.second.wordColumns), accumulate});
    } else {
      b_.inst(opcode, {bracketed(dAddr), da, db, idescReg, accumulate});
    }
    accumulate = b_.pure("setp.ne.u32", RegClass::Pred, {"1", "0"});
  }
  for (unsigned i = next; i < op.numOperands(); ++i)
    tcgen05Commit(barrierAddress(op, i), "", pairMask);
  b_.popScope();
  b_.label(skip);
  if (sync) {
    // Committed whether or not pred issued the MMA: the commit tracks every earlier MMA. A CTA
    // pair's synchronous MMA is the leader's: its commit arrives on the leader's own barrier
    // only (cta_group::2 without multicast: the peer's scratch bytes at that offset are not a
    // barrier), the leader's threads wait, and the peer's call returns at once, as it issues
    // nothing (TLX's peer, which never calls it in its tutorials, would wait for an arrival
    // racing its barrier's initialization).
    std::string leader = pairedMma_ ? leadsCtaPair() : std::string();
    if (pairedMma_)
      b_.inst("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64", {syncBar},
              elected);
    else
      tcgen05Commit(syncBar, elected, pairMask);
    std::string retry = b_.newLabel("tcgen05_mma_wait");
    std::string waited = b_.newLabel("tcgen05_mma_waited");
    if (pairedMma_) b_.inst("bra", {waited}, leader, true);
    std::string done = b_.newReg(RegClass::Pred);
    b_.label(retry);
    b_.inst("mbarrier.try_wait.parity.shared::cta.b64", {done, syncBar, "0"});
    b_.inst("bra", {retry}, done, /*negateGuard=*/true);
    b_.label(waited);
    b_.inst("tcgen05.fence::after_thread_sync", {});
    barrier(); // every thread has passed the wait
    b_.inst("mbarrier.inval.shared::cta.b64", {syncBar}, electedThread());
  }
}

} // namespace ww::codegen
