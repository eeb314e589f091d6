// The `tlx.*` surface for Hopper (and the storage kinds Blackwell adds): shared-memory buffers,
// mbarriers, TMA and async copies, wgmma, warp-specialization helpers, cluster queries.
#include "ir/BlockScaled.h"
#include "ir/OpAttrs.h"
#include "specialize/BuiltinTable.h"
#include "specialize/OpAttrChecks.h"
#include "specialize/SpecializerImpl.h"
#include "specialize/TlxClc.h"
#include "specialize/TlxLayouts.h"

#include "ir/Limits.h"

#include <algorithm>
#include <tuple>

namespace ww::specialize {

using ir::DType;
using ir::OpCode;

namespace {

/// A tlx.remote_view of a barrier: a view op marked remote_view.
bool isRemoteBarrierView(const ir::Value* v) {
  const ir::Op* def = v->def();
  return def && def->code() == OpCode::LocalView && ir::attr::LocalView::remoteView(*def);
}

/// A view of one buffer (local_view / bufs[i], or a view of one), not an allocation: indexing
/// it selects inside the buffer.
bool isBufferView(const ir::Value* v) {
  for (const ir::Op* d = v->def(); d; d = d->operand(0)->def()) {
    if (d->code() == OpCode::LocalView) return true;
    if (d->code() != OpCode::LocalTrans && d->code() != OpCode::LocalSlice) return false;
  }
  return false;
}

std::string dims(const std::vector<int64_t>& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += 'x';
    r += std::to_string(s[i]);
  }
  return r;
}

/// tlx.local_alloc's buffers must fit in one block's shared (or tensor) memory on some target;
/// checked before the type exists, as `num` x the tile's bytes may not even fit in 64 bits.
void checkLocalAllocSize(const std::vector<int64_t>& shape, DType dt, int64_t num,
                         ir::MemorySpace space, SourceLoc loc) {
  int64_t bytes = ir::byteWidth(dt);
  for (int64_t d : shape) bytes = d > 0 && bytes > INT64_MAX / d ? INT64_MAX : bytes * d;
  int64_t total = num > 0 && bytes > INT64_MAX / num ? INT64_MAX : bytes * num;
  bool tmem = space == ir::MemorySpace::Tmem;
  int64_t limit = tmem ? ir::kMaxTensorMemoryBytes : ir::kMaxSharedBytes;
  if (total > limit)
    raiseError(loc, "tlx.local_alloc of " + std::to_string(num) + " buffers of " + dims(shape) +
                        " " + std::string(ir::tlName(dt)) + " needs " +
                        (total == INT64_MAX ? std::string("over 2**63") : std::to_string(total)) +
                        " bytes; a block has at most " + std::to_string(limit) + " bytes of " +
                        (tmem ? "tensor memory" : "shared memory") + " on any target");
}

} // namespace

// One handler per builtin or family of builtins, registered in tlxBuiltins() below.
namespace {

/// A single buffer (a view, count 1), as local_load/store and async copies need.
ir::Value* oneBuffer(Specializer& sp, const std::string& fn, const BoundArgs& a, const char* arg) {
  ir::Value* buf = sp.requireBuffer(a.get(arg), a.loc(arg), fn + "'s " + arg);
  if (buf->type().count != 1)
    raiseError(a.loc(arg), fn + " needs a single buffer, got " + buf->type().str() +
                               "; select one with bufs[i] or tlx.local_view(bufs, i)");
  return buf;
}

/// The i32 rank of the cluster CTA a remote copy or store goes to; a constant must be 0 or more.
ir::Value* remoteCtaRank(Specializer& sp, const std::string& fn, const BoundArgs& a) {
  const Val& r = a.get("remote_cta_rank");
  if (r.isIntLike() && r.i < 0)
    raiseError(a.loc("remote_cta_rank"),
               fn + "'s remote_cta_rank must be a CTA rank (0 or more), got " +
                   std::to_string(r.i));
  return sp.requireScalarI32(r, a.loc("remote_cta_rank"), fn + "'s remote_cta_rank");
}

/// A single mbarrier of this CTA.
ir::Value* oneBarrier(Specializer& sp, const std::string& fn, const BoundArgs& a, const char* arg) {
  ir::Value* bar = sp.requireBarrier(a.get(arg), a.loc(arg), fn + "'s " + arg);
  if (isRemoteBarrierView(bar))
    raiseError(a.loc(arg), fn +
                               " does not support a tlx.remote_view of an mbarrier; pass the "
                               "local mbarrier" +
                               (fn == "tlx.barrier_arrive"
                                    ? std::string(" and the peer's rank as remote_cta_rank=")
                                    : std::string(" (this CTA's)")));
  if (bar->type().count != 1)
    raiseError(a.loc(arg), fn + " needs a single barrier, got " + bar->type().str() +
                               "; select one with bars[i] or tlx.local_view(bars, i)");
  return bar;
}

/// Appends the i1 operand of async_dot's use_acc= to `ops`; returns the op's has_use_acc (0
/// without use_acc=).
int64_t useAccumulator(Specializer& sp, const BoundArgs& a, std::vector<ir::Value*>& ops) {
  if (!a.has("use_acc")) return 0;
  const Val& u = a.get("use_acc");
  ops.push_back(u.isConstexpr() ? sp.toRuntime(Val::boolean(truthy(u)), a.loc("use_acc"), DType::I1)
                                : sp.toI1(sp.requireTensorOrScalar(u, a.loc("use_acc"), "use_acc"),
                                          a.call().loc));
  return 1;
}

/// Appends the i1 operand of pred= to `ops`; returns the op's has_pred (0 without pred=).
int64_t predicate(Specializer& sp, const std::string& fn, const BoundArgs& a,
                  std::vector<ir::Value*>& ops) {
  if (!a.has("pred")) return 0;
  const Val& p = a.get("pred");
  if (p.isConstexpr()) {
    ops.push_back(sp.toRuntime(Val::boolean(truthy(p)), a.loc("pred"), DType::I1));
    return 1;
  }
  ir::Value* v = sp.requireTensorOrScalar(p, a.loc("pred"), fn + "'s pred");
  if (!v->type().isScalar()) raiseError(a.loc("pred"), fn + "'s pred must be a scalar");
  ops.push_back(sp.toI1(v, a.call().loc));
  return 1;
}

Val tlxLocalAlloc(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"shape", "dtype", "num", "storage=", "reuse=", "layout="});
  std::vector<int64_t> shape =
      sp.constShape(a.get("shape"), a.loc("shape"), "tlx.local_alloc's shape", a.expr("shape"));
  DType dt = sp.constDType(a.get("dtype"), a.loc("dtype"), "tlx.local_alloc's dtype");
  int64_t num = sp.constInt(a.get("num"), a.loc("num"), "tlx.local_alloc's num", a.expr("num"));
  if (num < 1) raiseError(a.loc("num"), "tlx.local_alloc's num must be at least 1");
  ir::MemorySpace space = ir::MemorySpace::Shared;
  if (a.has("storage")) {
    const Val& s = a.get("storage");
    if (s.kind != Val::Kind::Enum)
      raiseError(a.loc("storage"), "storage must be tlx.storage_kind.smem or "
                                   "tlx.storage_kind.tmem, got " +
                                       describe(s));
    if (s.s == "tmem") space = ir::MemorySpace::Tmem;
  }
  checkLocalAllocSize(shape, dt, num, space, loc);
  const Val* reuse = a.has("reuse") && !a.get("reuse").isNone() ? &a.get("reuse") : nullptr;
  // reuse= a tensor-memory buffered_tensor: TLX's overlay of another allocation's columns.
  ir::Value* overlaid = nullptr;
  std::optional<Val> aliasOf; // reuse= a shared-memory buffered_tensor: its implicit spec
  if (reuse && reuse->isRuntime() && reuse->type().kind == ir::TypeKind::Buffer &&
      space == ir::MemorySpace::Tmem) {
    overlaid = reuse->v;
    const ir::Op* def = overlaid->def();
    if (overlaid->type().space != ir::MemorySpace::Tmem)
      raiseError(a.loc("reuse"), "tlx.local_alloc in tensor memory reuses " +
                                     overlaid->type().str() +
                                     ", which is not in tensor memory (TLX: the storage kinds "
                                     "must match)");
    if (!def || def->code() != OpCode::LocalAlloc || ir::attr::LocalAlloc::hasReuse(*def))
      raiseError(a.loc("reuse"), "tlx.local_alloc's reuse= takes the buffers a tensor-memory "
                                 "local_alloc returned (not a view of them, nor an allocation "
                                 "that itself reuses another)");
  } else if (reuse && reuse->isRuntime() && reuse->type().kind == ir::TypeKind::Buffer) {
    // reuse= a shared-memory buffered_tensor: TLX's alias of that allocation, starting at its
    // first byte. Both become members of one storage_alias_spec without set_buffer_overlap.
    if (reuse->type().space != ir::MemorySpace::Shared)
      raiseError(a.loc("reuse"), "tlx.local_alloc in shared memory reuses " + reuse->type().str() +
                                     ", which is not in shared memory (TLX: the storage kinds "
                                     "must match)");
    reuse = nullptr;
    aliasOf = sp.sharedReuseSpec(a.get("reuse"), a.loc("reuse"));
  } else if (reuse && !(reuse->kind == Val::Kind::Object && reuse->s == "storage_alias_spec")) {
    raiseError(a.loc("reuse"), "tlx.local_alloc's reuse= takes a tlx.storage_alias_spec or the "
                               "buffers of a local_alloc, got " +
                                   describe(*reuse));
  }
  std::vector<ir::NamedAttr> attrs = {
      ir::attr::LocalAlloc::make::storage(space == ir::MemorySpace::Tmem ? "tmem" : "smem")};
  if (a.has("layout")) {
    // The kernel's shared layout: the buffer lies exactly so (LayoutAssignment.cpp).
    if (space == ir::MemorySpace::Tmem)
      raiseError(a.loc("layout"), "tlx.local_alloc's layout= is for shared-memory buffers; "
                                  "tensor memory has tcgen05's layout");
    for (ir::NamedAttr& at : sharedLayoutAttrs(sp, a.get("layout"), a.loc("layout"), shape))
      attrs.push_back(std::move(at));
  }
  if (overlaid) attrs.push_back(ir::attr::LocalAlloc::make::hasReuse(true));
  ir::Value* alloc = sp.b.create1(
      OpCode::LocalAlloc, overlaid ? std::vector<ir::Value*>{overlaid} : std::vector<ir::Value*>{},
      ir::Type::buffer(dt, shape, num, space), attrs);
  if (reuse && !overlaid) sp.joinStorageAlias(*reuse, alloc->def(), a.loc("reuse"));
  if (aliasOf) sp.joinStorageAlias(*aliasOf, alloc->def(), a.loc("reuse"));
  return Val::runtime(alloc);
}

Val tlxRemoteView(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  // A peer CTA's copy of a barrier. No Hopper operation takes one (as in TLX: barrier_arrive
  // maps the barrier itself, given remote_cta_rank=); every barrier operand refuses it.
  BoundArgs a(call, {"local_allocated_buffer", "remote_cta_rank"});
  ir::Value* bar = sp.requireBarrier(a.get("local_allocated_buffer"),
                                     a.loc("local_allocated_buffer"), "tlx.remote_view's buffer");
  if (bar->type().count != 1)
    raiseError(a.loc("local_allocated_buffer"),
               "tlx.remote_view needs a single barrier, got " + bar->type().str() +
                   "; select one with bars[i] or tlx.local_view(bars, i)");
  sp.requireScalarI32(a.get("remote_cta_rank"), a.loc("remote_cta_rank"), "remote_cta_rank");
  return Val::runtime(sp.b.create1(OpCode::LocalView, {bar, sp.b.i32(0)}, bar->type(),
                                   {ir::attr::LocalView::make::remoteView(true)}));
}

