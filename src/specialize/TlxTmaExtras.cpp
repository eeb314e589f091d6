// The `tlx.*` bulk copies (async_load(bulk=True), async_store) and TLX's descriptor storage
// (allocate_tensor_descriptor, make_tensor_descriptor(desc_ptr=...),
// reinterpret_tensor_descriptor).
#include "ir/OpAttrs.h"
#include "specialize/SpecializerImpl.h"

namespace ww::specialize {

using ir::DType;
using ir::OpCode;

Val Specializer::asyncBulkCopy(const BoundArgs& a, bool isLoad) {
  const std::string fn = isLoad ? "tlx.async_load(bulk=True)" : "tlx.async_store";
  const char* ptrArg = isLoad ? "src" : "dst_global_ptr";
  const char* bufArg = isLoad ? "result" : "src_smem";
  const Val& p = a.get(ptrArg);
  if (!p.isRuntime() || !p.type().isPointer() || !p.type().isScalar())
    raiseError(a.loc(ptrArg), fn + " copies bytes from one global address: " + ptrArg +
                                  " must be a scalar pointer, got " + kindName(p));
  ir::Value* buf = requireBuffer(a.get(bufArg), a.loc(bufArg), fn + "'s " + bufArg);
  const ir::Type& bt = buf->type();
  if (bt.count != 1)
    raiseError(a.loc(bufArg), fn + " needs a single buffer, got " + bt.str() +
                                  "; select one with bufs[i] or tlx.local_view(bufs, i)");
  if (bt.space != ir::MemorySpace::Shared)
    raiseError(a.loc(bufArg), fn + " copies to and from shared memory, got " + bt.str());
  if (isLoad && bt.shape.size() != 1)
    raiseError(a.loc(bufArg), fn + " needs a 1-D buffer, got " + bt.str());
  int64_t capacity = ir::byteWidth(bt.elem);
  for (int64_t d : bt.shape) capacity *= d;
  std::vector<ir::Value*> ops{p.v, buf};
  if (isLoad) {
    for (const char* arg : {"mask", "other"})
      if (a.has(arg)) raiseError(a.loc(arg), fn + " copies whole bytes: " + arg + "= is refused");
    if (!a.has("barrier"))
      raiseError(a.call().loc, fn + " completes on an mbarrier: pass barrier=");
    ir::Value* bar = requireBarrier(a.get("barrier"), a.loc("barrier"), fn + "'s barrier");
    if (bar->type().count != 1)
      raiseError(a.loc("barrier"), fn + " needs a single barrier, got " + bar->type().str() +
                                       "; select one with bars[i] or tlx.local_view(bars, i)");
    ops.push_back(bar);
  }
  // The byte count: a constant is checked here, a run-time one by the interpreter.
  const char* sizeArg = isLoad ? "bulk_size" : "size";
  ir::Value* bytes = nullptr;
  if (!a.has(sizeArg)) {
    bytes = toRuntime(Val::integer(capacity), a.call().loc, DType::I32);
  } else {
    const Val& n = a.get(sizeArg);
    if (n.isIntLike()) {
      int64_t v = constInt(n, a.loc(sizeArg), fn + "'s " + sizeArg);
      if (v <= 0 || v % 16 != 0 || v > capacity)
        raiseError(a.loc(sizeArg), fn + "'s " + sizeArg + " is " + std::to_string(v) +
                                       " bytes; a bulk copy moves a positive multiple of 16 "
                                       "bytes, at most the buffer's " +
                                       std::to_string(capacity));
    }
    bytes = requireScalarI32(n, a.loc(sizeArg), fn + "'s " + sizeArg);
  }
  ops.push_back(bytes);
  b.create(isLoad ? OpCode::AsyncBulkLoad : OpCode::AsyncBulkStore, ops, {});
  return Val::none();
}

namespace {
/// "tensor_descriptor_ptr N" of a slot "tensor_descriptor_ptr N[i]" (its allocation).
std::string storageOf(const std::string& slot) {
  return slot.substr(0, slot.find('['));
}
/// i of a slot "tensor_descriptor_ptr N[i]" with a constant i.
int64_t slotIndexOf(const std::string& slot) {
  return std::stoll(slot.substr(slot.find('[') + 1));
}
} // namespace

Val Specializer::descriptorSlotAt(const Val& slots, const Val& index, SourceLoc loc) {
  Val slot = Val::enumValue(storageOf(slots.elts[0].s) + "[?]");
  slot.i = static_cast<int64_t>(slots.elts.size());
  slot.v = requireScalarI32(index, loc, "the index of a tlx.allocate_tensor_descriptor slot");
  return slot;
}

Val Specializer::tensorDescriptorSlots(const std::string& name, CallSite& call) {
  const std::string fn = "tlx." + name;
  // Storage is tracked at compile time: a slot names the descriptor made in it, and reinterpret
  // gives that descriptor back (each in-kernel descriptor gets its own 128 bytes of global
  // scratch where a TMA copy needs a tensor map; see docs/language.md).
  if (name == "allocate_tensor_descriptor") {
    BoundArgs a(call, {"num"});
    int64_t num = constInt(a.get("num"), a.loc("num"), fn + "'s num", a.expr("num"));
    if (num < 1 || num > 1024)
      raiseError(a.loc("num"), fn + "'s num must be 1 to 1024, got " + std::to_string(num));
    int64_t id = descriptorAllocations++;
    std::vector<Val> slots;
    for (int64_t i = 0; i < num; ++i) {
      slots.push_back(Val::enumValue("tensor_descriptor_ptr " + std::to_string(id) + "[" +
                                     std::to_string(i) + "]"));
      slots.back().i = num; // the allocation's slots, for the descriptor made in one
    }
    return Val::tuple(std::move(slots));
  }
  auto slotOf = [&](const Val& v, SourceLoc at) -> DescriptorSlot& {
    if (v.kind == Val::Kind::Enum && v.s.starts_with("tensor_descriptor_ptr "))
      return descriptorSlots[v.s];
    raiseError(at, fn +
                       "'s desc_ptr must be one descriptor of tlx.allocate_tensor_descriptor "
                       "(ptrs[i]), got " +
                       kindName(v));
  };
  if (name == "make_tensor_descriptor") {
    // The descriptor itself is tl.make_tensor_descriptor's; desc_ptr only names its slot.
    CallSite rest = call;
    Val ptr = Val::none();
    SourceLoc ptrLoc = call.loc;
    bool found = false;
    for (size_t k = 0; k < rest.kwNames.size(); ++k)
      if (rest.kwNames[k] == "desc_ptr") {
        ptr = rest.kwVals[k];
        ptrLoc = rest.kwLocs[k];
        rest.kwNames.erase(rest.kwNames.begin() + static_cast<std::ptrdiff_t>(k));
        rest.kwVals.erase(rest.kwVals.begin() + static_cast<std::ptrdiff_t>(k));
        rest.kwLocs.erase(rest.kwLocs.begin() + static_cast<std::ptrdiff_t>(k));
        rest.kwExprs.erase(rest.kwExprs.begin() + static_cast<std::ptrdiff_t>(k));
        found = true;
        break;
      }
    if (!found) {
      if (rest.args.empty())
        raiseError(call.loc, fn + " needs desc_ptr (a slot of tlx.allocate_tensor_descriptor, "
                                  "or None), base, shape, strides and block_shape");
      ptr = rest.args.front();
      ptrLoc = rest.argLocs.front();
      rest.args.erase(rest.args.begin());
      rest.argLocs.erase(rest.argLocs.begin());
      rest.argExprs.erase(rest.argExprs.begin());
    }
    // The slot's index, made before the descriptor that takes it as an operand.
    ir::Value* slotIndex = nullptr;
    if (ptr.kind != Val::Kind::None) {
      slotOf(ptr, ptrLoc);
      slotIndex = ptr.v ? ptr.v : toRuntime(Val::integer(slotIndexOf(ptr.s)), ptrLoc, DType::I32);
    }
    Val desc = callTl("make_tensor_descriptor", rest);
    call.callee = fn;
    if (slotIndex) {
      // The map is written to the allocation's slot (ir/Ops.def, make_desc's slot_* attributes).
      const std::string storage = storageOf(ptr.s);
      ir::Op* make = desc.v->def();
      ir::attr::MakeDescriptor::set::slotStorage(*make, std::stoll(storage.substr(22)));
      ir::attr::MakeDescriptor::set::slotCount(*make, ptr.i);
      make->addOperand(slotIndex);
      // A slot chosen at run time may be any of the allocation's: what the others held is no
      // longer known here; one of them written leaves the run-time slot unknown too.
      for (auto it = descriptorSlots.begin(); it != descriptorSlots.end();)
        if (it->first != ptr.s && storageOf(it->first) == storage && (ptr.v || it->second.index))
          it = descriptorSlots.erase(it);
        else
          ++it;
      DescriptorSlot& kept = descriptorSlots[ptr.s];
      kept.desc = desc.v;
      kept.block = b.insertionBlock();
      kept.index = ptr.v;
    }
    return desc;
  }
  // reinterpret_tensor_descriptor
  BoundArgs a(call, {"desc_ptr", "block_shape", "dtype"});
  DescriptorSlot& slot = slotOf(a.get("desc_ptr"), a.loc("desc_ptr"));
  if (slot.desc && slot.index != a.get("desc_ptr").v)
    raiseError(a.loc("desc_ptr"),
               fn + ": the slot " + a.get("desc_ptr").s + " is chosen by another run-time " +
                   "index than the one its descriptor was made with; warpweave follows slots " +
                   "at compile time, so a slot chosen at run time is read with the very index " +
                   "value it was made with");
  if (!slot.desc)
    raiseError(a.loc("desc_ptr"), fn + ": no tlx.make_tensor_descriptor has made a descriptor in " +
                                      a.get("desc_ptr").s + " before this point");
  // The slot's descriptor is an IR value: it must be visible here (made in this block or one
  // around it).
  bool visible = false;
  for (ir::Block* blk = b.insertionBlock(); blk && !visible;) {
    visible = blk == slot.block;
    ir::Op* parent = blk->parentOp();
    blk = parent ? parent->parentBlock() : nullptr;
  }
  if (!visible)
    raiseError(a.loc("desc_ptr"), fn + ": the descriptor in " + a.get("desc_ptr").s +
                                      " was made inside a block (an if, loop or async task) "
                                      "that does not contain this point");
  const ir::Type& dt = slot.desc->type();
  std::vector<int64_t> block = constShape(a.get("block_shape"), a.loc("block_shape"),
                                          fn + "'s block_shape", a.expr("block_shape"));
  DType elem = constDType(a.get("dtype"), a.loc("dtype"), fn + "'s dtype");
  if (block != dt.shape || elem != dt.elem)
    raiseError(call.loc,
               fn + " as a " + ir::Type::descriptor(elem, block, int(block.size())).str() +
                   ", but the descriptor in " + a.get("desc_ptr").s + " was made as " + dt.str() +
                   "; reinterpret with the block_shape and dtype it was made with");
  return Val::runtime(slot.desc);
}

} // namespace ww::specialize
