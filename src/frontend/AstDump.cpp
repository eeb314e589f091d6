#include "frontend/AstDump.h"

#include <charconv>
#include <stdexcept>

namespace ww::ast {

namespace {

std::string quoteString(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string formatFloat(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  // Keep floats visibly distinct from ints: 1.0, not 1.
  if (s.find_first_of(".eninf") == std::string::npos) s += ".0";
  return s;
}

std::string opt(const ExprPtr& e) {
  return e ? dump(*e) : "_";
}

const char* unaryName(UnaryOpKind k) {
  switch (k) {
  case UnaryOpKind::Neg:
    return "-";
  case UnaryOpKind::Pos:
    return "+";
  case UnaryOpKind::Not:
    return "not";
  case UnaryOpKind::Invert:
    return "~";
  }
  throw std::logic_error("dump: unknown UnaryOpKind");
}

// Statement lines are collected and a block's closing paren is appended to its last line.
class StmtPrinter {
public:
  std::vector<std::string> lines;

  void body(const Body& stmts, int indent) {
    for (const StmtPtr& s : stmts) stmt(*s, indent);
  }

  void stmt(const Stmt& s, int indent) {
    std::string pad(static_cast<size_t>(indent) * 2, ' ');
    switch (s.kind) {
    case StmtKind::FunctionDef: {
      const auto& f = *cast<FunctionDef>(&s);
      std::string head = pad + "(def " + f.name + " (";
      for (size_t i = 0; i < f.params.size(); ++i) {
        const Param& p = f.params[i];
        if (i) head += ' ';
        if (!p.annotation && !p.defaultValue) {
          head += p.name;
          continue;
        }
        head += "(" + p.name;
        if (p.annotation) head += " : " + dump(*p.annotation);
        if (p.defaultValue) head += " = " + dump(*p.defaultValue);
        head += ")";
      }
      head += ")";
      lines.push_back(head);
      std::string inner(static_cast<size_t>(indent + 1) * 2, ' ');
      if (!f.decorators.empty()) {
        std::string d = inner + "(decorators";
        for (const ExprPtr& e : f.decorators) {
          d += ' ';
          d += dump(*e);
        }
        lines.push_back(d + ")");
      }
      if (f.returns) lines.push_back(inner + "(returns " + dump(*f.returns) + ")");
      body(f.body, indent + 1);
      lines.back() += ")";
      return;
    }
    case StmtKind::Assign: {
      const auto& a = *cast<Assign>(&s);
      std::string line = pad + "(=";
      for (const ExprPtr& t : a.targets) {
        line += ' ';
        line += dump(*t);
      }
      lines.push_back(line + " " + opt(a.value) + ")");
      return;
    }
    case StmtKind::AugAssign: {
      const auto& a = *cast<AugAssign>(&s);
      lines.push_back(pad + "(" + binOpSymbol(a.op) + "= " + opt(a.target) + " " + opt(a.value) +
                      ")");
      return;
    }
    case StmtKind::AnnAssign: {
      const auto& a = *cast<AnnAssign>(&s);
      std::string line = pad + "(: " + opt(a.target) + " " + opt(a.annotation);
      if (a.value) line += " " + dump(*a.value);
      lines.push_back(line + ")");
      return;
    }
    case StmtKind::ExprStmt:
      lines.push_back(pad + "(expr " + opt(cast<ExprStmt>(&s)->value) + ")");
      return;
    case StmtKind::If: {
      const auto& i = *cast<If>(&s);
      lines.push_back(pad + "(if " + opt(i.test));
      block(i.body, i.orelse, indent);
      return;
    }
    case StmtKind::For: {
      const auto& f = *cast<For>(&s);
      lines.push_back(pad + "(for " + opt(f.target) + " " + opt(f.iter));
      block(f.body, f.orelse, indent);
      return;
    }
    case StmtKind::While: {
      const auto& w = *cast<While>(&s);
      lines.push_back(pad + "(while " + opt(w.test));
      block(w.body, w.orelse, indent);
      return;
    }
    case StmtKind::Break:
      lines.push_back(pad + "(break)");
      return;
    case StmtKind::Continue:
      lines.push_back(pad + "(continue)");
      return;
    case StmtKind::Pass:
      lines.push_back(pad + "(pass)");
      return;
    case StmtKind::Return: {
      const auto& r = *cast<Return>(&s);
      lines.push_back(pad + (r.value ? "(return " + dump(*r.value) + ")" : "(return)"));
      return;
    }
    case StmtKind::Assert: {
      const auto& a = *cast<Assert>(&s);
      std::string line = pad + "(assert " + opt(a.test);
      if (a.msg) line += " " + dump(*a.msg);
      lines.push_back(line + ")");
      return;
    }
    case StmtKind::With: {
      const auto& w = *cast<With>(&s);
      std::string line = pad + "(with";
      for (const WithItem& item : w.items) {
        line += ' ';
        if (item.optionalVar)
          line += "(as " + opt(item.context) + " " + dump(*item.optionalVar) + ")";
        else
          line += opt(item.context);
      }
      lines.push_back(line);
      body(w.body, indent + 1);
      lines.back() += ")";
      return;
    }
    case StmtKind::Import: {
      const auto& imp = *cast<Import>(&s);
      std::string line = pad + "(import";
      for (const ImportAlias& a : imp.names) {
        if (a.name.empty())
          line += " (" + a.module + " as " + a.asName + ")";
        else
          line += " (from " + a.module + " " + a.name + " as " + a.asName + ")";
      }
      lines.push_back(line + ")");
      return;
    }
    }
    throw std::logic_error("dump: unknown StmtKind");
  }

private:
  void block(const Body& b, const Body& orelse, int indent) {
    body(b, indent + 1);
    if (!orelse.empty()) {
      lines.push_back(std::string(static_cast<size_t>(indent) * 2, ' ') + " else");
      body(orelse, indent + 1);
    }
    lines.back() += ")";
  }
};

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    out += lines[i];
  }
  return out;
}

} // namespace

