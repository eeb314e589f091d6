// Bounded mutation fuzzing of the front end and the specializer over the kernel library and the
// examples: every mutant must parse and specialize, or fail with a CompileError whose location lies
// inside the file; nothing may crash, hang or throw anything else. Fuzz.CompilerCampaign runs the
// whole-pipeline fuzzer of tools/fuzz (wwfuzz) for a bounded number of compiles.
#include "FuzzCore.h"
#include "frontend/AstDump.h"
#include "frontend/Lexer.h"
#include "frontend/Parser.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

using namespace ww;

namespace {

/// Why a diagnostic location is unusable, or "" when it points into `text`.
std::string checkLocation(const SourceManager& sm, uint32_t file, SourceLoc loc,
                          const std::string& what) {
  if (!loc.valid()) return what + " has no location";
  if (loc.file != file) return what + " points into another file";
  size_t lines = static_cast<size_t>(std::count(sm.text(file).begin(), sm.text(file).end(), '\n'));
  if (loc.line > lines + 1) return what + " is past the last line";
  if (loc.col == 0 || loc.col > sm.lineText(loc).size() + 1)
    return what + " has column " + std::to_string(loc.col) + " outside its line";
  return "";
}

} // namespace

namespace {

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

/// A plausible signature for a kernel of the library from its parameter names alone, so that
/// unmutated seeds specialize and mutants reach deep into the specializer.
std::string guessSignature(const ast::FunctionDef& fn) {
  std::string sig;
  for (const ast::Param& p : fn.params) {
    std::string entry;
    bool constexprParam =
        p.annotation && ast::dottedName(p.annotation.get()).find("constexpr") != std::string::npos;
    if (constexprParam) {
      if (p.defaultValue) continue;
      const std::string& n = p.name;
      if (contains(n, "ACTIVATION"))
        entry = n + "=\"\"";
      else if (contains(n, "DTYPE"))
        entry = n + "=tl.float16";
      else if (n.rfind("IS_", 0) == 0 || n.rfind("HAS_", 0) == 0 || contains(n, "CAUSAL") ||
               contains(n, "EVEN"))
        entry = n + "=False";
      else if (contains(n, "NUM") || contains(n, "GROUP") || contains(n, "STAGES"))
        entry = n + "=2";
      else
        entry = n + "=64";
    } else if (contains(p.name, "desc")) {
      entry = p.name + ":desc<fp16,64x64>";
    } else if (contains(p.name, "cu_seqlens")) {
      entry = p.name + ":*i32:16"; // prefix sums of ragged lengths
    } else if (contains(p.name, "ptr")) {
      entry = p.name + ":*fp16:16";
    } else if (contains(p.name, "eps") || contains(p.name, "scale") || contains(p.name, "slope")) {
      entry = p.name + ":fp32";
    } else {
      entry = p.name + ":i32";
    }
    sig += (sig.empty() ? "" : ",") + entry;
  }
  return sig;
}

} // namespace

/// Specializes every @jit function of a parsed input through the public compile API (parse,
/// specialize, clean-up passes), with `imported` (the unmutated files the seed's relative imports
/// name) beside it. Returns "" when each either compiles or fails with a rendered diagnostic that
/// points into the input or into an imported file.
std::string fuzzSpecializer(const std::string& text, const ast::Module& module,
                            const std::vector<SourceFile>& imported) {
  for (const auto& fn : module.functions) {
    if (!ast::isJitFunction(*fn)) continue;
    CompileRequest req;
    req.files.push_back({"fuzz.py", text});
    req.files.insert(req.files.end(), imported.begin(), imported.end());
    req.kernel = fn->name;
    req.stage = Stage::TileIR;
    try {
      req.signature = parseSignature(guessSignature(*fn));
    } catch (const CompileFailure&) {
      continue; // a mutated parameter list the guesser cannot name: nothing to specialize
    }
    try {
      compile(req);
    } catch (const CompileFailure& e) {
      std::string what = e.what();
      bool inImported = std::any_of(imported.begin(), imported.end(), [&](const SourceFile& f) {
        return what.rfind(f.path + ":", 0) == 0;
      });
      if (what.rfind("fuzz.py:", 0) != 0 && !inImported && what.rfind("<global", 0) != 0 &&
          what.rfind("<signature", 0) != 0 && what.rfind("error:", 0) != 0)
        return "specializing '" + fn->name + "': diagnostic without FILE:LINE:COL: " + what;
    } catch (const std::exception& e) {
      return "specializing '" + fn->name + "': unexpected exception: " + e.what();
    } catch (...) {
      return "specializing '" + fn->name + "': unexpected non-standard exception";
    }
  }
  return "";
}

