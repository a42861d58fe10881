// SPDX-License-Identifier: MIT
// PrometheusObserver: events in, the text exposition format out (pure logic, no server).
#include "dlock/prometheus.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace dlock {
namespace {

using namespace std::chrono_literals;

bool has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(PrometheusTest, CountsAcquisitionsByOutcomeAndContendedRounds) {
  PrometheusObserver m;
  m.acquired({"job", AcquireOutcome::acquired, 2ms, 1, 0});
  m.acquired({"job", AcquireOutcome::acquired, 300ms, 4, 3});
  m.acquired({"job", AcquireOutcome::contention, 1s, 2, 2});
  m.acquired({"job", AcquireOutcome::unavailable, 1s, 5, 0});  // nodes down: not contention
  m.acquired({"", AcquireOutcome::invalid, 0ns, 0, 0});
  const std::string t = m.text();
  EXPECT_TRUE(has(t, "dlock_acquisitions_total{outcome=\"acquired\"} 2")) << t;
  EXPECT_TRUE(has(t, "dlock_acquisitions_total{outcome=\"contention\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_acquisitions_total{outcome=\"invalid\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_acquisitions_total{outcome=\"unavailable\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_acquire_attempts_total 12")) << t;
  EXPECT_TRUE(has(t, "dlock_contended_attempts_total 5")) << t;
  // Only acquisitions that got the lock are in the wait histogram; buckets are cumulative.
  EXPECT_TRUE(has(t, "dlock_acquire_wait_seconds_bucket{le=\"0.001\"} 0")) << t;
  EXPECT_TRUE(has(t, "dlock_acquire_wait_seconds_bucket{le=\"0.005\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_acquire_wait_seconds_bucket{le=\"0.5\"} 2")) << t;
  EXPECT_TRUE(has(t, "dlock_acquire_wait_seconds_bucket{le=\"+Inf\"} 2")) << t;
  EXPECT_TRUE(has(t, "dlock_acquire_wait_seconds_count 2")) << t;
  EXPECT_TRUE(has(t, "dlock_acquire_wait_seconds_sum 0.302")) << t;
}

TEST(PrometheusTest, ReleasesRenewalsAndLostLocks) {
  PrometheusObserver m;
  m.released({"job", 90s, true});
  m.released({"job", 10ms, false});
  m.renewed({"job", true, true});
  m.renewed({"job", false, true});
  m.renewed({"job", false, false});
  m.lost({"job"});
  const std::string t = m.text();
  EXPECT_TRUE(has(t, "dlock_releases_total{result=\"ok\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_releases_total{result=\"lost\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_hold_seconds_bucket{le=\"60\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_hold_seconds_bucket{le=\"300\"} 2")) << t;
  EXPECT_TRUE(has(t, "dlock_renewals_total{by=\"watchdog\",result=\"ok\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_renewals_total{by=\"watchdog\",result=\"failed\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_renewals_total{by=\"extend\",result=\"failed\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_renewals_total{by=\"extend\",result=\"ok\"} 0")) << t;
  EXPECT_TRUE(has(t, "dlock_locks_lost_total 1")) << t;
}

TEST(PrometheusTest, NodesAreLabelledByAddressWithValuesEscaped) {
  PrometheusObserver m;
  m.node_request({0, "redis://a:6379", 300us, NodeResult::ok});
  m.node_request({0, "redis://a:6379", 2s, NodeResult::error});
  m.node_request({0, "redis://a:6379", 1us, NodeResult::not_waited_for});
  m.node_request({1, "redis://we\"ird\\:1", 1ms, NodeResult::ok});
  m.quarantined({0, "redis://a:6379", 5000ms});
  const std::string t = m.text();
  EXPECT_TRUE(has(t, "dlock_node_requests_total{node=\"redis://a:6379\",result=\"ok\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_node_requests_total{node=\"redis://a:6379\",result=\"error\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_node_request_seconds_bucket{node=\"redis://a:6379\",le=\"0.0005\"} 1"))
      << t;
  EXPECT_TRUE(
      has(t, "dlock_node_requests_total{node=\"redis://a:6379\",result=\"not_waited_for\"} 1"))
      << t;
  // A request not waited for has no latency to speak of: not in the histogram.
  EXPECT_TRUE(has(t, "dlock_node_request_seconds_count{node=\"redis://a:6379\"} 2")) << t;
  EXPECT_TRUE(has(t, "dlock_node_request_seconds_bucket{node=\"redis://a:6379\",le=\"0.0001\"} 0"))
      << t;
  EXPECT_TRUE(has(t, "dlock_node_quarantines_total{node=\"redis://a:6379\"} 1")) << t;
  EXPECT_TRUE(has(t, "dlock_node_requests_total{node=\"redis://we\\\"ird\\\\:1\",result=\"ok\"} 1"))
      << t;
  // Every metric is announced once, with its type.
  for (const char* name : {"dlock_acquisitions_total", "dlock_node_request_seconds",
                           "dlock_hold_seconds", "dlock_node_quarantines_total"}) {
    const std::string type = std::string("# TYPE ") + name + " ";
    EXPECT_EQ(t.find(type), t.rfind(type)) << name;
    EXPECT_NE(t.find(type), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace dlock
