// The interpreter's tl.inline_asm_elementwise: it cannot run arbitrary PTX, only a small subset
// (docs/language.md): moves, fp32 / f32x2 arithmetic, the .approx functions and `nanosleep`.
#pragma once

#include "interp/RtValue.h"

#include <string>
#include <vector>

namespace ww::ir {
class Op;
}

namespace ww::interp {

/// The results of `op` (an inline_asm_elementwise) over `args`, element by element. Returns
/// false with `error` set when its asm leaves the subset.
bool runInlineAsm(const ir::Op& op, const std::vector<TensorPtr>& args,
                  std::vector<Tensor>& results, std::string& error);

} // namespace ww::interp
