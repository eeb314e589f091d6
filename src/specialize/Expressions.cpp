// Expressions: names and globals, calls, attributes, subscripts, operators, and the checks that
// turn a value into what an operation needs (a constexpr int, a buffer, a barrier ...).
#include "specialize/SpecializerImpl.h"

#include "frontend/Parser.h"
#include "ir/Limits.h"
#include "specialize/TlBlockPtr.h"
#include "specialize/TlxLayouts.h"
#include "specialize/TypeObjects.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace ww::specialize {

using namespace ww::ast;

// ---------------------------------------------------------------------------------------------
// Names and globals
// ---------------------------------------------------------------------------------------------

static const std::vector<std::string>& pythonBuiltins() {
  static const std::vector<std::string> names = {
      "range", "min",   "max",   "abs",        "len",   "int",     "float",
      "bool",  "print", "round", "isinstance", "tuple", "getattr", "hasattr"};
  return names;
}

Val Specializer::evalName(const Name* e) {
  auto it = frame->env.find(e->id);
  if (it != frame->env.end()) return it->second;
  if (auto g = lookupGlobal(frame->module, e->id, e->loc)) return *g;
  const auto& py = pythonBuiltins();
  if (std::find(py.begin(), py.end(), e->id) != py.end()) return Val::builtin(e->id);
  if (e->id == "True" || e->id == "False") return Val::boolean(e->id == "True");
  std::vector<std::string> candidates(py.begin(), py.end());
  for (const auto& [n, v] : frame->env)
    if (n[0] != '$') candidates.push_back(n);
  const ModuleInfo& mi = modules[frame->module];
  for (const auto& [n, f] : mi.functions) candidates.push_back(n);
  for (const auto& [n, c] : mi.constants) candidates.push_back(n);
  if (mi.names)
    for (const auto& [n, b] : *mi.names) candidates.push_back(n);
  else
    for (const auto& [n, c] : mi.imports) candidates.push_back(n);
  std::string msg = "undefined name '" + e->id + "'";
  std::string near = closestMatch(e->id, candidates);
  if (!near.empty()) msg += "; did you mean '" + near + "'?";
  raiseError(e->loc, msg);
}

static std::string moduleStem(const SourceManager& sm, const ast::Module& m) {
  return std::filesystem::path(sm.path(m.file)).stem().string();
}

/// The namespace a module stands for in kernel code ("tl", "tlx", "math", "libdevice", "ww",
/// "tl.extra", "proton") by its dotted name; "" for any other module. triton.X names the same
/// module as warpweave.X: a kernel ports by changing that word.
static std::string languageNamespace(const std::string& dotted) {
  static const std::map<std::string, std::string> known = {
      {"warpweave", "ww"},
      {"warpweave.language", "tl"},
      {"warpweave.language.math", "tl"},
      {"warpweave.language.core", "tl"},
      {"warpweave.language.random", "tl.random"},
      {"warpweave.language.target_info", "tl.target_info"},
      {"warpweave.tlx", "tlx"},
      {"warpweave.language.tlx", "tlx"},
      {"warpweave.language.extra.tlx", "tlx"},
      {"warpweave.language.extra", "tl.extra"},
      {"warpweave.language.extra.cuda", "tl.extra"},
      {"warpweave.language.libdevice", "libdevice"},
      {"warpweave.language.extra.libdevice", "libdevice"},
      {"warpweave.language.extra.cuda.libdevice", "libdevice"},
      {"warpweave.profiler.language", "proton"},
      {"math", "math"},
  };
  std::string m = dotted;
  if (m == "triton" || m.starts_with("triton.")) m = "warpweave" + m.substr(6);
  auto k = known.find(m);
  return k == known.end() ? std::string() : k->second;
}

/// The given file that is module `dotted` (pkg.helpers: .../pkg/helpers.py or
/// .../pkg/helpers/__init__.py), else the one whose file name is its last component.
std::optional<size_t> Specializer::findModule(const std::string& dotted) const {
  std::string rel = dotted;
  std::replace(rel.begin(), rel.end(), '.', '/');
  auto named = [&](size_t m, const std::string& tail) {
    std::string p = std::filesystem::path(in.sources->path(in.modules[m]->file)).generic_string();
    return p == tail || p.ends_with("/" + tail);
  };
  for (size_t m = 0; m < in.modules.size(); ++m)
    if (named(m, rel + ".py") || named(m, rel + "/__init__.py")) return m;
  std::string stem =
      dotted.substr(dotted.rfind('.') == std::string::npos ? 0 : dotted.rfind('.') + 1);
  for (size_t m = 0; m < in.modules.size(); ++m)
    if (moduleStem(*in.sources, *in.modules[m]) == stem) return m;
  return std::nullopt;
}

Val Specializer::moduleValue(const std::string& dotted) {
  if (std::string ns = languageNamespace(dotted); !ns.empty()) return Val::ns(ns);
  if (auto m = findModule(dotted)) return Val::ns("module:" + std::to_string(*m));
  // A package whose own file was not given, holding modules that were (`import pkg.helpers`
  // binds pkg).
  std::string dir = "/" + dotted + "/";
  std::replace(dir.begin(), dir.end(), '.', '/');
  for (const ast::Module* m : in.modules)
    if (std::filesystem::path(in.sources->path(m->file)).generic_string().find(dir) !=
        std::string::npos)
      return Val::ns("package:" + dotted);
  return Val::ns("external:" + dotted);
}

