// Recursive-descent parser for the kernel-language subset of Python (LANGUAGE.md, tier 1).
//
// A kernel file is ordinary Python. Functions decorated with the jit family are kernel code and are
// parsed strictly: any syntax error or construct outside the subset is a CompileError. Every other
// top-level statement is host code: kept when it is an import, a simple constant assignment or a
// function that parses in the subset, and otherwise skipped by indentation without a word.
#include "frontend/Parser.h"

#include "frontend/Lexer.h"

#include <algorithm>
#include <unordered_set>

namespace ww::frontend {

namespace {

using namespace ast;

// Bounds the parser's recursion on adversarial input (the lexer bounds brackets and indentation).
constexpr int kMaxExprDepth = 200;
// Left-associative chains build trees this deep; their destructors recurse.
constexpr int kMaxOperatorChain = 5000;
// Bounds the depth of the expression trees built (binary-operator and postfix chains nest their
// nodes without recursing here): the specializer evaluates them recursively, and 20000 chained
// subscripts overflowed its stack. CPython refuses such trees too (RecursionError).
constexpr int kMaxTreeDepth = 5000;

/// The depth of `e`'s tree, counted no further than `limit + 1` (so the walk itself recurses at
/// most that deep).
int treeDepth(const Expr* e, int limit) {
  if (!e) return 0;
  if (limit < 0) return 1;
  int below = 0;
  auto visit = [&](const Expr* c) { below = std::max(below, treeDepth(c, limit - 1)); };
  switch (e->kind) {
  case ExprKind::Name:
  case ExprKind::Constant:
    break;
  case ExprKind::BinOp:
    visit(cast<BinOp>(e)->lhs.get());
    visit(cast<BinOp>(e)->rhs.get());
    break;
  case ExprKind::UnaryOp:
    visit(cast<UnaryOp>(e)->operand.get());
    break;
  case ExprKind::BoolOp:
    for (const auto& v : cast<BoolOp>(e)->values) visit(v.get());
    break;
  case ExprKind::Compare:
    visit(cast<Compare>(e)->left.get());
    for (const auto& v : cast<Compare>(e)->comparators) visit(v.get());
    break;
  case ExprKind::IfExp:
    visit(cast<IfExp>(e)->test.get());
    visit(cast<IfExp>(e)->body.get());
    visit(cast<IfExp>(e)->orelse.get());
    break;
  case ExprKind::Call:
    visit(cast<Call>(e)->func.get());
    for (const auto& a : cast<Call>(e)->args) visit(a.get());
    for (const auto& k : cast<Call>(e)->keywords) visit(k.value.get());
    break;
  case ExprKind::Attribute:
    visit(cast<Attribute>(e)->value.get());
    break;
  case ExprKind::Subscript:
    visit(cast<Subscript>(e)->value.get());
    visit(cast<Subscript>(e)->index.get());
    break;
  case ExprKind::Slice:
    visit(cast<Slice>(e)->lower.get());
    visit(cast<Slice>(e)->upper.get());
    visit(cast<Slice>(e)->step.get());
    break;
  case ExprKind::Tuple:
    for (const auto& v : cast<Tuple>(e)->elts) visit(v.get());
    break;
  case ExprKind::List:
    for (const auto& v : cast<List>(e)->elts) visit(v.get());
    break;
  case ExprKind::ListComp:
    visit(cast<ListComp>(e)->elt.get());
    for (const auto& g : cast<ListComp>(e)->generators) {
      visit(g.target.get());
      visit(g.iter.get());
      for (const auto& c : g.ifs) visit(c.get());
    }
    break;
  }
  return below + 1;
}

struct AugOp {
  const char* text;
  BinOpKind op;
};
constexpr AugOp kAugOps[] = {
    {"+=", BinOpKind::Add},     {"-=", BinOpKind::Sub},       {"*=", BinOpKind::Mul},
    {"/=", BinOpKind::Div},     {"//=", BinOpKind::FloorDiv}, {"%=", BinOpKind::Mod},
    {"**=", BinOpKind::Pow},    {"@=", BinOpKind::MatMul},    {"<<=", BinOpKind::LShift},
    {">>=", BinOpKind::RShift}, {"&=", BinOpKind::BitAnd},    {"|=", BinOpKind::BitOr},
    {"^=", BinOpKind::BitXor},
};

const char* describeExpr(const Expr& e) {
  switch (e.kind) {
  case ExprKind::Name:
    return "a name";
  case ExprKind::Constant:
    return "a literal";
  case ExprKind::BinOp:
  case ExprKind::UnaryOp:
    return "an operator expression";
  case ExprKind::BoolOp:
    return "a boolean expression";
  case ExprKind::Compare:
    return "a comparison";
  case ExprKind::IfExp:
    return "a conditional expression";
  case ExprKind::Call:
    return "a function call";
  case ExprKind::Attribute:
    return "an attribute";
  case ExprKind::Subscript:
    return "a subscript";
  case ExprKind::Slice:
    return "a slice";
  case ExprKind::Tuple:
    return "a tuple";
  case ExprKind::List:
    return "a list";
  case ExprKind::ListComp:
    return "a list comprehension";
  }
  return "an expression";
}

class Parser {
public:
  Parser(const SourceManager& sm, uint32_t file) : file_(file), toks_(tokenize(sm, file)) {}

  Module parseModule() {
    Module module;
    module.file = file_;
    while (!at(TokenKind::EndOfFile)) {
      size_t start = pos_;
      if (at(TokenKind::Newline)) {
        advance();
        continue;
      }
      if (atOp("@") || atKeyword("def")) {
        parseTopLevelFunction(module, start);
      } else if (atKeyword("import") || atKeyword("from")) {
        parseHostOrSkip(start, [&] { module.imports.push_back(parseImport()); });
      } else if (atKeyword("if") || atKeyword("try") || atKeyword("with")) {
        parseHostOrSkip(start, [&] { collectBlockImports(module); });
      } else if (at(TokenKind::Name)) {
        parseHostOrSkip(start, [&] { parseTopLevelAssignments(module); });
      } else {
        skipStatement();
      }
    }
    return module;
  }

