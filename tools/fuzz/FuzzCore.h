// The compiler's mutation fuzzer: seeds (kernels of our own files with signatures that compile),
// mutants of their source, signature and options, the classification of one compile, and a
// campaign that runs many compiles in forked batches so that a crash or a hang is a finding and not
// the end of the run. Used by tools/fuzz/wwfuzz.cpp (campaigns) and tests/cpp/fuzz_test.cpp (the
// bounded run in CI).
#pragma once

#include "warpweave/warpweave.h"

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace ww::fuzz {

/// One compile: a kernel of files[0] (files[1..] hold the helpers its imports name).
struct Case {
  std::vector<SourceFile> files;
  std::string kernel;
  std::string signature;
  CompileOptions options;
  Stage stage = Stage::Ptx;
  std::string mutations; // what the mutator did, for the findings
};

/// A kernel to mutate, with the byte spans of its file's tokens (for token edits).
struct Seed {
  Case base;
  std::string label; // "kernels/matmul.py:matmul_kernel"
  std::vector<std::pair<size_t, size_t>> spans;
  std::vector<size_t> numbers;    // indices into spans of number literals
  std::vector<std::string> names; // identifiers of the file, for token replacement
};

enum class Outcome {
  Compiled,          // compiled (and ptxas accepted the PTX, when checked)
  Rejected,          // a CompileError with a valid FILE:LINE:COL
  SignatureRejected, // the signature text itself is malformed (a command-line error)
  NoLocation,        // a user error without a usable FILE:LINE:COL
  Internal,          // std::exception other than CompileFailure, or "internal error" text
  Crash,             // the compiling process died from a signal
  Hang,              // over the time limit
  PtxasReject,       // wwc accepted the kernel, ptxas rejected its PTX
  PtxasSlow,         // ptxas ran past its time limit on accepted PTX (reported, not a finding)
};
constexpr int kNumOutcomes = 9;
const char* outcomeName(Outcome o);
/// The outcomes that are bugs of the compiler.
inline bool isFinding(Outcome o) {
  return o == Outcome::NoLocation || o == Outcome::Internal || o == Outcome::Crash ||
         o == Outcome::Hang || o == Outcome::PtxasReject;
}

struct Verdict {
  Outcome outcome = Outcome::Compiled;
  std::string detail; // the error text, the exception, the ptxas log
  std::string ptx;    // Compiled at Stage::Ptx
  double ms = 0;
};

/// Compiles `c` in this process and classifies the result (ptxas is not run here).
Verdict compileCase(const Case& c);

/// "" when `message` (a rendered CompileFailure) starts with FILE:LINE:COL of one of `files`
/// pointing into that file, else why not.
std::string checkLocated(const std::string& message, const std::vector<SourceFile>& files);

struct PtxasCheck {
  bool ok = true;
  bool timedOut = false;
  std::string log;
};
/// Runs ptxas (runtime::findPtxas) on `ptx` for `target` with a limit of `timeoutSeconds` of CPU
/// time (10x that of wall time). ok when there is no ptxas.
PtxasCheck checkPtx(const std::string& ptx, Target target, int timeoutSeconds);
/// A hash of the PTX without its line-info directives (mutants that only move lines share it).
uint64_t ptxHash(const std::string& ptx);

/// The kernels of our own files under `root` (kernels/, examples/, tests/python/*kernels*.py),
/// each with a signature: from `manifest` (lines `FILE KERNEL SIGNATURE [NUM_WARPS]`) where it
/// names the kernel, else guessed from the parameter names; with `probe`, guessed variants are
/// tried until one reaches PTX. `log` receives one line per kernel.
std::vector<Seed> loadSeeds(const std::string& root, const std::string& manifest, bool probe,
                            std::string* log = nullptr);

/// Mutant number `index` of a campaign: deterministic in (seeds, campaignSeed, index), so any
/// finding can be regenerated from its number.
Case makeCase(const std::vector<Seed>& seeds, uint64_t campaignSeed, int64_t index);

struct CampaignOptions {
  uint64_t seed = 1;
  int64_t first = 0; // mutant numbers [first, first + count)
  int64_t count = 1000;
  double hangSeconds = 10;     // a compile taking more CPU time is a hang (wall time: 10x that)
  int batch = 200;             // compiles per forked child
  bool ptxas = true;           // check accepted PTX with ptxas
  int ptxasTimeout = 120;      // CPU seconds
  size_t memoryLimitMb = 4096; // address-space limit of the compiling child
  std::string findingsDir;     // where to write findings (empty: nowhere)
  int examplesPerBucket = 3;
};

struct CampaignStats {
  int64_t counts[kNumOutcomes] = {};
  int64_t total = 0;
  int64_t ptxasRuns = 0;
  double seconds = 0;
  double slowestMs = 0;
  int64_t slowestIndex = -1;
  /// Distinct findings: "outcome: normalized message" -> how many, and the first mutant number.
  std::map<std::string, std::pair<int64_t, int64_t>> buckets;
  std::string summary() const;
};

/// Runs mutants [first, first + count) in forked children of `batch` compiles each.
CampaignStats runCampaign(const std::vector<Seed>& seeds, const CampaignOptions& options,
                          const std::function<void(const std::string&)>& progress = {});

} // namespace ww::fuzz
