// Element types (DType) and value types of Tile IR: scalars, block tensors, pointers, shared-memory
// buffers, barriers, tensor descriptors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ww::ir {

/// Element types, with Triton's names (tl.float16 ...) and signature names (fp16 ...).
enum class DType : uint8_t {
  I1,
  I8,
  I16,
  I32,
  I64,
  U8,
  U16,
  U32,
  U64,
  F8E4M3, // tl.float8e4nv
  F8E5M2, // tl.float8e5
  F16,
  BF16,
  F32,
  F64,
  // Triton's other 8-bit floats (no tensor-core instructions; converted in software on the GPU):
  F8E4B15, // tl.float8e4b15: e4m3 with bias 15, 0x7F / 0xFF NaN, no infinity
  F8E4B8,  // tl.float8e4b8 (torch float8_e4m3fnuz): bias 8, 0x80 NaN, no -0 or infinity
  F8E5B16, // tl.float8e5b16 (torch float8_e5m2fnuz): bias 16, 0x80 NaN, no -0 or infinity
};

int bitWidth(DType t);
inline int byteWidth(DType t) {
  return t == DType::I1 ? 1 : bitWidth(t) / 8;
}
bool isFloat(DType t);
inline bool isInt(DType t) {
  return !isFloat(t);
} // I1 counts as an integer
bool isSigned(DType t); // signed integers and floats
/// Any of the five 8-bit float types.
bool isFp8(DType t);
/// A float type's explicit mantissa bits and exponent bias (Triton's fp_mantissa_width and
/// exponent_bias); 0 for integers.
int mantissaBits(DType t);
int exponentBias(DType t);
/// Signature spelling: i1 i8 ... u64 fp8e4nv fp8e5 fp16 bf16 fp32 fp64 fp8e4b15 fp8e4b8 fp8e5b16.
std::string_view sigName(DType t);
/// Triton spelling: int1 ... uint64 float8e4nv float8e5 float16 bfloat16 float32 float64.
std::string_view tlName(DType t);
std::optional<DType> parseSigDType(std::string_view s);
/// A shape as messages write it: "[2, 4]" (Python's list), and as IR types do: "2x4".
std::string shapeText(const std::vector<int64_t>& shape);
std::string shapeDims(const std::vector<int64_t>& shape);
std::optional<DType> parseTlDType(std::string_view s);

enum class TypeKind : uint8_t {
  None,       // statements and ops without results
  Value,      // numbers or pointers, scalar (empty shape) or block tensor
  Buffer,     // shared-memory (or TMEM) buffers: `count` buffers of `shape` x `elem`
  Barrier,    // `count` mbarriers (alloc_barriers) or one barrier (a view)
  Descriptor, // a TMA tensor descriptor: element type, rank and block shape
  Token,      // ordering token of async operations (async copies, wgmma groups)
};

enum class MemorySpace : uint8_t { Global, Shared, Tmem };

/// A Tile IR type. Plain value semantics; compare with ==.
struct Type {
  TypeKind kind = TypeKind::None;
  DType elem = DType::I32;    // element type; for pointers the pointee
  bool pointer = false;       // Value: the elements are global pointers to `elem`
  std::vector<int64_t> shape; // Value: block shape (empty: scalar); Buffer: one tile's shape;
                              // Descriptor: block shape
  int64_t count = 1;          // Buffer/Barrier: how many (multi-buffering); views have 1
  MemorySpace space = MemorySpace::Global;
  int rank = 0; // Descriptor: rank of the global tensor

  static Type none() { return {}; }
  static Type scalar(DType t) { return Type{TypeKind::Value, t, false, {}, 1}; }
  static Type ptr(DType pointee) { return Type{TypeKind::Value, pointee, true, {}, 1}; }
  static Type tensor(DType t, std::vector<int64_t> shape) {
    return Type{TypeKind::Value, t, false, std::move(shape), 1};
  }
  static Type ptrTensor(DType pointee, std::vector<int64_t> shape) {
    return Type{TypeKind::Value, pointee, true, std::move(shape), 1};
  }
  static Type buffer(DType t, std::vector<int64_t> shape, int64_t count,
                     MemorySpace space = MemorySpace::Shared) {
    return Type{TypeKind::Buffer, t, false, std::move(shape), count, space};
  }
  static Type barrier(int64_t count) {
    return Type{TypeKind::Barrier, DType::I64, false, {}, count, MemorySpace::Shared};
  }
  static Type descriptor(DType t, std::vector<int64_t> blockShape, int rank) {
    Type d{TypeKind::Descriptor, t, false, std::move(blockShape), 1};
    d.rank = rank;
    return d;
  }
  static Type token() { return Type{TypeKind::Token, DType::I32, false, {}, 1}; }

  bool isValue() const { return kind == TypeKind::Value; }
  bool isScalar() const { return kind == TypeKind::Value && shape.empty(); }
  bool isTensor() const { return kind == TypeKind::Value && !shape.empty(); }
  bool isPointer() const { return kind == TypeKind::Value && pointer; }
  int64_t numElements() const;
  /// The same type with another shape (scalar when empty).
  Type withShape(std::vector<int64_t> s) const;
  /// The same shape with another element type (and not a pointer).
  Type withElem(DType t) const;
  /// Bytes of one element as stored in memory (8 for pointers).
  int elemBytes() const { return pointer ? 8 : byteWidth(elem); }

  /// `i32`, `fp16`, `ptr<fp32>`, `tensor<128xfp32>`, `tensor<64x64xptr<fp16>>`,
  /// `buffer<3x128x64xfp16, smem>`, `barrier<2>`, `desc<fp16, 128x64, rank=2>`, `token`.
  std::string str() const;
  bool operator==(const Type& o) const = default;
  /// A hash agreeing with ==: every field that == compares takes part.
  size_t hash() const;
};

/// Whether a TMA block of shape `block` fills a buffer tile of shape `tile`: the same shape once
/// leading 1s are dropped from both (TLX copies a [1, 1, M, N] box of a 4-D descriptor into an
/// [M, N] buffer; the box's bytes in row-major order are the tile's).
bool sameTmaTile(const std::vector<int64_t>& block, const std::vector<int64_t>& tile);

/// Blackwell tensor memory (128 lanes of 32-bit columns): whether buffer type `t` is a tile of
/// block scales (uint8 / int8 [rows, cols], rows 64 or a multiple of 128 and cols a multiple of
/// 4), which takes rows x cols / 128 columns: scale c of row r lies in byte c % 4 of column
/// (c / 4 * rows + r) / 32, lane r % 32 of every lane quarter (ir/BlockScaled.h).
bool isTmemScaleTile(const Type& t);
/// The 32-bit tensor-memory columns one buffer of `t` takes: [M, N] tiles of 32-bit elements N,
/// of 16-bit ones N / 2 and of 8-bit ones N / 4 (packed, as TLX lays them out), scale tiles as
/// above; 0 for other shapes.
int64_t tmemColumns(const Type& t);

/// For unordered containers keyed by types.
struct TypeHash {
  size_t operator()(const Type& t) const { return t.hash(); }
};

/// Mixes `v` into the running hash `seed` (boost::hash_combine's recipe, 64-bit constant).
inline size_t hashCombine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

} // namespace ww::ir
