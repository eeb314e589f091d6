// CTA barriers for shared memory outside warp-specialized code, in the manner of Triton's Membar
// analysis: a `debug_barrier {smem_hazard = 1}` goes before each write to a shared buffer that may
// overwrite bytes other threads of the CTA read since the last barrier all of them passed. Both
// the interpreter (which runs the Tile IR after this pass) and the PTX backend see it.
//
// What the backend already orders, so that nothing is added for it here: local_store meets the
// CTA before and after its writes, async_load_wait_group and async_descriptor_store_wait after
// their waits, and every ir::lowersWithAgentBarrier op is such a barrier. Reads after writes need
// nothing from this pass either: cp.async copies are visible after a wait group (a barrier), TMA
// loads after the mbarrier wait of every reader, local_store ends with a barrier. Two copies into
// one buffer are not ordered by a barrier at all (they complete asynchronously), so they are not
// hazards to one another. What is left are writes after reads: a cp.async (async_load) or a TMA
// load (async_descriptor_load) into bytes that a local_load, or the wgmma of an async_dot,
// of other threads read.
//
// An async_dot reads its buffers until an async_dot_wait retires it, and wgmma.wait_group
// retires only the waiting warp group's wgmmas: with several warp groups (num_warps > 4) a
// retired read stays a hazard for the other groups' (and one issuing thread's) writes until the
// next barrier; with one warp group the wait covers every thread. A write over a read that no
// wait has retired is not something a barrier can order (the interpreter reports it); the read is
// carried along unretired until its wait.
//
// Buffers: an access names its local_alloc and, through local_view, the slot of the ring it
// touches as (a * base + c) mod M, M the ring's count (or the divisor of a `% M` index). Slots
// (i + 2) % 3 and i % 3 are disjoint; slots of different bases, or unknown ones, may alias.
// Loops: what is unordered at the end of an iteration flows into the next with the induction
// variable one step back (slot i % S read in iteration i is slot (i - step) % S in the next);
// other values defined in the loop mean nothing in the next iteration and their slots become
// unknown. Iterated to a fixed point. The code of async tasks is left alone: the user
// synchronizes warp-specialized code.
#include "ir/Builder.h"
#include "ir/OpAttrs.h"
#include "ir/OpSignature.h"
#include "ir/OpTraits.h"
#include "transforms/Passes.h"

#include <set>
#include <tuple>
#include <unordered_map>

namespace ww::transforms {

using ir::Block;
using ir::Op;
using ir::OpCode;
using ir::Value;

namespace {

/// Async dots issued after the oldest one tracked: a wait's pendings never come near it.
constexpr int kMaxAge = 16;
/// Fixed-point rounds of a loop before the slots carried around it are given up as unknown.
constexpr int kWidenAfter = 8;

int64_t floorMod(int64_t x, int64_t m) {
  return ((x % m) + m) % m;
}

/// The slot of a ring an access touches: (a * base + c) mod `mod`, or every slot when unknown.
/// base is null for a constant slot (then a is 0).
struct Slot {
  bool known = false;
  const Value* base = nullptr;
  int64_t a = 0, c = 0, mod = 0;

  static Slot make(const Value* base, int64_t a, int64_t c, int64_t mod) {
    Slot s;
    s.known = mod > 0;
    s.mod = mod;
    if (!s.known) return s;
    s.a = floorMod(a, mod);
    s.c = floorMod(c, mod);
    s.base = s.a ? base : nullptr;
    if (!s.base) s.a = 0;
    return s;
  }
  bool mayOverlap(const Slot& o) const {
    if (!known || !o.known || mod != o.mod || base != o.base || a != o.a) return true;
    return c == o.c;
  }
  auto key() const { return std::tie(known, base, a, c, mod); }
};

/// Where an access lands: a local_alloc (null: any buffer) and the slot of it.
struct Place {
  const Op* alloc = nullptr;
  Slot slot;
  bool shared = true; // false for tensor memory, which this pass does not order

  bool mayOverlap(const Place& o) const {
    // Members of one tlx.storage_alias_spec share their bytes: any of their slots may meet.
    if (alloc && o.alloc && alloc != o.alloc)
      return alloc->hasAttr(ir::attr::LocalAlloc::kalias) &&
             ir::attr::LocalAlloc::alias(*alloc) == ir::attr::LocalAlloc::alias(*o.alloc);
    return !alloc || !o.alloc || slot.mayOverlap(o.slot);
  }
};

/// A read since the last barrier of every thread: done (`age` < 0), or the read of an async_dot
/// that no wait has retired yet, with `age` async_dots issued after it.
struct Access {
  Place place;
  int age = -1;
  const Op* op = nullptr;

