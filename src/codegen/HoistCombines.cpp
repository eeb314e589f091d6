// Early placement of the adds, maxima and minima that end two values' lives (the steps of a
// reduction's per-thread chain), over the PTX text of a function body.
//
// A row sum written after the uses of its elements (attention's `l_ij = tl.sum(p, 1)` after P is
// converted and stored to tensor memory, as TLX's tutorials write it) is lowered where it stands:
// the chain acc = acc + p[k] comes after the stores, so every fp32 p[k] stays live through the
// conversions and stores that also hold the packed 16-bit copies, and ptxas spills (TLX's
// blackwell_fa_clc softmax: 648 bytes at its 168-register budget). Placing each step just after
// the last earlier line that mentions one of its operands ends p[k]'s life at its own conversion.
//
// A line `op.f32 %d, %a, %b;` (op add, max or min, unguarded; %a and %b two different registers)
// moves when %d occurs nowhere before it and neither %a nor %b occurs anywhere after it. Then the
// move keeps the meaning (no line it passes mentions %a, %b or %d, and it passes no label, branch,
// scope brace, inline asm, setmaxnreg, wgmma or tcgen05.ld and its wait, whose registers are
// written asynchronously) and never raises register pressure: across the lines it passes, %a and
// %b were both live and now only %d is.
#include "codegen/Lowering.h"
#include "codegen/PtxBuilder.h"

#include <cctype>
#include <map>
#include <string_view>
#include <vector>

namespace ww::codegen {

namespace {

bool isRegChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// The registers (`%name`, not `%tid.x` and the like) on `line`.
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

/// Whether no instruction may move across `line`: a label, a branch or return, a scope brace, a
/// declaration, the end of an inline asm (whose text the pass does not read), or a change of the
/// register budget.
bool isBarrierLine(std::string_view line) {
  if (line.empty()) return false;
  if (line[0] != '\t')
    return line.find(':') != std::string_view::npos || line[0] == '{' || line[0] == '}';
  size_t at = line.find_first_not_of(" \t");
  if (at == std::string_view::npos) return false;
  std::string_view s = line.substr(at);
  if (s[0] == '{' || s[0] == '}' || (s[0] == '.' && !s.starts_with(".loc"))) return true;
  if (s.starts_with(kInlineAsmBegin) || s.starts_with(kInlineAsmEnd)) return true;
  if (s[0] == '@') { // a guarded instruction: look at its opcode
    size_t sp = s.find_first_of(" \t");
    if (sp == std::string_view::npos) return true;
    s = s.substr(s.find_first_not_of(" \t", sp));
  }
  // wgmma and tcgen05.ld write their registers after they issue, until their wait: a step that
  // reads one must stay after the wait (and a wgmma's accumulators read in between would
  // serialize every wgmma, ptxas C7514).
  return s.starts_with("bra") || s.starts_with("ret") || s.starts_with("exit") ||
         s.starts_with("setmaxnreg") || s.starts_with("call") || s.starts_with("wgmma.") ||
         s.starts_with("tcgen05.ld") || s.starts_with("tcgen05.wait::ld");
}

/// `%d, %a, %b` of an unguarded `add|max|min[.modifiers].f32 %d, %a, %b;`, else empty.
std::vector<std::string_view> combineOperands(std::string_view line) {
  size_t at = line.find_first_not_of(" \t");
  if (at == std::string_view::npos) return {};
  std::string_view s = line.substr(at);
  if (!(s.starts_with("add.") || s.starts_with("max.") || s.starts_with("min."))) return {};
  size_t sp = s.find_first_of(" \t");
  if (sp == std::string_view::npos) return {};
  std::string_view opcode = s.substr(0, sp);
  if (!opcode.ends_with(".f32") || opcode.find(".sat") != std::string_view::npos) return {};
  // Exactly three register operands, nothing else (no immediates, no vector braces).
  std::string_view rest = s.substr(sp);
  std::vector<std::string_view> regs = registersIn(rest);
  if (regs.size() != 3 || regs[1] == regs[2] || rest.find('{') != std::string_view::npos) return {};
  size_t commas = 0;
  for (char c : rest) commas += c == ',';
  if (commas != 2) return {};
  return regs;
}

} // namespace

void hoistDyingCombines(std::string& body) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < body.size();) {
    size_t nl = body.find('\n', at);
    size_t end = nl == std::string::npos ? body.size() : nl + 1;
    lines.emplace_back(body, at, end - at);
    at = end;
  }
  // First and last line of each register in the original order.
  std::map<std::string, std::pair<size_t, size_t>> span;
  for (size_t i = 0; i < lines.size(); ++i)
    for (std::string_view r : registersIn(lines[i])) {
      auto [it, fresh] = span.emplace(std::string(r), std::make_pair(i, i));
      if (!fresh) it->second.second = i;
    }
  std::vector<std::string> out;
  out.reserve(lines.size());
  bool moved = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::string_view> ops = combineOperands(lines[i]);
    bool candidate = !ops.empty();
    if (candidate) {
      const auto& d = span.at(std::string(ops[0]));
      candidate = d.first == i && span.at(std::string(ops[1])).second == i &&
                  span.at(std::string(ops[2])).second == i;
    }
    if (!candidate) {
      out.push_back(std::move(lines[i]));
      continue;
    }
    // Up to the last earlier line that mentions an operand (or the closest barrier line).
    size_t to = out.size();
    while (to > 0) {
      const std::string& prev = out[to - 1];
      if (isBarrierLine(prev)) break;
      bool mentions = false;
      for (std::string_view r : registersIn(prev)) mentions |= r == ops[1] || r == ops[2];
      if (mentions) break;
      --to;
    }
    if (to == out.size()) {
      out.push_back(std::move(lines[i]));
      continue;
    }
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(to), std::move(lines[i]));
    moved = true;
  }
  if (!moved) return;
  std::string text;
  text.reserve(body.size());
  for (const std::string& l : out) text += l;
  body = std::move(text);
}

} // namespace ww::codegen
