// The interpreter's executor: runs the ops of one agent (a program, or one async task replica
// of it) over an environment of SSA values. Private to src/interp.
#pragma once

#include "interp/Memory.h"
#include "interp/RtValue.h"
#include "interp/Scheduler.h"
#include "interp/Sync.h"
#include "ir/IR.h"
#include "ir/TaskPlan.h"
#include "warpweave/warpweave.h"

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace ww::layout {
class LayoutMap;
}

namespace ww::interp {

/// An optional attribute read through its typed accessor `read` (ir/OpAttrs.h), or `absent` when
/// `op` does not carry it: for the attributes whose absence means something other than Ops.def's
/// default (IR written without has_* flags lists its optional operands by position).
template <class T, class Read> T attrOr(const ir::Op& op, const char* name, Read read, T absent) {
  return op.hasAttr(name) ? T(read(op)) : absent;
}

struct CtaState;

/// An async_dot in flight: its operands are read when it completes (async_dot_wait), as the
/// tensor core may read shared memory any time until then.
struct PendingDot {
  const ir::Op* op = nullptr;
  RtValue a; // a tensor, or a buffer view read at completion
  BufferView b;
  RtValue acc; // a tensor or an earlier pending dot of the same agent
  bool useAcc = true;
  std::string precision; // input_precision (Ops.def's "tf32" when absent, as wgmma reads fp32)
  ir::Type resultType;
  TensorPtr result;   // set on completion
  uint64_t token = 0; // of its in-flight shared-memory reads
};

/// A tcgen05 MMA (tlx.async_dot into a TMEM accumulator) in flight: it reads its operands and
/// updates the accumulator when its commit completes (the scheduler's memory system step), in
/// issue order, as the tensor core may run it any time until then.
struct PendingMma {
  const ir::Op* op = nullptr;
  BufferView a, b, acc;
  bool useAcc = true;
  std::string precision;
  uint64_t token = 0; // of its in-flight reads of a, b and write of acc
  /// A CTA pair's MMA (two_ctas, issued by the pair's leader): the peer's rows of a and acc and
  /// its half of b's columns (b's columns are the leader's half, then the peer's). Null peer
  /// otherwise.
  CtaState* peer = nullptr;
  BufferView peerA, peerB, peerAcc;
  /// acc (and peerAcc) are a pair's M = 64 accumulators: their views here are the [128, N / 2]
  /// lanes they occupy (BufferView::pairSplit).
  bool accSplit = false;
  /// A block-scaled MMA (tlx.async_dot_scaled): its A and B scales (tensor memory, or shared
  /// memory in the cuBLAS layout), read with its operands (TlxScaled.cpp). Null alloc otherwise.
  BufferView aScale, bScale;
  /// A CTA pair's block-scaled MMA: the peer's A scales and its copy of B's.
  BufferView peerAScale, peerBScale;
  /// A tlx.tmem_copy (tcgen05.cp) of block scales rather than an MMA: `a` its shared-memory
  /// source, `acc` its tensor-memory destination, written when it completes.
  bool copy = false;
};

/// A tcgen05.commit: the MMAs its thread issued since its previous commit, and the barrier that
/// gets one arrival once they (and every earlier commit's) have completed.
struct MmaCommit {
  std::vector<PendingMma> mmas;
  BarrierView bar;
  SourceLoc at;
  std::string where;
  /// The issuing agent's clock at the commit: its arrival is ordered after what the issuer did
  /// before (the waits that let it issue the MMAs).
  VectorClock issuer;
  /// A CTA pair's commit (tcgen05.commit.cta_group::2 ... multicast::cluster): the barrier at
  /// the same offset in the peer CTA gets its arrival too (null peer otherwise).
  CtaState* peer = nullptr;
  BarrierView peerBar;
};

/// What every program of one run shares.
struct KernelState {
  const ir::Function* fn = nullptr;
  const SourceManager* sources = nullptr;
  int grid[3] = {1, 1, 1};
  GlobalMemory memory;
  std::unordered_map<const ir::Value*, uint32_t> slots;
  std::vector<std::pair<uint32_t, RtValue>> boundArgs;
  std::ostream* out = nullptr; // where print writes; stdout when null
  int64_t clock = 0;
  uint64_t seed = 0; // of the schedulers; 0: deterministic round-robin
  /// Cluster launch control: the grid's clusters in launch order (x fastest; a 1-CTA launch's
  /// programs), those a try_cancel canceled (the launch loop skips them), and how many the loop
  /// has started. A try_cancel takes the first cluster not started nor canceled; with a nonzero
  /// seed a random one, or none (it fails) one time in four, as a GPU whose remaining clusters
  /// already run elsewhere answers.
  std::vector<uint8_t> clcCanceled;
  int64_t clcStarted = 0;
  uint64_t clcDraws = 0; // random choices made so far (with the seed, the next one's input)
  /// Whether the kernel's tcgen05 MMAs are CTA pairs' (an async_dot or tcgen05_commit with
  /// two_ctas=True): then every tcgen05 op is the pair's, issued by its leader (cta_group::2 on
  /// the GPU, where all tcgen05 ops of a kernel use one cta_group). -1 until first asked.
  int pairedMma = -1;
  /// The tensor-memory allocations CTA pairs' M = 64 MMAs accumulate into (ir/TmemPairs.h),
  /// computed at the first tensor-memory local_alloc.
  std::optional<std::unordered_set<const ir::Op*>> pairSplit;
  /// The distributed layouts the compiler gives the kernel's tensors, for the ops whose result
  /// depends on which thread holds which element (a vote over a tensor predicate): computed at
  /// the first such op (WarpVote.cpp).
  std::shared_ptr<const void> layouts;
  /// Where each async task's warps start, for tlx.thread_id() in tasks: planned at the first ask.
  std::shared_ptr<const ir::TaskPlan> taskPlan;
};

struct CtaState;

/// Where a TMA load lands: a buffer and the barrier that counts its bytes, in one CTA (the
/// issuing one, or each CTA of a multicast's mask).
struct CopyTarget {
  CtaState* cta = nullptr;
  BufferView dst;
  BarrierView bar;
  uint64_t token = 0; // of its in-flight write
  /// The CTA whose barrier `bar` is when not `cta`'s (a two_ctas load completes on the pair
  /// leader's barrier).
  CtaState* barCta = nullptr;
};

/// A TMA load in flight; it lands in shared memory and completes its barrier's transaction bytes
/// when the scheduler runs the memory system (when every agent is blocked). An
/// async_remote_shmem_store (st.async) is one too: its `data` (no descriptor) lands in a peer's
/// buffer and completes that CTA's barrier.
struct AsyncCopy {
  const ir::Op* op = nullptr;
  std::shared_ptr<const Descriptor> desc;
  TensorPtr data; // what an async_remote_shmem_store stores, read at issue
  std::vector<CopyTarget> targets;
  std::vector<int64_t> offsets;
  int64_t bytes = 0;
  std::string where; // program and task that issued it, for errors
  /// The issuer's clock at issue: a landing in a peer CTA carries it to that CTA's barrier (its
  /// waiters are ordered after whatever let the issuer go ahead, as the data they get is).
  VectorClock issuer;
};

/// A cp.async (async_load) in flight until async_wait_group retires its group.
struct AsyncLoadCopy {
  const ir::Op* op = nullptr;
  TensorPtr ptrs, mask, other;
  BufferView dst;
  uint64_t token = 0; // of its in-flight write
};

/// A named_barrier_arrive/wait in the code of one async task, with constant id and count.
struct NamedBarrierUse {
  int64_t count = 0;
  const ir::Op* op = nullptr;
  std::string task;        // its label
  size_t taskId = 0;       // distinguishes tasks (each replica is one)
  int64_t taskThreads = 0; // threads of that task (replica)
};

struct ClusterState;

/// The state of one program (CTA).
struct CtaState {
  int pid[3] = {0, 0, 0};
  /// The cluster it runs in when the launch has clusters of several CTAs; null otherwise.
  ClusterState* cluster = nullptr;
  int rank = 0;        // in its cluster
  bool exited = false; // its program has returned
  /// While its async_tasks region runs in a cluster: how many task agents it has, and how many
  /// of them have reached the cluster barrier's phase in progress (the CTA arrives with the last).
  int clusterTasks = 0, clusterTaskArrivals = 0;
  /// The storage each local_alloc / alloc_barriers op made here last: a peer's multicast copy or
  /// remote arrive reaches the same allocation (the same shared-memory offset on the GPU).
  std::unordered_map<const ir::Op*, std::shared_ptr<SharedAlloc>> allocs;
  std::unordered_map<const ir::Op*, std::shared_ptr<MBarrierArray>> barrierArrays;
  /// The region of each tlx.storage_alias_spec (local_alloc's "alias" attribute) here.
  std::map<int64_t, std::shared_ptr<SharedAlloc>> aliasRegions;
  std::deque<AsyncCopy> copies;
  /// tcgen05 commits in flight, completed in order; the tokens of every MMA issued (their
  /// accesses to the accumulator are ordered among themselves).
  std::deque<MmaCommit> mmaCommits;
  std::set<uint64_t> mmaTokens;
  VectorClock mmaCompleted; // the completion clocks of every commit completed so far
  /// Where a clc_query of this CTA decoded a failed try_cancel (invalid: none yet): issuing
  /// another try_cancel after that is undefined behaviour in PTX.
  SourceLoc clcFailureSeenAt;
  std::map<int64_t, NamedBarrier> namedBarriers;
  /// While async tasks run: every named-barrier use in their code, by id; ids used with a count
  /// that is not a constant are left out, and so is everything when some id is not a constant.
  std::map<int64_t, std::vector<NamedBarrierUse>> namedBarrierUses;
  std::set<int64_t> namedBarrierIdsChecked;
  Scheduler* scheduler = nullptr; // set while async tasks run, and always in a cluster
  size_t nextClockIndex = 2;      // vector-clock components handed out; 1 is the program
  uint64_t nextToken = 1;         // names in-flight copies and dots

