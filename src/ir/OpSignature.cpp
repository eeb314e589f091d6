// The OPERANDS / RESULTS lines of Ops.def as data (one constexpr slot list per op, checked at
// compile time: every op has both lines, and a list has at most one variadic slot), and the check
// of an op against them that the verifier runs after every pass.
#include "ir/OpSignature.h"

#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"

#include <array>
#include <string_view>

namespace ww::ir {

// The slots' Optional / Counted attributes name typed accessors of ir::attr::<Op>; an op without
// attributes still gets its (empty) namespace, so that every OPERANDS line can use it.
namespace attr {
#define OP(name, str, traits)                                                                      \
  namespace name {}
#include "ir/Ops.def"
#undef OP
} // namespace attr

namespace {

using namespace kind;
using Arity = Slot::Arity;

constexpr Slot endSlot() {
  return Slot{};
}

// The slot constructors of Ops.def's lines; an Optional / Counted slot names the typed accessor of
// its Bool / Int attribute, so a misspelled attribute or one of another kind does not compile.
#define Arg(NAME, KINDS)                                                                           \
  Slot {                                                                                           \
    NAME, ValueKinds(KINDS), Arity::One, nullptr, nullptr, nullptr                                 \
  }
#define Var(NAME, KINDS)                                                                           \
  Slot {                                                                                           \
    NAME, ValueKinds(KINDS), Arity::Variadic, nullptr, nullptr, nullptr                            \
  }
#define Opt(NAME, KINDS, ACCESSOR)                                                                 \
  Slot {                                                                                           \
    NAME, ValueKinds(KINDS), Arity::Optional, &ACCESSOR, nullptr, k##ACCESSOR                      \
  }
#define Count(NAME, KINDS, ACCESSOR)                                                               \
  Slot {                                                                                           \
    NAME, ValueKinds(KINDS), Arity::Counted, nullptr, &ACCESSOR, k##ACCESSOR                       \
  }
#define OPERANDS(OPC, ...)                                                                         \
  namespace sig_##OPC {                                                                            \
    using namespace ::ww::ir::attr::OPC;                                                           \
    constexpr Slot operands[] = {__VA_ARGS__ __VA_OPT__(, ) endSlot()};                            \
  }
#define RESULTS(OPC, ...)                                                                          \
  namespace sig_##OPC {                                                                            \
    using namespace ::ww::ir::attr::OPC;                                                           \
    constexpr Slot results[] = {__VA_ARGS__ __VA_OPT__(, ) endSlot()};                             \
  }
// TYPES and REGIONS lines: the rules and region specs, each list ended by a default element.
constexpr SlotRef In(const char* name) {
  return SlotRef{false, name, false, nullptr, nullptr};
}
constexpr SlotRef Out(const char* name) {
  return SlotRef{true, name, false, nullptr, nullptr};
}
constexpr SlotRef Elems(SlotRef ref) {
  ref.elems = true;
  return ref;
}
constexpr SlotRef times(SlotRef ref, int64_t (*count)(const Op&), const char* attr) {
  ref.times = count;
  ref.timesAttr = attr;
  return ref;
}
// Times(ref, accessor): each value of the slot stands for as many consecutive ones as the op's Int
// attribute (its typed accessor) says.
#define Times(REF, ACCESSOR) times(REF, &self::ACCESSOR, self::k##ACCESSOR)
// When(accessor, value): the op's attribute (its typed accessor, so a misspelt one does not
// compile) has that value. `self` is the op's ir::attr namespace, which TYPES / REGIONS name.
#define When(ACCESSOR, VALUE)                                                                      \
  AttrCond {                                                                                       \
    [](const Op& op) { return self::ACCESSOR(op) == VALUE; }, self::k##ACCESSOR, #VALUE            \
  }