  ExprPtr parseStandaloneExpression() {
    bool indented = at(TokenKind::Indent);
    if (indented) advance();
    ExprPtr e = parseTestList();
    if (at(TokenKind::Newline)) advance();
    if (indented && at(TokenKind::Dedent)) advance();
    if (!at(TokenKind::EndOfFile))
      raiseError(cur().loc, "unexpected " + describeToken(cur()) + " after the expression");
    return e;
  }

private:
  // ------------------------------------------------------------------------------------------
  // Token access
  // ------------------------------------------------------------------------------------------

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t n = 1) const {
    return toks_[pos_ + n < toks_.size() ? pos_ + n : toks_.size() - 1];
  }
  const Token& advance() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool at(TokenKind k) const { return cur().kind == k; }
  bool atOp(std::string_view s) const { return cur().isOp(s); }
  bool atKeyword(std::string_view s) const { return cur().isKeyword(s); }
  bool acceptOp(std::string_view s) {
    if (!atOp(s)) return false;
    advance();
    return true;
  }
  bool acceptKeyword(std::string_view s) {
    if (!atKeyword(s)) return false;
    advance();
    return true;
  }

  /// "expected ':' after 'if' condition", with ", found X" unless X is simply the end of the line.
  [[noreturn]] void errorExpected(const std::string& what, std::vector<Diagnostic> notes = {}) {
    std::string msg = "expected " + what;
    if (!at(TokenKind::Newline)) msg += ", found " + describeToken(cur());
    raiseError(cur().loc, msg, std::move(notes));
  }

  const Token& expectOp(std::string_view op, const std::string& context) {
    if (!atOp(op)) {
      if (op == ":" && atOp("=") && context.find("condition") != std::string::npos)
        raiseError(cur().loc, "expected ':' " + context + ", found '='; use '==' to compare");
      errorExpected("'" + std::string(op) + "' " + context);
    }
    return advance();
  }

  const Token& expectName(const std::string& what) {
    if (!at(TokenKind::Name)) {
      if (at(TokenKind::Keyword))
        raiseError(cur().loc, "expected " + what + ", found keyword '" + cur().text +
                                  "' (keywords cannot be used as names)");
      errorExpected(what);
    }
    return advance();
  }

  void expectEndOfStatement() {
    if (at(TokenKind::Newline)) {
      advance();
      return;
    }
    if (at(TokenKind::EndOfFile)) return;
    raiseError(cur().loc,
               "expected end of line after the statement, found " + describeToken(cur()));
  }

  struct DepthGuard {
    DepthGuard(Parser& p, SourceLoc loc) : parser(p) {
      if (parser.depth_ >= kMaxExprDepth)
        raiseError(loc, "expression is nested too deeply (the limit is 200 levels)");
      ++parser.depth_;
    }
    ~DepthGuard() { --parser.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    Parser& parser;
  };

  /// Binary-operator and postfix chains nest their trees without recursing here, so a whole
  /// expression's depth is checked once it is built (the specializer evaluates it recursively).
  void checkTreeDepth(const Expr& e) {
    if (treeDepth(&e, kMaxTreeDepth) > kMaxTreeDepth)
      raiseError(e.loc, "expression is nested too deeply (more than 5000 levels of operators, "
                        "calls, subscripts and attributes)");
  }

  // ------------------------------------------------------------------------------------------
  // Module level: host code around the kernels
  // ------------------------------------------------------------------------------------------

  /// Runs `parse` on host code; on a CompileError rewinds to `start` and skips the statement.
  template <typename F> void parseHostOrSkip(size_t start, F&& parse) {
    try {
      parse();
    } catch (const CompileError&) {
      pos_ = start;
      depth_ = 0;
      skipStatement();
    }
  }

  /// Skips one top-level statement, with its indented block and any else/elif/except/finally
  /// clauses. Brackets need no tracking: the lexer emits no NEWLINE inside them.
  void skipStatement() {
    int depth = 0;
    // Decorator lines belong to the def or class below them.
    bool inDecorators = atOp("@");
    auto continuesStatement = [&] {
      return atKeyword("else") || atKeyword("elif") || atKeyword("except") ||
             atKeyword("finally") || at(TokenKind::Indent) || inDecorators;
    };
    while (!at(TokenKind::EndOfFile)) {
      const Token& tok = advance();
      TokenKind kind = tok.kind;
      if (depth == 0 && (tok.isKeyword("def") || tok.isKeyword("class"))) inDecorators = false;
      if (kind == TokenKind::Indent) {
        ++depth;
      } else if (kind == TokenKind::Dedent) {
        if (depth > 0) --depth;
        if (depth == 0 && !continuesStatement()) return;
      } else if (kind == TokenKind::Newline && depth == 0 && !continuesStatement()) {
        return;
      }
    }
  }

  /// A top-level `if`/`try`/`with` statement with its clauses: the imports its blocks hold join
  /// the module's imports (which of them ran is Python's to know; the compiler binds each name
  /// to the last one in the file, as running them all would); everything else is skipped.
  /// `if __name__ == "__main__":` is script code and is skipped whole.
  void collectBlockImports(Module& module) {
    const size_t start = pos_;
    do {
      advance(); // if, elif, else, try, except, finally, with
      int brackets = 0;
      while (!(brackets == 0 && atOp(":"))) {
        if (at(TokenKind::Newline) || at(TokenKind::EndOfFile)) errorExpected("':'");
        if (atOp("(") || atOp("[") || atOp("{")) ++brackets;
        if (atOp(")") || atOp("]") || atOp("}")) --brackets;
        if (at(TokenKind::Name) && cur().text == "__name__") {
          pos_ = start;
          skipStatement();
          return;
        }
        advance();
      }
      advance(); // ':'
      collectSuiteImports(module);
    } while (atKeyword("elif") || atKeyword("else") || atKeyword("except") || atKeyword("finally"));
  }

