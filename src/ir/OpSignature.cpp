// The OPERANDS / RESULTS lines of Ops.def as data (one constexpr slot list per op, checked at
// compile time: every op has both lines, and a list has at most one variadic slot), and the check
// of an op against them that the verifier runs after every pass.
#include "ir/OpSignature.h"

#include "ir/OpAttrs.h"

#include <array>

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
#include "ir/Ops.def"
#undef OPERANDS
#undef RESULTS
#undef Arg
#undef Var
#undef Opt
#undef Count

constexpr std::array<OpSignature, kNumOpCodes> kSignatures = [] {
  std::array<OpSignature, kNumOpCodes> a{};
#define OPERANDS(OPC, ...) a[static_cast<size_t>(OpCode::OPC)].operands = sig_##OPC::operands;
#define RESULTS(OPC, ...) a[static_cast<size_t>(OpCode::OPC)].results = sig_##OPC::results;
#include "ir/Ops.def"
#undef OPERANDS
#undef RESULTS
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

#define OP(name, str, traits)                                                                      \
  static_assert(!listProblem(kSignatures[static_cast<size_t>(OpCode::name)].operands),             \
                "Ops.def: the OPERANDS line of " #name " is missing or malformed");                \
  static_assert(!listProblem(kSignatures[static_cast<size_t>(OpCode::name)].results),              \
                "Ops.def: the RESULTS line of " #name " is missing or malformed");
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

} // namespace ww::ir