constexpr TypeRule onlyIf(AttrCond when, TypeRule rule) {
  rule.when = when;
  return rule;
}
#define OnlyIf(WHEN, RULE) onlyIf(WHEN, RULE)
constexpr TypeRule rule(TypeRule::Kind kind, SlotRef a, SlotRef b = {}, SlotRef c = {},
                        SlotRef d = {}) {
  TypeRule r;
  r.kind = kind;
  r.refs[0] = a;
  r.refs[1] = b;
  r.refs[2] = c;
  r.refs[3] = d;
  return r;
}
constexpr TypeRule axisRule(TypeRule::Kind kind, SlotRef from, SlotRef to,
                            int64_t (*axis)(const Op&), const char* attr) {
  TypeRule r = rule(kind, from, to);
  r.axis = axis;
  r.axisAttr = attr;
  return r;
}
#define SameType(...) rule(TypeRule::Kind::SameType, __VA_ARGS__)
#define SameShape(...) rule(TypeRule::Kind::SameShape, __VA_ARGS__)
#define ElemI1(REF) rule(TypeRule::Kind::ElemI1, REF)
#define ElemI32(REF) rule(TypeRule::Kind::ElemI32, REF)
#define ElemInt(REF) rule(TypeRule::Kind::ElemInt, REF)
// DropAxis(from, to, accessor): the values of `to` have the one shape of `from`'s values less the
// dimension the op's Int attribute (its typed accessor) names.
#define DropAxis(FROM, TO, ACCESSOR)                                                               \
  axisRule(TypeRule::Kind::DropAxis, FROM, TO, &self::ACCESSOR, self::k##ACCESSOR)
// HasAxis(ref, accessor): the values of `ref` have one shape, of which the op's Int attribute
// names a dimension.
#define HasAxis(REF, ACCESSOR)                                                                     \
  axisRule(TypeRule::Kind::HasAxis, REF, SlotRef{}, &self::ACCESSOR, self::k##ACCESSOR)
using Ends = RegionSpec::Ends;
struct RegionArgs {
  bool checked;
  unsigned skip;
  SlotRef refs[2];
};
struct RegionYields {
  bool checked;
  SlotRef ref;
};
constexpr RegionArgs AnyArgs{false, 0, {}};
constexpr RegionArgs NoArgs{true, 0, {}};
constexpr RegionArgs Args(unsigned skip, SlotRef ref, SlotRef then = SlotRef{}) {
  return RegionArgs{true, skip, {ref, then}};
}
constexpr RegionYields AnyYield{false, {}};
constexpr RegionYields NoYield{true, {}};
constexpr RegionYields Yields(SlotRef ref) {
  return RegionYields{true, ref};
}
constexpr RegionSpec makeRegion(const char* name, Ends ends, bool optional, AttrCond when,
                                RegionArgs args, RegionYields yields) {
  RegionSpec r;
  r.name = name;
  r.ends = ends;
  r.optional = optional;
  r.when = when;
  r.argsChecked = args.checked;
  r.argsSkip = args.skip;
  r.args[0] = args.refs[0];
  r.args[1] = args.refs[1];
  r.yieldsChecked = yields.checked;
  r.yields = yields.ref;
  return r;
}
#define Region(NAME, ENDS, ARGS, YIELDS)                                                           \
  makeRegion(NAME, Ends::ENDS, false, AttrCond{}, ARGS, YIELDS)
#define OptRegion(NAME, ENDS, ARGS, YIELDS, WHEN)                                                  \
  makeRegion(NAME, Ends::ENDS, true, WHEN, ARGS, YIELDS)
#define TYPES(OPC, ...)                                                                            \
  namespace sig_##OPC {                                                                            \
    namespace self = ::ww::ir::attr::OPC;                                                          \
    constexpr TypeRule types[] = {__VA_ARGS__ __VA_OPT__(, ) TypeRule{}};                          \
  }
#define REGIONS(OPC, ...)                                                                          \
  namespace sig_##OPC {                                                                            \
    namespace self = ::ww::ir::attr::OPC;                                                          \
    constexpr RegionSpec regions[] = {__VA_ARGS__ __VA_OPT__(, ) RegionSpec{}};                    \
  }
#include "ir/Ops.def"
#undef OPERANDS
#undef RESULTS
#undef TYPES
#undef REGIONS
#undef Arg
#undef Var
#undef Opt
#undef Count
#undef SameType
#undef SameShape
#undef ElemI1
#undef ElemI32
#undef ElemInt
#undef DropAxis
#undef HasAxis
#undef Times
#undef When
#undef OnlyIf
#undef Region
#undef OptRegion

constexpr TypeRule kNoTypeRules[] = {TypeRule{}};
constexpr RegionSpec kNoRegions[] = {RegionSpec{}};

