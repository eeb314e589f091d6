// LinearLayout algebra. Linear-algebra steps (inversion, free variables) flatten the layout to a
// GF(2) matrix whose columns are input bits and whose rows are output bits (first out dim minor).
#include "layout/LinearLayout.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace ww::layout {

std::string dimName(int d) {
  return "dim" + std::to_string(d);
}

std::vector<std::string> dimNames(int rank) {
  std::vector<std::string> names;
  for (int d = 0; d < rank; ++d) names.push_back(dimName(d));
  return names;
}

namespace {

int log2Exact(int64_t v) {
  if (!isPowerOf2(v))
    throw std::logic_error("linear layout: size " + std::to_string(v) + " is not a power of two");
  int l = 0;
  while ((int64_t(1) << l) < v) ++l;
  return l;
}

/// Incremental GF(2) row echelon basis over vectors of up to 64 bits. Each stored vector keeps
/// the combination of inserted columns it came from, so that solve() yields preimages.
class GF2Basis {
public:
  /// Inserts `v` (the column with index `column`); returns false when it is dependent on the
  /// vectors inserted before.
  bool insert(uint64_t v, int column) {
    uint64_t comb = uint64_t(1) << column;
    for (size_t i = 0; i < vecs_.size(); ++i)
      if (v >> pivots_[i] & 1) {
        v ^= vecs_[i];
        comb ^= combs_[i];
      }
    if (v == 0) return false;
    int pivot = 0;
    while (!(v >> pivot & 1)) ++pivot;
    vecs_.push_back(v);
    combs_.push_back(comb);
    pivots_.push_back(pivot);
    return true;
  }
  /// A combination (bit mask of inserted columns) producing `target`, if one exists.
  std::optional<uint64_t> solve(uint64_t target) const {
    uint64_t comb = 0;
    for (size_t i = 0; i < vecs_.size(); ++i)
      if (target >> pivots_[i] & 1) {
        target ^= vecs_[i];
        comb ^= combs_[i];
      }
    if (target != 0) return std::nullopt;
    return comb;
  }
  int rank() const { return static_cast<int>(vecs_.size()); }

private:
  std::vector<uint64_t> vecs_, combs_;
  std::vector<int> pivots_;
};

} // namespace

// ---------------------------------------------------------------------------------------------
// construction
// ---------------------------------------------------------------------------------------------

LinearLayout::LinearLayout(Bases bases, NamedSizes outDims) {
  for (auto& [name, b] : bases) {
    inNames_.push_back(name);
    bases_.push_back(std::move(b));
  }
  for (auto& [name, size] : outDims) {
    outNames_.push_back(name);
    outSizes_.push_back(size);
  }
  check();
}

LinearLayout::LinearLayout(Bases bases, const std::vector<std::string>& outDimNames) {
  for (auto& [name, b] : bases) {
    inNames_.push_back(name);
    bases_.push_back(std::move(b));
  }
  outNames_ = outDimNames;
  outSizes_.assign(outNames_.size(), 1);
  for (const auto& dim : bases_)
    for (const auto& basis : dim) {
      if (basis.size() != outNames_.size())
        throw std::logic_error("linear layout: basis length differs from the out dim count");
      for (size_t o = 0; o < basis.size(); ++o)
        while (outSizes_[o] <= basis[o]) outSizes_[o] *= 2;
    }
  check();
}

void LinearLayout::check() const {
  auto unique = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return std::adjacent_find(v.begin(), v.end()) == v.end();
  };
  if (!unique(inNames_) || !unique(outNames_))
    throw std::logic_error("linear layout: duplicate dimension name");
  int totalOutBits = 0;
  for (int32_t s : outSizes_) totalOutBits += log2Exact(s);
  if (totalOutBits > 62) throw std::logic_error("linear layout: more than 62 output bits");
  int totalInBits = 0;
  for (const auto& dim : bases_) totalInBits += static_cast<int>(dim.size());
  if (totalInBits > 62) throw std::logic_error("linear layout: more than 62 input bits");
  for (const auto& dim : bases_)
    for (const auto& basis : dim) {
      if (basis.size() != outNames_.size())
        throw std::logic_error("linear layout: basis length differs from the out dim count");
      for (size_t o = 0; o < basis.size(); ++o)
        if (basis[o] < 0 || basis[o] >= outSizes_[o])
          throw std::logic_error("linear layout: basis value " + std::to_string(basis[o]) +
                                 " out of range for " + outNames_[o] + " of size " +
                                 std::to_string(outSizes_[o]));
    }
}

