// Structural checks of Tile IR, run after every pass: terminators, dominance, and every op against
// its Ops.def lines: operand and result counts and kinds (OPERANDS / RESULTS), the relations
// between its values (TYPES, and those its traits imply), its regions (REGIONS: how many, how each
// ends, their arguments' and yielded values' types) and its attributes (ATTR). The one per-op rule
// written here is an attribute rule (async_task's num_warps). A failure is a compiler bug.
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
  /// counts and kinds of Ops.def's OPERANDS / RESULTS lines, the relations of its TYPES line (and
  /// those its traits imply), its REGIONS line, and then the ops of its regions.
  void verifyOp(const Op& op) {
    verifyAttrs(op);
    std::string why = ir::checkSignature(op);
    if (why.empty()) why = ir::checkTypeRules(op);
    if (why.empty()) why = ir::checkRegions(op);
    if (!why.empty()) fail(&op, why);
    // Ops.def's num_warps 0 means "the kernel's", which only the default task runs on.
    if (op.code() == OpCode::AsyncTask && !ir::attr::AsyncTask::isDefault(op) &&
        ir::attr::AsyncTask::numWarps(op) < 1)
      fail(&op, "a task other than the default one needs num_warps >= 1");
    for (unsigned r = 0; r < op.numRegions(); ++r) {
      OpCode term = OpCode::Yield;
      bool optional = false;
      ir::regionSpec(op, r, term, optional);
      verifyBlock(*op.region(r), term, optional);
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
