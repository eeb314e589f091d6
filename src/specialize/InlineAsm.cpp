// tl.inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack): Triton's elementwise
// inline assembly. The arguments are broadcast to one shape (their types are kept); the op has
// one result per dtype, of that shape. The constraint string is checked here against the operand
// model of ir/InlineAsm.h, so a wrong count or width is an error at the call, not a ptxas one.
#include "ir/InlineAsm.h"
#include "ir/OpAttrs.h"
#include "specialize/SpecializerImpl.h"

namespace ww::specialize {

using ir::OpCode;

Val Specializer::inlineAsmElementwise(CallSite& call) {
  const std::string fn = "tl.inline_asm_elementwise";
  const SourceLoc loc = call.loc;
  BoundArgs a(call, {"asm", "constraints", "args", "dtype", "is_pure", "pack"});
  const Val& asmText = a.get("asm");
  if (asmText.kind != Val::Kind::String)
    raiseError(a.loc("asm"), fn + "'s asm must be a string constant, got " + describe(asmText));
  const Val& constraintText = a.get("constraints");
  if (constraintText.kind != Val::Kind::String)
    raiseError(a.loc("constraints"),
               fn + "'s constraints must be a string constant, got " + describe(constraintText));
  const bool pure = constBool(a.get("is_pure"), a.loc("is_pure"), fn + "'s is_pure");
  const int64_t pack = constInt(a.get("pack"), a.loc("pack"), fn + "'s pack");
  if (pack < 1 || pack > 32 || (pack & (pack - 1)))
    raiseError(a.loc("pack"),
               fn + "'s pack must be a power of two from 1 to 32, got " + std::to_string(pack));

  // dtype: one dtype (one result) or a tuple of them (a tuple of results, as in Triton).
  const Val& dt = a.get("dtype");
  const bool multiple = dt.kind == Val::Kind::Tuple;
  std::vector<ir::DType> dtypes;
  if (multiple) {
    if (dt.elts.empty()) raiseError(a.loc("dtype"), fn + "'s dtype tuple is empty");
    for (const Val& e : dt.elts) dtypes.push_back(constDType(e, a.loc("dtype"), fn + "'s dtype"));
  } else {
    dtypes.push_back(constDType(dt, a.loc("dtype"), fn + "'s dtype"));
  }

  // args: a list or tuple of tensors and scalars, broadcast to one shape, their dtypes kept.
  const Val& argList = a.get("args");
  std::vector<Val> argVals;
  if (argList.kind == Val::Kind::Tuple)
    argVals = argList.elts;
  else if (!argList.isNone())
    argVals.push_back(argList);
  std::vector<ir::Value*> args;
  std::vector<int64_t> shape;
  bool anyTensor = false;
  for (const Val& v : argVals) {
    ir::Value* x = requireTensorOrScalar(v, a.loc("args"), fn + "'s argument");
    if (x->type().isTensor()) {
      shape = anyTensor ? broadcastShapes(shape, x->type().shape, a.loc("args"), fn.c_str())
                        : x->type().shape;
      anyTensor = true;
    }
    args.push_back(x);
  }
  if (anyTensor)
    for (ir::Value*& x : args) x = broadcastTo(x, shape, loc);

  // The constraints: pack / (elements per operand) operands per result, then per argument.
  std::vector<ir::AsmConstraint> constraints;
  if (std::string bad = ir::parseAsmConstraints(constraintText.s, constraints); !bad.empty())
    raiseError(a.loc("constraints"), fn + ": " + bad);
  struct Expected {
    int bits;
    bool output;
    std::string what;
  };
  std::vector<Expected> expected;
  for (size_t r = 0; r < dtypes.size(); ++r) {
    int per = ir::asmElementsPerOperand(dtypes[r], false, int(pack));
    for (int64_t k = 0; k < pack / per; ++k)
      expected.push_back(
          {ir::asmOperandBits(dtypes[r], false, int(pack)), true,
           "result " + std::to_string(r) + " (" + std::string(ir::tlName(dtypes[r])) + ")"});
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const ir::Type& t = args[i]->type();
    if (t.elem == ir::DType::I1 && pack > 1)
      raiseError(a.loc("args"), fn + ": boolean arguments cannot be packed (pack=" +
                                    std::to_string(pack) + "); convert them with .to(tl.int8)");
    int per = ir::asmElementsPerOperand(t.elem, t.pointer, int(pack));
    for (int64_t k = 0; k < pack / per; ++k)
      expected.push_back({ir::asmOperandBits(t.elem, t.pointer, int(pack)), false,
                          "argument " + std::to_string(i) + " (" + t.str() + ")"});
  }
  for (ir::DType d : dtypes)
    if (d == ir::DType::I1 && pack > 1)
      raiseError(a.loc("dtype"),
                 fn + ": boolean results cannot be packed (pack=" + std::to_string(pack) + ")");
  if (constraints.size() != expected.size()) {
    size_t outs = 0;
    for (const Expected& e : expected) outs += e.output;
    raiseError(a.loc("constraints"),
               fn + ": the constraints name " + std::to_string(constraints.size()) +
                   " operands, but " + std::to_string(dtypes.size()) + " result(s) and " +
                   std::to_string(args.size()) + " argument(s) at pack=" + std::to_string(pack) +
                   " take " + std::to_string(expected.size()) + " (" + std::to_string(outs) +
                   " outputs '=...' first, then " + std::to_string(expected.size() - outs) +
                   " inputs)");
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const Expected& e = expected[i];
    const ir::AsmConstraint& c = constraints[i];
    int letterBits = c.letter == 'b'                        ? 1
                     : c.letter == 'c'                      ? 8
                     : c.letter == 'h'                      ? 16
                     : (c.letter == 'r' || c.letter == 'f') ? 32
                                                            : 64;
    // As LLVM does for Triton, an 8- or 16-bit operand may also sit in a 32-bit register (r),
    // zero-extended on the way in and truncated on the way out.
    const bool widened = c.letter == 'r' && (e.bits == 8 || e.bits == 16);
    if (c.output != e.output || (letterBits != e.bits && !widened))
      raiseError(a.loc("constraints"), fn + ": operand $" + std::to_string(i) + " is " + e.what +
                                           ", " + std::to_string(e.bits) + " bits" +
                                           (pack > 1 ? " as packed" : "") +
                                           ": its constraint must be '" + (e.output ? "=" : "") +
                                           ir::asmLettersFor(e.bits) + "', got '" +
                                           (c.output ? "=" : "") + std::string(1, c.letter) + "'");
  }
  // An output the string never names stays unwritten (ptxas takes such asm, or refuses the
  // instruction the operand was dropped from with a syntax error in the PTX).
  std::vector<bool> named(expected.size(), false);
  for (const ir::AsmOperandRef& ref : ir::asmOperandRefs(asmText.s))
    if (ref.operand < named.size()) named[ref.operand] = true;
  size_t outputs = 0;
  for (const Expected& e : expected) outputs += e.output;
  for (size_t i = 0; i < outputs; ++i)
    if (!named[i])
      raiseError(a.loc("asm"), fn + ": the asm string never names operand $" + std::to_string(i) +
                                   ", " + expected[i].what +
                                   ", so nothing would write it; name every output ($0 to $" +
                                   std::to_string(outputs - 1) + ") in its instructions");

  std::vector<ir::Type> resultTypes;
  for (ir::DType d : dtypes)
    resultTypes.push_back(anyTensor ? ir::Type::tensor(d, shape) : ir::Type::scalar(d));
  ir::Op* op =
      b.create(OpCode::InlineAsm, args, resultTypes,
               {ir::attr::InlineAsm::make::asmText(asmText.s),
                ir::attr::InlineAsm::make::constraints(constraintText.s),
                ir::attr::InlineAsm::make::pure(pure), ir::attr::InlineAsm::make::pack(pack)});
  if (!multiple) return Val::runtime(op->result(0));
  std::vector<Val> results;
  for (unsigned r = 0; r < op->numResults(); ++r) results.push_back(Val::runtime(op->result(r)));
  return Val::tuple(std::move(results));
}

// Programmatic dependent launch (a kernel launched with launch_pdl=True): gdc_wait blocks until
// the grids this one depends on have completed and their memory is visible; gdc_launch_dependents
// lets the next launch on the stream start early. Both are the one PTX instruction, as inline asm
// with side effects (an unused 32-bit result, as Triton writes them; sm_90 and newer).
Val Specializer::gridDependencyControl(const std::string& name, CallSite& call) {
  BoundArgs a(call, {});
  const std::string text =
      name == "gdc_wait" ? "griddepcontrol.wait;" : "griddepcontrol.launch_dependents;";
  b.create(OpCode::InlineAsm, {}, {ir::Type::scalar(ir::DType::I32)},
           {ir::attr::InlineAsm::make::asmText(text), ir::attr::InlineAsm::make::constraints("=r"),
            ir::attr::InlineAsm::make::pure(false), ir::attr::InlineAsm::make::pack(1)});
  return Val::none();
}

// tl.extra.cuda.smid() / globaltimer(): the SM the program runs on (%smid, int32) and the
// GPU's nanosecond timer (%globaltimer, int64), each read by one mov as Triton writes them. Not
// pure: two reads are two readings. The interpreter answers 0 and the host's steady clock.
Val Specializer::specialRegister(const std::string& name, CallSite& call) {
  BoundArgs a(call, {});
  const bool timer = name == "globaltimer";
  const ir::Op* op =
      b.create(OpCode::InlineAsm, {}, {ir::Type::scalar(timer ? ir::DType::I64 : ir::DType::I32)},
               {ir::attr::InlineAsm::make::asmText(timer ? "mov.u64 $0, %globaltimer;"
                                                         : "mov.u32 $0, %smid;"),
                ir::attr::InlineAsm::make::constraints(timer ? "=l" : "=r"),
                ir::attr::InlineAsm::make::pure(false), ir::attr::InlineAsm::make::pack(1)});
  return Val::runtime(op->result(0));
}

} // namespace ww::specialize