  void collectSuiteImports(Module& module) {
    if (!at(TokenKind::Newline)) { // `try: import x` on one line
      const size_t start = pos_;
      if (atKeyword("import") || atKeyword("from")) {
        try {
          module.imports.push_back(parseImport());
          return;
        } catch (const CompileError&) {
          pos_ = start;
          depth_ = 0;
        }
      }
      while (!at(TokenKind::Newline) && !at(TokenKind::EndOfFile)) advance();
      if (at(TokenKind::Newline)) advance();
      return;
    }
    advance();
    if (!at(TokenKind::Indent)) errorExpected("an indented block");
    advance();
    while (!at(TokenKind::Dedent) && !at(TokenKind::EndOfFile)) {
      const size_t start = pos_;
      if (at(TokenKind::Newline))
        advance();
      else if (atKeyword("import") || atKeyword("from"))
        parseHostOrSkip(start, [&] { module.imports.push_back(parseImport()); });
      else if (atKeyword("if") || atKeyword("try") || atKeyword("with"))
        parseHostOrSkip(start, [&] { collectBlockImports(module); });
      else
        skipStatement();
    }
    if (at(TokenKind::Dedent)) advance();
  }

  void parseTopLevelAssignments(Module& module) {
    Body stmts;
    parseSimpleStatements(stmts);
    for (StmtPtr& s : stmts) {
      bool isConstant = false;
      if (auto* a = dyn_cast<Assign>(s.get())) {
        isConstant = true;
        for (const ExprPtr& t : a->targets) isConstant &= bindsOnlyNames(*t);
      } else if (auto* a = dyn_cast<AnnAssign>(s.get())) {
        isConstant = a->value && isa<Name>(a->target.get());
      }
      if (isConstant) module.constants.push_back(std::move(s));
    }
  }

  static bool bindsOnlyNames(const Expr& target) {
    if (isa<Name>(&target)) return true;
    const std::vector<ExprPtr>* elts = nullptr;
    if (auto* t = dyn_cast<Tuple>(&target)) elts = &t->elts;
    if (auto* l = dyn_cast<List>(&target)) elts = &l->elts;
    if (!elts) return false;
    for (const ExprPtr& e : *elts)
      if (!bindsOnlyNames(*e)) return false;
    return true;
  }

  void parseTopLevelFunction(Module& module, size_t start) {
    std::vector<ExprPtr> decorators;
    std::vector<SourceLoc> decoratorLocs;
    bool anyArgumentsDropped = false;
    while (atOp("@")) {
      decoratorLocs.push_back(advance().loc);
      bool dropped = false;
      decorators.push_back(parseDecorator(dropped));
      anyArgumentsDropped |= dropped;
    }
    bool kernel = false;
    for (const ExprPtr& d : decorators) kernel |= d && isJitDecorator(d.get());
    if (!atKeyword("def")) {
      if (kernel)
        raiseError(cur().loc, "@jit must decorate a function definition ('def name(...):'), "
                              "found " +
                                  describeToken(cur()));
      pos_ = start;
      skipStatement();
      return;
    }
    if (!kernel) {
      if (anyArgumentsDropped) { // a host decorator the AST cannot hold: skip the function too
        pos_ = start;
        skipStatement();
        return;
      }
      parseHostOrSkip(start, [&] {
        auto fn = parseFunctionDef();
        fn->decorators = std::move(decorators);
        module.functions.push_back(std::move(fn));
      });
      return;
    }
    checkKernelDecorators(decorators, decoratorLocs);
    auto fn = parseFunctionDef();
    fn->decorators = std::move(decorators);
    module.functions.push_back(std::move(fn));
  }

  /// A decorator line. Arguments of host-side decorators such as `@ww.autotune(configs=[...])`
  /// are evaluated by Python, and may use dicts, lambdas or comprehensions that the AST cannot
  /// hold: then only the decorator's dotted name is kept and `argumentsDropped` is set. Returns
  /// null when not even the name parses.
  ExprPtr parseDecorator(bool& argumentsDropped) {
    size_t exprStart = pos_;
    argumentsDropped = false;
    try {
      ExprPtr e = parseNamedTest();
      expectEndOfStatement();
      return e;
    } catch (const CompileError&) {
      pos_ = exprStart;
      depth_ = 0;
      argumentsDropped = true;
    }
    ExprPtr name;
    if (at(TokenKind::Name)) {
      name = std::make_unique<Name>(cur().loc, cur().text);
      advance();
      while (atOp(".") && peek().kind == TokenKind::Name) {
        SourceLoc loc = name->loc;
        advance();
        const Token& attr = advance();
        name = std::make_unique<Attribute>(loc, std::move(name), attr.text, attr.loc);
      }
    }
    while (!at(TokenKind::Newline) && !at(TokenKind::EndOfFile)) advance();
    if (at(TokenKind::Newline)) advance();
    return name;
  }

  void checkKernelDecorators(const std::vector<ExprPtr>& decorators,
                             const std::vector<SourceLoc>& locs) {
    for (size_t i = 0; i < decorators.size(); ++i) {
      const Expr* d = decorators[i].get();
      SourceLoc loc = d ? d->loc : locs[i];
      std::string name = d ? decoratorName(d) : std::string();
      if (d && isJitDecorator(d)) {
        if (i + 1 != decorators.size())
          raiseError(loc, "@" + name +
                              " must be the innermost decorator (directly above "
                              "'def'); put @autotune and @heuristics above it");
        continue;
      }
      std::string last =
          name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
      if (last != "autotune" && last != "heuristics")
        raiseError(loc, "decorator " + (name.empty() ? std::string("here") : "@" + name) +
                            " is not supported on a kernel; only @jit, with @autotune and "
                            "@heuristics stacked above it, is accepted");
    }
  }

  std::unique_ptr<Import> parseImport() {
    auto imp = std::make_unique<Import>(cur().loc);
    if (acceptKeyword("import")) {
      do {
        SourceLoc loc = cur().loc;
        std::string module = parseDottedModule();
        std::string asName = module.substr(0, module.find('.'));
        if (acceptKeyword("as")) asName = expectName("a name after 'as'").text;
        imp->names.push_back({loc, module, "", asName});
      } while (acceptOp(","));
      expectEndOfStatement();
      return imp;
    }
    advance(); // from
    std::string module;
    while (atOp(".") || atOp("...")) module += advance().text;
    if (!atKeyword("import")) module += parseDottedModule();
    if (!acceptKeyword("import")) errorExpected("'import' after the module name");
    if (atOp("*"))
      raiseError(cur().loc, "'from ... import *' is not supported; import names explicitly");
    bool parens = acceptOp("(");
    do {
      if (parens && atOp(")")) break;
      const Token& name = expectName("a name to import");
      ImportAlias alias{name.loc, module, name.text, name.text};
      if (acceptKeyword("as")) alias.asName = expectName("a name after 'as'").text;
      imp->names.push_back(std::move(alias));
    } while (acceptOp(","));
    if (parens) expectOp(")", "to close the import list");
    expectEndOfStatement();
    return imp;
  }

