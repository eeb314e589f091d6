// Linear layouts: linear maps over GF(2) from hardware indices (register, lane, warp, block bits,
// or a shared-memory offset) to tensor coordinates. Every distributed layout and every swizzle is
// one of these, so conversions, vector widths and bank conflicts all come from the same algebra.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ww::layout {

/// Input dimension names of distributed layouts (per-thread register index, lane in the warp,
/// warp in the CTA, CTA in the cluster) and of shared-memory layouts (element offset).
inline constexpr const char* kRegister = "register";
inline constexpr const char* kLane = "lane";
inline constexpr const char* kWarp = "warp";
inline constexpr const char* kBlock = "block";
inline constexpr const char* kOffset = "offset";

/// "dim0", "dim1", ...: the output dimension naming tensor dimension `d` (tensor order).
std::string dimName(int d);
/// {"dim0", ..., "dim<rank-1>"}.
std::vector<std::string> dimNames(int rank);

/// A linear map over GF(2). For every input dimension, one basis vector per input bit; a basis
/// vector holds one value per output dimension. apply() XORs the bases of the set input bits.
/// Input dimension sizes are 2^(number of bases); output dimension sizes are powers of two.
///
/// Convention for flattening and reshaping (as in Triton): when several dimensions are combined
/// into one, the FIRST listed dimension is the most minor (lowest bits).
class LinearLayout {
public:
  /// bases[inDim] = {basis for bit 0, bit 1, ...}; each basis has one value per output dim.
  using Bases = std::vector<std::pair<std::string, std::vector<std::vector<int32_t>>>>;
  using NamedSizes = std::vector<std::pair<std::string, int32_t>>;
  using NamedValues = std::vector<std::pair<std::string, int32_t>>;

  /// The empty layout: no inputs, no outputs (the unit of operator*).
  LinearLayout() = default;
  /// Explicit output sizes (powers of two, each larger than every basis value it holds).
  /// Throws std::logic_error on malformed input (wrong basis length, sizes not powers of two).
  LinearLayout(Bases bases, NamedSizes outDims);
  /// Output sizes inferred as the smallest powers of two covering the bases.
  LinearLayout(Bases bases, const std::vector<std::string>& outDimNames);

  // ---- constructors of 1-D maps ----
  /// x -> x, size a power of two.
  static LinearLayout identity1D(int32_t size, const std::string& inDim, const std::string& outDim);
  /// x -> 0 (broadcast: every input value sees the same output); outDim has size 1.
  static LinearLayout zeros1D(int32_t size, const std::string& inDim, const std::string& outDim);
  /// x -> x * stride (stride a power of two); outDim sized size*stride.
  static LinearLayout strided1D(int32_t size, int32_t stride, const std::string& inDim,
                                const std::string& outDim);
  static LinearLayout empty() { return {}; }

  // ---- shape ----
  int numInDims() const { return static_cast<int>(inNames_.size()); }
  int numOutDims() const { return static_cast<int>(outNames_.size()); }
  const std::vector<std::string>& inDimNames() const { return inNames_; }
  const std::vector<std::string>& outDimNames() const { return outNames_; }
  bool hasInDim(const std::string& d) const;
  bool hasOutDim(const std::string& d) const;
  /// Size of an input dim (2^bits); 1 for a dim the layout does not have.
  int32_t getInDimSize(const std::string& d) const;
  int getInDimSizeLog2(const std::string& d) const;
  int32_t getOutDimSize(const std::string& d) const;
  int getOutDimSizeLog2(const std::string& d) const;
  /// Products over all dims.
  int64_t getTotalInDimSize() const;
  int64_t getTotalOutDimSize() const;
  /// Output sizes in outDimNames() order.
  const std::vector<int32_t>& outDimSizes() const { return outSizes_; }

  // ---- bases ----
  /// The basis of input bit `bit` of `inDim`, one value per output dim.
  const std::vector<int32_t>& getBasis(const std::string& inDim, int bit) const;
  int32_t getBasis(const std::string& inDim, int bit, const std::string& outDim) const;
  Bases getBases() const;

  // ---- evaluation ----
  /// Maps named inputs (missing dims count as 0) to every output dim, in outDimNames() order.
  NamedValues apply(const NamedValues& ins) const;
  /// Inputs in inDimNames() order -> outputs in outDimNames() order.
  std::vector<int32_t> apply(const std::vector<int32_t>& ins) const;