Val tlxLocalView(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"local_allocated_buffers", "buffer_idx"});
  const Val& base = a.get("local_allocated_buffers");
  if (base.isRuntime() && isRemoteBarrierView(base.v))
    raiseError(a.loc("local_allocated_buffers"),
               "tlx.local_view of a tlx.remote_view is not supported; view the local barrier");
  if (!base.isRuntime() ||
      (base.type().kind != ir::TypeKind::Buffer && base.type().kind != ir::TypeKind::Barrier))
    raiseError(a.loc("local_allocated_buffers"),
               "tlx.local_view needs buffers (tlx.local_alloc) or barriers "
               "(tlx.alloc_barriers), got " +
                   kindName(base));
  const Val& idx = a.get("buffer_idx");
  if (idx.isIntLike() && (idx.i < 0 || idx.i >= base.type().count))
    raiseError(a.loc("buffer_idx"),
               "index " + std::to_string(idx.i) + " is out of range for " + base.type().str());
  ir::Value* i = sp.requireScalarI32(idx, a.loc("buffer_idx"), "a buffer index");
  ir::Type t = base.type();
  if (t.kind == ir::TypeKind::Buffer && isBufferView(base.v)) {
    // Indexing one buffer (a view, as TLX's num == 0): row i of it, or element i of a 1-D
    // buffer as a [1] view.
    int64_t rows = t.shape.empty() ? 1 : t.shape[0];
    if (idx.isIntLike() && (idx.i < 0 || idx.i >= rows))
      raiseError(a.loc("buffer_idx"), "index " + std::to_string(idx.i) +
                                          " is out of range for dimension 0 of the view " +
                                          t.str());
    t.shape = t.shape.size() > 1 ? std::vector<int64_t>(t.shape.begin() + 1, t.shape.end())
                                 : std::vector<int64_t>{1};
    return Val::runtime(sp.b.create1(OpCode::LocalView, {base.v, i}, t,
                                     {ir::attr::LocalView::make::subview(true)}));
  }
  t.count = 1;
  return Val::runtime(sp.b.create1(OpCode::LocalView, {base.v, i}, t));
}

/// One mode list of a tlx.layout (`(32, 4, 2)`, or a single int for one mode) as ints.
std::vector<int64_t> layoutModes(Specializer& sp, const Val& v, SourceLoc loc,
                                 const std::string& what) {
  std::vector<int64_t> out;
  if (v.kind == Val::Kind::Tuple) {
    for (const Val& e : v.elts) out.push_back(sp.constInt(e, loc, what));
  } else {
    out.push_back(sp.constInt(v, loc, what));
  }
  return out;
}

const char* const kLayoutForm =
    "tlx.layout(shape=(thread_shape, value_shape), stride=(thread_stride, value_stride)), each "
    "a tuple of power-of-two extents and their flat row-major offsets into the tile";

/// tlx.layout(shape=, stride=): a CuTe-style thread-value register layout for local_load's
/// layout=, kept as a compile-time object ("layout": elts = {thread extents, value extents,
/// thread strides, value strides}, each a tuple of ints).
Val tlxLayout(Specializer& sp, const std::string&, CallSite& call) {
  BoundArgs a(call, {"spec=", "shape=", "stride="});
  if (a.has("spec")) {
    // tlx.layout(swizzled_layout(...)) is that shared layout (TLX resolves the unswizzled one
    // to a swizzled_shared_layout_encoding at once; both lie alike).
    const Val& spec = a.get("spec");
    if (spec.kind == Val::Kind::Object && spec.s == "swizzled_layout") return spec;
    raiseError(a.loc("spec"), "tlx.layout(" + describe(spec) +
                                  "): tlx.layout takes a tlx.swizzled_layout(...) or " +
                                  kLayoutForm);
  }
  if (!a.has("shape") || !a.has("stride"))
    raiseError(call.loc, std::string("tlx.layout needs shape= and stride=: ") + kLayoutForm);
  std::vector<Val> parts;
  for (const char* key : {"shape", "stride"}) {
    const Val& v = a.get(key);
    if (v.kind != Val::Kind::Tuple || v.elts.size() != 2)
      raiseError(a.loc(key), std::string("tlx.layout's ") + key +
                                 " must be a (thread, value) pair, got " + describe(v) + "; " +
                                 kLayoutForm);
  }
  for (int part = 0; part < 2; ++part) {
    const char* side = part == 0 ? "thread" : "value";
    std::vector<int64_t> ext = layoutModes(sp, a.get("shape").elts[size_t(part)], a.loc("shape"),
                                           std::string("tlx.layout's ") + side + " shape");
    std::vector<int64_t> str = layoutModes(sp, a.get("stride").elts[size_t(part)], a.loc("stride"),
                                           std::string("tlx.layout's ") + side + " stride");
    if (ext.size() != str.size())
      raiseError(a.loc("stride"), std::string("tlx.layout: the ") + side + " shape has " +
                                      std::to_string(ext.size()) + " modes but its stride " +
                                      std::to_string(str.size()) + "; " + kLayoutForm);
    for (size_t i = 0; i < ext.size(); ++i) {
      if (ext[i] < 1 || (ext[i] & (ext[i] - 1)) != 0)
        raiseError(a.loc("shape"), std::string("tlx.layout: ") + side + " mode " +
                                       std::to_string(i) + " has extent " + std::to_string(ext[i]) +
                                       "; every mode's extent must be a power of two");
      if (str[i] < 0)
        raiseError(a.loc("stride"), std::string("tlx.layout: ") + side + " mode " +
                                        std::to_string(i) + " has stride " +
                                        std::to_string(str[i]) +
                                        "; strides are flat offsets (0 or more)");
    }
    std::vector<Val> e, s;
    for (int64_t x : ext) e.push_back(Val::integer(x));
    for (int64_t x : str) s.push_back(Val::integer(x));
    parts.push_back(Val::tuple(std::move(e)));
    parts.push_back(Val::tuple(std::move(s)));
  }
  // {thread ext, thread stride, value ext, value stride}
  return Val::object("layout", 0, std::move(parts));
}

/// The flat per-bit offsets of a mode list: a mode (2^k, s) gives s, 2s, ..., 2^(k-1) s.
std::vector<int64_t> bitOffsets(const Val& ext, const Val& str) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < ext.elts.size(); ++i)
    for (int64_t b = 1; b < ext.elts[i].i; b <<= 1) out.push_back(str.elts[i].i * b);
  return out;
}

/// GF(2) rank of flat offsets (bit vectors of a power-of-two tile's row-major index).
int gf2Rank(std::vector<int64_t> v) {
  int rank = 0;
  for (int bit = 62; bit >= 0; --bit) {
    auto pivot = std::find_if(v.begin(), v.end(), [&](int64_t x) { return (x >> bit) & 1; });
    if (pivot == v.end()) continue;
    int64_t p = *pivot;
    v.erase(pivot);
    for (int64_t& x : v)
      if ((x >> bit) & 1) x ^= p;
    ++rank;
  }
  return rank;
}

/// Sets `op`'s has_layout / reg_offsets / lane_offsets / warp_offsets to the register layout
/// `l` (a tlx.layout of shape / stride modes) gives a tile of `shape`; what names it in errors.
void setRegisterLayout(ir::Op& op, const std::string& what, const Val& l, SourceLoc loc,
                       const std::vector<int64_t>& shape) {
  if (l.kind != Val::Kind::Object || l.s != "layout")
    raiseError(loc, what + " takes a register layout, " + kLayoutForm + "; got " + describe(l));
  // As TLX: thread bits below log2(32) are lanes, the rest warps; value bits are registers.
  std::vector<int64_t> thread = bitOffsets(l.elts[0], l.elts[1]);
  std::vector<int64_t> regs = bitOffsets(l.elts[2], l.elts[3]);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (thread.size() < 5)
    raiseError(loc, what + ": the layout's thread modes give " +
                        std::to_string(int64_t(1) << thread.size()) +
                        " threads; a layout spans at least a warp's 32 lanes");
  for (int64_t x : regs)
    if (x >= numel)
      raiseError(loc, what + ": the layout's value offset " + std::to_string(x) +
                          " lies outside the " + dims(shape) + " tile (" + std::to_string(numel) +
                          " elements)");
  for (int64_t x : thread)
    if (x >= numel)
      raiseError(loc, what + ": the layout's thread offset " + std::to_string(x) +
                          " lies outside the " + dims(shape) + " tile (" + std::to_string(numel) +
                          " elements)");
  std::vector<int64_t> all = regs;
  all.insert(all.end(), thread.begin(), thread.end());
  if ((int64_t(1) << gf2Rank(all)) != numel)
    raiseError(loc, what + ": the layout reaches " + std::to_string(int64_t(1) << gf2Rank(all)) +
                        " of the " + dims(shape) + " tile's " + std::to_string(numel) +
                        " elements; it must cover the tile");
  op.setAttr("has_layout", int64_t(1));
  op.setAttr("reg_offsets", regs);
  op.setAttr("lane_offsets", std::vector<int64_t>(thread.begin(), thread.begin() + 5));
  op.setAttr("warp_offsets", std::vector<int64_t>(thread.begin() + 5, thread.end()));
}

Val tlxLocalLoad(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"src", "token=", "layout="});
  ir::Value* buf = oneBuffer(sp, fn, a, "src");
  ir::Op* op = sp.b.create(OpCode::LocalLoad, {buf},
                           {ir::Type::tensor(buf->type().elem, buf->type().shape)});
  if (a.has("layout"))
    setRegisterLayout(*op, fn + "'s layout=", a.get("layout"), a.loc("layout"), buf->type().shape);
  return Val::runtime(op->result());
}

/// tlx.assert_same_layout(lhs, rhs): rhs another tensor or buffer, or a register layout.
Val tlxAssertSameLayout(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"lhs", "rhs"});
  const Val& lhs = a.get("lhs");
  const Val& rhs = a.get("rhs");
  auto laidOut = [](const Val& v) {
    return v.isRuntime() && (v.type().kind == ir::TypeKind::Buffer ||
                             (v.type().kind == ir::TypeKind::Value && !v.type().shape.empty()));
  };
  if (!laidOut(lhs))
    raiseError(a.loc("lhs"),
               "tlx.assert_same_layout takes a tensor or a buffer, got " + kindName(lhs));
  if (laidOut(rhs)) {
    if (rhs.type().kind != lhs.type().kind || rhs.type().shape != lhs.type().shape)
      raiseError(a.loc("rhs"), "tlx.assert_same_layout compares values of one kind and shape; "
                               "got " +
                                   lhs.type().str() + " and " + rhs.type().str());
    ir::Op* op = sp.b.create(OpCode::AssertSameLayout, {lhs.v, rhs.v}, {});
    ir::attr::AssertSameLayout::set::hasRhs(*op, true);
    return Val::none();
  }
  if (lhs.type().kind != ir::TypeKind::Value)
    raiseError(a.loc("rhs"), "tlx.assert_same_layout of a buffer compares it with another "
                             "buffer; a layout object is compared with tensors only, got " +
                                 describe(rhs));
  ir::Op* op = sp.b.create(OpCode::AssertSameLayout, {lhs.v}, {});
  setRegisterLayout(*op, "tlx.assert_same_layout's rhs", rhs, a.loc("rhs"), lhs.type().shape);
  return Val::none();
}

