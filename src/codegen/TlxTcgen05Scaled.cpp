// Blackwell (sm_100a) block-scaled MMA: the scale factors of tlx.async_dot_scaled in tensor memory,
// tlx.tmem_copy (tcgen05.cp of block scales from shared memory), the kind and the instruction
// descriptor of tcgen05.mma ... .block_scale (.kind::mxf8f6f4 for mxfp8, .kind::mxf4 for mxfp4,
// .kind::mxf4nvf4 for nvfp4; ir/BlockScaled.h). The MMA itself is issued by lowerTcgen05
// (TlxTmem.cpp), which asks here for its scale operands.
//
// Scales in tensor memory (PTX ISA, tcgen05 "Block Scaling"): one scale byte per row (A) or
// column (B) and block of K (32 elements; nvfp4's 16); four of them share a 32-bit column, the
// instruction descriptor's scale-factor IDs picking the sub-column an instruction starts at
// (scale_vec::1X: a byte, any of 0-3, one scale per K = 32; 2X: a half word, 0 or 2, two scales
// per K = 64; 4X: the whole word, 0, four scales per K = 64); a scale word of 128 rows takes
// four columns, rows 32 c + l in lane l of column c, duplicated into all four 32-lane quarters
// (of 64 rows, for B of N <= 64, two). A [rows, cols] uint8 scale tile therefore takes rows *
// cols / 128 columns, word w of row r at column (w * rows + r) / 32 (ir/BlockScaled.h): for
// rows a multiple of 128, the 128-row block i of word w at column 4 (w * rows / 128 + i).
//
// That is what one tcgen05.cp.32x128b.warpx4 makes of a 512-byte chunk of the cuBLAS
// block-scaled layout in shared memory (rows 32 c + l, scales 4 j..4 j + 3 at byte 16 l + 4 c +
// j): its 32 rows of 16 bytes go to lanes 0-31 of four columns and, .warpx4, to the other three
// lane quarters too. The chunks lie in shared memory row block by row block, word by word
// (TMA of a [1, rows / 128, cols / 4, 2, 256] box).
#include "codegen/Lowering.h"
#include "codegen/Wgmma.h"
#include "ir/BlockScaled.h"
#include "ir/OpAttrs.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;

namespace {

/// The shared-memory descriptor of one 512-byte chunk of scales (PTX ISA, tcgen05 shared-memory
/// descriptor): no swizzle, 8-row core matrices of 16-byte rows, 128 bytes apart (stride byte
/// offset), leading byte offset 16 (one core matrix wide, so unused), version bits 46-48 = 1.
constexpr uint64_t kScaleChunkDescriptorBits =
    (uint64_t(1) << 46) | (uint64_t(128 >> 4) << 32) | (uint64_t(16 >> 4) << 16);

/// The instruction descriptor's A / B type code of an OCP MX format: .kind::mxf8f6f4's E4M3 = 0,
/// E5M2 = 1, E2M1 = 5 (its E2M3 = 3 and E3M2 = 4 are not built); .kind::mxf4 / mxf4nvf4's
/// E2M1 = 1 (a 3-bit atype, a 2-bit btype). `mxf4`: the MMA is of that kind (both e2m1).
uint32_t mxFormatCode(const std::string& format, bool mxf4) {
  if (format == "e4m3") return 0;
  if (format == "e5m2") return 1;
  if (format == "e2m1") return mxf4 ? 1 : 5;
  throw std::logic_error("codegen: block-scaled MMA of format '" + format + "'");
}

} // namespace

std::string tcgen05ScaledKind(const ir::Op& op) {
  if (!ir::isFp4ScaledMma(op)) return "mxf8f6f4.block_scale.scale_vec::1X";
  return ir::hasUe4m3Scales(op) ? "mxf4nvf4.block_scale.scale_vec::4X"
                                : "mxf4.block_scale.scale_vec::2X";
}

int64_t scalesPerScaledMma(const ir::Op& op) {
  // K per instruction (32 for 8-bit operands, 64 for fp4) over the scale block (32 or 16).
  return (ir::isFp4ScaledMma(op) ? 64 : 32) / ir::scaleBlock(op);
}

