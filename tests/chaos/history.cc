// SPDX-License-Identifier: MIT
#include "history.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <tuple>

namespace dlock::chaos {

std::string starved_target(int worker_id) {
  return "worker " + std::to_string(worker_id);
}

namespace {

constexpr std::int64_t kMsNs = 1'000'000;

using nlohmann::json;

std::string describe(const Event& e) {
  return "{holder " + e.holder + ", token " + std::to_string(e.token) + ", acquired " +
         std::to_string(e.acquire_ns) + ", valid until " + std::to_string(e.valid_until_ns) +
         ", released " + std::to_string(e.release_ns) + ", " + e.outcome +
         (e.paused ? ", paused" : "") + (e.skewed ? ", skewed clock" : "") +
         (e.shared ? ", reader" : "") +
         (e.permits > 0 ? ", permit " + e.slot + " of " + std::to_string(e.permits) : "") +
         (e.detail.empty() ? "" : ", " + e.detail) + "}";
}

// The holds the sampler saw on e's name while e waited, each with the worker whose events
// name its owner: what kept a waiter out when no fault explains it.
std::string holders_during(const History& h, const Event& e) {
  struct Seen {
    std::size_t samples = 0;
    std::set<std::size_t> nodes;
    std::int64_t min_ttl = INT64_MAX;
    std::int64_t max_ttl = INT64_MIN;
  };
  std::map<std::tuple<bool, std::string, std::string>, Seen> seen;  // (shared, owner, hold)
  std::size_t samples = 0;
  std::size_t free = 0;  // no hold on any node that answered (one did at least)
  for (const auto& s : h.samples) {
    if (s.name != e.name || s.at_ns < e.wait_ns || s.at_ns > e.release_ns) continue;
    ++samples;
    if (s.holds.empty() && s.answered > 0) ++free;
    std::set<std::tuple<bool, std::string, std::string>> in_this;
    for (const auto& hold : s.holds) {
      auto key = std::make_tuple(hold.shared, hold.owner, hold.hold);
      auto& k = seen[key];
      if (in_this.insert(std::move(key)).second) ++k.samples;
      k.nodes.insert(hold.node + 1);
      k.min_ttl = std::min(k.min_ttl, hold.ttl_ms);
      k.max_ttl = std::max(k.max_ttl, hold.ttl_ms);
    }
  }
  if (samples == 0) return "";
  std::map<std::string, std::string> worker_of;  // owner -> holder
  for (const auto& o : h.events) {
    if (!o.owner.empty()) worker_of.emplace(o.owner, o.holder);
  }
  std::string out = "; sampled in its wait: free on every node that answered in " +
                    std::to_string(free) + " of " + std::to_string(samples) + " samples; holds:";
  // The most often seen first.
  std::vector<const std::pair<const std::tuple<bool, std::string, std::string>, Seen>*> order;
  for (const auto& entry : seen) order.push_back(&entry);
  std::stable_sort(order.begin(), order.end(),
                   [](auto* a, auto* b) { return a->second.samples > b->second.samples; });
  constexpr std::size_t kListed = 5;
  for (std::size_t i = 0; i < std::min(order.size(), kListed); ++i) {
    const auto& [key, k] = *order[i];
    const auto& [shared, owner, hold] = key;
    const auto w = worker_of.find(owner);
    std::string nodes;
    for (auto n : k.nodes) nodes += (nodes.empty() ? "" : ",") + std::to_string(n);
    out += " [" + (w == worker_of.end() ? std::string("no worker's") : w->second) +
           (shared ? " reader" : "") + " owner " + owner + " hold " + hold + ", in " +
           std::to_string(k.samples) + " on nodes " + nodes + ", ttl " + std::to_string(k.min_ttl) +
           ".." + std::to_string(k.max_ttl) + " ms]";
  }
  if (order.empty()) out += " none";
  if (order.size() > kListed) out += " and " + std::to_string(order.size() - kListed) + " more";
  return out;
}

// A fault the run injected (not a worker's starvation: starvation_watch.h) overlapping
// [from, to].
bool in_fault(const History& h, std::int64_t from, std::int64_t to) {
  return std::any_of(h.faults.begin(), h.faults.end(), [&](const Fault& f) {
    return f.kind != kStarved && f.start_ns <= to && from <= f.end_ns;
  });
}

// The worker id in a holder's name: "7" in worker-7, reader-7, permit-7 and async-7.2.
std::string worker_id(const std::string& holder) {
  const auto dash = holder.rfind('-');
  if (dash == std::string::npos) return "";
  return holder.substr(dash + 1, holder.find('.', dash) - dash - 1);
}

// How long within [from, to] worker `id`'s process was starved of CPU (the union of its
// periods): its own starvation only, not another worker's (two async workers of 8 in flight
// each are starved by their own contention in most windows of a CI run).
std::int64_t starved_ns(const History& h, const std::string& id, std::int64_t from,
                        std::int64_t to) {
  const std::string target = "worker " + id;
  std::vector<std::pair<std::int64_t, std::int64_t>> spans;
  for (const auto& f : h.faults) {
    const auto start = std::max(from, f.start_ns);
    const auto end = std::min(to, f.end_ns);
    if (f.kind == kStarved && f.target == target && start < end) spans.emplace_back(start, end);
  }
  std::sort(spans.begin(), spans.end());
  std::int64_t sum = 0;
  std::int64_t covered = from;  // the union so far ends here
  for (const auto& [start, end] : spans) {
    if (end <= covered) continue;
    sum += end - std::max(start, covered);
    covered = end;
  }
  return sum;
}

void check_acceptance_order(const std::vector<const Event*>& held, Report& r) {
  // (b) The resource's acceptances: tokens never go down in the order they were accepted.
  // A write was accepted somewhere between when it was sent (write_ns) and its answer
  // (release_ns), so that order is known only where those spans do not overlap: a write sent
  // after another's answer came was accepted after it. Ordering by answers alone flagged a
  // late write accepted before a newer holder's read whose answer came after the newer
  // holder's (seed 9901, the skewed worker under load): the resource had accepted them in
  // token order. Every write is compared with every write answered before it was sent.
  std::vector<const Event*> answered;  // accepted, by when the answer came
  for (const Event* e : held) {
    if (e->outcome == "accepted") answered.push_back(e);
  }
  std::vector<const Event*> sent = answered;  // the same, by when the write was sent
  const auto sent_at = [](const Event* e) {
    return e->write_ns != 0 ? e->write_ns : e->release_ns;
  };
  std::sort(answered.begin(), answered.end(),
            [](const Event* a, const Event* b) { return a->release_ns < b->release_ns; });
  std::sort(sent.begin(), sent.end(),
            [&](const Event* a, const Event* b) { return sent_at(a) < sent_at(b); });
  const Event* highest = nullptr;  // the largest token among the writes answered so far
  std::size_t next = 0;
  for (const Event* e : sent) {
    for (; next < answered.size() && answered[next]->release_ns < sent_at(e); ++next) {
      if (highest == nullptr || answered[next]->token > highest->token) highest = answered[next];
    }
    if (highest != nullptr && e->token < highest->token) {
      r.violations.push_back("resource accepted token " + std::to_string(e->token) + " after " +
                             std::to_string(highest->token) + ": " + describe(*highest) + " then " +
                             describe(*e));
    }
  }
}

// (b) Each resource's counter: between its accepted writes and those plus the writes whose
// answer never came. Writes to a name in `counters` count there; all others count for
// `counter`.
void check_counters(const History& history, Report& r) {
  struct Writes {
    std::int64_t accepted = 0;
    std::int64_t unknown = 0;
  };
  std::map<std::string, Writes> writes;  // by resource ("" for `counter`'s)
  for (const auto& e : history.events) {
    Writes& w = writes[history.counters.contains(e.name) ? e.name : ""];
    if (e.outcome == "accepted") ++w.accepted;
    if (e.outcome == "error" && e.write_ns > 0) ++w.unknown;
  }
  const auto check_counter = [&](const std::string& name, std::int64_t counter) {
    const Writes w = writes[name];
    if (counter < 0 || (counter >= w.accepted && counter <= w.accepted + w.unknown)) return;
    r.violations.push_back("resource counter" + (name.empty() ? "" : " of '" + name + "'") +
                           " is " + std::to_string(counter) + " but " + std::to_string(w.accepted) +
                           " writes were accepted (and " + std::to_string(w.unknown) +
                           " got no answer)");
  };
  check_counter("", history.counter);
  for (const auto& [name, counter] : history.counters) check_counter(name, counter);
}

}  // namespace

std::string to_line(const Event& e) {
  return json{{"event",
               {{"name", e.name},
                {"holder", e.holder},
                {"token", e.token},
                {"wait_ns", e.wait_ns},
                {"acquire_ns", e.acquire_ns},
                {"read_ns", e.read_ns},
                {"valid_until_ns", e.valid_until_ns},
                {"release_ns", e.release_ns},
                {"write_ns", e.write_ns},
                {"outcome", e.outcome},
                {"paused", e.paused},
                {"skewed", e.skewed},
                {"shared", e.shared},
                {"permits", e.permits},
                {"slot", e.slot},
                {"detail", e.detail},
                {"owner", e.owner}}}}
      .dump();
}

std::string to_line(const Sample& s) {
  json holds = json::array();
  for (const auto& h : s.holds) {
    holds.push_back({{"node", h.node},
                     {"shared", h.shared},
                     {"owner", h.owner},
                     {"hold", h.hold},
                     {"ttl_ms", h.ttl_ms}});
  }
  return json{{"sample",
               {{"at_ns", s.at_ns}, {"name", s.name}, {"holds", holds}, {"answered", s.answered}}}}
      .dump();
}

std::string to_line(const Fault& f) {
  return json{
      {"fault",
       {{"kind", f.kind}, {"target", f.target}, {"start_ns", f.start_ns}, {"end_ns", f.end_ns}}}}
      .dump();
}

std::string summary_line(const History& h) {
  json s{{"counter", h.counter},
         {"ttl_ms", h.ttl_ms},
         {"wait_bound_ms", h.wait_bound_ms},
         {"drift_ms", h.drift_ms}};
  if (!h.counters.empty()) s["counters"] = h.counters;
  return json{{"summary", s}}.dump();
}

History read_history(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  History h;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    try {
      const json j = json::parse(line);
      if (j.contains("event")) {
        const auto& e = j["event"];
        h.events.push_back(
            Event{e.at("name"), e.at("holder"), e.at("token"), e.at("wait_ns"), e.at("acquire_ns"),
                  e.value("read_ns", std::int64_t{0}), e.at("valid_until_ns"), e.at("release_ns"),
                  e.value("write_ns", std::int64_t{0}), e.at("outcome"), e.at("paused"),
                  e.at("skewed"), e.value("shared", false), e.value("permits", 0u),
                  e.value("slot", ""), e.value("detail", ""), e.value("owner", "")});
      } else if (j.contains("fault")) {
        const auto& f = j["fault"];
        h.faults.push_back(Fault{f.at("kind"), f.at("target"), f.at("start_ns"), f.at("end_ns")});
      } else if (j.contains("sample")) {
        const auto& j_sample = j["sample"];
        Sample sample{j_sample.at("at_ns"),
                      j_sample.at("name"),
                      {},
                      j_sample.value("answered", std::size_t{0})};
        for (const auto& held : j_sample.at("holds")) {
          sample.holds.push_back(SampledHold{held.at("node"), held.at("shared"), held.at("owner"),
                                             held.at("hold"), held.at("ttl_ms")});
        }
        h.samples.push_back(std::move(sample));
      } else if (j.contains("summary")) {
        const auto& s = j["summary"];
        h.counter = s.at("counter");
        h.ttl_ms = s.at("ttl_ms");
        h.wait_bound_ms = s.at("wait_bound_ms");
        h.drift_ms = s.at("drift_ms");
        if (s.contains("counters")) {
          h.counters = s.at("counters").get<std::map<std::string, std::int64_t>>();
        }
      }
    } catch (const json::exception& e) {
      throw std::runtime_error(path + ":" + std::to_string(number) + ": " + e.what());
    }
  }
  return h;
}

