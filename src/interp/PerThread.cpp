// Values that differ between the threads of an agent: tlx.thread_id() and what is computed from
// it. An agent runs its threads together over whole tensors; such a scalar is kept as one value
// per thread (PerThreadValue), and an op that reads one runs once per thread with that thread's
// values. A branch or loop on one runs its regions one thread at a time, each thread its own
// way, as SIMT threads do. Stores and atomics there write only what that thread writes on the
// GPU, where Triton's lowering masks the copies of a value other threads also hold: the elements
// the thread is the first holder of (the compiler's layout), and a scalar from the agent's first
// thread. Collective ops (barriers, waits, shared memory, asynchronous copies and MMAs,
// reductions) in code run one thread at a time are refused at their line.
#include "interp/Executor.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"

#include <cstring>

namespace ww::interp {

using ir::OpCode;

namespace {

bool sameTensor(const Tensor& a, const Tensor& b) {
  return a.elem == b.elem && a.pointer == b.pointer && a.shape == b.shape && a.bytes == b.bytes;
}

/// Whether two values of a replicated op's threads are the same value.
bool sameValue(const RtValue& a, const RtValue& b) {
  if (a.index() != b.index()) return false;
  if (auto* t = std::get_if<TensorPtr>(&a)) return sameTensor(**t, *std::get<TensorPtr>(b));
  if (auto* v = std::get_if<BufferView>(&a)) {
    const BufferView& w = std::get<BufferView>(b);
    return v->alloc == w.alloc && v->byteOffset == w.byteOffset && v->shape == w.shape &&
           v->strides == w.strides && v->count == w.count && v->elem == w.elem;
  }
  if (auto* v = std::get_if<BarrierView>(&a)) {
    const BarrierView& w = std::get<BarrierView>(b);
    return v->array == w.array && v->first == w.first && v->count == w.count;
  }
  if (auto* d = std::get_if<std::shared_ptr<const Descriptor>>(&a))
    return *d == std::get<std::shared_ptr<const Descriptor>>(b);
  return std::holds_alternative<std::monostate>(a) || std::holds_alternative<TokenValue>(a);
}

} // namespace

int64_t Executor::agentFirstThread() const {
  if (!agent_.taskOp) return 0;
  if (!k_.taskPlan) k_.taskPlan = std::make_shared<const ir::TaskPlan>(ir::planAsyncTasks(*k_.fn));
  for (const ir::AsyncTasksPlan& block : k_.taskPlan->blocks)
    for (const ir::TaskPlacement& t : block.tasks)
      if (t.task == agent_.taskOp && t.replica == agent_.replica) return int64_t(t.firstWarp) * 32;
  throw std::logic_error("interpreter: an async task that the task plan does not place");
}

void Executor::adoptPerThreadValues() {
  for (RtValue& v : env_) {
    auto* p = std::get_if<PerThreadPtr>(&v);
    if (!p) continue;
    perThreadValues_ = true;
    if (!agent_.isTask) continue;
    // Made by the program's threads before async_tasks: this task's threads are a range of them.
    const int64_t first = agentFirstThread(), threads = int64_t(agent_.numWarps) * 32;
    if (first + threads > int64_t((*p)->values.size())) continue; // refused where it is read
    auto mine = std::make_shared<PerThreadValue>();
    mine->values.assign((*p)->values.begin() + first, (*p)->values.begin() + first + threads);
    v = PerThreadPtr(std::move(mine));
  }
}

void Executor::execThreadId(const ir::Op& op) {
  auto scalar = [&](int64_t value) {
    Tensor t = Tensor::ofType(op.result()->type());
    writeScalar(t, 0, Scalar{false, value, 0});
    return std::make_shared<Tensor>(std::move(t));
  };
  // Kernels are launched with one-dimensional blocks: y and z are 0. In an async task the id
  // counts from the task's first thread, as codegen lowers it (Triton's warp-specialized
  // partitions see their own thread ids).
  if (ir::attr::ThreadId::axis(op) != 0) return set(op.result(), scalar(0));
  if (thread_ >= 0) return set(op.result(), scalar(thread_));
  auto ids = std::make_shared<PerThreadValue>();
  for (int64_t t = 0; t < int64_t(agent_.numWarps) * 32; ++t) ids->values.push_back(scalar(t));
  perThreadValues_ = true;
  set(op.result(), PerThreadPtr(std::move(ids)));
}

void Executor::requireRunsPerThread(const ir::Op& op) {
  const OpCode c = op.code();
  // Elementwise ops, shape ops and buffer views compute from their operands alone.
  if (ir::isElementwise(c) || ir::isShapeOp(c) || ir::isBufferView(c) || ir::isTerminator(c))
    return;
  switch (c) {
  case OpCode::Constant:
  case OpCode::ProgramId:
  case OpCode::NumPrograms:
  case OpCode::Arange:
  case OpCode::Load:
  case OpCode::Store:
  case OpCode::AtomicRMW:
  case OpCode::AtomicCas:
  case OpCode::For:
  case OpCode::If:
  case OpCode::While:
  case OpCode::Print:
  case OpCode::Assert:
  case OpCode::DumpLayout:
  case OpCode::AssertSameLayout:
  case OpCode::ThreadId:
  case OpCode::Clock64:
  case OpCode::ReplicaId:
  case OpCode::ClusterCtaRank:
  case OpCode::ClusterSize:
  case OpCode::VoteBallot:
  case OpCode::InlineAsm:
  case OpCode::MapElementwise:
    return;
  default:
    break;
  }
  // Codegen puts a barrier of all the agent's threads before these (ir::lowersWithAgentBarrier;
  // an arrive on a warp barrier is each thread's own): under a branch some threads do not take,
  // the others wait there for ever.
  const auto* bar =
      c == OpCode::BarrierArrive ? std::get_if<BarrierView>(&slot(op.operand(0))) : nullptr;
  if (divergent_ && ir::lowersWithAgentBarrier(c) &&
      !(bar && bar->array->barriers.at(size_t(bar->first)).warpBarrier))
    fail(op.loc(), std::string("'") + op.name() +
                       "' under a branch or loop on a value computed from tlx.thread_id(): on "
                       "the GPU it first waits at a barrier of all " +
                       std::to_string(agent_.numWarps * 32) +
                       " threads, which those that do not run this code never reach, so the "
                       "kernel hangs unless every thread does (" +
                       where() + "); move it out of the condition");
  fail(op.loc(), std::string("'") + op.name() +
                     "' in code that runs one thread at a time (a branch or loop on a value "
                     "computed from tlx.thread_id(), or an op that reads such a value): the "
                     "interpreter runs such code thread by thread and does not model '" +
                     op.name() + "' there (" + where() +
                     "); arithmetic, global loads, stores, atomics, prints and control flow "
                     "run there; run this kernel on the GPU");
}

std::vector<uint32_t> Executor::perThreadSlots(const ir::Op& op, bool all) {
  std::vector<uint32_t> slots;
  if (all) {
    for (size_t i = 0; i < env_.size(); ++i)
      if (std::holds_alternative<PerThreadPtr>(env_[i])) slots.push_back(uint32_t(i));
  } else {
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      uint32_t s = k_.slots.at(op.operand(i));
      if (std::holds_alternative<PerThreadPtr>(env_[s])) slots.push_back(s);
    }
  }
  for (uint32_t s : slots)
    if (std::get<PerThreadPtr>(env_[s])->values.size() != size_t(agent_.numWarps) * 32)
      fail(op.loc(), std::string("'") + op.name() +
                         "' reads a value computed from tlx.thread_id() before tlx.async_tasks, "
                         "in a task whose threads lie outside the kernel's num_warps; the "
                         "interpreter has that value for the kernel's threads only (" +
                         where() + ")");
  return slots;
}

