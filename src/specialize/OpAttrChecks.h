// User-facing checks of call arguments that become op attributes (tl.load's cache_modifier, ...):
// located errors at the call, naming the values Ops.def allows, so that no stage after the
// specializer meets a value it cannot lower.
#pragma once

#include "ir/IR.h"
#include "specialize/Values.h"

#include <string>

namespace ww::specialize {

/// The IR value of a call's cache_modifier for `op` (Load, Store or AsyncDescLoad): Triton's
/// spelling with its dot (".cg" -> "cg"), "" for None or "". `fn` names the call in the error.
std::string cacheModifier(const Val& v, SourceLoc loc, ir::OpCode op, const std::string& fn);
/// The IR value of a call's eviction_policy for `op`: "", "evict_first" or "evict_last".
std::string evictionPolicy(const Val& v, SourceLoc loc, ir::OpCode op, const std::string& fn);

} // namespace ww::specialize