  /// A fresh vector-clock component (unique across the cluster, whose CTAs share clocks).
  size_t newClockIndex();
  /// A fresh name for an in-flight copy or dot (unique across the cluster).
  uint64_t newToken();
  /// "program (1, 0, 0)"
  std::string name() const;
};

/// The CTAs of one thread-block cluster (a launch with num_ctas > 1), run together: the agents
/// of all of them under one scheduler, and the cluster-wide barrier they meet at.
struct ClusterState {
  std::vector<CtaState*> ctas; // by rank
  size_t nextClockIndex = 1;
  uint64_t nextToken = 1;
  // barrier.cluster: every CTA arrives (its program, or inside async tasks every one of its
  // tasks, as every thread arrives on the GPU), then all proceed.
  int64_t generation = 0; // completed phases
  std::vector<bool> arrived;
  int64_t arrivedCount = 0;
  std::vector<SourceLoc> arrivedAt; // by rank, in the phase in progress
  std::vector<std::string> arrivedWhat;
  VectorClock arrivals;  // of the phase in progress
  VectorClock completed; // acquired by every CTA that passes
  /// "the cluster of programs (0, 0, 0) to (1, 0, 0)"
  std::string describe() const;
};

class Executor {
public:
  Executor(KernelState& k, CtaState& cta, Agent& agent, std::vector<RtValue> env)
      : k_(k), cta_(cta), agent_(agent), env_(std::move(env)) {
    adoptPerThreadValues();
  }

