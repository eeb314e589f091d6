// The mutation fuzzer's seeds, mutator, classification and forked campaign runner (FuzzCore.h).
#include "FuzzCore.h"

#include "frontend/Ast.h"
#include "frontend/Lexer.h"
#include "frontend/Parser.h"
#include "runtime/Process.h"
#include "runtime/Ptxas.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_set>

namespace ww::fuzz {

namespace fs = std::filesystem;

const char* outcomeName(Outcome o) {
  switch (o) {
  case Outcome::Compiled:
    return "compiled";
  case Outcome::Rejected:
    return "rejected";
  case Outcome::SignatureRejected:
    return "signature-rejected";
  case Outcome::NoLocation:
    return "no-location";
  case Outcome::Internal:
    return "internal-error";
  case Outcome::Crash:
    return "crash";
  case Outcome::Hang:
    return "hang";
  case Outcome::PtxasReject:
    return "ptxas-reject";
  case Outcome::PtxasSlow:
    return "ptxas-slow";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Classifying one compile
// ---------------------------------------------------------------------------------------------

namespace {

/// The lines of `text` as Python splits them (\n, \r\n and a lone \r end a line).
std::vector<std::string_view> pythonLines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t begin = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    lines.emplace_back(text.data() + begin, i - begin);
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    begin = i + 1;
  }
  lines.emplace_back(text.data() + begin, text.size() - begin);
  return lines;
}

bool parseUnsigned(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 9) return false;
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

} // namespace

std::string checkLocated(const std::string& message, const std::vector<SourceFile>& files) {
  std::string first = message.substr(0, message.find('\n'));
  size_t err = first.find(": error: ");
  if (err == std::string::npos) return "no ': error: ' in the first line";
  std::string head = first.substr(0, err);
  size_t c2 = head.rfind(':');
  size_t c1 = c2 == std::string::npos || c2 == 0 ? std::string::npos : head.rfind(':', c2 - 1);
  uint64_t line = 0, col = 0;
  if (c1 == std::string::npos ||
      !parseUnsigned(std::string_view(head).substr(c1 + 1, c2 - c1 - 1), line) ||
      !parseUnsigned(std::string_view(head).substr(c2 + 1), col))
    return "no FILE:LINE:COL";
  std::string path = head.substr(0, c1);
  for (const SourceFile& f : files) {
    if (f.path != path) continue;
    std::vector<std::string_view> lines = pythonLines(f.text);
    if (line == 0 || line > lines.size()) return "line " + std::to_string(line) + " past the file";
    if (col == 0 || col > lines[line - 1].size() + 1)
      return "column " + std::to_string(col) + " outside line " + std::to_string(line);
    return "";
  }
  return "location in '" + path + "', which is not a source file of the compile";
}

Verdict compileCase(const Case& c) {
  Verdict v;
  auto t0 = std::chrono::steady_clock::now();
  CompileRequest req;
  req.files = c.files;
  req.kernel = c.kernel;
  req.options = c.options;
  req.stage = c.stage;
  try {
    try {
      req.signature = parseSignature(c.signature);
    } catch (const CompileFailure& e) {
      v.outcome = Outcome::SignatureRejected;
      v.detail = e.what();
      return v;
    }
    CompiledKernel k = compile(req);
    v.outcome = Outcome::Compiled;
    v.ptx = std::move(k.ptx);
  } catch (const CompileFailure& e) {
    v.detail = e.what();
    std::string why = checkLocated(v.detail, c.files);
    if (v.detail.find("internal error") != std::string::npos ||
        v.detail.find("internal compiler error") != std::string::npos)
      v.outcome = Outcome::Internal;
    else if (!why.empty()) {
      v.outcome = Outcome::NoLocation;
      v.detail += "\n(" + why + ")";
    } else
      v.outcome = Outcome::Rejected;
  } catch (const std::exception& e) {
    v.outcome = Outcome::Internal;
    v.detail = std::string("uncaught exception: ") + e.what();
  } catch (...) {
    v.outcome = Outcome::Internal;
    v.detail = "uncaught non-standard exception";
  }
  v.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return v;
}

// ---------------------------------------------------------------------------------------------
// ptxas
// ---------------------------------------------------------------------------------------------

uint64_t ptxHash(const std::string& ptx) {
  uint64_t h = 1469598103934665603ull; // FNV-1a over the lines that are not .loc / .file
  size_t begin = 0;
  while (begin < ptx.size()) {
    size_t end = ptx.find('\n', begin);
    if (end == std::string::npos) end = ptx.size();
    std::string_view line(ptx.data() + begin, end - begin);
    size_t s = line.find_first_not_of(" \t");
    bool lineInfo = s != std::string_view::npos &&
                    (line.substr(s).starts_with(".loc") || line.substr(s).starts_with(".file"));
    if (!lineInfo)
      for (char ch : line) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    h = (h ^ '\n') * 1099511628211ull;
    begin = end + 1;
  }
  return h;
}

PtxasCheck checkPtx(const std::string& ptx, Target target, int timeoutSeconds) {
  PtxasCheck r;
  static const std::string ptxas = runtime::findPtxas();
  if (ptxas.empty()) return r;
  runtime::TempDir dir("wwfuzz");
  if (!dir.ok()) return r;
  std::string in = dir.path() + "/k.ptx", out = dir.path() + "/k.cubin", log = dir.path() + "/log";
  runtime::writeFile(in, ptx.data(), ptx.size());
  std::string arch = std::string("-arch=") + targetName(target);
  pid_t pid = fork();
  if (pid == 0) {
    // The campaign's children run under an address-space limit; ptxas gets the hard limit back.
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_AS, &rl);
    }
    if (getrlimit(RLIMIT_CPU, &rl) == 0) {
      rl.rlim_cur = static_cast<rlim_t>(timeoutSeconds);
      setrlimit(RLIMIT_CPU, &rl);
    }
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execl(ptxas.c_str(), ptxas.c_str(), arch.c_str(), in.c_str(), "-o", out.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  if (pid < 0) return r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10 * timeoutSeconds);
  int status = 0;
  while (true) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    usleep(2000);
  }
  if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGXCPU || WTERMSIG(status) == SIGKILL)) {
    r.ok = false;
    r.timedOut = true;
    r.log = "ptxas took over " + std::to_string(timeoutSeconds) + " s";
    return r;
  }
  runtime::readFile(log, r.log);
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Seeds
// ---------------------------------------------------------------------------------------------

