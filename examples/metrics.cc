// SPDX-License-Identifier: MIT
// dlock/observer.h and dlock/prometheus.h: a client's acquisitions, holds and node requests,
// counted and rendered as a Prometheus /metrics body; and an Observer of one's own.
//   metrics redis://127.0.0.1:6379 [more node URLs...]
#include <dlock/dlock.h>
#include <dlock/prometheus.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>

// An Observer of one's own: here it only counts lost locks (a log line or an alert in real
// code). Callbacks run on the client's threads: thread-safe, fast, no calls back into the client.
class LostLocks final : public dlock::Observer {
 public:
  void lost(const dlock::LostEvent&) noexcept override { ++count; }
  std::atomic<int> count{0};
};

// Forwards every event to two observers (ClientOptions takes one).
class Both final : public dlock::Observer {
 public:
  Both(std::shared_ptr<dlock::Observer> a, std::shared_ptr<dlock::Observer> b)
      : a_(std::move(a)), b_(std::move(b)) {}
  void acquired(const dlock::AcquireEvent& e) noexcept override {
    a_->acquired(e);
    b_->acquired(e);
  }
  void released(const dlock::ReleaseEvent& e) noexcept override {
    a_->released(e);
    b_->released(e);
  }
  void renewed(const dlock::RenewEvent& e) noexcept override {
    a_->renewed(e);
    b_->renewed(e);
  }
  void lost(const dlock::LostEvent& e) noexcept override {
    a_->lost(e);
    b_->lost(e);
  }
  void node_request(const dlock::NodeRequestEvent& e) noexcept override {
    a_->node_request(e);
    b_->node_request(e);
  }
  void quarantined(const dlock::QuarantineEvent& e) noexcept override {
    a_->quarantined(e);
    b_->quarantined(e);
  }

 private:
  std::shared_ptr<dlock::Observer> a_, b_;
};

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  auto metrics = std::make_shared<dlock::PrometheusObserver>();
  auto lost = std::make_shared<LostLocks>();
  dlock::ClientOptions options;
  for (int i = 1; i < argc; ++i) options.nodes.emplace_back(argv[i]);
  if (options.nodes.empty()) options.nodes = {"redis://127.0.0.1:6379"};
  options.observer = std::make_shared<Both>(metrics, lost);
  auto client = dlock::Client::create(options);
  if (!client) {
    std::cerr << client.error().message() << "\n";
    return 64;
  }
  for (int i = 0; i < 3; ++i) {
    auto lease = client->try_lock("example:metrics");
    if (!lease || !lease->unlock()) return 1;
  }
  // What an HTTP handler for GET /metrics would send (Content-Type: text/plain; version=0.0.4).
  const std::string body = metrics->text();
  std::cout << body;
  const bool counted =
      body.find("dlock_acquisitions_total{outcome=\"acquired\"} 3\n") != std::string::npos &&
      body.find("dlock_releases_total{result=\"ok\"} 3\n") != std::string::npos;
  return counted && lost->count == 0 ? 0 : 1;
}
