// Run-time values of the interpreter: dense host tensors (elements stored at their IR width, small
// floats as their encodings), shared-memory buffer views, mbarrier views and TMA descriptors.
#pragma once

#include "interp/Numerics.h"
#include "interp/Races.h"
#include "ir/Type.h"

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace ww::ir {
class Op;
}

namespace ww::interp {

/// A scalar or block tensor. Pointers are 64-bit addresses in the interpreter's global address
/// space (see GlobalMemory). Immutable once built, so values are shared freely between SSA uses.
struct Tensor {
  ir::DType elem = ir::DType::I32;
  bool pointer = false;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;

  Tensor() = default;
  Tensor(ir::DType e, bool isPointer, std::vector<int64_t> s)
      : elem(e), pointer(isPointer), shape(std::move(s)) {
    bytes.resize(size_t(numel()) * elemBytes());
  }
  static Tensor ofType(const ir::Type& t) { return Tensor(t.elem, t.pointer, t.shape); }

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int elemBytes() const { return pointer ? 8 : ir::byteWidth(elem); }
  template <typename T> T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
};
using TensorPtr = std::shared_ptr<const Tensor>;

/// Row-major strides of `shape`, in elements.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t>& shape);
/// "[3]" or "[1, 17]": the multi-index of flat element `flat` in `shape`.
std::string formatIndex(const std::vector<int64_t>& shape, int64_t flat);

/// The value of element `i` widened for generic (slow-path) code: ints as int64 (unsigned ones
/// zero-extended into the same bits), floats as their exact double value, pointers as addresses.
struct Scalar {
  bool isFloat = false;
  int64_t i = 0;
  double f = 0;
  int64_t asInt() const { return isFloat ? static_cast<int64_t>(f) : i; }
};
Scalar readScalar(const Tensor& t, int64_t index);
/// Writes `v` converted to t's element type with the cast rules of the IR.
void writeScalar(Tensor& t, int64_t index, const Scalar& v);

/// Storage of one local_alloc (shared memory or TMEM).
struct SharedAlloc {
  std::vector<unsigned char> bytes;
  std::string name;
  AccessLog log;                   // for race checks
  const ir::Op* allocOp = nullptr; // the local_alloc that made it (a peer CTA's is the same op)
  /// Made when a peer CTA's multicast reached it before this CTA ran its local_alloc, which then
  /// takes it over.
  bool reachedFirstByPeer = false;
  bool tmem = false; // Blackwell tensor memory (local_alloc with storage tmem)
};

/// A view of shared-memory (or tensor-memory) tiles: `count` tiles of `shape` with element
/// `strides`, tile i at byteOffset + tileOffset(i). Views from local_view have count 1.
struct BufferView {
  std::shared_ptr<SharedAlloc> alloc;
  ir::DType elem = ir::DType::F32;
  int64_t byteOffset = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t count = 1;
  int64_t tileStrideBytes = 0;
  /// A subtiled storage_alias_spec member (TLX's index rewriting): tile i lies a further
  /// (i % groupSize) * groupStepBytes on.
  int64_t groupSize = 1, groupStepBytes = 0;
  /// A tensor-memory [64, N] tile a CTA pair's M = 64 MMA accumulates into (ir/TmemPairs.h):
  /// its bytes are 128 lanes of N / 2 columns, row r's first half in lane r and its second in
  /// lane 64 + r (the MMA reads and writes them so; shape and strides stay the [64, N] ones).
  bool pairSplit = false;
  int64_t tileOffset(int64_t tile) const {
    return tile * tileStrideBytes + (tile % groupSize) * groupStepBytes;
  }
  int elemBytes() const { return ir::byteWidth(elem); }
  int64_t tileElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  bool contiguous() const { return strides == rowMajorStrides(shape); }
  /// Byte offset in alloc of element `flat` (row-major over shape) of tile `tile`.
  int64_t byteOffsetOf(int64_t tile, int64_t flat) const {
    int64_t off = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      off += (flat % shape[d]) * strides[d];
      flat /= shape[d];
    }
    return byteOffset + tileOffset(tile) + off * elemBytes();
  }
};

struct MBarrierArray;
/// A view of `count` mbarriers starting at `first` (count 1 for a single barrier).
struct BarrierView {
  std::shared_ptr<MBarrierArray> array;
  int64_t first = 0;
  int64_t count = 1;
};

/// A TMA tensor descriptor: global tensor `shape` with element `strides` at `base`, read and
/// written in boxes of `blockShape`.
struct Descriptor {
  ir::DType elem = ir::DType::F16;
  uint64_t base = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> blockShape;
};

struct PendingDot;
/// An async_dot result: available once the dot completes (async_dot_wait).
using PendingDotPtr = std::shared_ptr<PendingDot>;

struct TokenValue {};

struct PerThreadValue;
/// A scalar whose value differs between the threads of an agent (interp/PerThread.cpp).
using PerThreadPtr = std::shared_ptr<const PerThreadValue>;

using RtValue =
    std::variant<std::monostate, TensorPtr, BufferView, BarrierView,
                 std::shared_ptr<const Descriptor>, PendingDotPtr, TokenValue, PerThreadPtr>;

/// tlx.thread_id() and what is computed from it: one value for each thread of the agent, in
/// thread order.
struct PerThreadValue {
  std::vector<RtValue> values;
};

} // namespace ww::interp