  bool pending() const { return age >= 0; }
  bool operator<(const Access& o) const {
    return std::tuple(place.alloc, place.slot.key(), age, op) <
           std::tuple(o.place.alloc, o.place.slot.key(), o.age, o.op);
  }
  bool operator==(const Access& o) const { return !(*this < o) && !(o < *this); }
};

using State = std::set<Access>;

struct Affine {
  const Value* base = nullptr;
  int64_t a = 0, c = 0;
};

/// v as a * base + c, looking through additions and multiplications by constants.
Affine affineOf(const Value* v, int depth = 0) {
  if (auto k = ir::constantInt(v)) return {nullptr, 0, *k};
  const Op* def = v->def();
  if (def && depth < 8 && def->numOperands() == 2) {
    auto k0 = ir::constantInt(def->operand(0)), k1 = ir::constantInt(def->operand(1));
    // The non-constant operand and the constant, when exactly one of them is constant.
    const Value* x = k1 ? def->operand(0) : def->operand(1);
    int64_t k = k1.value_or(k0.value_or(0));
    bool oneConstant = k0.has_value() != k1.has_value();
    switch (def->code()) {
    case OpCode::Add:
    case OpCode::Sub:
      if (oneConstant && (def->code() == OpCode::Add || k1)) {
        Affine f = affineOf(x, depth + 1);
        f.c += def->code() == OpCode::Add ? k : -k;
        return f;
      }
      break;
    case OpCode::Mul:
      if (oneConstant) {
        Affine f = affineOf(x, depth + 1);
        f.a *= k;
        f.c *= k;
        return f;
      }
      break;
    default:
      break;
    }
  }
  if (def && depth < 8 && ir::isValueHint(def->code())) return affineOf(def->operand(0), depth + 1);
  return {v, 1, 0};
}

/// The slot that index `idx` selects in a ring of `count` buffers. A valid index lies in
/// [0, count), so it equals itself modulo count; `x % d` equals x modulo d for the x >= 0 of a
/// valid index; select(p, x - k * count, x), the pipeliner's wrap-around, is x modulo count.
Slot slotOf(const Value* idx, int64_t count) {
  const Value* x = idx;
  int64_t mod = count;
  const Op* def = idx->def();
  if (def && def->code() == OpCode::Rem) {
    if (auto d = ir::constantInt(def->operand(1)); d && *d > 0) {
      x = def->operand(0);
      mod = *d;
    }
  } else if (def && def->code() == OpCode::Select) {
    Affine t = affineOf(def->operand(1)), f = affineOf(def->operand(2));
    if (t.base == f.base && t.a == f.a && floorMod(t.c - f.c, count) == 0) x = def->operand(1);
  }
  Affine f = affineOf(x);
  return Slot::make(f.base, f.a, f.c, mod);
}

/// The allocation and slot that buffer value `v` (a local_alloc or a view of one) covers.
Place placeOf(const Value* v) {
  Place p;
  const Op* def = v->def();
  if (!def) return p;
  switch (def->code()) {
  case OpCode::LocalAlloc:
    p.alloc = def;
    p.shared = ir::attr::LocalAlloc::storage(*def) != "tmem";
    if (v->type().count == 1) p.slot = Slot::make(nullptr, 0, 0, 1);
    return p;
  case OpCode::LocalView: {
    const Value* src = def->operand(0);
    p = placeOf(src);
    if (!p.alloc) return p;
    if (src->def() && src->def()->code() == OpCode::LocalAlloc && src->type().count > 1)
      p.slot = slotOf(def->operand(1), src->type().count);
    else if (src->type().count != 1)
      p.slot = Slot(); // a view of a reinterpreted ring: which slot is not known
    return p;
  }
  case OpCode::LocalTrans:
  case OpCode::LocalSlice:
    return placeOf(def->operand(0));
  case OpCode::LocalReinterpret:
    p = placeOf(def->operand(0));
    p.slot = Slot();
    return p;
  default:
    return p;
  }
}

/// The buffer `op` writes in shared memory (Ops.def marks it on the op's OPERANDS line), or null.
const Value* writtenBuffer(const Op& op) {
  return ir::writtenSharedBuffer(op);
}

/// Whether scalar `v` may differ between the threads of a CTA (thread ids, warp votes).
bool threadDependent(const Value* v, std::unordered_map<const Value*, bool>& memo, int depth = 0) {
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  const Op* def = v->def();
  bool dep = false;
  if (def && (def->code() == OpCode::ThreadId || def->code() == OpCode::VoteBallot))
    dep = true;
  else if (def && depth < 64)
    for (const Value* o : def->operands())
      if (threadDependent(o, memo, depth + 1)) {
        dep = true;
        break;
      }
  memo[v] = dep;
  return dep;
}

class BarrierInserter {
public:
  explicit BarrierInserter(ir::Function& fn) : fn_(fn) {}

