// SPDX-License-Identifier: MIT
#include "node/coalescer.h"

#include <algorithm>
#include <utility>

#include "node/batch_call.h"

namespace dlock::node {
namespace {

// What decides how a call is sent besides its batch script: calls differing in it never share
// a batch call (the replica guard's WAIT covers a whole batch call).
struct Kind {
  const scripts::Script* script;
  std::size_t min_replicas;
  std::chrono::milliseconds replica_timeout;
  explicit Kind(const Call& c)
      : script(c.batch.script), min_replicas(c.min_replicas), replica_timeout(c.replica_timeout) {}
  bool operator==(const Kind&) const = default;
};

// Whether the calls of a batch call answered `error` are each sent alone, as if the batch had
// left them alone. An error may be one call's, and must not be every call's: Redis checks
// every key of a script call against the ACL user's key patterns before it runs (NOPERM for
// one name outside them refused every other caller's grant and release in the batch, and a
// release that fails is not tried again: its lock stayed held for its ttl), and one name's
// data can make the script fail after it granted others (a name counter that is no number).
// Sent alone, each call gets its own reply: an acquisition the batch wrote before it failed
// is this very hold met again, granted again by acquire.lua with a larger token; a release the
// batch did before it failed reads -1 ("not held", the cautious reading; release_batch.lua
// fails midway on nothing dlock writes). Except the errors that are the server's, not a
// call's, which every call sent alone would get too (K calls more, just when the server is
// overloaded or changing roles): the replica guard's REPLICAS (the batch ran and its writes
// are not confirmed on the replicas, as each single call's would not be), a script still
// running (BUSY), a server loading its data (LOADING), a replica (READONLY, also master_only.lua's
// refusal), a replica without its master (MASTERDOWN), a full server (OOM, refused before any
// write).
bool alone_after(const resp::Reply& error) {
  for (const char* whole : {"REPLICAS", "BUSY", "LOADING", "READONLY", "MASTERDOWN", "OOM"}) {
    if (error.is_error_code(whole)) return false;
  }
  return true;
}

}  // namespace

void Coalescer::add(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                    net::Connection::Callback done) {
  if (!armed_) {
    // Behind every handler already queued: the calls other callers started meanwhile join.
    // Posted first: if that throws, nothing is held that no flush would send.
    asio::post(io_, [this] { flush(); });
    armed_ = true;
  }
  pending_.push_back(Item{std::move(call), deadline, std::move(done)});
}

void Coalescer::flush() {
  armed_ = false;
  std::vector<Item> items;
  items.swap(pending_);
  if (items.size() == 1) {
    // Alone (every call, one in flight): sent as it is, without the grouping's two vectors, two
    // allocations per request (issue 32).
    Item& item = items.front();
    send_(std::move(item.call), item.deadline, std::move(item.done));
    items.clear();
    if (pending_.empty()) pending_.swap(items);
    return;
  }
  std::vector<bool> taken(items.size(), false);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (taken[i]) continue;
    const Kind kind(*items[i].call);
    std::vector<Item> batch;
    // At most what is left: one allocation, not one per doubling.
    batch.reserve(std::min(items.size() - i, kMaxItems));
    for (std::size_t j = i; j < items.size() && batch.size() < kMaxItems; ++j) {
      if (taken[j] || !(Kind(*items[j].call) == kind)) continue;
      taken[j] = true;
      batch.push_back(std::move(items[j]));
    }
    send_batch(std::move(batch));
  }
  // The held calls' storage serves the next flush's (every item was moved out above): add()
  // then does not grow a new vector from nothing, one reallocation per doubling, each time.
  items.clear();
  if (pending_.empty()) pending_.swap(items);
}

void Coalescer::send_batch(std::vector<Item> items) {
  if (items.size() == 1) {
    // Alone: the call itself, which costs the server less than a batch of one.
    Item& item = items.front();
    return send_(std::move(item.call), item.deadline, std::move(item.done));
  }
  std::vector<const Call*> calls;
  net::Clock::time_point deadline = items.front().deadline;
  for (const Item& item : items) {
    calls.push_back(item.call.get());
    deadline = std::min(deadline, item.deadline);
  }
  Call merged = batch_call(calls);
  auto batch = std::make_shared<std::vector<Item>>(std::move(items));
  send_(std::make_shared<const Call>(std::move(merged)), deadline,
        [this, batch](Result<resp::Reply> r) { answer(*batch, std::move(r)); });
}

void Coalescer::answer(std::vector<Item>& items, Result<resp::Reply> r) {
  if (r) r = checked_batch_reply(std::move(*r), items.size());
  if (!r || (r->is_error() && !alone_after(*r))) {
    for (Item& item : items) item.done(r);
    return;
  }
  // The calls the batch left alone go first, sooner on the wire; then the others' replies.
  for (std::size_t i = 0; i < items.size(); ++i) {
    Item& item = items[i];
    if (r->is_error() || r->elements[i].is_nil()) {
      send_(std::move(item.call), item.deadline, std::exchange(item.done, nullptr));
    }
  }
  if (r->is_error()) return;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].done) items[i].done(std::move(r->elements[i]));
  }
}

}  // namespace dlock::node
