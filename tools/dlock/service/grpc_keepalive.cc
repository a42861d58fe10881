// SPDX-License-Identifier: MIT
#include "service/grpc_keepalive.h"

#include <asio/steady_timer.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "service/grpc_service.h"
#include "service/keepalive.h"
#include "service/stream_writes.h"

namespace dlock::service {

namespace {

using Clock = std::chrono::steady_clock;
using Base = grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>;

std::vector<LeaseRenewal> renewals_of(const v1::KeepAliveRequest& request) {
  std::vector<LeaseRenewal> out;
  out.reserve(static_cast<std::size_t>(request.leases_size()));
  for (const v1::LeaseRef& l : request.leases()) {
    out.push_back(
        LeaseRenewal{HoldRef{l.name(), l.owner(), mode_of(l.mode()), l.permit()}, l.ttl_ms()});
  }
  return out;
}

bool same_hold(const HoldRef& a, const HoldRef& b) {
  return a.name == b.name && a.owner == b.owner && a.mode == b.mode && a.permit == b.permit;
}

// Answers a client that does not read them pile up to this many, then the stream ends.
constexpr std::size_t kMaxQueuedAnswers = 64;

// One stream. Every reaction and completion takes mu_; the object lives while gRPC has it
// (self_, until OnDone) or a renewal round or the timer does (their shared_ptr).
class KeepAliveReactor final : public Base,
                               public StoppableStream,
                               public std::enable_shared_from_this<KeepAliveReactor> {
 public:
  KeepAliveReactor(Operations& ops, const Guard& guard, Caller caller)
      : ops_(ops), guard_(guard), caller_(std::move(caller)), timer_(ops.executor()) {}

  void begin() {
    self_ = shared_from_this();
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::unique_lock lock(mu_);
    if (!ok) return finish(grpc::Status::OK);  // closed, cancelled or broken: stop renewing
    auto leases = renewals_of(request_);
    if (auto bad = check_renewals(leases)) {
      return finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, bad->message));
    }
    for (const LeaseRenewal& l : leases) {
      if (auto refused = guard_.check_extend(caller_, l.hold.name, l.ttl_ms)) {
        return finish(grpc::Status(grpc_code(refused->code), refused->message));
      }
    }
    replace(std::move(leases));
    StartRead(&request_);
    lock.unlock();
    renew_now();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    if (!answers_.written(ok)) finish(grpc::Status::CANCELLED);  // the stream broke
  }

  void stop() override {
    std::lock_guard lock(mu_);
    finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the service is stopping: keep alive through another instance"));
  }

  void OnCancel() override {
    // The pending read completes with ok == false and finishes the stream; stop renewing now.
    std::lock_guard lock(mu_);
    stopped_ = true;
    timer_.cancel();
  }

  void OnDone() override {
    std::shared_ptr<KeepAliveReactor> last;
    std::lock_guard lock(mu_);
    last = std::move(self_);  // destroyed after the lock is released (declared before it)
  }

 private:
  // The new set; a lease kept from the old one keeps its last known validity.
  void replace(std::vector<LeaseRenewal> leases) {
    std::vector<std::optional<Clock::time_point>> until(leases.size());
    for (std::size_t i = 0; i < leases.size(); ++i) {
      for (std::size_t j = 0; j < leases_.size(); ++j) {
        if (same_hold(leases[i].hold, leases_[j].hold)) until[i] = valid_until_[j];
      }
    }
    leases_ = std::move(leases);
    valid_until_ = std::move(until);
    ++generation_;
  }

