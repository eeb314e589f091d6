// Lowering of TLX shared-memory buffers (sm_90a and later): local_alloc, local_view, and the views
// local_trans, local_slice and local_reinterpret (or one a run-time if chooses), read and written
// by local_load / local_store.
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"

#include "layout/Layouts.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <optional>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

// Built by appending: GCC 12 warns falsely on "[" + temporary string.
std::string bracketed(const std::string& address) {
  std::string out = "[";
  out += address;
  out += ']';
  return out;
}

// Slices and reinterprets count: lowering them checks that any TMA copy or async_dot reading
// them as a tile sees whole swizzle atoms laid out like a buffer of the view's own shape, starting
// at the view's register (see isWholeTile below).
bool isPlainBuffer(const ir::Value* v) {
  std::vector<const ir::Value*> seen;
  std::function<bool(const ir::Value*)> plain = [&](const ir::Value* x) {
    const ir::Op* def = x->def();
    while (def && (def->code() == OpCode::LocalView || def->code() == OpCode::LocalSlice ||
                   def->code() == OpCode::LocalReinterpret)) {
      x = def->operand(0);
      def = x->def();
    }
    std::vector<const ir::Value*> chosen = chosenValues(x);
    if (chosen.empty()) return def && def->code() == OpCode::LocalAlloc;
    // A loop-carried view may come back unchanged: that choice adds nothing.
    if (std::find(seen.begin(), seen.end(), x) != seen.end()) return true;
    seen.push_back(x);
    return std::all_of(chosen.begin(), chosen.end(), plain);
  };
  return plain(v);
}

std::vector<const ir::Value*> chosenValues(const ir::Value* v) {
  std::vector<const ir::Value*> chosen;
  auto yielded = [&](const ir::Block* body, unsigned i) {
    const ir::Op* t = body->terminator();
    if (t && t->code() == OpCode::Yield && i < t->numOperands()) chosen.push_back(t->operand(i));
  };
  if (const ir::Op* def = v->def()) {
    if (def->code() == OpCode::If) {
      for (unsigned r = 0; r < def->numRegions(); ++r) yielded(def->region(r), v->index());
    } else if (def->code() == OpCode::For) {
      chosen.push_back(def->operand(3 + v->index()));
      yielded(def->region(0), v->index());
    }
    return chosen;
  }
  // A for body's carried value (argument 0 is the induction variable).
  const ir::Block* body = v->ownerBlock();
  const ir::Op* loop = body ? body->parentOp() : nullptr;
  if (loop && loop->code() == OpCode::For && v->index() > 0) {
    chosen.push_back(loop->operand(3 + v->index() - 1));
    yielded(body, v->index() - 1);
  }
  return chosen;
}