namespace {

std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

/// A signature for `fn` from its parameter names. `variant` picks the block size (64, 32, 16,
/// 128) and the pointers' element type (fp16, fp32).
std::string guessSignature(const ast::FunctionDef& fn, int variant) {
  static const int kBlocks[] = {64, 32, 16, 128};
  int block = kBlocks[variant % 4];
  const char* ptr = variant % 2 ? "*fp32:16" : "*fp16:16";
  std::string sig;
  for (const ast::Param& p : fn.params) {
    std::string entry;
    const std::string& n = p.name;
    bool constexprParam =
        p.annotation && ast::dottedName(p.annotation.get()).find("constexpr") != std::string::npos;
    if (constexprParam) {
      if (p.defaultValue) continue;
      if (contains(n, "ACTIVATION"))
        entry = n + "=\"\"";
      else if (contains(n, "DTYPE"))
        entry = n + "=tl.float16";
      else if (n.rfind("IS_", 0) == 0 || n.rfind("HAS_", 0) == 0 || contains(n, "CAUSAL") ||
               contains(n, "EVEN") || n.rfind("USE_", 0) == 0)
        entry = n + "=False";
      else if (contains(n, "NUM") || contains(n, "GROUP") || contains(n, "STAGES") ||
               contains(n, "SPLIT") || contains(n, "CLUSTER"))
        entry = n + "=2";
      else
        entry = n + "=" + std::to_string(block);
    } else if (contains(n, "desc")) {
      entry = n + ":desc<fp16," + std::to_string(block) + "x" + std::to_string(block) + ">";
    } else if (contains(n, "ptr") || n == "x" || n == "y" || n == "out" || n == "src" ||
               n == "dst") {
      entry = n + ":" + ptr;
    } else if (contains(n, "eps") || contains(n, "scale") || contains(n, "slope") ||
               contains(n, "alpha") || contains(n, "beta")) {
      entry = n + ":fp32";
    } else {
      entry = n + ":i32";
    }
    sig += (sig.empty() ? "" : ",") + entry;
  }
  return sig;
}

/// Byte spans of the tokens of `text` that have a spelling, with the number literals and names.
void tokenSpans(Seed& s) {
  const std::string& text = s.base.files[0].text;
  SourceManager sm;
  uint32_t file = sm.addFile("seed.py", text);
  std::vector<size_t> lineStarts = {0};
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') lineStarts.push_back(i + 1);
  std::vector<frontend::Token> tokens;
  try {
    tokens = frontend::tokenize(sm, file);
  } catch (const CompileError&) {
    return;
  }
  std::unordered_set<std::string> names;
  for (const frontend::Token& t : tokens) {
    if (t.text.empty() || t.kind == frontend::TokenKind::Newline) continue;
    if (t.loc.line == 0 || t.loc.line > lineStarts.size()) continue;
    size_t begin = lineStarts[t.loc.line - 1] + t.loc.col - 1;
    if (begin + t.text.size() > text.size()) continue;
    if (t.kind == frontend::TokenKind::Int || t.kind == frontend::TokenKind::Float)
      s.numbers.push_back(s.spans.size());
    if (t.kind == frontend::TokenKind::Name && names.insert(t.text).second)
      s.names.push_back(t.text);
    s.spans.push_back({begin, begin + t.text.size()});
  }
}

struct ManifestEntry {
  std::string kernel, signature;
  int numWarps = 4;
  Target target = Target::SM90a;
};

std::map<std::string, std::vector<ManifestEntry>> readManifest(const std::string& path) {
  std::map<std::string, std::vector<ManifestEntry>> out;
  std::istringstream in(readText(path));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string file;
    ManifestEntry e;
    ls >> file >> e.kernel >> e.signature;
    if (!(ls >> e.numWarps)) e.numWarps = 4;
    if (std::string target; ls >> target) e.target = parseTarget(target);
    if (!e.signature.empty()) out[file].push_back(e);
  }
  return out;
}

bool reaches(const Case& c, Stage stage) {
  Case probe = c;
  probe.stage = stage;
  return compileCase(probe).outcome == Outcome::Compiled;
}

} // namespace

std::vector<Seed> loadSeeds(const std::string& root, const std::string& manifest, bool probe,
                            std::string* log) {
  std::vector<std::string> files;
  for (const char* dir : {"python/warpweave/ops/kernels", "examples", "tests/python"}) {
    fs::path base = fs::path(root) / dir;
    if (!fs::exists(base)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(base)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".py") continue;
      std::string rel = fs::relative(entry.path(), root).string();
      if (std::string(dir) == "tests/python" && !contains(entry.path().filename(), "kernels"))
        continue;
      files.push_back(rel);
    }
  }
  std::sort(files.begin(), files.end());
  auto entries = manifest.empty() ? decltype(readManifest("")){} : readManifest(manifest);

  std::vector<Seed> seeds;
  int deep = 0;
  for (const std::string& rel : files) {
    std::string full = (fs::path(root) / rel).string();
    std::vector<SourceFile> sources = readSourceWithImports(full);
    for (SourceFile& f : sources) // messages name files relative to the root
      f.path = fs::relative(f.path, root).string();
    SourceManager sm;
    ast::Module module;
    try {
      module = frontend::parseModule(sm, sm.addFile(rel, sources[0].text));
    } catch (const CompileError&) {
      continue;
    }
    for (const auto& fn : module.functions) {
      bool returns = false;
      for (const auto& st : fn->body)
        if (auto* r = ast::dyn_cast<ast::Return>(st.get())) returns |= r->value != nullptr;
      if (!ast::isJitFunction(*fn) || returns) continue;
      Seed s;
      s.label = rel + ":" + fn->name;
      s.base.files = sources;
      s.base.kernel = fn->name;
      std::vector<ManifestEntry> candidates;
      if (auto it = entries.find(rel); it != entries.end())
        for (const ManifestEntry& e : it->second)
          if (e.kernel == fn->name) candidates.push_back(e);
      // Guessed signatures are tried for Hopper, then for Blackwell: kernels of tensor memory and
      // tcgen05 reach code generation on sm_100a only.
      for (Target target : {Target::SM90a, Target::SM100a})
        for (int v = 0; v < (probe ? 4 : 1); ++v)
          candidates.push_back({fn->name, guessSignature(*fn, v), 4, target});
      s.base.signature = candidates[0].signature;
      s.base.options.numWarps = candidates[0].numWarps;
      s.base.options.target = candidates[0].target;
      const char* reached = "front end";
      if (probe) {
        // Cluster kernels need a cluster launch: each candidate also with two CTAs.
        for (int ctas : {1, 2}) {
          for (const ManifestEntry& e : candidates) {
            Case c = s.base;
            c.signature = e.signature;
            c.options.numWarps = e.numWarps;
            c.options.target = e.target;
            c.options.numCtas = ctas;
            if (reaches(c, Stage::Ptx)) {
              s.base = c;
              reached = "ptx";
              break;
            }
          }
          if (std::string(reached) == "ptx") break;
        }
        if (std::string(reached) == "ptx") ++deep;
        if (std::string(reached) != "ptx" && reaches(s.base, Stage::TileIR)) reached = "tile-ir";
      }
      s.base.stage = Stage::Ptx;
      tokenSpans(s);
      if (log) *log += s.label + ": " + reached + " with " + s.base.signature + "\n";
      seeds.push_back(std::move(s));
    }
  }
  if (log)
    *log +=
        std::to_string(seeds.size()) + " seed kernels, " + std::to_string(deep) + " reach PTX\n";
  return seeds;
}