  /// Runs the ops of `block` up to its terminator; returns the terminator (yield, condition,
  /// return) or null when the block has none.
  const ir::Op* runBlock(const ir::Block& block);
  /// What the program does after its last op, before it exits (`ret`: the kernel's return, may
  /// be null): in a kernel of CTA-pair MMAs with tensor memory, the cluster barrier that
  /// precedes the pair's tcgen05.dealloc.
  void beforeExit(const ir::Op* ret);
  std::vector<RtValue>& env() { return env_; }

  /// Completes every TMA load in flight; returns whether there was one.
  static bool completeAsyncCopies(KernelState& k, CtaState& cta);
  /// The same for every CTA of `cluster`.
  static bool completeAsyncCopies(KernelState& k, ClusterState& cluster);

  /// How the interpreter runs one op: a member handler, for one opcode or a family of them.
  using OpHandler = void (Executor::*)(const ir::Op& op);
  /// The interpreter's rule for `code` (the dispatch table in Interpreter.cpp), or null.
  static OpHandler handlerFor(ir::OpCode code);

private:
  void exec(const ir::Op& op);

  // ---- op handlers, registered by opcode in handlerFor (Interpreter.cpp) ----
  void execBinary(const ir::Op& op); // binary arithmetic and umulhi
  void execUnaryMath(const ir::Op& op);
  void execConstant(const ir::Op& op);
  void execProgramQuery(const ir::Op& op); // program_id, num_programs
  void execArange(const ir::Op& op);
  void execAddPtr(const ir::Op& op);
  void execCmp(const ir::Op& op);
  void execSelect(const ir::Op& op);
  void execFma(const ir::Op& op);
  void execCast(const ir::Op& op);
  void execStochRound(const ir::Op& op); // tlx.stoch_round
  void execBitcast(const ir::Op& op);    // bitcast, ptr_to_int, int_to_ptr
  void execHint(const ir::Op& op);       // multiple_of, max_contiguous
  // dump_layout / assert_same_layout: the compile prints / checks and removes them; nothing to run
  void execDumpLayout(const ir::Op& op);
  void execStrayTerminator(const ir::Op& op);
  void execControl(const ir::Op& op);
  /// Runs while loop `op` on from its condition `cond` of trip `trip` (its before region run);
  /// returns the loop's results.
  std::vector<RtValue> continueWhile(const ir::Op& op, const ir::Op* cond, int64_t trip);
  void execShape(const ir::Op& op);
  void execMemory(const ir::Op& op);
  void execReduce(const ir::Op& op); // Reduce.cpp
  void execDot(const ir::Op& op);    // Reduce.cpp
  void execDebug(const ir::Op& op);  // print, assert
  // TLX (Tlx.cpp)
  void execLocalAlloc(const ir::Op& op);
  /// In a cluster, `v` takes the bytes a peer's multicast already wrote into this allocation
  /// (allocations are static on the GPU), else records its own for the peers.
  /// Room for `rows` rows `pitch` bytes apart in a tensor-memory view's allocation: a block-scale
  /// tile of more than 128 rows.
  void growTmemRows(BufferView& v, int64_t rows, int64_t pitch);
  void adoptPeerBytes(const ir::Op& op, BufferView& v);
  void execTmemAliasMember(const ir::Op& op, BufferView& v);
  void execLocalView(const ir::Op& op);
  void execLocalLoad(const ir::Op& op);
  void execLocalStore(const ir::Op& op);
  /// tlx.local_gather / tlx.local_scatter (TlxGatherScatter.cpp).
  void execLocalGatherScatter(const ir::Op& op);
  void execLocalTrans(const ir::Op& op);
  void execLocalSlice(const ir::Op& op);
  void execLocalReinterpret(const ir::Op& op);
  void execAllocBarriers(const ir::Op& op);
  void execBarrierExpectBytes(const ir::Op& op);
  void execBarrierArrive(const ir::Op& op);
  void execBarrierWait(const ir::Op& op);
  void execNamedBarrier(const ir::Op& op); // named_barrier_arrive / named_barrier_wait
  /// fence, debug_barrier and async_desc_store_wait: nothing the interpreter can observe (its
  /// memory is sequentially consistent; TMA stores complete at issue).
  void execNoEffect(const ir::Op& op);
  void execClusterBarrier(const ir::Op& op);
  void execAsyncDescLoad(const ir::Op& op);
  void execAsyncDescStore(const ir::Op& op);
  void execBulkCopy(const ir::Op& op); // async_bulk_load / async_bulk_store
  void execPrefetch(const ir::Op& op);
  void execPrefetchTensormap(const ir::Op& op);
  void execAsyncDescPrefetch(const ir::Op& op);
  /// async_remote_shmem_store, remote_shmem_store, async_remote_shmem_copy.
  void execRemoteStore(const ir::Op& op);
  void execAsyncLoad(const ir::Op& op);
  void execAsyncCommitGroup(const ir::Op& op);
  void execAsyncWaitGroup(const ir::Op& op);
  void execAsyncDot(const ir::Op& op);
  void execAsyncDotWait(const ir::Op& op);
  /// tcgen05_mma / tcgen05_commit (Blackwell; Tlx.cpp).
  void execTcgen05Mma(const ir::Op& op);
  void execTcgen05Commit(const ir::Op& op);
  /// tmem_copy (TlxScaled.cpp).
  void execTmemCopy(const ir::Op& op);
  /// What a completed tcgen05 copy or block-scaled MMA does to memory (TlxScaled.cpp).
  static void runScaledMma(const PendingMma& m);
  /// One CTA's share of a block-scaled MMA: acc = (a * aScale) @ (b * bScale) (+ acc).
  static void scaledMma(const PendingMma& m, const BufferView& a, const Tensor& b,
                        const BufferView& aScale, const BufferView& bScale, const BufferView& acc);
  static void runTmemCopy(const PendingMma& m);
  /// clc_try_cancel / clc_query (cluster launch control, Blackwell; TlxClc.cpp).
  void execClcTryCancel(const ir::Op& op);
  void execClcQuery(const ir::Op& op);
  /// Queues a commit of this agent's uncommitted MMAs on `bar` (and, in a kernel of CTA-pair
  /// MMAs, on the peer's barrier at the same offset).
  void commitMmas(const ir::Op& op, const BarrierView& bar);
  /// Whether the kernel's tcgen05 ops are CTA pairs' (KernelState::pairedMma).
  bool pairedMma() const;
  /// Whether tensor-memory local_alloc `op` is a pair's M = 64 accumulator (KernelState).
  bool pairSplitAlloc(const ir::Op& op);
  /// Refuses a local_load / local_store / local_slice of a pair's M = 64 accumulator, as
  /// codegen does.
  /// The 128 lanes of N / 2 columns a CTA pair's [64, N] accumulator view lies in.
  static BufferView pairSplitLanes(const BufferView& v);
  void refusePairSplit(const ir::Op& op, const BufferView& v);
  /// In a kernel of CTA-pair MMAs: the other CTA of this one's pair (its rank ^ 1); a user
  /// error outside a cluster of CTA pairs.
  CtaState& pairPeer(const ir::Op& op, const std::string& what);
  /// Completes the tcgen05 commits in flight in `cta`, in order; returns whether there was one.
  static bool completeMmaCommits(KernelState& k, CtaState& cta);
  void execAsyncTasks(const ir::Op& op);
  void execAsyncTaskOutsideTasks(const ir::Op& op);
  void execReplicaId(const ir::Op& op);
  void execClock64(const ir::Op& op);
  void execClusterQuery(const ir::Op& op); // cluster_cta_rank, cluster_size
  void execVoteBallot(const ir::Op& op);   // WarpVote.cpp
  // Per-thread values (PerThread.cpp)
  void execThreadId(const ir::Op& op);
  /// Runs `op`, which reads a per-thread value, once for each thread of the agent.
  void execReplicated(const ir::Op& op);
  /// Runs `run` once for each thread of the agent, with that thread's values of the per-thread
  /// `slots` in the environment (`divergent`: in code not every thread may run), and merges the
  /// values it gives for `op`'s results (mergeThreads).
  std::vector<RtValue> runEachThread(const ir::Op& op, std::vector<uint32_t> slots, bool divergent,
                                     const std::function<std::vector<RtValue>()>& run);
  /// The rest of while loop `op` once its condition `cond` differs between threads: each thread
  /// goes on by itself (PerThread.cpp).
  std::vector<RtValue> whilePerThread(const ir::Op& op, const ir::Op* cond, int64_t trip);
  /// The environment's slots holding per-thread values, as the agent's threads each see them;
  /// fails at `op` when one was made for other threads.
  std::vector<uint32_t> perThreadSlots(const ir::Op& op, bool all);
  /// vote_ballot_sync of a per-thread scalar predicate: each warp's ballot.
  void voteBallotPerThread(const ir::Op& op, const PerThreadValue& pred);
  /// Refuses `op` in code run one thread at a time when the interpreter cannot run it so.
  void requireRunsPerThread(const ir::Op& op);
  /// The results of a replicated op, one per thread, as one value: the same in every thread, a
  /// tensor assembled from the thread that holds each element, else a per-thread value.
  RtValue mergeThreads(const ir::Op& op, const ir::Value* v, std::vector<RtValue> values);
  /// Which elements of `v` the current thread (thread_) writes in a store or atomic: those it
  /// is the first holder of; a scalar's, the agent's first thread.
  std::vector<uint8_t> writtenByThread(const ir::Op& op, const ir::Value* v);
  /// `mask` (null: every element) narrowed to the elements of `v` the current thread writes.
  TensorPtr threadMask(const ir::Op& op, const ir::Value* v, const TensorPtr& mask);
  /// The first thread holding each element of tensor `v`.
  const std::vector<int>& firstHolders(const ir::Op& op, const ir::Value* v);
  /// The agent's first thread in the CTA: 0, or an async task's first warp (ir/TaskPlan.h) * 32.
  int64_t agentFirstThread() const;
  /// Notes the per-thread values of the environment the agent starts with; a task takes its
  /// threads' values of those its program made.
  void adoptPerThreadValues();
  /// The layouts the compiler gives the kernel (assigned at the first ask; `why` names the op
  /// that needs them in the error when assignment fails) and the elements of tensor `v` each
  /// thread of the agent holds (warp * 32 + lane).
  const layout::LayoutMap& kernelLayouts(const ir::Op& op, const std::string& why);
  std::vector<std::vector<int64_t>> threadElements(const ir::Op& op, const ir::Value* v,
                                                   const std::string& why);
  void execInlineAsm(const ir::Op& op);
  void execGather(const ir::Op& op);         // TlMisc.cpp
  void execHistogram(const ir::Op& op);      // TlMisc.cpp
  void execMapElementwise(const ir::Op& op); // TlMisc.cpp

