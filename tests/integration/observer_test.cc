// SPDX-License-Identifier: MIT
// ClientOptions::observer on real servers: every acquisition with its outcome, wait and
// rounds, every release with its hold time, renewals by the watchdog and by extend, lost
// locks, per-node requests and errors with a killed node, and the quarantine of a restarted
// node; PrometheusObserver fed by a real client.
#include <dlock/async.h>
#include <dlock/prometheus.h>

#include <asio.hpp>
#include <future>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "lock/keys.h"
#include "support/cluster_fixture.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::eventually;

// Keeps a copy of every event (names copied: the views are valid during the call only).
class Recorder final : public Observer {
 public:
  struct Acquire {
    std::string name;
    AcquireOutcome outcome;
    std::chrono::nanoseconds waited;
    std::size_t attempts;
    std::size_t contended;
  };
  struct Release {
    std::string name;
    std::chrono::nanoseconds held;
    bool ok;
  };
  struct Renew {
    std::string name;
    bool ok;
    bool by_watchdog;
  };
  struct Request {
    std::size_t node;
    std::string address;
    NodeResult result;
  };
  struct Quarantine {
    std::size_t node;
    std::chrono::milliseconds duration;
  };

  void acquired(const AcquireEvent& e) noexcept override {
    std::lock_guard lock(mu_);
    acquires_.push_back({std::string(e.name), e.outcome, e.waited, e.attempts, e.contended});
  }
  void released(const ReleaseEvent& e) noexcept override {
    std::lock_guard lock(mu_);
    releases_.push_back({std::string(e.name), e.held, e.ok});
  }
  void renewed(const RenewEvent& e) noexcept override {
    std::lock_guard lock(mu_);
    renewals_.push_back({std::string(e.name), e.ok, e.by_watchdog});
  }
  void lost(const LostEvent& e) noexcept override {
    std::lock_guard lock(mu_);
    lost_.emplace_back(e.name);
  }
  void node_request(const NodeRequestEvent& e) noexcept override {
    std::lock_guard lock(mu_);
    requests_.push_back({e.node, std::string(e.address), e.result});
  }
  void quarantined(const QuarantineEvent& e) noexcept override {
    std::lock_guard lock(mu_);
    quarantines_.push_back({e.node, e.duration});
  }

  std::vector<Acquire> acquires() const { return copy(acquires_); }
  std::vector<Release> releases() const { return copy(releases_); }
  std::vector<Renew> renewals() const { return copy(renewals_); }
  std::vector<std::string> lost() const { return copy(lost_); }
  std::vector<Request> requests() const { return copy(requests_); }
  std::vector<Quarantine> quarantines() const { return copy(quarantines_); }
  std::size_t requests_to(std::size_t node, NodeResult result) const {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto& r : requests_) n += r.node == node && r.result == result ? 1 : 0;
    return n;
  }

 private:
  template <typename T>
  T copy(const T& v) const {
    std::lock_guard lock(mu_);
    return v;
  }
  mutable std::mutex mu_;
  std::vector<Acquire> acquires_;
  std::vector<Release> releases_;
  std::vector<Renew> renewals_;
  std::vector<std::string> lost_;
  std::vector<Request> requests_;
  std::vector<Quarantine> quarantines_;
};

class ObserverTest : public test::ClusterTest {
 protected:
  Client observed_client(std::shared_ptr<Observer> observer,
                         std::chrono::milliseconds node_timeout = 500ms) {
    ClientOptions options;
    options.nodes = nodes_->urls();
    options.node_timeout = node_timeout;
    options.reconnect_backoff_min = 20ms;
    options.reconnect_backoff_max = 200ms;
    options.observer = std::move(observer);
    auto c = Client::create(options);
    EXPECT_TRUE(c) << c.error().message();
    return std::move(c).value();
  }
  std::shared_ptr<Recorder> recorder_ = std::make_shared<Recorder>();
};

