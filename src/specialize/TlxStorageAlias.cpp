// tlx.storage_alias_spec: several tlx.local_allocs sharing one shared-memory region. Each member
// allocation keeps its own type; the specializer records where its buffers lie in the region as
// attributes of its local_alloc (alias: the spec's index, alias_offset: bytes from the region's
// start to buffer 0, alias_stride: bytes from one buffer to the next, 0 for the allocation's own
// size, alias_bytes: the least size of the region). Layout assignment places each region once
// and every member in it; the interpreter gives the members one byte array.
//
// spec.set_buffer_overlap(tlx.reuse_group(...)) places the members as TLX does: the group tree
// is sized per buffer index (shared: the largest child times group_size, distinct: the children
// one after another, each aligned to the tree's alignment); buffer index i of every member lies in
// slot i of that size, a distinct group's children at increasing offsets within it, and a shared
// group with group_size g splits it into g subtiles of its largest child's size. Without
// set_buffer_overlap every member starts at the region's start.
#include "specialize/SpecializerImpl.h"

#include "ir/Limits.h"
#include "ir/OpAttrs.h"
#include "layout/Layouts.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>

namespace ww::specialize {

namespace {

int64_t tileBytes(const ir::Type& t) {
  return t.numElements() * ir::byteWidth(t.elem);
}

bool isGroup(const Val& v) {
  return v.kind == Val::Kind::Object && v.s == "reuse_group";
}

/// The TLX alignment of a member: the compiler's alignment of its tile (at least its element).
int64_t alignmentOf(const Val& node) {
  if (!isGroup(node)) {
    const ir::Type& t = node.v->type();
    return std::max<int64_t>(layout::sharedTileAlignment(t.shape, ir::byteWidth(t.elem)),
                             ir::byteWidth(t.elem));
  }
  int64_t a = 1;
  for (const Val& c : node.elts) a = std::max(a, alignmentOf(c));
  return a;
}

/// Bytes one buffer index of `node` needs.
int64_t sizeOf(const Val& node, int64_t alignment) {
  if (!isGroup(node)) return tileBytes(node.v->type());
  int64_t size = 0;
  for (const Val& c : node.elts) {
    if (node.b) // distinct
      size = alignTo(size, alignment) + sizeOf(c, alignment);
    else
      size = std::max(size, sizeOf(c, alignment));
  }
  return node.b ? size : size * node.i;
}

/// A member's placement: buffer 0 at `offset`; its index is split into digits, innermost last,
/// each (count, stride): the first level's count is unbounded (the slot of the whole tree).
struct Placement {
  int64_t offset = 0;
  std::vector<std::pair<int64_t, int64_t>> levels;

