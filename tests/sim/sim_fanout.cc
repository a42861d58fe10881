// SPDX-License-Identifier: MIT
#include "sim/sim_fanout.h"

#include <algorithm>
#include <chrono>

#include "sim/sim_clock.h"

namespace dlock::sim {

SimFanout::SimFanout(SimCluster& cluster, std::size_t client)
    : cluster_(cluster),
      client_(client),
      epochs_(cluster.size(), 0),
      connected_(cluster.size(), false) {
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    windows_.push_back(std::make_unique<node::RecordWindow>());
    net::NodeAddress a;
    a.host = "sim-node-" + std::to_string(i);
    a.port = static_cast<std::uint16_t>(7000 + i);
    addresses_.push_back(a);
  }
  cluster.attach(*this);
}

void SimFanout::drop(std::size_t i, bool reconnect_now) {
  connected_[i] = false;
  if (reconnect_now) use(i);
}

void SimFanout::use(std::size_t i) {
  if (connected_[i]) return;
  connected_[i] = true;
  ++epochs_[i];
}

std::vector<std::size_t> SimFanout::arrival(const std::vector<Fault>& faults) {
  std::vector<std::size_t> order(size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (std::size_t i = order.size(); i > 1 && !cluster_.options().in_order; --i) {
    std::swap(order[i - 1], order[cluster_.rng().below(i)]);
  }
  // A slow reply comes after the others; a timeout is known only at the deadline, after every
  // reply that came.
  std::stable_partition(order.begin(), order.end(),
                        [&](std::size_t i) { return faults[i] != Fault::slow_reply; });
  std::stable_partition(order.begin(), order.end(), [&](std::size_t i) {
    return faults[i] != Fault::reply_lost && faults[i] != Fault::late;
  });
  return order;
}

std::optional<std::vector<node::Call>> SimFanout::record_known(std::size_t i, Fault fault,
                                                               const std::vector<node::Call>& calls,
                                                               net::Clock::time_point sent) const {
  if (calls.size() != 1) return std::nullopt;
  const node::Call& call = calls.front();
  // As ServerNode::send_observed: only on the connection that is up now (bound to its epoch; a
  // fault that never sends it fails it either way). The sim sends at once: its node deadline
  // is the sending.
  if (!call.script || call.record_known_arg == std::string_view::npos || !call.record_ttl ||
      !connected_[i] || fault == Fault::unsent || fault == Fault::restart_before ||
      !windows_[i]->covers(call.record_ttl->count(), epochs_[i], sent)) {
    return std::nullopt;
  }
  // The form SimCluster::execute runs when the call goes alone (a batch item has no such
  // argument: a batch call holding others runs it as built).
  std::vector<node::Call> known = calls;
  known.front().args.replace(call.record_known_arg, call.record_known_value);
  return known;
}

void SimFanout::learn(std::size_t i, const std::vector<node::Call>& calls,
                      const std::vector<Result<resp::Reply>>& replies,
                      net::Clock::time_point sent) {
  if (calls.size() != 1 || replies.size() != 1 || !replies.front()) return;
  const node::Call& call = calls.front();
  if (!call.script || call.record_known_arg == std::string_view::npos || !call.record_ttl ||
      call.granted == nullptr || !call.granted(*replies.front())) {
    return;
  }
  const auto ttl = call.record_ttl->count();
  const bool too_long = cluster_.options().mutation == Mutation::record_window_too_long;
  windows_[i]->granted(ttl, call.record_drift, epochs_[i],
                       too_long ? sent + node::RecordWindow::reach(ttl, call.record_drift) : sent);
}

std::vector<Result<resp::Reply>> SimFanout::deliver(std::size_t i, Fault fault,
                                                    const std::vector<node::Call>& calls) {
  const net::Clock::time_point sent = net::Clock::now();
  const std::optional<std::vector<node::Call>> known = record_known(i, fault, calls, sent);
  if (cluster_.options().before_deliver)
    cluster_.options().before_deliver(client_, i, calls.front());
  const auto fail = [&](errc code, const char* why) {
    return std::vector<Result<resp::Reply>>(calls.size(), Error(code, why));
  };
  bool sent_alone = false;  // with what the window knows (else as built: it checks the record)
  const auto execute = [&](bool answered = true) {
    std::vector<Result<resp::Reply>> replies;
    for (auto& r :
         cluster_.execute(client_, i, calls, known ? &*known : nullptr, &sent_alone, answered)) {
      replies.emplace_back(std::move(r));
    }
    return replies;
  };
  switch (fault) {
    case Fault::none:
    case Fault::slow_reply: {  // its wait: round()
      use(i);
      auto replies = execute();
      if (!sent_alone) learn(i, calls, replies, sent);
      return replies;
    }
    case Fault::reply_lost:
      use(i);
      (void)execute(false);
      // The late reply is dropped on a connection that lives on, or the client gives up on it.
      if (cluster_.rng().chance(0.5)) drop(i, cluster_.rng().chance(0.5));
      return fail(errc::timeout, "no reply within the deadline (sim: reply lost)");
    case Fault::unsent:
      if (connected_[i]) drop(i, cluster_.rng().chance(0.5));
      return fail(errc::io_error, "connection failed (sim: not sent)");
    case Fault::late:
      use(i);
      if (known) {
        // Sent alone with what the window knows, it runs late alone (never in a batch call).
        std::vector<node::Call> alone = *known;
        alone.front().batch = {};
        ++cluster_.stats().record_known_sent;
        cluster_.defer(client_, i, alone, alone.front().native.encode != nullptr);
      } else {
        cluster_.defer(client_, i, calls);
      }
      drop(i, cluster_.rng().chance(0.5));
      return fail(errc::timeout, "no reply within the deadline (sim: runs late)");
    case Fault::error_reply: {
      use(i);
      resp::Reply busy;
      busy.type = resp::Reply::Type::error;
      busy.str = "BUSY Redis is busy running a script (sim)";
      return std::vector<Result<resp::Reply>>(calls.size(), busy);
    }
    case Fault::restart_before:
      cluster_.restart(i, "before a call of client " + std::to_string(client_));
      return fail(errc::io_error, "connection closed by the server (sim: restart)");
    case Fault::restart_after:
      use(i);
      (void)execute(false);
      cluster_.restart(i, "after a call of client " + std::to_string(client_));
      return fail(errc::io_error, "connection closed by the server (sim: restart)");
  }
  return fail(errc::io_error, "?");
}

void SimFanout::start(std::vector<node::Call> calls, node::Enough enough, Done done) {
  done(round(calls, enough));
}

std::vector<node::Outcomes> SimFanout::round(const std::vector<node::Call>& calls,
                                             const node::Enough& enough) {
  if (calls.empty()) return {};
  cluster_.note(calls);
  for (const auto& c : calls) {
    cluster_.trace().line("client " + std::to_string(client_) + ": " + describe(c));
  }
  std::vector<Fault> faults(size());
  cluster_.begin_round();
  for (std::size_t i = 0; i < size(); ++i)
    faults[i] = cluster_.pick_fault(client_, i, calls.front());
  if (calls.front().script && calls.front().script->name == "acquire") {
    cluster_.note_acquire_round(faults);
  }

  std::vector<node::Outcomes> outcomes(calls.size(), node::Outcomes(size(), Error()));
  std::size_t yes = 0;
  bool reached = false;
  std::string summary;
  Clock::duration slow{};
  for (const std::size_t i : arrival(faults)) {
    // Executed at once (a node's execution is not what is slow), waited for at the end: a
    // sleep here would delay the next node's execution too.
    if (faults[i] == Fault::slow_reply && !reached) {
      slow =
          std::max<Clock::duration>(slow, std::chrono::milliseconds(cluster_.rng().between(2, 30)));
    }
    std::vector<Result<resp::Reply>> got = deliver(i, faults[i], calls);
    summary += " | n" + std::to_string(i) + " " + fault_name(faults[i]);
    if (reached) {
      // Not waited for: the node did its part, the client never looks.
      for (auto& o : got) o = Error(errc::cancelled, "not waited for (sim)");
      summary += " cancelled";
    } else if (got[0]) {
      summary += " " + describe(*got[0]);
      if (enough.needed > 0 && calls.size() == 1 && enough.counts && enough.counts(i, *got[0]) &&
          enough.reached(++yes)) {
        reached = true;
      }
    }
    for (std::size_t c = 0; c < calls.size(); ++c) outcomes[c][i] = std::move(got[c]);
  }
  cluster_.trace().line("  ->" + summary);
  if (slow > Clock::duration::zero()) {
    cluster_.trace().line(
        "  (the slowest reply came " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(slow).count()) +
        " ms late)");
    sleep_for(slow);
  }
  return outcomes;
}

}  // namespace dlock::sim
