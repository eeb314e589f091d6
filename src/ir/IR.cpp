#include "ir/IR.h"
#include "ir/Builder.h"
#include "ir/Limits.h"
#include "ir/OpAttrs.h"

#include <cmath>
#include <stdexcept>

namespace ww::ir {

const char* opName(OpCode c) {
  static const char* const names[] = {
#define OP(name, str, traits) str,
#include "ir/Ops.def"
#undef OP
  };
  return names[static_cast<int>(c)];
}

Value* Block::addArg(Type t, std::string name) {
  args_.push_back(std::make_unique<Value>(std::move(t), this, numArgs()));
  args_.back()->name = std::move(name);
  return args_.back().get();
}

Value* Op::addResult(Type t, std::string name) {
  results_.push_back(std::make_unique<Value>(std::move(t), this, numResults()));
  results_.back()->name = std::move(name);
  return results_.back().get();
}

Block* Op::addRegion() {
  regions_.push_back(std::make_unique<Block>());
  regions_.back()->setParentOp(this);
  return regions_.back().get();
}

bool Op::hasAttr(const std::string& name) const {
  return attr(name) != nullptr;
}

void Op::setAttr(const std::string& name, Attr value) {
  for (auto& a : attrs_)
    if (a.name == name) {
      a.value = std::move(value);
      return;
    }
  attrs_.push_back({name, std::move(value)});
}

const Attr* Op::attr(const std::string& name) const {
  // Reads by name go through Ops.def's table for this op, so reading an attribute the op does not
  // declare (a misspelled name, or a name of another op) is a compiler bug reported here rather
  // than a silent default. Stages that read one name on several ops need each of them to declare
  // it.
  if (!findAttrSpec(code_, name))
    throw std::logic_error("reading an attribute of '" + std::string(opName(code_)) +
                           "': " + undeclaredAttrMessage(code_, name));
  for (const auto& a : attrs_)
    if (a.name == name) return &a.value;
  return nullptr;
}

int64_t Op::intAttr(const std::string& name, int64_t dflt) const {
  const Attr* a = attr(name);
  if (!a) return dflt;
  if (auto* i = std::get_if<int64_t>(a)) return *i;
  if (auto* d = std::get_if<double>(a)) return static_cast<int64_t>(*d);
  return dflt;
}

double Op::floatAttr(const std::string& name, double dflt) const {
  const Attr* a = attr(name);
  if (!a) return dflt;
  if (auto* d = std::get_if<double>(a)) return *d;
  if (auto* i = std::get_if<int64_t>(a)) return static_cast<double>(*i);
  return dflt;
}

std::string Op::strAttr(const std::string& name, const std::string& dflt) const {
  const Attr* a = attr(name);
  if (auto* s = a ? std::get_if<std::string>(a) : nullptr) return *s;
  return dflt;
}

std::vector<int64_t> Op::intsAttr(const std::string& name) const {
  const Attr* a = attr(name);
  if (auto* v = a ? std::get_if<std::vector<int64_t>>(a) : nullptr) return *v;
  return {};
}

std::optional<int64_t> constantInt(const Value* v) {
  const Op* def = v->def();
  if (!def || def->code() != OpCode::Constant || !def->hasAttr(attr::Constant::kvalue))
    return std::nullopt;
  const Attr a = attr::Constant::value(*def);
  if (const auto* i = std::get_if<int64_t>(&a)) return *i;
  return std::nullopt;
}

bool isPositiveZeroConstant(const Value* v) {
  const Op* def = v->def();
  if (!def || def->code() != OpCode::Constant || !def->hasAttr(attr::Constant::kvalue))
    return false;
  const Attr a = attr::Constant::value(*def);
  if (const auto* i = std::get_if<int64_t>(&a)) return *i == 0;
  if (const auto* f = std::get_if<double>(&a)) return *f == 0.0 && !std::signbit(*f);
  return false;
}

void spliceOps(Block& from, Block& to, size_t at) {
  auto& src = from.ops();
  for (auto& op : src) op->setParentBlock(&to);
  to.ops().insert(to.ops().begin() + static_cast<std::ptrdiff_t>(at),
                  std::make_move_iterator(src.begin()), std::make_move_iterator(src.end()));
  src.clear();
}

size_t positionOf(const Block& block, const Op* op) {
  for (size_t i = 0; i < block.ops().size(); ++i)
    if (block.ops()[i].get() == op) return i;
  throw std::logic_error(std::string("op '") + op->name() + "' is not in the block searched");
}

Op* dropCarriedValue(Block& root, Op& loop, unsigned iter) {
  Block& outer = *loop.parentBlock();
  Block& body = *loop.region(0);
  std::vector<Value*> operands;
  std::vector<Type> types;
  for (unsigned i = 0; i < loop.numOperands(); ++i)
    if (i != 3 + iter) operands.push_back(loop.operand(i));
  for (unsigned r = 0; r < loop.numResults(); ++r)
    if (r != iter) types.push_back(loop.result(r)->type());
  Block holder;
  Builder b(&holder);
  b.setLoc(loop.loc());
  Op* rebuilt = b.create(OpCode::For, operands, types, loop.attrs());
  Block* newBody = rebuilt->addRegion();
  std::vector<std::pair<Value*, Value*>> renamed;
  for (unsigned i = 0; i < body.numArgs(); ++i) {
    if (i == iter + 1) continue;
    renamed.emplace_back(body.arg(i), newBody->addArg(body.arg(i)->type(), body.arg(i)->name));
  }
  Op* yield = body.terminator();
  std::vector<Value*> yields;
  for (unsigned i = 0; i < yield->numOperands(); ++i)
    if (i != iter) yields.push_back(yield->operand(i));
  yield->setOperands(std::move(yields));
  spliceOps(body, *newBody, 0);
  for (const auto& [from, to] : renamed) replaceAllUses(*newBody, from, to);
  for (unsigned r = 0, k = 0; r < loop.numResults(); ++r) {
    if (r == iter) continue;
    rebuilt->result(k)->name = loop.result(r)->name;
    replaceAllUses(root, loop.result(r), rebuilt->result(k++));
  }
  spliceOps(holder, outer, positionOf(outer, &loop));
  eraseOp(outer, &loop);
  return rebuilt;
}

void moveOp(Block& block, const Op* op, size_t at) {
  auto& ops = block.ops();
  size_t from = positionOf(block, op);
  std::unique_ptr<Op> moved = std::move(ops[from]);
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(from));
  ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(at), std::move(moved));
}

