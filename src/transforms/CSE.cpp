// Common-subexpression elimination of pure, region-free ops, scoped by region nesting: a value
// computed in an enclosing block replaces a recomputation in a nested one, never the reverse.
#include "transforms/Passes.h"

#include <sstream>
#include <unordered_map>

namespace ww::transforms {

using ir::Op;
using ir::Value;

namespace {

std::string keyOf(const Op& op) {
  std::ostringstream os;
  os << static_cast<int>(op.code()) << '(';
  for (const Value* v : op.operands()) os << static_cast<const void*>(v) << ',';
  os << ')';
  for (const auto& a : op.attrs()) {
    os << a.name << '=';
    if (auto* i = std::get_if<int64_t>(&a.value))
      os << 'i' << *i;
    else if (auto* d = std::get_if<double>(&a.value)) {
      os.precision(17);
      os << 'f' << *d;
    } else if (auto* s = std::get_if<std::string>(&a.value))
      os << 's' << *s;
    else if (auto* v = std::get_if<std::vector<int64_t>>(&a.value))
      for (int64_t x : *v) os << 'v' << x;
    os << ';';
  }
  for (const auto& r : op.results()) os << ':' << r->type().str();
  return os.str();
}

class Cse {
public:
  explicit Cse(ir::Function& fn) : fn_(fn) {}
  void run() { visit(fn_.body); }

private:
  void visit(ir::Block& block) {
    scopes_.emplace_back();
    for (auto& op : block.ops()) {
      for (unsigned r = 0; r < op->numRegions(); ++r) visit(*op->region(r));
      if (!isPure(*op) || op->numRegions() || op->numResults() == 0) continue;
      std::string key = keyOf(*op);
      if (Op* prior = lookup(key)) {
        for (unsigned i = 0; i < op->numResults(); ++i)
          ir::replaceAllUses(fn_.body, op->result(i), prior->result(i));
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

  ir::Function& fn_;
  std::vector<std::unordered_map<std::string, Op*>> scopes_;
};

} // namespace

void eliminateCommonSubexpressions(ir::Function& fn) {
  Cse(fn).run();
}

} // namespace ww::transforms
