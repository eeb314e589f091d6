// The interpreter's subset of tl.inline_asm_elementwise (see InlineAsm.h): bit moves between
// operands (kernels keep a value opaque to the compiler that way), delays (nanosleep), and the
// fp32 arithmetic attention kernels write by hand: f32 and f32x2 add / sub / mul / fma, the
// .approx functions (tanh, ex2, lg2, rcp, sqrt, rsqrt, sin, cos), with .reg temporaries and
// 64-bit pairs packed and unpacked by `mov.b64 r, {a, b}` / `mov.b64 {a, b}, r`. The .approx
// functions are computed exactly (they are within their documented error of that).
#include "interp/InlineAsm.h"

#include "ir/IR.h"
#include "ir/OpAttrs.h"

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace ww::interp {

namespace {

std::string trim(const std::string& s, const char* chars = " \t\r\n") {
  size_t b = s.find_first_not_of(chars);
  if (b == std::string::npos) return {};
  size_t e = s.find_last_not_of(chars);
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

float asFloat(uint64_t bits) {
  uint32_t w = uint32_t(bits);
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

uint64_t floatBits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return w;
}

/// Subnormals to zero of the same sign (.ftz).
float flush(float f) {
  return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f;
}

/// Splits an operand list at the commas outside braces.
std::vector<std::string> splitOperands(const std::string& rest) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : rest) {
    if (c == '{') ++depth;
    if (c == '}') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

/// One asm instance: its operands ($N) and the registers its .reg declarations name.
class Instance {
public:
  Instance(unsigned outs, unsigned operands) : outs_(outs), values_(operands, 0) {}

  uint64_t& operand(unsigned i) { return values_[i]; }

  /// Runs one statement; false when it is outside the subset.
  bool run(const std::string& stmt) {
    size_t sp = stmt.find_first_of(" \t");
    const std::string opcode = stmt.substr(0, sp);
    const std::string rest = sp == std::string::npos ? "" : stmt.substr(sp + 1);
    if (opcode.rfind("nanosleep", 0) == 0) return true;
    // The interpreter runs launches one after another: the grids a programmatic dependent launch
    // waits for have finished, and starting dependents early changes nothing.
    if (opcode.rfind("griddepcontrol.", 0) == 0) return true;
    if (opcode == ".reg") {
      std::vector<std::string> names = splitOperands(rest);
      if (names.empty()) return false;
      size_t type = names[0].find_first_of(" \t");
      if (type == std::string::npos || names[0][0] != '.') return false;
      names[0] = trim(names[0].substr(type));
      for (const std::string& n : names) regs_[n] = 0;
      return true;
    }
    std::vector<std::string> parts; // opcode components: add, rn, ftz, f32x2
    for (size_t s = 0, e; s <= opcode.size(); s = e + 1) {
      e = opcode.find('.', s);
      if (e == std::string::npos) e = opcode.size();
      parts.push_back(opcode.substr(s, e - s));
    }
    const std::string& base = parts.front();
    const std::string& type = parts.back();
    bool ftz = false;
    for (size_t i = 1; i + 1 < parts.size(); ++i) {
      if (parts[i] == "ftz")
        ftz = true;
      else if (parts[i] != "rn" && parts[i] != "approx")
        return false; // other roundings, .sat: not modelled
    }
    std::vector<std::string> ops = splitOperands(rest);
    if (ops.empty()) return false;
    if (base == "mov") return move(type, ops);
    const bool pair = type == "f32x2";
    if (type != "f32" && !pair) return false;
    static const std::unordered_map<std::string, int> arity = {
        {"add", 2},  {"sub", 2},   {"mul", 2},  {"min", 2}, {"max", 2}, {"fma", 3},
        {"neg", 1},  {"abs", 1},   {"tanh", 1}, {"ex2", 1}, {"lg2", 1}, {"rcp", 1},
        {"sqrt", 1}, {"rsqrt", 1}, {"sin", 1},  {"cos", 1}};
    auto it = arity.find(base);
    if (it == arity.end() || ops.size() != size_t(it->second) + 1) return false;
    if (pair && base != "add" && base != "sub" && base != "mul" && base != "fma") return false;
    std::vector<uint64_t> in;
    for (size_t i = 1; i < ops.size(); ++i) {
      uint64_t v;
      if (!read(ops[i], v)) return false;
      in.push_back(v);
    }
    auto lane = [&](int l) {
      float x[3] = {};
      for (size_t i = 0; i < in.size(); ++i) {
        x[i] = asFloat(in[i] >> (32 * l));
        if (ftz) x[i] = flush(x[i]);
      }
      float r = 0;
      if (base == "add") r = x[0] + x[1];
      if (base == "sub") r = x[0] - x[1];
      if (base == "mul") r = x[0] * x[1];
      if (base == "min") r = std::fmin(x[0], x[1]);
      if (base == "max") r = std::fmax(x[0], x[1]);
      if (base == "fma") r = std::fma(x[0], x[1], x[2]);
      if (base == "neg") r = -x[0];
      if (base == "abs") r = std::fabs(x[0]);
      if (base == "tanh") r = std::tanh(x[0]);
      if (base == "ex2") r = std::exp2(x[0]);
      if (base == "lg2") r = std::log2(x[0]);
      if (base == "rcp") r = 1.0f / x[0];
      if (base == "sqrt") r = std::sqrt(x[0]);
      if (base == "rsqrt") r = 1.0f / std::sqrt(x[0]);
      if (base == "sin") r = std::sin(x[0]);
      if (base == "cos") r = std::cos(x[0]);
      return floatBits(ftz ? flush(r) : r);
    };
    return write(ops[0], pair ? lane(0) | (lane(1) << 32) : lane(0));
  }

private:
  /// `mov.TYPE d, s`, with vector forms `{a, b}` on either side: elements of TYPE's width /
  /// their count, the first in the low bits.
  bool move(const std::string& type, const std::vector<std::string>& ops) {
    if (ops.size() != 2 || type.size() < 2) return false;
    const int width = std::atoi(type.c_str() + 1);
    if (width != 8 && width != 16 && width != 32 && width != 64) return false;
    auto vector = [](const std::string& s) {
      return s.size() > 1 && s.front() == '{' && s.back() == '}'
                 ? splitOperands(s.substr(1, s.size() - 2))
                 : std::vector<std::string>{};
    };
    std::vector<std::string> dst = vector(ops[0]), src = vector(ops[1]);
    const uint64_t mask = width == 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
    if (!src.empty()) {
      const int w = width / int(src.size());
      uint64_t bits = 0;
      for (size_t i = 0; i < src.size(); ++i) {
        uint64_t v;
        if (!read(src[i], v)) return false;
        bits |= (v & ((uint64_t(1) << w) - 1)) << (w * int(i));
      }
      return dst.empty() && write(ops[0], bits);
    }
    uint64_t v;
    if (!read(ops[1], v)) return false;
    if (dst.empty()) return write(ops[0], v & mask);
    const int w = width / int(dst.size());
    for (size_t i = 0; i < dst.size(); ++i)
      if (!write(dst[i], (v >> (w * int(i))) & ((uint64_t(1) << w) - 1))) return false;
    return true;
  }

  bool read(const std::string& s, uint64_t& v) {
    // Special registers tl.extra.cuda reads: the interpreter is one SM; the timer is the host's
    // steady clock in nanoseconds.
    if (s == "%smid") {
      v = 0;
      return true;
    }
    if (s == "%globaltimer") {
      v = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now().time_since_epoch())
                                    .count());
      return true;
    }
    if (int i = operandIndex(s); i >= 0) {
      if (size_t(i) >= values_.size()) return false;
      v = values_[size_t(i)];
      return true;
    }
    if (auto it = regs_.find(s); it != regs_.end()) {
      v = it->second;
      return true;
    }
    return immediateBits(s, v);
  }

  bool write(const std::string& s, uint64_t v) {
    if (int i = operandIndex(s); i >= 0) {
      if (unsigned(i) >= outs_) return false; // inputs are read-only
      values_[size_t(i)] = v;
      return true;
    }
    auto it = regs_.find(s);
    if (it == regs_.end()) return false;
    it->second = v;
    return true;
  }

  unsigned outs_;
  std::vector<uint64_t> values_;
  std::unordered_map<std::string, uint64_t> regs_;
};

/// The asm's statements, comments and scope braces removed.
std::vector<std::string> statements(const std::string& all) {
  std::string text;
  for (size_t start = 0; start <= all.size();) {
    size_t end = all.find('\n', start);
    if (end == std::string::npos) end = all.size();
    std::string line = all.substr(start, end - start);
    text += line.substr(0, line.find("//")) + "\n";
    start = end + 1;
  }
  std::vector<std::string> out;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    // A statement never starts with a brace: one there opens or closes a scope.
    std::string stmt = trim(text.substr(start, end - start), " \t\r\n{}");
    std::string tail = trim(text.substr(start, end - start));
    if (!stmt.empty() && tail.back() == '}' && stmt.find('{') != std::string::npos)
      stmt += '}'; // a vector operand's closing brace
    start = end + 1;
    if (!stmt.empty()) out.push_back(stmt);
  }
  return out;
}

} // namespace

