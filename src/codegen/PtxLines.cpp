#include "codegen/PtxLines.h"

#include "codegen/PtxBuilder.h"

#include <cctype>

namespace ww::codegen {

namespace {

bool isRegChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

} // namespace

std::vector<std::string> splitPtxLines(const std::string& body) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < body.size();) {
    size_t nl = body.find('\n', at);
    size_t end = nl == std::string::npos ? body.size() : nl + 1;
    lines.emplace_back(body, at, end - at);
    at = end;
  }
  return lines;
}

std::string joinPtxLines(const std::vector<std::string>& lines) {
  size_t size = 0;
  for (const std::string& l : lines) size += l.size();
  std::string text;
  text.reserve(size);
  for (const std::string& l : lines) text += l;
  return text;
}

std::vector<std::string_view> registersIn(std::string_view line) {
  std::vector<std::string_view> regs;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '%') continue;
    size_t j = i + 1;
    while (j < line.size() && isRegChar(line[j])) ++j;
    if (j > i + 1 && (j == line.size() || line[j] != '.')) regs.push_back(line.substr(i, j - i));
    i = j - 1;
  }
  return regs;
}

std::vector<std::string_view> registersWrittenBy(std::string_view line) {
  if (line.find('{') != std::string_view::npos) return registersIn(line);
  std::string_view inst = ptxInstruction(line);
  size_t space = inst.find_first_of(" \t");
  if (inst.empty() || space == std::string_view::npos) return {};
  std::string_view first = inst.substr(space);
  return registersIn(first.substr(0, first.find_first_of(",;")));
}

bool isBuilderRegister(std::string_view reg) {
  size_t digits = reg.find_first_of("0123456789");
  if (digits == std::string_view::npos || digits == reg.size()) return false;
  for (char c : reg.substr(digits))
    if (c < '0' || c > '9') return false;
  std::string_view prefix = reg.substr(0, digits);
  return prefix == "%p" || prefix == "%h" || prefix == "%r" || prefix == "%rd" || prefix == "%f" ||
         prefix == "%fd";
}

std::string_view ptxInstruction(std::string_view line, bool* guarded) {
  if (guarded) *guarded = false;
  if (line.empty() || line[0] != '\t') return {};
  size_t at = line.find_first_not_of(" \t");
  if (at == std::string_view::npos) return {};
  std::string_view s = line.substr(at);
  if (s[0] == '.' || s[0] == '{' || s[0] == '}') return {};
  if (s[0] == '@') {
    if (guarded) *guarded = true;
    size_t sp = s.find_first_of(" \t");
    if (sp == std::string_view::npos) return {};
    size_t op = s.find_first_not_of(" \t", sp);
    if (op == std::string_view::npos) return {};
    s = s.substr(op);
  }
  return s;
}

bool isBarrierLine(std::string_view line) {
  if (line.empty()) return false;
  if (line[0] != '\t')
    return line.find(':') != std::string_view::npos || line[0] == '{' || line[0] == '}';
  size_t at = line.find_first_not_of(" \t");
  if (at == std::string_view::npos) return false;
  std::string_view s = line.substr(at);
  if (s[0] == '{' || s[0] == '}' || (s[0] == '.' && !s.starts_with(".loc"))) return true;
  if (s.starts_with(kInlineAsmBegin) || s.starts_with(kInlineAsmEnd)) return true;
  std::string_view inst = ptxInstruction(line); // a guarded one: its opcode
  if (inst.empty()) return s[0] == '@';         // a guard with no instruction after it
  // wgmma and tcgen05.ld write their registers after they issue, until their wait: an
  // instruction that reads one must stay after the wait (and a wgmma's accumulators read in
  // between would serialize every wgmma, ptxas C7514).
  return inst.starts_with("bra") || inst.starts_with("ret") || inst.starts_with("exit") ||
         inst.starts_with("setmaxnreg") || inst.starts_with("call") || inst.starts_with("wgmma.") ||
         inst.starts_with("tcgen05.ld") || inst.starts_with("tcgen05.wait::ld");
}

} // namespace ww::codegen
