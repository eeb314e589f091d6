#include "layout/TritonEncodings.h"

#include <algorithm>

namespace ww::layout {

std::string tritonLinearEncoding(const LinearLayout& layout) {
  std::string s = "#ttg.linear<{";
  const char* ins[] = {kRegister, kLane, kWarp, kBlock};
  for (int k = 0; k < 4; ++k) {
    s += k ? "], " : "";
    s += std::string(ins[k]) + " = [";
    if (!layout.hasInDim(ins[k])) continue;
    int bits = layout.getInDimSizeLog2(ins[k]);
    for (int b = 0; b < bits; ++b) {
      s += b ? ", [" : "[";
      for (int d = 0; d < layout.numOutDims(); ++d)
        s += (d ? ", " : "") + std::to_string(layout.getBasis(ins[k], b, dimName(d)));
      s += "]";
    }
  }
  return s + "]}>";
}

std::string LayoutMapEncodings::tensorEncoding(const ir::Value* v) const {
  return map_.hasLayout(v) ? tritonLinearEncoding(map_.layout(v)) : std::string();
}

std::string LayoutMapEncodings::sharedEncoding(const ir::Value* buffer) const {
  const SharedAllocation* a = map_.sharedAllocation(buffer);
  // Barriers, tensor memory, padded and user-chosen layouts (the printer spells those from the
  // allocation's own attributes), and transposed views (the allocation's encoding is not theirs).
  if (!a || a->layout.numOutDims() == 0 || !a->padding.empty() || !a->userLayout.empty()) return {};
  if (buffer->def() && buffer->def()->code() == ir::OpCode::LocalTrans) return {};
  int rank = a->layout.numOutDims();
  // The tensor dimension the element offset runs along first, then the others by their first
  // offset bit: Triton's `order`, fastest first.
  std::vector<int> order;
  int bits = a->layout.getInDimSizeLog2(kOffset);
  for (int b = 0; b < bits && static_cast<int>(order.size()) < rank; ++b)
    for (int d = 0; d < rank; ++d)
      if (a->layout.getBasis(kOffset, b, dimName(d)) != 0 &&
          std::find(order.begin(), order.end(), d) == order.end())
        order.push_back(d);
  for (int d = rank - 1; d >= 0; --d)
    if (std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
  int elemBits = ir::bitWidth(buffer->type().elem);
  if (a->swizzleBytes > 0)
    return "#ttg.nvmma_shared<{swizzlingByteWidth = " + std::to_string(a->swizzleBytes) +
           ", transposed = " + (order.front() == rank - 1 ? "false" : "true") +
           ", elementBitWidth = " + std::to_string(elemBits) +
           (a->fp4Padded ? ", fp4Padded = true" : "") + "}>";
  std::string o;
  for (size_t i = 0; i < order.size(); ++i) o += (i ? ", " : "") + std::to_string(order[i]);
  return "#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [" + o + "]}>";
}

std::string LayoutMapEncodings::convertedOperand(const ir::Op& op, unsigned i) const {
  if (!map_.needsConversion(op, i)) return {};
  return tritonLinearEncoding(map_.operandLayout(op, i));
}

} // namespace ww::layout