  int run() {
    runBlock(fn_.body, State());
    return inserted_;
  }

private:
  /// Barriers of every thread: what they order is no hazard any more; unretired dot reads stay.
  static void sync(State& s) {
    std::erase_if(s, [](const Access& a) { return !a.pending(); });
  }

  bool conflicts(const State& s, const Place& w) const {
    if (!w.shared) return false;
    for (const Access& a : s)
      if (!a.pending() && a.place.mayOverlap(w)) return true;
    return false;
  }

  /// Whether `op` is a barrier of every thread of the CTA before or after its own effect.
  bool isBarrier(const Op& op) const {
    if (op.code() == OpCode::BarrierArrive) {
      // Every thread of a warp barrier arrives for itself, without meeting the others first.
      const Value* bar = op.operand(0);
      while (bar->def() && bar->def()->code() == OpCode::LocalView) bar = bar->def()->operand(0);
      return !(bar->def() && bar->def()->code() == OpCode::AllocBarriers &&
               ir::attr::AllocBarriers::warp(*bar->def()));
    }
    if (ir::lowersWithAgentBarrier(op.code())) return true;
    if (op.code() == OpCode::NamedBarrierWait) {
      auto count = ir::constantInt(op.operand(1));
      return count && *count == int64_t(fn_.numWarps) * 32;
    }
    return false;
  }

  /// Adds the barrier before op `i` of `b` (when inserting is allowed); returns whether it did.
  bool insertBefore(Block& b, size_t& i) {
    if (divergent_) {
      hoist_ = true; // the enclosing divergent branch gets it instead
      return false;
    }
    Block tmp;
    ir::Builder builder(&tmp);
    builder.setLoc(b.ops()[i]->loc());
    builder.create(OpCode::DebugBarrier, {}, {}, {ir::attr::DebugBarrier::make::smemHazard(true)});
    ir::spliceOps(tmp, b, i);
    ++i;
    ++inserted_;
    return true;
  }

  /// A write at `w` by op `i` of `b`: a barrier first when it may overwrite an unordered read.
  void write(Block& b, size_t& i, State& s, const Place& w) {
    if (!conflicts(s, w)) return;
    insertBefore(b, i);
    sync(s);
  }

  State runBlock(Block& b, State s) {
    for (size_t i = 0; i < b.ops().size(); ++i) {
      Op& op = *b.ops()[i];
      if (isBarrier(op)) {
        sync(s);
        continue;
      }
      switch (op.code()) {
      case OpCode::AsyncLoad:
      case OpCode::AsyncDescLoad:
      case OpCode::AsyncBulkLoad:
        write(b, i, s, placeOf(writtenBuffer(op)));
        break;
      case OpCode::AsyncDot: {
        State aged;
        for (Access a : s) {
          if (a.pending()) a.age = std::min(a.age + 1, kMaxAge);
          aged.insert(a);
        }
        s = std::move(aged);
        for (unsigned k = 0; k < 2; ++k)
          if (op.operand(k)->type().kind == ir::TypeKind::Buffer) {
            Place p = placeOf(op.operand(k));
            if (p.shared) s.insert({p, 0, &op});
          }
        break;
      }
      case OpCode::AsyncDotWait: {
        int64_t keep = ir::attr::AsyncDotWait::pendings(op);
        State next;
        for (Access a : s) {
          if (a.pending() && a.age >= keep) {
            // Retired for the waiting warp group; the others' wgmmas may still read.
            if (fn_.numWarps <= 4) continue;
            a.age = -1;
          }
          next.insert(a);
        }
        s = std::move(next);
        break;
      }
      case OpCode::AsyncTasks:
        asyncTasks(b, i, s);
        break;
      case OpCode::For:
        s = forLoop(b, i, s);
        break;
      case OpCode::While:
        s = whileLoop(b, i, s);
        break;
      case OpCode::If:
        s = ifElse(b, i, s);
        break;
      default:
        // local_load, and any other op reading a buffer it takes (not a view): a read done here.
        // Which op read a place does not matter once the read is done: one entry per place keeps
        // the state (copied at every loop's fixed point) as small as the buffers, not as large as
        // the kernel (2000 inlined helper calls that read one ring took seconds).
        if (!ir::isBufferView(op.code()))
          for (const Value* v : op.operands())
            if (v->type().kind == ir::TypeKind::Buffer) {
              Place p = placeOf(v);
              if (p.shared) s.insert({p, -1, nullptr});
            }
        break;
      }
    }
    return s;
  }

