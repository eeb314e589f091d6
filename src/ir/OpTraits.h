// Families of Tile IR opcodes that several stages treat alike (verifier, effects, layouts,
// codegen, interpreter): the one place that says which ops are elementwise, binary, math, views.
#pragma once

#include "ir/IR.h"

namespace ww::ir {

/// add sub mul div rem floordiv and or xor shl shr max min pow: two operands of one type, a result
/// of that type.
bool isBinaryArithmetic(OpCode c);
/// neg not exp exp2 log log2 sqrt rsqrt abs sin cos tanh erf floor ceil sigmoid: one operand, a
/// result of its type.
bool isUnaryMath(OpCode c);
/// multiple_of, max_contiguous: value hints that return their operand.
bool isValueHint(OpCode c);
/// Every op whose result element depends only on the operand elements at the same coordinates:
/// binary and unary arithmetic, cmp, select, fma, umulhi, casts, addptr, value hints.
bool isElementwise(OpCode c);
/// splat broadcast expand_dims reshape permute join split cat: data movement between shapes.
bool isShapeOp(OpCode c);
/// Views of shared buffers that move no data: local_view local_trans local_slice
/// local_reinterpret.
bool isBufferView(OpCode c);

} // namespace ww::ir
