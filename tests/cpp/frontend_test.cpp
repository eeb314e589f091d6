// Lexer, parser and AST dump: every construct of the kernel-language subset, positive and negative.
#include "frontend/AstDump.h"
#include "frontend/Lexer.h"
#include "frontend/Parser.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace ww;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string dumpModule(const std::string& text) {
  SourceManager sm;
  uint32_t id = sm.addFile("t.py", text);
  return ast::dump(frontend::parseModule(sm, id));
}

std::string dumpExpr(const std::string& text) {
  SourceManager sm;
  uint32_t id = sm.addFile("e.py", text);
  return ast::dump(*frontend::parseExpression(sm, id));
}

/// The body of the single @jit kernel `k` wrapping `body` (already indented by 4).
std::string dumpKernelBody(const std::string& body) {
  std::string d = dumpModule("@ww.jit\ndef k():\n" + body);
  std::string head = "(module\n  (def k ()\n    (decorators ww.jit)\n";
  EXPECT_EQ(d.substr(0, head.size()), head) << d;
  d = d.substr(std::min(head.size(), d.size()));
  // Drop the two closing parens of def and module and the indentation of the body.
  if (d.size() >= 2) d.resize(d.size() - 2);
  std::string out;
  std::istringstream in(d);
  for (std::string line; std::getline(in, line);) {
    if (!out.empty()) out += '\n';
    out += line.substr(4);
  }
  return out;
}

} // namespace

TEST(Frontend, VectorAddExampleParses) {
  SourceManager sm;
  std::string path = std::string(WW_SOURCE_DIR) + "/examples/vector_add.py";
  uint32_t id = sm.addFile(path, readFile(path));
  ast::Module m = frontend::parseModule(sm, id);
  ASSERT_GE(m.functions.size(), 1u);
  const ast::FunctionDef& k = *m.functions[0];
  EXPECT_EQ(k.name, "add_kernel");
  EXPECT_TRUE(ast::isJitFunction(k));
  ASSERT_EQ(k.params.size(), 5u);
  EXPECT_EQ(k.params[4].name, "BLOCK");
  EXPECT_EQ(ast::dump(*k.params[4].annotation), "tl.constexpr");
  EXPECT_EQ(ast::dump(*k.body[0]), "(= pid (call tl.program_id (kw axis 0)))");
  EXPECT_EQ(ast::dump(*k.body.back()),
            "(expr (call tl.store (+ out_ptr offsets) (+ x y) (kw mask mask)))");
  bool hasTl = false;
  for (const auto& imp : m.imports)
    for (const auto& a : imp->names) hasTl |= a.module == "warpweave.language" && a.asName == "tl";
  EXPECT_TRUE(hasTl);
}

TEST(Frontend, VectorAddKernelFullDump) {
  std::string src = R"(import warpweave as ww
import warpweave.language as tl


@ww.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x, mask=mask)
)";
  EXPECT_EQ(dumpModule(src), R"d((module
  (import (warpweave as ww))
  (import (warpweave.language as tl))
  (def add_kernel (x_ptr y_ptr out_ptr n (BLOCK : tl.constexpr))
    (decorators ww.jit)
    (= pid (call tl.program_id (kw axis 0)))
    (= offsets (+ (* pid BLOCK) (call tl.arange 0 BLOCK)))
    (= mask (cmp offsets < n))
    (= x (call tl.load (+ x_ptr offsets) (kw mask mask)))
    (expr (call tl.store (+ out_ptr offsets) x (kw mask mask))))))d");
}

TEST(Frontend, ParseExpressionValues) {
  EXPECT_EQ(dumpExpr("1024"), "1024");
  EXPECT_EQ(dumpExpr("tl.float16"), "tl.float16");
  EXPECT_EQ(dumpExpr("1e-6"), "1e-06");
  EXPECT_EQ(dumpExpr("  -float(\"inf\")"), "(- (call float \"inf\"))");
  EXPECT_EQ(dumpExpr("(1, 2)"), "(tuple 1 2)");
  EXPECT_EQ(dumpExpr("True"), "True");
}

TEST(Frontend, OperatorSymbols) {
  EXPECT_STREQ(ast::binOpSymbol(ast::BinOpKind::FloorDiv), "//");
  EXPECT_STREQ(ast::binOpSymbol(ast::BinOpKind::MatMul), "@");
  EXPECT_STREQ(ast::cmpOpSymbol(ast::CmpOpKind::IsNot), "is not");
  EXPECT_STREQ(ast::cmpOpSymbol(ast::CmpOpKind::NotIn), "not in");
}

TEST(Frontend, KernelBodyStatements) {
  EXPECT_EQ(dumpKernelBody("    a = b = 1\n    x, y = f()\n    (p, q) = g()\n"),
            "(= a b 1)\n(= (tuple x y) (call f))\n(= (tuple p q) (call g))");
}

// ---------------------------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------------------------

namespace {

std::vector<frontend::Token> lex(const std::string& text) {
  SourceManager sm;
  uint32_t id = sm.addFile("l.py", text);
  return frontend::tokenize(sm, id);
}

/// Token stream as text: names and ops as spelled, NL/IN/DE/EOF for layout tokens.
std::string lexKinds(const std::string& text) {
  std::string out;
  for (const frontend::Token& t : lex(text)) {
    if (!out.empty()) out += ' ';
    switch (t.kind) {
    case frontend::TokenKind::Newline:
      out += "NL";
      break;
    case frontend::TokenKind::Indent:
      out += "IN";
      break;
    case frontend::TokenKind::Dedent:
      out += "DE";
      break;
    case frontend::TokenKind::EndOfFile:
      out += "EOF";
      break;
    default:
      out += t.text;
    }
  }
  return out;
}

/// "LINE:COL: message" of the CompileError that parsing `text` throws, or "no error".
std::string errorOf(const std::string& text) {
  SourceManager sm;
  uint32_t id = sm.addFile("k.py", text);
  try {
    frontend::parseModule(sm, id);
  } catch (const CompileError& e) {
    const Diagnostic& d = e.diagnostic();
    return std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " + d.message;
  }
  return "no error";
}

/// Error from `body` placed in a @jit kernel; the body starts on line 3.
std::string kernelError(const std::string& body) {
  return errorOf("@ww.jit\ndef k(x):\n" + body);
}

std::string renderedError(const std::string& text) {
  SourceManager sm;
  uint32_t id = sm.addFile("kern.py", text);
  try {
    frontend::parseModule(sm, id);
  } catch (CompileError& e) {
    e.render(sm);
    return e.what();
  }
  return "no error";
}

} // namespace

TEST(Lexer, IndentDedentAndNewlines) {
  EXPECT_EQ(lexKinds("if a:\n    b\n    if c:\n        d\ne\n"),
            "if a : NL IN b NL if c : NL IN d NL DE DE e NL EOF");
  // Blank lines and comment-only lines (at any indentation) produce nothing.
  EXPECT_EQ(lexKinds("a\n\n   # comment\n\t\nb  # trailing\n"), "a NL b NL EOF");
  // The file may end without a newline and inside blocks.
  EXPECT_EQ(lexKinds("def f():\n  x"), "def f ( ) : NL IN x NL DE EOF");
  EXPECT_EQ(lexKinds(""), "EOF");
}

TEST(Lexer, ImplicitAndExplicitLineJoining) {
  EXPECT_EQ(lexKinds("f(a,\n      b)[\n1]\n{2:\n 3}\n"), "f ( a , b ) [ 1 ] NL { 2 : 3 } NL EOF");
  EXPECT_EQ(lexKinds("x = 1 + \\\n    2\ny\n"), "x = 1 + 2 NL y NL EOF");
  // Indentation inside brackets does not count.
  EXPECT_EQ(lexKinds("if a:\n    f(1,\n2)\n    g\n"), "if a : NL IN f ( 1 , 2 ) NL g NL DE EOF");
}

TEST(Lexer, Tabs) {
  EXPECT_EQ(lexKinds("if a:\n\tb\n\tc\n"), "if a : NL IN b NL c NL DE EOF");
  // A tab and eight spaces agree under tab size 8 but not under tab size 1: CPython's TabError.
  EXPECT_EQ(errorOf("if a:\n\tb\n        c\n"),
            "3:9: inconsistent use of tabs and spaces in indentation");
}

