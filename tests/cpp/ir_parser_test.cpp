// The Tile IR parser (src/ir/Parser.h): print(parse(print(f))) == print(f) and the same IR for
// every kernel of the repo, compiled here through the driver; locations; and malformed text,
// which must fail with a located CompileError and never crash.
#include "ir/Builder.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "transforms/Passes.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

using namespace ww;
using namespace ww::ir;

namespace {

/// How one repo kernel compiles: its file, name, a signature the tests use for it, options.
struct RepoKernel {
  const char* file;
  const char* kernel;
  const char* signature;
  const char* target;
  int numWarps;
  int numStages;
  int numCtas;
};

#include "ir_parser_kernels.inc"

std::string str(const Attr& a) {
  if (auto* d = std::get_if<double>(&a)) {
    uint64_t bits;
    std::memcpy(&bits, d, 8);
    return "double " + std::to_string(bits) + (std::isnan(*d) ? " nan" : "");
  }
  if (auto* i = std::get_if<int64_t>(&a)) return "int " + std::to_string(*i);
  if (auto* s = std::get_if<std::string>(&a)) return "string " + *s;
  std::string r = "ints";
  for (int64_t v : std::get<std::vector<int64_t>>(a)) r += " " + std::to_string(v);
  return r;
}

/// The first difference between two functions' IR ("" when they are the same): names, types,
/// attributes (floats bit for bit, any NaN equal to any NaN), operands, regions and, when
/// `locs`, locations compared by file path, line and column.
class Comparer {
public:
  Comparer(const SourceManager* smA, const SourceManager* smB) : smA_(smA), smB_(smB) {}

  std::string compare(const Function& a, const Function& b) {
    if (a.name != b.name) return "kernel name";
    if (a.numWarps != b.numWarps || a.numStages != b.numStages || a.numCtas != b.numCtas)
      return "launch configuration";
    if (a.args.size() != b.args.size()) return "number of kernel args";
    for (size_t i = 0; i < a.args.size(); ++i) {
      const KernelArg &x = a.args[i], &y = b.args[i];
      if (x.name != y.name || !(x.type == y.type) || x.divisibility != y.divisibility ||
          x.equalsOne != y.equalsOne || !x.value != !y.value)
        return "kernel arg " + x.name;
      if (x.value) map_[x.value] = y.value;
    }
    if (smA_ && !sameLoc(a.loc, b.loc)) return "kernel location";
    return block(a.body, b.body, "body");
  }

private:
  bool sameLoc(SourceLoc x, SourceLoc y) const {
    if (!x.valid() || !y.valid()) return x.valid() == y.valid();
    return x.line == y.line && x.col == y.col && smA_->path(x.file) == smB_->path(y.file);
  }

