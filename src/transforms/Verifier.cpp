// Structural checks of Tile IR, run after every pass: terminators, region arguments, dominance,
// every op's operand and result counts and kinds against Ops.def's OPERANDS / RESULTS lines, the
// per-op type rules below and every attribute against Ops.def's ATTR lines. A failure is a
// compiler bug.
#include "ir/OpAttrs.h"
#include "ir/OpSignature.h"
#include "ir/OpTraits.h"
#include "ir/Printer.h"
#include "transforms/Passes.h"

#include <stdexcept>
#include <unordered_set>

namespace ww::transforms {

using ir::Block;
using ir::Op;
using ir::OpCode;
using ir::Type;
using ir::Value;

namespace {

class Verifier {
public:
  explicit Verifier(const ir::Function& fn) : fn_(fn) {}

  void run() {
    for (const auto& a : fn_.args)
      if (a.value) visible_.insert(a.value);
    for (unsigned i = 0; i < fn_.body.numArgs(); ++i) visible_.insert(fn_.body.arg(i));
    verifyBlock(fn_.body, OpCode::Return);
  }

private:
  [[noreturn]] void fail(const Op* op, const std::string& why) {
    std::string where;
    if (op) {
      where = std::string(" '") + op->name() + "'";
      if (op->loc().valid())
        where +=
            " (line " + std::to_string(op->loc().line) + ":" + std::to_string(op->loc().col) + ")";
    }
    throw std::logic_error("Tile IR verifier:" + where + ": " + why + "\n" + ir::print(fn_));
  }

  /// Checks the ops of `block`, whose terminator must be `term` (Yield for no-terminator regions
  /// that may also end without one).
  void verifyBlock(const Block& block, OpCode term, bool terminatorOptional = false) {
    std::vector<const Value*> added;
    for (unsigned i = 0; i < block.numArgs(); ++i) {
      visible_.insert(block.arg(i));
      added.push_back(block.arg(i));
    }
    const auto& ops = block.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = *ops[i];
      if (op.parentBlock() != &block) fail(&op, "parent block link is wrong");
      bool last = i + 1 == ops.size();
      if (ir::isTerminator(op.code()) && !last) fail(&op, "terminator in the middle of a block");
      for (unsigned k = 0; k < op.numOperands(); ++k) {
        const Value* v = op.operand(k);
        if (!v) fail(&op, "null operand #" + std::to_string(k));
        if (!visible_.count(v))
          fail(&op, "operand #" + std::to_string(k) + " does not dominate its use");
      }
      verifyOp(op);
      for (unsigned r = 0; r < op.numResults(); ++r) {
        visible_.insert(op.result(r));
        added.push_back(op.result(r));
      }
    }
    const Op* t = block.terminator();
    bool hasTerm = t && ir::isTerminator(t->code());
    if (!hasTerm && !terminatorOptional)
      fail(block.parentOp(), std::string("region does not end in '") + ir::opName(term) + "'");
    if (hasTerm && t->code() != term)
      fail(t, std::string("expected '") + ir::opName(term) + "' here");
    for (const Value* v : added) visible_.erase(v);
  }

  void expectTypes(const Op& op, const std::vector<Value*>& got, const std::vector<Type>& want,
                   const char* what) {
    if (got.size() != want.size())
      fail(&op, std::string(what) + ": " + std::to_string(got.size()) + " values, expected " +
                    std::to_string(want.size()));
    for (size_t i = 0; i < got.size(); ++i)
      if (!(got[i]->type() == want[i]))
        fail(&op, std::string(what) + " #" + std::to_string(i) + " has type " +
                      got[i]->type().str() + ", expected " + want[i].str());
  }

  static std::vector<Type> typesOf(const std::vector<std::unique_ptr<Value>>& vs) {
    std::vector<Type> t;
    for (const auto& v : vs) t.push_back(v->type());
    return t;
  }

  void verifyRegionYield(const Op& op, const Block& region, const std::vector<Type>& want) {
    const Op* t = region.terminator();
    if (t && t->code() == OpCode::Yield) expectTypes(op, t->operands(), want, "yielded value");
  }

  /// Every attribute is declared for the op in Ops.def, of its kind and within its allowed
  /// values; every required one is present.
  void verifyAttrs(const Op& op) {
    for (const ir::NamedAttr& a : op.attrs()) {
      const ir::AttrSpec* spec = ir::findAttrSpec(op.code(), a.name);
      if (!spec) fail(&op, ir::undeclaredAttrMessage(op.code(), a.name));
      std::string why = ir::checkAttr(*spec, a.value);
      if (!why.empty()) fail(&op, "attribute '" + a.name + "' " + why);
    }
    for (const ir::AttrSpec* s : ir::attrSpecs(op.code()))
      if (s->required && !op.hasAttr(s->name))
        fail(&op, std::string("missing required attribute '") + s->name + "'");
  }