  std::string parseDottedModule() {
    std::string module = expectName("a module name").text;
    while (acceptOp(".")) module += "." + expectName("a module name after '.'").text;
    return module;
  }

  // ------------------------------------------------------------------------------------------
  // Functions
  // ------------------------------------------------------------------------------------------

  std::unique_ptr<FunctionDef> parseFunctionDef() {
    const Token& defTok = advance();
    auto fn = std::make_unique<FunctionDef>(defTok.loc);
    fn->name = expectName("a function name after 'def'").text;
    const Token& open = expectOp("(", "after the function name");
    std::unordered_set<std::string> seen;
    bool sawDefault = false;
    while (!atOp(")")) {
      if (atOp("*") || atOp("**")) {
        bool named = peek().kind == TokenKind::Name;
        if (!named && atOp("*"))
          raiseError(cur().loc, "the keyword-only marker '*' is not supported in kernel "
                                "functions; declare plain parameters");
        raiseError(cur().loc, std::string("variadic parameters ('") + cur().text + peek().text +
                                  "') are not supported in kernel functions; "
                                  "list every parameter explicitly");
      }
      if (atOp("/"))
        raiseError(cur().loc, "the positional-only marker '/' is not supported in kernel "
                              "functions; declare plain parameters");
      const Token& nameTok = expectName("a parameter name");
      Param p;
      p.loc = nameTok.loc;
      p.name = nameTok.text;
      if (!seen.insert(p.name).second)
        raiseError(p.loc, "duplicate parameter '" + p.name + "' in function definition");
      if (acceptOp(":")) p.annotation = parseTest();
      if (acceptOp("=")) {
        p.defaultValue = parseTest();
        sawDefault = true;
      } else if (sawDefault) {
        raiseError(p.loc, "parameter '" + p.name +
                              "' without a default follows a parameter "
                              "with a default");
      }
      fn->params.push_back(std::move(p));
      if (acceptOp(",")) continue;
      if (!atOp(")"))
        errorExpected("',' or ')' in the parameter list",
                      {note(open.loc, "the parameter list opens here")});
    }
    advance(); // )
    if (acceptOp("->")) fn->returns = parseTest();
    expectOp(":", "after the function signature");
    parseSuite(fn->body, "function definition", defTok);
    return fn;
  }

  // ------------------------------------------------------------------------------------------
  // Statements
  // ------------------------------------------------------------------------------------------

  /// The body after a ':': an indented block, or simple statements on the same line.
  void parseSuite(Body& out, const char* what, const Token& head) {
    if (!at(TokenKind::Newline)) {
      if (isCompoundKeyword(cur()))
        raiseError(cur().loc, "'" + cur().text +
                                  "' cannot follow ':' on the same line; put it "
                                  "on its own indented line");
      parseSimpleStatements(out);
      return;
    }
    advance();
    if (!at(TokenKind::Indent))
      raiseError(cur().loc, std::string("expected an indented block after ") + what + " on line " +
                                std::to_string(head.loc.line));
    advance();
    while (!at(TokenKind::Dedent) && !at(TokenKind::EndOfFile)) parseStatement(out);
    if (at(TokenKind::Dedent)) advance();
  }

  static bool isCompoundKeyword(const Token& t) {
    if (t.kind != TokenKind::Keyword) return false;
    for (const char* k : {"if", "for", "while", "with", "def", "class", "try"})
      if (t.text == k) return true;
    return false;
  }

  void parseStatement(Body& out) {
    const Token& t = cur();
    if (t.kind == TokenKind::Indent) raiseError(t.loc, "unexpected indent");
    if (t.isOp("@"))
      raiseError(t.loc, "decorators and nested function definitions are not supported in kernel "
                        "code; define a @jit helper at module level and call it");
    if (t.kind == TokenKind::Keyword) {
      if (t.text == "if") return out.push_back(parseIf());
      if (t.text == "for") return out.push_back(parseFor());
      if (t.text == "while") return out.push_back(parseWhile());
      if (t.text == "with") return out.push_back(parseWith());
      if (t.text == "def")
        raiseError(t.loc, "nested function definitions are not supported in kernel code; define "
                          "a @jit helper at module level and call it");
      if (t.text == "class")
        raiseError(t.loc, "class definitions are not supported in kernel code; only the Python "
                          "subset of LANGUAGE.md is accepted inside @jit functions");
      if (t.text == "try")
        raiseError(t.loc, "'try' statements are not supported in kernel code; kernels cannot "
                          "catch exceptions");
      if (t.text == "async")
        raiseError(t.loc, "'async' is not supported in kernel code; use 'with tlx.async_tasks():' "
                          "for concurrent warp groups");
      if (t.text == "else" || t.text == "elif")
        raiseError(t.loc, "'" + t.text +
                              "' without a matching 'if', 'for' or 'while' at the "
                              "same indentation");
      if (t.text == "except" || t.text == "finally")
        raiseError(t.loc, "'" + t.text +
                              "' is not supported in kernel code ('try' is not "
                              "accepted)");
    }
    parseSimpleStatements(out);
  }

  /// small_stmt (';' small_stmt)* [';'] NEWLINE
  void parseSimpleStatements(Body& out) {
    while (true) {
      out.push_back(parseSmallStatement());
      if (!acceptOp(";")) break;
      if (at(TokenKind::Newline) || at(TokenKind::EndOfFile)) break;
    }
    expectEndOfStatement();
  }

