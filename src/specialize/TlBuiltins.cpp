// The `tl.*` surface (and Python builtins, `math`, libdevice) lowered to Tile IR ops, with the
// argument checks and diagnostics each needs.
#include "ir/OpAttrs.h"
#include "specialize/BuiltinTable.h"
#include "specialize/IsInstance.h"
#include "specialize/OpAttrChecks.h"
#include "specialize/SpecializerImpl.h"
#include "specialize/TlBlockPtr.h"
#include "specialize/TlDotScaled.h"
#include "specialize/TlLibdevice.h"
#include "specialize/TlMisc.h"
#include "specialize/TlRandom.h"
#include "specialize/TlStandard.h"
#include "specialize/TypeObjects.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <set>

namespace ww::specialize {

using ir::DType;
using ir::OpCode;

namespace {

/// A shape in a message: "2x4", or "scalar".
std::string shapeStr(const std::vector<int64_t>& s) {
  return s.empty() ? "scalar" : ir::shapeDims(s);
}

const std::vector<std::string>& mathFunctions() {
  static const std::vector<std::string> names = {"sqrt",  "exp",   "exp2",  "log",  "log2", "log10",
                                                 "pow",   "sin",   "cos",   "tanh", "fabs", "ceil",
                                                 "floor", "trunc", "isinf", "isnan"};
  return names;
}

/// triton.language.target_info's queries, each a compile-time bool.
const std::vector<std::string>& targetInfoFunctions() {
  static const std::vector<std::string> names = {
      "is_cuda", "cuda_capability_geq", "is_hip", "is_hip_cdna3", "is_hip_cdna4", "is_hip_gfx1250"};
  return names;
}

void checkPow2(const std::vector<int64_t>& shape, SourceLoc loc, const std::string& what) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (!isPowerOf2(d))
      raiseError(loc, what + " must have power-of-2 dimensions, got " + shapeStr(shape) + " (" +
                          std::to_string(d) + " is not a power of 2)");
    numel = numel > (int64_t(1) << 40) / d ? int64_t(1) << 40 : numel * d; // no overflow
  }
  if (numel > (int64_t(1) << 20))
    raiseError(loc, what + " " + shapeStr(shape) +
                        " has more than 1048576 elements, the most a "
                        "block tensor may hold");
}

