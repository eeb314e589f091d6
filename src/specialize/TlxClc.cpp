// TLX's cluster launch control (Blackwell): tlx.clc_create_context, tlx.clc_producer and
// tlx.clc_consumer, with TLX's semantics, built from barrier ops and the two CLC ops of Ops.def
// (clc_try_cancel, clc_query).
//
// A context is NUM_STAGES response slots (16 bytes each) with an empty and a full mbarrier per
// slot; the empty ones count num_consumers arrivals. The producer waits for its slot to be empty
// (in a cluster launch only CTA 0 waits: the others arrive on CTA 0's barrier), every CTA expects
// the 16 response bytes on its full barrier, and the try_cancel (issued by the cluster's first
// CTA) lands the response in every CTA of the cluster. The consumer waits for the slot to be
// full, decodes the response into the first ctaid of the canceled cluster (x plus this CTA's
// cluster rank, as TLX does, so each CTA of a pair takes its own tile) or -1, fences the async
// proxy and, when it got a tile, arrives on the empty barrier (CTA 0's in a cluster launch).
#include "specialize/TlxClc.h"

#include "ir/OpAttrs.h"
#include "specialize/SpecializerImpl.h"

namespace ww::specialize {

using ir::DType;
using ir::OpCode;

namespace {

/// The object a context is: its members in order.
enum ContextMember { kEmptyBars = 0, kFullBars = 1, kResponses = 2 };

/// Whether clc_producer / clc_consumer synchronize across the cluster, as TLX's
/// _use_multi_cta_sync: multi_ctas (default True) and a launch of more than one CTA per cluster.
bool multiCta(Specializer& sp, const BoundArgs& a) {
  if (a.has("multi_ctas") &&
      !sp.constBool(a.get("multi_ctas"), a.loc("multi_ctas"), "multi_ctas", a.expr("multi_ctas")))
    return false;
  const CompileOptions& o = sp.in.options;
  const std::array<int, 3>& d = o.clusterDims;
  return o.numCtas > 1 || d[0] > 1 || d[1] > 1 || d[2] > 1;
}

const Val& context(const std::string& fn, const BoundArgs& a) {
  const Val& c = a.get("context");
  if (c.kind != Val::Kind::Object || c.s != "clc_context")
    raiseError(a.loc("context"),
               fn + " needs the context tlx.clc_create_context returned, got " + kindName(c));
  return c;
}

/// Slot `k` of the context's member `m` (a barrier or response view).
ir::Value* slotOf(Specializer& sp, const Val& ctx, ContextMember m, const BoundArgs& a) {
  ir::Value* whole = ctx.elts.at(size_t(m)).v;
  const Val& k = a.has("k") ? a.get("k") : Val::integer(0);
  if (k.isIntLike() && (k.i < 0 || k.i >= whole->type().count))
    raiseError(a.loc("k"), "the CLC stage k=" + std::to_string(k.i) +
                               " is out of range for a "
                               "context of " +
                               std::to_string(whole->type().count) + " stages");
  ir::Value* idx = sp.requireScalarI32(k, a.loc("k"), "the CLC stage k");
  ir::Type t = whole->type();
  t.count = 1;
  return sp.b.create1(OpCode::LocalView, {whole, idx}, t);
}

ir::Value* phaseOf(Specializer& sp, const std::string& fn, const BoundArgs& a, const char* arg) {
  if (!a.has(arg))
    raiseError(a.call().loc, fn + " needs the phase of its barrier wait (" + arg + ")");
  const Val& p = a.get(arg);
  if (p.isIntLike() && p.i != 0 && p.i != 1)
    raiseError(a.loc(arg),
               fn + "'s " + arg + " is a phase parity: 0 or 1, got " + std::to_string(p.i));
  return sp.requireScalarI32(p, a.loc(arg), fn + "'s " + arg);
}

Val createContext(Specializer& sp, const std::string& fn, CallSite& call) {
  BoundArgs a(call, {"num_consumers", "num_stages="});
  int64_t consumers = sp.constInt(a.get("num_consumers"), a.loc("num_consumers"),
                                  fn + "'s num_consumers", a.expr("num_consumers"));
  int64_t stages = a.has("num_stages") ? sp.constInt(a.get("num_stages"), a.loc("num_stages"),
                                                     fn + "'s num_stages", a.expr("num_stages"))
                                       : 1;
  if (consumers < 1 || consumers >= (int64_t(1) << 20))
    raiseError(a.loc("num_consumers"),
               fn + "'s num_consumers must be 1 to 2^20-1, got " + std::to_string(consumers));
  if (stages < 1 || stages > 64)
    raiseError(a.loc("num_stages"),
               fn + "'s num_stages must be 1 to 64, got " + std::to_string(stages));
  ir::Value* empty = sp.b.create1(OpCode::AllocBarriers, {}, ir::Type::barrier(stages),
                                  {ir::attr::AllocBarriers::make::arriveCount(consumers),
                                   ir::attr::AllocBarriers::make::warp(false)});
  ir::Value* full = sp.b.create1(
      OpCode::AllocBarriers, {}, ir::Type::barrier(stages),
      {ir::attr::AllocBarriers::make::arriveCount(1), ir::attr::AllocBarriers::make::warp(false)});
  // One 16-byte response per stage: four i32 words (the hardware's opaque b128).
  ir::Value* responses = sp.b.create1(
      OpCode::LocalAlloc, {}, ir::Type::buffer(DType::I32, {4}, stages, ir::MemorySpace::Shared));
  return Val::object("clc_context", 0,
                     {Val::runtime(empty), Val::runtime(full), Val::runtime(responses)});
}

Val producer(Specializer& sp, const std::string& fn, CallSite& call) {
  BoundArgs a(call, {"context", "p_producer=", "multi_ctas=", "k="});
  const Val& ctx = context(fn, a);
  ir::Value* phase = phaseOf(sp, fn, a, "p_producer");
  ir::Value* empty = slotOf(sp, ctx, kEmptyBars, a);
  ir::Value* full = slotOf(sp, ctx, kFullBars, a);
  ir::Value* response = slotOf(sp, ctx, kResponses, a);
  // Arrive remote, wait local: in a cluster only CTA 0 waits for the slot to be empty.
  std::vector<ir::Value*> wait{empty, phase};
  if (multiCta(sp, a)) {
    ir::Value* rank = sp.b.create1(OpCode::ClusterCtaRank, {}, ir::Type::scalar(DType::I32));
    wait.push_back(sp.b.cmp("eq", rank, sp.b.i32(0)));
  }
  sp.b.create(OpCode::BarrierWait, wait, {},
              {ir::attr::BarrierWait::make::hasPred(wait.size() > 2)});
  // Every CTA expects the 16 bytes the multicast response completes on its own barrier.
  sp.b.create(OpCode::BarrierExpectBytes, {full, sp.b.i32(16)}, {},
              {ir::attr::BarrierExpectBytes::make::hasPred(false)});
  sp.b.create(OpCode::ClcTryCancel, {response, full}, {});
  return Val::none();
}

Val consumer(Specializer& sp, const std::string& fn, CallSite& call) {
  BoundArgs a(call, {"context", "p_consumer=", "multi_ctas=", "k=", "return_3d="});
  const Val& ctx = context(fn, a);
  ir::Value* phase = phaseOf(sp, fn, a, "p_consumer");
  ir::Value* empty = slotOf(sp, ctx, kEmptyBars, a);
  ir::Value* full = slotOf(sp, ctx, kFullBars, a);
  ir::Value* response = slotOf(sp, ctx, kResponses, a);
  const bool multi = multiCta(sp, a);
  sp.b.create(OpCode::BarrierWait, {full, phase}, {},
              {ir::attr::BarrierWait::make::hasPred(false)});
  const ir::Type i32 = ir::Type::scalar(DType::I32);
  ir::Op* query = sp.b.create(OpCode::ClcQuery, {response}, {i32, i32, i32});
  ir::Value* x = query->result(0);
  if (multi) {
    // Each CTA of the canceled cluster takes the tile of its own rank (TLX adds the rank to x
    // for every launch; without a cluster it is 0).
    ir::Value* rank = sp.b.create1(OpCode::ClusterCtaRank, {}, i32);
    ir::Value* none = sp.b.cmp("eq", x, sp.b.i32(-1));
    x = sp.b.create1(OpCode::Select, {none, x, sp.b.binary(OpCode::Add, x, rank)}, i32);
  }
  sp.b.create(OpCode::Fence, {}, {}, {ir::attr::Fence::make::kind("async_shared")});
  // Without a tile the producer issues no more requests (the leader CTA may have exited), so
  // nobody arrives on the empty barrier.
  ir::Value* hasTile = sp.b.cmp("ge", x, sp.b.i32(0));
  std::vector<ir::Value*> arrive{empty};
  if (multi) arrive.push_back(sp.b.i32(0));
  arrive.push_back(hasTile);
  sp.b.create(OpCode::BarrierArrive, arrive, {},
              {ir::attr::BarrierArrive::make::arriveCount(1),
               ir::attr::BarrierArrive::make::hasRemoteCtaRank(multi),
               ir::attr::BarrierArrive::make::hasPred(true)});
  if (a.has("return_3d") &&
      sp.constBool(a.get("return_3d"), a.loc("return_3d"), "return_3d", a.expr("return_3d")))
    return Val::tuple(
        {Val::runtime(x), Val::runtime(query->result(1)), Val::runtime(query->result(2))});
  return Val::runtime(x);
}

} // namespace

Val tlxClusterLaunchControl(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  if (name == "clc_create_context") return createContext(sp, fn, call);
  if (name == "clc_producer") return producer(sp, fn, call);
  return consumer(sp, fn, call);
}

} // namespace ww::specialize
