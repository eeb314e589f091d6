// libdevice (Triton's triton.language.extra.libdevice): CUDA's math functions of the same names,
// built as sequences of existing Tile IR ops (TlLibdevice.cpp), so the interpreter and every code
// generator run them without an op of their own.
#pragma once

#include <string>
#include <vector>

namespace ww::specialize {

class Specializer;
struct CallSite;
struct Val;

/// The libdevice functions TlLibdevice.cpp builds (sorted; docs/language.md lists them).
const std::vector<std::string>& libdeviceFunctions();
bool isLibdeviceFunction(const std::string& name);
/// `libdevice.name(...)` for a name of libdeviceFunctions().
Val callLibdevice(Specializer& sp, const std::string& name, CallSite& call);

} // namespace ww::specialize