TEST_P(ObserverTest, EveryAcquisitionIsReportedWithItsOutcome) {
  // A generous timeout: a round that timed out would be unavailable, not contended.
  Client client = observed_client(recorder_, 5s);
  Client other = make_client();

  auto first = client.try_lock("job", fixed(10s, "a"));
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_FALSE(client.try_lock("job", fixed(10s, "b")));     // held by "a"
  EXPECT_FALSE(client.try_lock("", fixed(10s, "a")));        // bad input: nothing sent
  EXPECT_FALSE(client.lock("job", 300ms, fixed(10s, "b")));  // still held when the wait ends
  std::stop_source stop;
  std::chrono::steady_clock::time_point stop_at;
  std::jthread canceller([&] {
    // Once the wait listens for a release (the previous wait has left its channel by then).
    EXPECT_TRUE(eventually([&] { return someone_waits_for("job"); }, 20s));
    std::this_thread::sleep_for(100ms);
    stop_at = std::chrono::steady_clock::now();
    stop.request_stop();
  });
  const auto before_cancelled = std::chrono::steady_clock::now();
  auto cancelled = client.lock("job", 30s, fixed(10s, "c"), stop.get_token());
  const auto cancelled_took = std::chrono::steady_clock::now() - before_cancelled;
  EXPECT_FALSE(cancelled);
  canceller.join();
  ASSERT_TRUE(first->unlock());

  const auto a = recorder_->acquires();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].outcome, AcquireOutcome::acquired);
  EXPECT_EQ(a[0].attempts, 1u);
  EXPECT_EQ(a[0].contended, 0u);
  EXPECT_EQ(a[0].name, "job");
  EXPECT_EQ(a[1].outcome, AcquireOutcome::contention);
  EXPECT_EQ(a[1].attempts, 1u);
  EXPECT_EQ(a[1].contended, 1u);
  EXPECT_EQ(a[2].outcome, AcquireOutcome::invalid);
  EXPECT_EQ(a[2].attempts, 0u);
  EXPECT_EQ(a[3].outcome, AcquireOutcome::contention);
  EXPECT_GE(a[3].attempts, 1u);
  EXPECT_EQ(a[3].contended, a[3].attempts) << "every round found it held";
  EXPECT_GE(a[3].waited, 300ms);
  EXPECT_EQ(a[4].outcome, AcquireOutcome::cancelled);
  EXPECT_LE(a[4].waited, cancelled_took);
  EXPECT_GE(a[4].waited, stop_at - before_cancelled - 50ms);
  // The other client is not observed: its own calls report nothing here.
  EXPECT_TRUE(other.try_lock("job", fixed(10s, "z")));
  EXPECT_EQ(recorder_->acquires().size(), 5u);
}

TEST_P(ObserverTest, AWaitReportsItsRoundsAndTimeAndTheReleaseItsHoldTime) {
  Client holder_client = make_client();
  Client client = observed_client(recorder_, 5s);  // no round may time out: exact counts
  auto holder = holder_client.try_lock("job", fixed(10s, "holder"));
  ASSERT_TRUE(holder);
  std::chrono::steady_clock::time_point released_at;
  std::jthread releaser([&] {
    // Once the waiter has found it held and listens for the release.
    EXPECT_TRUE(eventually([&] { return someone_waits_for("job"); }, 20s));
    std::this_thread::sleep_for(100ms);
    released_at = std::chrono::steady_clock::now();
    EXPECT_TRUE(holder->unlock());
  });
  const auto called_at = std::chrono::steady_clock::now();
  auto waited = client.lock("job", 30s, fixed(10s, "waiter"));
  ASSERT_TRUE(waited) << waited.error().message();
  releaser.join();
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(waited->unlock());

  const auto a = recorder_->acquires();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].outcome, AcquireOutcome::acquired);
  EXPECT_GE(a[0].attempts, 2u) << "the first round found the lock held";
  EXPECT_GE(a[0].contended, 1u);
  EXPECT_EQ(a[0].contended, a[0].attempts - 1);
  // The wait began inside lock(), after called_at: at least until the release.
  EXPECT_GE(a[0].waited, released_at - called_at - 50ms);
  const auto r = recorder_->releases();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].ok);
  EXPECT_GE(r[0].held, 200ms);
  EXPECT_LT(r[0].held, 10s);
}