  /// execAsyncTasks in a cluster: `agents` join the cluster's scheduler.
  void runTasksInCluster(const ir::Op& op, std::vector<std::unique_ptr<Agent>> agents,
                         std::map<int64_t, std::vector<NamedBarrierUse>> namedUses,
                         bool dynamicNamedBarrier);
  /// After every async task of `tasks` has finished: what follows is ordered after them. A named
  /// barrier may be left with arrivals of a phase nobody waits for (bar.arrive does not block).
  void finishTasks(const std::vector<Agent*>& tasks);
  /// barrier.cluster.arrive + wait: waits for the program of every CTA of the cluster to arrive
  /// (at `what`, "cluster_barrier" or the one alloc_barriers lowers with), acquiring what they
  /// released. Nothing to meet without a cluster.
  void clusterBarrier(const ir::Op& op, const std::string& what);
  /// The CTA of cluster rank `rank` for `op` to reach (refused outside a cluster or for a rank
  /// beyond it, or a CTA that has exited).
  CtaState& peer(const ir::Op& op, int64_t rank, const std::string& what);
  /// `view` as CTA `peer` has it: the same allocation offsets in that CTA's shared memory (made
  /// there now when its local_alloc has not run yet).
  BufferView peerBuffer(const BufferView& view, CtaState& peer);
  BarrierView peerBarrier(const ir::Op& op, const BarrierView& view, CtaState& peer);
  /// Adds to `copy` a target in CTA `cta`: its buffer `dst`, written in flight from now (the write
  /// permitted by the last barrier wait passed), and the barrier `bar` that counts its bytes.
  void addCopyTarget(const ir::Op& op, AsyncCopy& copy, CtaState& cta, BufferView dst,
                     BarrierView bar);
  /// barrier_arrive's `count` arrivals on `view`, a barrier of this CTA or (`whose`: " of
  /// program (1, 0, 0)") of a peer.
  void arriveOn(const ir::Op& op, const BarrierView& view, int64_t count, const std::string& whose);

