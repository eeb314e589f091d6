// TLX ops in the interpreter: shared-memory buffers and views, mbarriers, named barriers, TMA
// and cp.async copies, asynchronous tensor-core dots, and async tasks run as agents.
//
// Timing model (documented behaviour, chosen to expose missing synchronization): a TMA load
// lands in shared memory and completes its barrier's transaction bytes only when every agent is
// blocked; an async_dot reads its shared-memory operands when async_dot_wait retires it; a
// cp.async group lands when async_wait_group retires it. TMA stores complete at issue.
//
// Shared-memory accesses are checked for races (Races.h): every read and write carries its
// agent's vector clock, which barriers (arrive -> the wait that sees the phase), named barriers
// and copy completions carry between agents; an access not ordered after a conflicting one, a
// read of bytes a copy or nothing has written, or a write over bytes an unretired async_dot
// reads is an InterpreterError at the kernel's line.
//
// Clusters (num_ctas > 1): the programs of a cluster's CTAs, and their async tasks, are agents of
// one scheduler; each CTA keeps its own shared memory, mbarriers and named barriers. A remote
// barrier_arrive, a multicast TMA load and the remote shared-memory stores reach a peer's
// allocation made by the same op (the same shared-memory offset on the GPU); an
// async_remote_shmem_store lands as a TMA load does. cluster_barrier (and the one alloc_barriers
// lowers with in a cluster launch) waits for every CTA's program; vector clocks are numbered across
// the cluster, so race checks of a CTA's shared memory see the peers' multicast writes and remote
// releases.
//
// An agent of several warp groups (num_warps > 4, of the program or of its task) runs as one, but
// wgmma.wait_group waits only for the calling warp group's own wgmmas: a dot retired by
// async_dot_wait stays unretired for the agent's own later writes (a one-thread TMA issue, or
// another group's threads) until a barrier of all its threads. ir::lowersWithAgentBarrier says
// which ops codegen lowers with one.
#include "interp/Elementwise.h"
#include "interp/Executor.h"
#include "interp/InlineAsm.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "ir/TmemPairs.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

namespace ww::interp {

using ir::OpCode;
namespace attr = ir::attr;

std::string MBarrier::describe() const {
  std::ostringstream os;
  os << "phase " << phase << " (parity " << (phase & 1) << "): " << pendingArrivals << " of "
     << arriveCount << " arrivals pending, ";
  if (txBytes > 0)
    os << "still expects " << txBytes << " transaction bytes";
  else
    os << txBytes << " transaction bytes outstanding";
  return os.str();
}

const BufferView& Executor::buffer(const ir::Op& op, unsigned i) {
  if (auto* b = std::get_if<BufferView>(&slot(op.operand(i)))) return *b;
  const std::string what = " takes a shared buffer (tlx.local_alloc or a view of one) as operand ";
  fail(op.loc(), op.name() + what + std::to_string(i) + ", got " + op.operand(i)->type().str());
}

const BarrierView& Executor::barrierView(const ir::Op& op, unsigned i) {
  if (auto* b = std::get_if<BarrierView>(&slot(op.operand(i)))) return *b;
  const std::string what = " takes an mbarrier (tlx.alloc_barriers or a view of one) as operand ";
  fail(op.loc(), op.name() + what + std::to_string(i) + ", got " + op.operand(i)->type().str());
}

MBarrier& Executor::barrier(const ir::Op& op, unsigned i) {
  const BarrierView& v = barrierView(op, i);
  return v.array->barriers.at(size_t(v.first));
}

namespace {

/// Calls fn(byte offset in a dense tensor of `elements` elements, byte offset in the view's
/// allocation) for each element of `view` that such a tensor holds: one tile, or all `count`
/// tiles. `what` names the operation in the errors.
template <class Fn>
void forEachBufferElement(const BufferView& view, int64_t elements, const char* what, Fn fn) {
  const int64_t tile = view.tileElements();
  const int64_t tiles = elements == tile ? 1 : view.count;
  if (elements != tile * tiles)
    throw std::logic_error(std::string(what) + ": the value's shape does not match the buffer");
  const size_t w = size_t(view.elemBytes());
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t i = 0; i < tile; ++i) {
      int64_t off = view.byteOffsetOf(t, i);
      if (off < 0 || size_t(off) + w > view.alloc->bytes.size())
        throw std::logic_error("buffer view outside its allocation");
      fn(size_t(t * tile + i) * w, size_t(off));
    }
}

} // namespace

TensorPtr Executor::readBuffer(const BufferView& view, const ir::Type& rt) {
  Tensor raw(view.elem, false, rt.shape);
  const size_t w = size_t(view.elemBytes());
  forEachBufferElement(view, raw.numel(), "local_load", [&](size_t dense, size_t off) {
    std::memcpy(raw.bytes.data() + dense, view.alloc->bytes.data() + off, w);
  });
  if (raw.elem == rt.elem) return std::make_shared<Tensor>(std::move(raw));
  return evalCast(raw, rt, Rounding::NearestEven);
}

void Executor::writeBuffer(const BufferView& view, const Tensor& value) {
  TensorPtr converted;
  const Tensor* v = &value;
  if (value.elem != view.elem) {
    converted = evalCast(value, ir::Type::tensor(view.elem, value.shape), Rounding::NearestEven);
    v = converted.get();
  }
  const size_t w = size_t(view.elemBytes());
  forEachBufferElement(view, v->numel(), "local_store", [&](size_t dense, size_t off) {
    std::memcpy(view.alloc->bytes.data() + off, v->bytes.data() + dense, w);
  });
}

namespace {

/// The bytes of the allocation that `tiles` tiles of `view` touch: a bounding range, narrowed to
/// the rows' bytes when the view is rows of contiguous elements, one every pitch bytes (a column
/// slice of a row-major tile).
ByteSpan bytesOf(const BufferView& view, int64_t tiles) {
  ByteSpan span;
  int64_t last = 0;
  for (size_t d = 0; d < view.shape.size(); ++d) {
    if (view.shape[d] == 0) return ByteSpan{view.byteOffset, view.byteOffset};
    last += view.strides[d] * (view.shape[d] - 1);
  }
  const int64_t w = view.elemBytes();
  span.lo = view.byteOffset;
  int64_t lastTile = 0;
  for (int64_t t = 0; t < tiles; ++t) lastTile = std::max(lastTile, view.tileOffset(t));
  span.hi = span.lo + lastTile + (last + 1) * w;
  const size_t rank = view.shape.size();
  if (rank < 2 || view.strides[rank - 1] != 1) return span;
  const int64_t pitch = view.strides[rank - 2] * w, row = view.shape[rank - 1] * w;
  if (pitch <= row) return span;
  // Rows at every pitch from the first to the last: the outer dimensions (and tiles) follow on
  // from one another.
  for (size_t d = 0; d + 2 < rank; ++d)
    if (view.strides[d] != view.strides[d + 1] * view.shape[d + 1]) return span;
  if (tiles > 1 &&
      (view.tileStrideBytes != view.strides[0] * view.shape[0] * w || view.groupSize > 1))
    return span;
  span.period = pitch;
  span.phase = span.lo % pitch;
  span.width = row;
  return span;
}

int64_t tilesOf(const BufferView& view, int64_t elements) {
  return elements == view.tileElements() ? 1 : view.count;
}

/// A note at the alloc_barriers of `array` (none when it has no location).
std::vector<Diagnostic> initNote(const MBarrierArray& array, const MBarrier& bar) {
  if (!array.allocAt.valid()) return {};
  return {note(array.allocAt, "the barrier was initialized here for " +
                                  std::to_string(bar.arriveCount) + " arrival" +
                                  (bar.arriveCount == 1 ? "" : "s") + " per phase")};
}

/// Notes naming who arrived on `bar`'s phase in progress, and who arrived on the phase before but
/// not yet on this one: the arrivers a blocked wait is most likely missing.
std::vector<Diagnostic> arrivalNotes(const MBarrier& bar) {
  std::vector<Diagnostic> notes;
  for (const MBarrier::Arrival& a : bar.phaseArrivals)
    notes.push_back(note(a.at, "arrived on the phase in progress: " + a.by));
  for (const MBarrier::Arrival& a : bar.previousArrivals) {
    bool again = std::any_of(bar.phaseArrivals.begin(), bar.phaseArrivals.end(),
                             [&](const MBarrier::Arrival& b) { return b.by == a.by; });
    if (!again)
      notes.push_back(note(a.at, "arrived on the phase before but not yet on this one: " + a.by));
  }
  if (bar.phaseArrivals.empty() && bar.previousArrivals.empty() && bar.arriveCount > 0 &&
      bar.pendingArrivals == bar.arriveCount && bar.phase == 0)
    notes.push_back(note(SourceLoc(), "nothing has arrived on this barrier yet"));
  return notes;
}

/// `first`, then the notes on what let the copy of `a` be issued.
std::vector<Diagnostic> withPermission(Diagnostic first, const SharedAccess& a) {
  std::vector<Diagnostic> notes{std::move(first)};
  notes.insert(notes.end(), a.permission.begin(), a.permission.end());
  return notes;
}

/// Completes the phase of barrier `view` when its arrivals and transaction bytes are all in,
/// as `what` (an arrival or copy landing at `at` by `by`) makes it. Before it does, the phase
/// before must have been seen by a passing barrier_wait once anyone waits on the barrier: a
/// second completion first laps every waiter, since a parity wait cannot tell the two apart.
/// In a correct pipeline each arrival is ordered after the wait that saw the phase before, so
/// this only fires on surplus arrivals (e.g. two consumers arriving on a count-1 barrier).
bool completePhase(const SourceManager* sources, const BarrierView& view, SourceLoc at,
                   const std::string& what, const std::string& by, const std::string& where) {
  MBarrier& bar = view.array->barriers.at(size_t(view.first));
  if (bar.pendingArrivals != 0 || bar.txBytes != 0) return false;
  const int64_t phase = bar.phase;
  if (phase >= 1 && bar.observedPhase >= 0 && bar.observedPhase < phase) {
    std::vector<Diagnostic> notes;
    notes.push_back(note(bar.lastCompletedAt, "phase " + std::to_string(phase - 1) +
                                                  " was completed here by " + bar.lastCompletedBy +
                                                  ", and no wait has seen it yet"));
    for (Diagnostic& d : initNote(*view.array, bar)) notes.push_back(std::move(d));
    raiseInterpError(sources, at,
                     "over-arrival: " + what + " by " + by + " completes phase " +
                         std::to_string(phase) + " of " + view.array->describe(view.first) +
                         " before any barrier_wait has seen phase " + std::to_string(phase - 1) +
                         " complete: more arrivals than the barrier expects per phase, so its "
                         "waiters miss a phase (" +
                         where + ")",
                     std::move(notes));
  }
  bar.maybeComplete();
  bar.lastCompletedAt = at;
  bar.lastCompletedBy = by;
  return true;
}

/// Notes naming the barrier_expect_bytes of `bar`'s phase in progress.
std::vector<Diagnostic> expectNotes(const MBarrier& bar) {
  if (!bar.expectAt.valid()) return {};
  return {note(bar.expectAt, "barrier_expect_bytes by " + bar.expectBy + " here: the phase " +
                                 "expects " + std::to_string(bar.expectedBytes) +
                                 " transaction bytes, its copies delivered " +
                                 std::to_string(bar.deliveredBytes))};
}

} // namespace

std::vector<Diagnostic> Executor::lappedNotes(const MBarrier& bar) const {
  // A waiter never lets its barrier get two phases ahead in a correct pipeline: if it did, some
  // phase completed without this agent, typically on surplus arrivals.
  auto seen = phaseSeen_.find(&bar);
  int64_t since = bar.phase - (seen == phaseSeen_.end() ? 0 : seen->second);
  if (since < 2 || bar.lastCompletedBy.empty()) return {};
  return {note(bar.lastCompletedAt,
               "the barrier completed " + std::to_string(since) + " phases since " + accessor() +
                   " last passed a wait on it, the latest on this arrival by " +
                   bar.lastCompletedBy +
                   ": more arrivals than it expects per phase (several arrivers on a barrier "
                   "initialized for fewer?)")};
}

std::vector<Diagnostic> Executor::withWaitNotes(std::vector<Diagnostic> notes) const {
  notes.insert(notes.end(), lastWait_.begin(), lastWait_.end());
  return notes;
}

void Executor::release(VectorClock& into) {
  into.join(agent_.clock);
  agent_.clock.set(agent_.clockIndex, agent_.clock.at(agent_.clockIndex) + 1);
}

