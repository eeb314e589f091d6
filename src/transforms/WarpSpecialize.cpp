// Automatic warp specialization (sm_90a) of tl.dot K loops marked
// `tl.range(..., warp_specialize=True)`, as Triton does on Hopper: the loop becomes the same
// async tasks, shared-memory ring and mbarriers a hand-written TLX kernel spells out
// (python/warpweave/ops/kernels/hopper/gemm_ws.py), so layout assignment, the task planner and
// codegen need nothing of their own.
//
// Two shapes are taken, both with the dot's fp16 / bf16, fp8 or int8 (B K-major) operands loaded
// through descriptors TMA can copy (host TensorDescriptors, or tensor maps
// tl.make_tensor_descriptor writes before the loop):
//   - the marked loop is the K loop itself (tutorial 09's matmul_kernel_tma): `acc = tl.dot(
//     a_desc.load(..), b_desc.load(..)[.T], acc)`, the accumulator its one carried value. The
//     compiler's pipeline leaves this one-tile form to the software pipeliner (oneTileLoops:
//     it measured about 10% slower split on the H200); ww-opt and the pass's tests take it;
//   - the marked loop is a persistent tile loop whose body holds such a K loop (its
//     tma-persistent and descriptor-persistent kernels), computing each tile's offsets before it
//     and storing the tile after it; or the K loop of such a tile loop is the one marked.
//
// The rewrite, for S stages (the loop's num_stages, else the kernel's; fewer where the ring
// would not fit in shared memory beside the epilogue):
//
//   a_bufs[S], b_bufs[S], full[S], empty[S]       (full: the producer's expect-tx; empty: a
//                                                  warp barrier, every consumer thread arrives)
//   async_tasks {
//     default task (num_warps warps, the registers left):       the consumers
//       the marked loop and everything after it in the kernel, with the K loop's body
//         wait full[c % S] (phase c / S & 1); acc = async_dot(a_bufs[s], b_bufs[s] (local_trans for
//         b.T), acc) async_dot_wait(1): the wgmma of step c - 1 retired -> arrive empty[(c - 1) %
//         S]
//       after the K loop: async_dot_wait(0), arrive empty[last]
//     producer task (1 warp, 40 registers):
//       the marked loop rebuilt from what the load offsets and the K loop's bounds need, with
//         wait empty[c % S] (the opposite phase: the first trip passes at once);
//         expect-tx full[s] (both tiles' bytes); TMA A and B into slot s
//   }
//
// c counts K steps across the whole kernel (both tasks carry it through the tile loop), so
// the two sides agree on every slot and phase. TMA zero-fills a box past the tensor's edge and
// still delivers its full bytes, so a K not a multiple of BLOCK_K needs no masking. The
// producer keeps scalars only; the consumers keep the accumulator and the epilogue, so
// setmaxnreg moves the producer warp group's registers to them (ir/TaskPlan.h).
//
// Tensors computed before the tasks (the K form's tl.zeros accumulator) stay there: the default
// task runs on the warps that hold them. A marked loop of another shape (pointer loads,
// descriptors made in the loop, a K loop carrying more than the accumulator, writes to memory
// before it in the kernel), and every marked loop on other targets, is left as it is: the flag
// then only asks, as Triton's does where it cannot specialize.
#include "ir/Builder.h"
#include "ir/DotTypes.h"
#include "ir/Limits.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "ir/TensorMaps.h"
#include "support/MathExtras.h"
#include "transforms/Passes.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace ww::transforms {

using ir::Block;
using ir::DType;
using ir::Op;
using ir::OpCode;
using ir::Type;
using ir::Value;

