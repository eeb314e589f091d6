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
#include "codegen/PtxLines.h"

#include <map>
#include <string_view>
#include <vector>

namespace ww::codegen {

namespace {

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
  std::vector<std::string> lines = splitPtxLines(body);
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
  if (moved) body = joinPtxLines(out);
}

} // namespace ww::codegen