bool Executor::orderedBefore(const SharedAccess& a) const {
  if (a.inFlight) return false;
  return agent_.clock.at(a.agent) >= a.epoch;
}

std::string Executor::accessor() const {
  // In a cluster an access may be a peer's (a multicast into this CTA): name the program.
  if (cta_.cluster) return where();
  return agent_.isTask ? agent_.label : "the program";
}

void Executor::checkedRead(const ir::Op& op, const BufferView& view, int64_t tiles,
                           uint64_t token) {
  const ByteSpan span = bytesOf(view, tiles);
  if (span.lo >= span.hi) return;
  AccessLog& log = view.alloc->log;
  const bool tmem = view.alloc->tmem;
  const std::string mem = tmem ? "tensor memory" : "shared memory";
  bool written = false;
  for (const SharedAccess& a : log.accesses) {
    if (!a.write || !a.bytes.overlaps(span)) continue;
    written = true;
    if (orderedByTensorCore(a)) continue;
    if (a.inFlight)
      fail(op.loc(),
           std::string(op.name()) + " reads " + mem + " that " + a.what +
               (tmem ? " is still writing: wait on the barrier its tcgen05 commit (mBarriers, "
                       "or tlx.tcgen05_commit) arrives on before reading ("
                     : " is still writing: wait for the copy (its barrier, or async_wait_group) "
                       "before reading (") +
               where() + ")",
           withWaitNotes(withPermission(
               note(a.loc, tmem ? "the MMA was issued here" : "the copy was issued here"), a)));
    if (!orderedBefore(a))
      fail(op.loc(),
           std::string(op.name()) + " reads " + mem + " that " + a.what +
               " wrote, with no barrier ordering that write before this read (" + where() + ")",
           withWaitNotes(withPermission(note(a.loc, "the write"), a)));
  }
  // A local_load of tensor memory nothing wrote gets whatever the columns hold on the GPU, the
  // poison of fresh memory here (NaN, -1): TLX's attention tutorials read their accumulator once
  // before the first MMA overwrites it, and discard the value. An MMA accumulating into it, or
  // reading A from it, is reported.
  if (!written && !(tmem && op.code() == OpCode::LocalLoad))
    fail(op.loc(),
         std::string(op.name()) + " reads " + mem + " that nothing wrote (" + where() + ")");
  SharedAccess r;
  r.inFlight = token != 0;
  r.token = token;
  r.agent = agent_.clockIndex;
  r.epoch = agent_.clock.at(agent_.clockIndex);
  r.bytes = span;
  r.loc = op.loc();
  r.what = std::string(op.name()) + " by " + accessor();
  // An earlier finished read of the same bytes by this agent adds nothing the new one lacks.
  std::erase_if(log.accesses, [&](const SharedAccess& a) {
    return !a.write && !a.inFlight && !retiredForOneWarpGroupOnly(a) && a.agent == r.agent &&
           span.covers(a.bytes);
  });
  log.accesses.push_back(std::move(r));
}

void Executor::checkedWrite(const ir::Op& op, const BufferView& view, int64_t tiles,
                            uint64_t token) {
  const ByteSpan span = bytesOf(view, tiles);
  if (span.lo >= span.hi) return;
  AccessLog& log = view.alloc->log;
  for (const SharedAccess& a : log.accesses) {
    if (!a.bytes.overlaps(span) || orderedByTensorCore(a)) continue;
    if (a.inFlight) {
      const bool mma = cta_.mmaTokens.count(a.token) != 0;
      fail(op.loc(),
           std::string(op.name()) + " overwrites " +
               (view.alloc->tmem ? "tensor memory" : "shared memory") + " that " + a.what +
               (mma ? (a.write ? " is still writing" : " may still be reading") +
                          std::string(" (its tcgen05 commit has not completed: wait on the "
                                      "barrier it arrives on first)")
                : a.write ? " is still writing"
                          : " may still be reading (not yet retired by async_dot_wait)") +
               " (" + where() + ")",
           withPermission(note(a.loc, mma       ? "the MMA was issued here"
                                      : a.write ? "the copy was issued here"
                                                : "the async_dot was issued here"),
                          a));
    }
    if (retiredForOneWarpGroupOnly(a)) {
      const int groups = (agent_.numWarps + 3) / 4;
      fail(op.loc(),
           std::string(op.name()) + " overwrites shared memory that " + a.what +
               " may still be reading in another warp group: " + accessor() + " spans " +
               std::to_string(groups) +
               " warp groups and async_dot_wait retires an async_dot only for the warp group "
               "that waits, so every group must be past its wait before this write; add "
               "tl.debug_barrier() (or a named barrier of all " +
               std::to_string(agent_.numWarps * 32) + " threads) after the wait (" + where() + ")",
           {note(a.retiredAt, "async_dot_wait retired the async_dot here, for the waiting warp "
                              "group only"),
            note(a.loc, "the async_dot was issued here")});
    }
    if (!orderedBefore(a))
      fail(op.loc(),
           std::string(op.name()) + " overwrites " +
               (view.alloc->tmem ? "tensor memory" : "shared memory") + " that " + a.what +
               (a.write ? " wrote" : " read") +
               ", with no barrier ordering that access before this write (" + where() + ")",
           {note(a.loc, a.write ? "the earlier write" : "the read")});
  }
  std::erase_if(log.accesses, [&](const SharedAccess& a) { return span.covers(a.bytes); });
  SharedAccess w;
  w.write = true;
  w.inFlight = token != 0;
  w.token = token;
  w.agent = agent_.clockIndex;
  w.epoch = agent_.clock.at(agent_.clockIndex);
  w.bytes = span;
  w.loc = op.loc();
  w.what = std::string(op.name()) + " by " + accessor();
  log.accesses.push_back(std::move(w));
}

void Executor::retireReads(const BufferView& view, uint64_t token, SourceLoc waitLoc) {
  for (SharedAccess& a : view.alloc->log.accesses)
    if (a.inFlight && a.token == token) {
      a.inFlight = false;
      a.agent = agent_.clockIndex;
      a.epoch = agent_.clock.at(agent_.clockIndex);
      // wgmma.wait_group waits for the calling warp group's own wgmmas only.
      a.groupLocal = agent_.numWarps > 4;
      a.agentBarriersAtRetire = agent_.agentBarriers;
      a.retiredAt = waitLoc;
    }
}

bool Executor::retiredForOneWarpGroupOnly(const SharedAccess& a) const {
  return a.groupLocal && a.agent == agent_.clockIndex &&
         a.agentBarriersAtRetire == agent_.agentBarriers;
}

void Executor::checkViewElements(const ir::Op& op, const BufferView& view, int64_t elements) {
  const int64_t tile = view.tileElements();
  if (elements == tile || elements == tile * view.count) return;
  fail(op.loc(), std::string(op.name()) + " moves " + std::to_string(elements) +
                     " elements through a view of " + std::to_string(view.count) + " buffer" +
                     (view.count == 1 ? "" : "s") + " of " + std::to_string(tile) +
                     " elements: the shapes must match one buffer or all of them (" + where() +
                     ")");
}

void Executor::bump() {
  if (cta_.scheduler) cta_.scheduler->bump();
}

void Executor::yieldToOthers() {
  if (agent_.scheduler) agent_.scheduler->yield(agent_);
}

void Executor::waitUntil(const std::function<bool()>& ready,
                         const std::function<BlockSite()>& site) {
  while (!ready()) {
    if (agent_.scheduler) {
      agent_.scheduler->block(agent_, site());
    } else if (!completeAsyncCopies(k_, cta_)) {
      BlockSite s = site();
      fail(s.loc,
           "deadlock in " + where() + ": the program " + s.what +
               ", and nothing else can make progress",
           s.notes);
    }
  }
}

void Executor::checkArrivalOrdered(const ir::Op& op, const BarrierView& view,
                                   const std::string& what) {
  const MBarrier& bar = view.array->barriers.at(size_t(view.first));
  const int64_t phase = bar.phase;
  // The first phase needs no wait before it; a barrier nobody waits on has no phases to miss.
  if (phase < 1 || bar.observedPhase < 0) return;
  if (bar.observersPhase == phase)
    for (const auto& [agent, tick] : bar.observers)
      if (agent_.clock.at(agent) >= tick) return;
  std::vector<Diagnostic> notes;
  if (bar.lastCompletedAt.valid())
    notes.push_back(note(bar.lastCompletedAt, "phase " + std::to_string(phase - 1) +
                                                  " was completed here by " + bar.lastCompletedBy));
  std::string seen;
  if (bar.observersPhase == phase) {
    seen = "is not ordered after the barrier_wait that saw phase " + std::to_string(phase - 1) +
           " complete";
    notes.push_back(note(bar.observedAt, "the wait by " + bar.observedBy + " that saw it"));
  } else {
    seen =
        "comes before any barrier_wait has seen phase " + std::to_string(phase - 1) + " complete";
  }
  for (Diagnostic& d : initNote(*view.array, bar)) notes.push_back(std::move(d));
  fail(op.loc(),
       "over-arrival: " + what + " by " + accessor() + " on phase " + std::to_string(phase) +
           " of " + view.array->describe(view.first) + " " + seen +
           ": an arrival beyond what the barrier expects per phase (several arrivers on a "
           "barrier initialized for fewer?), in " +
           where(),
       std::move(notes));
}

void Executor::checkNoExcessBytes(const ir::Op& op, const MBarrier& bar) const {
  // Once every arrival of a phase is in, no barrier_expect_bytes can raise its count any more: a
  // negative count means copies delivered more than the phase expects, which never completes.
  if (bar.pendingArrivals == 0 && bar.txBytes < 0)
    fail(op.loc(),
         std::string(op.name()) +
             " completes the arrivals of a phase whose copies "
             "delivered " +
             std::to_string(-bar.txBytes) +
             " transaction bytes more than it expects (barrier_expect_bytes too small?); "
             "the barrier is in " +
             bar.describe() + ", in " + where(),
         expectNotes(bar));
}

void Executor::arriveOn(const ir::Op& op, const BarrierView& view, int64_t count,
                        const std::string& whose) {
  MBarrier& bar = view.array->barriers.at(size_t(view.first));
  checkArrivalOrdered(op, view, "barrier_arrive");
  int64_t weight = count * arrivalWeight(bar);
  bar.pendingArrivals -= weight;
  if (bar.pendingArrivals < 0) {
    bar.pendingArrivals += weight;
    fail(op.loc(),
         "over-arrival: barrier_arrive of " + std::to_string(weight) + " arrivals on " +
             view.array->describe(view.first) + whose + " in " + bar.describe() +
             ": more arrivals than the phase expects, in " + where(),
         initNote(*view.array, bar));
  }
  release(bar.arrivals);
  bar.phaseArrivals.push_back({op.loc(), accessor() + whose});
  checkNoExcessBytes(op, bar);
  completePhase(k_.sources, view, op.loc(), "barrier_arrive", accessor(), where());
  bump();
}

CtaState& Executor::peer(const ir::Op& op, int64_t rank, const std::string& what) {
  const int64_t size = cta_.cluster ? int64_t(cta_.cluster->ctas.size()) : 1;
  if (rank < 0 || rank >= size)
    fail(op.loc(), what + " names CTA rank " + std::to_string(rank) + ", outside the cluster of " +
                       std::to_string(size) + " CTA" + (size == 1 ? "" : "s") + " (ranks 0.." +
                       std::to_string(size - 1) + ")" +
                       (size == 1 ? "; launch with ctas_per_cga=(n, 1, 1) for clusters of n" : "") +
                       " in " + where());
  if (!cta_.cluster) return cta_;
  CtaState& p = *cta_.cluster->ctas[size_t(rank)];
  if (p.exited)
    fail(op.loc(), what + " reaches " + p.name() + " (cluster rank " + std::to_string(rank) +
                       "), which has exited: a CTA must not leave while its peers may still "
                       "arrive on its barriers or write its shared memory (end the kernel with "
                       "tlx.cluster_barrier()), in " +
                       where());
  return p;
}

BufferView Executor::peerBuffer(const BufferView& view, CtaState& p) {
  if (&p == &cta_) return view;
  std::shared_ptr<SharedAlloc>& alloc = p.allocs[view.alloc->allocOp];
  if (!alloc) {
    // The peer has not run this local_alloc yet; its shared memory is there all the same.
    alloc = std::make_shared<SharedAlloc>();
    alloc->bytes.assign(view.alloc->bytes.size(), 0xFF);
    alloc->name = view.alloc->name;
    alloc->allocOp = view.alloc->allocOp;
    alloc->tmem = view.alloc->tmem;
    alloc->reachedFirstByPeer = true;
  }
  BufferView v = view;
  v.alloc = alloc;
  return v;
}

