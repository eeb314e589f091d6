// Handlers of tl.gather, tl.map_elementwise and tensor.item() (TlMisc.cpp), rows of the tl table
// (TlBuiltins.cpp), and of Python's getattr / hasattr on compile-time objects in kernels.
#pragma once

#include "frontend/Diagnostics.h"

#include <string>

namespace ww::ir {
class Value;
}

namespace ww::specialize {

class Specializer;
struct CallSite;
struct Val;

Val tlGather(Specializer& sp, const std::string& name, CallSite& call);
Val tlMapElementwise(Specializer& sp, const std::string& name, CallSite& call);
Val tlItem(Specializer& sp, const std::string& name, CallSite& call);
/// The only element of a one-element tensor `x`, as a scalar.
ir::Value* unsplat(Specializer& sp, ir::Value* x, SourceLoc loc);
/// getattr(obj, "name"[, default]) / hasattr(obj, "name"): the attribute a kernel expression
/// `obj.name` reads, decided at compile time.
Val pythonGetAttr(Specializer& sp, const std::string& name, CallSite& call);

} // namespace ww::specialize
