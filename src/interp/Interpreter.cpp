// The interpreter's entry point, op dispatch (one handler per opcode or family, in one table),
// scalar and elementwise ops, structured control flow, shape ops and global memory access. TLX
// ops are in Tlx.cpp, reductions and dot in Reduce.cpp.
#include "interp/Interpreter.h"
#include "interp/Elementwise.h"
#include "interp/Executor.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "warpweave/runtime.h"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

namespace ww::interp {

using ir::OpCode;

void raiseInterpError(const SourceManager* sm, SourceLoc loc, const std::string& message,
                      std::vector<Diagnostic> notes) {
  Diagnostic d{Diagnostic::Severity::Error, loc, message, std::move(notes)};
  if (sm) throw InterpreterError(formatDiagnostic(*sm, d));
  SourceManager empty;
  throw InterpreterError(formatDiagnostic(empty, d));
}

std::string Executor::where() const {
  std::ostringstream os;
  os << "program (" << cta_.pid[0] << ", " << cta_.pid[1] << ", " << cta_.pid[2] << ")";
  if (agent_.isTask) os << " " << agent_.label;
  if (thread_ >= 0) os << ", thread " << thread_;
  return os.str();
}

std::string CtaState::name() const {
  return "program (" + std::to_string(pid[0]) + ", " + std::to_string(pid[1]) + ", " +
         std::to_string(pid[2]) + ")";
}

size_t CtaState::newClockIndex() {
  return cluster ? cluster->nextClockIndex++ : nextClockIndex++;
}

uint64_t CtaState::newToken() {
  return cluster ? cluster->nextToken++ : nextToken++;
}

std::string ClusterState::describe() const {
  return "the cluster of programs " + ctas.front()->name().substr(8) + " to " +
         ctas.back()->name().substr(8);
}

void Executor::fail(SourceLoc loc, const std::string& message,
                    std::vector<Diagnostic> notes) const {
  raiseInterpError(k_.sources, loc, message, std::move(notes));
}

TensorPtr Executor::tensorOf(const ir::Op& op, const ir::Value* v) {
  RtValue& r = slot(v);
  if (auto* t = std::get_if<TensorPtr>(&r)) return *t;
  if (std::holds_alternative<PerThreadPtr>(r))
    fail(op.loc(), std::string("'") + op.name() +
                       "' reads a value computed from tlx.thread_id(), which differs between "
                       "threads, where the interpreter runs all of them together (" +
                       where() +
                       "); it models such values in arithmetic, in the conditions "
                       "of if, for and while, and in stores, not here");
  if (auto* p = std::get_if<PendingDotPtr>(&r)) {
    if ((*p)->result) return (*p)->result;
    fail(op.loc(),
         std::string("'") + op.name() +
             "' reads the result of an async_dot that has not completed; wait for it with "
             "async_dot_wait first (" +
             where() + ")",
         {note((*p)->op->loc(), "the async_dot was issued here")});
  }
  throw std::logic_error(std::string("operand of '") + op.name() + "' is not a tensor value");
}

TensorPtr Executor::tensor(const ir::Op& op, unsigned i) {
  return tensorOf(op, op.operand(i));
}

int64_t Executor::scalarInt(const ir::Op& op, unsigned i) {
  TensorPtr t = tensor(op, i);
  return readScalar(*t, 0).asInt();
}

// ---------------------------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------------------------

const ir::Op* Executor::runBlock(const ir::Block& block) {
  for (const auto& op : block.ops()) {
    switch (op->code()) {
    case OpCode::Yield:
    case OpCode::Condition:
    case OpCode::Return:
      return op.get();
    default:
      exec(*op);
    }
  }
  return nullptr;
}

void Executor::exec(const ir::Op& op) {
  if (thread_ >= 0) {
    requireRunsPerThread(op);
  } else if (perThreadValues_) {
    for (unsigned i = 0; i < op.numOperands(); ++i)
      if (std::holds_alternative<PerThreadPtr>(slot(op.operand(i)))) return execReplicated(op);
  }
  if (ir::lowersWithAgentBarrier(op.code())) {
    // Every thread of a warp barrier arrives for itself, with no barrier of the agent first.
    const auto* bar = op.code() == OpCode::BarrierArrive
                          ? std::get_if<BarrierView>(&slot(op.operand(0)))
                          : nullptr;
    if (!bar || !bar->array->barriers.at(size_t(bar->first)).warpBarrier) ++agent_.agentBarriers;
  }
  OpHandler handler = handlerFor(op.code());
  if (!handler)
    throw std::logic_error(std::string("the interpreter does not implement op '") + op.name() +
                           "'");
  (this->*handler)(op);
}

Executor::OpHandler Executor::handlerFor(OpCode code) {
  // One rule per opcode: a handler of its own or of its family (execShape, execMemory, ...).
  // Adding an op to Ops.def means adding its row here (builtin_dispatch_test checks that every
  // opcode has one).
  static const std::array<OpHandler, ir::kNumOpCodes> table = [] {
    std::array<OpHandler, ir::kNumOpCodes> t{};
    auto on = [&t](std::initializer_list<OpCode> codes, OpHandler h) {
      for (OpCode c : codes) {
        if (t[size_t(c)])
          throw std::logic_error(std::string("two interpreter rules for op '") + ir::opName(c) +
                                 "'");
        t[size_t(c)] = h;
      }
    };
    for (size_t c = 0; c < t.size(); ++c) {
      OpCode code = OpCode(c);
      if (ir::isBinaryArithmetic(code) || code == OpCode::Umulhi)
        on({code}, &Executor::execBinary);
      else if (ir::isUnaryMath(code))
        on({code}, &Executor::execUnaryMath);
    }
    on({OpCode::Constant}, &Executor::execConstant);
    on({OpCode::ProgramId, OpCode::NumPrograms}, &Executor::execProgramQuery);
    on({OpCode::Arange}, &Executor::execArange);
    on({OpCode::AddPtr}, &Executor::execAddPtr);
    on({OpCode::Cmp}, &Executor::execCmp);
    on({OpCode::Select}, &Executor::execSelect);
    on({OpCode::Fma}, &Executor::execFma);
    on({OpCode::Cast}, &Executor::execCast);
    on({OpCode::StochRound}, &Executor::execStochRound);
    on({OpCode::Bitcast, OpCode::PtrToInt, OpCode::IntToPtr}, &Executor::execBitcast);
    on({OpCode::MultipleOf, OpCode::MaxContiguous}, &Executor::execHint);
    on({OpCode::Splat, OpCode::Broadcast, OpCode::ExpandDims, OpCode::Reshape, OpCode::Permute,
        OpCode::Join, OpCode::Split, OpCode::Cat},
       &Executor::execShape);
    on({OpCode::Load, OpCode::Store, OpCode::AtomicRMW, OpCode::AtomicCas, OpCode::DescLoad,
        OpCode::DescStore, OpCode::MakeDescriptor},
       &Executor::execMemory);
    on({OpCode::Reduce, OpCode::Scan}, &Executor::execReduce);
    on({OpCode::Dot}, &Executor::execDot);
    on({OpCode::For, OpCode::If, OpCode::While}, &Executor::execControl);
    on({OpCode::Yield, OpCode::Condition, OpCode::Return}, &Executor::execStrayTerminator);
    on({OpCode::Print, OpCode::Assert}, &Executor::execDebug);
    on({OpCode::DumpLayout, OpCode::AssertSameLayout}, &Executor::execDumpLayout);
    on({OpCode::InlineAsm}, &Executor::execInlineAsm);
    on({OpCode::Gather}, &Executor::execGather);
    on({OpCode::Histogram}, &Executor::execHistogram);
    on({OpCode::MapElementwise}, &Executor::execMapElementwise);
    // TLX (Tlx.cpp)
    on({OpCode::LocalAlloc}, &Executor::execLocalAlloc);
    on({OpCode::LocalView}, &Executor::execLocalView);
    on({OpCode::LocalLoad}, &Executor::execLocalLoad);
    on({OpCode::LocalStore}, &Executor::execLocalStore);
    on({OpCode::LocalGather, OpCode::LocalScatter}, &Executor::execLocalGatherScatter);
    on({OpCode::LocalTrans}, &Executor::execLocalTrans);
    on({OpCode::LocalSlice}, &Executor::execLocalSlice);
    on({OpCode::LocalReinterpret}, &Executor::execLocalReinterpret);
    on({OpCode::AllocBarriers}, &Executor::execAllocBarriers);
    on({OpCode::BarrierExpectBytes}, &Executor::execBarrierExpectBytes);
    on({OpCode::BarrierArrive}, &Executor::execBarrierArrive);
    on({OpCode::BarrierWait}, &Executor::execBarrierWait);
    on({OpCode::NamedBarrierArrive, OpCode::NamedBarrierWait}, &Executor::execNamedBarrier);
    on({OpCode::Fence, OpCode::DebugBarrier, OpCode::AsyncDescStoreWait}, &Executor::execNoEffect);
    on({OpCode::ClusterBarrier}, &Executor::execClusterBarrier);
    on({OpCode::AsyncDescLoad}, &Executor::execAsyncDescLoad);
    on({OpCode::AsyncDescStore}, &Executor::execAsyncDescStore);
    on({OpCode::AsyncBulkLoad, OpCode::AsyncBulkStore}, &Executor::execBulkCopy);
    on({OpCode::Prefetch}, &Executor::execPrefetch);
    on({OpCode::PrefetchTensormap}, &Executor::execPrefetchTensormap);
    on({OpCode::AsyncDescPrefetch}, &Executor::execAsyncDescPrefetch);
    on({OpCode::AsyncRemoteStore, OpCode::RemoteStore, OpCode::AsyncRemoteCopy},
       &Executor::execRemoteStore);
    on({OpCode::AsyncLoad}, &Executor::execAsyncLoad);
    on({OpCode::AsyncCommitGroup}, &Executor::execAsyncCommitGroup);
    on({OpCode::AsyncWaitGroup}, &Executor::execAsyncWaitGroup);
    on({OpCode::AsyncDot}, &Executor::execAsyncDot);
    on({OpCode::AsyncDotWait}, &Executor::execAsyncDotWait);
    on({OpCode::Tcgen05Mma}, &Executor::execTcgen05Mma);
    on({OpCode::Tcgen05Commit}, &Executor::execTcgen05Commit);
    on({OpCode::TmemCopy}, &Executor::execTmemCopy);
    on({OpCode::ClcTryCancel}, &Executor::execClcTryCancel);
    on({OpCode::ClcQuery}, &Executor::execClcQuery);
    on({OpCode::AsyncTasks}, &Executor::execAsyncTasks);
    on({OpCode::AsyncTask}, &Executor::execAsyncTaskOutsideTasks);
    on({OpCode::ReplicaId}, &Executor::execReplicaId);
    on({OpCode::Clock64}, &Executor::execClock64);
    on({OpCode::ClusterCtaRank, OpCode::ClusterSize}, &Executor::execClusterQuery);
    on({OpCode::ThreadId}, &Executor::execThreadId);
    on({OpCode::VoteBallot}, &Executor::execVoteBallot);
    return t;
  }();
  return size_t(code) < table.size() ? table[size_t(code)] : nullptr;
}

bool implements(OpCode code) {
  return Executor::handlerFor(code) != nullptr;
}

// ---------------------------------------------------------------------------------------------
// Elementwise and scalar ops
// ---------------------------------------------------------------------------------------------

void Executor::execBinary(const ir::Op& op) {
  set(op.result(), evalBinary(op.code(), *tensor(op, 0), *tensor(op, 1), op.result()->type(),
                              ir::propagatesNan(op)));
}

void Executor::execUnaryMath(const ir::Op& op) {
  set(op.result(), evalUnary(op.code(), *tensor(op, 0), op.result()->type()));
}

void Executor::execConstant(const ir::Op& op) {
  set(op.result(), makeConstant(op.result()->type(), ir::attr::Constant::value(op)));
}

void Executor::execProgramQuery(const ir::Op& op) {
  const bool pid = op.code() == OpCode::ProgramId;
  int64_t axis = pid ? ir::attr::ProgramId::axis(op) : ir::attr::NumPrograms::axis(op);
  if (axis < 0 || axis > 2) throw std::logic_error("program_id axis out of range");
  Tensor t(ir::DType::I32, false, {});
  *t.data<int32_t>() = pid ? cta_.pid[axis] : k_.grid[axis];
  set(op.result(), std::make_shared<Tensor>(std::move(t)));
}

void Executor::execArange(const ir::Op& op) {
  auto t = std::make_shared<Tensor>(Tensor::ofType(op.result()->type()));
  int64_t start = ir::attr::Arange::start(op);
  int32_t* p = t->data<int32_t>();
  for (int64_t i = 0; i < t->numel(); ++i) p[i] = int32_t(start + i);
  set(op.result(), t);
}

void Executor::execAddPtr(const ir::Op& op) {
  set(op.result(), evalAddPtr(*tensor(op, 0), *tensor(op, 1), op.result()->type()));
}

void Executor::execCmp(const ir::Op& op) {
  set(op.result(),
      evalCmp(ir::attr::Cmp::pred(op), *tensor(op, 0), *tensor(op, 1), op.result()->type()));
}

void Executor::execSelect(const ir::Op& op) {
  set(op.result(), evalSelect(*tensor(op, 0), *tensor(op, 1), *tensor(op, 2), op.result()->type()));
}

void Executor::execFma(const ir::Op& op) {
  set(op.result(), evalFma(*tensor(op, 0), *tensor(op, 1), *tensor(op, 2), op.result()->type()));
}

void Executor::execCast(const ir::Op& op) {
  set(op.result(), evalCast(*tensor(op, 0), op.result()->type(),
                            ir::attr::Cast::rounding(op) == "rtz" ? Rounding::TowardZero
                                                                  : Rounding::NearestEven));
}

void Executor::execStochRound(const ir::Op& op) {
  set(op.result(), evalStochRound(*tensor(op, 0), *tensor(op, 1), op.result()->type()));
}

void Executor::execBitcast(const ir::Op& op) {
  set(op.result(), evalBitcast(*tensor(op, 0), op.result()->type()));
}

void Executor::execHint(const ir::Op& op) {
  set(op.result(), slot(op.operand(0)));
}

void Executor::execDumpLayout(const ir::Op& /*op*/) {
  // tlx.dump_layout prints while compiling (driver/Compile.cpp), which removes it; Tile IR
  // given to the interpreter some other way may still hold it, and it moves no data.
}

void Executor::execStrayTerminator(const ir::Op& op) {
  throw std::logic_error(std::string("terminator '") + op.name() + "' in the middle of a block");
}

// ---------------------------------------------------------------------------------------------
// Control flow
// ---------------------------------------------------------------------------------------------

void Executor::execControl(const ir::Op& op) {
  auto yieldedValues = [&](const ir::Op* term, unsigned first) {
    std::vector<RtValue> vals;
    if (!term) return vals;
    for (unsigned i = first; i < term->numOperands(); ++i) vals.push_back(slot(term->operand(i)));
    return vals;
  };
  auto setResults = [&](const std::vector<RtValue>& vals) {
    if (vals.size() < op.numResults())
      throw std::logic_error(std::string(op.name()) + ": region yields too few values");
    for (unsigned i = 0; i < op.numResults(); ++i) set(op.result(i), vals[i]);
  };
  switch (op.code()) {
  case OpCode::For: {
    int64_t lb = scalarInt(op, 0), ub = scalarInt(op, 1), step = scalarInt(op, 2);
    if (step == 0) fail(op.loc(), "for loop with step 0 never terminates (" + where() + ")");
    const ir::Block& body = *op.region(0);
    std::vector<RtValue> iters;
    for (unsigned i = 3; i < op.numOperands(); ++i) iters.push_back(slot(op.operand(i)));
    const ir::Type& ivType = body.arg(0)->type();
    for (int64_t iv = lb; step > 0 ? iv < ub : iv > ub; iv += step) {
      Tensor ivT = Tensor::ofType(ivType);
      writeScalar(ivT, 0, Scalar{false, iv, 0});
      set(body.arg(0), std::make_shared<Tensor>(std::move(ivT)));
      for (unsigned i = 0; i < iters.size(); ++i) set(body.arg(i + 1), iters[i]);
      iters = yieldedValues(runBlock(body), 0);
    }
    setResults(iters);
    return;
  }
  case OpCode::If: {
    bool cond = readScalar(*tensor(op, 0), 0).i != 0;
    if (cond)
      setResults(yieldedValues(runBlock(*op.region(0)), 0));
    else if (op.numRegions() > 1)
      setResults(yieldedValues(runBlock(*op.region(1)), 0));
    else if (op.numResults())
      throw std::logic_error("if with results has no else region");
    return;
  }
  case OpCode::While: {
    const ir::Block& before = *op.region(0);
    for (unsigned i = 0; i < before.numArgs(); ++i) set(before.arg(i), slot(op.operand(i)));
    // The before region ends in a condition (Ops.def's REGIONS line, verified).
    setResults(continueWhile(op, runBlock(before), 0));
    return;
  }
  default:
    throw std::logic_error("not a control-flow op");
  }
}

std::vector<RtValue> Executor::continueWhile(const ir::Op& op, const ir::Op* cond, int64_t trip) {
  const ir::Block& before = *op.region(0);
  const ir::Block& after = *op.region(1);
  auto yielded = [&](const ir::Op* term, unsigned first) {
    std::vector<RtValue> vals;
    for (unsigned i = first; i < term->numOperands(); ++i) vals.push_back(slot(term->operand(i)));
    return vals;
  };
  // A while loop that never ends would hang the GPU; the interpreter stops it instead.
  constexpr int64_t kMaxWhileIterations = int64_t(1) << 26;
  for (;; ++trip) {
    if (thread_ < 0 && std::holds_alternative<PerThreadPtr>(slot(cond->operand(0))))
      return whilePerThread(op, cond, trip); // the threads part ways here
    std::vector<RtValue> vals = yielded(cond, 1);
    if (readScalar(*tensorOf(*cond, cond->operand(0)), 0).i == 0) return vals;
    for (unsigned i = 0; i < after.numArgs(); ++i) set(after.arg(i), vals[i]);
    std::vector<RtValue> iters = yielded(runBlock(after), 0);
    // A CTA spinning on a flag a peer of its cluster sets must let the peer run.
    if (cta_.cluster && trip % 64 == 63) yieldToOthers();
    if (trip + 1 == kMaxWhileIterations)
      fail(op.loc(), "while loop still running after " + std::to_string(trip + 1) +
                         " iterations in " + where() + "; its condition never becomes false");
    for (unsigned i = 0; i < before.numArgs(); ++i) set(before.arg(i), iters[i]);
    cond = runBlock(before);
  }
}

// ---------------------------------------------------------------------------------------------
// Shape ops: pure data movement, done on raw element bytes.
// ---------------------------------------------------------------------------------------------

namespace {

/// Copies elements of `src` into `dst`, where dst element `i` (row-major over dst's shape) reads
/// src element sum(idx[d] * srcStrides[d]).
void gather(const Tensor& src, Tensor& dst, const std::vector<int64_t>& srcStrides) {
  const size_t w = size_t(dst.elemBytes());
  const int64_t n = dst.numel();
  const size_t rank = dst.shape.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst.bytes.data() + size_t(i) * w, src.bytes.data() + size_t(off) * w, w);
    for (size_t d = rank; d-- > 0;) { // odometer increment, keeping the source offset
      ++idx[d];
      off += srcStrides[d];
      if (idx[d] < dst.shape[d]) break;
      off -= srcStrides[d] * idx[d];
      idx[d] = 0;
    }
  }
}

} // namespace