int64_t normAxis(int64_t axis, size_t rank, SourceLoc loc, const std::string& what) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    raiseError(loc, what + ": axis " + std::to_string(axis) +
                        " is out of range for a tensor of "
                        "rank " +
                        std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

/// Whether a call's propagate_nan asks NaN to win (tl.PropagateNan.ALL or True). Absent, NONE or
/// False: a NaN operand yields the other one, Triton's default.
bool propagatesNan(const BoundArgs& a, const std::string& what) {
  if (!a.has("propagate_nan")) return false;
  const Val& p = a.get("propagate_nan");
  if (p.kind == Val::Kind::Enum && (p.s == "ALL" || p.s == "NONE")) return p.s == "ALL";
  if (p.kind == Val::Kind::Enum || !p.isConstexpr())
    raiseError(a.loc("propagate_nan"), what + "'s propagate_nan must be tl.PropagateNan.ALL / NONE "
                                              "or a compile-time True / False");
  return truthy(p);
}

/// Sets [propagate_nan] on the max/min op that produced v (constants folded away have none).
void markPropagatesNan(ir::Value* v) {
  if (v->def() && (v->def()->code() == ir::OpCode::Max || v->def()->code() == ir::OpCode::Min)) {
    if (v->def()->code() == ir::OpCode::Max)
      ir::attr::Max::set::propagateNan(*v->def(), true);
    else
      ir::attr::Min::set::propagateNan(*v->def(), true);
  }
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Namespaces
// ---------------------------------------------------------------------------------------------

/// The module of warpweave's that defines `name` when it is one of the @jit library helpers TLX's
/// package exports beside its builtins (`tlx._to_mxfp8_block`); nullptr otherwise.
static const char* tlxHelperModule(const std::string& name) {
  return name == "_to_mxfp8_block" ? "warpweave.language.extra.tlx.mxfp8_utils" : nullptr;
}

std::optional<Val> Specializer::namespaceMember(const std::string& ns, const std::string& name) {
  if (ns == "tl") {
    if (auto d = ir::parseTlDType(name)) return Val::dtypeOf(*d);
    // triton.language.core's one named pointer type: pointer_type(int32).
    if (name == "pi32_t") return Val::dtypeOf(DType::I32, true);
    if (name == "math") return Val::ns("tl");
    if (name == "random") return Val::ns("tl.random");
    if (name == "extra") return Val::ns("tl.extra");
    if (name == "target_info") return Val::ns("tl.target_info");
    if (name == "PropagateNan") return Val::ns("tl.PropagateNan");
    if (name == "ReductionOrdering") return Val::ns("tl.ReductionOrdering");
    if (auto t = tlTypeObject(name)) return *t;
    if (tlBuiltins().isMember(name)) return Val::builtin("tl." + name);
    return std::nullopt;
  }
  if (ns == "tl.random") {
    // triton.language.random: the random-number functions (tl members too) and the default round
    // count their n_rounds takes.
    if (name == "N_ROUNDS_DEFAULT") return Val::integer(kPhiloxDefaultRounds);
    if (tlBuiltins().find(name) == &tlRandom) return Val::builtin("tl." + name);
    return std::nullopt;
  }
  if (ns == "tl.extra") {
    if (name == "tlx") return Val::ns("tlx");
    if (name == "libdevice") return Val::ns("libdevice");
    if (name == "cuda") return Val::ns("tl.extra");
    if (name == "gdc_wait" || name == "gdc_launch_dependents" || name == "smid" ||
        name == "globaltimer" || name == "num_threads" || name == "num_warps")
      return Val::builtin("cuda." + name);
    return std::nullopt;
  }
  if (ns == "tlx") {
    if (name == "storage_kind") return Val::ns("tlx.storage_kind");
    if (name == "reuse_group_type") return Val::ns("tlx.reuse_group_type");
    if (auto d = ir::parseTlDType(name)) return Val::dtypeOf(*d);
    if (tlxBuiltins().isMember(name)) return Val::builtin("tlx." + name);
    // TLX's package exports a library helper beside its builtins: tlx._to_mxfp8_block, the
    // @jit function of warpweave's tlx.mxfp8_utils, whose file the launcher gives the compiler
    // when a kernel names it (jit.py).
    if (const char* module = tlxHelperModule(name))
      if (auto m = findModule(module))
        if (auto f = modules[*m].functions.find(name); f != modules[*m].functions.end())
          return Val::function({f->second, *m});
    return std::nullopt;
  }
  if (ns == "tlx.storage_kind") {
    if (name == "smem" || name == "tmem") return Val::enumValue(name);
    return std::nullopt;
  }
  if (ns == "tlx.reuse_group_type") {
    if (name == "shared" || name == "distinct") return Val::enumValue(name);
    return std::nullopt;
  }
  if (ns == "tl.target_info") {
    const auto& f = targetInfoFunctions();
    if (std::find(f.begin(), f.end(), name) != f.end()) return Val::builtin("target_info." + name);
    return std::nullopt;
  }
  if (ns == "tl.PropagateNan") {
    if (name == "ALL" || name == "NONE") return Val::enumValue(name);
    return std::nullopt;
  }
  if (ns == "tl.ReductionOrdering") {
    if (name == "INNER_TREE" || name == "UNORDERED") return Val::enumValue(name);
    return std::nullopt;
  }
  if (ns == "math") {
    if (name == "pi") return Val::real(M_PI);
    if (name == "e") return Val::real(M_E);
    if (name == "tau") return Val::real(2 * M_PI);
    if (name == "inf") return Val::real(INFINITY);
    if (name == "nan") return Val::real(NAN);
    const auto& f = mathFunctions();
    if (std::find(f.begin(), f.end(), name) != f.end()) return Val::builtin("math." + name);
    return std::nullopt;
  }
  if (ns == "ww") {
    if (name == "language") return Val::ns("tl");
    if (name == "tlx") return Val::ns("tlx");
    if (name == "cdiv") return Val::builtin("tl.cdiv");
    if (name == "next_power_of_2") return Val::builtin("ww.next_power_of_2");
    if (name == "jit") return Val::builtin("ww.jit");
    return std::nullopt;
  }
  if (ns == "proton") {
    if (name == "enter_scope" || name == "exit_scope" || name == "scope")
      return Val::builtin("proton." + name);
    return std::nullopt;
  }
  if (ns == "libdevice") {
    if (isLibdeviceFunction(name)) return Val::builtin("libdevice." + name);
    static const std::vector<std::string> names = {
        "exp", "exp2", "log",    "log2",      "sqrt",      "rsqrt",  "sin",
        "cos", "tanh", "erf",    "floor",     "ceil",      "fma",    "fabs",
        "abs", "pow",  "div_rn", "fast_expf", "fast_logf", "sqrt_rn"};
    if (std::find(names.begin(), names.end(), name) != names.end())
      return Val::builtin("libdevice." + name);
    return std::nullopt;
  }
  return std::nullopt;
}

void Specializer::unknownMember(const std::string& ns, const std::string& name, SourceLoc loc) {
  std::vector<std::string> candidates;
  std::string prefix = ns;
  if (ns == "tl") {
    candidates = tlBuiltins().memberNames();
    for (const char* d :
         {"int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float8e4nv", "float8e5", "float16", "bfloat16", "float32", "float64"})
      candidates.push_back(d);
  } else if (ns == "tl.random") {
    for (const BuiltinRow& r : tlBuiltins().rows())
      if (r.handler == &tlRandom) candidates.push_back(r.name);
  } else if (ns == "tlx") {
    candidates = tlxBuiltins().memberNames();
    candidates.push_back("storage_kind");
    candidates.push_back("reuse_group_type");
  } else if (ns == "tl.target_info") {
    candidates = targetInfoFunctions();
  } else if (ns == "tlx.reuse_group_type") {
    candidates = {"shared", "distinct"};
  } else if (ns == "math") {
    candidates = mathFunctions();
    candidates.insert(candidates.end(), {"pi", "e", "inf", "nan", "tau"});
  } else if (ns == "tlx.storage_kind") {
    candidates = {"smem", "tmem"};
  } else if (ns == "tl.PropagateNan") {
    candidates = {"ALL", "NONE"};
  } else if (ns == "tl.ReductionOrdering") {
    candidates = {"INNER_TREE", "UNORDERED"};
  } else if (ns == "libdevice") {
    candidates = libdeviceFunctions();
  } else if (ns == "ww") {
    candidates = {"language", "tlx", "cdiv", "next_power_of_2", "jit"};
  } else if (ns == "proton") {
    prefix = "pl";
    candidates = {"enter_scope", "exit_scope", "scope"};
  }
  if (ns == "tlx")
    if (const char* module = tlxHelperModule(name))
      raiseError(loc, "tlx." + name + " is the @jit helper of " + std::string(module) +
                          ", whose file the compiler was not given; launch the kernel through "
                          "@jit (which gives it), or import the helper from that module");
  std::string msg = "unknown name '" + prefix + "." + name + "'";
  std::string near = closestMatch(name, candidates);
  if (!near.empty()) msg += "; did you mean '" + prefix + "." + near + "'?";
  raiseError(loc, msg);
}

// ---------------------------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------------------------

Val Specializer::callBuiltin(const std::string& name, CallSite& call) {
  if (name == "range" || name == "tl.range" || name == "tl.static_range")
    raiseError(call.loc, name + "(...) can only be used as the iterable of a 'for' loop");
  if (name.starts_with("tl.")) return callTl(name.substr(3), call);
  if (name.starts_with("tlx.")) return callTlx(name.substr(4), call);
  if (name.starts_with("math.")) return mathConstFunction(name.substr(5), call);
  if (name == "cuda.smid" || name == "cuda.globaltimer")
    return specialRegister(name.substr(5), call);
  if (name == "cuda.num_threads" || name == "cuda.num_warps") {
    // Compile-time values, as in Triton: the kernel's warps (its num_warps option) and threads.
    BoundArgs a(call, {});
    int64_t warps = in.options.numWarps;
    return Val::integer(name == "cuda.num_warps" ? warps : warps * 32);
  }
  if (name.starts_with("cuda.")) return gridDependencyControl(name.substr(5), call);
  if (name.starts_with("target_info.")) return targetInfo(name.substr(12), call);
  if (name.starts_with("proton.")) return callProton(name.substr(7), call);
  if (name.starts_with("libdevice.")) {
    std::string fn = name.substr(10);
    if (isLibdeviceFunction(fn)) return callLibdevice(*this, fn, call);
    if (fn == "fabs") fn = "abs";
    if (fn == "fast_expf") fn = "exp";
    if (fn == "fast_logf") fn = "log";
    if (fn == "pow") {
      BoundArgs a(call, {"x", "y"});
      ir::Value* x = requireTensorOrScalar(a.get("x"), a.loc("x"), "libdevice.pow's x");
      if (!ir::isFloat(x->type().elem)) x = cast(x, DType::F32, call.loc);
      auto [p, q] = unify(Val::runtime(x), a.get("y"), call.loc, x->type().elem, "libdevice.pow");
      return Val::runtime(b.binary(OpCode::Pow, p, q));
    }
    return callTl(fn, call);
  }
  if (name == "ww.next_power_of_2") {
    BoundArgs a(call, {"n"});
    int64_t n = constInt(a.get("n"), a.loc("n"), "next_power_of_2's argument", a.expr("n"));
    int64_t p = 1;
    while (p < n) p <<= 1;
    return Val::integer(p);
  }
  if (name == "ww.jit") raiseError(call.loc, "ww.jit cannot be called inside a kernel");
  return callPython(name, call);
}

// triton.language.target_info: what the compile target is, as compile-time bools, so that a
// helper can guard inline PTX that needs a newer GPU (Triton's use of cuda_capability_geq). The
// interpreter's Tile IR has no CUDA target: there every query is False, as in Triton without an
// active CUDA driver, and such helpers take their portable code.
Val Specializer::targetInfo(const std::string& name, CallSite& call) {
  if (name == "cuda_capability_geq") {
    BoundArgs a(call, {"major", "minor="});
    const int64_t major =
        constInt(a.get("major"), a.loc("major"), "cuda_capability_geq's major", a.expr("major"));
    const int64_t minor = a.has("minor") ? constInt(a.get("minor"), a.loc("minor"),
                                                    "cuda_capability_geq's minor", a.expr("minor"))
                                         : 0;
    if (!in.cudaTarget) return Val::boolean(false);
    const int64_t arch = in.options.target == Target::SM100a  ? 100
                         : in.options.target == Target::SM90a ? 90
                                                              : 80;
    return Val::boolean(arch >= major * 10 + minor);
  }
  BoundArgs a(call, {});
  return Val::boolean(name == "is_cuda" && in.cudaTarget);
}

Val Specializer::callPython(const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  if (name == "isinstance") {
    BoundArgs a(call, {"obj", "classinfo"});
    return Val::boolean(kernelIsInstance(a.get("obj"), a.get("classinfo"), a.loc("classinfo")));
  }
  if (name == "getattr" || name == "hasattr") return pythonGetAttr(*this, name, call);
  if (name == "min" || name == "max") {
    if (!call.kwNames.empty()) raiseError(call.kwLocs[0], name + "() takes no keyword arguments");
    std::vector<Val> xs = call.args;
    if (xs.size() == 1 && xs[0].kind == Val::Kind::Tuple) xs = xs[0].elts;
    if (xs.empty()) raiseError(loc, name + "() needs at least one argument");
    Val acc = xs[0];
    for (size_t i = 1; i < xs.size(); ++i) {
      const Val& x = xs[i];
      if (acc.isConstexpr() && x.isConstexpr()) {
        Val less = constCompare(ast::CmpOpKind::Lt, x, acc, loc);
        if ((name == "min") == truthy(less)) acc = x;
      } else {
        acc = Val::runtime(minMax(name == "max", acc, x, loc));
      }
    }
    return acc;
  }
  if (name == "abs") {
    BoundArgs a(call, {"x"});
    const Val& x = a.get("x");
    if (x.kind == Val::Kind::Int) return Val::integer(x.i < 0 ? -x.i : x.i);
    if (x.kind == Val::Kind::Float) return Val::real(std::fabs(x.f));
    if (x.kind == Val::Kind::Bool) return Val::integer(x.b);
    return callTl("abs", call);
  }
  if (name == "len") {
    BoundArgs a(call, {"x"});
    const Val& x = a.get("x");
    if (x.kind == Val::Kind::Tuple) return Val::integer(static_cast<int64_t>(x.elts.size()));
    if (x.kind == Val::Kind::String) return Val::integer(static_cast<int64_t>(x.s.size()));
    if (x.isRuntime() && x.type().isTensor()) return Val::integer(x.type().shape[0]);
    raiseError(a.loc("x"), "len() needs a tuple or a tensor, got " + kindName(x));
  }
  if (name == "int" || name == "float" || name == "bool") {
    BoundArgs a(call, {"x="});
    if (!a.has("x")) {
      if (name == "int") return Val::integer(0);
      if (name == "float") return Val::real(0);
      return Val::boolean(false);
    }
    const Val& x = a.get("x");
    if (x.isRuntime())
      raiseError(a.loc("x"), name + "() works on compile-time values only; use x.to(tl." +
                                 (name == "int"     ? std::string("int32")
                                  : name == "float" ? "float32"
                                                    : "int1") +
                                 ") for run-time values");
    if (name == "bool") return Val::boolean(truthy(x));
    if (x.kind == Val::Kind::String) {
      std::string s = x.s;
      std::transform(s.begin(), s.end(), s.begin(), ::tolower);
      if (name == "float") {
        if (s == "inf" || s == "+inf" || s == "infinity") return Val::real(INFINITY);
        if (s == "-inf" || s == "-infinity") return Val::real(-INFINITY);
        if (s == "nan") return Val::real(NAN);
        try {
          size_t used = 0;
          double d = std::stod(x.s, &used);
          if (used == x.s.size()) return Val::real(d);
        } catch (...) {
        }
      } else {
        try {
          size_t used = 0;
          long long v = std::stoll(x.s, &used);
          if (used == x.s.size()) return Val::integer(v);
        } catch (...) {
        }
      }
      raiseError(a.loc("x"), "cannot convert '" + x.s + "' to " + name);
    }
    if (!x.isNumber()) raiseError(a.loc("x"), "cannot convert " + kindName(x) + " to " + name);
    if (name == "float")
      return Val::real(x.kind == Val::Kind::Float ? x.f
                                                  : double(x.kind == Val::Kind::Bool ? x.b : x.i));
    if (x.kind == Val::Kind::Float) {
      if (!std::isfinite(x.f) || std::fabs(x.f) >= 9.2e18)
        raiseError(a.loc("x"), "cannot convert " + describe(x) + " to a 64-bit int");
      return Val::integer(static_cast<int64_t>(x.f));
    }
    return Val::integer(x.kind == Val::Kind::Bool ? x.b : x.i);
  }
  if (name == "print") {
    // Triton's print is tl.device_print: a leading string is the prefix ('print("i", i)').
    // Without one (print(x)), the prefix is empty.
    CallSite cs = call;
    if (!cs.args.empty() && cs.args[0].kind == Val::Kind::String) return callTl("device_print", cs);
    cs.args.insert(cs.args.begin(), Val::string(""));
    cs.argLocs.insert(cs.argLocs.begin(), loc);
    cs.argExprs.insert(cs.argExprs.begin(), nullptr);
    return callTl("device_print", cs);
  }
  if (name == "tuple") {
    BoundArgs a(call, {"x"});
    if (a.get("x").kind != Val::Kind::Tuple) raiseError(a.loc("x"), "tuple() needs a tuple");
    return a.get("x");
  }
  raiseError(loc, "the Python builtin '" + name + "' is not supported in kernels");
}

// ---------------------------------------------------------------------------------------------
// tl.*
// ---------------------------------------------------------------------------------------------

// One handler per builtin or family of builtins, registered in tlBuiltins() below.
namespace {

/// tl.program_id / tl.num_programs.
Val tlProgramQuery(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string& fn = call.callee;
  BoundArgs a(call, {"axis"});
  int64_t axis = sp.constInt(a.get("axis"), a.loc("axis"), fn + "'s axis", a.expr("axis"));
  if (axis < 0 || axis > 2)
    raiseError(a.loc("axis"),
               fn + " axis must be 0, 1, or 2 but got " + std::to_string(axis)); // Triton's words
  if (name == "program_id") return Val::runtime(sp.b.programId(static_cast<int>(axis)));
  return Val::runtime(sp.b.create1(OpCode::NumPrograms, {}, ir::Type::scalar(DType::I32),
                                   {ir::attr::NumPrograms::make::axis(axis)}));
}

Val tlArange(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"start", "end"});
  int64_t lo = sp.constInt(a.get("start"), a.loc("start"), "tl.arange's start", a.expr("start"));
  int64_t hi = sp.constInt(a.get("end"), a.loc("end"), "tl.arange's end", a.expr("end"));
  if (hi <= lo)
    raiseError(loc, "tl.arange needs end > start, got arange(" + std::to_string(lo) + ", " +
                        std::to_string(hi) + ")");
  if (!isPowerOf2(hi - lo))
    raiseError(loc, "tl.arange's range must have a power-of-2 size, got " +
                        std::to_string(hi - lo) + " (end - start)");
  if (hi - lo > (1 << 20))
    raiseError(loc, "tl.arange's range is too large: " + std::to_string(hi - lo) + " elements");
  return Val::runtime(sp.b.arange(lo, hi));
}

/// tl.zeros / tl.full.
Val tlFull(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a = name == "zeros" ? BoundArgs(call, {"shape", "dtype"})
                                : BoundArgs(call, {"shape", "value", "dtype"});
  std::vector<int64_t> shape =
      sp.constShape(a.get("shape"), a.loc("shape"), fn + "'s shape", a.expr("shape"));
  if (a.get("shape").kind == Val::Kind::Tuple && a.get("shape").elts.empty()) shape.clear();
  checkPow2(shape, a.loc("shape"), fn + "'s shape");
  DType dt = sp.constDType(a.get("dtype"), a.loc("dtype"), fn + "'s dtype");
  ir::Type t = ir::Type::tensor(dt, shape);
  if (name == "zeros") return Val::runtime(sp.constant(Val::integer(0), t));
  const Val& v = a.get("value");
  if (v.isNumber()) return Val::runtime(sp.constant(v, t));
  ir::Value* x = sp.requireTensorOrScalar(v, a.loc("value"), "tl.full's value");
  if (!x->type().isScalar()) raiseError(a.loc("value"), "tl.full's value must be a scalar");
  return Val::runtime(sp.broadcastTo(sp.cast(x, dt, loc), shape, loc));
}

/// tl.zeros_like / tl.full_like.
Val tlFullLike(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a = name == "zeros_like" ? BoundArgs(call, {"input", "dtype="})
                                     : BoundArgs(call, {"input", "value", "dtype="});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), fn + "'s input");
  DType dt = a.has("dtype") ? sp.constDType(a.get("dtype"), a.loc("dtype"), fn + "'s dtype")
                            : x->type().elem;
  ir::Type t = ir::Type::tensor(dt, x->type().shape);
  Val v = name == "zeros_like" ? Val::integer(0) : a.get("value");
  if (!v.isNumber()) raiseError(loc, fn + "'s value must be a compile-time number");
  return Val::runtime(sp.constant(v, t));
}

Val tlCdiv(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"x", "div"});
  const Val &x = a.get("x"), &d = a.get("div");
  if (x.isConstexpr() && d.isConstexpr()) {
    if (!x.isIntLike() || !d.isIntLike())
      raiseError(loc, "cdiv needs integers, got " + describe(x) + " and " + describe(d));
    Val sum = sp.constBinary(ast::BinOpKind::Add, x, d, loc);
    sum = sp.constBinary(ast::BinOpKind::Sub, sum, Val::integer(1), loc);
    return sp.constBinary(ast::BinOpKind::FloorDiv, sum, d, loc);
  }
  Val sum = sp.evalBinOp(ast::BinOpKind::Add, x, d, loc);
  sum = sp.evalBinOp(ast::BinOpKind::Sub, sum, Val::integer(1), loc);
  return sp.evalBinOp(ast::BinOpKind::FloorDiv, sum, d, loc);
}

Val tlLoad(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"pointer", "mask=", "other=", "boundary_check=", "padding_option=",
                     "cache_modifier=", "eviction_policy=", "volatile="});
  return sp.loadOp(a, loc);
}

