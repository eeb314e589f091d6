// Lowering of tlx.local_gather / tlx.local_scatter: each thread reads (writes) its elements of
// the result (values) one ld.shared (st.shared) each, at the address of the element whose
// coordinate along the axis is the run-time index. Addresses follow the buffer's layout, swizzled
// or not: the layout maps coordinates to byte offsets linearly over GF(2), so the address is the
// XOR of the other coordinates' part (known per register, plus the thread's bits) and the
// index's part (the XOR of the axis bases of its set bits).
#include "codegen/Lowering.h"
#include "codegen/ScalarOps.h"
#include "ir/OpAttrs.h"

#include <bit>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

void FunctionLowering::lowerLocalGatherScatter(const ir::Op& op) {
  const bool gather = op.code() == OpCode::LocalGather;
  const unsigned idxOperand = gather ? 1 : 2;
  const ir::Type& bt = op.operand(0)->type();
  const DType elem = bt.elem;
  const int rank = static_cast<int>(bt.shape.size());
  const int axis =
      static_cast<int>(gather ? ir::attr::LocalGather::axis(op) : ir::attr::LocalScatter::axis(op));
  const int bytes = ir::byteWidth(elem);

  int64_t constant = 0;
  OffsetFn offsetOf = bufferElementOffsets(op, 0, &constant);
  // The offset of the other coordinates: linear too (the axis coordinate projected away).
  OffsetFn offsetOfOthers = [&offsetOf, axis](const std::vector<int32_t>& c) {
    std::vector<int32_t> z = c;
    if (axis < static_cast<int>(z.size())) z[size_t(axis)] = 0;
    return offsetOf(z);
  };
  // Byte images of the bits of an index along the axis.
  std::vector<int64_t> axisBases;
  for (int64_t s = 1; s < bt.shape[size_t(axis)]; s *= 2) {
    std::vector<int32_t> c(size_t(rank), 0);
    c[size_t(axis)] = static_cast<int32_t>(s);
    axisBases.push_back(offsetOf(c) * bytes);
  }
  bool contiguousBits = true; // bases k * 2^j: the index's part is one shift
  for (size_t j = 0; j < axisBases.size(); ++j) contiguousBits &= axisBases[j] == axisBases[0] << j;

  const LinearLayout& l = gather ? layoutOf(op.result()) : operandLayoutOf(op, 1);
  const ir::Type& it = op.operand(idxOperand)->type();
  Regs idx = operand(op, idxOperand);
  const LinearLayout& idxLayout = operandLayoutOf(op, idxOperand);
  if (!(idxLayout == l)) idx = convert(idx, idxLayout, l, it.elem, op);
  const RegClass idxClass = regClassOf(it.elem);

  std::string baseReg = b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
  int32_t hwBits = 0;
  std::string hw = tidLinear(offsetImages(l, offsetOfOthers, bytes), &hwBits);
  const RegClass cls = regClassOf(elem);
  const int32_t numRegs = l.getInDimSize(layout::kRegister);

  // Index i's byte offset along the axis (bits past the extent dropped: out-of-range indices
  // are undefined in TLX, and this keeps them inside the buffer).
  auto indexPart = [&](const std::string& reg) -> std::string {
    if (axisBases.empty()) return "0";
    // The index as 32 bits, whatever register holds it (ptxas refused i8 indices' 16-bit
    // registers in and.b32).
    std::string i;
    if (idxClass == RegClass::B64)
      i = b_.pure("cvt.u32.u64", RegClass::B32, {b_.materialize(reg, RegClass::B64)});
    else if (idxClass == RegClass::B16)
      i = b_.pure("cvt.u32.u16", RegClass::B32, {b_.materialize(reg, RegClass::B16)});
    else
      i = b_.materialize(reg, RegClass::B32);
    if (contiguousBits) {
      int64_t mask = (int64_t(1) << axisBases.size()) - 1;
      std::string m = b_.pure("and.b32", RegClass::B32, {i, immInt(mask)});
      if (axisBases[0] == 1) return m;
      if (std::has_single_bit(uint64_t(axisBases[0])))
        return b_.pure("shl.b32", RegClass::B32,
                       {m, immInt(std::countr_zero(uint64_t(axisBases[0])))});
      return b_.pure("mul.lo.u32", RegClass::B32, {m, immInt(axisBases[0])});
    }
    std::string acc = "0";
    for (size_t j = 0; j < axisBases.size(); ++j) {
      std::string bit = b_.pure("and.b32", RegClass::B32, {i, immInt(int64_t(1) << j)});
      std::string set = b_.pure("setp.ne.u32", RegClass::Pred, {bit, "0"});
      std::string part = b_.pure("selp.b32", RegClass::B32, {immInt(axisBases[j]), "0", set});
      acc = acc == "0" ? part : b_.pure("xor.b32", RegClass::B32, {acc, part});
    }
    return acc;
  };
  auto addressOf = [&](int32_t r) {
    int64_t off = (offsetOfOthers(registerCoords(l, r)) ^ constant) * bytes;
    std::string others = xorConst(hw, hwBits, static_cast<int32_t>(off));
    std::string part = indexPart(idx.at(size_t(r)));
    std::string o = part == "0"     ? others
                    : others == "0" ? part
                                    : b_.pure("xor.b32", RegClass::B32,
                                              {b_.materialize(others, RegClass::B32), part});
    std::string addr = sharedAddress(b_.materialize(o, RegClass::B32));
    return b_.pure("add.s32", RegClass::B32, {addr, baseReg});
  };

  const std::string type = memType(ir::Type::scalar(elem));
  if (gather) {
    Regs out(static_cast<size_t>(numRegs));
    for (int32_t r = 0; r < numRegs; ++r) {
      std::string addr = addressOf(r);
      std::string dst = b_.newReg(elem == DType::I1 ? RegClass::B16 : cls);
      b_.inst("ld.shared." + type, {dst, bracketed(addr)});
      out[size_t(r)] = elem == DType::I1 ? b_.pure("setp.ne.u16", RegClass::Pred, {dst, "0"}) : dst;
    }
    return bind(op.result(), std::move(out));
  }
  Regs vals = operand(op, 1);
  // As local_store: the group's earlier reads of the buffer are done before the writes, and the
  // writes are visible to its later ops after.
  barrier();
  for (int32_t r = 0; r < numRegs; ++r) {
    std::string addr = addressOf(r);
    std::string x = b_.materialize(vals.at(size_t(r)), cls);
    if (elem == DType::I1) x = b_.pure("selp.u16", RegClass::B16, {"1", "0", x});
    b_.inst("st.shared." + type, {bracketed(addr), x});
  }
  barrier();
}

} // namespace ww::codegen