namespace {

using ValueMap = std::unordered_map<const Value*, Value*>;

/// Dynamic shared memory one block may use on sm_90a (227 KB, the opt-in maximum).
constexpr int64_t kSharedBytesPerBlock = ir::kMaxSharedBytes;
/// Barriers, the kernel's tensor-map staging and the alignment of the ring's buffers.
constexpr int64_t kSlackBytes = 2048;
/// The producer warp group's registers per thread: it holds a few scalars (the tile's
/// offsets, the ring counter), as Triton's Hopper producer does.
constexpr int64_t kProducerRegisters = 40;

/// One marked loop the rewrite takes.
struct Plan {
  Op* marked = nullptr; // the loop tl.range(..., warp_specialize=True) made
  Op* kLoop = nullptr;  // the K loop: `marked` itself, or the one for loop in its body
  Op* dot = nullptr;
  Op* loads[2] = {nullptr, nullptr}; // desc_loads of A and B
  Op* bTrans = nullptr;              // permute [1, 0] of B's load, or null
  unsigned accIter = 0;
  int64_t stages = 3;
  /// Ops of the marked loop's body (persistent form) and of the K loop's body the producer
  /// recomputes: the load offsets and the K loop's bounds, and what they are computed from.
  std::unordered_set<const Op*> slice;
};

class WarpSpecializer {
public:
  WarpSpecializer(ir::Function& fn, bool oneTileLoops) : fn_(fn), oneTileLoops_(oneTileLoops) {}

  int run() {
    std::vector<Op*> marked;
    walk(fn_.body, [&](Op& op) {
      if (op.code() == OpCode::For && ir::attr::For::warpSpecialize(op)) marked.push_back(&op);
    });
    int rewritten = 0;
    for (Op* loop : marked) {
      // A marked K loop inside a tile loop: the tile loop is split (the persistent form).
      if (Op* up = loop->parentBlock()->parentOp();
          up && up->code() == OpCode::For && up->parentBlock() == &fn_.body)
        loop = up;
      Plan plan;
      // A second marked loop of the kernel: its producer would need registers the first
      // one's budgets already gave away.
      if (rewritten == 0 && analyze(*loop, plan)) {
        rewrite(plan);
        ++rewritten;
      }
    }
    return rewritten;
  }

private:
  ir::Function& fn_;
  bool oneTileLoops_; // rewrite a marked K loop that is the kernel's only loop
  std::unordered_map<const Value*, int> uses_;

  void countUses() {
    uses_.clear();
    walk(fn_.body, [&](Op& op) {
      for (Value* v : op.operands()) ++uses_[v];
    });
  }
  int usesOf(const Value* v) const {
    auto it = uses_.find(v);
    return it == uses_.end() ? 0 : it->second;
  }

  /// What the async_dot lowering takes (transforms::wgmmaShaped), with N at most 256: one wgmma
  /// per k step of the ring's stages. Not an fp16 accumulator (the software pipeliner takes
  /// those; not built here yet).
  bool wgmmaShaped(const Op& dot) const {
    return transforms::wgmmaShaped(dot, fn_.numWarps) && dot.operand(1)->type().shape[1] <= 256 &&
           !ir::isHalfAccumulateDot(dot.operand(0)->type(), dot.operand(1)->type(),
                                    dot.result()->type());
  }

  /// A desc_load TMA can issue from the producer: a 2-D load through a host descriptor or a
  /// tensor map made before the marked loop.
  bool tmaLoad(const Op* load, const Op& marked) const {
    if (!load || load->code() != OpCode::DescLoad) return false;
    const Value* d = load->operand(0);
    if (d->type().shape.size() != 2 || load->result()->type().shape.size() != 2) return false;
    if (d->isBlockArg()) return d->ownerBlock() == &fn_.body;
    const Op* make = d->def();
    return make->code() == OpCode::MakeDescriptor && !ir::definedInside(d, marked) &&
           ir::tensorMapProblem(*make).empty();
  }

  /// Adds to the slice what `v` is computed from inside `loop` (the K loop, or the marked loop
  /// of the persistent form): pure scalar ops of its body and, through them, values of the
  /// enclosing marked loop. Only the induction variables may be block arguments.
  bool addToSlice(Value* v, const Plan& plan, std::unordered_set<const Op*>& slice) const {
    if (!ir::definedInside(v, *plan.marked) && v->ownerBlock() != plan.marked->region(0)) {
      // From before the marked loop: scalars and descriptors only (the producer holds no
      // tensors).
      return !v->type().isTensor();
    }
    if (v->isBlockArg()) {
      const Block* owner = v->ownerBlock();
      return v->index() == 0 && (owner == plan.kLoop->region(0) || owner == plan.marked->region(0));
    }
    Op* def = v->def();
    if (slice.count(def)) return true;
    if (def->parentBlock() != plan.kLoop->region(0) && def->parentBlock() != plan.marked->region(0))
      return false;
    if (!isPure(*def) || def->numRegions() != 0 || v->type().isTensor()) return false;
    slice.insert(def);
    for (Value* o : def->operands())
      if (!addToSlice(o, plan, slice)) return false;
    return true;
  }