namespace {

constexpr const char* kByte = "byte";

/// Where the elements of a buffer view sit. Byte `byte` of the element at coordinates
/// (dim0, ...) lies at `bytes.apply(byte, dim0, ...) XOR xorBytes` bytes from the view's
/// register. The linear part is the allocation's layout composed with every view on the way
/// (slice: the low bits of each dim; transpose: dims renamed; reinterpret: the row-major bytes
/// of one shape read as another). A slice offset is a constant: the part the swizzle mixes into
/// the view's own offset bits stays in xorBytes, the rest (addedBytes since the buffer start) is
/// added to the view's register, so a slice of whole swizzle atoms starts at its register.
struct ViewAddressing {
  LinearLayout bytes; // in: "byte", "dim0", ...; out: "offset" (bytes)
  int64_t xorBytes = 0;
  int64_t addedBytes = 0;
  int rank = 0;
  bool cycle = false; // a loop-carried view met again while resolving its own choices
};

std::vector<std::vector<int32_t>> basesOfIn(const LinearLayout& l, const std::string& in) {
  std::vector<std::vector<int32_t>> out;
  for (int bit = 0; bit < l.getInDimSizeLog2(in); ++bit) out.push_back(l.getBasis(in, bit));
  return out;
}

/// A byte layout from its bases: one list per in dim ("byte", "dim0", ...), each basis a byte
/// offset.
LinearLayout byteLayout(const std::vector<std::vector<int32_t>>& byteBases,
                        const std::vector<std::vector<std::vector<int32_t>>>& dimBases) {
  LinearLayout::Bases bases;
  bases.push_back({kByte, byteBases});
  for (size_t d = 0; d < dimBases.size(); ++d)
    bases.push_back({layout::dimName(static_cast<int>(d)), dimBases[d]});
  int32_t top = 1;
  for (const auto& [name, list] : bases)
    for (const auto& b : list) top = std::max(top, int32_t(std::bit_floor(uint32_t(b[0]))) * 2);
  return LinearLayout(bases, LinearLayout::NamedSizes{{"offset", top}});
}

/// The byte layout of a buffer laid out by `coordsOf` (element offset -> coordinates).
LinearLayout bytesOfSharedLayout(const LinearLayout& coordsOf, int rank, int elemBytes) {
  LinearLayout toOffset = coordsOf.invert();
  std::vector<std::vector<int32_t>> byteBases;
  for (int32_t b = 1; b < elemBytes; b *= 2) byteBases.push_back({b});
  std::vector<std::vector<std::vector<int32_t>>> dims(rank);
  for (int d = 0; d < rank; ++d)
    for (const auto& b : basesOfIn(toOffset, layout::dimName(d)))
      dims[d].push_back({b[0] * elemBytes});
  return byteLayout(byteBases, dims);
}

int64_t applyBytes(const LinearLayout& bytes, int rank, const std::vector<int64_t>& coords) {
  std::vector<int32_t> in(rank + 1, 0);
  for (int d = 0; d < rank; ++d) in[d + 1] = static_cast<int32_t>(coords[d]);
  return bytes.apply(in).at(0);
}

/// The addressing of buffer view `v` (see ViewAddressing); user errors name `at`.
ViewAddressing addressingOf(const layout::LayoutMap& layouts, const ir::Value* v,
                            const ir::Op& at) {
  const ir::Op* def = v->def();
  const ir::Type& t = v->type();
  int rank = static_cast<int>(t.shape.size());
  if (def && def->code() == OpCode::LocalView && ir::attr::LocalView::subview(*def)) {
    // Row i of one buffer: the parent without its dim 0, whose offset the register adds (see
    // subviewRowBytes).
    ViewAddressing parent = addressingOf(layouts, def->operand(0), at);
    std::vector<std::vector<std::vector<int32_t>>> dims;
    for (int d = 1; d < parent.rank; ++d)
      dims.push_back(basesOfIn(parent.bytes, layout::dimName(d)));
    if (parent.rank == 1) dims.emplace_back();
    return {byteLayout(basesOfIn(parent.bytes, kByte), dims), parent.xorBytes, parent.addedBytes,
            rank};
  }
  if (def && def->code() == OpCode::LocalView) return addressingOf(layouts, def->operand(0), at);
  if (std::vector<const ir::Value*> chosen = chosenValues(v); !chosen.empty()) {
    // A view chosen at run time (by an if, or carried by a loop): its register is the chosen
    // view's, so every choice must lie alike relative to its register (slices at different
    // offsets of whole tiles do). A loop-carried view that comes back unchanged is skipped.
    static thread_local std::vector<const ir::Value*> open; // the choices being resolved
    ViewAddressing cycled;
    cycled.cycle = true;
    if (std::find(open.begin(), open.end(), v) != open.end()) return cycled;
    struct Opened {
      Opened(const ir::Value* x) { open.push_back(x); }
      ~Opened() { open.pop_back(); }
    } opened(v);
    std::optional<ViewAddressing> first;
    for (const ir::Value* c : chosen) {
      ViewAddressing other = addressingOf(layouts, c, at);
      if (other.cycle) continue;
      if (!first) {
        first = other;
      } else if (!(other.bytes == first->bytes) || other.xorBytes != first->xorBytes ||
                 other.rank != first->rank) {
        const ir::Op* chooser = def ? def : v->ownerBlock()->parentOp();
        raiseError(chooser->loc(), std::string("the buffer views this ") + chooser->name() +
                                       " chooses between (" + t.str() +
                                       ") lie differently in shared memory; '" + at.name() +
                                       "' needs views whose elements sit alike from their "
                                       "start, e.g. slices of whole swizzle atoms");
      }
    }
    return first ? *first : cycled;
  }
  if (!def || def->code() == OpCode::LocalAlloc) {
    const layout::SharedAllocation* a = layouts.sharedAllocation(v);
    if (!a || a->layout.numOutDims() == 0 || a->layout.getTotalOutDimSize() == 0)
      raiseError(at.loc(), std::string("'") + at.name() + "' of a buffer of shape " + t.str() +
                               " is not supported; use power-of-two dims");
    if (!a->padding.empty())
      raiseError(at.loc(), std::string("'") + at.name() + "' of " + t.str() +
                               " allocated with layout=" + a->userLayout +
                               " is not supported by the PTX backend: it reads and writes "
                               "padded buffers with tlx.local_load / tlx.local_store of the "
                               "buffer or its local_view only");
    if (a->fp4Padded) {
      // Padded e2m1 (LayoutAssignment.h): its layout drops the padding bit, so it has no inverse;
      // byte j of a row lies at byte (j & 7) | (j >> 3) << 4 of the [rows, 2 cols] NVMMA tile.
      LinearLayout padded = bytesOfSharedLayout(
          layout::nvmmaSharedLayout({t.shape[0], 2 * t.shape[1]}, 1, 128), 2, 1);
      std::vector<std::vector<int32_t>> cols = basesOfIn(padded, layout::dimName(1));
      cols.erase(cols.begin() + 3);
      return {byteLayout({}, {basesOfIn(padded, layout::dimName(0)), cols}), 0, 0, rank};
    }
    return {bytesOfSharedLayout(a->layout, rank, ir::byteWidth(t.elem)), 0, 0, rank};
  }
  const ir::Value* src = def->operand(0);
  ViewAddressing parent = addressingOf(layouts, src, at);
  auto dimBases = [&](const ViewAddressing& p, int d) {
    return basesOfIn(p.bytes, layout::dimName(d));
  };
  switch (def->code()) {
  case OpCode::LocalTrans: {
    std::vector<int64_t> order = ir::attr::LocalTrans::order(*def);
    if (order.size() != size_t(rank))
      throw std::logic_error("codegen: local_trans without a permutation of every dim");
    std::vector<std::vector<std::vector<int32_t>>> dims;
    for (int64_t d : order) dims.push_back(dimBases(parent, static_cast<int>(d)));
    return {byteLayout(basesOfIn(parent.bytes, kByte), dims), parent.xorBytes, parent.addedBytes,
            rank};
  }
  case OpCode::LocalSlice: {
    std::vector<int64_t> offsets = ir::attr::LocalSlice::offsets(*def),
                         sizes = ir::attr::LocalSlice::sizes(*def);
    std::vector<std::vector<std::vector<int32_t>>> dims;
    for (int d = 0; d < rank; ++d) {
      int64_t size = sizes[size_t(d)], off = offsets[size_t(d)];
      // c + off == c XOR off for every c < size: the slice is the parent's layout restricted to
      // the low bits of each dim, plus a constant.
      if (!std::has_single_bit(uint64_t(size)) || off % size != 0)
        raiseError(def->loc(), "tlx.local_slice of " + src->type().str() + " at offsets " +
                                   ir::shapeDims(offsets) + " with sizes " + ir::shapeDims(sizes) +
                                   " is not supported by the PTX backend: each size must be a "
                                   "power of two and each offset a multiple of its size");
      auto bases = dimBases(parent, d);
      bases.resize(size_t(std::countr_zero(uint64_t(size))));
      dims.push_back(bases);
    }
    LinearLayout bytes = byteLayout(basesOfIn(parent.bytes, kByte), dims);
    int64_t constant = applyBytes(parent.bytes, rank, offsets) ^ parent.xorBytes;
    // Bits the view's own offsets can have: XOR with the others is addition.
    int64_t reach = 0;
    for (const std::string& in : bytes.inDimNames())
      for (const auto& b : basesOfIn(bytes, in)) reach |= b[0];
    return {bytes, constant & reach, parent.addedBytes + (constant & ~reach), rank};
  }
  case OpCode::LocalReinterpret: {
    const ir::Op* srcDef = src->def();
    while (srcDef && srcDef->code() == OpCode::LocalView) srcDef = srcDef->operand(0)->def();
    if (srcDef && srcDef->code() != OpCode::LocalAlloc)
      raiseError(def->loc(), "tlx.local_reinterpret of a sliced, transposed or reinterpreted "
                             "view is not supported; reinterpret the buffer and slice the "
                             "result");
    const ir::Type& st = src->type();
    int64_t srcTile = st.numElements() * ir::byteWidth(st.elem);
    int64_t tile = t.numElements() * ir::byteWidth(t.elem);
    if (!std::all_of(t.shape.begin(), t.shape.end(),
                     [](int64_t s) { return std::has_single_bit(uint64_t(s)); }))
      raiseError(def->loc(), "tlx.local_reinterpret as " + t.str() +
                                 " is not supported by the PTX backend; use power-of-two dims");
    bool whole = ir::attr::LocalReinterpret::whole(*def);
    if (st.count > 1 && tile != srcTile && !whole)
      raiseError(def->loc(), "tlx.local_reinterpret of " + st.str() + " as " + t.str() +
                                 " changes the size of each buffer (" + std::to_string(srcTile) +
                                 " to " + std::to_string(tile) +
                                 " bytes), so indexes would select other bytes; reinterpret one "
                                 "buffer (bufs[i]) or keep the size");
    // The source's bytes in row-major order (last dim fastest), read as the new shape.
    std::vector<std::vector<int32_t>> flat = basesOfIn(parent.bytes, kByte);
    for (int d = static_cast<int>(st.shape.size()); d-- > 0;)
      for (const auto& b : dimBases(parent, d)) flat.push_back(b);
    if (whole) {
      // All buffers of the allocation as one tile: the buffer index is the highest bits.
      const layout::SharedAllocation* a = layouts.sharedAllocation(src);
      if (!a || !std::has_single_bit(uint64_t(st.count)) ||
          !std::has_single_bit(uint64_t(srcTile)) || a->groupSize > 1)
        raiseError(def->loc(), "tlx.local_reinterpret of all " + std::to_string(st.count) +
                                   " buffers of " + st.str() +
                                   " as one tile needs a power-of-two count and tile size");
      for (int64_t k = 1; k < st.count; k *= 2)
        flat.push_back({static_cast<int32_t>(a->bytesPerBuffer * k)});
    }
    flat.resize(size_t(std::countr_zero(uint64_t(tile))));
    size_t next = 0;
    std::vector<std::vector<int32_t>> byteBases;
    for (int32_t b = 1; b < ir::byteWidth(t.elem); b *= 2) byteBases.push_back(flat[next++]);
    std::vector<std::vector<std::vector<int32_t>>> dims(rank);
    for (int d = rank; d-- > 0;)
      for (int64_t s = 1; s < t.shape[size_t(d)]; s *= 2) dims[size_t(d)].push_back(flat[next++]);
    return {byteLayout(byteBases, dims), parent.xorBytes, parent.addedBytes, rank};
  }
  default:
    throw std::logic_error("codegen: not a buffer view");
  }
}

} // namespace