  StmtPtr parseSmallStatement() {
    const Token& t = cur();
    SourceLoc loc = t.loc;
    if (t.kind == TokenKind::Keyword) {
      if (t.text == "pass") {
        advance();
        return std::make_unique<Pass>(loc);
      }
      if (t.text == "break") {
        advance();
        return std::make_unique<Break>(loc);
      }
      if (t.text == "continue") {
        advance();
        return std::make_unique<Continue>(loc);
      }
      if (t.text == "return") {
        advance();
        auto r = std::make_unique<Return>(loc);
        if (!atStatementEnd()) r->value = parseTestList();
        return r;
      }
      if (t.text == "assert") {
        advance();
        auto a = std::make_unique<Assert>(loc);
        a->test = parseNamedTest();
        if (acceptOp(",")) a->msg = parseTest();
        return a;
      }
      if (t.text == "import" || t.text == "from")
        raiseError(loc, "import statements are not allowed inside a kernel; import at module "
                        "level");
      if (t.text == "global" || t.text == "nonlocal")
        raiseError(loc, "'" + t.text +
                            "' declarations are not supported in kernel code; read "
                            "module-level constants directly or pass values as parameters");
      if (t.text == "del")
        raiseError(loc, "'del' is not supported in kernel code; names live until the function "
                        "returns");
      if (t.text == "raise")
        raiseError(loc, "'raise' is not supported in kernel code; use tl.static_assert or "
                        "tl.device_assert");
    }
    return parseExpressionStatement();
  }

  bool atStatementEnd() const {
    return at(TokenKind::Newline) || at(TokenKind::EndOfFile) || atOp(";");
  }

  StmtPtr parseExpressionStatement() {
    SourceLoc loc = cur().loc;
    ExprPtr first = parseTestList();
    if (atOp(":")) {
      advance();
      auto ann = std::make_unique<AnnAssign>(loc);
      if (isa<Tuple>(first.get()) || isa<List>(first.get()))
        raiseError(first->loc, "only a single target can be annotated; annotate each name in "
                               "its own assignment");
      checkTarget(*first);
      ann->target = std::move(first);
      ann->annotation = parseTest();
      if (acceptOp("=")) ann->value = parseTestList();
      return ann;
    }
    for (const AugOp& aug : kAugOps) {
      if (!atOp(aug.text)) continue;
      const Token& opTok = advance();
      if (!isa<Name>(first.get()) && !isa<Attribute>(first.get()) && !isa<Subscript>(first.get()))
        raiseError(first->loc, std::string("'") + opTok.text + "' cannot assign to " +
                                   describeExpr(*first) +
                                   "; its target must be a name, an "
                                   "attribute or a subscript");
      return std::make_unique<AugAssign>(loc, std::move(first), aug.op, parseTestList());
    }
    if (!atOp("=")) return std::make_unique<ExprStmt>(loc, std::move(first));
    auto assign = std::make_unique<Assign>(loc);
    assign->targets.push_back(std::move(first));
    while (acceptOp("=")) assign->targets.push_back(parseTestList());
    assign->value = std::move(assign->targets.back());
    assign->targets.pop_back();
    for (const ExprPtr& target : assign->targets) checkTarget(*target);
    return assign;
  }

  void checkTarget(const Expr& target) {
    switch (target.kind) {
    case ExprKind::Name:
    case ExprKind::Attribute:
    case ExprKind::Subscript:
      return;
    case ExprKind::Tuple:
      for (const ExprPtr& e : cast<Tuple>(&target)->elts) checkTarget(*e);
      return;
    case ExprKind::List:
      for (const ExprPtr& e : cast<List>(&target)->elts) checkTarget(*e);
      return;
    default:
      raiseError(target.loc, std::string("cannot assign to ") + describeExpr(target) +
                                 "; assignment targets are names, tuples of names, attributes "
                                 "and subscripts");
    }
  }

  StmtPtr parseIf() {
    const Token& head = advance(); // if / elif
    auto node = std::make_unique<If>(head.loc);
    bool isElif = head.text == "elif";
    node->test = parseNamedTest();
    expectOp(":", isElif ? "after 'elif' condition" : "after 'if' condition");
    parseSuite(node->body, isElif ? "'elif' statement" : "'if' statement", head);
    if (atKeyword("elif")) {
      node->orelse.push_back(parseIf());
    } else if (atKeyword("else")) {
      const Token& elseTok = advance();
      expectOp(":", "after 'else'");
      parseSuite(node->orelse, "'else'", elseTok);
    }
    return node;
  }

  void parseLoopElse(Body& orelse) {
    if (!atKeyword("else")) return;
    const Token& elseTok = advance();
    expectOp(":", "after 'else'");
    parseSuite(orelse, "'else'", elseTok);
  }

  StmtPtr parseFor() {
    const Token& head = advance();
    auto node = std::make_unique<For>(head.loc);
    node->target = parseTargetList();
    if (!acceptKeyword("in")) errorExpected("'in' after the 'for' loop target");
    node->iter = parseTestList();
    expectOp(":", "after 'for' loop header");
    parseSuite(node->body, "'for' statement", head);
    parseLoopElse(node->orelse);
    return node;
  }

  StmtPtr parseWhile() {
    const Token& head = advance();
    auto node = std::make_unique<While>(head.loc);
    node->test = parseNamedTest();
    expectOp(":", "after 'while' condition");
    parseSuite(node->body, "'while' statement", head);
    parseLoopElse(node->orelse);
    return node;
  }

  StmtPtr parseWith() {
    const Token& head = advance();
    auto node = std::make_unique<With>(head.loc);
    // `with (a() as b, c()):` (Python 3.10); anything else in parentheses is one expression.
    bool parenthesized = false;
    if (atOp("(")) {
      size_t save = pos_;
      try {
        advance();
        parseWithItems(*node, true);
        expectOp(")", "to close the 'with' items");
        parenthesized = atOp(":");
      } catch (const CompileError&) {
      }
      if (!parenthesized) {
        pos_ = save;
        depth_ = 0;
        node->items.clear();
      }
    }
    if (!parenthesized) parseWithItems(*node, false);
    expectOp(":", "after 'with' items");
    parseSuite(node->body, "'with' statement", head);
    return node;
  }

  void parseWithItems(With& node, bool parenthesized) {
    do {
      if (parenthesized && atOp(")")) break;
      WithItem item;
      item.context = parseTest();
      if (acceptKeyword("as")) {
        item.optionalVar = parseTarget();
        checkTarget(*item.optionalVar);
      }
      node.items.push_back(std::move(item));
    } while (acceptOp(","));
  }