// ---------------------------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------------------------

namespace {

const std::vector<std::string> kEdgeNumbers = {"0",
                                               "1",
                                               "-1",
                                               "2",
                                               "3",
                                               "5",
                                               "7",
                                               "8",
                                               "16",
                                               "17",
                                               "31",
                                               "32",
                                               "33",
                                               "63",
                                               "64",
                                               "65",
                                               "127",
                                               "128",
                                               "255",
                                               "256",
                                               "257",
                                               "512",
                                               "1000",
                                               "1024",
                                               "4096",
                                               "65536",
                                               "2**16 + 1",
                                               "2**20",
                                               "2**24",
                                               "8388608",
                                               "2**31 - 1",
                                               "2**31",
                                               "2**32",
                                               "2**32 + 1",
                                               "2**53",
                                               "2**62",
                                               "2**63 - 1",
                                               "2**63",
                                               "2**64",
                                               "-2**31",
                                               "-2**63",
                                               "10**30",
                                               "(1 << 40)",
                                               "0x7fffffff",
                                               "0xffffffff",
                                               "-0",
                                               "1e308",
                                               "-1e308",
                                               "1e-320",
                                               "0.0",
                                               "-0.0",
                                               "1e400",
                                               "0.5",
                                               "3.5",
                                               "True",
                                               "False",
                                               "None",
                                               "float('nan')",
                                               "float('inf')",
                                               "-float('inf')"};

const std::vector<std::string> kUnicode = {
    "\xc3\xa9",         "\xc3\x9f",     "\xe4\xb8\xad", "\xf0\x9d\x94\x98",
    "\xf0\x9f\x98\x80", "\xc2\xa0",     "\xe2\x80\x8b", "\xe2\x80\xae",
    "\xef\xbb\xbf",     "\xe2\x80\xa8", "\xc2\x85",     "\xef\xbc\xa1",
    "\xd9\xa1",         "\xcc\x81",     "\xd0\xb0",     "\xe3\x80\x80",
    "\xc0\x80",         "\xff",         "\x80",         "\xed\xa0\x80",
    "\xf4\x90\x80\x80", "\xe2\x86\x92", "\xc3",         "\xe2\x80"};

// Statements put into a kernel body; $N is replaced by a name of the file.
const std::vector<std::string> kSnippets = {
    "_b = tlx.alloc_barriers(num_barriers=2**24, arrive_count=1)",
    "_b = tlx.alloc_barriers(2**31)",
    "_b = tlx.alloc_barriers(3, arrive_count=2**40)",
    "_s = tlx.local_alloc((16, 16), tl.float16, 8388608)",
    "_s = tlx.local_alloc((2**20, 2**20), tl.float16, 2)",
    "_s = tlx.local_alloc((64, 64), tl.float32, 1000)",
    "_s = tlx.local_alloc((3, 5), tl.float16, 1)",
    "_s = tlx.local_alloc((128, 128), tl.float16, 2)\n_v = tlx.local_view(_s, 5)",
    "_z = tl.zeros((2**24,), dtype=tl.float32)",
    "_z = tl.zeros((2**16, 2**16), dtype=tl.float32)",
    "_z = tl.full((1024, 1024), 1.0, tl.float32)",
    "_z = tl.zeros((2**62, 4), dtype=tl.float32)",
    "_r = tl.arange(0, 2**30)",
    "_r = tl.arange(2**31, 2**31 + 64)",
    "for _i in tl.static_range(4096):\n    for _j in tl.static_range(16):\n        pass",
    "for _i in tl.static_range(-2**63, 2**63 - 1, 2**62):\n    pass",
    "for _i in range(0, 2**40, 1):\n    pass",
    "for _i in tl.range(0, 10, 1, loop_unroll_factor=2**24):\n    pass",
    "for _i in tl.range(0, 10, 1, num_stages=2**20):\n    pass",
    "_i = 0\nwhile _i < 10:\n    _i += 1",
    "while True:\n    pass",
    "tl.static_assert(False, 'x')",
    "tl.device_print('v', tl.program_id(0))",
    "tl.device_assert(tl.program_id(0) >= 0, 'x')",
    "_x = tl.program_id(0) // 0",
    "_x = 1 // 0",
    "_x = 2 ** -1",
    "_x = 1 << 64",
    "_x = (-2**63) // -1",
    "_x = (-2**63) % -1",
    "_x = 2 ** 2 ** 2 ** 2 ** 2",
    "_x = tl.reshape(tl.arange(0, 64), (2**40, 0))",
    "_x = tl.arange(0, 64).reshape(8, 8).trans(1, 0)",
    "_x = tl.sum(tl.arange(0, 64), axis=5)",
    "_x = tl.arange(0, 64)[:, None, None, None, None, None, None, None]",
    "with tlx.async_tasks():\n    with tlx.async_task('default'):\n        pass\n    with "
    "tlx.async_task(num_warps=1, replicate=2**24):\n        pass",
    "with tlx.async_tasks():\n    with tlx.async_task(num_warps=2**31):\n        pass",
    "_x = tl.dot(tl.zeros((2**12, 16), tl.float16), tl.zeros((16, 2**12), tl.float16))",
    "_x = tl.zeros((64, 64), tl.float16) @ tl.zeros((64, 64), tl.float16)",
    "_x = tl.cast(tl.zeros((64,), tl.float32), tl.float8e4nv)",
    "tlx.barrier_wait(tlx.local_view(tlx.alloc_barriers(1), 0), 2**31)",
    "_x = tl.load(tl.program_id(0))",
    "_q = tl.arange(0, 16) + tl.arange(0, 32)",
    "return 1",
    "return",
    "global _g",
    "del _x",
    "_f = lambda: 0",
    "_x = [1, 2, 3]",
    "_x = {1: 2}",
    "_x = f'{tl.program_id(0)}'",
    "_x = ...",
    "assert False, 'x'",
    "raise ValueError('x')",
    "import os",
    "_x = $N + $N",
    "_x = $N[::2]",
    "_x = $N[2**40]",
    "_x = $N.to(tl.float8e5)",
    "_x = $N.to(tl.int1)",
    "_x = tl.sum($N, axis=-7)",
    "$N = $N[None, :]",
    "_x = tl.view($N, (2**31,))",
    "_x = tl.reshape($N, (2**20, 2**20))",
    "tl.store($N, $N)",
    "_x = tl.where($N, $N, $N)",
    "_x = $N @ $N",
    "_x = tl.dot($N, $N)",
    "_x = tl.trans($N)",
    "_x = tl.broadcast_to($N, (2**20, 2**20))",
    "_x = tl.expand_dims($N, 100)",
    "_x = $N.shape[9]",
    "_x = tl.max($N, axis=0)",
    "_x = tl.cumsum($N, axis=0)",
    "_x = tl.atomic_add($N, $N)",
    "$N = $N.to(tl.float64)",
    "$N = -$N",
    "$N = ~$N",
    "$N = $N // $N",
    "$N = $N % 0",
    "$N = $N >> 70",
    "$N = $N ** 2",
    "if $N:\n    pass",
    "for _i in range($N):\n    pass",
    "for _i in tl.static_range($N):\n    pass",
    "_x = tlx.local_view($N, 2**31)",
    "_x = tlx.local_load($N)",
    "tlx.local_store($N, $N)",
    "tlx.barrier_arrive($N, 2**31)",
    "tlx.barrier_expect_bytes($N, 2**40)",
    "_x = tlx.local_slice($N, [0, 0], [2**20, 2**20])",
    "_x = tlx.local_reinterpret($N, tl.float32, (2**30,))",
    "tlx.async_descriptor_load($N, $N, [0, 0], $N)",
};

std::string edgeOf(std::mt19937_64& rng) {
  return kEdgeNumbers[rng() % kEdgeNumbers.size()];
}

size_t pick(std::mt19937_64& rng, size_t n) {
  return n == 0 ? 0 : static_cast<size_t>(rng() % n);
}

std::pair<size_t, size_t> lineAt(const std::string& s, size_t pos) {
  size_t b = pos == 0 ? 0 : s.rfind('\n', pos - 1);
  b = (b == std::string::npos || pos == 0) ? 0 : b + 1;
  size_t e = s.find('\n', pos);
  e = e == std::string::npos ? s.size() : e + 1;
  return {b, e};
}

/// The start of a random indented, non-blank line (a statement inside some function), or npos.
size_t indentedLine(const std::string& s, std::mt19937_64& rng) {
  for (int tries = 0; tries < 40; ++tries) {
    auto [b, e] = lineAt(s, pick(rng, s.size()));
    if (b < s.size() && (s[b] == ' ' || s[b] == '\t')) {
      size_t t = s.find_first_not_of(" \t", b);
      if (t < e && s[t] != '\n' && s[t] != '#' && s[t] != ')' && s[t] != ']') return b;
    }
  }
  return std::string::npos;
}

void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

/// Splits a signature at its top-level commas (descriptors hold commas inside <...>).
std::vector<std::string> splitSignature(const std::string& sig) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : sig) {
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

class Mutator {
public:
  Mutator(const Seed& seed, std::mt19937_64& rng) : seed_(seed), rng_(rng) {}

  void mutate(Case& c) {
    std::string& s = c.files[0].text;
    size_t family = pick(rng_, 100);
    if (family < 45)
      textEdit(s, c.mutations);
    else if (family < 60)
      numberEdit(s, c.mutations);
    else if (family < 75)
      snippet(s, c.mutations);
    else if (family < 87)
      signatureEdit(c);
    else
      structural(s, c.mutations);
  }

private:
  void note(std::string& log, const std::string& what) { log += (log.empty() ? "" : "; ") + what; }

  std::pair<size_t, size_t> randomSpan(const std::string& s) {
    if (seed_.spans.empty()) return {0, 0};
    auto sp = seed_.spans[pick(rng_, seed_.spans.size())];
    if (sp.second > s.size()) return {0, 0};
    return sp;
  }

  void textEdit(std::string& s, std::string& log) {
    static const char kInteresting[] = "()[]{}:,.=\n\t '\"\\#@*-+<>!~%&|^;0123456789_x\r\f";
    if (s.empty()) return;
    switch (pick(rng_, 10)) {
    case 0:
      s[pick(rng_, s.size())] = static_cast<char>(pick(rng_, 256));
      note(log, "byte flip");
      return;
    case 1:
      s[pick(rng_, s.size())] = kInteresting[pick(rng_, sizeof(kInteresting) - 1)];
      note(log, "byte replaced");
      return;
    case 2:
      s.insert(pick(rng_, s.size()), 1, kInteresting[pick(rng_, sizeof(kInteresting) - 1)]);
      note(log, "byte inserted");
      return;
    case 3: { // delete a token
      auto [b, e] = randomSpan(s);
      s.erase(b, e - b);
      note(log, "token deleted");
      return;
    }
    case 4: { // duplicate a token
      auto [b, e] = randomSpan(s);
      s.insert(b, s.substr(b, e - b) + " ");
      note(log, "token duplicated");
      return;
    }
    case 5: { // replace a token with another token or a name of the file
      auto [b, e] = randomSpan(s);
      std::string with;
      if (!seed_.names.empty() && pick(rng_, 2) == 0) {
        with = seed_.names[pick(rng_, seed_.names.size())];
      } else {
        auto [b2, e2] = randomSpan(s);
        with = s.substr(b2, e2 - b2);
      }
      s.replace(b, e - b, with);
      note(log, "token replaced by '" + with.substr(0, 40) + "'");
      return;
    }
    case 6: { // delete, duplicate or swap lines
      auto [b, e] = lineAt(s, pick(rng_, s.size()));
      size_t k = pick(rng_, 3);
      if (k == 0) {
        s.erase(b, e - b);
        note(log, "line deleted");
      } else if (k == 1) {
        s.insert(b, s.substr(b, e - b));
        note(log, "line duplicated");
      } else {
        auto [b2, e2] = lineAt(s, pick(rng_, s.size()));
        if (b2 >= e) {
          std::string second = s.substr(b2, e2 - b2), first = s.substr(b, e - b);
          s.replace(b2, e2 - b2, first);
          s.replace(b, e - b, second);
        }
        note(log, "lines swapped");
      }
      return;
    }
    case 7: { // indentation
      auto [b, e] = lineAt(s, pick(rng_, s.size()));
      (void)e;
      static const char* kIndents[] = {" ", "\t", "    ", "\f", "        "};
      if (pick(rng_, 3) == 0 && b < s.size() && (s[b] == ' ' || s[b] == '\t'))
        s.erase(b, 1);
      else
        s.insert(b, kIndents[pick(rng_, 5)]);
      note(log, "indentation changed");
      return;
    }
    case 8:
      s.resize(pick(rng_, s.size()));
      note(log, "truncated");
      return;
    default: { // swap two tokens
      auto [b, e] = randomSpan(s);
      auto [b2, e2] = randomSpan(s);
      if (b2 < b) {
        std::swap(b, b2);
        std::swap(e, e2);
      }
      if (e <= b2 && e2 <= s.size()) {
        std::string first = s.substr(b, e - b), second = s.substr(b2, e2 - b2);
        s.replace(b2, e2 - b2, first);
        s.replace(b, e - b, second);
      }
      note(log, "tokens swapped");
      return;
    }
    }
  }

  void numberEdit(std::string& s, std::string& log) {
    if (seed_.numbers.empty()) return textEdit(s, log);
    auto [b, e] = seed_.spans[seed_.numbers[pick(rng_, seed_.numbers.size())]];
    if (e > s.size()) return;
    std::string old = s.substr(b, e - b);
    std::string with;
    switch (pick(rng_, 4)) {
    case 0:
      with = "(" + old + " + 1)";
      break;
    case 1:
      with = "(-" + old + ")";
      break;
    default:
      with = "(" + edgeOf(rng_) + ")";
    }
    s.replace(b, e - b, with);
    note(log, "number " + old + " -> " + with);
  }

  void snippet(std::string& s, std::string& log) {
    size_t at = indentedLine(s, rng_);
    if (at == std::string::npos) return textEdit(s, log);
    std::string indent = s.substr(at, s.find_first_not_of(" \t", at) - at);
    std::string text = kSnippets[pick(rng_, kSnippets.size())];
    while (text.find("$N") != std::string::npos) {
      std::string name = seed_.names.empty() ? "x" : seed_.names[pick(rng_, seed_.names.size())];
      text.replace(text.find("$N"), 2, name);
    }
    std::string block;
    std::istringstream lines(text);
    for (std::string l; std::getline(lines, l);) block += indent + l + "\n";
    s.insert(at, block);
    note(log, "statement '" + text.substr(0, 60) + "' inserted");
  }

  void signatureEdit(Case& c) {
    std::vector<std::string> entries = splitSignature(c.signature);
    size_t k = pick(rng_, 10);
    if (k >= 7 || entries.empty()) { // options
      static const int kWarps[] = {1, 2, 4, 8, 16, 32};
      static const int kStages[] = {1, 2, 3, 4, 7};
      static const int kCtas[] = {1, 2, 4, 8, 16};
      static const Target kTargets[] = {Target::SM90a, Target::SM90a, Target::SM80, Target::SM100a};
      switch (pick(rng_, 4)) {
      case 0:
        c.options.numWarps = kWarps[pick(rng_, 6)];
        break;
      case 1:
        c.options.numStages = kStages[pick(rng_, 5)];
        break;
      case 2:
        c.options.numCtas = kCtas[pick(rng_, 5)];
        break;
      default:
        c.options.target = kTargets[pick(rng_, 4)];
      }
      note(c.mutations, "options: warps " + std::to_string(c.options.numWarps) + ", stages " +
                            std::to_string(c.options.numStages) + ", ctas " +
                            std::to_string(c.options.numCtas) + ", " +
                            targetName(c.options.target));
      return;
    }
    size_t i = pick(rng_, entries.size());
    std::string& e = entries[i];
    size_t eq = e.find('='), colon = e.find(':');
    if (k == 6) {
      entries.erase(entries.begin() + static_cast<long>(i));
    } else if (eq != std::string::npos) { // a constexpr
      static const std::vector<std::string> kValues = {"tl.float32", "tl.int8", "'abc'", "1.5",
                                                       "True",       "None",    "(1, 2)"};
      e = e.substr(0, eq + 1) +
          (pick(rng_, 4) == 0 ? kValues[pick(rng_, kValues.size())] : edgeOf(rng_));
    } else if (colon != std::string::npos) {
      std::string name = e.substr(0, colon), type = e.substr(colon + 1);
      static const std::vector<std::string> kElems = {"fp16", "bf16", "fp32",    "fp64",
                                                      "i1",   "i8",   "i16",     "i32",
                                                      "i64",  "u8",   "fp8e4nv", "fp8e5"};
      static const std::vector<std::string> kShapes = {"64x64",    "128x64", "1x1",       "3x5",
                                                       "256x256",  "16x16",  "8x1048576", "64",
                                                       "64x64x64", "0x64"};
      std::string elem = kElems[pick(rng_, kElems.size())];
      if (type[0] == '*')
        e = name + ":*" + elem + (pick(rng_, 2) ? ":16" : "");
      else if (type.starts_with("desc"))
        e = name + ":desc<" + elem + "," + kShapes[pick(rng_, kShapes.size())] + ">";
      else
        e = name + ":" + elem + (pick(rng_, 3) == 0 ? ":16" : pick(rng_, 3) == 0 ? ":1" : "");
    }
    c.signature.clear();
    for (const std::string& x : entries) c.signature += (c.signature.empty() ? "" : ",") + x;
    note(c.mutations, "signature " + c.signature.substr(0, 300));
  }

  void structural(std::string& s, std::string& log) {
    switch (pick(rng_, 12)) {
    case 0: { // parentheses around a token
      auto [b, e] = randomSpan(s);
      static const int kDepths[] = {10, 100, 199, 200, 201, 1000};
      int d = kDepths[pick(rng_, 6)];
      s.insert(e, std::string(static_cast<size_t>(d), ')'));
      s.insert(b, std::string(static_cast<size_t>(d), '('));
      note(log, std::to_string(d) + " parentheses");
      return;
    }
    case 1: { // nested blocks
      size_t at = indentedLine(s, rng_);
      if (at == std::string::npos) return;
      std::string indent = s.substr(at, s.find_first_not_of(" \t", at) - at);
      static const int kDepths[] = {5, 50, 99, 100, 101, 300};
      int d = kDepths[pick(rng_, 6)];
      std::string block;
      for (int i = 0; i < d; ++i)
        block += indent + std::string(static_cast<size_t>(i), ' ') + "if True:\n";
      block += indent + std::string(static_cast<size_t>(d), ' ') + "pass\n";
      s.insert(at, block);
      note(log, std::to_string(d) + " nested blocks");
      return;
    }
    case 2: { // long expression chains
      size_t at = indentedLine(s, rng_);
      if (at == std::string::npos) return;
      std::string indent = s.substr(at, s.find_first_not_of(" \t", at) - at);
      static const int kLengths[] = {100, 1000, 20000};
      int n = kLengths[pick(rng_, 3)];
      std::string name = seed_.names.empty() ? "x" : seed_.names[pick(rng_, seed_.names.size())];
      static const char* kOps[] = {" + ", " * ", " - ", ", ", "[0]", ".T", " if True else "};
      const char* op = kOps[pick(rng_, 7)];
      std::string expr = name;
      for (int i = 0; i < n; ++i)
        expr += std::string(op) + (op[0] == '[' || op[0] == '.' ? "" : name);
      s.insert(at, indent + "_x = " + expr + "\n");
      note(log, std::to_string(n) + "-term '" + op + "' chain");
      return;
    }
    case 3: { // prefix operators
      auto [b, e] = randomSpan(s);
      (void)e;
      static const char* kPrefix[] = {"-", "~", "not ", "+"};
      int n = pick(rng_, 2) ? 250 : 2000;
      std::string p;
      const char* one = kPrefix[pick(rng_, 4)];
      for (int i = 0; i < n; ++i) p += one;
      s.insert(b, p);
      note(log, std::to_string(n) + " prefix operators");
      return;
    }
    case 4: { // long file: the whole file repeated, or a line many times
      if (pick(rng_, 2) == 0) {
        std::string once = s;
        int n = 2 + static_cast<int>(pick(rng_, 30));
        n = static_cast<int>(
            std::min<size_t>(n, (size_t(20) << 20) / std::max<size_t>(once.size(), 1)));
        for (int i = 1; i < n; ++i) s += once;
        note(log, "file repeated " + std::to_string(n) + " times");
      } else {
        auto [b, e] = lineAt(s, pick(rng_, s.size()));
        std::string line = s.substr(b, e - b);
        int n = pick(rng_, 2) ? 2000 : 20000;
        // Past the compiler's 16 MiB file limit (a CR-only file is one "line" here) only costs
        // the fuzzer memory: a little past it is enough.
        n = static_cast<int>(
            std::min<size_t>(n, (size_t(20) << 20) / std::max<size_t>(line.size(), 1)));
        std::string many;
        for (int i = 0; i < n; ++i) many += line;
        s.insert(b, many);
        note(log, "line repeated " + std::to_string(n) + " times");
      }
      return;
    }
    case 5: { // a huge name, string or comment
      size_t n = pick(rng_, 2) ? 100000 : 1000000;
      size_t k = pick(rng_, 3);
      auto [b, e] = randomSpan(s);
      (void)e;
      if (k == 0) s.insert(b, std::string(n, 'a'));
      if (k == 1) s.insert(b, "'" + std::string(n, 's') + "'");
      if (k == 2) s.insert(lineAt(s, b).first, "#" + std::string(n, 'c') + "\n");
      note(log, "a " + std::to_string(n) + "-byte name/string/comment");
      return;
    }
    case 6: { // unicode
      int n = 1 + static_cast<int>(pick(rng_, 3));
      for (int i = 0; i < n; ++i)
        s.insert(pick(rng_, s.size() + 1), kUnicode[pick(rng_, kUnicode.size())]);
      note(log, "unicode inserted");
      return;
    }
    case 7: { // NUL bytes
      size_t at = pick(rng_, s.size() + 1);
      if (pick(rng_, 2))
        s.insert(at, 1, '\0');
      else if (at < s.size())
        s[at] = '\0';
      note(log, "NUL byte");
      return;
    }
    case 8: { // line endings
      switch (pick(rng_, 5)) {
      case 0:
        replaceAll(s, "\n", "\r");
        note(log, "CR line endings");
        break;
      case 1:
        replaceAll(s, "\n", "\r\n");
        note(log, "CRLF line endings");
        break;
      case 2:
        for (char& ch : s)
          if (ch == '\n' && pick(rng_, 3) == 0) ch = '\r';
        note(log, "mixed CR / LF line endings");
        break;
      case 3:
        replaceAll(s, "\n", "\r\r\n");
        note(log, "CR CR LF line endings");
        break;
      default:
        while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
        note(log, "no final newline");
      }
      return;
    }
    case 9: { // tabs and form feeds in indentation
      if (pick(rng_, 2))
        replaceAll(s, "\n        ", "\n\t");
      else
        replaceAll(s, "\n    ", "\n\f    ");
      note(log, "tabs / form feeds in indentation");
      return;
    }
    case 10: { // a helper that calls itself or fans out
      static const char* kHelpers[] = {
          "\n@ww.jit\ndef _h(x):\n    return _h(x)\n",
          "\n@ww.jit\ndef _h0(x):\n    return x + 1\n" // fan-out: 2^16 inlined calls
          "@ww.jit\ndef _h1(x):\n    return _h0(x) + _h0(x)\n"
          "@ww.jit\ndef _h2(x):\n    return _h1(x) + _h1(x)\n"
          "@ww.jit\ndef _h3(x):\n    return _h2(x) + _h2(x)\n"
          "@ww.jit\ndef _h4(x):\n    return _h3(x) + _h3(x)\n"
          "@ww.jit\ndef _h5(x):\n    return _h4(x) + _h4(x)\n"
          "@ww.jit\ndef _h6(x):\n    return _h5(x) + _h5(x)\n"
          "@ww.jit\ndef _h7(x):\n    return _h6(x) + _h6(x)\n"
          "@ww.jit\ndef _h8(x):\n    return _h7(x) + _h7(x)\n"
          "@ww.jit\ndef _h9(x):\n    return _h8(x) + _h8(x)\n"
          "@ww.jit\ndef _hA(x):\n    return _h9(x) + _h9(x)\n"
          "@ww.jit\ndef _hB(x):\n    return _hA(x) + _hA(x)\n"
          "@ww.jit\ndef _hC(x):\n    return _hB(x) + _hB(x)\n"
          "@ww.jit\ndef _hD(x):\n    return _hC(x) + _hC(x)\n"
          "@ww.jit\ndef _hE(x):\n    return _hD(x) + _hD(x)\n"
          "@ww.jit\ndef _hF(x):\n    return _hE(x) + _hE(x)\n"
          "@ww.jit\ndef _hG(x):\n    return _hF(x) + _hF(x)\n"};
      static const char* kCalls[] = {"_h(", "_hG("};
      size_t k = pick(rng_, 2);
      s += kHelpers[k];
      size_t at = indentedLine(s, rng_);
      if (at != std::string::npos) {
        std::string indent = s.substr(at, s.find_first_not_of(" \t", at) - at);
        std::string name = seed_.names.empty() ? "x" : seed_.names[pick(rng_, seed_.names.size())];
        s.insert(at, indent + "_x = " + kCalls[k] + name + ")\n");
      }
      note(log, "recursive / fanning-out helper");
      return;
    }
    default: { // a decorator, def or class line damaged
      size_t p = s.find(pick(rng_, 2) ? "@ww.jit" : "\ndef ");
      if (p == std::string::npos) return;
      static const char* kWith[] = {"@ww.jit(",     "@ww.jit()", "@@ww.jit",
                                    "\nasync def ", "\nclass ",  "\ndef def "};
      s.replace(p, pick(rng_, 2) ? 7 : 5, kWith[pick(rng_, 6)]);
      note(log, "decorator / def damaged");
    }
    }
  }

  const Seed& seed_;
  std::mt19937_64& rng_;
};

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

} // namespace

