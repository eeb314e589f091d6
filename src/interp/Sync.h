// Shared-memory synchronization objects of one program (CTA): mbarriers with exact phase,
// pending-arrival and transaction-byte accounting, and the named (bar.sync) barriers.
#pragma once

#include "frontend/Diagnostics.h"
#include "interp/Races.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ww::ir {
class Op;
}

namespace ww::interp {

/// One mbarrier. A phase completes when its pending arrivals and its outstanding transaction
/// bytes both reach zero; then the phase count advances (its parity flips) and the arrival count
/// is re-armed. barrier_wait(parity p) passes once the phase of parity p has completed, i.e. while
/// the current phase's parity differs from p.
struct MBarrier {
  /// An arrival on a phase: who arrived, and where.
  struct Arrival {
    SourceLoc at;
    std::string by;
  };
  int64_t arriveCount = 1;     // arrivals per phase, from init
  int64_t pendingArrivals = 1; // arrivals still missing in the current phase
  int64_t txBytes = 0;         // expected transaction bytes not yet delivered (may go negative)
  int64_t phase = 0;           // number of completed phases
  bool warpBarrier = false;    // arrivals count threads, not warp groups
  VectorClock arrivals;        // released by the arrivals (and copies) of the current phase
  VectorClock completed;       // released by completed phases: what a passing wait acquires
  /// TMA landings count on a clock of their own per barrier, so that a wait on one barrier
  /// orders only the copies that complete on it. SIZE_MAX until the first landing.
  size_t copyClock = SIZE_MAX;
  uint64_t copyTicks = 0;
  /// The arrival (or copy) that completed the latest phase, for deadlock and over-arrival
  /// reports.
  SourceLoc lastCompletedAt;
  std::string lastCompletedBy;
  /// The highest phase count a passing barrier_wait has seen; -1 while nobody has waited. A
  /// phase completing while the one before it is unseen laps every waiter (parity waits cannot
  /// tell the two apart), which only surplus arrivals cause.
  int64_t observedPhase = -1;
  /// The waits that saw the latest completion (phase count `observersPhase`): agent clock index
  /// and that agent's tick then. An arrival on a later phase must be ordered after one of them,
  /// as every arrival of a correct pipeline is (the waiter refills, the arriver waits for that).
  int64_t observersPhase = -1;
  std::vector<std::pair<size_t, uint64_t>> observers;
  SourceLoc observedAt; // the first of those waits
  std::string observedBy;
  /// The barrier_expect_bytes calls of the phase in progress, for byte-count reports.
  int64_t expectedBytes = 0;
  int64_t deliveredBytes = 0;
  SourceLoc expectAt;
  std::string expectBy;
  /// The arrivals of the phase in progress and of the phase before, so that a deadlock report
  /// can name who has arrived and who arrived last time but not yet this time.
  std::vector<Arrival> phaseArrivals, previousArrivals;

  bool waitPasses(int64_t parity) const { return (phase & 1) != (parity & 1); }
  /// Completes the phase when it can; returns whether it did.
  bool maybeComplete() {
    if (pendingArrivals != 0 || txBytes != 0) return false;
    ++phase;
    pendingArrivals = arriveCount;
    completed.join(arrivals);
    arrivals = VectorClock();
    expectedBytes = deliveredBytes = 0;
    previousArrivals = std::move(phaseArrivals);
    phaseArrivals.clear();
    return true;
  }
  /// "phase 3 (parity 1): 1 of 2 arrivals pending, 1024 transaction bytes outstanding"
  std::string describe() const;
};

struct MBarrierArray {
  std::vector<MBarrier> barriers;
  SourceLoc allocAt;               // the alloc_barriers that initialized them
  const ir::Op* allocOp = nullptr; // that alloc_barriers op (a peer CTA's array is the same op)
  std::string name;                // of its value in the source ("full"), may be empty
  /// "barrier 1 of 'full'"
  std::string describe(int64_t index) const {
    return "barrier " + std::to_string(index) + (name.empty() ? "" : " of '" + name + "'");
  }
};

/// A named barrier (bar.sync / bar.arrive id, num_threads).
struct NamedBarrier {
  int64_t expectedThreads = 0; // of the phase in progress; 0 when none is in progress
  int64_t arrivedThreads = 0;
  int64_t generation = 0;   // completed phases
  VectorClock arrivals;     // of the phase in progress
  SourceLoc firstArrivalAt; // of the phase in progress
  std::string firstArrivalBy;
  VectorClock completed; // acquired by waiters of a completed phase
};

} // namespace ww::interp
