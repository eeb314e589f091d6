// AxisInfo propagation rules. Divisibility is only claimed for the starts of runs on the grid the
// result's contiguity defines: when a run shrinks, so does what its start is known to divide.
#include "layout/AxisInfo.h"

#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"

#include <algorithm>
#include <numeric>

namespace ww::layout {

using ir::OpCode;

namespace {

constexpr int64_t kMaxDivisibility = int64_t(1) << 30;

int infoRank(const ir::Type& t) {
  return std::max<int>(1, static_cast<int>(t.shape.size()));
}

int64_t dimSize(const ir::Type& t, int d) {
  return t.shape.empty() ? 1 : t.shape[d];
}

/// Divisibility of run starts when the runs are cut to length `runs` (a power of two).
int64_t divOnGrid(const AxisInfo& x, int d, int64_t runs) {
  return runs < x.contiguity[d] ? std::min(x.divisibility[d], runs) : x.divisibility[d];
}

/// Divisibility that holds for every element (no contiguity runs).
int64_t elementDiv(const AxisInfo& x, int d) {
  return divOnGrid(x, d, 1);
}

AxisInfo meet(const AxisInfo& a, const AxisInfo& b) {
  AxisInfo r = a;
  for (int d = 0; d < a.rank() && d < b.rank(); ++d) {
    r.contiguity[d] = std::min(a.contiguity[d], b.contiguity[d]);
    r.divisibility[d] = std::min(a.divisibility[d], b.divisibility[d]);
    r.constancy[d] = std::min(a.constancy[d], b.constancy[d]);
  }
  if (a.constantValue != b.constantValue) r.constantValue.reset();
  return r;
}

/// Info of a scalar used where a tensor of `type` is expected (implicit splat).
AxisInfo asTensor(const AxisInfo& x, const ir::Type& scalarType, const ir::Type& type) {
  if (!scalarType.shape.empty() || type.shape.empty()) return x;
  AxisInfo r = AxisInfo::unknown(infoRank(type));
  for (int d = 0; d < r.rank(); ++d) {
    r.divisibility[d] = x.divisibility[0];
    r.constancy[d] = type.shape[d];
  }
  r.constantValue = x.constantValue;
  return r;
}

std::optional<int64_t> constantOf(const ir::Op& op) {
  const ir::Attr a = ir::attr::Constant::value(op);
  if (const int64_t* i = std::get_if<int64_t>(&a)) return *i;
  return std::nullopt;
}

/// log2 of a constant power of two, when `x` is one.
std::optional<int> constantLog2(const AxisInfo& x) {
  if (!x.constantValue || *x.constantValue <= 0) return std::nullopt;
  int64_t v = *x.constantValue;
  if (v & (v - 1)) return std::nullopt;
  int l = 0;
  while ((int64_t(1) << l) < v) ++l;
  return l;
}

/// `info` with the facts a tl.multiple_of / tl.max_contiguous op asserts.
AxisInfo withHint(AxisInfo info, const ir::Op& hint) {
  bool multiple = hint.code() == ir::OpCode::MultipleOf;
  std::vector<int64_t> values =
      multiple ? ir::attr::MultipleOf::values(hint) : ir::attr::MaxContiguous::values(hint);
  for (int d = 0; d < info.rank() && d < static_cast<int>(values.size()); ++d) {
    std::vector<int64_t>& fact = multiple ? info.divisibility : info.contiguity;
    fact[d] = std::max(fact[d], highestPowerOf2Divisor(values[d]));
  }
  return info;
}

} // namespace

AxisInfo AxisInfo::unknown(int rank) {
  int n = std::max(1, rank);
  return AxisInfo{std::vector<int64_t>(n, 1), std::vector<int64_t>(n, 1),
                  std::vector<int64_t>(n, 1), std::nullopt};
}

int64_t highestPowerOf2Divisor(int64_t v) {
  if (v == 0) return kMaxDivisibility;
  int64_t p = v & -v;
  return std::min(p < 0 ? kMaxDivisibility : p, kMaxDivisibility);
}

AxisInfoAnalysis::AxisInfoAnalysis(const ir::Function& fn) : fn_(fn) {
  // A hint describes the value it is given, as Triton's attaches to that value's defining op:
  // every use of the value sees it, also where the hint's own result is discarded
  // (`tl.max_contiguous(tl.multiple_of(offsets, 1024), 1024)` as a statement).
  ir::walk(fn.body, [&](const ir::Op& op) {
    if (ir::isValueHint(op.code()) && op.numOperands() == 1) hints_[op.operand(0)].push_back(&op);
  });
  for (const ir::KernelArg& arg : fn.args) {
    if (!arg.value) continue;
    AxisInfo info = AxisInfo::unknown(1);
    info.divisibility[0] = std::max(1, arg.divisibility);
    if (arg.equalsOne) {
      info.constantValue = 1;
      info.divisibility[0] = 1;
    }
    set(arg.value, info);
  }
  visitBlock(fn.body);
}

AxisInfo AxisInfoAnalysis::get(const ir::Value* v) const {
  auto it = info_.find(v);
  if (it != info_.end()) return it->second;
  return AxisInfo::unknown(v ? infoRank(v->type()) : 1);
}

void AxisInfoAnalysis::set(const ir::Value* v, AxisInfo info) {
  auto hinted = hints_.find(v);
  if (hinted != hints_.end())
    for (const ir::Op* hint : hinted->second) info = withHint(std::move(info), *hint);
  info_[v] = std::move(info);
}

void AxisInfoAnalysis::visitBlock(const ir::Block& block) {
  for (const auto& op : block.ops()) visitOp(*op);
}

int64_t AxisInfoAnalysis::pointerAlignmentElems(const ir::Value* ptr, int dim) const {
  AxisInfo info = get(ptr);
  if (dim >= info.rank()) return 1;
  int64_t bytes = ir::byteWidth(ptr->type().elem);
  return std::max<int64_t>(1, info.divisibility[dim] / bytes);
}

int64_t AxisInfoAnalysis::vectorElems(const ir::Value* ptr, const ir::Value* mask, int dim) const {
  if (!ptr->type().isPointer() || ptr->type().shape.empty()) return 1;
  AxisInfo info = get(ptr);
  if (dim >= info.rank()) return 1;
  int64_t bytes = ir::byteWidth(ptr->type().elem);
  int64_t v = std::min(
      {info.contiguity[dim], pointerAlignmentElems(ptr, dim), std::max<int64_t>(1, 16 / bytes)});
  if (mask && !mask->type().shape.empty()) {
    AxisInfo m = get(mask);
    if (dim < m.rank()) v = std::min(v, m.constancy[dim]);
  }
  return std::max<int64_t>(1, v);
}

void AxisInfoAnalysis::visitOp(const ir::Op& op) {
  auto in = [&](unsigned i) { return get(op.operand(i)); };
  const ir::Type resultType = op.numResults() ? op.result(0)->type() : ir::Type::none();
  int rank = infoRank(resultType);
  // An operand's info seen at the result's shape (scalars splat implicitly).
  auto operandAsResult = [&](unsigned i) {
    return asTensor(in(i), op.operand(i)->type(), resultType);
  };

  switch (op.code()) {
  case OpCode::Constant: {
    AxisInfo r = AxisInfo::unknown(rank);
    for (int d = 0; d < rank; ++d) r.constancy[d] = dimSize(resultType, d);
    if (auto c = constantOf(op)) {
      for (int d = 0; d < rank; ++d) r.divisibility[d] = highestPowerOf2Divisor(*c);
      r.constantValue = c;
    }
    set(op.result(), r);
    return;
  }
  case OpCode::Arange: {
    AxisInfo r = AxisInfo::unknown(1);
    r.contiguity[0] = dimSize(resultType, 0);
    r.divisibility[0] = highestPowerOf2Divisor(ir::attr::Arange::start(op));
    set(op.result(), r);
    return;
  }
  case OpCode::Splat: {
    AxisInfo s = in(0), r = AxisInfo::unknown(rank);
    for (int d = 0; d < rank; ++d) {
      r.divisibility[d] = elementDiv(s, 0);
      r.constancy[d] = dimSize(resultType, d);
    }
    r.constantValue = s.constantValue;
    set(op.result(), r);
    return;
  }
  case OpCode::Broadcast: {
    AxisInfo s = in(0), r = s;
    const ir::Type& st = op.operand(0)->type();
    if (st.shape.empty()) {
      set(op.result(), asTensor(s, st, resultType));
      return;
    }
    // Along a stretched dim every element is a run start, and each repeats a whole source
    // slice: only what holds for every source element is known.
    bool anyContiguous = false;
    for (int e = 0; e < s.rank(); ++e) anyContiguous |= s.contiguity[e] > 1;
    int64_t everyElement =
        anyContiguous ? 1 : *std::max_element(s.divisibility.begin(), s.divisibility.end());
    for (int d = 0; d < rank && d < s.rank(); ++d)
      if (dimSize(st, d) == 1 && dimSize(resultType, d) != 1) {
        r.contiguity[d] = 1;
        r.divisibility[d] = everyElement;
        r.constancy[d] = dimSize(resultType, d);
      }
    set(op.result(), r);
    return;
  }
  case OpCode::ExpandDims: {
    AxisInfo s = in(0), r = s;
    int axis = static_cast<int>(ir::attr::ExpandDims::axis(op));
    bool anyContiguous = false;
    for (int e = 0; e < s.rank(); ++e) anyContiguous |= s.contiguity[e] > 1;
    int64_t div =
        anyContiguous ? 1 : *std::max_element(s.divisibility.begin(), s.divisibility.end());
    if (op.operand(0)->type().shape.empty()) {
      set(op.result(), asTensor(s, op.operand(0)->type(), resultType));
      return;
    }
    r.contiguity.insert(r.contiguity.begin() + axis, 1);
    r.divisibility.insert(r.divisibility.begin() + axis, div);
    r.constancy.insert(r.constancy.begin() + axis, 1);
    set(op.result(), r);
    return;
  }
  case OpCode::Permute: {
    AxisInfo s = in(0), r = s;
    std::vector<int64_t> order = ir::attr::Permute::order(op);
    for (size_t d = 0; d < order.size() && d < size_t(r.rank()); ++d) {
      r.contiguity[d] = s.contiguity[order[d]];
      r.divisibility[d] = s.divisibility[order[d]];
      r.constancy[d] = s.constancy[order[d]];
    }
    set(op.result(), r);
    return;
  }
  case OpCode::Reshape: {
    // Row-major reshape: runs along the last dim stay runs (cut to the new row length); the other
    // dims only keep what holds for every element.
    AxisInfo s = in(0), r = AxisInfo::unknown(rank);
    if (op.operand(0)->type().shape.empty() || resultType.shape.empty()) break;
    int last = s.rank() - 1;
    int64_t newLast = resultType.shape.back();
    r.contiguity[rank - 1] = std::min(s.contiguity[last], newLast);
    r.divisibility[rank - 1] = divOnGrid(s, last, r.contiguity[rank - 1]);
    r.constancy[rank - 1] = std::min(s.constancy[last], newLast);
    bool anyContiguous = false;
    for (int e = 0; e < s.rank(); ++e) anyContiguous |= s.contiguity[e] > 1;
    int64_t everyElement =
        anyContiguous ? 1 : *std::max_element(s.divisibility.begin(), s.divisibility.end());
    for (int d = 0; d + 1 < rank; ++d) {
      r.divisibility[d] = everyElement;
      if (s.constantValue) r.constancy[d] = resultType.shape[d];
    }
    r.constantValue = s.constantValue;
    set(op.result(), r);
    return;
  }
  case OpCode::Add:
  case OpCode::Sub:
  case OpCode::AddPtr: {
    if (ir::isFloat(resultType.elem) && !resultType.pointer) break;
    AxisInfo a = operandAsResult(0), b = operandAsResult(1);
    // Offsets of addptr count elements; the pointer's facts count bytes.
    int64_t scale = op.code() == OpCode::AddPtr ? ir::byteWidth(resultType.elem) : 1;
    AxisInfo r = AxisInfo::unknown(rank);
    for (int d = 0; d < rank; ++d) {
      int64_t contig = std::gcd(a.contiguity[d], b.constancy[d]);
      if (op.code() != OpCode::Sub)
        contig = std::max(contig, std::gcd(a.constancy[d], b.contiguity[d]));
      r.contiguity[d] = contig;
      r.divisibility[d] = std::min(divOnGrid(a, d, contig),
                                   std::min(kMaxDivisibility, divOnGrid(b, d, contig) * scale));
      r.constancy[d] = std::gcd(a.constancy[d], b.constancy[d]);
    }
    if (a.constantValue && b.constantValue && op.code() != OpCode::AddPtr)
      r.constantValue = op.code() == OpCode::Sub ? *a.constantValue - *b.constantValue
                                                 : *a.constantValue + *b.constantValue;
    // x - x % c is a multiple of c (truncated or floored remainder alike): a start rounded
    // down to a TMA-aligned column, say.
    if (const ir::Op* rem = op.operand(1)->def(); op.code() == OpCode::Sub && rem &&
                                                  rem->code() == OpCode::Rem &&
                                                  rem->operand(0) == op.operand(0)) {
      std::optional<int64_t> c = get(rem->operand(1)).constantValue;
      if (c && *c > 0)
        for (int d = 0; d < rank; ++d)
          if (r.contiguity[d] == 1)
            r.divisibility[d] =
                std::max(r.divisibility[d], std::min(kMaxDivisibility, highestPowerOf2Divisor(*c)));
    }
    set(op.result(), r);
    return;
  }
  case OpCode::Mul:
  case OpCode::Shl: {
    if (ir::isFloat(resultType.elem)) break;
    AxisInfo a = operandAsResult(0), b = operandAsResult(1);
    AxisInfo r = AxisInfo::unknown(rank);
    bool shl = op.code() == OpCode::Shl;
    std::optional<int> shift =
        shl && b.constantValue && *b.constantValue >= 0 && *b.constantValue < 31
            ? std::optional<int>(static_cast<int>(*b.constantValue))
            : std::nullopt;
    for (int d = 0; d < rank; ++d) {
      r.constancy[d] = std::gcd(a.constancy[d], b.constancy[d]);
      if (shl) {
        if (shift && *shift == 0) r.contiguity[d] = a.contiguity[d];
        r.divisibility[d] =
            shift ? std::min(kMaxDivisibility, elementDiv(a, d) << *shift) : int64_t(1);
        if (shift && *shift == 0) r.divisibility[d] = a.divisibility[d];
        continue;
      }
      if (b.constantValue == 1) {
        r.contiguity[d] = a.contiguity[d];
        r.divisibility[d] = a.divisibility[d];
      } else if (a.constantValue == 1) {
        r.contiguity[d] = b.contiguity[d];
        r.divisibility[d] = b.divisibility[d];
      } else {
        r.divisibility[d] = std::min(kMaxDivisibility, elementDiv(a, d) * elementDiv(b, d));
      }
    }
    if (a.constantValue && b.constantValue)
      r.constantValue =
          shl ? (*a.constantValue << *b.constantValue) : *a.constantValue * *b.constantValue;
    set(op.result(), r);
    return;
  }
  case OpCode::Div:
  case OpCode::FloorDiv:
  case OpCode::Shr: {
    if (ir::isFloat(resultType.elem)) break;
    AxisInfo a = operandAsResult(0), b = operandAsResult(1);
    AxisInfo r = AxisInfo::unknown(rank);
    // Division by a power of two 2^k (or >> k) of non-negative indices: runs of 2^k contiguous
    // values starting at multiples of 2^k map to one value.
    std::optional<int> k = op.code() == OpCode::Shr
                               ? (b.constantValue && *b.constantValue >= 0 && *b.constantValue < 31
                                      ? std::optional<int>(static_cast<int>(*b.constantValue))
                                      : std::nullopt)
                               : constantLog2(b);
    for (int d = 0; d < rank; ++d) {
      r.constancy[d] = std::gcd(a.constancy[d], b.constancy[d]);
      if (!k) continue;
      int64_t p = int64_t(1) << *k;
      int64_t run = std::min({a.contiguity[d], p, a.divisibility[d]});
      if (run == p) r.constancy[d] = std::max(r.constancy[d], p);
      if (*k == 0) {
        r.contiguity[d] = a.contiguity[d];
        r.divisibility[d] = a.divisibility[d];
      } else if (a.contiguity[d] == 1) {
        r.divisibility[d] = std::max<int64_t>(1, a.divisibility[d] / p);
      }
    }
    if (a.constantValue && b.constantValue && *b.constantValue != 0)
      r.constantValue = op.code() == OpCode::Shr ? (*a.constantValue >> *b.constantValue)
                                                 : *a.constantValue / *b.constantValue;
    set(op.result(), r);
    return;
  }
  case OpCode::Rem: {
    if (ir::isFloat(resultType.elem)) break;
    AxisInfo a = operandAsResult(0), b = operandAsResult(1);
    AxisInfo r = AxisInfo::unknown(rank);
    std::optional<int> k = constantLog2(b);
    for (int d = 0; d < rank; ++d) {
      r.constancy[d] = std::gcd(a.constancy[d], b.constancy[d]);
      // x % n wraps only at multiples of n: a constant 2^k, or a divisor n known to be a multiple
      // of 2^j over runs of at least 2^j (as Triton's rule, offsets are taken as non-negative:
      // (pid * BLOCK + arange) % N stays contiguous in runs of N's divisibility).
      int64_t p = k ? int64_t(1) << *k : std::min(elementDiv(b, d), b.constancy[d]);
      if (!k && p <= 1) continue;
      int64_t run = std::min(a.contiguity[d], p);
      if (a.divisibility[d] >= run) r.contiguity[d] = run;
      r.divisibility[d] = std::min(divOnGrid(a, d, r.contiguity[d]), p);
      if (k) r.constancy[d] = std::max(r.constancy[d], a.constancy[d]);
    }
    if (a.constantValue && b.constantValue && *b.constantValue != 0)
      r.constantValue = *a.constantValue % *b.constantValue;
    set(op.result(), r);
    return;
  }
  case OpCode::Cmp: {
    AxisInfo a = operandAsResult(0), b = operandAsResult(1);
    AxisInfo r = AxisInfo::unknown(rank);
    std::string pred = ir::attr::Cmp::pred(op);
    for (int d = 0; d < rank; ++d) {
      int64_t c = std::gcd(a.constancy[d], b.constancy[d]);
      // x < n (or x >= n) over a contiguous run of x starting at a multiple of L, with n a
      // multiple of L, cannot change inside the run: n is never strictly inside it.
      auto runBound = [&](const AxisInfo& x, const AxisInfo& n) {
        return std::min({x.contiguity[d], x.divisibility[d], n.constancy[d], elementDiv(n, d)});
      };
      if (pred == "lt" || pred == "ge") c = std::max(c, runBound(a, b));
      if (pred == "gt" || pred == "le") c = std::max(c, runBound(b, a));
      r.constancy[d] = c;
    }
    set(op.result(), r);
    return;
  }
  case OpCode::And:
  case OpCode::Or:
  case OpCode::Xor:
  case OpCode::Max:
  case OpCode::Min:
  case OpCode::Not:
  case OpCode::Neg: {
    AxisInfo r = AxisInfo::unknown(rank);
    for (int d = 0; d < rank; ++d) {
      int64_t c = dimSize(resultType, d);
      for (unsigned i = 0; i < op.numOperands(); ++i)
        c = std::gcd(c, operandAsResult(i).constancy[d]);
      r.constancy[d] = c;
      // Each element of a max / min is one of its operands' elements, so it keeps the
      // divisibility both share (slice ends min(start + width, n) stay 16-aligned).
      if (op.code() == OpCode::Max || op.code() == OpCode::Min)
        r.divisibility[d] =
            std::min(elementDiv(operandAsResult(0), d), elementDiv(operandAsResult(1), d));
    }
    set(op.result(), r);
    return;
  }
  case OpCode::Select: {
    AxisInfo c = operandAsResult(0), a = operandAsResult(1), b = operandAsResult(2);
    AxisInfo r = AxisInfo::unknown(rank);
    for (int d = 0; d < rank; ++d) {
      r.constancy[d] = std::gcd(c.constancy[d], std::gcd(a.constancy[d], b.constancy[d]));
      r.contiguity[d] = std::gcd(c.constancy[d], std::min(a.contiguity[d], b.contiguity[d]));
      r.divisibility[d] =
          std::min(divOnGrid(a, d, r.contiguity[d]), divOnGrid(b, d, r.contiguity[d]));
    }
    if (c.constantValue) r = *c.constantValue ? a : b;
    set(op.result(), r);
    return;
  }
  case OpCode::Cast:
  case OpCode::Bitcast:
  case OpCode::PtrToInt:
  case OpCode::IntToPtr: {
    const ir::Type& st = op.operand(0)->type();
    bool intLike =
        (st.pointer || ir::isInt(st.elem)) && (resultType.pointer || ir::isInt(resultType.elem));
    if (!intLike) break;
    set(op.result(), in(0));
    return;
  }
  case OpCode::MultipleOf:
  case OpCode::MaxContiguous:
    set(op.result(), withHint(in(0), op));
    return;
  case OpCode::For: {
    // Operands: lb, ub, step, init...; region(iv, iters...).
    const ir::Block& body = *op.region(0);
    AxisInfo lb = in(0), step = in(2);
    AxisInfo iv = AxisInfo::unknown(1);
    iv.divisibility[0] = std::min(lb.divisibility[0], step.divisibility[0]);
    set(body.arg(0), iv);
    unsigned numIters = op.numOperands() - 3;
    std::vector<AxisInfo> iters;
    for (unsigned i = 0; i < numIters; ++i) iters.push_back(in(3 + i));
    // Loop-carried facts: meet the yields with the current guess until nothing changes (each
    // step only weakens a power-of-two fact, so this terminates).
    for (int round = 0; round < 32; ++round) {
      for (unsigned i = 0; i < numIters && i + 1 < body.numArgs(); ++i)
        set(body.arg(i + 1), iters[i]);
      visitBlock(body);
      const ir::Op* y = body.terminator();
      bool changed = false;
      for (unsigned i = 0; y && i < numIters && i < y->numOperands(); ++i) {
        AxisInfo m = meet(iters[i], get(y->operand(i)));
        if (!(m == iters[i])) {
          iters[i] = m;
          changed = true;
        }
      }
      if (!changed) break;
    }
    for (unsigned i = 0; i < numIters && i < op.numResults(); ++i) set(op.result(i), iters[i]);
    return;
  }
  case OpCode::If: {
    for (unsigned r = 0; r < op.numRegions(); ++r) visitBlock(*op.region(r));
    for (unsigned i = 0; i < op.numResults(); ++i) {
      std::optional<AxisInfo> m;
      for (unsigned r = 0; r < op.numRegions(); ++r) {
        const ir::Op* y = op.region(r)->terminator();
        if (!y || i >= y->numOperands()) continue;
        AxisInfo v = get(y->operand(i));
        m = m ? meet(*m, v) : v;
      }
      set(op.result(i), m ? *m : AxisInfo::unknown(infoRank(op.result(i)->type())));
    }
    return;
  }
  case OpCode::While: {
    // Values flowing around a while loop are left unknown; the bodies are still analysed.
    for (unsigned r = 0; r < op.numRegions(); ++r) {
      const ir::Block& b = *op.region(r);
      for (unsigned i = 0; i < b.numArgs(); ++i)
        set(b.arg(i), AxisInfo::unknown(infoRank(b.arg(i)->type())));
      visitBlock(b);
    }
    for (unsigned i = 0; i < op.numResults(); ++i)
      set(op.result(i), AxisInfo::unknown(infoRank(op.result(i)->type())));
    return;
  }
  default:
    break;
  }
  // Everything else: analyse nested regions, results unknown.
  for (unsigned r = 0; r < op.numRegions(); ++r) {
    const ir::Block& b = *op.region(r);
    for (unsigned i = 0; i < b.numArgs(); ++i)
      set(b.arg(i), AxisInfo::unknown(infoRank(b.arg(i)->type())));
    visitBlock(b);
  }
  for (unsigned i = 0; i < op.numResults(); ++i)
    set(op.result(i), AxisInfo::unknown(infoRank(op.result(i)->type())));
}

} // namespace ww::layout
