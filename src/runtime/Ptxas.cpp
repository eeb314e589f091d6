// Runs the CUDA toolkit's ptxas as a child process (posix_spawn, no shell) in a private temp dir.
#include "runtime/Ptxas.h"

#include "runtime/Process.h"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace ww::runtime {

namespace {

bool isExecutable(const std::string& path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

std::string envOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

/// Reads the resource report of `kernelName` out of a `ptxas -v` log. The log lists each entry
/// function in turn, so only the lines after its "Compiling entry function" header count.
void parseReport(const std::string& log, const std::string& kernelName, PtxasResult& r) {
  static const std::regex compiling(R"(Compiling entry function '([^']+)')");
  static const std::regex properties(R"(Function properties for ([A-Za-z0-9_$.]+))");
  static const std::regex registers(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  static const std::regex spills(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  std::istringstream in(log);
  std::string line, current;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, compiling)) {
      current = m[1];
      continue;
    }
    if (std::regex_search(line, m, properties)) {
      current = m[1];
      continue;
    }
    if (!kernelName.empty() && current != kernelName) continue;
    if (std::regex_search(line, m, registers)) r.registers = std::stoi(m[1]);
    if (std::regex_search(line, m, smem)) r.sharedBytes = std::stoi(m[1]);
    if (std::regex_search(line, m, spills)) r.spillBytes = std::stoi(m[1]) + std::stoi(m[2]);
  }
}

} // namespace

std::string findPtxas() {
  std::string fromEnv = envOr("WARPWEAVE_PTXAS");
  if (isExecutable(fromEnv)) return fromEnv;
  std::string cudaHome = envOr("CUDA_HOME");
  if (!cudaHome.empty() && isExecutable(cudaHome + "/bin/ptxas")) return cudaHome + "/bin/ptxas";
  std::string cudaPath = envOr("CUDA_PATH");
  if (!cudaPath.empty() && isExecutable(cudaPath + "/bin/ptxas")) return cudaPath + "/bin/ptxas";
  if (isExecutable("/usr/local/cuda/bin/ptxas")) return "/usr/local/cuda/bin/ptxas";
  std::string path = envOr("PATH");
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    if (isExecutable(dir + "/ptxas")) return dir + "/ptxas";
  }
  return {};
}

PtxasResult runPtxas(const std::string& ptx, Target target, const std::string& kernelName) {
  PtxasResult r;
  std::string ptxas = findPtxas();
  if (ptxas.empty()) {
    r.log = "ptxas not found: set WARPWEAVE_PTXAS or CUDA_HOME, or install the CUDA toolkit "
            "(looked in $WARPWEAVE_PTXAS, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin, "
            "PATH)";
    return r;
  }
  TempDir dir("ptxas");
  if (!dir.ok()) {
    r.log = "cannot create a temporary directory for ptxas: " + dir.error();
    return r;
  }
  const std::string input = dir.path() + "/kernel.ptx";
  const std::string output = dir.path() + "/kernel.cubin";
  if (!writeFile(input, ptx.data(), ptx.size())) {
    r.log = "cannot write " + input;
    return r;
  }
  ProcessResult p =
      runProcess({ptxas, "-O3", "-v", "--gpu-name", targetName(target), "-o", output, input});
  r.log = std::move(p.output);
  if (!p.started) {
    r.log = "cannot run " + ptxas + ": " + r.log;
    return r;
  }
  if (p.exitCode != 0) {
    if (r.log.empty()) r.log = ptxas + " exited with status " + std::to_string(p.exitCode);
    return r;
  }
  std::string cubin;
  if (!readFile(output, cubin) || cubin.empty()) {
    r.log += "\nptxas produced no cubin";
    return r;
  }
  r.cubin.assign(cubin.begin(), cubin.end());
  parseReport(r.log, kernelName, r);
  r.ok = true;
  return r;
}

} // namespace ww::runtime