  RtValue& slot(const ir::Value* v) { return env_[k_.slots.at(v)]; }
  void set(const ir::Value* v, RtValue x) { env_[k_.slots.at(v)] = std::move(x); }
  /// Operand `i` of `op` as a tensor; an async_dot result must have completed.
  TensorPtr tensor(const ir::Op& op, unsigned i);
  TensorPtr tensorOf(const ir::Op& op, const ir::Value* v);
  int64_t scalarInt(const ir::Op& op, unsigned i);
  const BufferView& buffer(const ir::Op& op, unsigned i);
  const BarrierView& barrierView(const ir::Op& op, unsigned i);
  MBarrier& barrier(const ir::Op& op, unsigned i);
  std::shared_ptr<const Descriptor> descriptor(const ir::Op& op, unsigned i);

  /// "program (3, 0, 0)", plus the task when several agents run.
  std::string where() const;
  [[noreturn]] void fail(SourceLoc loc, const std::string& message,
                         std::vector<Diagnostic> notes = {}) const;

  TensorPtr loadGlobal(const ir::Op& op, const Tensor& ptrs, const Tensor* mask,
                       const Tensor* other, const ir::Type& resultType);
  void storeGlobal(const ir::Op& op, const Tensor& ptrs, const Tensor& value, const Tensor* mask);
  /// Reports `op` moving `elements` elements through `view` unless that is one of its buffers
  /// or all of them (IR from the front end always is).
  void checkViewElements(const ir::Op& op, const BufferView& view, int64_t elements);
  static TensorPtr readBuffer(const BufferView& view, const ir::Type& resultType);
  static void writeBuffer(const BufferView& view, const Tensor& value);
  /// Runs a combine region on scalars a..., b... and returns its yields.
  std::vector<TensorPtr> combine(const ir::Block& region, const std::vector<TensorPtr>& args);
  void completeDot(PendingDot& dot);
  void completeDotsDownTo(size_t pendings, SourceLoc waitLoc);
  void completeLoadGroup(std::vector<AsyncLoadCopy>& group);

