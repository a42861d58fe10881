// SPDX-License-Identifier: MIT
// InFlight: counts the operations a client runs in the background (the asio API's, and the
// releases an io thread sends without waiting), so that the client's last handle can wait for
// them: a program that ends right after dropping its Client must not cut a release short and
// leave its lock behind for a whole ttl, nor leave the io thread running into the process's
// exit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>

namespace dlock::engine {

class InFlight {
 public:
  // One operation, from its start until its last Token is destroyed. Each copy counts (a
  // posted std::function must be copyable); a moved-from one does not.
  class Token {
   public:
    explicit Token(std::shared_ptr<InFlight> counter) : counter_(std::move(counter)) { add(); }
    Token(const Token& other) : counter_(other.counter_) {
      if (counter_) add();
    }
    Token(Token&&) noexcept = default;
    Token& operator=(const Token&) = delete;
    Token& operator=(Token&&) = delete;
    ~Token() {
      if (!counter_) return;  // moved from
      std::lock_guard lock(counter_->mu_);
      if (--counter_->count_ == 0) counter_->idle_.notify_all();
    }

   private:
    void add() {
      std::lock_guard lock(counter_->mu_);
      ++counter_->count_;
    }
    std::shared_ptr<InFlight> counter_;
  };

  // Waits until no operation is in flight, or `until`; true if none is.
  bool wait_idle_until(std::chrono::steady_clock::time_point until) {
    std::unique_lock lock(mu_);
    return idle_.wait_until(lock, until, [this] { return count_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable idle_;
  std::size_t count_ = 0;  // guarded by mu_
};

// A Done for engine::start that holds `token` until `done` and everything it holds are gone:
// members are destroyed in reverse order, so `done` (which may hold the client's core) goes
// first and the token last.
template <class Done>
struct Counted {
  InFlight::Token token;
  Done done;
  template <class T>
  void operator()(T&& value) {
    done(std::forward<T>(value));
  }
};

template <class Done>
Counted<Done> counted(InFlight::Token token, Done done) {
  return Counted<Done>{std::move(token), std::move(done)};
}

}  // namespace dlock::engine