Val tlStore(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"pointer", "value",
                     "mask=", "boundary_check=", "cache_modifier=", "eviction_policy="});
  sp.storeOp(a, loc);
  return Val::none();
}

Val tlBroadcastTo(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"input", "*shape"});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), fn + "'s input");
  std::vector<int64_t> shape =
      sp.constShape(a.get("shape"), a.loc("shape"), fn + "'s shape", a.expr("shape"));
  checkPow2(shape, a.loc("shape"), fn + "'s shape");
  return Val::runtime(sp.broadcastTo(x, shape, loc));
}

Val tlBroadcast(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"input", "other"});
  auto [x, y] = sp.unify(a.get("input"), a.get("other"), loc, std::nullopt, "tl.broadcast");
  return Val::tuple({Val::runtime(x), Val::runtime(y)});
}

Val tlExpandDims(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  const std::string& fn = call.callee;
  BoundArgs a(call, {"input", "axis"});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), fn + "'s input");
  std::vector<int64_t> axes;
  const Val& ax = a.get("axis");
  if (ax.kind == Val::Kind::Tuple)
    for (const Val& e : ax.elts) axes.push_back(sp.constInt(e, a.loc("axis"), fn + "'s axis"));
  else
    axes.push_back(sp.constInt(ax, a.loc("axis"), fn + "'s axis", a.expr("axis")));
  int64_t newRank = static_cast<int64_t>(x->type().shape.size() + axes.size());
  std::string normalized;
  for (int64_t& ax2 : axes) {
    // Triton's conditions: each axis within the result's rank, no axis twice after wrapping.
    if (ax2 < -newRank || ax2 >= newRank)
      raiseError(a.loc("axis"), fn + ": invalid axis " + std::to_string(ax2) + "; expected " +
                                    std::to_string(-newRank) + " <= axis < " +
                                    std::to_string(newRank) + " for a result of rank " +
                                    std::to_string(newRank));
    ax2 = ax2 < 0 ? ax2 + newRank : ax2;
    normalized += (normalized.empty() ? "" : ", ") + std::to_string(ax2);
  }
  if (std::set<int64_t>(axes.begin(), axes.end()).size() != axes.size())
    raiseError(a.loc("axis"),
               fn + " received duplicate axes, normalized axes = [" + normalized + "]");
  std::sort(axes.begin(), axes.end());
  for (int64_t ax2 : axes) x = sp.expandDims(x, ax2, a.loc("axis"));
  return Val::runtime(x);
}

/// tl.reshape / tl.view.
Val tlReshape(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"input", "*shape", "can_reorder="});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), fn + "'s input");
  std::vector<int64_t> shape =
      sp.constShape(a.get("shape"), a.loc("shape"), fn + "'s shape", a.expr("shape"));
  checkPow2(shape, a.loc("shape"), fn + "'s shape");
  return Val::runtime(sp.reshape(x, shape, loc));
}

Val tlRavel(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"x"});
  ir::Value* x = sp.requireTensorOrScalar(a.get("x"), a.loc("x"), fn + "'s input");
  return Val::runtime(sp.reshape(x, {x->type().numElements()}, loc));
}

/// tl.permute / tl.trans (trans without dims swaps the last two).
Val tlPermute(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"input", "*dims"});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), fn + "'s input");
  size_t rank = x->type().shape.size();
  std::vector<int64_t> order;
  if (a.has("dims") && !a.get("dims").elts.empty()) {
    for (const Val& d : a.get("dims").elts)
      order.push_back(sp.constInt(d, a.loc("dims"), fn + "'s dims"));
  } else if (name == "trans") {
    if (rank < 2)
      raiseError(loc, "tl.trans needs a tensor of rank 2 or more, got " + x->type().str());
    for (size_t i = 0; i < rank; ++i) order.push_back(static_cast<int64_t>(i));
    std::swap(order[rank - 1], order[rank - 2]);
  } else {
    raiseError(loc, "tl.permute needs the new order of the dimensions");
  }
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  bool valid = order.size() == rank;
  for (size_t i = 0; valid && i < rank; ++i) valid = sorted[i] == static_cast<int64_t>(i);
  if (!valid)
    raiseError(loc, fn + "'s dims must be a permutation of 0.." + std::to_string(rank - 1) +
                        " for " + x->type().str());
  std::vector<int64_t> shape;
  for (int64_t d : order) shape.push_back(x->type().shape[static_cast<size_t>(d)]);
  return Val::runtime(sp.b.create1(OpCode::Permute, {x}, x->type().withShape(shape),
                                   {ir::attr::Permute::make::order(order)}));
}

Val tlSplit(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"a"});
  ir::Value* x = sp.requireTensorOrScalar(a.get("a"), a.loc("a"), fn + "'s input");
  const auto& s = x->type().shape;
  if (s.empty() || s.back() != 2)
    raiseError(loc, "tl.split needs a tensor whose last dimension is 2, got " + x->type().str());
  std::vector<int64_t> shape(s.begin(), s.end() - 1);
  if (shape.empty()) {
    // A [2] tensor splits into two scalars: split [1, 2] into two [1] tensors, then take each
    // one's only element as a scalar (a max over one element: exact, every thread gets it).
    ir::Value* row = sp.reshape(x, {1, 2}, loc);
    ir::Op* halves =
        sp.b.create(OpCode::Split, {row}, {row->type().withShape({1}), row->type().withShape({1})});
    auto only = [&](ir::Value* v) {
      return Val::runtime(
          sp.b.create1(OpCode::Reduce, {v}, ir::Type::tensor(v->type().elem, {}),
                       {ir::attr::Reduce::make::axis(0), ir::attr::Reduce::make::kind("max")}));
    };
    return Val::tuple({only(halves->result(0)), only(halves->result(1))});
  }
  ir::Op* op =
      sp.b.create(OpCode::Split, {x}, {x->type().withShape(shape), x->type().withShape(shape)});
  return Val::tuple({Val::runtime(op->result(0)), Val::runtime(op->result(1))});
}

Val tlJoin(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"a", "b"});
  auto [ta, pa] =
      std::pair{a.get("a").isRuntime() ? a.get("a").type().elem : sp.pythonScalarDType(a.get("a")),
                !a.get("a").isRuntime()};
  auto [tb, pb] =
      std::pair{a.get("b").isRuntime() ? a.get("b").type().elem : sp.pythonScalarDType(a.get("b")),
                !a.get("b").isRuntime()};
  DType dt = sp.computationType(ta, pa, tb, pb, false, loc, "tl.join");
  auto [x, y] = sp.unify(a.get("a"), a.get("b"), loc, dt, "tl.join");
  if (!x->type().isTensor()) {
    // Two scalars join into a [2] tensor (Triton's 0-d tensors): as [1] tensors, then reshaped.
    ir::Value* x1 = sp.b.splat(x, {1});
    ir::Value* y1 = sp.b.splat(y, {1});
    ir::Value* j = sp.b.create1(OpCode::Join, {x1, y1}, x1->type().withShape({1, 2}));
    return Val::runtime(sp.b.create1(OpCode::Reshape, {j}, x1->type().withShape({2})));
  }
  std::vector<int64_t> shape = x->type().shape;
  shape.push_back(2);
  return Val::runtime(sp.b.create1(OpCode::Join, {x, y}, x->type().withShape(shape)));
}

Val tlCat(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"input", "other", "can_reorder=", "dim="});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), "tl.cat's input");
  ir::Value* y = sp.requireTensorOrScalar(a.get("other"), a.loc("other"), "tl.cat's other");
  if (x->type() != y->type() || x->type().isScalar())
    raiseError(loc, "tl.cat needs two tensors of one type, got " + x->type().str() + " and " +
                        y->type().str());
  std::vector<int64_t> shape = x->type().shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t dim = 0;
  bool reorder = a.has("can_reorder") &&
                 sp.constBool(a.get("can_reorder"), a.loc("can_reorder"), "tl.cat's can_reorder");
  if (!reorder && a.has("dim"))
    dim = normAxis(sp.constInt(a.get("dim"), a.loc("dim"), "tl.cat's dim", a.expr("dim")),
                   shape.size(), a.loc("dim"), "tl.cat");
  if (dim == 0) {
    shape[0] *= 2;
    return Val::runtime(sp.b.create1(OpCode::Cat, {x, y}, x->type().withShape(shape)));
  }
  // Along another dimension, as Triton does: join (a new minor dimension of 2), move that
  // dimension in front of `dim`, and merge the two.
  std::vector<int64_t> joined = shape;
  joined.push_back(2);
  ir::Value* j = sp.b.create1(OpCode::Join, {x, y}, x->type().withShape(joined));
  std::vector<int64_t> order, permuted;
  for (int64_t i = 0; i < rank; ++i) order.push_back(i);
  order.insert(order.begin() + dim, rank);
  for (int64_t d : order) permuted.push_back(joined[static_cast<size_t>(d)]);
  ir::Value* p = sp.b.create1(OpCode::Permute, {j}, x->type().withShape(permuted),
                              {ir::attr::Permute::make::order(order)});
  shape[static_cast<size_t>(dim)] *= 2;
  return Val::runtime(sp.reshape(p, shape, loc));
}

Val tlWhere(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"condition", "x", "y"});
  ir::Value* c = sp.toI1(
      sp.requireTensorOrScalar(a.get("condition"), a.loc("condition"), "tl.where's condition"),
      loc);
  const Val &x = a.get("x"), &y = a.get("y");
  for (const Val* v : {&x, &y})
    if (!(v->isNumber() || (v->isRuntime() && v->type().isValue())))
      raiseError(loc, "tl.where's values must be numbers or tensors, got " + kindName(*v));
  std::optional<DType> dt;
  bool xp = x.isRuntime() && x.type().isPointer(), yp = y.isRuntime() && y.type().isPointer();
  if (!xp && !yp) {
    DType tx = x.isRuntime() ? x.type().elem : sp.pythonScalarDType(x);
    DType ty = y.isRuntime() ? y.type().elem : sp.pythonScalarDType(y);
    dt = sp.computationType(tx, !x.isRuntime(), ty, !y.isRuntime(), false, loc, "tl.where");
  }
  auto [p, q] = sp.unify(x, y, loc, dt, "tl.where");
  std::vector<int64_t> shape =
      sp.broadcastShapes(c->type().shape, p->type().shape, loc, "tl.where");
  c = sp.broadcastTo(c, shape, loc);
  p = sp.broadcastTo(p, shape, loc);
  q = sp.broadcastTo(q, shape, loc);
  return Val::runtime(sp.b.create1(OpCode::Select, {c, p, q}, p->type()));
}

/// tl.maximum / tl.minimum (compile-time operands fold).
Val tlMaximumMinimum(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"x", "y", "propagate_nan="});
  const Val &x = a.get("x"), &y = a.get("y");
  if (x.isConstexpr() && y.isConstexpr()) {
    Val less = sp.constCompare(ast::CmpOpKind::Lt, y, x, loc);
    return (name == "minimum") == truthy(less) ? y : x;
  }
  ir::Value* r = sp.minMax(name == "maximum", x, y, loc);
  if (propagatesNan(a, "tl." + name)) markPropagatesNan(r);
  return Val::runtime(r);
}

Val tlClamp(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"x", "min", "max", "propagate_nan="});
  ir::Value* lo = sp.minMax(true, a.get("x"), a.get("min"), loc);
  ir::Value* r = sp.minMax(false, Val::runtime(lo), a.get("max"), loc);
  if (propagatesNan(a, "tl.clamp")) {
    markPropagatesNan(lo);
    markPropagatesNan(r);
  }
  return Val::runtime(r);
}

/// Whether a reduction's reduction_ordering asks for Triton's INNER_TREE order (absent or
/// UNORDERED: any order).
bool innerTreeOrdering(const BoundArgs& a, const std::string& what) {
  if (!a.has("reduction_ordering")) return false;
  const Val& o = a.get("reduction_ordering");
  if (o.kind != Val::Kind::Enum || (o.s != "INNER_TREE" && o.s != "UNORDERED"))
    raiseError(a.loc("reduction_ordering"),
               what +
                   "'s reduction_ordering must be tl.ReductionOrdering.INNER_TREE or "
                   "UNORDERED, got " +
                   describe(o));
  return o.s == "INNER_TREE";
}