std::optional<LinearLayout> FunctionLowering::contiguousViewBytes(const ir::Op& op, unsigned i) {
  ViewAddressing v = addressingOf(layouts_, op.operand(i), op);
  if (v.cycle || v.xorBytes != 0) return std::nullopt;
  // The byte layout is linear (XOR): its bytes are [0, size) exactly when its bases are
  // independent, each below size, and there are log2(size) of them.
  const ir::Type& t = op.operand(i)->type();
  int64_t size = t.numElements() * ir::byteWidth(t.elem);
  if (!std::has_single_bit(uint64_t(size))) return std::nullopt;
  std::vector<int64_t> pivots; // reduced bases, each with a distinct top bit
  for (const std::string& in : v.bytes.inDimNames())
    for (const auto& b : basesOfIn(v.bytes, in)) {
      int64_t x = b[0];
      if (x >= size) return std::nullopt;
      for (int64_t p : pivots)
        if (x & std::bit_floor(uint64_t(p))) x ^= p;
      if (x == 0) return std::nullopt; // a repeated byte: the view does not cover its range
      pivots.push_back(x);
      std::sort(pivots.begin(), pivots.end(), std::greater<>());
    }
  if (int64_t(1) << pivots.size() != size) return std::nullopt;
  return v.bytes;
}