  bool analyzeKLoop(Op& k, Plan& plan) {
    Block& body = *k.region(0);
    // The accumulator is the K loop's one carried value.
    if (body.numArgs() != 2 || k.numResults() != 1) return false;
    Op* dot = nullptr;
    for (auto& op : body.ops()) {
      Op* o = op.get();
      if (o->code() == OpCode::Dot) {
        if (dot) return false;
        dot = o;
      } else if (o != body.terminator() && o->code() != OpCode::DescLoad &&
                 (!isPure(*o) || o->numRegions() != 0)) {
        return false;
      }
    }
    if (!dot || !wgmmaShaped(*dot)) return false;
    Value* acc = dot->operand(2);
    if (acc != body.arg(1) || usesOf(acc) != 1 || usesOf(dot->result()) != 1 ||
        body.terminator()->operand(0) != dot->result())
      return false;
    plan.kLoop = &k;
    plan.dot = dot;
    plan.accIter = 0;
    Value* bv = dot->operand(1);
    if (Op* t = bv->def(); t && t->code() == OpCode::Permute && t->parentBlock() == &body &&
                           usesOf(bv) == 1 &&
                           ir::attr::Permute::order(*t) == std::vector<int64_t>{1, 0}) {
      plan.bTrans = t;
      bv = t->operand(0);
    }
    // wgmma reads 8-bit operands K-major only.
    if (ir::isMmaEightBit(bv->type().elem) && !plan.bTrans) return false;
    Value* operands[2] = {dot->operand(0), bv};
    for (int i = 0; i < 2; ++i) {
      Op* load = operands[i]->def();
      if (!tmaLoad(load, *plan.marked) || load->parentBlock() != &body ||
          usesOf(load->result()) != 1)
        return false;
      plan.loads[i] = load;
    }
    // Other desc_loads in the K loop would have no producer.
    for (auto& op : body.ops())
      if (op->code() == OpCode::DescLoad && op.get() != plan.loads[0] && op.get() != plan.loads[1])
        return false;
    for (Op* load : plan.loads)
      for (unsigned i = 1; i < load->numOperands(); ++i)
        if (!addToSlice(load->operand(i), plan, plan.slice)) return false;
    return true;
  }

