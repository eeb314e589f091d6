// Shared facts about Hopper's wgmma and the mma.sync fragments, used by the tl.dot lowering
// (Dot.cpp) and the tlx.async_dot lowering (TlxAsyncDot.cpp).
#pragma once

#include "ir/Type.h"
#include "layout/LinearLayout.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ww::codegen {

class PtxBuilder;

/// Accumulator registers of each m64nN wgmma tile (keyed by the tile's (row, col) origin), in
/// the PTX fragment order: d[i] at row groupID + 8 * ((i >> 1) & 1), column
/// 2 * tig + (i & 1) + 8 * (i >> 2).
using WgmmaTiles = std::map<std::pair<int64_t, int64_t>, std::vector<int32_t>>;
WgmmaTiles wgmmaTiles(const layout::LinearLayout& accL, int32_t instrN);

/// The `{r0, r1, ...}` vector operand of an MMA instruction.
std::string registerList(const std::vector<std::string>& regs);

/// The `{r0, r1, ...}` accumulator operand of one wgmma tile: `live[regs[i]]` in fragment order.
std::string wgmmaAccumulatorList(const std::vector<int32_t>& regs,
                                 const std::vector<std::string>& live);

/// Registers a thread ptxas needs to compile one wgmma: its accumulator's and A fragment's
/// registers and 26 more (ptxas of CUDA 13 asks exactly that for every m64nN shape, f16, bf16
/// and tf32, A in registers or shared memory). ptxas holds each instruction to .maxnreg, even
/// where setmaxnreg raised the task's registers above it.
constexpr int wgmmaRegisterNeed(int accRegs, int aRegs) {
  return accRegs + aRegs + 26;
}

/// Checks that the lane bits of `l` follow an mma.sync fragment: lanes 0-1 (threadID_in_group)
/// step the column-like dim `tigDim` by `tigStep`, lanes 2-4 (groupID) step `groupDim` by 1.
void requireFragmentLanes(const layout::LinearLayout& l, int tigDim, int32_t tigStep, int groupDim,
                          const char* what);

/// The tensor-core (wgmma / mma.sync) PTX name of an operand or accumulator type: f16, bf16,
/// tf32 (an fp32 operand), f32 (an fp32 accumulator), e4m3, e5m2, s8, u8, s32; empty for the
/// others.
std::string mmaTypeName(ir::DType t, bool accumulator = false);

/// The opcode of one m64n`instrN` wgmma of `a` by `b` into `acc`: k16 for 16-bit operands, k32
/// for 8-bit ones, k8 for tf32.
std::string wgmmaOpcode(int32_t instrN, ir::DType a, ir::DType b, ir::DType acc);

/// A wgmma's immediates after scale-d: imm-scale-a and imm-scale-b (1: no negation) for floating
/// operands (integer wgmma has none), then for 16-bit operands the transpose flags, imm-trans-a
/// only when A comes from shared memory (1 reads an operand MN-major).
std::vector<std::string> wgmmaImmediates(ir::DType t, bool aInRegisters, bool aTrans, bool bTrans);

/// One 32-bit A / B fragment word of mma.sync or wgmma from `perWord` elements of 8 or 16 bits
/// (each held in a 16-bit register, an 8-bit one in its low byte): elems[first] in the lowest
/// bits, as the PTX ISA fragment tables order them.
std::string packFragmentWord(PtxBuilder& b, const std::vector<std::string>& elems, size_t first,
                             int perWord);

/// The registers of an fp16 accumulator as the f16 forms of wgmma and mma.sync read them: each
/// .b32 word packs fragment elements 2i (low half) and 2i + 1 (high half), the neighbours along
/// N. `elems` (b16 registers or fp16 immediates) in fragment order, an even count; each word a
/// register of its own (the MMA may write it in place).
std::vector<std::string> packHalfAccumulator(PtxBuilder& b, const std::vector<std::string>& elems);

/// The fp16 elements (fresh b16 registers, in fragment order) of packed accumulator words.
std::vector<std::string> unpackHalfAccumulator(PtxBuilder& b,
                                               const std::vector<std::string>& words);

/// Whether the registers of accumulator layout `accL` pair up as packed fp16 accumulator words
/// do: register bit 0 steps N by one (the two elements of a word), so registers 2w and 2w + 1
/// are the low and high halves of word w and the register-ordered elements pack in order
/// (packHalfAccumulator). True of the wgmma and mma.sync accumulator layouts.
bool pairsHalfAccumulatorRegisters(const layout::LinearLayout& accL);

/// Whether wgmma can read operands of type `t` from shared memory MN-major (its transpose
/// immediates): 16-bit types only; tf32 and the 8-bit types must be K-major.
bool wgmmaCanTranspose(ir::DType t);

/// The leading / stride byte-offset and swizzle fields of the descriptor of an operand tile in
/// the NVMMA layout with rows of `swizzleBytes` (see nvmmaSharedLayout): K-major (rows along M
/// or N, K contiguous) or MN-major (`kRows` rows along K, M or N contiguous, column blocks of
/// the swizzle width `kRows * swizzleBytes` bytes apart). Both step 8 rows by 8 * swizzleBytes.
uint64_t wgmmaLayoutBits(bool kMajor, int swizzleBytes, int64_t kRows);

/// A wgmma matrix descriptor's swizzle-mode field (bits 62-63) for a swizzle of `bytes`
/// (128 or 64; anything else gets the 32-byte mode).
uint64_t swizzleModeBits(int bytes);

/// The 64-bit wgmma matrix descriptor of the shared-memory (shared::cta window) byte address
/// `address`: its start-address field (address >> 4 in bits 0-13) or'ed with `fixedBits`
/// (leading/stride byte offsets, swizzle mode).
std::string wgmmaDescriptor(PtxBuilder& b, const std::string& address, uint64_t fixedBits);

/// Whether `wgmmaDescriptorStep` may reach `byteOffset` from a base descriptor: a non-negative
/// multiple of 16 bytes.
bool isWgmmaDescriptorStep(int64_t byteOffset);

/// The descriptor of the matrix `byteOffset` bytes past the one `base` describes: one 64-bit add
/// of byteOffset >> 4 to the start-address field. No carry leaves the 14-bit field as long as
/// the stepped address is a shared-memory address (below 256 KiB, more than a CTA can have),
/// so the other fields are unchanged.
std::string wgmmaDescriptorStep(PtxBuilder& b, const std::string& base, int64_t byteOffset);

} // namespace ww::codegen
