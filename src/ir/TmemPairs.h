// Tensor-memory tiles of CTA pairs' MMAs with M = 64 per CTA (TLX's TwoCTA_RHS accumulators and
// TwoCTA_LHS A operands). A tcgen05.mma.cta_group::2 of M = 128 (64 rows in each CTA of the pair)
// writes each CTA's [64, N] accumulator as the PTX ISA's data-path layout for that shape has it:
// 128 lanes of N / 2 columns, row r's first N / 2 columns in lane r and its last N / 2 in lane
// 64 + r. Such a tile takes N / 2 columns, not N (TLX sizes tensor memory and storage_alias_spec
// members so). Its A, when in tensor memory, is read by both halves of the lanes: a [64, K] A
// tile holds row r in lanes r and 64 + r (its columns as a [128, K] tile's). The specializer
// (alias placement), codegen (the tensor-memory plan, the tiles' register layouts) and the
// interpreter (lanes x columns) all take these allocations from here, so the three agree.
#pragma once

#include "ir/IR.h"

#include <cstdint>
#include <unordered_set>

namespace ww::ir {

/// The local_allocs (tensor memory) that a two_ctas tcgen05 MMA with a [64, N] accumulator
/// accumulates into, found through local_view / local_slice of the accumulator operand.
std::unordered_set<const Op*> pairSplitAllocs(const Block& body);

/// The local_allocs (tensor memory) that a two_ctas tcgen05 MMA with a [64, N] accumulator
/// reads its A from (rows in lanes r and 64 + r), found as pairSplitAllocs finds accumulators.
std::unordered_set<const Op*> pairLhsAllocs(const Block& body);

/// The local_alloc a buffer view comes from through local_view / local_slice; null when it
/// comes from elsewhere (a value chosen at run time, a loop-carried view).
const Op* tmemAllocOf(const Value* v);

/// Columns one buffer of tensor-memory type `t` takes: ir::tmemColumns, halved for a pair-split
/// [64, N] accumulator.
int64_t tmemColumns(const Type& t, bool pairSplit);

} // namespace ww::ir