/// Runs the front end and the specializer on one input (with the files its seed imports from).
/// Returns "" when the outcome is acceptable (compiled, or a CompileError with a valid location),
/// else what went wrong.
std::string fuzzOne(const std::string& text, const std::vector<SourceFile>& imported = {}) {
  SourceManager sm;
  uint32_t file = sm.addFile("fuzz.py", text);
  try {
    ast::Module module = frontend::parseModule(sm, file);
    // Dumping visits every node: a half-built tree (a null child) would surface here.
    if (ast::dump(module).empty()) return "empty AST dump";
    return fuzzSpecializer(text, module, imported);
  } catch (CompileError& e) {
    std::string bad =
        checkLocation(sm, file, e.diagnostic().loc, "error '" + e.diagnostic().message + "'");
    for (const Diagnostic& n : e.diagnostic().notes)
      if (bad.empty()) bad = checkLocation(sm, file, n.loc, "note '" + n.message + "'");
    if (!bad.empty()) return bad;
    e.render(sm); // the rendering path must not trip over any location either
    if (std::string(e.what()).find("fuzz.py:") != 0) return "rendered error lacks FILE:LINE:COL";
    return "";
  } catch (const std::exception& e) {
    return std::string("unexpected exception: ") + e.what();
  } catch (...) {
    return "unexpected non-standard exception";
  }
}

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The files the relative imports of the kernel file `path` name (its helpers' modules).
std::vector<SourceFile> importedFiles(const std::string& path) {
  std::vector<SourceFile> files = readSourceWithImports(path);
  files.erase(files.begin());
  return files;
}

std::vector<std::string> corpusFiles() {
  std::vector<std::string> files;
  for (const char* dir : {"/python/warpweave/ops/kernels", "/examples"}) {
    std::string root = std::string(WW_SOURCE_DIR) + dir;
    if (!std::filesystem::exists(root)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root))
      if (entry.is_regular_file() && entry.path().extension() == ".py")
        files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// Byte ranges [begin, end) of the tokens of `text` that have a spelling (not layout tokens).
std::vector<std::pair<size_t, size_t>> tokenSpans(const std::string& text) {
  SourceManager sm;
  uint32_t file = sm.addFile("seed.py", text);
  std::vector<size_t> lineStarts = {0};
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') lineStarts.push_back(i + 1);
  std::vector<std::pair<size_t, size_t>> spans;
  for (const frontend::Token& t : frontend::tokenize(sm, file)) {
    if (t.text.empty() || t.kind == frontend::TokenKind::Newline) continue;
    size_t begin = lineStarts[t.loc.line - 1] + t.loc.col - 1;
    spans.push_back({begin, begin + t.text.size()});
  }
  return spans;
}

class Mutator {
public:
  Mutator(const std::string& seedText, uint32_t seed)
      : seed_(seedText), spans_(tokenSpans(seedText)), rng_(seed) {}

  std::string next() {
    std::string s = seed_;
    int edits = 1 + static_cast<int>(pick(3));
    for (int i = 0; i < edits; ++i) mutate(s);
    return s;
  }

private:
  size_t pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }

  void mutate(std::string& s) {
    if (s.empty()) return;
    static const char kInteresting[] = "()[]{}:,.=\n\t '\"\\#@*-+<>!~%&|^;0123456789_x";
    switch (pick(9)) {
    case 0: { // flip a byte to anything, including control bytes and non-ASCII
      s[pick(s.size())] = static_cast<char>(pick(256));
      break;
    }
    case 1: { // replace a byte with a syntactically interesting one
      s[pick(s.size())] = kInteresting[pick(sizeof(kInteresting) - 1)];
      break;
    }
    case 2:
    case 3:
    case 4: { // delete, duplicate or swap tokens (spans of the unmutated seed; clamp to s)
      if (spans_.empty()) break;
      auto [b, e] = spans_[pick(spans_.size())];
      if (e > s.size()) break;
      if (pick(3) == 0) {
        s.erase(b, e - b);
      } else if (pick(2) == 0) {
        std::string piece = s.substr(b, e - b);
        piece += ' ';
        s.insert(b, piece);
      } else {
        auto [b2, e2] = spans_[pick(spans_.size())];
        if (e2 > s.size() || b2 == b) break;
        if (b2 < b) {
          std::swap(b, b2);
          std::swap(e, e2);
        }
        if (e > b2) break;
        std::string first = s.substr(b, e - b), second = s.substr(b2, e2 - b2);
        s.replace(b2, e2 - b2, first);
        s.replace(b, e - b, second);
      }
      break;
    }
    case 5: { // delete or duplicate a line
      auto [b, e] = lineAt(s, pick(s.size()));
      if (pick(2) == 0)
        s.erase(b, e - b);
      else
        s.insert(b, s.substr(b, e - b));
      break;
    }
    case 6: { // change a line's indentation
      auto [b, e] = lineAt(s, pick(s.size()));
      (void)e;
      switch (pick(4)) {
      case 0:
        s.insert(b, 1, ' ');
        break;
      case 1:
        s.insert(b, 1, '\t');
        break;
      case 2:
        s.insert(b, 4, ' ');
        break;
      default:
        if (b < s.size() && (s[b] == ' ' || s[b] == '\t')) s.erase(b, 1);
      }
      break;
    }
    case 7: { // truncate
      s.resize(pick(s.size()));
      break;
    }
    default: { // insert an interesting byte
      s.insert(pick(s.size()), 1, kInteresting[pick(sizeof(kInteresting) - 1)]);
    }
    }
  }

  static std::pair<size_t, size_t> lineAt(const std::string& s, size_t pos) {
    size_t b = s.rfind('\n', pos == 0 ? 0 : pos - 1);
    b = (b == std::string::npos || pos == 0) ? 0 : b + 1;
    size_t e = s.find('\n', pos);
    e = e == std::string::npos ? s.size() : e + 1;
    return {b, e};
  }

  std::string seed_;
  std::vector<std::pair<size_t, size_t>> spans_;
  std::mt19937 rng_;
};

} // namespace

