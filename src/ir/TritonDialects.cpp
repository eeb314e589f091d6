#include "ir/TritonDialects.h"

#include "ir/OpAttrs.h"
#include "ir/Printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace ww::ir {

namespace {

std::string elemName(DType t) {
  switch (t) {
  case DType::I1:
    return "i1";
  case DType::I8:
  case DType::U8:
    return "i8";
  case DType::I16:
  case DType::U16:
    return "i16";
  case DType::I32:
  case DType::U32:
    return "i32";
  case DType::I64:
  case DType::U64:
    return "i64";
  case DType::F8E4M3:
    return "f8E4M3FN";
  case DType::F8E5M2:
    return "f8E5M2";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F8E4B15:
    return "f8E4M3B11FNUZ";
  case DType::F8E4B8:
    return "f8E4M3FNUZ";
  case DType::F8E5B16:
    return "f8E5M2FNUZ";
  }
  return "?";
}

/// A shape as MLIR types lead with it: "2x4x" (empty for a scalar).
std::string dims(const std::vector<int64_t>& shape) {
  return shape.empty() ? std::string() : shapeDims(shape) + "x";
}

std::string intList(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

/// MLIR's float spelling: 6 fractional digits in exponent form when that reads back exactly
/// (1.000000e+00), else enough digits to.
std::string floatText(double v, DType t) {
  if (std::isnan(v)) return "0x7FC00000";
  if (std::isinf(v)) return v > 0 ? "0x7F800000" : "0xFF800000";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6e", v);
  double back = std::strtod(buf, nullptr);
  bool exact = t == DType::F64 ? back == v : static_cast<float>(back) == static_cast<float>(v);
  if (!exact) std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// The op that allocated a buffer or barrier value, through its views.
const Op* rootAlloc(const Value* v) {
  while (v && v->def()) {
    const Op* d = v->def();
    if (d->code() == OpCode::LocalAlloc || d->code() == OpCode::AllocBarriers) return d;
    if (d->numOperands() == 0) return nullptr;
    v = d->operand(0);
  }
  return nullptr;
}

/// The shared encoding a TLX layout object gave the allocation, in Triton's attribute syntax;
/// empty when the compiler chooses it later.
std::string sharedEncoding(const Op* alloc) {
  if (!alloc || alloc->code() != OpCode::LocalAlloc) return {};
  namespace A = attr::LocalAlloc;
  if (A::sharedVec(*alloc) > 0)
    return "#ttg.swizzled_shared<{vec = " + std::to_string(A::sharedVec(*alloc)) +
           ", perPhase = " + std::to_string(A::sharedPerPhase(*alloc)) +
           ", maxPhase = " + std::to_string(A::sharedMaxPhase(*alloc)) + ", order = [" +
           intList(A::sharedOrder(*alloc)) + "]}>";
  std::vector<int64_t> intervals = A::padIntervals(*alloc);
  if (!intervals.empty()) {
    std::vector<int64_t> amounts = A::padAmounts(*alloc);
    std::string s = "#ttg.padded_shared<[";
    for (size_t i = 0; i < intervals.size(); ++i)
      s += (i ? ", " : "") + std::to_string(intervals[i]) + ":+" +
           std::to_string(i < amounts.size() ? amounts[i] : 0);
    return s + "]>";
  }
  return {};
}

/// `t` in Triton's spelling. `v`, when given, is the value of that type (a buffer's allocation
/// decides its shape and TLX encoding); `tensorEnc` / `sharedEnc` are layout assignment's.
std::string typeText(const Type& t, const Value* v = nullptr, const std::string& tensorEnc = {},
                     const std::string& sharedEnc = {}) {
  switch (t.kind) {
  case TypeKind::None:
    return "()";
  case TypeKind::Token:
    return "!ttg.async.token";
  case TypeKind::Descriptor:
    return "!tt.tensordesc<tensor<" + dims(t.shape) + elemName(t.elem) + ">>";
  case TypeKind::Barrier:
  case TypeKind::Buffer: {
    const Op* alloc = v ? rootAlloc(v) : nullptr;
    bool allocation = v && v->def() && v->def() == alloc;
    std::vector<int64_t> shape = t.shape;
    if (allocation || t.count > 1) shape.insert(shape.begin(), t.count);
    std::string s = "!ttg.memdesc<" + dims(shape) +
                    (t.kind == TypeKind::Barrier ? std::string("i64") : elemName(t.elem));
    std::string enc = sharedEncoding(alloc);
    if (enc.empty()) enc = sharedEnc;
    // Block scales in tensor memory: TLX resolves their layout to Triton's scales encoding.
    if (t.space == MemorySpace::Tmem && isTmemScaleTile(t))
      enc = "#ttng.tensor_memory_scales_encoding<>";
    if (!enc.empty()) s += ", " + enc;
    s += t.space == MemorySpace::Tmem ? ", #ttng.tensor_memory" : ", #smem";
    return s + ", mutable>";
  }
  case TypeKind::Value: {
    std::string e = t.pointer ? "!tt.ptr<" + elemName(t.elem) + ">" : elemName(t.elem);
    if (t.shape.empty()) return e;
    return "tensor<" + dims(t.shape) + e + (tensorEnc.empty() ? "" : ", " + tensorEnc) + ">";
  }
  }
  return "?";
}

bool isFloatValue(const Value* v) {
  return v->type().isValue() && !v->type().pointer && isFloat(v->type().elem);
}

bool isUnsignedValue(const Value* v) {
  return v->type().isValue() && !isFloat(v->type().elem) && !isSigned(v->type().elem);
}

bool inTmem(const Value* v) {
  return v->type().kind == TypeKind::Buffer && v->type().space == MemorySpace::Tmem;
}

/// "%N". Built by appending: GCC 12 warns falsely (-Wrestrict) on "%" + std::to_string(N).
std::string percent(int64_t n) {
  std::string s(1, '%');
  s += std::to_string(n);
  return s;
}

class TritonPrinter {
public:
  TritonPrinter(std::ostringstream& os, std::string target, const TritonEncodings* encodings)
      : out_(os), target_(std::move(target)), enc_(encodings) {}

  void printFunction(const Function& fn) {
    printModule(fn);
    // The layouts' aliases come first, as MLIR prints them.
    for (const auto& [name, text] : aliases_) out_ << name << " = " << text << "\n";
    if (enc_) out_ << "#smem = #ttg.shared_memory\n";
    out_ << os_.str();
  }

private:
  void printModule(const Function& fn) {
    os_ << "module attributes {\"ttg.cluster-dim-x\" = " << fn.clusterDims[0]
        << " : i32, \"ttg.cluster-dim-y\" = " << fn.clusterDims[1]
        << " : i32, \"ttg.cluster-dim-z\" = " << fn.clusterDims[2]
        << " : i32, \"ttg.num-ctas\" = 1 : i32, \"ttg.num-warps\" = " << fn.numWarps
        << " : i32, ttg.target = \"" << target_ << "\", \"ttg.threads-per-warp\" = 32 : i32} {\n";
    indent(1);
    os_ << "tt.func public @" << fn.name << "(";
    bool first = true;
    for (const KernelArg& a : fn.args) {
      if (!a.value) continue; // specialized away
      os_ << (first ? "" : ", ") << defineArg(a.value) << ": " << typeOf(a.value);
      if (a.divisibility > 1) os_ << " {tt.divisibility = " << a.divisibility << " : i32}";
      first = false;
    }
    os_ << ") attributes {noinline = false} {\n";
    printBlock(fn.body, 2);
    indent(1);
    os_ << "}\n}\n";
  }

  // ---- types with layout assignment's encodings, register layouts as #linearN aliases ----
  std::string alias(const std::string& encoding) {
    if (encoding.empty()) return {};
    auto it = aliasOf_.find(encoding);
    if (it != aliasOf_.end()) return it->second;
    std::string name =
        "#linear" + (aliases_.empty() ? std::string() : std::to_string(aliases_.size()));
    aliases_.push_back({name, encoding});
    return aliasOf_[encoding] = name;
  }

  std::string typeOf(const Value* v) {
    const Type& t = v->type();
    std::string tensorEnc, sharedEnc;
    if (enc_ && t.isTensor()) {
      auto o = converted_.find(v);
      tensorEnc = alias(o != converted_.end() ? o->second : enc_->tensorEncoding(v));
    } else if (enc_ && t.kind == TypeKind::Buffer) {
      sharedEnc = enc_->sharedEncoding(v);
    }
    return typeText(t, v, tensorEnc, sharedEnc);
  }

  // ---- MLIR value names: %argN, %cN_iW / %cst / %true, %N (multi-result: %N#i) ----
  std::string defineArg(const Value* v) { return names_[v] = "%arg" + std::to_string(nextArg_++); }

  std::string unique(const std::string& base) {
    int& n = uses_[base];
    std::string s = n == 0 ? base : base + "_" + std::to_string(n - 1);
    ++n;
    return s;
  }

  std::string defineResults(const Op& op) {
    if (op.numResults() == 0) return {};
    if (op.code() == OpCode::Constant) {
      const Value* r = op.result();
      std::string base;
      if (r->type().isScalar() && r->type().elem == DType::I1)
        base = op.intAttr("value") ? "%true" : "%false";
      else if (r->type().isScalar() && !isFloat(r->type().elem))
        base = "%c" + std::to_string(op.intAttr("value")) + "_" + elemName(r->type().elem);
      else
        base = "%cst";
      names_[r] = unique(base);
      return names_[r] + " = ";
    }
    int n = nextNum_++;
    if (op.numResults() == 1) {
      names_[op.result()] = percent(n);
      return names_[op.result()] + " = ";
    }
    for (unsigned i = 0; i < op.numResults(); ++i)
      names_[op.result(i)] = percent(n) + "#" + std::to_string(i);
    return percent(n) + ":" + std::to_string(op.numResults()) + " = ";
  }

  std::string ref(const Value* v) {
    auto it = names_.find(v);
    return it == names_.end() ? std::string("%<undefined>") : it->second;
  }

  std::string refs(const Op& op, unsigned from = 0, unsigned to = ~0u) {
    std::string s;
    for (unsigned i = from; i < std::min(to, op.numOperands()); ++i)
      s += (i > from ? ", " : "") + ref(op.operand(i));
    return s;
  }

  std::string operandTypes(const Op& op) {
    std::string s;
    for (unsigned i = 0; i < op.numOperands(); ++i) s += (i ? ", " : "") + typeOf(op.operand(i));
    return s;
  }

  std::string resultTypes(const Op& op) {
    std::string s;
    for (unsigned i = 0; i < op.numResults(); ++i) s += (i ? ", " : "") + typeOf(op.result(i));
    return s;
  }

  void indent(int depth) {
    for (int i = 0; i < depth; ++i) os_ << "  ";
  }

  void printBlock(const Block& block, int depth) {
    for (const auto& op : block.ops()) printOp(*op, depth);
  }

  /// Our attributes in MLIR's syntax, for the ops printed generically.
  static std::string attrDict(const Op& op, std::vector<std::string> extra = {},
                              const std::set<std::string>& skip = {}) {
    for (const NamedAttr& a : op.attrs()) {
      if (skip.count(a.name)) continue;
      std::ostringstream v;
      if (auto* i = std::get_if<int64_t>(&a.value))
        v << *i << " : i32";
      else if (auto* d = std::get_if<double>(&a.value))
        v << floatText(*d, DType::F32) << " : f32";
      else if (auto* s = std::get_if<std::string>(&a.value))
        v << quoteString(*s);
      else if (auto* l = std::get_if<std::vector<int64_t>>(&a.value))
        v << "array<i32: " << intList(*l) << ">";
      extra.push_back(a.name + " = " + v.str());
    }
    if (extra.empty()) return {};
    std::string s = " {";
    for (size_t i = 0; i < extra.size(); ++i) s += (i ? ", " : "") + extra[i];
    return s + "}";
  }

  /// `name operands {attrs} : types`, the shape most ops print in.
  void generic(const Op& op, const std::string& name, int depth, const std::string& attrs) {
    indent(depth);
    os_ << defineResults(op) << name;
    if (op.numOperands()) os_ << " " << refs(op);
    os_ << attrs;
    if (op.numOperands() || op.numResults()) {
      os_ << " : ";
      if (op.numOperands() && op.numResults())
        os_ << "(" << operandTypes(op) << ") -> " << resultTypes(op);
      else
        os_ << (op.numResults() ? resultTypes(op) : operandTypes(op));
    }
    os_ << "\n";
  }

  void line(int depth, const std::string& text) {
    indent(depth);
    os_ << text << "\n";
  }

  static const char* cmpPredicate(const std::string& pred, bool isFloatCmp, bool isUnsigned) {
    if (isFloatCmp) {
      if (pred == "eq") return "oeq";
      if (pred == "ne") return "une";
      if (pred == "lt") return "olt";
      if (pred == "le") return "ole";
      if (pred == "gt") return "ogt";
      return "oge";
    }
    if (pred == "eq") return "eq";
    if (pred == "ne") return "ne";
    if (pred == "lt") return isUnsigned ? "ult" : "slt";
    if (pred == "le") return isUnsigned ? "ule" : "sle";
    if (pred == "gt") return isUnsigned ? "ugt" : "sgt";
    return isUnsigned ? "uge" : "sge";
  }

  /// arith / math names of the elementwise ops, by element type; null for the others.
  static const char* arithName(const Op& op) {
    if (op.numOperands() == 0 || op.numResults() != 1) return nullptr;
    bool f = isFloatValue(op.operand(0));
    bool u = isUnsignedValue(op.operand(0));
    switch (op.code()) {
    case OpCode::Add:
      return f ? "arith.addf" : "arith.addi";
    case OpCode::Sub:
      return f ? "arith.subf" : "arith.subi";
    case OpCode::Mul:
      return f ? "arith.mulf" : "arith.muli";
    case OpCode::Div:
      return f ? "arith.divf" : u ? "arith.divui" : "arith.divsi";
    case OpCode::Rem:
      return f ? "arith.remf" : u ? "arith.remui" : "arith.remsi";
    case OpCode::FloorDiv:
      return f ? "ww.floordiv" : "arith.floordivsi";
    case OpCode::And:
      return "arith.andi";
    case OpCode::Or:
      return "arith.ori";
    case OpCode::Xor:
      return "arith.xori";
    case OpCode::Shl:
      return "arith.shli";
    case OpCode::Shr:
      return u ? "arith.shrui" : "arith.shrsi";
    case OpCode::Max:
      return f   ? (propagatesNan(op) ? "arith.maximumf" : "arith.maxnumf")
             : u ? "arith.maxui"
                 : "arith.maxsi";
    case OpCode::Min:
      return f   ? (propagatesNan(op) ? "arith.minimumf" : "arith.minnumf")
             : u ? "arith.minui"
                 : "arith.minsi";
    case OpCode::Pow:
      return "math.powf";
    case OpCode::Neg:
      return f ? "arith.negf" : "ww.neg";
    case OpCode::Not:
      return "ww.not";
    case OpCode::Select:
      return "arith.select";
    case OpCode::Fma:
      return "math.fma";
    case OpCode::Exp:
      return "math.exp";
    case OpCode::Exp2:
      return "math.exp2";
    case OpCode::Log:
      return "math.log";
    case OpCode::Log2:
      return "math.log2";
    case OpCode::Sqrt:
      return "math.sqrt";
    case OpCode::Rsqrt:
      return "math.rsqrt";
    case OpCode::Abs:
      return f ? "math.absf" : "math.absi";
    case OpCode::Sin:
      return "math.sin";
    case OpCode::Cos:
      return "math.cos";
    case OpCode::Tanh:
      return "math.tanh";
    case OpCode::Erf:
      return "math.erf";
    case OpCode::Floor:
      return "math.floor";
    case OpCode::Ceil:
      return "math.ceil";
    case OpCode::Umulhi:
      return "tt.mulhiui";
    default:
      return nullptr;
    }
  }

  static std::string castName(const Value* from, const Value* to) {
    DType a = from->type().elem, b = to->type().elem;
    if (isFloat(a) && isFloat(b)) {
      if (isFp8(a) || isFp8(b)) return "tt.fp_to_fp";
      return bitWidth(b) > bitWidth(a) ? "arith.extf" : "arith.truncf";
    }
    if (isFloat(a)) return isSigned(b) ? "arith.fptosi" : "arith.fptoui";
    if (isFloat(b)) return isSigned(a) && a != DType::I1 ? "arith.sitofp" : "arith.uitofp";
    if (bitWidth(b) > bitWidth(a))
      return isSigned(a) && a != DType::I1 ? "arith.extsi" : "arith.extui";
    return "arith.trunci";
  }

  /// Region ops: scf.for / scf.if / scf.while, tt.reduce / tt.scan with a combine region.
  void printRegionOp(const Op& op, int depth) {
    indent(depth);
    std::string results = defineResults(op);
    switch (op.code()) {
    case OpCode::For: {
      const Block& body = *op.region(0);
      os_ << results << "scf.for " << defineArg(body.arg(0)) << " = " << ref(op.operand(0))
          << " to " << ref(op.operand(1)) << " step " << ref(op.operand(2));
      if (op.numOperands() > 3) {
        os_ << " iter_args(";
        for (unsigned i = 3; i < op.numOperands(); ++i)
          os_ << (i > 3 ? ", " : "") << defineArg(body.arg(i - 2)) << " = " << ref(op.operand(i));
        os_ << ") -> (" << resultTypes(op) << ")";
      }
      os_ << " : " << typeOf(op.operand(0)) << " {\n";
      printBlock(body, depth + 1);
      indent(depth);
      os_ << "}" << attrDict(op) << "\n";
      return;
    }
    case OpCode::If: {
      os_ << results << "scf.if " << ref(op.operand(0));
      if (op.numResults()) os_ << " -> (" << resultTypes(op) << ")";
      os_ << " {\n";
      printBlock(*op.region(0), depth + 1);
      const Block& otherwise = *op.region(1);
      if (!otherwise.ops().empty() && (op.numResults() || otherwise.ops().size() > 1)) {
        indent(depth);
        os_ << "} else {\n";
        printBlock(otherwise, depth + 1);
      }
      indent(depth);
      os_ << "}\n";
      return;
    }
    case OpCode::While: {
      const Block& before = *op.region(0);
      os_ << results << "scf.while (";
      for (unsigned i = 0; i < op.numOperands(); ++i)
        os_ << (i ? ", " : "") << defineArg(before.arg(i)) << " = " << ref(op.operand(i));
      os_ << ") : (" << operandTypes(op) << ") -> (" << resultTypes(op) << ") {\n";
      printBlock(before, depth + 1);
      indent(depth);
      os_ << "} do {\n";
      printBlockWithArgs(*op.region(1), depth);
      indent(depth);
      os_ << "}\n";
      return;
    }
    default: { // reduce, scan, map_elementwise: a combine region
      // MLIR's generic form, as Triton prints these.
      const char* name = op.code() == OpCode::Reduce ? "\"tt.reduce\""
                         : op.code() == OpCode::Scan ? "\"tt.scan\""
                                                     : "\"tt.map_elementwise\"";
      os_ << results << name << "(" << refs(op) << ")" << attrDict(op) << " (";
      for (unsigned r = 0; r < op.numRegions(); ++r) {
        os_ << "{\n";
        printBlockWithArgs(*op.region(r), depth);
        indent(depth);
        os_ << "}";
      }
      os_ << ") : (" << operandTypes(op) << ") -> (" << resultTypes(op) << ")\n";
      return;
    }
    }
  }

  void printBlockWithArgs(const Block& b, int depth) {
    if (b.numArgs()) {
      indent(depth);
      os_ << "^bb0(";
      for (unsigned i = 0; i < b.numArgs(); ++i)
        os_ << (i ? ", " : "") << defineArg(b.arg(i)) << ": " << typeOf(b.arg(i));
      os_ << "):\n";
    }
    printBlock(b, depth + 1);
  }

  /// Values a task uses that are defined outside the async_tasks op: a partition's captures.
  static void collectCaptures(const Op& tasks, const Block& b, std::vector<const Value*>& out,
                              std::set<const Value*>& seen) {
    walk(b, [&](const Op& op) {
      for (const Value* v : op.operands())
        if (!definedInside(v, tasks) && seen.insert(v).second) out.push_back(v);
    });
  }

  /// async_tasks as ttg.warp_specialize: the default task's region first, then one partition per
  /// other task (replicas included), each taking the captured values as arguments. A lone
  /// default task is inlined, as Triton does.
  void printTasks(const Op& tasks, int depth) {
    const Block& body = *tasks.region(0);
    std::vector<const Op*> all;
    for (const auto& t : body.ops())
      if (t->code() == OpCode::AsyncTask) all.push_back(t.get());
    const Op* dflt = nullptr;
    std::vector<const Op*> partitions;
    for (const Op* t : all) {
      if (!dflt && attr::AsyncTask::isDefault(*t) && attr::AsyncTask::replica(*t) == 0)
        dflt = t;
      else
        partitions.push_back(t);
    }
    if (partitions.empty()) {
      if (dflt) printBlock(*dflt->region(0), depth);
      return;
    }
    std::vector<const Value*> captures;
    std::set<const Value*> seen;
    for (const Op* t : partitions) collectCaptures(tasks, *t->region(0), captures, seen);

    std::vector<std::string> attrs;
    if (dflt && attr::AsyncTask::numRegs(*dflt) > 0)
      attrs.push_back("defaultRequestedRegisters = " +
                      std::to_string(attr::AsyncTask::numRegs(*dflt)) + " : i32");
    bool anyRegs = false, anyStart = false;
    std::vector<int64_t> regs, starts;
    for (const Op* t : partitions) {
      regs.push_back(attr::AsyncTask::numRegs(*t));
      anyRegs |= regs.back() > 0;
      int64_t start = attr::AsyncTask::warpGroupStartId(*t);
      anyStart |= start >= 0;
      // Replicas lie one after another from the task's first warp.
      starts.push_back(
          start < 0 ? start : start + attr::AsyncTask::replica(*t) * attr::AsyncTask::numWarps(*t));
    }
    if (anyRegs) attrs.push_back("requestedRegisters = array<i32: " + intList(regs) + ">");
    if (anyStart) attrs.push_back("warpGroupStartIds = array<i32: " + intList(starts) + ">");

    indent(depth);
    os_ << "ttg.warp_specialize(";
    for (size_t i = 0; i < captures.size(); ++i) os_ << (i ? ", " : "") << ref(captures[i]);
    os_ << ")";
    if (!attrs.empty()) {
      os_ << " attributes {";
      for (size_t i = 0; i < attrs.size(); ++i) os_ << (i ? ", " : "") << attrs[i];
      os_ << "}";
    }
    os_ << "\n";
    indent(depth);
    os_ << "default {\n";
    if (dflt) printBlock(*dflt->region(0), depth + 1);
    line(depth + 1, "ttg.warp_yield");
    indent(depth);
    os_ << "}\n";
    std::string captureTypes;
    for (size_t i = 0; i < captures.size(); ++i)
      captureTypes += (i ? ", " : "") + typeOf(captures[i]);
    for (size_t p = 0; p < partitions.size(); ++p) {
      // Inside a partition the captures are its arguments; outside they keep their names.
      std::vector<std::string> outer;
      indent(depth);
      os_ << "partition" << p << "(";
      for (size_t i = 0; i < captures.size(); ++i) {
        outer.push_back(ref(captures[i]));
        std::string arg = "%arg" + std::to_string(nextArg_++);
        names_[captures[i]] = arg;
        os_ << (i ? ", " : "") << arg << ": " << typeOf(captures[i]);
      }
      os_ << ") num_warps(" << attr::AsyncTask::numWarps(*partitions[p]) << ") {\n";
      printBlock(*partitions[p]->region(0), depth + 1);
      line(depth + 1, "ttg.warp_return");
      indent(depth);
      os_ << "}";
      os_ << (p + 1 == partitions.size() ? " : (" + captureTypes + ") -> ()" : "") << "\n";
      for (size_t i = 0; i < captures.size(); ++i) names_[captures[i]] = outer[i];
    }
  }

  /// The op, after the layout conversions code generation makes for its operands.
  void printOp(const Op& op, int depth) {
    std::vector<std::pair<const Value*, std::string>> renamed;
    if (enc_)
      for (unsigned i = 0; i < op.numOperands(); ++i) {
        const Value* v = op.operand(i);
        std::string to = v->type().isTensor() ? enc_->convertedOperand(op, i) : std::string();
        if (to.empty() || converted_.count(v)) continue;
        std::string name = percent(nextNum_++);
        std::string from = typeOf(v);
        converted_[v] = to;
        line(depth, name + " = ttg.convert_layout " + ref(v) + " : " + from + " -> " + typeOf(v));
        renamed.push_back({v, names_[v]});
        names_[v] = name;
      }
    printOpItself(op, depth);
    for (const auto& [v, name] : renamed) {
      names_[v] = name;
      converted_.erase(v);
    }
  }

  void printOpItself(const Op& op, int depth) {
    if (const char* name = arithName(op)) {
      indent(depth);
      os_ << defineResults(op) << name << " " << refs(op) << " : " << resultTypes(op) << "\n";
      return;
    }
    switch (op.code()) {
    case OpCode::Constant: {
      indent(depth);
      const Value* r = op.result();
      os_ << defineResults(op) << "arith.constant ";
      const Attr* a = op.attr("value");
      std::string v;
      if (r->type().elem == DType::I1 && r->type().isScalar()) {
        os_ << (op.intAttr("value") ? "true" : "false") << "\n";
        return;
      }
      if (isFloat(r->type().elem))
        v = floatText(std::holds_alternative<double>(*a) ? std::get<double>(*a)
                                                         : static_cast<double>(op.intAttr("value")),
                      r->type().elem);
      else
        v = std::to_string(op.intAttr("value"));
      os_ << (r->type().isTensor() ? "dense<" + v + ">" : v) << " : " << typeOf(r) << "\n";
      return;
    }
    case OpCode::ProgramId:
      line(depth, defineResults(op) + "tt.get_program_id " +
                      std::string(1, "xyz"[attr::ProgramId::axis(op) % 3]) + " : i32");
      return;
    case OpCode::NumPrograms:
      line(depth, defineResults(op) + "tt.get_num_programs " +
                      std::string(1, "xyz"[attr::NumPrograms::axis(op) % 3]) + " : i32");
      return;
    case OpCode::Arange:
      line(depth, defineResults(op) +
                      "tt.make_range {end = " + std::to_string(attr::Arange::end(op)) +
                      " : i32, start = " + std::to_string(attr::Arange::start(op)) +
                      " : i32} : " + resultTypes(op));
      return;
    case OpCode::Splat:
      return convertLike(op, "tt.splat", depth);
    case OpCode::Broadcast:
      return convertLike(op, "tt.broadcast", depth);
    case OpCode::ExpandDims:
      return convertLike(op, "tt.expand_dims", depth);
    case OpCode::Reshape:
      return convertLike(op, "tt.reshape", depth);
    case OpCode::Permute:
      return convertLike(op, "tt.trans", depth);
    case OpCode::Join:
      return convertLike(op, "tt.join", depth);
    case OpCode::Split:
      return convertLike(op, "tt.split", depth);
    case OpCode::Cat:
      return convertLike(op, "tt.cat", depth);
    case OpCode::Cast:
      return convertLike(op, castName(op.operand(0), op.result()), depth);
    case OpCode::Bitcast:
      return convertLike(op, "tt.bitcast", depth);
    case OpCode::PtrToInt:
      return convertLike(op, "tt.ptr_to_int", depth);
    case OpCode::IntToPtr:
      return convertLike(op, "tt.int_to_ptr", depth);
    case OpCode::Cmp: {
      bool f = isFloatValue(op.operand(0));
      line(depth, defineResults(op) + (f ? "arith.cmpf " : "arith.cmpi ") +
                      cmpPredicate(attr::Cmp::pred(op), f, isUnsignedValue(op.operand(0))) + ", " +
                      refs(op) + " : " + typeOf(op.operand(0)));
      return;
    }
    case OpCode::AddPtr:
      line(depth, defineResults(op) + "tt.addptr " + refs(op) + " : " + operandTypes(op));
      return;
    case OpCode::For:
    case OpCode::If:
    case OpCode::While:
    case OpCode::Reduce:
    case OpCode::Scan:
    case OpCode::MapElementwise:
      return printRegionOp(op, depth);
    case OpCode::Yield: {
      const Op* parent = op.parentBlock() ? op.parentBlock()->parentOp() : nullptr;
      bool combine = parent && (parent->code() == OpCode::Reduce || parent->code() == OpCode::Scan);
      std::string name =
          combine ? (parent->code() == OpCode::Reduce ? "tt.reduce.return" : "tt.scan.return")
                  : "scf.yield";
      line(depth, name + (op.numOperands() ? " " + refs(op) + " : " + operandTypes(op) : ""));
      return;
    }
    case OpCode::Condition:
      line(depth, "scf.condition(" + ref(op.operand(0)) + ")" +
                      (op.numOperands() > 1 ? " " + refs(op, 1) : ""));
      return;
    case OpCode::Return:
      return line(depth, "tt.return");
    case OpCode::AsyncTasks:
      return printTasks(op, depth);
    case OpCode::DumpLayout:
    case OpCode::AssertSameLayout:
      return; // compiles to nothing: TLX drops it after printing too
    case OpCode::LocalAlloc:
      if (op.numOperands() == 1) { // reuse=: a view of the columns of the allocation it overlays
        line(depth, defineResults(op) + "ttg.memdesc_reinterpret " + ref(op.operand(0)) + " : " +
                        typeOf(op.operand(0)) + " -> " + resultTypes(op));
        return;
      }
      line(depth, defineResults(op) +
                      (inTmem(op.result()) ? "ttng.tmem_alloc" : "ttg.local_alloc") + " : () -> " +
                      resultTypes(op));
      return;
    case OpCode::AllocBarriers: {
      line(depth, defineResults(op) + "ttg.local_alloc : () -> " + resultTypes(op));
      int64_t arrivals = attr::AllocBarriers::arriveCount(op);
      for (int64_t i = 0; i < op.result()->type().count; ++i)
        line(depth, "ttng.init_barrier " + ref(op.result()) + "[" + std::to_string(i) + "], " +
                        std::to_string(arrivals) + " : " + resultTypes(op));
      return;
    }
    case OpCode::LocalView:
      line(depth, defineResults(op) + "ttg.memdesc_index " + ref(op.operand(0)) + "[" +
                      ref(op.operand(1)) + "] : " + typeOf(op.operand(0)) + " -> " +
                      resultTypes(op));
      return;
    case OpCode::LocalLoad:
      return convertLike(op, inTmem(op.operand(0)) ? "ttng.tmem_load" : "ttg.local_load", depth);
    case OpCode::LocalStore:
      line(depth, std::string(inTmem(op.operand(0)) ? "ttng.tmem_store " : "ttg.local_store ") +
                      ref(op.operand(1)) + ", " + ref(op.operand(0)) + " : " +
                      typeOf(op.operand(1)) + " -> " + typeOf(op.operand(0)));
      return;
    case OpCode::LocalTrans:
      line(depth, defineResults(op) + "ttg.memdesc_trans " + ref(op.operand(0)) +
                      " {order = array<i32: " + intList(attr::LocalTrans::order(op)) +
                      ">} : " + typeOf(op.operand(0)) + " -> " + resultTypes(op));
      return;
    case OpCode::LocalSlice:
      if (inTmem(op.operand(0))) {
        // Triton's tmem_subslice keeps every row and names its first column N.
        std::vector<int64_t> offsets = attr::LocalSlice::offsets(op);
        line(depth, defineResults(op) + "ttng.tmem_subslice " + ref(op.operand(0)) +
                        " {N = " + std::to_string(offsets.size() == 2 ? offsets[1] : 0) +
                        " : i32} : " + operandTypes(op) + " -> " + resultTypes(op));
        return;
      }
      return convertLike(op, "ttg.memdesc_subslice", depth);
    case OpCode::LocalReinterpret:
      return convertLike(op, "ttg.memdesc_reinterpret", depth);
    case OpCode::BarrierExpectBytes:
      line(depth, "ttng.barrier_expect " + refs(op) + " : " + operandTypes(op));
      return;
    case OpCode::BarrierWait:
      line(depth, "ttng.wait_barrier " + refs(op) + " : " + operandTypes(op));
      return;
    case OpCode::BarrierArrive: {
      std::string bar = ref(op.operand(0));
      if (attr::BarrierArrive::hasRemoteCtaRank(op)) {
        // The peer CTA's barrier, as TLX maps it before arriving.
        std::string mapped = percent(nextNum_++);
        line(depth, mapped + " = ttng.map_to_remote_buffer " + bar + ", " + ref(op.operand(1)) +
                        " : " + typeOf(op.operand(0)));
        bar = mapped;
      }
      line(depth, "ttng.arrive_barrier " + bar + ", " +
                      std::to_string(attr::BarrierArrive::arriveCount(op)) + " : " +
                      typeOf(op.operand(0)));
      return;
    }
    case OpCode::NamedBarrierWait:
    case OpCode::NamedBarrierArrive:
      line(depth,
           std::string(op.code() == OpCode::NamedBarrierWait ? "ttng.wait_barrier_named "
                                                             : "ttng.arrive_barrier_named ") +
               refs(op) + " : " + operandTypes(op));
      return;
    case OpCode::Fence: {
      std::string kind = attr::Fence::kind(op);
      if (kind == "gpu" || kind == "sys")
        line(depth, "ttng.fence {scope = \"" + kind + "\"}");
      else if (kind == "mbarrier_init_cluster")
        line(depth, "ttng.fence_mbarrier_init_release_cluster");
      else
        line(depth, "ttng.fence_async_shared {bCluster = false}");
      return;
    }
    case OpCode::ClusterBarrier:
      line(depth, "ttng.cluster_arrive {relaxed = false}");
      line(depth, "ttng.cluster_wait");
      return;
    case OpCode::AsyncDescLoad: {
      // desc[offsets] buffer, barrier[, pred][, multicast ranks]
      unsigned extra = (attr::AsyncDescLoad::hasPred(op) ? 1u : 0u) +
                       static_cast<unsigned>(attr::AsyncDescLoad::multicastOperands(op));
      unsigned offsetsEnd = op.numOperands() - extra;
      std::vector<std::string> named;
      std::string evict = attr::AsyncDescLoad::evict(op);
      if (!evict.empty()) named.push_back("evictionPolicy = " + evict);
      line(depth, "ttng.async_tma_copy_global_to_local " + ref(op.operand(0)) + "[" +
                      refs(op, 3, offsetsEnd) + "] " + ref(op.operand(1)) + ", " +
                      ref(op.operand(2)) + (extra ? ", " + refs(op, offsetsEnd) : "") +
                      attrDict(op, named, {"evict"}) + " : " + operandTypes(op));
      return;
    }
    case OpCode::AsyncDescStore: {
      // desc[offsets] buffer
      std::vector<std::string> named;
      std::string evict = attr::AsyncDescStore::evict(op);
      if (!evict.empty()) named.push_back("evictionPolicy = " + evict);
      std::string reduce = attr::AsyncDescStore::reduce(op);
      line(depth, std::string(reduce.empty() ? "ttng.async_tma_copy_local_to_global "
                                             : "ttng.async_tma_reduce " + reduce + ", ") +
                      ref(op.operand(0)) + "[" + refs(op, 2) + "] " + ref(op.operand(1)) +
                      attrDict(op, named, {"evict", "reduce"}) + " : " + operandTypes(op));
      return;
    }
    case OpCode::AsyncDescStoreWait:
      line(depth, "ttng.async_tma_store_wait {pendings = " +
                      std::to_string(attr::AsyncDescStoreWait::pendings(op)) + " : i32}");
      return;
    case OpCode::AsyncDescPrefetch:
      return generic(op, "ttng.async_tma_prefetch", depth, attrDict(op));
    case OpCode::Prefetch:
      return generic(op, "ttng.prefetch", depth, " {cache = " + attr::Prefetch::level(op) + "}");
    case OpCode::PrefetchTensormap:
      return generic(op, "ttng.tensormap_prefetch", depth, {});
    case OpCode::AsyncLoad: {
      indent(depth);
      os_ << defineResults(op) << "ttg.async_copy_global_to_local " << ref(op.operand(0)) << ", "
          << ref(op.operand(1));
      unsigned next = 2;
      if (attr::AsyncLoad::hasMask(op)) os_ << " mask " << ref(op.operand(next++));
      if (attr::AsyncLoad::hasOther(op)) os_ << " other " << ref(op.operand(next++));
      os_ << " : " << typeOf(op.operand(0)) << " -> " << typeOf(op.operand(1)) << "\n";
      return;
    }
    case OpCode::AsyncBulkLoad:
      line(depth, "ttg.async_copy_global_to_local " + ref(op.operand(0)) + ", " +
                      ref(op.operand(1)) + " bulk_size " + ref(op.operand(3)) + " barrier " +
                      ref(op.operand(2)) + " {useBulk = true} : " + operandTypes(op));
      return;
    case OpCode::AsyncBulkStore:
      return generic(op, "ttng.async_store", depth, {});
    case OpCode::AsyncCommitGroup:
      line(depth, defineResults(op) + "ttg.async_commit_group");
      return;
    case OpCode::AsyncWaitGroup:
      line(depth, "ttg.async_wait {num = " + std::to_string(attr::AsyncWaitGroup::pendings(op)) +
                      " : i32}");
      return;
    case OpCode::AsyncDot:
      return generic(op, "ttng.warp_group_dot", depth, attrDict(op, {"isAsync = true"}));
    case OpCode::AsyncDotWait:
      return generic(op, "ttng.warp_group_dot_wait", depth, attrDict(op));
    case OpCode::Tcgen05Mma: {
      // Triton's operand order: a, b, acc[, scales], use_d, pred, barriers; a use_d or pred the
      // kernel left out is true.
      std::string yes;
      auto value = [&](bool given, unsigned& i) {
        if (given) return ref(op.operand(i++));
        if (yes.empty()) line(depth, (yes = unique("%true")) + " = arith.constant true");
        return yes;
      };
      bool scaled = attr::Tcgen05Mma::hasScales(op);
      unsigned i = scaled ? 5 : 3;
      std::string operands = refs(op, 0, i);
      operands += ", " + value(attr::Tcgen05Mma::hasUseAcc(op), i);
      operands += ", " + value(attr::Tcgen05Mma::hasPred(op), i);
      if (i < op.numOperands()) operands += ", " + refs(op, i);
      line(depth, std::string(scaled ? "ttng.tc_gen5_mma_scaled " : "ttng.tc_gen5_mma ") +
                      operands + attrDict(op) + " : " + operandTypes(op));
      return;
    }
    case OpCode::MakeDescriptor:
      return printMakeDescriptor(op, depth);
    default:
      break;
    }
    generic(op, tritonName(op.code()), depth, attrDict(op));
  }

  /// An in-kernel descriptor: the tensor map written to global scratch, then read back as a
  /// descriptor (what warpweave's code generation does with it; Triton's three ops).
  void printMakeDescriptor(const Op& op, int depth) {
    int64_t storage = attr::MakeDescriptor::slotStorage(op);
    std::string scratch;
    if (storage < 0 || !scratchOf_.count(storage)) {
      scratch = percent(nextNum_++);
      line(depth,
           scratch + " = ttg.global_scratch_alloc {alignment = 128 : i32, nbytes = " +
               std::to_string(128 * std::max<int64_t>(1, attr::MakeDescriptor::slotCount(op))) +
               " : i32} : !tt.ptr<i8>");
      if (storage >= 0) scratchOf_[storage] = scratch;
    } else {
      scratch = scratchOf_[storage];
    }
    line(depth, "ttng.tensormap_create " + scratch + ", " + refs(op) +
                    " {block_shape = array<i32: " + intList(attr::MakeDescriptor::blockShape(op)) +
                    ">} : (" + operandTypes(op) + ") -> ()");
    line(depth, defineResults(op) + "ttng.reinterpret_tensor_descriptor " + scratch +
                    " : !tt.ptr<i8> to " + resultTypes(op));
  }

  void convertLike(const Op& op, const std::string& name, int depth) {
    line(depth, defineResults(op) + name + " " + refs(op) + attrDict(op) + " : " +
                    operandTypes(op) + " -> " + resultTypes(op));
  }

  static std::string tritonName(OpCode c) {
    switch (c) {
    case OpCode::Sigmoid:
      return "ww.sigmoid";
    case OpCode::InlineAsm:
      return "tt.elementwise_inline_asm";
    case OpCode::Load:
      return "tt.load";
    case OpCode::Store:
      return "tt.store";
    case OpCode::AtomicRMW:
      return "tt.atomic_rmw";
    case OpCode::AtomicCas:
      return "tt.atomic_cas";
    case OpCode::DescLoad:
      return "tt.descriptor_load";
    case OpCode::DescStore:
      return "tt.descriptor_store";
    case OpCode::Gather:
      return "tt.gather";
    case OpCode::Histogram:
      return "tt.histogram";
    case OpCode::Dot:
      return "tt.dot";
    case OpCode::DebugBarrier:
      return "gpu.barrier";
    case OpCode::Print:
      return "tt.print";
    case OpCode::Assert:
      return "tt.assert";
    case OpCode::LocalGather:
      return "ttg.local_gather";
    case OpCode::LocalScatter:
      return "ttg.local_scatter";
    case OpCode::AsyncRemoteStore:
      return "ttg.async_remote_shmem_store";
    case OpCode::RemoteStore:
      return "ttg.remote_shmem_store";
    case OpCode::AsyncRemoteCopy:
      return "ttg.async_remote_shmem_copy";
    case OpCode::TmemCopy:
      return "ttng.tmem_copy";
    case OpCode::Tcgen05Commit:
      return "ttng.tc_gen5_commit";
    case OpCode::ClcTryCancel:
      return "ttng.async_clc_try_cancel";
    case OpCode::ClcQuery:
      return "ttng.clc_query_cancel";
    case OpCode::Clock64:
      return "ttg.clock64";
    case OpCode::ClusterCtaRank:
      return "nvg.cluster_id";
    case OpCode::VoteBallot:
      return "ttng.vote_ballot_sync";
    default:
      return std::string("ww.") + opName(c);
    }
  }

  std::ostringstream& out_;
  std::ostringstream os_; // the module, printed before the aliases it uses are known
  std::string target_;    // Triton's spelling: cuda:90
  const TritonEncodings* enc_;
  std::vector<std::pair<std::string, std::string>> aliases_;
  std::unordered_map<std::string, std::string> aliasOf_;
  /// Operands converted for the op being printed: their value and the layout they take.
  std::unordered_map<const Value*, std::string> converted_;
  std::unordered_map<const Value*, std::string> names_;
  std::unordered_map<std::string, int> uses_;
  std::unordered_map<int64_t, std::string> scratchOf_;
  int nextNum_ = 0;
  int nextArg_ = 0;
};

} // namespace

std::string printTritonDialects(const Function& fn, const std::string& target,
                                const TritonEncodings* encodings) {
  std::string digits;
  for (char c : target)
    if (c >= '0' && c <= '9') digits += c;
  std::ostringstream os;
  TritonPrinter(os, "cuda:" + digits, encodings).printFunction(fn);
  return os.str();
}

} // namespace ww::ir
