// AxisInfo: what is known about the integer and pointer values of a kernel per tensor dim
// (contiguity, divisibility, constancy), as in Triton. It decides vector widths of loads/stores.
#pragma once

#include "ir/IR.h"

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace ww::layout {

/// Facts about one value, one entry per tensor dim (scalars have one entry, as a 1-element
/// tensor). Along dim d, the elements form runs:
///  - contiguity[d]: runs of this length (aligned to it) are consecutive (x, x+1, x+2, ...);
///  - constancy[d]: runs of this length (aligned) hold one value;
///  - divisibility[d]: the first element of every contiguity run (every element when contiguity
///    is 1) is a multiple of it. Pointers count in BYTES (the address), integers in units.
/// All three are powers of two; 1 means nothing known.
struct AxisInfo {
  std::vector<int64_t> contiguity;
  std::vector<int64_t> divisibility;
  std::vector<int64_t> constancy;
  /// The value when it is one compile-time constant (all elements equal).
  std::optional<int64_t> constantValue;

  int rank() const { return static_cast<int>(contiguity.size()); }
  /// Nothing known, for `rank` dims (rank 0 -> 1 entry).
  static AxisInfo unknown(int rank);
  bool operator==(const AxisInfo& o) const = default;
};

/// The largest power of two dividing v (v == 0: a large power, 2^30).
int64_t highestPowerOf2Divisor(int64_t v);

/// Runs the analysis over a whole function: all regions; for-loop-carried values to a fixed
/// point; values carried around while loops, floats and non-value types read as unknown.
class AxisInfoAnalysis {
public:
  explicit AxisInfoAnalysis(const ir::Function& fn);

  /// The facts about `v`; unknown for values the analysis does not track.
  AxisInfo get(const ir::Value* v) const;

  /// Contiguous elements a pointer tensor `ptr` can be accessed with along `dim` in one vector
  /// of at most 16 bytes: min(contiguity, alignment in elements, 16 / elemBytes), limited by the
  /// mask's constancy along `dim` when `mask` is given (a vector shares one predicate).
  int64_t vectorElems(const ir::Value* ptr, const ir::Value* mask, int dim) const;
  /// Alignment in elements of the starts of `ptr`'s contiguous runs along `dim`.
  int64_t pointerAlignmentElems(const ir::Value* ptr, int dim) const;

private:
  void visitBlock(const ir::Block& block);
  void visitOp(const ir::Op& op);
  void set(const ir::Value* v, AxisInfo info);

  const ir::Function& fn_;
  std::unordered_map<const ir::Value*, AxisInfo> info_;
  /// The multiple_of / max_contiguous ops given each value.
  std::unordered_map<const ir::Value*, std::vector<const ir::Op*>> hints_;
};

} // namespace ww::layout