TEST(Fuzz, SeedsAreAccepted) {
  std::vector<std::string> files = corpusFiles();
  ASSERT_FALSE(files.empty());
  for (const std::string& path : files)
    EXPECT_EQ(fuzzOne(readFile(path), importedFiles(path)), "") << path;
}

// Whether `name(` appears in `text` other than where it is defined (`def name(`).
static bool isCalledInFile(const std::string& text, const std::string& name) {
  int uses = 0, defs = 0;
  for (size_t at = text.find(name + "("); at != std::string::npos;
       at = text.find(name + "(", at + 1)) {
    bool wordStart = at == 0 || !(std::isalnum(static_cast<unsigned char>(text[at - 1])) ||
                                  text[at - 1] == '_' || text[at - 1] == '.');
    if (!wordStart) continue;
    ++uses;
    defs += at >= 4 && text.compare(at - 4, 4, "def ") == 0;
  }
  return uses > defs;
}

// The guessed signatures must let the unmutated kernels through, or the mutants would only ever
// exercise the specializer's argument checks.
TEST(Fuzz, SeedKernelsSpecializeWithGuessedSignatures) {
  int kernels = 0, specialized = 0;
  std::string failures;
  for (const std::string& path : corpusFiles()) {
    std::string text = readFile(path);
    SourceManager sm;
    ast::Module module = frontend::parseModule(sm, sm.addFile(path, text));
    for (const auto& fn : module.functions) {
      // Kernels are the jit functions with no return value (helpers return one) that no other
      // function of their file calls (helpers that only store or wait return nothing).
      bool returns = false;
      for (const auto& st : fn->body)
        if (auto* r = ast::dyn_cast<ast::Return>(st.get())) returns |= r->value != nullptr;
      if (!ast::isJitFunction(*fn) || returns || isCalledInFile(text, fn->name)) continue;
      ++kernels;
      CompileRequest req;
      req.files = readSourceWithImports(path); // helpers imported from sibling files too
      req.kernel = fn->name;
      req.stage = Stage::TileIR;
      try {
        req.signature = parseSignature(guessSignature(*fn));
        compile(req);
        ++specialized;
      } catch (const std::exception& e) {
        failures += "\n" + fn->name + ": " + std::string(e.what()).substr(0, 200);
      }
    }
  }
  std::printf("%d of %d seed kernels specialize with guessed signatures%s\n", specialized, kernels,
              failures.c_str());
  EXPECT_GE(kernels, 10);
  EXPECT_GE(specialized * 3, kernels * 2) << failures;
}

