// wwfuzz: mutation-fuzzing campaigns over the compiler (front end, specializer, codegen, ptxas).
//
//   wwfuzz [--root DIR] [--count N] [--first N] [--seed S] [--batch N] [--hang-seconds S]
//          [--memory-mb N] [--no-ptxas] [--no-probe] [--findings DIR] [--seeds] [--only TEXT]
//   wwfuzz --replay N [--seed S] [--only TEXT] [-o FILE]   one mutant: source, request, outcome
//
// --only keeps the seeds whose label ("kernels/blackwell/gemm_ws.py:gemm_ws_kernel") contains
// TEXT: a campaign aimed at one part of the compiler.
//
// Each batch of compiles runs in a forked child under an address-space limit; a child that dies
// from a signal is a crash of the mutant it was compiling, one that stops reporting for
// --hang-seconds is a hang. Accepted PTX (deduplicated without its line info) goes to ptxas.
#include "FuzzCore.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

using namespace ww;
using namespace ww::fuzz;

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "wwfuzz: " << why
            << "\nusage: wwfuzz [--root DIR] [--count N] [--first N] [--seed S] [--batch N]\n"
               "              [--hang-seconds S] [--memory-mb N] [--no-ptxas] [--no-probe]\n"
               "              [--findings DIR] [--seeds] [--only TEXT]\n"
               "       wwfuzz --replay N [--seed S] [--only TEXT] [-o FILE]\n";
  std::exit(1);
}

int64_t number(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    long long n = std::stoll(v, &used);
    if (used == v.size() && n >= 0) return n;
  } catch (const std::exception&) {
  }
  usage(flag + " expects a non-negative integer, got '" + v + "'");
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CampaignOptions o;
  o.count = 1000;
  std::string root = WW_SOURCE_DIR, output, only;
  bool probe = true, listSeeds = false;
  int64_t replay = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) usage(a + " needs a value");
      return args[++i];
    };
    if (a == "--root")
      root = value();
    else if (a == "--count")
      o.count = number(a, value());
    else if (a == "--first")
      o.first = number(a, value());
    else if (a == "--seed")
      o.seed = static_cast<uint64_t>(number(a, value()));
    else if (a == "--batch")
      o.batch = static_cast<int>(std::max<int64_t>(1, number(a, value())));
    else if (a == "--hang-seconds")
      o.hangSeconds = static_cast<double>(std::max<int64_t>(1, number(a, value())));
    else if (a == "--memory-mb")
      o.memoryLimitMb = static_cast<size_t>(number(a, value()));
    else if (a == "--no-ptxas")
      o.ptxas = false;
    else if (a == "--no-probe")
      probe = false;
    else if (a == "--findings")
      o.findingsDir = value();
    else if (a == "--seeds")
      listSeeds = true;
    else if (a == "--replay")
      replay = number(a, value());
    else if (a == "--only")
      only = value();
    else if (a == "-o")
      output = value();
    else
      usage("unknown argument '" + a + "'");
  }

  std::string log;
  std::vector<Seed> seeds = loadSeeds(root, root + "/tools/fuzz/seeds.txt", probe, &log);
  if (!only.empty()) {
    std::erase_if(seeds, [&](const Seed& s) { return s.label.find(only) == std::string::npos; });
    log += std::to_string(seeds.size()) + " of them with '" + only + "' in their label\n";
  }
  if (seeds.empty()) usage("no seed kernels under " + root + (only.empty() ? "" : " match --only"));
  if (listSeeds) {
    std::cout << log;
    return 0;
  }
  std::cerr << log.substr(log.rfind('\n', log.size() - 2) + 1);

  if (replay >= 0) {
    Case c = makeCase(seeds, o.seed, replay);
    if (!output.empty()) std::ofstream(output, std::ios::binary) << c.files[0].text;
    std::cout << "file: " << c.files[0].path << "\nkernel: " << c.kernel
              << "\nsignature: " << c.signature << "\noptions: --target "
              << targetName(c.options.target) << " --num-warps " << c.options.numWarps
              << " --num-stages " << c.options.numStages << " --num-ctas " << c.options.numCtas
              << "\nmutations: " << c.mutations << "\n";
    Verdict v = compileCase(c);
    if (v.outcome == Outcome::Compiled && o.ptxas) {
      PtxasCheck p = checkPtx(v.ptx, c.options.target, o.ptxasTimeout);
      if (!p.ok) {
        v.outcome = p.timedOut ? Outcome::PtxasSlow : Outcome::PtxasReject;
        v.detail = p.log;
      }
    }
    std::cout << "outcome: " << outcomeName(v.outcome) << " (" << v.ms << " ms)\n"
              << v.detail << "\n";
    return isFinding(v.outcome) ? 3 : 0;
  }

  CampaignStats st =
      runCampaign(seeds, o, [](const std::string& line) { std::cerr << line << std::endl; });
  std::cout << st.summary();
  int64_t findings = 0;
  for (int i = 0; i < kNumOutcomes; ++i)
    if (isFinding(static_cast<Outcome>(i))) findings += st.counts[i];
  return findings ? 3 : 0;
}
