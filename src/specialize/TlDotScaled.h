// tl.dot_scaled (TlDotScaled.cpp), a row of the tl table (TlBuiltins.cpp).
#pragma once

#include <string>

namespace ww::specialize {

class Specializer;
struct CallSite;
struct Val;

Val tlDotScaled(Specializer& sp, const std::string& name, CallSite& call);

} // namespace ww::specialize
