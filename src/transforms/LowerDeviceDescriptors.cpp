// How loads and stores through in-kernel tensor descriptors (tl.make_tensor_descriptor) run. On
// targets with TMA (sm_90a, sm_100a) a descriptor that can be a tensor map (ir/TensorMaps.h)
// stays one, as in Triton: the kernel writes the map where the descriptor is made, its
// desc.load / desc.store are TMA copies and the software pipeliner stages its K-loop loads in
// TMA rings. The accesses of the others, and all of them on sm_80, are rewritten here into
// masked pointer loads and stores, which every target runs without a tensor map.
#include "ir/Builder.h"
#include "ir/OpAttrs.h"
#include "ir/TensorMaps.h"
#include "transforms/Passes.h"

#include <stdexcept>

namespace ww::transforms {

using ir::DType;
using ir::OpCode;
using ir::Type;
using ir::Value;

namespace {

/// Builds, in `b`'s block, the element pointers and the in-bounds mask of the box at `offsets`
/// of the descriptor made by `make` (operands: base, shape..., strides...).
std::pair<Value*, Value*> boxPointers(ir::Builder& b, const ir::Op& make,
                                      const std::vector<Value*>& offsets) {
  const std::vector<int64_t> block = ir::attr::MakeDescriptor::blockShape(make);
  const size_t rank = block.size();
  // (a descriptor made in a tlx.allocate_tensor_descriptor slot has the slot's index last)
  const size_t slotOperand = ir::attr::MakeDescriptor::slotCount(make) > 0 ? 1 : 0;
  if (make.numOperands() != 1 + 2 * rank + slotOperand || offsets.size() != rank)
    throw std::logic_error("lowerDeviceDescriptors: malformed make_desc or descriptor access");
  Value* base = make.operand(0);
  Value* offsetSum = nullptr;
  Value* mask = nullptr;
  Value* zero = b.i32(0);
  // Each dim's coordinates as a [1, .., block[d], .., 1] tensor, broadcast to the box.
  auto toBox = [&](Value* v, size_t d) {
    for (size_t a = 0; a < rank; ++a) {
      if (a == d) continue;
      std::vector<int64_t> s = v->type().shape;
      s.insert(s.begin() + static_cast<std::ptrdiff_t>(a), 1);
      v = b.create1(OpCode::ExpandDims, {v}, v->type().withShape(s),
                    {ir::attr::ExpandDims::make::axis(static_cast<int64_t>(a))});
    }
    if (rank > 1) v = b.create1(OpCode::Broadcast, {v}, v->type().withShape(block));
    return v;
  };
  for (size_t d = 0; d < rank; ++d) {
    std::vector<int64_t> dimShape = {block[d]};
    Value* coord = b.binary(OpCode::Add, b.arange(0, block[d]), b.splat(offsets[d], dimShape));
    Value* inside = b.binary(OpCode::And, b.cmp("ge", coord, b.splat(zero, dimShape)),
                             b.cmp("lt", coord, b.splat(make.operand(1 + d), dimShape)));
    Value* stride = make.operand(1 + rank + d);
    Value* offset = b.create1(OpCode::Cast, {coord}, coord->type().withElem(DType::I64));
    if (ir::constantInt(stride) != 1)
      offset = b.binary(OpCode::Mul, offset, b.splat(stride, dimShape));
    offset = toBox(offset, d);
    inside = toBox(inside, d);
    offsetSum = offsetSum ? b.binary(OpCode::Add, offsetSum, offset) : offset;
    mask = mask ? b.binary(OpCode::And, mask, inside) : inside;
  }
  Value* ptrs = b.addPtr(b.splat(base, block), offsetSum);
  return {ptrs, mask};
}

/// Rewrites the access at `block.ops()[i]` (a desc_load / desc_store through `make`) in place;
/// returns how many ops replace it.
size_t rewriteAccess(ir::Block& block, size_t i, const ir::Op& make, ir::Block& root) {
  ir::Op& op = *block.ops()[i];
  bool isLoad = op.code() == OpCode::DescLoad;
  unsigned firstOffset = isLoad ? 1 : 2;
  std::vector<Value*> offsets(op.operands().begin() + firstOffset, op.operands().end());

  ir::Block staging;
  ir::Builder b(&staging);
  b.setLoc(op.loc());
  auto [ptrs, mask] = boxPointers(b, make, offsets);
  Value* loaded = nullptr;
  if (isLoad) {
    // Zeros as one tensor constant (not a splat): the pipeliner's fallback, which runs no
    // folding, takes only loads whose `other` is the constant +0.
    const Type& t = op.result()->type();
    Value* zeros = ir::isFloat(t.elem) ? b.constFloat(0.0, t) : b.constInt(0, t);
    loaded = b.load(ptrs, mask, zeros);
  } else {
    b.store(ptrs, op.operand(1), mask);
  }
  // Splice the new ops in place of the descriptor access.
  std::vector<std::unique_ptr<ir::Op>> created = std::move(staging.ops());
  for (auto& c : created) c->setParentBlock(&block);
  size_t count = created.size();
  Value* old = isLoad ? op.result() : nullptr;
  auto pos = block.ops().begin() + static_cast<std::ptrdiff_t>(i);
  block.ops().insert(pos, std::make_move_iterator(created.begin()),
                     std::make_move_iterator(created.end()));
  if (old) ir::replaceAllUses(root, old, loaded);
  block.ops().erase(block.ops().begin() + static_cast<std::ptrdiff_t>(i + count));
  return count;
}

/// The make_desc that `access` (a desc_load / desc_store) reads through, if it is one.
const ir::Op* madeBy(const ir::Op& access) {
  const ir::Op* make = access.operand(0)->def();
  return make && make->code() == OpCode::MakeDescriptor ? make : nullptr;
}

void lowerIn(ir::Block& block, ir::Block& root, bool tensorMaps) {
  for (size_t i = 0; i < block.ops().size(); ++i) {
    ir::Op& op = *block.ops()[i];
    for (unsigned r = 0; r < op.numRegions(); ++r) lowerIn(*op.region(r), root, tensorMaps);
    if (op.code() != OpCode::DescLoad && op.code() != OpCode::DescStore) continue;
    const ir::Op* make = madeBy(op);
    // Host descriptors (kernel arguments) stay TMA copies; so do descriptors made here that
    // can be tensor maps, where the target has TMA.
    if (!make || (tensorMaps && ir::tensorMapProblem(*make).empty())) continue;
    i += rewriteAccess(block, i, *make, root) - 1;
  }
}

} // namespace

void lowerDeviceDescriptors(ir::Function& fn, bool tensorMaps) {
  lowerIn(fn.body, fn.body, tensorMaps);
  eliminateDeadCode(fn);
  verify(fn);
}

void lowerDeviceDescriptorAccess(ir::Function& fn, ir::Op& access) {
  const ir::Op* make = madeBy(access);
  if ((access.code() != OpCode::DescLoad && access.code() != OpCode::DescStore) || !make)
    throw std::logic_error("lowerDeviceDescriptorAccess: not an access through a make_desc");
  ir::Block& block = *access.parentBlock();
  rewriteAccess(block, ir::positionOf(block, &access), *make, fn.body);
}

} // namespace ww::transforms
