// Lowering of tl.inline_asm_elementwise: each thread runs the user's PTX once per `pack` of its
// elements, with $N replaced by registers (outputs first, then inputs, as the constraints list
// them). Elements narrower than 32 bits travel packed (ir/InlineAsm.h); a thread whose element
// count is not a multiple of `pack` repeats its last element in the final instance.
#include "ir/InlineAsm.h"
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"

#include <cctype>

namespace ww::codegen {

namespace {

RegClass classOfLetter(char letter) {
  switch (letter) {
  case 'b':
    return RegClass::Pred;
  case 'c':
  case 'h':
    return RegClass::B16;
  case 'f':
    return RegClass::F32;
  case 'd':
    return RegClass::F64;
  case 'l':
    return RegClass::B64;
  default:
    return RegClass::B32;
  }
}

int bitsOfClass(RegClass c) {
  switch (c) {
  case RegClass::Pred:
    return 1;
  case RegClass::B16:
    return 16;
  case RegClass::B64:
  case RegClass::F64:
    return 64;
  default:
    return 32;
  }
}

/// `reg` (class `from`) as a register of class `to` of the same width.
std::string moveTo(PtxBuilder& b, const std::string& reg, RegClass from, RegClass to) {
  std::string r = b.materialize(reg, from);
  if (from == to) return r;
  // A narrow element in a 32-bit register (constraint r): zero-extended, or truncated back.
  if (from == RegClass::B16 && to == RegClass::B32) return b.pure("cvt.u32.u16", to, {r});
  if (from == RegClass::B32 && to == RegClass::B16) return b.pure("cvt.u16.u32", to, {r});
  // A same-width mov is a bit copy both ways: remembering the inverse lets a result that goes
  // straight into the next asm (fp32 through `r` operands, as TLX's paired helpers chain) reuse
  // the asm's own register instead of a round trip of copies.
  const std::string mov = "mov.b" + std::to_string(bitsOfClass(to));
  std::string out = b.pure(mov, to, {r});
  b.remember(mov, from, {out}, r);
  return out;
}

/// $N -> operands[N] (longest number first: $12 is operand 12, not $1 then '2').
std::string substitute(const std::string& text, const std::vector<std::string>& operands,
                       const ir::Op& op) {
  std::string out;
  size_t done = 0;
  for (const ir::AsmOperandRef& ref : ir::asmOperandRefs(text)) {
    if (ref.operand >= operands.size())
      raiseError(op.loc(), "tl.inline_asm_elementwise: the asm names $" +
                               std::to_string(ref.operand) + " but has " +
                               std::to_string(operands.size()) + " operands ($0..$" +
                               std::to_string(operands.size() - 1) + ")");
    out += text.substr(done, ref.at - done) + operands[ref.operand];
    done = ref.at + ref.length;
  }
  return out + text.substr(done);
}

} // namespace

void FunctionLowering::lowerInlineAsm(const ir::Op& op) {
  const int pack = static_cast<int>(ir::attr::InlineAsm::pack(op));
  std::vector<ir::AsmConstraint> constraints;
  if (std::string bad = ir::parseAsmConstraints(ir::attr::InlineAsm::constraints(op), constraints);
      !bad.empty())
    raiseError(op.loc(), "tl.inline_asm_elementwise: " + bad);
  const ir::Value* first = op.result(0);
  const int32_t n = first->type().isTensor() ? layoutOf(first).getInDimSize(layout::kRegister) : 1;
  std::vector<Regs> results(op.numResults(), Regs(size_t(n)));
  const std::string text = ir::attr::InlineAsm::asmText(op);
  for (int32_t base = 0; base < n; base += pack) {
    // The element of this instance's slot k (the last real one past the thread's count).
    auto elem = [&](int k) { return std::min(base + k, n - 1); };
    std::vector<std::string> operands;
    size_t next = 0; // the constraint of the next operand
    // Outputs: fresh registers of their constraints' classes.
    struct Out {
      unsigned result;
      int firstSlot, count;
      std::string reg;
    };
    std::vector<Out> outs;
    for (unsigned r = 0; r < op.numResults(); ++r) {
      const ir::Type& t = op.result(r)->type();
      const int per = ir::asmElementsPerOperand(t.elem, t.pointer, pack);
      for (int k = 0; k < pack; k += per) {
        std::string reg = b_.newReg(classOfLetter(constraints.at(next++).letter));
        outs.push_back({r, k, per, reg});
        operands.push_back(reg);
      }
    }
    // Inputs: each element moved into its constraint's class, narrow ones packed.
    for (unsigned a = 0; a < op.numOperands(); ++a) {
      const ir::Type& t = op.operand(a)->type();
      const Regs& regs = operand(op, a);
      const RegClass elemClass = regClassOf(t.elem, t.pointer);
      const int per = ir::asmElementsPerOperand(t.elem, t.pointer, pack);
      const int bits = t.pointer ? 64 : ir::bitWidth(t.elem);
      for (int k = 0; k < pack; k += per) {
        const RegClass want = classOfLetter(constraints.at(next++).letter);
        auto at = [&](int slot) {
          return regs.size() == 1 ? regs[0] : regs.at(size_t(elem(slot)));
        };
        if (per == 1) {
          operands.push_back(moveTo(b_, at(k), elemClass, want));
          continue;
        }
        std::string word;
        if (bits == 16) { // two 16-bit elements: one mov of the pair
          std::string pair = "{";
          pair += b_.materialize(at(k), RegClass::B16);
          pair += ", ";
          pair += b_.materialize(at(k + 1), RegClass::B16);
          pair += "}";
          word = b_.pure("mov.b32", RegClass::B32, {pair});
        } else { // 8-bit elements (held in 16-bit registers): inserted a byte at a time
          for (int j = 0; j < per; ++j) {
            std::string wide =
                b_.pure("cvt.u32.u16", RegClass::B32, {b_.materialize(at(k + j), RegClass::B16)});
            word = j == 0 ? b_.pure("and.b32", RegClass::B32, {wide, "255"})
                          : b_.pure("bfi.b32", RegClass::B32,
                                    {wide, word, std::to_string(8 * j), "8"});
          }
        }
        operands.push_back(bits * per == 16 ? b_.pure("cvt.u16.u32", RegClass::B16, {word})
                                            : moveTo(b_, word, RegClass::B32, want));
      }
    }
    b_.raw(kInlineAsmBegin);
    b_.raw("{");
    std::string body = substitute(text, operands, op);
    size_t start = 0;
    while (start <= body.size()) {
      size_t end = body.find('\n', start);
      if (end == std::string::npos) end = body.size();
      std::string line = body.substr(start, end - start);
      if (line.find_first_not_of(" \t\r") != std::string::npos) b_.raw(line);
      start = end + 1;
    }
    b_.raw("}");
    b_.raw(kInlineAsmEnd);
    // Results: unpacked into the elements' registers.
    for (const Out& o : outs) {
      const ir::Type& t = op.result(o.result)->type();
      const RegClass elemClass = regClassOf(t.elem, t.pointer);
      const int bits = t.pointer ? 64 : ir::bitWidth(t.elem);
      const RegClass got = classOfLetter(constraints[&o - outs.data()].letter);
      Regs& dst = results[o.result];
      auto put = [&](int slot, const std::string& reg) {
        if (base + slot < n) dst[size_t(base + slot)] = reg;
      };
      if (o.count == 1) {
        put(o.firstSlot, moveTo(b_, o.reg, got, elemClass));
        continue;
      }
      std::string word = o.reg;
      if (got == RegClass::B16)
        word = b_.pure("cvt.u32.u16", RegClass::B32, {word});
      else if (got != RegClass::B32)
        word = moveTo(b_, word, got, RegClass::B32);
      for (int j = 0; j < o.count; ++j) {
        std::string piece = b_.pure("bfe.u32", RegClass::B32,
                                    {word, std::to_string(bits * j), std::to_string(bits)});
        put(o.firstSlot + j, b_.pure("cvt.u16.u32", RegClass::B16, {piece}));
      }
    }
  }
  for (unsigned r = 0; r < op.numResults(); ++r) bind(op.result(r), std::move(results[r]));
}

} // namespace ww::codegen
