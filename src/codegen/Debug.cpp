// Lowering of tl.device_print (vprintf, one line per element as the interpreter prints it) and
// of tl.device_assert / run-time assert (__assertfail: message, FILE:LINE, block and thread).
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"

namespace ww::codegen {

using ir::DType;
using ir::OpCode;

namespace {

/// One element of `elem` (or a pointer) widened for vprintf, with its conversion.
struct Printable {
  PtxBuilder::PrintArg arg;
  std::string conversion; // "%d", "%g", "0x%llx", ...
};

Printable printable(ScalarContext& cx, const std::string& x, const ir::Type& t, bool hex) {
  PtxBuilder& b = cx.b;
  if (t.pointer) return {{x, RegClass::B64}, hex ? "0x%llx" : "%llu"};
  const DType elem = t.elem;
  const int bytes = ir::byteWidth(elem);
  if (hex) {
    // The element's bits, zero-extended.
    if (bytes == 8) {
      std::string bits = elem == DType::F64 ? b.pure("mov.b64", RegClass::B64, {x}) : x;
      return {{bits, RegClass::B64}, "0x%llx"};
    }
    std::string bits;
    if (elem == DType::I1)
      bits = b.pure("selp.u32", RegClass::B32, {"1", "0", x});
    else if (elem == DType::F32)
      bits = b.pure("mov.b32", RegClass::B32, {x});
    else if (bytes == 4)
      bits = x;
    else if (isImmediate(x))
      bits = x;
    else {
      // 8- and 16-bit values sit in b16 registers; 8-bit ones in its low byte.
      bits = b.pure("cvt.u32.u16", RegClass::B32, {x});
      if (bytes == 1) bits = b.pure("and.b32", RegClass::B32, {bits, "255"});
    }
    return {{bits, RegClass::B32}, "0x%x"};
  }
  if (ir::isFloat(elem)) return {{emitCast(cx, x, elem, DType::F64), RegClass::F64}, "%g"};
  if (elem == DType::I64) return {{x, RegClass::B64}, "%lld"};
  if (elem == DType::U64) return {{x, RegClass::B64}, "%llu"};
  const bool isSigned = ir::isSigned(elem) || elem == DType::I1;
  std::string wide = elem == DType::I32 || elem == DType::U32
                         ? x
                         : emitCast(cx, x, elem, isSigned ? DType::I32 : DType::U32);
  return {{wide, RegClass::B32}, isSigned ? "%d" : "%u"};
}

} // namespace

void FunctionLowering::assertFailure(SourceLoc loc, const std::string& message) {
  b_.declare(".extern .func __assertfail (.param .b64 message, .param .b64 file, .param .b32 "
             "line, .param .b64 function, .param .b64 charSize);");
  std::string file = "<unknown>";
  if (loc.valid() && sources_ && loc.file < sources_->numFiles()) file = sources_->path(loc.file);
  b_.pushScope();
  std::string msg = b_.stringConstant(message);
  std::string path = b_.stringConstant(file);
  std::string function = b_.stringConstant(fn_.name);
  b_.raw("{");
  b_.raw(".param .b64 assert_message;");
  b_.inst("st.param.b64", {"[assert_message]", msg});
  b_.raw(".param .b64 assert_file;");
  b_.inst("st.param.b64", {"[assert_file]", path});
  b_.raw(".param .b32 assert_line;");
  b_.inst("st.param.b32", {"[assert_line]", immInt(loc.line)});
  b_.raw(".param .b64 assert_function;");
  b_.inst("st.param.b64", {"[assert_function]", function});
  b_.raw(".param .b64 assert_char_size;");
  b_.inst("st.param.b64", {"[assert_char_size]", "1"});
  b_.inst("call.uni", {"__assertfail", "(assert_message, assert_file, assert_line, "
                                       "assert_function, assert_char_size)"});
  b_.raw("}");
  b_.inst("trap", {});
  b_.popScope();
}

void FunctionLowering::lowerDebugOp(const ir::Op& op) {
  ScalarContext cx = scalarContext(op);
  if (op.code() == OpCode::Assert) {
    // Every thread checks the elements it holds; the first failing one reports through
    // __assertfail (message, FILE:LINE, kernel; the driver adds block and thread) and the
    // launch fails with a device-side assert.
    std::string message = ir::attr::Assert::message(op);
    if (message.empty()) message = "device_assert";
    const Regs& cond = regsOf(op.operand(0));
    std::string ok = b_.newLabel("assert_ok");
    std::string fail = b_.newLabel("assert_failed");
    for (const std::string& c : cond) {
      if (isImmediate(c)) {
        if (c == "0") b_.inst("bra.uni", {fail});
        continue;
      }
      b_.inst("bra", {fail}, b_.materialize(c, RegClass::Pred), /*negateGuard=*/true);
    }
    b_.inst("bra.uni", {ok});
    b_.label(fail);
    assertFailure(op.loc(), message);
    b_.label(ok);
    return;
  }

  // Print: as the interpreter prints, "pid (x, y, z) idx [i, j] PREFIX: VALUE", one line per
  // element, each printed by the one thread that owns it.
  const std::string prefix = PtxBuilder::escapePrintf(ir::attr::Print::prefix(op));
  const bool hex = ir::attr::Print::hex(op);
  std::vector<PtxBuilder::PrintArg> pid;
  for (const char* dim : {"%ctaid.x", "%ctaid.y", "%ctaid.z"})
    pid.push_back({b_.pure("mov.u32", RegClass::B32, {dim}), RegClass::B32});
  const std::string pidFormat = "pid (%u, %u, %u) ";
  if (op.numOperands() == 0) {
    b_.printf(pidFormat + prefix + "\n", pid, electedThread());
    return;
  }
  for (unsigned o = 0; o < op.numOperands(); ++o) {
    const ir::Value* v = op.operand(o);
    const ir::Type& t = v->type();
    const Regs& regs = regsOf(v);
    const std::string suffix =
        prefix + (op.numOperands() > 1 ? " (operand " + std::to_string(o) + ")" : "") + ": ";
    if (!t.isTensor() || t.shape.empty()) {
      Printable p = printable(cx, regs.at(0), t, hex);
      std::vector<PtxBuilder::PrintArg> args = pid;
      args.push_back(p.arg);
      b_.printf(pidFormat + "idx () " + suffix + p.conversion + "\n", args, electedThread());
      continue;
    }
    const layout::LinearLayout& l = layoutOf(v);
    std::string owner = ownerPredicate(l);
    for (int32_t r = 0; r < int32_t(regs.size()); ++r) {
      if (isDuplicateRegister(l, r)) continue;
      std::vector<PtxBuilder::PrintArg> args = pid;
      std::string index = "idx [";
      for (size_t d = 0; d < t.shape.size(); ++d) {
        index += d ? ", %d" : "%d";
        args.push_back({b_.materialize(coordinate(l, int(d), r), RegClass::B32), RegClass::B32});
      }
      index += "] ";
      Printable p = printable(cx, regs[size_t(r)], t, hex);
      args.push_back(p.arg);
      b_.printf(pidFormat + index + suffix + p.conversion + "\n", args, owner);
    }
  }
}

} // namespace ww::codegen
