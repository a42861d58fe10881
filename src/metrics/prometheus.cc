// SPDX-License-Identifier: MIT
#include <dlock/prometheus.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <locale>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace dlock {
namespace {

// The shortest text that reads back as the same double (0.005, not 0.0050000000000000001).
// Bucket bounds are written `fixed` (0.0005, not 5e-04): queries match `le` as text.
std::string number(double v, std::chars_format format = std::chars_format::general) {
  char buf[400];  // the longest fixed double
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, format);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

// Cumulative buckets are what Prometheus reads; counts are kept per bucket and summed when
// rendered, so an event costs one increment.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double seconds) {
    std::size_t i = 0;
    while (i < bounds_.size() && seconds > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += seconds;
    ++count_;
  }
  void render(std::ostream& out, const std::string& name, const std::string& labels) const {
    std::uint64_t cumulative = 0;
    const std::string sep = labels.empty() ? "" : ",";
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += counts_[i];
      out << name << "_bucket{" << labels << sep << "le=\""
          << number(bounds_[i], std::chars_format::fixed) << "\"} " << cumulative << "\n";
    }
    cumulative += counts_.back();
    out << name << "_bucket{" << labels << sep << "le=\"+Inf\"} " << cumulative << "\n";
    const std::string braces = labels.empty() ? "" : "{" + labels + "}";
    out << name << "_sum" << braces << " " << number(sum_) << "\n";
    out << name << "_count" << braces << " " << count_ << "\n";
  }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

// Waits and holds: a millisecond to a minute and more.
std::vector<double> lock_buckets() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}
// One request to one node: from 100 µs (loopback) to the node timeout.
std::vector<double> node_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
}

double seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

// A label value: backslash, double quote and newline escaped, as the format requires.
std::string label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

constexpr std::array<std::string_view, 5> kOutcomes{"acquired", "contention", "unavailable",
                                                    "cancelled", "invalid"};

struct NodeStats {
  std::uint64_t ok = 0;
  std::uint64_t errors = 0;
  std::uint64_t not_waited_for = 0;
  std::uint64_t quarantines = 0;
  std::uint64_t evicted_keys = 0;  // the server's, at the last greeting
  bool never_votes = false;
  Histogram latency{node_buckets()};
};

using NodeTable = std::map<std::string, NodeStats, std::less<>>;  // by address: sorted output

struct LockStats {
  std::array<std::uint64_t, kOutcomes.size()> acquisitions{};
  std::uint64_t attempts = 0;
  std::uint64_t contended_attempts = 0;
  Histogram wait{lock_buckets()};
  Histogram hold{lock_buckets()};
  std::uint64_t releases_ok = 0;
  std::uint64_t releases_lost = 0;
  // [by watchdog][ok]
  std::uint64_t renewals[2][2] = {{0, 0}, {0, 0}};
  std::uint64_t lost = 0;
};