void Executor::addCopyTarget(const ir::Op& op, AsyncCopy& copy, CtaState& cta, BufferView dst,
                             BarrierView bar) {
  CopyTarget t{&cta, std::move(dst), std::move(bar), cta_.newToken()};
  checkedWrite(op, t.dst, 1, t.token);
  for (SharedAccess& a : t.dst.alloc->log.accesses)
    if (a.inFlight && a.token == t.token) a.permission = lastPassedWait_;
  copy.targets.push_back(std::move(t));
}

BarrierView Executor::peerBarrier(const ir::Op& op, const BarrierView& view, CtaState& p) {
  if (&p == &cta_) return view;
  auto it = p.barrierArrays.find(view.array->allocOp);
  if (it == p.barrierArrays.end())
    fail(op.loc(), std::string(op.name()) + " reaches " + view.array->describe(view.first) +
                       " of " + p.name() +
                       " before that CTA initialized it (its alloc_barriers has not run yet; "
                       "alloc_barriers outside async tasks is followed by a cluster barrier), in " +
                       where());
  return BarrierView{it->second, view.first, view.count};
}

void Executor::clusterBarrier(const ir::Op& op, const std::string& what) {
  ClusterState* cl = cta_.cluster;
  if (!cl) return; // a cluster of one CTA: nobody else to meet
  const size_t r = size_t(cta_.rank);
  const int64_t size = int64_t(cl->ctas.size());
  const int64_t generation = cl->generation;
  // Inside async tasks every task arrives (all threads do on the GPU): the CTA's arrival is its
  // last task's; a task that never comes leaves the others blocked (a reported deadlock).
  bool ctaArrives = !agent_.isTask || ++cta_.clusterTaskArrivals == cta_.clusterTasks;
  if (agent_.isTask && ctaArrives) cta_.clusterTaskArrivals = 0;
  if (!ctaArrives) release(cl->arrivals);
  if (ctaArrives) {
    cl->arrived[r] = true;
    ++cl->arrivedCount;
    cl->arrivedAt[r] = op.loc();
    cl->arrivedWhat[r] = what;
    release(cl->arrivals); // barrier.cluster.arrive.release
    if (cl->arrivedCount == size) {
      ++cl->generation;
      cl->completed.join(cl->arrivals);
      cl->arrivals = VectorClock();
      cl->arrived.assign(cl->arrived.size(), false);
      cl->arrivedCount = 0;
      // Only a completion changes what the waiters wait for: waking them at every arrival would
      // cost a hand-over per waiter per arrival.
      bump();
    }
  }
  waitUntil([&] { return cl->generation != generation; },
            [&] {
              return BlockSite{op.loc(), "waits at " + what, {}};
            });
  acquire(cl->completed); // barrier.cluster.wait.acquire
}

int64_t Executor::arrivalWeight(const MBarrier& bar) const {
  // A warp barrier counts every thread; a plain one counts the task once (its threads meet and
  // one of them arrives), whatever its number of warps, as in TLX.
  if (bar.warpBarrier) return int64_t(agent_.numWarps) * 32;
  return 1;
}

bool Executor::completeAsyncCopies(KernelState& k, CtaState& cta) {
  if (cta.copies.empty()) return completeMmaCommits(k, cta);
  while (!cta.copies.empty()) {
    AsyncCopy c = std::move(cta.copies.front());
    cta.copies.pop_front();
    // A TMA load reads its box from global memory now; a remote store carries its value.
    const std::string name = c.op->name();
    Tensor loaded;
    if (!c.data) {
      loaded = Tensor(c.desc->elem, false, c.desc->blockShape);
      descriptorTransfer(k, *c.op, c.where, *c.desc, c.offsets, &loaded, nullptr);
    }
    const Tensor& box = c.data ? *c.data : loaded;
    // A multicast lands the same box in every CTA of its mask, each counting it on its barrier.
    for (CopyTarget& t : c.targets) {
      if (t.cta->exited)
        raiseInterpError(k.sources, c.op->loc(),
                         name + (c.data ? " stores into " : " multicasts into ") + t.cta->name() +
                             ", which has exited: a CTA must not leave while a peer's copy may "
                             "still write its shared memory (end the kernel with "
                             "tlx.cluster_barrier()); the copy was issued in " +
                             c.where);
      // The box lands in row-major order whatever the view's shape (a 3-D box may fill a 2-D
      // tile).
      const size_t w = size_t(t.dst.elemBytes());
      if (size_t(t.dst.tileElements()) * w != box.bytes.size())
        raiseInterpError(k.sources, c.op->loc(),
                         name + " of a " + std::to_string(box.bytes.size()) + "-byte box into a " +
                             std::to_string(size_t(t.dst.tileElements()) * w) + "-byte buffer in " +
                             c.where);
      for (int64_t i = 0; i < t.dst.tileElements(); ++i)
        std::memcpy(t.dst.alloc->bytes.data() + t.dst.byteOffsetOf(0, i),
                    box.bytes.data() + size_t(i) * w, w);
      MBarrier& bar = t.bar.array->barriers.at(size_t(t.bar.first));
      CtaState* barCta = t.barCta ? t.barCta : t.cta;
      // A remote store is sent for a phase only once its sender knows the receiver saw the
      // phase before complete (that is what frees the slot). Bytes counted on a phase whose
      // predecessor no wait has seen mean the predecessor completed short of bytes sent for it:
      // its waiter may read a slot before this store lands on the GPU.
      if (c.data && bar.phase >= 1 && bar.observedPhase < bar.phase) {
        std::vector<Diagnostic> notes;
        if (bar.lastCompletedAt.valid())
          notes.push_back(note(bar.lastCompletedAt, "phase " + std::to_string(bar.phase - 1) +
                                                        " was completed here by " +
                                                        bar.lastCompletedBy));
        raiseInterpError(
            k.sources, c.op->loc(),
            name + " delivers " + std::to_string(c.bytes) + " bytes to phase " +
                std::to_string(bar.phase) + " of " + t.bar.array->describe(t.bar.first) +
                (barCta == &cta ? "" : " of " + barCta->name()) +
                " before any barrier_wait has seen phase " + std::to_string(bar.phase - 1) +
                " complete: that phase completed without these bytes (barrier_expect_bytes too "
                "small, e.g. a store to itself not counted?), so its waiter may read the slot "
                "before the store lands; the store was issued in " +
                c.where,
            std::move(notes));
      }
      // The landing is a write on the barrier's copy clock, released by the barrier's phase.
      if (bar.copyClock == SIZE_MAX) bar.copyClock = barCta->newClockIndex();
      ++bar.copyTicks;
      bar.arrivals.set(bar.copyClock, bar.copyTicks);
      if (t.cta != &cta || barCta != &cta) bar.arrivals.join(c.issuer);
      for (SharedAccess& a : t.dst.alloc->log.accesses)
        if (a.inFlight && a.token == t.token) {
          a.inFlight = false;
          a.agent = bar.copyClock;
          a.epoch = bar.copyTicks;
        }
      bar.txBytes -= c.bytes;
      bar.deliveredBytes += c.bytes;
      const std::string in = barCta == &cta ? "" : " of " + barCta->name();
      if (bar.pendingArrivals == 0 && bar.txBytes < 0)
        raiseInterpError(k.sources, c.op->loc(),
                         name + " delivers " + std::to_string(c.bytes) + " bytes to " +
                             t.bar.array->describe(t.bar.first) + in + ", " +
                             std::to_string(-bar.txBytes) +
                             " more than its phase expects (barrier_expect_bytes too small?); "
                             "the barrier is in " +
                             bar.describe() + ", in " + c.where,
                         expectNotes(bar));
      completePhase(k.sources, t.bar, c.op->loc(),
                    c.op->code() == OpCode::ClcTryCancel ? "the landing of the try_cancel response"
                    : c.data                             ? "the landing of the remote store"
                                                         : "the landing of the TMA load",
                    "the copy issued in " + c.where, c.where);
      if (t.cta->scheduler) t.cta->scheduler->bump();
    }
  }
  completeMmaCommits(k, cta);
  if (cta.scheduler) cta.scheduler->bump();
  return true;
}

namespace {

/// [K, n] `left` and [K, m] `right` side by side: [K, n + m] (the columns of a CTA pair's B).
TensorPtr sideBySide(const Tensor& left, const Tensor& right) {
  const int64_t rows = left.shape.at(0), n = left.shape.at(1), m = right.shape.at(1);
  auto out = std::make_shared<Tensor>(left.elem, false, std::vector<int64_t>{rows, n + m});
  const size_t w = left.bytes.size() / size_t(std::max<int64_t>(1, rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out->bytes.data() + size_t(r * (n + m)) * w, left.bytes.data() + size_t(r * n) * w,
                size_t(n) * w);
    std::memcpy(out->bytes.data() + size_t(r * (n + m) + n) * w,
                right.bytes.data() + size_t(r * m) * w, size_t(m) * w);
  }
  return out;
}

/// A CTA pair's M = 64 accumulator ([64, N], row r's first N / 2 columns in lane r, its last in
/// lane 64 + r): `fold` turns the [64, N] tile into its [128, N / 2] lanes, else back.
TensorPtr pairSplitTile(const Tensor& t, bool fold) {
  const int64_t half = fold ? t.shape.at(1) / 2 : t.shape.at(1);
  auto out = std::make_shared<Tensor>(
      t.elem, false, fold ? std::vector<int64_t>{128, half} : std::vector<int64_t>{64, 2 * half});
  const size_t w = t.bytes.size() / size_t(std::max<int64_t>(1, t.numel()));
  const size_t row = size_t(half) * w; // bytes of a lane
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t h = 0; h < 2; ++h) {
      const size_t logical = size_t(r) * 2 * row + size_t(h) * row;
      const size_t lane = size_t(r + 64 * h) * row;
      std::memcpy(out->bytes.data() + (fold ? lane : logical),
                  t.bytes.data() + (fold ? logical : lane), row);
    }
  return out;
}

} // namespace