  void renew_now() {
    std::vector<LeaseRenewal> leases;
    std::vector<std::optional<Clock::time_point>> until;
    std::uint64_t generation = 0;
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      if (renewing_) {
        again_ = true;  // the set changed during a round: renew the new one when it ends
        return;
      }
      renewing_ = true;
      timer_.cancel();
      leases = leases_;
      until = valid_until_;
      generation = generation_;
    }
    renew_all(ops_, leases, std::move(until),
              [self = shared_from_this(), generation](std::vector<Renewed> renewed) {
                self->renewed(generation, std::move(renewed));
              });
  }

  void renewed(std::uint64_t generation, std::vector<Renewed> renewed) {
    bool again = false;
    {
      std::lock_guard lock(mu_);
      renewing_ = false;
      if (stopped_) return;
      if (generation == generation_) forget_lost(renewed);
      v1::KeepAliveResponse answer;
      for (const Renewed& r : renewed) {
        v1::LeaseValidity* v = answer.add_leases();
        v->set_name(r.name);
        v->set_owner(r.owner);
        v->set_validity_ms(r.validity_ms);
        v->set_error(r.error);
      }
      if (!answers_.push(std::move(answer))) {
        return finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                   "the client does not read the keep-alive's answers"));
      }
      again = std::exchange(again_, false);
      if (!again && !leases_.empty()) schedule();
    }
    if (again) renew_now();
  }

  // Records the round's validities; a lost lease leaves the set. Under mu_.
  void forget_lost(const std::vector<Renewed>& renewed) {
    const auto now = Clock::now();
    std::vector<LeaseRenewal> kept;
    std::vector<std::optional<Clock::time_point>> until;
    for (std::size_t i = 0; i < renewed.size() && i < leases_.size(); ++i) {
      if (renewed[i].lost) continue;
      kept.push_back(leases_[i]);
      until.push_back(renewed[i].error.empty()
                          ? std::optional(now + std::chrono::milliseconds(renewed[i].validity_ms))
                          : valid_until_[i]);
    }
    leases_ = std::move(kept);
    valid_until_ = std::move(until);
  }

  // Under mu_.
  void schedule() {
    timer_.expires_after(renew_period(leases_));
    timer_.async_wait([self = shared_from_this()](const std::error_code& ec) {
      if (!ec) self->renew_now();
    });
  }

  // Under mu_: stop renewing, and finish once no write is in flight.
  void finish(grpc::Status status) {
    stopped_ = true;
    timer_.cancel();
    answers_.end(std::move(status));
  }

  Operations& ops_;
  const Guard& guard_;
  const Caller caller_;
  std::mutex mu_;
  asio::steady_timer timer_;          // guarded by mu_ (a timer is not thread-safe)
  v1::KeepAliveRequest request_;      // gRPC reads into it; one read at a time
  std::vector<LeaseRenewal> leases_;  // guarded by mu_
  std::vector<std::optional<Clock::time_point>> valid_until_;  // guarded by mu_, as leases_
  std::uint64_t generation_ = 0;  // guarded by mu_; a new set, a new generation
  bool renewing_ = false;         // guarded by mu_: a round in flight
  bool again_ = false;            // guarded by mu_
  bool stopped_ = false;          // guarded by mu_: renew no more
  StreamWrites<v1::KeepAliveResponse> answers_{
      [this](const v1::KeepAliveResponse* a) { StartWrite(a); },
      [this](const grpc::Status& s) { Finish(s); }, kMaxQueuedAnswers};  // guarded by mu_
  std::shared_ptr<KeepAliveReactor> self_;  // guarded by mu_: gRPC's reference
};

}  // namespace

namespace {

std::shared_ptr<KeepAliveReactor> make_keepalive(Operations& ops, const Guard& guard,
                                                 Caller caller) {
  auto reactor = std::make_shared<KeepAliveReactor>(ops, guard, std::move(caller));
  reactor->begin();
  return reactor;
}

}  // namespace

grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>* start_keepalive(
    Operations& ops, const Guard& guard, Caller caller) {
  return make_keepalive(ops, guard, std::move(caller)).get();
}

grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>* KeepAlives::start(
    Operations& ops, const Guard& guard, Caller caller) {
  auto reactor = make_keepalive(ops, guard, std::move(caller));
  bool stopped = false;
  {
    std::lock_guard lock(mu_);
    stopped = stopped_;
    std::erase_if(active_, [](const auto& w) { return w.expired(); });
    if (!stopped) active_.push_back(reactor);
  }
  if (stopped) reactor->stop();
  return reactor.get();
}

void KeepAlives::stop_all() {
  std::vector<std::weak_ptr<StoppableStream>> active;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    active.swap(active_);
  }
  for (const auto& w : active) {
    if (auto stream = w.lock()) stream->stop();
  }
}

}  // namespace dlock::service
