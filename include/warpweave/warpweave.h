// The warpweave C++ API: compile kernel source to Tile IR, PTX and cubin; run a kernel in the
// interpreter. The CUDA launch API is in warpweave/runtime.h.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ww {

namespace ir {
class Module;
class Function;
} // namespace ir

enum class Target { SM80, SM90a, SM100a };
/// "sm_80", "sm_90a", "sm_100a".
const char* targetName(Target t);
/// Parses a target name; throws std::invalid_argument naming the accepted ones.
Target parseTarget(const std::string& s);

/// One entry of a kernel signature: `name:TYPE` for a runtime argument, `name=VALUE` for a
/// constexpr. TYPE is `*fp16` (pointer, optional `:16` divisibility), `i32`/`i64`/`fp32`/`i1`
/// (scalar, optional `:16` or `:1`), or `desc<fp16,128x64>` (a TMA tensor descriptor).
struct SignatureEntry {
  std::string name;
  bool isConstexpr = false;
  std::string value;      // constexpr: the literal text (1024, 1e-6, True, tl.float16, "str")
  std::string type;       // runtime: the TYPE text without divisibility suffix
  int divisibility = 1;   // 16 when `:16`
  bool equalsOne = false; // `:1`
};

/// Parses `x:*fp32:16,n:i32,BLOCK=1024`. Throws CompileFailure naming the bad entry.
std::vector<SignatureEntry> parseSignature(const std::string& sig);

/// What one module-level name of a source file is bound to, as the caller sees the live module:
/// @ww.jit reads each function's globals and closure at launch, so aliases, conditional and
/// re-exported imports and import hooks bind what Python bound, whatever the import text says.
struct NameBinding {
  enum class Kind {
    Module,   // a module by its dotted name: warpweave.language, math... (others: an error at use)
    Member,   // `target` "MODULE.NAME": a member of a language module (from ... import arange)
    Helper,   // a helper module, compiled from files[`file`] (its @jit functions and globals)
    Function, // a @jit function: `target` is its name in files[`file`]
    Value,    // a compile-time value: `target` is its literal text (1024, 1e-06, tl.float16)
    Opaque,   // a Python object kernels cannot use: `target` says what it is, for the error
  };
  Kind kind = Kind::Value;
  std::string target;
  int file = -1;
};

struct SourceFile {
  std::string path;
  std::string text;
  /// The file's module-level names as the caller resolved them. When present, names bind from
  /// here only and the file's import statements are not consulted; without them (wwc) the
  /// imports' text decides.
  std::optional<std::map<std::string, NameBinding>> names = std::nullopt;
};

struct CompileOptions {
  Target target = Target::SM90a;
  int numWarps = 4;
  int numStages = 3;
  int numCtas = 1; // CTAs per cluster: the product of ctas_per_cga
  /// ctas_per_cga's shape (x, y, z), x fastest in the cluster rank; {0, 0, 0}: (numCtas, 1, 1).
  /// When given, numCtas is 1 or the product.
  std::array<int, 3> clusterDims = {0, 0, 0};
  bool lineInfo = true;
  /// 0: barrier_wait spins until its phase completes. N > 0: after N failed try_wait rounds
  /// the waiting thread prints the block, task, barrier, phase and source line, then traps
  /// (a debugging aid for hangs; WARPWEAVE_TRAP_HANGS from Python, --trap-hangs in wwc).
  int mbarrierTrapTries = 0;
  /// Whether float adds and multiplies may be contracted into FMAs (Triton's enable_fp_fusion):
  /// false emits them with an explicit rounding (add.rn / mul.rn), which ptxas never contracts.
  bool fpFusion = true;
  /// Triton's enable_reflect_ftz: the fp32 approximations that flush subnormals (ex2 of exp2 and
  /// pow, fast_dividef's div) carry .ftz; false issues them without it.
  bool reflectFtz = true;
  /// Triton's maxnreg: the kernel declares `.maxnreg N` (ptxas keeps each thread within N
  /// registers); 0: none given. Not with async task register budgets, which set it themselves.
  int maxRegisters = 0;
};

enum class Stage { TileIR, Ptx, Cubin };

struct CompileRequest {
  /// files[0] holds the kernel; further files hold @jit helpers it calls (from other modules).
  std::vector<SourceFile> files;
  std::string kernel;
  std::vector<SignatureEntry> signature;
  /// Module-level values of files[0] resolved by a caller that gives no SourceFile::names:
  /// name -> literal text as for constexpr values. They override what the front end parses.
  std::map<std::string, std::string> globals;
  CompileOptions options;
  Stage stage = Stage::Cubin;
};

/// The name of the last parameter of a kernel that builds tensor maps in device code (TMA
/// through tl.make_tensor_descriptor): a pointer to CompiledKernel::globalScratchBytes times the
/// number of programs in the grid, 128-byte aligned (Triton's global scratch; from
/// warpweave.set_allocator in Python). It is not an argument of the kernel's source.
inline constexpr const char* kGlobalScratchParam = "__ww_global_scratch";

/// A runtime kernel parameter, in PTX parameter order.
struct KernelParam {
  std::string name;
  std::string type;  // "ptr<fp32>", "i32", "i64", "fp32", "desc<fp16, 128x64, rank=2>"
  int sizeBytes = 0; // bytes in the launch parameter buffer (128 for a TMA descriptor)
  int divisibility = 1;
};