  int64_t address(int64_t i) const {
    int64_t at = offset;
    for (size_t l = levels.size(); l-- > 0;) {
      if (l == 0) {
        at += i * levels[l].second;
      } else {
        at += (i % levels[l].first) * levels[l].second;
        i /= levels[l].first;
      }
    }
    return at;
  }
};

} // namespace

Val Specializer::callStorageAlias(const std::string& name, CallSite& call) {
  if (name == "storage_alias_spec") {
    BoundArgs a(call, {"storage=", "buffer_size_bytes="});
    AliasSpec spec;
    if (a.has("storage")) {
      const Val& s = a.get("storage");
      if (s.kind != Val::Kind::Enum || (s.s != "smem" && s.s != "tmem"))
        raiseError(a.loc("storage"), "tlx.storage_alias_spec's storage must be "
                                     "tlx.storage_kind.smem or tlx.storage_kind.tmem, got " +
                                         describe(s));
      spec.tmem = s.s == "tmem";
    }
    if (a.has("buffer_size_bytes")) {
      spec.sizeBytes =
          constInt(a.get("buffer_size_bytes"), a.loc("buffer_size_bytes"),
                   "tlx.storage_alias_spec's buffer_size_bytes", a.expr("buffer_size_bytes"));
      if (spec.sizeBytes < 1 || spec.sizeBytes > ir::kMaxSharedBytes)
        raiseError(a.loc("buffer_size_bytes"),
                   "tlx.storage_alias_spec's buffer_size_bytes must be 1.." +
                       std::to_string(ir::kMaxSharedBytes) + ", got " +
                       std::to_string(spec.sizeBytes));
    }
    aliasSpecs.push_back(spec);
    return Val::object("storage_alias_spec", int64_t(aliasSpecs.size() - 1));
  }
  // tlx.reuse_group(*members, group_type=shared, group_size=1)
  BoundArgs a(call, {"*args", "group_type=", "group_size="});
  const Val& args = a.get("args");
  if (args.elts.empty())
    raiseError(call.loc, "tlx.reuse_group needs at least one member (a buffer from "
                         "tlx.local_alloc or a nested tlx.reuse_group)");
  for (size_t i = 0; i < args.elts.size(); ++i) {
    const Val& m = args.elts[i];
    bool buffer = m.isRuntime() && m.type().kind == ir::TypeKind::Buffer;
    if (!buffer && !isGroup(m))
      raiseError(i < call.argLocs.size() ? call.argLocs[i] : call.loc,
                 "tlx.reuse_group's members must be buffers (tlx.local_alloc) or "
                 "tlx.reuse_group, got " +
                     kindName(m));
  }
  bool distinct = false;
  if (a.has("group_type")) {
    const Val& g = a.get("group_type");
    if (g.kind != Val::Kind::Enum || (g.s != "shared" && g.s != "distinct"))
      raiseError(a.loc("group_type"), "tlx.reuse_group's group_type must be "
                                      "tlx.reuse_group_type.shared or .distinct, got " +
                                          describe(g));
    distinct = g.s == "distinct";
  }
  int64_t groupSize = 1;
  if (a.has("group_size")) {
    groupSize = constInt(a.get("group_size"), a.loc("group_size"), "tlx.reuse_group's group_size",
                         a.expr("group_size"));
    if (groupSize < 1)
      raiseError(a.loc("group_size"), "tlx.reuse_group's group_size must be a positive integer, "
                                      "got " +
                                          std::to_string(groupSize));
  }
  return Val::object("reuse_group", groupSize, args.elts, distinct);
}

void Specializer::joinStorageAlias(const Val& spec, ir::Op* alloc, SourceLoc loc) {
  AliasSpec& s = aliasSpecs.at(static_cast<size_t>(spec.i));
  bool tmem = alloc->result()->type().space == ir::MemorySpace::Tmem;
  if (tmem != s.tmem)
    raiseError(loc, std::string("tlx.local_alloc in ") + (tmem ? "tmem" : "smem") +
                        " cannot use a storage_alias_spec of " + (s.tmem ? "tmem" : "smem") +
                        " storage; the storage kinds must match");
  if (s.overlapSet)
    raiseError(loc, "this storage_alias_spec's set_buffer_overlap was already called; allocate "
                    "every buffer of the spec before defining the overlap");
  s.members.push_back(alloc);
  ir::attr::LocalAlloc::set::alias(*alloc, spec.i);
  ir::attr::LocalAlloc::set::aliasOffset(*alloc, 0);
  ir::attr::LocalAlloc::set::aliasStride(*alloc, 0);
  ir::attr::LocalAlloc::set::aliasBytes(*alloc, s.sizeBytes);
}

Val Specializer::storageAliasAttr(const Val& obj, const std::string& name, SourceLoc loc) {
  if (obj.s == "storage_alias_spec") {
    const AliasSpec& s = aliasSpecs.at(static_cast<size_t>(obj.i));
    if (name == "storage") return Val::enumValue(s.tmem ? "tmem" : "smem");
    if (name == "buffer_size_bytes") return s.sizeBytes ? Val::integer(s.sizeBytes) : Val::none();
    if (name == "set_buffer_overlap") return Val::method(obj, name);
    raiseError(loc, "a tlx.storage_alias_spec has no attribute '" + name +
                        "' (it has storage, buffer_size_bytes, set_buffer_overlap)");
  }
  if (name == "group_size") return Val::integer(obj.i);
  if (name == "group_type") return Val::enumValue(obj.b ? "distinct" : "shared");
  if (name == "args") return Val::tuple(obj.elts);
  raiseError(loc, "a tlx.reuse_group has no attribute '" + name +
                      "' (it has args, group_type, group_size)");
}

Val Specializer::storageAliasMethod(const Val& obj, const std::string& name, CallSite& call) {
  if (obj.s != "storage_alias_spec" || name != "set_buffer_overlap")
    raiseError(call.loc, describe(obj) + " has no method '" + name + "'");
  BoundArgs a(call, {"overlap_def"});
  const Val& root = a.get("overlap_def");
  if (!isGroup(root))
    raiseError(a.loc("overlap_def"),
               "set_buffer_overlap takes a tlx.reuse_group, got " + kindName(root));
  AliasSpec& spec = aliasSpecs.at(static_cast<size_t>(obj.i));
  if (spec.overlapSet)
    raiseError(call.loc, "this storage_alias_spec already has a set_buffer_overlap; each spec "
                         "takes one overlap definition");
  // Every leaf a distinct local_alloc of this spec.
  std::set<const ir::Op*> seen;
  std::function<void(const Val&)> check = [&](const Val& n) {
    if (isGroup(n)) {
      for (const Val& c : n.elts) check(c);
      return;
    }
    const ir::Op* def = n.v->def();
    if (!def || def->code() != ir::OpCode::LocalAlloc || ir::attr::LocalAlloc::alias(*def) != obj.i)
      raiseError(a.loc("overlap_def"),
                 "set_buffer_overlap: every buffer in the reuse_group must be a tlx.local_alloc "
                 "made with reuse= this storage_alias_spec; " +
                     n.type().str() + " is not");
    if (!seen.insert(def).second)
      raiseError(a.loc("overlap_def"), "set_buffer_overlap: the buffer " + n.type().str() +
                                           " appears twice in the reuse_group");
  };
  check(root);

  int64_t alignment = alignmentOf(root);
  int64_t between = alignTo(sizeOf(root, alignment), alignment);
  std::vector<std::pair<const Val*, Placement>> placed;
  std::function<void(const Val&, Placement)> place = [&](const Val& n, Placement p) {
    if (!isGroup(n)) {
      placed.emplace_back(&n, p);
      return;
    }
    if (n.b) { // distinct: one after another
      int64_t at = p.offset;
      for (const Val& c : n.elts) {
        at = alignTo(at, alignment);
        Placement q = p;
        q.offset = at;
        place(c, q);
        at += sizeOf(c, alignment);
      }
      int64_t room = p.levels.back().second;
      if (at - p.offset > room)
        raiseError(call.loc, "set_buffer_overlap: not enough space for a distinct reuse_group: it "
                             "needs " +
                                 std::to_string(at - p.offset) +
                                 " bytes per buffer, its place has " + std::to_string(room));
      return;
    }
    if (n.i > 1) { // group_size subtiles, each as large as the largest member
      int64_t sub = 0;
      for (const Val& c : n.elts) sub = std::max(sub, sizeOf(c, alignment));
      p.levels.emplace_back(n.i, sub);
    }
    for (const Val& c : n.elts) place(c, p);
  };
  Placement top;
  top.levels.emplace_back(std::numeric_limits<int64_t>::max(), between);
  place(root, top);

  int64_t firstCount = placed.front().first->type().count;
  int64_t total = between * firstCount;
  for (const auto& [leaf, p] : placed) {
    ir::Op* alloc = leaf->v->def();
    const ir::Type& t = leaf->type();
    int64_t align = alignmentOf(*leaf);
    int64_t stride = t.count > 1 ? p.address(1) - p.address(0) : 0;
    for (int64_t i = 0; i < t.count; ++i) {
      int64_t at = p.address(i);
      if (at != p.address(0) + i * stride)
        raiseError(call.loc,
                   "set_buffer_overlap: the buffers of " + t.str() +
                       " would not be evenly spaced (buffer " + std::to_string(i) + " at byte " +
                       std::to_string(at) +
                       "); give its reuse_group a group_size whose subtiles fill their place");
      if (at % align != 0)
        raiseError(call.loc, "set_buffer_overlap: buffer " + std::to_string(i) + " of " + t.str() +
                                 " would start at byte " + std::to_string(at) +
                                 ", not a multiple of its alignment " + std::to_string(align));
      total = std::max(total, at + tileBytes(t));
    }
    ir::attr::LocalAlloc::set::aliasOffset(*alloc, p.offset);
    ir::attr::LocalAlloc::set::aliasStride(*alloc, stride);
  }
  if (spec.sizeBytes && spec.sizeBytes < total)
    raiseError(call.loc,
               "storage_alias_spec's buffer_size_bytes=" + std::to_string(spec.sizeBytes) +
                   " is too small: the reuse_group needs " + std::to_string(total) + " bytes");
  if (total > ir::kMaxSharedBytes)
    raiseError(call.loc, "set_buffer_overlap: the reuse_group needs " + std::to_string(total) +
                             " bytes; a block has at most " + std::to_string(ir::kMaxSharedBytes));
  for (ir::Op* m : spec.members)
    ir::attr::LocalAlloc::set::aliasBytes(*m, std::max(total, spec.sizeBytes));
  spec.overlapSet = true;
  return Val::none();
}

} // namespace ww::specialize