  /// exprlist of a `for` target: bitwise-or level expressions so that `in` is not a comparison.
  ExprPtr parseTargetList() {
    ExprPtr first = parseTarget();
    if (!atOp(",")) {
      checkTarget(*first);
      return first;
    }
    auto tuple = std::make_unique<Tuple>(first->loc);
    tuple->elts.push_back(std::move(first));
    while (acceptOp(",")) {
      if (!canStartExpression()) break;
      tuple->elts.push_back(parseTarget());
    }
    checkTarget(*tuple);
    return tuple;
  }

  ExprPtr parseTarget() {
    rejectStar();
    ExprPtr e = parseBitOr();
    if (depth_ == 0) checkTreeDepth(*e);
    return e;
  }

  // ------------------------------------------------------------------------------------------
  // Expressions, by increasing precedence
  // ------------------------------------------------------------------------------------------

  bool canStartExpression() const {
    const Token& t = cur();
    switch (t.kind) {
    case TokenKind::Name:
    case TokenKind::Int:
    case TokenKind::Float:
    case TokenKind::String:
      return true;
    case TokenKind::Keyword:
      return t.text == "None" || t.text == "True" || t.text == "False" || t.text == "not" ||
             t.text == "lambda" || t.text == "await" || t.text == "yield";
    case TokenKind::Op:
      return t.text == "(" || t.text == "[" || t.text == "{" || t.text == "-" || t.text == "+" ||
             t.text == "~" || t.text == "..." || t.text == "*" || t.text == "**";
    default:
      return false;
    }
  }

  void rejectStar() {
    if (atOp("*") || atOp("**"))
      raiseError(cur().loc, std::string("starred expressions ('") + cur().text +
                                "x') are not supported in kernel code; write the elements out");
  }

  /// testlist: a bare tuple when there is a comma (`a, b = f()`, `return x, y`).
  ExprPtr parseTestList() {
    rejectStar();
    ExprPtr first = parseNamedTest();
    if (!atOp(",")) return first;
    auto tuple = std::make_unique<Tuple>(first->loc);
    tuple->elts.push_back(std::move(first));
    while (acceptOp(",")) {
      if (!canStartExpression()) break;
      rejectStar();
      tuple->elts.push_back(parseNamedTest());
    }
    return tuple;
  }

  ExprPtr parseNamedTest() {
    ExprPtr e = parseTest();
    if (atOp(":="))
      raiseError(cur().loc, "assignment expressions (':=') are not supported in kernel code; "
                            "assign in a separate statement");
    return e;
  }

  ExprPtr parseTest() {
    DepthGuard guard(*this, cur().loc);
    if (atKeyword("lambda"))
      raiseError(cur().loc, "lambda expressions are not supported in kernel code; define a @jit "
                            "helper at module level");
    ExprPtr body = parseOrTest();
    if (atKeyword("if")) {
      SourceLoc loc = advance().loc;
      ExprPtr test = parseOrTest();
      if (!acceptKeyword("else")) errorExpected("'else' in conditional expression 'x if c else y'");
      ExprPtr orelse = parseTest();
      body = std::make_unique<IfExp>(loc, std::move(test), std::move(body), std::move(orelse));
    }
    if (depth_ == 1) checkTreeDepth(*body); // the outermost expression of a statement
    return body;
  }

  ExprPtr parseBoolChain(BoolOpKind op, const char* word, ExprPtr (Parser::*next)()) {
    ExprPtr first = (this->*next)();
    if (!atKeyword(word)) return first;
    auto node = std::make_unique<BoolOp>(cur().loc, op);
    node->values.push_back(std::move(first));
    while (acceptKeyword(word)) {
      if (node->values.size() > kMaxOperatorChain) tooLong();
      node->values.push_back((this->*next)());
    }
    return node;
  }

  ExprPtr parseOrTest() { return parseBoolChain(BoolOpKind::Or, "or", &Parser::parseAndTest); }
  ExprPtr parseAndTest() { return parseBoolChain(BoolOpKind::And, "and", &Parser::parseNotTest); }

  ExprPtr parseNotTest() {
    if (!atKeyword("not")) return parseComparison();
    SourceLoc loc = advance().loc;
    DepthGuard guard(*this, loc);
    return std::make_unique<UnaryOp>(loc, UnaryOpKind::Not, parseNotTest());
  }

  bool parseCompareOp(CmpOpKind& op) {
    static const std::pair<const char*, CmpOpKind> kOps[] = {
        {"<", CmpOpKind::Lt},   {">", CmpOpKind::Gt},   {"==", CmpOpKind::Eq},
        {">=", CmpOpKind::GtE}, {"<=", CmpOpKind::LtE}, {"!=", CmpOpKind::NotEq}};
    for (const auto& [text, kind] : kOps) {
      if (acceptOp(text)) {
        op = kind;
        return true;
      }
    }
    if (acceptKeyword("in")) {
      op = CmpOpKind::In;
      return true;
    }
    if (atKeyword("not") && peek().isKeyword("in")) {
      advance();
      advance();
      op = CmpOpKind::NotIn;
      return true;
    }
    if (acceptKeyword("is")) {
      op = acceptKeyword("not") ? CmpOpKind::IsNot : CmpOpKind::Is;
      return true;
    }
    return false;
  }

  ExprPtr parseComparison() {
    ExprPtr left = parseBitOr();
    SourceLoc opLoc = cur().loc;
    CmpOpKind op;
    if (!parseCompareOp(op)) return left;
    auto node = std::make_unique<Compare>(opLoc);
    node->left = std::move(left);
    do {
      if (node->ops.size() > kMaxOperatorChain) tooLong();
      node->ops.push_back(op);
      node->comparators.push_back(parseBitOr());
    } while (parseCompareOp(op));
    return node;
  }

  [[noreturn]] void tooLong() {
    raiseError(cur().loc, "expression has too many operators in one chain (the limit is 5000)");
  }

  /// One left-associative binary precedence level; `next` parses the tighter level.
  template <typename Next>
  ExprPtr parseBinaryLevel(std::initializer_list<std::pair<const char*, BinOpKind>> ops,
                           Next next) {
    ExprPtr lhs = next();
    int count = 0;
    while (true) {
      const std::pair<const char*, BinOpKind>* match = nullptr;
      for (const auto& entry : ops)
        if (atOp(entry.first)) match = &entry;
      if (!match) return lhs;
      if (++count > kMaxOperatorChain) tooLong();
      SourceLoc loc = advance().loc;
      ExprPtr rhs = next();
      lhs = std::make_unique<BinOp>(loc, match->second, std::move(lhs), std::move(rhs));
    }
  }