  // ---- algebra ----
  /// Direct product. In and out dims of both; for a dim both have, `outer`'s bits sit above
  /// `inner`'s (its inputs are multiplied by inner's in-size and its outputs by inner's
  /// out-size). Dims keep inner's order, then outer's new ones.
  friend LinearLayout operator*(LinearLayout inner, const LinearLayout& outer);
  LinearLayout& operator*=(const LinearLayout& outer) { return *this = *this * outer; }
  /// outer(this(x)): this's out dims must be outer's in dims (same names, sizes not larger).
  LinearLayout compose(const LinearLayout& outer) const;
  /// The inverse of a bijective layout (equal total in/out sizes, full rank); throws otherwise.
  LinearLayout invert() const;
  /// A right inverse of a surjective layout: this.apply(pseudoinvert().apply(y)) == y. Among the
  /// preimages it picks the one with the free (duplicate) input bits zero. Throws if not
  /// surjective.
  LinearLayout pseudoinvert() const;
  /// C such that this(x) == outer(C(x)): maps this's inputs to outer's inputs holding the same
  /// element. `outer` must be surjective onto this's outputs. This is a layout conversion:
  /// src.invertAndCompose(dst) tells where each source register's element lives in dst.
  LinearLayout invertAndCompose(const LinearLayout& outer) const;

  // ---- restructuring ----
  /// Keeps only the listed in and out dims (bases of dropped outputs are discarded).
  LinearLayout sublayout(const std::vector<std::string>& inDims,
                         const std::vector<std::string>& outDims) const;
  /// True when the listed in dims map only into the listed out dims.
  bool sublayoutIsZero(const std::vector<std::string>& inDims,
                       const std::vector<std::string>& outDims) const;
  /// Reinterprets the (flattened, first-minor) inputs as new dims of equal total size.
  LinearLayout reshapeIns(const NamedSizes& newInDims) const;
  LinearLayout reshapeOuts(const NamedSizes& newOutDims) const;
  /// One in (out) dim named like the first, of the total size.
  LinearLayout flattenIns() const;
  LinearLayout flattenOuts() const;
  /// Reorders the out (in) dims; `order` is a permutation of their names.
  LinearLayout transposeOuts(const std::vector<std::string>& order) const;
  LinearLayout transposeIns(const std::vector<std::string>& order) const;
  /// Renames one out (in) dim.
  LinearLayout renameOutDim(const std::string& from, const std::string& to) const;
  LinearLayout renameInDim(const std::string& from, const std::string& to) const;
  /// Adds bit(s) to an in dim mapping to zero (duplication), or resizes an out dim.
  LinearLayout withInDimSize(const std::string& inDim, int32_t size) const;
  LinearLayout withOutDimSize(const std::string& outDim, int32_t size) const;

  // ---- queries ----
  /// True when every output value is reached (rank == total out bits).
  bool isSurjective() const;
  bool isInjective() const;
  /// Per input dim, a bit mask of its "free" input bits: bits whose basis is zero or a
  /// combination of earlier bits (dims taken in inDimNames() order, bits from low to high).
  /// A free register bit is a duplicated register; a free lane bit means lanes hold the same
  /// data (broadcast).
  std::vector<std::pair<std::string, int32_t>> getFreeVariableMasks() const;
  int32_t freeVariableMask(const std::string& inDim) const;
  /// The number of consecutive registers (from register 0) that hold consecutive elements of the
  /// tensor flattened in row-major order (last out dim fastest): the vector width for memory.
  int32_t numConsecutiveInOut() const;
  /// The same, counting only contiguity along out dim `outDim` (others must stay fixed).
  int32_t numConsecutiveInOut(const std::string& outDim) const;

  bool operator==(const LinearLayout& o) const;
  bool operator!=(const LinearLayout& o) const { return !(*this == o); }
  /// Equal up to the order of dims (same names and sizes, same bases per name).
  bool equalIgnoringDimOrder(const LinearLayout& o) const;
  /// " - register: [0,1] [0,2]\n - lane: ...\nwhere out dims: [dim0 (size 16), dim1 (size 8)]".
  std::string str() const;

private:
  int inIndex(const std::string& d) const;  // -1 when absent
  int outIndex(const std::string& d) const; // -1 when absent
  void check() const;

  std::vector<std::string> inNames_;
  std::vector<std::vector<std::vector<int32_t>>> bases_; // [in dim][bit][out dim]
  std::vector<std::string> outNames_;
  std::vector<int32_t> outSizes_;
};

} // namespace ww::layout
