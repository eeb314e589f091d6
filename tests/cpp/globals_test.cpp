// Tests of how kernel names bind: from the caller's per-file names (SourceFile::names, what
// @ww.jit reads from the live Python objects) ahead of the import statements' text, and, without
// them (wwc), from imports anywhere at module level and the helper files readSourceWithImports
// finds through relative and absolute imports.
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace ww;

namespace {

namespace fs = std::filesystem;
using Kind = NameBinding::Kind;

struct Outcome {
  std::string ir;
  std::string error;
};

Outcome compileFiles(std::vector<SourceFile> files, const std::string& kernel,
                     const std::string& sig) {
  CompileRequest req;
  req.files = std::move(files);
  req.kernel = kernel;
  req.signature = parseSignature(sig);
  req.stage = Stage::TileIR;
  Outcome out;
  try {
    out.ir = compile(req).tileIR;
  } catch (const CompileFailure& e) {
    out.error = e.what();
  }
  return out;
}

std::map<std::string, NameBinding>
names(std::initializer_list<std::pair<const std::string, NameBinding>> list) {
  return std::map<std::string, NameBinding>(list);
}

// No import binds tl, lang or helper in this text: the names do.
const char* kBare = "@triton.jit\n"
                    "def k(x_ptr, N: lang.constexpr):\n"
                    "    offs = lang.arange(0, N)\n"
                    "    x = lang.load(x_ptr + offs)\n"
                    "    lang.store(x_ptr + offs, helper(x) * SCALE + ar(0, N))\n";
const char* kHelper = "import math as tl\n" // never consulted: this file has names too
                      "@ww.jit\n"
                      "def helper(x):\n"
                      "    return x + tl.program_id(0)\n";

TEST(NameBindings, BindNamesTheTextDoesNotImport) {
  SourceFile kernel{"k.py", kBare};
  kernel.names = names({{"lang", {Kind::Module, "triton.language", -1}},
                        {"helper", {Kind::Function, "helper", 1}},
                        {"SCALE", {Kind::Value, "3", -1}},
                        {"ar", {Kind::Member, "warpweave.language.arange", -1}}});
  SourceFile helper{"helpers.py", kHelper};
  helper.names = names({{"tl", {Kind::Module, "warpweave.language", -1}}});
  Outcome r = compileFiles({kernel, helper}, "k", "x_ptr:*fp32,N=16");
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.ir.find("program_id"), std::string::npos) << r.ir;
  EXPECT_NE(r.ir.find("3"), std::string::npos) << r.ir;
}

TEST(NameBindings, HelperModuleAndItsGlobals) {
  SourceFile kernel{"k.py", "@jit\n"
                            "def k(x_ptr):\n"
                            "    h.store_twice(x_ptr)\n"};
  kernel.names = names({{"h", {Kind::Helper, "pkg.h", 1}}});
  SourceFile helper{"pkg/h.py", "@jit\n"
                                "def store_twice(p):\n"
                                "    language.store(p, TWICE)\n"};
  helper.names = names({{"language", {Kind::Module, "warpweave.language", -1}},
                        {"store_twice", {Kind::Function, "store_twice", 1}},
                        {"TWICE", {Kind::Value, "2.5", -1}}});
  Outcome r = compileFiles({kernel, helper}, "k", "x_ptr:*fp32");
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.ir.find("2.5"), std::string::npos) << r.ir;
}

TEST(NameBindings, UnusableObjectsAndForeignModulesAreLocatedErrors) {
  SourceFile kernel{"k.py", "@ww.jit\n"
                            "def k(x_ptr):\n"
                            "    tl.store(x_ptr, TABLE)\n"};
  kernel.names = names({{"tl", {Kind::Module, "warpweave.language", -1}},
                        {"TABLE", {Kind::Opaque, "a numpy.ndarray object", -1}}});
  Outcome r = compileFiles({kernel}, "k", "x_ptr:*fp32");
  EXPECT_EQ(r.error.substr(0, r.error.find('\n')),
            "k.py:3:21: error: global 'TABLE' is a numpy.ndarray object, which kernel code cannot "
            "use; kernels use @jit functions, the language modules (tl, tlx, math) and "
            "compile-time constants (int, float, bool, str, None, dtypes and tuples of these)");

  kernel.text = "@ww.jit\n"
                "def k(x_ptr):\n"
                "    tl.store(x_ptr, torch.pi)\n";
  kernel.names = names(
      {{"tl", {Kind::Module, "warpweave.language", -1}}, {"torch", {Kind::Module, "torch", -1}}});
  r = compileFiles({kernel}, "k", "x_ptr:*fp32");
  EXPECT_NE(r.error.find("k.py:3:27: error: module 'torch' is not available in kernel code"),
            std::string::npos)
      << r.error;

  // A name Python did not bind is undefined, whatever the text imports.
  kernel.text = "import warpweave.language as tl\n"
                "@ww.jit\n"
                "def k(x_ptr):\n"
                "    tl.store(x_ptr, 1)\n";
  kernel.names = names({});
  r = compileFiles({kernel}, "k", "x_ptr:*fp32");
  EXPECT_NE(r.error.find("k.py:4:5: error: undefined name 'tl'"), std::string::npos) << r.error;
}