  ExprPtr parseBitOr() {
    return parseBinaryLevel({{"|", BinOpKind::BitOr}}, [this] { return parseBitXor(); });
  }
  ExprPtr parseBitXor() {
    return parseBinaryLevel({{"^", BinOpKind::BitXor}}, [this] { return parseBitAnd(); });
  }
  ExprPtr parseBitAnd() {
    return parseBinaryLevel({{"&", BinOpKind::BitAnd}}, [this] { return parseShift(); });
  }
  ExprPtr parseShift() {
    return parseBinaryLevel({{"<<", BinOpKind::LShift}, {">>", BinOpKind::RShift}},
                            [this] { return parseArith(); });
  }
  ExprPtr parseArith() {
    return parseBinaryLevel({{"+", BinOpKind::Add}, {"-", BinOpKind::Sub}},
                            [this] { return parseTerm(); });
  }
  ExprPtr parseTerm() {
    return parseBinaryLevel({{"*", BinOpKind::Mul},
                             {"/", BinOpKind::Div},
                             {"//", BinOpKind::FloorDiv},
                             {"%", BinOpKind::Mod},
                             {"@", BinOpKind::MatMul}},
                            [this] { return parseFactor(); });
  }

  ExprPtr parseFactor() {
    UnaryOpKind op;
    if (atOp("-"))
      op = UnaryOpKind::Neg;
    else if (atOp("+"))
      op = UnaryOpKind::Pos;
    else if (atOp("~"))
      op = UnaryOpKind::Invert;
    else
      return parsePower();
    SourceLoc loc = advance().loc;
    DepthGuard guard(*this, loc);
    return std::make_unique<UnaryOp>(loc, op, parseFactor());
  }

  /// power: primary ['**' factor]; right-associative and tighter than a unary on its left.
  ExprPtr parsePower() {
    ExprPtr base = parsePrimary();
    if (!atOp("**")) return base;
    SourceLoc loc = advance().loc;
    DepthGuard guard(*this, loc);
    return std::make_unique<BinOp>(loc, BinOpKind::Pow, std::move(base), parseFactor());
  }

  ExprPtr parsePrimary() {
    if (atKeyword("await"))
      raiseError(cur().loc, "'await' is not supported in kernel code; use 'with "
                            "tlx.async_tasks():' for concurrent warp groups");
    SourceLoc start = cur().loc;
    ExprPtr e = parseAtom();
    while (true) {
      if (atOp("(")) {
        e = parseCall(std::move(e), start);
      } else if (atOp("[")) {
        e = parseSubscript(std::move(e), start);
      } else if (atOp(".")) {
        advance();
        const Token& attr = expectName("an attribute name after '.'");
        e = std::make_unique<Attribute>(start, std::move(e), attr.text, attr.loc);
      } else {
        return e;
      }
    }
  }

  ExprPtr parseCall(ExprPtr func, SourceLoc start) {
    const Token& open = advance();
    auto call = std::make_unique<Call>(start);
    call->func = std::move(func);
    std::unordered_set<std::string> seen;
    while (!atOp(")")) {
      if (atOp("**"))
        raiseError(cur().loc, "'**' argument unpacking is not supported in kernel code; pass "
                              "keyword arguments explicitly");
      rejectStar();
      if (at(TokenKind::Name) && peek().isOp("=")) {
        Keyword kw;
        kw.loc = cur().loc;
        kw.name = advance().text;
        advance(); // =
        if (!seen.insert(kw.name).second)
          raiseError(kw.loc, "keyword argument '" + kw.name + "' repeated");
        kw.value = parseTest();
        call->keywords.push_back(std::move(kw));
      } else {
        SourceLoc argLoc = cur().loc;
        ExprPtr arg = parseNamedTest();
        if (!call->keywords.empty())
          raiseError(argLoc, "positional argument follows keyword argument");
        rejectComprehension();
        call->args.push_back(std::move(arg));
      }
      if (acceptOp(",")) continue;
      if (!atOp(")"))
        errorExpected("',' or ')' in the call arguments",
                      {note(open.loc, "the argument list opens here")});
    }
    advance(); // )
    return call;
  }

  /// A generator expression (`f(x for x in t)`, `(x for x in t)`): Triton's front end has none.
  void rejectComprehension() {
    if (atKeyword("for") || atKeyword("async"))
      raiseError(cur().loc, "generator expressions are not supported in kernel code; use a list "
                            "comprehension ('[f(i) for i in range(N)]', a tuple) or a "
                            "tl.static_range loop");
  }

  /// The `for ... in ... if ...` clauses after the element of a comprehension, all of them (the
  /// specializer decides what it accepts, with the location of each part).
  void parseComprehensionClauses(ListComp& comp) {
    while (atKeyword("for") || atKeyword("async")) {
      Comprehension gen;
      gen.loc = cur().loc;
      if (acceptKeyword("async")) {
        gen.isAsync = true;
        if (!atKeyword("for")) errorExpected("'for' after 'async' in the comprehension");
      }
      advance(); // for
      gen.target = parseTargetList();
      if (!acceptKeyword("in")) errorExpected("'in' after the comprehension's target");
      gen.iter = parseOrTest();
      while (atKeyword("if")) {
        gen.ifLocs.push_back(advance().loc);
        gen.ifs.push_back(parseOrTest());
      }
      comp.generators.push_back(std::move(gen));
    }
  }

  ExprPtr parseSubscript(ExprPtr value, SourceLoc start) {
    const Token& open = advance();
    if (atOp("]")) raiseError(cur().loc, "expected an index inside '[]'");
    ExprPtr first = parseSubscriptItem();
    ExprPtr index;
    if (atOp(",")) {
      auto tuple = std::make_unique<Tuple>(first->loc);
      tuple->elts.push_back(std::move(first));
      while (acceptOp(",")) {
        if (atOp("]")) break;
        tuple->elts.push_back(parseSubscriptItem());
      }
      index = std::move(tuple);
    } else {
      index = std::move(first);
    }
    if (!atOp("]"))
      errorExpected("',' or ']' in the subscript", {note(open.loc, "the subscript opens here")});
    advance();
    return std::make_unique<Subscript>(start, std::move(value), std::move(index));
  }