TEST_P(ObserverTest, RenewalsByTheWatchdogAndByExtendAndALostLock) {
  Client client = observed_client(recorder_);
  auto lease = client.try_lock("job", renewed(600ms, "a"));
  ASSERT_TRUE(lease) << lease.error().message();
  // The watchdog renews every ttl/3 (one may fail on a busy machine without losing the lock).
  const auto watchdog_ok = [&] {
    std::size_t n = 0;
    for (const auto& r : recorder_->renewals()) n += r.ok && r.by_watchdog ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(eventually([&] { return watchdog_ok() >= 2; }, 20s));
  ASSERT_TRUE(lease->extend(5s));
  bool by_extend = false;
  for (const auto& r : recorder_->renewals()) {
    EXPECT_EQ(r.name, "job");
    if (!r.by_watchdog && r.ok) by_extend = true;
  }
  EXPECT_TRUE(by_extend);
  EXPECT_TRUE(recorder_->lost().empty());

  // Somebody deletes the key everywhere: the next renewal finds it gone.
  for (std::size_t i = 0; i < size(); ++i) (*nodes_)[i].command({"DEL", "job"});
  ASSERT_TRUE(eventually([&] { return !recorder_->lost().empty(); }, 15s));
  EXPECT_EQ(recorder_->lost().front(), "job");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(recorder_->lost().size(), 1u) << "one lease, lost once";
  bool failed = false;
  for (const auto& r : recorder_->renewals()) failed = failed || (!r.ok && r.by_watchdog);
  EXPECT_TRUE(failed);
  // Its release then reports the lock as lost.
  EXPECT_FALSE(lease->unlock());
  const auto rel = recorder_->releases();
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_FALSE(rel[0].ok);
}

TEST_P(ObserverTest, AnExtendOfALockThatIsGoneReportsItLost) {
  Client client = observed_client(recorder_);
  auto lease = client.try_lock("job", fixed(10s, "a"));
  ASSERT_TRUE(lease) << lease.error().message();
  for (std::size_t i = 0; i < size(); ++i) (*nodes_)[i].command({"DEL", "job"});
  EXPECT_FALSE(lease->extend(10s));
  const auto r = recorder_->renewals();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].ok);
  EXPECT_FALSE(r[0].by_watchdog);
  EXPECT_EQ(recorder_->lost().size(), 1u);
}

TEST_P(ObserverTest, NodeRequestsAndErrorsArePerNode) {
  // A generous timeout: no request to a live node may time out, however busy the machine.
  Client client = observed_client(recorder_, 5s);
  ASSERT_TRUE(client.try_lock("warm", fixed(10s, "a")));
  // Every node answers (a reply a round had its quorum without is "not waited for", no error).
  for (std::size_t i = 0; i < size(); ++i) {
    EXPECT_GT(recorder_->requests_to(i, NodeResult::ok), 0u) << "node " << i;
    EXPECT_EQ(recorder_->requests_to(i, NodeResult::error), 0u) << "node " << i;
  }
  for (const auto& r : recorder_->requests()) {
    EXPECT_EQ(r.address, nodes_->urls()[r.node]);
  }
  // The last node dies: requests to it fail, the others still answer.
  const std::size_t dead = size() - 1;
  (*nodes_)[dead].kill9();
  (void)client.try_lock("after", fixed(10s, "a"));
  EXPECT_TRUE(eventually(
      [&] {
        (void)client.try_lock("again", fixed(10s, "a"));
        return recorder_->requests_to(dead, NodeResult::error) > 0;
      },
      10s));
  for (std::size_t i = 0; i < dead; ++i) {
    EXPECT_EQ(recorder_->requests_to(i, NodeResult::error), 0u) << "node " << i;
  }
}

