// SPDX-License-Identifier: MIT
// The nesting worker: it takes the lock, then takes it again on the same thread with the same
// (default) owner, a reentrant acquisition, with another ttl, shorter or longer, renewed by the
// watchdog or not; extends the inner lease; releases the two in either order; and keeps
// working under the lease that is left. Reentrant leases share one lock on the nodes, so
// whatever the inner lease does there (a shorter ttl, a renewal, a release whose reply is lost)
// must never end the lock while the outer lease still says it is held.
//
// Each nested critical section is one history event over the whole time the worker believed
// it held the lock: from the outer acquisition for as long as one of its leases said
// is_held(), checked every 20 ms, with the latest end of validity it was shown. The checker
// flags any other holder inside that window. The worker writes to the fenced counter at the
// end only if a lease still holds with time to spare; otherwise the event is "held" (no write).
#include <signal.h>

#include <algorithm>
#include <optional>
#include <random>
#include <thread>

#include "worker.h"

namespace dlock::chaos {
namespace {

using std::chrono::milliseconds;

// A write needs this much validity left: its round trip must end inside the lease.
constexpr milliseconds kWriteMargin{100};
constexpr milliseconds kCheckEvery{20};

// One nested critical section, drawn from the worker's seeded generator.
struct Plan {
  milliseconds outer_ttl{0};
  bool outer_renew = false;
  milliseconds inner_ttl{0};
  bool inner_renew = false;
  bool extend_inner = false;
  milliseconds extend_ttl{0};  // zero: extend() with the inner lease's own ttl
  bool inner_first = true;     // release order
  milliseconds work_both{0};   // under both leases
  milliseconds work_after{0};  // under the lease left after the first release

  std::string describe() const {
    auto ms = [](milliseconds d) { return std::to_string(d.count()) + "ms"; };
    return "nest outer=" + ms(outer_ttl) + (outer_renew ? "/renewed" : "/fixed") +
           " inner=" + ms(inner_ttl) + (inner_renew ? "/renewed" : "/fixed") +
           (extend_inner ? " extend(" + (extend_ttl.count() ? ms(extend_ttl) : "") + ")" : "") +
           (inner_first ? " inner-first" : " outer-first") + " work=" + ms(work_both) + "+" +
           ms(work_after);
  }
};

Plan draw(std::mt19937& rng) {
  constexpr milliseconds outer[] = {milliseconds(300), milliseconds(1000), kNestingMaxTtl};
  constexpr milliseconds inner[] = {milliseconds(150), milliseconds(300), milliseconds(1000),
                                    kNestingMaxTtl};
  auto pick = [&](const auto& menu) { return menu[rng() % std::size(menu)]; };
  Plan p;
  p.outer_ttl = pick(outer);
  // Mostly a shorter inner lease (always under the longest outer one): the case that once
  // ended the lock under a valid outer lease.
  do {
    p.inner_ttl = pick(inner);
  } while (p.inner_ttl == p.outer_ttl || (rng() % 3 != 0) != (p.inner_ttl < p.outer_ttl));
  p.outer_renew = rng() % 2 == 0;
  p.inner_renew = rng() % 2 == 0;
  p.extend_inner = rng() % 10 < 7;
  if (p.extend_inner && rng() % 3 == 0) p.extend_ttl = pick(inner);
  p.inner_first = rng() % 10 < 7;
  p.work_both = milliseconds(rng() % 300);
  p.work_after = milliseconds(100 + rng() % 900);
  return p;
}

// What the worker believes: while one of its leases says is_held(), it holds the lock until
// the latest end of validity it was shown.
class Belief {
 public:
  // Samples the leases (null: none); false once none says held.
  bool check(std::initializer_list<const Lease*> leases) {
    const std::int64_t now = real_now_ns();
    bool held = false;
    for (const Lease* l : leases) {
      if (l == nullptr || !l->is_held()) continue;
      held = true;
      valid_until_ns_ = std::max(valid_until_ns_, now + l->validity().count() * 1'000'000);
      left_ = std::max(left_, l->validity());
    }
    if (held) last_held_ns_ = now;
    return held;
  }
  // Works (sleeps) for `d` while the leases hold; false if they stopped holding.
  bool work(std::initializer_list<const Lease*> leases, milliseconds d) {
    const std::int64_t until = real_now_ns() + d.count() * 1'000'000;
    while (real_now_ns() < until && !stop_requested()) {
      std::this_thread::sleep_for(kCheckEvery);
      left_ = milliseconds(0);
      if (!check(leases)) return false;
    }
    return true;
  }
  milliseconds left() const { return left_; }  // validity at the last check
  std::int64_t valid_until_ns() const { return valid_until_ns_; }
  std::int64_t last_held_ns() const { return last_held_ns_; }