bool Executor::completeMmaCommits(KernelState& k, CtaState& cta) {
  if (cta.mmaCommits.empty()) return false;
  while (!cta.mmaCommits.empty()) {
    MmaCommit c = std::move(cta.mmaCommits.front());
    cta.mmaCommits.pop_front();
    MBarrier& bar = c.bar.array->barriers.at(size_t(c.bar.first));
    if (bar.copyClock == SIZE_MAX) bar.copyClock = cta.newClockIndex();
    ++bar.copyTicks;
    auto whole = [](const BufferView& v) {
      return readBuffer(v, ir::Type::tensor(v.elem, v.shape));
    };
    // acc = a @ b (+ acc when the MMA accumulates).
    auto runMma = [&](const PendingMma& m, const BufferView& av, const Tensor& b,
                      const BufferView& accv) {
      TensorPtr acc = m.useAcc ? whole(accv) : nullptr;
      if (!m.accSplit) {
        writeBuffer(accv, *computeDot(*whole(av), b, acc.get(), m.precision,
                                      ir::Type::tensor(accv.elem, accv.shape)));
        return;
      }
      // A pair's M = 64 accumulator: [64, N] in 128 lanes of N / 2 columns.
      if (acc) acc = pairSplitTile(*acc, false);
      TensorPtr d = computeDot(*whole(av), b, acc.get(), m.precision,
                               ir::Type::tensor(accv.elem, {64, 2 * accv.shape.at(1)}));
      writeBuffer(accv, *pairSplitTile(*d, true));
    };
    // The tensor core runs the MMAs (and scale copies) in issue order, reading the operands now.
    for (PendingMma& m : c.mmas) {
      if (m.peer && m.peer->exited)
        raiseInterpError(k.sources, m.op->loc(),
                         "a CTA pair's tlx.async_dot completes after " + m.peer->name() +
                             ", whose operands and accumulator it uses, has exited: the pair's "
                             "CTAs must wait for the MMA's commit before they leave; it was "
                             "issued in " +
                             c.where);
      if (m.copy) {
        runTmemCopy(m);
      } else if (m.aScale.alloc) {
        runScaledMma(m);
      } else {
        TensorPtr b = whole(m.b);
        // A CTA pair's MMA: B's columns are the leader's half then the peer's; each CTA's rows
        // of A give its rows of the accumulator.
        if (m.peer) b = sideBySide(*b, *whole(m.peerB));
        runMma(m, m.a, *b, m.acc);
        if (m.peer) runMma(m, m.peerA, *b, m.peerAcc);
      }
      // Its accesses become ordinary ones on the barrier's completion clock: a wait that sees
      // this commit's phase is ordered after them.
      for (const BufferView* v : {&m.a, &m.b, &m.acc, &m.peerA, &m.peerB, &m.peerAcc, &m.aScale,
                                  &m.bScale, &m.peerAScale, &m.peerBScale}) {
        if (!v->alloc) continue;
        for (SharedAccess& acc2 : v->alloc->log.accesses)
          if (acc2.inFlight && acc2.token == m.token) {
            acc2.inFlight = false;
            acc2.agent = bar.copyClock;
            acc2.epoch = bar.copyTicks;
          }
      }
    }
    // A commit tracks every earlier MMA of its thread: its arrival releases their completions,
    // landed on other barriers' clocks too.
    cta.mmaCompleted.set(bar.copyClock, bar.copyTicks);
    // One arrival on the barrier, and on the peer's at the same offset for a CTA pair's commit
    // (multicast to both CTAs of the pair).
    auto arrive = [&](const BarrierView& view, const std::string& whose) {
      MBarrier& b = view.array->barriers.at(size_t(view.first));
      b.arrivals.join(cta.mmaCompleted);
      b.arrivals.join(c.issuer);
      b.phaseArrivals.push_back({c.at, "the tcgen05 commit issued in " + c.where});
      if (b.pendingArrivals <= 0)
        raiseInterpError(k.sources, c.at,
                         "the tcgen05 commit arrives on " + view.array->describe(view.first) +
                             whose + " whose phase has all its arrivals already (" + b.describe() +
                             "): a commit barrier needs an arrival count of 1 per commit, in " +
                             c.where);
      --b.pendingArrivals;
      completePhase(k.sources, view, c.at, "the tcgen05 commit's arrival",
                    "the tcgen05 commit issued in " + c.where, c.where);
    };
    arrive(c.bar, "");
    if (c.peer) {
      if (c.peer->exited)
        raiseInterpError(k.sources, c.at,
                         "a CTA pair's tcgen05 commit arrives on the barrier of " + c.peer->name() +
                             ", which has exited: the pair's CTAs must wait for the commit "
                             "before they leave; it was issued in " +
                             c.where);
      arrive(c.peerBar, " of " + c.peer->name());
    }
    if (cta.scheduler) cta.scheduler->bump();
  }
  return true;
}

bool Executor::completeAsyncCopies(KernelState& k, ClusterState& cluster) {
  bool any = false;
  for (CtaState* cta : cluster.ctas) any |= completeAsyncCopies(k, *cta);
  return any;
}

void Executor::completeDot(PendingDot& d) {
  TensorPtr a;
  if (auto* t = std::get_if<TensorPtr>(&d.a))
    a = *t;
  else {
    const BufferView& av = std::get<BufferView>(d.a);
    a = readBuffer(av, ir::Type::tensor(av.elem, av.shape));
  }
  TensorPtr b = readBuffer(d.b, ir::Type::tensor(d.b.elem, d.b.shape));
  TensorPtr acc;
  if (d.useAcc) {
    if (auto* t = std::get_if<TensorPtr>(&d.acc))
      acc = *t;
    else if (auto* p = std::get_if<PendingDotPtr>(&d.acc)) {
      if (!(*p)->result) completeDot(**p);
      acc = (*p)->result;
    }
  }
  // wgmma reads fp32 operands as tf32 unless the kernel asked otherwise.
  d.result = computeDot(*a, *b, acc.get(), d.precision, d.resultType);
}

void Executor::completeDotsDownTo(size_t pendings, SourceLoc waitLoc) {
  while (dots_.size() > pendings) {
    PendingDotPtr d = dots_.front();
    dots_.pop_front();
    if (!d->result) completeDot(*d);
    if (auto* av = std::get_if<BufferView>(&d->a)) retireReads(*av, d->token, waitLoc);
    retireReads(d->b, d->token, waitLoc);
  }
}

void Executor::completeLoadGroup(std::vector<AsyncLoadCopy>& group) {
  for (AsyncLoadCopy& c : group) {
    TensorPtr v = loadGlobal(*c.op, *c.ptrs, c.mask.get(), c.other.get(),
                             ir::Type::tensor(c.dst.elem, c.ptrs->shape));
    for (SharedAccess& a : c.dst.alloc->log.accesses)
      if (a.inFlight && a.token == c.token) {
        a.inFlight = false;
        a.epoch = agent_.clock.at(agent_.clockIndex);
      }
    writeBuffer(c.dst, *v);
  }
}

// ---- buffers ----
void Executor::execLocalAlloc(const ir::Op& op) {
  const ir::Type& rt = op.result()->type();
  BufferView v;
  v.alloc = std::make_shared<SharedAlloc>();
  v.elem = rt.elem;
  v.shape = rt.shape;
  v.strides = rowMajorStrides(rt.shape);
  v.count = rt.count;
  v.tileStrideBytes = v.tileElements() * v.elemBytes();
  if (op.hasAttr(attr::LocalAlloc::kalias) && rt.space == ir::MemorySpace::Tmem) {
    execTmemAliasMember(op, v);
    return;
  }
  if (op.hasAttr(attr::LocalAlloc::kalias)) {
    // A member of a storage_alias_spec: its buffers lie in the spec's one region, at the
    // offset and spacing the compiler gave it (see specialize/TlxStorageAlias.cpp).
    if (int64_t stride = attr::LocalAlloc::aliasStride(op)) v.tileStrideBytes = stride;
    v.groupSize = attr::LocalAlloc::aliasGroup(op);
    if (v.groupSize > 1) v.groupStepBytes = v.tileElements() * v.elemBytes();
    v.byteOffset = attr::LocalAlloc::aliasOffset(op);
    std::shared_ptr<SharedAlloc>& region = cta_.aliasRegions[attr::LocalAlloc::alias(op)];
    if (!region) {
      region = std::make_shared<SharedAlloc>();
      region->allocOp = &op;
      if (cta_.cluster) cta_.allocs[&op] = region;
    }
    int64_t need = attr::LocalAlloc::aliasBytes(op);
    for (int64_t i = 0; i < v.count; ++i)
      need = std::max(need, v.byteOffset + v.tileOffset(i) + v.tileElements() * v.elemBytes());
    if (int64_t(region->bytes.size()) < need) region->bytes.resize(size_t(need), 0xFF);
    v.alloc = region;
    set(op.result(), v);
    return;
  }
  if (attr::LocalAlloc::storage(op) == "tmem") {
    // Tensor memory as the GPU has it: lanes of 32-bit columns, each buffer `cells` columns of
    // every lane, one after another, a row of the tile per lane (a [64, N] tile's rows in the
    // first 64 lanes here), 16-bit elements two to a column. reuse= overlays another
    // allocation's columns from its first one, with that allocation's lane pitch.
    v.pairSplit = pairSplitAlloc(op);
    const int64_t cells =
        std::max<int64_t>(1, rt.shape.back() * v.elemBytes() / 4 / (v.pairSplit ? 2 : 1));
    int64_t pitch = cells * v.count * 4; // bytes of a lane
    if (v.pairSplit && attr::LocalAlloc::hasReuse(op))
      fail(op.loc(), "tlx.local_alloc of " + rt.str() +
                         " with reuse= of a buffer is the "
                         "accumulator of a CTA pair's M = 64 MMA; the sm_100a backend places those "
                         "on their own or in a storage_alias_spec (" +
                         where() + ")");
    if (attr::LocalAlloc::hasReuse(op)) {
      const BufferView& reused = buffer(op, 0);
      pitch = reused.strides.at(0) * reused.elemBytes();
      if (cells * v.count * 4 > pitch)
        fail(op.loc(), "tlx.local_alloc of " + rt.str() + " reuses " + op.operand(0)->type().str() +
                           " but needs more tensor-memory columns (" +
                           std::to_string(cells * v.count) + ") than it has (" +
                           std::to_string(pitch / 4) + ") in " + where());
      v.alloc = reused.alloc;
      v.byteOffset = reused.byteOffset;
    } else {
      v.alloc->bytes.assign(size_t(128 * pitch), 0xFF);
      v.alloc->allocOp = &op;
      v.alloc->tmem = true;
    }
    if (rt.shape.size() == 2) v.strides = {pitch / v.elemBytes(), 1};
    // A block-scale tile of more than 128 rows keeps its rows a lane pitch apart here too (the
    // interpreter holds scale tiles as [rows, cols]; the GPU's columns are ir/BlockScaled.h's).
    if (ir::isTmemScaleTile(rt) && rt.shape[0] > 128) growTmemRows(v, rt.shape[0], pitch);
    v.tileStrideBytes = cells * 4;
    if (cta_.cluster && !attr::LocalAlloc::hasReuse(op)) adoptPeerBytes(op, v);
    set(op.result(), v);
    return;
  }
  // Fresh shared memory holds garbage on the GPU: poison it (NaN for floats, -1 for ints) so
  // that reads before writes show up in results.
  v.alloc->bytes.assign(size_t(v.count * v.tileStrideBytes), 0xFF);
  v.alloc->allocOp = &op;
  if (cta_.cluster) adoptPeerBytes(op, v);
  set(op.result(), v);
}

void Executor::execTmemAliasMember(const ir::Op& op, BufferView& v) {
  // A member of a tensor-memory storage_alias_spec. The spec's region is columns of every lane
  // (as many as alias_bytes and every member's last buffer need, computed once, as codegen
  // does in TlxTmem.cpp); buffer i of the member starts alias_offset + i * alias_stride +
  // (i % alias_group) * (its own columns) columns in, its rows a lane each. A member's own
  // column count is the hardware's (ir::tmemColumns); the interpreter keeps a tile's data in
  // the first columns of it.
  const ir::Type& rt = op.result()->type();
  const int64_t id = attr::LocalAlloc::alias(op);
  std::shared_ptr<SharedAlloc>& region = cta_.aliasRegions[id];
  auto columnsOf = [&](const ir::Op& m) {
    const ir::Type& t = m.result()->type();
    const int64_t unit = std::max<int64_t>(1, ir::tmemColumns(t, pairSplitAlloc(m)));
    const int64_t stride =
        attr::LocalAlloc::aliasStride(m) ? attr::LocalAlloc::aliasStride(m) : unit;
    const int64_t group = attr::LocalAlloc::aliasGroup(m);
    int64_t cols = attr::LocalAlloc::aliasBytes(m);
    for (int64_t i = 0; i < t.count; ++i)
      cols =
          std::max(cols, attr::LocalAlloc::aliasOffset(m) + i * stride + (i % group) * unit + unit);
    return cols;
  };
  if (!region) {
    int64_t cols = 0;
    ir::walk(k_.fn->body, [&](const ir::Op& m) {
      if (m.code() == ir::OpCode::LocalAlloc && attr::LocalAlloc::alias(m) == id)
        cols = std::max(cols, columnsOf(m));
    });
    region = std::make_shared<SharedAlloc>();
    region->bytes.assign(size_t(128 * cols * 4), 0xFF);
    region->allocOp = &op;
    region->tmem = true;
    if (cta_.cluster) cta_.allocs[&op] = region;
  }
  const int64_t pitch = int64_t(region->bytes.size()) / 128; // bytes of a lane
  v.pairSplit = pairSplitAlloc(op);
  const int64_t unit = std::max<int64_t>(1, ir::tmemColumns(rt, v.pairSplit));
  const int64_t stride =
      attr::LocalAlloc::aliasStride(op) ? attr::LocalAlloc::aliasStride(op) : unit;
  v.alloc = region;
  v.byteOffset = attr::LocalAlloc::aliasOffset(op) * 4;
  if (rt.shape.size() == 2) v.strides = {pitch / v.elemBytes(), 1};
  if (ir::isTmemScaleTile(rt) && rt.shape[0] > 128) growTmemRows(v, rt.shape[0], pitch);
  v.tileStrideBytes = stride * 4;
  v.groupSize = attr::LocalAlloc::aliasGroup(op);
  v.groupStepBytes = v.groupSize > 1 ? unit * 4 : 0;
  set(op.result(), v);
}

