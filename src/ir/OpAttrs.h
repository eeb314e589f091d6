// Typed attributes of Tile IR ops, generated from the ATTR lines of Ops.def (X-macros): the
// attribute schema the verifier checks (attrSpecs / findAttrSpec) and one typed accessor per
// (op, attribute), e.g. ir::attr::Load::cache(op) -> std::string, attr::Load::hasMask(op) -> bool.
// An accessor exists only for an attribute Ops.def declares on that op, so a misspelled name is a
// compile error; string lookups through Op::intAttr & co. (and the accessors themselves) are
// checked against the same table at run time: reading a name the op does not declare throws
// instead of reading as 0.
#pragma once

#include "ir/IR.h"

#include <string_view>
#include <vector>

namespace ww::ir {

enum class AttrKind : uint8_t { Int, Bool, Str, Enum, DType, Ints, Number };
const char* attrKindName(AttrKind k);

/// One ATTR line of Ops.def.
struct AttrSpec {
  OpCode op;
  const char* name;
  AttrKind kind;
  bool required;
  std::vector<std::string_view> allowed; // Enum: the values it may take
};

/// The attributes Ops.def declares for `op`, in declaration order.
const std::vector<const AttrSpec*>& attrSpecs(OpCode op);
/// The declaration of attribute `name` on `op`, or null when Ops.def declares none.
const AttrSpec* findAttrSpec(OpCode op, std::string_view name);
/// Why attribute `name` may not be on (or read from) `op`, which does not declare it: an unknown
/// name, or one Ops.def declares for other ops only, naming them and what `op` declares.
std::string undeclaredAttrMessage(OpCode op, std::string_view name);
/// Checks `value` against `spec`; returns why it does not fit ("" when it does).
std::string checkAttr(const AttrSpec& spec, const Attr& value);
/// The allowed values of an Enum attribute as a message lists them: '"a", "b" or "c"'; `prefix`
/// is put before each non-empty value (".": tl.load's cache_modifier spells "ca" as ".ca").
std::string allowedList(const AttrSpec& spec, const std::string& prefix = {});

namespace attr::detail {
template <AttrKind K> struct Cpp;
template <> struct Cpp<AttrKind::Int> { using type = int64_t; };
template <> struct Cpp<AttrKind::Bool> { using type = bool; };
template <> struct Cpp<AttrKind::Str> { using type = std::string; };
template <> struct Cpp<AttrKind::Enum> { using type = std::string; };
template <> struct Cpp<AttrKind::DType> { using type = std::string; };
template <> struct Cpp<AttrKind::Ints> { using type = std::vector<int64_t>; };
template <> struct Cpp<AttrKind::Number> { using type = Attr; };

/// The stored value of `name` on `op`, or `dflt` when absent (or of another type, which the
/// verifier reports).
template <AttrKind K>
typename Cpp<K>::type read(const Op& op, const char* name, typename Cpp<K>::type dflt) {
  const Attr* a = op.attr(name);
  if (!a) return dflt;
  if constexpr (K == AttrKind::Number) {
    return *a;
  } else if constexpr (K == AttrKind::Int || K == AttrKind::Bool) {
    const int64_t* i = std::get_if<int64_t>(a);
    if (!i) return dflt;
    if constexpr (K == AttrKind::Bool)
      return *i != 0;
    else
      return *i;
  } else {
    const auto* v = std::get_if<typename Cpp<K>::type>(a);
    return v ? *v : dflt;
  }
}

/// The stored form of a typed value (a Bool is the int 0 or 1).
template <AttrKind K> Attr stored(typename Cpp<K>::type v) {
  if constexpr (K == AttrKind::Bool)
    return int64_t(v ? 1 : 0);
  else
    return Attr(std::move(v));
}
} // namespace attr::detail

// ir::attr::<Op>::<accessor>(op): the attribute's value, its Ops.def default when absent.
// ir::attr::<Op>::make::<accessor>(value): the attribute as a NamedAttr, for the attribute list of
//   Builder::create (attr::Load::make::hasMask(true) is {"has_mask", 1}).
// ir::attr::<Op>::set::<accessor>(op, value): sets it on an existing op.
// ir::attr::<Op>::k<accessor>: its name (attr::Load::kcache == "cache").
// Builders create attributes only through these, so each name is spelled once, on its ATTR line,
// and a misspelt one, or one set on an op that does not declare it, does not compile.
namespace attr {
#define ATTR(OPC, ACCESSOR, NAME, KIND, REQ, DFLT, ALLOWED)                                        \
  namespace OPC {                                                                                  \
  inline detail::Cpp<AttrKind::KIND>::type ACCESSOR(const Op& op) {                                \
    return detail::read<AttrKind::KIND>(op, NAME, DFLT);                                           \
  }                                                                                                \
  inline constexpr const char* k##ACCESSOR = NAME;                                                 \
  namespace make {                                                                                 \
  inline NamedAttr ACCESSOR(detail::Cpp<AttrKind::KIND>::type v) {                                 \
    return NamedAttr{NAME, detail::stored<AttrKind::KIND>(std::move(v))};                          \
  }                                                                                                \
  }                                                                                                \
  namespace set {                                                                                  \
  inline void ACCESSOR(Op& op, detail::Cpp<AttrKind::KIND>::type v) {                              \
    op.setAttr(NAME, detail::stored<AttrKind::KIND>(std::move(v)));                                \
  }                                                                                                \
  }                                                                                                \
  }
#include "ir/Ops.def"
#undef ATTR
} // namespace attr

/// [propagate_nan] of a max / min; false for every other op (elementwise code asks any binary op).
inline bool propagatesNan(const Op& op) {
  if (op.code() == OpCode::Max) return attr::Max::propagateNan(op);
  if (op.code() == OpCode::Min) return attr::Min::propagateNan(op);
  return false;
}

} // namespace ww::ir