/// Triton's INNER_TREE order, spelled with ordinary ops so that every target keeps it: `xs`
/// (tensors of one shape) are reduced along `axis` by adjacent pairs, then pairs of pairs, until
/// the axis has length 1 (it stays, of length 1). `pairs(values, a)` reduces axis `a`, of length
/// 2, of each value: a two-element reduction has one order.
std::vector<ir::Value*> innerTree(
    Specializer& sp, std::vector<ir::Value*> xs, int64_t axis, SourceLoc loc,
    const std::function<std::vector<ir::Value*>(const std::vector<ir::Value*>&, int64_t)>& pairs) {
  const size_t ax = static_cast<size_t>(axis);
  while (xs[0]->type().shape[ax] > 1) {
    std::vector<int64_t> shape = xs[0]->type().shape;
    shape[ax] /= 2;
    shape.insert(shape.begin() + axis + 1, 2);
    for (ir::Value*& x : xs) x = sp.reshape(x, shape, loc);
    xs = pairs(xs, axis + 1);
  }
  return xs;
}

/// The input of a reduction over `axis` (None: all elements, flattened) after INNER_TREE's
/// steps: `x` with that axis of length 1, or all of it as [1, ..., 1].
ir::Value* innerTreeInput(
    Specializer& sp, ir::Value* x, const BoundArgs& a, const std::string& what, SourceLoc loc,
    const std::function<std::vector<ir::Value*>(const std::vector<ir::Value*>&, int64_t)>& pairs) {
  if (x->type().isScalar()) return x;
  const size_t rank = x->type().shape.size();
  if (!a.has("axis")) {
    ir::Value* flat = sp.reshape(x, {x->type().numElements()}, loc);
    ir::Value* one = innerTree(sp, {flat}, 0, loc, pairs)[0];
    return sp.reshape(one, std::vector<int64_t>(rank, 1), loc);
  }
  int64_t axis = normAxis(sp.constInt(a.get("axis"), a.loc("axis"), what + "'s axis"), rank,
                          a.loc("axis"), what);
  return innerTree(sp, {x}, axis, loc, pairs)[0];
}

Val tlSum(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"input", "axis=", "keep_dims=", "dtype=", "reduction_ordering="});
  if (!innerTreeOrdering(a, "tl.sum")) return sp.reduceOp("sum", a.get("input"), a, call.loc);
  SourceLoc loc = call.loc;
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), "tl.sum's input");
  // The accumulation type first (reduceOp's rules), so that every partial sum has it.
  if (a.has("dtype"))
    x = sp.cast(x, sp.constDType(a.get("dtype"), a.loc("dtype"), "tl.sum's dtype"), loc);
  else if (ir::isInt(x->type().elem) && ir::bitWidth(x->type().elem) < 32)
    x = sp.cast(x, ir::isSigned(x->type().elem) ? DType::I32 : DType::U32, loc);
  if (x->type().elem == DType::BF16) x = sp.cast(x, DType::F32, loc);
  auto pairs = [&](const std::vector<ir::Value*>& xs, int64_t axis) {
    std::vector<int64_t> shape = xs[0]->type().shape;
    shape.erase(shape.begin() + axis);
    return std::vector<ir::Value*>{
        sp.b.create1(OpCode::Reduce, {xs[0]}, ir::Type::tensor(xs[0]->type().elem, shape),
                     {ir::attr::Reduce::make::axis(axis), ir::attr::Reduce::make::kind("sum")})};
  };
  return sp.reduceOp("sum", Val::runtime(innerTreeInput(sp, x, a, "tl.sum", loc, pairs)), a, loc);
}

/// tl.max / tl.min (with return_indices, the argmax / argmin too).
Val tlMaxMin(Specializer& sp, const std::string& name, CallSite& call) {
  // reduction_ordering: max and min are exact, and ties keep the lowest index, so every order
  // gives INNER_TREE's result.
  BoundArgs a(call, {"input", "axis=", "return_indices=", "return_indices_tie_break_left=",
                     "keep_dims=", "reduction_ordering="});
  innerTreeOrdering(a, "tl." + name);
  return sp.reduceOp(name, a.get("input"), a, call.loc);
}

Val tlArgMaxMin(Specializer& sp, const std::string& name, CallSite& call) {
  BoundArgs a(call, {"input", "axis", "tie_break_left=", "keep_dims=", "reduction_ordering="});
  innerTreeOrdering(a, "tl." + name); // exact: every order gives INNER_TREE's result
  return sp.reduceOp(name, a.get("input"), a, call.loc);
}

/// tl.xor_sum: Triton's reduce with `a ^ b` as the combine function, for integers (bool
/// included) only.
Val tlXorSum(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"input", "axis=", "keep_dims="});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), "tl.xor_sum's input");
  if (x->type().isPointer() || !ir::isInt(x->type().elem))
    raiseError(loc, "xor_sum only supported for integers");
  if (x->type().isScalar()) return Val::runtime(x);
  bool keepDims =
      a.has("keep_dims") && sp.constBool(a.get("keep_dims"), a.loc("keep_dims"), "keep_dims");
  std::vector<int64_t> origShape = x->type().shape;
  int64_t axis;
  if (!a.has("axis")) {
    x = sp.reshape(x, {x->type().numElements()}, loc);
    axis = 0;
  } else {
    axis = normAxis(sp.constInt(a.get("axis"), a.loc("axis"), "tl.xor_sum's axis", a.expr("axis")),
                    origShape.size(), a.loc("axis"), "tl.xor_sum");
  }
  std::vector<int64_t> shape = x->type().shape;
  shape.erase(shape.begin() + axis);
  DType elem = x->type().elem;
  ir::Op* op =
      sp.b.create(OpCode::Reduce, {x}, {ir::Type::tensor(elem, shape)},
                  {ir::attr::Reduce::make::axis(axis), ir::attr::Reduce::make::kind("custom")});
  ir::Block* region = op->addRegion();
  ir::Value* lhs = region->addArg(ir::Type::scalar(elem));
  ir::Value* rhs = region->addArg(ir::Type::scalar(elem));
  ir::Block* outer = sp.b.insertionBlock();
  sp.b.setInsertionBlock(region);
  sp.b.create(OpCode::Yield, {sp.b.binary(OpCode::Xor, lhs, rhs)}, {});
  sp.b.setInsertionBlock(outer);
  ir::Value* r = op->result(0);
  if (keepDims)
    r = a.has("axis") ? sp.expandDims(r, axis, loc)
                      : sp.reshape(r, std::vector<int64_t>(origShape.size(), 1), loc);
  return Val::runtime(r);
}

/// tl.reduce / tl.associative_scan with a @jit combine_fn.
Val tlCustomReduceOrScan(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  bool scan = name == "associative_scan";
  BoundArgs a =
      scan ? BoundArgs(call, {"input", "axis", "combine_fn", "reverse="})
           : BoundArgs(call, {"input", "axis", "combine_fn", "keep_dims=", "reduction_ordering="});
  std::vector<ir::Value*> inputs;
  const Val& in0 = a.get("input");
  if (in0.kind == Val::Kind::Tuple)
    for (const Val& e : in0.elts)
      inputs.push_back(sp.requireTensorOrScalar(e, a.loc("input"), fn + "'s input"));
  else
    inputs.push_back(sp.requireTensorOrScalar(in0, a.loc("input"), fn + "'s input"));
  int64_t axis = -1000;
  if (a.has("axis"))
    axis = sp.constInt(a.get("axis"), a.loc("axis"), fn + "'s axis", a.expr("axis"));
  else if (scan)
    raiseError(loc, "tl.associative_scan needs an axis");
  bool flag =
      scan ? (a.has("reverse") && sp.constBool(a.get("reverse"), a.loc("reverse"), "reverse"))
           : (a.has("keep_dims") &&
              sp.constBool(a.get("keep_dims"), a.loc("keep_dims"), "keep_dims"));
  if (!scan && innerTreeOrdering(a, fn) && !inputs[0]->type().isScalar()) {
    const Val& combine = a.get("combine_fn");
    auto pairs = [&](const std::vector<ir::Value*>& xs, int64_t ax) {
      Val r = sp.customReduce(xs, ax, combine, false, false, false, loc);
      std::vector<ir::Value*> out;
      for (const Val& v : r.kind == Val::Kind::Tuple ? r.elts : std::vector<Val>{r})
        out.push_back(v.v);
      return out;
    };
    const size_t rank = inputs[0]->type().shape.size();
    if (axis == -1000) {
      for (ir::Value*& v : inputs) v = sp.reshape(v, {v->type().numElements()}, loc);
      inputs = innerTree(sp, inputs, 0, loc, pairs);
      for (ir::Value*& v : inputs) v = sp.reshape(v, std::vector<int64_t>(rank, 1), loc);
    } else {
      inputs = innerTree(sp, inputs, normAxis(axis, rank, loc, fn), loc, pairs);
    }
  }
  Val r = sp.customReduce(inputs, axis, a.get("combine_fn"), scan ? false : flag, scan,
                          scan ? flag : false, loc);
  // A tuple of inputs gives a tuple of results, a 1-tuple too (`(s,) = tl.reduce((x,), ...)`).
  if (in0.kind == Val::Kind::Tuple) return r.kind == Val::Kind::Tuple ? r : Val::tuple({r});
  return r.kind == Val::Kind::Tuple ? r.elts[0] : r;
}

/// tl.cumsum / tl.cumprod.
Val tlCumulative(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"input", "axis=", "reverse=", "dtype="});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), fn + "'s input");
  if (x->type().isScalar()) raiseError(loc, fn + " needs a tensor");
  int64_t axis = a.has("axis") ? sp.constInt(a.get("axis"), a.loc("axis"), fn + "'s axis") : 0;
  axis = normAxis(axis, x->type().shape.size(), loc, fn);
  bool reverse = a.has("reverse") && sp.constBool(a.get("reverse"), a.loc("reverse"), "reverse");
  // Triton's cumsum / cumprod promote bfloat16 to fp32 first (the scan runs and returns fp32).
  if (x->type().elem == DType::BF16) x = sp.cast(x, DType::F32, loc);
  if (a.has("dtype"))
    x = sp.cast(x, sp.constDType(a.get("dtype"), a.loc("dtype"), "dtype"), loc);
  else if (ir::isInt(x->type().elem) && ir::bitWidth(x->type().elem) < 32)
    x = sp.cast(x, ir::isSigned(x->type().elem) ? DType::I32 : DType::U32, loc);
  return Val::runtime(
      sp.b.create1(OpCode::Scan, {x}, x->type(),
                   {ir::attr::Scan::make::axis(axis), ir::attr::Scan::make::reverse(reverse),
                    ir::attr::Scan::make::kind(name == "cumsum" ? "sum" : "prod")}));
}

Val tlDot(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"input", "other", "acc=", "input_precision=", "allow_tf32=",
                     "max_num_imprecise_acc=", "out_dtype=", "attrs=", "two_ctas="});
  const Val &x = a.get("input"), &y = a.get("other");
  if (!x.isRuntime() || !y.isRuntime() || x.type().shape.size() <= 3) return sp.dot(a, loc);
  // Triton's dot takes any number of leading batch dimensions. More than one are merged into one
  // (a row-major reshape), the batched dot runs, and its result takes them back.
  const std::vector<int64_t>&sx = x.type().shape, &sy = y.type().shape;
  const size_t r = sx.size();
  std::vector<int64_t> batch(sx.begin(), sx.end() - 2);
  if (sy.size() != r || !std::equal(batch.begin(), batch.end(), sy.begin()))
    raiseError(loc, "tl.dot's operands must have the same batch dimensions, got " + shapeStr(sx) +
                        " and " + shapeStr(sy));
  int64_t n = 1;
  for (int64_t d : batch) n *= d;
  auto merged = [&](ir::Value* v) {
    const std::vector<int64_t>& s = v->type().shape;
    return Val::runtime(sp.reshape(v, {n, s[r - 2], s[r - 1]}, loc));
  };
  CallSite c = call;
  auto replace = [&](size_t pos, const char* name, const Val& v) {
    if (pos < c.args.size()) {
      c.args[pos] = v;
      return;
    }
    for (size_t i = 0; i < c.kwNames.size(); ++i)
      if (c.kwNames[i] == name) c.kwVals[i] = v;
  };
  replace(0, "input", merged(x.v));
  replace(1, "other", merged(y.v));
  if (a.has("acc") && a.get("acc").isRuntime() && a.get("acc").type().shape.size() == r)
    replace(2, "acc", merged(a.get("acc").v));
  BoundArgs b(c, {"input", "other", "acc=", "input_precision=", "allow_tf32=",
                  "max_num_imprecise_acc=", "out_dtype=", "attrs=", "two_ctas="});
  Val z = sp.dot(b, loc);
  std::vector<int64_t> shape = batch;
  shape.push_back(sx[r - 2]);
  shape.push_back(sy[r - 1]);
  return Val::runtime(sp.reshape(z.v, shape, loc));
}