  ExprPtr parseSubscriptItem() {
    rejectStar();
    if (atOp("..."))
      raiseError(cur().loc, "'...' (Ellipsis) is not supported in kernel code; index every "
                            "dimension with ':' or None");
    ExprPtr lower;
    if (!atOp(":")) {
      lower = parseNamedTest();
      if (!atOp(":")) return lower;
    }
    auto slice = std::make_unique<Slice>(lower ? lower->loc : cur().loc);
    slice->lower = std::move(lower);
    advance(); // :
    auto endsPart = [&] { return atOp(":") || atOp(",") || atOp("]"); };
    if (!endsPart()) slice->upper = parseTest();
    if (acceptOp(":") && !atOp(",") && !atOp("]")) slice->step = parseTest();
    return slice;
  }

  ExprPtr parseAtom() {
    const Token& t = cur();
    SourceLoc loc = t.loc;
    switch (t.kind) {
    case TokenKind::Name:
      advance();
      return std::make_unique<Name>(loc, t.text);
    case TokenKind::Int: {
      if (t.intOverflow)
        raiseError(loc, "integer literal " + t.text +
                            " does not fit in 64 bits (kernels take integers from -2**63 to "
                            "2**64 - 1)");
      auto c = std::make_unique<Constant>(loc);
      c->type = Constant::Type::Int;
      c->intValue = t.intValue;
      c->intUnsigned = t.intUnsigned;
      advance();
      return c;
    }
    case TokenKind::Float: {
      if (t.imaginary)
        raiseError(loc, "complex literal " + t.text + " is not supported in kernel code");
      auto c = std::make_unique<Constant>(loc);
      c->type = Constant::Type::Float;
      c->floatValue = t.floatValue;
      advance();
      return c;
    }
    case TokenKind::String:
      return parseStrings();
    case TokenKind::Keyword: {
      if (t.text == "None" || t.text == "True" || t.text == "False") {
        auto c = std::make_unique<Constant>(loc);
        c->type = t.text == "None" ? Constant::Type::None : Constant::Type::Bool;
        c->boolValue = t.text == "True";
        advance();
        return c;
      }
      if (t.text == "yield")
        raiseError(loc, "'yield' is not supported in kernel code: kernels are not generators");
      if (t.text == "lambda")
        raiseError(loc, "lambda expressions are not supported in kernel code; define a @jit "
                        "helper at module level");
      break;
    }
    case TokenKind::Op: {
      if (t.text == "(") return parseParenthesized();
      if (t.text == "[") return parseList();
      if (t.text == "{")
        raiseError(loc, "dict and set literals are not supported in kernel code; use a tuple");
      if (t.text == "...")
        raiseError(loc, "'...' (Ellipsis) is not supported in kernel code; index every "
                        "dimension with ':' or None");
      break;
    }
    case TokenKind::Indent:
      raiseError(loc, "unexpected indent");
    default:
      break;
    }
    if (t.kind == TokenKind::Keyword)
      raiseError(loc, "expected an expression, found keyword '" + t.text + "'");
    if ((t.isOp("&") || t.isOp("|")) && pos_ > 0 && toks_[pos_ - 1].isOp(t.text))
      raiseError(toks_[pos_ - 1].loc, "'" + t.text + t.text + "' is not Python; use '" +
                                          (t.text == "&" ? "and" : "or") + "'");
    errorExpected("an expression");
  }

  ExprPtr parseStrings() {
    auto c = std::make_unique<Constant>(cur().loc);
    c->type = Constant::Type::String;
    while (at(TokenKind::String)) {
      const Token& s = cur();
      if (s.isFString)
        raiseError(s.loc, "f-strings are not supported in kernel code; use a plain string "
                          "literal");
      if (s.isBytes)
        raiseError(s.loc, "bytes literals are not supported in kernel code; use a str literal");
      c->stringValue += s.stringValue;
      advance();
    }
    return c;
  }

  ExprPtr parseParenthesized() {
    const Token& open = advance();
    if (acceptOp(")")) return std::make_unique<Tuple>(open.loc);
    rejectStar();
    ExprPtr first = parseNamedTest();
    rejectComprehension();
    if (acceptOp(")")) return first; // parentheses only group
    if (!atOp(","))
      errorExpected("',' or ')' after the expression",
                    {note(open.loc, "the parenthesis opens here")});
    auto tuple = std::make_unique<Tuple>(open.loc);
    tuple->elts.push_back(std::move(first));
    while (acceptOp(",")) {
      if (atOp(")")) break;
      rejectStar();
      tuple->elts.push_back(parseNamedTest());
    }
    if (!atOp(")"))
      errorExpected("',' or ')' in the tuple", {note(open.loc, "the tuple opens here")});
    advance();
    return tuple;
  }

  ExprPtr parseList() {
    const Token& open = advance();
    auto list = std::make_unique<List>(open.loc);
    while (!atOp("]")) {
      rejectStar();
      list->elts.push_back(parseNamedTest());
      if (list->elts.size() == 1 && (atKeyword("for") || atKeyword("async"))) {
        auto comp = std::make_unique<ListComp>(open.loc);
        comp->elt = std::move(list->elts.front());
        parseComprehensionClauses(*comp);
        if (!atOp("]"))
          errorExpected("']' to close the list comprehension",
                        {note(open.loc, "the list comprehension opens here")});
        advance();
        return comp;
      }
      if (acceptOp(",")) continue;
      if (!atOp("]"))
        errorExpected("',' or ']' in the list", {note(open.loc, "the list opens here")});
    }
    advance();
    return list;
  }

  uint32_t file_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
};

} // namespace

ast::Module parseModule(const SourceManager& sm, uint32_t file) {
  return Parser(sm, file).parseModule();
}

ast::ExprPtr parseExpression(const SourceManager& sm, uint32_t file) {
  return Parser(sm, file).parseStandaloneExpression();
}

} // namespace ww::frontend
