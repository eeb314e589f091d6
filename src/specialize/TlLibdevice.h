// libdevice (Triton's triton.language.extra.libdevice): CUDA's math functions of the same names,
// built as sequences of existing Tile IR ops (TlLibdevice.cpp), so the interpreter and every code
// generator run them without an op of their own.
#pragma once

#include "frontend/Diagnostics.h"
#include "ir/IR.h"

#include <string>
#include <vector>

namespace ww::specialize {

class Specializer;
struct CallSite;
struct Val;

/// tl.exp / exp2 / log / log2 / sin / cos of a float64 `x` built from the same pieces as
/// libdevice's fp64 functions (the GPU targets have fp32 approximations only), or null for
/// other ops and types.
ir::Value* float64Math(Specializer& sp, ir::OpCode code, ir::Value* x, SourceLoc loc);

/// The libdevice functions TlLibdevice.cpp builds (sorted; docs/language.md lists them).
const std::vector<std::string>& libdeviceFunctions();
bool isLibdeviceFunction(const std::string& name);
/// `libdevice.name(...)` for a name of libdeviceFunctions().
Val callLibdevice(Specializer& sp, const std::string& name, CallSite& call);

} // namespace ww::specialize
