// The specializer's internal state and the interface shared by its implementation files:
// statements and control flow (Specializer.cpp), expressions (Expressions.cpp), constexpr folding
// (ConstEval.cpp), type promotion and broadcasting (Promotion.cpp), tl.* and tlx.* builtins.
#pragma once

#include "ir/Builder.h"
#include "specialize/Specializer.h"
#include "specialize/Values.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ww::specialize {

/// The arguments of one call, evaluated, before they are bound to parameter names.
struct CallSite {
  SourceLoc loc;         // the call expression
  std::string callee;    // "tl.arange", for messages
  std::vector<Val> args; // positional
  std::vector<SourceLoc> argLocs;
  std::vector<const ast::Expr*> argExprs; // null for synthesized arguments (method receivers)
  std::vector<std::string> kwNames;
  std::vector<Val> kwVals;
  std::vector<SourceLoc> kwLocs;
  std::vector<const ast::Expr*> kwExprs;
};

/// Arguments bound to the parameters of a builtin, by name.
class BoundArgs {
public:
  /// `params`: parameter names; "name=" marks an optional one, "*name" collects the remaining
  /// positional arguments into a tuple (as `tl.reshape(x, 4, 8)`).
  BoundArgs(const CallSite& call, std::initializer_list<const char*> params);

  bool has(const std::string& name) const; // given and not None
  const Val& get(const std::string& name) const;
  SourceLoc loc(const std::string& name) const; // the argument's location (the call's if absent)
  const ast::Expr* expr(const std::string& name) const;
  const CallSite& call() const { return call_; }

private:
  struct Slot {
    std::string name;
    bool given = false;
    Val val;
    SourceLoc loc;
    const ast::Expr* expr = nullptr;
  };
  const Slot* find(const std::string& name) const;
  const CallSite& call_;
  std::vector<Slot> slots_;
};

/// One activation of a kernel or inlined helper: its local names.
struct Frame {
  std::map<std::string, Val> env;
  std::map<std::string, SourceLoc> assignLocs; // last assignment of each name, for messages
  size_t module = 0;
  const ast::FunctionDef* def = nullptr;
  bool returned = false; // the current path has executed `return`
  int loopDepth = 0;
};

/// Where the specializer is with respect to `with tlx.async_tasks()`.
enum class TaskContext { None, Tasks, Task };

class Specializer {
public:
  explicit Specializer(const SpecializeInput& input);
  std::unique_ptr<ir::Function> run();
  void checkOptions(SourceLoc loc) const;
  /// Refuses, at `loc`, a kernel grown past ir::kMaxKernelOps (inlined helpers, static loops).
  void checkKernelSize(SourceLoc loc) const;

  // ---- statements (Specializer.cpp) ----
  using StmtList = std::vector<const ast::Stmt*>;
  void visitStmts(const StmtList& stmts);
  /// Visits `stmts[i]` with `rest` = the statements after it, which an `if` containing a
  /// `return` absorbs into its branches. Returns true when it consumed `rest`.
  /// `rest`: the statements after `s` in its block (an `if` that returns absorbs them).
  bool visitStmt(const ast::Stmt* s, std::span<const ast::Stmt* const> rest);
  void visitIf(const ast::If* s, std::span<const ast::Stmt* const> rest, bool absorbRest);
  void visitFor(const ast::For* s);
  void visitWhile(const ast::While* s);
  void visitWith(const ast::With* s);
  void visitAsyncTask(const ast::With* s, const CallSite& call);
  /// Binds `target` (a name or a tuple of names); a plain assignment (keepConstexpr false) turns
  /// python numbers into run-time scalars, as Triton does.
  void assign(const ast::Expr* target, Val value, SourceLoc loc, bool keepConstexpr);
  /// Inlines a @jit helper: binds its parameters in a fresh frame and returns its `return` value.
  Val callFunction(const FunctionRef& fn, const CallSite& call);
  bool isJit(const ast::FunctionDef& def) const;