// (e) No barging back: one holder took a name kBargingRun times in a row (grants while a fault
// ran not counted) while another (not polling: not skewed) waited through all of them. A
// releasing client whose release others hear holds back for a grace (docs/features.md, "No
// barging back"), so a run that long means its releases told nobody: the first string-key
// release, which published nothing unflagged, let one worker take a lock 436 times in a row
// (193 of them with no fault running) while three waited (seed 20261128); in the runs before
// it, and after the fix, no run of 40 or more had a grant outside a fault. Exclusive grants
// only (readers share, permits have slots); readers count as waiters; the skewed worker aside
// (it polls), and a paused waiter (it hears nothing while stopped).
void check_barging(const History& history, Report& r) {
  std::map<std::string, std::vector<const Event*>> grants, waits;
  for (const auto& e : history.events) {
    if (e.permits > 0) continue;
    waits[e.name].push_back(&e);  // readers wait too
    if (!e.shared && (e.outcome == "accepted" || e.outcome == "refused" || e.outcome == "held")) {
      grants[e.name].push_back(&e);
    }
  }
  for (auto& [name, held] : grants) {
    std::sort(held.begin(), held.end(),
              [](const Event* a, const Event* b) { return a->acquire_ns < b->acquire_ns; });
    for (std::size_t i = 0, j = 0; i < held.size(); i = j + 1) {
      j = i;
      while (j + 1 < held.size() && held[j + 1]->holder == held[i]->holder) ++j;
      const Event* first = held[i];
      const Event* last = held[j];
      // Grants while a fault ran do not count (a slow proxied node makes the race uneven).
      const long run = std::count_if(
          held.begin() + static_cast<long>(i), held.begin() + static_cast<long>(j) + 1,
          [&](const Event* o) { return !in_fault(history, o->acquire_ns, o->acquire_ns); });
      if (run < kBargingRun || first->skewed) continue;
      const auto waited = std::find_if(waits[name].begin(), waits[name].end(), [&](const Event* o) {
        return o->holder != first->holder && !o->skewed && !o->paused &&
               o->wait_ns < first->acquire_ns && o->acquire_ns > last->acquire_ns;
      });
      if (waited == waits[name].end()) continue;
      r.violations.push_back(first->holder + " took '" + name + "' " + std::to_string(run) +
                             " times in a row (not counting those during faults) while another "
                             "waited (no barging back: its releases told nobody?): " +
                             describe(**waited));
    }
  }
}