void eraseOp(Block& block, const Op* op) {
  auto& ops = block.ops();
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(positionOf(block, op)));
}

bool definedInside(const Value* v, const Op& op) {
  const Block* b = v->isBlockArg() ? v->ownerBlock() : v->def()->parentBlock();
  for (; b && b->parentOp(); b = b->parentOp()->parentBlock())
    if (b->parentOp() == &op) return true;
  return false;
}

Op* cloneOp(Builder& b, const Op& op, std::unordered_map<const Value*, Value*>& map) {
  std::vector<Value*> operands;
  for (Value* o : op.operands()) {
    auto it = map.find(o);
    operands.push_back(it == map.end() ? o : it->second);
  }
  std::vector<Type> types;
  for (const auto& r : op.results()) types.push_back(r->type());
  SourceLoc loc = b.loc();
  b.setLoc(op.loc());
  Op* copy = b.create(op.code(), std::move(operands), std::move(types), op.attrs());
  b.setLoc(loc);
  for (unsigned r = 0; r < op.numResults(); ++r) {
    copy->result(r)->name = op.result(r)->name;
    map[op.result(r)] = copy->result(r);
  }
  Block* outer = b.insertionBlock();
  for (unsigned r = 0; r < op.numRegions(); ++r) {
    const Block& from = *op.region(r);
    Block* to = copy->addRegion();
    for (const auto& arg : from.args()) map[arg.get()] = to->addArg(arg->type(), arg->name);
    b.setInsertionBlock(to);
    for (const auto& inner : from.ops()) cloneOp(b, *inner, map);
  }
  b.setInsertionBlock(outer);
  return copy;
}

unsigned replaceAllUses(Block& block, Value* from, Value* to) {
  unsigned n = 0;
  walk(block, [&](Op& op) {
    for (unsigned i = 0; i < op.numOperands(); ++i)
      if (op.operand(i) == from) {
        op.setOperand(i, to);
        ++n;
      }
  });
  return n;
}

UseMap::UseMap(Block& root) {
  walk(root, [&](Op& op) { addUser(op); });
}

void UseMap::addUser(Op& op) {
  for (unsigned i = 0; i < op.numOperands(); ++i) uses_[op.operand(i)].push_back({&op, i});
}

unsigned UseMap::replace(Value* from, Value* to) {
  auto it = uses_.find(from);
  if (it == uses_.end() || from == to) return 0;
  std::vector<std::pair<Op*, unsigned>> moved = std::move(it->second);
  uses_.erase(it);
  auto& dst = uses_[to];
  for (auto [op, i] : moved) {
    op->setOperand(i, to);
    dst.push_back({op, i});
  }
  return static_cast<unsigned>(moved.size());
}

bool UseMap::used(const Value* v) const {
  auto it = uses_.find(v);
  return it != uses_.end() && !it->second.empty();
}

// ---------------------------------------------------------------------------------------------
// Builder
// ---------------------------------------------------------------------------------------------

