// Operands and results of Tile IR ops, generated from the OPERANDS / RESULTS lines of Ops.def
// (X-macros): how many each op takes (fixed, optional as a has_* attribute says, counted by an
// int attribute, or variadic) and of which kinds (scalar, tensor, pointer, buffer, barrier,
// descriptor, token). The verifier checks every op against them after every pass; the per-op type
// rules (equal operand types, i1 conditions, shapes) stay in transforms/Verifier.cpp.
#pragma once

#include "ir/IR.h"

#include <string>

namespace ww::ir {

/// A set of value kinds, one bit each.
using ValueKinds = uint16_t;

namespace kind {
enum : ValueKinds {
  Scalar = 1u << 0,    // a number (or i1) without shape
  Tensor = 1u << 1,    // a block tensor of numbers
  Ptr = 1u << 2,       // one global pointer
  PtrTensor = 1u << 3, // a block tensor of global pointers
  Buf = 1u << 4,       // shared-memory / TMEM buffers, or a view of one
  Bar = 1u << 5,       // mbarriers, or a view of one
  Desc = 1u << 6,      // a tensor descriptor
  Token = 1u << 7,     // an async ordering token
  Num = Scalar | Tensor,
  Ptrs = Ptr | PtrTensor,
  Scalars = Scalar | Ptr,
  Tensors = Tensor | PtrTensor,
  Val = Num | Ptrs,
  Any = Val | Buf | Bar | Desc | Token,
  // Not a kind: marks the shared buffer operand the op writes (writtenSharedBuffer).
  Written = 1u << 15,
};
} // namespace kind

/// The kind bit of `t` (one of kind::Scalar ... kind::Token; 0 for TypeKind::None).
ValueKinds kindOf(const Type& t);
/// "a scalar or a tensor", "a buffer", ...
std::string kindsText(ValueKinds k);

/// One operand or result position of an OPERANDS / RESULTS line.
struct Slot {
  enum class Arity : uint8_t {
    End,      // terminates a list
    One,      // exactly one value
    Optional, // one value when the Bool attribute `attrName` is set
    Counted,  // as many values as the Int attribute `attrName` says
    Variadic, // any number (what the other slots leave; at most one per list)
  };
  const char* name = nullptr;
  ValueKinds kinds = 0;
  Arity arity = Arity::End;
  bool (*present)(const Op&) = nullptr;    // Optional: the attribute's typed accessor
  int64_t (*counted)(const Op&) = nullptr; // Counted: the attribute's typed accessor
  const char* attrName = nullptr;          // Optional / Counted
};

struct OpSignature {
  const Slot* operands; // each list ends in an Arity::End slot
  const Slot* results;
};

/// The OPERANDS / RESULTS lines Ops.def states for `c`.
const OpSignature& signatureOf(OpCode c);
/// "(ptr, [mask if has_mask], [other if has_other])"; `results` for the result list.
std::string signatureText(OpCode c, bool results = false);
/// The shared buffer `op` writes: its operand in the slot Ops.def marks `Written` (local_store,
/// local_scatter, the async copies into shared memory, the remote stores); null for other ops.
const Value* writtenSharedBuffer(const Op& op);
/// Why `op`'s operands or results do not fit its Ops.def lines (their count, as its attributes
/// decide it, or a value's kind); "" when they fit.
std::string checkSignature(const Op& op);

} // namespace ww::ir
