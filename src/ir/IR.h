// Tile IR: target-independent SSA on block tensors, buffers, barriers and descriptors, with
// structured control flow. One generic Op node (opcode + operands + attributes + regions), in the
// spirit of MLIR's generic form; Ops.def lists the opcodes and their contracts.
#pragma once

#include "frontend/Diagnostics.h"
#include "ir/Type.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace ww::ir {

enum class OpCode : uint16_t {
#define OP(name, str, traits) name,
#include "ir/Ops.def"
#undef OP
};
inline constexpr size_t kNumOpCodes = 0
#define OP(name, str, traits) +1
#include "ir/Ops.def"
#undef OP
    ;
const char* opName(OpCode c);

class Op;
class Block;
class Builder;

/// An SSA value: the result of an Op or an argument of a Block (loop variables, kernel args).
class Value {
public:
  Value(Type type, Op* def, unsigned index) : type_(std::move(type)), def_(def), index_(index) {}
  Value(Type type, Block* owner, unsigned index)
      : type_(std::move(type)), owner_(owner), index_(index) {}

  const Type& type() const { return type_; }
  void setType(Type t) { type_ = std::move(t); }
  /// The defining op, or null for a block argument.
  Op* def() const { return def_; }
  /// The block owning this argument, or null for an op result.
  Block* ownerBlock() const { return owner_; }
  unsigned index() const { return index_; }
  bool isBlockArg() const { return owner_ != nullptr; }

  /// Optional name from the source (`offsets`), used by the printer.
  std::string name;

private:
  Type type_;
  Op* def_ = nullptr;
  Block* owner_ = nullptr;
  unsigned index_ = 0;
};

using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

struct NamedAttr {
  std::string name;
  Attr value;
};

/// A straight-line list of ops with arguments. Every region of an Op is exactly one Block.
class Block {
public:
  Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  Value* addArg(Type t, std::string name = {});
  const std::vector<std::unique_ptr<Value>>& args() const { return args_; }
  Value* arg(unsigned i) const { return args_.at(i).get(); }
  unsigned numArgs() const { return static_cast<unsigned>(args_.size()); }

  std::vector<std::unique_ptr<Op>>& ops() { return ops_; }
  const std::vector<std::unique_ptr<Op>>& ops() const { return ops_; }
  /// The last op, which must be a terminator once the block is complete; null when empty.
  Op* terminator() const { return ops_.empty() ? nullptr : ops_.back().get(); }
  Op* parentOp() const { return parent_; }
  void setParentOp(Op* op) { parent_ = op; }

private:
  std::vector<std::unique_ptr<Value>> args_;
  std::vector<std::unique_ptr<Op>> ops_;
  Op* parent_ = nullptr;
};

class Op {
public:
  Op(OpCode code, SourceLoc loc) : code_(code), loc_(loc) {}
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  OpCode code() const { return code_; }
  const char* name() const { return opName(code_); }
  SourceLoc loc() const { return loc_; }
  void setLoc(SourceLoc l) { loc_ = l; }

  // Operands
  const std::vector<Value*>& operands() const { return operands_; }
  Value* operand(unsigned i) const { return operands_.at(i); }
  unsigned numOperands() const { return static_cast<unsigned>(operands_.size()); }
  void addOperand(Value* v) { operands_.push_back(v); }
  void setOperand(unsigned i, Value* v) { operands_.at(i) = v; }
  void setOperands(std::vector<Value*> v) { operands_ = std::move(v); }

  // Results
  Value* addResult(Type t, std::string name = {});
  Value* result(unsigned i = 0) const { return results_.at(i).get(); }
  unsigned numResults() const { return static_cast<unsigned>(results_.size()); }
  const std::vector<std::unique_ptr<Value>>& results() const { return results_; }

  // Regions (each one Block)
  Block* addRegion();
  Block* region(unsigned i) const { return regions_.at(i).get(); }
  unsigned numRegions() const { return static_cast<unsigned>(regions_.size()); }
  Block* parentBlock() const { return parent_; }
  void setParentBlock(Block* b) { parent_ = b; }

  // Attributes
  const std::vector<NamedAttr>& attrs() const { return attrs_; }
  bool hasAttr(const std::string& name) const;
  void setAttr(const std::string& name, Attr value);
  const Attr* attr(const std::string& name) const;
  int64_t intAttr(const std::string& name, int64_t dflt = 0) const;
  double floatAttr(const std::string& name, double dflt = 0) const;
  std::string strAttr(const std::string& name, const std::string& dflt = {}) const;
  std::vector<int64_t> intsAttr(const std::string& name) const;

private:
  OpCode code_;
  SourceLoc loc_;
  std::vector<Value*> operands_;
  std::vector<std::unique_ptr<Value>> results_;
  std::vector<std::unique_ptr<Block>> regions_;
  std::vector<NamedAttr> attrs_;
  Block* parent_ = nullptr;
};