LinearLayout LinearLayout::identity1D(int32_t size, const std::string& inDim,
                                      const std::string& outDim) {
  std::vector<std::vector<int32_t>> bases;
  for (int i = 0; i < log2Exact(size); ++i) bases.push_back({int32_t(1) << i});
  return LinearLayout(Bases{{inDim, bases}}, NamedSizes{{outDim, size}});
}

LinearLayout LinearLayout::zeros1D(int32_t size, const std::string& inDim,
                                   const std::string& outDim) {
  std::vector<std::vector<int32_t>> bases(log2Exact(size), std::vector<int32_t>{0});
  return LinearLayout(Bases{{inDim, bases}}, NamedSizes{{outDim, 1}});
}

LinearLayout LinearLayout::strided1D(int32_t size, int32_t stride, const std::string& inDim,
                                     const std::string& outDim) {
  log2Exact(stride);
  std::vector<std::vector<int32_t>> bases;
  for (int i = 0; i < log2Exact(size); ++i) bases.push_back({stride << i});
  return LinearLayout(Bases{{inDim, bases}}, NamedSizes{{outDim, size * stride}});
}

// ---------------------------------------------------------------------------------------------
// shape and bases
// ---------------------------------------------------------------------------------------------

int LinearLayout::inIndex(const std::string& d) const {
  auto it = std::find(inNames_.begin(), inNames_.end(), d);
  return it == inNames_.end() ? -1 : static_cast<int>(it - inNames_.begin());
}

int LinearLayout::outIndex(const std::string& d) const {
  auto it = std::find(outNames_.begin(), outNames_.end(), d);
  return it == outNames_.end() ? -1 : static_cast<int>(it - outNames_.begin());
}

bool LinearLayout::hasInDim(const std::string& d) const {
  return inIndex(d) >= 0;
}
bool LinearLayout::hasOutDim(const std::string& d) const {
  return outIndex(d) >= 0;
}

int LinearLayout::getInDimSizeLog2(const std::string& d) const {
  int i = inIndex(d);
  return i < 0 ? 0 : static_cast<int>(bases_[i].size());
}

int32_t LinearLayout::getInDimSize(const std::string& d) const {
  return int32_t(1) << getInDimSizeLog2(d);
}

int32_t LinearLayout::getOutDimSize(const std::string& d) const {
  int o = outIndex(d);
  return o < 0 ? 1 : outSizes_[o];
}

int LinearLayout::getOutDimSizeLog2(const std::string& d) const {
  return log2Exact(getOutDimSize(d));
}

int64_t LinearLayout::getTotalInDimSize() const {
  int64_t total = 1;
  for (const auto& dim : bases_) total <<= dim.size();
  return total;
}

int64_t LinearLayout::getTotalOutDimSize() const {
  int64_t total = 1;
  for (int32_t s : outSizes_) total *= s;
  return total;
}

const std::vector<int32_t>& LinearLayout::getBasis(const std::string& inDim, int bit) const {
  int i = inIndex(inDim);
  if (i < 0 || bit < 0 || bit >= static_cast<int>(bases_[i].size()))
    throw std::logic_error("linear layout: no basis " + inDim + "[" + std::to_string(bit) + "]");
  return bases_[i][bit];
}

int32_t LinearLayout::getBasis(const std::string& inDim, int bit, const std::string& outDim) const {
  int o = outIndex(outDim);
  if (o < 0) throw std::logic_error("linear layout: no out dim " + outDim);
  return getBasis(inDim, bit)[o];
}