uint32_t tcgen05ScaledInstrDescriptor(const std::string& aFormat, const std::string& bFormat,
                                      bool ue4m3Scales, bool aMnMajor, bool bMnMajor, int64_t M,
                                      int64_t N, int aScaleId, int bScaleId) {
  // PTX ISA, instruction descriptor for .kind::mxf8f6f4 (and for .kind::mxf4 / mxf4nvf4, which
  // differ where noted): bits 0-1 reserved, 2 sparsity, 3 reserved, 4-5 B scale factor ID (mxf4:
  // 0 or 2; 4X: 0), 6 reserved, 7-9 atype, 10-12 btype (mxf4: 10-11, 12 reserved), 13 / 14
  // negate A / B, 15 / 16 transpose A / B (mxf4: 0 only; an e2m1 operand of mxf8f6f4 is K-major
  // here), 17-22 N >> 3, 23 scale type (UE8M0 =
  // 1, UE4M3 = 0), 24-26 reserved, 27-28 M >> 7, 29-30 A scale factor ID, 31 reserved (mxf4: K
  // of the dense MMA, 0 for K = 64). D is always f32.
  uint32_t desc = 0;
  desc |= uint32_t(bScaleId & 3) << 4;
  const bool mxf4 = aFormat == "e2m1" && bFormat == "e2m1";
  desc |= mxFormatCode(aFormat, mxf4) << 7;
  desc |= mxFormatCode(bFormat, mxf4) << 10;
  desc |= uint32_t(aMnMajor) << 15;
  desc |= uint32_t(bMnMajor) << 16;
  desc |= uint32_t(N >> 3) << 17;
  desc |= uint32_t(ue4m3Scales ? 0 : 1) << 23;
  desc |= uint32_t(M >> 7) << 27;
  desc |= uint32_t(aScaleId & 3) << 29;
  return desc;
}

void FunctionLowering::copyScalesToTmem(const std::string& smem, const std::string& tmem,
                                        int64_t rows, int64_t cols) {
  const int64_t rowBlocks = rows / 128, words = cols / 4;
  std::string base = wgmmaDescriptor(b_, smem, kScaleChunkDescriptorBits);
  for (int64_t i = 0; i < rowBlocks; ++i)
    for (int64_t w = 0; w < words; ++w) {
      const int64_t column = 4 * (w * rowBlocks + i);
      std::string at = column ? b_.pure("add.u32", RegClass::B32, {tmem, immInt(column)}) : tmem;
      // A CTA pair's copy (cta_group::2, issued by the leader) writes both CTAs' tensor memory,
      // each from its own shared memory at the same offset, as the pair's MMA reads operands.
      b_.inst(std::string("tcgen05.cp.cta_group::") + (pairedMma_ ? "2" : "1") + ".32x128b.warpx4",
              {bracketed(at), wgmmaDescriptorStep(b_, base, (i * words + w) * 512)});
    }
}

/// The user error for a shared-memory scale tile the tensor core cannot read as laid out.
static void requirePlainScaleTile(const ir::Op& op, const layout::SharedAllocation& alloc,
                                  const ir::Type& t) {
  if (!alloc.userLayout.empty() &&
      (!alloc.padding.empty() || alloc.swizzleBytes ||
       alloc.layout != layout::swizzledSharedLayout(t.shape, 1, 1, 1, [&] {
         std::vector<int32_t> o;
         for (int d = static_cast<int>(t.shape.size()) - 1; d >= 0; --d) o.push_back(d);
         return o;
       }())))
    raiseError(op.loc(),
               std::string("tlx.") +
                   (op.code() == ir::OpCode::TmemCopy ? "tmem_copy" : "async_dot_scaled") +
                   " reads the block scales " + t.str() +
                   " unswizzled and unpadded, but this buffer is allocated with layout=" +
                   alloc.userLayout + "; leave layout= out");
  if (alloc.swizzleBytes)
    raiseError(op.loc(),
               std::string("tlx.") +
                   (op.code() == ir::OpCode::TmemCopy ? "tmem_copy" : "async_dot_scaled") +
                   " reads the block scales " + t.str() +
                   " in the cuBLAS layout, unswizzled, but this buffer is "
                   "allocated with a " +
                   std::to_string(alloc.swizzleBytes) +
                   "-byte swizzle (2-D tiles with rows of 32 bytes or more are); use "
                   "the 5-D [1, rows / 128, cols / 4, 2, 256] form");
}

