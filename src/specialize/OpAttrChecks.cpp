// Checks of call arguments that become op attributes, against the allowed values of Ops.def.
#include "specialize/OpAttrChecks.h"

#include "frontend/Diagnostics.h"
#include "ir/OpAttrs.h"

namespace ww::specialize {

// Triton's spelling with its dot (".cg"), checked against the values Ops.def allows for op's
// [cache] (Triton's _str_to_load_cache_modifier / _str_to_store_cache_modifier).
std::string cacheModifier(const Val& v, SourceLoc loc, ir::OpCode op, const std::string& fn) {
  if (v.isNone()) return "";
  const ir::AttrSpec& spec = *ir::findAttrSpec(op, ir::attr::Load::kcache);
  if (v.kind == Val::Kind::String && (v.s.empty() || v.s[0] == '.')) {
    std::string s = v.s.empty() ? v.s : v.s.substr(1);
    if (ir::checkAttr(spec, s).empty()) return s;
  }
  raiseError(loc, fn + "'s cache_modifier must be " + ir::allowedList(spec, ".") + ", got " +
                      describe(v));
}

// Checked against Ops.def's [evict] (Triton's _str_to_eviction_policy: no "evict_normal").
std::string evictionPolicy(const Val& v, SourceLoc loc, ir::OpCode op, const std::string& fn) {
  if (v.isNone()) return "";
  const ir::AttrSpec& spec = *ir::findAttrSpec(op, ir::attr::Load::kevict);
  if (v.kind == Val::Kind::String && ir::checkAttr(spec, v.s).empty()) return v.s;
  raiseError(loc,
             fn + "'s eviction_policy must be " + ir::allowedList(spec) + ", got " + describe(v));
}

} // namespace ww::specialize