void Executor::execShape(const ir::Op& op) {
  const ir::Type& rt = op.result()->type();
  switch (op.code()) {
  case OpCode::Splat:
    set(op.result(), splatScalar(*tensor(op, 0), rt));
    return;
  case OpCode::ExpandDims:
  case OpCode::Reshape: {
    auto t = std::make_shared<Tensor>(*tensor(op, 0));
    t->shape = rt.shape;
    if (t->numel() * t->elemBytes() != int64_t(t->bytes.size()))
      throw std::logic_error(std::string(op.name()) + ": element count changes");
    set(op.result(), t);
    return;
  }
  case OpCode::Broadcast: {
    TensorPtr src = tensor(op, 0);
    auto t = std::make_shared<Tensor>(Tensor::ofType(rt));
    std::vector<int64_t> srcShape = src->shape;
    while (srcShape.size() < rt.shape.size()) srcShape.insert(srcShape.begin(), 1);
    std::vector<int64_t> strides = rowMajorStrides(srcShape);
    for (size_t d = 0; d < srcShape.size(); ++d) {
      if (srcShape[d] == 1 && rt.shape[d] != 1)
        strides[d] = 0;
      else if (srcShape[d] != rt.shape[d])
        throw std::logic_error("broadcast: incompatible shapes");
    }
    gather(*src, *t, strides);
    set(op.result(), t);
    return;
  }
  case OpCode::Permute: {
    TensorPtr src = tensor(op, 0);
    std::vector<int64_t> order = ir::attr::Permute::order(op);
    if (order.empty()) order = {1, 0};
    std::vector<int64_t> srcStrides = rowMajorStrides(src->shape), strides(order.size());
    for (size_t d = 0; d < order.size(); ++d) strides[d] = srcStrides[size_t(order[d])];
    auto t = std::make_shared<Tensor>(Tensor::ofType(rt));
    gather(*src, *t, strides);
    set(op.result(), t);
    return;
  }
  case OpCode::Join: {
    TensorPtr a = tensor(op, 0), b = tensor(op, 1);
    auto t = std::make_shared<Tensor>(Tensor::ofType(rt));
    size_t w = size_t(t->elemBytes());
    for (int64_t i = 0; i < a->numel(); ++i) {
      std::memcpy(t->bytes.data() + size_t(2 * i) * w, a->bytes.data() + size_t(i) * w, w);
      std::memcpy(t->bytes.data() + size_t(2 * i + 1) * w, b->bytes.data() + size_t(i) * w, w);
    }
    set(op.result(), t);
    return;
  }
  case OpCode::Split: {
    TensorPtr src = tensor(op, 0);
    auto a = std::make_shared<Tensor>(Tensor::ofType(op.result(0)->type()));
    auto b = std::make_shared<Tensor>(Tensor::ofType(op.result(1)->type()));
    size_t w = size_t(a->elemBytes());
    for (int64_t i = 0; i < a->numel(); ++i) {
      std::memcpy(a->bytes.data() + size_t(i) * w, src->bytes.data() + size_t(2 * i) * w, w);
      std::memcpy(b->bytes.data() + size_t(i) * w, src->bytes.data() + size_t(2 * i + 1) * w, w);
    }
    set(op.result(0), a);
    set(op.result(1), b);
    return;
  }
  case OpCode::Cat: {
    TensorPtr a = tensor(op, 0), b = tensor(op, 1);
    auto t = std::make_shared<Tensor>(Tensor::ofType(rt));
    std::memcpy(t->bytes.data(), a->bytes.data(), a->bytes.size());
    std::memcpy(t->bytes.data() + a->bytes.size(), b->bytes.data(), b->bytes.size());
    set(op.result(), t);
    return;
  }
  default:
    throw std::logic_error("not a shape op");
  }
}