void Executor::growTmemRows(BufferView& v, int64_t rows, int64_t pitch) {
  const int64_t need = v.byteOffset + rows * pitch;
  if (int64_t(v.alloc->bytes.size()) < need) v.alloc->bytes.resize(size_t(need), 0xFF);
}

void Executor::adoptPeerBytes(const ir::Op& op, BufferView& v) {
  // A peer's multicast may have reached this buffer first: shared memory (and tensor memory)
  // is laid out statically on the GPU, so its bytes are already there.
  auto [it, fresh] = cta_.allocs.try_emplace(&op, v.alloc);
  if (!fresh && it->second->reachedFirstByPeer) {
    it->second->reachedFirstByPeer = false;
    v.alloc = it->second;
  } else {
    it->second = v.alloc;
  }
}

void Executor::execLocalView(const ir::Op& op) {
  int64_t index = scalarInt(op, 1);
  const RtValue& src = slot(op.operand(0));
  if (auto* b = std::get_if<BufferView>(&src); b && attr::LocalView::subview(op)) {
    // Row `index` of one buffer (element `index` of a 1-D one, as a [1] view).
    int64_t rows = b->shape.empty() ? 1 : b->shape[0];
    if (index < 0 || index >= rows)
      fail(op.loc(), "local_view index " + std::to_string(index) +
                         " is out of range for dimension 0 (size " + std::to_string(rows) +
                         ") of the buffer view in " + where());
    BufferView v = *b;
    v.byteOffset += index * (b->strides.empty() ? 1 : b->strides[0]) * b->elemBytes();
    if (v.shape.size() > 1) {
      v.shape.erase(v.shape.begin());
      v.strides.erase(v.strides.begin());
    } else {
      v.shape = {1};
    }
    v.tileStrideBytes = v.tileElements() * v.elemBytes();
    set(op.result(), v);
    return;
  }
  if (auto* b = std::get_if<BufferView>(&src)) {
    if (index < 0 || index >= b->count)
      fail(op.loc(), "local_view index " + std::to_string(index) + " is out of range for " +
                         std::to_string(b->count) + " buffers (valid: 0.." +
                         std::to_string(b->count - 1) + ") in " + where());
    BufferView v = *b;
    v.byteOffset += b->tileOffset(index);
    v.count = 1;
    v.groupSize = 1;
    v.groupStepBytes = 0;
    set(op.result(), v);
    return;
  }
  const BarrierView& bars = barrierView(op, 0);
  if (index < 0 || index >= bars.count)
    fail(op.loc(),
         "barrier index " + std::to_string(index) + " is out of range for " +
             std::to_string(bars.count) + " barriers (valid: 0.." + std::to_string(bars.count - 1) +
             "): an arrival or wait there would use a barrier alloc_barriers never "
             "initialized, in " +
             where(),
         {note(bars.array->allocAt, "alloc_barriers initialized " +
                                        std::to_string(bars.array->barriers.size()) +
                                        " barriers here")});
  set(op.result(), BarrierView{bars.array, bars.first + index, 1});
}

BufferView Executor::pairSplitLanes(const BufferView& v) {
  BufferView lanes = v;
  lanes.shape = {128, v.shape.at(1) / 2};
  lanes.pairSplit = false;
  return lanes;
}

void Executor::refusePairSplit(const ir::Op& op, const BufferView& v) {
  if (!v.pairSplit) return;
  fail(op.loc(), std::string("'") + op.name() + "' of " + op.operand(0)->type().str() +
                     ", the accumulator of a CTA pair's M = 64 MMA (rows 0-63 hold its first half "
                     "of the columns, lanes 64-127 the second), is not supported by the sm_100a "
                     "backend yet; read it through a [128, N / 2] buffer that shares its columns "
                     "(storage_alias_spec), as TLX's attention backward does (" +
                     where() + ")");
}

void Executor::execLocalLoad(const ir::Op& op) {
  const BufferView& v = buffer(op, 0);
  if (v.pairSplit) {
    // A CTA pair's [64, N] accumulator: its 128 lanes of N / 2 columns, unfolded.
    const BufferView lanes = pairSplitLanes(v);
    checkedRead(op, lanes, 1);
    TensorPtr t = readBuffer(lanes, ir::Type::tensor(lanes.elem, lanes.shape));
    set(op.result(), pairSplitTile(*t, false));
    return;
  }
  int64_t n = 1;
  for (int64_t d : op.result()->type().shape) n *= d;
  checkViewElements(op, v, n);
  checkedRead(op, v, tilesOf(v, n));
  set(op.result(), readBuffer(v, op.result()->type()));
}

void Executor::execLocalStore(const ir::Op& op) {
  const BufferView& v = buffer(op, 0);
  if (v.pairSplit) {
    const BufferView lanes = pairSplitLanes(v);
    checkedWrite(op, lanes, 1);
    writeBuffer(lanes, *pairSplitTile(*tensor(op, 1), true));
    return;
  }
  TensorPtr value = tensor(op, 1);
  checkViewElements(op, v, value->numel());
  checkedWrite(op, v, tilesOf(v, value->numel()));
  writeBuffer(v, *value);
}

void Executor::execLocalTrans(const ir::Op& op) {
  BufferView v = buffer(op, 0);
  std::vector<int64_t> order = attr::LocalTrans::order(op);
  if (order.empty()) {
    for (size_t d = 0; d < v.shape.size(); ++d) order.push_back(int64_t(d));
    if (order.size() >= 2) std::swap(order[order.size() - 1], order[order.size() - 2]);
  }
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t d = 0; d < sorted.size(); ++d)
    if (sorted.size() != v.shape.size() || sorted[d] != int64_t(d))
      fail(op.loc(), "tlx.local_trans's dims must be a permutation of the " +
                         std::to_string(v.shape.size()) + " dimensions of the buffer (each of 0.." +
                         std::to_string(int64_t(v.shape.size()) - 1) + " once)");
  BufferView t = v;
  for (size_t d = 0; d < order.size(); ++d) {
    t.shape[d] = v.shape[size_t(order[d])];
    t.strides[d] = v.strides[size_t(order[d])];
  }
  set(op.result(), t);
}

void Executor::execLocalSlice(const ir::Op& op) {
  BufferView v = buffer(op, 0);
  refusePairSplit(op, v);
  const ir::Type& st = op.operand(0)->type();
  if (st.space == ir::MemorySpace::Tmem && ir::isTmemScaleTile(st)) {
    // As the sm_100a backend: block scales are sliced by whole 32-bit column words.
    const std::vector<int64_t> o = attr::LocalSlice::offsets(op), n = attr::LocalSlice::sizes(op);
    if (o.size() == 2 && (o[1] % 4 != 0 || n[1] % 4 != 0))
      fail(op.loc(), "tlx.local_slice of the tensor-memory block scales " + st.str() +
                         " takes scales [" + std::to_string(o[1]) + ", " +
                         std::to_string(o[1] + n[1]) +
                         "): a slice of block scales starts and ends at a 32-bit column word, a "
                         "multiple of 4 scales (" +
                         where() + ")");
  }
  std::vector<int64_t> offsets = attr::LocalSlice::offsets(op), sizes = attr::LocalSlice::sizes(op);
  if (offsets.size() != v.shape.size() || sizes.size() != v.shape.size())
    fail(op.loc(), "local_slice of a rank-" + std::to_string(v.shape.size()) + " buffer with " +
                       std::to_string(offsets.size()) + " offsets and " +
                       std::to_string(sizes.size()) + " sizes: give one of each per dimension");
  for (size_t d = 0; d < v.shape.size(); ++d) {
    if (offsets[d] < 0 || sizes[d] < 0 || offsets[d] + sizes[d] > v.shape[d])
      fail(op.loc(), "local_slice [" + std::to_string(offsets[d]) + ", " +
                         std::to_string(offsets[d] + sizes[d]) + ") of dimension " +
                         std::to_string(d) + " leaves the buffer (size " +
                         std::to_string(v.shape[d]) + ") in " + where());
    v.byteOffset += offsets[d] * v.strides[d] * v.elemBytes();
    v.shape[d] = sizes[d];
  }
  set(op.result(), v);
}

void Executor::execLocalReinterpret(const ir::Op& op) {
  const BufferView& v = buffer(op, 0);
  // The PTX backend's wording: it refuses every sliced or transposed source; the interpreter
  // supports the contiguous ones exactly and refuses the rest as it does.
  if (!v.contiguous())
    fail(op.loc(), "tlx.local_reinterpret of a sliced, transposed or reinterpreted view is not "
                   "supported; reinterpret the buffer and slice the result");
  const ir::Type& rt = op.result()->type();
  BufferView r;
  r.alloc = v.alloc;
  r.elem = rt.elem;
  r.byteOffset = v.byteOffset;
  r.shape = rt.shape;
  r.strides = rowMajorStrides(rt.shape);
  r.count = rt.count;
  r.tileStrideBytes = r.tileElements() * r.elemBytes();
  if (r.byteOffset + r.count * r.tileStrideBytes > int64_t(v.alloc->bytes.size()))
    fail(op.loc(), "local_reinterpret as " + rt.str() + " needs " +
                       std::to_string(r.count * r.tileStrideBytes) +
                       " bytes, more than the buffer holds (" + where() + ")");
  set(op.result(), r);
}

// ---- mbarriers ----
void Executor::execAllocBarriers(const ir::Op& op) {
  auto arr = std::make_shared<MBarrierArray>();
  MBarrier b;
  b.arriveCount = b.pendingArrivals = attr::AllocBarriers::arriveCount(op);
  b.warpBarrier = attr::AllocBarriers::warp(op);
  arr->barriers.assign(size_t(op.result()->type().count), b);
  arr->allocAt = op.loc();
  arr->name = op.result()->name;
  arr->allocOp = &op;
  set(op.result(), BarrierView{arr, 0, op.result()->type().count});
  if (cta_.cluster) {
    cta_.barrierArrays[&op] = arr;
    // Codegen follows the inits with a cluster barrier (outside async tasks), so that no
    // peer arrives on a barrier before its CTA has initialized it.
    if (!agent_.isTask)
      clusterBarrier(op, "the cluster barrier that follows alloc_barriers in a cluster launch");
  }
}

void Executor::execBarrierExpectBytes(const ir::Op& op) {
  if (op.numOperands() > 2 && readScalar(*tensor(op, 2), 0).i == 0) return;
  const BarrierView& view = barrierView(op, 0);
  MBarrier& bar = barrier(op, 0);
  int64_t bytes = scalarInt(op, 1);
  // barrier_expect_bytes is mbarrier.arrive.expect_tx: expect the bytes, then arrive once.
  checkArrivalOrdered(op, view, "barrier_expect_bytes");
  bar.txBytes += bytes;
  bar.expectedBytes += bytes;
  bar.expectAt = op.loc();
  bar.expectBy = accessor();
  release(bar.arrivals);
  if (--bar.pendingArrivals < 0)
    fail(op.loc(),
         "over-arrival: barrier_expect_bytes arrives on " + view.array->describe(view.first) +
             " whose " + bar.describe() +
             " has no arrival left (too many arrivals in one phase) in " + where(),
         initNote(*view.array, bar));
  checkNoExcessBytes(op, bar);
  completePhase(k_.sources, view, op.loc(), "barrier_expect_bytes", accessor(), where());
  bump();
}

void Executor::execBarrierArrive(const ir::Op& op) {
  std::optional<int64_t> remoteRank;
  for (unsigned i = 1; i < op.numOperands(); ++i) {
    const ir::Type& t = op.operand(i)->type();
    if (t.elem == ir::DType::I1) {
      if (readScalar(*tensor(op, i), 0).i == 0) return;
    } else {
      remoteRank = scalarInt(op, i);
    }
  }
  BarrierView view = barrierView(op, 0);
  std::string whose;
  if (remoteRank && (cta_.cluster || *remoteRank != 0)) {
    CtaState& target = peer(op, *remoteRank, "barrier_arrive with remote_cta_rank");
    if (&target != &cta_) {
      view = peerBarrier(op, view, target);
      whose = " of " + target.name();
    }
  }
  arriveOn(op, view, attr::BarrierArrive::arriveCount(op), whose);
}