  std::string block(const Block& a, const Block& b, const std::string& where) {
    if (a.numArgs() != b.numArgs()) return where + ": number of block args";
    for (unsigned i = 0; i < a.numArgs(); ++i) {
      if (!(a.arg(i)->type() == b.arg(i)->type()) || a.arg(i)->name != b.arg(i)->name)
        return where + ": block arg " + std::to_string(i);
      map_[a.arg(i)] = b.arg(i);
    }
    if (a.ops().size() != b.ops().size()) return where + ": number of ops";
    for (size_t k = 0; k < a.ops().size(); ++k) {
      const Op &x = *a.ops()[k], &y = *b.ops()[k];
      std::string at = where + ": op " + std::to_string(k) + " (" + x.name() + ")";
      if (x.code() != y.code()) return at + ": opcode";
      if (y.parentBlock() != &b) return at + ": parent block";
      if (smA_ && !sameLoc(x.loc(), y.loc())) return at + ": location";
      if (x.numOperands() != y.numOperands()) return at + ": number of operands";
      for (unsigned i = 0; i < x.numOperands(); ++i)
        if (map_[x.operand(i)] != y.operand(i)) return at + ": operand " + std::to_string(i);
      if (x.attrs().size() != y.attrs().size()) return at + ": number of attributes";
      for (size_t i = 0; i < x.attrs().size(); ++i)
        if (x.attrs()[i].name != y.attrs()[i].name ||
            str(x.attrs()[i].value) != str(y.attrs()[i].value))
          return at + ": attribute " + x.attrs()[i].name + " (" + str(x.attrs()[i].value) + " vs " +
                 str(y.attrs()[i].value) + ")";
      if (x.numRegions() != y.numRegions()) return at + ": number of regions";
      for (unsigned r = 0; r < x.numRegions(); ++r) {
        if (y.region(r)->parentOp() != &y) return at + ": region parent";
        std::string d = block(*x.region(r), *y.region(r), at + " region " + std::to_string(r));
        if (!d.empty()) return d;
      }
      if (x.numResults() != y.numResults()) return at + ": number of results";
      for (unsigned i = 0; i < x.numResults(); ++i) {
        if (!(x.result(i)->type() == y.result(i)->type()) || x.result(i)->name != y.result(i)->name)
          return at + ": result " + std::to_string(i);
        map_[x.result(i)] = y.result(i);
      }
    }
    return "";
  }

  const SourceManager* smA_;
  const SourceManager* smB_;
  std::unordered_map<const Value*, const Value*> map_;
};

std::unique_ptr<Function> parseText(SourceManager& sm, const std::string& text,
                                    const std::string& path = "t.tir") {
  return parseFunction(sm, sm.addFile(path, text));
}

/// The rendered error parsing `text` gives, or "" when it parses.
std::string parseError(const std::string& text) {
  SourceManager sm;
  try {
    parseModule(sm, sm.addFile("t.tir", text));
  } catch (CompileError& e) {
    e.render(sm);
    return e.what();
  }
  return "";
}

CompiledKernel compileRepoKernel(const RepoKernel& rk) {
  CompileRequest req;
  req.files = readSourceWithImports(std::string(WW_SOURCE_DIR) + "/" + rk.file);
  req.kernel = rk.kernel;
  req.signature = parseSignature(rk.signature);
  req.options.target = parseTarget(rk.target);
  req.options.numWarps = rk.numWarps;
  req.options.numStages = rk.numStages;
  req.options.numCtas = rk.numCtas;
  req.stage = Stage::TileIR;
  return compile(req);
}

const char* kVectorAdd =
    R"(kernel @add(%0_x: ptr<fp32> {div=16}, %1_out: ptr<fp32> {div=16}, %2_n: i32) num_warps=4 {
  %3 = program_id {axis = 0} : i32
  %4 = constant {value = 128} : i32
  %5_pid = mul %3, %4 : i32
  %6 = arange {start = 0, end = 128} : tensor<128xi32>
  %7 = splat %5_pid : tensor<128xi32>
  %8_offsets = add %7, %6 : tensor<128xi32>
  %9 = splat %2_n : tensor<128xi32>
  %10_mask = cmp %8_offsets, %9 {pred = "lt"} : tensor<128xi1>
  %11 = splat %0_x : tensor<128xptr<fp32>>
  %12 = addptr %11, %8_offsets : tensor<128xptr<fp32>>
  %13 = load %12, %10_mask {has_mask = 1, has_other = 0} : tensor<128xfp32>
  %14 = splat %1_out : tensor<128xptr<fp32>>
  %15 = addptr %14, %8_offsets : tensor<128xptr<fp32>>
  store %15, %13, %10_mask {has_mask = 1}
  return
}
)";

} // namespace

