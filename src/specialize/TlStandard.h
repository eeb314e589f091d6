// Handlers of Triton's standard-library shape functions (TlStandard.cpp), rows of the tl table
// (TlBuiltins.cpp).
#pragma once

#include <string>

namespace ww::specialize {

class Specializer;
struct CallSite;
struct Val;

Val tlFlip(Specializer& sp, const std::string& name, CallSite& call);
Val tlInterleave(Specializer& sp, const std::string& name, CallSite& call);
Val tlSqueezeUnsqueeze(Specializer& sp, const std::string& name, CallSite& call);
Val tlHistogram(Specializer& sp, const std::string& name, CallSite& call);
Val tlSortTopk(Specializer& sp, const std::string& name, CallSite& call);
Val tlSwizzle2d(Specializer& sp, const std::string& name, CallSite& call);
Val tlAssume(Specializer& sp, const std::string& name, CallSite& call);
/// `while tl.condition(c, disable_licm=True, ...)`: the condition `c`, its options checked.
Val tlCondition(Specializer& sp, const std::string& name, CallSite& call);

} // namespace ww::specialize