/// The bytes from row i to row i + 1 of the buffer view a subview (bufs[j][i]) indexes: rows
/// must lie a constant stride apart and never share address bits with the rest of the row (an
/// unswizzled layout), so that the row's start is an addition to the register.
int64_t FunctionLowering::subviewRowBytes(const ir::Op& op) {
  ViewAddressing parent = addressingOf(layouts_, op.operand(0), op);
  auto rows = basesOfIn(parent.bytes, layout::dimName(0));
  int64_t stride = rows.empty() ? 0 : rows[0][0], reach = parent.xorBytes;
  for (const std::string& in : parent.bytes.inDimNames())
    if (in != layout::dimName(0))
      for (const auto& b : basesOfIn(parent.bytes, in)) reach |= b[0];
  bool ok = true;
  for (size_t k = 0; k < rows.size(); ++k)
    ok &= rows[k][0] == (stride << k) && (rows[k][0] & reach) == 0;
  if (!ok)
    raiseError(op.loc(), "indexing the buffer view " + op.operand(0)->type().str() +
                             " (bufs[j][i]) is not supported by the PTX backend: its rows are "
                             "swizzled in shared memory; use tlx.local_slice with constant "
                             "offsets, or a buffer of fewer than 8 rows");
  return stride;
}

namespace {

/// Element offsets (in elements of `elem`) of the view: a user error when a view element's bytes
/// are not contiguous and aligned (a reinterpret to a wider type across the swizzle).
std::function<int64_t(const std::vector<int32_t>&)>
elementOffsets(const ViewAddressing& v, DType elem, const ir::Op& at, int64_t* constant) {
  int64_t eb = ir::byteWidth(elem);
  bool ok = v.xorBytes % eb == 0;
  auto byteBases = basesOfIn(v.bytes, kByte);
  for (size_t i = 0; i < byteBases.size(); ++i) ok &= byteBases[i][0] == int32_t(1) << i;
  for (int d = 0; d < v.rank; ++d)
    for (const auto& b : basesOfIn(v.bytes, layout::dimName(d))) ok &= b[0] % eb == 0;
  if (!ok)
    raiseError(at.loc(), std::string("'") + at.name() + "' of " + at.operand(0)->type().str() +
                             ": the view's elements are not contiguous in the buffer's swizzled "
                             "layout; reinterpret to an element type at most as wide as the "
                             "swizzle's 16-byte units keep together");
  *constant = v.xorBytes / eb;
  LinearLayout bytes = v.bytes;
  int rank = v.rank;
  return [bytes, rank, eb](const std::vector<int32_t>& c) -> int64_t {
    std::vector<int32_t> in(size_t(rank) + 1, 0);
    for (int d = 0; d < rank && d < static_cast<int>(c.size()); ++d) in[size_t(d) + 1] = c[d];
    return bytes.apply(in).at(0) / eb;
  };
}

/// True when the view's bytes are those of an allocation of its own shape starting at its
/// register (what TMA and wgmma descriptors describe).
bool isWholeTile(const ViewAddressing& v, const ir::Type& t, const layout::SharedAllocation& root) {
  if (v.xorBytes != 0) return false;
  int eb = ir::byteWidth(t.elem);
  int64_t atom = root.swizzleBytes ? 8 * root.swizzleBytes : 128;
  if (v.addedBytes % atom != 0) return false;
  if (!std::all_of(t.shape.begin(), t.shape.end(),
                   [](int64_t s) { return std::has_single_bit(uint64_t(s)); }))
    return false;
  LinearLayout own;
  if (root.swizzleBytes) {
    if (t.shape.size() != 2 || t.shape[0] < 8 || t.shape[1] * eb < root.swizzleBytes) return false;
    own = layout::nvmmaSharedLayout(t.shape, eb, root.swizzleBytes);
  } else {
    std::vector<int32_t> order;
    for (int d = static_cast<int>(t.shape.size()) - 1; d >= 0; --d) order.push_back(d);
    own = layout::swizzledSharedLayout(t.shape, 1, 1, 1, order);
  }
  return bytesOfSharedLayout(own, static_cast<int>(t.shape.size()), eb) == v.bytes;
}

/// The first TMA copy or async_dot that reads or writes `view` as a tile (directly or through
/// local_view / local_trans), with the operand index; null if none.
const ir::Op* tileUserOf(const ir::Function& fn, const ir::Value* view) {
  std::vector<const ir::Value*> seen;
  std::function<bool(const ir::Value*)> reaches = [&](const ir::Value* v) {
    for (const ir::Op* d = v->def(); v; d = v->def()) {
      if (v == view) return true;
      if (std::vector<const ir::Value*> chosen = chosenValues(v); !chosen.empty()) {
        if (std::find(seen.begin(), seen.end(), v) != seen.end()) return false;
        seen.push_back(v);
        for (const ir::Value* c : chosen)
          if (reaches(c)) return true;
        return false;
      }
      if (!d || (d->code() != OpCode::LocalView && d->code() != OpCode::LocalTrans)) return false;
      v = d->operand(0);
    }
    return false;
  };
  const ir::Op* found = nullptr;
  ir::walk(fn.body, [&](const ir::Op& op) {
    if (found) return;
    bool tma = op.code() == OpCode::AsyncDescLoad || op.code() == OpCode::AsyncDescStore;
    if (tma && op.numOperands() > 1 && reaches(op.operand(1))) found = &op;
    if (op.code() == OpCode::AsyncDot && op.numOperands() > 1 &&
        (reaches(op.operand(0)) || reaches(op.operand(1))))
      found = &op;
  });
  return found;
}

} // namespace