std::pair<FunctionLowering::ScaleOperand, FunctionLowering::ScaleOperand>
FunctionLowering::scaleOperands(const ir::Op& op) {
  const int64_t N = op.operand(2)->type().shape[1];
  const int64_t cols = ir::scaleColumns(op);
  auto own = scaleColumns_.find(&op);
  ScaleOperand out[2];
  for (unsigned s = 0; s < 2; ++s) {
    const ir::Value* v = op.operand(3 + s);
    std::string addr = b_.materialize(regsOf(v).at(0), RegClass::B32);
    if (isTmemValue(v)) {
      // The MMA reads the tile's columns as an [R, cols] tile (the specializer checked R).
      out[s] = {addr, ir::tmemScaleViewRows(v->type(), cols) / 32};
      continue;
    }
    requirePlainScaleTile(op, allocationOf(op, 3 + s), v->type());
    // Scales in shared memory: copied into this MMA's own columns by the issuing thread first;
    // the tensor core runs the copy and then the MMA in issue order (tcgen05.cp -> tcgen05.mma).
    const int64_t column = s ? own->second.second : own->second.first;
    const int64_t rows = s ? (N + 127) / 128 * 128 : 128;
    out[s] = {b_.pure("add.u32", RegClass::B32, {tmemBase_, immInt(column)}), rows / 32};
    copyScalesToTmem(sharedAddress(addr), out[s].address, rows, cols);
  }
  return {out[0], out[1]};
}

std::string packBytes(PtxBuilder& b, const std::string (&x)[4]) {
  std::string w[4];
  for (int i = 0; i < 4; ++i) w[i] = b.pure("cvt.u32.u16", RegClass::B32, {x[i]});
  // prmt picks bytes of {b, a} (a: 0-3, b: 4-7) by the selector's nibbles.
  std::string lo = b.pure("prmt.b32", RegClass::B32, {w[0], w[1], "64"}); // 0x0040
  std::string hi = b.pure("prmt.b32", RegClass::B32, {w[2], w[3], "64"}); // 0x0040
  return b.pure("prmt.b32", RegClass::B32, {lo, hi, "21520"});            // 0x5410
}

void unpackByte(PtxBuilder& b, const std::string& word, int i, const std::string& out) {
  std::string byte = b.pure("bfe.u32", RegClass::B32, {word, immInt(8 * i), "8"});
  b.inst("cvt.u16.u32", {out, byte});
}

