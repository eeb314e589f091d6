// Interpreter semantics of Blackwell's block-scaled MMA (tlx.async_dot_scaled) and of
// tlx.tmem_copy (tcgen05.cp of block scales). Both are tcgen05 ops of the issuing agent like
// tlx.async_dot into tensor memory (Tlx.cpp): they join its uncommitted MMAs, read and write
// memory in flight (a read of their destination, or a write of what they read, before the
// barrier of a commit that tracks them completes is a race), and take effect in issue order when
// that commit completes.
//
// Scales are e8m0 bytes (2^(s - 127); 0xFF is NaN), one per 32 elements of K, or nvfp4's ue4m3
// (tl.float8e4nv values), one per 16 (ir/BlockScaled.h). Operands are fp8, or e2m1 packed two to
// a byte along K (low nibble first): A [M, K / 2], B [K / 2, N]; one of each in the mixed MMA. A
// tensor-memory scale buffer holds the scales as [rows, cols] (row r of A, or column r of B; scale
// c of a block of K); a shared-memory tile holds them in the cuBLAS block-scaled layout: 512-byte
// chunks of 128 rows x 4 scales, row block by row block and then scale word by word, row 32 i + l's
// scales 4 j..4 j + 3 at byte 16 l + 4 i + j of its chunk. tcgen05.cp turns one into the other.
// The MMA reads a tensor-memory scale tile by its columns, as the GPU does: when the tile's shape
// is not the [rows, cols] the MMA reads, it finds there the scales ir/BlockScaled.h's layout puts
// at each column, lane and byte.
#include "interp/Elementwise.h"
#include "interp/Executor.h"
#include "ir/BlockScaled.h"
#include "ir/OpAttrs.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace ww::interp {

namespace attr = ir::attr;

