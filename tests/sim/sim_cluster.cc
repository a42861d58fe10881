// SPDX-License-Identifier: MIT
#include "sim/sim_cluster.h"

#include <algorithm>

#include "node/batch_call.h"
#include "resp/reader.h"
#include "sim/sim_fanout.h"

namespace dlock::sim {

std::string Rng::hex(std::size_t chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < chars; ++i) out += kHex[below(16)];
  return out;
}

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::none:
      return "ok";
    case Fault::reply_lost:
      return "reply-lost";
    case Fault::unsent:
      return "unsent";
    case Fault::late:
      return "late";
    case Fault::error_reply:
      return "error-reply";
    case Fault::slow_reply:
      return "slow-reply";
    case Fault::restart_before:
      return "restart-before";
    case Fault::restart_after:
      return "restart-after";
  }
  return "?";
}

SimCluster::SimCluster(const ClusterOptions& options, Rng& rng, Trace& trace,
                       Clock::time_point origin)
    : options_(options), rng_(rng), trace_(trace), restarted_at_(options.nodes) {
  for (std::size_t i = 0; i < options.nodes; ++i) {
    // Within the drift the library allows for (drift_factor 0.01 between two clocks): +-0.5%.
    const double rate = rng_.uniform(0.995, 1.005);
    const std::int64_t base = 1'700'000'000'000 + rng_.between(0, 1'000'000'000);
    nodes_.push_back(
        std::make_unique<SimNode>(NodeClock(origin, base, rate), rng_.hex(40), options.mutation));
    trace_.line("node " + std::to_string(i) + ": run_id " + nodes_.back()->run_id().substr(0, 8) +
                " clock rate " + std::to_string(rate));
  }
  if (options.evictions && options.nodes >= 3 && rng_.chance(0.25)) {
    nodes_[0]->set_evicting();
    trace_.line("node 0: maxmemory-policy volatile-lru");
  }
}

void SimCluster::tick() {
  for (std::size_t i = 0; i < size(); ++i) {
    if (options_.failovers && rng_.chance(0.5)) nodes_[i]->replicate();
    if (nodes_[i]->evicting() && rng_.chance(0.3)) {
      const std::string key = nodes_[i]->evict(static_cast<std::size_t>(rng_.below(1000)));
      if (!key.empty()) trace_.line("node " + std::to_string(i) + " evicts " + key);
    }
  }
}

Fault SimCluster::pick_fault(std::size_t client, std::size_t i, const node::Call& first) {
  if (options_.plan) {
    if (const auto forced = options_.plan(client, i, first)) {
      ++stats_.faults[fault_name(*forced)];
      return *forced;
    }
  }
  Fault f = Fault::none;
  if (rng_.chance(options_.fault_rate)) {
    const double kind = rng_.uniform(0.0, 1.0);
    const double rest = (1.0 - options_.restart_share) / 5;
    if (kind < rest) {
      f = Fault::reply_lost;
    } else if (kind < 2 * rest) {
      f = Fault::unsent;
    } else if (kind < 3 * rest) {
      f = Fault::late;
    } else if (kind < 4 * rest) {
      f = Fault::error_reply;
    } else if (kind < 5 * rest) {
      f = Fault::slow_reply;
    } else {
      f = rng_.chance(0.5) ? Fault::restart_before : Fault::restart_after;
      // A restart the profile does not allow now is a lost request instead.
      if (may_restart(i)) {
        reserved_[i] = true;
      } else {
        f = Fault::unsent;
      }
    }
  }
  ++stats_.faults[fault_name(f)];
  return f;
}

bool SimCluster::may_restart(std::size_t i) const {
  if (options_.profile == Profile::majority) return true;
  const std::size_t minority = size() - (size() / 2 + 1);
  const auto now = Clock::now();
  std::size_t recent = 1;  // node i itself
  for (std::size_t j = 0; j < size(); ++j) {
    const bool restarted = restarted_at_[j] && now - *restarted_at_[j] < options_.restart_window;
    if (j != i && (restarted || (j < reserved_.size() && reserved_[j]))) ++recent;
  }
  return recent <= minority;
}

std::size_t SimCluster::failed_since(Clock::time_point t) const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < size(); ++i) {
    const bool restarted = restarted_at_[i] && *restarted_at_[i] >= t;
    const bool silent = i < acquire_faults_.size() && acquire_faults_[i] != Fault::none;
    n += restarted || silent ? 1 : 0;
  }
  return n;
}