  bool analyze(Op& marked, Plan& plan) {
    // The tasks stand where the loop stood, in the kernel's body; what comes before them runs
    // on every warp, the producer's too, so it must not write memory (tensor maps aside).
    if (marked.parentBlock() != &fn_.body || fn_.numCtas != 1) return false;
    if (ir::attr::For::numStages(marked) == 1) return false; // num_stages=1: no ring
    for (auto& op : fn_.body.ops()) {
      if (op.get() == &marked) break;
      if (!isPure(*op) && op->code() != OpCode::MakeDescriptor) return false;
      if (op->numRegions() != 0) return false;
    }
    bool tlxAsync = false;
    walk(fn_.body, [&](Op& op) {
      switch (op.code()) {
      case OpCode::AsyncTasks:
      case OpCode::AsyncDot:
      case OpCode::AsyncLoad:
      case OpCode::AsyncDescLoad:
      case OpCode::LocalAlloc:
      case OpCode::AllocBarriers:
        tlxAsync = true;
        break;
      default:
        break;
      }
    });
    if (tlxAsync) return false; // a kernel that places its own tasks and buffers
    countUses();
    plan.marked = &marked;
    bool oneTile = analyzeKLoop(marked, plan);
    // One tile per program (tutorial 09's matmul_kernel_tma): nothing overlaps its epilogue,
    // and the split costs a warp, the ring's barriers and the budgets' move; on the H200 it ran
    // 0.86x / 0.90x cuBLAS at 4096^3 / 8192^3 where the software pipeline ran 0.96x / 1.00x.
    if (oneTile && !oneTileLoops_) return false;
    if (!oneTile) {
      // The persistent form: one K loop in the marked loop's body. What else the tile loop
      // carries (tutorial 09's epilogue tile index) stays with the consumers; the producer's
      // slice may not read it.
      plan = Plan{};
      plan.marked = &marked;
      Op* k = nullptr;
      for (auto& op : marked.region(0)->ops()) {
        if (op->code() == OpCode::For) {
          if (k) return false;
          k = op.get();
        }
      }
      if (!k || !analyzeKLoop(*k, plan)) return false;
      for (unsigned i = 0; i < 3; ++i)
        if (!addToSlice(k->operand(i), plan, plan.slice)) return false;
      // The accumulator starts from a value of the tile loop's body (tl.zeros).
    }
    const Type& at = plan.loads[0]->result()->type();
    const Type& bt = plan.loads[1]->result()->type();
    int64_t stageBytes = (at.shape[0] * at.shape[1] + bt.shape[0] * bt.shape[1]) *
                         static_cast<int64_t>(ir::byteWidth(at.elem));
    // The epilogue's shared memory lies beside the ring: the producer may already fill the next
    // tile's stages while the consumers store this one.
    int64_t budget = kSharedBytesPerBlock - kSlackBytes - epilogueBytes(plan);
    plan.stages = marked.hasAttr(ir::attr::For::knumStages) ? ir::attr::For::numStages(marked)
                                                            : fn_.numStages;
    if (plan.kLoop != &marked && plan.kLoop->hasAttr(ir::attr::For::knumStages))
      plan.stages = ir::attr::For::numStages(*plan.kLoop);
    plan.stages = std::max<int64_t>(plan.stages, 2);
    while (plan.stages > 2 && plan.stages * stageBytes > budget) --plan.stages;
    return plan.stages * stageBytes <= budget;
  }

  /// Shared memory the consumers' code after the K loop needs: where it only converts, reshapes,
  /// splits and stores through descriptors (tutorial 09's epilogues, subtiled or not), the
  /// largest tile a descriptor store stages (the stores reuse one staging buffer); otherwise
  /// room for the accumulator as 16 bits (a layout conversion's scratch).
  int64_t epilogueBytes(const Plan& plan) const {
    const Type& ct = plan.dot->result()->type();
    const int64_t fallback = ct.shape[0] * ct.shape[1] * 2;
    int64_t stores = 0;
    bool known = true;
    auto visit = [&](const Op& op) {
      if (op.code() == OpCode::DescStore) {
        const Type& t = op.operand(1)->type();
        int64_t bytes = static_cast<int64_t>(ir::byteWidth(t.elem));
        for (int64_t d : t.shape) bytes *= d;
        stores = std::max(stores, bytes);
        return;
      }
      bool tensors = false;
      for (const auto& r : op.results()) tensors |= r->type().isTensor();
      bool shapeOnly = op.code() == OpCode::Reshape || op.code() == OpCode::Permute ||
                       op.code() == OpCode::Split;
      if (op.numRegions() != 0 || (tensors && !shapeOnly && !ir::isElementwise(op.code())) ||
          (!tensors && !isPure(op)))
        known = false;
    };
    auto after = [&](const Block& block, const Op* from) {
      bool seen = false;
      for (const auto& op : block.ops()) {
        if (seen && op.get() != block.terminator()) visit(*op);
        if (op.get() == from) seen = true;
      }
    };
    after(*plan.kLoop->parentBlock(), plan.kLoop);
    if (plan.kLoop != plan.marked) after(fn_.body, plan.marked);
    return known ? stores : fallback;
  }

  struct Ring {
    Value* a = nullptr;
    Value* b = nullptr;
    Value* full = nullptr;
    Value* empty = nullptr;
    int64_t stages = 0;
    int64_t bytes = 0;
  };

