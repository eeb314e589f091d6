#include "ir/Printer.h"

#include <sstream>
#include <unordered_map>

namespace ww::ir {

namespace {

class Printer {
public:
  Printer(std::ostringstream& os, const PrintOptions& options) : os_(os), options_(options) {}

  void printFunction(const Function& fn) {
    os_ << "kernel @" << fn.name << "(";
    for (size_t i = 0; i < fn.args.size(); ++i) {
      const KernelArg& a = fn.args[i];
      if (i) os_ << ", ";
      if (a.value)
        os_ << ref(a.value) << ": ";
      else
        os_ << "<folded " << a.name << ">: ";
      os_ << a.type.str();
      if (a.divisibility > 1) os_ << " {div=" << a.divisibility << "}";
      if (a.equalsOne) os_ << " {==1}";
    }
    os_ << ") num_warps=" << fn.numWarps;
    if (fn.numCtas > 1) os_ << " num_ctas=" << fn.numCtas;
    if (fn.clusterDims != std::array<int, 3>{fn.numCtas, 1, 1})
      os_ << " cluster_dims=" << fn.clusterDims[0] << "x" << fn.clusterDims[1] << "x"
          << fn.clusterDims[2];
    // The software pipeliner reads it; 3 (Function's default) is left out.
    if (fn.numStages != Function{}.numStages) os_ << " num_stages=" << fn.numStages;
    printLoc(fn.loc);
    os_ << " {\n";
    printOps(fn.body, 1);
    os_ << "}\n";
  }

private:
  std::string ref(const Value* v) {
    auto it = ids_.find(v);
    if (it == ids_.end()) it = ids_.emplace(v, next_++).first;
    std::string s(1, '%');
    s += std::to_string(it->second); // not "%" + ...: GCC 12 warns falsely (-Wrestrict)
    if (!v->name.empty()) s += "_" + v->name;
    return s;
  }

  void printLoc(SourceLoc loc) {
    const SourceManager* sm = options_.locations;
    if (!sm) return;
    // Every op says where it is, so that the parser gives none a location of its own.
    if (!loc.valid() || loc.file >= sm->numFiles()) {
      os_ << " loc(unknown)";
      return;
    }
    os_ << " loc(" << quoteString(sm->path(loc.file)) << ":" << loc.line << ":" << loc.col << ")";
  }

  void indent(int depth) {
    for (int i = 0; i < depth; ++i) os_ << "  ";
  }

  static void printAttr(std::ostringstream& os, const Attr& a) {
    if (auto* i = std::get_if<int64_t>(&a))
      os << *i;
    else if (auto* d = std::get_if<double>(&a)) {
      std::ostringstream tmp;
      tmp.precision(17);
      tmp << *d;
      std::string s = tmp.str();
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0"; // keep floats visibly float
      os << s;
    } else if (auto* s = std::get_if<std::string>(&a))
      os << quoteString(*s);
    else if (auto* v = std::get_if<std::vector<int64_t>>(&a)) {
      os << '[';
      for (size_t i = 0; i < v->size(); ++i) os << (i ? ", " : "") << (*v)[i];
      os << ']';
    }
  }

  void printOps(const Block& block, int depth) {
    for (const auto& op : block.ops()) printOp(*op, depth);
  }

  void printOp(const Op& op, int depth) {
    indent(depth);
    for (unsigned i = 0; i < op.numResults(); ++i) os_ << (i ? ", " : "") << ref(op.result(i));
    if (op.numResults()) os_ << " = ";
    os_ << op.name();
    for (unsigned i = 0; i < op.numOperands(); ++i) os_ << (i ? ", " : " ") << ref(op.operand(i));
    if (!op.attrs().empty()) {
      os_ << " {";
      for (size_t i = 0; i < op.attrs().size(); ++i) {
        os_ << (i ? ", " : "") << op.attrs()[i].name << " = ";
        printAttr(os_, op.attrs()[i].value);
      }
      os_ << "}";
    }
    if (op.numResults()) {
      os_ << " : ";
      for (unsigned i = 0; i < op.numResults(); ++i)
        os_ << (i ? ", " : "") << op.result(i)->type().str();
    }
    for (unsigned r = 0; r < op.numRegions(); ++r) {
      const Block& b = *op.region(r);
      os_ << (r ? " " : "") << (r ? "{" : " {");
      if (b.numArgs()) {
        os_ << " ^(";
        for (unsigned i = 0; i < b.numArgs(); ++i)
          os_ << (i ? ", " : "") << ref(b.arg(i)) << ": " << b.arg(i)->type().str();
        os_ << ")";
      }
      os_ << "\n";
      printOps(b, depth + 1);
      indent(depth);
      os_ << "}";
    }
    printLoc(op.loc());
    os_ << "\n";
  }

  std::ostringstream& os_;
  const PrintOptions& options_;
  std::unordered_map<const Value*, int> ids_;
  int next_ = 0;
};

} // namespace

std::string quoteString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c; // UTF-8 bytes pass through
    }
  }
  return out + "\"";
}

std::string print(const Function& fn, const PrintOptions& options) {
  std::ostringstream os;
  Printer(os, options).printFunction(fn);
  return os.str();
}

std::string print(const Module& module, const PrintOptions& options) {
  std::ostringstream os;
  for (const auto& fn : module.functions) Printer(os, options).printFunction(*fn);
  return os.str();
}

} // namespace ww::ir