TEST(IrParser, RoundTripsEveryRepoKernel) {
  ASSERT_GT(std::size(kRepoKernels), 100u);
  for (const RepoKernel& rk : kRepoKernels) {
    SCOPED_TRACE(std::string(rk.file) + " " + rk.kernel + " " + rk.target);
    CompiledKernel k;
    try {
      k = compileRepoKernel(rk);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    ASSERT_TRUE(k.module && k.module->functions.size() == 1);
    Function& fn = *k.module->functions.front();
    const std::string text = print(fn);
    ASSERT_EQ(text, k.tileIR);

    SourceManager sm;
    std::unique_ptr<Function> parsed;
    try {
      parsed = parseText(sm, text);
    } catch (CompileError& e) {
      e.render(sm);
      ADD_FAILURE() << e.what();
      continue;
    }
    EXPECT_EQ(print(*parsed), text);
    EXPECT_EQ(Comparer(nullptr, nullptr).compare(fn, *parsed), "");
    EXPECT_NO_THROW(transforms::verify(*parsed));

    // With locations: the ops keep their kernel-source locations through the text.
    PrintOptions withLocs{k.module->sources};
    const std::string located = print(fn, withLocs);
    EXPECT_NE(located.find(std::string(" loc(\"")), std::string::npos);
    SourceManager sm2;
    std::unique_ptr<Function> relocated = parseText(sm2, located);
    EXPECT_EQ(print(*relocated, PrintOptions{&sm2}), located);
    EXPECT_EQ(Comparer(k.module->sources, &sm2).compare(fn, *relocated), "");

    // The parsed IR behaves as the original under the passes.
    transforms::runCleanupPipeline(fn);
    transforms::runCleanupPipeline(*parsed);
    EXPECT_EQ(print(*parsed), print(fn));
  }
}

TEST(IrParser, ReadsHandWrittenIr) {
  // Names without numbers, comments, blank lines, several kernels, num_stages and num_ctas.
  const char* text = R"(// RUN: ww-opt %s
kernel @first(%p: ptr<fp32>, <folded one>: i32 {==1}, %n: i64 {div=16}) num_warps=8 num_ctas=2 num_stages=4 {

  %c = constant {value = 2.5} : fp32   // a comment
  %i = constant {value = 0} : i32
  %r = for %i, %i, %i, %c : fp32 { ^(%iv: i32, %acc: fp32)
    %s = add %acc, %acc : fp32
    yield %s
  }
  store %p, %r {has_mask = 0}
  return
}
kernel @second() num_warps=4 {
  return
}
)";
  SourceManager sm;
  Module m = parseModule(sm, sm.addFile("h.tir", text));
  ASSERT_EQ(m.functions.size(), 2u);
  const Function& f = *m.functions[0];
  EXPECT_EQ(f.numWarps, 8);
  EXPECT_EQ(f.numCtas, 2);
  EXPECT_EQ(f.numStages, 4);
  ASSERT_EQ(f.args.size(), 3u);
  EXPECT_EQ(f.args[1].name, "one");
  EXPECT_TRUE(f.args[1].equalsOne);
  EXPECT_EQ(f.args[1].value, nullptr);
  EXPECT_EQ(f.args[2].divisibility, 16);
  EXPECT_EQ(f.body.numArgs(), 2u);
  EXPECT_NO_THROW(transforms::verify(f));
  EXPECT_EQ(f.body.ops()[0]->loc().line, 4u); // an op without loc() is located in the text
  EXPECT_EQ(f.body.ops()[0]->loc().col, 3u);
  EXPECT_EQ(print(f), "kernel @first(%0_p: ptr<fp32>, <folded one>: i32 {==1}, %1_n: i64 {div=16}) "
                      "num_warps=8 num_ctas=2 num_stages=4 {\n"
                      "  %2_c = constant {value = 2.5} : fp32\n"
                      "  %3_i = constant {value = 0} : i32\n"
                      "  %4_r = for %3_i, %3_i, %3_i, %2_c : fp32 { ^(%5_iv: i32, %6_acc: fp32)\n"
                      "    %7_s = add %6_acc, %6_acc : fp32\n"
                      "    yield %7_s\n"
                      "  }\n"
                      "  store %0_p, %4_r {has_mask = 0}\n"
                      "  return\n"
                      "}\n");
  EXPECT_EQ(print(*m.functions[1]), "kernel @second() num_warps=4 {\n  return\n}\n");
  // Round trip of the module.
  SourceManager sm2;
  Module again = parseModule(sm2, sm2.addFile("again.tir", print(m)));
  EXPECT_EQ(print(again), print(m));
}