TEST(NameBindings, SignatureDtypesAreTheLanguagesWhateverTheFileCallsIt) {
  SourceFile kernel{"k.py", "import math as tl\n"
                            "import warpweave.language as language\n"
                            "@ww.jit\n"
                            "def k(x_ptr, DT: language.constexpr):\n"
                            "    language.store(x_ptr, language.full([4], 1, DT))\n"};
  Outcome r = compileFiles({kernel}, "k", "x_ptr:*fp16,DT=tl.float16");
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.ir.find("fp16"), std::string::npos) << r.ir;
}

// ---------------------------------------------------------------------------------------------
// Without names: the imports' text
// ---------------------------------------------------------------------------------------------

TEST(ImportText, ImportsUnderIfTryAndWithBindButMainBlocksAndHostFunctionsDoNot) {
  SourceFile kernel{"k.py", "import sys\n"
                            "try:\n"
                            "    import warpweave.language as tl\n"
                            "except ImportError:\n"
                            "    import triton.language as tl\n"
                            "finally: import warpweave as ww\n"
                            "if sys.version_info >= (3, 9):\n"
                            "    with open(__file__) as f:\n"
                            "        from math import pi as PI\n"
                            "elif True:\n"
                            "    pass\n"
                            "else: from x import *\n"
                            "def host():\n"
                            "    import json\n"
                            "    return json\n"
                            "@ww.jit\n"
                            "def k(x_ptr):\n"
                            "    tl.store(x_ptr, PI)\n"
                            "if __name__ == \"__main__\":\n"
                            "    import math as tl\n"};
  Outcome r = compileFiles({kernel}, "k", "x_ptr:*fp32");
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.ir.find("3.14159"), std::string::npos) << r.ir;
}

struct TempTree {
  fs::path root;
  TempTree() {
    root = fs::temp_directory_path() /
           ("ww_globals_test_" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(root);
  }
  ~TempTree() { fs::remove_all(root); }
  fs::path write(const std::string& rel, const std::string& text) const {
    fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
};

const char* kAbsoluteKernel = "import warpweave as ww\n"
                              "import warpweave.language as tl\n"
                              "from pkg.helpers import triple\n"
                              "import pkg.helpers\n"
                              "import pkg.helpers as ph\n"
                              "@ww.jit\n"
                              "def k(x_ptr):\n"
                              "    x = tl.load(x_ptr)\n"
                              "    tl.store(x_ptr, triple(x) + pkg.helpers.triple(x) + "
                              "ph.triple(x))\n";
const char* kTriple = "import warpweave as ww\n"
                      "@ww.jit\n"
                      "def triple(x):\n"
                      "    return x * 3\n";

TEST(ImportText, AbsoluteImportsFoundInAFolderAboveTheKernel) {
  TempTree t;
  t.write("proj/pkg/__init__.py", "");
  t.write("proj/pkg/helpers.py", kTriple);
  fs::path kernel = t.write("proj/kernels/k.py", kAbsoluteKernel);
  std::vector<SourceFile> files = readSourceWithImports(kernel.string());
  ASSERT_EQ(files.size(), 2u); // pkg/__init__.py is not named: `import pkg.helpers` needs no file
  EXPECT_EQ(fs::path(files[1].path).filename(), "helpers.py");
  Outcome r = compileFiles(files, "k", "x_ptr:*fp32");
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.ir.find("mul"), std::string::npos) << r.ir;
}

TEST(ImportText, AbsoluteImportsFoundOnPythonPath) {
  TempTree t;
  t.write("lib/pkg/helpers.py", kTriple);
  fs::path kernel = t.write("src/k.py", kAbsoluteKernel);
  const char* saved = std::getenv("PYTHONPATH");
  std::string old = saved ? saved : "";
  EXPECT_EQ(readSourceWithImports(kernel.string()).size(), 1u);
  Outcome missing = compileFiles(readSourceWithImports(kernel.string()), "k", "x_ptr:*fp32");
  EXPECT_NE(missing.error.find("'pkg.helpers.triple' is imported from a module the compiler was "
                               "not given"),
            std::string::npos)
      << missing.error;
  setenv("PYTHONPATH", ("/nonexistent:" + (t.root / "lib").string()).c_str(), 1);
  std::vector<SourceFile> files = readSourceWithImports(kernel.string());
  if (saved)
    setenv("PYTHONPATH", old.c_str(), 1);
  else
    unsetenv("PYTHONPATH");
  ASSERT_EQ(files.size(), 2u);
  Outcome r = compileFiles(files, "k", "x_ptr:*fp32");
  EXPECT_EQ(r.error, "");
}

} // namespace
