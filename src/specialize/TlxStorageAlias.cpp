// tlx.storage_alias_spec: several tlx.local_allocs sharing one region of shared memory or of
// tensor memory. Each member allocation keeps its own type; the specializer records where its
// buffers lie in the region as attributes of its local_alloc (ir/Ops.def: alias, alias_offset,
// alias_stride, alias_group, alias_bytes; units are bytes in shared memory and 32-bit columns
// in tensor memory, as TLX counts them). Layout assignment (shared memory) and the tensor-memory
// plan of codegen place each region once and every member in it; the interpreter gives the
// members one byte array (tensor memory: one array of lanes x columns).
//
// spec.set_buffer_overlap(tlx.reuse_group(...)) places the members as TLX's storage-alias
// lowering does (its BufferOffsetCalculation and StorageAliasAllocation passes): the group tree
// is sized per buffer index (shared: the largest child times group_size; distinct: the children
// one after another, each aligned), and walked from offset 0 with the tree's size as the
// distance between buffer indices; a shared group splits that distance by its group_size and
// multiplies the group size its members see, a distinct group places its children one after
// another. A member at offset o, distance d and group size g, one buffer being u units, has
// buffer i at physical index s i + o / u + (i mod g) of its own buffers (s = d / u), or at i
// when s = 1 and o = 0: TLX rewrites the member's indices that way, which is also why it
// requires o and d to be multiples of u. Without set_buffer_overlap every member starts at the
// region's start, buffers at their own spacing.
#include "specialize/SpecializerImpl.h"

#include "ir/Limits.h"
#include "ir/OpAttrs.h"
#include "ir/TmemPairs.h"
#include "layout/Layouts.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <unordered_set>

