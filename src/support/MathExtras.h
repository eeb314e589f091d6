// Small integer helpers every stage uses (layouts, codegen, the specializer, the passes), defined
// once here rather than in each file that needs them.
#pragma once

#include <cstdint>

namespace ww {

/// Whether v is 1, 2, 4, ... (zero and negatives are not).
constexpr bool isPowerOf2(int64_t v) {
  return v > 0 && (v & (v - 1)) == 0;
}

} // namespace ww