void Executor::execBarrierWait(const ir::Op& op) {
  if (op.numOperands() > 2 && readScalar(*tensor(op, 2), 0).i == 0) return;
  const BarrierView view = barrierView(op, 0);
  MBarrier& bar = view.array->barriers.at(size_t(view.first));
  int64_t parity = scalarInt(op, 1);
  const bool atOnce = bar.waitPasses(parity);
  const int64_t phaseAtWait = bar.phase;
  waitUntil([&] { return bar.waitPasses(parity); },
            [&] {
              std::vector<Diagnostic> notes = lappedNotes(bar);
              if (bar.txBytes > 0) {
                std::vector<Diagnostic> bytes = expectNotes(bar);
                notes.insert(notes.end(), bytes.begin(), bytes.end());
              }
              if (bar.pendingArrivals > 0) {
                for (Diagnostic& d : initNote(*view.array, bar)) notes.push_back(std::move(d));
                for (Diagnostic& d : arrivalNotes(bar)) notes.push_back(std::move(d));
              }
              return BlockSite{op.loc(),
                               "waits on " + view.array->describe(view.first) +
                                   " for the phase of parity " + std::to_string(parity & 1) +
                                   " to complete; the barrier is in " + bar.describe(),
                               std::move(notes)};
            });
  acquire(bar.completed);
  phaseSeen_[&bar] = bar.phase;
  bar.observedPhase = std::max(bar.observedPhase, bar.phase);
  if (bar.observersPhase != bar.phase) {
    bar.observersPhase = bar.phase;
    bar.observers.clear();
    bar.observedAt = op.loc();
    bar.observedBy = accessor();
  }
  bar.observers.push_back({agent_.clockIndex, agent_.clock.at(agent_.clockIndex)});
  lastPassedWait_ = {note(op.loc(), "issued after " + accessor() + " passed this barrier_wait on " +
                                        view.array->describe(view.first))};
  if (bar.lastCompletedAt.valid())
    lastPassedWait_.push_back(
        note(bar.lastCompletedAt, "whose phase was completed by " + bar.lastCompletedBy + " here"));
  lastWait_.clear();
  if (atOnce) {
    const std::string p = std::to_string(parity & 1), other = std::to_string((parity & 1) ^ 1);
    std::string why =
        phaseAtWait == 0
            ? "no phase of it had completed, so this wait named a phase that never ran (a wait "
              "for parity " +
                  p + " passes while the phase in progress has parity " + other +
                  "); to wait for the phase in progress, wait for parity " + other
            : "phase " + std::to_string(phaseAtWait - 1) + " (parity " + p +
                  ") had completed before it";
    lastWait_.push_back(note(op.loc(), accessor() +
                                           "'s last barrier_wait before this passed "
                                           "at once: it waited on " +
                                           view.array->describe(view.first) + " for parity " + p +
                                           " while the barrier was in "
                                           "phase " +
                                           std::to_string(phaseAtWait) + " (parity " + other +
                                           "); " + why));
  }
}

void Executor::execNamedBarrier(const ir::Op& op) {
  int64_t id = scalarInt(op, 0), numThreads = scalarInt(op, 1);
  if (agent_.isTask) checkNamedBarrierCounts(op, id);
  NamedBarrier& nb = cta_.namedBarriers[id];
  int64_t threads = int64_t(agent_.numWarps) * 32;
  if (nb.expectedThreads == 0) {
    nb.expectedThreads = numThreads;
    nb.firstArrivalAt = op.loc();
    nb.firstArrivalBy = accessor();
  } else if (nb.expectedThreads != numThreads)
    fail(op.loc(), std::string(op.name()) + " on named barrier " + std::to_string(id) + " with " +
                       std::to_string(numThreads) + " threads while its current phase expects " +
                       std::to_string(nb.expectedThreads) + " (" + where() + ")");
  nb.arrivedThreads += threads;
  release(nb.arrivals);
  // The hardware counts a barrier's arrivals warp by warp: every `expected` threads complete a
  // phase, so an agent of more threads than the count completes phases by itself.
  while (nb.arrivedThreads >= nb.expectedThreads) {
    ++nb.generation;
    nb.completed.join(nb.arrivals);
    nb.arrivedThreads -= nb.expectedThreads;
  }
  // The phase this agent's last warps are in; the agent goes on once it completes.
  int64_t generation = nb.generation;
  if (nb.arrivedThreads == 0) {
    --generation;
    nb.arrivals = VectorClock();
    nb.expectedThreads = 0;
  }
  bump();
  if (op.code() == OpCode::NamedBarrierWait)
    waitUntil([&] { return cta_.namedBarriers[id].generation != generation; },
              [&] {
                const NamedBarrier& cur = cta_.namedBarriers[id];
                return BlockSite{op.loc(),
                                 "waits at named barrier " + std::to_string(id) + " (" +
                                     std::to_string(cur.arrivedThreads) + " of " +
                                     std::to_string(numThreads) + " threads arrived)",
                                 {}};
              });
  if (op.code() == OpCode::NamedBarrierWait) {
    acquire(cta_.namedBarriers[id].completed);
    if (numThreads == threads) ++agent_.agentBarriers; // all of this agent's threads met
  } else
    yieldToOthers();
}

void Executor::execNoEffect(const ir::Op& /*op*/) {}

void Executor::execClusterBarrier(const ir::Op& op) {
  clusterBarrier(op, "cluster_barrier");
}

// ---- async copies ----
void Executor::execAsyncDescLoad(const ir::Op& op) {
  auto desc = descriptor(op, 0);
  const size_t rank = desc->shape.size();
  const bool hasPred = attr::AsyncDescLoad::hasPred(op);
  if (hasPred && readScalar(*tensor(op, unsigned(3 + rank)), 0).i == 0) return;
  const unsigned firstTarget = unsigned(3 + rank + (hasPred ? 1 : 0));
  const int64_t runtimeTargets = attr::AsyncDescLoad::multicastOperands(op);
  AsyncCopy c;
  c.op = &op;
  c.desc = desc;
  const BufferView& dst = buffer(op, 1);
  const BarrierView& bar = barrierView(op, 2);
  for (size_t i = 0; i < rank; ++i) c.offsets.push_back(scalarInt(op, unsigned(3 + i)));
  checkTmaBoxStart(k_, op, where(), *desc, c.offsets);
  c.bytes = ir::byteWidth(desc->elem);
  for (int64_t d : desc->blockShape) c.bytes *= d;
  c.where = where();
  if (cta_.cluster) c.issuer = agent_.clock;
  // A multicast (cp.async.bulk.tensor .multicast::cluster) lands at the buffer's offset in
  // every CTA of the mask and completes the barrier at the same offset in each of them.
  if (attr::AsyncDescLoad::twoCtas(op)) {
    // A CTA pair's operand: it lands in this CTA's buffer, and its bytes complete the barrier at
    // the same offset in the pair's leader (cp.async.bulk.tensor .cta_group::2).
    CtaState& other = pairPeer(op, "async_descriptor_load(two_ctas=True)");
    CtaState& leader = cta_.rank % 2 == 0 ? cta_ : other;
    addCopyTarget(op, c, cta_, dst, peerBarrier(op, bar, leader));
    c.targets.back().barCta = &leader;
    cta_.copies.push_back(std::move(c));
    return;
  }
  std::vector<CtaState*> ctas{&cta_};
  if (int64_t mask = attr::AsyncDescLoad::multicastMask(op); mask || runtimeTargets) {
    const int64_t size = std::max(1, k_.fn->numCtas);
    if (size < 2)
      fail(op.loc(), std::string("'") + op.name() +
                         "' with multicast_targets needs a cluster launch; launch with "
                         "ctas_per_cga of 2 or more, or load without multicast_targets");
    if (mask >> size)
      fail(op.loc(), std::string("'") + op.name() + "' multicasts to CTA ranks beyond the " +
                         std::to_string(size) + " CTAs of the cluster");
    // Ranks computed at run time (the peer of cluster_cta_rank(), say) add their bits.
    for (int64_t t = 0; t < runtimeTargets; ++t) {
      const int64_t r = scalarInt(op, firstTarget + unsigned(t));
      peer(op, r, "async_descriptor_load's multicast target");
      mask |= int64_t(1) << r;
    }
    ctas.clear();
    for (int64_t r = 0; r < size; ++r)
      if ((mask >> r) & 1) ctas.push_back(&peer(op, r, "async_descriptor_load's multicast"));
  }
  for (CtaState* target : ctas)
    addCopyTarget(op, c, *target, peerBuffer(dst, *target), peerBarrier(op, bar, *target));
  cta_.copies.push_back(std::move(c));
}

void Executor::execAsyncDescStore(const ir::Op& op) {
  auto desc = descriptor(op, 0);
  const BufferView& src = buffer(op, 1);
  std::vector<int64_t> offsets;
  for (unsigned i = 2; i < op.numOperands(); ++i) offsets.push_back(scalarInt(op, i));
  int64_t n = 1;
  for (int64_t d : desc->blockShape) n *= d;
  checkViewElements(op, src, n);
  checkedRead(op, src, tilesOf(src, n));
  TensorPtr box = readBuffer(src, ir::Type::tensor(src.elem, desc->blockShape));
  descriptorTransfer(k_, op, where(), *desc, offsets, nullptr, box.get());
}

// ---- 1-D bulk copies (cp.async.bulk) and prefetch hints ----
void Executor::execBulkCopy(const ir::Op& op) {
  // Both move `bytes` between a scalar global address and the start of a 1-D buffer, in
  // 16-byte units at 16-byte aligned addresses, as the hardware requires.
  const bool isLoad = op.code() == OpCode::AsyncBulkLoad;
  const uint64_t addr = tensor(op, 0)->data<uint64_t>()[0];
  const BufferView& view = buffer(op, 1);
  const int64_t bytes = scalarInt(op, isLoad ? 3 : 2);
  const int64_t capacity = view.tileElements() * view.elemBytes();
  const std::string what = isLoad ? "tlx.async_load(bulk=True)" : "tlx.async_store";
  if (bytes <= 0 || bytes % 16 != 0 || bytes > capacity)
    fail(op.loc(), what + " copies " + std::to_string(bytes) +
                       " bytes; a bulk copy moves a positive multiple of 16 bytes, at most the "
                       "buffer's " +
                       std::to_string(capacity) + " (" + where() + ")");
  std::vector<unsigned char*> chunks;
  std::string why;
  for (int64_t off = 0; off < bytes; off += 16) {
    unsigned char* p = k_.memory.resolve(addr + uint64_t(off), 16, isLoad ? "load" : "store", &why);
    if (!p)
      fail(op.loc(),
           what + ": " + why + " (the global address must be 16-byte aligned) in " + where());
    chunks.push_back(p);
  }
  BufferView prefix = view;
  prefix.shape = {bytes / view.elemBytes()};
  if (!isLoad) {
    checkedRead(op, prefix, 1);
    TensorPtr data = readBuffer(prefix, ir::Type::tensor(view.elem, prefix.shape));
    for (size_t c = 0; c < chunks.size(); ++c)
      std::memcpy(chunks[c], data->bytes.data() + c * 16, 16);
    return;
  }
  // The data is read at issue and lands like a TMA load, counting its bytes on the barrier.
  auto data = std::make_shared<Tensor>(view.elem, false, prefix.shape);
  for (size_t c = 0; c < chunks.size(); ++c)
    std::memcpy(data->bytes.data() + c * 16, chunks[c], 16);
  AsyncCopy c;
  c.op = &op;
  c.data = data;
  c.bytes = bytes;
  c.where = where();
  if (cta_.cluster) c.issuer = agent_.clock;
  addCopyTarget(op, c, cta_, prefix, barrierView(op, 2));
  cta_.copies.push_back(std::move(c));
}

void Executor::execPrefetch(const ir::Op& op) {
  // A hint: nothing changes, but every address it names must be one a load could read.
  TensorPtr ptrs = tensor(op, 0);
  TensorPtr mask = attr::Prefetch::hasMask(op) ? tensor(op, 1) : nullptr;
  const uint64_t* addrs = ptrs->data<uint64_t>();
  const int w = ir::byteWidth(op.operand(0)->type().elem);
  std::string why;
  for (int64_t i = 0; i < ptrs->numel(); ++i) {
    if (mask && !mask->data<uint8_t>()[mask->numel() == 1 ? 0 : i]) continue;
    if (!k_.memory.resolve(addrs[i], w, "load", &why))
      fail(op.loc(),
           "tlx.prefetch: " + why + " in " + where() + ", element " + formatIndex(ptrs->shape, i));
  }
}

void Executor::execPrefetchTensormap(const ir::Op& op) {
  descriptor(op, 0);
}

void Executor::execAsyncDescPrefetch(const ir::Op& op) {
  auto desc = descriptor(op, 0);
  for (size_t i = 0; i < desc->shape.size(); ++i) scalarInt(op, unsigned(1 + i));
}

