// The `wwc` command line, shared by the wwc binary and `python -m warpweave`.
#include "warpweave/warpweave.h"

#include <fstream>
#include <iostream>
#include <sstream>

namespace ww {

namespace {

const char* kUsage =
    "usage: wwc FILE.py --kernel NAME --signature SIG --target sm_90a|sm_80|sm_100a\n"
    "           [--num-warps N] [--num-stages N] [--num-ctas N] [--ctas-per-cga X,Y,Z]\n"
    "           [--trap-hangs[=N]] [--no-fp-fusion] [--no-reflect-ftz] [--maxnreg N]\n"
    "           --emit tile-ir|ptx|cubin [-o OUT] [--meta OUT.json]\n"
    "  SIG: comma-separated 'name:TYPE' (runtime) and 'name=VALUE' (constexpr) entries;\n"
    "       TYPE: *fp16 *bf16 *fp32 *i32 ... (pointers, optional :16), i1 i32 i64 fp32\n"
    "       (scalars, optional :16 or :1), desc<fp16,128x64> (TMA descriptor).\n"
    "  --ctas-per-cga X,Y,Z: the cluster's shape (CTAs per cluster along each grid axis).\n"
    "  --trap-hangs[=N]: a barrier_wait that fails N try_wait rounds (default 131072, about\n"
    "       half a second on an H200) prints its block, thread, task, barrier, phase and\n"
    "       source line, then traps instead of hanging the GPU (a debugging aid).\n"
    "  --no-fp-fusion: float adds and multiplies are never contracted into FMAs\n"
    "       (Triton's enable_fp_fusion=False).\n"
    "  --no-reflect-ftz: fp32 approximations (exp2, pow, fast_dividef) keep subnormals\n"
    "       (no .ftz; Triton's enable_reflect_ftz=False).\n"
    "  --maxnreg N: the kernel declares .maxnreg N (Triton's maxnreg).\n";

/// try_wait rounds before --trap-hangs reports a hang. On the H200 a planted hang with 2^20
/// rounds failed 4.8 s after the launch call (compile included), i.e. at most ~4.6 us per round
/// despite the 1 us suspend hint: 2^17 rounds stay under a second, yet no healthy pipeline
/// waits that long for one barrier phase.
constexpr int kDefaultTrapTries = 1 << 17;

struct CliError {
  std::string message;
};

int parseInt(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    int n = std::stoi(v, &used);
    if (used == v.size() && n > 0) return n;
  } catch (const std::exception&) {
  }
  throw CliError{flag + " expects a positive integer, got '" + v + "'"};
}

std::string jsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

} // namespace

/// Metadata next to a cubin, read by the C++ loader: entry name, warps, shared memory, params.
std::string kernelMetadataJson(const CompiledKernel& k) {
  std::ostringstream os;
  os << "{\n  \"name\": \"" << jsonEscape(k.name) << "\",\n  \"target\": \"" << targetName(k.target)
     << "\",\n  \"num_warps\": " << k.numWarps << ",\n  \"num_ctas\": " << k.numCtas
     << ",\n  \"cluster_dims\": [" << k.clusterDims[0] << ", " << k.clusterDims[1] << ", "
     << k.clusterDims[2] << "]"
     << ",\n  \"shared_bytes\": " << k.sharedBytes
     << ",\n  \"global_scratch_bytes\": " << k.globalScratchBytes
     << ",\n  \"registers\": " << k.registers << ",\n  \"spill_bytes\": " << k.spillBytes
     << ",\n  \"compiler\": \"" << compilerVersion() << "\",\n  \"params\": [";
  for (size_t i = 0; i < k.params.size(); ++i) {
    const KernelParam& p = k.params[i];
    os << (i ? "," : "") << "\n    {\"name\": \"" << jsonEscape(p.name) << "\", \"type\": \""
       << jsonEscape(p.type) << "\", \"size\": " << p.sizeBytes
       << ", \"divisibility\": " << p.divisibility << "}";
  }
  os << "\n  ],\n  \"folded\": [";
  for (size_t i = 0; i < k.foldedArgs.size(); ++i)
    os << (i ? ", " : "") << "\"" << jsonEscape(k.foldedArgs[i]) << "\"";
  os << "]\n}\n";
  return os.str();
}