// ---------------------------------------------------------------------------------------------
// Global memory
// ---------------------------------------------------------------------------------------------

TensorPtr Executor::loadGlobal(const ir::Op& op, const Tensor& ptrs, const Tensor* mask,
                               const Tensor* other, const ir::Type& rt) {
  auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
  const int w = r->elemBytes();
  const int64_t n = r->numel();
  TensorPtr otherCast;
  if (other && (other->elem != r->elem || other->pointer != r->pointer)) {
    otherCast = evalCast(*other, rt.withShape(other->shape), Rounding::NearestEven);
    other = otherCast.get();
  }
  const int64_t mp = ptrs.numel() == 1 ? 0 : ~int64_t(0);
  const int64_t mm = mask && mask->numel() == 1 ? 0 : ~int64_t(0);
  const int64_t mo = other && other->numel() == 1 ? 0 : ~int64_t(0);
  const uint64_t* addrs = ptrs.data<uint64_t>();
  const uint8_t* m = mask ? mask->data<uint8_t>() : nullptr;
  std::string why;
  for (int64_t i = 0; i < n; ++i) {
    unsigned char* dst = r->bytes.data() + size_t(i) * size_t(w);
    if (m && !m[i & mm]) {
      // Masked-off lanes read `other`, or zero without it (Triton leaves them undefined).
      if (other) std::memcpy(dst, other->bytes.data() + size_t(i & mo) * size_t(w), size_t(w));
      continue;
    }
    const unsigned char* src = k_.memory.resolve(addrs[i & mp], w, "load", &why);
    if (!src) fail(op.loc(), why + " in " + where() + ", element " + formatIndex(rt.shape, i));
    std::memcpy(dst, src, size_t(w));
  }
  return r;
}