Val tlAbs(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"x"});
  if (a.get("x").isConstexpr()) return sp.callPython("abs", call);
  ir::Value* x = sp.requireTensorOrScalar(a.get("x"), a.loc("x"), "tl.abs's argument");
  if (x->type().isPointer()) raiseError(a.loc("x"), "tl.abs needs a number, got a pointer");
  if (ir::isInt(x->type().elem) && !ir::isSigned(x->type().elem)) return Val::runtime(x);
  return Val::runtime(sp.b.create1(OpCode::Abs, {x}, x->type()));
}

Val tlFma(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"x", "y", "z"});
  std::vector<Val> vs = {a.get("x"), a.get("y"), a.get("z")};
  DType dt = DType::F32;
  bool first = true;
  for (const Val& v : vs) {
    if (!v.isRuntime()) continue;
    dt = first ? v.type().elem
               : sp.computationType(dt, false, v.type().elem, false, false, loc, "tl.fma");
    first = false;
  }
  if (!ir::isFloat(dt)) dt = DType::F32;
  std::vector<int64_t> shape;
  for (const Val& v : vs)
    if (v.isRuntime()) shape = sp.broadcastShapes(shape, v.type().shape, loc, "tl.fma");
  std::vector<ir::Value*> ops;
  for (size_t i = 0; i < vs.size(); ++i) {
    ir::Value* x = vs[i].isRuntime()
                       ? sp.cast(sp.requireTensorOrScalar(vs[i], loc, "tl.fma's operand"), dt, loc)
                       : sp.constant(vs[i], ir::Type::scalar(dt));
    ops.push_back(sp.broadcastTo(x, shape, loc));
  }
  return Val::runtime(sp.b.create1(OpCode::Fma, ops, ops[0]->type()));
}

/// tl.fdiv / tl.div_rn (libdevice.div_rn too): `x / y`, with IEEE rounding for div_rn and
/// fdiv(ieee_rounding=True) (plain fp32 `/` is Triton's approximate div.full.f32 on GPUs).
Val tlFdiv(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"x", "y", "ieee_rounding="});
  bool ieee = name == "div_rn";
  if (a.has("ieee_rounding"))
    ieee = ieee || sp.constBool(a.get("ieee_rounding"), a.loc("ieee_rounding"), "ieee_rounding");
  Val q = sp.evalBinOp(ast::BinOpKind::Div, a.get("x"), a.get("y"), loc);
  if (ieee && q.v && q.v->def() && q.v->def()->code() == OpCode::Div)
    ir::attr::Div::set::approx(*q.v->def(), false);
  return q;
}

Val tlUmulhi(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"x", "y"});
  auto [x, y] = sp.unify(a.get("x"), a.get("y"), loc, std::nullopt, "tl.umulhi");
  if (!ir::isInt(x->type().elem) || x->type().elem != y->type().elem)
    raiseError(loc, "tl.umulhi needs two integer operands of one type");
  return Val::runtime(sp.b.binary(OpCode::Umulhi, x, y));
}

Val tlSoftmax(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"x", "dim=", "keep_dims=", "ieee_rounding="});
  ir::Value* x = sp.requireTensorOrScalar(a.get("x"), a.loc("x"), "tl.softmax's input");
  if (x->type().isScalar()) raiseError(loc, "tl.softmax needs a tensor");
  int64_t axis = a.has("dim") ? sp.constInt(a.get("dim"), a.loc("dim"), "tl.softmax's dim")
                              : static_cast<int64_t>(x->type().shape.size()) - 1;
  CallSite mx;
  mx.loc = loc;
  mx.callee = "tl.max";
  mx.args = {Val::runtime(x), Val::integer(axis)};
  mx.argLocs = {loc, loc};
  mx.argExprs = {nullptr, nullptr};
  mx.kwNames = {"keep_dims"};
  mx.kwVals = {Val::boolean(true)};
  mx.kwLocs = {loc};
  mx.kwExprs = {nullptr};
  Val m = sp.callTl("max", mx);
  Val z = sp.evalBinOp(ast::BinOpKind::Sub, Val::runtime(x), m, loc);
  CallSite ex;
  ex.loc = loc;
  ex.callee = "tl.exp";
  ex.args = {z};
  ex.argLocs = {loc};
  ex.argExprs = {nullptr};
  Val num = sp.callTl("exp", ex);
  CallSite sm = mx;
  sm.callee = "tl.sum";
  sm.args = {num, Val::integer(axis)};
  Val den = sp.callTl("sum", sm);
  return sp.evalBinOp(ast::BinOpKind::Div, num, den, loc);
}

Val tlCast(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"input", "dtype", "fp_downcast_rounding=", "bitcast="});
  const Val& dv = a.get("dtype");
  if (dv.kind != Val::Kind::DType)
    raiseError(a.loc("dtype"),
               fn + "'s dtype must be a dtype such as tl.float16, got " + describe(dv));
  bool bitcast = a.has("bitcast") && sp.constBool(a.get("bitcast"), a.loc("bitcast"), "bitcast");
  if (a.get("input").isNumber()) {
    if (dv.dtypeIsPointer) raiseError(loc, "cannot cast a number to a pointer");
    return Val::runtime(sp.toRuntime(a.get("input"), loc, dv.dtype));
  }
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), fn + "'s input");
  if (dv.dtypeIsPointer) return Val::runtime(sp.castPtr(x, dv.dtype, loc));
  ir::Value* r = sp.cast(x, dv.dtype, loc, bitcast);
  if (a.has("fp_downcast_rounding") && r->def() && r->def()->code() == OpCode::Cast) {
    const Val& rv = a.get("fp_downcast_rounding");
    if (rv.kind != Val::Kind::String || (rv.s != "rtne" && rv.s != "rtz"))
      raiseError(a.loc("fp_downcast_rounding"), "fp_downcast_rounding must be 'rtne' or 'rtz'");
    ir::attr::Cast::set::rounding(*r->def(), rv.s);
  }
  return Val::runtime(r);
}

/// tl.multiple_of / tl.max_contiguous: hints carried as ops.
Val tlHint(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string& fn = call.callee;
  BoundArgs a(call, {"input", "values"});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), fn + "'s input");
  std::vector<int64_t> values;
  const Val& vs = a.get("values");
  if (vs.kind == Val::Kind::Tuple)
    for (const Val& v : vs.elts)
      values.push_back(sp.constInt(v, a.loc("values"), fn + "'s values"));
  else
    values.push_back(sp.constInt(vs, a.loc("values"), fn + "'s values", a.expr("values")));
  size_t rank = std::max<size_t>(1, x->type().shape.size());
  if (values.size() != rank)
    raiseError(a.loc("values"), fn + " needs one value per dimension (" + std::to_string(rank) +
                                    ") of " + x->type().str() + ", got " +
                                    std::to_string(values.size()));
  return Val::runtime(sp.b.create1(
      name == "multiple_of" ? OpCode::MultipleOf : OpCode::MaxContiguous, {x}, x->type(),
      {name == "multiple_of" ? ir::attr::MultipleOf::make::values(values)
                             : ir::attr::MaxContiguous::make::values(values)}));
}

Val tlMakeTensorDescriptor(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"base", "shape", "strides", "block_shape", "padding_option="});
  const Val& base = a.get("base");
  if (!base.isRuntime() || !base.type().isPointer() || !base.type().isScalar())
    raiseError(a.loc("base"),
               "tl.make_tensor_descriptor's base must be a pointer, got " + kindName(base));
  const Val &shape = a.get("shape"), &strides = a.get("strides");
  if (shape.kind != Val::Kind::Tuple || strides.kind != Val::Kind::Tuple)
    raiseError(loc, "tl.make_tensor_descriptor's shape and strides must be tuples or lists");
  std::vector<int64_t> block =
      sp.constShape(a.get("block_shape"), a.loc("block_shape"),
                    "tl.make_tensor_descriptor's block_shape", a.expr("block_shape"));
  checkPow2(block, a.loc("block_shape"), "a descriptor's block_shape");
  if (shape.elts.size() != strides.elts.size() || shape.elts.size() != block.size())
    raiseError(loc, "tl.make_tensor_descriptor: shape, strides and block_shape must have one "
                    "rank, got " +
                        std::to_string(shape.elts.size()) + ", " +
                        std::to_string(strides.elts.size()) + " and " +
                        std::to_string(block.size()));
  if (block.size() < 1 || block.size() > 5) raiseError(loc, "tensor descriptors have rank 1 to 5");
  // TMA copies rows of at least 16 bytes; Triton refuses narrower blocks with this text.
  int64_t elemBytes = ir::bitWidth(base.type().elem) / 8;
  if (block.back() * elemBytes < 16)
    raiseError(
        a.loc("block_shape"),
        "Descriptor block shape must have at least 16 bytes in the last dimension, but got " +
            std::to_string(block.back()) + " * " + std::to_string(elemBytes) + " = " +
            std::to_string(block.back() * elemBytes) + " bytes");
  std::vector<ir::Value*> ops{base.v};
  for (const Val& s : shape.elts)
    ops.push_back(
        sp.cast(sp.requireScalarI32(s, a.loc("shape"), "a descriptor dimension"), DType::I32, loc));
  for (const Val& s : strides.elts) {
    ir::Value* v = s.isRuntime() ? s.v : sp.toRuntime(s, a.loc("strides"), DType::I64);
    if (!v->type().isScalar() || !ir::isInt(v->type().elem))
      raiseError(a.loc("strides"), "descriptor strides must be integer scalars");
    ops.push_back(sp.cast(v, DType::I64, loc));
  }
  ir::Type t = ir::Type::descriptor(base.type().elem, block, static_cast<int>(block.size()));
  return Val::runtime(sp.b.create1(OpCode::MakeDescriptor, ops, t,
                                   {ir::attr::MakeDescriptor::make::blockShape(block)}));
}

/// desc.load(offsets) / desc.store(offsets, value): methods of a tensor descriptor.
Val tlDescLoadStore(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  bool isLoad = name == "desc.load";
  BoundArgs a =
      isLoad ? BoundArgs(call, {"desc", "offsets"}) : BoundArgs(call, {"desc", "offsets", "value"});
  ir::Value* d = sp.requireDescriptor(a.get("desc"), a.loc("desc"), "the receiver");
  const ir::Type& dt = d->type();
  const Val& offs = a.get("offsets");
  if (offs.kind != Val::Kind::Tuple || offs.elts.size() != dt.shape.size())
    raiseError(a.loc("offsets"), std::string(isLoad ? "desc.load" : "desc.store") + " needs " +
                                     std::to_string(dt.shape.size()) +
                                     " offsets, one per "
                                     "dimension of " +
                                     dt.str());
  std::vector<ir::Value*> offsets;
  for (const Val& o : offs.elts)
    offsets.push_back(sp.requireScalarI32(o, a.loc("offsets"), "a descriptor offset"));
  ir::Type tile = ir::Type::tensor(dt.elem, dt.shape);
  if (isLoad) {
    std::vector<ir::Value*> ops{d};
    ops.insert(ops.end(), offsets.begin(), offsets.end());
    return Val::runtime(sp.b.create1(OpCode::DescLoad, ops, tile));
  }
  ir::Value* v = sp.requireTensorOrScalar(a.get("value"), a.loc("value"), "desc.store's value");
  if (v->type().shape != dt.shape)
    raiseError(a.loc("value"), "desc.store's value has type " + v->type().str() +
                                   " but the descriptor's block is " + shapeStr(dt.shape));
  v = sp.cast(v, dt.elem, loc);
  std::vector<ir::Value*> ops{d, v};
  ops.insert(ops.end(), offsets.begin(), offsets.end());
  sp.b.create(OpCode::DescStore, ops, {});
  return Val::none();
}

Val tlDebugBarrier(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {});
  sp.b.create(OpCode::DebugBarrier, {}, {});
  return Val::none();
}

