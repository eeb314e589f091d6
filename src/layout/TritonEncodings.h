// Layout assignment's decisions in Triton's attribute syntax (#ttg.linear, #ttg.nvmma_shared,
// #ttg.swizzled_shared), for the TTGIR view of a kernel (ir/TritonDialects.h).
#pragma once

#include "ir/TritonDialects.h"
#include "layout/LayoutAssignment.h"

#include <string>

namespace ww::layout {

/// A register layout as Triton prints a linear encoding: the bases of each input dimension
/// (register, lane, warp, block), each a vector over the tensor's dimensions in order.
std::string tritonLinearEncoding(const LinearLayout& layout);

/// The encodings of a kernel's values, read from its LayoutMap.
class LayoutMapEncodings : public ir::TritonEncodings {
public:
  explicit LayoutMapEncodings(const LayoutMap& map) : map_(map) {}
  std::string tensorEncoding(const ir::Value* v) const override;
  std::string sharedEncoding(const ir::Value* buffer) const override;
  std::string convertedOperand(const ir::Op& op, unsigned i) const override;

private:
  const LayoutMap& map_;
};

} // namespace ww::layout
