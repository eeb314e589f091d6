// tl.inline_asm_elementwise's operand model (see InlineAsm.h).
#include "ir/InlineAsm.h"

#include <algorithm>
#include <cctype>

namespace ww::ir {

int asmElementsPerOperand(DType elem, bool pointer, int pack) {
  const int bits = pointer ? 64 : bitWidth(elem);
  return std::min(std::max(32 / std::max(bits, 1), 1), pack);
}

int asmOperandBits(DType elem, bool pointer, int pack) {
  const int bits = pointer ? 64 : bitWidth(elem);
  return bits * asmElementsPerOperand(elem, pointer, pack);
}

std::string asmLettersFor(int bits) {
  switch (bits) {
  case 1:
    return "b";
  case 8:
    return "c or r";
  case 16:
    return "h or r";
  case 32:
    return "r or f";
  case 64:
    return "l or d";
  default:
    return "";
  }
}

std::string parseAsmConstraints(const std::string& text, std::vector<AsmConstraint>& out) {
  out.clear();
  if (text.empty()) return {};
  size_t start = 0;
  bool seenInput = false;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    std::string trimmed;
    for (char c : item)
      if (c != ' ' && c != '\t') trimmed += c;
    AsmConstraint c;
    size_t i = 0;
    if (i < trimmed.size() && trimmed[i] == '=') {
      c.output = true;
      ++i;
      if (i < trimmed.size() && trimmed[i] == '&') ++i; // early clobber: outputs are fresh anyway
    }
    if (i + 1 != trimmed.size() || std::string("rlhcfdb").find(trimmed[i]) == std::string::npos)
      return "constraint '" + item +
             "' is not one warpweave accepts: '=X' for an output, 'X' for an input, X one of r "
             "(32-bit), l (64-bit), h (16-bit), c (8-bit), f (f32), d (f64), b (predicate)";
    c.letter = trimmed[i];
    if (c.output && seenInput)
      return "constraint '" + item + "': outputs ('=...') come before every input";
    seenInput |= !c.output;
    out.push_back(c);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return {};
}

std::vector<AsmOperandRef> asmOperandRefs(const std::string& text) {
  std::vector<AsmOperandRef> refs;
  auto digit = [&](size_t i) {
    return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$' || !digit(i + 1)) continue;
    size_t j = i + 1, n = 0;
    while (digit(j) && n < 100000) n = n * 10 + size_t(text[j++] - '0');
    refs.push_back({i, j - i, n});
    i = j - 1;
  }
  return refs;
}

} // namespace ww::ir
