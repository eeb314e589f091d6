// The interpreter's subset of tl.inline_asm_elementwise (see InlineAsm.h): enough for asm that
// only delays a thread (nanosleep) or moves bits between operands, as kernels do to keep a value
// opaque to the compiler or to stall one CTA in a race test.
#include "interp/InlineAsm.h"

#include "ir/IR.h"
#include "ir/OpAttrs.h"

#include <cctype>
#include <cstring>

namespace ww::interp {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n{}");
  if (b == std::string::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n{}");
  return s.substr(b, e - b + 1);
}

/// "$3" -> 3; -1 when `s` is not an operand reference.
int operandIndex(const std::string& s) {
  if (s.size() < 2 || s[0] != '$') return -1;
  int n = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i])) || n > 1000) return -1;
    n = n * 10 + (s[i] - '0');
  }
  return n;
}

/// An integer immediate (decimal, 0x hex, negative) or a PTX float bit pattern (0fXXXXXXXX,
/// 0dXXXXXXXXXXXXXXXX) as raw bits.
bool immediateBits(const std::string& s, uint64_t& bits) {
  if (s.empty()) return false;
  try {
    size_t used = 0;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'f' || s[1] == 'F' || s[1] == 'd' || s[1] == 'D')) {
      bits = std::stoull(s.substr(2), &used, 16);
      return used == s.size() - 2;
    }
    if (s[0] == '-') {
      bits = uint64_t(std::stoll(s, &used, 0));
    } else {
      bits = std::stoull(s, &used, 0);
    }
    return used == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

} // namespace

bool runInlineAsm(const ir::Op& op, const std::vector<TensorPtr>& args,
                  std::vector<Tensor>& results, std::string& error) {
  const unsigned outs = op.numResults();
  if (int64_t pack = ir::attr::InlineAsm::pack(op); pack != 1) {
    error = "pack=" + std::to_string(pack) + " (the interpreter runs pack=1)";
    return false;
  }
  results.clear();
  for (unsigned r = 0; r < outs; ++r) results.push_back(Tensor::ofType(op.result(r)->type()));
  // The statements, comments removed.
  std::string text;
  for (const std::string& line : [&] {
         std::vector<std::string> lines;
         std::string all = ir::attr::InlineAsm::asmText(op);
         size_t start = 0;
         while (start <= all.size()) {
           size_t end = all.find('\n', start);
           if (end == std::string::npos) end = all.size();
           lines.push_back(all.substr(start, end - start));
           start = end + 1;
         }
         return lines;
       }())
    text += line.substr(0, line.find("//")) + "\n";
  struct Move {
    int dst;
    int src; // -1: the immediate
    uint64_t imm;
  };
  std::vector<Move> moves;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    std::string stmt = trim(text.substr(start, end - start));
    start = end + 1;
    if (stmt.empty()) continue;
    size_t sp = stmt.find_first_of(" \t");
    std::string opcode = stmt.substr(0, sp);
    std::string rest = sp == std::string::npos ? "" : stmt.substr(sp + 1);
    if (opcode.rfind("nanosleep", 0) == 0) continue;
    // The interpreter runs launches one after another: the grids a programmatic dependent launch
    // waits for have finished, and starting dependents early changes nothing.
    if (opcode.rfind("griddepcontrol.", 0) == 0) continue;
    if (opcode.rfind("mov.", 0) == 0 && rest.find(',') != std::string::npos &&
        rest.find('{') == std::string::npos) {
      std::string a = trim(rest.substr(0, rest.find(','))),
                  b = trim(rest.substr(rest.find(',') + 1));
      Move m{operandIndex(a), operandIndex(b), 0};
      if (m.dst >= 0 && m.dst < int(outs) &&
          (m.src >= int(outs) || (m.src < 0 && immediateBits(b, m.imm))) &&
          m.src < int(outs + args.size())) {
        moves.push_back(m);
        continue;
      }
    }
    error = "'" + stmt + "'";
    return false;
  }
  const int64_t n = results.empty() ? 0 : results[0].numel();
  for (const Move& m : moves) {
    Tensor& dst = results[size_t(m.dst)];
    const int w = dst.elemBytes();
    for (int64_t e = 0; e < n; ++e) {
      uint64_t bits = m.imm;
      if (m.src >= 0) {
        const Tensor& src = *args[size_t(m.src) - outs];
        bits = 0;
        const int64_t at = src.numel() == 1 ? 0 : e;
        std::memcpy(&bits, src.bytes.data() + size_t(at) * size_t(src.elemBytes()),
                    size_t(std::min(src.elemBytes(), 8)));
      }
      std::memcpy(dst.bytes.data() + size_t(e) * size_t(w), &bits, size_t(std::min(w, 8)));
    }
  }
  return true;
}

} // namespace ww::interp
