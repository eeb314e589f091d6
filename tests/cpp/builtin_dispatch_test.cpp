// The dispatch tables of the compiler and the interpreter: every `tl.*` / `tlx.*` builtin in its
// namespace's table resolves and reaches its handler (never "unknown name"), an unknown name is a
// located error with a suggestion, the tlx names the Python package exports are in the table, and
// the interpreter has a rule for every opcode of Ops.def.
#include "frontend/Parser.h"
#include "interp/Interpreter.h"
#include "ir/IR.h"
#include "specialize/BuiltinTable.h"
#include "specialize/Specializer.h"
#include "specialize/Values.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

using namespace ww;

namespace {

/// Specializes kernel `k` whose body is `body` (its first line is line 5); returns the rendered
/// error, or "" when it compiled.
std::string specializeBody(const std::string& body) {
  const std::string src = "import warpweave as ww\n"
                          "import warpweave.language as tl\n"
                          "from warpweave import tlx\n"
                          "@ww.jit\ndef k(x_ptr, n):\n" +
                          body;
  SourceManager sm;
  try {
    ast::Module m = frontend::parseModule(sm, sm.addFile("test.py", src));
    specialize::SpecializeInput in;
    in.sources = &sm;
    in.modules.push_back(&m);
    in.kernel = "k";
    in.signature = parseSignature("x_ptr:*fp32,n:i32");
    specialize::specialize(in);
  } catch (CompileError& e) {
    e.render(sm);
    return e.what();
  }
  return "";
}

std::string firstLine(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

specialize::Val unusedHandler(specialize::Specializer&, const std::string&, specialize::CallSite&) {
  throw std::logic_error("not called");
}

} // namespace

TEST(BuiltinTable, RowsAreUniqueAndMembersKeepTableOrder) {
  using specialize::BuiltinTable;
  EXPECT_THROW((BuiltinTable{{"a", &unusedHandler}, {"a", &unusedHandler}}), std::logic_error);
  BuiltinTable t{{"b", &unusedHandler}, {"m.only", &unusedHandler, false}, {"a", &unusedHandler}};
  EXPECT_EQ(t.memberNames(), (std::vector<std::string>{"b", "a"}));
  EXPECT_NE(t.find("m.only"), nullptr);
  EXPECT_FALSE(t.isMember("m.only"));
  EXPECT_TRUE(t.isMember("a"));
  EXPECT_EQ(t.find("c"), nullptr);
}

TEST(BuiltinTable, EveryTlBuiltinResolvesToItsHandler) {
  // Called without arguments, each builtin answers for itself (a missing argument, a check of
  // its own) or compiles; none is an unknown name.
  const auto& table = specialize::tlBuiltins();
  ASSERT_GT(table.memberNames().size(), 70u);
  for (const std::string& name : table.memberNames()) {
    std::string err = specializeBody("    tl." + name + "()\n");
    EXPECT_EQ(err.find("unknown name"), std::string::npos) << name << ": " << err;
  }
  // Descriptor methods are rows of the table but not members of the tl namespace.
  EXPECT_NE(table.find("desc.load"), nullptr);
  EXPECT_FALSE(table.isMember("desc.load"));
}

TEST(BuiltinTable, EveryTlxBuiltinResolvesToItsHandler) {
  const auto& table = specialize::tlxBuiltins();
  ASSERT_GT(table.memberNames().size(), 50u);
  for (const std::string& name : table.memberNames()) {
    std::string err = specializeBody("    tlx." + name + "()\n");
    EXPECT_EQ(err.find("unknown name"), std::string::npos) << name << ": " << err;
  }
}

TEST(BuiltinTable, UnknownNamesAreLocatedWithTheNearestBuiltin) {
  EXPECT_EQ(firstLine(specializeBody("    y = tl.arnge(0, 16)\n")),
            "test.py:6:12: error: unknown name 'tl.arnge'; did you mean 'tl.arange'?");
  EXPECT_EQ(firstLine(specializeBody("    y = tl.cumsun(tl.arange(0, 16))\n")),
            "test.py:6:12: error: unknown name 'tl.cumsun'; did you mean 'tl.cumsum'?");
  EXPECT_EQ(
      firstLine(specializeBody("    tlx.barrier_wiat(0, 0)\n")),
      "test.py:6:9: error: unknown name 'tlx.barrier_wiat'; did you mean 'tlx.barrier_wait'?");
  // Far from every builtin: no suggestion, still located.
  EXPECT_EQ(firstLine(specializeBody("    y = tl.frobnicate_everything(1)\n")),
            "test.py:6:12: error: unknown name 'tl.frobnicate_everything'");
  // Tensor methods go through the same table (x.sqrt() is tl.sqrt(x)); a misspelled one is
  // refused where it is named.
  EXPECT_EQ(specializeBody("    x = tl.arange(0, 16).to(tl.float32)\n"
                           "    y = x.sqrt()\n"),
            "");
  std::string err = firstLine(specializeBody("    x = tl.arange(0, 16).to(tl.float32)\n"
                                             "    y = x.sqrtt()\n"));
  EXPECT_NE(err.find("test.py:7:"), std::string::npos) << err;
  EXPECT_NE(err.find("has no attribute 'sqrtt'; did you mean 'sqrt'?"), std::string::npos) << err;
}

TEST(BuiltinTable, TheTlxNamesOfThePythonPackageAreBuiltins) {
  // Every kernel-only name python/warpweave/tlx.py exports is one the compiler knows.
  std::ifstream in(std::string(WW_SOURCE_DIR) + "/python/warpweave/tlx.py");
  ASSERT_TRUE(in) << "python/warpweave/tlx.py";
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  size_t start = s.find("_FUNCTIONS = \"\"\"");
  ASSERT_NE(start, std::string::npos);
  start += 16;
  size_t end = s.find("\"\"\"", start);
  ASSERT_NE(end, std::string::npos);
  std::istringstream words(s.substr(start, end - start));
  int names = 0;
  for (std::string w; words >> w; ++names)
    EXPECT_TRUE(specialize::tlxBuiltins().isMember(w)) << "tlx." << w;
  EXPECT_GT(names, 40);
}

TEST(InterpreterDispatch, EveryOpcodeHasARule) {
  // Adding an op to Ops.def means adding its interpreter rule to the dispatch table.
  std::vector<std::pair<ir::OpCode, const char*>> ops;
#define OP(name, ...) ops.push_back({ir::OpCode::name, #name});
#include "ir/Ops.def"
#undef OP
  ASSERT_EQ(ops.size(), ir::kNumOpCodes);
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(size_t(ops[i].first), i); // dense, as the table indexed by opcode assumes
    EXPECT_TRUE(interp::implements(ops[i].first)) << ops[i].second;
  }
  EXPECT_FALSE(interp::implements(ir::OpCode(ops.size())));
}