namespace {

/// Puts thread `t`'s values of the per-thread `slots` into `env` while it lives, the tables back
/// after.
class ThreadView {
public:
  ThreadView(std::vector<RtValue>& env, std::vector<uint32_t> slots)
      : env_(env), slots_(std::move(slots)) {
    for (uint32_t s : slots_) tables_.push_back(std::get<PerThreadPtr>(env_[s]));
  }
  ~ThreadView() {
    for (size_t j = 0; j < slots_.size(); ++j) env_[slots_[j]] = tables_[j];
  }
  void enter(size_t t) {
    for (size_t j = 0; j < slots_.size(); ++j) env_[slots_[j]] = tables_[j]->values[t];
  }

private:
  std::vector<RtValue>& env_;
  std::vector<uint32_t> slots_;
  std::vector<PerThreadPtr> tables_;
};

} // namespace

std::vector<RtValue> Executor::runEachThread(const ir::Op& op, std::vector<uint32_t> slots,
                                             bool divergent,
                                             const std::function<std::vector<RtValue>()>& run) {
  std::vector<std::vector<RtValue>> results(op.numResults());
  const bool wasDivergent = divergent_;
  divergent_ = divergent_ || divergent;
  {
    ThreadView view(env_, std::move(slots));
    for (int64_t t = 0; t < int64_t(agent_.numWarps) * 32; ++t) {
      view.enter(size_t(t));
      thread_ = int(t);
      std::vector<RtValue> mine = run();
      for (unsigned r = 0; r < op.numResults(); ++r) results[r].push_back(mine.at(r));
    }
    thread_ = -1;
  }
  divergent_ = wasDivergent;
  std::vector<RtValue> merged;
  for (unsigned r = 0; r < op.numResults(); ++r)
    merged.push_back(mergeThreads(op, op.result(r), std::move(results[r])));
  return merged;
}