bool runInlineAsm(const ir::Op& op, const std::vector<TensorPtr>& args,
                  std::vector<Tensor>& results, std::string& error) {
  const unsigned outs = op.numResults();
  const int64_t pack = ir::attr::InlineAsm::pack(op);
  results.clear();
  for (unsigned r = 0; r < outs; ++r) results.push_back(Tensor::ofType(op.result(r)->type()));
  // At pack > 1 each operand holds one element: 32-bit and wider ones only (narrower elements
  // would share a register).
  if (pack > 1) {
    for (const Tensor& t : results)
      if (t.elemBytes() < 4) {
        error = "pack=" + std::to_string(pack) + " with elements narrower than 32 bits";
        return false;
      }
    for (const TensorPtr& a : args)
      if (a->elemBytes() < 4) {
        error = "pack=" + std::to_string(pack) + " with elements narrower than 32 bits";
        return false;
      }
  }
  const std::vector<std::string> stmts = statements(ir::attr::InlineAsm::asmText(op));
  const int64_t n = results.empty() ? 1 : results[0].numel();
  const unsigned outOperands = outs * unsigned(pack);
  for (int64_t base = 0; base < std::max<int64_t>(n, 1); base += pack) {
    Instance in(outOperands, outOperands + unsigned(args.size() * size_t(pack)));
    for (size_t a = 0; a < args.size(); ++a)
      for (int64_t k = 0; k < pack; ++k) {
        const Tensor& src = *args[a];
        const int64_t at = src.numel() == 1 ? 0 : std::min(base + k, src.numel() - 1);
        uint64_t bits = 0;
        std::memcpy(&bits, src.bytes.data() + size_t(at) * size_t(src.elemBytes()),
                    size_t(std::min(src.elemBytes(), 8)));
        in.operand(outOperands + unsigned(a * size_t(pack) + size_t(k))) = bits;
      }
    for (const std::string& stmt : stmts)
      if (!in.run(stmt)) {
        error = "'" + stmt + "'";
        return false;
      }
    for (unsigned r = 0; r < outs; ++r)
      for (int64_t k = 0; k < pack && base + k < n; ++k) {
        Tensor& dst = results[r];
        const uint64_t bits = in.operand(r * unsigned(pack) + unsigned(k));
        std::memcpy(dst.bytes.data() + size_t(base + k) * size_t(dst.elemBytes()), &bits,
                    size_t(std::min(dst.elemBytes(), 8)));
      }
  }
  return true;
}

} // namespace ww::interp
