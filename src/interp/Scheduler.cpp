#include "interp/Scheduler.h"

namespace ww::interp {

void Scheduler::start(Agent* a) {
  a->scheduler = this;
  a->thread = std::thread([this, a] {
    std::unique_lock<std::mutex> lock(mutex_);
    a->wake.wait(lock, [&] { return running_ == a || abort_; });
    if (!abort_) {
      lock.unlock();
      try {
        a->body();
        a->state = Agent::State::Done;
      } catch (const AgentAbort&) {
        a->state = Agent::State::Done;
      } catch (...) {
        a->error = std::current_exception();
        a->state = Agent::State::Failed;
      }
      lock.lock();
    }
    running_ = nullptr;
    cv_.notify_one();
  });
}

Agent* Scheduler::spawn(std::unique_ptr<Agent> agent) {
  Agent* a = agent.get();
  spawned_.push_back(std::move(agent));
  start(a);
  agents_.push_back(a);
  return a;
}

void Scheduler::run(std::vector<Agent*> agents, const std::function<bool()>& progress,
                    const std::function<void(const std::vector<Agent*>&)>& deadlock) {
  agents_ = std::move(agents);
  for (Agent* a : agents_) start(a);
  size_t next = 0;
  try {
    for (;;) {
      // A TMA may land any time after issue: a seeded run sometimes lands copies early.
      if (seed_ != 0 && rng_() % 4 == 0) progress();
      Agent* chosen = nullptr;
      size_t chosenIndex = 0;
      std::vector<size_t> runnable;
      for (size_t j = 0; j < agents_.size(); ++j) {
        size_t k = (next + j) % agents_.size();
        Agent* a = agents_[k];
        if (a->state == Agent::State::Ready ||
            (a->state == Agent::State::Blocked && a->blockedEpoch != epoch_))
          runnable.push_back(k);
      }
      if (!runnable.empty()) {
        chosenIndex = seed_ == 0 ? runnable.front() : runnable[rng_() % runnable.size()];
        chosen = agents_[chosenIndex];
      }
      if (!chosen) {
        bool allDone = true;
        for (Agent* a : agents_) allDone &= a->state == Agent::State::Done;
        if (allDone) break;
        if (progress()) continue;
        std::vector<Agent*> blocked;
        for (Agent* a : agents_)
          if (a->state == Agent::State::Blocked) blocked.push_back(a);
        deadlock(blocked); // throws
        throw std::logic_error("deadlock handler returned");
      }
      {
        std::unique_lock<std::mutex> lock(mutex_);
        chosen->state = Agent::State::Running;
        running_ = chosen;
        chosen->wake.notify_one();
        cv_.wait(lock, [&] { return running_ == nullptr; });
      }
      if (chosen->state == Agent::State::Failed) std::rethrow_exception(chosen->error);
      next = chosenIndex + 1;
    }
  } catch (...) {
    abortAll();
    throw;
  }
  for (Agent* a : agents_) a->thread.join();
}

void Scheduler::abortAll() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    abort_ = true;
    for (Agent* a : agents_) a->wake.notify_all();
  }
  for (Agent* a : agents_)
    if (a->thread.joinable()) a->thread.join();
}

void Scheduler::park(Agent& self, std::unique_lock<std::mutex>& lock) {
  running_ = nullptr;
  cv_.notify_one();
  self.wake.wait(lock, [&] { return running_ == &self || abort_; });
  if (abort_) throw AgentAbort{};
}

void Scheduler::block(Agent& self, BlockSite site) {
  std::unique_lock<std::mutex> lock(mutex_);
  self.state = Agent::State::Blocked;
  self.blockedEpoch = epoch_;
  self.site = std::move(site);
  park(self, lock);
}

void Scheduler::yield(Agent& self) {
  std::unique_lock<std::mutex> lock(mutex_);
  self.state = Agent::State::Ready;
  park(self, lock);
}

} // namespace ww::interp