Case makeCase(const std::vector<Seed>& seeds, uint64_t campaignSeed, int64_t index) {
  std::mt19937_64 rng(
      splitmix(campaignSeed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(index)));
  const Seed& seed = seeds[pick(rng, seeds.size())];
  Case c = seed.base;
  c.mutations = seed.label + ": ";
  std::string prefix = c.mutations;
  c.mutations.clear();
  Mutator m(seed, rng);
  size_t edits = 1 + pick(rng, 3);
  for (size_t i = 0; i < edits; ++i) m.mutate(c);
  c.mutations = prefix + c.mutations;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Campaigns
// ---------------------------------------------------------------------------------------------

namespace {

/// A finding's bucket: its outcome and first line with numbers and quoted text blurred, so that
/// one bug reached from many mutants counts once.
std::string bucketOf(Outcome o, const std::string& detail) {
  std::string first = detail.substr(0, detail.find('\n'));
  // ptxas names its temporary file: keep only what it says is wrong.
  if (size_t e = first.find("error   : "); e != std::string::npos) first = first.substr(e + 10);
  // Drop the FILE:LINE:COL prefix.
  if (size_t e = first.find(": error: "); e != std::string::npos) first = first.substr(e + 9);
  if (first.rfind("error: ", 0) == 0) first = first.substr(7);
  std::string out;
  bool inQuote = false;
  for (size_t i = 0; i < first.size() && out.size() < 160; ++i) {
    char ch = first[i];
    if (ch == '\'') {
      inQuote = !inQuote;
      out += "'...'";
      continue;
    }
    if (inQuote) continue;
    if (ch >= '0' && ch <= '9') {
      if (out.empty() || out.back() != 'N') out += 'N';
      continue;
    }
    out += ch;
  }
  replaceAll(out, "'...''...'", "'...'");
  return std::string(outcomeName(o)) + ": " + out;
}

/// Reads newline-terminated lines from the child with a deadline. Returns false at EOF, sets
/// `timedOut` when the deadline passes first.
class LineReader {
public:
  explicit LineReader(int fd) : fd_(fd) {}
  bool next(std::string& line, std::chrono::steady_clock::time_point deadline, bool& timedOut) {
    timedOut = false;
    while (true) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return true;
      }
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        timedOut = true;
        return false;
      }
      int waitMs = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1);
      struct pollfd p = {fd_, POLLIN, 0};
      int r = poll(&p, 1, std::min(waitMs, 1000));
      if (r < 0 && errno != EINTR) return false;
      if (r <= 0) continue;
      char chunk[65536];
      ssize_t n = read(fd_, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }
  /// Exactly `n` more bytes (a detail that follows its header line).
  bool bytes(size_t n, std::string& out) {
    while (buf_.size() < n) {
      char chunk[65536];
      ssize_t r = read(fd_, chunk, sizeof(chunk));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      buf_.append(chunk, static_cast<size_t>(r));
    }
    out = buf_.substr(0, n);
    buf_.erase(0, n);
    return true;
  }

private:
  int fd_;
  std::string buf_;
};

void writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(3);
    off += static_cast<size_t>(n);
  }
}

/// The child's loop: compiles mutants [from, to), reporting each on `fd`:
///   B i            (compile of i starts)
///   P i            (ptxas on i's PTX starts)
///   R i outcome ms hash len\n<len bytes of detail>
[[noreturn]] void childLoop(const std::vector<Seed>& seeds, const CampaignOptions& o, int64_t from,
                            int64_t to, const std::unordered_set<uint64_t>& checked, int fd) {
  if (o.memoryLimitMb) {
    struct rlimit rl;
    getrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = static_cast<rlim_t>(o.memoryLimitMb) << 20;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max) rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_AS, &rl);
  }
  struct rlimit core = {0, 0}; // crashes and hangs are expected here: no core files
  setrlimit(RLIMIT_CORE, &core);
  std::unordered_set<uint64_t> seen = checked;
  for (int64_t i = from; i < to; ++i) {
    Case c = makeCase(seeds, o.seed, i);
    // A hang is hangSeconds of CPU time in this compile (SIGXCPU), however busy the machine.
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    struct rlimit cpu;
    getrlimit(RLIMIT_CPU, &cpu);
    cpu.rlim_cur = static_cast<rlim_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1) +
                   static_cast<rlim_t>(o.hangSeconds);
    if (cpu.rlim_max != RLIM_INFINITY && cpu.rlim_cur > cpu.rlim_max) cpu.rlim_cur = cpu.rlim_max;
    setrlimit(RLIMIT_CPU, &cpu);
    writeAll(fd, "B " + std::to_string(i) + "\n");
    Verdict v = compileCase(c);
    // No limit outside the compile: the next mutant's generation must not use up this budget.
    cpu.rlim_cur = cpu.rlim_max;
    setrlimit(RLIMIT_CPU, &cpu);
    uint64_t hash = 0;
    if (v.outcome == Outcome::Compiled && o.ptxas && !v.ptx.empty()) {
      hash = ptxHash(v.ptx);
      if (seen.insert(hash).second) {
        writeAll(fd, "P " + std::to_string(i) + "\n");
        PtxasCheck p = checkPtx(v.ptx, c.options.target, o.ptxasTimeout);
        if (!p.ok) {
          v.outcome = p.timedOut ? Outcome::PtxasSlow : Outcome::PtxasReject;
          v.detail = p.log;
        }
      } else {
        hash = 0; // not checked again
      }
    }
    std::string detail = v.detail.substr(0, 4000);
    char ms[32];
    std::snprintf(ms, sizeof(ms), "%.2f", v.ms);
    writeAll(fd, "R " + std::to_string(i) + " " + std::to_string(static_cast<int>(v.outcome)) +
                     " " + ms + " " + std::to_string(hash) + " " + std::to_string(detail.size()) +
                     "\n" + detail);
  }
  _exit(0);
}

