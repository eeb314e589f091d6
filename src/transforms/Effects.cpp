// Which ops have side effects, for fold, CSE and DCE: Ops.def's purity traits (ir/OpTraits.h).
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "transforms/Passes.h"

namespace ww::transforms {

bool isPure(const ir::Op& op) {
  const ir::Traits t = ir::traitsOf(op.code());
  if (t & ir::trait::Pure) return true;
  if (t & ir::trait::PureIfMarked) return ir::attr::InlineAsm::pure(op);
  if (t & ir::trait::PureIfBodyPure) {
    // The combine region only ever holds arithmetic and a yield.
    for (unsigned r = 0; r < op.numRegions(); ++r)
      for (const auto& inner : op.region(r)->ops())
        if (!ir::isTerminator(inner->code()) && !isPure(*inner)) return false;
    return true;
  }
  return false;
}

} // namespace ww::transforms
