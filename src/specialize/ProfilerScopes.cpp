// Proton's in-kernel scopes (`triton.profiler.language`: enter_scope, exit_scope, `with
// scope(name):`). Proton records a scope only under its instrumentation backend, which warpweave
// does not have; with it off they emit nothing, so here they check their name (a compile-time
// string, as Proton requires) and build no op: the PTX and the interpreter see nothing.
#include "specialize/SpecializerImpl.h"

namespace ww::specialize {

/// The name argument of enter_scope / exit_scope / scope, checked.
void Specializer::protonScopeName(const std::string& name, CallSite& call) {
  BoundArgs a(call, {"name"});
  const Val& n = a.get("name");
  if (n.kind != Val::Kind::String)
    raiseError(a.loc("name"),
               "pl." + name + "'s name must be a string constant, got " + describe(n));
}

Val Specializer::callProton(const std::string& name, CallSite& call) {
  if (name == "scope")
    raiseError(call.loc, "pl.scope(name) is a context: use it as 'with pl.scope(name):'");
  protonScopeName(name, call);
  return Val::none();
}

} // namespace ww::specialize
