// Carries a loop value in the type it is always cast to. In the pipelined flash-attention loops
// of TLX (hopper_fa_ws_pipelined*.py) P is computed in fp32 at the end of one iteration and cast
// to fp16 at the top of the next, for the P x V MMA issued there: the loop carries 64 fp32
// registers a thread where 32 packed halves would do, live across the next S MMA and beside the
// accumulator of the P x V one, and ptxas spilled (80 bytes at the consumers' 232 registers).
//
// When every use of a carried value inside the loop and of the loop's result after it is a cast
// to one narrower type (same rounding), the cast moves to where the value is made: the loop
// carries the cast value, the entry value is cast before the loop, and the casts of the argument
// and of the result are replaced by them. The same casts of the same values run, only earlier,
// so results are bit for bit those of the source; the wide value dies at its last use in the
// iteration that made it.
#include "ir/Builder.h"
#include "transforms/Passes.h"

#include <vector>

namespace ww::transforms {

using ir::Block;
using ir::Op;
using ir::OpCode;
using ir::Value;

namespace {

/// Every op under `block` that reads `v` (once each).
void usesOf(Block& block, const Value* v, std::vector<Op*>& users) {
  ir::walk(block, [&](Op& op) {
    for (const Value* operand : op.operands())
      if (operand == v) {
        users.push_back(&op);
        break;
      }
  });
}

bool sameCast(const Op& a, const Op& b) {
  return a.result()->type() == b.result()->type() && a.strAttr("rounding") == b.strAttr("rounding");
}

/// The casts reading `v` when every use of `v` under `block` is a cast (each reading it once);
/// empty when some use is not.
std::vector<Op*> castUsers(Block& block, const Value* v, bool& other) {
  std::vector<Op*> users;
  usesOf(block, v, users);
  std::vector<Op*> casts;
  for (Op* op : users) {
    if (op->code() != OpCode::Cast || op->numOperands() != 1) {
      other = true;
      return {};
    }
    casts.push_back(op);
  }
  return casts;
}

/// Inserts `cast`'s twin reading `x` into `block` at index `at`; returns its result.
Value* castAt(const Op& cast, Value* x, Block& block, size_t at) {
  Block staging;
  ir::Builder b(&staging);
  b.setLoc(cast.loc());
  std::vector<ir::NamedAttr> attrs(cast.attrs().begin(), cast.attrs().end());
  Value* out = b.create1(OpCode::Cast, {x}, cast.result()->type(), std::move(attrs));
  ir::spliceOps(staging, block, at);
  return out;
}

/// Narrows the carried values of for loop `loop` (in `parent`) that only casts read; returns
/// how many.
int narrowLoop(Block& root, Block& parent, Op& loop) {
  int n = 0;
  Block& body = *loop.region(0);
  for (unsigned k = 0; k < loop.numResults(); ++k) {
    Value* arg = body.arg(k + 1);
    Value* result = loop.result(k);
    Value* yielded = body.terminator()->operand(k);
    // An unchanged carry is hoistLoopInvariants's to forward; pointers are not cast.
    if (yielded == arg || arg->type().pointer) continue;
    bool other = false;
    std::vector<Op*> inside = castUsers(body, arg, other);
    if (other || inside.empty()) continue;
    const Op& cast = *inside.front();
    // Only narrowing: a value cast to a wider type (fp16 loaded in one iteration and widened
    // in the next) would take more registers across the loop, not fewer.
    if (ir::bitWidth(cast.result()->type().elem) >= ir::bitWidth(arg->type().elem)) continue;
    bool same = true;
    for (const Op* c : inside) same = same && sameCast(*c, cast);
    if (!same) continue;
    // The whole function is walked for the result's users only for a loop that passed the above.
    std::vector<Op*> after = castUsers(root, result, other);
    if (other) continue;
    for (const Op* c : after) same = same && sameCast(*c, cast);
    if (!same) continue;

    // The value the body yields, cast right after the body op that makes it (at the body's top
    // for a value from an argument or from before the loop).
    size_t at = 0;
    if (Op* holder = yielded->def(); holder && ir::definedInside(yielded, loop)) {
      while (holder->parentBlock() != &body) holder = holder->parentBlock()->parentOp();
      at = ir::positionOf(body, holder) + 1;
    }
    Value* narrowYield = castAt(cast, yielded, body, at);
    body.terminator()->setOperand(k, narrowYield);
    // The entry value, cast before the loop.
    Value* narrowInit = castAt(cast, loop.operand(3 + k), parent, ir::positionOf(parent, &loop));
    loop.setOperand(3 + k, narrowInit);
    arg->setType(cast.result()->type());
    result->setType(cast.result()->type());
    for (Op* c : inside) {
      ir::replaceAllUses(body, c->result(), arg);
      ir::eraseOp(*c->parentBlock(), c);
    }
    for (Op* c : after) {
      ir::replaceAllUses(root, c->result(), result);
      ir::eraseOp(*c->parentBlock(), c);
    }
    ++n;
  }
  return n;
}

int narrowIn(Block& root, Block& block) {
  int n = 0;
  for (size_t i = 0; i < block.ops().size(); ++i) {
    Op* op = block.ops()[i].get();
    for (unsigned r = 0; r < op->numRegions(); ++r) n += narrowIn(root, *op->region(r));
    if (op->code() == OpCode::For) {
      int narrowed = narrowLoop(root, block, *op);
      n += narrowed;
      i += static_cast<size_t>(narrowed); // each put one cast before the loop
    }
  }
  return n;
}

} // namespace

int narrowCarriedCasts(ir::Function& fn) {
  int n = narrowIn(fn.body, fn.body);
  if (n) verify(fn);
  return n;
}

} // namespace ww::transforms
