// The attribute schema of Ops.def as data: what the verifier checks every op's attributes against.
#include "ir/OpAttrs.h"

#include <array>

namespace ww::ir {

namespace {

#define WW_ATTR_UNPACK(...) __VA_ARGS__

struct Schema {
  std::vector<AttrSpec> specs;
  std::array<std::vector<const AttrSpec*>, kNumOpCodes> byOp;

  Schema() {
    specs = {
#define ATTR(OPC, ACCESSOR, NAME, KIND, REQ, DFLT, ALLOWED)                                        \
  AttrSpec{OpCode::OPC, NAME, AttrKind::KIND, REQ, {WW_ATTR_UNPACK ALLOWED}},
#define Required true
#define Optional false
#include "ir/Ops.def"
#undef Required
#undef Optional
#undef ATTR
    };
    for (const AttrSpec& s : specs) byOp[static_cast<size_t>(s.op)].push_back(&s);
  }
};

const Schema& schema() {
  static const Schema s;
  return s;
}

} // namespace

const char* attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::Int:
    return "an int";
  case AttrKind::Bool:
    return "a bool (0 or 1)";
  case AttrKind::Str:
    return "a string";
  case AttrKind::Enum:
    return "a string";
  case AttrKind::DType:
    return "a dtype name";
  case AttrKind::Ints:
    return "an int list";
  case AttrKind::Number:
    return "an int or a float";
  }
  return "?";
}

const std::vector<const AttrSpec*>& attrSpecs(OpCode op) {
  return schema().byOp.at(static_cast<size_t>(op));
}

const AttrSpec* findAttrSpec(OpCode op, std::string_view name) {
  for (const AttrSpec* s : attrSpecs(op))
    if (name == s->name) return s;
  return nullptr;
}

std::string undeclaredAttrMessage(OpCode op, std::string_view name) {
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : ", ") + v[i];
    return v.empty() ? std::string("none") : out;
  };
  std::vector<std::string> own, owners;
  for (const AttrSpec* s : attrSpecs(op)) own.push_back(s->name);
  for (const AttrSpec& s : schema().specs)
    if (name == s.name) owners.push_back(std::string("'") + opName(s.op) + "'");
  if (owners.empty())
    return "unknown attribute '" + std::string(name) + "' (Ops.def declares " + join(own) + ")";
  return "attribute '" + std::string(name) + "' is not declared for '" + opName(op) +
         "' (Ops.def declares it for " + join(owners) + "; for '" + opName(op) + "': " + join(own) +
         ")";
}

std::string allowedList(const AttrSpec& spec, const std::string& prefix) {
  std::string out;
  for (size_t i = 0; i < spec.allowed.size(); ++i) {
    if (i) out.append(i + 1 == spec.allowed.size() ? " or " : ", ");
    out.push_back('"');
    if (!spec.allowed[i].empty()) out.append(prefix).append(spec.allowed[i]);
    out.push_back('"');
  }
  return out;
}

std::string checkAttr(const AttrSpec& spec, const Attr& value) {
  auto wrongType = [&] { return std::string("must be ") + attrKindName(spec.kind); };
  switch (spec.kind) {
  case AttrKind::Int:
    if (!std::holds_alternative<int64_t>(value)) return wrongType();
    return "";
  case AttrKind::Bool: {
    const int64_t* i = std::get_if<int64_t>(&value);
    if (!i || (*i != 0 && *i != 1)) return wrongType();
    return "";
  }
  case AttrKind::Str:
    if (!std::holds_alternative<std::string>(value)) return wrongType();
    return "";
  case AttrKind::Enum: {
    const std::string* s = std::get_if<std::string>(&value);
    if (!s) return wrongType() + ": one of " + allowedList(spec);
    for (std::string_view a : spec.allowed)
      if (*s == a) return "";
    return "is \"" + *s + "\", not one of " + allowedList(spec);
  }
  case AttrKind::DType: {
    const std::string* s = std::get_if<std::string>(&value);
    if (!s) return wrongType();
    if (!parseSigDType(*s) && !parseTlDType(*s)) return "\"" + *s + "\" is not a dtype";
    return "";
  }
  case AttrKind::Ints:
    if (!std::holds_alternative<std::vector<int64_t>>(value)) return wrongType();
    return "";
  case AttrKind::Number:
    if (!std::holds_alternative<int64_t>(value) && !std::holds_alternative<double>(value))
      return wrongType();
    return "";
  }
  return "";
}

} // namespace ww::ir
