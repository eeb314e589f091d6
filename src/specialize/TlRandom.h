// Handler of Triton's random-number functions (TlRandom.cpp), rows of the tl table
// (TlBuiltins.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace ww::specialize {

class Specializer;
struct CallSite;
struct Val;

/// The Philox rounds the functions run when n_rounds is not given (tl.random.N_ROUNDS_DEFAULT).
inline constexpr int64_t kPhiloxDefaultRounds = 10;

/// tl.randint / randint4x / rand / rand4x / randn / randn4x / philox / philox_impl /
/// uint_to_uniform_float / pair_uniform_to_normal; `name` picks one.
Val tlRandom(Specializer& sp, const std::string& name, CallSite& call);

} // namespace ww::specialize