  /// Slot c % S and phase (c / S) & 1 of K step `c`.
  static std::pair<Value*, Value*> slotAndPhase(ir::Builder& b, const Ring& r, Value* c) {
    Value* s = b.i32(r.stages);
    Value* slot = b.binary(OpCode::Rem, c, s);
    Value* phase = b.binary(OpCode::And, b.binary(OpCode::Div, c, s), b.i32(1));
    return {slot, phase};
  }

  /// Clones the slice ops of `from` (in order) into b's block.
  static void cloneSlice(ir::Builder& b, const Block& from, const Plan& plan, ValueMap& map) {
    for (const auto& op : from.ops())
      if (plan.slice.count(op.get())) ir::cloneOp(b, *op, map);
  }
  static Value* mapped(const ValueMap& map, Value* v) {
    auto it = map.find(v);
    return it == map.end() ? v : it->second;
  }

  /// A for loop over `k`'s range (operands mapped) carrying the counter `c0`; returns it with
  /// its body's builder position at the body's start.
  static Op* counterLoop(ir::Builder& b, const Op& like, const ValueMap& map, Value* c0) {
    b.setLoc(like.loc());
    Op* loop = b.create(OpCode::For,
                        {mapped(map, like.operand(0)), mapped(map, like.operand(1)),
                         mapped(map, like.operand(2)), c0},
                        {c0->type()});
    loop->result(0)->name = "ws_step";
    Block* body = loop->addRegion();
    body->addArg(like.region(0)->arg(0)->type(), like.region(0)->arg(0)->name);
    body->addArg(c0->type(), "ws_step");
    return loop;
  }

  /// counterLoop over `like`'s range, its body starting with the slice ops of `like`'s body
  /// (`like`'s induction variable mapped to the new loop's).
  static Op* sliceLoop(ir::Builder& b, const Op& like, const Plan& plan, ValueMap& map, Value* c0) {
    Op* loop = counterLoop(b, like, map, c0);
    Block* body = loop->region(0);
    map[like.region(0)->arg(0)] = body->arg(0);
    ir::Builder sb(body);
    sb.setLoc(like.loc());
    cloneSlice(sb, *like.region(0), plan, map);
    return loop;
  }

  /// The producer's K loop into b's block: per step, wait until the consumers released the
  /// slot, expect both tiles' bytes on its full barrier, copy them by TMA.
  Value* producerKLoop(ir::Builder& b, const Plan& plan, const Ring& r, ValueMap map, Value* c0) {
    Op* loop = sliceLoop(b, *plan.kLoop, plan, map, c0);
    Block* body = loop->region(0);
    ir::Builder ib(body);
    ib.setLoc(plan.kLoop->loc());
    Value* c = body->arg(1);
    auto [slot, phase] = slotAndPhase(ib, r, c);
    ib.create(OpCode::BarrierWait,
              {ib.localView(r.empty, slot), ib.binary(OpCode::Xor, phase, ib.i32(1))}, {},
              {ir::attr::BarrierWait::make::hasPred(false)});
    Value* full = ib.localView(r.full, slot);
    ib.create(OpCode::BarrierExpectBytes, {full, ib.i32(r.bytes)}, {},
              {ir::attr::BarrierExpectBytes::make::hasPred(false)});
    Value* buffers[2] = {r.a, r.b};
    for (int i = 0; i < 2; ++i) {
      const Op* load = plan.loads[i];
      ib.setLoc(load->loc());
      std::vector<Value*> operands{load->operand(0), ib.localView(buffers[i], slot), full};
      for (unsigned o = 1; o < load->numOperands(); ++o)
        operands.push_back(mapped(map, load->operand(o)));
      ib.create(OpCode::AsyncDescLoad, operands, {},
                {ir::attr::AsyncDescLoad::make::hasPred(false)});
    }
    ib.create(OpCode::Yield, {ib.binary(OpCode::Add, c, ib.i32(1))}, {});
    return loop->result(0);
  }