void Executor::storeGlobal(const ir::Op& op, const Tensor& ptrs, const Tensor& value,
                           const Tensor* mask) {
  const int w = value.elemBytes();
  const int64_t n = std::max(ptrs.numel(), value.numel());
  const int64_t mp = ptrs.numel() == 1 ? 0 : ~int64_t(0);
  const int64_t mv = value.numel() == 1 ? 0 : ~int64_t(0);
  const int64_t mm = mask && mask->numel() == 1 ? 0 : ~int64_t(0);
  const uint64_t* addrs = ptrs.data<uint64_t>();
  const uint8_t* m = mask ? mask->data<uint8_t>() : nullptr;
  const std::vector<int64_t>& shape = ptrs.numel() >= value.numel() ? ptrs.shape : value.shape;
  std::string why;
  for (int64_t i = 0; i < n; ++i) {
    if (m && !m[i & mm]) continue;
    unsigned char* dst = k_.memory.resolve(addrs[i & mp], w, "store", &why);
    if (!dst) fail(op.loc(), why + " in " + where() + ", element " + formatIndex(shape, i));
    std::memcpy(dst, value.bytes.data() + size_t(i & mv) * size_t(w), size_t(w));
  }
}

namespace {

Scalar loadMemScalar(const Tensor& like, const unsigned char* p) {
  Tensor tmp(like.elem, like.pointer, {});
  std::memcpy(tmp.bytes.data(), p, tmp.bytes.size());
  return readScalar(tmp, 0);
}

void storeMemScalar(const Tensor& like, unsigned char* p, const Scalar& v) {
  Tensor tmp(like.elem, like.pointer, {});
  writeScalar(tmp, 0, v);
  std::memcpy(p, tmp.bytes.data(), tmp.bytes.size());
}

Scalar atomicCombine(const std::string& kind, ir::DType t, const Scalar& old, const Scalar& v) {
  Scalar r = old;
  bool uns = ir::isInt(t) && !ir::isSigned(t);
  auto less = [&](const Scalar& a, const Scalar& b) {
    if (a.isFloat) return a.f < b.f;
    return uns ? uint64_t(a.i) < uint64_t(b.i) : a.i < b.i;
  };
  if (kind == "add") {
    if (old.isFloat)
      r.f = old.f + v.f;
    else
      r.i = int64_t(uint64_t(old.i) + uint64_t(v.i));
  } else if (kind == "max") {
    if (less(old, v) || (old.isFloat && std::isnan(old.f))) r = v;
  } else if (kind == "min") {
    if (less(v, old) || (old.isFloat && std::isnan(old.f))) r = v;
  } else if (kind == "and") {
    r.i = old.i & v.i;
  } else if (kind == "or") {
    r.i = old.i | v.i;
  } else if (kind == "xor") {
    r.i = old.i ^ v.i;
  } else if (kind == "xchg") {
    r = v;
  } else {
    throw std::logic_error("atomic_rmw: unknown kind '" + kind + "'");
  }
  return r;
}

} // namespace