std::size_t SimCluster::restarted_since(Clock::time_point t) const {
  return static_cast<std::size_t>(std::count_if(restarted_at_.begin(), restarted_at_.end(),
                                                [t](const auto& at) { return at && *at >= t; }));
}

void SimCluster::restart(std::size_t i, const std::string& why) {
  // A failover loses what the replica had not yet copied, as a restart loses everything: both
  // count against the profile's bound alike.
  replace(i, options_.failovers && rng_.chance(0.5), why);
}

void SimCluster::fail_over(std::size_t i, const std::string& why) {
  replace(i, true, why);
}

void SimCluster::replace(std::size_t i, bool failover, const std::string& why) {
  if (failover) {
    nodes_[i]->fail_over(rng_.hex(40), rng_.hex(40));
    ++stats_.failovers;
  } else {
    nodes_[i]->restart(rng_.hex(40));
  }
  restarted_at_[i] = Clock::now();
  ++stats_.restarts;
  trace_.line("node " + std::to_string(i) + (failover ? " fails over (" : " restarts (") + why +
              "): run_id " + nodes_[i]->run_id().substr(0, 8));
  // Requests buffered for the old process die with it.
  std::erase_if(deferred_, [i](const Deferred& d) { return d.node == i; });
  for (SimFanout* f : fanouts_) f->drop(i, rng_.chance(0.5));
}

void SimCluster::defer(std::size_t client, std::size_t i, const std::vector<node::Call>& calls,
                       bool native) {
  deferred_.push_back(Deferred{client, i, nodes_[i]->generation(),
                               step_ + 1 + static_cast<std::size_t>(rng_.below(3)), Clock::now(),
                               calls, native});
}

resp::Reply SimCluster::run_native(std::size_t i, const node::Call& call, bool answered) {
  ++stats_.native_sent;
  SimNode& node = *nodes_[i];
  const std::uint64_t generation = node.generation();
  std::string bytes;
  call.native.encode(call, bytes);
  resp::Reader reader;
  if (!reader.feed(bytes)) throw std::logic_error("sim: a native form that is no RESP");
  resp::Reply replies;
  replies.type = resp::Reply::Type::array;
  const bool set_only = !answered && rng_.chance(0.3);
  std::size_t counted_at = 0;  // the node's grants before the INCR: where a grant's token is
  for (std::uint32_t k = 0; k < call.native.replies; ++k) {
    if (k > 0 && set_only) {
      ++stats_.native_set_only;
      trace_.line("  native on n" + std::to_string(i) + ": the connection broke after the SET");
      return replies;
    }
    if (k > 0) interleave(i);
    std::optional<resp::Reply> command = reader.next();
    if (!command) throw std::logic_error("sim: a native form with fewer commands than replies");
    if (!command->elements.empty() && command->elements[0].str == "INCR") {
      counted_at = node.grants_count();
    }
    replies.elements.push_back(node.command(*command));
  }
  if (node.generation() != generation) throw std::logic_error("sim: a restart inside a write");
  trace_.line("  native on n" + std::to_string(i) + ": " + describe(replies));
  const node::NativeReading reading = call.native.read(call, replies);
  if (reading == node::NativeReading::answered) {
    ++stats_.native_granted;
    node.native_granted(replies.integer, counted_at);
    return replies;
  }
  if (!answered) {
    // ServerNode::reissue never runs for a request nobody waits for any more.
    ++stats_.native_unanswered;
    return replies;
  }
  // As ServerNode::reissue, a round trip later: acquire.lua on the same connection, as the call
  // was sent alone, or told what the commands wrote.
  interleave(i);
  ++stats_.native_to_script;
  if (reading == node::NativeReading::script_after) {
    ++stats_.native_after_write;
    return node.execute(call.native.after(call));
  }
  return node.execute(call);
}

void SimCluster::interleave(std::size_t i) {
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    if (it->node != i || it->generation != nodes_[i]->generation() || !rng_.chance(0.5)) {
      ++it;
      continue;
    }
    const Deferred d = std::move(*it);
    it = deferred_.erase(it);
    ++stats_.native_interleaved;
    std::vector<resp::Reply> replies;
    if (d.native) {
      replies.push_back(run_native(d.node, d.calls.front(), false));
    } else {
      replies = execute(d.client, d.node, d.calls);
    }
    for (std::size_t k = 0; k < d.calls.size(); ++k) {
      ran_late(d, d.calls[k], replies[k], "runs (between a native form's commands)");
    }
    // Run calls may have added or removed entries: start over (each run removes one).
    it = deferred_.begin();
  }
}