Val tlxLocalStore(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"dst", "src"});
  ir::Value* buf = oneBuffer(sp, fn, a, "dst");
  const Val& v = a.get("src");
  ir::Value* x = v.isNumber()
                     ? sp.constant(v, ir::Type::tensor(buf->type().elem, buf->type().shape))
                     : sp.requireTensorOrScalar(v, a.loc("src"), "tlx.local_store's value");
  if (x->type().isScalar()) x = sp.broadcastTo(x, buf->type().shape, loc);
  if (x->type().shape != buf->type().shape)
    raiseError(a.loc("src"), "tlx.local_store: the value is " + x->type().str() +
                                 " but the buffer holds " + dims(buf->type().shape) + " tiles");
  if (x->type().elem != buf->type().elem)
    raiseError(a.loc("src"),
               "tlx.local_store: the value is " + x->type().str() + " but the buffer holds " +
                   std::string(ir::tlName(buf->type().elem)) + "; convert it with .to(...)");
  sp.b.create(OpCode::LocalStore, {buf, x}, {});
  return Val::none();
}

Val tlxAsyncRemoteShmemCopy(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  // One bulk copy of this CTA's src buffer to dst's offset in CTA remote_cta_rank, its bytes
  // completed on that CTA's barrier at the offset of `barrier`.
  BoundArgs a(call, {"dst", "src", "remote_cta_rank", "barrier"});
  ir::Value* dst = oneBuffer(sp, fn, a, "dst");
  ir::Value* src = oneBuffer(sp, fn, a, "src");
  for (auto [buf, arg] : {std::pair{dst, "dst"}, std::pair{src, "src"}})
    if (buf->type().space != ir::MemorySpace::Shared)
      raiseError(a.loc(arg), fn + "'s " + arg +
                                 " must be a shared-memory buffer (tlx.storage_kind.smem), got " +
                                 buf->type().str());
  auto bytesOf = [](const ir::Type& t) {
    int64_t n = ir::byteWidth(t.elem);
    for (int64_t d : t.shape) n *= d;
    return n;
  };
  if (bytesOf(dst->type()) != bytesOf(src->type()))
    raiseError(a.loc("dst"), fn + ": dst is " + dst->type().str() + " (" +
                                 std::to_string(bytesOf(dst->type())) + " bytes) but src is " +
                                 src->type().str() + " (" + std::to_string(bytesOf(src->type())) +
                                 " bytes); the copy moves src's bytes into a buffer of that size");
  if (bytesOf(src->type()) % 16 != 0)
    raiseError(a.loc("src"), fn + ": src holds " + std::to_string(bytesOf(src->type())) +
                                 " bytes; a bulk copy moves a multiple of 16 bytes");
  sp.b.create(OpCode::AsyncRemoteCopy,
              {dst, src, remoteCtaRank(sp, fn, a), oneBarrier(sp, fn, a, "barrier")}, {});
  return Val::none();
}

Val tlxRemoteShmemStore(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string fn = "tlx." + name;
  // dst names a buffer of this CTA; the store goes to the same offset in the shared memory of
  // cluster CTA remote_cta_rank (and, for the async form, completes its bytes on that CTA's
  // barrier at the offset of `barrier`).
  bool async = name == "async_remote_shmem_store";
  BoundArgs a = async ? BoundArgs(call, {"dst", "src", "remote_cta_rank", "barrier"})
                      : BoundArgs(call, {"dst", "src", "remote_cta_rank"});
  ir::Value* buf = oneBuffer(sp, fn, a, "dst");
  if (buf->type().space != ir::MemorySpace::Shared)
    raiseError(a.loc("dst"), fn +
                                 "'s dst must be a shared-memory buffer "
                                 "(tlx.storage_kind.smem), got " +
                                 buf->type().str());
  const Val& v = a.get("src");
  ir::Value* x = v.isNumber()
                     ? sp.constant(v, ir::Type::tensor(buf->type().elem, buf->type().shape))
                     : sp.requireTensorOrScalar(v, a.loc("src"), fn + "'s src");
  if (x->type().isScalar()) x = sp.broadcastTo(x, buf->type().shape, loc);
  if (x->type().shape != buf->type().shape)
    raiseError(a.loc("src"), fn + ": src is " + x->type().str() + " but dst holds " +
                                 dims(buf->type().shape) + " tiles; the shapes must match");
  if (x->type().elem != buf->type().elem)
    raiseError(a.loc("src"), fn + ": src is " + x->type().str() + " but dst holds " +
                                 std::string(ir::tlName(buf->type().elem)) +
                                 "; convert it with .to(...)");
  std::vector<ir::Value*> ops{buf, x, remoteCtaRank(sp, fn, a)};
  if (async) ops.push_back(oneBarrier(sp, fn, a, "barrier"));
  sp.b.create(async ? OpCode::AsyncRemoteStore : OpCode::RemoteStore, ops, {});
  return Val::none();
}

Val tlxLocalTrans(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"input", "dims="});
  ir::Value* buf = oneBuffer(sp, fn, a, "input");
  std::vector<int64_t> s = buf->type().shape;
  std::vector<int64_t> order;
  if (a.has("dims"))
    for (const Val& d : a.get("dims").elts) order.push_back(sp.constInt(d, a.loc("dims"), "dims"));
  else
    for (size_t i = s.size(); i-- > 0;) order.push_back(static_cast<int64_t>(i));
  if (order.size() != s.size())
    raiseError(loc, "tlx.local_trans's dims must permute all " + std::to_string(s.size()) +
                        " dimensions");
  std::vector<int64_t> ns;
  for (int64_t d : order) {
    if (d < 0 || d >= static_cast<int64_t>(s.size()))
      raiseError(loc, "tlx.local_trans's dims must be a permutation");
    ns.push_back(s[static_cast<size_t>(d)]);
  }
  ir::Type t = buf->type();
  t.shape = ns;
  return Val::runtime(
      sp.b.create1(OpCode::LocalTrans, {buf}, t, {ir::attr::LocalTrans::make::order(order)}));
}

Val tlxLocalSlice(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string fn = "tlx." + name;
  std::vector<int64_t> offs, sizes;
  ir::Value* buf;
  if (name == "subslice") {
    // tlx.subslice(buf, offset, size): TLX's column slice of a tensor-memory buffer, every row
    // kept (local_slice with offsets [0, offset] and sizes [rows, size]).
    BoundArgs a(call, {"local_allocated_buffer", "offset", "size"});
    buf = oneBuffer(sp, fn, a, "local_allocated_buffer");
    if (buf->type().space != ir::MemorySpace::Tmem || buf->type().shape.size() != 2)
      raiseError(a.loc("local_allocated_buffer"),
                 fn + " slices the columns of a 2-D tensor-memory buffer, got " +
                     buf->type().str() + "; use tlx.local_slice");
    offs = {0, sp.constInt(a.get("offset"), a.loc("offset"), "tlx.subslice's offset")};
    sizes = {buf->type().shape[0],
             sp.constInt(a.get("size"), a.loc("size"), "tlx.subslice's size")};
  } else {
    BoundArgs a(call, {"input", "offsets", "shapes"});
    buf = oneBuffer(sp, fn, a, "input");
    for (const Val& o : a.get("offsets").elts)
      offs.push_back(sp.constInt(o, a.loc("offsets"), "a slice offset"));
    sizes = sp.constShape(a.get("shapes"), a.loc("shapes"), "tlx.local_slice's shapes");
  }
  const auto& s = buf->type().shape;
  if (offs.size() != s.size() || sizes.size() != s.size())
    raiseError(loc, "tlx.local_slice needs one offset and one size per dimension of " +
                        buf->type().str());
  for (size_t i = 0; i < s.size(); ++i)
    if (offs[i] < 0 || offs[i] + sizes[i] > s[i])
      raiseError(loc, fn + ": the slice [" + std::to_string(offs[i]) + ", " +
                          std::to_string(offs[i] + sizes[i]) + ") of dimension " +
                          std::to_string(i) + " lies outside 0.." + std::to_string(s[i]));
  ir::Type t = buf->type();
  t.shape = sizes;
  return Val::runtime(sp.b.create1(
      OpCode::LocalSlice, {buf}, t,
      {ir::attr::LocalSlice::make::offsets(offs), ir::attr::LocalSlice::make::sizes(sizes)}));
}

Val tlxLocalReinterpret(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"src", "dtype", "shape="});
  ir::Value* buf = sp.requireBuffer(a.get("src"), a.loc("src"), "tlx.local_reinterpret's src");
  DType dt = sp.constDType(a.get("dtype"), a.loc("dtype"), "tlx.local_reinterpret's dtype");
  ir::Type t = buf->type();
  std::vector<int64_t> shape = t.shape;
  if (a.has("shape"))
    shape = sp.constShape(a.get("shape"), a.loc("shape"), "tlx.local_reinterpret's shape");
  int64_t oldBytes = t.numElements() * ir::byteWidth(t.elem);
  ir::Type nt = ir::Type::buffer(dt, shape, t.count, t.space);
  int64_t newBytes = nt.numElements() * ir::byteWidth(dt);
  if (t.count > 1 && newBytes > oldBytes && newBytes <= oldBytes * t.count) {
    // As TLX's memdesc_reinterpret of the whole allocation: one tile over all its buffers.
    nt.count = 1;
    return Val::runtime(sp.b.create1(OpCode::LocalReinterpret, {buf}, nt,
                                     {ir::attr::LocalReinterpret::make::whole(true)}));
  }
  if (newBytes > oldBytes)
    raiseError(loc, "tlx.local_reinterpret: " + nt.str() + " needs " + std::to_string(newBytes) +
                        " bytes per buffer but " + t.str() + " has " + std::to_string(oldBytes));
  return Val::runtime(sp.b.create1(OpCode::LocalReinterpret, {buf}, nt));
}

Val tlxAllocBarriers(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string fn = "tlx." + name;
  bool warp = name == "alloc_warp_barrier";
  BoundArgs a = warp ? BoundArgs(call, {"num_barriers", "num_warps=", "num_arrivals="})
                     : BoundArgs(call, {"num_barriers", "arrive_count="});
  int64_t n = sp.constInt(a.get("num_barriers"), a.loc("num_barriers"), fn + "'s num_barriers",
                          a.expr("num_barriers"));
  if (n < 1) raiseError(a.loc("num_barriers"), fn + "'s num_barriers must be at least 1");
  if (n > ir::kMaxSharedBytes / 8)
    raiseError(a.loc("num_barriers"),
               fn + "'s num_barriers=" + std::to_string(n) + " needs " + std::to_string(n) +
                   " x 8 bytes of shared memory; a block has at most " +
                   std::to_string(ir::kMaxSharedBytes) + " bytes on any target");
  std::vector<ir::NamedAttr> attrs;
  if (warp) {
    int64_t w =
        a.has("num_warps") ? sp.constInt(a.get("num_warps"), a.loc("num_warps"), "num_warps") : 1;
    int64_t k = a.has("num_arrivals")
                    ? sp.constInt(a.get("num_arrivals"), a.loc("num_arrivals"), "num_arrivals")
                    : 1;
    if (w < 1 || k < 1) raiseError(loc, fn + "'s num_warps and num_arrivals must be positive");
    attrs = {ir::attr::AllocBarriers::make::arriveCount(w * 32 * k),
             ir::attr::AllocBarriers::make::warp(true), ir::attr::AllocBarriers::make::numWarps(w),
             ir::attr::AllocBarriers::make::numArrivals(k)};
  } else {
    int64_t c = a.has("arrive_count") ? sp.constInt(a.get("arrive_count"), a.loc("arrive_count"),
                                                    "arrive_count", a.expr("arrive_count"))
                                      : 1;
    if (c < 1) raiseError(a.loc("arrive_count"), "arrive_count must be at least 1");
    attrs = {ir::attr::AllocBarriers::make::arriveCount(c),
             ir::attr::AllocBarriers::make::warp(false)};
  }
  return Val::runtime(sp.b.create1(OpCode::AllocBarriers, {}, ir::Type::barrier(n), attrs));
}