namespace ww::specialize {

namespace {

int64_t tileBytes(const ir::Type& t) {
  return t.numElements() * ir::byteWidth(t.elem);
}

bool isGroup(const Val& v) {
  return v.kind == Val::Kind::Object && v.s == "reuse_group";
}

/// What sizes a region's leaves: shared memory or tensor memory, and the tensor-memory tiles a
/// CTA pair's M = 64 MMA accumulates into (half their columns; ir/TmemPairs.h).
struct Units {
  bool tmem = false;
  const std::unordered_set<const ir::Op*>* split = nullptr;
  /// The size of one buffer of leaf `v`: bytes, or tensor-memory columns.
  int64_t of(const ir::Value* v) const {
    const ir::Type& t = v->type();
    if (!tmem) return tileBytes(t);
    return ir::tmemColumns(t, split && split->count(v->def()));
  }
};

/// The alignment of a node. Shared memory: the compiler's alignment of its tiles (at least one
/// element; TLX's is 128 bytes, warpweave's swizzled tiles need their 1024). Tensor memory: as
/// TLX, a leaf's own column count, so that a member's offset is a whole number of its buffers.
int64_t alignmentOf(const Val& node, const Units& u) {
  if (!isGroup(node)) {
    const ir::Type& t = node.v->type();
    if (u.tmem) return std::max<int64_t>(1, u.of(node.v));
    return std::max<int64_t>(layout::sharedTileAlignment(t.shape, ir::byteWidth(t.elem)),
                             ir::byteWidth(t.elem));
  }
  int64_t a = 1;
  for (const Val& c : node.elts) a = std::max(a, alignmentOf(c, u));
  return a;
}

/// Units one buffer index of `node` needs (TLX's getElementSize).
int64_t sizeOf(const Val& node, int64_t alignment, const Units& u) {
  if (!isGroup(node)) return u.of(node.v);
  int64_t size = 0;
  for (const Val& c : node.elts) {
    if (node.b) // distinct: tensor-memory children at their own alignment
      size = alignTo(size, u.tmem ? alignmentOf(c, u) : alignment) + sizeOf(c, alignment, u);
    else
      size = std::max(size, sizeOf(c, alignment, u));
  }
  return node.b ? size : size * node.i;
}

/// Where TLX puts a member: buffer i at `offset` + i * `stride` + (i mod `group`) * one buffer.
struct Placement {
  int64_t offset = 0, stride = 0, group = 1, unit = 0;
  int64_t address(int64_t i) const { return offset + i * stride + (i % group) * unit; }
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
      const int64_t most = spec.tmem ? ir::kMaxTensorMemoryBytes : ir::kMaxSharedBytes;
      if (spec.sizeBytes < 1 || spec.sizeBytes > most)
        raiseError(a.loc("buffer_size_bytes"),
                   "tlx.storage_alias_spec's buffer_size_bytes must be 1.." + std::to_string(most) +
                       ", got " + std::to_string(spec.sizeBytes));
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
  ir::attr::LocalAlloc::set::aliasBytes(*alloc, specUnits(s));
}

Val Specializer::sharedReuseSpec(const Val& reused, SourceLoc loc) {
  ir::Op* def = reused.v->def();
  if (!def || def->code() != ir::OpCode::LocalAlloc)
    raiseError(loc, "tlx.local_alloc's reuse= takes the buffers a shared-memory local_alloc "
                    "returned, not a view of them");
  const int64_t id = ir::attr::LocalAlloc::alias(*def);
  if (id >= 0) {
    // The allocation already shares an implicit spec (an earlier reuse= of it): join that one.
    if (!aliasSpecs.at(size_t(id)).implicit)
      raiseError(loc, "tlx.local_alloc's reuse= names a member of a storage_alias_spec; pass the "
                      "spec itself as reuse=");
    return Val::object("storage_alias_spec", id);
  }
  AliasSpec spec;
  spec.implicit = true;
  aliasSpecs.push_back(spec);
  Val made = Val::object("storage_alias_spec", int64_t(aliasSpecs.size() - 1));
  joinStorageAlias(made, def, loc);
  return made;
}

/// buffer_size_bytes in the spec's units: bytes, or the tensor-memory columns that many bytes
/// of 128 lanes take (TLX: bytes / (128 x 4)).
int64_t Specializer::specUnits(const AliasSpec& s) {
  return s.tmem ? (s.sizeBytes + 128 * 4 - 1) / (128 * 4) : s.sizeBytes;
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

  // Placed once the kernel is built (placeStorageAliases): a tensor-memory member's columns
  // depend on the MMAs that use it.
  spec.overlap = root;
  spec.overlapLoc = call.loc;
  spec.overlapSet = true;
  return Val::none();
}

void Specializer::placeStorageAliases(const ir::Block& body) {
  std::unordered_set<const ir::Op*> split;
  bool any = false;
  for (const AliasSpec& spec : aliasSpecs) any |= spec.overlapSet;
  if (!any) return;
  split = ir::pairSplitAllocs(body);
  for (AliasSpec& spec : aliasSpecs) {
    if (!spec.overlapSet) continue;
    const Val& root = spec.overlap;
    const SourceLoc loc = spec.overlapLoc;
    const bool tmem = spec.tmem;
    const Units units{tmem, &split};
    const std::string unit = tmem ? " tensor-memory columns" : " bytes";
    const int64_t alignment = alignmentOf(root, units);
    const int64_t between = alignTo(sizeOf(root, alignment, units), alignment);
    // TLX's BufferOffsetCalculation: (offset, distance between buffer indices, group size) of
    // every leaf.
    struct Leaf {
      const Val* v;
      int64_t offset, between, group;
    };
    std::vector<Leaf> leaves;
    std::function<void(const Val&, int64_t, int64_t, int64_t)> collect =
        [&](const Val& n, int64_t offset, int64_t dist, int64_t group) {
          if (!isGroup(n)) {
            leaves.push_back({&n, offset, dist, group});
            return;
          }
          if (!n.b) { // shared: one offset, the distance split into group_size subtiles
            for (const Val& c : n.elts) collect(c, offset, dist / n.i, group * n.i);
            return;
          }
          int64_t at = offset;
          for (const Val& c : n.elts) {
            at = alignTo(at, tmem ? alignmentOf(c, units) : alignment);
            collect(c, at, dist, group);
            at += sizeOf(c, alignment, units);
          }
          if (at - offset > dist)
            raiseError(loc, "set_buffer_overlap: not enough space for a distinct reuse_group: it "
                            "needs " +
                                std::to_string(at - offset) + unit + " per buffer, its place has " +
                                std::to_string(dist));
        };
    collect(root, 0, between, 1);

    int64_t total = between * leaves.front().v->type().count;
    for (const Leaf& leaf : leaves) {
      ir::Op* alloc = leaf.v->v->def();
      const ir::Type& t = leaf.v->type();
      Placement p;
      p.unit = units.of(leaf.v->v);
      // TLX (StorageAliasAllocation) indexes a member's own buffers, so its offset and spacing
      // must be whole buffers.
      if (p.unit <= 0 || leaf.between % p.unit != 0 || leaf.offset % p.unit != 0)
        raiseError(loc, "set_buffer_overlap: " + t.str() + " would lie " +
                            std::to_string(leaf.offset) + unit + " into its place, " +
                            std::to_string(leaf.between) + unit +
                            " per buffer index, which TLX requires to be multiples of its "
                            "buffer size (" +
                            std::to_string(p.unit) + unit + ")");
      const int64_t scale = leaf.between / p.unit, slots = leaf.offset / p.unit;
      p.stride = p.unit;
      if (scale > 1 || slots > 0) { // TLX rewrites its indices: s i + o / u + (i mod g)
        p.stride = leaf.between;
        p.offset = leaf.offset;
        p.group = leaf.group;
      }
      const int64_t align = tmem ? 1 : alignmentOf(*leaf.v, units);
      for (int64_t i = 0; i < t.count; ++i) {
        const int64_t at = p.address(i);
        if (at % align != 0)
          raiseError(loc, "set_buffer_overlap: buffer " + std::to_string(i) + " of " + t.str() +
                              " would start at byte " + std::to_string(at) +
                              ", not a multiple of its alignment " + std::to_string(align));
        total = std::max(total, at + p.unit);
      }
      // TLX sizes a tensor-memory region by its members' own columns, too.
      if (tmem) total = std::max(total, p.unit * t.count);
      ir::attr::LocalAlloc::set::aliasOffset(*alloc, p.offset);
      ir::attr::LocalAlloc::set::aliasStride(*alloc, p.stride);
      ir::attr::LocalAlloc::set::aliasGroup(*alloc, p.group);
    }
    if (spec.sizeBytes && specUnits(spec) < total)
      raiseError(loc, "storage_alias_spec's buffer_size_bytes=" + std::to_string(spec.sizeBytes) +
                          " is too small: the reuse_group needs " + std::to_string(total) + unit +
                          (tmem ? " (128 lanes x 4 bytes each)" : ""));
    const int64_t most = tmem ? 512 : ir::kMaxSharedBytes;
    if (total > most)
      raiseError(loc, "set_buffer_overlap: the reuse_group needs " + std::to_string(total) + unit +
                          "; a block has at most " + std::to_string(most));
    for (ir::Op* m : spec.members)
      ir::attr::LocalAlloc::set::aliasBytes(*m, std::max(total, specUnits(spec)));
  }
}

} // namespace ww::specialize