TEST_P(ObserverTest, ARestartedNodeIsReportedQuarantined) {
  if (size() < 3) GTEST_SKIP() << "a lone node that restarted empty has nobody to vouch";
  Client holder_client = make_client();
  auto held = holder_client.try_lock("job", fixed(5s, "holder"));
  ASSERT_TRUE(held) << held.error().message();
  (*nodes_)[1].restart(/*keep_data=*/false);
  Client client = observed_client(recorder_);  // greets the restarted node first
  (void)client.try_lock("other", fixed(1s, "b"));
  const auto q = recorder_->quarantines();
  ASSERT_FALSE(q.empty());
  EXPECT_EQ(q[0].node, 1u);
  EXPECT_GT(q[0].duration, 0ms);
  EXPECT_LE(q[0].duration, 6s);
  // A larger ttl than any announced makes the client greet again and compute a later end for
  // the running quarantine: that lengthens it, it does not start another.
  (void)client.try_lock("other", fixed(8s, "b"));
  (void)client.try_lock("other", fixed(9s, "b"));
  EXPECT_EQ(recorder_->quarantines().size(), 1u);
}

TEST_P(ObserverTest, AsyncAcquisitionsAreReportedToo) {
  Client client = observed_client(recorder_);
  std::promise<Result<Lease>> got;
  dlock::async_try_lock(client, "job", fixed(10s, "a"),
                        [&](Result<Lease> lease) { got.set_value(std::move(lease)); });
  auto lease = got.get_future().get();
  ASSERT_TRUE(lease) << lease.error().message();
  std::promise<Result<Lease>> timed_out;
  dlock::async_lock(client, "job", 200ms, fixed(10s, "b"),
                    [&](Result<Lease> l) { timed_out.set_value(std::move(l)); });
  EXPECT_FALSE(timed_out.get_future().get());
  ASSERT_TRUE(lease->unlock());
  const auto a = recorder_->acquires();
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].outcome, AcquireOutcome::acquired);
  EXPECT_EQ(a[0].attempts, 1u);
  EXPECT_EQ(a[1].outcome, AcquireOutcome::contention);
  EXPECT_GE(a[1].attempts, 1u);
  EXPECT_GE(a[1].waited, 200ms);
  // A refused async_try_lock: one round, found held.
  auto again = client.try_lock("job2", fixed(10s, "x"));
  ASSERT_TRUE(again);
  std::promise<Result<Lease>> refused;
  dlock::async_try_lock(client, "job2", fixed(10s, "y"),
                        [&](Result<Lease> l) { refused.set_value(std::move(l)); });
  EXPECT_FALSE(refused.get_future().get());
  const auto b = recorder_->acquires();
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[3].outcome, AcquireOutcome::contention);
  EXPECT_EQ(b[3].attempts, 1u);
  EXPECT_EQ(b[3].contended, 1u);
}

TEST_P(ObserverTest, RoundsWithoutAQuorumAreNotContention) {
  Client client = observed_client(recorder_);
  kill_majority();
  EXPECT_FALSE(client.lock("job", 1s, fixed(10s, "a")));
  const auto a = recorder_->acquires();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].outcome, AcquireOutcome::unavailable);
  EXPECT_GE(a[0].attempts, 1u);
  EXPECT_EQ(a[0].contended, 0u) << "the nodes were down; nobody held the lock";
}