 private:
  std::int64_t valid_until_ns_ = 0;
  std::int64_t last_held_ns_ = 0;
  milliseconds left_{0};
};

std::string result_of(const Result<void>& r) {
  return r ? "ok" : "err:" + r.error().code().message();
}

LockOptions options_of(milliseconds ttl, bool renew) {
  LockOptions o;
  o.ttl = ttl;
  o.auto_renew = renew;
  o.retry_delay = milliseconds(20);
  return o;
}

// One nested critical section in the making.
struct Cycle {
  Event e;
  Belief belief;
  std::optional<Lease> outer;
  std::optional<Lease> inner;  // none until taken, and none once released
  long value = 0;
  bool held = false;  // still believed held at the last check
};

// The outer acquisition and the fenced read. False when the cycle ends there (e is complete).
bool take_outer(const WorkerOptions& w, Client& client, FencedStore& store, const Plan& plan,
                Cycle& c) {
  c.e.owner = Client::default_owner().str();  // its leases' owner: named before any is had
  c.e.wait_ns = real_now_ns();
  auto outer = client.lock(kName, w.wait, options_of(plan.outer_ttl, plan.outer_renew));
  if (!outer) {
    c.e.outcome = outer.error().is(errc::wait_timeout) ? "timeout" : "error";
    c.e.acquire_ns = c.e.valid_until_ns = c.e.release_ns = real_now_ns();
    c.e.detail += " lock: " + why(outer.error());
    return false;
  }
  c.e.acquire_ns = real_now_ns();
  c.outer = std::move(*outer);
  c.e.token = c.outer->fencing_token().value();
  c.held = c.belief.check({&*c.outer});
  // A fenced read: the resource now refuses every older holder's write.
  auto read = store.read(kName, c.outer->fencing_token());
  c.e.read_ns = real_now_ns();
  if (!read || !read->accepted) {
    c.e.outcome = !read ? "error" : "refused";
    c.e.valid_until_ns = c.belief.valid_until_ns();
    c.e.release_ns = real_now_ns();
    (void)c.outer->unlock();
    return false;
  }
  c.value = read->value ? std::stol(*read->value) : 0;
  return true;
}

// The reentrant acquisition, its extension, work under both, and the first release.
void nest_inner(Client& client, const Plan& plan, Cycle& c) {
  if (take_pause_request()) {
    c.e.paused = true;
    raise(SIGSTOP);  // a GC pause, as the plain workers take one; the controller resumes us
  }
  // Only while the outer lease holds: an acquisition after it ended would not be reentrant,
  // and the worker's belief would have a gap in which another worker may rightly hold the lock.
  c.held = c.belief.check({&*c.outer});
  if (!c.held) return;
  auto inner = client.try_lock(kName, options_of(plan.inner_ttl, plan.inner_renew));
  if (!inner) {
    c.e.detail += " inner=err:" + inner.error().code().message();
    return;
  }
  if (inner->fencing_token() != c.outer->fencing_token()) {
    // Not a reentrant lease of the outer hold: do not count on it.
    c.e.detail += " inner-token=" + std::to_string(inner->fencing_token().value());
    (void)inner->unlock();
    return;
  }
  c.inner = std::move(*inner);
  if (plan.extend_inner) {
    const auto r = plan.extend_ttl.count() ? c.inner->extend(plan.extend_ttl) : c.inner->extend();
    c.e.detail += " extend=" + result_of(r);
  }
  c.held = c.belief.work({&*c.outer, &*c.inner}, plan.work_both);
  std::optional<Lease>& first = plan.inner_first ? c.inner : c.outer;
  c.e.detail += " unlock1=" + result_of(first->unlock());
  first.reset();
}

// Work under the lease left, the fenced write if it still holds, and the last release.
void finish(FencedStore& store, const Plan& plan, Cycle& c) {
  // Without a reentrant lease the outer one is left, and does all the work.
  Lease& left = c.inner ? *c.inner : *c.outer;
  if (c.held) c.held = c.belief.work({&left}, plan.work_after);
  if (c.held && c.belief.check({&left}) && c.belief.left() > kWriteMargin) {
    c.e.write_ns = real_now_ns();
    auto written = store.write(kName, std::to_string(c.value + 1), left.fencing_token());
    c.e.release_ns = real_now_ns();
    c.e.outcome = !written ? "error" : (*written ? "accepted" : "refused");
  } else {
    // It stopped using the lock when it last saw a lease held: no write, only the interval.
    c.e.release_ns = c.belief.last_held_ns();
    c.e.outcome = "held";
  }
  c.e.valid_until_ns = c.belief.valid_until_ns();
  c.e.detail += " unlock2=" + result_of(left.unlock());
}

}  // namespace

void run_nesting_cycles(const WorkerOptions& w, Client& client, FencedStore& store) {
  std::mt19937 rng(w.seed * 7919u + static_cast<unsigned>(w.id));
  while (!stop_requested()) {
    const Plan plan = draw(rng);
    Cycle c;
    c.e.name = kName;
    c.e.holder = "worker-" + std::to_string(w.id);
    c.e.detail = plan.describe();
    if (take_outer(w, client, store, plan, c)) {
      nest_inner(client, plan, c);
      finish(store, plan, c);
    }
    emit(c.e);
    // Outside the lock for a while: a nested section holds it for up to 1.2 s, and the plain
    // workers (whose waiting is what exposes an ended lock) need their turns too.
    std::this_thread::sleep_for(milliseconds(500 + rng() % 1500));
  }
}

}  // namespace dlock::chaos
