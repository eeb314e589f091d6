// isinstance() in kernel code and the type objects it accepts (tl.tensor, tl.tensor_descriptor,
// tl.dtype, tl.constexpr and Python's int / float / bool / tuple), answered at compile time.
#pragma once

#include "specialize/Values.h"

#include <optional>
#include <string>

namespace ww::specialize {

/// The value `tl.<name>` names when it is one of the type objects isinstance accepts.
std::optional<Val> tlTypeObject(const std::string& name);

/// isinstance(x, classinfo) as Triton answers it in a kernel: Python's builtins see constexprs
/// unwrapped (a constexpr int is an `int`, not a `tl.constexpr`), a descriptor is a
/// `tl.tensor_descriptor` and not a `tl.tensor`, every other run-time value is a `tl.tensor`.
/// A classinfo that is not a type (or a tuple of types) is an error at `loc`.
bool kernelIsInstance(const Val& x, const Val& classinfo, SourceLoc loc);

} // namespace ww::specialize