void Executor::execReplicated(const ir::Op& op) {
  requireRunsPerThread(op);
  if (op.code() == OpCode::VoteBallot) {
    const RtValue& pred = slot(op.operand(1));
    if (std::holds_alternative<PerThreadPtr>(slot(op.operand(0))) ||
        !std::holds_alternative<PerThreadPtr>(pred))
      fail(op.loc(), "tlx.vote_ballot_sync with a mask that differs between threads or a "
                     "per-thread tensor predicate is not modeled by the interpreter (" +
                         where() + ")");
    return voteBallotPerThread(op, *std::get<PerThreadPtr>(pred));
  }
  // The per-thread values the op reads: its operands, and for a branch or loop anything its
  // regions may read; those regions are code not every thread may run.
  const bool regions = op.numRegions() != 0;
  std::vector<RtValue> merged = runEachThread(op, perThreadSlots(op, regions), regions, [&] {
    exec(op);
    std::vector<RtValue> mine;
    for (unsigned r = 0; r < op.numResults(); ++r) mine.push_back(slot(op.result(r)));
    return mine;
  });
  for (unsigned r = 0; r < op.numResults(); ++r) set(op.result(r), std::move(merged[r]));
}

std::vector<RtValue> Executor::whilePerThread(const ir::Op& op, const ir::Op* cond, int64_t trip) {
  requireRunsPerThread(op);
  // Where the threads part: each goes on from the condition's operands as they are now (a
  // thread's later trips overwrite them; the per-thread ones each thread's view puts back).
  std::vector<RtValue> split;
  for (unsigned i = 0; i < cond->numOperands(); ++i) split.push_back(slot(cond->operand(i)));
  return runEachThread(op, perThreadSlots(op, true), true, [&] {
    for (unsigned i = 0; i < cond->numOperands(); ++i)
      if (!std::holds_alternative<PerThreadPtr>(split[i])) set(cond->operand(i), split[i]);
    return continueWhile(op, cond, trip);
  });
}