std::string signalName(int sig) {
  const char* s = strsignal(sig);
  return s ? std::string(s) + " (signal " + std::to_string(sig) + ")"
           : "signal " + std::to_string(sig);
}

void writeFinding(const CampaignOptions& o, const std::vector<Seed>& seeds, int64_t index,
                  Outcome outcome, const std::string& detail) {
  if (o.findingsDir.empty()) return;
  fs::path dir = fs::path(o.findingsDir) / outcomeName(outcome);
  std::error_code ec;
  fs::create_directories(dir, ec);
  Case c = makeCase(seeds, o.seed, index);
  std::string base = (dir / std::to_string(index)).string();
  constexpr size_t kMaxSaved = size_t(32) << 20;
  std::ofstream(base + ".py", std::ios::binary) << c.files[0].text.substr(0, kMaxSaved);
  std::ofstream info(base + ".txt", std::ios::binary);
  info << "mutant " << index << " of campaign seed " << o.seed << "\n"
       << "file: " << c.files[0].path << "\nkernel: " << c.kernel << "\nsignature: " << c.signature
       << "\noptions: --target " << targetName(c.options.target) << " --num-warps "
       << c.options.numWarps << " --num-stages " << c.options.numStages << " --num-ctas "
       << c.options.numCtas << "\nmutations: " << c.mutations << "\n\n"
       << detail << "\n";
}

} // namespace