void Executor::execMemory(const ir::Op& op) {
  switch (op.code()) {
  case OpCode::Load: {
    bool hasMask = ir::attr::Load::hasMask(op), hasOther = ir::attr::Load::hasOther(op);
    TensorPtr ptrs = tensor(op, 0);
    TensorPtr mask = hasMask ? tensor(op, 1) : nullptr;
    TensorPtr other = hasOther ? tensor(op, hasMask ? 2 : 1) : nullptr;
    set(op.result(), loadGlobal(op, *ptrs, mask.get(), other.get(), op.result()->type()));
    return;
  }
  case OpCode::Store: {
    TensorPtr mask = ir::attr::Store::hasMask(op) ? tensor(op, 2) : nullptr;
    if (thread_ >= 0) mask = threadMask(op, op.operand(1), mask);
    storeGlobal(op, *tensor(op, 0), *tensor(op, 1), mask.get());
    return;
  }
  case OpCode::AtomicRMW:
  case OpCode::AtomicCas: {
    bool cas = op.code() == OpCode::AtomicCas;
    TensorPtr ptrs = tensor(op, 0);
    TensorPtr cmp = cas ? tensor(op, 1) : nullptr;
    TensorPtr val = tensor(op, cas ? 2 : 1);
    bool hasMask = !cas && ir::attr::AtomicRMW::hasMask(op);
    TensorPtr mask = hasMask ? tensor(op, 2) : nullptr;
    if (thread_ >= 0) mask = threadMask(op, op.result(), mask);
    const ir::Type& rt = op.result()->type();
    auto r = std::make_shared<Tensor>(Tensor::ofType(rt));
    std::string kind = cas ? "cas" : ir::attr::AtomicRMW::kind(op);
    const int w = r->elemBytes();
    auto at = [](const TensorPtr& t, int64_t i) { return t->numel() == 1 ? 0 : i; };
    std::string why;
    for (int64_t i = 0; i < r->numel(); ++i) {
      if (mask && !mask->data<uint8_t>()[at(mask, i)]) continue;
      uint64_t addr = ptrs->data<uint64_t>()[at(ptrs, i)];
      unsigned char* p = k_.memory.resolve(addr, w, "atomic", &why);
      if (!p) fail(op.loc(), why + " in " + where() + ", element " + formatIndex(rt.shape, i));
      std::memcpy(r->bytes.data() + size_t(i) * size_t(w), p, size_t(w));
      Scalar old = loadMemScalar(*r, p);
      Scalar v = readScalar(*val, at(val, i));
      if (cas) {
        // Compare the stored bits, as atom.cas does.
        Tensor cmpBits(r->elem, r->pointer, {});
        writeScalar(cmpBits, 0, readScalar(*cmp, at(cmp, i)));
        if (std::memcmp(p, cmpBits.bytes.data(), size_t(w)) == 0) storeMemScalar(*r, p, v);
      } else {
        storeMemScalar(*r, p, atomicCombine(kind, r->elem, old, v));
      }
    }
    set(op.result(), r);
    return;
  }
  case OpCode::MakeDescriptor: {
    const ir::Type& rt = op.result()->type();
    auto d = std::make_shared<Descriptor>();
    d->elem = rt.elem;
    d->base = tensor(op, 0)->data<uint64_t>()[0];
    unsigned rank = (op.numOperands() - 1) / 2;
    for (unsigned i = 0; i < rank; ++i) d->shape.push_back(scalarInt(op, 1 + i));
    for (unsigned i = 0; i < rank; ++i) d->strides.push_back(scalarInt(op, 1 + rank + i));
    d->blockShape = attrOr(op, ir::attr::MakeDescriptor::kblockShape,
                           ir::attr::MakeDescriptor::blockShape, rt.shape);
    // Made in a slot of tlx.allocate_tensor_descriptor (its index the last operand): a slot
    // outside the allocation would write another's tensor map, or past the scratch.
    if (int64_t slots = ir::attr::MakeDescriptor::slotCount(op); slots > 0) {
      int64_t slot = scalarInt(op, 1 + 2 * rank);
      if (slot < 0 || slot >= slots)
        fail(op.loc(), "tlx.make_tensor_descriptor into slot " + std::to_string(slot) +
                           " of a tlx.allocate_tensor_descriptor of " + std::to_string(slots) +
                           " slots (" + where() + ")");
    }
    set(op.result(), std::shared_ptr<const Descriptor>(d));
    return;
  }
  case OpCode::DescLoad:
  case OpCode::DescStore: {
    bool isLoad = op.code() == OpCode::DescLoad;
    auto desc = descriptor(op, 0);
    unsigned firstOffset = isLoad ? 1 : 2;
    std::vector<int64_t> offsets;
    for (unsigned i = firstOffset; i < op.numOperands(); ++i) offsets.push_back(scalarInt(op, i));
    if (offsets.size() != desc->shape.size())
      throw std::logic_error("descriptor access with the wrong number of offsets");
    std::shared_ptr<Tensor> out;
    if (isLoad) out = std::make_shared<Tensor>(Tensor::ofType(op.result()->type()));
    TensorPtr value = isLoad ? nullptr : tensor(op, 1);
    descriptorTransfer(k_, op, where(), *desc, offsets, out.get(), value.get());
    if (isLoad) set(op.result(), TensorPtr(out));
    return;
  }
  default:
    throw std::logic_error("not a memory op");
  }
}

