// Lowering of TLX shared-memory buffers (sm_90a and later): local_alloc, local_view, local_trans,
// local_load, local_store.
#include "codegen/Lowering.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

// Built by appending: GCC 12 warns falsely on "[" + temporary string.
std::string bracketed(const std::string& address) {
  std::string out = "[";
  out += address;
  out += ']';
  return out;
}

bool isPlainBuffer(const ir::Value* v) {
  const ir::Op* def = v->def();
  while (def && def->code() == OpCode::LocalView) def = def->operand(0)->def();
  return def && def->code() == OpCode::LocalAlloc;
}

const layout::SharedAllocation& FunctionLowering::allocationOf(const ir::Op& op,
                                                               unsigned operandIndex) {
  const layout::SharedAllocation* a = layouts_.sharedAllocation(op.operand(operandIndex));
  if (!a)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' needs a shared-memory buffer or barrier from tlx.local_alloc or "
                             "tlx.alloc_barriers; tensor-memory buffers are not supported on " +
                             targetName(options_.target));
  return *a;
}

std::string FunctionLowering::electedThread() {
  return b_.pure("setp.eq.u32", RegClass::Pred, {tid(), "0"});
}

std::string FunctionLowering::barrierAddress(const ir::Op& op, unsigned i) {
  allocationOf(op, i);
  std::string offset = b_.materialize(regsOf(op.operand(i)).at(0), RegClass::B32);
  return bracketed(sharedAddress(offset));
}

void FunctionLowering::lowerTlxBuffer(const ir::Op& op) {
  if (options_.target == Target::SM80)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' is supported on sm_90a and sm_100a only; on sm_80 stage data "
                             "with tl.load/tl.store");
  switch (op.code()) {
  case OpCode::LocalAlloc: {
    const layout::SharedAllocation* a = layouts_.sharedAllocation(op.result());
    if (!a)
      raiseError(op.loc(), "local_alloc in tensor memory is not supported on " +
                               std::string(targetName(options_.target)) +
                               "; use tlx.storage_kind.smem");
    usesShared_ = true;
    return bind(op.result(), {immInt(a->offset)});
  }
  case OpCode::LocalView: {
    const layout::SharedAllocation& a = allocationOf(op, 0);
    std::string base = b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
    std::string index = b_.materialize(operand(op, 1).at(0), RegClass::B32);
    // Views of one buffer of a multi-buffered allocation: base + index * bytesPerBuffer.
    return bind(op.result(),
                {b_.pure("mad.lo.s32", RegClass::B32, {index, immInt(a.bytesPerBuffer), base})});
  }
  case OpCode::LocalTrans: {
    // Same bytes, transposed indexing: only async_dot reads through it (as a K-major B).
    allocationOf(op, 0);
    if (op.intsAttr("order") != std::vector<int64_t>{1, 0})
      raiseError(op.loc(), "local_trans is supported for 2-D buffers (order [1, 0]) only");
    return bind(op.result(), regsOf(op.operand(0)));
  }
  case OpCode::LocalLoad:
  case OpCode::LocalStore: {
    if (!isPlainBuffer(op.operand(0)))
      raiseError(op.loc(), std::string("'") + op.name() +
                               "' through a transposed, sliced or reinterpreted view is not "
                               "supported by the " +
                               targetName(options_.target) +
                               " PTX backend yet; load or store the buffer itself");
    const layout::SharedAllocation& a = allocationOf(op, 0);
    if (a.layout.getTotalOutDimSize() == 0 || a.layout.numOutDims() == 0)
      raiseError(op.loc(), std::string("'") + op.name() + "' of a buffer of shape " +
                               op.operand(0)->type().str() +
                               " is not supported; use power-of-two dims");
    LinearLayout coordsToOffset = a.layout.invert();
    OffsetFn offsetOf = [&coordsToOffset](const std::vector<int32_t>& c) -> int64_t {
      return coordsToOffset.apply(c).at(0);
    };
    std::string base = b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
    DType elem = op.operand(0)->type().elem;
    if (op.code() == OpCode::LocalLoad)
      return bind(op.result(), loadShared(layoutOf(op.result()), offsetOf, 0, 0, elem, base));
    return storeShared(operand(op, 1), operandLayoutOf(op, 1), offsetOf, 0, elem, base);
  }
  case OpCode::LocalSlice:
  case OpCode::LocalReinterpret:
    raiseError(op.loc(), std::string("'") + op.name() + "' is not supported by the " +
                             targetName(options_.target) + " PTX backend yet");
  default:
    throw std::logic_error("codegen: not a TLX buffer op");
  }
}

} // namespace ww::codegen
