// TLX's cluster launch control builtins (Blackwell): tlx.clc_create_context, tlx.clc_producer,
// tlx.clc_consumer (TlxClc.cpp).
#pragma once

#include <string>

namespace ww::specialize {

class Specializer;
struct CallSite;
struct Val;

/// `name` is "clc_create_context", "clc_producer" or "clc_consumer".
Val tlxClusterLaunchControl(Specializer& sp, const std::string& name, CallSite& call);

} // namespace ww::specialize
