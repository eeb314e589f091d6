// Parsing of `wwc --signature` / Python-built signatures, and target names.
#include "warpweave/warpweave.h"

#include <cctype>

namespace ww {

const char* targetName(Target t) {
  switch (t) {
  case Target::SM80:
    return "sm_80";
  case Target::SM90a:
    return "sm_90a";
  case Target::SM100a:
    return "sm_100a";
  }
  return "sm_90a";
}

Target parseTarget(const std::string& s) {
  if (s == "sm_80") return Target::SM80;
  if (s == "sm_90a") return Target::SM90a;
  if (s == "sm_100a") return Target::SM100a;
  throw std::invalid_argument("unknown target '" + s + "': expected sm_90a, sm_80 or sm_100a");
}

static std::string trim(std::string s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

static bool isIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

/// Splits on commas that are not inside <...>, (...) or quotes (desc<fp16,128x64> has a comma).
static std::vector<std::string> splitTopLevel(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  char quote = 0;
  for (char c : s) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '<' || c == '(' || c == '[') {
      ++depth;
    } else if (c == '>' || c == ')' || c == ']') {
      --depth;
    } else if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!trim(cur).empty() || !out.empty()) out.push_back(cur);
  return out;
}

std::vector<SignatureEntry> parseSignature(const std::string& sig) {
  std::vector<SignatureEntry> entries;
  for (std::string item : splitTopLevel(sig)) {
    item = trim(item);
    auto fail = [&](const std::string& why) -> void {
      throw CompileFailure("error: bad signature entry '" + item + "': " + why +
                           "\n  expected 'name:TYPE' (TYPE: *fp16, *fp32:16, i32, i64:16, fp32, "
                           "desc<fp16,128x64>) or 'name=VALUE' for a constexpr");
    };
    if (item.empty()) fail("empty entry");
    size_t eq = item.find('=');
    size_t colon = item.find(':');
    SignatureEntry e;
    if (eq != std::string::npos && (colon == std::string::npos || eq < colon)) {
      e.isConstexpr = true;
      e.name = trim(item.substr(0, eq));
      e.value = trim(item.substr(eq + 1));
      if (e.value.empty()) fail("constexpr without a value");
    } else if (colon != std::string::npos) {
      e.name = trim(item.substr(0, colon));
      std::string type = trim(item.substr(colon + 1));
      // A trailing `:16` / `:1` is a specialization hint, except inside desc<...>.
      size_t hint = type.rfind(':');
      if (hint != std::string::npos && type.find('>', hint) == std::string::npos) {
        std::string h = trim(type.substr(hint + 1));
        type = trim(type.substr(0, hint));
        if (h == "16")
          e.divisibility = 16;
        else if (h == "1")
          e.equalsOne = true;
        else
          fail("specialization hint ':" + h + "' must be ':16' or ':1'");
        if (e.equalsOne && (type.empty() || type[0] == '*')) fail("':1' applies to integers only");
      }
      if (type.empty()) fail("missing type");
      e.type = type;
    } else {
      fail("missing ':' or '='");
    }
    if (!isIdentifier(e.name)) fail("'" + e.name + "' is not a parameter name");
    for (const auto& prev : entries)
      if (prev.name == e.name) fail("parameter '" + e.name + "' appears twice");
    entries.push_back(std::move(e));
  }
  return entries;
}

} // namespace ww