TEST(Lexer, IntegerLiterals) {
  auto toks = lex("0x1F 0o17 0b101 1_000_000 0 00 9223372036854775807 9223372036854775808 0xFF_FF");
  ASSERT_GE(toks.size(), 9u);
  EXPECT_EQ(toks[0].intValue, 31);
  EXPECT_EQ(toks[1].intValue, 15);
  EXPECT_EQ(toks[2].intValue, 5);
  EXPECT_EQ(toks[3].intValue, 1000000);
  EXPECT_EQ(toks[4].intValue, 0);
  EXPECT_EQ(toks[5].intValue, 0);
  EXPECT_EQ(toks[6].intValue, INT64_MAX);
  EXPECT_FALSE(toks[6].intOverflow);
  EXPECT_FALSE(toks[6].intUnsigned);
  // 2**63 to 2**64 - 1: Triton's uint64 constants; the bits are kept.
  EXPECT_FALSE(toks[7].intOverflow);
  EXPECT_TRUE(toks[7].intUnsigned);
  EXPECT_EQ(static_cast<uint64_t>(toks[7].intValue), uint64_t(1) << 63);
  EXPECT_EQ(toks[8].intValue, 0xFFFF);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(toks[i].kind, frontend::TokenKind::Int) << i;
  EXPECT_EQ(errorOf("x = 0777\n"),
            "1:5: leading zeros in decimal integer literals are not permitted; use an 0o prefix "
            "for octal integers");
  EXPECT_EQ(errorOf("x = 1__0\n"), "1:5: invalid number literal '1_'");
  EXPECT_EQ(errorOf("x = 0x\n"), "1:5: invalid number literal: expected digits");
  EXPECT_EQ(errorOf("x = 12abc\n"), "1:5: invalid number literal '12a'");
}

TEST(Lexer, FloatLiterals) {
  auto toks = lex("1e-6 .5 1. 1_000.0 1e10 2.5E+3 0.0 3j");
  ASSERT_GE(toks.size(), 8u);
  double expected[] = {1e-6, 0.5, 1.0, 1000.0, 1e10, 2500.0, 0.0};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(toks[i].kind, frontend::TokenKind::Float) << i;
    EXPECT_EQ(toks[i].floatValue, expected[i]) << i;
  }
  EXPECT_TRUE(toks[7].imaginary);
  // `1.` followed by an attribute-like name stays a float then a name.
  EXPECT_EQ(lexKinds("x[1:2]"), "x [ 1 : 2 ] NL EOF");
}

TEST(Lexer, StringLiterals) {
  auto toks = lex("'a\\n' \"b\\\"\" r'\\n' b'xy' '''multi\nline''' \"\"\"q\"\"\" '\\x41\\u00e9' "
                  "f'{x!r:>{w}}' F\"{d['k']}\"");
  ASSERT_GE(toks.size(), 9u);
  EXPECT_EQ(toks[0].stringValue, "a\n");
  EXPECT_EQ(toks[1].stringValue, "b\"");
  EXPECT_EQ(toks[2].stringValue, "\\n");
  EXPECT_TRUE(toks[3].isBytes);
  EXPECT_EQ(toks[4].stringValue, "multi\nline");
  EXPECT_EQ(toks[5].stringValue, "q");
  EXPECT_EQ(toks[6].stringValue, "A\xc3\xa9");
  EXPECT_TRUE(toks[7].isFString);
  EXPECT_TRUE(toks[8].isFString);
  EXPECT_EQ(toks[8].text, "F\"{d['k']}\"");
  // The triple-quoted string spans a line: the next token is on line 2.
  EXPECT_EQ(toks[5].loc.line, 2u);
}

TEST(Lexer, Operators) {
  EXPECT_EQ(lexKinds("a //= b **= c >>= d <<= e -> f := g @ h @= i ... != == <= >= ~ ^= |= &= %="),
            "a //= b **= c >>= d <<= e -> f := g @ h @= i ... != == <= >= ~ ^= |= &= %= NL EOF");
  EXPECT_EQ(lexKinds("a**-b//c"), "a ** - b // c NL EOF");
}

TEST(Lexer, TokenLocations) {
  auto toks = lex("x = foo(1,\n        bar)\n");
  // x = foo ( 1 , bar ) NL
  EXPECT_EQ(toks[2].text, "foo");
  EXPECT_EQ(toks[2].loc.line, 1u);
  EXPECT_EQ(toks[2].loc.col, 5u);
  EXPECT_EQ(toks[6].text, "bar");
  EXPECT_EQ(toks[6].loc.line, 2u);
  EXPECT_EQ(toks[6].loc.col, 9u);
}

TEST(Lexer, Errors) {
  EXPECT_EQ(errorOf("x = 'abc\ny = 2\n"),
            "1:5: unterminated string literal (missing closing quote on this line)");
  EXPECT_EQ(errorOf("x = 1\ns = \"\"\"abc\n\n"), "2:5: unterminated triple-quoted string literal");
  EXPECT_EQ(errorOf("x = (1, 2]\n"), "1:10: closing ']' does not match opening '('");
  EXPECT_EQ(errorOf("x = 1)\n"), "1:6: unmatched ')'");
  EXPECT_EQ(errorOf("x = f(1,\n  2\ny = 3\n"), "1:6: '(' was never closed");
  EXPECT_EQ(errorOf("x = $\n"), "1:5: invalid character '$' in source");
  EXPECT_EQ(errorOf("x = a ! b\n"),
            "1:7: invalid character '!' in source; use 'not' for negation and '!=' for "
            "inequality");
  EXPECT_EQ(errorOf("if a:\n    b\n  c\n"),
            "3:3: unindent does not match any outer indentation level");
  EXPECT_EQ(errorOf("x = 1 \\ y\n"),
            "1:7: unexpected character after line continuation character '\\'");
}

TEST(Lexer, RenderedBracketMismatchHasNoteAtOpening) {
  EXPECT_EQ(renderedError("@ww.jit\ndef k(x):\n    y = tl.load(x[0)\n"),
            "kern.py:3:20: error: closing ')' does not match opening '['\n"
            "      y = tl.load(x[0)\n"
            "                     ^\n"
            "kern.py:3:18: note: '[' opened here\n"
            "      y = tl.load(x[0)\n"
            "                   ^");
}

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

TEST(Parser, BooleanAndConditionalPrecedence) {
  EXPECT_EQ(dumpExpr("a or b and not c"), "(or a (and b (not c)))");
  EXPECT_EQ(dumpExpr("a or b or c"), "(or a b c)");
  EXPECT_EQ(dumpExpr("a and b and c or d"), "(or (and a b c) d)");
  EXPECT_EQ(dumpExpr("a if b else c if d else e"), "(ifexp b a (ifexp d c e))");
  EXPECT_EQ(dumpExpr("x if a or b else y"), "(ifexp (or a b) x y)");
  EXPECT_EQ(dumpExpr("not a == b"), "(not (cmp a == b))");
  EXPECT_EQ(dumpExpr("not not a"), "(not (not a))");
}

TEST(Parser, ComparisonChains) {
  EXPECT_EQ(dumpExpr("a < b <= c"), "(cmp a < b <= c)");
  EXPECT_EQ(dumpExpr("a is not None"), "(cmp a is not None)");
  EXPECT_EQ(dumpExpr("a is b"), "(cmp a is b)");
  EXPECT_EQ(dumpExpr("a not in b"), "(cmp a not in b)");
  EXPECT_EQ(dumpExpr("a in b != c > d >= e == f"), "(cmp a in b != c > d >= e == f)");
  EXPECT_EQ(dumpExpr("a | b < c & d"), "(cmp (| a b) < (& c d))");
}

