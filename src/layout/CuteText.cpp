// The CuTe Shape:Stride text of the compiler's layouts (tlx.dump_layout, Layouts.h). CuTe writes
// a layout as a shape and a stride of one nesting, `(_32,_2):(_1,_32)`: coordinate i of a mode
// (n, s) adds i * s to the result. Our layouts are linear over GF(2), one basis per power-of-two
// bit; consecutive bases of one hardware dim that double each other (s, 2s, 4s, ..) form one mode.
#include "layout/Layouts.h"

#include <sstream>
#include <stdexcept>

namespace ww::layout {

namespace {

struct Mode {
  int64_t size;
  int64_t stride;
};

/// Consecutive bit strides that double (s, 2s, ..; zeros run together as a broadcast mode) as
/// modes (2^k, s).
std::vector<Mode> modesOf(const std::vector<int64_t>& bitStrides) {
  std::vector<Mode> out;
  for (int64_t s : bitStrides) {
    if (!out.empty() && out.back().stride * out.back().size == s &&
        (s != 0 || out.back().stride == 0)) {
      out.back().size *= 2;
      continue;
    }
    out.push_back({2, s});
  }
  return out;
}

/// `_n` for one mode, `(_a,_b,..)` for several; `_1` / `_0` for none.
std::string group(const std::vector<Mode>& modes, bool strides) {
  if (modes.empty()) return strides ? "_0" : "_1";
  auto one = [&](const Mode& m) {
    std::string t = "_";
    t += std::to_string(strides ? m.stride : m.size);
    return t;
  };
  if (modes.size() == 1) return one(modes[0]);
  std::string s = "(";
  for (size_t i = 0; i < modes.size(); ++i) {
    if (i) s += ",";
    s += one(modes[i]);
  }
  return s + ")";
}

std::string groups(const std::vector<std::vector<Mode>>& g, bool strides) {
  if (g.size() == 1) return group(g[0], strides);
  std::string s = "(";
  for (size_t i = 0; i < g.size(); ++i) {
    if (i) s += ",";
    s += group(g[i], strides);
  }
  return s + ")";
}

/// Row-major flat offset of a coordinate vector in `shape`.
int64_t flatOffset(const std::vector<int32_t>& coords, const std::vector<int64_t>& shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + coords[d];
  return off;
}

/// The strides one in dim's bits give, as flat row-major offsets of their coordinates.
std::vector<int64_t> bitStridesOf(const LinearLayout& l, const std::string& in,
                                  const std::vector<int64_t>& shape) {
  std::vector<int64_t> out;
  if (!l.hasInDim(in)) return out;
  for (int b = 0; b < l.getInDimSizeLog2(in); ++b)
    out.push_back(flatOffset(l.getBasis(in, b), shape));
  return out;
}

} // namespace

std::string cuteRegisterLayoutText(const LinearLayout& l) {
  std::vector<int64_t> shape = layoutShape(l);
  std::vector<Mode> thread = modesOf(bitStridesOf(l, kLane, shape));
  std::vector<Mode> warps = modesOf(bitStridesOf(l, kWarp, shape));
  thread.insert(thread.end(), warps.begin(), warps.end());
  std::vector<Mode> value = modesOf(bitStridesOf(l, kRegister, shape));
  std::vector<std::vector<Mode>> tv = {thread, value};
  return groups(tv, false) + ":" + groups(tv, true);
}

std::string cuteSharedLayoutText(const LinearLayout& shared,
                                 const std::vector<std::pair<int64_t, int64_t>>& padding) {
  const int rank = shared.numOutDims();
  std::vector<int64_t> shape;
  for (int d = 0; d < rank; ++d) shape.push_back(shared.getOutDimSize(dimName(d)));
  // Coordinates -> element offset: each coordinate bit's offset.
  LinearLayout toOffset = shared.invert();
  std::vector<std::vector<int64_t>> bits(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d)
    for (int b = 0; b < toOffset.getInDimSizeLog2(dimName(d)); ++b)
      bits[size_t(d)].push_back(toOffset.getBasis(dimName(d), b)[0]);
  // Find the CuTe Swizzle<B, M, S> (bits [M, M + B) of the offset XORed with bits
  // [M + S, M + S + B)) that, undone, leaves every coordinate bit a single power-of-two offset
  // (a plain strided layout); B = 0 is tried first.
  auto unswizzle = [](int64_t x, int B, int M, int S) {
    int64_t mask = ((int64_t(1) << B) - 1) << (M + S);
    return x ^ ((x & mask) >> S);
  };
  auto plain = [&](int B, int M, int S) {
    for (const auto& dim : bits)
      for (int64_t x : dim) {
        int64_t u = unswizzle(x, B, M, S);
        if (u == 0 || (u & (u - 1)) != 0) return false;
      }
    return true;
  };
  int foundB = -1, foundM = 0, foundS = 0;
  if (plain(0, 0, 0)) {
    foundB = 0;
  } else {
    for (int B = 1; B <= 8 && foundB < 0; ++B)
      for (int M = 0; M <= 8 && foundB < 0; ++M)
        for (int S = B; S <= 16 && foundB < 0; ++S)
          if (plain(B, M, S)) foundB = B, foundM = M, foundS = S;
  }
  if (foundB < 0) return "";
  std::vector<std::vector<Mode>> dims;
  for (const auto& dim : bits) {
    std::vector<int64_t> strides;
    for (int64_t x : dim) {
      // Padding adds (x / interval) * padding, which is additive over the distinct bits of a
      // plain layout: a padded identity layout is a strided one.
      int64_t u = unswizzle(x, foundB, foundM, foundS), padded = u;
      for (const auto& [interval, pad] : padding) padded += u / interval * pad;
      strides.push_back(padded);
    }
    dims.push_back(modesOf(strides));
  }
  std::string text = groups(dims, false) + ":" + groups(dims, true);
  if (foundB == 0) return text;
  return "Sw<" + std::to_string(foundB) + "," + std::to_string(foundM) + "," +
         std::to_string(foundS) + "> o _0 o " + text;
}

} // namespace ww::layout
