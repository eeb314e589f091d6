// Per-element PTX for elementwise Tile IR ops (arithmetic, comparisons, math, casts): the
// lowering applies these to every register a thread holds.
#pragma once

#include "codegen/PtxBuilder.h"
#include "ir/IR.h"
#include "warpweave/warpweave.h"

#include <string>
#include <vector>

namespace ww::codegen {

/// What the per-element emitters need besides the builder.
struct ScalarContext {
  PtxBuilder& b;
  Target target;
  SourceLoc loc; // of the op being lowered, for errors
  /// CompileOptions::fpFusion: false gives fp32 / fp64 add, sub and mul an explicit rounding
  /// (.rn), so that ptxas does not contract them into FMAs.
  bool fpFusion = true;
  /// CompileOptions::reflectFtz: whether the flushing fp32 approximations carry .ftz.
  bool reflectFtz = true;
};

/// One element of an elementwise op: `args` are operand strings (registers or immediates) of
/// element types `argTypes`; returns the result operand of element type `resultType`.
std::string emitElementwise(ScalarContext& cx, const ir::Op& op,
                            const std::vector<std::string>& args,
                            const std::vector<ir::DType>& argTypes, ir::DType resultType);

/// Converts one element between dtypes (`rounding`: "" or "rtne" round to nearest even, "rtz"
/// toward zero for float narrowing).
std::string emitCast(ScalarContext& cx, const std::string& x, ir::DType from, ir::DType to,
                     const std::string& rounding = {});

/// The operand string of a constant element of type `t` (an immediate where PTX takes one,
/// a materialized register for predicates and 16-bit floats).
std::string emitConstant(ScalarContext& cx, double fvalue, int64_t ivalue, bool isFloatValue,
                         ir::DType t);

/// PTX type suffix for arithmetic on `t`: s32/u32/f32/... (8-bit ints use 16-bit arithmetic).
std::string arithType(ir::DType t);
/// Bit-type suffix of the register holding `t`: b16/b32/b64 (pred for i1).
std::string bitType(ir::DType t);

} // namespace ww::codegen
