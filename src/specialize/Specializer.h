// From AST plus signature to Tile IR: constexpr evaluation, compile-time if, static unrolling,
// helper inlining, runtime control flow with loop-carried values, async task regions.
#pragma once

#include "frontend/Ast.h"
#include "ir/IR.h"
#include "warpweave/warpweave.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ww::specialize {

struct SpecializeInput {
  const SourceManager* sources = nullptr;
  /// modules[0] holds the kernel; the others may hold @jit helpers it calls.
  std::vector<const ast::Module*> modules;
  /// Per module (missing or null: none), the names the caller bound (SourceFile::names).
  std::vector<const std::map<std::string, NameBinding>*> names;
  std::string kernel;
  std::vector<SignatureEntry> signature;
  /// Caller-resolved module-level values (name -> literal text).
  std::map<std::string, std::string> globals;
  /// SourceManager ids holding the text of each global's value, for diagnostics.
  std::map<std::string, uint32_t> globalFiles;
  CompileOptions options;
  /// False for the interpreter's Tile IR: it runs on the CPU, not on options.target, so
  /// `tl.target_info` answers as Triton's does with no CUDA target (inline-PTX helpers take
  /// their portable fallbacks).
  bool cudaTarget = true;
};

/// Throws CompileError on user errors.
std::unique_ptr<ir::Function> specialize(const SpecializeInput& input);

} // namespace ww::specialize