Val tlStaticAssert(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"cond", "msg="});
  bool ok =
      sp.constBool(a.get("cond"), a.loc("cond"), "tl.static_assert's condition", a.expr("cond"));
  if (!ok) {
    std::string msg =
        a.has("msg")
            ? (a.get("msg").kind == Val::Kind::String ? a.get("msg").s : describe(a.get("msg")))
            : "";
    raiseError(loc, "static assertion failed" + (msg.empty() ? std::string() : ": " + msg));
  }
  return Val::none();
}

Val tlStaticPrint(Specializer& /*sp*/, const std::string& /*name*/, CallSite& call) {
  std::string line;
  for (size_t i = 0; i < call.args.size(); ++i) {
    if (i) line += ' ';
    line += call.args[i].kind == Val::Kind::String ? call.args[i].s : describe(call.args[i]);
  }
  std::cerr << line << "\n";
  return Val::none();
}

Val tlDevicePrint(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"prefix", "*args", "hex="});
  const Val& prefix = a.get("prefix");
  if (prefix.kind != Val::Kind::String)
    raiseError(a.loc("prefix"), "tl.device_print's first argument must be a string prefix");
  std::vector<ir::Value*> ops;
  if (a.has("args"))
    for (const Val& v : a.get("args").elts)
      ops.push_back(sp.requireTensorOrScalar(v, a.loc("args"), "a printed value"));
  bool hex = a.has("hex") && sp.constBool(a.get("hex"), a.loc("hex"), "hex");
  sp.b.create(OpCode::Print, ops, {},
              {ir::attr::Print::make::prefix(prefix.s), ir::attr::Print::make::hex(hex)});
  return Val::none();
}

Val tlDeviceAssert(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"cond", "msg="});
  std::string msg = a.has("msg") && a.get("msg").kind == Val::Kind::String ? a.get("msg").s : "";
  if (a.get("cond").isConstexpr()) {
    if (!truthy(a.get("cond")))
      raiseError(loc, "assertion failed" + (msg.empty() ? "" : ": " + msg));
    return Val::none();
  }
  ir::Value* c = sp.toI1(
      sp.requireTensorOrScalar(a.get("cond"), a.loc("cond"), "tl.device_assert's condition"), loc);
  sp.b.create(OpCode::Assert, {c}, {}, {ir::attr::Assert::make::message(msg)});
  return Val::none();
}

Val tlConstexpr(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"value"});
  if (!a.get("value").isConstexpr())
    sp.needConstexpr(a.loc("value"), "tl.constexpr's value", a.expr("value"));
  return a.get("value");
}

Val tlConstexprType(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  // Triton's constexpr_type(v): the type of the compile-time value v (what `v.type` gives).
  BoundArgs a(call, {"value"});
  if (!a.get("value").isConstexpr())
    sp.needConstexpr(a.loc("value"), "constexpr_type's value", a.expr("value"));
  return typeOf(a.get("value"), a.loc("value"));
}

Val tlPointerType(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"element_ty", "address_space="});
  return Val::dtypeOf(
      sp.constDType(a.get("element_ty"), a.loc("element_ty"), "tl.pointer_type's element type"),
      true);
}

/// The elementwise math functions of one float argument (computed in fp32 for narrower floats).
template <OpCode mop> Val tlUnaryMath(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"x"});
  ir::Value* x = sp.requireTensorOrScalar(a.get("x"), a.loc("x"), fn + "'s argument");
  DType d = x->type().elem;
  if (x->type().isPointer() || !ir::isFloat(d))
    raiseError(a.loc("x"), fn + " needs a floating-point argument, got " + x->type().str() +
                               "; convert it first (x.to(tl.float32))");
  bool narrow = d != DType::F32 && d != DType::F64;
  if (narrow) x = sp.cast(x, DType::F32, loc);
  // The GPU targets compute fp64 exp / log / sin / cos as libdevice does (the interpreter in
  // double precision directly).
  if (sp.in.cudaTarget)
    if (ir::Value* r = float64Math(sp, mop, x, loc)) return Val::runtime(r);
  std::vector<ir::NamedAttr> attrs;
  if (mop == OpCode::Sqrt) attrs.push_back(ir::attr::Sqrt::make::approx(name == "sqrt"));
  ir::Value* r = sp.b.create1(mop, {x}, x->type(), attrs);
  if (narrow) r = sp.cast(r, d, loc);
  return Val::runtime(r);
}

/// atomic_add, ..., atomic_xchg (atomic_rmw) and atomic_cas.
Val tlAtomic(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  std::string kind = name.substr(7);
  bool isCas = kind == "cas";
  BoundArgs a = isCas ? BoundArgs(call, {"pointer", "cmp", "val", "sem=", "scope="})
                      : BoundArgs(call, {"pointer", "val", "mask=", "sem=", "scope="});
  const Val& p = a.get("pointer");
  if (!p.isRuntime() || !p.type().isPointer())
    raiseError(a.loc("pointer"),
               fn + "'s pointer must be a pointer or pointer tensor, got " + kindName(p));
  if (!isCas) sp.checkStoreTarget(p.v, a.loc("pointer")); // as Triton: atomic_cas is not checked
  std::string sem = "acq_rel", scope = "gpu";
  if (a.has("sem")) {
    const Val& s = a.get("sem");
    if (s.kind != Val::Kind::String ||
        (s.s != "relaxed" && s.s != "acquire" && s.s != "release" && s.s != "acq_rel"))
      raiseError(a.loc("sem"), "sem must be 'relaxed', 'acquire', 'release' or 'acq_rel'");
    sem = s.s;
  }
  if (a.has("scope")) {
    const Val& s = a.get("scope");
    if (s.kind != Val::Kind::String || (s.s != "gpu" && s.s != "cta" && s.s != "sys"))
      raiseError(a.loc("scope"), "scope must be 'gpu', 'cta' or 'sys'");
    scope = s.s;
  }
  DType elem = p.type().elem;
  std::vector<int64_t> shape = p.type().shape;
  auto operand = [&](const char* n) {
    const Val& v = a.get(n);
    if (v.isRuntime()) shape = sp.broadcastShapes(shape, v.type().shape, loc, fn.c_str());
    return v;
  };
  Val val = operand("val");
  Val cmpv = isCas ? operand("cmp") : Val::none();
  Val mask = !isCas && a.has("mask") ? operand("mask") : Val::none();
  ir::Value* ptr = sp.broadcastTo(p.v, shape, loc);
  auto asElem = [&](const Val& v, const char* what) {
    ir::Value* x = v.isRuntime() ? sp.cast(sp.requireTensorOrScalar(v, loc, what), elem, loc)
                                 : sp.constant(v, ir::Type::scalar(elem));
    return sp.broadcastTo(x, shape, loc);
  };
  ir::Type rt = ir::Type::tensor(elem, shape);
  if (isCas) {
    ir::Value* c = asElem(cmpv, "atomic_cas's cmp");
    ir::Value* v = asElem(val, "atomic_cas's val");
    return Val::runtime(sp.b.create1(
        OpCode::AtomicCas, {ptr, c, v}, rt,
        {ir::attr::AtomicCas::make::sem(sem), ir::attr::AtomicCas::make::scope(scope)}));
  }
  if ((kind == "and" || kind == "or" || kind == "xor") && ir::isFloat(elem))
    raiseError(loc, fn + " needs an integer pointer, got " + p.type().str());
  // Triton's element types for the read-modify-write atomics: no 8- or 16-bit integers, no fp8,
  // and 16-bit floats only for atomic_add.
  if (elem == DType::I16 || elem == DType::U16 || ir::bitWidth(elem) < 16)
    raiseError(a.loc("pointer"), fn + " does not support " + std::string(ir::tlName(elem)) +
                                     " elements; it takes 32- or 64-bit integers and floats "
                                     "(and fp16/bf16 for atomic_add)");
  if ((elem == DType::F16 || elem == DType::BF16) && kind != "add")
    raiseError(a.loc("pointer"), fn + " does not support " + std::string(ir::tlName(elem)) +
                                     " elements; only atomic_add takes fp16/bf16");
  std::vector<ir::Value*> ops{ptr, asElem(val, "the atomic's val")};
  if (!mask.isNone())
    ops.push_back(sp.broadcastTo(
        sp.toI1(sp.requireTensorOrScalar(mask, a.loc("mask"), "mask"), loc), shape, loc));
  return Val::runtime(sp.b.create1(
      OpCode::AtomicRMW, ops, rt,
      {ir::attr::AtomicRMW::make::kind(kind), ir::attr::AtomicRMW::make::hasMask(!mask.isNone()),
       ir::attr::AtomicRMW::make::sem(sem), ir::attr::AtomicRMW::make::scope(scope)}));
}

/// tl.range and tl.static_range exist only as the iterable of a for loop (Specializer.cpp).
Val tlForIterableOnly(Specializer& /*sp*/, const std::string& name, CallSite& call) {
  raiseError(call.loc, "tl." + name + "(...) can only be used as the iterable of a 'for' loop");
}

Val tlInlineAsmElementwise(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  return sp.inlineAsmElementwise(call);
}

} // namespace

const BuiltinTable& tlBuiltins() {
  // In the order "did you mean" prefers among equally near names.
  static const BuiltinTable table({
      {"program_id", &tlProgramQuery},
      {"num_programs", &tlProgramQuery},
      {"arange", &tlArange},
      {"zeros", &tlFull},
      {"zeros_like", &tlFullLike},
      {"full", &tlFull},
      {"full_like", &tlFullLike},
      {"cdiv", &tlCdiv},
      {"load", &tlLoad},
      {"store", &tlStore},
      {"broadcast_to", &tlBroadcastTo},
      {"broadcast", &tlBroadcast},
      {"expand_dims", &tlExpandDims},
      {"reshape", &tlReshape},
      {"view", &tlReshape},
      {"permute", &tlPermute},
      {"trans", &tlPermute},
      {"split", &tlSplit},
      {"join", &tlJoin},
      {"cat", &tlCat},
      {"where", &tlWhere},
      {"maximum", &tlMaximumMinimum},
      {"minimum", &tlMaximumMinimum},
      {"clamp", &tlClamp},
      {"sum", &tlSum},
      {"max", &tlMaxMin},
      {"min", &tlMaxMin},
      {"argmax", &tlArgMaxMin},
      {"argmin", &tlArgMaxMin},
      {"reduce", &tlCustomReduceOrScan},
      {"cumsum", &tlCumulative},
      {"cumprod", &tlCumulative},
      {"associative_scan", &tlCustomReduceOrScan},
      {"dot", &tlDot},
      {"dot_scaled", &tlDotScaled},
      {"exp", &tlUnaryMath<OpCode::Exp>},
      {"exp2", &tlUnaryMath<OpCode::Exp2>},
      {"log", &tlUnaryMath<OpCode::Log>},
      {"log2", &tlUnaryMath<OpCode::Log2>},
      {"sqrt", &tlUnaryMath<OpCode::Sqrt>},
      {"sqrt_rn", &tlUnaryMath<OpCode::Sqrt>},
      {"rsqrt", &tlUnaryMath<OpCode::Rsqrt>},
      {"abs", &tlAbs},
      {"fma", &tlFma},
      {"sigmoid", &tlUnaryMath<OpCode::Sigmoid>},
      {"softmax", &tlSoftmax},
      {"sin", &tlUnaryMath<OpCode::Sin>},
      {"cos", &tlUnaryMath<OpCode::Cos>},
      {"erf", &tlUnaryMath<OpCode::Erf>},
      {"tanh", &tlUnaryMath<OpCode::Tanh>},
      {"floor", &tlUnaryMath<OpCode::Floor>},
      {"ceil", &tlUnaryMath<OpCode::Ceil>},
      {"cast", &tlCast},
      {"multiple_of", &tlHint},
      {"max_contiguous", &tlHint},
      {"make_tensor_descriptor", &tlMakeTensorDescriptor},
      {"make_block_ptr", &tlMakeBlockPtr},
      {"advance", &tlAdvance},
      {"atomic_add", &tlAtomic},
      {"atomic_max", &tlAtomic},
      {"atomic_min", &tlAtomic},
      {"atomic_and", &tlAtomic},
      {"atomic_or", &tlAtomic},
      {"atomic_xor", &tlAtomic},
      {"atomic_xchg", &tlAtomic},
      {"atomic_cas", &tlAtomic},
      {"debug_barrier", &tlDebugBarrier},
      {"static_range", &tlForIterableOnly},
      {"range", &tlForIterableOnly},
      {"static_assert", &tlStaticAssert},
      {"static_print", &tlStaticPrint},
      {"device_print", &tlDevicePrint},
      {"device_assert", &tlDeviceAssert},
      {"constexpr", &tlConstexpr},
      {"constexpr_type", &tlConstexprType},
      {"pointer_type", &tlPointerType},
      {"umulhi", &tlUmulhi},
      {"inline_asm_elementwise", &tlInlineAsmElementwise},
      {"div_rn", &tlFdiv},
      {"fdiv", &tlFdiv},
      {"ravel", &tlRavel},
      {"xor_sum", &tlXorSum},
      {"flip", &tlFlip},
      {"interleave", &tlInterleave},
      {"squeeze", &tlSqueezeUnsqueeze},
      {"unsqueeze", &tlSqueezeUnsqueeze},
      {"histogram", &tlHistogram},
      {"assume", &tlAssume},
      {"condition", &tlCondition},
      {"sort", &tlSortTopk},
      {"topk", &tlSortTopk},
      {"swizzle2d", &tlSwizzle2d},
      {"gather", &tlGather},
      {"map_elementwise", &tlMapElementwise},
      {"item", &tlItem, /*member=*/false},
      {"randint", &tlRandom},
      {"randint4x", &tlRandom},
      {"rand", &tlRandom},
      {"rand4x", &tlRandom},
      {"randn", &tlRandom},
      {"randn4x", &tlRandom},
      {"philox", &tlRandom},
      {"philox_impl", &tlRandom},
      {"uint_to_uniform_float", &tlRandom},
      {"pair_uniform_to_normal", &tlRandom},
      {"desc.load", &tlDescLoadStore, /*member=*/false},
      {"desc.store", &tlDescLoadStore, /*member=*/false},
  });
  return table;
}