std::string CampaignStats::summary() const {
  std::ostringstream os;
  os << total << " compiles in " << static_cast<int64_t>(seconds) << " s (" << ptxasRuns
     << " ptxas runs); slowest " << static_cast<int64_t>(slowestMs) << " ms (mutant "
     << slowestIndex << ")\n";
  for (int i = 0; i < kNumOutcomes; ++i)
    os << "  " << outcomeName(static_cast<Outcome>(i)) << ": " << counts[i] << "\n";
  if (!buckets.empty()) {
    os << "distinct findings (count, first mutant):\n";
    for (const auto& [b, n] : buckets)
      os << "  " << n.first << "  #" << n.second << "  " << b << "\n";
  }
  return os.str();
}

CampaignStats runCampaign(const std::vector<Seed>& seeds, const CampaignOptions& o,
                          const std::function<void(const std::string&)>& progress) {
  CampaignStats st;
  if (seeds.empty()) return st;
  auto start = std::chrono::steady_clock::now();
  std::unordered_set<uint64_t> checked;
  std::map<std::string, int> examples;
  auto record = [&](int64_t index, Outcome outcome, const std::string& detail, double ms) {
    st.counts[static_cast<int>(outcome)]++;
    st.total++;
    if (ms > st.slowestMs) {
      st.slowestMs = ms;
      st.slowestIndex = index;
    }
    if (!isFinding(outcome)) return;
    std::string b = bucketOf(outcome, detail);
    auto [it, fresh] = st.buckets.try_emplace(b, 0, index);
    it->second.first++;
    if (examples[b]++ < o.examplesPerBucket) writeFinding(o, seeds, index, outcome, detail);
    if (fresh && progress) progress("new finding #" + std::to_string(index) + ": " + b);
  };

  int64_t next = o.first, end = o.first + o.count, reported = 0, diedBefore = -1;
  while (next < end) {
    int64_t to = std::min(end, next + o.batch);
    int fds[2];
    if (pipe(fds) != 0) break;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      childLoop(seeds, o, next, to, checked, fds[1]);
    }
    close(fds[1]);
    if (pid < 0) {
      close(fds[0]);
      break;
    }
    LineReader reader(fds[0]);
    int64_t current = -1; // the mutant started but not reported
    auto deadline = std::chrono::steady_clock::time_point::max();
    auto started = std::chrono::steady_clock::now();
    bool hung = false;
    std::string line;
    while (true) {
      bool timedOut = false;
      if (!reader.next(line, deadline, timedOut)) {
        hung = timedOut;
        break;
      }
      std::istringstream ls(line);
      char tag = 0;
      int64_t i = 0;
      ls >> tag >> i;
      if (tag == 'B') {
        current = i;
        started = std::chrono::steady_clock::now();
        deadline = started + std::chrono::milliseconds(static_cast<int64_t>(o.hangSeconds * 10000));
      } else if (tag == 'P') {
        st.ptxasRuns++;
        deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(10 * o.ptxasTimeout + 10);
      } else if (tag == 'R') {
        int outcome = 0;
        double ms = 0;
        uint64_t hash = 0;
        size_t len = 0;
        ls >> outcome >> ms >> hash >> len;
        std::string detail;
        if (!reader.bytes(len, detail)) break;
        if (hash) checked.insert(hash);
        record(i, static_cast<Outcome>(outcome), detail, ms);
        current = -1;
        next = i + 1;
        deadline = std::chrono::steady_clock::time_point::max();
      }
    }
    if (hung) kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(fds[0]);
    if (current >= 0) {
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count();
      Case c = makeCase(seeds, o.seed, current);
      if (hung || (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU))
        record(current, Outcome::Hang,
               "over " + std::to_string(static_cast<int>(o.hangSeconds)) +
                   " s of CPU time: " + c.files[0].path + " " + c.kernel,
               ms);
      else if (WIFSIGNALED(status))
        record(current, Outcome::Crash, signalName(WTERMSIG(status)), ms);
      else
        record(current, Outcome::Crash,
               "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1), ms);
      next = current + 1;
    } else if (next < to) {
      // The child died outside a compile (generating mutant `next`, or writing its report):
      // once is retried, twice at the same mutant is that mutant's crash.
      if (diedBefore == next) {
        record(next, Outcome::Crash,
               "the fuzzer's child died before compiling it (" +
                   (WIFSIGNALED(status) ? signalName(WTERMSIG(status))
                                        : "exit status " + std::to_string(WEXITSTATUS(status))) +
                   ")",
               0);
        ++next;
        diedBefore = -1;
      } else {
        diedBefore = next;
      }
    }
    if (progress && (next - o.first) / 1000 != reported) {
      reported = (next - o.first) / 1000;
      // The counts so far, so that a campaign cut short still tells what it found.
      std::string counts;
      for (int i = 0; i < kNumOutcomes; ++i)
        counts += std::string(i ? ", " : "") + outcomeName(static_cast<Outcome>(i)) + " " +
                  std::to_string(st.counts[i]);
      progress(std::to_string(next - o.first) + " / " + std::to_string(o.count) + " compiles (" +
               counts + "), " + std::to_string(st.buckets.size()) + " distinct findings");
    }
  }
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return st;
}

} // namespace ww::fuzz