const layout::SharedAllocation& FunctionLowering::allocationOf(const ir::Op& op,
                                                               unsigned operandIndex) {
  const layout::SharedAllocation* a = layouts_.sharedAllocation(op.operand(operandIndex));
  if (!a)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' needs a shared-memory buffer or barrier from tlx.local_alloc or "
                             "tlx.alloc_barriers; tensor-memory buffers are not supported on " +
                             targetName(options_.target));
  // A padded e2m1 buffer (the operand of a mixed block-scaled MMA) is written by TMA and read
  // by the tensor core; no thread addresses its bytes (LayoutAssignment.h, fp4Padded).
  const OpCode c = op.code();
  if (a->fp4Padded && c != OpCode::AsyncDescLoad && c != OpCode::Tcgen05Mma &&
      c != OpCode::LocalTrans && !(c == OpCode::LocalView && !ir::attr::LocalView::subview(op)))
    raiseError(op.loc(), std::string("'") + op.name() + "' of " +
                             op.operand(operandIndex)->type().str() +
                             ", the e2m1 operand of a mixed tlx.async_dot_scaled, which lies "
                             "padded in shared memory (tcgen05.mma kind::mxf8f6f4): the sm_100a "
                             "backend fills it with tlx.async_descriptor_load only and reads it "
                             "with the MMA (a whole buffer, its local_view or local_trans)");
  return *a;
}