Val tlxBarrierExpectBytes(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"bar", "size", "pred="});
  ir::Value* bar = oneBarrier(sp, fn, a, "bar");
  std::vector<ir::Value*> ops{bar,
                              sp.requireScalarI32(a.get("size"), a.loc("size"), "the byte count")};
  int64_t hasPred = predicate(sp, fn, a, ops);
  sp.b.create(OpCode::BarrierExpectBytes, ops, {},
              {ir::attr::BarrierExpectBytes::make::hasPred(hasPred)});
  return Val::none();
}

Val tlxBarrierWait(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"bar", "phase", "pred="});
  ir::Value* bar = oneBarrier(sp, fn, a, "bar");
  // A phase is a parity: the lowest bit of a run-time phase counts (codegen and interpreter
  // alike); a constant other than 0 or 1 is a mistake (ptxas refuses it).
  const Val& phase = a.get("phase");
  if (phase.isIntLike() && phase.i != 0 && phase.i != 1)
    raiseError(a.loc("phase"), "tlx.barrier_wait's phase is the parity of the phase to wait "
                               "for: 0 or 1, got " +
                                   std::to_string(phase.i) + " (write (n) & 1 for phase n)");
  std::vector<ir::Value*> ops{bar, sp.requireScalarI32(phase, a.loc("phase"), "the phase")};
  int64_t hasPred = predicate(sp, fn, a, ops);
  sp.b.create(OpCode::BarrierWait, ops, {}, {ir::attr::BarrierWait::make::hasPred(hasPred)});
  return Val::none();
}

Val tlxBarrierArrive(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"bar", "arrive_count=", "remote_cta_rank=", "pred="});
  ir::Value* bar = oneBarrier(sp, fn, a, "bar");
  std::vector<ir::Value*> ops{bar};
  int64_t count = a.has("arrive_count") ? sp.constInt(a.get("arrive_count"), a.loc("arrive_count"),
                                                      "arrive_count", a.expr("arrive_count"))
                                        : 1;
  if (count < 1) raiseError(a.loc("arrive_count"), "arrive_count must be at least 1");
  int64_t hasRemote = 0;
  if (a.has("remote_cta_rank")) {
    ops.push_back(
        sp.requireScalarI32(a.get("remote_cta_rank"), a.loc("remote_cta_rank"), "remote_cta_rank"));
    hasRemote = 1;
  }
  int64_t hasPred = predicate(sp, fn, a, ops);
  sp.b.create(OpCode::BarrierArrive, ops, {},
              {ir::attr::BarrierArrive::make::arriveCount(count),
               ir::attr::BarrierArrive::make::hasRemoteCtaRank(hasRemote),
               ir::attr::BarrierArrive::make::hasPred(hasPred)});
  return Val::none();
}

Val tlxNamedBarrier(Specializer& sp, const std::string& name, CallSite& call) {
  BoundArgs a(call, {"bar_id", "num_threads"});
  const Val &id = a.get("bar_id"), &n = a.get("num_threads");
  if (id.isIntLike() && (id.i < 0 || id.i > 15))
    raiseError(a.loc("bar_id"), "named barrier ids run from 0 to 15, got " + std::to_string(id.i));
  if (n.isIntLike() && (n.i <= 0 || n.i % 32 != 0 || n.i > 1024))
    raiseError(a.loc("num_threads"), "a named barrier's num_threads must be a multiple of 32 "
                                     "(whole warps) from 32 to 1024 (a CTA's threads), got " +
                                         std::to_string(n.i));
  sp.b.create(name == "named_barrier_wait" ? OpCode::NamedBarrierWait : OpCode::NamedBarrierArrive,
              {sp.requireScalarI32(id, a.loc("bar_id"), "bar_id"),
               sp.requireScalarI32(n, a.loc("num_threads"), "num_threads")},
              {});
  return Val::none();
}

Val tlxFence(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  std::string kind = name == "fence_async_shared"            ? "async_shared"
                     : name == "fence_mbarrier_init_cluster" ? "mbarrier_init_cluster"
                                                             : "";
  if (name == "fence") {
    // TLX names the argument scope; kind is warpweave's earlier name for it.
    BoundArgs a(call, {"scope=", "kind="});
    const char* arg = a.has("scope") ? "scope" : "kind";
    if (a.has("scope") == a.has("kind"))
      raiseError(loc, "tlx.fence takes one scope: \"gpu\", \"sys\", \"async_shared\" or "
                      "\"mbarrier_init_cluster\"");
    const Val& k = a.get(arg);
    if (k.kind != Val::Kind::String ||
        (k.s != "async_shared" && k.s != "mbarrier_init_cluster" && k.s != "gpu" && k.s != "sys"))
      raiseError(a.loc(arg), "tlx.fence's scope must be \"gpu\", \"sys\", \"async_shared\" or "
                             "\"mbarrier_init_cluster\", got " +
                                 describe(k));
    kind = k.s;
  } else {
    BoundArgs a(call, {});
  }
  sp.b.create(OpCode::Fence, {}, {}, {ir::attr::Fence::make::kind(kind)});
  return Val::none();
}

Val tlxClusterBarrier(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {});
  sp.b.create(OpCode::ClusterBarrier, {}, {});
  return Val::none();
}

Val tlxAsyncDescriptorLoad(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"desc", "result", "offsets", "barrier", "pred=", "cache_modifier=",
                     "eviction_policy=", "multicast_targets=", "two_ctas="});
  ir::Value* d = sp.requireDescriptor(a.get("desc"), a.loc("desc"), fn + "'s desc");
  ir::Value* buf = oneBuffer(sp, fn, a, "result");
  ir::Value* bar = oneBarrier(sp, fn, a, "barrier");
  if (!ir::sameTmaTile(d->type().shape, buf->type().shape) || buf->type().elem != d->type().elem)
    raiseError(a.loc("result"), fn + ": the buffer " + buf->type().str() +
                                    " does not match the descriptor's block " + d->type().str());
  const Val& offs = a.get("offsets");
  if (offs.kind != Val::Kind::Tuple || offs.elts.size() != d->type().shape.size())
    raiseError(a.loc("offsets"), fn + " needs " + std::to_string(d->type().shape.size()) +
                                     " offsets, one per dimension of " + d->type().str());
  std::vector<ir::Value*> ops{d, buf, bar};
  for (const Val& o : offs.elts)
    ops.push_back(sp.requireScalarI32(o, a.loc("offsets"), "an offset"));
  int64_t hasPred = predicate(sp, fn, a, ops);
  // Constant target ranks make the mask attribute; ranks known only at run time (the peer
  // of cluster_cta_rank(), say) follow the predicate as i32 operands.
  int64_t mask = 0, runtimeTargets = 0;
  if (a.has("multicast_targets")) {
    const Val& targets = a.get("multicast_targets");
    if (targets.kind != Val::Kind::Tuple)
      raiseError(a.loc("multicast_targets"),
                 "multicast_targets is a list of CTA ranks in the cluster, got " +
                     kindName(targets));
    for (const Val& t : targets.elts) {
      if (!t.isConstexpr()) {
        ops.push_back(
            sp.requireScalarI32(t, a.loc("multicast_targets"), "a multicast target CTA rank"));
        ++runtimeTargets;
        continue;
      }
      int64_t r = sp.constInt(t, a.loc("multicast_targets"), "a multicast target CTA rank");
      if (r < 0 || r > 15)
        raiseError(a.loc("multicast_targets"), "multicast CTA ranks run from 0 to 15");
      mask |= int64_t(1) << r;
    }
  }
  std::vector<ir::NamedAttr> attrs = {
      ir::attr::AsyncDescLoad::make::hasPred(hasPred),
      ir::attr::AsyncDescLoad::make::multicastMask(mask),
      ir::attr::AsyncDescLoad::make::multicastOperands(runtimeTargets)};
  // two_ctas: a load of a CTA pair's operand (Blackwell 2-CTA MMA); its bytes complete on the
  // pair leader's barrier.
  if (a.has("two_ctas") && sp.constBool(a.get("two_ctas"), a.loc("two_ctas"), "two_ctas")) {
    if (mask || runtimeTargets)
      raiseError(a.loc("two_ctas"), fn + " with two_ctas=True and multicast_targets is not "
                                         "supported; load each CTA's part without multicast");
    attrs.push_back(ir::attr::AsyncDescLoad::make::twoCtas(true));
  }
  std::string cache =
      cacheModifier(a.get("cache_modifier"), a.loc("cache_modifier"), OpCode::AsyncDescLoad, fn);
  std::string evict =
      evictionPolicy(a.get("eviction_policy"), a.loc("eviction_policy"), OpCode::AsyncDescLoad, fn);
  if (!cache.empty()) attrs.push_back(ir::attr::AsyncDescLoad::make::cache(cache));
  if (!evict.empty()) attrs.push_back(ir::attr::AsyncDescLoad::make::evict(evict));
  sp.b.create(OpCode::AsyncDescLoad, ops, {}, attrs);
  return Val::none();
}

Val tlxAsyncDescriptorStore(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"desc", "source", "offsets", "eviction_policy=", "store_reduce="});
  ir::Value* d = sp.requireDescriptor(a.get("desc"), a.loc("desc"), fn + "'s desc");
  ir::Value* buf = oneBuffer(sp, fn, a, "source");
  // An L2 hint, recorded as async_descriptor_load records its own.
  std::vector<ir::NamedAttr> attrs;
  if (a.has("eviction_policy")) {
    std::string evict = evictionPolicy(a.get("eviction_policy"), a.loc("eviction_policy"),
                                       OpCode::AsyncDescStore, fn);
    if (!evict.empty()) attrs.push_back(ir::attr::AsyncDescStore::make::evict(evict));
  }
  // store_reduce: TLX's TMA reduction (cp.reduce.async.bulk.tensor), with the element types the
  // PTX ISA allows each operation (its type comes from the tensor map).
  if (a.has("store_reduce")) {
    const Val& r = a.get("store_reduce");
    static const std::vector<std::string> kinds = {"", "add", "min", "max", "and", "or", "xor"};
    if (r.kind != Val::Kind::String || std::find(kinds.begin(), kinds.end(), r.s) == kinds.end())
      raiseError(a.loc("store_reduce"), fn +
                                            "'s store_reduce must be \"\", \"add\", \"min\", "
                                            "\"max\", \"and\", \"or\" or \"xor\", got " +
                                            describe(r));
    const DType e = d->type().elem;
    const bool i32 = e == DType::I32 || e == DType::U32, i64 = e == DType::I64 || e == DType::U64;
    const bool half = e == DType::F16 || e == DType::BF16;
    const bool ok = r.s.empty() ||
                    (r.s == "add" && (half || e == DType::F32 || i32 || e == DType::U64)) ||
                    ((r.s == "min" || r.s == "max") && (half || i32 || e == DType::I64)) ||
                    ((r.s == "and" || r.s == "or" || r.s == "xor") && (i32 || i64));
    if (!ok)
      raiseError(a.loc("store_reduce"),
                 fn + " with store_reduce=\"" + r.s + "\" of " + std::string(ir::tlName(e)) +
                     ": the TMA reduction takes add of fp16 / bf16 / fp32 / int32 / uint32 / "
                     "uint64, min and max of fp16 / bf16 / int32 / uint32 / int64, and / or / xor "
                     "of 32- and 64-bit integers (PTX ISA, cp.reduce.async.bulk.tensor)");
    if (!r.s.empty()) attrs.push_back(ir::attr::AsyncDescStore::make::reduce(r.s));
  }
  if (!ir::sameTmaTile(d->type().shape, buf->type().shape) || buf->type().elem != d->type().elem)
    raiseError(a.loc("source"), fn + ": the buffer " + buf->type().str() +
                                    " does not match the descriptor's block " + d->type().str());
  const Val& offs = a.get("offsets");
  if (offs.kind != Val::Kind::Tuple || offs.elts.size() != d->type().shape.size())
    raiseError(a.loc("offsets"), fn + " needs one offset per dimension of " + d->type().str());
  std::vector<ir::Value*> ops{d, buf};
  for (const Val& o : offs.elts)
    ops.push_back(sp.requireScalarI32(o, a.loc("offsets"), "an offset"));
  sp.b.create(OpCode::AsyncDescStore, ops, {}, attrs);
  return Val::none();
}