void FunctionLowering::lowerTmemScalesLoadStore(const ir::Op& op) {
  // A [rows, cols] scale tile keeps scale c of row r in byte c % 4 of column (c / 4 * rows +
  // r) / 32, lane r % 32 of every lane quarter (ir/BlockScaled.h), and a warp reaches only its
  // own quarter (warp % 4). The value goes through a scratch region of shared memory holding the
  // tile row-major, where a column's 32-bit word of lane l is 4 consecutive bytes of one row: a
  // store writes the registers there, then every thread reads the words of its lane's columns
  // and stores them to its quarter, so that every quarter holds the duplicate the MMA reads; a
  // load reads its lane's columns, warp q (of the first warp group) writing the words of columns
  // q, q + 4, ... to the region, from which each thread reads its registers.
  const bool load = op.code() == ir::OpCode::LocalLoad;
  const ir::Type& bt = op.operand(0)->type();
  const int64_t rows = bt.shape[0], cols = bt.shape[1], columns = ir::tmemColumns(bt);
  if (warps() % 4 != 0 || taskFirstWarp_ % 4 != 0 || columns > 512)
    raiseError(op.loc(), std::string("'") + op.name() + "' of the tensor-memory block scales " +
                             bt.str() +
                             ": the sm_100a backend moves block scales with whole warp groups "
                             "(num_warps a multiple of 4; this code has " +
                             std::to_string(warps()) + ")");
  const ir::Value* value = load ? op.result() : op.operand(1);
  const layout::LinearLayout& l = load ? layoutOf(value) : operandLayoutOf(op, 1);
  auto rowMajor = [cols](const std::vector<int32_t>& c) { return int64_t(c[0]) * cols + c[1]; };
  std::string warp = b_.pure("shr.u32", RegClass::B32, {tid(), "5"});
  std::string quad = b_.pure("and.b32", RegClass::B32, {warp, "3"});
  std::string lane = b_.pure("and.b32", RegClass::B32, {tid(), "31"});
  std::string addr = b_.pure("add.u32", RegClass::B32,
                             {b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32),
                              b_.pure("shl.b32", RegClass::B32, {quad, "21"})}); // 32 lanes << 16
  const int64_t slot = scratch(rows * cols);
  // Byte offset in the region of column j's word of this thread's lane: its row's scales
  // ir::scaleTileElement(rows, j, lane, 0) onwards, lane * cols plus a constant.
  std::string laneAt = b_.pure("mad.lo.s32", RegClass::B32, {lane, immInt(cols), immInt(slot)});
  auto wordAt = [&](int64_t j) {
    const auto [row, c] = ir::scaleTileElement(rows, j, 0, 0);
    const int64_t at = row * cols + c;
    return bracketed(
        sharedAddress(at ? b_.pure("add.u32", RegClass::B32, {laneAt, immInt(at)}) : laneAt));
  };
  // tcgen05.ld / st .32x32b messages of up to 32 columns.
  auto messages = [&](const std::function<void(int64_t, int64_t)>& emit) {
    for (int64_t j = 0; j < columns;) {
      const int64_t n = std::min<int64_t>(32, int64_t(std::bit_floor(uint64_t(columns - j))));
      emit(j, n);
      j += n;
    }
  };
  auto at = [&](int64_t j) {
    return bracketed(j ? b_.pure("add.u32", RegClass::B32, {addr, immInt(j)}) : addr);
  };
  if (load) {
    std::vector<std::string> words(static_cast<size_t>(columns));
    for (auto& w : words) w = b_.newReg(RegClass::B32);
    b_.inst("tcgen05.fence::after_thread_sync", {});
    messages([&](int64_t j, int64_t n) {
      std::string list = "{";
      for (int64_t i = 0; i < n; ++i) list += (i ? ", " : "") + words[size_t(j + i)];
      b_.inst("tcgen05.ld.sync.aligned.32x32b.x" + std::to_string(n) + ".b32", {list + "}", at(j)});
    });
    b_.inst("tcgen05.wait::ld.sync.aligned", {});
    b_.inst("tcgen05.fence::before_thread_sync", {});
    barrier(); // the agent's earlier accesses to the scratch region are done
    for (int64_t q = 0; q < std::min<int64_t>(4, columns); ++q) {
      std::string mine = b_.pure("setp.eq.u32", RegClass::Pred, {warp, immInt(q)});
      for (int64_t j = q; j < columns; j += 4)
        b_.inst("st.shared.b32", {wordAt(j), words[size_t(j)]}, mine);
    }
    barrier();
    return bind(op.result(), loadShared(l, rowMajor, slot, 0, bt.elem));
  }
  barrier(); // the agent's earlier accesses to the scales and the scratch region are done
  storeShared(operand(op, 1), l, rowMajor, slot, bt.elem);
  barrier();
  std::vector<std::string> words(static_cast<size_t>(columns));
  for (int64_t j = 0; j < columns; ++j) {
    words[size_t(j)] = b_.newReg(RegClass::B32);
    b_.inst("ld.shared.b32", {words[size_t(j)], wordAt(j)});
  }
  b_.inst("tcgen05.fence::after_thread_sync", {});
  messages([&](int64_t j, int64_t n) {
    std::string list = "{";
    for (int64_t i = 0; i < n; ++i) list += (i ? ", " : "") + words[size_t(j + i)];
    b_.inst("tcgen05.st.sync.aligned.32x32b.x" + std::to_string(n) + ".b32", {at(j), list + "}"});
  });
  b_.inst("tcgen05.wait::st.sync.aligned", {});
  b_.inst("tcgen05.fence::before_thread_sync", {});
  // The scratch region is read and the stores visible to the MMA's thread after the agent meets.
  barrier();
  b_.inst("tcgen05.fence::after_thread_sync", {});
}

void FunctionLowering::lowerTmemScaleCopy(const ir::Op& op) {
  if (options_.target != Target::SM100a)
    raiseError(op.loc(), "tlx.tmem_copy lowers to tcgen05.cp, which only sm_100a (Blackwell) "
                         "has; compile for sm_100a");
  if (pairedMma_)
    raiseError(op.loc(), "tlx.tmem_copy in a kernel of CTA-pair MMAs (two_ctas=True, "
                         "tcgen05.cp.cta_group::2) is not supported by the sm_100a backend yet");
  const ir::Type& src = op.operand(0)->type();
  const ir::Type& dst = op.operand(1)->type();
  requirePlainScaleTile(op, allocationOf(op, 0), src);
  std::string elected = electedThread();
  std::string skip = b_.newLabel("tmem_copy_skip");
  b_.inst("bra", {skip}, elected, true);
  b_.pushScope();
  b_.inst("tcgen05.fence::after_thread_sync", {});
  const auto [rows, cols] = ir::tmemCopiedScales(src, dst);
  copyScalesToTmem(sharedAddress(b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32)),
                   b_.materialize(regsOf(op.operand(1)).at(0), RegClass::B32), rows, cols);
  b_.popScope();
  b_.label(skip);
}

} // namespace ww::codegen