  /// Entering warp-specialized code: the tasks' writes must not overwrite what the CTA read
  /// before it; the backend meets every warp after the tasks.
  void asyncTasks(Block& b, size_t& i, State& s) {
    bool hazard = false;
    ir::walk(*b.ops()[i]->region(0), [&](const Op& inner) {
      if (const Value* w = writtenBuffer(inner)) hazard = hazard || conflicts(s, placeOf(w));
    });
    if (hazard) insertBefore(b, i);
    sync(s);
  }

  /// What flows around the back edge of `loop`: the induction variable moves one step back,
  /// other values defined in the loop become unknown (always, once `widen`).
  State backEdge(const State& s, const Op& loop, const Value* iv, bool widen) const {
    auto step = loop.code() == OpCode::For ? ir::constantInt(loop.operand(2)) : std::nullopt;
    State out;
    for (Access a : s) {
      Slot& slot = a.place.slot;
      if (slot.known && slot.base && ir::definedInside(slot.base, loop)) {
        if (slot.base == iv && step && !widen)
          slot = Slot::make(slot.base, slot.a, slot.c - slot.a * *step, slot.mod);
        else
          slot = Slot();
      }
      out.insert(a);
    }
    return out;
  }

  /// Leaving `op`: the values defined in its regions no longer name what they did.
  static State leave(const State& s, const Op& op) {
    State out;
    for (Access a : s) {
      if (a.place.slot.known && a.place.slot.base && ir::definedInside(a.place.slot.base, op))
        a.place.slot = Slot();
      out.insert(a);
    }
    return out;
  }

  static State join(State a, const State& b) {
    a.insert(b.begin(), b.end());
    return a;
  }

  /// Runs `body` of control-flow op `op` (op `i` of `b`) through `analyze(entry) -> exit`. A
  /// barrier needed inside code whose threads may disagree on the branch (a condition or bound
  /// from thread ids) would not be met by all of them: it goes before `op` instead.
  template <class F>
  State structured(Block& b, size_t& i, const State& in, bool divergentOp, F analyze) {
    if (!divergentOp || divergent_) return analyze(in);
    divergent_ = true;
    hoist_ = false;
    State out = analyze(in);
    if (hoist_) {
      State synced = in;
      sync(synced);
      divergent_ = false;
      insertBefore(b, i);
      divergent_ = true;
      out = analyze(synced);
    }
    divergent_ = false;
    hoist_ = false;
    return out;
  }

  bool divergentValue(const Value* v) { return threadDependent(v, threadDependence_); }

  State forLoop(Block& b, size_t& i, const State& in) {
    Op& loop = *b.ops()[i];
    bool divergent = divergentValue(loop.operand(0)) || divergentValue(loop.operand(1)) ||
                     divergentValue(loop.operand(2));
    return structured(b, i, in, divergent, [&](const State& entryIn) {
      Block& body = *loop.region(0);
      State entry = entryIn, out;
      for (int round = 0;; ++round) {
        out = runBlock(body, entry);
        State next = join(entryIn, backEdge(out, loop, body.arg(0), round >= kWidenAfter));
        if (next == entry) break;
        entry = std::move(next);
      }
      return leave(join(entryIn, out), loop); // no iteration, or after the last
    });
  }

  State whileLoop(Block& b, size_t& i, const State& in) {
    Op& loop = *b.ops()[i];
    Block& before = *loop.region(0);
    Block& after = *loop.region(1);
    const Op* cond = before.terminator();
    bool divergent = cond && cond->code() == OpCode::Condition && divergentValue(cond->operand(0));
    return structured(b, i, in, divergent, [&](const State& entryIn) {
      State entry = entryIn, tested;
      for (int round = 0;; ++round) {
        tested = runBlock(before, entry);
        State out = runBlock(after, tested);
        State next = join(entryIn, backEdge(out, loop, nullptr, round >= kWidenAfter));
        if (next == entry) break;
        entry = std::move(next);
      }
      return leave(tested, loop);
    });
  }

  State ifElse(Block& b, size_t& i, const State& in) {
    Op& op = *b.ops()[i];
    return structured(b, i, in, divergentValue(op.operand(0)), [&](const State& entry) {
      State out = runBlock(*op.region(0), entry);
      out = join(std::move(out), op.numRegions() > 1 ? runBlock(*op.region(1), entry) : entry);
      return leave(out, op);
    });
  }

  ir::Function& fn_;
  int inserted_ = 0;
  bool divergent_ = false; // inside code whose threads may take different paths
  bool hoist_ = false;     // a barrier is needed inside that code
  std::unordered_map<const Value*, bool> threadDependence_;
};

} // namespace

int insertSharedMemoryBarriers(ir::Function& fn) {
  int n = BarrierInserter(fn).run();
  if (n) verify(fn);
  return n;
}

} // namespace ww::transforms
