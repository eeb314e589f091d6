// Lowering of tl.gather (the gather op): the source goes to the scratch region of shared memory
// in row-major order (every thread stores its registers), and each thread then reads each of its
// result elements at the source element whose coordinate along the axis is its index: one
// ld.shared per element. Row-major offsets of power-of-two shapes are linear over GF(2), so an
// element's offset is the thread's part (from %tid), the register's part (a constant) and the
// index times the axis stride. The index is masked to the axis extent: an index outside the
// source has no defined value (as in Triton), and this keeps the read inside the region.
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"

#include <bit>

namespace ww::codegen {

using ir::DType;
using layout::LinearLayout;

void FunctionLowering::lowerGather(const ir::Op& op) {
  const ir::Type& st = op.operand(0)->type();
  const ir::Type elemType = ir::Type::scalar(st.elem);
  const DType elem = st.elem;
  const int bytes = elemType.elemBytes();
  const size_t rank = st.shape.size();
  const int axis = static_cast<int>(ir::attr::Gather::axis(op));

  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * st.shape[d];
  OffsetFn rowMajor = rowMajorOffsets(st.shape);
  OffsetFn others = [rowMajor, axis](const std::vector<int32_t>& c) {
    std::vector<int32_t> z = c;
    z[size_t(axis)] = 0;
    return rowMajor(z);
  };

  int64_t numel = 1;
  for (int64_t d : st.shape) numel *= d;
  // The operands first: converting one to the layout it is read in may go through the scratch
  // region, which must not happen once the source lives there.
  const Regs& src = operand(op, 0);
  const Regs& idx = operand(op, 1);
  const int64_t base = scratch(numel * bytes);
  barrier(); // earlier readers of the scratch region are done
  storeShared(src, operandLayoutOf(op, 0), rowMajor, base, elem);
  barrier();

  const LinearLayout& l = layoutOf(op.result());
  const ir::Type& it = op.operand(1)->type();
  const RegClass idxClass = regClassOf(it.elem);
  int32_t hwBits = 0;
  std::string hw = tidLinear(offsetImages(l, others, bytes), &hwBits);
  const int64_t extent = st.shape[size_t(axis)];
  const int64_t axisBytes = strides[size_t(axis)] * bytes; // a power of two
  const int32_t numRegs = l.getInDimSize(layout::kRegister);
  const RegClass cls = regClassOf(elem);
  const std::string type = memType(elemType);
  Regs out(static_cast<size_t>(numRegs));
  for (int32_t r = 0; r < numRegs; ++r) {
    // The index as 32 bits, masked to the axis, scaled to bytes.
    std::string i;
    if (idxClass == RegClass::B64)
      i = b_.pure("cvt.u32.u64", RegClass::B32, {b_.materialize(idx.at(size_t(r)), RegClass::B64)});
    else if (idxClass == RegClass::B16)
      i = b_.pure("cvt.u32.u16", RegClass::B32, {b_.materialize(idx.at(size_t(r)), RegClass::B16)});
    else
      i = b_.materialize(idx.at(size_t(r)), RegClass::B32);
    std::string part = b_.pure("and.b32", RegClass::B32, {i, immInt(extent - 1)});
    if (axisBytes > 1)
      part = b_.pure("shl.b32", RegClass::B32,
                     {part, immInt(std::countr_zero(static_cast<uint64_t>(axisBytes)))});
    int64_t off = others(registerCoords(l, r)) * bytes;
    std::string rest =
        b_.materialize(xorConst(hw, hwBits, static_cast<int32_t>(off)), RegClass::B32);
    // The axis bits and the other coordinates' bits are disjoint: add is their XOR.
    std::string addr = sharedAddress(b_.pure("add.s32", RegClass::B32, {rest, part}));
    std::string dst = b_.newReg(elem == DType::I1 ? RegClass::B16 : cls);
    b_.inst("ld.shared." + type, {dst, "[" + addr + "+" + std::to_string(base) + "]"});
    out[size_t(r)] = elem == DType::I1 ? b_.pure("setp.ne.u16", RegClass::Pred, {dst, "0"}) : dst;
  }
  // The reads are done before the scratch region's next writer (which starts with a barrier).
  bind(op.result(), std::move(out));
}

} // namespace ww::codegen