void SimCluster::run_due(std::size_t step) {
  std::vector<Deferred> due;
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    if (it->due <= step) {
      due.push_back(std::move(*it));
      it = deferred_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& d : due) {
    SimNode& n = *nodes_[d.node];
    if (n.generation() != d.generation) continue;
    // A late round runs as it was sent: with group commit, its calls in a batch call; a
    // native form as its commands.
    const std::vector<resp::Reply> replies =
        d.native ? std::vector<resp::Reply>{run_native(d.node, d.calls.front(), false)}
                 : execute(d.client, d.node, d.calls);
    for (std::size_t k = 0; k < d.calls.size(); ++k) ran_late(d, d.calls[k], replies[k], "runs");
  }
}

void SimCluster::ran_late(const Deferred& d, const node::Call& call, const resp::Reply& r,
                          const char* how) {
  ++stats_.late_runs;
  trace_.line("late: node " + std::to_string(d.node) + " " + how + " client " +
              std::to_string(d.client) + "'s " + describe(call) + " sent @" + trace_.at(d.sent) +
              "ms -> " + describe(r));
  const auto delay = Clock::now() - d.sent;
  for (const auto& name : names_of(call)) {
    late_delay_[name] = std::max(late_delay_[name], delay);
  }
}

namespace {

// What the coalescer's batch calls are split by (node/coalescer.cc, Kind): the batch script
// and the replica guard.
bool same_kind(const node::Call& a, const node::Call& b) {
  return a.batch.script == b.batch.script && a.min_replicas == b.min_replicas &&
         a.replica_timeout == b.replica_timeout;
}

}  // namespace

std::size_t SimCluster::records_skipped() const {
  std::size_t n = 0;
  for (const auto& node : nodes_) n += node->records_skipped();
  return n;
}

std::vector<resp::Reply> SimCluster::execute(std::size_t client, std::size_t i,
                                             const std::vector<node::Call>& calls,
                                             const std::vector<node::Call>* alone, bool* sent_alone,
                                             bool answered) {
  std::vector<resp::Reply> replies(calls.size());
  std::vector<bool> done(calls.size(), false);
  if (sent_alone) *sent_alone = false;
  const auto run_alone = [&] {
    // As ServerNode: a call with a native form goes as its commands where its record window
    // covers it (the simulated servers refuse writes as replicas by themselves).
    const node::Call& call = alone->front();
    replies[0] =
        call.native.encode != nullptr ? run_native(i, call, answered) : nodes_[i]->execute(call);
    ++stats_.record_known_sent;
    if (sent_alone) *sent_alone = true;
    return replies;
  };
  if (alone && (!options_.batching || calls.front().batch.script == nullptr)) return run_alone();
  for (std::size_t c = 0; c < calls.size(); ++c) {
    if (done[c]) continue;
    if (!options_.batching || calls[c].batch.script == nullptr) {
      replies[c] = nodes_[i]->execute(calls[c]);
      continue;
    }
    // The round's calls of this kind, in one batch call where the first of them is.
    std::vector<Item> items;
    for (std::size_t k = c; k < calls.size(); ++k) {
      if (done[k] || calls[k].batch.script == nullptr || !same_kind(calls[k], calls[c])) continue;
      done[k] = true;
      items.push_back(Item{&calls[k], &replies[k], nullptr});
    }
    // Late calls of this kind, stuck on another connection to this node: they run late anyway,
    // and running now inside this batch is one time at which they may run.
    const std::vector<Deferred> late = take_late(i, calls[c]);
    // A batch of the lone call only: the client sends it alone, with what its window knows.
    if (alone && items.size() == 1 && late.empty()) return run_alone();
    for (const Deferred& d : late) {
      for (const auto& call : d.calls) items.push_back(Item{&call, nullptr, &d});
    }
    run_batch(client, i, std::move(items));
  }
  return replies;
}

