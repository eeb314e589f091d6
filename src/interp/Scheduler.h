// Agents and the deterministic scheduler that interleaves them: each async task (and replica) of
// a program runs as an agent on its own thread, but only the one holding the baton runs, and the
// baton moves round-robin at blocking points (barrier waits, named barriers, async_dot_wait).
// In a cluster launch the programs of the cluster's CTAs are agents of one scheduler too, and
// their async tasks join it (Scheduler::spawn). The run is therefore a deterministic function of
// the kernel and its inputs. With a nonzero
// seed the scheduler instead picks a random runnable agent at each switch, and may let the memory
// system land copies early, so that different seeds explore different legal interleavings.
#pragma once

#include "frontend/Diagnostics.h"
#include "interp/Races.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace ww::ir {
class Op;
}

namespace ww::interp {

/// What an agent is waiting for, for deadlock reports.
struct BlockSite {
  SourceLoc loc;
  std::string what;              // "waits on barrier 1 of 'full' for phase parity 0 (...)"
  std::vector<Diagnostic> notes; // what may explain the wait
};

class Scheduler;

/// One agent: an async task replica, or the whole program when it has no async tasks.
struct Agent {
  std::string label;   // "task 'producer' replica 1"
  bool isTask = false; // an async task replica (else a program's own code)
  /// "program (1, 0, 0)" when the agents of several programs (a cluster) share a scheduler.
  std::string program;
  int numWarps = 4;
  int replica = 0;
  /// The async_task op this agent runs (null for a program's own code): where its warps start
  /// (ir/TaskPlan.h) gives its threads' tlx.thread_id().
  const ir::Op* taskOp = nullptr;
  Scheduler* scheduler = nullptr; // null: the only agent, running on the caller's thread
  size_t clockIndex = 1;          // this agent's component of vector clocks
  VectorClock clock;              // what this agent is ordered after
  /// Barriers of all of this agent's threads passed so far (ir::lowersWithAgentBarrier ops,
  /// debug_barrier, named barriers of its whole thread count). With several warp groups, an
  /// async_dot_wait retires a dot only for the group that waits; the next such barrier retires
  /// it for all.
  uint64_t agentBarriers = 0;

  enum class State { Ready, Running, Blocked, Done, Failed };
  State state = State::Ready;
  uint64_t blockedEpoch = 0;
  BlockSite site;
  std::exception_ptr error;
  std::function<void()> body;
  std::thread thread;
  /// Wakes this agent's thread alone when the baton (or an abort) reaches it: one condition
  /// variable for all would wake every agent of a cluster at each hand-over.
  std::condition_variable wake;
};

/// Thrown inside an agent's thread to unwind it when the run is abandoned.
struct AgentAbort {};

class Scheduler {
public:
  /// Runs `agents` to completion. `progress` is called when every agent is blocked; it may
  /// complete outstanding asynchronous operations and returns whether it changed anything.
  /// `deadlock` is called (and must throw) when nothing can make progress. Rethrows the first
  /// error an agent raised.
  /// 0 (the default): round-robin. Otherwise a seeded random interleaving.
  explicit Scheduler(uint64_t seed = 0) : seed_(seed), rng_(seed) {}

  void run(std::vector<Agent*> agents, const std::function<bool()>& progress,
           const std::function<void(const std::vector<Agent*>&)>& deadlock);

  /// Agent side, while `run` is under way: adds an agent that the scheduler owns from now on
  /// (its thread is joined when `run` ends), as a program of a cluster starts its async tasks.
  Agent* spawn(std::unique_ptr<Agent> agent);
  /// Every agent of the run so far, spawned ones included.
  const std::vector<Agent*>& agents() const { return agents_; }

  /// Agent side: gives the baton back and parks until the scheduler resumes this agent.
  void block(Agent& self, BlockSite site);
  void yield(Agent& self);
  /// Records a change of synchronization state, so blocked agents check their conditions again.
  void bump() { ++epoch_; }
  uint64_t epoch() const { return epoch_; }

private:
  void park(Agent& self, std::unique_lock<std::mutex>& lock);
  void start(Agent* a);
  void abortAll();

  std::vector<Agent*> agents_;
  std::vector<std::unique_ptr<Agent>> spawned_;

  std::mutex mutex_;
  std::condition_variable cv_; // the scheduler's own: the baton came back
  Agent* running_ = nullptr;
  bool abort_ = false;
  uint64_t epoch_ = 0;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

} // namespace ww::interp
