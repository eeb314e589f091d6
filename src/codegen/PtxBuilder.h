// The one place PTX text is produced: virtual registers per register class, instructions, labels,
// `.loc` line info, and hash-consing of pure instructions so redundant index math never reaches
// the output.
#pragma once

#include "frontend/Diagnostics.h"
#include "ir/Type.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ww::codegen {

/// PTX register classes. Integers narrower than 16 bits and fp8 live in B16 registers; fp16/bf16
/// in B16; i1 in predicates.
enum class RegClass : uint8_t { Pred, B16, B32, B64, F32, F64 };

/// The register class holding one element of `t` (pointers are B64).
RegClass regClassOf(ir::DType t, bool pointer = false);
/// `.pred`, `.b16`, `.b32`, `.b64`, `.f32`, `.f64`.
const char* regDeclType(RegClass c);

/// Whether `operand` is a register of class `c` (as newReg names them: %r12 is B32, %rd12 B64).
bool isRegisterOf(std::string_view operand, RegClass c);

/// PTX immediates. Floats are written bit-exactly in hex (0fXXXXXXXX / 0dXXXXXXXXXXXXXXXX).
std::string immInt(int64_t v);
std::string immF32(float v);
std::string immF64(double v);
inline bool isImmediate(std::string_view operand) {
  return !operand.empty() && operand[0] != '%';
}

/// The lines that enclose tl.inline_asm_elementwise's text (as LLVM marks inline asm): the dead
/// instruction elimination keeps what lies between them and counts every register there used.
inline constexpr std::string_view kInlineAsmBegin = "// begin inline asm";
inline constexpr std::string_view kInlineAsmEnd = "// end inline asm";

class PtxBuilder {
public:
  /// A fresh virtual register of class `c`.
  std::string newReg(RegClass c);

  /// Emits `opcode dst, operands...;` for an instruction without side effects and returns dst.
  /// The same opcode and operands already emitted in a visible scope return the earlier register.
  std::string pure(std::string_view opcode, RegClass dst, const std::vector<std::string>& operands);
  /// Records that `reg` already holds what pure(opcode, dst, operands) would compute (another
  /// instruction defined it: the word a pair of halves was unpacked from, say), so that such a
  /// pure() in scope returns `reg` instead of emitting.
  void remember(std::string_view opcode, RegClass dst, const std::vector<std::string>& operands,
                const std::string& reg);
  /// `mov` of an immediate or register into a register of class `c` (hash-consed).
  std::string materialize(const std::string& operand, RegClass c);

  /// Emits one instruction line; `guard` is a predicate register (`@%p1`), negated when
  /// `negateGuard`. Operands are comma-separated as given (they may contain braces/brackets).
  void inst(std::string_view opcode, const std::vector<std::string>& operands,
            const std::string& guard = {}, bool negateGuard = false);
  /// Emits a raw line (already a complete statement, without the indentation).
  void raw(std::string_view line);

  std::string newLabel(std::string_view hint);
  void label(const std::string& name);

  /// Takes the hash-consing table away, so that pure() emits afresh until mergePureTable gives
  /// it back (what is emitted meanwhile keeps its entries, recorded in the current scope).
  std::map<std::string, std::string> takePureTable() { return std::exchange(pureTable_, {}); }
  void mergePureTable(std::map<std::string, std::string> table) {
    pureTable_.merge(table); // entries emitted since the take win
  }

  /// Hash-consing scopes: instructions emitted inside a region must not be reused after it,
  /// since the region may not execute (if) or redefines registers (loop bodies).
  void pushScope();
  void popScope();

  /// Line info: registers a file and returns its PTX file index (1-based).
  int addFile(const std::string& path);
  /// Emits `.loc` before the next instruction when `loc` differs from the last one emitted.
  void setLoc(SourceLoc loc);
  void enableLineInfo(bool on) { lineInfo_ = on; }
  /// Maps SourceLoc::file ids to PTX file indices (set up by the lowering).
  void mapFile(uint32_t sourceFile, int ptxFile) { fileMap_[sourceFile] = ptxFile; }

  /// Removes instructions without side effects whose results nothing with side effects reads,
  /// directly or through other instructions. Unlike ptxas's clean-up this also drops dead cycles
  /// through loop-carried registers (e.g. the per-element pointers of a vectorized access that
  /// only the first element of each vector uses).
  void eliminateDeadInstructions();

  /// Declares `statement` (a complete PTX declaration: an extern function prototype, a variable)
  /// once at function scope, ahead of the registers; repeating it has no effect. Function scope
  /// keeps the module text the lowering assembles unchanged.
  void declare(const std::string& statement);
  /// A NUL-terminated string in global memory; returns a register holding its generic address.
  /// Equal texts share one constant.
  std::string stringConstant(const std::string& text);
  /// `text` with printf's conversion character escaped, to print it verbatim in a format.
  static std::string escapePrintf(const std::string& text);
  /// One argument of `printf`: a register or immediate of class B32 (%d, %u, %x), B64 (%lld,
  /// %llx, pointers) or F64 (%f: floats are printed as doubles, as C varargs promote them).
  struct PrintArg {
    std::string value;
    RegClass cls;
  };
  /// Device-side printf through the CUDA vprintf system call: the format as a string constant
  /// and the arguments packed, each aligned to its size, in a local-memory buffer. With a
  /// `guard` predicate, only threads where it holds (or fails, `negateGuard`) print.
  void printf(const std::string& format, const std::vector<PrintArg>& args,
              const std::string& guard = {}, bool negateGuard = false);

  /// `.file` directives for the module header.
  std::string fileDirectives() const;
  /// `.reg` declarations for every register used, after the function-scope declarations
  /// (`declare`, string constants, the printf argument buffer).
  std::string regDeclarations() const;
  const std::string& body() const { return body_; }
  /// The text emitted so far, for rewriting what a region emitted (the for lowering coalesces
  /// loop-carried registers in its body's text).
  std::string& mutableBody() { return body_; }

private:
  std::string body_;
  std::array<int, 6> regCount_{};
  int labelCount_ = 0;
  // Hash-consing table: key -> register; scope marks record the keys added since each push.
  std::map<std::string, std::string> pureTable_;
  std::vector<std::vector<std::string>> scopes_{{}};
  std::vector<std::string> files_;
  std::map<uint32_t, int> fileMap_;
  bool lineInfo_ = true;
  std::vector<std::string> declarations_;
  std::map<std::string, std::string> strings_; // text -> symbol
  int64_t printfBufferBytes_ = 0;              // the largest argument pack of any printf
  SourceLoc lastLoc_;
  SourceLoc pendingLoc_;
  void flushLoc();
};

} // namespace ww::codegen