  /// The attributes first (the has_* flags among them decide the operand counts), then the
  /// counts and kinds of Ops.def's OPERANDS / RESULTS lines, so that the type rules below may
  /// index the operands they name.
  void verifyOp(const Op& op) {
    verifyAttrs(op);
    std::string why = ir::checkSignature(op);
    if (!why.empty()) fail(&op, why);
    if (op.numRegions() && !ir::hasTraits(op.code(), ir::trait::HasRegions))
      fail(&op, "has regions, but Ops.def does not give it the HasRegions trait");
    if (ir::isBinaryArithmetic(op.code())) {
      if (!(op.operand(0)->type() == op.operand(1)->type()))
        fail(&op, "operand types differ: " + op.operand(0)->type().str() + " vs " +
                      op.operand(1)->type().str());
      if (!(op.result()->type() == op.operand(0)->type()))
        fail(&op, "result type differs from operands");
      verifyRegions(op);
      return;
    }
    switch (op.code()) {
    case OpCode::Cmp:
      if (!(op.operand(0)->type() == op.operand(1)->type())) fail(&op, "operand types differ");
      if (op.result()->type().elem != ir::DType::I1 ||
          op.result()->type().shape != op.operand(0)->type().shape)
        fail(&op, "result must be i1 of the operands' shape");
      break;
    case OpCode::Select:
      if (!(op.operand(1)->type() == op.operand(2)->type())) fail(&op, "branch types differ");
      if (op.operand(0)->type().elem != ir::DType::I1) fail(&op, "condition must be i1");
      break;
    case OpCode::AddPtr:
      if (op.operand(0)->type().shape != op.operand(1)->type().shape)
        fail(&op, "pointer and offset shapes differ");
      if (!ir::isInt(op.operand(1)->type().elem)) fail(&op, "offset must be an integer");
      break;
    case OpCode::Load:
      if (ir::attr::Load::hasMask(op) && op.operand(1)->type().shape != op.operand(0)->type().shape)
        fail(&op, "mask shape differs from pointer shape");
      break;
    case OpCode::Store:
      if (op.operand(1)->type().shape != op.operand(0)->type().shape)
        fail(&op, "value shape differs from pointer shape");
      break;
    case OpCode::AsyncTask:
      // Ops.def's num_warps 0 means "the kernel's", which only the default task runs on.
      if (!ir::attr::AsyncTask::isDefault(op) && ir::attr::AsyncTask::numWarps(op) < 1)
        fail(&op, "a task other than the default one needs num_warps >= 1");
      break;
    case OpCode::For: {
      if (op.numRegions() != 1) fail(&op, "expects lb, ub, step and a body");
      if (op.region(0)->numArgs() != op.numOperands() - 2)
        fail(&op, "body needs (iv, iters...) arguments");
      break;
    }
    default:
      break;
    }
    verifyRegions(op);
  }

  void verifyRegions(const Op& op) {
    switch (op.code()) {
    case OpCode::For: {
      const Block& body = *op.region(0);
      std::vector<Type> iters;
      for (unsigned i = 3; i < op.numOperands(); ++i) iters.push_back(op.operand(i)->type());
      if (!(typesOf(op.results()) == iters)) fail(&op, "results differ from loop-carried inits");
      for (unsigned i = 1; i < body.numArgs(); ++i)
        if (!(body.arg(i)->type() == iters[i - 1]))
          fail(&op, "body argument type differs from init");
      verifyBlock(body, OpCode::Yield);
      verifyRegionYield(op, body, iters);
      break;
    }
    case OpCode::If:
      if (op.numRegions() != 2) fail(&op, "expects then and else regions");
      for (unsigned r = 0; r < 2; ++r) {
        verifyBlock(*op.region(r), OpCode::Yield, op.numResults() == 0);
        verifyRegionYield(op, *op.region(r), typesOf(op.results()));
      }
      break;
    case OpCode::While:
      if (op.numRegions() != 2) fail(&op, "expects before and after regions");
      verifyBlock(*op.region(0), OpCode::Condition);
      verifyBlock(*op.region(1), OpCode::Yield);
      break;
    case OpCode::Reduce:
    case OpCode::Scan:
      for (unsigned r = 0; r < op.numRegions(); ++r) verifyBlock(*op.region(r), OpCode::Yield);
      break;
    default:
      // Async task regions and other region ops need no terminator.
      for (unsigned r = 0; r < op.numRegions(); ++r)
        verifyBlock(*op.region(r), OpCode::Yield, true);
      break;
    }
  }

  const ir::Function& fn_;
  std::unordered_set<const Value*> visible_;
};

} // namespace

void verify(const ir::Function& fn) {
  Verifier(fn).run();
}

} // namespace ww::transforms