// ---- distributed shared memory ----
void Executor::execRemoteStore(const ir::Op& op) {
  // The store reaches the buffer made by the same local_alloc in CTA `rank` (the same offset
  // on the GPU). The synchronous form writes it now (a peer sees it after a cluster barrier);
  // st.async lands like a TMA load, when every agent is blocked, and completes its bytes on
  // the peer's barrier at the same offset, so a peer that reads before its wait is caught.
  if (k_.fn->numCtas <= 1) fail(op.loc(), ir::remoteStoreWithoutClusterMessage(op));
  const BufferView& dst = buffer(op, 0);
  TensorPtr value;
  if (op.code() == OpCode::AsyncRemoteCopy) {
    // The bulk copy reads this CTA's src when it is issued; its bytes land as a store's.
    const BufferView& src = buffer(op, 1);
    checkedRead(op, src, tilesOf(src, src.tileElements()));
    TensorPtr bytes = readBuffer(src, ir::Type::tensor(src.elem, src.shape));
    auto moved = std::make_shared<Tensor>(dst.elem, false, dst.shape);
    if (moved->bytes.size() != bytes->bytes.size())
      throw std::logic_error("async_remote_shmem_copy: src and dst sizes differ");
    moved->bytes = bytes->bytes;
    value = moved;
  } else {
    value = tensor(op, 1);
  }
  checkViewElements(op, dst, value->numel());
  CtaState& target = peer(op, scalarInt(op, 2), std::string(op.name()));
  BufferView view = peerBuffer(dst, target);
  if (op.code() == OpCode::RemoteStore) {
    checkedWrite(op, view, tilesOf(view, value->numel()));
    writeBuffer(view, *value);
    return;
  }
  AsyncCopy c;
  c.op = &op;
  c.data = value;
  c.bytes = value->numel() * dst.elemBytes();
  c.where = where();
  if (cta_.cluster) c.issuer = agent_.clock;
  addCopyTarget(op, c, target, view, peerBarrier(op, barrierView(op, 3), target));
  cta_.copies.push_back(std::move(c));
}

void Executor::execAsyncLoad(const ir::Op& op) {
  bool hasMask = attr::AsyncLoad::hasMask(op), hasOther = attr::AsyncLoad::hasOther(op);
  AsyncLoadCopy c;
  c.op = &op;
  c.ptrs = tensor(op, 0);
  c.dst = buffer(op, 1);
  if (hasMask) c.mask = tensor(op, 2);
  if (hasOther) c.other = tensor(op, hasMask ? 3 : 2);
  c.token = cta_.newToken();
  checkedWrite(op, c.dst, tilesOf(c.dst, c.ptrs->numel()), c.token);
  uncommitted_.push_back(std::move(c));
  if (op.numResults()) set(op.result(), TokenValue{});
}

void Executor::execAsyncCommitGroup(const ir::Op& op) {
  loadGroups_.push_back(std::move(uncommitted_));
  uncommitted_.clear();
  if (op.numResults()) set(op.result(), TokenValue{});
}

void Executor::execAsyncWaitGroup(const ir::Op& op) {
  size_t pendings = size_t(std::max<int64_t>(0, attr::AsyncWaitGroup::pendings(op)));
  while (loadGroups_.size() > pendings) {
    completeLoadGroup(loadGroups_.front());
    loadGroups_.pop_front();
  }
}

// ---- tensor cores ----
void Executor::execAsyncDot(const ir::Op& op) {
  RtValue acc = slot(op.operand(2));
  // Optional operands: use_acc then pred, each present when its has_ attribute says so.
  bool hasUseAcc = attr::AsyncDot::hasUseAcc(op), hasPred = attr::AsyncDot::hasPred(op);
  bool useAcc = !hasUseAcc || readScalar(*tensor(op, 3), 0).i != 0;
  if (hasPred && readScalar(*tensor(op, hasUseAcc ? 4 : 3), 0).i == 0) {
    set(op.result(), acc); // predicated off: the accumulator passes through
    return;
  }
  auto d = std::make_shared<PendingDot>();
  d->op = &op;
  d->a = slot(op.operand(0));
  if (std::holds_alternative<PendingDotPtr>(d->a)) d->a = tensorOf(op, op.operand(0));
  d->b = buffer(op, 1);
  d->useAcc = useAcc;
  d->precision = attr::AsyncDot::inputPrecision(op);
  d->resultType = op.result()->type();
  if (auto* accBuf = std::get_if<BufferView>(&acc)) {
    // Accumulator in TMEM (Blackwell): the dot updates the buffer in place, at issue.
    d->acc = readBuffer(*accBuf, ir::Type::tensor(accBuf->elem, accBuf->shape));
    d->resultType = ir::Type::tensor(accBuf->elem, accBuf->shape);
    completeDot(*d);
    writeBuffer(*accBuf, *d->result);
    set(op.result(), acc);
    return;
  }
  d->acc = acc;
  d->token = cta_.newToken();
  if (auto* av = std::get_if<BufferView>(&d->a)) checkedRead(op, *av, 1, d->token);
  checkedRead(op, d->b, 1, d->token);
  dots_.push_back(d);
  set(op.result(), PendingDotPtr(d));
}

bool Executor::pairedMma() const {
  if (k_.pairedMma < 0) {
    bool paired = false;
    ir::walk(k_.fn->body, [&](const ir::Op& o) {
      paired |= (o.code() == OpCode::Tcgen05Mma && attr::Tcgen05Mma::twoCtas(o)) ||
                (o.code() == OpCode::Tcgen05Commit && attr::Tcgen05Commit::twoCtas(o));
    });
    k_.pairedMma = paired;
  }
  return k_.pairedMma != 0;
}

bool Executor::pairSplitAlloc(const ir::Op& op) {
  if (!k_.pairSplit) k_.pairSplit = ir::pairSplitAllocs(k_.fn->body);
  return k_.pairSplit->count(&op) != 0;
}

CtaState& Executor::pairPeer(const ir::Op& op, const std::string& what) {
  const int64_t size = cta_.cluster ? int64_t(cta_.cluster->ctas.size()) : 1;
  if (size % 2 != 0)
    fail(op.loc(), what +
                       " runs on a pair of CTAs (two_ctas=True), but the launch has clusters "
                       "of " +
                       std::to_string(size) + " CTA" + (size == 1 ? "" : "s") +
                       ": launch with an even number per cluster, ctas_per_cga=(2, 1, 1), in " +
                       where());
  return peer(op, cta_.rank ^ 1, what);
}

void Executor::execTcgen05Mma(const ir::Op& op) {
  const bool hasUseAcc = attr::Tcgen05Mma::hasUseAcc(op), hasPred = attr::Tcgen05Mma::hasPred(op);
  const bool sync = attr::Tcgen05Mma::sync(op);
  // In a kernel of CTA-pair MMAs every tcgen05 op has cta_group::2 on the GPU.
  const bool paired = pairedMma();
  if (paired && !attr::Tcgen05Mma::twoCtas(op))
    fail(op.loc(), "tlx.async_dot into tensor memory without two_ctas=True in a kernel whose "
                   "other tcgen05 ops are a CTA pair's: every tcgen05 op of a kernel uses one "
                   "cta_group; pass two_ctas=True here too (" +
                       where() + ")");
  CtaState* pairCta = paired ? &pairPeer(op, "tlx.async_dot(two_ctas=True)") : nullptr;
  const bool scaled = attr::Tcgen05Mma::hasScales(op);
  unsigned next = scaled ? 5 : 3;
  bool useAcc = true;
  if (hasUseAcc) useAcc = readScalar(*tensor(op, next++), 0).i != 0;
  if (hasPred && readScalar(*tensor(op, next++), 0).i == 0) return;
  // A CTA pair's MMA is issued by the pair's leader (even rank) alone; the other CTA's call
  // issues nothing, and the leader's commits arrive on its barriers.
  if (paired && cta_.rank % 2 != 0) return;
  PendingMma m;
  m.op = &op;
  m.a = buffer(op, 0);
  m.b = buffer(op, 1);
  m.acc = buffer(op, 2);
  if (m.acc.pairSplit) {
    // A pair's M = 64 accumulator: the MMA reads and writes its 128 lanes of N / 2 columns.
    m.accSplit = true;
    m.acc.shape = {128, m.acc.shape.at(1) / 2};
    m.acc.pairSplit = false;
  }
  m.useAcc = useAcc;
  m.precision = attr::Tcgen05Mma::inputPrecision(op);
  m.token = cta_.newToken();
  if (scaled) {
    m.aScale = buffer(op, 3);
    m.bScale = buffer(op, 4);
  }
  if (pairCta) {
    m.peer = pairCta;
    m.peerA = peerBuffer(m.a, *pairCta);
    m.peerB = peerBuffer(m.b, *pairCta);
    m.peerAcc = peerBuffer(m.acc, *pairCta);
    if (scaled) {
      m.peerAScale = peerBuffer(m.aScale, *pairCta);
      m.peerBScale = peerBuffer(m.bScale, *pairCta);
    }
  }
  // An earlier MMA writing the accumulator, in flight or done, is ordered before this one (the
  // tensor core runs them in issue order): this one's in-flight write takes its place.
  auto chainedOn = [&](const BufferView& acc) {
    bool chained = false;
    const ByteSpan accSpan = bytesOf(acc, 1);
    std::erase_if(acc.alloc->log.accesses, [&](const SharedAccess& a) {
      bool mine = a.write && cta_.mmaTokens.count(a.token) && accSpan.covers(a.bytes);
      chained |= mine;
      return mine;
    });
    return chained;
  };
  const bool chained = chainedOn(m.acc);
  const bool peerChained = pairCta && chainedOn(m.peerAcc);
  // The tensor core runs one thread's MMAs in issue order (the PTX ISA's implicitly pipelined
  // tcgen05.mma pairs): what this agent's earlier MMAs still read or write is ordered before
  // this one's accesses.
  mmaOrdered_ = true;
  checkedRead(op, m.a, 1, m.token);
  checkedRead(op, m.b, 1, m.token);
  if (scaled) {
    checkedRead(op, m.aScale, 1, m.token);
    checkedRead(op, m.bScale, 1, m.token);
  }
  if (useAcc && !chained) checkedRead(op, m.acc, 1);
  checkedWrite(op, m.acc, 1, m.token);
  if (pairCta) {
    // The peer's operands: ordered before the MMA by the pair's barriers (its two_ctas loads
    // complete on the leader's).
    checkedRead(op, m.peerA, 1, m.token);
    checkedRead(op, m.peerB, 1, m.token);
    if (scaled) {
      checkedRead(op, m.peerAScale, 1, m.token);
      checkedRead(op, m.peerBScale, 1, m.token);
    }
    if (useAcc && !peerChained) checkedRead(op, m.peerAcc, 1);
    checkedWrite(op, m.peerAcc, 1, m.token);
  }
  mmaOrdered_ = false;
  cta_.mmaTokens.insert(m.token);
  myMmaTokens_.insert(m.token);
  uncommittedMmas_.push_back(std::move(m));
  if (sync) {
    // The synchronous form: a commit on a barrier of its own, then a wait for it (the tensor
    // core completes the MMAs in order, this one after every earlier one of this agent).
    auto array = std::make_shared<MBarrierArray>();
    array->barriers.resize(1);
    array->allocAt = op.loc();
    array->name = "the synchronous async_dot's own";
    commitMmas(op, BarrierView{array, 0, 1});
    MBarrier& bar = array->barriers[0];
    waitUntil(
        [&] { return bar.phase > 0; },
        [&] {
          return BlockSite{op.loc(), "waits for its synchronous tlx.async_dot to complete", {}};
        });
    acquire(bar.completed);
    return;
  }
  for (unsigned i = next; i < op.numOperands(); ++i) commitMmas(op, barrierView(op, i));
}

void Executor::beforeExit(const ir::Op* ret) {
  if (!ret || agent_.isTask || !cta_.cluster || !pairedMma()) return;
  bool tmem = false;
  ir::walk(k_.fn->body, [&](const ir::Op& o) {
    tmem |= o.code() == OpCode::LocalAlloc && attr::LocalAlloc::storage(o) == "tmem";
  });
  // Codegen meets the cluster before the pair's collective tcgen05.dealloc.cta_group::2.
  if (tmem)
    clusterBarrier(*ret, "the cluster barrier before the CTA pair's tensor memory is released "
                         "(tcgen05.dealloc.cta_group::2)");
}

