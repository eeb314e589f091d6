// The specializer driver: kernel parameters from the signature, statements, compile-time and
// run-time control flow, helper inlining and async task regions.
#include "specialize/SpecializerImpl.h"

#include "frontend/Parser.h"
#include "ir/Limits.h"
#include "ir/OpAttrs.h"
#include "ir/TaskPlan.h"
#include "specialize/TlBlockPtr.h"
#include "specialize/TlMisc.h"

#include <algorithm>
#include <functional>
#include <sstream>

namespace ww::specialize {

using namespace ww::ast;

namespace {

constexpr size_t kMaxInlineDepth = 200;
// Helper calls inlined into one kernel: a recursion that branches (f(N - 1) + f(N - 2)) can
// expand exponentially without creating an op, which the kernel's op limit would catch.
constexpr int64_t kMaxInlinedCalls = int64_t(1) << 20;

bool isConstexprAnnotation(const Expr* e) {
  if (!e) return false;
  if (auto* n = dyn_cast<Name>(e)) return n->id == "constexpr";
  if (auto* a = dyn_cast<Attribute>(e)) return a->attr == "constexpr";
  if (auto* c = dyn_cast<Constant>(e)) // `BLOCK: "tl.constexpr"` (string annotations)
    return c->type == Constant::Type::String && c->stringValue.ends_with("constexpr");
  return false;
}

/// `p: tl.const` (Triton's annotation of a pointer to constant data).
bool isConstAnnotation(const Expr* e) {
  if (!e) return false;
  if (auto* n = dyn_cast<Name>(e)) return n->id == "const";
  if (auto* a = dyn_cast<Attribute>(e)) return a->attr == "const";
  if (auto* c = dyn_cast<Constant>(e))
    return c->type == Constant::Type::String &&
           (c->stringValue == "const" || c->stringValue.ends_with(".const"));
  return false;
}

std::string lastComponent(const Expr* e) {
  if (auto* n = dyn_cast<Name>(e)) return n->id;
  if (auto* a = dyn_cast<Attribute>(e)) return a->attr;
  if (auto* c = dyn_cast<Call>(e)) return lastComponent(c->func.get());
  return {};
}

Specializer::StmtList pointers(const Body& body) {
  Specializer::StmtList out;
  for (const auto& s : body) out.push_back(s.get());
  return out;
}

/// The run-time IR values inside `v`, depth first.
void runtimeLeaves(const Val& v, std::vector<ir::Value*>& out) {
  if (v.isRuntime())
    out.push_back(v.v);
  else if (v.isAggregate())
    for (const Val& e : v.elts) runtimeLeaves(e, out);
}

/// `pattern` with its run-time leaves replaced, in order, by `values[next...]`.
Val rebuild(const Val& pattern, const std::vector<ir::Value*>& values, size_t& next) {
  if (pattern.isRuntime()) return Val::runtime(values.at(next++));
  if (!pattern.isAggregate()) return pattern;
  Val r = pattern;
  for (Val& e : r.elts) e = rebuild(e, values, next);
  return r;
}

bool sameVal(const Val& a, const Val& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
  case Val::Kind::Runtime:
    return a.v == b.v;
  case Val::Kind::Tuple:
  case Val::Kind::BlockPtr:
    if (a.elts.size() != b.elts.size()) return false;
    for (size_t i = 0; i < a.elts.size(); ++i)
      if (!sameVal(a.elts[i], b.elts[i])) return false;
    return true;
  case Val::Kind::Function:
    return a.fn.def == b.fn.def;
  case Val::Kind::Method:
    return a.s == b.s && sameVal(a.elts[0], b.elts[0]);
  case Val::Kind::Namespace:
  case Val::Kind::Builtin:
  case Val::Kind::Enum:
    return a.s == b.s;
  case Val::Kind::Object:
    if (a.s != b.s || a.i != b.i || a.b != b.b || a.elts.size() != b.elts.size()) return false;
    for (size_t i = 0; i < a.elts.size(); ++i)
      if (!sameVal(a.elts[i], b.elts[i])) return false;
    return true;
  default:
    return constexprEqual(a, b);
  }
}

/// Plain assignment turns python numbers into run-time scalars (Triton's rule): loop-carried
/// counters such as `phase = 0` rely on it.
bool needsMaterializing(const Val& v) {
  if (v.isNumber()) return true;
  if (v.kind == Val::Kind::Tuple)
    return std::any_of(v.elts.begin(), v.elts.end(), needsMaterializing);
  return false;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

Specializer::Specializer(const SpecializeInput& input) : in(input) {
  modules.resize(in.modules.size());
  for (size_t m = 0; m < in.modules.size(); ++m) {
    const ast::Module& mod = *in.modules[m];
    ModuleInfo& info = modules[m];
    for (const auto& f : mod.functions) info.functions[f->name] = f.get();
    if (m < in.names.size()) info.names = in.names[m]; // then its imports are not consulted
    for (const auto& imp : mod.imports)
      for (const auto& alias : imp->names) {
        std::string bound = alias.asName;
        if (bound.empty()) {
          bound = alias.name.empty() ? alias.module.substr(0, alias.module.find('.')) : alias.name;
        }
        info.imports[bound] = &alias;
      }
    for (const auto& c : mod.constants) {
      const Expr* target = nullptr;
      if (auto* a = dyn_cast<Assign>(c.get()); a && a->targets.size() == 1)
        target = a->targets[0].get();
      else if (auto* aa = dyn_cast<AnnAssign>(c.get()); aa && aa->value)
        target = aa->target.get();
      if (auto* n = dyn_cast<Name>(target)) info.constants[n->id] = c.get();
    }
  }
}

static ir::Type parseArgType(const SignatureEntry& e, SourceLoc loc) {
  const std::string& t = e.type;
  auto bad = [&](const std::string& why) {
    raiseError(loc, "bad signature type '" + t + "' for parameter '" + e.name + "': " + why +
                        " (expected *fp16, i32, fp32, desc<fp16,128x64> ...)");
  };
  if (!t.empty() && t[0] == '*') {
    auto d = ir::parseSigDType(t.substr(1));
    if (!d) bad("unknown element type '" + t.substr(1) + "'");
    return ir::Type::ptr(*d);
  }
  if (t.starts_with("desc<") && t.back() == '>') {
    std::string inner = t.substr(5, t.size() - 6);
    std::vector<std::string> parts;
    std::stringstream ss(inner);
    for (std::string p; std::getline(ss, p, ',');) {
      p.erase(0, p.find_first_not_of(' '));
      p.erase(p.find_last_not_of(' ') + 1);
      parts.push_back(p);
    }
    if (parts.size() < 2) bad("a descriptor needs an element type and a block shape");
    auto d = ir::parseSigDType(parts[0]);
    if (!d) bad("unknown element type '" + parts[0] + "'");
    std::vector<int64_t> shape;
    std::stringstream dims(parts[1]);
    // Digits only, and few of them: the numbers stay far from what std::stoll would refuse.
    auto digits = [](const std::string& x, size_t most) {
      return !x.empty() && x.size() <= most && x.find_first_not_of("0123456789") == x.npos;
    };
    for (std::string dim; std::getline(dims, dim, 'x');) {
      if (!digits(dim, 9)) bad("block shape '" + parts[1] + "' is not like 128x64");
      shape.push_back(std::stoll(dim));
      if (shape.back() < 1) bad("block dimensions must be positive");
    }
    // TMA descriptors have 1 to 5 dimensions.
    if (shape.empty() || shape.size() > 5) bad("a block shape has 1 to 5 dimensions");
    int rank = static_cast<int>(shape.size());
    if (parts.size() > 2 && parts[2].starts_with("rank=")) {
      if (!digits(parts[2].substr(5), 1)) bad("'" + parts[2] + "' is not rank=1 ... rank=5");
      rank = std::stoi(parts[2].substr(5));
      if (rank < 1 || rank > 5) bad("'" + parts[2] + "' is not rank=1 ... rank=5");
    }
    return ir::Type::descriptor(*d, shape, rank);
  }
  auto d = ir::parseSigDType(t);
  if (!d) bad("unknown type");
  if (e.equalsOne && !ir::isInt(*d)) bad("':1' applies to integers only");
  return ir::Type::scalar(*d);
}

/// The launch options bound what the kernel becomes (layouts over the warps, a cluster, the
/// pipeline's buffers): values past ir/Limits.h are refused at the kernel's def.
void Specializer::checkOptions(SourceLoc loc) const {
  const CompileOptions& o = in.options;
  if (o.numWarps < 1 || o.numWarps > ir::kMaxWarpsPerCta || (o.numWarps & (o.numWarps - 1)))
    raiseError(loc, "num_warps=" + std::to_string(o.numWarps) +
                        ": a CTA runs a power of two from 1 to 32 warps");
  if (o.numCtas < 1 || o.numCtas > ir::kMaxCtasPerCluster)
    raiseError(loc, "num_ctas=" + std::to_string(o.numCtas) + ": a cluster has 1 to " +
                        std::to_string(ir::kMaxCtasPerCluster) + " CTAs");
  const std::array<int, 3>& d = o.clusterDims;
  if (d != std::array<int, 3>{0, 0, 0}) {
    const std::string shape = "ctas_per_cga=(" + std::to_string(d[0]) + ", " +
                              std::to_string(d[1]) + ", " + std::to_string(d[2]) + ")";
    int64_t product = 1;
    for (int n : d) {
      if (n < 1 || n > ir::kMaxCtasPerCluster)
        raiseError(loc, shape + ": each cluster dimension is 1 to " +
                            std::to_string(ir::kMaxCtasPerCluster));
      product *= n;
    }
    if (product > ir::kMaxCtasPerCluster)
      raiseError(loc, shape + ": a cluster has 1 to " + std::to_string(ir::kMaxCtasPerCluster) +
                          " CTAs, this one " + std::to_string(product));
    if (o.numCtas != 1 && o.numCtas != product)
      raiseError(loc, shape + " holds " + std::to_string(product) +
                          " CTAs, but num_ctas=" + std::to_string(o.numCtas));
  }
  if (o.numStages < 0 || o.numStages > ir::kMaxPipelineStages)
    raiseError(loc, "num_stages=" + std::to_string(o.numStages) + ": at most " +
                        std::to_string(ir::kMaxPipelineStages) + " pipeline stages");
  if (o.maxRegisters < 0 || o.maxRegisters > 255)
    raiseError(loc, "maxnreg=" + std::to_string(o.maxRegisters) +
                        ": a thread holds 1 to 255 registers (0: not given)");
}

void Specializer::checkKernelSize(SourceLoc loc) const {
  int64_t ops = ir::opsCreatedOnThisThread() - opsAtStart;
  if (ops > ir::kMaxKernelOps)
    raiseError(loc, "the kernel has grown to " + std::to_string(ops) +
                        " Tile IR ops here (helpers are inlined, tl.static_range loops unrolled); "
                        "a kernel may have at most " +
                        std::to_string(ir::kMaxKernelOps));
}

std::unique_ptr<ir::Function> Specializer::run() {
  if (in.modules.empty() || !in.sources) throw std::logic_error("specialize: no modules");
  const ast::FunctionDef* def = nullptr;
  auto it = modules[0].functions.find(in.kernel);
  if (it == modules[0].functions.end()) {
    std::vector<std::string> names;
    for (const auto& [n, f] : modules[0].functions) names.push_back(n);
    std::string msg =
        "kernel '" + in.kernel + "' is not defined in " + in.sources->path(in.modules[0]->file);
    std::string near = closestMatch(in.kernel, names);
    if (!near.empty()) msg += "; did you mean '" + near + "'?";
    // At the near miss's def, else at the file's start: every error names a place in the source.
    SourceLoc where{in.modules[0]->file, 1, 1};
    if (!near.empty()) where = modules[0].functions.at(near)->loc;
    raiseError(where, msg);
  }
  def = it->second;
  checkOptions(def->loc);
  opsAtStart = ir::opsCreatedOnThisThread();

  auto fn = std::make_unique<ir::Function>();
  fn->name = def->name;
  fn->loc = def->loc;
  fn->numWarps = in.options.numWarps;
  fn->numStages = in.options.numStages;
  fn->numCtas = in.options.numCtas;
  fn->clusterDims = {fn->numCtas, 1, 1};
  if (in.options.clusterDims != std::array<int, 3>{0, 0, 0}) {
    fn->clusterDims = in.options.clusterDims;
    fn->numCtas = fn->clusterDims[0] * fn->clusterDims[1] * fn->clusterDims[2];
  }
  b.setInsertionBlock(&fn->body);
  b.setLoc(def->loc);

  Frame kernelFrame;
  kernelFrame.def = def;
  frame = &kernelFrame;
  callStack.push_back(FunctionRef{def, 0});

  std::vector<std::string> paramNames;
  for (const Param& p : def->params) paramNames.push_back(p.name);
  for (const SignatureEntry& e : in.signature)
    if (std::find(paramNames.begin(), paramNames.end(), e.name) == paramNames.end()) {
      std::string msg =
          "the signature names '" + e.name + "', which is not a parameter of '" + def->name + "'";
      std::string near = closestMatch(e.name, paramNames);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      raiseError(def->loc, msg);
    }

  for (const Param& p : def->params) {
    const SignatureEntry* entry = nullptr;
    for (const SignatureEntry& e : in.signature)
      if (e.name == p.name) entry = &e;
    bool isConstexprParam = isConstexprAnnotation(p.annotation.get());
    if (!entry) {
      if (!p.defaultValue)
        raiseError(p.loc, "kernel parameter '" + p.name +
                              "' is missing from the signature; give it as '" + p.name +
                              ":TYPE' (a run-time argument) or '" + p.name +
                              "=VALUE' (a constexpr)");
      Val v = eval(p.defaultValue.get());
      if (!v.isConstexpr())
        raiseError(p.defaultValue->loc,
                   "the default of parameter '" + p.name + "' must be a compile-time constant");
      frame->env[p.name] = v;
      continue;
    }
    if (entry->isConstexpr) {
      Val v = evalLiteral(entry->value, "constexpr '" + entry->name + "' in the signature", p.loc);
      frame->env[p.name] = v;
      signatureConstexprs[p.name] = v;
      continue;
    }
    if (isConstexprParam)
      raiseError(p.loc, "parameter '" + p.name +
                            "' is declared tl.constexpr, so the signature "
                            "must give its value ('" +
                            p.name + "=VALUE'), not a type");
    ir::KernelArg arg;
    arg.name = p.name;
    arg.type = parseArgType(*entry, p.loc);
    arg.divisibility = entry->divisibility;
    arg.equalsOne = entry->equalsOne;
    if (entry->equalsOne) {
      b.setLoc(p.loc);
      frame->env[p.name] = Val::runtime(b.constInt(1, arg.type));
    } else {
      arg.value = fn->body.addArg(arg.type, p.name);
      kernelArgValues.insert(arg.value);
      if (arg.type.isPointer() && isConstAnnotation(p.annotation.get()))
        constPointers.insert(arg.value);
      frame->env[p.name] = Val::runtime(arg.value);
    }
    fn->args.push_back(std::move(arg));
  }

  visitStmts(pointers(def->body));
  if (frame->env.count("$ret") && !frame->env["$ret"].isNone())
    raiseError(def->loc, "kernel '" + def->name + "' returns a value; kernels return nothing");
  b.setLoc(def->loc);
  b.ret();
  frame = nullptr;
  placeStorageAliases(fn->body);
  // Where the async tasks run and whether their register budgets fit: errors at their source.
  ir::planAsyncTasks(*fn);
  return fn;
}

std::unique_ptr<ir::Function> specialize(const SpecializeInput& input) {
  Specializer s(input);
  return s.run();
}

// ---------------------------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------------------------

void Specializer::visitStmts(const StmtList& stmts) {
  for (size_t i = 0; i < stmts.size(); ++i) {
    if (frame->returned) return; // code after `return` never runs
    // The rest of the block as a view: a copy per statement made long blocks quadratic.
    if (visitStmt(stmts[i], std::span(stmts).subspan(i + 1))) return;
    checkKernelSize(stmts[i]->loc);
  }
}

bool Specializer::visitStmt(const Stmt* s, std::span<const Stmt* const> rest) {
  b.setLoc(s->loc);
  switch (s->kind) {
  case StmtKind::Assign: {
    auto* a = ast::cast<Assign>(s);
    Val v = eval(a->value.get());
    for (const auto& t : a->targets) assign(t.get(), v, s->loc, false);
    return false;
  }
  case StmtKind::AnnAssign: {
    auto* a = ast::cast<AnnAssign>(s);
    bool keep = isConstexprAnnotation(a->annotation.get());
    if (!a->value) {
      if (keep)
        raiseError(s->loc,
                   "a tl.constexpr declaration needs a value: write 'x: tl.constexpr = ...'");
      return false;
    }
    Val v = eval(a->value.get());
    if (keep && !v.isConstexpr())
      needConstexpr(a->value->loc,
                    "the value of a tl.constexpr "
                    "variable",
                    a->value.get());
    assign(a->target.get(), v, s->loc, keep);
    return false;
  }
  case StmtKind::AugAssign: {
    auto* a = ast::cast<AugAssign>(s);
    if (!isa<Name>(a->target.get()))
      raiseError(a->target->loc, "augmented assignment is only supported to a plain name");
    Val cur = eval(a->target.get());
    Val rhs = eval(a->value.get());
    b.setLoc(s->loc);
    assign(a->target.get(), evalBinOp(a->op, cur, rhs, s->loc), s->loc, false);
    return false;
  }
  case StmtKind::ExprStmt: {
    auto* e = ast::cast<ExprStmt>(s);
    if (auto* c = dyn_cast<Constant>(e->value.get()); c && c->type == Constant::Type::String)
      return false; // docstring
    eval(e->value.get());
    return false;
  }
  case StmtKind::If: {
    auto* i = ast::cast<If>(s);
    bool absorb = containsReturn(i->body) || containsReturn(i->orelse);
    visitIf(i, rest, absorb);
    return absorb;
  }
  case StmtKind::For:
    visitFor(ast::cast<For>(s));
    return false;
  case StmtKind::While:
    visitWhile(ast::cast<While>(s));
    return false;
  case StmtKind::Break:
    raiseError(s->loc, "'break' is not supported: loops compile to structured loops without early "
                       "exit; use a 'while' loop with the exit condition in its test instead");
  case StmtKind::Continue:
    raiseError(s->loc, "'continue' is not supported: loops compile to structured loops; guard the "
                       "rest of the body with an 'if' instead");
  case StmtKind::Return: {
    auto* r = ast::cast<Return>(s);
    if (frame->loopDepth > 0)
      raiseError(s->loc,
                 "'return' inside a loop, an async task or a 'with' block is not supported; "
                 "return after the loop instead");
    Val v = r->value ? eval(r->value.get()) : Val::none();
    if (callStack.size() == 1 && !v.isNone())
      raiseError(s->loc, "a kernel cannot return a value; store results through a pointer");
    frame->env["$ret"] = v;
    frame->returned = true;
    return false;
  }
  case StmtKind::Pass:
    return false;
  case StmtKind::Assert: {
    auto* a = ast::cast<Assert>(s);
    Val cond = eval(a->test.get());
    std::string msg;
    if (a->msg) {
      Val m = eval(a->msg.get());
      msg = m.kind == Val::Kind::String ? m.s : describe(m);
    }
    if (cond.isConstexpr()) {
      if (!truthy(cond))
        raiseError(a->test->loc, "assertion failed" + (msg.empty() ? std::string() : ": " + msg));
      return false;
    }
    b.setLoc(s->loc);
    ir::Value* c = toI1(requireTensorOrScalar(cond, a->test->loc, "an assert condition"), s->loc);
    b.create(ir::OpCode::Assert, {c}, {}, {ir::attr::Assert::make::message(msg)});
    return false;
  }
  case StmtKind::With:
    visitWith(ast::cast<With>(s));
    return false;
  case StmtKind::FunctionDef:
    raiseError(s->loc, "nested function definitions are not supported; define '" +
                           ast::cast<FunctionDef>(s)->name + "' at module level with @ww.jit");
  case StmtKind::Import:
    raiseError(s->loc, "'import' inside a kernel is not supported; import at module level");
  }
  return false;
}

void Specializer::assign(const Expr* target, Val value, SourceLoc loc, bool keepConstexpr) {
  if (auto* n = dyn_cast<Name>(target)) {
    if (!keepConstexpr && needsMaterializing(value)) {
      std::function<Val(const Val&)> mat = [&](const Val& v) -> Val {
        if (v.isNumber()) return Val::runtime(toRuntime(v, loc));
        if (v.kind == Val::Kind::Tuple) {
          std::vector<Val> e;
          for (const Val& x : v.elts) e.push_back(mat(x));
          return Val::tuple(std::move(e));
        }
        return v;
      };
      b.setLoc(loc);
      value = mat(value);
    }
    if (value.isRuntime() && value.v->name.empty() && !value.v->isBlockArg()) value.v->name = n->id;
    frame->env[n->id] = std::move(value);
    frame->assignLocs[n->id] = target->loc;
    return;
  }
  const std::vector<ExprPtr>* elts = nullptr;
  if (auto* t = dyn_cast<Tuple>(target))
    elts = &t->elts;
  else if (auto* l = dyn_cast<List>(target))
    elts = &l->elts;
  if (elts) {
    if (value.kind != Val::Kind::Tuple)
      raiseError(target->loc, "cannot unpack " + kindName(value) + " into " +
                                  std::to_string(elts->size()) + " names; expected a tuple");
    if (value.elts.size() != elts->size())
      raiseError(target->loc, "cannot unpack a tuple of " + std::to_string(value.elts.size()) +
                                  " values into " + std::to_string(elts->size()) + " names");
    for (size_t i = 0; i < elts->size(); ++i)
      assign((*elts)[i].get(), value.elts[i], loc, keepConstexpr);
    return;
  }
  if (isa<Subscript>(target))
    raiseError(target->loc, "assignment to a subscript is not supported: tensors are immutable "
                            "values; build a new tensor (tl.where, tl.store to memory) instead");
  raiseError(target->loc, "unsupported assignment target; assign to a name or a tuple of names");
}

// ---------------------------------------------------------------------------------------------
// if
// ---------------------------------------------------------------------------------------------

void Specializer::visitIf(const If* s, std::span<const Stmt* const> rest, bool absorbRest) {
  Val cond = eval(s->test.get());
  StmtList thenList = pointers(s->body), elseList = pointers(s->orelse);
  if (absorbRest) {
    thenList.insert(thenList.end(), rest.begin(), rest.end());
    elseList.insert(elseList.end(), rest.begin(), rest.end());
  }
  // A branch that absorbed the rest of the function ends where the function ends.
  auto finishBranch = [&]() {
    if (absorbRest && !frame->returned) {
      frame->env["$ret"] = fellOffTheEnd();
      frame->returned = true;
    }
  };
  if (cond.isConstexpr()) {
    visitStmts(truthy(cond) ? thenList : elseList);
    finishBranch();
    return;
  }
  b.setLoc(s->test->loc);
  ir::Value* c = requireTensorOrScalar(cond, s->test->loc, "an 'if' condition");
  // A one-element tensor reads as its element (Triton's implicit item()).
  if (!c->type().isScalar() && c->type().numElements() == 1) c = unsplat(*this, c, s->test->loc);
  if (!c->type().isScalar())
    raiseError(s->test->loc, "the condition of a run-time 'if' must be a scalar, got " +
                                 c->type().str() + "; use tl.where for element-wise choice");
  c = toI1(c, s->test->loc);
  ir::Block* outer = b.insertionBlock();
  ir::Op* op = b.create(ir::OpCode::If, {c}, {});
  ir::Block* thenBlock = op->addRegion();
  ir::Block* elseBlock = op->addRegion();

  std::map<std::string, Val> before = frame->env;
  auto beforeLocs = frame->assignLocs;
  b.setInsertionBlock(thenBlock);
  visitStmts(thenList);
  finishBranch();
  std::map<std::string, Val> thenEnv = std::move(frame->env);
  bool thenReturned = frame->returned;
  auto thenLocs = frame->assignLocs;

  frame->env = before;
  frame->assignLocs = beforeLocs;
  frame->returned = false;
  b.setInsertionBlock(elseBlock);
  visitStmts(elseList);
  finishBranch();
  std::map<std::string, Val> elseEnv = std::move(frame->env);
  bool elseReturned = frame->returned;

  // Merge: names bound on both paths; differing values become results of the `if`.
  std::vector<ir::Value*> thenYield, elseYield;
  std::map<std::string, Val> merged;
  std::vector<std::pair<std::string, Val>> patterns;
  for (auto& [name, tv] : thenEnv) {
    auto eit = elseEnv.find(name);
    if (eit == elseEnv.end()) continue;
    const Val& ev = eit->second;
    if (sameVal(tv, ev)) {
      merged[name] = tv;
      continue;
    }
    SourceLoc where = thenLocs.count(name) ? thenLocs[name] : s->loc;
    std::function<Val(const Val&, const Val&)> pair = [&](const Val& t, const Val& e) -> Val {
      if (name == "$ret" && isFellOffTheEnd(t) != isFellOffTheEnd(e)) {
        // Triton: a path that ends without a `return` in a function that returns a value on
        // another path returns poison of that value's type.
        bool thenFell = isFellOffTheEnd(t);
        b.setInsertionBlock(thenFell ? thenBlock : elseBlock);
        Val poison = poisonLike(thenFell ? e : t, s->loc);
        return thenFell ? pair(poison, e) : pair(t, poison);
      }
      if (t.isAggregate() && t.kind == e.kind && t.elts.size() == e.elts.size() &&
          (t.kind != Val::Kind::BlockPtr || sameBlockPtrLayout(t, e))) {
        Val out = t;
        for (size_t i = 0; i < t.elts.size(); ++i) out.elts[i] = pair(t.elts[i], e.elts[i]);
        return out;
      }
      if (sameVal(t, e)) return t;
      bool tOk = t.isRuntime() || t.isNumber(), eOk = e.isRuntime() || e.isNumber();
      if (name == "$ret" && (!tOk || !eOk))
        raiseError(s->loc, "'" + frame->def->name + "' returns " + describe(t) + " when this " +
                               "run-time condition holds but " + describe(e) + " otherwise; " +
                               "return values of one type on every path");
      if (!tOk || !eOk)
        raiseError(where, "'" + name + "' is " + describe(t) + " after the then-branch but " +
                              describe(e) +
                              " after the else-branch of a run-time 'if'; both "
                              "branches must leave values of one type");
      std::optional<ir::DType> dt;
      if (t.isRuntime())
        dt = t.type().elem;
      else if (e.isRuntime())
        dt = e.type().elem;
      b.setInsertionBlock(thenBlock);
      ir::Value* tv2 = t.isRuntime() ? t.v : toRuntime(t, where, dt);
      b.setInsertionBlock(elseBlock);
      ir::Value* ev2 = e.isRuntime() ? e.v : toRuntime(e, where, dt);
      if (tv2->type() != ev2->type() && name == "$ret")
        raiseError(s->loc, "'" + frame->def->name + "' returns " + tv2->type().str() +
                               " when this run-time condition holds but " + ev2->type().str() +
                               " otherwise; return values of one type on every path");
      if (tv2->type() != ev2->type())
        raiseError(where, "'" + name + "' has type " + tv2->type().str() +
                              " after the then-branch but " + ev2->type().str() +
                              " after the else-branch of a run-time 'if'");
      if (isConstPointer(tv2) != isConstPointer(ev2)) {
        // A tl.const pointer and a writable one: one type in Triton's words.
        if (name == "$ret")
          raiseError(s->loc, "Return type mismatch: '" + frame->def->name + "' returns " +
                                 typeText(tv2) + " when this run-time condition holds but " +
                                 typeText(ev2) + " otherwise; return values of one type on " +
                                 "every path");
        raiseError(where, "Mismatched type for " + name + ": " + typeText(tv2) +
                              " after the then-branch but " + typeText(ev2) +
                              " after the else-branch of a run-time 'if'");
      }
      thenYield.push_back(tv2);
      elseYield.push_back(ev2);
      Val placeholder = Val::runtime(nullptr); // replaced by result `i` below
      placeholder.i = static_cast<int64_t>(thenYield.size() - 1);
      return placeholder;
    };
    patterns.emplace_back(name, pair(tv, ev));
  }
  b.setInsertionBlock(thenBlock);
  b.setLoc(s->loc);
  b.create(ir::OpCode::Yield, thenYield, {});
  b.setInsertionBlock(elseBlock);
  b.create(ir::OpCode::Yield, elseYield, {});
  b.setInsertionBlock(outer);
  std::vector<ir::Value*> results;
  for (ir::Value* v : thenYield) results.push_back(op->addResult(v->type(), v->name));
  for (auto& [name, pattern] : patterns) {
    std::function<Val(const Val&)> re = [&](const Val& p) -> Val {
      if (p.isAggregate()) {
        Val out = p;
        for (Val& x : out.elts) x = re(x);
        return out;
      }
      if (p.isRuntime() && !p.v) return Val::runtime(results.at(static_cast<size_t>(p.i)));
      return p;
    };
    merged[name] = re(pattern);
  }
  frame->env = std::move(merged);
  frame->assignLocs = thenLocs;
  frame->returned = thenReturned && elseReturned;
}

Val Specializer::fellOffTheEnd() {
  Val v = Val::none();
  v.b = true; // not an explicit `return` / `return None`
  return v;
}

bool Specializer::isFellOffTheEnd(const Val& v) {
  return v.isNone() && v.b;
}

Val Specializer::poisonLike(const Val& ret, SourceLoc loc) {
  // Any value refines poison: warpweave's is zero (a null pointer), and a compile-time return
  // value is its own poison, as Triton's constexpr-typed poison is that value.
  if (ret.isConstexpr() && !ret.isAggregate()) return ret;
  if (ret.kind == Val::Kind::Tuple) {
    std::vector<Val> elts;
    for (const Val& e : ret.elts) elts.push_back(poisonLike(e, loc));
    return Val::tuple(std::move(elts));
  }
  if (ret.isRuntime() && ret.type().isValue()) {
    b.setLoc(loc);
    const ir::Type& t = ret.type();
    if (!t.isPointer()) return Val::runtime(constant(Val::integer(0), t));
    ir::Value* zero = constant(Val::integer(0), ir::Type::tensor(ir::DType::I64, t.shape));
    return Val::runtime(b.create1(ir::OpCode::IntToPtr, {zero}, t));
  }
  raiseError(loc, "'" + frame->def->name + "' returns " + describe(ret) +
                      " on one path and nothing on another; a value of this kind has no "
                      "placeholder for the path without a return: return it on every path");
}

// ---------------------------------------------------------------------------------------------
// Loops
// ---------------------------------------------------------------------------------------------

namespace {
struct Carried {
  std::string name;
  Val pattern;
};

/// The names a loop body assigns that already exist before the loop: run-time values the loop
/// carries (their leaves are the loop's inits) and compile-time values it must leave unchanged.
struct LoopCarried {
  std::vector<Carried> carried;
  std::map<std::string, Val> constBefore;
  std::vector<ir::Value*> inits;
};

LoopCarried collectLoopCarried(const Frame& frame, const Body& body, const std::string& skip) {
  std::vector<std::string> assigned;
  collectAssignedNames(body, assigned);
  LoopCarried lc;
  for (const std::string& n : assigned) {
    auto it = frame.env.find(n);
    if (it == frame.env.end() || n == skip) continue;
    std::vector<ir::Value*> leaves;
    runtimeLeaves(it->second, leaves);
    if (leaves.empty()) {
      lc.constBefore[n] = it->second;
      continue;
    }
    lc.carried.push_back({n, it->second});
    lc.inits.insert(lc.inits.end(), leaves.begin(), leaves.end());
  }
  return lc;
}

/// The name of the carried value each loop init belongs to, in the order of the inits.
std::vector<std::string> carriedLeafNames(const std::vector<Carried>& carried) {
  std::vector<std::string> names;
  for (const Carried& c : carried) {
    std::vector<ir::Value*> leaves;
    runtimeLeaves(c.pattern, leaves);
    names.insert(names.end(), leaves.size(), c.name);
  }
  return names;
}

/// After the body: the leaves every carried value yields, checking that each kept its structure
/// and types and that no compile-time value was reassigned.
std::vector<ir::Value*> loopYields(Frame& frame, const LoopCarried& lc, SourceLoc loopLoc) {
  auto whereAssigned = [&](const std::string& n) {
    auto it = frame.assignLocs.find(n);
    return it != frame.assignLocs.end() ? it->second : loopLoc;
  };
  std::vector<ir::Value*> yields;
  for (const Carried& c : lc.carried) {
    const Val& after = frame.env[c.name];
    std::vector<ir::Value*> leaves, initLeaves;
    runtimeLeaves(after, leaves);
    runtimeLeaves(c.pattern, initLeaves);
    SourceLoc where = whereAssigned(c.name);
    if (leaves.size() != initLeaves.size() ||
        (after.kind == Val::Kind::Tuple) != (c.pattern.kind == Val::Kind::Tuple) ||
        (after.kind == Val::Kind::BlockPtr) != (c.pattern.kind == Val::Kind::BlockPtr) ||
        (after.kind == Val::Kind::BlockPtr && !sameBlockPtrLayout(after, c.pattern)))
      raiseError(where, "loop-carried '" + c.name + "' changes from " + describe(c.pattern) +
                            " to " + describe(after) + " in the loop body");
    for (size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i]->type() != initLeaves[i]->type())
        raiseError(where, "loop-carried '" + c.name + "' changes type from " +
                              initLeaves[i]->type().str() + " to " + leaves[i]->type().str() +
                              " in the loop body. Please make sure that the type stays consistent: "
                              "cast it (.to(...)) or assign a value of the initial type");
    yields.insert(yields.end(), leaves.begin(), leaves.end());
  }
  for (auto& [n, v] : lc.constBefore)
    if (!sameVal(frame.env[n], v))
      raiseError(whereAssigned(n),
                 "'" + n + "' is the compile-time value " + describe(v) +
                     " before the loop and is reassigned inside it; a run-time loop can only "
                     "carry run-time values (assign it with a plain '" +
                     n + " = ...' before)");
  return yields;
}

/// A block pointer carried by a loop that only advances it yields its base, shape and strides
/// unchanged; carrying them would keep them out of constant folding (a stride of 1) and cost
/// registers. Builds, after `op`, a copy without the iteration values of block pointers that the
/// body yields unchanged (their uses read the value from before the loop) and moves the body's
/// ops into it; the caller erases `op`. Returns `op` itself when nothing is dropped. `args` and
/// `yields` are the body's carried arguments and what it yields (pruned on return); `results`
/// gets, for every carried leaf, the value after the loop.
ir::Op* dropUnchangedBlockPtrParts(ir::Op* op, const LoopCarried& loop,
                                   std::vector<ir::Value*>& args, std::vector<ir::Value*>& yields,
                                   std::vector<ir::Value*>& results) {
  const std::vector<ir::Value*>& inits = loop.inits;
  std::vector<bool> keep(inits.size(), true);
  size_t at = 0;
  bool anyDropped = false;
  for (const Carried& c : loop.carried) {
    std::vector<ir::Value*> leaves;
    runtimeLeaves(c.pattern, leaves);
    for (size_t k = 0; k < leaves.size(); ++k, ++at)
      if (c.pattern.kind == Val::Kind::BlockPtr && yields[at] == args[at]) {
        keep[at] = false;
        anyDropped = true;
      }
  }
  if (!anyDropped) {
    for (unsigned i = 0; i < op->numResults(); ++i) {
      op->result(i)->name = args[i]->name;
      results.push_back(op->result(i));
    }
    return op;
  }
  ir::Block* outer = op->parentBlock();
  ir::Block* oldBody = op->region(0);
  std::vector<ir::Value*> operands(op->operands().begin(), op->operands().begin() + 3);
  std::vector<ir::Type> types;
  for (size_t i = 0; i < inits.size(); ++i)
    if (keep[i]) {
      operands.push_back(inits[i]);
      types.push_back(inits[i]->type());
    }
  ir::Builder nb(outer);
  nb.setLoc(op->loc());
  ir::Op* fresh = nb.create(ir::OpCode::For, operands, types, op->attrs());
  ir::Block* body = fresh->addRegion();
  ir::Value* iv = body->addArg(oldBody->arg(0)->type(), oldBody->arg(0)->name);
  ir::replaceAllUses(*oldBody, oldBody->arg(0), iv);
  std::vector<ir::Value*> keptArgs, keptYields;
  std::map<ir::Value*, ir::Value*> moved; // the old body's arguments -> what replaces them
  unsigned r = 0;
  for (size_t i = 0; i < inits.size(); ++i) {
    if (!keep[i]) {
      moved[args[i]] = inits[i];
      results.push_back(inits[i]);
      continue;
    }
    ir::Value* a = body->addArg(args[i]->type(), args[i]->name);
    moved[args[i]] = a;
    keptArgs.push_back(a);
    fresh->result(r)->name = args[i]->name;
    results.push_back(fresh->result(r++));
  }
  for (auto& [from, to] : moved) ir::replaceAllUses(*oldBody, from, to);
  for (size_t i = 0; i < inits.size(); ++i)
    if (keep[i]) keptYields.push_back(moved.count(yields[i]) ? moved[yields[i]] : yields[i]);
  ir::spliceOps(*oldBody, *body, 0);
  args = std::move(keptArgs);
  yields = std::move(keptYields);
  return fresh;
}
} // namespace

void Specializer::visitFor(const For* s) {
  if (!s->orelse.empty())
    raiseError(s->loc, "'for ... else' is not supported; move the else-block after the loop");
  auto* call = dyn_cast<Call>(s->iter.get());
  if (!call)
    raiseError(s->iter->loc, "a 'for' loop must iterate over range(...), tl.range(...) or "
                             "tl.static_range(...)");
  Val callee = eval(call->func.get());
  std::string kind = callee.kind == Val::Kind::Builtin ? callee.s : "";
  if (kind != "range" && kind != "tl.range" && kind != "tl.static_range")
    raiseError(s->iter->loc, "a 'for' loop must iterate over range(...), tl.range(...) or "
                             "tl.static_range(...), not " +
                                 describe(callee));
  CallSite cs;
  cs.loc = call->loc;
  cs.callee = kind;
  for (const auto& a : call->args) {
    cs.args.push_back(eval(a.get()));
    cs.argLocs.push_back(a->loc);
    cs.argExprs.push_back(a.get());
  }
  for (const auto& k : call->keywords) {
    cs.kwNames.push_back(k.name);
    cs.kwVals.push_back(eval(k.value.get()));
    cs.kwLocs.push_back(k.loc);
    cs.kwExprs.push_back(k.value.get());
  }
  BoundArgs a(cs, {"arg0", "arg1=", "step=", "num_stages=", "loop_unroll_factor=",
                   "disallow_acc_multi_buffer=", "flatten=", "warp_specialize=", "disable_licm="});
  if (kind != "tl.range")
    for (const char* k : {"num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer",
                          "flatten", "warp_specialize", "disable_licm"})
      if (a.has(k))
        raiseError(a.loc(k), std::string(kind) + "() has no keyword argument '" + k + "'");
  Val lo = Val::integer(0), hi = a.get("arg0"), step = Val::integer(1);
  SourceLoc loLoc = a.loc("arg0"), hiLoc = a.loc("arg0"), stepLoc = call->loc;
  const Expr* hiExpr = a.expr("arg0");
  if (a.has("arg1")) {
    lo = a.get("arg0");
    hi = a.get("arg1");
    hiLoc = a.loc("arg1");
    hiExpr = a.expr("arg1");
  }
  if (a.has("step")) {
    step = a.get("step");
    stepLoc = a.loc("step");
  }
  auto* target = dyn_cast<Name>(s->target.get());
  if (!target) raiseError(s->target->loc, "the loop variable must be a single name");

  if (kind == "tl.static_range") {
    int64_t l = constInt(lo, loLoc, "tl.static_range's start", a.expr("arg0"));
    int64_t h = constInt(hi, hiLoc, "tl.static_range's end", hiExpr);
    int64_t st = constInt(step, stepLoc, "tl.static_range's step", a.expr("step"));
    if (st == 0) raiseError(stepLoc, "tl.static_range's step must not be zero");
    int64_t trips = unrollTrips(l, h, st, call->loc, "tl.static_range would unroll", "iterations",
                                "at most 4096 per loop and 65536 in a kernel");
    frame->loopDepth++;
    for (int64_t t = 0; t < trips; ++t) {
      // In 128 bits as well: t * st may overflow where l + t * st, a value of the range, does not.
      frame->env[target->id] =
          Val::integer(static_cast<int64_t>(l + static_cast<__int128>(t) * st));
      visitStmts(pointers(s->body));
    }
    frame->loopDepth--;
    return;
  }

  // A run-time loop (scf.for): bounds become scalars of one integer type.
  b.setLoc(call->loc);
  if (step.kind == Val::Kind::Int && step.i == 0)
    raiseError(stepLoc, "the step of a loop must not be zero");
  if (step.kind == Val::Kind::Int && step.i == INT64_MIN)
    raiseError(stepLoc, "the step of a run-time loop must be greater than -2**63");
  // A negative compile-time step, lowered as Triton does: the loop counts from `hi` up to `lo` by
  // -step and the body sees lo + hi - iv, the values of range(lo, hi, step) in their order.
  bool reversed = step.kind == Val::Kind::Int && step.i < 0;
  if (reversed) {
    std::swap(lo, hi);
    std::swap(loLoc, hiLoc);
    step = Val::integer(-step.i);
  }
  ir::DType ivType = ir::DType::I32;
  for (const Val* v : {&lo, &hi, &step}) {
    if (v->isRuntime()) {
      if (!v->type().isScalar() || !ir::isInt(v->type().elem) || v->type().isPointer())
        raiseError(call->loc, "loop bounds must be integer scalars, got " + v->type().str());
      if (ir::bitWidth(v->type().elem) == 64) ivType = ir::DType::I64;
    } else if (!v->isIntLike()) {
      raiseError(call->loc, "loop bounds must be integers, got " + describe(*v));
    } else if (v->i > INT32_MAX || v->i < INT32_MIN) {
      ivType = ir::DType::I64;
    }
  }
  ir::Value* lb = toRuntime(lo, loLoc, ivType);
  ir::Value* ub = toRuntime(hi, hiLoc, ivType);
  ir::Value* st = toRuntime(step, stepLoc, ivType);
  lb = cast(lb, ivType, loLoc);
  ub = cast(ub, ivType, hiLoc);
  st = cast(st, ivType, stepLoc);

  LoopCarried loop = collectLoopCarried(*frame, s->body, target->id);
  const std::vector<Carried>& carried = loop.carried;
  const std::vector<ir::Value*>& inits = loop.inits;
  std::vector<ir::Value*> operands{lb, ub, st};
  operands.insert(operands.end(), inits.begin(), inits.end());
  std::vector<ir::NamedAttr> attrs;
  if (a.has("num_stages")) {
    int64_t n =
        constInt(a.get("num_stages"), a.loc("num_stages"), "num_stages", a.expr("num_stages"));
    if (n < 0 || n > ir::kMaxPipelineStages)
      raiseError(a.loc("num_stages"), "tl.range's num_stages=" + std::to_string(n) + ": use 0 to " +
                                          std::to_string(ir::kMaxPipelineStages));
    attrs.push_back(ir::attr::For::make::numStages(n));
  }
  if (a.has("loop_unroll_factor")) {
    int64_t u = constInt(a.get("loop_unroll_factor"), a.loc("loop_unroll_factor"),
                         "loop_unroll_factor", a.expr("loop_unroll_factor"));
    if (u < 0 || u > ir::kMaxUnrollPerLoop)
      raiseError(a.loc("loop_unroll_factor"),
                 "tl.range's loop_unroll_factor=" + std::to_string(u) + ": use 0 to " +
                     std::to_string(ir::kMaxUnrollPerLoop) + " copies of the loop body");
    attrs.push_back(ir::attr::For::make::unroll(u));
  }
  if (a.has("warp_specialize")) {
    // A request, as in Triton: transforms/WarpSpecialize.cpp takes the loops it can split into
    // a TMA producer and MMA consumers (sm_90a), the others run as if it were not given.
    Val ws = a.get("warp_specialize");
    if (!ws.isConstexpr() || !ws.isIntLike())
      raiseError(a.loc("warp_specialize"),
                 "tl.range's warp_specialize= must be a compile-time bool");
    if (truthy(ws)) attrs.push_back(ir::attr::For::make::warpSpecialize(true));
  }
  std::vector<ir::Type> types;
  for (ir::Value* v : inits) types.push_back(v->type());
  ir::Op* op = b.create(ir::OpCode::For, operands, types, attrs);
  ir::Block* body = op->addRegion();
  ir::Value* iv = body->addArg(ir::Type::scalar(ivType), target->id);
  std::vector<ir::Value*> args;
  for (ir::Value* v : inits) args.push_back(body->addArg(v->type(), v->name));
  std::map<std::string, Val> before = frame->env;
  size_t next = 0;
  for (const Carried& c : carried) frame->env[c.name] = rebuild(c.pattern, args, next);
  frame->env[target->id] = Val::runtime(iv);

  ir::Block* outer = b.insertionBlock();
  b.setInsertionBlock(body);
  if (reversed)
    frame->env[target->id] =
        Val::runtime(b.binary(ir::OpCode::Sub, b.binary(ir::OpCode::Add, lb, ub), iv));
  frame->loopDepth++;
  visitStmts(pointers(s->body));
  frame->loopDepth--;

  std::vector<ir::Value*> yields = loopYields(*frame, loop, s->loc);
  checkLoopConstness(carriedLeafNames(carried), inits, yields, s->loc);
  std::vector<ir::Value*> results;
  if (ir::Op* kept = dropUnchangedBlockPtrParts(op, loop, args, yields, results); kept != op) {
    // The body's ops moved to the new loop's block: so do the descriptor slots made there.
    for (auto& [slotName, slot] : descriptorSlots)
      if (slot.block == body) slot.block = kept->region(0);
    outer->ops().erase(outer->ops().begin() + static_cast<long>(ir::positionOf(*outer, op)));
    op = kept;
    // What the body computes from the parts no longer carried may now leave the loop.
    hoistLoopInvariants(op->region(0), 0);
  }
  b.setLoc(s->loc);
  b.setInsertionBlock(op->region(0));
  b.create(ir::OpCode::Yield, yields, {});
  b.setInsertionBlock(outer);
  frame->env = std::move(before);
  next = 0;
  for (const Carried& c : carried) frame->env[c.name] = rebuild(c.pattern, results, next);
}

void Specializer::visitWhile(const While* s) {
  if (!s->orelse.empty())
    raiseError(s->loc, "'while ... else' is not supported; move the else-block after the loop");
  LoopCarried loop = collectLoopCarried(*frame, s->body, /*skip=*/"");
  const std::vector<Carried>& carried = loop.carried;
  const std::vector<ir::Value*>& inits = loop.inits;
  b.setLoc(s->loc);
  std::vector<ir::Type> types;
  for (ir::Value* v : inits) types.push_back(v->type());
  ir::Op* op = b.create(ir::OpCode::While, inits, types);
  ir::Block* beforeBlock = op->addRegion();
  ir::Block* afterBlock = op->addRegion();
  std::vector<ir::Value*> beforeArgs, afterArgs;
  for (ir::Value* v : inits) beforeArgs.push_back(beforeBlock->addArg(v->type(), v->name));
  for (ir::Value* v : inits) afterArgs.push_back(afterBlock->addArg(v->type(), v->name));
  std::map<std::string, Val> saved = frame->env;
  ir::Block* outer = b.insertionBlock();

  b.setInsertionBlock(beforeBlock);
  size_t next = 0;
  for (const Carried& c : carried) frame->env[c.name] = rebuild(c.pattern, beforeArgs, next);
  Val cond = eval(s->test.get());
  if (cond.isConstexpr() && !truthy(cond)) {
    // The loop never runs: drop it.
    outer->ops().pop_back();
    b.setInsertionBlock(outer);
    frame->env = std::move(saved);
    return;
  }
  if (cond.isConstexpr())
    raiseError(s->test->loc, "'while' with an always-true condition never ends ('break' is not "
                             "supported); put the exit condition in the loop test");
  b.setLoc(s->test->loc);
  ir::Value* c = requireTensorOrScalar(cond, s->test->loc, "a 'while' condition");
  if (!c->type().isScalar() && c->type().numElements() == 1) c = unsplat(*this, c, s->test->loc);
  if (!c->type().isScalar())
    raiseError(s->test->loc,
               "the condition of a 'while' loop must be a scalar, got " + c->type().str());
  c = toI1(c, s->test->loc);
  std::vector<ir::Value*> condOps{c};
  condOps.insert(condOps.end(), beforeArgs.begin(), beforeArgs.end());
  b.create(ir::OpCode::Condition, condOps, {});

  b.setInsertionBlock(afterBlock);
  next = 0;
  for (const Carried& cr : carried) frame->env[cr.name] = rebuild(cr.pattern, afterArgs, next);
  frame->loopDepth++;
  visitStmts(pointers(s->body));
  frame->loopDepth--;
  std::vector<ir::Value*> yields = loopYields(*frame, loop, s->loc);
  checkLoopConstness(carriedLeafNames(carried), inits, yields, s->loc);
  b.setLoc(s->loc);
  b.create(ir::OpCode::Yield, yields, {});
  b.setInsertionBlock(outer);
  frame->env = std::move(saved);
  std::vector<ir::Value*> results;
  for (unsigned i = 0; i < op->numResults(); ++i) {
    results.push_back(op->result(i));
    op->result(i)->name = afterArgs[i]->name;
  }
  next = 0;
  for (const Carried& cr : carried) frame->env[cr.name] = rebuild(cr.pattern, results, next);
}

// ---------------------------------------------------------------------------------------------
// with tlx.async_tasks() / tlx.async_task(...)
// ---------------------------------------------------------------------------------------------

static CallSite evalCallSite(Specializer& sp, const Call* call, const std::string& name) {
  CallSite cs;
  cs.loc = call->loc;
  cs.callee = name;
  for (const auto& a : call->args) {
    cs.args.push_back(sp.eval(a.get()));
    cs.argLocs.push_back(a->loc);
    cs.argExprs.push_back(a.get());
  }
  for (const auto& k : call->keywords) {
    cs.kwNames.push_back(k.name);
    cs.kwVals.push_back(sp.eval(k.value.get()));
    cs.kwLocs.push_back(k.loc);
    cs.kwExprs.push_back(k.value.get());
  }
  return cs;
}

void Specializer::visitWith(const With* s) {
  if (s->items.size() != 1)
    raiseError(s->loc, "a 'with' statement takes exactly one context: tlx.async_tasks() or "
                       "tlx.async_task(...)");
  const WithItem& item = s->items[0];
  auto* call = dyn_cast<Call>(item.context.get());
  Val callee = call ? eval(call->func.get()) : Val::none();
  if (!call || callee.kind != Val::Kind::Builtin ||
      (callee.s != "tlx.async_tasks" && callee.s != "tlx.async_task" && callee.s != "proton.scope"))
    raiseError(item.context->loc, "unsupported 'with' context: only tlx.async_tasks(), "
                                  "tlx.async_task(...) and Proton's pl.scope(name) are accepted");
  if (item.optionalVar)
    raiseError(item.optionalVar->loc, "'with " + callee.s +
                                          "(...) as NAME' binds nothing; drop "
                                          "the 'as' clause");
  CallSite cs = evalCallSite(*this, call, callee.s);
  if (callee.s == "proton.scope") {
    // Proton's scope: enter_scope and exit_scope around the body, both nothing here
    // (ProfilerScopes.cpp); the body runs where the 'with' is.
    protonScopeName("scope", cs);
    visitStmts(pointers(s->body));
    return;
  }
  if (callee.s == "tlx.async_task") {
    visitAsyncTask(s, cs);
    return;
  }
  if (!cs.args.empty())
    raiseError(call->loc, "tlx.async_tasks() takes keyword options only: exclusive=, "
                          "no_ending_cluster_sync=, mbarrier_try_wait_suspend_ns=, "
                          "warp_specialize=");
  // TLX's hints to its lowering (worker dispatch strategy, skipping an ending cluster sync, the
  // mbarrier try_wait suspend time): checked as TLX checks them; warpweave's task lowering has
  // one dispatch, inserts no ending cluster sync and waits without a suspend-time hint, so they
  // change nothing. TLX's async_tasks also takes warp_specialize= (tasks are always
  // warp-specialized there and here), so it too is only checked.
  BoundArgs hints(cs, {"exclusive=", "no_ending_cluster_sync=", "mbarrier_try_wait_suspend_ns=",
                       "warp_specialize="});
  for (const char* flag : {"exclusive", "no_ending_cluster_sync", "warp_specialize"})
    if (hints.has(flag) && !hints.get(flag).isConstexpr())
      raiseError(hints.loc(flag),
                 std::string("tlx.async_tasks(") + flag + "=...) must be a compile-time bool");
  if (hints.has("mbarrier_try_wait_suspend_ns") &&
      constInt(hints.get("mbarrier_try_wait_suspend_ns"), hints.loc("mbarrier_try_wait_suspend_ns"),
               "mbarrier_try_wait_suspend_ns", hints.expr("mbarrier_try_wait_suspend_ns")) < 0)
    raiseError(hints.loc("mbarrier_try_wait_suspend_ns"),
               "mbarrier_try_wait_suspend_ns must be a non-negative integer");
  if (taskContext != TaskContext::None)
    raiseError(s->loc, "'with tlx.async_tasks()' cannot be nested inside another async task "
                       "region");
  b.setLoc(s->loc);
  ir::Op* op = b.create(ir::OpCode::AsyncTasks, {}, {});
  ir::Block* region = op->addRegion();
  ir::Block* outer = b.insertionBlock();
  b.setInsertionBlock(region);
  taskContext = TaskContext::Tasks;
  frame->loopDepth++;
  SourceLoc firstDefault;
  // The region's statements: task blocks, and 'if's on compile-time conditions that choose
  // among them (as in TLX, tasks are counted after those conditions are resolved).
  std::function<void(const StmtList&)> visitTaskList = [&](const StmtList& body) {
    for (const ast::Stmt* st : body) {
      if (isa<Pass>(st)) continue;
      if (auto* es = dyn_cast<ExprStmt>(st))
        if (auto* c = dyn_cast<Constant>(es->value.get()); c && c->type == Constant::Type::String)
          continue;
      if (auto* ifs = dyn_cast<If>(st)) {
        Val cond = eval(ifs->test.get());
        if (!cond.isConstexpr())
          raiseError(ifs->test->loc, "an 'if' directly inside 'with tlx.async_tasks():' chooses "
                                     "tasks at compile time, so its condition must be a constexpr; "
                                     "put a run-time 'if' inside a task");
        visitTaskList(pointers(truthy(cond) ? ifs->body : ifs->orelse));
        continue;
      }
      auto* w = dyn_cast<With>(st);
      const Call* tc =
          w && w->items.size() == 1 ? dyn_cast<Call>(w->items[0].context.get()) : nullptr;
      Val tcallee = tc ? eval(tc->func.get()) : Val::none();
      if (!tc || tcallee.kind != Val::Kind::Builtin || tcallee.s != "tlx.async_task")
        raiseError(st->loc, "only 'with tlx.async_task(...):' blocks may appear directly inside "
                            "'with tlx.async_tasks():'; move this statement into a task or before "
                            "the async_tasks block");
      CallSite tcs = evalCallSite(*this, tc, "tlx.async_task");
      bool isDefault =
          !tcs.args.empty() && tcs.args[0].kind == Val::Kind::String && tcs.args[0].s == "default";
      if (isDefault) {
        if (firstDefault.valid())
          raiseError(tc->loc,
                     "two default async tasks; only one 'tlx.async_task(\"default\")' is "
                     "allowed",
                     {note(firstDefault, "the first default task is here")});
        firstDefault = tc->loc;
      }
      b.setLoc(w->loc);
      visitAsyncTask(w, tcs);
    }
  };
  visitTaskList(pointers(s->body));
  frame->loopDepth--;
  taskContext = TaskContext::None;
  b.setInsertionBlock(outer);
}

void Specializer::visitAsyncTask(const With* s, const CallSite& call) {
  if (taskContext != TaskContext::Tasks)
    raiseError(call.loc, taskContext == TaskContext::Task
                             ? "tlx.async_task(...) cannot be nested inside another async task"
                             : "tlx.async_task(...) must be directly inside 'with "
                               "tlx.async_tasks():'");
  BoundArgs a(call, {"task=", "num_warps=", "num_regs=", "registers=", "replicate=",
                     "warp_group_start_id="});
  bool isDefault = false;
  if (a.has("task")) {
    const Val& t = a.get("task");
    if (t.kind == Val::Kind::String) {
      if (t.s != "default")
        raiseError(a.loc("task"), "unknown async task kind '" + t.s +
                                      "'; write tlx.async_task(\"default\") for the default task "
                                      "or tlx.async_task(num_warps=N, ...) for another");
      isDefault = true;
    } else if (t.kind != Val::Kind::Tuple) {
      raiseError(a.loc("task"), "tlx.async_task's first argument must be \"default\"");
    }
  }
  int64_t numWarps = 0, numRegs = 0, replicate = 1, wgStart = -1;
  if (a.has("num_warps"))
    numWarps = constInt(a.get("num_warps"), a.loc("num_warps"), "num_warps", a.expr("num_warps"));
  if (a.has("num_regs"))
    numRegs = constInt(a.get("num_regs"), a.loc("num_regs"), "num_regs", a.expr("num_regs"));
  if (a.has("registers"))
    numRegs = constInt(a.get("registers"), a.loc("registers"), "registers", a.expr("registers"));
  if (a.has("replicate"))
    replicate = constInt(a.get("replicate"), a.loc("replicate"), "replicate", a.expr("replicate"));
  if (a.has("warp_group_start_id"))
    wgStart = constInt(a.get("warp_group_start_id"), a.loc("warp_group_start_id"),
                       "warp_group_start_id", a.expr("warp_group_start_id"));
  if (isDefault && a.has("num_warps"))
    raiseError(a.loc("num_warps"), "the default async task runs on the kernel's num_warps; drop "
                                   "num_warps= here (set num_warps at launch)");
  if (!isDefault && numWarps <= 0)
    raiseError(call.loc, "a non-default async task needs num_warps=N (N > 0): "
                         "tlx.async_task(num_warps=1, num_regs=40)");
  if (!isDefault && (numWarps > 32 || (numWarps & (numWarps - 1)) != 0))
    raiseError(a.loc("num_warps"), "async_task num_warps=" + std::to_string(numWarps) +
                                       " is not supported; use a power of two from 1 to 32");
  if (replicate < 1) raiseError(a.loc("replicate"), "replicate must be at least 1");
  if (replicate > ir::kMaxWarpsPerCta) // each replica is a task of at least one warp
    raiseError(a.loc("replicate"), "replicate=" + std::to_string(replicate) +
                                       ": each replica runs on warps of its own, and a CTA has "
                                       "at most 32 warps");
  if (numRegs != 0 && (numRegs < 24 || numRegs > 256 || numRegs % 8 != 0))
    raiseError(a.loc(a.has("num_regs") ? "num_regs" : "registers"),
               "a register budget must be a multiple of 8 between 24 and 256, got " +
                   std::to_string(numRegs));
  std::map<std::string, Val> before = frame->env;
  ir::Block* outer = b.insertionBlock();
  std::optional<int64_t> savedReplica = replicaId;
  for (int64_t r = 0; r < replicate; ++r) {
    b.setInsertionBlock(outer);
    b.setLoc(s->loc);
    ir::Op* op = b.create(
        ir::OpCode::AsyncTask, {}, {},
        {ir::attr::AsyncTask::make::isDefault(isDefault),
         ir::attr::AsyncTask::make::numWarps(isDefault ? int64_t(in.options.numWarps) : numWarps),
         ir::attr::AsyncTask::make::numRegs(numRegs),
         ir::attr::AsyncTask::make::replicate(replicate), ir::attr::AsyncTask::make::replica(r),
         ir::attr::AsyncTask::make::warpGroupStartId(wgStart),
         ir::attr::AsyncTask::make::name(isDefault ? "default" : "task")});
    b.setInsertionBlock(op->addRegion());
    replicaId = r;
    taskContext = TaskContext::Task;
    visitStmts(pointers(s->body));
    taskContext = TaskContext::Tasks;
    frame->env = before; // names bound inside a task stay inside it
  }
  replicaId = savedReplica;
  b.setInsertionBlock(outer);
}

// ---------------------------------------------------------------------------------------------
// Helper inlining
// ---------------------------------------------------------------------------------------------

bool Specializer::isJit(const FunctionDef& def) const {
  for (const auto& d : def.decorators)
    if (lastComponent(d.get()) == "jit") return true;
  return false;
}

Val Specializer::callFunction(const FunctionRef& fn, const CallSite& call) {
  const FunctionDef* def = fn.def;
  if (!isJit(*def))
    raiseError(call.loc,
               "'" + def->name +
                   "' is not a @jit function; only functions decorated "
                   "with @ww.jit (or @triton.jit) can be called from a kernel",
               {note(def->loc, "'" + def->name + "' is defined here")});
  // Inlining recurses through the specializer; CPython's own limit on nested calls is 1000.
  // A helper may call itself: as in Triton, where each constexpr specialization is its own
  // function, recursion that compile-time values end (a constexpr count halved to 1) inlines.
  if (callStack.size() >= kMaxInlineDepth) {
    bool recursive = std::any_of(callStack.begin(), callStack.end(),
                                 [&](const FunctionRef& f) { return f.def == def; });
    if (recursive)
      raiseError(call.loc, "recursive call to '" + def->name + "' did not end within " +
                               std::to_string(kMaxInlineDepth) +
                               " nested calls; @jit helpers are inlined, so recursion must end "
                               "on compile-time values (e.g. a tl.constexpr argument that "
                               "shrinks to a base case under a compile-time 'if')");
    raiseError(call.loc, "calls to @jit helpers nest more than " + std::to_string(kMaxInlineDepth) +
                             " deep; helpers are inlined, so the chain of calls must be shorter");
  }
  if (++inlinedCalls > kMaxInlinedCalls)
    raiseError(call.loc, "more than " + std::to_string(kMaxInlinedCalls) +
                             " calls to @jit helpers were inlined into this kernel; helpers are "
                             "inlined at every call, so a recursion that calls itself more than "
                             "once per level grows exponentially");
  Frame nf;
  nf.module = fn.module;
  nf.def = def;
  std::vector<bool> bound(def->params.size(), false);
  if (call.args.size() > def->params.size())
    raiseError(call.loc, "'" + def->name + "' takes " + std::to_string(def->params.size()) +
                             " arguments but " + std::to_string(call.args.size()) + " were given");
  for (size_t i = 0; i < call.args.size(); ++i) {
    nf.env[def->params[i].name] = call.args[i];
    bound[i] = true;
  }
  for (size_t k = 0; k < call.kwNames.size(); ++k) {
    size_t idx = def->params.size();
    for (size_t i = 0; i < def->params.size(); ++i)
      if (def->params[i].name == call.kwNames[k]) idx = i;
    if (idx == def->params.size()) {
      std::vector<std::string> names;
      for (const Param& p : def->params) names.push_back(p.name);
      std::string msg = "'" + def->name + "' has no parameter '" + call.kwNames[k] + "'";
      std::string near = closestMatch(call.kwNames[k], names);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      raiseError(call.kwLocs[k], msg);
    }
    if (bound[idx])
      raiseError(call.kwLocs[k],
                 "argument '" + call.kwNames[k] + "' of '" + def->name + "' is given twice");
    nf.env[call.kwNames[k]] = call.kwVals[k];
    bound[idx] = true;
  }
  Frame* caller = frame;
  frame = &nf;
  callStack.push_back(fn);
  Val result;
  try {
    for (size_t i = 0; i < def->params.size(); ++i) {
      const Param& p = def->params[i];
      if (!bound[i]) {
        if (!p.defaultValue)
          raiseError(call.loc,
                     "missing argument '" + p.name + "' in the call to '" + def->name + "'");
        nf.env[p.name] = eval(p.defaultValue.get());
      }
      // A called @jit function's tl.constexpr annotation does not force its argument: as in
      // Triton, the value decides (a run-time tensor stays a run-time value in the callee, and a
      // use that needs a constant reports itself there). Only kernel parameters are bound by it.
    }
    visitStmts(pointers(def->body));
    auto it = nf.env.find("$ret");
    result = it == nf.env.end() || it->second.isNone() ? Val::none() : it->second;
  } catch (CompileError& e) {
    frame = caller;
    callStack.pop_back();
    e.addNote(call.loc, "in '" + def->name + "' called from here");
    throw;
  }
  frame = caller;
  callStack.pop_back();
  return result;
}

// ---------------------------------------------------------------------------------------------
// Small utilities
// ---------------------------------------------------------------------------------------------

static void collectTargets(const Expr* t, std::vector<std::string>& out) {
  if (auto* n = dyn_cast<Name>(t)) {
    if (std::find(out.begin(), out.end(), n->id) == out.end()) out.push_back(n->id);
  } else if (auto* tu = dyn_cast<Tuple>(t)) {
    for (const auto& e : tu->elts) collectTargets(e.get(), out);
  } else if (auto* l = dyn_cast<List>(t)) {
    for (const auto& e : l->elts) collectTargets(e.get(), out);
  }
}

void collectAssignedNames(const Body& body, std::vector<std::string>& out) {
  for (const auto& s : body) {
    switch (s->kind) {
    case StmtKind::Assign:
      for (const auto& t : ast::cast<Assign>(s.get())->targets) collectTargets(t.get(), out);
      break;
    case StmtKind::AugAssign:
      collectTargets(ast::cast<AugAssign>(s.get())->target.get(), out);
      break;
    case StmtKind::AnnAssign:
      collectTargets(ast::cast<AnnAssign>(s.get())->target.get(), out);
      break;
    case StmtKind::If:
      collectAssignedNames(ast::cast<If>(s.get())->body, out);
      collectAssignedNames(ast::cast<If>(s.get())->orelse, out);
      break;
    case StmtKind::For:
      collectTargets(ast::cast<For>(s.get())->target.get(), out);
      collectAssignedNames(ast::cast<For>(s.get())->body, out);
      break;
    case StmtKind::While:
      collectAssignedNames(ast::cast<While>(s.get())->body, out);
      break;
    case StmtKind::With:
      collectAssignedNames(ast::cast<With>(s.get())->body, out);
      break;
    default:
      break;
    }
  }
}

bool containsReturn(const Body& body) {
  for (const auto& s : body) {
    if (isa<Return>(s.get())) return true;
    if (auto* i = dyn_cast<If>(s.get()))
      if (containsReturn(i->body) || containsReturn(i->orelse)) return true;
  }
  return false;
}

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closestMatch(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t bestDist = SIZE_MAX;
  for (const std::string& c : candidates) {
    size_t d = editDistance(name, c);
    if (d < bestDist) {
      bestDist = d;
      best = c;
    }
  }
  size_t limit = std::max<size_t>(1, std::min<size_t>(3, name.size() / 3 + 1));
  return bestDist <= limit ? best : std::string();
}

int64_t Specializer::unrollTrips(int64_t lo, int64_t hi, int64_t step, SourceLoc loc,
                                 const std::string& what, const std::string& unit,
                                 const std::string& limits) {
  __int128 span = static_cast<__int128>(hi) - lo;
  __int128 wide = span / step + (span % step != 0);
  int64_t trips = wide > INT64_MAX ? INT64_MAX : static_cast<int64_t>(std::max<__int128>(wide, 0));
  if (trips > 0 && (trips > ir::kMaxUnrollPerLoop || unrolledIterations + trips > 65536))
    raiseError(loc, what + " " + std::to_string(trips) + " more " + unit + " (" + limits + ")");
  unrolledIterations += trips;
  return trips;
}

} // namespace ww::specialize