Val tlxAsyncWait(Specializer& sp, const std::string& name, CallSite& call) {
  BoundArgs a = name == "async_load_wait_group" ? BoundArgs(call, {"pendings=", "tokens="})
                                                : BoundArgs(call, {"pendings="});
  int64_t p = a.has("pendings") ? sp.constInt(a.get("pendings"), a.loc("pendings"), "pendings",
                                              a.expr("pendings"))
                                : 0;
  if (p < 0) raiseError(a.loc("pendings"), "pendings must be >= 0");
  sp.b.create(name == "async_load_wait_group" ? OpCode::AsyncWaitGroup : OpCode::AsyncDescStoreWait,
              {}, {},
              {name == "async_load_wait_group" ? ir::attr::AsyncWaitGroup::make::pendings(p)
                                               : ir::attr::AsyncDescStoreWait::make::pendings(p)});
  return Val::none();
}

Val tlxAsyncLoad(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"src", "result", "mask=", "other=", "bulk=", "bulk_size=", "barrier="});
  if (a.has("bulk") && sp.constBool(a.get("bulk"), a.loc("bulk"), "tlx.async_load's bulk"))
    return sp.asyncBulkCopy(a, true);
  for (const char* arg : {"bulk_size", "barrier"})
    if (a.has(arg))
      raiseError(a.loc(arg), std::string("tlx.async_load's ") + arg + "= needs bulk=True");
  const Val& src = a.get("src");
  if (!src.isRuntime() || !src.type().isPointer())
    raiseError(a.loc("src"),
               "tlx.async_load's src must be a tensor of pointers, got " + kindName(src));
  ir::Value* buf = oneBuffer(sp, fn, a, "result");
  if (buf->type().elem != src.type().elem)
    raiseError(a.loc("result"), "tlx.async_load: the buffer " + buf->type().str() +
                                    " does not hold the pointee type " + src.type().str());
  std::vector<int64_t> shape = buf->type().shape;
  ir::Value* ptr = sp.broadcastTo(src.v, shape, a.loc("src"));
  std::vector<ir::Value*> ops{ptr, buf};
  int64_t hasMask = 0, hasOther = 0;
  if (a.has("mask")) {
    ops.push_back(sp.broadcastTo(
        sp.toI1(sp.requireTensorOrScalar(a.get("mask"), a.loc("mask"), "mask"), loc), shape, loc));
    hasMask = 1;
  }
  if (a.has("other")) {
    if (!hasMask) raiseError(a.loc("other"), "tlx.async_load's 'other' needs a 'mask'");
    const Val& o = a.get("other");
    ops.push_back(o.isNumber()
                      ? sp.constant(o, ir::Type::tensor(buf->type().elem, shape))
                      : sp.broadcastTo(sp.cast(sp.requireTensorOrScalar(o, a.loc("other"), "other"),
                                               buf->type().elem, loc),
                                       shape, loc));
    hasOther = 1;
  }
  return Val::runtime(sp.b.create1(OpCode::AsyncLoad, ops, ir::Type::token(),
                                   {ir::attr::AsyncLoad::make::hasMask(hasMask),
                                    ir::attr::AsyncLoad::make::hasOther(hasOther)}));
}

Val tlxAsyncStore(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"dst_global_ptr", "src_smem", "size"});
  return sp.asyncBulkCopy(a, false);
}

Val tlxPrefetch(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"pointer", "level=", "mask=", "tensormap="});
  if (a.has("tensormap") &&
      sp.constBool(a.get("tensormap"), a.loc("tensormap"), fn + "'s tensormap")) {
    ir::Value* d = sp.requireDescriptor(a.get("pointer"), a.loc("pointer"),
                                        fn + "(..., tensormap=True)'s pointer");
    sp.b.create(OpCode::PrefetchTensormap, {d}, {});
    return Val::none();
  }
  std::string level = "L2";
  if (a.has("level")) {
    const Val& l = a.get("level");
    if (l.kind != Val::Kind::String || (l.s != "L1" && l.s != "L2"))
      raiseError(a.loc("level"), fn + "'s level must be \"L1\" or \"L2\", got " + describe(l));
    level = l.s;
  }
  const Val& p = a.get("pointer");
  if (!p.isRuntime() || !p.type().isPointer())
    raiseError(a.loc("pointer"), fn + "'s pointer must be a pointer or a tensor of pointers, got " +
                                     kindName(p) +
                                     " (a tensor descriptor's tensor map takes tensormap=True)");
  ir::Value* ptr = p.v;
  std::vector<ir::Value*> ops{ptr};
  int64_t hasMask = 0;
  if (a.has("mask")) {
    ir::Value* m =
        sp.toI1(sp.requireTensorOrScalar(a.get("mask"), a.loc("mask"), fn + "'s mask"), loc);
    std::vector<int64_t> shape =
        sp.broadcastShapes(ptr->type().shape, m->type().shape, loc, "tlx.prefetch");
    ops = {sp.broadcastTo(ptr, shape, a.loc("pointer")), sp.broadcastTo(m, shape, a.loc("mask"))};
    hasMask = 1;
  }
  sp.b.create(OpCode::Prefetch, ops, {},
              {ir::attr::Prefetch::make::level(level), ir::attr::Prefetch::make::hasMask(hasMask)});
  return Val::none();
}

Val tlxAsyncDescriptorPrefetchTensor(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"desc", "offsets", "pred=", "eviction_policy="});
  ir::Value* d = sp.requireDescriptor(a.get("desc"), a.loc("desc"), fn + "'s desc");
  const Val& offs = a.get("offsets");
  if (offs.kind != Val::Kind::Tuple || offs.elts.size() != d->type().shape.size())
    raiseError(a.loc("offsets"), fn + " needs " + std::to_string(d->type().shape.size()) +
                                     " offsets, one per dimension of " + d->type().str());
  std::vector<ir::Value*> ops{d};
  for (const Val& o : offs.elts)
    ops.push_back(sp.requireScalarI32(o, a.loc("offsets"), "an offset"));
  std::vector<ir::NamedAttr> attrs = {
      ir::attr::AsyncDescPrefetch::make::hasPred(predicate(sp, fn, a, ops))};
  if (a.has("eviction_policy")) {
    std::string evict = evictionPolicy(a.get("eviction_policy"), a.loc("eviction_policy"),
                                       OpCode::AsyncDescPrefetch, fn);
    if (!evict.empty()) attrs.push_back(ir::attr::AsyncDescPrefetch::make::evict(evict));
  }
  sp.b.create(OpCode::AsyncDescPrefetch, ops, {}, attrs);
  return Val::none();
}

Val tlxAsyncLoadCommitGroup(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"tokens="});
  return Val::runtime(sp.b.create1(OpCode::AsyncCommitGroup, {}, ir::Type::token()));
}

/// tlx.async_dot into a tensor-memory accumulator (Blackwell tcgen05.mma): A from shared or
/// tensor memory, B from shared memory, acc a TMEM buffer updated in place; `mBarriers` each get
/// one arrival when the MMA (and every earlier one of the issuing thread) completes.
/// What tlx.async_dot_scaled adds to the MMA: the scale buffers and the operands' OCP MX formats.
struct MmaScales {
  ir::Value* a = nullptr;
  ir::Value* b = nullptr;
  std::string aFormat, bFormat;
};

Val tcgen05Mma(Specializer& sp, const std::string& fn, const BoundArgs& a, ir::Value* A,
               ir::Value* B, bool twoCtas, const MmaScales* scales = nullptr) {
  ir::Value* acc = oneBuffer(sp, fn, a, "acc");
  if (acc->type().space != ir::MemorySpace::Tmem)
    raiseError(a.loc("acc"), fn + "'s acc is a shared-memory buffer; a Blackwell MMA "
                                  "accumulates in tensor memory (tlx.storage_kind.tmem)");
  if (A->type().kind != ir::TypeKind::Buffer)
    raiseError(a.loc("A"), fn + " into a tensor-memory accumulator reads A from shared or "
                                "tensor memory, not registers: store it with tlx.local_store");
  if (B->type().space != ir::MemorySpace::Shared)
    raiseError(a.loc("B"), fn + "'s B must be a shared-memory buffer");
  const auto &sa = A->type().shape, &sb = B->type().shape;
  // A CTA pair's MMA: each CTA holds its rows of A and acc and half of B's columns.
  std::vector<int64_t> outShape = {sa[0], twoCtas ? 2 * sb[1] : sb[1]};
  if (acc->type().shape != outShape)
    raiseError(a.loc("acc"), fn + "'s acc is " + acc->type().str() + " but A @ B is " +
                                 dims(outShape) +
                                 (twoCtas ? " (with two_ctas=True, B is this CTA's half of the "
                                            "columns and acc holds them all)"
                                          : ""));
  if (a.has("out_dtype")) {
    DType out = sp.constDType(a.get("out_dtype"), a.loc("out_dtype"), "out_dtype");
    if (out != acc->type().elem)
      raiseError(a.loc("out_dtype"), fn + "'s out_dtype is " + std::string(ir::tlName(out)) +
                                         " but the accumulator holds " +
                                         std::string(ir::tlName(acc->type().elem)));
  }
  std::vector<ir::Value*> ops{A, B, acc};
  if (scales) {
    ops.push_back(scales->a);
    ops.push_back(scales->b);
  }
  const size_t fixedOps = ops.size();
  int64_t hasUseAcc = useAccumulator(sp, a, ops);
  int64_t hasPred = predicate(sp, fn, a, ops);
  if (a.has("mBarriers")) {
    const Val& bars = a.get("mBarriers");
    if (bars.kind != Val::Kind::Tuple)
      raiseError(a.loc("mBarriers"), fn + "'s mBarriers must be a list of mbarriers");
    for (const Val& bar : bars.elts) {
      ir::Value* v = sp.requireBarrier(bar, a.loc("mBarriers"), fn + "'s mBarriers");
      if (v->type().count != 1)
        raiseError(a.loc("mBarriers"), fn + "'s mBarriers needs single barriers, got " +
                                           v->type().str() +
                                           "; select one with bars[i] or tlx.local_view(bars, i)");
      ops.push_back(v);
    }
  }
  // Without mBarriers (and force_async), the MMA is synchronous, as in TLX: it has completed
  // when the call returns.
  const bool sync =
      ops.size() == fixedOps + size_t(hasUseAcc + hasPred) &&
      !(a.has("force_async") && sp.constBool(a.get("force_async"), a.loc("force_async"),
                                             "force_async", a.expr("force_async")));
  std::vector<ir::NamedAttr> attrs = {ir::attr::Tcgen05Mma::make::hasUseAcc(hasUseAcc),
                                      ir::attr::Tcgen05Mma::make::hasPred(hasPred)};
  if (twoCtas) attrs.push_back(ir::attr::Tcgen05Mma::make::twoCtas(true));
  if (sync) attrs.push_back(ir::attr::Tcgen05Mma::make::sync(true));
  if (!scales && a.has("input_precision") && a.get("input_precision").kind == Val::Kind::String)
    attrs.push_back(ir::attr::Tcgen05Mma::make::inputPrecision(a.get("input_precision").s));
  if (scales) {
    attrs.push_back(ir::attr::Tcgen05Mma::make::hasScales(true));
    attrs.push_back(ir::attr::Tcgen05Mma::make::aFormat(scales->aFormat));
    attrs.push_back(ir::attr::Tcgen05Mma::make::bFormat(scales->bFormat));
  }
  sp.b.create(OpCode::Tcgen05Mma, ops, {}, attrs);
  return Val::none();
}