TEST(Parser, ArithmeticAndBitwisePrecedence) {
  EXPECT_EQ(dumpExpr("a | b ^ c & d << e + f * g"), "(| a (^ b (& c (<< d (+ e (* f g))))))");
  EXPECT_EQ(dumpExpr("a // b % c @ d / e * f"), "(* (/ (@ (% (// a b) c) d) e) f)");
  EXPECT_EQ(dumpExpr("a - b - c"), "(- (- a b) c)");
  EXPECT_EQ(dumpExpr("a >> 1 << 2"), "(<< (>> a 1) 2)");
  EXPECT_EQ(dumpExpr("~a + +b - -c"), "(- (+ (~ a) (+ b)) (- c))");
  EXPECT_EQ(dumpExpr("(a + b) * c"), "(* (+ a b) c)");
}

TEST(Parser, PowerBindsTighterThanUnaryOnItsLeft) {
  EXPECT_EQ(dumpExpr("-2**2"), "(- (** 2 2))");
  EXPECT_EQ(dumpExpr("2**-1"), "(** 2 (- 1))");
  EXPECT_EQ(dumpExpr("2**3**2"), "(** 2 (** 3 2))");
  EXPECT_EQ(dumpExpr("a*b**c"), "(* a (** b c))");
  EXPECT_EQ(dumpExpr("x.y**2"), "(** x.y 2)");
}

TEST(Parser, CallsAttributesSubscripts) {
  EXPECT_EQ(dumpExpr("tl.load(p + o, mask=m, other=0.0)"),
            "(call tl.load (+ p o) (kw mask m) (kw other 0.0))");
  EXPECT_EQ(dumpExpr("f()"), "(call f)");
  EXPECT_EQ(dumpExpr("f(a,)"), "(call f a)");
  EXPECT_EQ(dumpExpr("x.to(tl.float16).T"), "(call x.to tl.float16).T");
  EXPECT_EQ(dumpExpr("a.b.c.d"), "a.b.c.d");
  EXPECT_EQ(dumpExpr("x[:, None]"), "(sub x (tuple (slice _ _ _) None))");
  EXPECT_EQ(dumpExpr("x[None, :]"), "(sub x (tuple None (slice _ _ _)))");
  EXPECT_EQ(dumpExpr("x[1:2:3]"), "(sub x (slice 1 2 3))");
  EXPECT_EQ(dumpExpr("x[::2]"), "(sub x (slice _ _ 2))");
  EXPECT_EQ(dumpExpr("x[a:]"), "(sub x (slice a _ _))");
  EXPECT_EQ(dumpExpr("x[:-1]"), "(sub x (slice _ (- 1) _))");
  EXPECT_EQ(dumpExpr("x[i]"), "(sub x i)");
  EXPECT_EQ(dumpExpr("x[i,]"), "(sub x (tuple i))");
  EXPECT_EQ(dumpExpr("t[0][1]"), "(sub (sub t 0) 1)");
  EXPECT_EQ(dumpExpr("bufs[i].load()"), "(call (sub bufs i).load)");
}

TEST(Parser, LiteralsTuplesLists) {
  EXPECT_EQ(dumpExpr("(a,)"), "(tuple a)");
  EXPECT_EQ(dumpExpr("()"), "(tuple)");
  EXPECT_EQ(dumpExpr("a, b"), "(tuple a b)");
  EXPECT_EQ(dumpExpr("(1, (2, 3),)"), "(tuple 1 (tuple 2 3))");
  EXPECT_EQ(dumpExpr("[1, 2.5, 'x']"), "(list 1 2.5 \"x\")");
  EXPECT_EQ(dumpExpr("[]"), "(list)");
  // List comprehensions parse whole (the specializer accepts Triton's subset of them).
  EXPECT_EQ(dumpExpr("[f(i) for i in range(4)]"), "(listcomp (call f i) (for i (call range 4)))");
  EXPECT_EQ(dumpExpr("[a if c else b for x in t]"), "(listcomp (ifexp c a b) (for x t))");
  EXPECT_EQ(dumpExpr("[x for x in t if x > 1 if y for a, b in u]"),
            "(listcomp x (for x t (if (cmp x > 1)) (if y)) (for (tuple a b) u))");
  EXPECT_EQ(dumpExpr("[x async for x in t]"), "(listcomp x (async-for x t))");
  EXPECT_EQ(dumpExpr("[[j for j in range(i)] for i in range(3)]"),
            "(listcomp (listcomp j (for j (call range i))) (for i (call range 3)))");
  EXPECT_EQ(dumpExpr("None"), "None");
  EXPECT_EQ(dumpExpr("False"), "False");
  EXPECT_EQ(dumpExpr("'a' \"b\"  'c'"), "\"abc\"");
  EXPECT_EQ(dumpExpr("float(\"inf\")"), "(call float \"inf\")");
  EXPECT_EQ(dumpExpr("-float('-inf')"), "(- (call float \"-inf\"))");
  EXPECT_EQ(dumpExpr("1.0"), "1.0");
  EXPECT_EQ(dumpExpr("1e10"), "1e+10");
  EXPECT_EQ(dumpExpr("0x10"), "16");
}

TEST(Parser, ExpressionLocations) {
  SourceManager sm;
  uint32_t id = sm.addFile("e.py", "a + tl.load(p, mask=m)[0] * b < c");
  ast::ExprPtr e = frontend::parseExpression(sm, id);
  auto* cmp = ast::dyn_cast<ast::Compare>(e.get());
  ASSERT_TRUE(cmp);
  EXPECT_EQ(cmp->loc.col, 31u); // the first comparison operator
  auto* add = ast::dyn_cast<ast::BinOp>(cmp->left.get());
  ASSERT_TRUE(add);
  EXPECT_EQ(add->loc.col, 3u); // binary operators are located at the operator
  auto* mul = ast::dyn_cast<ast::BinOp>(add->rhs.get());
  ASSERT_TRUE(mul);
  EXPECT_EQ(mul->loc.col, 27u);
  auto* sub = ast::dyn_cast<ast::Subscript>(mul->lhs.get());
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->loc.col, 5u); // postfix forms at their first token
  auto* call = ast::dyn_cast<ast::Call>(sub->value.get());
  ASSERT_TRUE(call);
  EXPECT_EQ(call->loc.col, 5u);
  ASSERT_EQ(call->keywords.size(), 1u);
  EXPECT_EQ(call->keywords[0].loc.col, 16u);
  auto* attr = ast::dyn_cast<ast::Attribute>(call->func.get());
  ASSERT_TRUE(attr);
  EXPECT_EQ(attr->loc.col, 5u);
  EXPECT_EQ(attr->attrLoc.col, 8u);
  EXPECT_EQ(cmp->comparators[0]->loc.col, 33u);
}

// ---------------------------------------------------------------------------------------------
// Statements inside a kernel
// ---------------------------------------------------------------------------------------------

TEST(Parser, Assignments) {
  EXPECT_EQ(dumpKernelBody("    a = b = c\n"
                           "    a, b = f()\n"
                           "    (a, b) = c, d\n"
                           "    [a, b] = t\n"
                           "    x.y = 1\n"
                           "    x[0] = 2\n"
                           "    N: tl.constexpr = 128\n"
                           "    y: tl.tensor\n"),
            "(= a b c)\n"
            "(= (tuple a b) (call f))\n"
            "(= (tuple a b) (tuple c d))\n"
            "(= (list a b) t)\n"
            "(= x.y 1)\n"
            "(= (sub x 0) 2)\n"
            "(: N tl.constexpr 128)\n"
            "(: y tl.tensor)");
}

TEST(Parser, AugmentedAssignments) {
  EXPECT_EQ(dumpKernelBody("    a += 1\n    a -= 1\n    a *= 1\n    a /= 1\n    a //= 1\n"
                           "    a %= 1\n    a **= 1\n    a @= 1\n    a <<= 1\n    a >>= 1\n"
                           "    a &= 1\n    a |= 1\n    a ^= 1\n    x.acc += y[0]\n"),
            "(+= a 1)\n(-= a 1)\n(*= a 1)\n(/= a 1)\n(//= a 1)\n(%= a 1)\n(**= a 1)\n(@= a 1)\n"
            "(<<= a 1)\n(>>= a 1)\n(&= a 1)\n(|= a 1)\n(^= a 1)\n(+= x.acc (sub y 0))");
}