void header(std::ostream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

void render_locks(std::ostream& out, const LockStats& s) {
  header(out, "dlock_acquisitions_total", "counter",
         "Lock acquisitions (try_lock, lock, async) by how they ended.");
  for (std::size_t i = 0; i < kOutcomes.size(); ++i) {
    out << "dlock_acquisitions_total{outcome=\"" << kOutcomes[i] << "\"} " << s.acquisitions[i]
        << "\n";
  }
  header(out, "dlock_acquire_attempts_total", "counter", "Acquisition rounds sent to the nodes.");
  out << "dlock_acquire_attempts_total " << s.attempts << "\n";
  header(out, "dlock_contended_attempts_total", "counter",
         "Acquisition rounds refused because another owner held the lock.");
  out << "dlock_contended_attempts_total " << s.contended_attempts << "\n";
  header(out, "dlock_acquire_wait_seconds", "histogram",
         "Time from an acquisition call to the lock, for acquisitions that got it.");
  s.wait.render(out, "dlock_acquire_wait_seconds", "");
  header(out, "dlock_hold_seconds", "histogram", "Time from the grant of a lease to its release.");
  s.hold.render(out, "dlock_hold_seconds", "");
  header(
      out, "dlock_releases_total", "counter",
      "Releases; result=\"lost\": the lock had been lost or had expired, or no quorum confirmed.");
  out << "dlock_releases_total{result=\"ok\"} " << s.releases_ok << "\n";
  out << "dlock_releases_total{result=\"lost\"} " << s.releases_lost << "\n";
  header(out, "dlock_renewals_total", "counter",
         "Renewals by the watchdog and by explicit extends, by result.");
  for (int by = 0; by < 2; ++by) {
    for (int ok = 0; ok < 2; ++ok) {
      out << "dlock_renewals_total{by=\"" << (by ? "watchdog" : "extend") << "\",result=\""
          << (ok ? "ok" : "failed") << "\"} " << s.renewals[by][ok] << "\n";
    }
  }
  header(out, "dlock_locks_lost_total", "counter",
         "Leases found lost or expired by the watchdog or an extend.");
  out << "dlock_locks_lost_total " << s.lost << "\n";
}

// One gauge or counter per node: `value(stats)` is printed.
template <typename Value>
void render_per_node(std::ostream& out, const NodeTable& nodes, const char* name, Value value) {
  for (const auto& [address, n] : nodes) {
    out << name << "{node=\"" << label_value(address) << "\"} " << value(n) << "\n";
  }
}

void render_nodes(std::ostream& out, const NodeTable& nodes) {
  header(out, "dlock_node_requests_total", "counter",
         "Requests to each node; result=\"error\": no reply in time, a broken connection, or an "
         "error reply; \"not_waited_for\": the round had its quorum first.");
  for (const auto& [address, n] : nodes) {
    const std::string node = "node=\"" + label_value(address) + "\"";
    out << "dlock_node_requests_total{" << node << ",result=\"ok\"} " << n.ok << "\n";
    out << "dlock_node_requests_total{" << node << ",result=\"error\"} " << n.errors << "\n";
    out << "dlock_node_requests_total{" << node << ",result=\"not_waited_for\"} "
        << n.not_waited_for << "\n";
  }
  header(out, "dlock_node_request_seconds", "histogram",
         "Latency of each request to each node that was waited for (result ok or error).");
  for (const auto& [address, n] : nodes) {
    n.latency.render(out, "dlock_node_request_seconds", "node=\"" + label_value(address) + "\"");
  }
  header(out, "dlock_node_quarantines_total", "counter",
         "Times a node was kept out of quorums after a restart (restarted-node protection).");
  render_per_node(out, nodes, "dlock_node_quarantines_total",
                  [](const NodeStats& n) { return n.quarantines; });
  header(out, "dlock_node_evicted_keys", "gauge",
         "The node's evicted_keys (INFO) at its last greeting: growth means it drops keys.");
  render_per_node(out, nodes, "dlock_node_evicted_keys",
                  [](const NodeStats& n) { return n.evicted_keys; });
  header(out, "dlock_node_never_votes", "gauge",
         "1 if the node never votes (a replica, or a maxmemory-policy that may evict locks).");
  render_per_node(out, nodes, "dlock_node_never_votes",
                  [](const NodeStats& n) { return n.never_votes ? 1 : 0; });
}

}  // namespace

struct PrometheusObserver::State : LockStats {
  mutable std::mutex mu;
  NodeTable nodes;

  NodeStats& node(std::string_view address) {
    auto it = nodes.find(address);
    if (it == nodes.end()) it = nodes.emplace(std::string(address), NodeStats{}).first;
    return it->second;
  }
};

PrometheusObserver::PrometheusObserver() : state_(std::make_unique<State>()) {}
PrometheusObserver::~PrometheusObserver() = default;

void PrometheusObserver::acquired(const AcquireEvent& e) noexcept {
  std::lock_guard lock(state_->mu);
  ++state_->acquisitions[static_cast<std::size_t>(e.outcome)];
  state_->attempts += e.attempts;
  state_->contended_attempts += e.contended;
  if (e.outcome == AcquireOutcome::acquired) state_->wait.observe(seconds(e.waited));
}

void PrometheusObserver::released(const ReleaseEvent& e) noexcept {
  std::lock_guard lock(state_->mu);
  ++(e.ok ? state_->releases_ok : state_->releases_lost);
  state_->hold.observe(seconds(e.held));
}

void PrometheusObserver::renewed(const RenewEvent& e) noexcept {
  std::lock_guard lock(state_->mu);
  ++state_->renewals[e.by_watchdog ? 1 : 0][e.ok ? 1 : 0];
}

void PrometheusObserver::lost(const LostEvent&) noexcept {
  std::lock_guard lock(state_->mu);
  ++state_->lost;
}

void PrometheusObserver::node_request(const NodeRequestEvent& e) noexcept {
  std::lock_guard lock(state_->mu);
  NodeStats& n = state_->node(e.address);
  switch (e.result) {
    case NodeResult::ok:
      ++n.ok;
      break;
    case NodeResult::error:
      ++n.errors;
      break;
    case NodeResult::not_waited_for:
      // Its latency is only a lower bound: kept out of the histogram.
      ++n.not_waited_for;
      return;
  }
  n.latency.observe(seconds(e.latency));
}

void PrometheusObserver::quarantined(const QuarantineEvent& e) noexcept {
  std::lock_guard lock(state_->mu);
  ++state_->node(e.address).quarantines;
}

void PrometheusObserver::node_health(const NodeHealthEvent& e) noexcept {
  std::lock_guard lock(state_->mu);
  NodeStats& n = state_->node(e.address);
  n.evicted_keys = e.evicted_keys;
  n.never_votes = !e.never_votes.empty();
}

std::string PrometheusObserver::text() const {
  std::ostringstream out;
  out.imbue(std::locale::classic());  // no digit grouping, whatever the global locale
  std::lock_guard lock(state_->mu);
  render_locks(out, *state_);
  render_nodes(out, state_->nodes);
  return out.str();
}

}  // namespace dlock