Val Specializer::importedValue(size_t module, const ImportAlias& a, SourceLoc loc) {
  std::string mod = a.module;
  while (!mod.empty() && mod[0] == '.') mod.erase(0, 1);
  if (a.name.empty()) {
    // `import a.b` binds the package a (the parser names it asName); `import a.b as x`, a.b.
    std::string top = mod.substr(0, mod.find('.'));
    return moduleValue(a.asName == top ? top : mod);
  }
  std::string full = mod.empty() ? a.name : mod + "." + a.name;
  if (std::string ns = languageNamespace(full); !ns.empty()) return Val::ns(ns);
  if (std::string ns = languageNamespace(mod); !ns.empty()) {
    // `from warpweave.language import constexpr`: a member of a known namespace.
    if (auto m = namespaceMember(ns, a.name)) return *m;
    return Val::ns("external:" + full);
  }
  // `from .utils import helper`, `from pkg.utils import helper`: the helper module by its
  // path or file name, else any module defining it.
  std::optional<size_t> from = mod.empty() ? std::nullopt : findModule(mod);
  if (from) {
    if (modules[*from].functions.count(a.name))
      return Val::function({modules[*from].functions[a.name], *from});
    if (*from != module && (modules[*from].constants.count(a.name) || modules[*from].names))
      if (auto v = lookupGlobal(*from, a.name, loc)) return *v;
  }
  // `from . import helpers`, `from pkg import helpers`: a module.
  Val sub = moduleValue(full);
  if (!sub.s.starts_with("external:")) return sub;
  for (size_t m = 0; m < in.modules.size(); ++m)
    if (modules[m].functions.count(a.name)) return Val::function({modules[m].functions[a.name], m});
  return Val::ns("external:" + full);
}

Val Specializer::evalLiteralExpr(const Expr* e) {
  // tl and tlx name the language here whatever the kernel's file binds them to.
  Frame literalFrame;
  literalFrame.env["tl"] = Val::ns("tl");
  literalFrame.env["tlx"] = Val::ns("tlx");
  Frame* saved = frame;
  frame = &literalFrame;
  try {
    Val v = eval(e);
    frame = saved;
    return v;
  } catch (...) {
    frame = saved;
    throw;
  }
}

Val Specializer::evalLiteral(const std::string& text, const std::string& what, SourceLoc loc) {
  SourceManager local;
  uint32_t id = local.addFile("<" + what + ">", text);
  Val v;
  try {
    ExprPtr e = frontend::parseExpression(local, id);
    v = evalLiteralExpr(e.get());
  } catch (CompileError& err) {
    raiseError(loc, "bad value '" + text + "' for " + what + ": " + err.diagnostic().message);
  }
  if (!v.isConstexpr())
    raiseError(loc, "the value '" + text + "' of " + what + " is not a compile-time constant");
  return v;
}

std::optional<Val> Specializer::boundValue(size_t module, const std::string& name,
                                           const NameBinding& binding, SourceLoc loc) {
  auto fileIndex = [&]() -> size_t {
    if (binding.file < 0 || static_cast<size_t>(binding.file) >= in.modules.size())
      raiseError(loc, "'" + name + "' is bound to file " + std::to_string(binding.file) +
                          ", which the compiler was not given (" +
                          std::to_string(in.modules.size()) + " files)");
    return static_cast<size_t>(binding.file);
  };
  switch (binding.kind) {
  case NameBinding::Kind::Module:
    return moduleValue(binding.target);
  case NameBinding::Kind::Member: {
    size_t dot = binding.target.rfind('.');
    std::string ns =
        languageNamespace(binding.target.substr(0, dot == std::string::npos ? 0 : dot));
    if (!ns.empty())
      if (auto m = namespaceMember(ns, binding.target.substr(dot + 1))) return *m;
    raiseError(loc,
               "'" + name + "' is " + binding.target + ", which is not available in kernel code");
  }
  case NameBinding::Kind::Helper:
    return Val::ns("module:" + std::to_string(fileIndex()));
  case NameBinding::Kind::Function: {
    size_t m = fileIndex();
    auto f = modules[m].functions.find(binding.target);
    if (f == modules[m].functions.end())
      raiseError(loc, "'" + name + "' is the @jit function '" + binding.target + "' of " +
                          in.sources->path(in.modules[m]->file) +
                          ", but that file does not define it at the top level");
    return Val::function({f->second, m});
  }
  case NameBinding::Kind::Value:
    return evalLiteral(binding.target, "global '" + name + "'", loc);
  case NameBinding::Kind::Opaque: {
    // A plain function the file defines: the call says it is not @jit, pointing at it.
    ModuleInfo& mi = modules[module];
    if (auto f = mi.functions.find(name); f != mi.functions.end())
      return Val::function({f->second, module});
    raiseError(loc, "global '" + name + "' is " + binding.target +
                        ", which kernel code cannot use; kernels use @jit functions, the "
                        "language modules (tl, tlx, math) and compile-time constants (int, float, "
                        "bool, str, None, dtypes and tuples of these)");
  }
  }
  return std::nullopt;
}

Val Specializer::textConstant(size_t module, const std::string& name, SourceLoc loc) {
  const Stmt* s = modules[module].constants.at(name);
  return evalGlobalOnce(module, name, loc, [&]() -> Val {
    const Expr* value = nullptr;
    if (auto* a = dyn_cast<Assign>(s))
      value = a->value.get();
    else
      value = ast::cast<AnnAssign>(s)->value.get();
    Val v = eval(value);
    if (!v.isConstexpr())
      raiseError(value->loc, "module-level '" + name + "' must be a compile-time constant");
    return v;
  });
}

Val Specializer::evalGlobalOnce(size_t module, const std::string& name, SourceLoc loc,
                                const std::function<Val()>& fn) {
  ModuleInfo& mi = modules[module];
  if (mi.evaluating.count(name))
    raiseError(loc, "global '" + name + "' is defined in terms of itself");
  mi.evaluating.insert(name);
  Frame tmp;
  tmp.module = module;
  Frame* saved = frame;
  frame = &tmp;
  Val v;
  try {
    v = fn();
  } catch (...) {
    frame = saved;
    mi.evaluating.erase(name);
    throw;
  }
  frame = saved;
  mi.evaluating.erase(name);
  mi.constantCache[name] = v;
  return v;
}