std::string FunctionLowering::groupIndex(const std::string& index, int64_t groupSize) {
  if (std::has_single_bit(uint64_t(groupSize)))
    return b_.pure("and.b32", RegClass::B32, {index, immInt(groupSize - 1)});
  return b_.pure("rem.u32", RegClass::B32, {index, immInt(groupSize)});
}

void FunctionLowering::requireNvmmaUserLayout(const ir::Op& op, unsigned i, bool rowMajorToo) {
  const layout::SharedAllocation& a = allocationOf(op, i);
  if (a.userLayout.empty() || (a.swizzleBytes && a.padding.empty())) return;
  const ir::Value* root = op.operand(i);
  while (root->def() && root->def()->numOperands() && root->def()->code() != OpCode::LocalAlloc)
    root = root->def()->operand(0);
  const ir::Type& t = root->type();
  std::vector<int32_t> rowMajor;
  for (int d = static_cast<int>(t.shape.size()) - 1; d >= 0; --d) rowMajor.push_back(d);
  if (rowMajorToo && !t.shape.empty() && a.padding.empty() &&
      a.layout == layout::swizzledSharedLayout(t.shape, 1, 1, 1, rowMajor))
    return;
  const int eb = ir::byteWidth(t.elem);
  std::string accepted = "leave layout= out (the compiler picks the NVMMA swizzle)";
  if (t.shape.size() == 2) {
    const int sw = layout::nvmmaSwizzleBytes(t.shape, eb);
    if (sw && t.shape[1] * eb == sw)
      accepted = std::string("layout=tlx.swizzled_layout(") +
                 std::to_string(std::countr_zero(unsigned(sw / 16))) + ", " +
                 std::to_string(std::countr_zero(unsigned(16 / eb))) + ", 3, order=[1, 0]) (the " +
                 std::to_string(sw) + "-byte NVMMA swizzle of this tile), or " + accepted;
  }
  const bool tma = op.code() == OpCode::AsyncDescLoad || op.code() == OpCode::AsyncDescStore;
  const std::string consumer = tma ? ir::tmaCopyName(op) : std::string("tlx.async_dot");
  raiseError(op.loc(), std::string("'") + consumer + "' reads " + t.str() +
                           " allocated with layout=" + a.userLayout +
                           ", which is not one of the 32/64/128-byte NVMMA swizzles it takes" +
                           (rowMajorToo ? " (or unswizzled row-major)" : "") + "; use " + accepted);
}