constexpr std::array<OpSignature, kNumOpCodes> kSignatures = [] {
  std::array<OpSignature, kNumOpCodes> a{};
  for (OpSignature& s : a) {
    s.types = kNoTypeRules;
    s.regions = kNoRegions;
  }
#define OPERANDS(OPC, ...) a[static_cast<size_t>(OpCode::OPC)].operands = sig_##OPC::operands;
#define RESULTS(OPC, ...) a[static_cast<size_t>(OpCode::OPC)].results = sig_##OPC::results;
#define TYPES(OPC, ...) a[static_cast<size_t>(OpCode::OPC)].types = sig_##OPC::types;
#define REGIONS(OPC, ...) a[static_cast<size_t>(OpCode::OPC)].regions = sig_##OPC::regions;
#include "ir/Ops.def"
#undef OPERANDS
#undef RESULTS
#undef TYPES
#undef REGIONS
  return a;
}();

/// Why a slot list is malformed, or null.
constexpr const char* listProblem(const Slot* s) {
  if (!s) return "is missing";
  int variadic = 0;
  for (; s->arity != Arity::End; ++s) {
    if (!s->name || !(s->kinds & Any)) return "has a slot without a name or kinds";
    if (s->arity == Arity::Variadic) ++variadic;
  }
  return variadic > 1 ? "has more than one variadic slot (Var)" : nullptr;
}

constexpr bool sameName(const char* a, const char* b) {
  return std::string_view(a) == std::string_view(b);
}

/// Whether `ref` names a slot of `sig`'s operand (In) or result (Out) list.
constexpr bool refExists(const OpSignature& sig, SlotRef ref) {
  for (const Slot* s = ref.result ? sig.results : sig.operands; s->arity != Arity::End; ++s)
    if (sameName(s->name, ref.name)) return true;
  return false;
}

/// Why a TYPES line is malformed (a rule names no slot, or a slot its lists lack), or null.
constexpr const char* typesProblem(const OpSignature& sig) {
  for (const TypeRule* r = sig.types; r->kind != TypeRule::Kind::End; ++r) {
    if (!r->refs[0].name) return "has a rule that names no slot";
    if (r->kind == TypeRule::Kind::DropAxis && !r->refs[1].name)
      return "has a DropAxis rule without its second slot";
    for (const SlotRef& ref : r->refs)
      if (ref.name && !refExists(sig, ref)) return "names a slot its OPERANDS / RESULTS lack";
  }
  return nullptr;
}

/// Why a REGIONS line is malformed, or disagrees with the HasRegions trait, or null.
constexpr const char* regionsProblem(const OpSignature& sig, bool hasRegionsTrait) {
  bool any = sig.regions[0].name != nullptr;
  if (any != hasRegionsTrait)
    return "is missing (a HasRegions op) or present (an op without HasRegions)";
  bool optionalSeen = false;
  for (const RegionSpec* r = sig.regions; r->name; ++r) {
    if (optionalSeen && !r->optional) return "has a Region after an OptRegion";
    optionalSeen |= r->optional;
    if (r->optional != (r->when.holds != nullptr)) return "has an OptRegion without When(...)";
    for (const SlotRef& ref : r->args)
      if (ref.name && !refExists(sig, ref)) return "names a slot its lists lack";
    if (!r->args[0].name && r->args[1].name) return "has Args without a first slot";
    if (r->yields.name && !refExists(sig, r->yields)) return "names a slot its lists lack";
  }
  return nullptr;
}