Val tlxTcgen05Commit(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"mBarrier", "two_ctas="});
  std::vector<ir::NamedAttr> attrs = {ir::attr::Tcgen05Commit::make::hasPred(false)};
  if (a.has("two_ctas") && sp.constBool(a.get("two_ctas"), a.loc("two_ctas"), "two_ctas"))
    attrs.push_back(ir::attr::Tcgen05Commit::make::twoCtas(true));
  sp.b.create(OpCode::Tcgen05Commit, {oneBarrier(sp, fn, a, "mBarrier")}, {}, attrs);
  return Val::none();
}

Val tlxAsyncDot(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"A", "B", "acc=", "use_acc=", "pred=", "mBarriers=", "two_ctas=",
                     "force_async=", "input_precision=", "out_dtype="});
  const Val& av = a.get("A");
  if (!av.isRuntime() || !(av.type().kind == ir::TypeKind::Buffer || av.type().isTensor()))
    raiseError(a.loc("A"), "tlx.async_dot's A must be a shared-memory buffer or a register "
                           "tensor, got " +
                               kindName(av));
  ir::Value* A = av.type().kind == ir::TypeKind::Buffer ? oneBuffer(sp, fn, a, "A") : av.v;
  ir::Value* B = oneBuffer(sp, fn, a, "B");
  const auto &sa = A->type().shape, &sb = B->type().shape;
  if (sa.size() != 2 || sb.size() != 2)
    raiseError(loc, "tlx.async_dot needs 2-D operands, got " + A->type().str() + " and " +
                        B->type().str());
  if (sa[1] != sb[0])
    raiseError(loc, "tlx.async_dot shape mismatch: A is " + dims(sa) + " and B is " + dims(sb) +
                        " (A's K = " + std::to_string(sa[1]) +
                        " must equal B's K = " + std::to_string(sb[0]) + ")");
  auto fp8 = [](DType t) { return t == DType::F8E4M3 || t == DType::F8E5M2; };
  if (A->type().elem != B->type().elem && !(fp8(A->type().elem) && fp8(B->type().elem)))
    raiseError(loc, "tlx.async_dot operands must have one dtype (or both be fp8), got " +
                        A->type().str() + " and " + B->type().str());
  const bool twoCtas =
      a.has("two_ctas") && sp.constBool(a.get("two_ctas"), a.loc("two_ctas"), "two_ctas");
  if (a.has("acc") && a.get("acc").isRuntime() && a.get("acc").type().kind == ir::TypeKind::Buffer)
    return tcgen05Mma(sp, fn, a, A, B, twoCtas);
  if (twoCtas)
    raiseError(a.loc("two_ctas"), "tlx.async_dot with two_ctas=True is a Blackwell MMA of a CTA "
                                  "pair into a tensor-memory accumulator; pass acc as a "
                                  "tlx.storage_kind.tmem buffer");
  if (a.has("mBarriers") && !a.get("mBarriers").elts.empty())
    raiseError(a.loc("mBarriers"), "tlx.async_dot's mBarriers are the completion barriers of a "
                                   "Blackwell MMA into a tensor-memory accumulator; pass acc as "
                                   "a tlx.storage_kind.tmem buffer, or leave mBarriers out");
  DType out = a.has("out_dtype")
                  ? sp.constDType(a.get("out_dtype"), a.loc("out_dtype"), "out_dtype")
                  : (ir::isInt(A->type().elem) ? DType::I32 : DType::F32);
  std::vector<int64_t> outShape = {sa[0], sb[1]};
  ir::Value* acc;
  if (a.has("acc")) {
    acc = sp.requireTensorOrScalar(a.get("acc"), a.loc("acc"), "tlx.async_dot's acc");
    if (acc->type().shape != outShape)
      raiseError(a.loc("acc"),
                 "tlx.async_dot's acc is " + acc->type().str() + " but A @ B is " + dims(outShape));
    out = acc->type().elem;
  } else {
    acc = sp.constant(Val::integer(0), ir::Type::tensor(out, outShape));
  }
  std::vector<ir::Value*> ops{A, B, acc};
  int64_t hasUseAcc = useAccumulator(sp, a, ops);
  int64_t hasPred = predicate(sp, fn, a, ops);
  std::vector<ir::NamedAttr> attrs = {ir::attr::AsyncDot::make::hasUseAcc(hasUseAcc),
                                      ir::attr::AsyncDot::make::hasPred(hasPred)};
  if (a.has("input_precision") && a.get("input_precision").kind == Val::Kind::String)
    attrs.push_back(ir::attr::AsyncDot::make::inputPrecision(a.get("input_precision").s));
  return Val::runtime(sp.b.create1(OpCode::AsyncDot, ops, acc->type(), attrs));
}

Val tlxAsyncDotWait(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"pendings", "inp"});
  int64_t p = sp.constInt(a.get("pendings"), a.loc("pendings"), "pendings", a.expr("pendings"));
  const Val& inp = a.get("inp");
  std::vector<ir::Value*> vals;
  bool isTuple = inp.kind == Val::Kind::Tuple;
  for (const Val& v : isTuple ? inp.elts : std::vector<Val>{inp})
    vals.push_back(sp.requireTensorOrScalar(v, a.loc("inp"), "tlx.async_dot_wait's value"));
  std::vector<ir::Type> types;
  for (ir::Value* v : vals) types.push_back(v->type());
  ir::Op* op =
      sp.b.create(OpCode::AsyncDotWait, vals, types, {ir::attr::AsyncDotWait::make::pendings(p)});
  std::vector<Val> outs;
  for (unsigned i = 0; i < op->numResults(); ++i) outs.push_back(Val::runtime(op->result(i)));
  return isTuple ? Val::tuple(std::move(outs)) : outs[0];
}

/// Whether `shape` is one of the shared-memory forms of a [rows, cols] block-scale tile in the
/// cuBLAS block-scaled layout (512-byte chunks of 128 rows x 4 scales, rows / 128 then cols / 4
/// of them), the forms TLX's tmem_copy accepts: [rows / 128, cols / 4, 32, 16],
/// [rows / 128, cols / 4, 32, 4, 4], [1, rows / 128, cols / 4, 2, 256], [rows / 128,
/// cols / 4 * 512]. All of them hold the chunks in one order, so only the shape differs. `mma`:
/// also [rows / 128, cols / 4, 2, 256], which TLX's async_dot_scaled takes (its tmem_copy does
/// not).
bool isPackedScaleShape(const std::vector<int64_t>& shape, int64_t rows, int64_t cols, bool mma) {
  const int64_t r = rows / 128, c = cols / 4;
  const std::vector<std::vector<int64_t>> forms = {
      {r, c, 32, 16}, {r, c, 32, 4, 4}, {1, r, c, 2, 256}, {r, c * 512}};
  if (mma && shape == std::vector<int64_t>{r, c, 2, 256}) return true;
  return std::find(forms.begin(), forms.end(), shape) != forms.end();
}

std::string packedScaleForms(int64_t rows, int64_t cols, bool mma) {
  const std::string r = std::to_string(rows / 128), c = std::to_string(cols / 4);
  return "[1, " + r + ", " + c + ", 2, 256], [" + r + ", " + c + ", 32, 16], [" + r + ", " + c +
         ", 32, 4, 4]" + (mma ? ", [" + r + ", " + c + ", 2, 256]" : std::string()) + " or [" + r +
         ", " + std::to_string(cols / 4 * 512) + "]";
}

/// Scale bytes: e8m0 exponents (uint8, or int8 bits) or nvfp4's ue4m3 (tl.float8e4nv).
bool isScaleDType(DType t) {
  return t == DType::U8 || t == DType::I8 || t == DType::F8E4M3;
}

/// One scale operand of tlx.async_dot_scaled: `cols` scales a row (e8m0 bytes, one per 32
/// elements of K, or nvfp4's ue4m3, one per 16) of `rows` rows. A shared-memory tile holds them
/// in the cuBLAS block-scaled layout ([rows, cols] with `rows` a multiple of 128). A
/// tensor-memory scale tile [R, C] is read by its columns (ir/BlockScaled.h): as an [R', cols]
/// tile, R' = R x C / cols, which must hold the `minRows` rows the MMA reads.
ir::Value* scaleOperand(Specializer& sp, const std::string& fn, const BoundArgs& a, const char* arg,
                        int64_t rows, int64_t minRows, int64_t cols, int64_t block) {
  ir::Value* s = oneBuffer(sp, fn, a, arg);
  const ir::Type& t = s->type();
  const std::string want = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  if (!isScaleDType(t.elem))
    raiseError(a.loc(arg), fn + "'s " + arg + " is " + t.str() +
                               "; block scales are uint8 e8m0 exponents (mxfp8 / mxfp4, one per "
                               "32 elements of K, tlx.local_alloc(..., tl.uint8, ...)) or "
                               "tl.float8e4nv ue4m3 scales (nvfp4, one per 16)");
  if (t.space == ir::MemorySpace::Tmem) {
    if (t.elem == DType::F8E4M3)
      raiseError(a.loc(arg), fn + "'s " + arg + " is " + t.str() +
                                 ": nvfp4's ue4m3 scales in tensor memory are not supported by "
                                 "warpweave yet; pass them in shared memory (the cuBLAS "
                                 "block-scaled layout), which the MMA copies into tensor memory");
    const int64_t viewRows = ir::isTmemScaleTile(t) ? ir::tmemScaleViewRows(t, cols) : 0;
    if (viewRows < minRows)
      raiseError(a.loc(arg),
                 fn + "'s " + arg + " in tensor memory is " + t.str() + "; the MMA reads " +
                     std::to_string(cols) + " scales a row (one per " + std::to_string(block) +
                     " elements of K, rounded up to 4) of " + std::to_string(minRows) +
                     " rows from the buffer's columns, as an [R, " + std::to_string(cols) +
                     "] tile with R = rows x cols / " + std::to_string(cols) +
                     " (64 or a multiple of 128) at least " + std::to_string(minRows) +
                     ": pass a uint8 [R, C] buffer (R 64 or a multiple of 128, C a multiple of "
                     "4) such as [" +
                     std::to_string(minRows) + ", " + std::to_string(cols) + "]");
    return s;
  }
  if (!isPackedScaleShape(t.shape, rows, cols, true))
    raiseError(a.loc(arg), fn + "'s " + arg + " in shared memory is " + t.str() +
                               "; the MMA reads " + want +
                               " scales, a shared-memory tile in the cuBLAS block-scaled layout "
                               "of shape " +
                               packedScaleForms(rows, cols, true));
  return s;
}

