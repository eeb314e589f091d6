// Lowering of tlx.stoch_round: cvt.rs.satfinite (sm_100a), two of a thread's elements per
// instruction, in the order the layout gives the thread its registers.
//
// Each element is rounded with the low bits of its own rand_bits word (ir::numerics::
// encodeStochasticRound), so that the result does not depend on which elements a layout puts
// together and the interpreter computes the GPU's bits. The PTX ISA takes one 32-bit rbits per
// instruction: .f16x2 / .bf16x2 convert operand a into the upper half of the result with the
// upper half of rbits and b into the lower half with its lower half (fp16: the 13 low bits of
// each half), so one prmt puts the two elements' low halves there. .e4m3x4 / .e5m2x4 convert a,
// b, e, f into the bytes from the top, a and b with the upper half of rbits and e and f with the
// lower one (a and e with a bit-reversed copy, as others measured on sm_100a): with the pair in b
// and f and zeros in a and e (a zero stays a zero whatever the bits), each element again sees its
// own 16 bits, and the word unpacks into the two fp8 registers, upper bytes zero.
// A thread with an odd count pairs its last element with itself.
#include "codegen/Lowering.h"

#include <stdexcept>

namespace ww::codegen {

using ir::DType;

void FunctionLowering::lowerStochRound(const ir::Op& op) {
  if (options_.target != Target::SM100a)
    raiseError(op.loc(), std::string("tlx.stoch_round needs sm_100a (Blackwell's cvt.rs "
                                     "stochastic rounding); it is not available on ") +
                             targetName(options_.target) + "; compile for sm_100a");
  const ir::Type& rt = op.result()->type();
  const char* cvt = nullptr;
  switch (rt.elem) {
  case DType::F16:
    cvt = "cvt.rs.satfinite.f16x2.f32";
    break;
  case DType::BF16:
    cvt = "cvt.rs.satfinite.bf16x2.f32";
    break;
  case DType::F8E4M3:
    cvt = "cvt.rs.satfinite.e4m3x4.f32";
    break;
  case DType::F8E5M2:
    cvt = "cvt.rs.satfinite.e5m2x4.f32";
    break;
  default:
    throw std::logic_error("codegen: stoch_round to a type cvt.rs does not produce");
  }
  const bool fp8 = ir::isFp8(rt.elem);
  const Regs& xs = operand(op, 0);
  const Regs& rs = operand(op, 1);
  const int32_t n = rt.isTensor() ? layoutOf(op.result()).getInDimSize(layout::kRegister) : 1;
  auto x = [&](int32_t i) {
    return b_.materialize(xs.size() == 1 ? xs[0] : xs.at(size_t(i)), RegClass::F32);
  };
  auto r = [&](int32_t i) {
    return b_.materialize(rs.size() == 1 ? rs[0] : rs.at(size_t(i)), RegClass::B32);
  };
  Regs out(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; i += 2) {
    const int32_t j = std::min(i + 1, n - 1); // the pair's second element (the first again)
    // Element i goes to the lower half of the result (operand b, or f for fp8), so that the
    // word holds the pair in memory order; its random bits go to rbits' lower half.
    std::string rbits = b_.pure("prmt.b32", RegClass::B32, {r(i), r(j), "0x5410"});
    std::string word = b_.newReg(RegClass::B32);
    if (fp8) {
      std::string zero = b_.materialize(immF32(0.0f), RegClass::F32);
      b_.inst(cvt, {word, "{" + zero + ", " + x(j) + ", " + zero + ", " + x(i) + "}", rbits});
    } else {
      b_.inst(cvt, {word, x(j), x(i), rbits});
    }
    std::string lo = b_.newReg(RegClass::B16), hi = b_.newReg(RegClass::B16);
    b_.inst("mov.b32", {"{" + lo + ", " + hi + "}", word});
    // A store of the 16-bit pair packs it again: it reads the word itself.
    if (!fp8 && j == i + 1)
      b_.remember("mov.b32", RegClass::B32, {"{" + lo + ", " + hi + "}"}, word);
    out[size_t(i)] = lo;
    if (j == i + 1) out[size_t(j)] = hi;
  }
  bind(op.result(), std::move(out));
}

} // namespace ww::codegen