std::optional<Val> Specializer::lookupGlobal(size_t module, const std::string& name,
                                             SourceLoc loc) {
  ModuleInfo& mi = modules[module];
  if (auto c = mi.constantCache.find(name); c != mi.constantCache.end()) return c->second;
  if (mi.names) {
    auto b = mi.names->find(name);
    if (b == mi.names->end()) return std::nullopt;
    std::optional<Val> v = boundValue(module, name, b->second, loc);
    if (v) mi.constantCache[name] = *v;
    return v;
  }
  if (module == 0) {
    auto g = in.globals.find(name);
    if (g != in.globals.end()) {
      return evalGlobalOnce(module, name, loc, [&]() -> Val {
        auto f = in.globalFiles.find(name);
        if (f == in.globalFiles.end()) return evalLiteral(g->second, "global '" + name + "'", loc);
        ExprPtr e = frontend::parseExpression(*in.sources, f->second);
        Val v = evalLiteralExpr(e.get());
        if (!v.isConstexpr())
          raiseError(loc, "global '" + name + "' is not a compile-time constant");
        return v;
      });
    }
  }
  if (auto imp = mi.imports.find(name); imp != mi.imports.end()) {
    Val v = importedValue(module, *imp->second, loc);
    mi.constantCache[name] = v;
    return v;
  }
  if (auto f = mi.functions.find(name); f != mi.functions.end())
    return Val::function({f->second, module});
  if (mi.constants.count(name)) return textConstant(module, name, loc);
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

Val Specializer::eval(const Expr* e) {
  switch (e->kind) {
  case ExprKind::Name:
    return evalName(ast::cast<Name>(e));
  case ExprKind::Constant: {
    auto* c = ast::cast<Constant>(e);
    switch (c->type) {
    case Constant::Type::None:
      return Val::none();
    case Constant::Type::Bool:
      return Val::boolean(c->boolValue);
    case Constant::Type::Int:
      return c->intUnsigned ? Val::uinteger(static_cast<uint64_t>(c->intValue))
                            : Val::integer(c->intValue);
    case Constant::Type::Float:
      return Val::real(c->floatValue);
    case Constant::Type::String:
      return Val::string(c->stringValue);
    }
    return Val::none();
  }
  case ExprKind::BinOp: {
    auto* bo = ast::cast<BinOp>(e);
    Val l = eval(bo->lhs.get());
    Val r = eval(bo->rhs.get());
    b.setLoc(e->loc);
    return evalBinOp(bo->op, l, r, e->loc);
  }
  case ExprKind::UnaryOp: {
    auto* u = ast::cast<UnaryOp>(e);
    Val x = eval(u->operand.get());
    b.setLoc(e->loc);
    return evalUnary(u->op, x, e->loc);
  }
  case ExprKind::BoolOp:
    return evalBoolOp(ast::cast<BoolOp>(e));
  case ExprKind::Compare: {
    auto* c = ast::cast<Compare>(e);
    Val left = eval(c->left.get());
    Val result;
    for (size_t i = 0; i < c->ops.size(); ++i) {
      Val right = eval(c->comparators[i].get());
      b.setLoc(e->loc);
      Val r = evalCompare(c->ops[i], left, right, e->loc);
      if (i == 0)
        result = r;
      else if (result.isConstexpr() && r.isConstexpr())
        result = Val::boolean(truthy(result) && truthy(r));
      else if (result.isConstexpr())
        result = truthy(result) ? r : result;
      else if (!r.isConstexpr())
        result = evalBinOp(BinOpKind::BitAnd, result, r, e->loc);
      else if (!truthy(r))
        result = r;
      if (result.isConstexpr() && !truthy(result)) return result;
      left = right;
    }
    return result;
  }
  case ExprKind::IfExp:
    return evalIfExp(ast::cast<IfExp>(e));
  case ExprKind::Call:
    return evalCall(ast::cast<Call>(e));
  case ExprKind::Attribute:
    return evalAttribute(ast::cast<Attribute>(e));
  case ExprKind::Subscript:
    return evalSubscript(ast::cast<Subscript>(e));
  case ExprKind::Slice:
    raiseError(e->loc, "a slice ('a:b') is only allowed inside a subscript");
  case ExprKind::Tuple:
  case ExprKind::List: {
    const auto& elts =
        e->kind == ExprKind::Tuple ? ast::cast<Tuple>(e)->elts : ast::cast<List>(e)->elts;
    std::vector<Val> out;
    for (const auto& x : elts) out.push_back(eval(x.get()));
    return Val::tuple(std::move(out));
  }
  case ExprKind::ListComp:
    return evalListComp(ast::cast<ListComp>(e));
  }
  raiseError(e->loc, "unsupported expression");
}

Val Specializer::evalListComp(const ListComp* e) {
  // Triton's front end (CodeGenerator.visit_ListComp): one `for` clause over a tuple or over
  // Python's range() with compile-time arguments; the element is evaluated once per item with
  // the target bound to it, and the results form a tuple. The target stays bound to the last
  // item afterwards, as in Triton (which binds it in the enclosing scope).
  if (e->generators.size() != 1)
    raiseError(e->generators[1].loc,
               "a list comprehension in kernel code takes a single 'for' clause; nest a "
               "comprehension in the element ('[[f(i, j) for j in range(M)] for i in "
               "range(N)]') or use tl.static_range loops");
  const ast::Comprehension& gen = e->generators[0];
  if (gen.isAsync)
    raiseError(gen.loc, "'async for' is not supported in kernel code; write '[... for x in ...]'");
  if (!gen.ifs.empty())
    raiseError(gen.ifLocs[0], "'if' filters in a list comprehension are not supported in kernel "
                              "code (Triton's front end ignores them and keeps every item); "
                              "choose the elements with a conditional expression "
                              "('[a if c else b for ...]') or a tl.static_range loop");
  auto* target = dyn_cast<Name>(gen.target.get());
  if (!target)
    raiseError(gen.target->loc,
               "the target of a list comprehension in kernel code must be a "
               "single name ('for i in ...'), not " +
                   std::string(gen.target->kind == ExprKind::Tuple ? "a tuple of names"
                                                                   : "an attribute or subscript"));
  std::vector<Val> items;
  bool isRange = false;
  if (auto* call = dyn_cast<Call>(gen.iter.get())) {
    Val callee = eval(call->func.get());
    if (callee.kind == Val::Kind::Builtin &&
        (callee.s == "tl.range" || callee.s == "tl.static_range"))
      raiseError(gen.iter->loc, "a list comprehension in kernel code iterates over range(...) "
                                "with compile-time arguments or over a tuple, not " +
                                    callee.s + "(...); write range(...)");
    if (callee.kind == Val::Kind::Builtin && callee.s == "range") {
      isRange = true;
      if (!call->keywords.empty())
        raiseError(call->keywords[0].loc, "range() takes no keyword arguments");
      if (call->args.empty() || call->args.size() > 3)
        raiseError(call->loc,
                   "range() takes 1 to 3 arguments, got " + std::to_string(call->args.size()));
      static const char* const kWhat[3] = {"start", "end", "step"};
      std::vector<int64_t> v;
      for (size_t k = 0; k < call->args.size(); ++k) {
        const char* what = kWhat[call->args.size() == 1 ? 1 : k];
        v.push_back(constInt(eval(call->args[k].get()), call->args[k]->loc,
                             std::string("the ") + what + " of range() in a list comprehension",
                             call->args[k].get()));
      }
      int64_t lo = v.size() == 1 ? 0 : v[0], hi = v.size() == 1 ? v[0] : v[1];
      int64_t st = v.size() == 3 ? v[2] : 1;
      if (st == 0) raiseError(call->args[2]->loc, "range()'s step must not be zero");
      int64_t trips =
          unrollTrips(lo, hi, st, call->loc, "this list comprehension would build", "elements",
                      "at most 4096 per comprehension and 65536 unrolled iterations "
                      "in a kernel");
      for (int64_t t = 0; t < trips; ++t)
        items.push_back(Val::integer(static_cast<int64_t>(lo + static_cast<__int128>(t) * st)));
    }
  }
  if (!isRange) {
    Val it = eval(gen.iter.get());
    if (it.kind != Val::Kind::Tuple)
      raiseError(gen.iter->loc, "a list comprehension in kernel code iterates over range(...) "
                                "with compile-time arguments or over a tuple, not " +
                                    describe(it));
    items = std::move(it.elts);
  }
  std::vector<Val> out;
  out.reserve(items.size());
  for (Val& item : items) {
    frame->env[target->id] = std::move(item);
    frame->assignLocs[target->id] = target->loc;
    out.push_back(eval(e->elt.get()));
  }
  return Val::tuple(std::move(out));
}

Val Specializer::evalCall(const Call* e) {
  Val callee = eval(e->func.get());
  CallSite cs;
  cs.loc = e->loc;
  if (callee.kind == Val::Kind::Builtin || callee.kind == Val::Kind::Method)
    cs.callee = callee.s;
  else if (callee.kind == Val::Kind::Function)
    cs.callee = callee.fn.def->name;
  else
    cs.callee = describe(callee);
  for (const auto& a : e->args) {
    cs.args.push_back(eval(a.get()));
    cs.argLocs.push_back(a->loc);
    cs.argExprs.push_back(a.get());
  }
  for (const auto& k : e->keywords) {
    cs.kwNames.push_back(k.name);
    cs.kwVals.push_back(eval(k.value.get()));
    cs.kwLocs.push_back(k.loc);
    cs.kwExprs.push_back(k.value.get());
  }
  b.setLoc(e->loc);
  return callValue(callee, cs);
}

Val Specializer::callValue(const Val& callee, CallSite& call) {
  switch (callee.kind) {
  case Val::Kind::Function:
    return callFunction(callee.fn, call);
  case Val::Kind::Builtin:
    return callBuiltin(callee.s, call);
  case Val::Kind::Method:
    return callMethod(callee.elts[0], callee.s, call);
  default:
    if (callee.kind == Val::Kind::Namespace && callee.s.starts_with("external:"))
      raiseError(call.loc, "'" + callee.s.substr(9) +
                               "' is imported from a module the compiler was not given: a @jit "
                               "helper must be defined in the kernel's file or in a file its "
                               "imports name (from .helpers import f, from pkg.helpers import "
                               "f), which wwc looks for beside the kernel and on PYTHONPATH");
    raiseError(call.loc, describe(callee) + " is not callable");
  }
}

Val Specializer::evalAttribute(const Attribute* e) {
  Val base = eval(e->value.get());
  b.setLoc(e->loc);
  return getAttr(base, e->attr, e->attrLoc);
}

static const std::vector<std::string>& tensorMethods() {
  static const std::vector<std::string> names = {"to",          "reshape",
                                                 "permute",     "trans",
                                                 "split",       "broadcast_to",
                                                 "expand_dims", "sum",
                                                 "max",         "min",
                                                 "argmax",      "argmin",
                                                 "reduce",      "cumsum",
                                                 "cumprod",     "view",
                                                 "abs",         "exp",
                                                 "exp2",        "log",
                                                 "log2",        "sqrt",
                                                 "rsqrt",       "sigmoid",
                                                 "sin",         "cos",
                                                 "erf",         "floor",
                                                 "ceil",        "ravel",
                                                 "join",        "cast",
                                                 "softmax",     "associative_scan",
                                                 "xor_sum",     "gather",
                                                 "item"};
  return names;
}

Val Specializer::getAttr(const Val& base, const std::string& name, SourceLoc loc) {
  switch (base.kind) {
  case Val::Kind::Namespace: {
    if (base.s.starts_with("module:")) {
      size_t m = std::stoul(base.s.substr(7));
      if (auto v = lookupGlobal(m, name, loc)) return *v;
      // A package's submodule, given as a file of its own (`import pkg.helpers`, pkg given).
      std::filesystem::path file(in.sources->path(in.modules[m]->file));
      if (!modules[m].names && file.filename() == "__init__.py")
        for (size_t sub = 0; sub < in.modules.size(); ++sub) {
          std::filesystem::path p(in.sources->path(in.modules[sub]->file));
          if (p == file.parent_path() / (name + ".py") ||
              p == file.parent_path() / name / "__init__.py")
            return Val::ns("module:" + std::to_string(sub));
        }
      raiseError(loc, "module '" + moduleStem(*in.sources, *in.modules[m]) +
                          "' has no @jit "
                          "function or constant '" +
                          name + "'");
    }
    if (base.s.starts_with("package:")) {
      Val v = moduleValue(base.s.substr(8) + "." + name);
      if (v.s.starts_with("external:"))
        raiseError(loc, "package '" + base.s.substr(8) + "' has no module '" + name +
                            "' among the files the compiler was given");
      return v;
    }
    if (base.s.starts_with("external:"))
      raiseError(loc, "module '" + base.s.substr(9) +
                          "' is not available in kernel code (only "
                          "warpweave/triton language modules, math and helper modules passed to "
                          "the compiler are)");
    if (auto v = namespaceMember(base.s, name)) return *v;
    unknownMember(base.s, name, loc);
  }
  case Val::Kind::Runtime: {
    const ir::Type& t = base.type();
    if (name == "type") return typeOf(base, loc);
    if (name == "dtype") return Val::dtypeOf(t.elem, t.isPointer());
    if (name == "shape") {
      std::vector<Val> dims;
      for (int64_t d : t.shape) dims.push_back(Val::integer(d));
      if (t.kind == ir::TypeKind::Buffer && t.count > 1)
        dims.insert(dims.begin(), Val::integer(t.count));
      return Val::tuple(std::move(dims));
    }
    if (t.kind == ir::TypeKind::Descriptor) {
      if (name == "load" || name == "store") return Val::method(base, "desc." + name);
      if (name == "block_shape") {
        std::vector<Val> dims;
        for (int64_t d : t.shape) dims.push_back(Val::integer(d));
        return Val::tuple(std::move(dims));
      }
      raiseError(loc, "a tensor descriptor has no attribute '" + name +
                          "' (it has load, store, dtype, block_shape)");
    }
    if (t.isValue()) {
      if (name == "T") {
        CallSite cs;
        cs.loc = loc;
        cs.callee = "tl.trans";
        cs.args.push_back(base);
        cs.argLocs.push_back(loc);
        cs.argExprs.push_back(nullptr);
        return callTl("trans", cs);
      }
      if (name == "numel") return Val::integer(t.numElements());
      const auto& m = tensorMethods();
      if (std::find(m.begin(), m.end(), name) != m.end()) return Val::method(base, name);
      std::string msg = kindName(base) + " has no attribute '" + name + "'";
      std::vector<std::string> cands = m;
      cands.insert(cands.end(), {"dtype", "shape", "T", "numel"});
      std::string near = closestMatch(name, cands);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      raiseError(loc, msg);
    }
    raiseError(loc, kindName(base) + " has no attribute '" + name + "'");
  }
  case Val::Kind::DType: {
    if (name == "element_ty") return Val::dtypeOf(base.dtype);
    if (name == "primitive_bitwidth") return Val::integer(ir::bitWidth(base.dtype));
    if (!base.dtypeIsPointer) {
      // Triton's dtype fields: name ("fp16", "int32"), itemsize, and a float's layout.
      ir::DType d = base.dtype;
      if (name == "name")
        return Val::string(std::string(ir::isFloat(d) ? ir::sigName(d) : ir::tlName(d)));
      if (name == "itemsize") return Val::integer(ir::bitWidth(d) / 8);
      if (name == "scalar") return base;
      if (ir::isFloat(d) && name == "fp_mantissa_width") return Val::integer(ir::mantissaBits(d));
      if (ir::isFloat(d) && name == "exponent_bias") return Val::integer(ir::exponentBias(d));
    }
    if (name.starts_with("is_")) return Val::method(base, name);
    raiseError(loc, "a dtype has no attribute '" + name + "'");
  }
  case Val::Kind::Bool:
  case Val::Kind::Int:
  case Val::Kind::Float:
  case Val::Kind::String:
  case Val::Kind::None:
  case Val::Kind::Tuple:
    if (name == "value") return base; // tl.constexpr(x).value
    if (name == "type") return typeOf(base, loc);
    raiseError(loc, describe(base) + " has no attribute '" + name + "'");
  case Val::Kind::Object:
    if (isTypeObject(base)) return typeObjectAttr(base, name, loc);
    if (isSharedLayoutObject(base))
      raiseError(loc, describeSharedLayout(base) + ": its attributes are not readable in kernel "
                                                   "code; pass it to tlx.local_alloc's layout=");
    return storageAliasAttr(base, name, loc);
  case Val::Kind::Builtin:
    if (base.s.starts_with("tlx."))
      if (std::string m = sharedLayoutClassMethod(base.s.substr(4), name); !m.empty())
        return Val::builtin("tlx." + m);
    raiseError(loc, describe(base) + " has no attribute '" + name + "'");
  case Val::Kind::BlockPtr:
    return blockPtrAttr(base, name, loc);
  default:
    raiseError(loc, describe(base) + " has no attribute '" + name + "'");
  }
}

Val Specializer::callMethod(const Val& self, const std::string& name, CallSite& call) {
  if (isTypeObject(self)) return typeObjectMethod(self, name, call);
  if (self.kind == Val::Kind::Object) return storageAliasMethod(self, name, call);
  if (self.kind == Val::Kind::DType) {
    if (!call.args.empty() || !call.kwNames.empty())
      raiseError(call.loc, "dtype." + name + "() takes no arguments");
    ir::DType d = self.dtype;
    bool ptr = self.dtypeIsPointer;
    auto r = [](bool x) { return Val::boolean(x); };
    if (name == "is_ptr") return r(ptr);
    if (ptr) return r(false);
    if (name == "is_floating") return r(ir::isFloat(d));
    if (name == "is_int") return r(!ir::isFloat(d));
    if (name == "is_int_signed") return r(!ir::isFloat(d) && ir::isSigned(d));
    if (name == "is_int_unsigned") return r(!ir::isFloat(d) && !ir::isSigned(d));
    if (name == "is_bool") return r(d == ir::DType::I1);
    if (name == "is_fp8") return r(ir::isFp8(d));
    if (name == "is_fp16") return r(d == ir::DType::F16);
    if (name == "is_bf16") return r(d == ir::DType::BF16);
    if (name == "is_fp32") return r(d == ir::DType::F32);
    if (name == "is_fp64") return r(d == ir::DType::F64);
    raiseError(call.loc, "a dtype has no method '" + name + "'");
  }
  if (name == "desc.load" || name == "desc.store") {
    call.args.insert(call.args.begin(), self);
    call.argLocs.insert(call.argLocs.begin(), call.loc);
    call.argExprs.insert(call.argExprs.begin(), nullptr);
    return callTl(name, call);
  }
  call.args.insert(call.args.begin(), self);
  call.argLocs.insert(call.argLocs.begin(), call.loc);
  call.argExprs.insert(call.argExprs.begin(), nullptr);
  call.callee = "tensor." + name;
  std::string fn = name;
  if (fn == "to") fn = "cast";
  if (fn == "view") fn = "reshape";
  return callTl(fn, call);
}

Val Specializer::evalSubscript(const Subscript* e) {
  Val base = eval(e->value.get());
  std::vector<const Expr*> indices;
  if (auto* t = dyn_cast<Tuple>(e->index.get()))
    for (const auto& x : t->elts) indices.push_back(x.get());
  else
    indices.push_back(e->index.get());
  b.setLoc(e->loc);

  if (base.kind == Val::Kind::Tuple) {
    if (indices.size() != 1) raiseError(e->index->loc, "a tuple takes one index");
    if (auto* sl = dyn_cast<Slice>(indices[0])) {
      int64_t n = static_cast<int64_t>(base.elts.size());
      auto bound = [&](const ExprPtr& x, int64_t dflt) {
        if (!x) return dflt;
        int64_t v = constInt(eval(x.get()), x->loc, "a tuple slice bound", x.get());
        if (v < 0) v += n;
        return std::clamp<int64_t>(v, 0, n);
      };
      if (sl->step) raiseError(sl->step->loc, "tuple slices with a step are not supported");
      int64_t lo = bound(sl->lower, 0), hi = bound(sl->upper, n);
      std::vector<Val> out;
      for (int64_t i = lo; i < hi; ++i) out.push_back(base.elts[static_cast<size_t>(i)]);
      return Val::tuple(std::move(out));
    }
    Val idx = eval(indices[0]);
    if (idx.isRuntime() && !base.elts.empty() && base.elts[0].kind == Val::Kind::Enum &&
        base.elts[0].s.starts_with("tensor_descriptor_ptr "))
      return descriptorSlotAt(base, idx, indices[0]->loc);
    int64_t i = constInt(idx, indices[0]->loc, "a tuple index", indices[0]);
    int64_t n = static_cast<int64_t>(base.elts.size());
    if (i < -n || i >= n)
      raiseError(indices[0]->loc, "tuple index " + std::to_string(i) +
                                      " is out of range for a "
                                      "tuple of " +
                                      std::to_string(n) + " elements");
    return base.elts[static_cast<size_t>(i < 0 ? i + n : i)];
  }
  if (!base.isRuntime()) raiseError(e->loc, describe(base) + " cannot be subscripted");
  const ir::Type& t = base.type();
  if (t.kind == ir::TypeKind::Buffer || t.kind == ir::TypeKind::Barrier) {
    if (indices.size() != 1 || isa<Slice>(indices[0]))
      raiseError(e->index->loc, "buffers and barriers take one index: bufs[i]");
    Val idx = eval(indices[0]);
    b.setLoc(e->loc);
    CallSite cs;
    cs.loc = e->loc;
    cs.callee = "tlx.local_view";
    cs.args = {base, idx};
    cs.argLocs = {e->value->loc, indices[0]->loc};
    cs.argExprs = {e->value.get(), indices[0]};
    return callTlx("local_view", cs);
  }
  if (!t.isValue()) raiseError(e->loc, kindName(base) + " cannot be subscripted");
  ir::Value* x = base.v;
  size_t pos = 0;
  size_t slices = 0;
  // Triton's rule: an index that is None (a literal or a compile-time value) adds a dimension; a
  // slice whose bounds and step are all absent or None keeps one; anything else is refused.
  auto isNone = [&](const ExprPtr& bound) {
    return !bound || eval(bound.get()).kind == Val::Kind::None;
  };
  for (const Expr* idx : indices) {
    bool none = false;
    if (auto* c = dyn_cast<Constant>(idx); c && c->type == Constant::Type::None)
      none = true;
    else if (!isa<Slice>(idx))
      none = eval(idx).kind == Val::Kind::None;
    if (none) {
      x = expandDims(x, static_cast<int64_t>(pos), idx->loc);
      ++pos;
      continue;
    }
    if (auto* sl = dyn_cast<Slice>(idx);
        sl && isNone(sl->lower) && isNone(sl->upper) && isNone(sl->step)) {
      ++pos;
      ++slices;
      // Triton treats a scalar as a 0-d tensor whose ':' is a no-op (`z_ptr[None, None, :]`
      // makes a 1x1 pointer); on a tensor more ':' than dimensions is a mistake worth naming.
      if (slices > t.shape.size() && !t.shape.empty())
        raiseError(idx->loc, "too many ':' for a value of type " + t.str());
      continue;
    }
    raiseError(idx->loc, "unsupported tensor index: tensor subscripts accept only None and ':' "
                         "(as in x[:, None]); to pick elements, load them with pointers and "
                         "offsets");
  }
  return Val::runtime(x);
}

Val Specializer::evalBinOp(BinOpKind op, const Val& a, const Val& c, SourceLoc loc) {
  if (op == BinOpKind::MatMul) {
    CallSite cs;
    cs.loc = loc;
    cs.callee = "@";
    cs.args = {a, c};
    cs.argLocs = {loc, loc};
    cs.argExprs = {nullptr, nullptr};
    return callTl("dot", cs);
  }
  if (a.kind == Val::Kind::Tuple || c.kind == Val::Kind::Tuple) {
    if (op == BinOpKind::Add && a.kind == Val::Kind::Tuple && c.kind == Val::Kind::Tuple) {
      std::vector<Val> out = a.elts;
      out.insert(out.end(), c.elts.begin(), c.elts.end());
      return Val::tuple(std::move(out));
    }
    if (op == BinOpKind::Mul && (a.kind == Val::Kind::Tuple) != (c.kind == Val::Kind::Tuple)) {
      const Val& t = a.kind == Val::Kind::Tuple ? a : c;
      const Val& n = a.kind == Val::Kind::Tuple ? c : a;
      if (n.kind == Val::Kind::Int) {
        if (n.i > 0 && t.elts.size() * static_cast<uint64_t>(n.i) > 65536)
          raiseError(loc, "tuple repetition would make more than 65536 elements");
        std::vector<Val> out;
        for (int64_t i = 0; i < n.i; ++i) out.insert(out.end(), t.elts.begin(), t.elts.end());
        return Val::tuple(std::move(out));
      }
    }
    raiseError(loc, std::string("unsupported operand types for ") + binOpSymbol(op) + ": " +
                        kindName(a) + " and " + kindName(c));
  }
  if (a.isConstexpr() && c.isConstexpr()) return constBinary(op, a, c, loc);
  return runtimeBinary(op, a, c, loc);
}

Val Specializer::evalUnary(UnaryOpKind op, const Val& a, SourceLoc loc) {
  if (a.isConstexpr()) return constUnary(op, a, loc);
  return runtimeUnary(op, a, loc);
}

Val Specializer::evalCompare(CmpOpKind op, const Val& a, const Val& c, SourceLoc loc) {
  if (op == CmpOpKind::Is || op == CmpOpKind::IsNot) {
    bool same;
    if (a.isRuntime() || c.isRuntime())
      same = a.isRuntime() && c.isRuntime() && a.v == c.v;
    else if (a.isNone() || c.isNone())
      same = a.isNone() && c.isNone();
    else
      same = constexprEqual(a, c);
    return Val::boolean(op == CmpOpKind::Is ? same : !same);
  }
  if (op == CmpOpKind::In || op == CmpOpKind::NotIn) {
    if (c.kind != Val::Kind::Tuple || !a.isConstexpr())
      raiseError(loc, "'in' needs a compile-time value and a tuple");
    bool found = false;
    for (const Val& x : c.elts)
      if (x.isConstexpr() && constexprEqual(a, x)) found = true;
    return Val::boolean(op == CmpOpKind::In ? found : !found);
  }
  if (a.isConstexpr() && c.isConstexpr()) return constCompare(op, a, c, loc);
  return runtimeCompare(op, a, c, loc);
}

Val Specializer::evalBoolOp(const BoolOp* e) {
  bool isAnd = e->op == BoolOpKind::And;
  Val acc = eval(e->values[0].get());
  for (size_t i = 1; i < e->values.size(); ++i) {
    if (acc.isConstexpr()) {
      if (isAnd != truthy(acc)) return acc; // short-circuit as Python does
      acc = eval(e->values[i].get());
      continue;
    }
    Val rhs = eval(e->values[i].get());
    b.setLoc(e->loc);
    if (rhs.isConstexpr()) {
      if (isAnd && !truthy(rhs)) {
        acc = Val::boolean(false);
        continue;
      }
      if (!isAnd && truthy(rhs)) {
        acc = Val::boolean(true);
        continue;
      }
      acc = Val::runtime(
          toI1(requireTensorOrScalar(acc, e->loc, "an operand of 'and'/'or'"), e->loc));
      continue;
    }
    ir::Value* l = toI1(requireTensorOrScalar(acc, e->loc, "an operand of 'and'/'or'"), e->loc);
    ir::Value* r =
        toI1(requireTensorOrScalar(rhs, e->values[i]->loc, "an operand of 'and'/'or'"), e->loc);
    auto [x, y] = unify(Val::runtime(l), Val::runtime(r), e->loc, std::nullopt, "'and'/'or'");
    acc = Val::runtime(b.binary(isAnd ? ir::OpCode::And : ir::OpCode::Or, x, y));
  }
  return acc;
}

Val Specializer::evalIfExp(const IfExp* e) {
  Val cond = eval(e->test.get());
  if (cond.isConstexpr()) return eval(truthy(cond) ? e->body.get() : e->orelse.get());
  b.setLoc(e->loc);
  ir::Value* c = requireTensorOrScalar(cond, e->test->loc, "a conditional expression's condition");
  if (!c->type().isScalar())
    raiseError(e->test->loc, "the condition of 'a if c else b' must be a scalar, got " +
                                 c->type().str() + "; use tl.where(c, a, b) for tensors");
  c = toI1(c, e->loc);
  ir::Block* outer = b.insertionBlock();
  ir::Op* op = b.create(ir::OpCode::If, {c}, {});
  ir::Block* thenBlock = op->addRegion();
  ir::Block* elseBlock = op->addRegion();
  b.setInsertionBlock(thenBlock);
  Val tv = eval(e->body.get());
  b.setInsertionBlock(elseBlock);
  Val ev = eval(e->orelse.get());
  if (tv.isNone() && ev.isNone()) { // `f(x) if c else g(x)` run for its effects, as Triton's
    b.setInsertionBlock(thenBlock);
    b.create(ir::OpCode::Yield, {}, {});
    b.setInsertionBlock(elseBlock);
    b.create(ir::OpCode::Yield, {}, {});
    b.setInsertionBlock(outer);
    return Val::none();
  }
  std::optional<ir::DType> dt;
  if (tv.isRuntime())
    dt = tv.type().elem;
  else if (ev.isRuntime())
    dt = ev.type().elem;
  b.setLoc(e->loc);
  b.setInsertionBlock(thenBlock);
  ir::Value* t = toRuntime(tv, e->body->loc, tv.isRuntime() ? std::nullopt : dt);
  b.setInsertionBlock(elseBlock);
  ir::Value* f = toRuntime(ev, e->orelse->loc, ev.isRuntime() ? std::nullopt : dt);
  if (t->type() != f->type() || isConstPointer(t) != isConstPointer(f))
    raiseError(e->loc, "Ternary expression with dynamic condition has inconsistent type: the two "
                       "sides of 'a if c else b' are " +
                           typeText(t) + " and " + typeText(f));
  b.setInsertionBlock(thenBlock);
  b.create(ir::OpCode::Yield, {t}, {});
  b.setInsertionBlock(elseBlock);
  b.create(ir::OpCode::Yield, {f}, {});
  b.setInsertionBlock(outer);
  return Val::runtime(op->addResult(t->type()));
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

void Specializer::needConstexpr(SourceLoc loc, const std::string& what, const Expr* expr) {
  std::vector<Diagnostic> notes;
  const Name* n = dyn_cast<Name>(expr);
  if (n && callStack.size() == 1 && frame && frame->def) {
    bool isParam = false;
    for (const Param& p : frame->def->params)
      if (p.name == n->id) isParam = true;
    if (isParam) {
      notes.push_back(note(loc, "declare the kernel parameter as '" + n->id +
                                    ": tl.constexpr' (and give it as " + n->id +
                                    "=VALUE in the signature) to make it a compile-time value"));
      raiseError(loc,
                 what + " must be a compile-time constant, but '" + n->id + "' is a run-time value",
                 std::move(notes));
    }
  }
  if (n && frame && frame->def) {
    for (const Param& p : frame->def->params)
      if (p.name == n->id)
        notes.push_back(note(p.loc, "declare the parameter as '" + n->id + ": tl.constexpr'"));
  }
  if (notes.empty())
    notes.push_back(note(loc, "only tl.constexpr parameters and values computed from them are "
                              "compile-time constants; note that a plain assignment 'x = ...' "
                              "makes a run-time value, while 'x: tl.constexpr = ...' stays "
                              "compile-time"));
  raiseError(loc,
             what + " must be a compile-time constant, but " +
                 (n ? "'" + n->id + "'" : std::string("this")) + " is a run-time value",
             std::move(notes));
}

int64_t Specializer::constInt(const Val& v, SourceLoc loc, const std::string& what,
                              const Expr* expr) {
  if (v.isBigUnsigned())
    raiseError(loc, what + " must be an integer below 2**63, got " + describe(v));
  if (v.kind == Val::Kind::Int) return v.i;
  if (v.kind == Val::Kind::Bool) return v.b;
  if (v.isRuntime()) needConstexpr(loc, what, expr);
  raiseError(loc, what + " must be an integer, got " + describe(v));
}

bool Specializer::constBool(const Val& v, SourceLoc loc, const std::string& what,
                            const Expr* expr) {
  if (v.isRuntime()) needConstexpr(loc, what, expr);
  return truthy(v);
}

std::vector<int64_t> Specializer::constShape(const Val& v, SourceLoc loc, const std::string& what,
                                             const Expr* expr) {
  std::vector<int64_t> shape;
  if (v.kind == Val::Kind::Tuple) {
    for (const Val& d : v.elts) shape.push_back(constInt(d, loc, what, expr));
  } else {
    shape.push_back(constInt(v, loc, what, expr));
  }
  for (int64_t d : shape)
    if (d <= 0) raiseError(loc, what + " must have positive dimensions, got " + describe(v));
  return shape;
}

ir::DType Specializer::constDType(const Val& v, SourceLoc loc, const std::string& what) {
  if (v.kind != Val::Kind::DType || v.dtypeIsPointer)
    raiseError(loc, what + " must be a dtype such as tl.float16, got " + describe(v));
  return v.dtype;
}

ir::Value* Specializer::requireTensorOrScalar(const Val& v, SourceLoc loc,
                                              const std::string& what) {
  if (v.isRuntime()) {
    if (!v.type().isValue())
      raiseError(loc, what + " must be a tensor or scalar, got " + kindName(v));
    return v.v;
  }
  if (v.isNumber()) return toRuntime(v, loc);
  raiseError(loc, what + " must be a tensor or scalar, got " + kindName(v));
}

ir::Value* Specializer::requireBuffer(const Val& v, SourceLoc loc, const std::string& what) {
  if (!v.isRuntime() || v.type().kind != ir::TypeKind::Buffer)
    raiseError(loc,
               what + " must be a shared-memory buffer (from tlx.local_alloc), got " + kindName(v));
  return v.v;
}

ir::Value* Specializer::requireBarrier(const Val& v, SourceLoc loc, const std::string& what) {
  if (!v.isRuntime() || v.type().kind != ir::TypeKind::Barrier)
    raiseError(loc, what + " must be a barrier (from tlx.alloc_barriers), got " + kindName(v));
  return v.v;
}

ir::Value* Specializer::requireDescriptor(const Val& v, SourceLoc loc, const std::string& what) {
  if (!v.isRuntime() || v.type().kind != ir::TypeKind::Descriptor)
    raiseError(loc, what + " must be a tensor descriptor, got " + kindName(v));
  return v.v;
}

ir::Value* Specializer::requireScalarI32(const Val& v, SourceLoc loc, const std::string& what) {
  if (v.isIntLike()) return toRuntime(v, loc, ir::DType::I32);
  if (v.isRuntime() && v.type().isScalar() && !v.type().isPointer() && ir::isInt(v.type().elem))
    return cast(v.v, ir::DType::I32, loc);
  raiseError(loc, what + " must be an integer scalar, got " + kindName(v));
}

} // namespace ww::specialize