std::string FunctionLowering::electedThread() {
  return b_.pure("setp.eq.u32", RegClass::Pred, {tid(), "0"});
}

std::string FunctionLowering::barrierAddress(const ir::Op& op, unsigned i) {
  allocationOf(op, i);
  std::string offset = b_.materialize(regsOf(op.operand(i)).at(0), RegClass::B32);
  return bracketed(sharedAddress(offset));
}

void FunctionLowering::lowerTlxBuffer(const ir::Op& op) {
  if (options_.target == Target::SM80)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' is supported on sm_90a and sm_100a only; on sm_80 stage data "
                             "with tl.load/tl.store");
  if (isTmemValue(op.code() == OpCode::LocalAlloc ? op.result() : op.operand(0)))
    return lowerTmemBuffer(op);
  switch (op.code()) {
  case OpCode::LocalAlloc: {
    const layout::SharedAllocation* a = layouts_.sharedAllocation(op.result());
    if (!a)
      raiseError(op.loc(), "local_alloc in tensor memory is not supported on " +
                               std::string(targetName(options_.target)) +
                               "; use tlx.storage_kind.smem");
    usesShared_ = true;
    return bind(op.result(), {immInt(a->offset)});
  }
  case OpCode::LocalView: {
    const layout::SharedAllocation& a = allocationOf(op, 0);
    std::string base = b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
    std::string index = b_.materialize(operand(op, 1).at(0), RegClass::B32);
    if (ir::attr::LocalView::subview(op))
      return bind(op.result(), {b_.pure("mad.lo.s32", RegClass::B32,
                                        {index, immInt(subviewRowBytes(op)), base})});
    // Views of one buffer of a multi-buffered allocation: base + index * bytesPerBuffer, and
    // for a subtiled storage_alias_spec member + (index % groupSize) * groupStepBytes.
    std::string at = b_.pure("mad.lo.s32", RegClass::B32, {index, immInt(a.bytesPerBuffer), base});
    if (a.groupSize > 1)
      at = b_.pure("mad.lo.s32", RegClass::B32,
                   {groupIndex(index, a.groupSize), immInt(a.groupStepBytes), at});
    return bind(op.result(), {at});
  }
  case OpCode::LocalTrans:
  case OpCode::LocalSlice:
  case OpCode::LocalReinterpret: {
    const layout::SharedAllocation& root = allocationOf(op, 0);
    ViewAddressing parent = addressingOf(layouts_, op.operand(0), op);
    ViewAddressing view = addressingOf(layouts_, op.result(), op);
    if (op.code() != OpCode::LocalTrans)
      if (const ir::Op* user = tileUserOf(fn_, op.result());
          user && !isWholeTile(view, op.result()->type(), root)) {
        const ir::Type& rt = op.operand(0)->type();
        std::string what = root.swizzleBytes
                               ? "whole " + std::to_string(root.swizzleBytes) +
                                     "-byte swizzle atoms laid out like a buffer of its own "
                                     "shape: rows in multiples of 8 and columns in blocks of " +
                                     std::to_string(root.swizzleBytes / ir::byteWidth(rt.elem)) +
                                     " elements"
                               : "whole rows of the buffer";
        raiseError(user->loc(), std::string("'") + user->name() + "' reads the " + op.name() + " " +
                                    op.result()->type().str() + " of " + rt.str() +
                                    " as a tile, but it is not one; TMA and async_dot accept a "
                                    "view made of " +
                                    what);
      }
    std::string reg = regsOf(op.operand(0)).at(0);
    if (view.addedBytes != parent.addedBytes)
      reg = b_.pure(
          "add.s32", RegClass::B32,
          {b_.materialize(reg, RegClass::B32), immInt(view.addedBytes - parent.addedBytes)});
    return bind(op.result(), {reg});
  }
  case OpCode::LocalLoad:
  case OpCode::LocalStore: {
    if (const layout::SharedAllocation& a = allocationOf(op, 0); !a.padding.empty())
      return lowerPaddedAccess(op, a);
    ViewAddressing view = addressingOf(layouts_, op.operand(0), op);
    DType elem = op.operand(0)->type().elem;
    int64_t constant = 0;
    OffsetFn offsetOf = elementOffsets(view, elem, op, &constant);
    std::string base = b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
    if (op.code() == OpCode::LocalLoad)
      return bind(op.result(),
                  loadShared(layoutOf(op.result()), offsetOf, 0, constant, elem, base));
    // The interpreter, the reference, runs a warp group's local_store as one step: the group's
    // earlier reads of the buffer are done before it, and its writes are visible to the group's
    // later ops after it. (A barrier for bytes shared with an earlier buffer relies on this one
    // coming first: FunctionLowering::reuseBarrier.)
    barrier();
    storeShared(operand(op, 1), operandLayoutOf(op, 1), offsetOf, 0, elem, base, constant);
    return barrier();
  }
  default:
    throw std::logic_error("codegen: not a TLX buffer op");
  }
}

