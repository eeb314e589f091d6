// Common-subexpression elimination of pure, region-free ops, scoped by region nesting: a value
// computed in an enclosing block replaces a recomputation in a nested one, never the reverse.
#include "transforms/Passes.h"

#include <bit>
#include <functional>
#include <unordered_set>

namespace ww::transforms {

using ir::Op;
using ir::Value;

namespace {

/// Attribute values compare exactly: doubles by their bits (-0.0 is not 0.0, a NaN equals itself),
/// which std::variant's == does not do.
bool sameAttr(const ir::Attr& a, const ir::Attr& b) {
  if (a.index() != b.index()) return false;
  if (auto* d = std::get_if<double>(&a))
    return std::bit_cast<uint64_t>(*d) == std::bit_cast<uint64_t>(std::get<double>(b));
  return a == b;
}

size_t hashAttr(const ir::Attr& a) {
  size_t h = a.index();
  if (auto* i = std::get_if<int64_t>(&a)) return ir::hashCombine(h, std::hash<int64_t>()(*i));
  if (auto* d = std::get_if<double>(&a))
    return ir::hashCombine(h, std::hash<uint64_t>()(std::bit_cast<uint64_t>(*d)));
  if (auto* s = std::get_if<std::string>(&a))
    return ir::hashCombine(h, std::hash<std::string>()(*s));
  for (int64_t x : std::get<std::vector<int64_t>>(a))
    h = ir::hashCombine(h, std::hash<int64_t>()(x));
  return h;
}

/// The attributes as a map: the same names with the same values, in any order.
bool sameAttrs(const Op& a, const Op& b) {
  if (a.attrs().size() != b.attrs().size()) return false;
  for (const ir::NamedAttr& x : a.attrs()) {
    const ir::Attr* y = b.attr(x.name);
    if (!y || !sameAttr(x.value, *y)) return false;
  }
  return true;
}

/// The identity of a pure op: opcode, operands (by identity), attributes and result types.
bool sameOp(const Op& a, const Op& b) {
  if (a.code() != b.code() || a.numOperands() != b.numOperands() ||
      a.numResults() != b.numResults())
    return false;
  for (unsigned i = 0; i < a.numOperands(); ++i)
    if (a.operand(i) != b.operand(i)) return false;
  for (unsigned i = 0; i < a.numResults(); ++i)
    if (!(a.result(i)->type() == b.result(i)->type())) return false;
  return sameAttrs(a, b);
}

size_t hashOp(const Op& op) {
  size_t h = std::hash<int>()(static_cast<int>(op.code()));
  for (const Value* v : op.operands()) h = ir::hashCombine(h, std::hash<const Value*>()(v));
  for (const auto& r : op.results()) h = ir::hashCombine(h, r->type().hash());
  size_t attrs = 0; // a sum: independent of the attributes' order
  for (const ir::NamedAttr& a : op.attrs())
    attrs += ir::hashCombine(std::hash<std::string>()(a.name), hashAttr(a.value));
  return ir::hashCombine(h, attrs);
}

/// An op with its hash, computed once however many scopes it is looked up in.
struct OpKey {
  Op* op;
  size_t hash;
};
struct OpKeyHash {
  size_t operator()(const OpKey& k) const { return k.hash; }
};
struct OpKeyEqual {
  bool operator()(const OpKey& a, const OpKey& b) const { return sameOp(*a.op, *b.op); }
};

class Cse {
public:
  explicit Cse(ir::Function& fn) : uses_(fn.body) {}
  void run(ir::Function& fn) { visit(fn.body); }

private:
  void visit(ir::Block& block) {
    scopes_.emplace_back();
    for (auto& op : block.ops()) {
      for (unsigned r = 0; r < op->numRegions(); ++r) visit(*op->region(r));
      if (!isPure(*op) || op->numRegions() || op->numResults() == 0) continue;
      OpKey key{op.get(), hashOp(*op)};
      if (Op* prior = lookup(key)) {
        for (unsigned i = 0; i < op->numResults(); ++i)
          uses_.replace(op->result(i), prior->result(i));
      } else {
        scopes_.back().insert(key);
      }
    }
    scopes_.pop_back();
  }

  Op* lookup(const OpKey& key) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(key);
      if (f != it->end()) return f->op;
    }
    return nullptr;
  }

  ir::UseMap uses_;
  std::vector<std::unordered_set<OpKey, OpKeyHash, OpKeyEqual>> scopes_;
};

} // namespace

void eliminateCommonSubexpressions(ir::Function& fn) {
  Cse(fn).run(fn);
}

} // namespace ww::transforms