Val Specializer::callTl(const std::string& name, CallSite& call) {
  if (call.callee.empty()) call.callee = "tl." + name;
  if (BuiltinHandler handler = tlBuiltins().find(name)) return handler(*this, name, call);
  unknownMember("tl", name, call.loc);
}

// ---------------------------------------------------------------------------------------------
// load / store
// ---------------------------------------------------------------------------------------------

Val Specializer::loadOp(const BoundArgs& a, SourceLoc loc) {
  const Val& p = a.get("pointer");
  if (p.kind == Val::Kind::BlockPtr) return blockPtrLoad(*this, a, loc);
  if (p.isRuntime() && p.type().kind == ir::TypeKind::Descriptor)
    raiseError(a.loc("pointer"), "tl.load takes pointers; load from a tensor descriptor with "
                                 "desc.load([offsets])");
  if (!p.isRuntime() || !p.type().isPointer())
    raiseError(a.loc("pointer"), "tl.load's pointer must be a pointer or a tensor of pointers, "
                                 "got " +
                                     kindName(p));
  if (a.has("boundary_check") && !a.get("boundary_check").elts.empty())
    raiseError(a.loc("boundary_check"),
               "boundary_check applies to block pointers "
               "(tl.make_block_ptr); with a tensor of pointers use a mask");
  if (a.has("other") && !a.has("mask"))
    raiseError(a.loc("other"), "tl.load's 'other' needs a 'mask' (other fills masked-off lanes)");
  std::vector<int64_t> shape = p.type().shape;
  ir::Value* mask = nullptr;
  if (a.has("mask")) {
    mask = toI1(requireTensorOrScalar(a.get("mask"), a.loc("mask"), "tl.load's mask"), loc);
    shape = broadcastShapes(shape, mask->type().shape, a.loc("mask"), "tl.load's pointer and mask");
    mask = broadcastTo(mask, shape, loc);
  }
  ir::Value* ptr = broadcastTo(p.v, shape, loc);
  DType elem = p.type().elem;
  ir::Value* other = nullptr;
  if (a.has("other")) {
    const Val& o = a.get("other");
    if (o.isNumber())
      other = constant(o, ir::Type::tensor(elem, shape));
    else {
      other = requireTensorOrScalar(o, a.loc("other"), "tl.load's other");
      std::vector<int64_t> s = broadcastShapes(shape, other->type().shape, a.loc("other"),
                                               "tl.load's pointer and other");
      if (s != shape)
        raiseError(a.loc("other"), "tl.load's other (" + other->type().str() +
                                       ") does not fit the loaded shape " + shapeStr(shape));
      other = broadcastTo(cast(other, elem, loc), shape, loc);
    }
  }
  std::vector<ir::Value*> ops{ptr};
  if (mask) ops.push_back(mask);
  if (other) ops.push_back(other);
  bool isVolatile =
      a.has("volatile") && constBool(a.get("volatile"), a.loc("volatile"), "volatile");
  std::vector<ir::NamedAttr> attrs = {ir::attr::Load::make::hasMask(mask != nullptr),
                                      ir::attr::Load::make::hasOther(other != nullptr)};
  std::string cache =
      cacheModifier(a.get("cache_modifier"), a.loc("cache_modifier"), OpCode::Load, "tl.load");
  std::string evict =
      evictionPolicy(a.get("eviction_policy"), a.loc("eviction_policy"), OpCode::Load, "tl.load");
  if (!cache.empty()) attrs.push_back(ir::attr::Load::make::cache(cache));
  if (!evict.empty()) attrs.push_back(ir::attr::Load::make::evict(evict));
  if (isVolatile) attrs.push_back(ir::attr::Load::make::isVolatile(true));
  if (a.has("padding_option") && a.get("padding_option").kind == Val::Kind::String &&
      !a.get("padding_option").s.empty())
    raiseError(a.loc("padding_option"), "padding_option applies to block pointers "
                                        "(tl.make_block_ptr); with a tensor of pointers use mask "
                                        "and other");
  return Val::runtime(b.create1(OpCode::Load, ops, ir::Type::tensor(elem, shape), attrs));
}

void Specializer::storeOp(const BoundArgs& a, SourceLoc loc) {
  const Val& p = a.get("pointer");
  if (p.kind == Val::Kind::BlockPtr) return blockPtrStore(*this, a, loc);
  if (p.isRuntime() && p.type().kind == ir::TypeKind::Descriptor)
    raiseError(a.loc("pointer"), "tl.store takes pointers; store to a tensor descriptor with "
                                 "desc.store([offsets], value)");
  if (!p.isRuntime() || !p.type().isPointer())
    raiseError(a.loc("pointer"), "tl.store's pointer must be a pointer or a tensor of pointers, "
                                 "got " +
                                     kindName(p));
  checkStoreTarget(p.v, a.loc("pointer"));
  if (a.has("boundary_check") && !a.get("boundary_check").elts.empty())
    raiseError(a.loc("boundary_check"),
               "boundary_check applies to block pointers "
               "(tl.make_block_ptr); with a tensor of pointers use a mask");
  DType elem = p.type().elem;
  const Val& v = a.get("value");
  std::vector<int64_t> shape = p.type().shape;
  ir::Value* value = nullptr;
  if (v.isNumber())
    value = constant(v, ir::Type::scalar(elem));
  else
    value = cast(requireTensorOrScalar(v, a.loc("value"), "tl.store's value"), elem, loc);
  shape =
      broadcastShapes(shape, value->type().shape, a.loc("value"), "tl.store's pointer and value");
  ir::Value* mask = nullptr;
  if (a.has("mask")) {
    mask = toI1(requireTensorOrScalar(a.get("mask"), a.loc("mask"), "tl.store's mask"), loc);
    shape =
        broadcastShapes(shape, mask->type().shape, a.loc("mask"), "tl.store's pointer and mask");
    mask = broadcastTo(mask, shape, loc);
  }
  std::vector<ir::Value*> ops{broadcastTo(p.v, shape, loc), broadcastTo(value, shape, loc)};
  if (mask) ops.push_back(mask);
  std::vector<ir::NamedAttr> attrs = {ir::attr::Store::make::hasMask(mask != nullptr)};
  std::string cache =
      cacheModifier(a.get("cache_modifier"), a.loc("cache_modifier"), OpCode::Store, "tl.store");
  std::string evict =
      evictionPolicy(a.get("eviction_policy"), a.loc("eviction_policy"), OpCode::Store, "tl.store");
  if (!cache.empty()) attrs.push_back(ir::attr::Store::make::cache(cache));
  if (!evict.empty()) attrs.push_back(ir::attr::Store::make::evict(evict));
  b.create(OpCode::Store, ops, {}, attrs);
}

// ---------------------------------------------------------------------------------------------
// Reductions and dot
// ---------------------------------------------------------------------------------------------

Val Specializer::reduceOp(const std::string& kind, const Val& input, const BoundArgs& a,
                          SourceLoc loc) {
  std::string fn = "tl." + kind;
  ir::Value* x = requireTensorOrScalar(input, a.loc("input"), fn + "'s input");
  if (x->type().isPointer()) raiseError(a.loc("input"), fn + " cannot reduce pointers");
  if (x->type().isScalar()) {
    if (kind == "argmax" || kind == "argmin") return Val::runtime(b.i32(0));
    return Val::runtime(x);
  }
  bool keepDims =
      a.has("keep_dims") && constBool(a.get("keep_dims"), a.loc("keep_dims"), "keep_dims");
  if (kind == "sum") {
    if (a.has("dtype"))
      x = cast(x, constDType(a.get("dtype"), a.loc("dtype"), "tl.sum's dtype"), loc);
    else if (ir::isInt(x->type().elem) && ir::bitWidth(x->type().elem) < 32)
      x = cast(x, ir::isSigned(x->type().elem) ? DType::I32 : DType::U32, loc);
    // bfloat16 sums in (and returns) fp32, as the TLX repository's Triton does (torch.sum too)
    if (x->type().elem == DType::BF16) x = cast(x, DType::F32, loc);
  }
  std::vector<int64_t> origShape = x->type().shape;
  int64_t axis;
  if (!a.has("axis")) {
    x = reshape(x, {x->type().numElements()}, loc);
    axis = 0;
  } else {
    axis = normAxis(constInt(a.get("axis"), a.loc("axis"), fn + "'s axis", a.expr("axis")),
                    origShape.size(), a.loc("axis"), fn);
  }
  std::vector<int64_t> shape = x->type().shape;
  shape.erase(shape.begin() + axis);
  auto finish = [&](ir::Value* r) -> ir::Value* {
    if (!keepDims) return r;
    if (!a.has("axis")) return reshape(r, std::vector<int64_t>(origShape.size(), 1), loc);
    return expandDims(r, axis, loc);
  };
  auto reduce = [&](const std::string& k, DType resultElem) {
    return b.create1(OpCode::Reduce, {x}, ir::Type::tensor(resultElem, shape),
                     {ir::attr::Reduce::make::axis(axis), ir::attr::Reduce::make::kind(k)});
  };
  if (kind == "argmax" || kind == "argmin") return Val::runtime(finish(reduce(kind, DType::I32)));
  bool withIndices = (kind == "max" || kind == "min") && a.has("return_indices") &&
                     constBool(a.get("return_indices"), a.loc("return_indices"), "return_indices");
  ir::Value* r = finish(reduce(kind, x->type().elem));
  if (!withIndices) return Val::runtime(r);
  ir::Value* idx = finish(reduce(kind == "max" ? "argmax" : "argmin", DType::I32));
  return Val::tuple({Val::runtime(r), Val::runtime(idx)});
}