namespace {

/// One element of a TMA reduction (cp.reduce.async.bulk.tensor): `dst` = dst `kind` src, both of
/// type `elem`. Integers wrap (add) or compare as their signedness says; floats are combined in
/// fp64 and rounded once to `elem` (fp32 adds in fp32).
void reduceElement(ir::DType elem, const std::string& kind, unsigned char* dst,
                   const unsigned char* src) {
  const int w = ir::byteWidth(elem);
  Tensor pair(elem, false, {2});
  std::memcpy(pair.bytes.data(), dst, size_t(w));
  std::memcpy(pair.bytes.data() + w, src, size_t(w));
  if (elem == ir::DType::F32 && kind == "add") {
    float a, b;
    std::memcpy(&a, dst, 4);
    std::memcpy(&b, src, 4);
    a += b;
    std::memcpy(dst, &a, 4);
    return;
  }
  Scalar a = readScalar(pair, 0), b = readScalar(pair, 1), r = a;
  if (a.isFloat) {
    r.f = kind == "add" ? a.f + b.f : kind == "min" ? std::min(a.f, b.f) : std::max(a.f, b.f);
  } else {
    const bool sgn = ir::isSigned(elem);
    const uint64_t ua = uint64_t(a.i), ub = uint64_t(b.i);
    if (kind == "add") r.i = int64_t(ua + ub);
    if (kind == "and") r.i = int64_t(ua & ub);
    if (kind == "or") r.i = int64_t(ua | ub);
    if (kind == "xor") r.i = int64_t(ua ^ ub);
    if (kind == "min") r.i = sgn ? std::min(a.i, b.i) : int64_t(std::min(ua, ub));
    if (kind == "max") r.i = sgn ? std::max(a.i, b.i) : int64_t(std::max(ua, ub));
  }
  writeScalar(pair, 0, r);
  std::memcpy(dst, pair.bytes.data(), size_t(w));
}

} // namespace

void checkTmaBoxStart(KernelState& k, const ir::Op& op, const std::string& where,
                      const Descriptor& d, const std::vector<int64_t>& offsets) {
  // The GPU's rule for every TMA box (ir::tmaOffsetMultiple; the base is aligned when the tensor
  // map is made), which the PTX backend checks too.
  if (offsets.empty()) return;
  const int64_t multiple = ir::tmaOffsetMultiple(d.elem), inner = offsets.back();
  if (inner % multiple == 0) return;
  raiseInterpError(k.sources, op.loc(),
                   ir::tmaCopyName(op) + " starts its " + ir::shapeText(d.blockShape) +
                       " box at offset " + std::to_string(inner) + " of the innermost dimension, " +
                       std::to_string(inner * ir::bitWidth(d.elem) / 8) +
                       " bytes into a row: TMA needs that start 16-byte aligned (a multiple of " +
                       std::to_string(multiple) + " " + std::string(ir::tlName(d.elem)) +
                       " elements), or the GPU stops the kernel with an illegal instruction (" +
                       where + ")");
}

void descriptorTransfer(KernelState& k, const ir::Op& op, const std::string& where,
                        const Descriptor& d, const std::vector<int64_t>& offsets, Tensor* out,
                        const Tensor* in) {
  checkTmaBoxStart(k, op, where, d, offsets);
  const std::string reduce =
      op.code() == OpCode::AsyncDescStore ? ir::attr::AsyncDescStore::reduce(op) : "";
  const std::vector<int64_t>& box = d.blockShape;
  std::vector<int64_t> boxStrides = rowMajorStrides(box);
  const int w = ir::byteWidth(d.elem);
  int64_t n = 1;
  for (int64_t e : box) n *= e;
  std::string why;
  for (int64_t i = 0; i < n; ++i) {
    int64_t elemOffset = 0;
    bool inside = true;
    for (size_t dim = 0; dim < box.size(); ++dim) {
      int64_t c = offsets[dim] + (i / boxStrides[dim]) % box[dim];
      if (c < 0 || c >= d.shape[dim]) inside = false;
      elemOffset += c * d.strides[dim];
    }
    if (!inside) continue;
    uint64_t addr = d.base + uint64_t(elemOffset * w);
    unsigned char* p = k.memory.resolve(addr, w, out ? "load" : "store", &why);
    if (!p)
      raiseInterpError(k.sources, op.loc(),
                       why + " through a tensor descriptor in " + where + ", element " +
                           formatIndex(box, i));
    if (out)
      std::memcpy(out->bytes.data() + size_t(i * w), p, size_t(w));
    else if (!reduce.empty())
      reduceElement(d.elem, reduce, p, in->bytes.data() + size_t(i * w));
    else
      std::memcpy(p, in->bytes.data() + size_t(i * w), size_t(w));
  }
}

std::shared_ptr<const Descriptor> Executor::descriptor(const ir::Op& op, unsigned i) {
  RtValue& r = slot(op.operand(i));
  if (auto* d = std::get_if<std::shared_ptr<const Descriptor>>(&r)) return *d;
  throw std::logic_error(std::string("operand of '") + op.name() + "' is not a descriptor");
}

// ---------------------------------------------------------------------------------------------
// print / assert
// ---------------------------------------------------------------------------------------------