  /// Blocks the agent until `ready()`; other agents and the memory system run meanwhile.
  void waitUntil(const std::function<bool()>& ready, const std::function<BlockSite()>& site);
  void yieldToOthers();
  void bump();
  int64_t arrivalWeight(const MBarrier& bar) const;

  // Happens-before checks of shared memory (see Races.h). `tiles` is how many tiles of the view
  // the access covers (1 when the value has one tile's shape).
  void release(VectorClock& into);
  void acquire(const VectorClock& from) { agent_.clock.join(from); }
  void checkedRead(const ir::Op& op, const BufferView& view, int64_t tiles, uint64_t token = 0);
  void checkedWrite(const ir::Op& op, const BufferView& view, int64_t tiles, uint64_t token = 0);
  /// Marks the in-flight reads of `token` (an async_dot's operands) as done by this agent now,
  /// retired by the async_dot_wait at `waitLoc`.
  void retireReads(const BufferView& view, uint64_t token, SourceLoc waitLoc);
  /// Whether the agent's own write of `a` races with it: a dot read retired only for the warp
  /// group that waited, with no agent-wide barrier since.
  bool retiredForOneWarpGroupOnly(const SharedAccess& a) const;
  bool orderedBefore(const SharedAccess& a) const;
  std::string accessor() const;
  /// Notes for a wait on `bar` when the barrier ran two or more phases past this agent.
  std::vector<Diagnostic> lappedNotes(const MBarrier& bar) const;
  /// Reports an arrival (`what`) on barrier `view` for a phase after the first that is not
  /// ordered after a wait that saw the phase before complete: a surplus arrival.
  void checkArrivalOrdered(const ir::Op& op, const BarrierView& view, const std::string& what);
  /// Reports copies that delivered more bytes than a phase whose arrivals are all in expects.
  void checkNoExcessBytes(const ir::Op& op, const MBarrier& bar) const;
  /// Reports thread counts of named barrier `id` that the tasks using that count cannot make up
  /// (checked at the first use of `id` in a run of async tasks).
  void checkNamedBarrierCounts(const ir::Op& op, int64_t id);