TEST(Fuzz, HandWrittenNastyInputs) {
  std::vector<std::string> inputs = {
      "",
      "\n\n\n",
      "@",
      "@ww.jit",
      "@ww.jit\n",
      "@ww.jit\ndef",
      "@ww.jit\ndef k(",
      "@ww.jit\ndef k():",
      "@ww.jit\ndef k():\n",
      "@ww.jit\ndef k():\n  \\",
      "@ww.jit\ndef k():\n  x = '''",
      "@ww.jit\ndef k():\n  x = f'{'",
      "@ww.jit\ndef k():\n  x = 0x",
      "@ww.jit\ndef k():\n  x = 1e",
      "@ww.jit\ndef k():\n  x = 1e+",
      "@ww.jit\ndef k():\n  x = '\\x4'",
      "@ww.jit\ndef k():\n  x = '\\U0011FFFF'",
      std::string("@ww.jit\ndef k():\n  x = 1\0\n", 23),
      "\xff\xfe\x00",
      "def f():\n\tif x:\n        pass\n",
      std::string(300, '(') + std::string(300, ')'),
      "@ww.jit\ndef k():\n  return " + std::string(250, '-') + "1\n",
      "@ww.jit\ndef k():\n  return " + std::string(250, '~') + "x\n",
      "@ww.jit\ndef k():\n  return 2" +
          [] {
            std::string s;
            for (int i = 0; i < 250; ++i) s += "**2";
            return s;
          }() +
          "\n",
      "@ww.jit\ndef k():\n  return " +
          [] {
            std::string s = "x";
            for (int i = 0; i < 6000; ++i) s += "+x";
            return s;
          }() +
          "\n",
      "@ww.jit\ndef k():\n  return " +
          [] {
            std::string s;
            for (int i = 0; i < 250; ++i) s += "not ";
            return s + "x";
          }() +
          "\n",
      [] {
        std::string s = "@ww.jit\ndef k():\n";
        for (int i = 1; i < 120; ++i) s += std::string(static_cast<size_t>(i), ' ') + "if x:\n";
        return s + std::string(120, ' ') + "pass\n";
      }(),
  };
  for (const std::string& in : inputs) EXPECT_EQ(fuzzOne(in), "") << in.substr(0, 80);
}

TEST(Fuzz, BoundedMutationLoop) {
  std::vector<std::string> files = corpusFiles();
  ASSERT_FALSE(files.empty());
  constexpr int kMutantsPerFile = 300;
  auto start = std::chrono::steady_clock::now();
  double slowestMs = 0;
  int total = 0, parsed = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    std::string seed = readFile(files[f]);
    std::vector<SourceFile> imported = importedFiles(files[f]); // mutants call helpers there too
    Mutator mutator(seed, 12345u + static_cast<uint32_t>(f));
    for (int i = 0; i < kMutantsPerFile; ++i) {
      std::string mutant = mutator.next();
      auto t0 = std::chrono::steady_clock::now();
      std::string bad = fuzzOne(mutant, imported);
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      slowestMs = std::max(slowestMs, ms);
      ++total;
      if (bad.empty()) {
        SourceManager sm;
        try {
          frontend::parseModule(sm, sm.addFile("m.py", mutant));
          ++parsed;
        } catch (const CompileError&) {
        }
      }
      ASSERT_EQ(bad, "") << files[f] << " mutant " << i << ":\n" << mutant;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("fuzz: %d mutants of %zu files in %.2f s (%d parsed, %d rejected), slowest %.2f ms\n",
              total, files.size(), seconds, parsed, total - parsed, slowestMs);
  // The slowest mutant is printed, not asserted (a loaded or instrumented machine would make a
  // bound flaky); a mutant that hangs the compiler is caught by ctest's time limit on this test.
}

// The compiler fuzzer of tools/fuzz (wwfuzz) for a bounded number of compiles: mutants of the
// seed kernels' source, signatures and options go through the whole pipeline to PTX, each batch
// in a forked child; new PTX goes to ptxas. Any crash, hang (10 s of CPU time), internal error,
// error without FILE:LINE:COL or PTX that ptxas rejects fails the test, naming the mutant
// (`wwfuzz --replay N` regenerates it; docs/status.md, "Fuzzing", has the full campaign).
TEST(Fuzz, CompilerCampaign) {
  std::string log;
  std::vector<fuzz::Seed> seeds = fuzz::loadSeeds(
      WW_SOURCE_DIR, std::string(WW_SOURCE_DIR) + "/tools/fuzz/seeds.txt", true, &log);
  ASSERT_GE(seeds.size(), 20u) << log;
  fuzz::CampaignOptions o;
  o.seed = 20;
  o.count = 1500;
  o.batch = 250;
  fuzz::CampaignStats st = fuzz::runCampaign(seeds, o);
  std::printf("%s", st.summary().c_str());
  EXPECT_EQ(st.total, o.count);
  for (int i = 0; i < fuzz::kNumOutcomes; ++i) {
    if (fuzz::isFinding(static_cast<fuzz::Outcome>(i))) {
      EXPECT_EQ(st.counts[i], 0) << fuzz::outcomeName(static_cast<fuzz::Outcome>(i));
    }
  }
  for (const auto& [bucket, n] : st.buckets)
    ADD_FAILURE() << n.first << " x " << bucket << " (first: wwfuzz --seed " << o.seed
                  << " --replay " << n.second << ")";
  // The mutants reach the back end: a good share compiles to PTX.
  EXPECT_GE(st.counts[static_cast<int>(fuzz::Outcome::Compiled)], o.count / 20);
}
