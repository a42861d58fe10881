// SPDX-License-Identifier: MIT
// `dlock watch --stats` lines from polls and node events (pure logic, no server).
#include "watch_stats.h"

#include <gtest/gtest.h>

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;

NodeLockState answered(std::uint64_t fence, bool held, std::size_t queued = 0) {
  NodeLockState n;
  n.node = "redis://a:1";
  n.kind = held ? KeyKind::dlock : KeyKind::free;
  n.fence = FencingToken(fence);
  n.queued = queued;
  return n;
}

NodeLockState unreachable() {
  NodeLockState n;
  n.node = "redis://b:2";
  n.error = NodeError{n.node, make_error_code(errc::io_error), "cannot connect"};
  return n;
}

LockStatus status(std::vector<NodeLockState> nodes, bool held) {
  LockStatus s;
  s.name = "job";
  s.quorum = nodes.size() / 2 + 1;
  s.held = held;
  s.nodes = std::move(nodes);
  return s;
}

TEST(WatchStatsTest, FenceRiseCountsGrantsPerPeriodAndSinceStart) {
  WatchStats stats;
  stats.poll(status({answered(10, false), answered(9, false), unreachable()}, false));
  stats.poll(status({answered(12, true), answered(12, true), unreachable()}, true));
  std::string line = stats.take_line(1s);
  EXPECT_NE(line.find("stats 1.0s: fence 12 (+2, +2 since start)"), std::string::npos) << line;
  EXPECT_NE(line.find("held in 1/2 polls"), std::string::npos) << line;
  // Fewer than a quorum answering tells nothing about the lock: counted apart.
  stats.poll(status({answered(15, true, 3), unreachable(), unreachable()}, false));
  stats.poll(status({answered(15, true, 3), answered(15, true, 2), unreachable()}, true));
  line = stats.take_line(500ms);
  EXPECT_NE(line.find("fence 15 (+3, +5 since start)"), std::string::npos) << line;
  EXPECT_NE(line.find("held in 1/1 polls (1 without a quorum)"), std::string::npos) << line;
  EXPECT_NE(line.find("3 queued"), std::string::npos) << line;
}

TEST(WatchStatsTest, FenceNeverGoesDownWhenOtherNodesAnswer) {
  WatchStats stats;
  stats.poll(status({answered(500, false), answered(120, false), answered(120, false)}, false));
  (void)stats.take_line(1s);
  // The node with the larger counter does not answer: the others' smaller one is no fall.
  stats.poll(status({unreachable(), answered(120, false), answered(121, false)}, false));
  const std::string line = stats.take_line(1s);
  EXPECT_NE(line.find("fence 500 (+0, +0 since start)"), std::string::npos) << line;
}

TEST(WatchStatsTest, NoQuorumYetMeansFenceUnknown) {
  WatchStats stats;
  stats.poll(status({unreachable()}, false));
  const std::string line = stats.take_line(1s);
  EXPECT_NE(line.find("fence unknown"), std::string::npos) << line;
}

TEST(WatchStatsTest, NodeRequestsPerPeriodWithoutTheOnesNotWaitedFor) {
  WatchStats stats;
  stats.node_request({0, "redis://a:1", 1ms, NodeResult::ok});
  stats.node_request({0, "redis://a:1", 3ms, NodeResult::ok});
  stats.node_request({1, "redis://b:2", 200ms, NodeResult::error});
  stats.node_request({1, "redis://b:2", 1us, NodeResult::not_waited_for});
  stats.quarantined({1, "redis://b:2", 5s});
  std::string line = stats.take_line(1s);
  EXPECT_NE(line.find("| redis://a:1 ok 2 err 0 avg 2.00ms max 3.00ms"), std::string::npos) << line;
  EXPECT_NE(line.find("| redis://b:2 ok 0 err 1 not-waited-for 1 avg 200.00ms max 200.00ms "
                      "quarantined 1"),
            std::string::npos)
      << line;
  // A new period starts from zero, names kept.
  line = stats.take_line(1s);
  EXPECT_NE(line.find("| redis://a:1 ok 0 err 0 | redis://b:2 ok 0 err 0"), std::string::npos)
      << line;
}

// A server that evicts keys (maxmemory with an evicting policy) may drop a held lock: the line
// says how many keys each node evicted since the watch started.
TEST(WatchStatsTest, KeysANodeEvictedSinceStartAreShown) {
  WatchStats stats;
  stats.node_request(NodeRequestEvent{0, "redis://a:1", 1ms, NodeResult::ok});
  NodeLockState a = answered(7, false);
  a.evicted_keys = 5;
  stats.poll(status({a}, false));
  a.evicted_keys = 9;
  stats.poll(status({a}, false));
  const std::string line = stats.take_line(1s);
  EXPECT_NE(line.find("redis://a:1 ok 1 err 0"), std::string::npos) << line;
  EXPECT_NE(line.find("evicted +4 keys since start"), std::string::npos) << line;
}

// A name never taken has no counter; its first starts from the node's clock: the rise from
// nothing counts as one grant, not as the clock's value.
TEST(WatchStatsTest, AFirstCounterCountsAsOneGrant) {
  WatchStats stats;
  stats.poll(status({answered(0, false)}, false));
  stats.poll(status({answered(1795000000000001, true)}, true));
  const std::string line = stats.take_line(1s);
  EXPECT_NE(line.find("fence 1795000000000001 (+1, +1 since start)"), std::string::npos) << line;
}

}  // namespace
}  // namespace dlock::cli