namespace {

/// Byte of the cuBLAS block-scaled layout holding scale `c` of row `r` of [rows, cols] scales.
size_t packedScaleByte(int64_t r, int64_t c, int64_t cols) {
  return size_t(((r / 128) * (cols / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 +
                c % 4);
}

/// The [rows, cols] scales of a shared-memory tile `t` in the cuBLAS layout.
std::vector<uint8_t> packedScales(const Tensor& t, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[size_t(r * cols + c)] = t.bytes.at(packedScaleByte(r, c, cols));
  return out;
}

/// The [rows, cols] scales an MMA finds in the tensor-memory scale tile `t` ([R, C], held
/// row-major here): the scale the GPU reads at each one's column, lane and byte
/// (ir/BlockScaled.h), which is t's own scale when rows = R and cols = C.
std::vector<uint8_t> tmemScales(const Tensor& t, int64_t rows, int64_t cols) {
  const int64_t R = t.shape.at(0), C = t.shape.at(1);
  std::vector<uint8_t> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const auto [tr, tc] = ir::scaleTileElement(R, ir::scaleTileColumn(rows, r, c), r % 32, c % 4);
      out[size_t(r * cols + c)] = t.bytes.at(size_t(tr * C + tc));
    }
  return out;
}

double e8m0(uint8_t s) {
  return s == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, int(s) - 127);
}

/// The value of the e2m1 code `c` (4 bits: sign, two exponent bits with bias 1, one mantissa
/// bit): 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
double e2m1(uint8_t c) {
  static const double magnitude[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (c & 8 ? -1 : 1) * magnitude[c & 7];
}

/// The values of scale bytes: e8m0 exponents, or ue4m3 (decoded as e4m3, the scales' dtype).
std::vector<double> scaleValues(const std::vector<uint8_t>& bytes, bool ue4m3) {
  if (!ue4m3) {
    std::vector<double> out(bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i) out[i] = e8m0(bytes[i]);
    return out;
  }
  Tensor t(ir::DType::F8E4M3, false, {int64_t(bytes.size())});
  t.bytes.assign(bytes.begin(), bytes.end());
  return widenToDoubles(t);
}

/// The elements of an operand tile: fp8 values as they are; packed e2m1 bytes ([rows, cols]
/// holding two values each along K: along cols for A, rows for B) as [rows, 2 cols] or
/// [2 rows, cols] values.
std::vector<double> operandValues(const Tensor& t, bool fp4, bool kAlongCols) {
  if (!fp4) return widenToDoubles(t);
  const int64_t rows = t.shape.at(0), cols = t.shape.at(1);
  std::vector<double> out(size_t(2 * rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t byte = t.bytes.at(size_t(r * cols + c));
      const double lo = e2m1(byte & 0xF), hi = e2m1(byte >> 4);
      if (kAlongCols) {
        out[size_t(r * 2 * cols + 2 * c)] = lo;
        out[size_t(r * 2 * cols + 2 * c + 1)] = hi;
      } else {
        out[size_t(2 * r * cols + c)] = lo;
        out[size_t((2 * r + 1) * cols + c)] = hi;
      }
    }
  return out;
}

} // namespace

void Executor::execTmemCopy(const ir::Op& op) {
  if (pairedMma())
    fail(op.loc(), "tlx.tmem_copy in a kernel of CTA-pair MMAs (two_ctas=True) is not "
                   "supported by warpweave yet (" +
                       where() + ")");
  PendingMma m;
  m.op = &op;
  m.copy = true;
  m.a = buffer(op, 0);
  m.acc = buffer(op, 1);
  m.token = cta_.newToken();
  // Ordered after this agent's earlier tcgen05 ops (an MMA still reading the scales it
  // overwrites, an earlier copy into them), as the tensor core runs one thread's ops in order.
  mmaOrdered_ = true;
  checkedRead(op, m.a, 1, m.token);
  checkedWrite(op, m.acc, 1, m.token);
  mmaOrdered_ = false;
  cta_.mmaTokens.insert(m.token);
  myMmaTokens_.insert(m.token);
  uncommittedMmas_.push_back(std::move(m));
}

void Executor::runTmemCopy(const PendingMma& m) {
  // The scales the copy writes: all of dst, or the first scale words of TLX's [32 n, 16] form.
  const ir::Type src = ir::Type::tensor(m.a.elem, m.a.shape);
  const auto [rows, cols] = ir::tmemCopiedScales(src, ir::Type::tensor(m.acc.elem, m.acc.shape));
  const std::vector<uint8_t> copied = packedScales(*readBuffer(m.a, src), rows, cols);
  BufferView dst = m.acc;
  dst.shape = {rows, cols};
  Tensor t(m.acc.elem, false, {rows, cols});
  t.bytes.assign(copied.begin(), copied.end());
  writeBuffer(dst, t);
}

void Executor::runScaledMma(const PendingMma& m) {
  auto whole = [](const BufferView& v) { return readBuffer(v, ir::Type::tensor(v.elem, v.shape)); };
  if (!m.peer) {
    scaledMma(m, m.a, *whole(m.b), m.aScale, m.bScale, m.acc);
    return;
  }
  // A CTA pair's: B's columns are the leader's half then the peer's; each CTA's rows of A, with
  // its A scales and its copy of all N columns' B scales, give its rows of the accumulator.
  const TensorPtr left = whole(m.b), right = whole(m.peerB);
  const int64_t rows = left->shape.at(0), n = left->shape.at(1), n2 = right->shape.at(1);
  Tensor b(left->elem, false, {rows, n + n2});
  const size_t w = size_t(left->elemBytes());
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(b.bytes.data() + size_t(r * (n + n2)) * w, left->bytes.data() + size_t(r * n) * w,
                size_t(n) * w);
    std::memcpy(b.bytes.data() + size_t(r * (n + n2) + n) * w,
                right->bytes.data() + size_t(r * n2) * w, size_t(n2) * w);
  }
  scaledMma(m, m.a, b, m.aScale, m.bScale, m.acc);
  scaledMma(m, m.peerA, b, m.peerAScale, m.peerBScale, m.peerAcc);
}

void Executor::scaledMma(const PendingMma& m, const BufferView& av, const Tensor& b,
                         const BufferView& aScale, const BufferView& bScale,
                         const BufferView& accv) {
  auto whole = [](const BufferView& v) { return readBuffer(v, ir::Type::tensor(v.elem, v.shape)); };
  TensorPtr a = whole(av);
  const ir::Op& op = *m.op;
  // K / block scales a row, in tiles of that rounded up to four (a 32-bit column's worth).
  const int64_t M = a->shape.at(0), K = ir::scaledMmaK(op), N = b.shape.at(1),
                block = ir::scaleBlock(op), cols = ir::scaleColumns(op);
  const bool ue4m3 = ir::hasUe4m3Scales(op);
  // Scales in shared memory are [M or N rounded up to 128, cols] in the cuBLAS layout; in tensor
  // memory the MMA reads the first M (N) rows of the [R, cols] tile it finds in the columns.
  auto scales = [&](const BufferView& v, int64_t rows) {
    TensorPtr t = whole(v);
    if (!v.alloc->tmem) return packedScales(*t, (rows + 127) / 128 * 128, cols);
    return tmemScales(*t, ir::tmemScaleViewRows(ir::Type::tensor(v.elem, v.shape), cols), cols);
  };
  const std::vector<double> sa = scaleValues(scales(aScale, M), ue4m3);
  const std::vector<double> sb = scaleValues(scales(bScale, N), ue4m3);
  // Each element times its block's scale (exact in fp32: fp8 or fp4 values times powers of two;
  // times ue4m3 values, a product of a 4-bit and a 2-bit significand), then the product as the
  // tensor core accumulates it, in fp32.
  // Each operand decoded by its own format: mixed mxfp4 x mxfp8 has one e2m1 operand.
  const std::vector<double> av2 = operandValues(*a, ir::isFp4Operand(op, 0), true),
                            bv = operandValues(b, ir::isFp4Operand(op, 1), false);
  Tensor as(ir::DType::F32, false, {M, K}), bs(ir::DType::F32, false, {K, N});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      as.data<float>()[i * K + k] =
          float(av2[size_t(i * K + k)] * sa[size_t(i * cols + k / block)]);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      bs.data<float>()[k * N + n] = float(bv[size_t(k * N + n)] * sb[size_t(n * cols + k / block)]);
  TensorPtr acc = m.useAcc ? whole(accv) : nullptr;
  writeBuffer(accv,
              *computeDot(as, bs, acc.get(), "ieee", ir::Type::tensor(accv.elem, accv.shape)));
}

} // namespace ww::interp