Val Specializer::customReduce(const std::vector<ir::Value*>& inputs0, int64_t axis,
                              const Val& combine, bool keepDims, bool scan, bool reverse,
                              SourceLoc loc) {
  std::string fn = scan ? "tl.associative_scan" : "tl.reduce";
  if (combine.kind != Val::Kind::Function)
    raiseError(loc, fn + "'s combine_fn must be a @jit function, got " + describe(combine));
  std::vector<ir::Value*> inputs = inputs0;
  std::vector<int64_t> shape = inputs[0]->type().shape;
  for (ir::Value* v : inputs)
    if (v->type().shape != shape || v->type().isScalar())
      raiseError(loc, fn + "'s inputs must be tensors of one shape");
  std::vector<int64_t> origShape = shape;
  bool allAxes = axis == -1000;
  if (allAxes) {
    for (ir::Value*& v : inputs) v = reshape(v, {v->type().numElements()}, loc);
    axis = 0;
    shape = inputs[0]->type().shape;
  } else {
    axis = normAxis(axis, shape.size(), loc, fn);
  }
  std::vector<int64_t> rshape = shape;
  if (!scan) rshape.erase(rshape.begin() + axis);
  std::vector<ir::Type> types;
  for (ir::Value* v : inputs)
    types.push_back(scan ? v->type() : ir::Type::tensor(v->type().elem, rshape));
  std::vector<ir::NamedAttr> attrs =
      scan ? std::vector<ir::NamedAttr>{ir::attr::Scan::make::axis(axis),
                                        ir::attr::Scan::make::kind("custom"),
                                        ir::attr::Scan::make::reverse(reverse)}
           : std::vector<ir::NamedAttr>{ir::attr::Reduce::make::axis(axis),
                                        ir::attr::Reduce::make::kind("custom")};
  ir::Op* op = b.create(scan ? OpCode::Scan : OpCode::Reduce, inputs, types, attrs);
  ir::Block* region = op->addRegion();
  CallSite cs;
  cs.loc = loc;
  cs.callee = combine.fn.def->name;
  for (int side = 0; side < 2; ++side)
    for (ir::Value* v : inputs) {
      cs.args.push_back(Val::runtime(region->addArg(ir::Type::scalar(v->type().elem))));
      cs.argLocs.push_back(loc);
      cs.argExprs.push_back(nullptr);
    }
  ir::Block* outer = b.insertionBlock();
  b.setInsertionBlock(region);
  Val r = callFunction(combine.fn, cs);
  std::vector<Val> rs = r.kind == Val::Kind::Tuple ? r.elts : std::vector<Val>{r};
  if (rs.size() != inputs.size())
    raiseError(loc, fn + "'s combine_fn returns " + std::to_string(rs.size()) + " values for " +
                        std::to_string(inputs.size()) + " inputs");
  std::vector<ir::Value*> yields;
  for (size_t i = 0; i < rs.size(); ++i) {
    ir::Value* v = toRuntime(rs[i], loc, inputs[i]->type().elem);
    if (!v->type().isScalar())
      raiseError(loc, fn + "'s combine_fn must return scalars, got " + v->type().str());
    yields.push_back(cast(v, inputs[i]->type().elem, loc));
  }
  b.create(OpCode::Yield, yields, {});
  b.setInsertionBlock(outer);
  std::vector<Val> out;
  for (unsigned i = 0; i < op->numResults(); ++i) {
    ir::Value* v = op->result(i);
    if (!scan && keepDims) {
      if (allAxes)
        v = reshape(v, std::vector<int64_t>(origShape.size(), 1), loc);
      else {
        v = expandDims(v, axis, loc);
      }
    }
    out.push_back(Val::runtime(v));
  }
  return out.size() == 1 ? out[0] : Val::tuple(std::move(out));
}

ir::Value* Specializer::bf16xNDot(ir::Value* x, ir::Value* y, ir::Value* acc, int parts,
                                  SourceLoc loc) {
  // As Triton's F32DotTC pass (3xBF16, arXiv:1904.06376): each fp32 operand splits into `parts`
  // bf16 terms (hi, then the rounded remainders); the products, smallest first, accumulate in
  // fp32 from zero, NaNs of the small products become zeros (1.0 * inf gives hi * inf = inf but
  // lo = 0 and 0 * inf = NaN), then hi * hi and the caller's acc are added.
  auto split = [&](ir::Value* v) {
    std::vector<ir::Value*> out;
    for (int i = 0; i < parts; ++i) {
      ir::Value* h = cast(v, DType::BF16, loc);
      if (i != parts - 1) v = b.binary(OpCode::Sub, v, cast(h, DType::F32, loc));
      out.push_back(h);
    }
    return out;
  };
  std::vector<ir::Value*> xs = split(x), ys = split(y);
  const ir::Type& t = acc->type();
  std::vector<ir::NamedAttr> ieee = {ir::attr::Dot::make::inputPrecision("ieee")};
  auto mma = [&](ir::Value* p, ir::Value* q, ir::Value* c) {
    return b.create1(OpCode::Dot, {p, q, c}, t, ieee);
  };
  ir::Value* r = constant(Val::integer(0), t);
  const int hi = 0, mid = 1, lo = 2;
  if (parts == 3) {
    r = mma(xs[mid], ys[mid], r);
    r = mma(xs[lo], ys[hi], r);
    r = mma(xs[hi], ys[lo], r);
  }
  r = mma(xs[mid], ys[hi], r);
  r = mma(xs[hi], ys[mid], r);
  r = b.create1(OpCode::Select, {b.cmp("ne", r, r), constant(Val::integer(0), t), r}, t);
  r = mma(xs[hi], ys[hi], r);
  return b.binary(OpCode::Add, r, acc);
}

Val Specializer::dot(const BoundArgs& a, SourceLoc loc) {
  ir::Value* x = requireTensorOrScalar(a.get("input"), a.loc("input"), "tl.dot's first operand");
  ir::Value* y = requireTensorOrScalar(a.get("other"), a.loc("other"), "tl.dot's second operand");
  const auto &sa = x->type().shape, &sb = y->type().shape;
  if ((sa.size() != 2 && sa.size() != 3) || sa.size() != sb.size())
    raiseError(loc, "tl.dot needs two 2-D (or two 3-D batched) tensors, got " + x->type().str() +
                        " and " + y->type().str());
  size_t r = sa.size();
  int64_t K = sa[r - 1], K2 = sb[r - 2], N = sb[r - 1];
  if (K != K2)
    raiseError(loc, "tl.dot shape mismatch: " + shapeStr(sa) + " @ " + shapeStr(sb) +
                        " (the first operand's K = " + std::to_string(K) +
                        " must equal the second operand's K = " + std::to_string(K2) + ")");
  if (r == 3 && sa[0] != sb[0])
    raiseError(loc, "tl.dot batch sizes differ: " + shapeStr(sa) + " @ " + shapeStr(sb));
  // two_ctas: Triton's request for a Blackwell MMA shared by a CTA pair, its compiler splitting
  // the full B tile the kernel loads between the pair; the product is the same dot, which
  // warpweave computes in each CTA, so it is checked and needs nothing more. attrs: Triton's
  // string attributes for its automatic warp specialization; None is the only value here.
  if (a.has("two_ctas")) constBool(a.get("two_ctas"), a.loc("two_ctas"), "tl.dot's two_ctas");
  if (a.has("attrs") && !a.get("attrs").isNone())
    raiseError(a.loc("attrs"), "tl.dot's attrs (Triton's attributes for its automatic warp "
                               "specialization) must be None in warpweave, got " +
                                   describe(a.get("attrs")));
  DType da = x->type().elem, db = y->type().elem;
  bool fp8a = da == DType::F8E4M3 || da == DType::F8E5M2,
       fp8b = db == DType::F8E4M3 || db == DType::F8E5M2;
  if (da != db && !(fp8a && fp8b))
    raiseError(loc, "tl.dot operands must have one dtype, got " + std::string(ir::tlName(da)) +
                        " and " + std::string(ir::tlName(db)) + "; cast one with .to(...)");
  DType out = DType::F32;
  if (ir::isInt(da)) {
    if (da != DType::I8 && da != DType::U8)
      raiseError(loc, "integer tl.dot needs int8 or uint8 operands (it sums into int32), got " +
                          std::string(ir::tlName(da)));
    out = DType::I32;
  } else if (a.has("out_dtype")) {
    out = constDType(a.get("out_dtype"), a.loc("out_dtype"), "tl.dot's out_dtype");
  }
  if (da == DType::F64) out = DType::F64;
  std::string precision = "ieee";
  if (da == DType::F32) {
    precision = "tf32";
    if (a.has("allow_tf32") && !constBool(a.get("allow_tf32"), a.loc("allow_tf32"), "allow_tf32"))
      precision = "ieee";
  }
  if (a.has("input_precision")) {
    const Val& p = a.get("input_precision");
    if (p.kind != Val::Kind::String ||
        (p.s != "tf32" && p.s != "tf32x3" && p.s != "ieee" && p.s != "bf16x3" && p.s != "bf16x6"))
      raiseError(a.loc("input_precision"),
                 "input_precision must be 'tf32', 'tf32x3', 'bf16x3', 'bf16x6' or 'ieee', got " +
                     describe(p));
    precision = p.s;
  }
  // bf16x3 / bf16x6 (fp32 operands): Triton's emulation of an fp32 product by bf16 ones; other
  // operands ignore them, as Triton's lowering does.
  int bf16Parts = 0;
  if (precision == "bf16x3" || precision == "bf16x6") {
    if (da == DType::F32 && db == DType::F32) bf16Parts = precision == "bf16x3" ? 2 : 3;
    precision = "ieee";
  }
  std::vector<int64_t> outShape = sa;
  outShape[r - 1] = N;
  ir::Value* acc = nullptr;
  if (a.has("acc")) {
    acc = requireTensorOrScalar(a.get("acc"), a.loc("acc"), "tl.dot's acc");
    if (acc->type().shape != outShape)
      raiseError(a.loc("acc"), "tl.dot's acc has shape " + shapeStr(acc->type().shape) +
                                   " but the product is " + shapeStr(outShape));
    if (!a.has("out_dtype")) out = acc->type().elem;
    if (acc->type().elem != out)
      raiseError(a.loc("acc"), "tl.dot's acc is " + acc->type().str() + " but out_dtype is " +
                                   std::string(ir::tlName(out)));
  }
  // Triton's accumulator rules for floating operands: never bfloat16; bfloat16 and float32
  // operands into float32 only (an out_dtype of float16 without acc gives float32, as in
  // Triton: tensor cores have no bf16 x bf16 -> fp16 form); float16 and fp8 ones into float32
  // or float16.
  if (ir::isFloat(da) && out == DType::BF16)
    raiseError(a.has("out_dtype") ? a.loc("out_dtype") : a.loc("acc"),
               "tl.dot cannot accumulate into bfloat16 (nor can Triton's); accumulate into "
               "float32 (or float16 for float16 / fp8 operands) and cast the result with "
               ".to(tl.bfloat16)");
  if ((da == DType::BF16 || da == DType::F32) && out == DType::F16) {
    if (acc)
      raiseError(a.loc("acc"), "tl.dot of " + std::string(ir::tlName(da)) +
                                   " operands accumulates into float32 only (as Triton's), but "
                                   "acc is " +
                                   acc->type().str() +
                                   "; pass a float32 acc and cast the result with .to(...), or "
                                   "use float16 operands");
    out = DType::F32;
  }
  if (!acc) acc = constant(Val::integer(0), ir::Type::tensor(out, outShape));
  if (bf16Parts) return Val::runtime(bf16xNDot(x, y, acc, bf16Parts, loc));
  std::vector<ir::NamedAttr> attrs = {ir::attr::Dot::make::inputPrecision(precision)};
  // None is Triton's default (the target's: no limit on sm_90); a limit above K is an error
  // for fp8 operands, and means nothing for the others.
  if (a.has("max_num_imprecise_acc") && !a.get("max_num_imprecise_acc").isNone()) {
    int64_t limit = constInt(a.get("max_num_imprecise_acc"), a.loc("max_num_imprecise_acc"),
                             "max_num_imprecise_acc");
    if (fp8a && fp8b && limit > K)
      raiseError(a.loc("max_num_imprecise_acc"), "max_num_imprecise_acc (" + std::to_string(limit) +
                                                     ") must be <= K (" + std::to_string(K) + ")");
    attrs.push_back(ir::attr::Dot::make::maxNumImpreciseAcc(limit));
  }
  // The fp8 formats no MMA reads (float8e4b15, e4b8, e5b16; one dtype, checked above) are exact
  // in fp16: on the GPU the dot multiplies them as fp16, as Triton's mixed-mode decomposition
  // does, with fp16's full accumulation (no imprecise-accumulation limit).
  if (in.cudaTarget && ir::isFp8(da) && !fp8a) {
    x = cast(x, DType::F16, loc);
    y = cast(y, DType::F16, loc);
    std::erase_if(
        attrs, [](const ir::NamedAttr& n) { return n.name == ir::attr::Dot::kmaxNumImpreciseAcc; });
  }
  return Val::runtime(b.create1(OpCode::Dot, {x, y, acc}, ir::Type::tensor(out, outShape), attrs));
}

} // namespace ww::specialize
