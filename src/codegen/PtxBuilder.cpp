#include "codegen/PtxBuilder.h"
#include "support/MathExtras.h"

#include <bit>
#include <cctype>
#include <cstdio>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace ww::codegen {

RegClass regClassOf(ir::DType t, bool pointer) {
  using ir::DType;
  if (pointer) return RegClass::B64;
  switch (t) {
  case DType::I1:
    return RegClass::Pred;
  case DType::I8:
  case DType::U8:
  case DType::I16:
  case DType::U16:
  case DType::F8E4M3:
  case DType::F8E5M2:
  case DType::F8E4B15:
  case DType::F8E4B8:
  case DType::F8E5B16:
  case DType::F16:
  case DType::BF16:
    return RegClass::B16;
  case DType::I32:
  case DType::U32:
    return RegClass::B32;
  case DType::I64:
  case DType::U64:
    return RegClass::B64;
  case DType::F32:
    return RegClass::F32;
  case DType::F64:
    return RegClass::F64;
  }
  throw std::logic_error("regClassOf: unknown dtype");
}

const char* regDeclType(RegClass c) {
  static const char* const names[] = {".pred", ".b16", ".b32", ".b64", ".f32", ".f64"};
  return names[static_cast<int>(c)];
}

namespace {
const char* regPrefix(RegClass c) {
  static const char* const prefixes[] = {"%p", "%h", "%r", "%rd", "%f", "%fd"};
  return prefixes[static_cast<int>(c)];
}
} // namespace

bool isRegisterOf(std::string_view operand, RegClass c) {
  std::string_view prefix = regPrefix(c);
  return operand.size() > prefix.size() && operand.substr(0, prefix.size()) == prefix &&
         operand[prefix.size()] >= '0' && operand[prefix.size()] <= '9';
}

std::string immInt(int64_t v) {
  return std::to_string(v);
}

std::string immF32(float v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0f%08X", std::bit_cast<uint32_t>(v));
  return buf;
}

std::string immF64(double v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0d%016llX",
                static_cast<unsigned long long>(std::bit_cast<uint64_t>(v)));
  return buf;
}

std::string PtxBuilder::newReg(RegClass c) {
  int n = regCount_[static_cast<int>(c)]++;
  return regPrefix(c) + std::to_string(n);
}

namespace {
std::string pureKey(std::string_view opcode, RegClass dst,
                    const std::vector<std::string>& operands) {
  std::string key(opcode);
  key += ' ';
  key += regDeclType(dst);
  for (const auto& o : operands) {
    key += ',';
    key += o;
  }
  return key;
}
} // namespace

void PtxBuilder::remember(std::string_view opcode, RegClass dst,
                          const std::vector<std::string>& operands, const std::string& reg) {
  std::string key = pureKey(opcode, dst, operands);
  if (pureTable_.emplace(key, reg).second) scopes_.back().push_back(std::move(key));
}

std::string PtxBuilder::pure(std::string_view opcode, RegClass dst,
                             const std::vector<std::string>& operands) {
  std::string key = pureKey(opcode, dst, operands);
  if (auto it = pureTable_.find(key); it != pureTable_.end()) return it->second;
  std::string reg = newReg(dst);
  std::vector<std::string> all{reg};
  all.insert(all.end(), operands.begin(), operands.end());
  inst(opcode, all);
  pureTable_.emplace(key, reg);
  scopes_.back().push_back(std::move(key));
  return reg;
}

std::string PtxBuilder::materialize(const std::string& operand, RegClass c) {
  static const char* const movTypes[] = {"mov.pred", "mov.b16", "mov.b32",
                                         "mov.b64",  "mov.f32", "mov.f64"};
  if (!isImmediate(operand)) return operand;
  return pure(movTypes[static_cast<int>(c)], c, {operand});
}

void PtxBuilder::inst(std::string_view opcode, const std::vector<std::string>& operands,
                      const std::string& guard, bool negateGuard) {
  flushLoc();
  body_ += "\t";
  if (!guard.empty()) {
    body_ += negateGuard ? "@!" : "@";
    body_ += guard;
    body_ += ' ';
  }
  body_ += opcode;
  for (size_t i = 0; i < operands.size(); ++i) {
    body_ += i == 0 ? " " : ", ";
    body_ += operands[i];
  }
  body_ += ";\n";
}

void PtxBuilder::raw(std::string_view line) {
  flushLoc();
  body_ += '\t';
  body_ += line;
  body_ += '\n';
}

std::string PtxBuilder::newLabel(std::string_view hint) {
  return "$L_" + std::string(hint) + "_" + std::to_string(labelCount_++);
}

void PtxBuilder::label(const std::string& name) {
  body_ += name + ":\n";
}

void PtxBuilder::pushScope() {
  scopes_.emplace_back();
}

void PtxBuilder::popScope() {
  if (scopes_.size() <= 1) throw std::logic_error("PtxBuilder: popScope without pushScope");
  for (const auto& key : scopes_.back()) pureTable_.erase(key);
  scopes_.pop_back();
}

