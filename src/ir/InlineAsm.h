// tl.inline_asm_elementwise: the operand model its constraint string describes, shared by the
// specializer (which checks a kernel's constraints where it calls it) and the PTX backend.
// As in Triton, one asm instance handles `pack` elements of each argument and result; elements
// narrower than 32 bits travel packed, up to 32 bits (or `pack` elements) per register.
#pragma once

#include "ir/Type.h"

#include <string>
#include <vector>

namespace ww::ir {

/// One operand of the asm: `=r` (an output) or `r` (an input); `letter` is r l h c f d or b.
struct AsmConstraint {
  bool output = false;
  char letter = 'r';
};

/// Elements of `elem` (`pointer`: a 64-bit address) that one asm operand holds at `pack`.
int asmElementsPerOperand(DType elem, bool pointer, int pack);
/// Bits of one asm operand holding `asmElementsPerOperand` elements.
int asmOperandBits(DType elem, bool pointer, int pack);
/// The constraint letters an operand of `bits` bits may use ("r" or "f" for 32, ...).
std::string asmLettersFor(int bits);

/// Parses "=r,=r,r,l": outputs first, then inputs. Returns an empty string on success, else
/// what is wrong (the caller locates it).
std::string parseAsmConstraints(const std::string& text, std::vector<AsmConstraint>& out);

/// Each `$N` of an asm string: where it starts, its length and N (the longest run of digits: `$12`
/// is operand 12, not `$1` then '2'). N is capped at 100,000.
struct AsmOperandRef {
  size_t at = 0, length = 0, operand = 0;
};
std::vector<AsmOperandRef> asmOperandRefs(const std::string& text);

} // namespace ww::ir
