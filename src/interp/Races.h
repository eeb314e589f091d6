// Happens-before tracking for shared memory: vector clocks per agent and synchronization object,
// and a log per shared allocation of the accesses that later ones must be ordered after.
#pragma once

#include "frontend/Diagnostics.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace ww::interp {

/// Component i: how far agent i had got when it last released to (a predecessor of) the holder.
struct VectorClock {
  std::vector<uint64_t> ticks;
  uint64_t at(size_t i) const { return i < ticks.size() ? ticks[i] : 0; }
  void set(size_t i, uint64_t v) {
    if (ticks.size() <= i) ticks.resize(i + 1, 0);
    ticks[i] = v;
  }
  void join(const VectorClock& other) {
    if (ticks.size() < other.ticks.size()) ticks.resize(other.ticks.size(), 0);
    for (size_t i = 0; i < other.ticks.size(); ++i) ticks[i] = std::max(ticks[i], other.ticks[i]);
  }
};

/// The bytes of a shared allocation an access touches: those in [lo, hi), and when `period` is
/// nonzero only those whose offset modulo `period` lies within `width` bytes from `phase` (the
/// rows of a column slice of a row-major tile, which interleave with the other columns' rows).
struct ByteSpan {
  int64_t lo = 0, hi = 0;
  int64_t period = 0, phase = 0, width = 0;

  bool overlaps(const ByteSpan& o) const {
    if (hi <= o.lo || o.hi <= lo) return false;
    if (period == 0 || period != o.period) return true; // dense or unlike: assume they meet
    auto mod = [&](int64_t x) { return ((x % period) + period) % period; };
    return mod(o.phase - phase) < width || mod(phase - o.phase) < o.width;
  }
  /// Whether every byte of `o` is one of these.
  bool covers(const ByteSpan& o) const {
    if (o.lo < lo || hi < o.hi) return false;
    if (period == 0) return true;
    if (o.period != period) return false;
    int64_t start = ((o.phase - phase) % period + period) % period;
    return start + o.width <= width;
  }
};

/// One shared-memory access a later access may conflict with.
struct SharedAccess {
  bool write = false;
  /// A TMA load issued but not landed, or an async_dot read not yet retired: the hardware may
  /// touch the bytes at any time, so nothing is ordered after it yet.
  bool inFlight = false;
  uint64_t token = 0; // names the copy or dot that will close an in-flight access
  size_t agent = 0;   // clock index of who did it (a barrier's copy clock for TMA landings)
  uint64_t epoch = 0; // that agent's own tick when it did it
  ByteSpan bytes;     // of the allocation
  SourceLoc loc;
  std::string what; // "local_store by task 'producer'"
  /// For a copy: what let its issuer go ahead (the barrier wait it passed last and the arrival
  /// that completed that phase), as notes for a race with it.
  std::vector<Diagnostic> permission;
  /// An async_dot read retired by async_dot_wait in an agent of several warp groups: only the
  /// waiting warp group is known past it until the agent's next agent-wide barrier (while its
  /// Agent::agentBarriers still equals `agentBarriersAtRetire`). Until then a write by the same
  /// agent (a one-thread TMA issue, or another warp group's threads) races with it.
  bool groupLocal = false;
  uint64_t agentBarriersAtRetire = 0;
  SourceLoc retiredAt; // the async_dot_wait
};

/// The accesses of one shared allocation that are not yet superseded by a covering write.
struct AccessLog {
  std::vector<SharedAccess> accesses;
};

} // namespace ww::interp
