// Common-subexpression elimination of pure, region-free ops, scoped by region nesting: a value
// computed in an enclosing block replaces a recomputation in a nested one, never the reverse.
#include "transforms/Passes.h"

#include <charconv>
#include <unordered_map>

namespace ww::transforms {

using ir::Op;
using ir::Value;

namespace {

/// The identity of a pure op: opcode, operands, attributes and result types, as a string key.
/// Built by appending (no streams): CSE computes one per op.
std::string keyOf(const Op& op) {
  std::string k;
  k.reserve(64);
  auto num = [&](auto v) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    (void)ec;
    k.append(buf, end);
  };
  num(static_cast<int>(op.code()));
  k += '(';
  for (const Value* v : op.operands()) {
    num(reinterpret_cast<uintptr_t>(v));
    k += ',';
  }
  k += ')';
  for (const auto& a : op.attrs()) {
    k += a.name;
    k += '=';
    if (auto* i = std::get_if<int64_t>(&a.value)) {
      k += 'i';
      num(*i);
    } else if (auto* d = std::get_if<double>(&a.value)) {
      k += 'f';
      k.append(reinterpret_cast<const char*>(d), sizeof *d); // exact bits: -0.0 != 0.0
    } else if (auto* s = std::get_if<std::string>(&a.value)) {
      k += 's';
      k += *s;
    } else if (auto* v = std::get_if<std::vector<int64_t>>(&a.value)) {
      for (int64_t x : *v) {
        k += 'v';
        num(x);
      }
    }
    k += ';';
  }
  for (const auto& r : op.results()) {
    const ir::Type& t = r->type();
    k += ':';
    num(static_cast<int>(t.kind));
    k += '/';
    num(static_cast<int>(t.elem));
    k += t.pointer ? 'p' : '/';
    num(t.count);
    for (int64_t d : t.shape) {
      k += 'x';
      num(d);
    }
    k += '/';
    num(static_cast<int>(t.space));
    k += '/';
    num(t.rank);
  }
  return k;
}

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
      std::string key = keyOf(*op);
      if (Op* prior = lookup(key)) {
        for (unsigned i = 0; i < op->numResults(); ++i)
          uses_.replace(op->result(i), prior->result(i));
      } else {
        scopes_.back().emplace(std::move(key), op.get());
      }
    }
    scopes_.pop_back();
  }

  Op* lookup(const std::string& key) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(key);
      if (f != it->end()) return f->second;
    }
    return nullptr;
  }

  ir::UseMap uses_;
  std::vector<std::unordered_map<std::string, Op*>> scopes_;
};

} // namespace

void eliminateCommonSubexpressions(ir::Function& fn) {
  Cse(fn).run(fn);
}

} // namespace ww::transforms