  // ---- expressions (Expressions.cpp) ----
  Val eval(const ast::Expr* e);
  Val evalName(const ast::Name* e);
  Val evalCall(const ast::Call* e);
  Val evalAttribute(const ast::Attribute* e);
  Val evalSubscript(const ast::Subscript* e);
  Val evalBinOp(ast::BinOpKind op, const Val& a, const Val& b, SourceLoc loc);
  Val evalUnary(ast::UnaryOpKind op, const Val& a, SourceLoc loc);
  Val evalCompare(ast::CmpOpKind op, const Val& a, const Val& b, SourceLoc loc);
  Val evalBoolOp(const ast::BoolOp* e);
  Val evalIfExp(const ast::IfExp* e);
  /// `[elt for x in range(...)]` / `[elt for x in some_tuple]`: a tuple, as in Triton.
  Val evalListComp(const ast::ListComp* e);
  Val getAttr(const Val& base, const std::string& name, SourceLoc loc);
  Val callValue(const Val& callee, CallSite& call);
  Val callMethod(const Val& self, const std::string& name, CallSite& call);
  /// Looks `name` up as a global of module `module`: its caller-given names when it has them;
  /// else caller globals, imports, functions, constants from its text.
  std::optional<Val> lookupGlobal(size_t module, const std::string& name, SourceLoc loc);
  /// What a caller-given binding stands for; `module` holds the name.
  std::optional<Val> boundValue(size_t module, const std::string& name, const NameBinding& binding,
                                SourceLoc loc);
  /// What an import statement binds, read from its text: language namespaces by module name,
  /// helper modules and their functions among the files given.
  Val importedValue(size_t module, const ast::ImportAlias& alias, SourceLoc loc);
  /// Module `dotted` in kernel code: a language namespace, a given file ("module:N"), a package
  /// of given files ("package:a.b"), or "external:a.b" (an error where it is used).
  Val moduleValue(const std::string& dotted);
  std::optional<size_t> findModule(const std::string& dotted) const;
  /// A module-level constant assignment of module `module`'s text, evaluated once.
  Val textConstant(size_t module, const std::string& name, SourceLoc loc);
  /// Runs `fn` in a fresh frame of module `module`, caching its value as the global `name` and
  /// reporting a global defined in terms of itself.
  Val evalGlobalOnce(size_t module, const std::string& name, SourceLoc loc,
                     const std::function<Val()>& fn);
  /// A compile-time value the caller gave as text (a signature constexpr, a global): literals,
  /// tuples and tl./tlx. names (the language, whatever the kernel's file binds tl to). Errors say
  /// "bad value 'TEXT' for WHAT" at `loc`.
  Val evalLiteral(const std::string& text, const std::string& what, SourceLoc loc);
  Val evalLiteralExpr(const ast::Expr* e);

  // ---- compile-time arithmetic (ConstEval.cpp) ----
  Val constBinary(ast::BinOpKind op, const Val& a, const Val& b, SourceLoc loc);
  Val constCompare(ast::CmpOpKind op, const Val& a, const Val& b, SourceLoc loc);
  Val constUnary(ast::UnaryOpKind op, const Val& a, SourceLoc loc);
  Val mathConstFunction(const std::string& name, const CallSite& call);