/// Everything a compile produced, and what the launcher needs.
struct CompiledKernel {
  std::string name; // the PTX entry point
  Target target = Target::SM90a;
  std::string tileIR; // printed Tile IR after the cleanup passes
  std::string ptx;
  std::vector<uint8_t> cubin;
  std::vector<KernelParam> params;
  /// Signature arguments folded at compile time (constexprs, ints equal to 1): not passed.
  std::vector<std::string> foldedArgs;
  int numWarps = 4; // total warps per CTA, async tasks included
  int numCtas = 1;  // CTAs per cluster
  /// The cluster's shape (x, y, z), x fastest in the cluster rank; the product is numCtas.
  std::array<int, 3> clusterDims = {1, 1, 1};
  int sharedBytes = 0; // dynamic shared memory the kernel needs
  /// Global scratch per program (the kGlobalScratchParam parameter); 0 without it.
  int globalScratchBytes = 0;
  int registers = 0;  // from ptxas, when it ran
  int spillBytes = 0; // from ptxas, when it ran
  std::string ptxasLog;
  /// The specialized Tile IR, for the interpreter.
  std::shared_ptr<ir::Module> module;
};

/// A compile that failed on a user error. what() is the complete formatted diagnostic:
/// `FILE:LINE:COL: error: MESSAGE`, the source line, a caret and notes.
class CompileFailure : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Runs the pipeline up to request.stage. Thread-safe. Throws CompileFailure on user errors.
CompiledKernel compile(const CompileRequest& request);

/// A kernel file and, transitively, the files its imports name, in the order
/// CompileRequest::files wants them: relative imports (`from .helpers import f`, `from ..ln
/// import g`) beside the importing file, and absolute ones (`from pkg.helpers import f`, `import
/// pkg.helpers as h`) as MODULE.py or MODULE/__init__.py under, in order: the importing file's
/// folder, the kernel file's folder and each folder above it, the PYTHONPATH entries and the
/// working directory. warpweave, triton and math are the language, never files. Imports under
/// `if`/`try`/`with` count too. Throws std::runtime_error when `path` cannot be read; imports
/// that name no file are left to the compile, which reports their use.
std::vector<SourceFile> readSourceWithImports(const std::string& path);

/// Tile IR text (CompiledKernel::tileIR) printed in the vocabulary of Triton's dialects: what
/// `asm["ttir"]` (without layouts) and `asm["ttgir"]` (`withLayouts`: the register layouts,
/// shared encodings and conversions code generation uses) show a Triton user
/// (ir/TritonDialects.h). Throws CompileFailure when the text is not Tile IR or its layouts
/// cannot be assigned. `target`: the compile target's name (sm_90a ...).
std::string tritonDialectText(const std::string& tileIR, const std::string& target,
                              bool withLayouts);

/// JSON metadata written beside a cubin (`wwc --meta`): entry, warps, shared memory, params.
std::string kernelMetadataJson(const CompiledKernel& kernel);

/// The version of the compiler, part of every cache key.
const char* compilerVersion();

// ---------------------------------------------------------------------------------------------
// Interpreter
// ---------------------------------------------------------------------------------------------

/// One kernel argument for the interpreter: a host buffer (for pointer params) or a scalar.
struct InterpArg {
  enum class Kind { Buffer, Int, Float, Descriptor } kind = Kind::Int;
  void* data = nullptr; // Buffer, Descriptor: host memory
  size_t bytes = 0;     // Buffer, Descriptor: its size, for bounds checks
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> shape;   // Descriptor: the global tensor's shape
  std::vector<int64_t> strides; // Descriptor: its strides, in elements
  bool readOnly = false;        // Buffer, Descriptor: stores through it fail (InterpreterError)
  static InterpArg buffer(void* p, size_t n) { return {Kind::Buffer, p, n, 0, 0, {}, {}}; }
  static InterpArg integer(int64_t v) { return {Kind::Int, nullptr, 0, v, 0, {}, {}}; }
  static InterpArg real(double v) { return {Kind::Float, nullptr, 0, 0, v, {}, {}}; }
  /// A host TensorDescriptor over `bytes` bytes at `p`; the block shape is the parameter's type.
  static InterpArg descriptor(void* p, size_t n, std::vector<int64_t> shape,
                              std::vector<int64_t> strides) {
    return {Kind::Descriptor, p, n, 0, 0, std::move(shape), std::move(strides)};
  }
};

/// An error the interpreter found while running a kernel (out-of-bounds access, deadlock, ...),
/// formatted with the kernel's FILE:LINE:COL.
class InterpreterError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Host memory that no argument covers but a kernel reaches through an address it read or
/// computed (a table of pointers, as Triton's grouped GEMM passes): bytes [start, start + bytes).
struct HostSpan {
  uint64_t start = 0;
  uint64_t bytes = 0;
  bool writable = true;
};
/// Which live host allocation holds `address`, if any. The interpreter asks it (from any of its
/// threads) for addresses outside every argument and checks the access against the span.
using HostMemoryLookup = std::function<std::optional<HostSpan>(uint64_t address)>;

/// Runs a compiled kernel (its Tile IR) on the CPU over the grid, one program at a time. `args`
/// follow `kernel.params`. Without `hostMemory`, an address outside every argument is a fault.
void interpret(const CompiledKernel& kernel, const int grid[3], const std::vector<InterpArg>& args,
               const HostMemoryLookup& hostMemory = {});

/// The pointer and descriptor parameters (names) through which `kernel` may write global memory
/// (stores, atomics, descriptor stores), from its Tile IR; an over-approximation (every one of
/// them without Tile IR). Read-only host buffers for the others are safe to interpret.
std::vector<std::string> writtenParams(const CompiledKernel& kernel);

// ---------------------------------------------------------------------------------------------
// Command line (`wwc`, `python -m warpweave`)
// ---------------------------------------------------------------------------------------------

/// Runs the wwc command line; returns the exit code. Errors go to stderr.
int runCli(const std::vector<std::string>& args);

} // namespace ww