  KernelState& k_;
  CtaState& cta_;
  Agent& agent_;
  std::vector<RtValue> env_;
  std::deque<PendingDotPtr> dots_;
  /// Notes on the barrier_wait this agent passed last and the arrival that let it pass.
  std::vector<Diagnostic> lastPassedWait_;
  /// A note on this agent's latest barrier_wait when it passed at once (a wrong parity passes
  /// at once), added to race reports at its reads.
  std::vector<Diagnostic> lastWait_;
  std::vector<Diagnostic> withWaitNotes(std::vector<Diagnostic> notes) const;
  /// Per barrier, its phase count when this agent last passed a wait on it.
  std::map<const MBarrier*, int64_t> phaseSeen_;
  std::vector<AsyncLoadCopy> uncommitted_;
  std::vector<PendingMma> uncommittedMmas_; // tcgen05 MMAs issued since this agent's last commit
  /// The tokens of the tcgen05 MMAs this agent issued; while mmaOrdered_ (the checks of a new
  /// MMA of this agent), their accesses, in flight or completed, count as ordered before it, as
  /// the tensor core runs one thread's MMAs in issue order.
  std::set<uint64_t> myMmaTokens_;
  bool mmaOrdered_ = false;
  bool orderedByTensorCore(const SharedAccess& a) const {
    return mmaOrdered_ && a.token != 0 && myMmaTokens_.count(a.token) != 0;
  }
  std::deque<std::vector<AsyncLoadCopy>> loadGroups_;
  /// The thread of the agent (from 0: its tlx.thread_id() in a task) whose code runs now, or -1
  /// while the agent runs all its threads together (PerThread.cpp).
  int thread_ = -1;
  /// Whether any per-thread value was made here: until then no op needs the check.
  bool perThreadValues_ = false;
  /// Whether the code running now is a region of a branch or loop on a per-thread value, which
  /// not every thread may run.
  bool divergent_ = false;
  std::unordered_map<const ir::Value*, std::vector<int>> firstHolders_;
};

/// dot of a (.., M, K) and b (.., K, N) plus acc (zeros when null), in result type `rt`; over
/// elements [kBegin, kEnd) of K only when given (kEnd < 0: up to K).
TensorPtr computeDot(const Tensor& a, const Tensor& b, const Tensor* acc,
                     const std::string& precision, const ir::Type& rt, int64_t kBegin = 0,
                     int64_t kEnd = -1);

/// Fails at `op` when a TMA box would start off a 16-byte boundary of its innermost dimension.
void checkTmaBoxStart(KernelState& k, const ir::Op& op, const std::string& where,
                      const Descriptor& d, const std::vector<int64_t>& offsets);

/// Moves one box between global memory and `out` / from `in` through a tensor descriptor,
/// clipping at the tensor's bounds as TMA does (outside elements read as zero, are not written).
void descriptorTransfer(KernelState& k, const ir::Op& op, const std::string& where,
                        const Descriptor& d, const std::vector<int64_t>& offsets, Tensor* out,
                        const Tensor* in);

/// Raises an InterpreterError at `loc` formatted against `sm` (which may be null).
[[noreturn]] void raiseInterpError(const SourceManager* sm, SourceLoc loc,
                                   const std::string& message, std::vector<Diagnostic> notes = {});

} // namespace ww::interp