LinearLayout::Bases LinearLayout::getBases() const {
  Bases b;
  for (size_t i = 0; i < inNames_.size(); ++i) b.emplace_back(inNames_[i], bases_[i]);
  return b;
}

// ---------------------------------------------------------------------------------------------
// evaluation
// ---------------------------------------------------------------------------------------------

std::vector<int32_t> LinearLayout::apply(const std::vector<int32_t>& ins) const {
  if (ins.size() != inNames_.size())
    throw std::logic_error("linear layout: apply() needs one value per in dim");
  std::vector<int32_t> out(outNames_.size(), 0);
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i] < 0 || (int64_t(ins[i]) >> bases_[i].size()) != 0)
      throw std::logic_error("linear layout: input " + std::to_string(ins[i]) +
                             " out of range for " + inNames_[i]);
    for (size_t bit = 0; bit < bases_[i].size(); ++bit)
      if (ins[i] >> bit & 1)
        for (size_t o = 0; o < out.size(); ++o) out[o] ^= bases_[i][bit][o];
  }
  return out;
}

LinearLayout::NamedValues LinearLayout::apply(const NamedValues& ins) const {
  std::vector<int32_t> flat(inNames_.size(), 0);
  for (const auto& [name, value] : ins) {
    int i = inIndex(name);
    if (i < 0) {
      if (value != 0) throw std::logic_error("linear layout: no in dim " + name);
      continue;
    }
    flat[i] = value;
  }
  std::vector<int32_t> out = apply(flat);
  NamedValues named;
  for (size_t o = 0; o < out.size(); ++o) named.emplace_back(outNames_[o], out[o]);
  return named;
}

// ---------------------------------------------------------------------------------------------
// algebra
// ---------------------------------------------------------------------------------------------

LinearLayout operator*(LinearLayout inner, const LinearLayout& outer) {
  std::vector<std::string> outNames = inner.outNames_;
  std::vector<int32_t> outSizes = inner.outSizes_;
  std::vector<int32_t> shift(outNames.size(), 0); // log2 of inner's size per combined out dim
  for (size_t o = 0; o < outNames.size(); ++o) shift[o] = log2Exact(outSizes[o]);
  std::vector<int> outerToCombined;
  for (size_t o = 0; o < outer.outNames_.size(); ++o) {
    int c = inner.outIndex(outer.outNames_[o]);
    if (c < 0) {
      c = static_cast<int>(outNames.size());
      outNames.push_back(outer.outNames_[o]);
      outSizes.push_back(outer.outSizes_[o]);
      shift.push_back(0);
    } else {
      outSizes[c] *= outer.outSizes_[o];
    }
    outerToCombined.push_back(c);
  }
  LinearLayout::Bases bases;
  for (size_t i = 0; i < inner.inNames_.size(); ++i) {
    std::vector<std::vector<int32_t>> dim;
    for (auto basis : inner.bases_[i]) {
      basis.resize(outNames.size(), 0);
      dim.push_back(std::move(basis));
    }
    bases.emplace_back(inner.inNames_[i], std::move(dim));
  }
  for (size_t i = 0; i < outer.inNames_.size(); ++i) {
    int target = inner.inIndex(outer.inNames_[i]);
    if (target < 0) {
      target = static_cast<int>(bases.size());
      bases.emplace_back(outer.inNames_[i], std::vector<std::vector<int32_t>>{});
    }
    for (const auto& ob : outer.bases_[i]) {
      std::vector<int32_t> basis(outNames.size(), 0);
      for (size_t o = 0; o < ob.size(); ++o) {
        int c = outerToCombined[o];
        basis[c] = ob[o] << shift[c];
      }
      bases[target].second.push_back(std::move(basis));
    }
  }
  LinearLayout::NamedSizes outDims;
  for (size_t o = 0; o < outNames.size(); ++o) outDims.emplace_back(outNames[o], outSizes[o]);
  return LinearLayout(std::move(bases), std::move(outDims));
}