void FunctionLowering::lowerPaddedAccess(const ir::Op& op, const layout::SharedAllocation& a) {
  const ir::Value* buf = op.operand(0);
  const ir::Type& t = buf->type();
  const bool load = op.code() == OpCode::LocalLoad;
  const std::string fn = load ? "tlx.local_load" : "tlx.local_store";
  if (!isPlainBuffer(buf))
    raiseError(op.loc(), fn + " of a sliced, transposed or reinterpreted view of " + t.str() +
                             " allocated with layout=" + a.userLayout +
                             " is not supported by the PTX backend; padded buffers are read and "
                             "written whole (the buffer or its local_view)");
  // Row-major element offsets (the padded layout's identity part): coordinate bits reach
  // distinct offset bits, so XOR and addition agree on them.
  std::vector<int64_t> stride(t.shape.size(), 1);
  for (size_t d = t.shape.size(); d-- > 1;) stride[d - 1] = stride[d] * t.shape[d];
  OffsetFn offsetOf = [stride](const std::vector<int32_t>& c) {
    int64_t off = 0;
    for (size_t d = 0; d < stride.size() && d < c.size(); ++d) off += c[d] * stride[d];
    return off;
  };
  const LinearLayout& l = load ? layoutOf(op.result()) : operandLayoutOf(op, 1);
  int64_t seen = 0;
  for (const char* dim : {layout::kRegister, layout::kLane, layout::kWarp})
    for (const auto& b : basesOfIn(l, dim)) {
      int64_t x = offsetOf(b);
      if (x & seen)
        raiseError(op.loc(), fn + " of " + t.str() + " allocated with layout=" + a.userLayout +
                                 ": the value's register layout combines element bits (XOR), "
                                 "which padding does not distribute over; the PTX backend "
                                 "accesses padded buffers in layouts whose bits reach distinct "
                                 "elements");
      seen |= x;
    }
  std::string base = b_.materialize(regsOf(buf).at(0), RegClass::B32);
  if (load) return bind(op.result(), loadShared(l, offsetOf, 0, 0, t.elem, base, &a.padding));
  barrier(); // as the unpadded local_store (lowerTlxBuffer)
  storeShared(operand(op, 1), l, offsetOf, 0, t.elem, base, 0, &a.padding);
  barrier();
}

FunctionLowering::OffsetFn FunctionLowering::bufferElementOffsets(const ir::Op& op, unsigned i,
                                                                  int64_t* constant) {
  allocationOf(op, i);
  return elementOffsets(addressingOf(layouts_, op.operand(i), op), op.operand(i)->type().elem, op,
                        constant);
}

} // namespace ww::codegen