  void buildProducer(ir::Builder& b, const Plan& plan, const Ring& r) {
    ValueMap map;
    Value* c0 = b.i32(0);
    if (plan.kLoop == plan.marked) {
      producerKLoop(b, plan, r, map, c0);
      return;
    }
    Op* tiles = sliceLoop(b, *plan.marked, plan, map, c0);
    Block* body = tiles->region(0);
    ir::Builder tb(body);
    tb.setLoc(plan.marked->loc());
    Value* next = producerKLoop(tb, plan, r, map, body->arg(1));
    tb.create(OpCode::Yield, {next}, {});
  }

  /// Appends a carried i32 to `loop` starting at `init`; returns its body argument.
  static Value* addCounter(Op& loop, Value* init) {
    loop.addOperand(init);
    loop.addResult(init->type(), "ws_step");
    return loop.region(0)->addArg(init->type(), "ws_step");
  }

  /// The consumers: the K loop's loads become waits on the ring and its dot an async wgmma
  /// from the slot, released once the next one retired it.
  void rewriteConsumer(Block& task, const Plan& plan, const Ring& r) {
    Op& k = *plan.kLoop;
    Block& kBody = *k.region(0);
    Block head;
    ir::Builder b(&head);
    b.setLoc(plan.marked->loc());
    Value* c0 = b.i32(0);
    ir::spliceOps(head, task, 0);
    Value* kInit = c0;
    if (&k != plan.marked) {
      Value* tileCounter = addCounter(*plan.marked, c0);
      kInit = tileCounter;
    }
    Value* c = addCounter(k, kInit);

    Block mid;
    ir::Builder mb(&mid);
    mb.setLoc(plan.dot->loc());
    auto [slot, phase] = slotAndPhase(mb, r, c);
    mb.create(OpCode::BarrierWait, {mb.localView(r.full, slot), phase}, {},
              {ir::attr::BarrierWait::make::hasPred(false)});
    Value* av = mb.localView(r.a, slot);
    Value* bv = mb.localView(r.b, slot);
    if (plan.bTrans) {
      Type t = bv->type();
      std::swap(t.shape[0], t.shape[1]);
      bv = mb.create1(OpCode::LocalTrans, {bv}, t, {ir::attr::LocalTrans::make::order({1, 0})});
    }
    std::vector<ir::NamedAttr> attrs = {ir::attr::AsyncDot::make::hasUseAcc(false),
                                        ir::attr::AsyncDot::make::hasPred(false)};
    if (plan.dot->hasAttr(ir::attr::Dot::kinputPrecision))
      attrs.push_back(
          ir::attr::AsyncDot::make::inputPrecision(ir::attr::Dot::inputPrecision(*plan.dot)));
    Value* issued =
        mb.create1(OpCode::AsyncDot, {av, bv, kBody.arg(1)}, plan.dot->result()->type(), attrs);
    Value* retired = mb.create(OpCode::AsyncDotWait, {issued}, {issued->type()},
                               {ir::attr::AsyncDotWait::make::pendings(1)})
                         ->result();
    // The wgmma of the previous step has retired: its slot goes back to the producer (not on
    // the K loop's first step, whose previous step belongs to no earlier pass).
    Value* prev =
        mb.binary(OpCode::Rem, mb.binary(OpCode::Add, c, mb.i32(r.stages - 1)), mb.i32(r.stages));
    mb.create(OpCode::BarrierArrive, {mb.localView(r.empty, prev), mb.cmp("ne", c, kInit)}, {},
              {ir::attr::BarrierArrive::make::hasPred(true)});
    Op* yield = kBody.terminator();
    yield->setOperand(0, retired);
    yield->addOperand(mb.binary(OpCode::Add, c, mb.i32(1)));
    ir::spliceOps(mid, kBody, ir::positionOf(kBody, plan.dot));
    ir::eraseOp(kBody, plan.dot);
    if (plan.bTrans) ir::eraseOp(kBody, plan.bTrans);
    ir::eraseOp(kBody, plan.loads[0]);
    ir::eraseOp(kBody, plan.loads[1]);

    // After the K loop: retire the last wgmma and release its slot.
    Block& outer = *k.parentBlock();
    Block after;
    ir::Builder ab(&after);
    ab.setLoc(k.loc());
    Value* acc = k.result(0);
    Op* wait = ab.create(OpCode::AsyncDotWait, {acc}, {acc->type()},
                         {ir::attr::AsyncDotWait::make::pendings(0)});
    Value* cEnd = k.result(1);
    Value* last = ab.binary(OpCode::Rem, ab.binary(OpCode::Add, cEnd, ab.i32(r.stages - 1)),
                            ab.i32(r.stages));
    ab.create(OpCode::BarrierArrive, {ab.localView(r.empty, last), ab.cmp("ne", cEnd, kInit)}, {},
              {ir::attr::BarrierArrive::make::hasPred(true)});
    replaceAllUses(outer, acc, wait->result());
    wait->setOperand(0, acc);
    ir::spliceOps(after, outer, ir::positionOf(outer, &k) + 1);
    if (&k != plan.marked) plan.marked->region(0)->terminator()->addOperand(cEnd);
  }

