// Contraction of a float multiply and the add that is its only use into one fma.rn, over the PTX
// text of a function body (Triton's enable_fp_fusion, on by default).
//
// Unrounded `mul.f32` / `add.f32` (no .rn) let ptxas contract the pair itself, and it mostly
// does; writing the contraction out makes the PTX say what the kernel computes, as Triton's does
// (LLVM contracts such pairs when fusion is on), so a reader or a test looking for `fma.rn`
// finds it, and fusion off is told apart by the text.
//
// A line `mul.f32 %f, x, y;` (or f64) is contracted when it is unguarded, %f is a builder
// register that occurs exactly twice (here and in the add, later in straight-line code), no line
// in between may write x or y, and the move lengthens no register's life: the add follows the
// multiply with no instruction between them, or x and y are read again at or after the add.
// The add `add.f32 %d, %f, z;` (either operand order) becomes `fma.rn.f32 %d, x, y, z;` and the
// multiply goes. Pairs kept apart are left to ptxas: moving a multiply down to its add in the
// fp8 GEMM's epilogue (64 multiplies, the bias loads, then 64 adds) made ptxas spill.
#include "codegen/Lowering.h"
#include "codegen/PtxBuilder.h"
#include "codegen/PtxLines.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ww::codegen {

namespace {

/// How far (in lines) an add may follow its multiply: past an elementwise op over a 128-element
/// tile, and still a bounded walk per multiply.
constexpr size_t kMaxDistance = 2048;

/// The operands of `inst` (`opcode a, b, c;`), trimmed; empty when it is not of that form.
std::vector<std::string_view> operandsOf(std::string_view inst) {
  std::vector<std::string_view> out;
  size_t space = inst.find_first_of(" \t");
  size_t semi = inst.rfind(';');
  if (space == std::string_view::npos || semi == std::string_view::npos || semi < space) return out;
  std::string_view rest = inst.substr(space, semi - space);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    size_t b = item.find_first_not_of(" \t");
    size_t e = item.find_last_not_of(" \t");
    if (b == std::string_view::npos) return {};
    out.push_back(item.substr(b, e - b + 1));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

/// "f32" or "f64" when `inst` is an unrounded `<opcode>.f32` / `.f64` with three operands.
std::string_view floatTypeOf(std::string_view inst, std::string_view opcode) {
  if (!inst.starts_with(opcode)) return {};
  std::string_view rest = inst.substr(opcode.size());
  for (std::string_view t : {std::string_view("f32"), std::string_view("f64")})
    if (rest.size() > 1 + t.size() && rest[0] == '.' && rest.substr(1).starts_with(t) &&
        (rest[1 + t.size()] == ' ' || rest[1 + t.size()] == '\t'))
      return t;
  return {};
}

} // namespace

void contractMulAdd(std::string& body) {
  std::vector<std::string> lines = splitPtxLines(body);
  const size_t n = lines.size();
  std::unordered_map<std::string, size_t> mentions, last;
  std::vector<std::vector<std::string_view>> regs(n), writes(n);
  for (size_t i = 0; i < n; ++i) {
    regs[i] = registersIn(lines[i]);
    writes[i] = registersWrittenBy(lines[i]);
    for (std::string_view r : regs[i]) {
      ++mentions[std::string(r)];
      last[std::string(r)] = i;
    }
  }
  // Whether the operand `x` of a multiply at line i stays live until line j anyway (an
  // immediate has no life).
  auto liveUntil = [&](std::string_view x, size_t j) {
    return !x.starts_with("%") || last[std::string(x)] >= j;
  };
  auto mayWrite = [&](size_t k, std::string_view r) {
    for (std::string_view x : writes[k])
      if (x == r) return true;
    return false;
  };

  std::vector<char> removed(n);
  bool changed = false;
  bool inAsm = false; // a kernel's own inline asm is left as written
  for (size_t i = 0; i < n; ++i) {
    std::string_view text = lines[i];
    size_t at = text.find_first_not_of(" \t");
    if (at != std::string_view::npos && text.substr(at).starts_with(kInlineAsmBegin)) inAsm = true;
    if (at != std::string_view::npos && text.substr(at).starts_with(kInlineAsmEnd)) inAsm = false;
    if (inAsm) continue;
    bool guarded = false;
    std::string_view inst = ptxInstruction(lines[i], &guarded);
    std::string_view type = floatTypeOf(inst, "mul");
    if (guarded || type.empty()) continue;
    std::vector<std::string_view> mul = operandsOf(inst);
    if (mul.size() != 3 || !isBuilderRegister(mul[0]) || !mul[0].starts_with("%f") ||
        mentions[std::string(mul[0])] != 2)
      continue;
    bool adjacent = true; // no instruction yet between the multiply and line j
    for (size_t j = i + 1; j < n && j - i <= kMaxDistance; ++j) {
      bool mentioned = false;
      for (std::string_view r : regs[j]) mentioned |= r == mul[0];
      if (mentioned) {
        bool addGuarded = false;
        std::string_view add = ptxInstruction(lines[j], &addGuarded);
        std::vector<std::string_view> ops = operandsOf(add);
        if (addGuarded || floatTypeOf(add, "add") != type || ops.size() != 3 ||
            (ops[1] == mul[0]) == (ops[2] == mul[0]))
          break;
        if (!adjacent && !(liveUntil(mul[1], j) && liveUntil(mul[2], j))) break;
        std::string_view other = ops[1] == mul[0] ? ops[2] : ops[1];
        std::string indent = lines[j].substr(0, lines[j].find_first_not_of(" \t"));
        lines[j] = indent + "fma.rn." + std::string(type) + " " + std::string(ops[0]) + ", " +
                   std::string(mul[1]) + ", " + std::string(mul[2]) + ", " + std::string(other) +
                   ";\n";
        // The old views pointed into the replaced text.
        regs[j] = registersIn(lines[j]);
        writes[j] = registersWrittenBy(lines[j]);
        for (std::string_view x : {mul[1], mul[2]})
          if (x.starts_with("%")) last[std::string(x)] = std::max(last[std::string(x)], j);
        removed[i] = 1;
        changed = true;
        break;
      }
      if (isBarrierLine(lines[j]) || mayWrite(j, mul[1]) || mayWrite(j, mul[2])) break;
      if (!ptxInstruction(lines[j]).empty()) adjacent = false;
    }
  }
  if (!changed) return;
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (!removed[i]) out.push_back(std::move(lines[i]));
  body = joinPtxLines(out);
}

} // namespace ww::codegen