void Executor::execTcgen05Commit(const ir::Op& op) {
  if (attr::Tcgen05Commit::hasPred(op) && readScalar(*tensor(op, 1), 0).i == 0) return;
  // In a kernel of CTA-pair MMAs the commit is the pair's: the leader's arrives on the barrier in
  // both CTAs; the other CTA's commits nothing.
  if (pairedMma()) {
    pairPeer(op, "tlx.tcgen05_commit of a CTA pair's MMAs");
    if (cta_.rank % 2 != 0) return;
  }
  commitMmas(op, barrierView(op, 0));
}

void Executor::commitMmas(const ir::Op& op, const BarrierView& bar) {
  MmaCommit c;
  c.mmas = std::move(uncommittedMmas_);
  uncommittedMmas_.clear();
  c.bar = bar;
  c.at = op.loc();
  c.where = where();
  release(c.issuer);
  // (A synchronous MMA's own barrier is this CTA's alone; CTA pairs' MMAs have mBarriers.)
  const bool ownBarrier = op.code() == OpCode::Tcgen05Mma && attr::Tcgen05Mma::sync(op);
  if (pairedMma() && !ownBarrier) {
    c.peer = &pairPeer(op, "a CTA pair's tcgen05 commit");
    c.peerBar = peerBarrier(op, bar, *c.peer);
  }
  cta_.mmaCommits.push_back(std::move(c));
}

void Executor::execAsyncDotWait(const ir::Op& op) {
  completeDotsDownTo(size_t(std::max<int64_t>(0, attr::AsyncDotWait::pendings(op))), op.loc());
  for (unsigned i = 0; i < op.numResults(); ++i) set(op.result(i), slot(op.operand(i)));
  yieldToOthers();
}

// ---- misc ----
void Executor::execReplicaId(const ir::Op& op) {
  Tensor t(ir::DType::I32, false, {});
  *t.data<int32_t>() = agent_.replica;
  set(op.result(), std::make_shared<Tensor>(std::move(t)));
}

void Executor::execClock64(const ir::Op& op) {
  Tensor t(ir::DType::I64, false, {});
  *t.data<int64_t>() = ++k_.clock;
  set(op.result(), std::make_shared<Tensor>(std::move(t)));
}

void Executor::execClusterQuery(const ir::Op& op) {
  int ctas = std::max(1, k_.fn->numCtas);
  Tensor t(ir::DType::I32, false, {});
  *t.data<int32_t>() = op.code() == OpCode::ClusterSize ? ctas : cta_.rank;
  set(op.result(), std::make_shared<Tensor>(std::move(t)));
}

void Executor::execInlineAsm(const ir::Op& op) {
  std::vector<TensorPtr> args;
  for (unsigned i = 0; i < op.numOperands(); ++i) args.push_back(tensor(op, i));
  std::vector<Tensor> results;
  std::string bad;
  if (!runInlineAsm(op, args, results, bad))
    fail(op.loc(), "tl.inline_asm_elementwise: the interpreter cannot run PTX; it runs only "
                   "'mov' (operands, immediates, .reg temporaries, {a, b} pairs), fp32 and "
                   "f32x2 add / sub / mul / fma, min / max / neg / abs, the .approx functions "
                   "and 'nanosleep', not " +
                       bad + "; run this kernel on the GPU");
  for (unsigned r = 0; r < op.numResults(); ++r)
    set(op.result(r), std::make_shared<Tensor>(std::move(results[r])));
}

void Executor::execAsyncTaskOutsideTasks(const ir::Op& op) {
  fail(op.loc(), "tlx.async_task outside 'with tlx.async_tasks()': a task runs only as part of "
                 "an async_tasks block");
}

void Executor::checkNamedBarrierCounts(const ir::Op& op, int64_t id) {
  if (!cta_.namedBarrierIdsChecked.insert(id).second) return;
  auto it = cta_.namedBarrierUses.find(id);
  if (it == cta_.namedBarrierUses.end()) return;
  const std::vector<NamedBarrierUse>& uses = it->second;
  // A phase of `count` threads completes only with arrivals that all name `count`: the tasks
  // using that count must together have that many threads, however the uses interleave.
  std::map<int64_t, std::map<size_t, int64_t>> threadsByCount; // count -> task -> threads
  for (const NamedBarrierUse& u : uses) threadsByCount[u.count][u.taskId] = u.taskThreads;
  for (const auto& [count, tasks] : threadsByCount) {
    int64_t available = 0;
    for (const auto& [task, threads] : tasks) available += threads;
    if (available >= count || threadsByCount.size() < 2) continue;
    std::vector<Diagnostic> notes;
    std::set<std::pair<const ir::Op*, std::string>> seen;
    for (const NamedBarrierUse& u : uses) {
      if (u.op == &op || !seen.insert({u.op, u.task}).second) continue;
      notes.push_back(note(u.op->loc(), std::string(u.op->name()) + " on named barrier " +
                                            std::to_string(id) + " with " +
                                            std::to_string(u.count) + " threads by " + u.task +
                                            " (" + std::to_string(u.taskThreads) + " threads)"));
    }
    std::string counts;
    for (const auto& [c, t] : threadsByCount)
      counts += (counts.empty() ? "" : ", ") + std::to_string(c);
    fail(op.loc(),
         "named barrier " + std::to_string(id) + " is used with different thread counts (" +
             counts + "): the tasks that arrive on it with " + std::to_string(count) +
             " threads have only " + std::to_string(available) +
             " threads in all, so a phase of that count completes only with arrivals that "
             "name another count (thread count mismatch; " +
             std::string(op.name()) + " in " + where() + ")",
         std::move(notes));
  }
}

void Executor::execAsyncTasks(const ir::Op& op) {
  if (agent_.isTask) fail(op.loc(), "async_tasks nested inside an async task is not supported");
  std::vector<std::unique_ptr<Agent>> agents;
  std::map<int64_t, std::vector<NamedBarrierUse>> namedUses;
  bool dynamicNamedBarrier = false;
  int taskIndex = 0;
  for (const auto& taskOp : op.region(0)->ops()) {
    if (taskOp->code() != OpCode::AsyncTask) continue;
    if (taskOp->numRegions() != 1) throw std::logic_error("async_task without its region");
    bool isDefault = attr::AsyncTask::isDefault(*taskOp);
    int64_t replicate = std::max<int64_t>(1, attr::AsyncTask::replicate(*taskOp));
    // The specializer emits one async_task per replica, numbered by [replica]; IR without that
    // attribute is expanded here.
    bool expanded = taskOp->hasAttr(attr::AsyncTask::kreplica);
    int64_t firstReplica = attr::AsyncTask::replica(*taskOp);
    int64_t count = expanded ? 1 : replicate;
    if (firstReplica == 0 && !isDefault) ++taskIndex;
    std::string name = attr::AsyncTask::name(*taskOp);
    std::string label;
    if (!name.empty() && name != "task" && name != "default")
      label = "task '" + name + "'";
    else if (isDefault)
      label = "default task";
    else
      label = "async task " + std::to_string(taskIndex);
    for (int64_t r = firstReplica; r < firstReplica + count; ++r) {
      auto a = std::make_unique<Agent>();
      a->label = label + (replicate > 1 ? " replica " + std::to_string(r) : "");
      a->numWarps = isDefault ? k_.fn->numWarps : int(attr::AsyncTask::numWarps(*taskOp));
      if (a->numWarps < 1) // the verifier refuses such a task
        throw std::logic_error("interpreter: a non-default async_task without num_warps");
      a->replica = int(r);
      a->isTask = true;
      a->taskOp = taskOp.get();
      if (cta_.cluster) a->program = cta_.name();
      a->clockIndex = cta_.newClockIndex();
      a->clock = agent_.clock; // what the program did before async_tasks precedes every task
      a->clock.set(a->clockIndex, 1);
      auto ex = std::make_shared<Executor>(k_, cta_, *a, env_);
      const ir::Block* body = taskOp->region(0);
      // In a cluster the scheduler owns the agent, and the agent (its body) its executor; the
      // program waiting for its tasks checks again when one finishes.
      a->body = [ex, body, cta = &cta_] {
        ex->runBlock(*body);
        if (cta->cluster) cta->scheduler->bump();
      };
      const int64_t threads = int64_t(a->numWarps) * 32;
      ir::walk(*body, [&](const ir::Op& use) {
        if (use.code() != OpCode::NamedBarrierArrive && use.code() != OpCode::NamedBarrierWait)
          return;
        std::optional<int64_t> id = ir::constantInt(use.operand(0)),
                               count = ir::constantInt(use.operand(1));
        if (!id) dynamicNamedBarrier = true;
        if (!id || !count) return;
        namedUses[*id].push_back({*count, &use, a->label, agents.size(), threads});
      });
      agents.push_back(std::move(a));
    }
  }
  std::vector<Agent*> raw;
  for (auto& a : agents) raw.push_back(a.get());
  if (cta_.cluster) {
    runTasksInCluster(op, std::move(agents), std::move(namedUses), dynamicNamedBarrier);
    return;
  }
  // Each program gets its own stream of choices; a zero mix would mean round-robin.
  uint64_t seed = 0;
  if (k_.seed != 0) {
    uint64_t program = uint64_t(cta_.pid[0]) + uint64_t(cta_.pid[1]) * 65536 +
                       uint64_t(cta_.pid[2]) * 65536 * 65536;
    seed = (k_.seed ^ (program * 0x9E3779B97F4A7C15ull)) | 1;
  }
  Scheduler scheduler(seed);
  release(agent_.clock); // the program's accesses so far precede the tasks' own
  cta_.scheduler = &scheduler;
  if (!dynamicNamedBarrier) cta_.namedBarrierUses = std::move(namedUses);
  struct Reset {
    CtaState& c;
    ~Reset() {
      c.scheduler = nullptr;
      c.namedBarrierUses.clear();
      c.namedBarrierIdsChecked.clear();
    }
  } reset{cta_};
  scheduler.run(
      raw, [&] { return completeAsyncCopies(k_, cta_); },
      [&](const std::vector<Agent*>& blocked) {
        std::vector<Diagnostic> notes;
        for (Agent* a : blocked) {
          notes.push_back(note(a->site.loc, a->label + " " + a->site.what));
          notes.insert(notes.end(), a->site.notes.begin(), a->site.notes.end());
        }
        for (Agent* a : raw)
          if (a->state == Agent::State::Done) notes.push_back(note({}, a->label + " has finished"));
        SourceLoc loc = blocked.empty() ? op.loc() : blocked.front()->site.loc;
        fail(loc,
             "deadlock in " + where() +
                 ": every async task is blocked and no copy is in "
                 "flight",
             std::move(notes));
      });
  finishTasks(raw);
}

void Executor::runTasksInCluster(const ir::Op& op, std::vector<std::unique_ptr<Agent>> agents,
                                 std::map<int64_t, std::vector<NamedBarrierUse>> namedUses,
                                 bool dynamicNamedBarrier) {
  // The tasks join the agents of the cluster's other CTAs under the cluster's scheduler; this
  // program's agent waits for them.
  release(agent_.clock); // the program's accesses so far precede the tasks' own
  if (!dynamicNamedBarrier) cta_.namedBarrierUses = std::move(namedUses);
  struct Reset {
    CtaState& c;
    ~Reset() {
      c.namedBarrierUses.clear();
      c.namedBarrierIdsChecked.clear();
    }
  } reset{cta_};
  std::vector<Agent*> raw;
  cta_.clusterTasks = int(agents.size());
  cta_.clusterTaskArrivals = 0;
  for (auto& a : agents) raw.push_back(cta_.scheduler->spawn(std::move(a)));
  waitUntil(
      [&] {
        return std::all_of(raw.begin(), raw.end(),
                           [](const Agent* a) { return a->state == Agent::State::Done; });
      },
      [&] {
        return BlockSite{op.loc(), "waits for its async tasks to finish", {}};
      });
  finishTasks(raw);
}

void Executor::finishTasks(const std::vector<Agent*>& tasks) {
  for (Agent* a : tasks) agent_.clock.join(a->clock); // the tasks all end before what follows
  ++agent_.agentBarriers;                             // every warp meets after the tasks
  // A phase still in progress now has only arrivals (a waiter would still be blocked, and a
  // wait that nothing can complete is reported as a deadlock): harmless on the GPU, where
  // bar.arrive does not block. Ping-pong kernels leave one this way (the last hand-over of the
  // turn, which nobody takes); the arrivals stay counted, as the hardware keeps them.
}

} // namespace ww::interp