int PtxBuilder::addFile(const std::string& path) {
  files_.push_back(path);
  return static_cast<int>(files_.size());
}

void PtxBuilder::setLoc(SourceLoc loc) {
  if (lineInfo_ && loc.valid()) pendingLoc_ = loc;
}

void PtxBuilder::flushLoc() {
  if (!pendingLoc_.valid()) return;
  SourceLoc l = pendingLoc_;
  pendingLoc_ = {};
  if (l.file == lastLoc_.file && l.line == lastLoc_.line && l.col == lastLoc_.col) return;
  auto it = fileMap_.find(l.file);
  if (it == fileMap_.end()) return;
  lastLoc_ = l;
  body_ += "\t.loc " + std::to_string(it->second) + " " + std::to_string(l.line) + " " +
           std::to_string(l.col) + "\n";
}

namespace {

/// Opcodes whose only effect is writing their first operand (a register or a brace list).
bool isRemovable(std::string_view opcode) {
  static const char* const prefixes[] = {
      "mov.", "add.", "sub.", "mul.", "mad.", "and.", "or.", "xor.", "not.", "shl.", "shr.", "cvt.",
      "cvta.", "setp.", "selp.", "neg.", "abs.", "min.", "max.", "div.", "rem.", "fma.", "ex2.",
      "lg2.", "sqrt.", "rsqrt.", "rcp.", "sin.", "cos.", "tanh.", "copysign.", "createpolicy.",
      "ld.param.",
      // An unused shuffle synchronizes nothing anyone needs (the kernel's uniform warp index).
      "shfl.sync.idx."};
  for (const char* p : prefixes)
    if (opcode.substr(0, std::string_view(p).size()) == p) return true;
  return false;
}

struct ParsedLine {
  bool instruction = false;
  bool removable = false;
  std::vector<std::string> defs; // registers the instruction writes (removable ones)
  std::vector<std::string> uses; // every other register it mentions (guard included)
};

void collectRegisters(std::string_view text, std::vector<std::string>& out) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') continue;
    size_t j = i + 1;
    while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
    size_t k = j;
    while (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k]))) ++k;
    if (k > j) out.emplace_back(text.substr(i, k - i)); // %tid.x and friends have no digits
    i = k - 1;
  }
}

ParsedLine parseLine(const std::string& line) {
  ParsedLine p;
  std::string_view s(line);
  while (!s.empty() && (s[0] == '\t' || s[0] == ' ')) s.remove_prefix(1);
  if (s.empty() || s[0] == '.' || s.back() != ';') return p; // directives, labels
  p.instruction = true;
  std::string_view guard;
  if (s[0] == '@') {
    size_t sp = s.find(' ');
    guard = s.substr(0, sp);
    s.remove_prefix(sp + 1);
  }
  size_t sp = s.find(' ');
  std::string_view opcode = s.substr(0, sp);
  std::string_view operands = sp == std::string_view::npos ? std::string_view() : s.substr(sp + 1);
  collectRegisters(guard, p.uses);
  p.removable = isRemovable(opcode) && guard.empty();
  if (!p.removable) {
    collectRegisters(operands, p.uses);
    return p;
  }
  // The destination: a register, or a brace list of registers, up to the first top-level comma.
  size_t end = operands[0] == '{' ? operands.find('}') + 1 : operands.find(',');
  if (end == std::string_view::npos) end = operands.size();
  collectRegisters(operands.substr(0, end), p.defs);
  collectRegisters(operands.substr(end), p.uses);
  return p;
}

} // namespace

void PtxBuilder::eliminateDeadInstructions() {
  std::vector<std::string> lines;
  {
    std::istringstream in(body_);
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
  }
  std::vector<ParsedLine> parsed;
  parsed.reserve(lines.size());
  std::unordered_map<std::string, std::vector<size_t>> definers;
  std::vector<std::string> work;
  std::set<std::string> live;
  bool inAsm = false; // between kInlineAsmBegin and kInlineAsmEnd: the user's text, all kept
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view trimmed(lines[i]);
    while (!trimmed.empty() && (trimmed[0] == '\t' || trimmed[0] == ' ')) trimmed.remove_prefix(1);
    if (trimmed == kInlineAsmBegin || trimmed == kInlineAsmEnd) inAsm = trimmed == kInlineAsmBegin;
    if (inAsm) {
      ParsedLine opaque;
      opaque.instruction = true;
      collectRegisters(lines[i], opaque.uses);
      parsed.push_back(std::move(opaque));
    } else {
      parsed.push_back(parseLine(lines[i]));
    }
    const ParsedLine& p = parsed.back();
    if (!p.instruction) continue;
    if (p.removable) {
      for (const auto& d : p.defs) definers[d].push_back(i);
    } else {
      for (const auto& u : p.uses)
        if (live.insert(u).second) work.push_back(u);
    }
  }
  std::vector<bool> keep(lines.size(), false);
  while (!work.empty()) {
    std::string reg = std::move(work.back());
    work.pop_back();
    auto it = definers.find(reg);
    if (it == definers.end()) continue;
    for (size_t i : it->second) {
      if (keep[i]) continue;
      keep[i] = true;
      for (const auto& u : parsed[i].uses)
        if (live.insert(u).second) work.push_back(u);
      for (const auto& d : parsed[i].defs) // all outputs of a multi-output mov stay defined
        if (live.insert(d).second) work.push_back(d);
    }
  }
  std::string out;
  out.reserve(body_.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    if (parsed[i].instruction && parsed[i].removable && !keep[i]) continue;
    out += lines[i];
    out += '\n';
  }
  body_ = std::move(out);
}

