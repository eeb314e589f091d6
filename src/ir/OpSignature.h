// Operands and results of Tile IR ops, generated from the OPERANDS / RESULTS lines of Ops.def
// (X-macros): how many each op takes (fixed, optional as a has_* attribute says, counted by an
// int attribute, or variadic) and of which kinds (scalar, tensor, pointer, buffer, barrier,
// descriptor, token), plus its TYPES line (relations between its values: equal types and shapes,
// i1 or integer elements, with those its traits imply) and its REGIONS line (how many regions, how
// each ends, its arguments' and yielded values' types). The verifier checks every op against them
// after every pass.
#pragma once

#include "ir/IR.h"

#include <string>
#include <vector>

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

/// A slot of the op's OPERANDS (In) or RESULTS (Out) line, named in TYPES and REGIONS lines.
struct SlotRef {
  bool result = false;
  const char* name = nullptr; // null: no slot
  bool elems = false;         // Elems(ref): the scalar type of each value's elements
  // Times(ref, accessor): each value stands for as many consecutive ones as the op's Int
  // attribute says (map_elementwise's pack); null: one.
  int64_t (*times)(const Op&) = nullptr;
  const char* timesAttr = nullptr;
};

/// When(accessor, value) of a TYPES rule (OnlyIf) or an OptRegion: the op's attribute has that
/// value. No condition (`holds` null) always holds.
struct AttrCond {
  bool (*holds)(const Op&) = nullptr;
  const char* attr = nullptr;  // the attribute's name, "kind"
  const char* value = nullptr; // the value as Ops.def spells it, "\"custom\""
};

/// One relation of a TYPES line, or one the op's traits imply.
struct TypeRule {
  enum class Kind : uint8_t {
    End,          // terminates a list
    SameType,     // the values of `refs` have one type (Var slots: pairwise, and as many)
    SameShape,    // the values of `refs` have one shape
    ElemI1,       // the values of refs[0] have i1 elements
    ElemI32,      // the values of refs[0] have i32 elements
    ElemInt,      // the values of refs[0] have integer elements
    DropAxis,     // the values of refs[0] have one shape; those of refs[1] have it less dimension
                  // `axis` (the op's Int attribute; negative counts from the end)
    HasAxis,      // the values of refs[0] have one shape, of which `axis` names a dimension
    AllSameType,  // implied by BinaryArith / UnaryMath / ValueHint: every operand and result
    AllSameShape, // implied by Elementwise: every operand and result
  };
  Kind kind = Kind::End;
  SlotRef refs[4] = {};
  AttrCond when;                        // OnlyIf(When(...), rule): the rule applies only then
  int64_t (*axis)(const Op&) = nullptr; // DropAxis / HasAxis: the attribute's typed accessor
  const char* axisAttr = nullptr;       // ... and its name
};

/// One region of a REGIONS line.
struct RegionSpec {
  enum class Ends : uint8_t {
    Yield,          // a yield, always
    Condition,      // a condition, always
    YieldIfResults, // a yield, which may be left out when the op has no results
    MayYield,       // no terminator, or a yield
  };
  const char* name = nullptr; // null: terminates a list
  Ends ends = Ends::Yield;
  bool optional = false; // OptRegion: present exactly when `when` holds
  AttrCond when;
  bool argsChecked = false;   // AnyArgs: not checked; NoArgs: none; Args(...): as below
  unsigned argsSkip = 0;      // Args(skip, refs...): leading arguments not checked
  SlotRef args[2];            // ... then one argument per value of each slot in turn
  bool yieldsChecked = false; // AnyYield: not checked; NoYield: none; Yields(ref): as below
  SlotRef yields;             // Yields(ref): the terminator's values have this slot's types
};

struct OpSignature {
  const Slot* operands; // each list ends in an Arity::End slot
  const Slot* results;
  const TypeRule* types;     // the TYPES line; ends in a Kind::End rule
  const RegionSpec* regions; // the REGIONS line; ends in a spec without a name
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
/// The type rules `c` follows: those its traits imply, then its TYPES line.
std::vector<TypeRule> typeRulesOf(OpCode c);
/// "SameType(a, b, result)", "the types of every operand and result", ... as messages name it.
std::string ruleText(const TypeRule& r);
/// Why `op`'s values break one of its type rules; "" when they follow them. Call after
/// checkSignature, whose counts it relies on.
std::string checkTypeRules(const Op& op);
/// The values of slot `ref` of `op` (none for an absent Opt slot); `op` must fit its signature.
std::vector<const Value*> slotValues(const Op& op, SlotRef ref);
/// Why `op`'s region count or a region's terminator, arguments or yielded values do not fit its
/// REGIONS line; "" when they fit. Does not look inside the regions' other ops.
std::string checkRegions(const Op& op);
/// The spec of region `r` of `op` (null past its REGIONS line; an OptRegion whose condition does
/// not hold on `op` takes no position) and the terminator it ends in: Yield or Condition, with
/// `optional` set when the block may end without one.
const RegionSpec* regionSpec(const Op& op, unsigned r, OpCode& terminator, bool& optional);

} // namespace ww::ir
