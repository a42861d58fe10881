// SPDX-License-Identifier: MIT
// The async worker: `inflight` critical sections at once, each a coroutine on one io_context
// (one thread), through the asio API (dlock/async.h): async_lock, a fenced read, a short hold,
// a fenced write of its name's counter, async_unlock. Many calls in flight through one client
// are what group commit batches (docs/protocol.md, "Group commit"): acquisitions on a lock set
// of one node, releases on any. So half of the coroutines lock through a client of one node
// (the solo set: their acquisitions and releases batch), half through a client of every node
// (their releases batch on each node). The blocking workers, one lock at a time, never batch.
//
// Each name is shared by two coroutines of every async worker: they contend with each other and
// with the other async workers' (each coroutine is its own owner: without LockOptions::owner an
// async acquisition is never reentrant). Every critical section is one history event, judged
// like the plain workers' (history.h), on its own name and resource.
//
// A pause (SIGUSR1) stops the whole process between one coroutine's read and its write; every
// other critical section then in flight was stopped too, at some other point of it: each event
// whose wait or hold spanned a stop is marked paused, for that is what happened to it (a lock
// granted during the wait is held across the stop before the coroutine learns of it).
#include <dlock/async.h>
#include <signal.h>

#include <algorithm>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "worker.h"

namespace dlock::chaos {

std::size_t async_pool(unsigned inflight) {
  // Two coroutines of each kind per name (a worker contends with itself too).
  return std::max<std::size_t>(1, inflight / 4);
}

std::string async_name(bool solo, std::size_t index) {
  return std::string(kAsyncPrefix) + (solo ? "solo:" : "all:") + std::to_string(index);
}

std::vector<std::string> async_names(unsigned inflight) {
  std::vector<std::string> out;
  for (bool solo : {true, false}) {
    for (std::size_t j = 0; j < async_pool(inflight); ++j) out.push_back(async_name(solo, j));
  }
  return out;
}

namespace {

using std::chrono::milliseconds;

// What the coroutines share; they all run on the io_context's one thread.
struct Shared {
  const WorkerOptions& w;
  Client& solo;
  Client& all;
  FencedStore& store;  // blocking calls: the coroutines' thread waits for the resource
  std::vector<asio::cancellation_signal> cancel;  // per coroutine: ends its wait at SIGTERM
  std::uint64_t stops = 0;                        // times this process stopped itself
};

// If the controller asked for a pause: the whole process stops here (SIGSTOP).
void pause_here(Shared& s, Event& e) {
  if (!take_pause_request()) return;
  e.paused = true;
  ++s.stops;
  raise(SIGSTOP);
}

asio::awaitable<void> critical_sections(Shared& s, std::size_t k) {
  const bool solo = k % 2 == 0;
  Client& client = solo ? s.solo : s.all;
  const std::string name = async_name(solo, (k / 2) % async_pool(s.w.inflight));
  const std::string holder = "async-" + std::to_string(s.w.id) + "." + std::to_string(k);
  LockOptions options;
  options.ttl = s.w.ttl;
  options.retry_delay = milliseconds(20);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  asio::error_code ignored;  // these timers are never cancelled: only expiry ends a wait
  unsigned cycles = 0;
  while (!stop_requested()) {
    Event e;
    e.name = name;
    e.holder = holder;
    e.wait_ns = real_now_ns();
    // Stops counted from the start of the wait: the nodes may grant the lock just before a stop,
    // and the coroutine then sees the lease only after it, its validity spent (seed 9901 of the
    // 10-minute profile: about half of the 23 leases that reached their coroutine with no
    // validity left had come across a stop of their process).
    const std::uint64_t stops = s.stops;
    auto lease =
        co_await async_lock(client, name, s.w.wait, options,
                            asio::bind_cancellation_slot(s.cancel[k].slot(), asio::use_awaitable));
    if (!lease) {
      // Cancelled: the worker is stopping, and this wait was cut short by it, not by the lock.
      if (lease.error().is(errc::cancelled)) break;
      emit_not_acquired(e, lease.error());
      // A failure (no quorum: the solo node down) may come at once: a rest, not a busy loop.
      timer.expires_after(milliseconds(20));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
      continue;
    }
    record_acquired(e, *lease);
    auto read = s.store.read(name, lease->fencing_token());
    e.read_ns = real_now_ns();
    if (!read || !read->accepted) {
      e.outcome = !read ? "error" : "refused";
      e.release_ns = real_now_ns();
      e.paused = e.paused || s.stops != stops;
      (void)co_await async_unlock(*lease, asio::use_awaitable);
      emit(e);
      continue;
    }
    const long value = read->value ? std::stol(*read->value) : 0;
    pause_here(s, e);  // between the read and the write
    // A short hold, on the timer: the other coroutines run meanwhile.
    timer.expires_after(milliseconds(1 + ++cycles % 3));
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    e.write_ns = real_now_ns();
    auto written = s.store.write(name, std::to_string(value + 1), lease->fencing_token());
    e.release_ns = real_now_ns();
    e.outcome = !written ? "error" : (*written ? "accepted" : "refused");
    // Stopped (by another coroutine's pause) while it waited or held the lock.
    e.paused = e.paused || s.stops != stops;
    // Released through the asio API: releases queued together go in one batch call.
    (void)co_await async_unlock(*lease, asio::use_awaitable);
    emit(e);
  }
}

// Ends every wait once SIGTERM came (checked every 20 ms): a coroutine in async_lock would
// otherwise keep the worker up to a whole wait bound after it was told to stop.
asio::awaitable<void> watch_stop(Shared& s) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  asio::error_code ignored;  // these timers are never cancelled: only expiry ends a wait
  while (!stop_requested()) {
    timer.expires_after(milliseconds(20));
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
  for (auto& signal : s.cancel) signal.emit(asio::cancellation_type::terminal);
}

}  // namespace

int run_async_worker(const WorkerOptions& w) {
  auto solo = Client::create(worker_client_options(w.solo_node));
  auto all = Client::create(worker_client_options(w.nodes));
  auto store = FencedStore::connect(w.resource);
  if (!solo || !all || !store) {
    const Error& e = !solo ? solo.error() : !all ? all.error() : store.error();
    std::fprintf(stderr, "dlock_chaos async worker %d: %s\n", w.id, e.message().c_str());
    return 2;
  }
  asio::io_context io;
  Shared shared{w, *solo, *all, *store, std::vector<asio::cancellation_signal>(w.inflight)};
  for (std::size_t k = 0; k < w.inflight; ++k) {
    asio::co_spawn(io, critical_sections(shared, k), asio::detached);
  }
  asio::co_spawn(io, watch_stop(shared), asio::detached);
  io.run();
  return 0;
}

}  // namespace dlock::chaos
