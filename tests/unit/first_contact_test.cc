// SPDX-License-Identifier: MIT
// A client's first greeting (lock/membership.h): tried again while nodes time out, within the
// connect timeout, but only after a try that waited for its timeouts. Nodes here are a Fanout
// whose every call fails with errc::timeout, at once (as a node in reconnect backoff after a
// connect timeout answers) or after the node timeout; the greetings on real servers are
// RedlockTest's (tests/integration/redlock_test.cc).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "lock/membership.h"
#include "node/fanout.h"

namespace dlock::lock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class TimingOutNodes final : public node::Fanout {
 public:
  TimingOutNodes(std::size_t n, std::chrono::milliseconds after) : addresses_(n), after_(after) {
    for (std::size_t i = 0; i < n; ++i) addresses_[i].host = "node-" + std::to_string(i);
  }
  void start(std::vector<node::Call> calls, node::Enough, Done done) override {
    ++rounds;
    std::this_thread::sleep_for(after_);
    std::vector<node::Outcomes> out(
        calls.size(), node::Outcomes(size(), Error(errc::timeout, "no reply within 100 ms")));
    done(std::move(out));
  }
  void post(std::function<void()> f) override { f(); }
  std::size_t size() const noexcept override { return addresses_.size(); }
  const net::NodeAddress& address(std::size_t i) const override { return addresses_[i]; }
  std::uint64_t epoch(std::size_t) const override { return 1; }
  int rounds = 0;

 private:
  std::vector<net::NodeAddress> addresses_;
  const std::chrono::milliseconds after_;
};

MembershipOptions patient(std::chrono::milliseconds connect_timeout) {
  MembershipOptions o;
  o.connect_timeout = connect_timeout;
  o.node_timeout = 100ms;
  return o;
}

// One try: an INFO round and a hello round. Without the check of how long a try took, this
// spun through thousands of tries until the connect timeout.
TEST(FirstContactTest, TimeoutsThatCameAtOnceAreNotTriedAgain) {
  TimingOutNodes nodes(3, 0ms);
  Membership membership(nodes, 0.01, nullptr, patient(2s));
  const auto start = Clock::now();
  const Membership::View view = membership.refresh(1s);
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(nodes.rounds, 2);
  EXPECT_TRUE(view.ttl_unannounced) << "nothing may vote";
}

// Timeouts that were waited for: tried again until the connect timeout (600 ms), every try an
// INFO round and a hello round of 100 ms each; the next greeting, past the window, tries once.
TEST(FirstContactTest, TimeoutsWaitedForAreTriedAgainUntilTheConnectTimeout) {
  TimingOutNodes nodes(3, 100ms);
  Membership membership(nodes, 0.01, nullptr, patient(600ms));
  const auto start = Clock::now();
  const Membership::View view = membership.refresh(1s);
  EXPECT_GE(Clock::now() - start, 600ms);
  EXPECT_GE(nodes.rounds, 6) << "three tries at least";
  EXPECT_EQ(nodes.rounds % 2, 0) << "whole tries";
  EXPECT_TRUE(view.ttl_unannounced);
  const int first = nodes.rounds;
  std::this_thread::sleep_for(Membership::kUnsettledRetry);
  (void)membership.refresh(1s);
  EXPECT_EQ(nodes.rounds - first, 2) << "a greeting past the window tried again";
}

// Without a connect timeout (the simulation's Membership): one try, as before.
TEST(FirstContactTest, WithoutAConnectTimeoutAGreetingIsOneTry) {
  TimingOutNodes nodes(3, 100ms);
  Membership membership(nodes, 0.01, nullptr, patient(0ms));
  (void)membership.refresh(1s);
  EXPECT_EQ(nodes.rounds, 2);
}

}  // namespace
}  // namespace dlock::lock