Report check(const History& history) {
  Report r;
  std::map<std::string, std::vector<const Event*>> by_name;       // a permit: by its slot
  std::map<std::string, std::vector<const Event*>> by_semaphore;  // permits only
  for (const auto& e : history.events) {
    ++r.cycles;
    if (e.outcome == "accepted") ++r.accepted;
    if (e.outcome == "refused") ++r.refused;
    if (e.outcome == "timeout") ++r.timeouts;
    if (e.outcome == "error" && e.write_ns > 0) ++r.unknown_writes;
    if (e.outcome == "held") ++r.held_only;
    if (e.outcome == "accepted" || e.outcome == "refused" || e.outcome == "held") {
      by_name[e.permits > 0 ? e.slot : e.name].push_back(&e);
      if (e.permits > 0) by_semaphore[e.name].push_back(&e);
    }
  }
  const std::int64_t drift_ns = history.drift_ms * 1'000'000;
  const auto end_of = [](const Event* e) { return std::min(e->valid_until_ns, e->release_ns); };

  // (d) At most `permits` holders of a semaphore within their windows at once (paused or
  // skewed holders aside, as in (a)).
  for (auto& [name, held] : by_semaphore) {
    std::sort(held.begin(), held.end(),
              [](const Event* a, const Event* b) { return a->acquire_ns < b->acquire_ns; });
    std::vector<const Event*> active;
    for (const Event* e : held) {
      std::erase_if(active, [&](const Event* o) { return end_of(o) <= e->acquire_ns + drift_ns; });
      if (!e->paused && !e->skewed) {
        const auto inside = std::count_if(active.begin(), active.end(),
                                          [](const Event* o) { return !o->paused && !o->skewed; });
        if (static_cast<std::size_t>(inside) >= e->permits) {
          std::string who;
          for (const Event* o : active) who += " " + describe(*o);
          r.violations.push_back("more than " + std::to_string(e->permits) + " holders of '" +
                                 name + "': " + describe(*e) + " while" + who);
        }
      }
      active.push_back(e);
    }
  }

  for (auto& [name, held] : by_name) {
    // (a) Validity windows: sort by acquisition; each must start after every earlier one ended
    // (the earlier of its validity end and its release), give or take the drift, except that
    // two read holds may overlap.
    std::sort(held.begin(), held.end(),
              [](const Event* a, const Event* b) { return a->acquire_ns < b->acquire_ns; });
    std::vector<const Event*> active;   // earlier windows that may still be open
    std::set<const Event*> overlapped;  // windows that others entered
    for (const Event* e : held) {
      // Windows that ended before this one began end before every later one begins too.
      std::erase_if(active, [&](const Event* o) { return end_of(o) <= e->acquire_ns + drift_ns; });
      for (const Event* o : active) {
        if (o->shared && e->shared) continue;
        // A holder that wrote after its validity ended overlaps whoever came next, whatever
        // its own window says: that is what a pause or a skewed clock does.
        const bool expected = o->paused || o->skewed || e->paused || e->skewed;
        if (!expected) {
          overlapped.insert(o);
          r.violations.push_back("overlapping holders of '" + name + "': " + describe(*o) +
                                 " and " + describe(*e));
        }
      }
      active.push_back(e);
    }
    r.overlapped_windows += overlapped.size();
    // Late writers: wrote after their validity ended while a newer holder had the lock. The
    // resource must refuse the write once the newer holder has touched it (its fenced read);
    // before that, accepting it is harmless: the newer holder then reads what it wrote.
    for (const Event* e : held) {
      if (e->outcome == "held") continue;  // wrote nothing: no late write
      if (e->release_ns <= e->valid_until_ns + drift_ns) continue;
      const bool someone_else = std::any_of(held.begin(), held.end(), [&](const Event* o) {
        return o != e && o->token > e->token && o->acquire_ns < e->release_ns;
      });
      if (!someone_else) continue;
      ++r.expected_overlaps;
      if (e->outcome == "refused") {
        ++r.caught_by_fencing;
        continue;
      }
      const bool newer_read_first = std::any_of(held.begin(), held.end(), [&](const Event* o) {
        // read_ns is taken when the newer read returned, write_ns before this write was sent:
        // a read that returned after the write was sent may have come second.
        const std::int64_t sent = e->write_ns != 0 ? e->write_ns : e->release_ns;
        return o->token > e->token && o->read_ns != 0 && o->read_ns < sent;
      });
      if (newer_read_first || !(e->paused || e->skewed)) {
        r.violations.push_back(std::string(newer_read_first
                                               ? "a late write was accepted after a newer "
                                                 "holder read: "
                                               : "a late write of a holder neither paused nor "
                                                 "skewed was accepted: ") +
                               describe(*e));
      } else {
        ++r.harmless_late_writes;
      }
    }
    check_acceptance_order(held, r);
  }
  check_counters(history, r);
  // (c) Liveness: a wait that ended without the lock, though no fault was under way; or one
  // that saw the lock change hands kStarvedHandOffs times while no fault was under way. Every
  // release wakes a waiter of each client, so a waiter that loses that many fault-free races
  // in a row has most likely stopped hearing releases (a lost subscription did exactly this).
  // Hand-offs during faults do not count: then the default mode's race is not even (a worker
  // whose proxied node is slow, or a bare quorum that must be won on every live node), and a
  // waiter may lose any number of them; the CI profile saw a wait lose 1,017 of them under
  // ThreadSanitizer (docs/reliability.md). The skewed worker polls (see chaos_main.cc), so
  // only the first rule applies to it.
  for (const auto& e : history.events) {
    if (e.outcome != "timeout") continue;
    if (!in_fault(history, e.wait_ns, e.release_ns)) {
      const auto starved = starved_ns(history, worker_id(e.holder), e.wait_ns, e.release_ns);
      if (starved * 10 < e.release_ns - e.wait_ns) {
        r.violations.push_back(
            "waiter got no lock within " + std::to_string(history.wait_bound_ms) +
            " ms while no fault ran: " + describe(e) + holders_during(history, e));
        continue;
      }
      // A client that cannot run gets no lock (starvation_watch.h): excused, listed, and still
      // held to the hand-off rule below (a waiter that stopped hearing releases).
      ++r.starved_timeouts;
      r.excused.push_back("its worker starved of CPU for " + std::to_string(starved / kMsNs) +
                          " ms of the wait: " + describe(e) + holders_during(history, e));
    }
    if (e.skewed) continue;
    const auto& others = e.permits > 0 ? by_semaphore[e.name] : by_name[e.name];
    const auto hand_offs = std::count_if(others.begin(), others.end(), [&](const Event* o) {
      return o->holder != e.holder && o->acquire_ns > e.wait_ns && o->acquire_ns < e.release_ns &&
             !in_fault(history, o->acquire_ns, o->acquire_ns);
    });
    if (hand_offs >= kStarvedHandOffs) {
      r.violations.push_back("waiter got no lock within " + std::to_string(history.wait_bound_ms) +
                             " ms while others took it " + std::to_string(hand_offs) +
                             " times while no fault ran: " + describe(e));
    }
  }
  check_barging(history, r);
  return r;
}

}  // namespace dlock::chaos