TEST(Parser, IfElifElse) {
  EXPECT_EQ(dumpKernelBody("    if a:\n"
                           "        x = 1\n"
                           "    elif b:\n"
                           "        x = 2\n"
                           "    elif c:\n"
                           "        pass\n"
                           "    else:\n"
                           "        x = 3\n"
                           "    if d: y = 1; z = 2\n"),
            "(if a\n"
            "  (= x 1)\n"
            " else\n"
            "  (if b\n"
            "    (= x 2)\n"
            "   else\n"
            "    (if c\n"
            "      (pass)\n"
            "     else\n"
            "      (= x 3))))\n"
            "(if d\n"
            "  (= y 1)\n"
            "  (= z 2))");
}

TEST(Parser, LoopsAndJumps) {
  EXPECT_EQ(dumpKernelBody("    for i in tl.range(0, n, 2, num_stages=3):\n"
                           "        if i > 4:\n"
                           "            break\n"
                           "        continue\n"
                           "    else:\n"
                           "        pass\n"
                           "    for a, b in zip(x, y):\n"
                           "        pass\n"
                           "    while i < n:\n"
                           "        i += 1\n"
                           "    else:\n"
                           "        pass\n"),
            "(for i (call tl.range 0 n 2 (kw num_stages 3))\n"
            "  (if (cmp i > 4)\n"
            "    (break))\n"
            "  (continue)\n"
            " else\n"
            "  (pass))\n"
            "(for (tuple a b) (call zip x y)\n"
            "  (pass))\n"
            "(while (cmp i < n)\n"
            "  (+= i 1)\n"
            " else\n"
            "  (pass))");
}

TEST(Parser, ReturnAssertPassWithDocstring) {
  EXPECT_EQ(dumpKernelBody("    \"\"\"Docstring.\"\"\"\n"
                           "    assert n > 0, \"n must be positive\"\n"
                           "    assert m\n"
                           "    tl.static_assert(BLOCK % 16 == 0)\n"
                           "    if n:\n"
                           "        return\n"
                           "    if m:\n"
                           "        return a, b\n"
                           "    return (a + b)\n"),
            "(expr \"Docstring.\")\n"
            "(assert (cmp n > 0) \"n must be positive\")\n"
            "(assert m)\n"
            "(expr (call tl.static_assert (cmp (% BLOCK 16) == 0)))\n"
            "(if n\n"
            "  (return))\n"
            "(if m\n"
            "  (return (tuple a b)))\n"
            "(return (+ a b))");
}

TEST(Parser, WithStatements) {
  EXPECT_EQ(dumpKernelBody("    with tlx.async_tasks():\n"
                           "        with tlx.async_task(\"default\"):\n"
                           "            pass\n"
                           "        with tlx.async_task(num_warps=4, registers=232, replicate=2):\n"
                           "            pass\n"
                           "    with a() as b, c():\n"
                           "        pass\n"
                           "    with (a() as b,\n"
                           "          c() as d,):\n"
                           "        pass\n"
                           "    with (a, b):\n"
                           "        pass\n"),
            "(with (call tlx.async_tasks)\n"
            "  (with (call tlx.async_task \"default\")\n"
            "    (pass))\n"
            "  (with (call tlx.async_task (kw num_warps 4) (kw registers 232) (kw replicate 2))\n"
            "    (pass)))\n"
            "(with (as (call a) b) (call c)\n"
            "  (pass))\n"
            "(with (as (call a) b) (as (call c) d)\n"
            "  (pass))\n"
            "(with a b\n" // as in CPython 3.9+: two context managers, not a tuple
            "  (pass))");
}

TEST(Parser, FunctionSignatures) {
  EXPECT_EQ(dumpModule("@triton.jit\n"
                       "def helper(a, b: tl.tensor, N: tl.constexpr = 4, eps=1e-6,) -> tl.tensor:\n"
                       "    return a\n"),
            "(module\n"
            "  (def helper (a (b : tl.tensor) (N : tl.constexpr = 4) (eps = 1e-06))\n"
            "    (decorators triton.jit)\n"
            "    (returns tl.tensor)\n"
            "    (return a)))");
  // One-line body.
  EXPECT_EQ(dumpModule("@jit\ndef f(x): return x\n"),
            "(module\n  (def f (x)\n    (decorators jit)\n    (return x)))");
}

TEST(Parser, DecoratorsStackedOnJit) {
  // Arguments in the subset are kept.
  EXPECT_EQ(dumpModule("@ww.autotune(configs=CONFIGS, key=[\"M\", \"N\"])\n"
                       "@ww.jit\n"
                       "def k(x):\n"
                       "    pass\n"),
            "(module\n"
            "  (def k (x)\n"
            "    (decorators (call ww.autotune (kw configs CONFIGS) (kw key (list \"M\" \"N\"))) "
            "ww.jit)\n"
            "    (pass)))");
  // Host-only arguments (dicts, lambdas, comprehensions) leave the decorator's name only.
  EXPECT_EQ(dumpModule("@ww.autotune(configs=[ww.Config({'B': b}, num_warps=w) for b in (64, 128)\n"
                       "                      for w in (4, 8)], key=['n'])\n"
                       "@ww.heuristics(values={'EVEN': lambda args: args['n'] % 2 == 0})\n"
                       "@ww.jit(do_not_specialize=['n'])\n"
                       "def k(x, n):\n"
                       "    pass\n"),
            "(module\n"
            "  (def k (x n)\n"
            "    (decorators ww.autotune ww.heuristics (call ww.jit (kw do_not_specialize "
            "(list \"n\"))))\n"
            "    (pass)))");
}

TEST(Parser, StatementLocations) {
  SourceManager sm;
  uint32_t id = sm.addFile("k.py", "@ww.jit\ndef k(x, BLOCK: tl.constexpr):\n"
                                   "    y = x + 1\n    for i in range(3):\n        y += i\n");
  ast::Module m = frontend::parseModule(sm, id);
  ASSERT_EQ(m.functions.size(), 1u);
  const ast::FunctionDef& f = *m.functions[0];
  EXPECT_EQ(f.loc.line, 2u);
  EXPECT_EQ(f.loc.col, 1u);
  EXPECT_EQ(f.params[1].loc.line, 2u);
  EXPECT_EQ(f.params[1].loc.col, 10u);
  EXPECT_EQ(f.decorators[0]->loc.line, 1u);
  EXPECT_EQ(f.decorators[0]->loc.col, 2u);
  ASSERT_EQ(f.body.size(), 2u);
  EXPECT_EQ(f.body[0]->loc.line, 3u);
  EXPECT_EQ(f.body[0]->loc.col, 5u);
  auto* loop = ast::dyn_cast<ast::For>(f.body[1].get());
  ASSERT_TRUE(loop);
  EXPECT_EQ(loop->loc.line, 4u);
  EXPECT_EQ(loop->iter->loc.col, 14u);
  EXPECT_EQ(loop->body[0]->loc.line, 5u);
  EXPECT_EQ(loop->body[0]->loc.col, 9u);
}

// ---------------------------------------------------------------------------------------------
// Module level: imports, constants, host code
// ---------------------------------------------------------------------------------------------

TEST(Module, ImportsAndConstants) {
  EXPECT_EQ(dumpModule("import a.b as c\n"
                       "import a.b\n"
                       "import os, sys as system\n"
                       "from triton.language.extra import tlx\n"
                       "from a import (b as d, e,)\n"
                       "from .utils import helper\n"
                       "from . import sibling\n"
                       "BLOCK = 128\n"
                       "DTYPE: tl.constexpr = tl.float16\n"
                       "_EPS = 1e-6\n"
                       "A = B = 2\n"
                       "X, Y = 1, 2\n"
                       "obj.attr = 3\n"
                       "table[0] = 4\n"
                       "ANNOTATED_ONLY: int\n"
                       "HUGE = 0xFFFFFFFFFFFFFFFFFF\n"
                       "CFG = {'a': 1}\n"
                       "F = lambda x: x\n"
                       "S = f\"{BLOCK}\"\n"
                       "print(BLOCK); LATE = 5\n"),
            "(module\n"
            "  (import (a.b as c))\n"
            "  (import (a.b as a))\n"
            "  (import (os as os) (sys as system))\n"
            "  (import (from triton.language.extra tlx as tlx))\n"
            "  (import (from a b as d) (from a e as e))\n"
            "  (import (from .utils helper as helper))\n"
            "  (import (from . sibling as sibling))\n"
            "  (= BLOCK 128)\n"
            "  (: DTYPE tl.constexpr tl.float16)\n"
            "  (= _EPS 1e-06)\n"
            "  (= A B 2)\n"
            "  (= (tuple X Y) (tuple 1 2))\n"
            "  (= LATE 5))");
}