#define OP(name, str, traits)                                                                      \
  static_assert(!listProblem(kSignatures[static_cast<size_t>(OpCode::name)].operands),             \
                "Ops.def: the OPERANDS line of " #name " is missing or malformed");                \
  static_assert(!listProblem(kSignatures[static_cast<size_t>(OpCode::name)].results),              \
                "Ops.def: the RESULTS line of " #name " is missing or malformed");                 \
  static_assert(!typesProblem(kSignatures[static_cast<size_t>(OpCode::name)]),                     \
                "Ops.def: the TYPES line of " #name " is malformed");                              \
  static_assert(!regionsProblem(kSignatures[static_cast<size_t>(OpCode::name)],                    \
                                hasTraits(OpCode::name, trait::HasRegions)),                       \
                "Ops.def: the REGIONS line of " #name " is malformed, or disagrees with its "      \
                "HasRegions trait");
#include "ir/Ops.def"
#undef OP

std::string slotText(const Slot& s) {
  switch (s.arity) {
  case Arity::Optional:
    return std::string("[") + s.name + " if " + s.attrName + "]";
  case Arity::Counted:
    return std::string(s.name) + " x " + s.attrName;
  case Arity::Variadic:
    return std::string(s.name) + "...";
  default:
    return s.name;
  }
}

std::string listText(const Slot* s) {
  std::string t = "(";
  for (const Slot* p = s; p->arity != Arity::End; ++p) t += (p == s ? "" : ", ") + slotText(*p);
  return t + ")";
}

/// The values the attributes make `slots` take: each slot's count, the variadic one's left at 0.
struct Counts {
  std::vector<size_t> perSlot;
  size_t fixed = 0;
  int variadic = -1; // its index, or -1
};

Counts countsOf(const Op& op, const Slot* slots) {
  Counts c;
  for (const Slot* s = slots; s->arity != Arity::End; ++s) {
    size_t n = 0;
    switch (s->arity) {
    case Arity::One:
      n = 1;
      break;
    case Arity::Optional:
      n = s->present(op) ? 1 : 0;
      break;
    case Arity::Counted:
      n = size_t(std::max<int64_t>(0, s->counted(op)));
      break;
    case Arity::Variadic:
      c.variadic = int(c.perSlot.size());
      break;
    case Arity::End:
      break;
    }
    c.perSlot.push_back(n);
    c.fixed += n;
  }
  return c;
}

/// The attributes deciding the count, as they are on `op`: "has_mask = 1, has_other = 0".
std::string decidingAttrs(const Op& op, const Slot* slots) {
  std::string t;
  for (const Slot* s = slots; s->arity != Arity::End; ++s) {
    if (s->arity == Arity::Optional)
      t +=
          (t.empty() ? "" : ", ") + std::string(s->attrName) + " = " + (s->present(op) ? "1" : "0");
    else if (s->arity == Arity::Counted)
      t += (t.empty() ? "" : ", ") + std::string(s->attrName) + " = " +
           std::to_string(s->counted(op));
  }
  return t;
}

template <class Values, class TypeOf>
std::string checkList(const Op& op, const Slot* slots, const Values& values, TypeOf typeOf,
                      const char* what) {
  Counts c = countsOf(op, slots);
  const size_t n = values.size();
  if (n != c.fixed && (c.variadic < 0 || n < c.fixed)) {
    std::string why = std::to_string(n) + " " + what + (n == 1 ? "" : "s") + ", expected " +
                      (c.variadic >= 0 ? "at least " : "") + std::to_string(c.fixed) + ": " +
                      listText(slots);
    std::string attrs = decidingAttrs(op, slots);
    return attrs.empty() ? why : why + " with " + attrs;
  }
  if (c.variadic >= 0) c.perSlot[size_t(c.variadic)] = n - c.fixed;
  size_t i = 0;
  for (size_t k = 0; k < c.perSlot.size(); ++k)
    for (size_t j = 0; j < c.perSlot[k]; ++j, ++i) {
      const Type& t = typeOf(values[i]);
      if (!(kindOf(t) & slots[k].kinds))
        return std::string(what) + " #" + std::to_string(i) + " (" + slots[k].name + ") is " +
               t.str() + ", expected " + kindsText(slots[k].kinds);
    }
  return {};
}

} // namespace

ValueKinds kindOf(const Type& t) {
  switch (t.kind) {
  case TypeKind::Value:
    return t.pointer ? (t.shape.empty() ? Ptr : PtrTensor) : (t.shape.empty() ? Scalar : Tensor);
  case TypeKind::Buffer:
    return Buf;
  case TypeKind::Barrier:
    return Bar;
  case TypeKind::Descriptor:
    return Desc;
  case TypeKind::Token:
    return Token;
  case TypeKind::None:
    break;
  }
  return 0;
}

std::string kindsText(ValueKinds k) {
  static const std::pair<ValueKinds, const char*> kNames[] = {
      {Scalar, "a scalar"},   {Tensor, "a tensor"},
      {Ptr, "a pointer"},     {PtrTensor, "a pointer tensor"},
      {Buf, "a buffer"},      {Bar, "a barrier"},
      {Desc, "a descriptor"}, {Token, "a token"}};
  std::vector<const char*> names;
  for (const auto& [bit, name] : kNames)
    if (k & bit) names.push_back(name);
  std::string t;
  for (size_t i = 0; i < names.size(); ++i)
    t += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  return t;
}

const OpSignature& signatureOf(OpCode c) {
  return kSignatures.at(static_cast<size_t>(c));
}

std::string signatureText(OpCode c, bool results) {
  const OpSignature& s = signatureOf(c);
  return listText(results ? s.results : s.operands);
}

const Value* writtenSharedBuffer(const Op& op) {
  const Slot* slots = signatureOf(op.code()).operands;
  Counts c = countsOf(op, slots);
  if (c.variadic >= 0 && op.numOperands() >= c.fixed)
    c.perSlot[size_t(c.variadic)] = op.numOperands() - c.fixed;
  size_t i = 0;
  for (size_t k = 0; k < c.perSlot.size(); i += c.perSlot[k], ++k)
    if ((slots[k].kinds & Written) && c.perSlot[k] == 1 && i < op.numOperands())
      return op.operand(unsigned(i));
  return nullptr;
}

std::string checkSignature(const Op& op) {
  const OpSignature& s = signatureOf(op.code());
  std::string why = checkList(
      op, s.operands, op.operands(), [](const Value* v) -> const Type& { return v->type(); },
      "operand");
  if (!why.empty()) return why;
  return checkList(
      op, s.results, op.results(),
      [](const std::unique_ptr<Value>& v) -> const Type& { return v->type(); }, "result");
}

namespace {

/// The values of `slots` on `op`, one vector per slot, as its attributes and counts decide.
template <class Values, class Get>
std::vector<std::vector<const Value*>> perSlot(const Op& op, const Slot* slots, const Values& vs,
                                               Get get) {
  Counts c = countsOf(op, slots);
  if (c.variadic >= 0 && vs.size() >= c.fixed) c.perSlot[size_t(c.variadic)] = vs.size() - c.fixed;
  std::vector<std::vector<const Value*>> out(c.perSlot.size());
  size_t i = 0;
  for (size_t k = 0; k < c.perSlot.size(); ++k)
    for (size_t j = 0; j < c.perSlot[k] && i < vs.size(); ++j, ++i) out[k].push_back(get(vs[i]));
  return out;
}

std::string refText(const SlotRef& r) {
  std::string t = r.elems ? std::string("Elems(") + r.name + ")" : std::string(r.name);
  return r.times ? "Times(" + t + ", " + r.timesAttr + ")" : t;
}

/// The type `ref` gives value `v`: its own, or with Elems the scalar type of its elements.
Type refType(const Value* v, const SlotRef& ref) {
  return ref.elems ? v->type().withShape({}) : v->type();
}

/// " when kind = "custom"" for a rule or region with a condition, "" without one.
std::string condText(const AttrCond& c) {
  return c.holds ? std::string(" when ") + c.attr + " = " + c.value : std::string();
}

/// The values of each slot of `ref`'s list on `op`.
std::vector<std::vector<const Value*>> valuesPerSlot(const Op& op, bool results) {
  const OpSignature& sig = signatureOf(op.code());
  if (results)
    return perSlot(op, sig.results, op.results(),
                   [](const std::unique_ptr<Value>& v) -> const Value* { return v.get(); });
  return perSlot(op, sig.operands, op.operands(), [](const Value* v) { return v; });
}

/// The slot `ref` names in its list (its index), or -1.
int slotIndex(const Op& op, const SlotRef& ref) {
  const OpSignature& sig = signatureOf(op.code());
  int k = 0;
  for (const Slot* s = ref.result ? sig.results : sig.operands; s->arity != Arity::End; ++s, ++k)
    if (ref.name && std::string_view(s->name) == ref.name) return k;
  return -1;
}

/// "operand #1 (b)": operand (or result) `at` of `op` and the slot it fills.
std::string positionText(const Op& op, bool result, size_t at) {
  const OpSignature& sig = signatureOf(op.code());
  std::vector<std::vector<const Value*>> values = valuesPerSlot(op, result);
  std::string text = std::string(result ? "result #" : "operand #") + std::to_string(at);
  size_t first = 0, k = 0;
  for (const Slot* s = result ? sig.results : sig.operands; s->arity != Arity::End; ++s, ++k) {
    if (at < first + values[k].size()) return text + " (" + s->name + ")";
    first += values[k].size();
  }
  return text;
}

/// "operand #1 (b)" for the `i`th value of slot `ref` on `op`.
std::string valueText(const Op& op, const SlotRef& ref, size_t i) {
  std::vector<std::vector<const Value*>> values = valuesPerSlot(op, ref.result);
  size_t at = i;
  for (int k = 0; k < slotIndex(op, ref); ++k) at += values[size_t(k)].size();
  return positionText(op, ref.result, at);
}

/// "operand #1 (b) has type fp32" (`has`) or "operand #1 (b) type fp32"; with Elems, "... has
/// fp32 elements" / "... fp32 elements".
std::string typedText(const Op& op, const SlotRef& ref, size_t i, const Type& t, bool has) {
  std::string v = valueText(op, ref, i);
  if (ref.elems) return v + (has ? " has " : " ") + t.str() + " elements";
  return v + (has ? " has type " : " type ") + t.str();
}

/// "the type of result #0 (iters)", or with Elems "the element type of operand #0 (inputs)".
std::string ofText(const Op& op, const SlotRef& ref, size_t i) {
  return std::string(ref.elems ? "the element type of " : "the type of ") + valueText(op, ref, i);
}

/// The values of a region's argument refs in turn, each with the ref it comes from and its index
/// there.
struct RefValue {
  SlotRef ref;
  size_t index;
  Type type;
};
std::vector<RefValue> refValues(const Op& op, const SlotRef* refs, size_t n) {
  std::vector<RefValue> out;
  for (size_t k = 0; k < n && refs[k].name; ++k) {
    std::vector<const Value*> vs = slotValues(op, refs[k]);
    const int64_t times = refs[k].times ? refs[k].times(op) : 1;
    for (size_t i = 0; i < vs.size(); ++i)
      for (int64_t j = 0; j < times; ++j) out.push_back({refs[k], i, refType(vs[i], refs[k])});
  }
  return out;
}

/// "one per value of iters", "a scalar per value of inputs" (Elems), "2 scalars per value of x,
/// as pack = 2" (Times); "none" without a slot.
std::string perValueText(const Op& op, const SlotRef& ref) {
  if (!ref.name) return "none";
  if (ref.times) {
    std::string n = std::to_string(ref.times(op));
    return n + (ref.elems ? " scalar" : " value") + (n == "1" ? "" : "s") + " per value of " +
           ref.name + ", as " + ref.timesAttr + " = " + n;
  }
  return std::string(ref.elems ? "a scalar per value of " : "one per value of ") + ref.name;
}

} // namespace

std::vector<const Value*> slotValues(const Op& op, SlotRef ref) {
  int k = slotIndex(op, ref);
  if (k < 0) return {};
  return valuesPerSlot(op, ref.result)[size_t(k)];
}

std::vector<TypeRule> typeRulesOf(OpCode c) {
  std::vector<TypeRule> rules;
  if (hasTraits(c, trait::BinaryArith) || hasTraits(c, trait::UnaryMath) ||
      hasTraits(c, trait::ValueHint))
    rules.push_back(rule(TypeRule::Kind::AllSameType, SlotRef{}));
  else if (hasTraits(c, trait::Elementwise))
    rules.push_back(rule(TypeRule::Kind::AllSameShape, SlotRef{}));
  for (const TypeRule* r = signatureOf(c).types; r->kind != TypeRule::Kind::End; ++r)
    rules.push_back(*r);
  return rules;
}

std::string ruleText(const TypeRule& r) {
  using K = TypeRule::Kind;
  const char* name = "";
  switch (r.kind) {
  case K::AllSameType:
    return "its operands and results have one type";
  case K::AllSameShape:
    return "its operands and results have one shape";
  case K::SameType:
    name = "SameType";
    break;
  case K::SameShape:
    name = "SameShape";
    break;
  case K::ElemI1:
    name = "ElemI1";
    break;
  case K::ElemI32:
    name = "ElemI32";
    break;
  case K::DropAxis:
    name = "DropAxis";
    break;
  case K::HasAxis:
    name = "HasAxis";
    break;
  case K::ElemInt:
    name = "ElemInt";
    break;
  case K::End:
    return "";
  }
  std::string t = std::string(name) + "(";
  for (size_t i = 0; i < 4 && r.refs[i].name; ++i) t += (i ? ", " : "") + refText(r.refs[i]);
  if (r.axisAttr) t += std::string(", ") + r.axisAttr;
  return t + ")" + condText(r.when);
}

std::string checkTypeRules(const Op& op) {
  using K = TypeRule::Kind;
  auto describe = [&](const TypeRule& r) { return " (Ops.def: " + ruleText(r) + ")"; };
  for (const TypeRule& r : typeRulesOf(op.code())) {
    if (r.when.holds && !r.when.holds(op)) continue;
    switch (r.kind) {
    case K::AllSameType:
    case K::AllSameShape: {
      bool type = r.kind == K::AllSameType;
      std::vector<std::pair<std::string, const Value*>> all;
      for (unsigned i = 0; i < op.numOperands(); ++i)
        all.push_back({positionText(op, false, i), op.operand(i)});
      for (unsigned i = 0; i < op.numResults(); ++i)
        all.push_back({positionText(op, true, i), op.result(i)});
      for (size_t i = 1; i < all.size(); ++i) {
        const Type& a = all[0].second->type();
        const Type& b = all[i].second->type();
        if (type ? !(a == b) : a.shape != b.shape)
          return all[i].first + " has " +
                 (type ? "type " + b.str() : "shape " + shapeText(b.shape)) + ", " + all[0].first +
                 " " + (type ? "type " + a.str() : "shape " + shapeText(a.shape)) + describe(r);
      }
      break;
    }
    case K::SameType:
    case K::SameShape: {
      bool type = r.kind == K::SameType;
      std::vector<const Value*> first = slotValues(op, r.refs[0]);
      for (size_t k = 1; k < 4 && r.refs[k].name; ++k) {
        std::vector<const Value*> other = slotValues(op, r.refs[k]);
        // An absent Opt slot has nothing to compare.
        if (other.empty() || first.empty()) continue;
        if (other.size() != first.size())
          return std::to_string(other.size()) + " " + refText(r.refs[k]) + " for " +
                 std::to_string(first.size()) + " " + refText(r.refs[0]) + describe(r);
        for (size_t i = 0; i < first.size(); ++i) {
          const Type a = refType(first[i], r.refs[0]);
          const Type b = refType(other[i], r.refs[k]);
          if (type && !(a == b))
            return typedText(op, r.refs[k], i, b, true) + ", " +
                   typedText(op, r.refs[0], i, a, false) + describe(r);
          if (!type && a.shape != b.shape)
            return valueText(op, r.refs[k], i) + " has shape " + shapeText(b.shape) + ", " +
                   valueText(op, r.refs[0], i) + " shape " + shapeText(a.shape) + describe(r);
        }
      }
      break;
    }
    case K::ElemI1:
    case K::ElemI32:
    case K::ElemInt: {
      std::vector<const Value*> vs = slotValues(op, r.refs[0]);
      for (size_t i = 0; i < vs.size(); ++i) {
        DType e = vs[i]->type().elem;
        bool ok = r.kind == K::ElemI1    ? e == DType::I1
                  : r.kind == K::ElemI32 ? e == DType::I32
                                         : isInt(e);
        if (!ok)
          return valueText(op, r.refs[0], i) + " is " + vs[i]->type().str() + ", expected " +
                 (r.kind == K::ElemI1    ? "i1 elements"
                  : r.kind == K::ElemI32 ? "i32 elements"
                                         : "integer elements") +
                 describe(r);
      }
      break;
    }
    case K::DropAxis:
    case K::HasAxis: {
      std::vector<const Value*> from = slotValues(op, r.refs[0]), to = slotValues(op, r.refs[1]);
      if (from.empty()) break;
      const std::vector<int64_t>& shape = from[0]->type().shape;
      for (size_t i = 1; i < from.size(); ++i)
        if (from[i]->type().shape != shape)
          return valueText(op, r.refs[0], i) + " has shape " + shapeText(from[i]->type().shape) +
                 ", " + valueText(op, r.refs[0], 0) + " shape " + shapeText(shape) + describe(r);
      const int64_t rank = int64_t(shape.size()), given = r.axis(op);
      const int64_t axis = given < 0 ? given + rank : given;
      if (axis < 0 || axis >= rank)
        return std::string(r.axisAttr) + " " + std::to_string(given) + " is out of range for " +
               valueText(op, r.refs[0], 0) + " of rank " + std::to_string(rank) + describe(r);
      std::vector<int64_t> want = shape;
      want.erase(want.begin() + axis);
      for (size_t i = 0; i < to.size(); ++i)
        if (to[i]->type().shape != want)
          return valueText(op, r.refs[1], i) + " has shape " + shapeText(to[i]->type().shape) +
                 ", expected " + shapeText(want) + ": " + valueText(op, r.refs[0], 0) + " shape " +
                 shapeText(shape) + " less " + r.axisAttr + " " + std::to_string(axis) +
                 describe(r);
      break;
    }
    case K::End:
      break;
    }
  }
  return {};
}

namespace {

/// The specs of the regions `op` should have: its REGIONS line less the OptRegions whose
/// condition does not hold on it.
std::vector<const RegionSpec*> expectedRegions(const Op& op) {
  std::vector<const RegionSpec*> out;
  for (const RegionSpec* r = signatureOf(op.code()).regions; r->name; ++r)
    if (!r->optional || r->when.holds(op)) out.push_back(r);
  return out;
}

} // namespace

const RegionSpec* regionSpec(const Op& op, unsigned r, OpCode& terminator, bool& optional) {
  std::vector<const RegionSpec*> specs = expectedRegions(op);
  if (r >= specs.size()) return nullptr;
  const RegionSpec* spec = specs[r];
  terminator = spec->ends == RegionSpec::Ends::Condition ? OpCode::Condition : OpCode::Yield;
  optional = spec->ends == RegionSpec::Ends::MayYield ||
             (spec->ends == RegionSpec::Ends::YieldIfResults && op.numResults() == 0);
  return spec;
}

std::string checkRegions(const Op& op) {
  std::vector<const RegionSpec*> specs = expectedRegions(op);
  const size_t n = op.numRegions();
  if (n != specs.size()) {
    // An OptRegion that its condition asks for and that is missing, or one present without it.
    size_t total = 0;
    for (const RegionSpec* r = signatureOf(op.code()).regions; r->name; ++r) {
      ++total;
      bool wanted = r->optional && r->when.holds(op);
      if (n < specs.size() && wanted && r == specs[n])
        return std::string("region '") + r->name + "' is missing (Ops.def: OptRegion, present" +
               condText(r->when) + ")";
      if (n > specs.size() && n <= total && r->optional && !wanted)
        return std::string("region '") + r->name + "' is present, but Ops.def gives it only" +
               condText(r->when) + " (OptRegion)";
    }
    std::string names;
    for (const RegionSpec* r : specs) names += std::string(names.empty() ? "" : ", ") + r->name;
    return std::to_string(n) + " region" + (n == 1 ? "" : "s") + ", expected " +
           std::to_string(specs.size()) + ": (" + names + ")";
  }
  for (unsigned i = 0; i < n; ++i) {
    const RegionSpec& spec = *specs[i];
    const Block& block = *op.region(i);
    std::string where = std::string("region '") + spec.name + "'";
    if (spec.argsChecked) {
      std::vector<RefValue> want = refValues(op, spec.args, 2);
      if (block.numArgs() != spec.argsSkip + want.size()) {
        std::string parts = spec.argsSkip ? std::to_string(spec.argsSkip) : "";
        for (const SlotRef& ref : spec.args)
          if (ref.name) parts += (parts.empty() ? "" : ", then ") + perValueText(op, ref);
        if (parts.empty()) parts = "none";
        return where + " has " + std::to_string(block.numArgs()) + " argument" +
               (block.numArgs() == 1 ? "" : "s") + ", expected " +
               std::to_string(spec.argsSkip + want.size()) + " (" + parts + ")";
      }
      for (size_t k = 0; k < want.size(); ++k) {
        const Type& got = block.arg(unsigned(spec.argsSkip + k))->type();
        if (!(got == want[k].type))
          return where + " argument #" + std::to_string(spec.argsSkip + k) + " has type " +
                 got.str() + ", expected " + want[k].type.str() + ", " +
                 ofText(op, want[k].ref, want[k].index);
      }
    }
    if (spec.yieldsChecked) {
      const Op* t = block.terminator();
      OpCode term = spec.ends == RegionSpec::Ends::Condition ? OpCode::Condition : OpCode::Yield;
      if (!t || t->code() != term) continue; // the verifier's walk reports a missing terminator
      std::vector<RefValue> want = refValues(op, &spec.yields, 1); // none for NoYield
      unsigned skip = term == OpCode::Condition ? 1 : 0;
      if (t->numOperands() < skip) continue; // checkSignature reports the terminator's operands
      if (t->numOperands() != skip + want.size())
        return where + " yields " + std::to_string(t->numOperands() - skip) + " value" +
               (t->numOperands() - skip == 1 ? "" : "s") + ", expected " +
               std::to_string(want.size()) + " (" + perValueText(op, spec.yields) + ")";
      for (size_t k = 0; k < want.size(); ++k) {
        const Type& got = t->operand(unsigned(skip + k))->type();
        if (!(got == want[k].type))
          return where + " yields " + got.str() + " as value #" + std::to_string(k) +
                 ", expected " + want[k].type.str() + ", " + ofText(op, want[k].ref, want[k].index);
      }
    }
  }
  return {};
}

} // namespace ww::ir
