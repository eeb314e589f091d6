// TLX's shared-memory layout objects in kernel code and local_alloc's layout= of them (see
// TlxLayouts.h). The objects are compile-time values (Val objects) with TLX's fields; a
// local_alloc resolves one against its shape into attributes that layout assignment turns into
// the buffer's LinearLayout (LayoutAssignment.cpp), so codegen addresses the buffer exactly so.
#include "specialize/TlxLayouts.h"

#include "ir/OpAttrs.h"
#include "specialize/SpecializerImpl.h"

#include <algorithm>
#include <numeric>

namespace ww::specialize {

namespace {

constexpr const char* kSwizzled = "swizzled_layout";
constexpr const char* kSwizzledShared = "swizzled_shared_layout_encoding";
constexpr const char* kPadded = "padded_shared_layout_encoding";

const char* const kAccepted =
    "tlx.swizzled_layout(bits, base, shift, order=...) (CuTe's Swizzle<B,M,S>), "
    "tlx.swizzled_shared_layout_encoding(vectorSize, perPhase, maxPhase, order, ...) or their "
    ".make_default(rank=)";

bool isPow2(int64_t x) {
  return x > 0 && (x & (x - 1)) == 0;
}

Val intTuple(const std::vector<int64_t>& v) {
  std::vector<Val> e;
  for (int64_t x : v) e.push_back(Val::integer(x));
  return Val::tuple(std::move(e));
}

std::vector<int64_t> intsOf(const Val& v) {
  std::vector<int64_t> out;
  for (const Val& e : v.elts) out.push_back(e.i);
  return out;
}

std::string listText(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// A list of ints (a tuple or list literal, or one int for a one-element list).
std::vector<int64_t> constInts(Specializer& sp, const Val& v, SourceLoc loc,
                               const std::string& what) {
  std::vector<int64_t> out;
  if (v.kind != Val::Kind::Tuple) {
    out.push_back(sp.constInt(v, loc, what));
    return out;
  }
  for (const Val& e : v.elts) out.push_back(sp.constInt(e, loc, what));
  return out;
}

std::vector<int64_t> rowMajor(int64_t rank) {
  std::vector<int64_t> o;
  for (int64_t d = rank - 1; d >= 0; --d) o.push_back(d);
  return o;
}

void requireOrder(const std::vector<int64_t>& order, size_t rank, SourceLoc loc,
                  const std::string& what) {
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(rank);
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota)
    raiseError(loc, what + "'s order " + listText(order) + " is not a permutation of the " +
                        std::to_string(rank) + " dims of the buffer");
}

/// Every entry of a CTA split list (an int or a list) is 1: one CTA holds the whole buffer.
void requireOneCta(Specializer& sp, const BoundArgs& a, const char* key, const std::string& fn) {
  if (!a.has(key)) return;
  for (int64_t x : constInts(sp, a.get(key), a.loc(key), fn + "'s " + key))
    if (x != 1)
      raiseError(a.loc(key), fn + "'s " + key +
                                 " splits the buffer over CTAs; warpweave's "
                                 "shared layouts are one CTA's (every entry 1)");
}

Val swizzledShared(int64_t vec, int64_t perPhase, int64_t maxPhase, std::vector<int64_t> order) {
  return Val::object(
      kSwizzledShared, 0,
      {Val::integer(vec), Val::integer(perPhase), Val::integer(maxPhase), intTuple(order)});
}

Val padded(const std::vector<int64_t>& intervals, const std::vector<int64_t>& paddings,
           const std::vector<int64_t>& order, const std::vector<int64_t>& shape, bool bases) {
  return Val::object(kPadded, 0,
                     {intTuple(intervals), intTuple(paddings), intTuple(order), intTuple(shape)},
                     bases);
}

/// (intervals, paddings) of TLX's [(interval, padding), ...] pairs.
std::pair<std::vector<int64_t>, std::vector<int64_t>>
intervalPairs(Specializer& sp, const Val& v, SourceLoc loc, const std::string& fn) {
  std::vector<int64_t> in, pad;
  if (v.kind != Val::Kind::Tuple)
    raiseError(loc, fn + " takes a list of (interval, padding) pairs, got " + describe(v));
  for (const Val& p : v.elts) {
    if (p.kind != Val::Kind::Tuple || p.elts.size() != 2)
      raiseError(loc, fn + " takes a list of (interval, padding) pairs, got " + describe(p));
    in.push_back(sp.constInt(p.elts[0], loc, fn + "'s interval"));
    pad.push_back(sp.constInt(p.elts[1], loc, fn + "'s padding"));
  }
  return {in, pad};
}

} // namespace

bool isSharedLayoutObject(const Val& v) {
  return v.kind == Val::Kind::Object &&
         (v.s == kSwizzled || v.s == kSwizzledShared || v.s == kPadded);
}

std::string describeSharedLayout(const Val& v) {
  if (v.s == kSwizzled)
    return "tlx.swizzled_layout(" + std::to_string(v.elts[0].i) + ", " +
           std::to_string(v.elts[1].i) + ", " + std::to_string(v.elts[2].i) + ", order=" +
           (v.elts[3].kind == Val::Kind::Tuple ? listText(intsOf(v.elts[3])) : "None") + ")";
  if (v.s == kSwizzledShared)
    return "tlx.swizzled_shared_layout_encoding(vectorSize=" + std::to_string(v.elts[0].i) +
           ", perPhase=" + std::to_string(v.elts[1].i) +
           ", maxPhase=" + std::to_string(v.elts[2].i) + ", order=" + listText(intsOf(v.elts[3])) +
           ")";
  std::string pairs = "[";
  for (size_t i = 0; i < v.elts[0].elts.size(); ++i)
    pairs += (i ? ", (" : "(") + std::to_string(v.elts[0].elts[i].i) + ", " +
             std::to_string(v.elts[1].elts[i].i) + ")";
  return "tlx.padded_shared_layout_encoding(" + pairs + "], shape=" + listText(intsOf(v.elts[3])) +
         ", order=" + listText(intsOf(v.elts[2])) + (v.b ? ", offset_bases=..." : "") + ")";
}

std::string sharedLayoutClassMethod(const std::string& cls, const std::string& method) {
  if ((cls == kSwizzled || cls == kSwizzledShared) && method == "make_default")
    return cls + "." + method;
  if (cls == kPadded && (method == "with_identity_for" || method == "with_bases"))
    return cls + "." + method;
  return "";
}

Val tlxSharedLayout(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  if (name == "swizzled_layout.make_default" ||
      name == "swizzled_shared_layout_encoding.make_default") {
    BoundArgs a(call, {"rank"});
    int64_t rank = sp.constInt(a.get("rank"), a.loc("rank"), fn + "'s rank");
    if (rank < 1 || rank > 8) raiseError(a.loc("rank"), fn + "'s rank must be 1 to 8");
    if (name.starts_with(kSwizzledShared)) return swizzledShared(1, 1, 1, rowMajor(rank));
    return Val::object(
        kSwizzled, 0,
        {Val::integer(0), Val::integer(0), Val::integer(0), intTuple(rowMajor(rank))});
  }
  if (name == kSwizzled) {
    BoundArgs a(call, {"bits", "base=", "shift=", "order="});
    std::vector<Val> e;
    for (const char* key : {"bits", "base", "shift"}) {
      int64_t x = a.has(key) ? sp.constInt(a.get(key), a.loc(key), fn + "'s " + key) : 0;
      if (x < 0 || x > 16)
        raiseError(a.loc(key), fn + "'s " + key + " must be 0 to 16, got " + std::to_string(x));
      e.push_back(Val::integer(x));
    }
    e.push_back(a.has("order")
                    ? intTuple(constInts(sp, a.get("order"), a.loc("order"), fn + "'s order"))
                    : Val::none());
    return Val::object(kSwizzled, 0, std::move(e));
  }
  if (name == kSwizzledShared) {
    BoundArgs a(call, {"vectorSize", "perPhase", "maxPhase", "order",
                       "numCTAs=", "numCTAsPerCGA=", "numCTASplit=", "numCTAOrder="});
    std::vector<int64_t> v;
    for (const char* key : {"vectorSize", "perPhase", "maxPhase"}) {
      v.push_back(sp.constInt(a.get(key), a.loc(key), fn + "'s " + key));
      if (!isPow2(v.back()))
        raiseError(a.loc(key),
                   fn + "'s " + key + " must be a power of two, got " + std::to_string(v.back()));
    }
    for (const char* key : {"numCTAs", "numCTAsPerCGA", "numCTASplit"})
      requireOneCta(sp, a, key, fn);
    return swizzledShared(v[0], v[1], v[2],
                          constInts(sp, a.get("order"), a.loc("order"), fn + "'s order"));
  }
  if (name == kPadded) {
    BoundArgs a(call, {"intervals", "paddings", "order", "shape", "numCTAsPerCGA=", "numCTASplit=",
                       "numCTAOrder=", "offset_bases=", "block_bases="});
    std::vector<int64_t> in =
        constInts(sp, a.get("intervals"), a.loc("intervals"), fn + "'s intervals");
    std::vector<int64_t> pad =
        constInts(sp, a.get("paddings"), a.loc("paddings"), fn + "'s paddings");
    if (in.size() != pad.size())
      raiseError(call.loc, fn + ": intervals and paddings differ in length");
    for (const char* key : {"numCTAsPerCGA", "numCTASplit"}) requireOneCta(sp, a, key, fn);
    return padded(in, pad, constInts(sp, a.get("order"), a.loc("order"), fn + "'s order"),
                  constInts(sp, a.get("shape"), a.loc("shape"), fn + "'s shape"),
                  a.has("offset_bases"));
  }
  if (name == "padded_shared_layout_encoding.with_identity_for") {
    BoundArgs a(call, {"interval_padding_pairs", "shape", "order="});
    auto [in, pad] =
        intervalPairs(sp, a.get("interval_padding_pairs"), a.loc("interval_padding_pairs"), fn);
    std::vector<int64_t> shape = constInts(sp, a.get("shape"), a.loc("shape"), fn + "'s shape");
    std::vector<int64_t> order =
        a.has("order") ? constInts(sp, a.get("order"), a.loc("order"), fn + "'s order")
                       : rowMajor(int64_t(shape.size()));
    return padded(in, pad, order, shape, false);
  }
  if (name == "padded_shared_layout_encoding.with_bases") {
    BoundArgs a(call, {"interval_padding_pairs", "offset_bases", "shape", "block_bases="});
    auto [in, pad] =
        intervalPairs(sp, a.get("interval_padding_pairs"), a.loc("interval_padding_pairs"), fn);
    std::vector<int64_t> shape = constInts(sp, a.get("shape"), a.loc("shape"), fn + "'s shape");
    return padded(in, pad, rowMajor(int64_t(shape.size())), shape, true);
  }
  raiseError(call.loc, "unknown layout constructor " + fn);
}

std::vector<ir::NamedAttr> sharedLayoutAttrs(Specializer& /*sp*/, const Val& l, SourceLoc loc,
                                             const std::vector<int64_t>& shape) {
  namespace A = ir::attr::LocalAlloc::make;
  if (!isSharedLayoutObject(l)) {
    std::string got = describe(l);
    if (l.kind == Val::Kind::Object && l.s == "layout")
      got = "a register layout (tlx.layout(shape=, stride=), which local_load's layout= takes)";
    raiseError(loc, "tlx.local_alloc's layout= takes a shared-memory layout, " +
                        std::string(kAccepted) + "; got " + got);
  }
  const std::string desc = describeSharedLayout(l);
  const size_t rank = shape.size();
  for (int64_t d : shape)
    if (!isPow2(d))
      raiseError(loc, "tlx.local_alloc with layout=" + desc + " needs power-of-two dims, got " +
                          listText(shape));
  std::vector<ir::NamedAttr> attrs = {A::layoutDesc(desc)};
  if (l.s == kPadded) {
    if (l.b)
      raiseError(loc, "tlx.local_alloc's layout=" + desc +
                          ": padded layouts with explicit offset_bases (with_bases) are not "
                          "supported; use padded_shared_layout_encoding.with_identity_for, or " +
                          kAccepted);
    std::vector<int64_t> order = intsOf(l.elts[2]), lshape = intsOf(l.elts[3]);
    if (lshape != shape)
      raiseError(loc, "tlx.local_alloc's layout=" + desc + " describes a " + listText(lshape) +
                          " tile, but the buffer is " + listText(shape));
    requireOrder(order, rank, loc, desc);
    if (order != rowMajor(int64_t(rank)))
      raiseError(loc, "tlx.local_alloc's layout=" + desc + ": only the row-major order " +
                          listText(rowMajor(int64_t(rank))) + " is supported for padded layouts");
    std::vector<int64_t> in = intsOf(l.elts[0]), pad = intsOf(l.elts[1]);
    for (size_t i = 0; i < in.size(); ++i)
      if (!isPow2(in[i]) || pad[i] < 0)
        raiseError(loc, "tlx.local_alloc's layout=" + desc +
                            ": each interval must be a power of two and each padding 0 or more");
    attrs.push_back(A::padIntervals(in));
    attrs.push_back(A::padAmounts(pad));
    return attrs;
  }
  int64_t vec = 0, perPhase = 1, maxPhase = 1;
  std::vector<int64_t> order;
  if (l.s == kSwizzledShared) {
    vec = l.elts[0].i, perPhase = l.elts[1].i, maxPhase = l.elts[2].i;
    order = intsOf(l.elts[3]);
    requireOrder(order, rank, loc, desc);
  } else {
    const int64_t B = l.elts[0].i, M = l.elts[1].i, S = l.elts[2].i;
    order = l.elts[3].kind == Val::Kind::Tuple ? intsOf(l.elts[3]) : rowMajor(int64_t(rank));
    requireOrder(order, rank, loc, desc);
    vec = int64_t(1) << M;
    maxPhase = int64_t(1) << B;
    if (maxPhase > 1) {
      // Swizzle<B,M,S> XORs offset bits [M, M+B) with bits [M+S, M+S+B): as Triton's
      // swizzled_shared that is rows of the contiguous extent, perPhase = 2^(S+M) / extent.
      int64_t contiguous = shape[size_t(order[0])], span = int64_t(1) << (S + M);
      if (rank < 2 || span % contiguous != 0)
        raiseError(loc, "tlx.local_alloc's layout=" + desc + ": 2**(shift + base) = " +
                            std::to_string(span) + " is not a multiple of the contiguous extent " +
                            std::to_string(contiguous) +
                            " (the swizzle would mix elements within a row; perPhase < 1)");
      perPhase = span / contiguous;
    }
  }
  attrs.push_back(A::sharedVec(vec));
  attrs.push_back(A::sharedPerPhase(perPhase));
  attrs.push_back(A::sharedMaxPhase(maxPhase));
  attrs.push_back(A::sharedOrder(order));
  return attrs;
}

Val tlxDumpLayout(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"x"});
  const Val& x = a.get("x");
  if (!x.isRuntime() || !(x.type().kind == ir::TypeKind::Buffer ||
                          (x.type().kind == ir::TypeKind::Value && !x.type().shape.empty())))
    raiseError(a.loc("x"),
               "tlx.dump_layout takes a tensor or a shared-memory buffer view, got " + kindName(x));
  if (x.type().kind == ir::TypeKind::Buffer && x.type().space != ir::MemorySpace::Shared)
    raiseError(a.loc("x"), "tlx.dump_layout of a tensor-memory buffer is not supported (its "
                           "layout is tcgen05's); dump a shared-memory buffer or a tensor");
  sp.b.create(ir::OpCode::DumpLayout, {x.v}, {});
  return Val::none();
}

} // namespace ww::specialize