std::vector<SimCluster::Deferred> SimCluster::take_late(std::size_t i, const node::Call& kind) {
  std::vector<Deferred> taken;
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    const bool fits = it->node == i && it->generation == nodes_[i]->generation() &&
                      std::all_of(it->calls.begin(), it->calls.end(), [&](const node::Call& c) {
                        return c.batch.script != nullptr && same_kind(c, kind);
                      });
    if (fits && rng_.chance(options_.late_joins)) {
      taken.push_back(std::move(*it));
      it = deferred_.erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

void SimCluster::run_batch(std::size_t client, std::size_t i, std::vector<Item> items) {
  SimNode& node = *nodes_[i];
  const auto answer = [&](const Item& item, resp::Reply r) {
    if (item.late) ran_late(*item.late, *item.call, r, "runs (in a batch call)");
    if (item.reply) *item.reply = std::move(r);
  };
  // The coalescer sends a batch of one as the call itself; the batch script is legal too, and
  // taken half the time, so that its model runs often.
  if (items.size() == 1 && !rng_.chance(options_.batch_of_one)) {
    return answer(items[0], node.execute(*items[0].call));
  }
  for (std::size_t k = items.size(); k > 1; --k) std::swap(items[k - 1], items[rng_.below(k)]);
  std::vector<const node::Call*> calls;
  for (const Item& item : items) calls.push_back(item.call);
  const node::Call batch = node::batch_call(calls);
  const resp::Reply reply = node::checked_batch_reply(node.execute(batch), items.size());
  ++stats_.batch_calls;
  stats_.batch_items += items.size();
  for (const Item& item : items) stats_.batch_late_items += item.late ? 1 : 0;
  trace_.line("node " + std::to_string(i) + " runs a batch call of " +
              std::to_string(items.size()) + ": " + describe(batch) + " -> " + describe(reply));
  // An error reply (the replica guard's is not modelled) sends every item alone, as the
  // coalescer does: it may be one item's.
  const auto left_alone = [&](std::size_t k) {
    return reply.is_error() || reply.elements[k].is_nil();
  };
  for (std::size_t k = 0; k < items.size(); ++k) {
    if (!left_alone(k)) answer(items[k], reply.elements[k]);
  }
  // The calls the batch left alone are sent alone after its reply, as the coalescer does (a
  // restart meanwhile: on a new connection, to the new process).
  for (std::size_t k = 0; k < items.size(); ++k) {
    if (!left_alone(k)) continue;
    const std::uint64_t generation = node.generation();
    if (options_.before_resend) options_.before_resend(client, i, *items[k].call);
    if (node.generation() != generation) {
      // A late call's connection died with the old process; this round's call goes again on a
      // new connection (the node's epoch changes) to the new one.
      if (items[k].late) continue;
      if (client < fanouts_.size()) fanouts_[client]->drop(i, true);
    }
    resp::Reply alone = node.execute(*items[k].call);
    ++stats_.batch_left_alone;
    trace_.line("node " + std::to_string(i) + " runs the call left alone: " +
                describe(*items[k].call) + " -> " + describe(alone));
    answer(items[k], std::move(alone));
  }
}

Clock::duration SimCluster::late_delay(const std::string& name) const {
  const auto it = late_delay_.find(name);
  return it == late_delay_.end() ? Clock::duration::zero() : it->second;
}

void SimCluster::note(const std::vector<node::Call>& calls) {
  for (const auto& call : calls) {
    if (!call.script) continue;
    if (call.script->name == "acquire" && call.keys.size() > 0 && call.args.size() > 1) {
      touched_.emplace_back(call.keys[0], call.args[1]);
    } else if (call.script->name == "renew") {
      // Four arguments per key: owner, hold id, ttl, kind ('p': a permit record, no hold).
      for (std::size_t k = 0; k < call.keys.size() && 4 * k + 3 < call.args.size(); ++k) {
        if (call.args[4 * k + 3] == "p") continue;
        touched_.emplace_back(call.keys[k], call.args[4 * k + 1]);
      }
    }
  }
}

std::vector<std::pair<std::string, std::string>> SimCluster::take_touched() {
  return std::exchange(touched_, {});
}

std::vector<std::string> names_of(const node::Call& call) {
  if (!call.script || call.keys.empty()) return {};
  const std::string_view script = call.script->name;
  if (script == "renew") return call.keys.to_vector();
  // A semaphore slot's permit record rides along: acquire's KEYS[7], release's KEYS[5].
  if (script == "acquire" || script == "release") {
    const std::size_t record = script == "acquire" ? 6 : 4;
    if (call.keys.size() > record) {
      return {std::string(call.keys[0]), std::string(call.keys[record])};
    }
    return {std::string(call.keys[0])};
  }
  if (script == "fence_raise") {
    // dlock:fence:{NAME}, or dlock:fence:{TAG}:NAME for a name with braces (lock/keys.h)
    const std::string k(call.keys[0]);
    const auto open = k.find('{');
    if (open == std::string::npos) return {};
    if (k.back() == '}') return {k.substr(open + 1, k.size() - open - 2)};
    const auto tag_end = k.find("}:", open);
    if (tag_end != std::string::npos) return {k.substr(tag_end + 2)};
  }
  return {};
}

}  // namespace dlock::sim
