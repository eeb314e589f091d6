// The dispatch tables of the language's builtins: each `tl.*` / `tlx.*` name maps to the one
// function that turns a call of it into Tile IR (TlBuiltins.cpp, TlxBuiltins.cpp). Adding a builtin
// is a row in its namespace's table plus its handler; the namespace's members and the "did you
// mean" candidates are read from the same rows.
#pragma once

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ww::specialize {

class Specializer;
struct CallSite;
struct Val;

/// Turns one call of a builtin into Tile IR; `name` is the builtin's name within its namespace
/// ("arange"), so that one handler can serve a family ("zeros" and "full").
using BuiltinHandler = Val (*)(Specializer& s, const std::string& name, CallSite& call);

struct BuiltinRow {
  const char* name;
  BuiltinHandler handler;
  /// A namespace member (`tl.load`); false for names reached only as methods (`desc.load`).
  bool member = true;
};

class BuiltinTable {
public:
  BuiltinTable(std::initializer_list<BuiltinRow> rows) : rows_(rows) {
    // rows_ is never resized after this, so pointers into it stay valid.
    for (const BuiltinRow& r : rows_) {
      if (!byName_.emplace(r.name, &r).second)
        throw std::logic_error(std::string("builtin '") + r.name + "' has two rows");
      if (r.member) members_.push_back(r.name);
    }
  }
  BuiltinTable(const BuiltinTable&) = delete;
  BuiltinTable& operator=(const BuiltinTable&) = delete;

  /// The handler of `name`, or null when the namespace has no such builtin.
  BuiltinHandler find(std::string_view name) const {
    auto it = byName_.find(name);
    return it == byName_.end() ? nullptr : it->second->handler;
  }
  /// Whether `name` is a member of the namespace (`tl.name`), not only a method.
  bool isMember(std::string_view name) const {
    auto it = byName_.find(name);
    return it != byName_.end() && it->second->member;
  }
  /// The namespace members, in table order (the order "did you mean" prefers on ties).
  const std::vector<std::string>& memberNames() const { return members_; }
  const std::vector<BuiltinRow>& rows() const { return rows_; }

private:
  std::vector<BuiltinRow> rows_;
  std::unordered_map<std::string_view, const BuiltinRow*> byName_; // into rows_
  std::vector<std::string> members_;
};

/// The `tl.*` builtins (TlBuiltins.cpp) and the `tlx.*` builtins (TlxBuiltins.cpp).
const BuiltinTable& tlBuiltins();
const BuiltinTable& tlxBuiltins();

} // namespace ww::specialize