  void rewrite(const Plan& plan) {
    Block& top = fn_.body;
    Op& marked = *plan.marked;
    Block pre;
    ir::Builder b(&pre);
    b.setLoc(marked.loc());
    Ring r;
    r.stages = plan.stages;
    const Type& at = plan.loads[0]->result()->type();
    const Type& bt = plan.loads[1]->result()->type();
    std::vector<ir::NamedAttr> smem = {ir::attr::LocalAlloc::make::storage("smem")};
    r.a = b.create1(OpCode::LocalAlloc, {}, Type::buffer(at.elem, at.shape, r.stages), smem);
    r.a->name = "ws_a";
    r.b = b.create1(OpCode::LocalAlloc, {}, Type::buffer(bt.elem, bt.shape, r.stages), smem);
    r.b->name = "ws_b";
    r.full = b.create1(OpCode::AllocBarriers, {}, Type::barrier(r.stages),
                       {ir::attr::AllocBarriers::make::arriveCount(1)});
    r.full->name = "ws_full";
    // The empty barriers take one arrival from every consumer thread, each after its own
    // warp group's wgmma_wait retired the reads of the slot (a warp barrier): no meeting of
    // the consumer warps in the K loop, which a once-per-task arrival would need.
    r.empty = b.create1(OpCode::AllocBarriers, {}, Type::barrier(r.stages),
                        {ir::attr::AllocBarriers::make::arriveCount(fn_.numWarps * 32),
                         ir::attr::AllocBarriers::make::warp(true),
                         ir::attr::AllocBarriers::make::numWarps(fn_.numWarps),
                         ir::attr::AllocBarriers::make::numArrivals(1)});
    r.empty->name = "ws_empty";
    r.bytes = (at.shape[0] * at.shape[1] + bt.shape[0] * bt.shape[1]) *
              static_cast<int64_t>(ir::byteWidth(at.elem));

    Op* tasks = b.create(OpCode::AsyncTasks, {}, {});
    Block* region = tasks->addRegion();
    ir::Builder rb(region);
    rb.setLoc(marked.loc());
    Op* consumer = rb.create(OpCode::AsyncTask, {}, {},
                             {ir::attr::AsyncTask::make::isDefault(true),
                              ir::attr::AsyncTask::make::numWarps(fn_.numWarps),
                              ir::attr::AsyncTask::make::name("default")});
    Block* consumerBody = consumer->addRegion();
    Op* producer = rb.create(OpCode::AsyncTask, {}, {},
                             {ir::attr::AsyncTask::make::numWarps(1),
                              ir::attr::AsyncTask::make::numRegs(kProducerRegisters),
                              ir::attr::AsyncTask::make::name("producer")});
    Block* producerBody = producer->addRegion();

    // The producer first: it clones the slice from the loops as the source wrote them.
    ir::Builder pb(producerBody);
    pb.setLoc(marked.loc());
    buildProducer(pb, plan, r);

    // The consumers take the marked loop and the rest of the kernel (the K form's epilogue
    // follows the loop), all but the return.
    size_t at0 = ir::positionOf(top, &marked);
    {
      auto& ops = top.ops();
      size_t end = ops.size() - (top.terminator() && ir::isTerminator(top.terminator()->code()));
      for (size_t i = at0; i < end; ++i) {
        ops[i]->setParentBlock(consumerBody);
        consumerBody->ops().push_back(std::move(ops[i]));
      }
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(at0),
                ops.begin() + static_cast<std::ptrdiff_t>(end));
    }
    rewriteConsumer(*consumerBody, plan, r);
    sinkTensorsIntoConsumers(top, at0, *consumerBody);
    // The tasks take the loop's place, before the return.
    ir::spliceOps(pre, top,
                  top.ops().size() -
                      (top.terminator() && ir::isTerminator(top.terminator()->code()) ? 1 : 0));
  }

