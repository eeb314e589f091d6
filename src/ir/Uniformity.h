// Which values every thread of a CTA agrees on, and which blocks no thread runs both of. Triton's
// scalars are the same in every thread by the language (program ids, arguments, loads of one
// address); TLX adds per-thread ones (thread_id, vote_ballot, clock64, async-task replica ids),
// and what is computed from them, through loop-carried values and branch results too, is not.
#pragma once

#include "ir/IR.h"

#include <unordered_set>

namespace ww::ir {

class ThreadUniformity {
public:
  explicit ThreadUniformity(const Block& body);
  bool uniform(const Value* v) const { return dependent_.count(v) == 0; }

private:
  std::unordered_set<const Value*> dependent_;
};

/// Whether `a` and `b` lie in different regions of one `if` whose condition is uniform: every
/// thread runs the same one of them, so nothing live only in one meets what is live only in the
/// other (the two branches of an `if` on the query count, each with its attention loop).
bool exclusiveBranches(const Block* a, const Block* b, const ThreadUniformity& uniformity);

} // namespace ww::ir