/// tlx.async_dot_scaled: tcgen05.mma with block scales, otherwise as async_dot into tensor
/// memory. mxfp8 (e4m3 / e5m2, e8m0 scales of 32), mxfp4 (e2m1 packed two to a uint8 along K,
/// e8m0 scales of 32) and nvfp4 (e2m1, ue4m3 scales of 16); ir/BlockScaled.h.
Val tlxAsyncDotScaled(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"A", "B", "acc", "A_scale", "A_format", "B_scale", "B_format",
                     "use_acc=", "pred=", "mBarriers=", "two_ctas=", "force_async=", "out_dtype="});
  ir::Value* A = oneBuffer(sp, fn, a, "A");
  ir::Value* B = oneBuffer(sp, fn, a, "B");
  const auto &sa = A->type().shape, &sb = B->type().shape;
  if (sa.size() != 2 || sb.size() != 2)
    raiseError(call.loc,
               fn + " needs 2-D operands, got " + A->type().str() + " and " + B->type().str());
  MmaScales scales;
  for (const char* arg : {"A_format", "B_format"}) {
    const Val& f = a.get(arg);
    const std::string s = f.kind == Val::Kind::String ? f.s : std::string();
    if (s != "e2m1" && s != "e4m3" && s != "e5m2")
      raiseError(a.loc(arg), fn + "'s " + arg + " must be 'e2m1', 'e4m3' or 'e5m2', got " +
                                 (f.kind == Val::Kind::String ? "'" + f.s + "'" : kindName(f)));
    (arg[0] == 'A' ? scales.aFormat : scales.bFormat) = s;
  }
  // Both e2m1: mxfp4 / nvfp4 (kind::mxf4 / mxf4nvf4). One e2m1 and one e4m3 / e5m2: the mixed
  // MMA of kind::mxf8f6f4, whose e2m1 operand lies padded in shared memory (ir/BlockScaled.h).
  const bool aFp4 = scales.aFormat == "e2m1", bFp4 = scales.bFormat == "e2m1";
  const bool fp4 = aFp4 && bFp4, mixed = aFp4 != bFp4;
  auto elemName = [](const std::string& f) {
    return f == "e2m1"   ? "tl.uint8 (two e2m1 values a byte, packed along K)"
           : f == "e4m3" ? "tl.float8e4nv"
                         : "tl.float8e5";
  };
  for (auto [v, f, arg] : {std::tuple{A, scales.aFormat, "A"}, std::tuple{B, scales.bFormat, "B"}})
    if (v->type().elem != (f == "e2m1" ? DType::U8 : f == "e4m3" ? DType::F8E4M3 : DType::F8E5M2))
      raiseError(a.loc(arg), fn + "'s " + arg + " is " + v->type().str() + " but its format is '" +
                                 f + "': pass a buffer of " + elemName(f) + " elements");
  // K of A and of B: an e2m1 operand holds two values of K a byte.
  const int64_t aK = aFp4 ? 2 * sa[1] : sa[1], bK = bFp4 ? 2 * sb[0] : sb[0];
  if (aK != bK)
    raiseError(call.loc,
               fn + " shape mismatch: A is " + dims(sa) + " and B is " + dims(sb) +
                   " (A's K = " + std::to_string(aK) + " must equal B's K = " + std::to_string(bK) +
                   (aFp4 || bFp4 ? "; e2m1 operands hold two values of K a byte" : "") + ")");
  if (aFp4) {
    // tcgen05.mma reads e2m1 K-major only here (PTX ISA: no transpose for .kind::mxf4 /
    // mxf4nvf4; the padded operand of kind::mxf8f6f4 is loaded K-major by TMA): A an [M, K / 2]
    // shared-memory buffer.
    const ir::Op* aDef = A->def();
    if (A->type().space != ir::MemorySpace::Shared)
      raiseError(a.loc("A"), fn + " of e2m1 reads A " + A->type().str() +
                                 " from tensor memory, which warpweave does not support yet; "
                                 "pass an [M, K / 2] shared-memory buffer");
    if (aDef && aDef->code() == OpCode::LocalTrans)
      raiseError(a.loc("A"), fn + " of e2m1 reads A with K contiguous only (tcgen05.mma has no "
                                  "transpose for fp4): pass an [M, K / 2] buffer, not a "
                                  "tlx.local_trans");
  }
  if (bFp4) {
    const ir::Op* bDef = B->def();
    if (!bDef || bDef->code() != OpCode::LocalTrans)
      raiseError(a.loc("B"), fn + " of e2m1 reads B with K contiguous only (tcgen05.mma has no "
                                  "transpose for fp4): store B as an [N, K / 2] buffer and pass "
                                  "its tlx.local_trans");
  }
  if (mixed) {
    // The e2m1 operand of kind::mxf8f6f4 lies in shared memory as 16 values (8 bytes) a 16-byte
    // chunk; TMA writes it so (CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B) in rows of 128 values,
    // the one box width that type takes.
    const char* arg = aFp4 ? "A" : "B";
    const int64_t packed = aFp4 ? sa[1] : sb[0];
    if (packed % 64 != 0)
      raiseError(a.loc(arg), fn + " of '" + scales.aFormat + "' x '" + scales.bFormat +
                                 "': " + arg + "'s K = " + std::to_string(2 * packed) +
                                 " e2m1 values must be a multiple of 128 (the mixed MMA, "
                                 "kind::mxf8f6f4, reads e2m1 padded to a byte each, which TMA "
                                 "writes in rows of 128 values)");
  }
  const int64_t M = sa[0], K = aK, N = sb[1];
  if (M != 128)
    raiseError(a.loc("A"), fn +
                               " issues tcgen05.mma ... block_scale with M = 128 rows per CTA; "
                               "A is " +
                               A->type().str());
  // The scales' dtype picks the block: ue4m3 (nvfp4) scales 16 elements, e8m0 bytes 32.
  const ir::Value* aScale = oneBuffer(sp, fn, a, "A_scale");
  const ir::Value* bScale = oneBuffer(sp, fn, a, "B_scale");
  const bool ue4m3 = aScale->type().elem == DType::F8E4M3;
  if (ue4m3 != (bScale->type().elem == DType::F8E4M3))
    raiseError(call.loc, fn + "'s scales are " + aScale->type().str() + " and " +
                             bScale->type().str() +
                             ": both ue4m3 (tl.float8e4nv, nvfp4) or both e8m0 bytes (tl.uint8)");
  if (ue4m3 && !fp4)
    raiseError(a.loc("A_scale"), fn +
                                     " with ue4m3 (tl.float8e4nv) scales is nvfp4, whose "
                                     "operands are both e2m1; '" +
                                     scales.aFormat + "' x '" + scales.bFormat +
                                     "' operands take uint8 e8m0 scales");
  const int64_t block = ue4m3 ? 16 : 32;
  const int64_t step = fp4 ? 64 : 32; // K of one tcgen05.mma
  if (K % step != 0 || K == 0)
    raiseError(a.loc("A"),
               fn + ": K = " + std::to_string(K) + " must be a multiple of " +
                   std::to_string(step) + " (one tcgen05.mma " +
                   (fp4 ? "kind::mxf4 / mxf4nvf4; A is [M, K / 2] bytes" : "kind::mxf8f6f4") + ")");
  if (N < 8 || N > 256 || N % 8 != 0)
    raiseError(a.loc("B"), fn + ": N = " + std::to_string(N) +
                               " must be a multiple of 8 from 8 to 256 (B is " + B->type().str() +
                               ")");
  // A CTA pair's block-scaled MMA (256 x N): B is this CTA's half of the N columns, and each
  // CTA holds the scales of its own 128 rows of A and of all N columns of B (its tensor core's
  // share of the product uses every column).
  const bool twoCtas =
      a.has("two_ctas") && sp.constBool(a.get("two_ctas"), a.loc("two_ctas"), "two_ctas");
  const int64_t scaleN = twoCtas ? 2 * N : N;
  const int64_t cols = ir::scaleColumns(K, block);
  // In tensor memory the MMA reads B's scales for N <= 64 from 64-row tiles (two columns a
  // word, TLX's layout of a [64, cols] tile) as well as from 128-row ones.
  const int64_t bRows = (scaleN + 127) / 128 * 128;
  scales.a = scaleOperand(sp, fn, a, "A_scale", 128, 128, cols, block);
  scales.b = scaleOperand(sp, fn, a, "B_scale", bRows, scaleN <= 64 ? 64 : bRows, cols, block);
  return tcgen05Mma(sp, fn, a, A, B, twoCtas, &scales);
}

/// tlx.tmem_copy: tcgen05.cp of block scales from shared memory into tensor memory.
Val tlxTmemCopy(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  BoundArgs a(call, {"src", "dst"});
  ir::Value* src = oneBuffer(sp, fn, a, "src");
  ir::Value* dst = oneBuffer(sp, fn, a, "dst");
  const ir::Type &st = src->type(), &dt = dst->type();
  if (st.space != ir::MemorySpace::Shared)
    raiseError(a.loc("src"), fn + "'s src must be a shared-memory buffer, got " + st.str());
  if (dt.space != ir::MemorySpace::Tmem)
    raiseError(a.loc("dst"), fn +
                                 "'s dst must be a tensor-memory buffer "
                                 "(tlx.storage_kind.tmem), got " +
                                 dt.str());
  if (!isScaleDType(dt.elem) || !isScaleDType(st.elem) || dt.elem == DType::F8E4M3 ||
      st.elem == DType::F8E4M3)
    raiseError(call.loc, fn + " of " + st.str() + " into " + dt.str() +
                             ": warpweave copies block scales only (uint8 e8m0 exponents into a "
                             "uint8 [rows, cols] tensor-memory buffer; nvfp4's ue4m3 scales stay "
                             "in shared memory, where the MMA reads them)");
  if (dt.shape.size() != 2 || dt.shape[0] % 128 != 0 || dt.shape[1] % 4 != 0 || dt.shape[0] == 0 ||
      dt.shape[1] == 0)
    raiseError(a.loc("dst"), fn + "'s dst is " + dt.str() +
                                 "; tensor-memory scales are [rows, cols] with rows a multiple "
                                 "of 128 and cols of 4");
  // TLX's unit-test form: [32 n, 16], n chunks of 128 rows x 4 scales, into a [128, 16 n] tile,
  // whose first n scale words they fill (ir::tmemCopiedScales).
  const bool chunkRows = st.shape.size() == 2 && st.shape[1] == 16 && dt.shape[0] == 128 &&
                         dt.shape[1] % 16 == 0 && st.shape[0] == 32 * (dt.shape[1] / 16);
  if (!chunkRows && !isPackedScaleShape(st.shape, dt.shape[0], dt.shape[1], false))
    raiseError(a.loc("src"),
               fn + " into " + dt.str() + " needs the scales in the cuBLAS " +
                   "block-scaled layout, a shared-memory tile of shape " +
                   packedScaleForms(dt.shape[0], dt.shape[1], false) +
                   (dt.shape[0] == 128 && dt.shape[1] % 16 == 0
                        ? " (or [" + std::to_string(2 * dt.shape[1]) + ", 16]: its first " +
                              std::to_string(dt.shape[1] / 16) + " scale words)"
                        : std::string()) +
                   "; got " + st.str());
  sp.b.create(OpCode::TmemCopy, {src, dst}, {}, {});
  return Val::none();
}

