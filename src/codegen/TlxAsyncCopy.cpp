// Lowering of async_load (cp.async from global into a shared buffer) with its commit and wait
// groups: written by tlx.async_load and by the software pipeliner of tl.dot loops.
#include "codegen/Lowering.h"
#include "codegen/Wgmma.h"
#include "ir/OpAttrs.h"

#include <cmath>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

void FunctionLowering::lowerTlxAsyncCopy(const ir::Op& op) {
  switch (op.code()) {
  case OpCode::AsyncCommitGroup:
    b_.inst("cp.async.commit_group", {});
    if (op.numResults()) bind(op.result(), {"0"});
    return;
  case OpCode::AsyncWaitGroup: {
    int64_t pendings = ir::attr::AsyncWaitGroup::pendings(op);
    if (pendings < 0 || pendings > 255)
      raiseError(op.loc(), "async_load_wait_group(" + std::to_string(pendings) +
                               ") is out of range; cp.async.wait_group takes 0 to 255");
    b_.inst("cp.async.wait_group", {immInt(pendings)});
    // The copies are generic-proxy writes of this thread: fence them for the async proxy
    // (wgmma reads buffers through it), then meet the other threads so that every thread's
    // copies are complete and visible before anyone reads the buffer.
    proxyFenceAndBarrier();
    return;
  }
  case OpCode::AsyncLoad:
    break;
  default:
    throw std::logic_error("codegen: not an async copy op");
  }

  const ir::Value* ptrValue = op.operand(0);
  const ir::Value* buffer = op.operand(1);
  if (!ptrValue->type().isTensor() || !isPlainBuffer(buffer))
    raiseError(op.loc(), "async_load needs a tensor of pointers and a buffer from "
                         "tlx.local_alloc or its local_view; other views are not supported yet");
  const layout::SharedAllocation& alloc = allocationOf(op, 1);
  if (!alloc.padding.empty())
    raiseError(op.loc(), "async_load into " + buffer->type().str() +
                             " allocated with layout=" + alloc.userLayout +
                             " is not supported by the PTX backend: padded buffers are written "
                             "by tlx.local_store only");
  if (alloc.layout.getTotalOutDimSize() == 0 || alloc.layout.numOutDims() == 0)
    raiseError(op.loc(), "async_load into a buffer of shape " + buffer->type().str() +
                             " is not supported; use power-of-two dims");
  bool hasMask = ir::attr::AsyncLoad::hasMask(op), hasOther = ir::attr::AsyncLoad::hasOther(op);
  const Regs& ptrs = operand(op, 0);
  const Regs* mask = hasMask ? &operand(op, 2) : nullptr;
  const ir::Value* otherValue = hasOther ? op.operand(hasMask ? 3 : 2) : nullptr;
  const Regs* other = otherValue ? &operand(op, hasMask ? 3 : 2) : nullptr;

  const LinearLayout& l = operandLayoutOf(op, 0);
  LinearLayout coordsToOffset = alloc.layout.invert();
  OffsetFn offsetOf = [&coordsToOffset](const std::vector<int32_t>& c) -> int64_t {
    return coordsToOffset.apply(c).at(0);
  };
  DType elem = buffer->type().elem;
  ir::Type elemType = ir::Type::scalar(elem);
  int bytes = elemType.elemBytes();
  // One copy moves elements consecutive both in global memory (AxisInfo, the layout's
  // registers, the mask's constancy) and in the buffer's swizzled layout.
  int32_t v = std::min(layouts_.vectorElems(op),
                       sharedVectorWidth(l, offsetOf, bytes, /*fromRegisters=*/false));
  while (v > 1 && v * bytes > 16) v /= 2;
  int copyBytes = v * bytes;
  bool zeroFill = !otherValue || ir::isPositiveZeroConstant(otherValue);
  bool viaCpAsync =
      zeroFill && elem != DType::I1 && (copyBytes == 4 || copyBytes == 8 || copyBytes == 16);

  std::string base = b_.materialize(regsOf(buffer).at(0), RegClass::B32);
  int32_t hwBits = 0;
  std::string hw = tidLinear(offsetImages(l, offsetOf, bytes), &hwBits);
  // Threads holding copies of an element leave the copy to one of them.
  std::string owner = ownerPredicate(l);
  int32_t dup = l.freeVariableMask(layout::kRegister);
  auto addressOf = [&](int32_t reg) {
    int64_t off = offsetOf(registerCoords(l, reg)) * bytes;
    std::string addr = sharedAddress(xorConst(hw, hwBits, static_cast<int32_t>(off)));
    return b_.pure("add.s32", RegClass::B32, {addr, base});
  };
  auto at = [](const Regs& regs, int32_t reg) { return regs.at(regs.size() == 1 ? 0 : reg); };

  if (viaCpAsync) {
    // 16-byte copies bypass L1 (.cg); smaller ones may only use .ca. A masked-off copy reads
    // no bytes (src-size 0) and zero-fills its destination.
    std::string opcode =
        copyBytes == 16 ? "cp.async.cg.shared.global" : "cp.async.ca.shared.global";
    for (int32_t r = 0; r < l.getInDimSize(layout::kRegister); r += v) {
      if (r & dup) continue;
      std::vector<std::string> operands{bracketed(addressOf(r)),
                                        bracketed(b_.materialize(at(ptrs, r), RegClass::B64)),
                                        immInt(copyBytes)};
      if (mask) {
        std::string pred = b_.materialize(at(*mask, r), RegClass::Pred);
        operands.push_back(b_.pure("selp.u32", RegClass::B32, {immInt(copyBytes), "0", pred}));
      }
      b_.inst(opcode, operands, owner);
    }
    if (op.numResults()) bind(op.result(), {"0"});
    return;
  }

  // No cp.async form (elements not provably aligned to 4 bytes, a non-zero `other`, booleans):
  // each element is loaded and stored synchronously, which the wait group then trivially covers.
  // Each copy moves one element's bytes (an 8-bit one from a b16 register's low byte).
  RegClass cls = elem == DType::I1 ? RegClass::B16 : regClassOf(elem);
  std::string type = memType(elemType);
  for (int32_t r = 0; r < l.getInDimSize(layout::kRegister); ++r) {
    if (r & dup) continue;
    std::string x = b_.newReg(cls);
    std::string guard;
    if (mask) {
      guard = b_.materialize(at(*mask, r), RegClass::Pred);
      std::string fill = "0";
      if (other) {
        fill = b_.materialize(at(*other, r), elem == DType::I1 ? RegClass::Pred : cls);
        if (elem == DType::I1) fill = b_.pure("selp.u16", RegClass::B16, {"1", "0", fill});
      } else if (cls == RegClass::F32) {
        fill = immF32(0);
      } else if (cls == RegClass::F64) {
        fill = immF64(0);
      }
      b_.inst(movOpcode(cls), {x, fill});
    }
    b_.inst("ld.global." + type, {x, bracketed(b_.materialize(at(ptrs, r), RegClass::B64))}, guard);
    b_.inst("st.shared." + type, {bracketed(addressOf(r)), x}, owner);
  }
  if (op.numResults()) bind(op.result(), {"0"});
}

} // namespace ww::codegen
