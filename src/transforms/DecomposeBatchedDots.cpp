// Splits each batched tl.dot (3-D or more: equal leading batch dimensions) into one 2-D dot per
// batch element, for the GPU targets, whose MMA lowerings are 2-D. The operands are sliced with
// shape ops (the batch moved innermost, then halved by split until one element is left) and the
// products put back together with cat along the rows. Triton lowers such dots to batched MMA
// layouts; the result is the same, element for element: each batch element's product is the
// same 2-D dot. The interpreter runs the batched dot as it is.
#include "ir/Builder.h"
#include "ir/OpAttrs.h"
#include "transforms/Passes.h"

namespace ww::transforms {

using ir::Op;
using ir::OpCode;
using ir::Type;
using ir::Value;

namespace {

/// Slices of `x` ([rows, cols, n], the batch innermost) along its last dimension, in the order
/// of `batch` (the batch index each of the n positions holds): out[batch[j]] = x[:, :, j].
void sliceInnermost(ir::Builder& b, Value* x, const std::vector<int64_t>& batch,
                    std::vector<Value*>& out) {
  const Type& t = x->type();
  int64_t rows = t.shape.at(0), cols = t.shape.at(1);
  if (batch.size() == 1) {
    out[batch[0]] = b.create1(OpCode::Reshape, {x}, t.withShape({rows, cols}));
    return;
  }
  int64_t half = static_cast<int64_t>(batch.size()) / 2;
  // [rows, cols, n] -> [rows, cols, n/2, 2]: the innermost pair holds positions 2j and 2j + 1.
  Value* pairs = b.create1(OpCode::Reshape, {x}, t.withShape({rows, cols, half, 2}));
  Type halfType = t.withShape({rows, cols, half});
  Op* split = b.create(OpCode::Split, {pairs}, {halfType, halfType});
  std::vector<int64_t> even, odd;
  for (size_t j = 0; j < batch.size(); ++j) (j % 2 ? odd : even).push_back(batch[j]);
  sliceInnermost(b, split->result(0), even, out);
  sliceInnermost(b, split->result(1), odd, out);
}

/// The batch elements of `x` ([b1, ..., bk, rows, cols]) as 2-D tensors, in batch order.
std::vector<Value*> batchElements(ir::Builder& b, Value* x, int64_t batch) {
  const Type& t = x->type();
  size_t rank = t.shape.size();
  int64_t rows = t.shape[rank - 2], cols = t.shape[rank - 1];
  std::vector<Value*> out(static_cast<size_t>(batch));
  // A constant (a splat: the usual zero accumulator) is the same constant in every element.
  if (Op* def = x->def(); def && def->code() == OpCode::Constant) {
    Value* c = b.create1(OpCode::Constant, {}, t.withShape({rows, cols}), def->attrs());
    std::fill(out.begin(), out.end(), c);
    return out;
  }
  Value* merged = b.create1(OpCode::Reshape, {x}, t.withShape({batch, rows, cols}));
  Value* inner = b.create1(OpCode::Permute, {merged}, t.withShape({rows, cols, batch}),
                           {ir::attr::Permute::make::order({1, 2, 0})});
  std::vector<int64_t> order(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) order[static_cast<size_t>(i)] = i;
  sliceInnermost(b, inner, order, out);
  return out;
}

/// Replaces the batched dot at `block.ops()[i]`; returns how many ops now stand in its place.
size_t decompose(ir::Block& block, size_t i, ir::Block& root) {
  Op& dot = *block.ops()[i];
  const Type& ct = dot.result()->type();
  size_t rank = ct.shape.size();
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < rank; ++d) batch *= ct.shape[d];
  int64_t M = ct.shape[rank - 2], N = ct.shape[rank - 1];

  ir::Block staging;
  ir::Builder b(&staging);
  b.setLoc(dot.loc());
  std::vector<Value*> as = batchElements(b, dot.operand(0), batch);
  std::vector<Value*> bs = batchElements(b, dot.operand(1), batch);
  std::vector<Value*> accs = batchElements(b, dot.operand(2), batch);
  std::vector<Value*> products;
  for (int64_t e = 0; e < batch; ++e) {
    size_t k = static_cast<size_t>(e);
    products.push_back(
        b.create1(OpCode::Dot, {as[k], bs[k], accs[k]}, ct.withShape({M, N}), dot.attrs()));
  }
  // Rows of consecutive elements joined pairwise: [batch * M, N] in batch order.
  while (products.size() > 1) {
    std::vector<Value*> joined;
    for (size_t k = 0; k < products.size(); k += 2) {
      int64_t rows = products[k]->type().shape[0] * 2;
      joined.push_back(
          b.create1(OpCode::Cat, {products[k], products[k + 1]}, ct.withShape({rows, N})));
    }
    products = std::move(joined);
  }
  Value* result = b.create1(OpCode::Reshape, {products[0]}, ct);

  size_t count = staging.ops().size();
  ir::spliceOps(staging, block, i);
  ir::replaceAllUses(root, dot.result(), result);
  ir::eraseOp(block, &dot);
  return count;
}

size_t decomposeIn(ir::Block& block, ir::Block& root) {
  size_t decomposed = 0;
  for (size_t i = 0; i < block.ops().size(); ++i) {
    Op& op = *block.ops()[i];
    for (unsigned r = 0; r < op.numRegions(); ++r) decomposed += decomposeIn(*op.region(r), root);
    if (op.code() != OpCode::Dot || op.result()->type().shape.size() < 3) continue;
    // Shapes that are not powers of two are left for layout assignment to report at the dot.
    bool powersOfTwo = true;
    for (size_t k = 0; k < op.numOperands(); ++k)
      for (int64_t d : op.operand(static_cast<unsigned>(k))->type().shape)
        powersOfTwo = powersOfTwo && d > 0 && (d & (d - 1)) == 0;
    if (!powersOfTwo) continue;
    i += decompose(block, i, root) - 1;
    ++decomposed;
  }
  return decomposed;
}

} // namespace

int decomposeBatchedDots(ir::Function& fn) {
  int decomposed = static_cast<int>(decomposeIn(fn.body, fn.body));
  if (decomposed) verify(fn);
  return decomposed;
}

} // namespace ww::transforms
