// Late placement of pure instructions whose result has one use, over the PTX text of a function
// body: each moves down to just before that use.
//
// Elementwise code is lowered one op at a time over every element a thread holds: a mask written
// as `(start_n + offs_n[None, :]) < seq_len` becomes 128 adds, then 128 compares, then, after the
// arithmetic it guards, 128 selects. In a tensor-memory softmax with a row a thread, the 128
// compares' predicates are live across the whole activation (TLX's cross-attention silu task
// spilled 3 KB at its 152-register budget; 108 bytes with this pass). Sunk to their uses, each
// element's index, compare, and and select run just before the element's select.
//
// A line `op %d, ...;` moves when it is an unguarded pure ALU instruction (no memory, no vector
// braces, one destination, the first register), %d occurs exactly twice (here and at its use,
// later), and at most one register it reads occurs for the last time here (so the move extends
// at most one register's life while it ends %d's: pressure does not grow). It passes no barrier
// line (PtxLines.h), no line that writes a register it reads, and at most kMaxDistance lines.
// Lines are taken from the last to the first, so a chain of such instructions sinks as a whole.
#include "codegen/Lowering.h"
#include "codegen/PtxLines.h"

#include <array>
#include <list>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ww::codegen {

namespace {

/// How far (in lines) an instruction may move: past a whole 128-element activation (about 8
/// lines an element), and still a bounded walk per instruction.
constexpr size_t kMaxDistance = 4096;

/// Whether `inst` (an instruction without its guard) computes its destination from registers
/// and immediates only.
bool isPureAlu(std::string_view inst) {
  static constexpr std::array<std::string_view, 20> kOpcodes = {
      "add.", "sub.", "mul.", "mad.", "fma.", "setp.", "selp.", "and.", "or.",  "xor.",
      "not.", "shl.", "shr.", "cvt.", "mov.", "neg.",  "abs.",  "min.", "max.", "ex2."};
  for (std::string_view op : kOpcodes)
    if (inst.starts_with(op)) return inst.find_first_of("[{|") == std::string_view::npos;
  return false;
}

struct RegisterInfo {
  size_t count = 0;
  size_t first = 0;
  size_t last = 0;
};

} // namespace

void sinkSingleUses(std::string& body) {
  std::vector<std::string> lines = splitPtxLines(body);
  const size_t n = lines.size();
  std::vector<std::vector<std::string_view>> regs(n);
  std::vector<std::vector<std::string_view>> writes(n); // registersWrittenBy each line
  std::vector<char> barrier(n);
  std::unordered_map<std::string_view, RegisterInfo> info;
  for (size_t i = 0; i < n; ++i) {
    regs[i] = registersIn(lines[i]);
    barrier[i] = isBarrierLine(lines[i]);
    writes[i] = registersWrittenBy(lines[i]);
    for (std::string_view r : regs[i]) {
      RegisterInfo& ri = info[r];
      if (ri.count++ == 0) ri.first = i;
      ri.last = i;
    }
  }
  auto among = [](const std::vector<std::string_view>& list, std::string_view r) {
    for (std::string_view x : list)
      if (x == r) return true;
    return false;
  };
  auto mentions = [&](size_t k, std::string_view r) { return among(regs[k], r); };
  auto mayWrite = [&](size_t k, std::string_view r) { return among(writes[k], r); };
  auto candidate = [&](size_t i) {
    bool guarded = false;
    std::string_view inst = ptxInstruction(lines[i], &guarded);
    if (inst.empty() || guarded || !isPureAlu(inst) || regs[i].empty()) return false;
    for (std::string_view r : regs[i])
      if (!isBuilderRegister(r)) return false;
    const RegisterInfo& d = info.at(regs[i][0]);
    if (d.count != 2 || d.first != i) return false;
    int dying = 0;
    for (size_t k = 1; k < regs[i].size(); ++k) {
      if (regs[i][k] == regs[i][0]) return false;
      dying += info.at(regs[i][k]).last == i;
    }
    return dying <= 1;
  };

  std::list<size_t> order; // the lines after the one being placed, in their new order
  bool moved = false;
  for (size_t i = n; i-- > 0;) {
    if (!candidate(i)) {
      order.push_front(i);
      continue;
    }
    std::string_view d = regs[i][0];
    auto at = order.begin();
    size_t passed = 0;
    bool found = false;
    for (; at != order.end() && passed < kMaxDistance; ++at, ++passed) {
      if (mentions(*at, d)) {
        found = true;
        break;
      }
      if (barrier[*at]) break;
      bool writes = false;
      for (size_t k = 1; k < regs[i].size() && !writes; ++k) writes = mayWrite(*at, regs[i][k]);
      if (writes) break;
    }
    if (!found || passed == 0) {
      order.push_front(i);
      continue;
    }
    order.insert(at, i);
    moved = true;
  }
  if (!moved) return;
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i : order) out.push_back(std::move(lines[i]));
  body = joinPtxLines(out);
}

} // namespace ww::codegen