  /// Moves the tensors computed before the marked loop (of the first `count` ops of `top`) that
  /// only the consumers read into their task, each just before the op of the task that first
  /// needs it: the producer warps do not compute them, and values the epilogue reads (the
  /// pointers and mask of a tl.store of C) are not held in registers through the K loop.
  static void sinkTensorsIntoConsumers(Block& top, size_t count, Block& consumers) {
    // The consumers' top-level op that holds each use.
    std::unordered_map<const Value*, size_t> firstUse;
    for (size_t i = 0; i < consumers.ops().size(); ++i) {
      auto note = [&](const Op& op) {
        for (const Value* v : op.operands()) firstUse.try_emplace(v, i);
      };
      note(*consumers.ops()[i]);
      for (unsigned r = 0; r < consumers.ops()[i]->numRegions(); ++r)
        walk(static_cast<const Block&>(*consumers.ops()[i]->region(r)), note);
    }
    std::unordered_map<const Value*, int> outsideUses;
    for (size_t i = 0; i < top.ops().size(); ++i) {
      const Op& op = *top.ops()[i];
      if (i < count || ir::isTerminator(op.code()))
        for (const Value* v : op.operands()) ++outsideUses[v];
    }
    // Last to first: an op moves when its results are tensors read only by the consumers or
    // by ops that moved; it goes before the earliest of its readers.
    std::unordered_map<const Op*, size_t> anchor;
    std::vector<Op*> moved;
    for (size_t i = count; i-- > 0;) {
      Op* op = top.ops()[i].get();
      if (!isPure(*op) || op->numRegions() != 0 || op->numResults() != 1 ||
          !op->result()->type().isTensor())
        continue;
      const Value* v = op->result();
      size_t at = consumers.ops().size();
      if (auto it = firstUse.find(v); it != firstUse.end()) at = it->second;
      int remaining = outsideUses.count(v) ? outsideUses.at(v) : 0;
      for (Op* m : moved)
        for (const Value* o : m->operands())
          if (o == v) at = std::min(at, anchor.at(m));
      if (remaining != 0 || at == consumers.ops().size()) continue;
      anchor[op] = at;
      moved.push_back(op);
      for (const Value* o : op->operands()) --outsideUses[o];
    }
    // Insert in the original order (operands first), before each one's anchor.
    std::vector<std::unique_ptr<Op>> taken;
    for (auto it = moved.rbegin(); it != moved.rend(); ++it) {
      size_t pos = ir::positionOf(top, *it);
      taken.push_back(std::move(top.ops()[pos]));
      top.ops().erase(top.ops().begin() + static_cast<std::ptrdiff_t>(pos));
    }
    // Stable: equal anchors keep the original order.
    std::stable_sort(taken.begin(), taken.end(), [&](const auto& x, const auto& y) {
      return anchor.at(x.get()) < anchor.at(y.get());
    });
    for (size_t k = taken.size(); k-- > 0;) {
      Op* op = taken[k].get();
      size_t at = anchor.at(op);
      op->setParentBlock(&consumers);
      consumers.ops().insert(consumers.ops().begin() + static_cast<std::ptrdiff_t>(at),
                             std::move(taken[k]));
    }
  }
};

} // namespace

int warpSpecializeDotLoops(ir::Function& fn, bool oneTileLoops) {
  return WarpSpecializer(fn, oneTileLoops).run();
}

} // namespace ww::transforms
