// The specializer's value model: what a kernel-language expression evaluates to at compile time.
// Either a compile-time value (constexpr number, dtype, tuple, function, namespace) or a Tile IR
// value.
#pragma once

#include "frontend/Ast.h"
#include "ir/IR.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ww::specialize {

struct FunctionRef {
  const ast::FunctionDef* def = nullptr;
  size_t module = 0; // index into SpecializeInput::modules
};

/// One value in the specializer. Constexpr kinds fold at compile time; Runtime wraps an IR value.
struct Val {
  enum class Kind {
    None,
    Bool,
    Int,
    Float,
    String,
    DType,     // tl.float16 ...; `dtypeIsPointer` for tl.pointer_type(...)
    Tuple,     // (a, b): elements in `elts`
    Runtime,   // an IR value (number, pointer, tensor, buffer, barrier, descriptor, token)
    Function,  // a @jit function (or a plain def, rejected when called)
    Namespace, // tl, tlx, math, ww, tlx.storage_kind, an imported helper module
    Builtin,   // a named builtin callable: "tl.arange", "range", "min"
    Method,    // `receiver.name`, bound to its receiver (elts[0])
    Enum,      // tlx.storage_kind.smem -> "smem"
    Slice,     // `:` inside a subscript
    Object,    // a TLX compile-time object: `s` "storage_alias_spec" (`i`: its index in the
               // specializer's table) or "reuse_group" (`elts`: members, `i`: group_size,
               // `b`: distinct)
    BlockPtr,  // tl.make_block_ptr: `elts` = {base, shape, strides, offsets, block_shape, order}
               // (see blockPtr() below); an aggregate like Tuple for loops, `if`s and calls
  };

  Kind kind = Kind::None;
  bool b = false; // Bool: the value; Int: set for an int from 2**63 to 2**64 - 1 (see uinteger)
  int64_t i = 0;
  double f = 0;
  std::string s; // String, Namespace path, Builtin / Method name, Enum value
  ir::DType dtype = ir::DType::I32;
  bool dtypeIsPointer = false;
  std::vector<Val> elts;
  ir::Value* v = nullptr;
  FunctionRef fn;

  static Val none() { return {}; }
  static Val boolean(bool x) {
    Val r;
    r.kind = Kind::Bool;
    r.b = x;
    return r;
  }
  static Val integer(int64_t x) {
    Val r;
    r.kind = Kind::Int;
    r.i = x;
    return r;
  }
  /// A Python int up to 2**64 - 1: from 2**63 on (Triton's uint64 constants, `1 << 63`) `i`
  /// holds its bits and `b` is set. Compile-time ints span [-2**63, 2**64); Python's are unbounded.
  static Val uinteger(uint64_t x) {
    Val r = integer(static_cast<int64_t>(x));
    r.b = x > static_cast<uint64_t>(INT64_MAX);
    return r;
  }
  static Val real(double x) {
    Val r;
    r.kind = Kind::Float;
    r.f = x;
    return r;
  }
  static Val string(std::string x) {
    Val r;
    r.kind = Kind::String;
    r.s = std::move(x);
    return r;
  }
  static Val dtypeOf(ir::DType t, bool pointer = false) {
    Val r;
    r.kind = Kind::DType;
    r.dtype = t;
    r.dtypeIsPointer = pointer;
    return r;
  }
  static Val tuple(std::vector<Val> e) {
    Val r;
    r.kind = Kind::Tuple;
    r.elts = std::move(e);
    return r;
  }
  static Val runtime(ir::Value* x) {
    Val r;
    r.kind = Kind::Runtime;
    r.v = x;
    return r;
  }
  static Val function(FunctionRef f) {
    Val r;
    r.kind = Kind::Function;
    r.fn = f;
    return r;
  }
  static Val ns(std::string path) {
    Val r;
    r.kind = Kind::Namespace;
    r.s = std::move(path);
    return r;
  }
  static Val builtin(std::string name) {
    Val r;
    r.kind = Kind::Builtin;
    r.s = std::move(name);
    return r;
  }
  static Val method(Val receiver, std::string name) {
    Val r;
    r.kind = Kind::Method;
    r.s = std::move(name);
    r.elts.push_back(std::move(receiver));
    return r;
  }
  static Val object(std::string cls, int64_t i, std::vector<Val> members = {}, bool flag = false) {
    Val r;
    r.kind = Kind::Object;
    r.s = std::move(cls);
    r.i = i;
    r.elts = std::move(members);
    r.b = flag;
    return r;
  }
  /// A block pointer. `base` is a run-time scalar pointer; `shape`, `strides` and `offsets` are
  /// tuples of run-time i64 scalars (so that tl.advance inside a loop keeps the structure the loop
  /// carries); `blockShape` and `order` are tuples of ints.
  static Val blockPtr(Val base, Val shape, Val strides, Val offsets, Val blockShape, Val order) {
    Val r;
    r.kind = Kind::BlockPtr;
    r.elts = {std::move(base),    std::move(shape),      std::move(strides),
              std::move(offsets), std::move(blockShape), std::move(order)};
    return r;
  }
  static Val enumValue(std::string x) {
    Val r;
    r.kind = Kind::Enum;
    r.s = std::move(x);
    return r;
  }

  bool isRuntime() const { return kind == Kind::Runtime; }
  /// Values whose `elts` hold run-time leaves that loops carry and `if`s merge element by element.
  bool isAggregate() const { return kind == Kind::Tuple || kind == Kind::BlockPtr; }
  bool isNone() const { return kind == Kind::None; }
  bool isNumber() const { return kind == Kind::Bool || kind == Kind::Int || kind == Kind::Float; }
  bool isIntLike() const { return kind == Kind::Bool || kind == Kind::Int; }
  /// An int from 2**63 on (uinteger): its bits are in `i`, which reads as negative.
  bool isBigUnsigned() const { return kind == Kind::Int && b; }
  /// A compile-time value: everything except Runtime (tuples when all elements are).
  bool isConstexpr() const;
  const ir::Type& type() const { return v->type(); }
};

/// The value of a Bool or Int constexpr, big unsigned ints included.
inline __int128 intValue128(const Val& v) {
  if (v.kind == Val::Kind::Bool) return v.b;
  return v.b ? static_cast<__int128>(static_cast<uint64_t>(v.i)) : static_cast<__int128>(v.i);
}
/// `x` as an Int constexpr when it lies in [-2**63, 2**64); false otherwise.
inline bool intFromInt128(__int128 x, Val& out) {
  if (x < static_cast<__int128>(INT64_MIN) || x > static_cast<__int128>(UINT64_MAX)) return false;
  out = x > INT64_MAX ? Val::uinteger(static_cast<uint64_t>(x))
                      : Val::integer(static_cast<int64_t>(x));
  return true;
}

/// Python's truth value of a constexpr; throws std::logic_error for runtime values.
bool truthy(const Val& v);
/// Python equality of two constexprs.
bool constexprEqual(const Val& a, const Val& b);
/// Whether two block pointers have one block shape, order and element type (so that an `if` or a
/// loop can merge them leaf by leaf).
bool sameBlockPtrLayout(const Val& a, const Val& b);
/// How the value reads in messages: `1024`, `tl.float16`, `tensor<128xfp32>`, `(1, 2)`.
std::string describe(const Val& v);
/// The kind name used in "expected X, got Y" messages: "int", "tensor<...>", "a tuple", ...
std::string kindName(const Val& v);

} // namespace ww::specialize