std::string PtxBuilder::fileDirectives() const {
  std::string out;
  for (size_t i = 0; i < files_.size(); ++i) {
    std::string escaped;
    for (char ch : files_[i]) {
      if (ch == '"' || ch == '\\') escaped += '\\';
      escaped += ch;
    }
    out += ".file " + std::to_string(i + 1) + " \"" + escaped + "\"\n";
  }
  return out;
}

void PtxBuilder::declare(const std::string& statement) {
  for (const std::string& d : declarations_)
    if (d == statement) return;
  declarations_.push_back(statement);
}

std::string PtxBuilder::escapePrintf(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '%') out += '%';
    out += ch;
  }
  return out;
}

std::string PtxBuilder::stringConstant(const std::string& text) {
  auto [it, fresh] = strings_.try_emplace(text, "__ww_str" + std::to_string(strings_.size()));
  if (fresh) {
    std::string bytes;
    for (unsigned char ch : text) bytes += std::to_string(unsigned(ch)) + ", ";
    declare(".global .align 1 .b8 " + it->second + "[" + std::to_string(text.size() + 1) + "] = {" +
            bytes + "0};");
  }
  std::string symbol = pure("mov.u64", RegClass::B64, {it->second});
  return pure("cvta.global.u64", RegClass::B64, {symbol});
}

namespace {
constexpr const char* kPrintfBuffer = "__ww_printf_args";
} // namespace

void PtxBuilder::printf(const std::string& format, const std::vector<PrintArg>& args,
                        const std::string& guard, bool negateGuard) {
  declare(".extern .func (.param .b32 func_retval0) vprintf (.param .b64 format, .param .b64 "
          "valist);");
  std::string skip;
  if (!guard.empty()) {
    skip = newLabel("print_done");
    inst("bra", {skip}, guard, !negateGuard);
  }
  // The address computations sit after the guard, so they belong to the guarded region.
  pushScope();
  std::string fmt = stringConstant(format);
  std::string valist = "0";
  if (!args.empty()) {
    int64_t offset = 0;
    for (const PrintArg& a : args) {
      if (a.cls != RegClass::B32 && a.cls != RegClass::B64 && a.cls != RegClass::F64)
        throw std::logic_error("printf arguments are 32-bit or 64-bit integers or doubles");
      int64_t size = a.cls == RegClass::B32 ? 4 : 8;
      offset = alignTo(offset, size);
      const char* type = a.cls == RegClass::B32 ? ".b32" : a.cls == RegClass::B64 ? ".b64" : ".f64";
      std::string value = isImmediate(a.value) ? materialize(a.value, a.cls) : a.value;
      inst(std::string("st.local") + type,
           {"[" + std::string(kPrintfBuffer) + "+" + std::to_string(offset) + "]", value});
      offset += size;
    }
    printfBufferBytes_ = std::max(printfBufferBytes_, offset);
    std::string local = pure("mov.u64", RegClass::B64, {kPrintfBuffer});
    valist = pure("cvta.local.u64", RegClass::B64, {local});
  }
  raw("{");
  raw(".param .b64 vprintf_format;");
  inst("st.param.b64", {"[vprintf_format]", fmt});
  raw(".param .b64 vprintf_valist;");
  inst("st.param.b64", {"[vprintf_valist]", valist});
  raw(".param .b32 vprintf_result;");
  inst("call.uni", {"(vprintf_result)", "vprintf", "(vprintf_format, vprintf_valist)"});
  raw("}");
  popScope();
  if (!skip.empty()) label(skip);
}

std::string PtxBuilder::regDeclarations() const {
  std::string out;
  for (const std::string& d : declarations_) out += "\t" + d + "\n";
  if (printfBufferBytes_ > 0)
    out += "\t.local .align 8 .b8 " + std::string(kPrintfBuffer) + "[" +
           std::to_string(printfBufferBytes_) + "];\n";
  for (int c = 0; c < 6; ++c)
    if (regCount_[c] > 0)
      out += "\t.reg " + std::string(regDeclType(static_cast<RegClass>(c))) + " " +
             regPrefix(static_cast<RegClass>(c)) + "<" + std::to_string(regCount_[c]) + ">;\n";
  return out;
}

} // namespace ww::codegen