void Executor::execDebug(const ir::Op& op) {
  if (op.code() == OpCode::Assert) {
    TensorPtr cond = tensor(op, 0);
    for (int64_t i = 0; i < cond->numel(); ++i) {
      if (readScalar(*cond, i).i != 0) continue;
      std::string msg = ir::attr::Assert::message(op);
      fail(op.loc(), "device assertion failed" + (msg.empty() ? "" : ": " + msg) + " in " +
                         where() +
                         (cond->shape.empty() ? "" : ", element " + formatIndex(cond->shape, i)));
    }
    return;
  }
  std::ostream& os = k_.out ? *k_.out : std::cout;
  std::string prefix = ir::attr::Print::prefix(op);
  bool hex = ir::attr::Print::hex(op);
  std::string pid = "pid (" + std::to_string(cta_.pid[0]) + ", " + std::to_string(cta_.pid[1]) +
                    ", " + std::to_string(cta_.pid[2]) + ")";
  if (op.numOperands() == 0) os << pid << " " << prefix << "\n";
  for (unsigned o = 0; o < op.numOperands(); ++o) {
    TensorPtr t = tensor(op, o);
    for (int64_t i = 0; i < t->numel(); ++i) {
      os << pid << " idx " << (t->shape.empty() ? "()" : formatIndex(t->shape, i)) << " " << prefix;
      if (op.numOperands() > 1) os << " (operand " << o << ")";
      os << ": ";
      Scalar s = readScalar(*t, i);
      if (hex) {
        uint64_t bits = 0;
        std::memcpy(&bits, t->bytes.data() + size_t(i) * size_t(t->elemBytes()),
                    size_t(t->elemBytes()));
        os << "0x" << std::hex << bits << std::dec;
      } else if (s.isFloat) {
        os << s.f;
      } else if (t->pointer || (ir::isInt(t->elem) && !ir::isSigned(t->elem))) {
        os << uint64_t(s.i);
      } else {
        os << s.i;
      }
      os << "\n";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Entry point
// ---------------------------------------------------------------------------------------------

namespace {

void numberValues(const ir::Block& block, std::unordered_map<const ir::Value*, uint32_t>& slots) {
  for (const auto& a : block.args()) slots.emplace(a.get(), uint32_t(slots.size()));
  for (const auto& op : block.ops()) {
    for (const auto& r : op->results()) slots.emplace(r.get(), uint32_t(slots.size()));
    for (unsigned i = 0; i < op->numRegions(); ++i) numberValues(*op->region(i), slots);
  }
}

RtValue bindArgument(KernelState& k, const ir::KernelArg& a, const InterpArg& v) {
  const ir::Type& t = a.type;
  auto bad = [&](const char* expected) {
    throw std::invalid_argument("interpret: argument '" + a.name + "' (" + t.str() + ") needs " +
                                expected);
  };
  if (t.kind == ir::TypeKind::Descriptor) {
    if (v.kind != InterpArg::Kind::Descriptor) bad("InterpArg::descriptor(...)");
    if (int(v.shape.size()) != t.rank || v.strides.size() != v.shape.size())
      bad("a descriptor whose shape and strides have the descriptor's rank");
    auto d = std::make_shared<Descriptor>();
    d->elem = t.elem;
    d->base = k.memory.addRegion(a.name, v.data, v.bytes, v.readOnly);
    d->shape = v.shape;
    d->strides = v.strides;
    d->blockShape = t.shape;
    return std::shared_ptr<const Descriptor>(d);
  }
  if (!t.isValue() || !t.isScalar()) bad("a scalar, pointer or descriptor parameter type");
  Tensor s = Tensor::ofType(t);
  if (t.pointer) {
    if (v.kind != InterpArg::Kind::Buffer) bad("InterpArg::buffer(data, bytes)");
    *s.data<uint64_t>() = k.memory.addRegion(a.name, v.data, v.bytes, v.readOnly);
  } else if (v.kind == InterpArg::Kind::Int) {
    writeScalar(s, 0, Scalar{false, v.i, 0});
  } else if (v.kind == InterpArg::Kind::Float) {
    if (!ir::isFloat(t.elem)) bad("an integer (InterpArg::integer)");
    writeScalar(s, 0, Scalar{true, 0, v.f});
  } else {
    bad("a scalar (InterpArg::integer or InterpArg::real)");
  }
  return std::make_shared<Tensor>(std::move(s));
}

} // namespace

namespace {

uint64_t environmentNumber(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 0);
  if (errno != 0 || *end != '\0' || text[0] == '-')
    throw std::invalid_argument(std::string(name) + "='" + text +
                                "' is not a non-negative integer");
  return uint64_t(v);
}

void runOnce(const ir::Function& fn, const SourceManager* sources, const int grid[3],
             const std::vector<InterpArg>& args, uint64_t seed, bool quiet,
             const HostMemoryLookup& hostMemory);
void runCluster(KernelState& k, int x0, int y0, int z0, const std::array<int, 3>& dims);

bool hasAsyncTasks(const ir::Block& block) {
  for (const auto& op : block.ops()) {
    if (op->code() == ir::OpCode::AsyncTasks) return true;
    for (unsigned i = 0; i < op->numRegions(); ++i)
      if (hasAsyncTasks(*op->region(i))) return true;
  }
  return false;
}

} // namespace

RunOptions runOptionsFromEnvironment() {
  RunOptions o;
  o.seed = environmentNumber("WARPWEAVE_INTERP_SEED", 0);
  uint64_t n = environmentNumber("WARPWEAVE_INTERP_SCHEDULES", 1);
  if (n == 0 || n > 1000000)
    throw std::invalid_argument("WARPWEAVE_INTERP_SCHEDULES must be between 1 and 1000000");
  o.schedules = int(n);
  return o;
}

void run(const ir::Function& fn, const SourceManager* sources, const int grid[3],
         const std::vector<InterpArg>& args) {
  run(fn, sources, grid, args, runOptionsFromEnvironment());
}

void run(const ir::Function& fn, const SourceManager* sources, const int grid[3],
         const std::vector<InterpArg>& args, const RunOptions& options) {
  // Without async tasks there is one agent and one schedule: a seed changes nothing.
  // The CTAs of a cluster interleave too.
  const bool tasks = hasAsyncTasks(fn.body) || fn.numCtas > 1;
  const int schedules = tasks ? std::max(1, options.schedules) : 1;
  for (int s = 0; s < schedules; ++s) {
    // Seed 0 stays round-robin for the first run only; later runs need distinct nonzero seeds.
    uint64_t seed = options.seed + uint64_t(s);
    if (options.seed == 0 && s > 0) seed = uint64_t(s);
    const bool last = s + 1 == schedules;
    std::vector<std::vector<uint8_t>> scratch;
    std::vector<InterpArg> runArgs = args;
    if (!last)
      for (InterpArg& a : runArgs)
        if (a.data && a.bytes) {
          const auto* p = static_cast<const uint8_t*>(a.data);
          scratch.emplace_back(p, p + a.bytes);
          a.data = scratch.back().data();
        }
    try {
      runOnce(fn, sources, grid, runArgs, seed, /*quiet=*/!last, options.hostMemory);
    } catch (const InterpreterError& e) {
      if (!tasks || (schedules == 1 && seed == 0)) throw;
      throw InterpreterError(std::string(e.what()) +
                             "\n(found under WARPWEAVE_INTERP_SEED=" + std::to_string(seed) + ")");
    }
  }
}

namespace {

void runOnce(const ir::Function& fn, const SourceManager* sources, const int grid[3],
             const std::vector<InterpArg>& args, uint64_t seed, bool quiet,
             const HostMemoryLookup& hostMemory) {
  KernelState k;
  k.seed = seed;
  k.memory.setHostLookup(hostMemory);
  // Exploratory schedules run on scratch buffers; their prints would only repeat the last's.
  std::ostringstream discarded;
  if (quiet) k.out = &discarded;
  k.fn = &fn;
  k.sources = sources;
  for (int i = 0; i < 3; ++i) k.grid[i] = grid[i];
  numberValues(fn.body, k.slots);
  std::vector<const ir::KernelArg*> params;
  for (const ir::KernelArg& a : fn.args)
    if (a.value) params.push_back(&a);
  if (params.size() != args.size()) {
    std::string names;
    for (const auto* p : params) names += (names.empty() ? "" : ", ") + p->name;
    throw std::invalid_argument("interpret: kernel '" + fn.name + "' takes " +
                                std::to_string(params.size()) + " runtime arguments (" + names +
                                "), got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < params.size(); ++i)
    k.boundArgs.emplace_back(k.slots.at(params[i]->value), bindArgument(k, *params[i], args[i]));

  const int ctas = std::max(1, fn.numCtas);
  // A 1-CTA launch runs its programs one by one; clusters step over the grid by their shape.
  const std::array<int, 3> dims = ctas > 1 ? fn.clusterDims : std::array<int, 3>{1, 1, 1};
  if (ctas > 1)
    checkClusterGrid(fn.name, {unsigned(dims[0]), unsigned(dims[1]), unsigned(dims[2])},
                     {unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2])});
  // Clusters start in launch order; those a try_cancel canceled never start (their tiles went
  // to the canceling program).
  k.clcCanceled.assign(
      size_t((grid[0] / dims[0]) * int64_t(grid[1] / dims[1]) * (grid[2] / dims[2])), 0);
  int64_t launchIndex = 0;
  for (int z = 0; z < grid[2]; z += dims[2])
    for (int y = 0; y < grid[1]; y += dims[1])
      for (int x = 0; x < grid[0]; x += dims[0]) {
        const int64_t index = launchIndex++;
        if (k.clcCanceled[size_t(index)]) continue;
        k.clcStarted = index + 1;
        if (ctas > 1) {
          runCluster(k, x, y, z, dims);
          continue;
        }
        CtaState cta;
        cta.pid[0] = x;
        cta.pid[1] = y;
        cta.pid[2] = z;
        Agent main;
        main.label = "program";
        main.numWarps = fn.numWarps;
        std::vector<RtValue> env(k.slots.size());
        for (auto& [slot, value] : k.boundArgs) env[slot] = value;
        Executor exec(k, cta, main, std::move(env));
        exec.runBlock(fn.body);
      }
}

/// "program (1, 0, 0)", plus the task for an async task's agent.
std::string agentName(const Agent& a) {
  return a.isTask ? a.program + " " + a.label : a.program;
}

/// Raises the deadlock of a cluster whose agents are all blocked (or finished) with no copy in
/// flight; when some CTA waits at the cluster barrier, the report says who never reaches it.
[[noreturn]] void reportClusterDeadlock(KernelState& k, ClusterState& cluster,
                                        const Scheduler& scheduler,
                                        const std::vector<Agent*>& blocked) {
  std::vector<Diagnostic> notes;
  for (Agent* a : blocked) {
    notes.push_back(note(a->site.loc, agentName(*a) + " " + a->site.what));
    notes.insert(notes.end(), a->site.notes.begin(), a->site.notes.end());
  }
  for (Agent* a : scheduler.agents())
    if (a->state == Agent::State::Done) notes.push_back(note({}, agentName(*a) + " has finished"));
  SourceLoc loc = blocked.empty() ? SourceLoc{} : blocked.front()->site.loc;
  std::string message = "deadlock in " + cluster.describe();
  if (cluster.arrivedCount > 0) {
    std::string waiting, exited, elsewhere, barrier;
    auto add = [](std::string& list, const std::string& name) {
      list += (list.empty() ? "" : ", ") + name;
    };
    for (CtaState* cta : cluster.ctas) {
      if (cluster.arrived[size_t(cta->rank)]) {
        if (waiting.empty()) {
          loc = cluster.arrivedAt[size_t(cta->rank)];
          barrier = cluster.arrivedWhat[size_t(cta->rank)];
        }
        add(waiting, cta->name());
      } else {
        add(cta->exited ? exited : elsewhere, cta->name());
      }
    }
    message += ": " + waiting + " wait" + (cluster.arrivedCount == 1 ? "s" : "") + " at " +
               barrier + ", which every CTA of the cluster must reach, but ";
    if (!exited.empty()) message += exited + " exited without reaching it";
    if (!exited.empty() && !elsewhere.empty()) message += " and ";
    if (!elsewhere.empty()) message += elsewhere + " is blocked elsewhere";
  } else {
    message += ": every program and async task is blocked and no copy is in flight";
  }
  raiseInterpError(k.sources, loc, message, std::move(notes));
}

void runCluster(KernelState& k, int x0, int y0, int z0, const std::array<int, 3>& dims) {
  ClusterState cluster;
  std::vector<std::unique_ptr<CtaState>> states;
  std::vector<std::unique_ptr<Agent>> mains;
  std::vector<std::unique_ptr<Executor>> executors;
  const int ctas = dims[0] * dims[1] * dims[2];
  for (int r = 0; r < ctas; ++r) {
    auto cta = std::make_unique<CtaState>();
    // %cluster_ctarank: x fastest, then y, then z.
    cta->pid[0] = x0 + r % dims[0];
    cta->pid[1] = y0 + r / dims[0] % dims[1];
    cta->pid[2] = z0 + r / (dims[0] * dims[1]);
    cta->cluster = &cluster;
    cta->rank = r;
    auto main = std::make_unique<Agent>();
    main->label = "program";
    main->program = cta->name();
    main->numWarps = k.fn->numWarps;
    main->clockIndex = cta->newClockIndex();
    main->clock.set(main->clockIndex, 1);
    std::vector<RtValue> env(k.slots.size());
    for (auto& [slot, value] : k.boundArgs) env[slot] = value;
    auto exec = std::make_unique<Executor>(k, *cta, *main, std::move(env));
    main->body = [exec = exec.get(), cta = cta.get(), &k] {
      exec->beforeExit(exec->runBlock(k.fn->body));
      cta->exited = true;
    };
    cluster.ctas.push_back(cta.get());
    states.push_back(std::move(cta));
    mains.push_back(std::move(main));
    executors.push_back(std::move(exec));
  }
  cluster.arrived.assign(size_t(ctas), false);
  cluster.arrivedAt.assign(size_t(ctas), SourceLoc{});
  cluster.arrivedWhat.assign(size_t(ctas), "");
  // Each cluster gets its own stream of choices; a zero mix would mean round-robin.
  uint64_t seed = 0;
  if (k.seed != 0) {
    uint64_t first = uint64_t(x0) + uint64_t(y0) * 65536 + uint64_t(z0) * 65536 * 65536;
    seed = (k.seed ^ (first * 0x9E3779B97F4A7C15ull)) | 1;
  }
  Scheduler scheduler(seed);
  for (auto& cta : states) cta->scheduler = &scheduler;
  std::vector<Agent*> raw;
  for (auto& m : mains) raw.push_back(m.get());
  scheduler.run(
      raw, [&] { return Executor::completeAsyncCopies(k, cluster); },
      [&](const std::vector<Agent*>& blocked) {
        reportClusterDeadlock(k, cluster, scheduler, blocked);
      });
}

} // namespace

} // namespace ww::interp