Val tlxAsyncTaskReplicaId(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {});
  if (!sp.replicaId)
    raiseError(loc, "tlx.async_task_replica_id() is only meaningful inside "
                    "'with tlx.async_task(...)'");
  return Val::integer(*sp.replicaId);
}

Val tlxThreadId(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"axis"});
  int64_t axis = sp.constInt(a.get("axis"), a.loc("axis"), "tlx.thread_id's axis", a.expr("axis"));
  if (axis < 0 || axis > 2) raiseError(a.loc("axis"), "tlx.thread_id's axis must be 0, 1 or 2");
  return Val::runtime(sp.b.create1(OpCode::ThreadId, {}, ir::Type::scalar(DType::I32),
                                   {ir::attr::ThreadId::make::axis(axis)}));
}

Val tlxClock64(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {});
  return Val::runtime(sp.b.create1(OpCode::Clock64, {}, ir::Type::scalar(DType::I64)));
}

Val tlxClusterCtaRank(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {});
  return Val::runtime(sp.b.create1(OpCode::ClusterCtaRank, {}, ir::Type::scalar(DType::I32)));
}

Val tlxClusterSize1d(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {});
  return Val::runtime(sp.b.create1(OpCode::ClusterSize, {}, ir::Type::scalar(DType::I32)));
}

Val tlxDtypeOf(Specializer& /*sp*/, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"v"});
  const Val& v = a.get("v");
  if (!v.isRuntime())
    raiseError(a.loc("v"),
               "tlx.dtype_of needs a tensor, pointer, buffer or descriptor, got " + kindName(v));
  return Val::dtypeOf(v.type().elem);
}

Val tlxSizeOf(Specializer& /*sp*/, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"dtype"});
  const Val& d = a.get("dtype");
  if (d.kind == Val::Kind::DType)
    return Val::integer(d.dtypeIsPointer ? 8 : ir::byteWidth(d.dtype));
  raiseError(a.loc("dtype"), "tlx.size_of needs a dtype such as tl.float16, got " + describe(d));
}

Val tlxGetFp8FormatName(Specializer& /*sp*/, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"dtype"});
  const Val& d = a.get("dtype");
  if (d.kind == Val::Kind::DType && !d.dtypeIsPointer && d.dtype == DType::F8E5M2)
    return Val::string("e5m2");
  if (d.kind == Val::Kind::DType && !d.dtypeIsPointer && d.dtype == DType::F8E4M3)
    return Val::string("e4m3");
  raiseError(a.loc("dtype"), "tlx.get_fp8_format_name only supports tl.float8e5 (e5m2) and "
                             "tl.float8e4nv (e4m3), but got " +
                                 describe(d));
}

Val tlxVoteBallotSync(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"mask", "pred"});
  ir::Value* m = sp.requireScalarI32(a.get("mask"), a.loc("mask"), "the lane mask");
  ir::Value* p = sp.toI1(sp.requireTensorOrScalar(a.get("pred"), a.loc("pred"), "pred"), loc);
  // A tensor predicate gives a tensor of its shape (TLX): each element its holder's warp ballot.
  return Val::runtime(
      sp.b.create1(OpCode::VoteBallot, {m, p}, ir::Type::tensor(DType::I32, p->type().shape)));
}

/// tlx.stoch_round(src, dst_dtype, rand_bits): fp32 to fp8 / fp16 / bf16 with stochastic
/// rounding, each element by its own rand_bits element (one 32-bit word per element, as TLX asks).
/// The arguments are checked here; the target (cvt.rs is sm_100a's) in the codegen.
Val tlxStochRound(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  const std::string fn = "tlx.stoch_round";
  BoundArgs a(call, {"src", "dst_dtype", "rand_bits"});
  ir::Value* x = sp.requireTensorOrScalar(a.get("src"), a.loc("src"), fn + "'s src");
  if (x->type().pointer || x->type().elem != DType::F32)
    raiseError(a.loc("src"), fn +
                                 " rounds float32 values (stochastic rounding from fp32 only); "
                                 "src is " +
                                 x->type().str() + ": convert it with .to(tl.float32) first");
  const DType dst = sp.constDType(a.get("dst_dtype"), a.loc("dst_dtype"), fn + "'s dst_dtype");
  if (dst != DType::F8E5M2 && dst != DType::F8E4M3 && dst != DType::F16 && dst != DType::BF16)
    raiseError(a.loc("dst_dtype"), fn + ": stochastic rounding to " + std::string(ir::tlName(dst)) +
                                       " is not supported; dst_dtype must be tl.float8e5, "
                                       "tl.float8e4nv, tl.float16 or tl.bfloat16");
  ir::Value* r =
      sp.requireTensorOrScalar(a.get("rand_bits"), a.loc("rand_bits"), fn + "'s rand_bits");
  const ir::Type& rt = r->type();
  if (rt.pointer || !ir::isInt(rt.elem) || ir::bitWidth(rt.elem) != 32)
    raiseError(a.loc("rand_bits"), fn +
                                       "'s rand_bits must be 32-bit integers, one per element "
                                       "(uint32, as tl.randint gives); got " +
                                       rt.str());
  if (rt.isScalar() != x->type().isScalar())
    raiseError(a.loc("rand_bits"), fn +
                                       "'s src and rand_bits must both be tensors or both "
                                       "scalars; src is " +
                                       x->type().str() + ", rand_bits " + rt.str());
  if (rt.shape != x->type().shape)
    raiseError(a.loc("rand_bits"), fn + "'s rand_bits is " + rt.str() +
                                       "; it must have src's shape (" + x->type().str() + ")");
  return Val::runtime(sp.b.create1(OpCode::StochRound, {x, r}, x->type().withElem(dst)));
}

Val tlxStorageAlias(Specializer& sp, const std::string& name, CallSite& call) {
  return sp.callStorageAlias(name, call);
}

Val tlxDescriptorSlots(Specializer& sp, const std::string& name, CallSite& call) {
  return sp.tensorDescriptorSlots(name, call);
}

Val tlxGatherScatter(Specializer& sp, const std::string& name, CallSite& call) {
  return sp.callTlxGatherScatter(name, call);
}

/// tlx.async_tasks / tlx.async_task open a `with` block (Specializer::visitWith), never a call.
Val tlxContextOnly(Specializer& /*sp*/, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  raiseError(call.loc, fn + "(...) is used as a context: 'with " + fn + "(...):'");
}

} // namespace

const BuiltinTable& tlxBuiltins() {
  // In the order "did you mean" prefers among equally near names.
  static const BuiltinTable table({
      {"local_alloc", &tlxLocalAlloc},
      {"local_view", &tlxLocalView},
      {"local_load", &tlxLocalLoad},
      {"layout", &tlxLayout},
      {"swizzled_layout", &tlxSharedLayout},
      {"swizzled_shared_layout_encoding", &tlxSharedLayout},
      {"padded_shared_layout_encoding", &tlxSharedLayout},
      {"swizzled_layout.make_default", &tlxSharedLayout},
      {"swizzled_shared_layout_encoding.make_default", &tlxSharedLayout},
      {"padded_shared_layout_encoding.with_identity_for", &tlxSharedLayout},
      {"padded_shared_layout_encoding.with_bases", &tlxSharedLayout},
      {"dump_layout", &tlxDumpLayout},
      {"assert_same_layout", &tlxAssertSameLayout},
      {"local_store", &tlxLocalStore},
      {"local_trans", &tlxLocalTrans},
      {"local_slice", &tlxLocalSlice},
      {"subslice", &tlxLocalSlice},
      {"local_reinterpret", &tlxLocalReinterpret},
      {"alloc_barriers", &tlxAllocBarriers},
      {"alloc_warp_barrier", &tlxAllocBarriers},
      {"barrier_expect_bytes", &tlxBarrierExpectBytes},
      {"barrier_wait", &tlxBarrierWait},
      {"barrier_arrive", &tlxBarrierArrive},
      {"named_barrier_wait", &tlxNamedBarrier},
      {"named_barrier_arrive", &tlxNamedBarrier},
      {"fence_async_shared", &tlxFence},
      {"fence", &tlxFence},
      {"fence_mbarrier_init_cluster", &tlxFence},
      {"cluster_barrier", &tlxClusterBarrier},
      {"async_remote_shmem_store", &tlxRemoteShmemStore},
      {"remote_shmem_store", &tlxRemoteShmemStore},
      {"async_remote_shmem_copy", &tlxAsyncRemoteShmemCopy},
      {"async_descriptor_load", &tlxAsyncDescriptorLoad},
      {"async_descriptor_store", &tlxAsyncDescriptorStore},
      {"async_descriptor_store_wait", &tlxAsyncWait},
      {"async_load", &tlxAsyncLoad},
      {"async_load_commit_group", &tlxAsyncLoadCommitGroup},
      {"async_load_wait_group", &tlxAsyncWait},
      {"async_dot", &tlxAsyncDot},
      {"async_dot_wait", &tlxAsyncDotWait},
      {"tcgen05_commit", &tlxTcgen05Commit},
      {"async_tasks", &tlxContextOnly},
      {"async_task", &tlxContextOnly},
      {"async_task_replica_id", &tlxAsyncTaskReplicaId},
      {"thread_id", &tlxThreadId},
      {"clock64", &tlxClock64},
      {"cluster_cta_rank", &tlxClusterCtaRank},
      {"cluster_size_1d", &tlxClusterSize1d},
      {"dtype_of", &tlxDtypeOf},
      {"size_of", &tlxSizeOf},
      {"vote_ballot_sync", &tlxVoteBallotSync},
      {"stoch_round", &tlxStochRound},
      {"tmem_copy", &tlxTmemCopy},
      {"async_dot_scaled", &tlxAsyncDotScaled},
      {"clc_create_context", &tlxClusterLaunchControl},
      {"clc_producer", &tlxClusterLaunchControl},
      {"clc_consumer", &tlxClusterLaunchControl},
      {"get_fp8_format_name", &tlxGetFp8FormatName},
      {"local_gather", &tlxGatherScatter},
      {"local_scatter", &tlxGatherScatter},
      {"remote_view", &tlxRemoteView},
      {"storage_alias_spec", &tlxStorageAlias},
      {"reuse_group", &tlxStorageAlias},
      {"prefetch", &tlxPrefetch},
      {"async_descriptor_prefetch_tensor", &tlxAsyncDescriptorPrefetchTensor},
      {"async_store", &tlxAsyncStore},
      {"allocate_tensor_descriptor", &tlxDescriptorSlots},
      {"make_tensor_descriptor", &tlxDescriptorSlots},
      {"reinterpret_tensor_descriptor", &tlxDescriptorSlots},
  });
  return table;
}

Val Specializer::callTlx(const std::string& name, CallSite& call) {
  call.callee = "tlx." + name;
  if (BuiltinHandler handler = tlxBuiltins().find(name)) return handler(*this, name, call);
  unknownMember("tlx", name, call.loc);
}

} // namespace ww::specialize
