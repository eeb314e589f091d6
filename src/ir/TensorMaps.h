// When a tensor descriptor made in the kernel (make_desc) can be a TMA tensor map that the kernel
// writes itself: the rules that the descriptor lowering (src/transforms/
// LowerDeviceDescriptors.cpp), the software pipeliner and the codegen's tensor-map writer
// (src/codegen/TlxTmaExtras.cpp) share, so that they agree on which descriptors stay TMA.
//
// Only what the compiler can see is checked. The base address (16 bytes) and the outer strides
// (multiples of 16 bytes) must be aligned at run time, as CUDA's tensor maps require; like
// Triton, the kernel does not check them.
#pragma once

#include "ir/IR.h"

#include <string>

namespace ww::ir {

/// The tensor-map element type (CUtensorMapDataType, tensormap.replace's .elemtype) of `t`, as
/// the launcher encodes host descriptors (8-bit floats travel as bytes); -1 for a type TMA does
/// not move.
int tensorMapElemType(DType t);

/// Why the descriptor made by `make` (a make_desc) cannot be written as a tensor map for TMA
/// copies, or "" when it can: a rank of 1 to 5, an element type TMA moves, the innermost stride
/// the constant 1, rows of at least 16 bytes (a multiple of 16) and block dimensions a TMA box
/// covers (at most 256 elements, or a multiple of 256 that copies split).
std::string tensorMapProblem(const Op& make);

} // namespace ww::ir