/// What a kernel parameter is, as the launcher and the runtime need to know it.
struct KernelArg {
  std::string name;
  Type type;              // scalar, pointer or descriptor
  int divisibility = 1;   // 16 when declared `:16` (pointer alignment or integer divisibility)
  bool equalsOne = false; // integer specialized on == 1 (folded into the IR; not passed)
  Value* value = nullptr; // the body's block argument (null when folded away)
};

/// A kernel after specialization: the runtime parameters and one body block.
class Function {
public:
  std::string name;
  std::vector<KernelArg> args;
  Block body;
  SourceLoc loc;
  /// Launch configuration the kernel was specialized for.
  int numWarps = 4;
  int numStages = 3;
  int numCtas = 1; // ctas_per_cga: CTAs per cluster (the product of clusterDims)
  std::array<int, 3> clusterDims = {1, 1, 1}; // the cluster's shape, x fastest in the rank
};

class Module {
public:
  std::vector<std::unique_ptr<Function>> functions;
  SourceManager* sources = nullptr; // for diagnostics and `.loc` line info; not owned
};

/// Walks every op under `block` in pre-order, descending into regions.
template <typename F> void walk(Block& block, F&& fn) {
  for (auto& op : block.ops()) {
    fn(*op);
    for (unsigned r = 0; r < op->numRegions(); ++r) walk(*op->region(r), fn);
  }
}
template <typename F> void walk(const Block& block, F&& fn) {
  for (const auto& op : block.ops()) {
    fn(static_cast<const Op&>(*op));
    for (unsigned r = 0; r < op->numRegions(); ++r)
      walk(static_cast<const Block&>(*op->region(r)), fn);
  }
}

/// Replaces every use of `from` by `to` in `block` and its nested regions; returns how many.
/// One walk per call: passes that rewrite many values use a UseMap instead.
unsigned replaceAllUses(Block& block, Value* from, Value* to);

/// Moves the ops of `from` into `to` before position `at`.
void spliceOps(Block& from, Block& to, size_t at);
/// The index of `op` in `block`'s op list; throws std::logic_error when it is not there.
size_t positionOf(const Block& block, const Op* op);
/// Moves `op` within `block` so that it ends up at index `at` of the block's op list (its
/// operands must still be defined before it there).
void moveOp(Block& block, const Op* op, size_t at);
/// Removes `op` (and its results, which nothing may still use) from `block`.
void eraseOp(Block& block, const Op* op);
/// Rebuilds for loop `loop` without its carried value `iter`, whose body argument and result
/// nothing may read any more: the body's ops move to the new loop, uses of the other results
/// under `root` follow them. Returns the new loop, at the old one's place.
Op* dropCarriedValue(Block& root, Op& loop, unsigned iter);
/// Whether `v` (a result or a block argument) is defined inside one of the regions of `op`, at
/// any depth: for a loop, whether it varies with the loop.
bool definedInside(const Value* v, const Op& op);
/// Appends to b's block a copy of `op`, its regions copied too, with each operand replaced by
/// its entry in `map` where it has one; records every copied result and region argument there.
Op* cloneOp(Builder& b, const Op& op, std::unordered_map<const Value*, Value*>& map);

/// The integer held by `v` when it is the result of a Constant op with an integer value.
std::optional<int64_t> constantInt(const Value* v);
/// True when `v` is the result of a Constant op holding +0 (integer 0 or float +0.0, not -0.0):
/// what zero-filling copies write.
bool isPositiveZeroConstant(const Value* v);

/// Every use of every value under a block, found by one walk, so that a pass replacing many values
/// does not walk the function once per replacement. Ops erased after it is built must not have
/// been recorded (the passes that use it only add ops).
class UseMap {
public:
  explicit UseMap(Block& root);
  /// Rewrites every recorded use of `from` to `to`, keeping the map current; returns how many.
  unsigned replace(Value* from, Value* to);
  bool used(const Value* v) const;
  /// Records the operands of an op created after the map was built.
  void addUser(Op& op);

private:
  std::unordered_map<const Value*, std::vector<std::pair<Op*, unsigned>>> uses_;
};

} // namespace ww::ir