TEST_P(ObserverTest, ReentrantLeasesAreEachAcquiredAndReleased) {
  Client client = observed_client(recorder_);
  auto outer = client.try_lock("job", fixed(10s, "a"));
  ASSERT_TRUE(outer);
  auto inner = client.try_lock("job", fixed(10s, "a"));
  ASSERT_TRUE(inner);
  ASSERT_TRUE(inner->unlock());
  ASSERT_TRUE(outer->unlock());
  EXPECT_TRUE(inner->unlock()) << "a repeated unlock is a no-op";
  const auto a = recorder_->acquires();
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].outcome, AcquireOutcome::acquired);
  const auto r = recorder_->releases();
  ASSERT_EQ(r.size(), 2u) << "one per lease, the reentrant one included, none for a repeat";
  EXPECT_TRUE(r[0].ok);
  EXPECT_TRUE(r[1].ok);
}

TEST_P(ObserverTest, ReentrantLeasesOfALostHoldAreEachReportedLostOnce) {
  Client client = observed_client(recorder_);
  auto a = client.try_lock("job", fixed(10s, "a"));
  ASSERT_TRUE(a);
  auto b = client.try_lock("job", fixed(10s, "a"));  // the same hold
  ASSERT_TRUE(b);
  for (std::size_t i = 0; i < size(); ++i) (*nodes_)[i].command({"DEL", "job"});
  EXPECT_FALSE(a->extend(10s));  // finds the hold gone
  EXPECT_EQ(recorder_->lost().size(), 1u);
  EXPECT_FALSE(b->extend(10s));  // its hold was lost: this lease is lost now
  EXPECT_EQ(recorder_->lost().size(), 2u);
  EXPECT_FALSE(b->extend(10s));  // already lost: not again
  EXPECT_EQ(recorder_->lost().size(), 2u);
}

TEST_P(ObserverTest, AsyncUnlockAndALeaseDroppedInItsHandlerAreReleases) {
  Client client = observed_client(recorder_);
  std::promise<Result<Lease>> got;
  dlock::async_try_lock(client, "job", fixed(10s, "a"),
                        [&](Result<Lease> lease) { got.set_value(std::move(lease)); });
  auto lease = got.get_future().get();
  ASSERT_TRUE(lease) << lease.error().message();
  std::promise<Result<void>> unlocked;
  dlock::async_unlock(*lease, [&](Result<void> r) { unlocked.set_value(std::move(r)); });
  ASSERT_TRUE(unlocked.get_future().get());
  ASSERT_EQ(recorder_->releases().size(), 1u);
  // A lease that ends inside its completion handler is released by its destructor.
  std::promise<void> dropped;
  dlock::async_try_lock(client, "job", fixed(10s, "a"), [&](Result<Lease> l) {
    EXPECT_TRUE(l);
    dropped.set_value();
  });
  dropped.get_future().get();
  EXPECT_TRUE(eventually([&] { return recorder_->releases().size() == 2; }));
  EXPECT_TRUE(eventually([&] { return nodes_with("job") == 0; }));
}

TEST_P(ObserverTest, PrometheusObserverCountsARealClient) {
  auto metrics = std::make_shared<PrometheusObserver>();
  Client client = observed_client(metrics);
  auto lease = client.try_lock("job", fixed(10s, "a"));
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_FALSE(client.try_lock("job", fixed(10s, "b")));
  ASSERT_TRUE(lease->unlock());
  const std::string text = metrics->text();
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("dlock_acquisitions_total{outcome=\"acquired\"} 1")) << text;
  EXPECT_TRUE(has("dlock_acquisitions_total{outcome=\"contention\"} 1")) << text;
  EXPECT_TRUE(has("dlock_releases_total{result=\"ok\"} 1")) << text;
  EXPECT_TRUE(has("dlock_hold_seconds_count 1")) << text;
  for (const auto& url : nodes_->urls()) {
    EXPECT_NE(text.find("dlock_node_requests_total{node=\"" + url + "\",result=\"ok\"}"),
              std::string::npos)
        << url << "\n"
        << text;
  }
  EXPECT_EQ(text.find("job"), std::string::npos) << "lock names are never labels";
}

INSTANTIATE_TEST_SUITE_P(Nodes, ObserverTest, ::testing::Values(1, 3), test::node_count_name);

}  // namespace
}  // namespace dlock