TEST(IrParser, EveryTypeForm) {
  for (const Type& t :
       {Type::none(), Type::token(), Type::scalar(DType::I1), Type::scalar(DType::U64),
        Type::scalar(DType::F8E4M3), Type::scalar(DType::BF16), Type::ptr(DType::F16),
        Type::tensor(DType::F32, {64, 32}), Type::ptrTensor(DType::BF16, {128}),
        Type::tensor(DType::I1, {1, 2, 3, 4}), Type::buffer(DType::F16, {128, 64}, 3),
        Type::buffer(DType::F32, {128, 128}, 1, MemorySpace::Tmem), Type::buffer(DType::F16, {}, 2),
        Type::barrier(2), Type::descriptor(DType::F16, {128, 64}, 2),
        Type::descriptor(DType::F8E5M2, {}, 0)}) {
    SCOPED_TRACE(t.str());
    std::optional<Type> p = parseType(t.str());
    ASSERT_TRUE(p.has_value());
    EXPECT_TRUE(*p == t);
  }
  EXPECT_TRUE(parseType("f32") == Type::scalar(DType::F32)); // the signature's aliases
  for (const char* bad : {"", "fp17", "tensor<>", "tensor<4x>", "tensor<4xfp32", "ptr<4>",
                          "buffer<2x4xfp16>", "buffer<2x4xfp16, gmem>", "barrier<>", "desc<fp16>",
                          "desc<fp16, 4x4, rank>", "i32 i32", "tensor<-4xfp32>"})
    EXPECT_FALSE(parseType(bad).has_value()) << bad;
}

