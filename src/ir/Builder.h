// Creates Tile IR ops at an insertion point (the end of a block), with the current source location.
#pragma once

#include "ir/IR.h"

namespace ww::ir {

class Builder {
public:
  explicit Builder(Block* block = nullptr) : block_(block) {}

  void setInsertionBlock(Block* b) { block_ = b; }
  Block* insertionBlock() const { return block_; }
  void setLoc(SourceLoc l) { loc_ = l; }
  SourceLoc loc() const { return loc_; }

  /// Appends a new op with the given operands and result types; returns it.
  Op* create(OpCode code, std::vector<Value*> operands, std::vector<Type> resultTypes,
             std::vector<NamedAttr> attrs = {});
  /// The same for ops with exactly one result; returns that result.
  Value* create1(OpCode code, std::vector<Value*> operands, Type resultType,
                 std::vector<NamedAttr> attrs = {});

  // Common ops.
  Value* constInt(int64_t v, const Type& t);
  Value* constFloat(double v, const Type& t);
  Value* i32(int64_t v) { return constInt(v, Type::scalar(DType::I32)); }
  Value* programId(int axis);
  Value* arange(int64_t start, int64_t end);
  Value* splat(Value* scalar, const std::vector<int64_t>& shape);
  Value* binary(OpCode code, Value* a, Value* b);          // result type = a's type
  Value* cmp(const std::string& pred, Value* a, Value* b); // i1 of a's shape
  Value* addPtr(Value* ptr, Value* offset);
  /// local_view of slot `index` of multi-buffered `buffers` or of barrier array `bars`: one
  /// buffer, one barrier.
  Value* localView(Value* buffers, Value* index);
  Value* load(Value* ptr, Value* mask = nullptr, Value* other = nullptr);
  void store(Value* ptr, Value* value, Value* mask = nullptr);
  void ret();

private:
  Block* block_;
  SourceLoc loc_;
};

} // namespace ww::ir