  // ---- runtime arithmetic, promotion, broadcasting (Promotion.cpp) ----
  /// The IR type a python number takes when it becomes a run-time value on its own.
  static ir::DType pythonScalarDType(const Val& v);
  /// Triton's computation type of a binary operation; `aIsPython`: a is a python number.
  ir::DType computationType(ir::DType a, bool aIsPython, ir::DType b, bool bIsPython, bool divOrMod,
                            SourceLoc loc, const char* opSymbol);
  /// A run-time value of `v` (numbers become constants); `dtype` forces the type of numbers.
  ir::Value* toRuntime(const Val& v, SourceLoc loc, std::optional<ir::DType> dtype = {},
                       const char* what = nullptr);
  ir::Value* constant(const Val& v, const ir::Type& type);
  ir::Value* cast(ir::Value* x, ir::DType to, SourceLoc loc, bool bitcast = false);
  ir::Value* castPtr(ir::Value* x, ir::DType pointee, SourceLoc loc);
  ir::Value* toI1(ir::Value* x, SourceLoc loc);
  ir::Value* broadcastTo(ir::Value* x, const std::vector<int64_t>& shape, SourceLoc loc);
  std::vector<int64_t> broadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                       SourceLoc loc, const char* what);
  /// Brings two operands to one shape (and, when `dtype` is set, one element type).
  std::pair<ir::Value*, ir::Value*> unify(const Val& a, const Val& b, SourceLoc loc,
                                          std::optional<ir::DType> dtype, const char* what);
  Val runtimeBinary(ast::BinOpKind op, const Val& a, const Val& b, SourceLoc loc);
  Val runtimeCompare(ast::CmpOpKind op, const Val& a, const Val& b, SourceLoc loc);
  Val runtimeUnary(ast::UnaryOpKind op, const Val& a, SourceLoc loc);
  ir::Value* minMax(bool isMax, const Val& a, const Val& b, SourceLoc loc);
  ir::Value* expandDims(ir::Value* x, int64_t axis, SourceLoc loc);
  ir::Value* reshape(ir::Value* x, std::vector<int64_t> shape, SourceLoc loc);

  // ---- builtins (TlBuiltins.cpp, TlxBuiltins.cpp; dispatched through BuiltinTable.h) ----
  Val callBuiltin(const std::string& name, CallSite& call);
  Val callTl(const std::string& name, CallSite& call);
  Val callTlx(const std::string& name, CallSite& call);
  /// tlx.local_gather / tlx.local_scatter (TlxGatherScatter.cpp).
  Val callTlxGatherScatter(const std::string& name, CallSite& call);
  Val callPython(const std::string& name, CallSite& call);
  /// tlx.async_load(bulk=True) and tlx.async_store: 1-D bulk copies (TlxTmaExtras.cpp).
  Val asyncBulkCopy(const BoundArgs& a, bool isLoad);
  /// tlx.allocate_tensor_descriptor, tlx.make_tensor_descriptor and
  /// tlx.reinterpret_tensor_descriptor (TlxTmaExtras.cpp).
  Val tensorDescriptorSlots(const std::string& name, CallSite& call);
  /// tlx.storage_alias_spec, tlx.reuse_group, local_alloc(reuse=spec) and
  /// spec.set_buffer_overlap (TlxStorageAlias.cpp).
  Val callStorageAlias(const std::string& name, CallSite& call);
  void joinStorageAlias(const Val& spec, ir::Op* alloc, SourceLoc loc);
  /// The storage_alias_spec a reuse= of shared-memory allocation `reused` joins: made for it
  /// (and it made its first member) the first time.
  Val sharedReuseSpec(const Val& reused, SourceLoc loc);
  Val storageAliasAttr(const Val& spec, const std::string& name, SourceLoc loc);
  Val storageAliasMethod(const Val& spec, const std::string& name, CallSite& call);
  /// Places the members of every spec with a set_buffer_overlap, once the kernel is built: a
  /// tensor-memory member's columns depend on the MMAs that use it (ir/TmemPairs.h), as TLX
  /// places them after its layout propagation.
  void placeStorageAliases(const ir::Block& body);
  /// Attribute `name` of namespace `ns` ("tl", "tlx", "math", ...); nullopt when unknown.
  std::optional<Val> namespaceMember(const std::string& ns, const std::string& name);
  /// "unknown function 'tl.arnge'; did you mean 'tl.arange'?" for namespace `ns`.
  [[noreturn]] void unknownMember(const std::string& ns, const std::string& name, SourceLoc loc);
  Val reduceOp(const std::string& kind, const Val& input, const BoundArgs& a, SourceLoc loc);
  /// tl.dot of fp32 operands with input_precision bf16x3 (parts 2) or bf16x6 (parts 3): the
  /// sum of bf16 products Triton's F32DotTC pass builds, plus `acc`.
  ir::Value* bf16xNDot(ir::Value* x, ir::Value* y, ir::Value* acc, int parts, SourceLoc loc);
  Val dot(const BoundArgs& a, SourceLoc loc);
  Val inlineAsmElementwise(CallSite& call); // InlineAsm.cpp
  /// tl.extra.cuda.gdc_wait / gdc_launch_dependents (InlineAsm.cpp).
  Val gridDependencyControl(const std::string& name, CallSite& call);
  /// tl.extra.cuda.smid / globaltimer: special registers read by inline asm (InlineAsm.cpp).
  Val specialRegister(const std::string& name, CallSite& call);
  /// tl.target_info's compile-time queries (is_cuda, cuda_capability_geq, is_hip...).
  Val targetInfo(const std::string& name, CallSite& call);
  /// Proton's in-kernel scopes, pl.enter_scope / pl.exit_scope (ProfilerScopes.cpp): nothing.
  Val callProton(const std::string& name, CallSite& call);
  void protonScopeName(const std::string& name, CallSite& call);
  Val loadOp(const BoundArgs& a, SourceLoc loc);
  void storeOp(const BoundArgs& a, SourceLoc loc);
  Val customReduce(const std::vector<ir::Value*>& inputs, int64_t axis, const Val& combine,
                   bool keepDims, bool scan, bool reverse, SourceLoc loc);

  // ---- checks used everywhere ----
  int64_t constInt(const Val& v, SourceLoc loc, const std::string& what,
                   const ast::Expr* expr = nullptr);
  bool constBool(const Val& v, SourceLoc loc, const std::string& what,
                 const ast::Expr* expr = nullptr);
  std::vector<int64_t> constShape(const Val& v, SourceLoc loc, const std::string& what,
                                  const ast::Expr* expr = nullptr);
  ir::DType constDType(const Val& v, SourceLoc loc, const std::string& what);
  /// Raises "WHAT must be a compile-time constant" with a note on how to make it one.
  [[noreturn]] void needConstexpr(SourceLoc loc, const std::string& what, const ast::Expr* expr);
  ir::Value* requireTensorOrScalar(const Val& v, SourceLoc loc, const std::string& what);
  ir::Value* requireBuffer(const Val& v, SourceLoc loc, const std::string& what);
  ir::Value* requireBarrier(const Val& v, SourceLoc loc, const std::string& what);
  ir::Value* requireDescriptor(const Val& v, SourceLoc loc, const std::string& what);
  ir::Value* requireScalarI32(const Val& v, SourceLoc loc, const std::string& what);

  // ---- returns (Specializer.cpp) ----
  /// The return value of a path that ends without a `return` in a function with an `if` that
  /// returns: None, marked so that merging it with a value returned on the other path gives that
  /// value's poison (Triton's rule) rather than an error.
  static Val fellOffTheEnd();
  static bool isFellOffTheEnd(const Val& v);
  /// Poison of `ret`'s type at the insertion point: zero, a null pointer, or a compile-time
  /// value itself; tuples element by element.
  Val poisonLike(const Val& ret, SourceLoc loc);

  // ---- pointers to constant data, tl.const (ConstPointers.cpp) ----
  /// Whether `v` is a pointer (tensor) to constant data: a tl.const kernel argument, a value a
  /// pointer-preserving op computed from one, or an `if` or loop result (and a loop's carried
  /// value) merged from one.
  bool isConstPointer(const ir::Value* v);
  /// `v`'s type as messages show it: `const ptr<fp32>` for a pointer to constant data.
  std::string typeText(const ir::Value* v);
  /// Refuses a store or atomic through a pointer to constant data ("Cannot store to a constant
  /// pointer", as Triton).
  void checkStoreTarget(const ir::Value* ptr, SourceLoc loc);
  /// Refuses a loop whose body turns a carried pointer to constant data into a writable one (or
  /// back): `inits` and `yields` are the carried values before and after the body, `names` the
  /// variable each belongs to.
  void checkLoopConstness(const std::vector<std::string>& names,
                          const std::vector<ir::Value*>& inits,
                          const std::vector<ir::Value*>& yields, SourceLoc loc);

  // ---- state ----
  std::unordered_set<const ir::Value*> constPointers;
  std::unordered_map<const ir::Value*, bool> constPointerMemo;
  /// The kernel's tlx.storage_alias_spec objects (a Val::Kind::Object indexes this).
  struct AliasSpec {
    bool tmem = false;
    int64_t sizeBytes = 0;        // buffer_size_bytes= (0: the compiler sizes it)
    std::vector<ir::Op*> members; // local_allocs with reuse= this spec
    bool overlapSet = false;
    bool implicit = false; // made for reuse= of a shared-memory local_alloc (TLX's alias)
    Val overlap;           // set_buffer_overlap's reuse_group, placed by placeStorageAliases
    SourceLoc overlapLoc;
  };
  std::vector<AliasSpec> aliasSpecs;
  static int64_t specUnits(const AliasSpec& s);
  const SpecializeInput& in;
  ir::Builder b;
  Frame* frame = nullptr;
  std::vector<FunctionRef> callStack;
  TaskContext taskContext = TaskContext::None;
  std::optional<int64_t> replicaId;
  int64_t unrolledIterations = 0; // bounds static unrolling so no input can blow up the IR
  int64_t inlinedCalls = 0;       // bounds helper inlining (a recursion may branch on constexprs)
  /// The trips of range(lo, hi, step) (step != 0; counted in 128 bits, so that
  /// range(-2**63, 2**63 - 1) does not overflow), added to unrolledIterations; a located error
  /// when they pass 4096 for one loop or 65536 in the kernel, reading "<what> N more <unit>
  /// (<limits>)", e.g. "tl.static_range would unroll 5000 more iterations (...)".
  int64_t unrollTrips(int64_t lo, int64_t hi, int64_t step, SourceLoc loc, const std::string& what,
                      const std::string& unit, const std::string& limits);
  int64_t opsAtStart = 0; // ir::opsCreatedOnThisThread() when specialization began
  std::set<const ir::Value*> kernelArgValues; // for "declare it tl.constexpr" notes
  std::map<std::string, Val> signatureConstexprs;
  /// tlx.allocate_tensor_descriptor's slots ("tensor_descriptor_ptr N[i]"): the descriptor
  /// tlx.make_tensor_descriptor made in each, and the block it was made in.
  struct DescriptorSlot {
    ir::Value* desc = nullptr;
    ir::Block* block = nullptr;
    ir::Value* index = nullptr; // the run-time index of a slot "N[?]"
  };
  /// slots[i] of tlx.allocate_tensor_descriptor with a run-time i: the slot "N[?]" (`v`: i).
  Val descriptorSlotAt(const Val& slots, const Val& index, SourceLoc loc);
  std::map<std::string, DescriptorSlot> descriptorSlots;
  int64_t descriptorAllocations = 0;
  struct ModuleInfo {
    std::map<std::string, const ast::FunctionDef*> functions;
    std::map<std::string, const ast::ImportAlias*> imports;    // unused when `names` is set
    const std::map<std::string, NameBinding>* names = nullptr; // SourceFile::names
    std::map<std::string, const ast::Stmt*> constants;
    std::map<std::string, Val> constantCache;
    std::set<std::string> evaluating;
  };
  std::vector<ModuleInfo> modules;
};

/// Levenshtein distance, for "did you mean" suggestions.
size_t editDistance(const std::string& a, const std::string& b);
/// The closest of `candidates` to `name` when it is close enough; empty otherwise.
std::string closestMatch(const std::string& name, const std::vector<std::string>& candidates);
/// Names assigned anywhere in `body` (not descending into nested function definitions).
void collectAssignedNames(const ast::Body& body, std::vector<std::string>& out);
bool containsReturn(const ast::Body& body);

} // namespace ww::specialize