void Executor::voteBallotPerThread(const ir::Op& op, const PerThreadValue& pred) {
  const uint32_t mask = uint32_t(scalarInt(op, 0));
  std::vector<uint32_t> ballots(pred.values.size() / 32, 0);
  for (size_t t = 0; t < pred.values.size(); ++t) {
    const bool vote = readScalar(*std::get<TensorPtr>(pred.values[t]), 0).asInt() != 0;
    if (vote && (mask >> (t % 32) & 1)) ballots[t / 32] |= uint32_t(1) << (t % 32);
  }
  std::vector<RtValue> each;
  for (size_t t = 0; t < pred.values.size(); ++t) {
    Tensor out = Tensor::ofType(op.result()->type());
    *out.data<int32_t>() = int32_t(ballots[t / 32]);
    each.push_back(std::make_shared<Tensor>(std::move(out)));
  }
  set(op.result(), mergeThreads(op, op.result(), std::move(each)));
}

RtValue Executor::mergeThreads(const ir::Op& op, const ir::Value* v, std::vector<RtValue> values) {
  bool same = true;
  for (size_t t = 1; t < values.size() && same; ++t) same = sameValue(values[0], values[t]);
  if (same) return values[0];
  for (const RtValue& x : values)
    if (!std::holds_alternative<TensorPtr>(x))
      fail(op.loc(), std::string("'") + op.name() +
                         "' gives each thread a different buffer, barrier or descriptor (from a "
                         "value computed from tlx.thread_id()), which the interpreter does not "
                         "model (" +
                         where() + ")");
  if (!v->type().isTensor()) {
    perThreadValues_ = true;
    auto table = std::make_shared<PerThreadValue>();
    table->values = std::move(values);
    return PerThreadPtr(std::move(table));
  }
  // A tensor: each element as the thread holding it computed it.
  const std::vector<int>& holders = firstHolders(op, v);
  Tensor out = *std::get<TensorPtr>(values[0]);
  const int w = out.elemBytes();
  for (int64_t e = 0; e < out.numel(); ++e) {
    const Tensor& mine = *std::get<TensorPtr>(values[size_t(holders[size_t(e)])]);
    std::memcpy(out.bytes.data() + e * w, mine.bytes.data() + e * w, size_t(w));
  }
  return std::make_shared<Tensor>(std::move(out));
}

const std::vector<int>& Executor::firstHolders(const ir::Op& op, const ir::Value* v) {
  auto it = firstHolders_.find(v);
  if (it != firstHolders_.end()) return it->second;
  const std::string why = std::string("'") + op.name() +
                          "' of a tensor in code that runs one thread at a time writes the "
                          "elements each thread holds";
  std::vector<std::vector<int64_t>> held = threadElements(op, v, why);
  if (int64_t(held.size()) != int64_t(agent_.numWarps) * 32)
    fail(op.loc(), why + ", but the tensor's layout spans " + std::to_string(held.size() / 32) +
                       " warps where " + where() + " has " + std::to_string(agent_.numWarps));
  std::vector<int> holders(size_t(v->type().numElements()), -1);
  for (size_t t = 0; t < held.size(); ++t)
    for (int64_t e : held[t])
      if (holders[size_t(e)] < 0) holders[size_t(e)] = int(t);
  for (int h : holders)
    if (h < 0) throw std::logic_error("interpreter: a layout that leaves an element unheld");
  return firstHolders_.emplace(v, std::move(holders)).first->second;
}

std::vector<uint8_t> Executor::writtenByThread(const ir::Op& op, const ir::Value* v) {
  if (!v->type().isTensor()) return {uint8_t(thread_ == 0)};
  const std::vector<int>& holders = firstHolders(op, v);
  std::vector<uint8_t> mine(holders.size());
  for (size_t e = 0; e < holders.size(); ++e) mine[e] = holders[e] == thread_;
  return mine;
}

TensorPtr Executor::threadMask(const ir::Op& op, const ir::Value* v, const TensorPtr& mask) {
  const std::vector<uint8_t> mine = writtenByThread(op, v);
  Tensor out(ir::DType::I1, false, v->type().shape);
  for (size_t e = 0; e < mine.size(); ++e) {
    const bool given = !mask || mask->data<uint8_t>()[mask->numel() == 1 ? 0 : e];
    out.data<uint8_t>()[e] = uint8_t(given && mine[e]);
  }
  return std::make_shared<Tensor>(std::move(out));
}

} // namespace ww::interp