LinearLayout LinearLayout::compose(const LinearLayout& outer) const {
  for (size_t o = 0; o < outNames_.size(); ++o) {
    if (!outer.hasInDim(outNames_[o]))
      throw std::logic_error("linear layout compose: outer lacks in dim " + outNames_[o]);
    if (outer.getInDimSize(outNames_[o]) < outSizes_[o])
      throw std::logic_error("linear layout compose: outer's " + outNames_[o] +
                             " is smaller than this layout's");
  }
  Bases bases;
  for (size_t i = 0; i < inNames_.size(); ++i) {
    std::vector<std::vector<int32_t>> dim;
    for (const auto& basis : bases_[i]) {
      NamedValues ins;
      for (size_t o = 0; o < outNames_.size(); ++o) ins.emplace_back(outNames_[o], basis[o]);
      std::vector<int32_t> mapped;
      for (const auto& [name, value] : outer.apply(ins)) mapped.push_back(value);
      dim.push_back(std::move(mapped));
    }
    bases.emplace_back(inNames_[i], std::move(dim));
  }
  NamedSizes outDims;
  for (size_t o = 0; o < outer.outNames_.size(); ++o)
    outDims.emplace_back(outer.outNames_[o], outer.outSizes_[o]);
  return LinearLayout(std::move(bases), std::move(outDims));
}

namespace {

/// The layout as a GF(2) matrix: one uint64 per input bit (in dim order, low bits first), each
/// holding the output bits (out dims concatenated, first out dim lowest).
struct FlatMatrix {
  std::vector<uint64_t> columns;
  std::vector<int> outShift; // bit position of each out dim
  int outBits = 0;
};

} // namespace

static FlatMatrix flatten(const std::vector<std::vector<std::vector<int32_t>>>& bases,
                          const std::vector<int32_t>& outSizes) {
  FlatMatrix m;
  for (int32_t s : outSizes) {
    m.outShift.push_back(m.outBits);
    m.outBits += log2Exact(s);
  }
  for (const auto& dim : bases)
    for (const auto& basis : dim) {
      uint64_t col = 0;
      for (size_t o = 0; o < basis.size(); ++o) col |= uint64_t(basis[o]) << m.outShift[o];
      m.columns.push_back(col);
    }
  return m;
}

LinearLayout LinearLayout::pseudoinvert() const {
  FlatMatrix m = flatten(bases_, outSizes_);
  GF2Basis basis;
  for (size_t c = 0; c < m.columns.size(); ++c) basis.insert(m.columns[c], static_cast<int>(c));
  if (basis.rank() != m.outBits)
    throw std::logic_error("linear layout: pseudoinvert() of a non-surjective layout:\n" + str());
  // The result maps each output bit to the input bits (in this layout's in dims) producing it.
  std::vector<int> inShift;
  int inBits = 0;
  for (const auto& dim : bases_) {
    inShift.push_back(inBits);
    inBits += static_cast<int>(dim.size());
  }
  Bases bases;
  for (size_t o = 0; o < outNames_.size(); ++o) {
    std::vector<std::vector<int32_t>> dim;
    for (int bit = 0; bit < log2Exact(outSizes_[o]); ++bit) {
      uint64_t comb = *basis.solve(uint64_t(1) << (m.outShift[o] + bit));
      std::vector<int32_t> value(inNames_.size(), 0);
      for (size_t i = 0; i < inNames_.size(); ++i)
        value[i] =
            static_cast<int32_t>((comb >> inShift[i]) & ((uint64_t(1) << bases_[i].size()) - 1));
      dim.push_back(std::move(value));
    }
    bases.emplace_back(outNames_[o], std::move(dim));
  }
  NamedSizes outDims;
  for (size_t i = 0; i < inNames_.size(); ++i)
    outDims.emplace_back(inNames_[i], int32_t(1) << bases_[i].size());
  return LinearLayout(std::move(bases), std::move(outDims));
}

LinearLayout LinearLayout::invert() const {
  if (!isSurjective() || !isInjective())
    throw std::logic_error("linear layout: invert() of a non-bijective layout:\n" + str());
  return pseudoinvert();
}

LinearLayout LinearLayout::invertAndCompose(const LinearLayout& outer) const {
  return compose(outer.pseudoinvert());
}

