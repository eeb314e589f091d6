// Triton's block pointers (TlBlockPtr.cpp): tl.make_block_ptr and tl.advance (rows of the tl
// table), and what tl.load / tl.store and attribute reads do when given one.
#pragma once

#include "frontend/Diagnostics.h"
#include "ir/IR.h"

#include <string>

namespace ww::specialize {

class Specializer;
class BoundArgs;
struct CallSite;
struct Val;

Val tlMakeBlockPtr(Specializer& sp, const std::string& name, CallSite& call);
Val tlAdvance(Specializer& sp, const std::string& name, CallSite& call);
/// tl.load(block_ptr, boundary_check=, padding_option=, ...): `a` is bound as tl.load's.
Val blockPtrLoad(Specializer& sp, const BoundArgs& a, SourceLoc loc);
/// tl.store(block_ptr, value, boundary_check=, ...): `a` is bound as tl.store's.
void blockPtrStore(Specializer& sp, const BoundArgs& a, SourceLoc loc);
/// Moves the pure ops of `block` from position `first` on in front of the loops around `block`
/// whose values they do not use (the address arithmetic of a block pointer's dimensions that a
/// loop does not advance).
void hoistLoopInvariants(ir::Block* block, size_t first);
/// `p.name` for a block pointer `p`: its fields, `dtype`, and the methods advance / load / store.
Val blockPtrAttr(const Val& p, const std::string& name, SourceLoc loc);

} // namespace ww::specialize