std::string dump(const Expr& e) {
  switch (e.kind) {
  case ExprKind::Name:
    return cast<Name>(&e)->id;
  case ExprKind::Constant: {
    const auto& c = *cast<Constant>(&e);
    switch (c.type) {
    case Constant::Type::None:
      return "None";
    case Constant::Type::Bool:
      return c.boolValue ? "True" : "False";
    case Constant::Type::Int:
      return c.intUnsigned ? std::to_string(static_cast<uint64_t>(c.intValue))
                           : std::to_string(c.intValue);
    case Constant::Type::Float:
      return formatFloat(c.floatValue);
    case Constant::Type::String:
      return quoteString(c.stringValue);
    }
    throw std::logic_error("dump: unknown Constant::Type");
  }
  case ExprKind::BinOp: {
    const auto& b = *cast<BinOp>(&e);
    return std::string("(") + binOpSymbol(b.op) + " " + opt(b.lhs) + " " + opt(b.rhs) + ")";
  }
  case ExprKind::UnaryOp: {
    const auto& u = *cast<UnaryOp>(&e);
    return std::string("(") + unaryName(u.op) + " " + opt(u.operand) + ")";
  }
  case ExprKind::BoolOp: {
    const auto& b = *cast<BoolOp>(&e);
    std::string s = b.op == BoolOpKind::And ? "(and" : "(or";
    for (const ExprPtr& v : b.values) {
      s += ' ';
      s += opt(v);
    }
    return s + ")";
  }
  case ExprKind::Compare: {
    const auto& c = *cast<Compare>(&e);
    std::string s = "(cmp " + opt(c.left);
    for (size_t i = 0; i < c.ops.size(); ++i) {
      s += std::string(" ") + cmpOpSymbol(c.ops[i]);
      s += ' ';
      s += (i < c.comparators.size() ? opt(c.comparators[i]) : std::string("_"));
    }
    return s + ")";
  }
  case ExprKind::IfExp: {
    const auto& i = *cast<IfExp>(&e);
    return "(ifexp " + opt(i.test) + " " + opt(i.body) + " " + opt(i.orelse) + ")";
  }
  case ExprKind::Call: {
    const auto& c = *cast<Call>(&e);
    std::string s = "(call " + opt(c.func);
    for (const ExprPtr& a : c.args) {
      s += ' ';
      s += opt(a);
    }
    for (const Keyword& k : c.keywords) s += " (kw " + k.name + " " + opt(k.value) + ")";
    return s + ")";
  }
  case ExprKind::Attribute: {
    const auto& a = *cast<Attribute>(&e);
    return opt(a.value) + "." + a.attr;
  }
  case ExprKind::Subscript: {
    const auto& s = *cast<Subscript>(&e);
    return "(sub " + opt(s.value) + " " + opt(s.index) + ")";
  }
  case ExprKind::Slice: {
    const auto& s = *cast<Slice>(&e);
    return "(slice " + opt(s.lower) + " " + opt(s.upper) + " " + opt(s.step) + ")";
  }
  case ExprKind::Tuple: {
    std::string s = "(tuple";
    for (const ExprPtr& v : cast<Tuple>(&e)->elts) {
      s += ' ';
      s += opt(v);
    }
    return s + ")";
  }
  case ExprKind::List: {
    std::string s = "(list";
    for (const ExprPtr& v : cast<List>(&e)->elts) {
      s += ' ';
      s += opt(v);
    }
    return s + ")";
  }
  case ExprKind::ListComp: {
    const auto& c = *cast<ListComp>(&e);
    std::string s = "(listcomp " + opt(c.elt);
    for (const Comprehension& g : c.generators) {
      s += g.isAsync ? " (async-for " : " (for ";
      s += opt(g.target) + " " + opt(g.iter);
      for (const ExprPtr& cond : g.ifs) s += " (if " + opt(cond) + ")";
      s += ")";
    }
    return s + ")";
  }
  }
  throw std::logic_error("dump: unknown ExprKind");
}

std::string dump(const Stmt& stmt) {
  StmtPrinter p;
  p.stmt(stmt, 0);
  return join(p.lines);
}

std::string dump(const Module& module) {
  StmtPrinter p;
  p.lines.push_back("(module");
  for (const auto& imp : module.imports) p.stmt(*imp, 1);
  for (const StmtPtr& c : module.constants) p.stmt(*c, 1);
  for (const auto& f : module.functions) p.stmt(*f, 1);
  p.lines.back() += ")";
  return join(p.lines);
}

} // namespace ww::ast
