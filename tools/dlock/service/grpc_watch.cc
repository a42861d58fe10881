// SPDX-License-Identifier: MIT
#include "service/grpc_watch.h"

#include <asio/steady_timer.hpp>
#include <optional>
#include <utility>

#include "service/grpc_service.h"
#include "service/stream_writes.h"
#include "service/watch.h"

namespace dlock::service {

namespace {

// Events a client that does not read lets pile up to this many, then the stream ends.
constexpr std::size_t kMaxQueuedEvents = 64;

v1::WatchEvent event_of(const std::string& name, const WatchState& state) {
  v1::WatchEvent event;
  event.set_name(name);
  event.set_held(state.held);
  event.set_owner(state.owner);
  event.set_fence(state.fence);
  return event;
}

}  // namespace

// One stream. Every reaction and completion takes mu_; the object lives while gRPC has it
// (self_, until OnDone) or a status read or the timer does (their shared_ptr).
class WatchReactor final : public grpc::ServerWriteReactor<v1::WatchEvent>,
                           public std::enable_shared_from_this<WatchReactor> {
 public:
  WatchReactor(Operations& ops, std::string name)
      : ops_(ops), name_(std::move(name)), timer_(ops.executor()) {}

  // gRPC's reference, taken before anything can finish the stream.
  void hold() {
    std::lock_guard lock(mu_);
    self_ = shared_from_this();
  }

  // Reads the status now and every kWatchPeriod; or, with `refused`, ends at once.
  void begin(std::optional<grpc::Status> refused) {
    std::unique_lock lock(mu_);
    if (refused) return finish(std::move(*refused));
    if (stopped_) return;  // the service stopped meanwhile
    lock.unlock();
    read_status();
  }

  // The service is stopping.
  void stop() {
    std::lock_guard lock(mu_);
    finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the service is stopping: watch through another instance"));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    if (!events_.written(ok)) finish(grpc::Status::CANCELLED);  // the stream broke
  }

  void OnCancel() override {
    std::lock_guard lock(mu_);
    finish(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    std::shared_ptr<WatchReactor> last;
    std::lock_guard lock(mu_);
    last = std::move(self_);  // destroyed after the lock is released (declared before it)
  }

 private:
  void read_status() {
    ops_.status(name_, [self = shared_from_this()](Outcome<LockStatus> outcome) {
      self->read(std::move(outcome));
    });
  }

  void read(Outcome<LockStatus> outcome) {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    if (const auto* f = std::get_if<Failure>(&outcome); f && f->code == Code::invalid_argument) {
      return finish(grpc::Status(grpc_code(f->code), f->message));
    }
    // No quorum answered (or the read failed): the holder is unknown; say nothing, read again.
    const auto* status = std::get_if<LockStatus>(&outcome);
    std::optional<WatchState> state;
    if (status != nullptr) state = watch_state(*status);
    if (state && (!last_ || !state->same_holder(*last_))) {
      if (!events_.push(event_of(name_, *state))) {
        return finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                   "the client does not read the watch's events"));
      }
      last_ = std::move(state);
    }
    timer_.expires_after(kWatchPeriod);
    timer_.async_wait([self = shared_from_this()](const std::error_code& ec) {
      if (!ec) self->read_status();
    });
  }

  // Under mu_: read no more, and finish once no write is in flight.
  void finish(grpc::Status status) {
    stopped_ = true;
    timer_.cancel();
    events_.end(std::move(status));
  }

  Operations& ops_;
  const std::string name_;
  std::mutex mu_;
  asio::steady_timer timer_;        // guarded by mu_ (a timer is not thread-safe)
  std::optional<WatchState> last_;  // guarded by mu_: the state last sent
  StreamWrites<v1::WatchEvent> events_{[this](const v1::WatchEvent* e) { StartWrite(e); },
                                       [this](const grpc::Status& s) { Finish(s); },
                                       kMaxQueuedEvents};  // guarded by mu_
  bool stopped_ = false;                                   // guarded by mu_: read no more
  std::shared_ptr<WatchReactor> self_;                     // guarded by mu_: gRPC's reference
};

grpc::ServerWriteReactor<v1::WatchEvent>* Watches::start(Operations& ops, const Guard& guard,
                                                         const Caller& caller,
                                                         const v1::WatchRequest& request) {
  auto reactor = std::make_shared<WatchReactor>(ops, request.name());
  reactor->hold();
  std::optional<grpc::Status> refused;
  if (request.name().empty()) {
    refused = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "name must not be empty");
  } else if (auto why = guard.check(caller, request.name())) {
    refused = grpc::Status(grpc_code(why->code), why->message);
  }
  {
    std::lock_guard lock(mu_);
    if (stopped_ && !refused) {
      refused = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the service is stopping");
    }
    std::erase_if(active_, [](const auto& w) { return w.expired(); });
    if (!refused) active_.push_back(reactor);
  }
  reactor->begin(std::move(refused));
  return reactor.get();
}

void Watches::stop_all() {
  std::vector<std::weak_ptr<WatchReactor>> active;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    active.swap(active_);
  }
  for (const auto& w : active) {
    if (auto reactor = w.lock()) reactor->stop();
  }
}

}  // namespace dlock::service