bool LinearLayout::isSurjective() const {
  FlatMatrix m = flatten(bases_, outSizes_);
  GF2Basis basis;
  for (size_t c = 0; c < m.columns.size(); ++c) basis.insert(m.columns[c], static_cast<int>(c));
  return basis.rank() == m.outBits;
}

bool LinearLayout::isInjective() const {
  FlatMatrix m = flatten(bases_, outSizes_);
  GF2Basis basis;
  for (size_t c = 0; c < m.columns.size(); ++c) basis.insert(m.columns[c], static_cast<int>(c));
  return basis.rank() == static_cast<int>(m.columns.size());
}

std::vector<std::pair<std::string, int32_t>> LinearLayout::getFreeVariableMasks() const {
  FlatMatrix m = flatten(bases_, outSizes_);
  GF2Basis basis;
  std::vector<std::pair<std::string, int32_t>> masks;
  int c = 0;
  for (size_t i = 0; i < inNames_.size(); ++i) {
    int32_t mask = 0;
    for (size_t bit = 0; bit < bases_[i].size(); ++bit, ++c)
      if (!basis.insert(m.columns[c], c)) mask |= int32_t(1) << bit;
    masks.emplace_back(inNames_[i], mask);
  }
  return masks;
}

int32_t LinearLayout::freeVariableMask(const std::string& inDim) const {
  for (const auto& [name, mask] : getFreeVariableMasks())
    if (name == inDim) return mask;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// restructuring
// ---------------------------------------------------------------------------------------------

LinearLayout LinearLayout::sublayout(const std::vector<std::string>& inDims,
                                     const std::vector<std::string>& outDims) const {
  auto listed = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  std::vector<size_t> keptOuts;
  NamedSizes outs;
  for (size_t o = 0; o < outNames_.size(); ++o)
    if (listed(outDims, outNames_[o])) {
      keptOuts.push_back(o);
      outs.emplace_back(outNames_[o], outSizes_[o]);
    }
  Bases bases;
  for (size_t i = 0; i < inNames_.size(); ++i) {
    if (!listed(inDims, inNames_[i])) continue;
    std::vector<std::vector<int32_t>> dim;
    for (const auto& basis : bases_[i]) {
      std::vector<int32_t> kept;
      for (size_t o : keptOuts) kept.push_back(basis[o]);
      dim.push_back(std::move(kept));
    }
    bases.emplace_back(inNames_[i], std::move(dim));
  }
  return LinearLayout(std::move(bases), std::move(outs));
}

bool LinearLayout::sublayoutIsZero(const std::vector<std::string>& inDims,
                                   const std::vector<std::string>& outDims) const {
  LinearLayout sub = sublayout(inDims, outDims);
  for (const auto& dim : sub.bases_)
    for (const auto& basis : dim)
      for (int32_t v : basis)
        if (v != 0) return false;
  return true;
}

LinearLayout LinearLayout::reshapeIns(const NamedSizes& newInDims) const {
  int64_t total = 1;
  for (const auto& [name, size] : newInDims) total *= size;
  if (total != getTotalInDimSize())
    throw std::logic_error("linear layout reshapeIns: total size changes");
  std::vector<std::vector<int32_t>> flat;
  for (const auto& dim : bases_)
    for (const auto& basis : dim) flat.push_back(basis);
  Bases bases;
  size_t next = 0;
  for (const auto& [name, size] : newInDims) {
    std::vector<std::vector<int32_t>> dim;
    for (int bit = 0; bit < log2Exact(size); ++bit) dim.push_back(flat[next++]);
    bases.emplace_back(name, std::move(dim));
  }
  NamedSizes outs;
  for (size_t o = 0; o < outNames_.size(); ++o) outs.emplace_back(outNames_[o], outSizes_[o]);
  return LinearLayout(std::move(bases), std::move(outs));
}

LinearLayout LinearLayout::reshapeOuts(const NamedSizes& newOutDims) const {
  int64_t total = 1;
  for (const auto& [name, size] : newOutDims) total *= size;
  if (total != getTotalOutDimSize())
    throw std::logic_error("linear layout reshapeOuts: total size changes");
  FlatMatrix m = flatten(bases_, outSizes_);
  std::vector<int> shifts;
  int bits = 0;
  for (const auto& [name, size] : newOutDims) {
    shifts.push_back(bits);
    bits += log2Exact(size);
  }
  Bases bases;
  size_t c = 0;
  for (size_t i = 0; i < inNames_.size(); ++i) {
    std::vector<std::vector<int32_t>> dim;
    for (size_t bit = 0; bit < bases_[i].size(); ++bit, ++c) {
      std::vector<int32_t> basis;
      for (size_t o = 0; o < newOutDims.size(); ++o)
        basis.push_back(
            static_cast<int32_t>((m.columns[c] >> shifts[o]) & uint64_t(newOutDims[o].second - 1)));
      dim.push_back(std::move(basis));
    }
    bases.emplace_back(inNames_[i], std::move(dim));
  }
  return LinearLayout(std::move(bases), newOutDims);
}

LinearLayout LinearLayout::flattenIns() const {
  if (inNames_.empty()) return *this;
  return reshapeIns({{inNames_[0], static_cast<int32_t>(getTotalInDimSize())}});
}

LinearLayout LinearLayout::flattenOuts() const {
  if (outNames_.empty()) return *this;
  return reshapeOuts({{outNames_[0], static_cast<int32_t>(getTotalOutDimSize())}});
}

LinearLayout LinearLayout::transposeOuts(const std::vector<std::string>& order) const {
  if (order.size() != outNames_.size())
    throw std::logic_error("linear layout transposeOuts: not a permutation of the out dims");
  std::vector<int> perm;
  for (const auto& name : order) {
    int o = outIndex(name);
    if (o < 0) throw std::logic_error("linear layout transposeOuts: no out dim " + name);
    perm.push_back(o);
  }
  Bases bases;
  for (size_t i = 0; i < inNames_.size(); ++i) {
    std::vector<std::vector<int32_t>> dim;
    for (const auto& basis : bases_[i]) {
      std::vector<int32_t> permuted;
      for (int o : perm) permuted.push_back(basis[o]);
      dim.push_back(std::move(permuted));
    }
    bases.emplace_back(inNames_[i], std::move(dim));
  }
  NamedSizes outs;
  for (int o : perm) outs.emplace_back(outNames_[o], outSizes_[o]);
  return LinearLayout(std::move(bases), std::move(outs));
}

LinearLayout LinearLayout::transposeIns(const std::vector<std::string>& order) const {
  if (order.size() != inNames_.size())
    throw std::logic_error("linear layout transposeIns: not a permutation of the in dims");
  Bases bases;
  for (const auto& name : order) {
    int i = inIndex(name);
    if (i < 0) throw std::logic_error("linear layout transposeIns: no in dim " + name);
    bases.emplace_back(name, bases_[i]);
  }
  NamedSizes outs;
  for (size_t o = 0; o < outNames_.size(); ++o) outs.emplace_back(outNames_[o], outSizes_[o]);
  return LinearLayout(std::move(bases), std::move(outs));
}

LinearLayout LinearLayout::renameOutDim(const std::string& from, const std::string& to) const {
  LinearLayout copy = *this;
  int o = outIndex(from);
  if (o < 0) throw std::logic_error("linear layout renameOutDim: no out dim " + from);
  copy.outNames_[o] = to;
  copy.check();
  return copy;
}

LinearLayout LinearLayout::renameInDim(const std::string& from, const std::string& to) const {
  LinearLayout copy = *this;
  int i = inIndex(from);
  if (i < 0) throw std::logic_error("linear layout renameInDim: no in dim " + from);
  copy.inNames_[i] = to;
  copy.check();
  return copy;
}

LinearLayout LinearLayout::withInDimSize(const std::string& inDim, int32_t size) const {
  LinearLayout copy = *this;
  int i = copy.inIndex(inDim);
  if (i < 0) {
    copy.inNames_.push_back(inDim);
    copy.bases_.emplace_back();
    i = static_cast<int>(copy.inNames_.size()) - 1;
  }
  size_t bits = static_cast<size_t>(log2Exact(size));
  if (bits < copy.bases_[i].size())
    throw std::logic_error("linear layout withInDimSize: cannot shrink " + inDim);
  copy.bases_[i].resize(bits, std::vector<int32_t>(outNames_.size(), 0));
  copy.check();
  return copy;
}

LinearLayout LinearLayout::withOutDimSize(const std::string& outDim, int32_t size) const {
  LinearLayout copy = *this;
  int o = copy.outIndex(outDim);
  if (o < 0) {
    copy.outNames_.push_back(outDim);
    copy.outSizes_.push_back(size);
    for (auto& dim : copy.bases_)
      for (auto& basis : dim) basis.push_back(0);
  } else {
    copy.outSizes_[o] = size;
  }
  copy.check();
  return copy;
}

// ---------------------------------------------------------------------------------------------
// queries
// ---------------------------------------------------------------------------------------------

int32_t LinearLayout::numConsecutiveInOut() const {
  int reg = inIndex(kRegister);
  if (reg < 0 || outNames_.empty()) return 1;
  // Row-major flattening: the last out dim is the fastest.
  std::vector<std::string> reversed(outNames_.rbegin(), outNames_.rend());
  LinearLayout flat = transposeOuts(reversed).flattenOuts();
  int32_t n = 1;
  for (size_t bit = 0; bit < flat.bases_[reg].size(); ++bit) {
    if (flat.bases_[reg][bit][0] != (int32_t(1) << bit)) break;
    n *= 2;
  }
  return n;
}

int32_t LinearLayout::numConsecutiveInOut(const std::string& outDim) const {
  int reg = inIndex(kRegister);
  int target = outIndex(outDim);
  if (reg < 0 || target < 0) return 1;
  int32_t n = 1;
  for (size_t bit = 0; bit < bases_[reg].size(); ++bit) {
    const auto& basis = bases_[reg][bit];
    bool unit = true;
    for (size_t o = 0; o < basis.size(); ++o)
      if (basis[o] != (static_cast<int>(o) == target ? (int32_t(1) << bit) : 0)) unit = false;
    if (!unit) break;
    n *= 2;
  }
  return n;
}

bool LinearLayout::operator==(const LinearLayout& o) const {
  return inNames_ == o.inNames_ && bases_ == o.bases_ && outNames_ == o.outNames_ &&
         outSizes_ == o.outSizes_;
}

bool LinearLayout::equalIgnoringDimOrder(const LinearLayout& o) const {
  if (numInDims() != o.numInDims() || numOutDims() != o.numOutDims()) return false;
  for (size_t d = 0; d < outNames_.size(); ++d)
    if (!o.hasOutDim(outNames_[d]) || o.getOutDimSize(outNames_[d]) != outSizes_[d]) return false;
  for (size_t i = 0; i < inNames_.size(); ++i) {
    if (!o.hasInDim(inNames_[i]) || o.getInDimSizeLog2(inNames_[i]) != int(bases_[i].size()))
      return false;
    for (size_t bit = 0; bit < bases_[i].size(); ++bit)
      for (size_t d = 0; d < outNames_.size(); ++d)
        if (o.getBasis(inNames_[i], static_cast<int>(bit), outNames_[d]) != bases_[i][bit][d])
          return false;
  }
  return true;
}

std::string LinearLayout::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < inNames_.size(); ++i) {
    os << " - " << inNames_[i] << ":";
    if (bases_[i].empty()) os << " (size 1)";
    for (const auto& basis : bases_[i]) {
      os << " [";
      for (size_t o = 0; o < basis.size(); ++o) os << (o ? "," : "") << basis[o];
      os << "]";
    }
    os << "\n";
  }
  os << "where out dims: [";
  for (size_t o = 0; o < outNames_.size(); ++o)
    os << (o ? ", " : "") << outNames_[o] << " (size " << outSizes_[o] << ")";
  os << "]";
  return os.str();
}

} // namespace ww::layout