int runCli(const std::vector<std::string>& args) {
  std::string file, kernel, signature, emit, output, meta, target = "sm_90a";
  CompileOptions opts;
  try {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= args.size()) throw CliError{a + " needs a value"};
        return args[++i];
      };
      if (a == "-h" || a == "--help") {
        std::cout << kUsage;
        return 0;
      } else if (a == "--kernel")
        kernel = value();
      else if (a == "--signature")
        signature = value();
      else if (a == "--target")
        target = value();
      else if (a == "--num-warps")
        opts.numWarps = parseInt(a, value());
      else if (a == "--num-stages")
        opts.numStages = parseInt(a, value());
      else if (a == "--num-ctas")
        opts.numCtas = parseInt(a, value());
      else if (a == "--ctas-per-cga") {
        std::string v = value();
        size_t c1 = v.find(','), c2 = c1 == std::string::npos ? c1 : v.find(',', c1 + 1);
        if (c2 == std::string::npos || v.find(',', c2 + 1) != std::string::npos)
          throw CliError{"--ctas-per-cga expects X,Y,Z (three positive integers), got '" + v + "'"};
        opts.clusterDims = {parseInt(a, v.substr(0, c1)),
                            parseInt(a, v.substr(c1 + 1, c2 - c1 - 1)),
                            parseInt(a, v.substr(c2 + 1))};
      } else if (a == "--trap-hangs")
        opts.mbarrierTrapTries = kDefaultTrapTries;
      else if (a.rfind("--trap-hangs=", 0) == 0)
        opts.mbarrierTrapTries = parseInt("--trap-hangs", a.substr(13));
      else if (a == "--no-fp-fusion")
        opts.fpFusion = false;
      else if (a == "--no-reflect-ftz")
        opts.reflectFtz = false;
      else if (a == "--maxnreg")
        opts.maxRegisters = parseInt(a, value());
      else if (a == "--emit")
        emit = value();
      else if (a == "-o")
        output = value();
      else if (a == "--meta")
        meta = value();
      else if (!a.empty() && a[0] == '-')
        throw CliError{"unknown option '" + a + "'"};
      else if (file.empty())
        file = a;
      else
        throw CliError{"more than one input file ('" + file + "' and '" + a + "')"};
    }
    if (file.empty()) throw CliError{"no input file"};
    if (kernel.empty()) throw CliError{"--kernel NAME is required"};
    if (emit.empty()) throw CliError{"--emit tile-ir|ptx|cubin is required"};
    if (emit != "tile-ir" && emit != "ptx" && emit != "cubin")
      throw CliError{"--emit expects tile-ir, ptx or cubin, got '" + emit + "'"};
    if (emit == "cubin" && output.empty()) throw CliError{"--emit cubin needs -o OUT"};
    if (opts.numWarps & (opts.numWarps - 1))
      throw CliError{"--num-warps must be a power of 2, got " + std::to_string(opts.numWarps)};
    try {
      opts.target = parseTarget(target);
    } catch (const std::invalid_argument& e) {
      throw CliError{e.what()};
    }
  } catch (const CliError& e) {
    std::cerr << "wwc: error: " << e.message << "\n" << kUsage;
    return 1;
  }

  CompileRequest req;
  try {
    req.files = readSourceWithImports(file);
  } catch (const std::runtime_error&) {
    std::cerr << file << ": error: cannot open file\n";
    return 1;
  }
  req.kernel = kernel;
  req.options = opts;
  req.stage = emit == "tile-ir" ? Stage::TileIR : emit == "ptx" ? Stage::Ptx : Stage::Cubin;
  try {
    req.signature = parseSignature(signature);
    CompiledKernel k = compile(req);
    auto write = [&](const std::string& path, const std::string& data) {
      if (path.empty() || path == "-") {
        std::cout << data;
        return true;
      }
      std::ofstream out(path, std::ios::binary);
      out << data;
      if (!out) {
        std::cerr << path << ": error: cannot write file\n";
        return false;
      }
      return true;
    };
    std::string data = emit == "tile-ir" ? k.tileIR
                       : emit == "ptx"   ? k.ptx
                                         : std::string(k.cubin.begin(), k.cubin.end());
    if (!write(output, data)) return 1;
    if (!meta.empty() && !write(meta, kernelMetadataJson(k))) return 1;
    return 0;
  } catch (const CompileFailure& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << file << ": internal compiler error: " << e.what() << "\n";
    return 2;
  }
}

} // namespace ww