TEST(Module, HostCodeIsSkippedOrKept) {
  std::string src = R"py("""Module docstring."""
import warpweave as ww
from typing import *

class Config:
    def __init__(self, **kw):
        self.kw = {k: v for k, v in kw.items()}

try:
    import torch
except ImportError:
    torch = None
finally:
    pass

def host_helper(x):
    return sum(i * 2 for i in x)

def plain(a, b=2):
    return a + b

@functools.lru_cache(maxsize=None)
def cached(n):
    return n

@dataclass
class Point:
    x: int

if __name__ == "__main__":
    grid = lambda meta: (meta["BLOCK"],)
    print(f"{grid({'BLOCK': 4})!r:>{10}}", end="")
elif True:
    pass
else:
    pass

async def fetch():
    await thing()

for i in range(3):
    print(i)
while False:
    pass
with open("x") as f:
    data = f.read()
x = [
  1,
     2]
weird = 1 if True else 2
)py";
  // The try block's import is kept (imports under if/try/with bind, as far as text can tell).
  EXPECT_EQ(dumpModule(src), "(module\n"
                             "  (import (warpweave as ww))\n"
                             "  (import (torch as torch))\n"
                             "  (= x (list 1 2))\n"
                             "  (= weird (ifexp True 1 2))\n"
                             "  (def plain (a (b = 2))\n"
                             "    (return (+ a b)))\n"
                             "  (def cached (n)\n"
                             "    (decorators (call functools.lru_cache (kw maxsize None)))\n"
                             "    (return n)))");
}

TEST(Module, KernelsAmongHostCode) {
  std::string src = "import warpweave as ww\n"
                    "def host():\n"
                    "    return {1: 2}\n"
                    "@ww.jit\n"
                    "def k1(x):\n"
                    "    pass\n"
                    "if __name__ == '__main__':\n"
                    "    k1[(1,)](x)\n"
                    "@warpweave.jit\n"
                    "def k2(y):\n"
                    "    return y\n";
  SourceManager sm;
  uint32_t id = sm.addFile("m.py", src);
  ast::Module m = frontend::parseModule(sm, id);
  ASSERT_EQ(m.functions.size(), 2u);
  EXPECT_EQ(m.functions[0]->name, "k1");
  EXPECT_EQ(m.functions[1]->name, "k2");
  EXPECT_EQ(m.functions[1]->loc.line, 10u);
}

// ---------------------------------------------------------------------------------------------
// Kernel code: unsupported Python and syntax errors
// ---------------------------------------------------------------------------------------------

TEST(KernelErrors, UnsupportedStatements) {
  EXPECT_EQ(kernelError("    class A:\n        pass\n"),
            "3:5: class definitions are not supported in kernel code; only the Python subset of "
            "LANGUAGE.md is accepted inside @jit functions");
  EXPECT_EQ(kernelError("    try:\n        pass\n    except E:\n        pass\n"),
            "3:5: 'try' statements are not supported in kernel code; kernels cannot catch "
            "exceptions");
  EXPECT_EQ(kernelError("    raise ValueError()\n"),
            "3:5: 'raise' is not supported in kernel code; use tl.static_assert or "
            "tl.device_assert");
  EXPECT_EQ(kernelError("    yield x\n"),
            "3:5: 'yield' is not supported in kernel code: kernels are not generators");
  EXPECT_EQ(kernelError("    y = 1\n    global G\n"),
            "4:5: 'global' declarations are not supported in kernel code; read module-level "
            "constants directly or pass values as parameters");
  EXPECT_EQ(kernelError("    nonlocal G\n"),
            "3:5: 'nonlocal' declarations are not supported in kernel code; read module-level "
            "constants directly or pass values as parameters");
  EXPECT_EQ(kernelError("    del x\n"),
            "3:5: 'del' is not supported in kernel code; names live until the function returns");
  EXPECT_EQ(kernelError("    async with a:\n        pass\n"),
            "3:5: 'async' is not supported in kernel code; use 'with tlx.async_tasks():' for "
            "concurrent warp groups");
  EXPECT_EQ(kernelError("    y = await x\n"),
            "3:9: 'await' is not supported in kernel code; use 'with tlx.async_tasks():' for "
            "concurrent warp groups");
  EXPECT_EQ(kernelError("    def inner():\n        pass\n"),
            "3:5: nested function definitions are not supported in kernel code; define a @jit "
            "helper at module level and call it");
  EXPECT_EQ(kernelError("    import math\n"),
            "3:5: import statements are not allowed inside a kernel; import at module level");
  EXPECT_EQ(kernelError("    from math import sqrt\n"),
            "3:5: import statements are not allowed inside a kernel; import at module level");
  EXPECT_EQ(kernelError("    else:\n        pass\n"),
            "3:5: 'else' without a matching 'if', 'for' or 'while' at the same indentation");
}

TEST(KernelErrors, UnsupportedExpressions) {
  EXPECT_EQ(kernelError("    f = lambda a: a\n"),
            "3:9: lambda expressions are not supported in kernel code; define a @jit helper at "
            "module level");
  EXPECT_EQ(kernelError("    y = sum(i for i in range(4))\n"),
            "3:15: generator expressions are not supported in kernel code; use a list "
            "comprehension ('[f(i) for i in range(N)]', a tuple) or a tl.static_range loop");
  EXPECT_EQ(kernelError("    y = (i for i in range(4))\n"),
            "3:12: generator expressions are not supported in kernel code; use a list "
            "comprehension ('[f(i) for i in range(N)]', a tuple) or a tl.static_range loop");
  EXPECT_EQ(kernelError("    y = [i for i in range(4)\n"), "3:9: '[' was never closed");
  EXPECT_EQ(kernelError("    y = [i for i range(4)]\n"),
            "3:18: expected 'in' after the comprehension's target, found 'range'");
  EXPECT_EQ(kernelError("    d = {'a': 1}\n"),
            "3:9: dict and set literals are not supported in kernel code; use a tuple");
  EXPECT_EQ(kernelError("    s = {1, 2}\n"),
            "3:9: dict and set literals are not supported in kernel code; use a tuple");
  EXPECT_EQ(kernelError("    f(*args)\n"),
            "3:7: starred expressions ('*x') are not supported in kernel code; write the "
            "elements out");
  EXPECT_EQ(kernelError("    a, *b = t\n"),
            "3:8: starred expressions ('*x') are not supported in kernel code; write the "
            "elements out");
  EXPECT_EQ(kernelError("    f(**kw)\n"),
            "3:7: '**' argument unpacking is not supported in kernel code; pass keyword "
            "arguments explicitly");
  EXPECT_EQ(kernelError("    if (n := 3) > 2:\n        pass\n"),
            "3:11: assignment expressions (':=') are not supported in kernel code; assign in a "
            "separate statement");
  EXPECT_EQ(kernelError("    s = f\"{x}\"\n"),
            "3:9: f-strings are not supported in kernel code; use a plain string literal");
  EXPECT_EQ(kernelError("    s = b\"x\"\n"),
            "3:9: bytes literals are not supported in kernel code; use a str literal");
  EXPECT_EQ(kernelError("    y = x[..., 0]\n"),
            "3:11: '...' (Ellipsis) is not supported in kernel code; index every dimension with "
            "':' or None");
  EXPECT_EQ(kernelError("    ...\n"),
            "3:5: '...' (Ellipsis) is not supported in kernel code; index every dimension with "
            "':' or None");
  EXPECT_EQ(kernelError("    y = 2j\n"), "3:9: complex literal 2j is not supported in kernel code");
  EXPECT_EQ(kernelError("    y = 9223372036854775808\n"), "no error");
  EXPECT_EQ(kernelError("    y = 18446744073709551615\n"), "no error");
  EXPECT_EQ(kernelError("    y = 18446744073709551616\n"),
            "3:9: integer literal 18446744073709551616 does not fit in 64 bits (kernels take "
            "integers from -2**63 to 2**64 - 1)");
  EXPECT_EQ(kernelError("    y = 9223372036854775807\n"), "no error");
}

TEST(KernelErrors, Signatures) {
  EXPECT_EQ(errorOf("@ww.jit\ndef k(x, *args):\n    pass\n"),
            "2:10: variadic parameters ('*args') are not supported in kernel functions; list "
            "every parameter explicitly");
  EXPECT_EQ(errorOf("@ww.jit\ndef k(x, **kw):\n    pass\n"),
            "2:10: variadic parameters ('**kw') are not supported in kernel functions; list "
            "every parameter explicitly");
  EXPECT_EQ(errorOf("@ww.jit\ndef k(x, *, y):\n    pass\n"),
            "2:10: the keyword-only marker '*' is not supported in kernel functions; declare "
            "plain parameters");
  EXPECT_EQ(errorOf("@ww.jit\ndef k(x, /, y):\n    pass\n"),
            "2:10: the positional-only marker '/' is not supported in kernel functions; declare "
            "plain parameters");
  EXPECT_EQ(errorOf("@ww.jit\ndef k(x, x):\n    pass\n"),
            "2:10: duplicate parameter 'x' in function definition");
  EXPECT_EQ(errorOf("@ww.jit\ndef k(x=1, y):\n    pass\n"),
            "2:12: parameter 'y' without a default follows a parameter with a default");
  EXPECT_EQ(errorOf("@ww.jit\ndef k(x y):\n    pass\n"),
            "2:9: expected ',' or ')' in the parameter list, found 'y'");
  EXPECT_EQ(errorOf("@ww.jit\ndef (x):\n    pass\n"),
            "2:5: expected a function name after 'def', found '('");
  EXPECT_EQ(errorOf("@ww.jit\ndef k(x)\n    pass\n"),
            "2:9: expected ':' after the function signature");
  EXPECT_EQ(errorOf("@ww.jit\nasync def k(x):\n    pass\n"),
            "2:1: @jit must decorate a function definition ('def name(...):'), found 'async'");
  EXPECT_EQ(errorOf("@ww.jit\nclass K:\n    pass\n"),
            "2:1: @jit must decorate a function definition ('def name(...):'), found 'class'");
}

TEST(KernelErrors, Decorators) {
  EXPECT_EQ(errorOf("@functools.cache\n@ww.jit\ndef k(x):\n    pass\n"),
            "1:2: decorator @functools.cache is not supported on a kernel; only @jit, with "
            "@autotune and @heuristics stacked above it, is accepted");
  EXPECT_EQ(errorOf("@ww.jit\n@ww.autotune(configs=[], key=[])\ndef k(x):\n    pass\n"),
            "1:2: @ww.jit must be the innermost decorator (directly above 'def'); put @autotune "
            "and @heuristics above it");
  EXPECT_EQ(errorOf("@ww.jit\n@ww.jit\ndef k(x):\n    pass\n"),
            "1:2: @ww.jit must be the innermost decorator (directly above 'def'); put @autotune "
            "and @heuristics above it");
  EXPECT_EQ(kernelError("    @ww.jit\n    def inner():\n        pass\n"),
            "3:5: decorators and nested function definitions are not supported in kernel code; "
            "define a @jit helper at module level and call it");
}

TEST(KernelErrors, SyntaxErrors) {
  EXPECT_EQ(kernelError("    if x == 1\n        pass\n"),
            "3:14: expected ':' after 'if' condition");
  EXPECT_EQ(kernelError("    if x y:\n        pass\n"),
            "3:10: expected ':' after 'if' condition, found 'y'");
  EXPECT_EQ(kernelError("    if x:\n        pass\n    elif y\n        pass\n"),
            "5:11: expected ':' after 'elif' condition");
  EXPECT_EQ(kernelError("    while x\n        pass\n"),
            "3:12: expected ':' after 'while' condition");
  EXPECT_EQ(kernelError("    if x = 1:\n        pass\n"),
            "3:10: expected ':' after 'if' condition, found '='; use '==' to compare");
  EXPECT_EQ(kernelError("    y = a && b\n"), "3:11: '&&' is not Python; use 'and'");
  EXPECT_EQ(kernelError("    y = a || b\n"), "3:11: '||' is not Python; use 'or'");
  EXPECT_EQ(kernelError("    for i range(3):\n        pass\n"),
            "3:11: expected 'in' after the 'for' loop target, found 'range'");
  EXPECT_EQ(kernelError("    for i in range(3)\n        pass\n"),
            "3:22: expected ':' after 'for' loop header");
  EXPECT_EQ(kernelError("    with a() b:\n        pass\n"),
            "3:14: expected ':' after 'with' items, found 'b'");
  EXPECT_EQ(kernelError("    if x:\n    pass\n"),
            "4:5: expected an indented block after 'if' statement on line 3");
  EXPECT_EQ(kernelError("    y = 1\n        z = 2\n"), "4:9: unexpected indent");
  EXPECT_EQ(kernelError("    if x:\n        y = 1\n      z = 2\n"),
            "5:7: unindent does not match any outer indentation level");
  EXPECT_EQ(kernelError("    y = 1 2\n"),
            "3:11: expected end of line after the statement, found '2'");
  EXPECT_EQ(kernelError("    y = \n"), "3:9: expected an expression");
  EXPECT_EQ(kernelError("    y = x +\n"), "3:12: expected an expression");
  EXPECT_EQ(kernelError("    y = f(a b)\n"),
            "3:13: expected ',' or ')' in the call arguments, found 'b'");
  EXPECT_EQ(kernelError("    y = f(k=1, 2)\n"),
            "3:16: positional argument follows keyword argument");
  EXPECT_EQ(kernelError("    y = f(k=1, k=2)\n"), "3:16: keyword argument 'k' repeated");
  EXPECT_EQ(kernelError("    f() = 1\n"),
            "3:5: cannot assign to a function call; assignment targets are names, tuples of "
            "names, attributes and subscripts");
  EXPECT_EQ(kernelError("    a + b = 1\n"),
            "3:7: cannot assign to an operator expression; assignment targets are names, tuples "
            "of names, attributes and subscripts");
  EXPECT_EQ(kernelError("    a, b += 1\n"),
            "3:5: '+=' cannot assign to a tuple; its target must be a name, an attribute or a "
            "subscript");
  EXPECT_EQ(kernelError("    a, b: int = 1, 2\n"),
            "3:5: only a single target can be annotated; annotate each name in its own "
            "assignment");
  EXPECT_EQ(kernelError("    y = x if c\n"),
            "3:15: expected 'else' in conditional expression 'x if c else y'");
  EXPECT_EQ(kernelError("    y = x[]\n"), "3:11: expected an index inside '[]'");
  EXPECT_EQ(kernelError("    y = x.if\n"),
            "3:11: expected an attribute name after '.', found keyword 'if' (keywords cannot be "
            "used as names)");
  EXPECT_EQ(kernelError("    if x: for i in y: pass\n"),
            "3:11: 'for' cannot follow ':' on the same line; put it on its own indented line");
  EXPECT_EQ(kernelError("    y = 'abc\n"),
            "3:9: unterminated string literal (missing closing quote on this line)");
  EXPECT_EQ(kernelError("    y = (1 +\n    z = 2\n"), "3:9: '(' was never closed");
}

TEST(KernelErrors, RenderedDiagnostics) {
  EXPECT_EQ(renderedError("@ww.jit\ndef k(x):\n    if x == 1\n        pass\n"),
            "kern.py:3:14: error: expected ':' after 'if' condition\n"
            "      if x == 1\n"
            "               ^");
  EXPECT_EQ(renderedError("@ww.jit\ndef k(x):\n    y = f(a,\n          b c)\n"),
            "kern.py:4:13: error: expected ',' or ')' in the call arguments, found 'c'\n"
            "            b c)\n"
            "              ^\n"
            "kern.py:3:10: note: the argument list opens here\n"
            "      y = f(a,\n"
            "           ^");
  EXPECT_EQ(renderedError("@ww.jit\ndef k(x):\n\ty = lambda: 0\n"),
            "kern.py:3:6: error: lambda expressions are not supported in kernel code; define a "
            "@jit helper at module level\n"
            "  \ty = lambda: 0\n"
            "  \t    ^");
}

TEST(KernelErrors, HostCodeErrorsDoNotLeakButKernelErrorsDo) {
  // The same broken body is silently skipped in a plain function and rejected in a kernel.
  EXPECT_EQ(errorOf("def host(x):\n    y = sum(i for i in x)\n"), "no error");
  EXPECT_EQ(errorOf("@ww.jit\ndef k(x):\n    y = sum(i for i in x)\n").substr(0, 5), "3:15:");
  // A kernel error after host code still carries the right location.
  EXPECT_EQ(errorOf("X = {1: 2}\nclass C: pass\n@triton.jit\ndef k(x):\n    del x\n"),
            "5:5: 'del' is not supported in kernel code; names live until the function returns");
}

// ---------------------------------------------------------------------------------------------
// The kernel library and the examples parse strictly
// ---------------------------------------------------------------------------------------------

namespace {

std::vector<std::string> pythonFilesUnder(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".py")
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace

TEST(KernelLibrary, EveryKernelFileParsesAndHoldsOnlyJitFunctions) {
  std::map<std::string, std::vector<std::string>> expected = {
      {"vector_add.py", {"add_kernel", "add_kernel_persistent"}},
      {"softmax.py", {"softmax_kernel", "softmax_online_kernel", "softmax_bwd_kernel"}},
      {"layernorm.py",
       {"layernorm_fwd_kernel", "layernorm_fwd_fused_kernel", "_add_pair", "_row_or_zeros",
        "layernorm_bwd_dx_kernel", "layernorm_bwd_partials_kernel", "layernorm_bwd_dwdb_kernel"}},
      {"matmul.py", {"grouped_tile", "wrapped_tile", "leaky_relu", "matmul_kernel"}},
      {"attention.py", {"attend_block_range", "attention_fwd_kernel"}},
      {"attention_bwd.py",
       {"row_block", "attention_bwd_preprocess_kernel", "dkdv_from_query_range",
        "dq_from_key_range", "attention_bwd_dkdv_kernel", "attention_bwd_dq_kernel"}},
      {"attention_varlen.py",
       {"program_sequence", "attention_varlen_fwd_kernel", "attention_varlen_bwd_preprocess_kernel",
        "attention_varlen_bwd_dkdv_kernel", "attention_varlen_bwd_dq_kernel"}},
      {"embedding_bag.py", {"embedding_bag_kernel", "embedding_bag_bwd_kernel"}},
      {"scaled_mm.py", {"scaled_mm_kernel", "scaled_mm_tma_kernel"}},
      {"grouped_mm.py", {"group_bounds", "grouped_mm_kernel", "grouped_mm_ragged_k_kernel"}},
      {"reduction.py",
       {"row_sum_kernel", "_block_max", "row_max_kernel", "_chunk_of_rows",
        "row_sum_partial_kernel", "row_max_partial_kernel", "row_max_combine_kernel"}},
      {"hopper/gemm_pipelined.py", {"load_stage", "gemm_pipelined_kernel"}},
      {"hopper/gemm_ws.py",
       {"rastered_tile", "release", "split_columns", "store_chunk", "store_c", "alloc_ring",
        "acquire_stage", "load_stage", "issue_stage", "add_partial", "zero_k_outside", "mma_tile",
        "mma_tile_rest", "issue_part", "mma_tile_split", "pack_pairs", "store_tile", "store_chunks",
        "gemm_ws_kernel"}},
      {"hopper/scaled_mm_ws.py",
       {"cluster_tile", "scale_vector", "scaled_tile", "epilogue", "tile_offsets", "tile_epilogue",
        "finish_tile", "scaled_mm_ws_kernel"}},
      {"hopper/grouped_mm_ws.py",
       {"next_group", "store_chunk_rows", "store_rows", "grouped_mm_ws_kernel", "group_k_range",
        "group_k_steps", "grouped_mm_ragged_k_ws_kernel"}},
      {"hopper/gemm_ws_pingpong.py", {"gemm_ws_pingpong_kernel"}},
      {"hopper/attention_ws.py",
       {"wait_turn", "pass_turn", "online_softmax", "attend_block", "load_q_and_kv", "program_rows",
        "attention_ws_kernel"}},
      {"hopper/attention_bwd_ws.py",
       {"attention_bwd_ws_preprocess_kernel", "attention_bwd_ws_postprocess_kernel", "query_block",
        "attention_bwd_ws_kernel"}},
      {"hopper/softmax_tma.py", {"load_row", "rows_of_program", "store_row", "softmax_tma_kernel"}},
      {"hopper/layernorm_tma.py",
       {"load_row_pair", "layernorm_fwd_tma_kernel", "layernorm_bwd_tma_kernel"}},
      {"hopper/rows_cluster.py",
       {"publish_partials", "peer_partials", "exchange_slots", "push_pair", "wait_pairs", "pair_of",
        "pair_sums", "softmax_stats_of_pairs", "cluster_slice", "_slice_of_row", "_store_slice",
        "softmax_cluster_kernel", "slice_counts", "layernorm_fwd_cluster_kernel", "_stats_or_zero",
        "layernorm_bwd_cluster_kernel"}},
      {"hopper/rows_smem.py",
       {"load_slice", "start_ring", "chunk_view", "_max_of_chunks", "_exp_of_chunks",
        "_store_chunks", "softmax_smem_kernel", "_sum_of_chunks", "_squares_of_chunks",
        "_normalize_chunks", "layernorm_fwd_smem_kernel"}},
      {"blackwell/gemm_ws.py",
       {"grid_shape", "tile_of", "request_tile", "next_tile", "acquire_stage", "wait_stage",
        "acquire_acc", "store_acc", "producer_task", "mma_task", "epilogue_task", "alloc_common",
        "gemm_ws_kernel"}},
      {"blackwell/scaled_mm_mx.py", {"scaled_mm_mx_kernel"}},
      {"blackwell/attention_ws.py", {"softmax_step", "attention_ws_kernel"}},
      {"blackwell/attention_bwd_ws.py", {"issue_dk_dq", "attention_bwd_ws_kernel"}},
  };
  const std::string kernelsDir = std::string(WW_SOURCE_DIR) + "/python/warpweave/ops/kernels";
  std::vector<std::string> files = pythonFilesUnder(kernelsDir);
  size_t kernelFiles = 0;
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    // Keyed by the path under kernels/: hopper/ and blackwell/ hold files of the same name.
    std::string base = std::filesystem::relative(path, kernelsDir).generic_string();
    if (!expected.count(base)) { // host-side modules (ops.py) are checked below
      EXPECT_EQ(readFile(path).find("@ww.jit"), std::string::npos)
          << "a kernel file this test does not list";
      continue;
    }
    ++kernelFiles;
    SourceManager sm;
    uint32_t id = sm.addFile(path, readFile(path));
    ast::Module m;
    try {
      m = frontend::parseModule(sm, id);
    } catch (CompileError& e) {
      e.render(sm);
      ADD_FAILURE() << e.what();
      continue;
    }
    std::vector<std::string> names;
    for (const auto& fn : m.functions) {
      EXPECT_TRUE(ast::isJitFunction(*fn)) << fn->name;
      EXPECT_FALSE(fn->body.empty()) << fn->name;
      names.push_back(fn->name);
    }
    EXPECT_EQ(names, expected[base]);
    bool importsTl = false;
    for (const auto& imp : m.imports)
      for (const auto& a : imp->names) importsTl |= a.module == "warpweave.language";
    EXPECT_TRUE(importsTl);
  }
  EXPECT_EQ(kernelFiles, expected.size());
}

TEST(KernelLibrary, RelativeImportsNameJitFunctionsOfTheFilesTheyName) {
  // `from ..matmul import grouped_tile`: the helper is compiled from the file the import names
  // (readSourceWithImports), so that file must define it; one definition serves every kernel.
  int imported = 0;
  for (const std::string& path :
       pythonFilesUnder(std::string(WW_SOURCE_DIR) + "/python/warpweave/ops/kernels")) {
    SCOPED_TRACE(path);
    std::vector<SourceFile> files = readSourceWithImports(path);
    SourceManager sm;
    std::vector<ast::Module> modules;
    for (const SourceFile& f : files)
      modules.push_back(frontend::parseModule(sm, sm.addFile(f.path, f.text)));
    if (std::none_of(modules[0].functions.begin(), modules[0].functions.end(),
                     [](const auto& fn) { return ast::isJitFunction(*fn); }))
      continue; // host modules (ops.py) import kernel modules, not helpers
    for (const auto& imp : modules[0].imports)
      for (const ast::ImportAlias& alias : imp->names) {
        if (alias.module.empty() || alias.module[0] != '.' || alias.module.back() == '.')
          continue; // absolute imports, and `from . import module`
        std::string stem = alias.module.substr(alias.module.rfind('.') + 1);
        bool defined = false;
        for (size_t i = 1; i < files.size(); ++i)
          if (std::filesystem::path(files[i].path).stem() == stem)
            for (const auto& fn : modules[i].functions)
              defined |= fn->name == alias.name && ast::isJitFunction(*fn);
        EXPECT_TRUE(defined) << "from " << alias.module << " import " << alias.name;
        ++imported;
      }
  }
  EXPECT_GE(imported, 5); // the Hopper GEMMs' grouped_tile, the TMA kernels' row helpers
}

TEST(KernelLibrary, HostModulesBesideTheKernelsParse) {
  for (const std::string& path :
       pythonFilesUnder(std::string(WW_SOURCE_DIR) + "/python/warpweave/ops/kernels")) {
    SCOPED_TRACE(path);
    SourceManager sm;
    uint32_t id = sm.addFile(path, readFile(path));
    try {
      frontend::parseModule(sm, id);
    } catch (CompileError& e) {
      e.render(sm);
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(KernelLibrary, ExamplesParse) {
  for (const std::string& path : pythonFilesUnder(std::string(WW_SOURCE_DIR) + "/examples")) {
    SCOPED_TRACE(path);
    SourceManager sm;
    uint32_t id = sm.addFile(path, readFile(path));
    try {
      ast::Module m = frontend::parseModule(sm, id);
      EXPECT_FALSE(m.functions.empty());
    } catch (CompileError& e) {
      e.render(sm);
      ADD_FAILURE() << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Micro-benchmark: prints timings, asserts only that the input parses as intended
// ---------------------------------------------------------------------------------------------

TEST(FrontendBench, Parse200LineKernel) {
  std::string src = "import warpweave as ww\nimport warpweave.language as tl\n\n\n@ww.jit\n"
                    "def big_kernel(x_ptr, y_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):\n"
                    "    pid = tl.program_id(axis=0)\n"
                    "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
                    "    acc = tl.zeros([BLOCK], dtype=tl.float32)\n";
  for (int i = 0; i < 19; ++i) {
    std::string s = std::to_string(i);
    src += "    # step " + s +
           ": load, mix, accumulate\n"
           "    mask" +
           s + " = (offs + " + s +
           ") < n\n"
           "    a" +
           s + " = tl.load(x_ptr + offs * stride + " + s + ", mask=mask" + s +
           ", other=0.0).to(tl.float32)\n"
           "    b" +
           s + " = tl.load(y_ptr + offs + " + s + ", mask=mask" + s +
           ", other=1.0)\n"
           "    c" +
           s + " = tl.where(a" + s + " > b" + s + ", a" + s + " * 0.5 - b" + s + ", -a" + s +
           " ** 2 / (b" + s +
           " + 1e-6))\n"
           "    for j in tl.static_range(2):\n"
           "        c" +
           s + " = c" + s + " * (j + 1) + tl.sum(c" + s +
           "[:, None], axis=1)\n"
           "    if " +
           s +
           " % 2 == 0 and BLOCK >= 128:\n"
           "        acc += c" +
           s +
           "\n"
           "    else:\n"
           "        acc -= tl.maximum(c" +
           s + ", 0.0)\n";
  }
  src += "    tl.store(out_ptr + offs, acc, mask=offs < n)\n";
  size_t lines = static_cast<size_t>(std::count(src.begin(), src.end(), '\n'));
  ASSERT_GE(lines, 200u);

  SourceManager sm;
  uint32_t id = sm.addFile("big.py", src);
  constexpr int kRuns = 200;
  // CPU time as well as wall time: on a shared machine the wall clock mostly measures waiting.
  std::clock_t c0 = std::clock();
  auto t0 = std::chrono::steady_clock::now();
  size_t tokens = 0;
  for (int i = 0; i < kRuns; ++i) tokens = frontend::tokenize(sm, id).size();
  std::clock_t c1 = std::clock();
  auto t1 = std::chrono::steady_clock::now();
  size_t statements = 0;
  for (int i = 0; i < kRuns; ++i) {
    ast::Module m = frontend::parseModule(sm, id);
    statements = m.functions.at(0)->body.size();
  }
  std::clock_t c2 = std::clock();
  auto t2 = std::chrono::steady_clock::now();
  auto cpuMs = [](std::clock_t a, std::clock_t b) {
    return 1000.0 * static_cast<double>(b - a) / CLOCKS_PER_SEC / kRuns;
  };
  double lexMs = std::chrono::duration<double, std::milli>(t1 - t0).count() / kRuns;
  double parseMs = std::chrono::duration<double, std::milli>(t2 - t1).count() / kRuns;
  std::printf("frontend bench: %zu lines, %zu tokens, per file: lex %.3f ms CPU (%.3f wall), "
              "lex+parse %.3f ms CPU (%.3f wall)\n",
              lines, tokens, cpuMs(c0, c1), lexMs, cpuMs(c1, c2), parseMs);
  EXPECT_EQ(statements, 3u + 19u * 6u + 1u);
}

TEST(Module, CrlfLineEndings) {
  EXPECT_EQ(dumpModule("import warpweave as ww\r\n@ww.jit\r\ndef k(x):\r\n    s = '''a\r\nb'''\r\n"
                       "    if x:\r\n        return s\r\n"),
            "(module\n"
            "  (import (warpweave as ww))\n"
            "  (def k (x)\n"
            "    (decorators ww.jit)\n"
            "    (= s \"a\\nb\")\n"
            "    (if x\n"
            "      (return s))))");
}

TEST(Module, ByteOrderMarkIsIgnored) {
  EXPECT_EQ(dumpModule("\xEF\xBB\xBFimport warpweave as ww\nX = 1\n"),
            "(module\n  (import (warpweave as ww))\n  (= X 1))");
}

TEST(Module, HostDecoratedFunctionsAreSkippedWhole) {
  // The decorator cannot be held by the AST, so the function it decorates is skipped with it,
  // not kept as if it were undecorated; the next function is unaffected.
  EXPECT_EQ(dumpModule("@register(lambda f: f)\ndef host(): return 1\n"
                       "@dataclass\nclass P:\n    x: int\n"
                       "def plain(): return 2\n"),
            "(module\n  (def plain ()\n    (return 2)))");
}

TEST(Parser, ExpressionEntryPointErrors) {
  auto err = [](const std::string& text) {
    SourceManager sm;
    uint32_t id = sm.addFile("sig", text);
    try {
      frontend::parseExpression(sm, id);
    } catch (const CompileError& e) {
      const Diagnostic& d = e.diagnostic();
      return std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " + d.message;
    }
    return std::string("no error");
  };
  EXPECT_EQ(err(""), "1:1: expected an expression, found end of file");
  EXPECT_EQ(err("1 2"), "1:3: unexpected '2' after the expression");
  EXPECT_EQ(err("x = 1"), "1:3: unexpected '=' after the expression");
  EXPECT_EQ(err("tl.float16\n"), "no error");
  EXPECT_EQ(err("99999999999999999999"),
            "1:1: integer literal 99999999999999999999 does not fit in 64 bits (kernels take "
            "integers from -2**63 to 2**64 - 1)");
}
