// ww-opt: reads Tile IR text (as `wwc --emit tile-ir` prints it), runs the named passes in order
// on each kernel and prints the result: IR-in / IR-out testing of the passes (tests/lit).
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "transforms/Passes.h"
#include "warpweave/warpweave.h"

#include <fstream>
#include <iostream>
#include <sstream>

namespace {

using ww::ir::Function;

struct PassContext {
  ww::Target target = ww::Target::SM90a;
};

struct PassInfo {
  const char* name;
  const char* help;
  void (*run)(Function&, const PassContext&);
};

/// Every pass ww-opt runs, by name: the one place a new pass is registered.
const PassInfo kPasses[] = {
    {"verify", "structural checks of the verifier (a failure exits 1 with its message)",
     [](Function& f, const PassContext&) { ww::transforms::verify(f); }},
    {"fold", "constant folding and algebraic simplification",
     [](Function& f, const PassContext&) { ww::transforms::foldConstants(f); }},
    {"cse", "merges identical pure ops",
     [](Function& f, const PassContext&) { ww::transforms::eliminateCommonSubexpressions(f); }},
    {"dce", "removes pure ops whose results are unused",
     [](Function& f, const PassContext&) { ww::transforms::eliminateDeadCode(f); }},
    {"cleanup", "fold, CSE, DCE with verification: the driver's clean-up pipeline",
     [](Function& f, const PassContext&) { ww::transforms::runCleanupPipeline(f); }},
    {"combine-dot-add", "folds x + dot(a, b) into dot(a, b, x)",
     [](Function& f, const PassContext&) { ww::transforms::combineDotAdd(f); }},
    {"hoist-loop-invariants", "moves loop-invariant tensor shape ops out of for loops",
     [](Function& f, const PassContext&) { ww::transforms::hoistLoopInvariants(f); }},
    {"narrow-carried-casts", "carries a loop value in the type every use casts it to",
     [](Function& f, const PassContext&) { ww::transforms::narrowCarriedCasts(f); }},
    {"pipeline-dot-loops",
     "software-pipelines tl.dot loops into cp.async / TMA + wgmma (sm_90a) or tcgen05.mma "
     "(sm_100a)",
     [](Function& f, const PassContext& ctx) {
       if (ctx.target == ww::Target::SM80)
         throw std::invalid_argument("pipeline-dot-loops rewrites loops for sm_90a's wgmma or "
                                     "sm_100a's tcgen05.mma; the target is sm_80");
       ww::transforms::pipelineDotLoops(f, ctx.target == ww::Target::SM100a);
     }},
    {"warp-specialize",
     "splits a loop marked tl.range(warp_specialize=True) into a TMA producer task and wgmma "
     "consumers (sm_90a)",
     [](Function& f, const PassContext& ctx) {
       if (ctx.target != ww::Target::SM90a)
         throw std::invalid_argument("warp-specialize rewrites loops for sm_90a's TMA and wgmma");
       ww::transforms::warpSpecializeDotLoops(f);
     }},
    {"offset-loop-pointers",
     "carries cp.async address tensors a loop advances by an invariant splat as entry pointers "
     "plus one byte offset",
     [](Function& f, const PassContext&) { ww::transforms::offsetLoopPointers(f); }},
    {"unroll-loops", "unrolls loops marked by tl.range(loop_unroll_factor=U)",
     [](Function& f, const PassContext&) { ww::transforms::unrollLoops(f); }},
    {"lower-device-descriptors",
     "desc_load/desc_store through make_desc -> masked loads/stores (on sm_90a / sm_100a only "
     "where the descriptor cannot be a tensor map)",
     [](Function& f, const PassContext& ctx) {
       ww::transforms::lowerDeviceDescriptors(f, ctx.target != ww::Target::SM80);
     }},
    {"shared-memory-barriers", "CTA barriers before async copies that overwrite shared memory read",
     [](Function& f, const PassContext&) { ww::transforms::insertSharedMemoryBarriers(f); }},
};

const char* kUsage =
    "usage: ww-opt FILE.tir|- [--pass=P1,P2,...]... [--target sm_90a|sm_80|sm_100a]\n"
    "              [--print-locs] [-o OUT]\n"
    "  Reads Tile IR, runs the passes in the order given on every kernel, prints\n"
    "  the result. --print-locs ends each op with loc(\"FILE\":LINE:COL).\n"
    "passes:\n";

std::string usage() {
  std::string u = kUsage;
  for (const PassInfo& p : kPasses) {
    std::string name = p.name;
    u += "  " + name + std::string(name.size() < 26 ? 26 - name.size() : 1, ' ') + p.help + "\n";
  }
  return u;
}

const PassInfo* findPass(const std::string& name) {
  for (const PassInfo& p : kPasses)
    if (name == p.name) return &p;
  return nullptr;
}

int usageError(const std::string& message) {
  std::cerr << "ww-opt: error: " << message << "\n" << usage();
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  std::string file, output;
  bool printLocs = false;
  PassContext ctx;
  std::vector<const PassInfo*> passes;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << usage();
      return 0;
    } else if (a.rfind("--pass=", 0) == 0 || a == "--pass") {
      std::string list = a == "--pass" ? (i + 1 < argc ? argv[++i] : "") : a.substr(7);
      if (list.empty()) return usageError("--pass needs a comma-separated list of passes");
      std::stringstream names(list);
      for (std::string name; std::getline(names, name, ',');) {
        const PassInfo* p = findPass(name);
        if (!p) return usageError("unknown pass '" + name + "'");
        passes.push_back(p);
      }
    } else if (a == "--target" || a.rfind("--target=", 0) == 0) {
      std::string t = a == "--target" ? (i + 1 < argc ? argv[++i] : "") : a.substr(9);
      try {
        ctx.target = ww::parseTarget(t);
      } catch (const std::invalid_argument& e) {
        return usageError(e.what());
      }
    } else if (a == "--print-locs") {
      printLocs = true;
    } else if (a == "-o") {
      if (i + 1 >= argc) return usageError("-o needs a file");
      output = argv[++i];
    } else if (a.size() > 1 && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else if (file.empty()) {
      file = a;
    } else {
      return usageError("more than one input file ('" + file + "' and '" + a + "')");
    }
  }
  if (file.empty()) return usageError("no input file ('-' reads standard input)");

  std::stringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::cerr << file << ": error: cannot open file\n";
      return 1;
    }
    text << in.rdbuf();
  }
  ww::SourceManager sm;
  uint32_t id = sm.addFile(file == "-" ? "<stdin>" : file, text.str());
  const PassInfo* current = nullptr;
  try {
    ww::ir::Module module = ww::ir::parseModule(sm, id);
    for (auto& fn : module.functions)
      for (const PassInfo* p : passes) {
        current = p;
        p->run(*fn, ctx);
      }
    ww::ir::PrintOptions opts;
    if (printLocs) opts.locations = &sm;
    std::string out = ww::ir::print(module, opts);
    if (output.empty() || output == "-") {
      std::cout << out;
    } else {
      std::ofstream o(output, std::ios::binary);
      o << out;
      if (!o) {
        std::cerr << output << ": error: cannot write file\n";
        return 1;
      }
    }
    return 0;
  } catch (ww::CompileError& e) {
    e.render(sm);
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    // The verifier's and the passes' own checks (std::logic_error, std::invalid_argument).
    std::cerr << "ww-opt: error: " << (current ? "pass '" + std::string(current->name) + "': " : "")
              << e.what() << "\n";
    return 1;
  }
}
