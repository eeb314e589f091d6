// The interpreter's cluster launch control (Blackwell): clc_try_cancel and clc_query.
//
// The interpreter starts the grid's clusters one after another (Interpreter.cpp); a try_cancel
// takes a cluster the loop has not started yet and marks it canceled, so the loop never starts
// it and its tiles are the canceling program's: every tile is processed exactly once, by the
// program that started first or by the one that canceled it. The response (16 bytes) lands like
// a TMA load, in every CTA of the issuer's cluster, when the scheduler runs the memory system,
// completing 16 bytes on each CTA's barrier; reading it before the barrier wait that sees it is a
// race at the query's line, as is overwriting it (the next request into the slot) while a
// consumer may still read it.
#include "interp/Executor.h"

#include <stdexcept>

namespace ww::interp {

namespace {

/// The last word of a response the interpreter writes: a try_cancel that canceled a cluster, one
/// that failed. Anything else was not written by a try_cancel.
constexpr int32_t kCanceled = 0x434c4301, kFailed = 0x434c4300;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

TensorPtr scalarI32(int32_t v) {
  Tensor t(ir::DType::I32, false, {});
  *t.data<int32_t>() = v;
  return std::make_shared<Tensor>(std::move(t));
}

} // namespace

void Executor::execClcTryCancel(const ir::Op& op) {
  const BufferView& dst = buffer(op, 0);
  const BarrierView& bar = barrierView(op, 1);
  if (dst.tileElements() * dst.elemBytes() != 16)
    throw std::logic_error("clc_try_cancel: the response buffer is not 16 bytes");
  const bool cluster = k_.fn->numCtas > 1;
  const std::array<int, 3> dims = cluster ? k_.fn->clusterDims : std::array<int, 3>{1, 1, 1};
  // Issued by the CTAs whose %cluster_ctaid.x is 0 (one request per cluster of (n, 1, 1)).
  if (cta_.rank % dims[0] != 0) return;
  if (cta_.clcFailureSeenAt.valid())
    fail(op.loc(),
         "clc_try_cancel is issued after this CTA saw a try_cancel fail: the PTX ISA leaves "
         "a clusterlaunchcontrol.try_cancel after an observed failure undefined (stop asking "
         "once clc_consumer returns -1)",
         {note(cta_.clcFailureSeenAt, "the failed response was decoded here")});
  // The clusters not started nor canceled yet; deterministic runs take the first, seeded runs a
  // random one, or fail (the rest may already run on other SMs of a GPU).
  std::vector<int64_t> left;
  for (int64_t i = k_.clcStarted; i < int64_t(k_.clcCanceled.size()); ++i)
    if (!k_.clcCanceled[size_t(i)]) left.push_back(i);
  int64_t chosen = -1;
  if (!left.empty()) {
    if (k_.seed == 0) {
      chosen = left.front();
    } else {
      uint64_t r = mix(k_.seed ^ mix(++k_.clcDraws));
      if (r % 4 != 0) chosen = left[size_t((r >> 2) % left.size())];
    }
  }
  auto response = std::make_shared<Tensor>(ir::DType::I32, false, std::vector<int64_t>{4});
  int32_t* w = response->data<int32_t>();
  w[0] = w[1] = w[2] = 0;
  w[3] = kFailed;
  if (chosen >= 0) {
    k_.clcCanceled[size_t(chosen)] = 1;
    const int64_t nx = k_.grid[0] / dims[0], ny = k_.grid[1] / dims[1];
    w[0] = int32_t(chosen % nx * dims[0]);
    w[1] = int32_t(chosen / nx % ny * dims[1]);
    w[2] = int32_t(chosen / (nx * ny) * dims[2]);
    w[3] = kCanceled;
  }
  AsyncCopy c;
  c.op = &op;
  c.data = response;
  c.bytes = 16;
  c.where = where();
  if (cta_.cluster) {
    c.issuer = agent_.clock;
    // multicast::cluster::all: the same offsets in every CTA of the cluster.
    for (CtaState* p : cta_.cluster->ctas)
      addCopyTarget(op, c, *p, peerBuffer(dst, *p), peerBarrier(op, bar, *p));
  } else {
    addCopyTarget(op, c, cta_, dst, bar);
  }
  cta_.copies.push_back(std::move(c));
}

void Executor::execClcQuery(const ir::Op& op) {
  const BufferView& v = buffer(op, 0);
  checkedRead(op, v, 1);
  TensorPtr r = readBuffer(v, ir::Type::tensor(ir::DType::I32, {4}));
  const int32_t* w = r->data<int32_t>();
  if (w[3] != kCanceled && w[3] != kFailed)
    fail(op.loc(), "clc_query decodes a response that no try_cancel wrote (wait on the full "
                   "barrier of the stage its clc_producer used)");
  const bool canceled = w[3] == kCanceled;
  if (!canceled && !cta_.clcFailureSeenAt.valid()) cta_.clcFailureSeenAt = op.loc();
  for (unsigned i = 0; i < 3; ++i) set(op.result(i), scalarI32(canceled ? w[i] : -1));
}

} // namespace ww::interp