TEST(IrParser, AttributesRoundTripExactly) {
  Function fn;
  fn.name = "k";
  Builder b(&fn.body);
  Type f64 = Type::scalar(DType::F64);
  std::vector<double> values = {0.1,  -0.0,     1e300,     5e-324, -1.5, 3.0,
                                1e20, INFINITY, -INFINITY, NAN,    -NAN, 123456789.125};
  for (double d : values) b.constFloat(d, f64);
  b.constInt(INT64_MIN, Type::scalar(DType::I64));
  b.constInt(INT64_MAX, Type::scalar(DType::I64));
  b.create(OpCode::Print, {}, {},
           {{"prefix", std::string("a \"quoted\" \\ back\nslash\ttab \x01 caf\xc3\xa9")},
            {"empty", std::string()},
            {"list", std::vector<int64_t>{}},
            {"ints", std::vector<int64_t>{-1, 0, 7}}});
  b.ret();
  const std::string text = print(fn);
  SourceManager sm;
  std::unique_ptr<Function> parsed = parseText(sm, text);
  EXPECT_EQ(print(*parsed), text);
  EXPECT_EQ(Comparer(nullptr, nullptr).compare(fn, *parsed), "") << text;
  EXPECT_NE(text.find(R"(prefix = "a \"quoted\" \\ back\nslash\ttab \x01 caf)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("value = -nan"), std::string::npos) << text;
  EXPECT_TRUE(std::signbit(std::get<double>(*parsed->body.ops()[1]->attr("value"))));
}

TEST(IrParser, LocationsNameTheirFiles) {
  SourceManager sm;
  std::unique_ptr<Function> f = parseText(sm, R"(kernel @k() num_warps=4 loc("a \"b\".py":3:1) {
  %0 = program_id {axis = 0} : i32 loc("kernels/x.py":7:11)
  %1 = for %0, %0, %0 : i32 { ^(%2: i32)
    yield %2 loc("kernels/x.py":9:5)
  } loc("kernels/y.py":8:5)
  return
}
)");
  EXPECT_EQ(sm.path(f->loc.file), "a \"b\".py");
  EXPECT_EQ(f->loc.line, 3u);
  const Op& pid = *f->body.ops()[0];
  EXPECT_EQ(sm.path(pid.loc().file), "kernels/x.py");
  EXPECT_EQ(pid.loc().line, 7u);
  EXPECT_EQ(pid.loc().col, 11u);
  const Op& loop = *f->body.ops()[1];
  EXPECT_EQ(sm.path(loop.loc().file), "kernels/y.py");
  EXPECT_EQ(loop.region(0)->ops()[0]->loc().file, pid.loc().file); // one file id per path
  const Op& ret = *f->body.ops()[2];
  EXPECT_EQ(sm.path(ret.loc().file), "t.tir"); // no loc(): its place in the text
  EXPECT_EQ(ret.loc().line, 6u);
  std::string printed = print(*f, PrintOptions{&sm});
  EXPECT_NE(printed.find("} loc(\"kernels/y.py\":8:5)\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("  return loc(\"t.tir\":6:3)\n"), std::string::npos) << printed;
}

TEST(IrParser, MalformedTextIsALocatedError) {
  const std::string head = "kernel @k(%0_n: i32) num_warps=4 {\n";
  struct Case {
    std::string text;
    const char* where;   // FILE:LINE:COL
    const char* message; // part of the message
  };
  const Case cases[] = {
      {"", "t.tir:1:1", "no kernel in this text"},
      {"kernal @k() {\n}\n", "t.tir:1:1", "expected 'kernel @NAME(...)'"},
      {"kernel k() {\n}\n", "t.tir:1:8", "expected '@' before the kernel's name"},
      {"kernel @k(%0_n i32) {\n}\n", "t.tir:1:16", "expected ':' before the parameter's type"},
      {"kernel @k(%0_n: i33) {\n}\n", "t.tir:1:17", "expected a type"},
      {"kernel @k() num_wraps=4 {\n}\n", "t.tir:1:13", "expected num_warps=N"},
      {"kernel @k() num_warps=0 {\n}\n", "t.tir:1:23", "num_warps must be a positive integer"},
      {"kernel @k(%0_n: i32 {div=x}) {\n}\n", "t.tir:1:26", "expected the divisibility"},
      {head + "  return\n", "t.tir:1:34", "body of kernel 'k' is not closed"},
      {head + "  %1 = frobnicate %0_n : i32\n}\n", "t.tir:2:8", "unknown op 'frobnicate'"},
      {head + "  %1 = add %0_n, %9 : i32\n}\n", "t.tir:2:18", "use of undefined value '%9'"},
      {head + "  %1 = add %0_n, %0_n\n}\n", "t.tir:2:3", "1 result(s) but 0 result type(s)"},
      {head + "  add %0_n, %0_n : i32\n}\n", "t.tir:2:18", "0 result(s) but 1 result type(s)"},
      {head + "  %0_n = add %0_n, %0_n : i32\n}\n", "t.tir:2:3", "'%0_n' is defined twice"},
      {head + "  %1 = add %0_n, %0_n : tensor<4xfp32\n}\n", "t.tir:2:38", "expected '>'"},
      {head + "  %1 = constant {value = 1.2.3} : fp32\n}\n", "t.tir:2:26",
       "expected an attribute value"},
      {head + "  %1 = constant {value = \"abc} : fp32\n}\n", "t.tir:2:26", "string is not closed"},
      {head + "  %1 = constant {value = \"a\\qb\"} : fp32\n}\n", "t.tir:2:29",
       "unknown escape '\\q'"},
      {head + "  %1 = constant {value = 1, value = 2} : i32\n}\n", "t.tir:2:29",
       "attribute 'value' is given twice"},
      {head + "  %1 = constant {value = [1, x]} : i32\n}\n", "t.tir:2:30", "a list element"},
      {head + "  %1 = constant {value = 1 : i32\n}\n", "t.tir:2:28", "expected '}'"},
      {head + "  %1 = constant {value = 1} : i32 extra\n}\n", "t.tir:2:35",
       "unexpected 'extra' after op 'constant'"},
      {head + "  %1 = for %0_n, %0_n, %0_n : i32 { ^(%2: i32)\n    yield\n", "t.tir:2:35",
       "region of 'for' is not closed"},
      {head + "  for %0_n, %0_n, %0_n { ^(%2: i32)\n    yield\n  }\n  %3 = add %2, %2 : i32\n}\n",
       "t.tir:5:12", "'%2' (defined at line 2) is not visible here"},
      {head + "  for %0_n, %0_n, %0_n { ^(%2 i32)\n", "t.tir:2:31", "expected ':'"},
      {head + "  for %0_n, %0_n, %0_n { yield\n  }\n}\n", "t.tir:2:26",
       "expected a line end after the region's '{'"},
      {head + "  return loc(\"x.py\":0:1)\n}\n", "t.tir:2:21", "a line number must be a positive"},
      {head + "  return loc(x.py:1:1)\n}\n", "t.tir:2:14", "expected a string in double quotes"},
      {head + "  %1 = = add\n}\n", "t.tir:2:8", "expected an op"},
      {head + "  return\n}\nkernel", "t.tir:4:7", "expected '@'"},
      {head + "  return\n} trailing\n", "t.tir:3:3", "unexpected text after the kernel"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    std::string err = parseError(c.text);
    EXPECT_EQ(err.rfind(std::string(c.where) + ": error: ", 0), 0u) << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << err;
  }
}

TEST(IrParser, DeepNestingIsAnErrorNotACrash) {
  std::string text = "kernel @k() num_warps=4 {\n";
  for (int i = 0; i < 300; ++i) text += "async_tasks {\n";
  std::string err = parseError(text);
  EXPECT_NE(err.find("regions nest deeper than 200"), std::string::npos) << err;
}

TEST(IrParser, TruncatedAndMutatedTextNeverCrashes) {
  const std::string text = kVectorAdd;
  ASSERT_EQ(parseError(text), "");
  // Every prefix: parses (only the whole text does) or fails with a located error.
  for (size_t n = 0; n < text.size(); ++n) {
    std::string err = parseError(text.substr(0, n));
    if (n + 1 < text.size()) {
      EXPECT_EQ(err.rfind("t.tir:", 0), 0u) << n << ": " << err;
    }
  }
  // Characters replaced at random places by ones that matter to the grammar.
  std::mt19937 rng(22);
  const std::string specials = "%{}()<>[]:,=\"\\^@ \n\tx0-9.@loc";
  for (int i = 0; i < 3000; ++i) {
    std::string t = text;
    for (int k = 0; k < 1 + i % 3; ++k) t[rng() % t.size()] = specials[rng() % specials.size()];
    std::string err = parseError(t);
    if (!err.empty()) {
      EXPECT_EQ(err.rfind("t.tir:", 0), 0u) << t << "\n" << err;
    }
  }
}

TEST(IrParser, OpNamesComeFromOpsDef) {
  EXPECT_EQ(opCodeByName("local_alloc"), OpCode::LocalAlloc);
  EXPECT_EQ(opCodeByName("async_remote_shmem_store"), OpCode::AsyncRemoteStore);
  EXPECT_EQ(opCodeByName("for"), OpCode::For);
  EXPECT_FALSE(opCodeByName("loc").has_value());
  EXPECT_FALSE(opCodeByName("Add").has_value());
  // Every opcode's printed name reads back as that opcode.
  for (int c = 0; c <= static_cast<int>(OpCode::VoteBallot); ++c)
    EXPECT_EQ(opCodeByName(opName(static_cast<OpCode>(c))), static_cast<OpCode>(c));
}