namespace {

/// Refuses a result type past the limits of ir/Limits.h at `loc` (the construct that asked for
/// it): nothing downstream allocates per element or per buffer for a type that got this far.
void checkTypeSize(const Type& t, SourceLoc loc) {
  auto bytes = [](int64_t count, int64_t each) {
    return each > 0 && count > INT64_MAX / each ? INT64_MAX : count * each;
  };
  if (t.kind == TypeKind::Value && t.numElements() > kMaxTensorElements)
    raiseError(loc, "this makes a " + t.str() + " of " + std::to_string(t.numElements()) +
                        " elements; a block tensor has at most " +
                        std::to_string(kMaxTensorElements) + " (2**20)");
  if (t.kind == TypeKind::Buffer) {
    bool tmem = t.space == MemorySpace::Tmem;
    int64_t limit = tmem ? kMaxTensorMemoryBytes : kMaxSharedBytes;
    int64_t total = bytes(t.count, bytes(t.numElements(), byteWidth(t.elem)));
    if (total > limit)
      raiseError(loc, "this allocates " + t.str() + ": " + std::to_string(total) + " bytes of " +
                          (tmem ? "tensor memory" : "shared memory") + ", more than the " +
                          std::to_string(limit) + " a block can have on any target");
  }
  if (t.kind == TypeKind::Barrier && bytes(t.count, 8) > kMaxSharedBytes)
    raiseError(loc, "this allocates " + std::to_string(t.count) +
                        " mbarriers (8 bytes each), more than the " +
                        std::to_string(kMaxSharedBytes) +
                        " bytes of shared memory a block can have on any target");
}

thread_local int64_t tOpsCreated = 0;

} // namespace

int64_t opsCreatedOnThisThread() {
  return tOpsCreated;
}

Op* Builder::create(OpCode code, std::vector<Value*> operands, std::vector<Type> resultTypes,
                    std::vector<NamedAttr> attrs) {
  for (const Type& t : resultTypes) checkTypeSize(t, loc_);
  ++tOpsCreated;
  auto op = std::make_unique<Op>(code, loc_);
  op->setOperands(std::move(operands));
  for (auto& t : resultTypes) op->addResult(std::move(t));
  for (auto& a : attrs) op->setAttr(a.name, std::move(a.value));
  op->setParentBlock(block_);
  Op* raw = op.get();
  block_->ops().push_back(std::move(op));
  return raw;
}

Value* Builder::create1(OpCode code, std::vector<Value*> operands, Type resultType,
                        std::vector<NamedAttr> attrs) {
  return create(code, std::move(operands), {std::move(resultType)}, std::move(attrs))->result();
}

Value* Builder::constInt(int64_t v, const Type& t) {
  return create1(OpCode::Constant, {}, t, {attr::Constant::make::value(v)});
}

Value* Builder::constFloat(double v, const Type& t) {
  return create1(OpCode::Constant, {}, t, {attr::Constant::make::value(v)});
}

Value* Builder::programId(int axis) {
  return create1(OpCode::ProgramId, {}, Type::scalar(DType::I32),
                 {attr::ProgramId::make::axis(axis)});
}

Value* Builder::arange(int64_t start, int64_t end) {
  return create1(OpCode::Arange, {}, Type::tensor(DType::I32, {end - start}),
                 {attr::Arange::make::start(start), attr::Arange::make::end(end)});
}

Value* Builder::splat(Value* scalar, const std::vector<int64_t>& shape) {
  return create1(OpCode::Splat, {scalar}, scalar->type().withShape(shape));
}

Value* Builder::binary(OpCode code, Value* a, Value* b) {
  return create1(code, {a, b}, a->type());
}

Value* Builder::cmp(const std::string& pred, Value* a, Value* b) {
  return create1(OpCode::Cmp, {a, b}, a->type().withElem(DType::I1), {attr::Cmp::make::pred(pred)});
}

Value* Builder::localView(Value* buffers, Value* index) {
  Type view = buffers->type();
  view.count = 1;
  return create1(OpCode::LocalView, {buffers, index}, view);
}

Value* Builder::addPtr(Value* ptr, Value* offset) {
  Type t = ptr->type();
  if (t.shape.empty() && !offset->type().shape.empty()) t.shape = offset->type().shape;
  return create1(OpCode::AddPtr, {ptr, offset}, t);
}

Value* Builder::load(Value* ptr, Value* mask, Value* other) {
  std::vector<Value*> ops{ptr};
  if (mask) ops.push_back(mask);
  if (other) ops.push_back(other);
  Type t = ptr->type();
  t.pointer = false;
  return create1(
      OpCode::Load, ops, t,
      {attr::Load::make::hasMask(mask != nullptr), attr::Load::make::hasOther(other != nullptr)});
}

void Builder::store(Value* ptr, Value* value, Value* mask) {
  std::vector<Value*> ops{ptr, value};
  if (mask) ops.push_back(mask);
  create(OpCode::Store, ops, {}, {attr::Store::make::hasMask(mask != nullptr)});
}

void Builder::ret() {
  create(OpCode::Return, {}, {});
}

} // namespace ww::ir
