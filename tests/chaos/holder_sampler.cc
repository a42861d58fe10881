// SPDX-License-Identifier: MIT
#include "holder_sampler.h"

#include <dlock/client.h>

#include <chrono>
#include <utility>

#include "history.h"
#include "worker.h"

namespace dlock::chaos {
namespace {

constexpr std::chrono::seconds kEvery{1};

// The holds on each node that answered: writers and readers.
Sample sample_of(const LockStatus& status, std::int64_t at_ns) {
  Sample s;
  s.at_ns = at_ns;
  s.name = status.name;
  for (std::size_t i = 0; i < status.nodes.size(); ++i) {
    const NodeLockState& n = status.nodes[i];
    if (n.error) continue;
    ++s.answered;
    const auto ttl = n.ttl ? n.ttl->count() : -1;
    for (const auto& h : n.owners)
      s.holds.push_back(SampledHold{i, false, h.owner.str(), h.hold, ttl});
    for (const auto& r : n.readers) {
      s.holds.push_back(SampledHold{i, true, r.owner.str(), r.hold, r.ttl.count()});
    }
  }
  return s;
}

}  // namespace

HolderSampler::HolderSampler(std::string urls, std::string name,
                             std::function<void(const std::string&)> record)
    : name_(std::move(name)), record_(std::move(record)) {
  thread_ = std::thread([this, urls = std::move(urls)] { run(urls); });
}

HolderSampler::~HolderSampler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HolderSampler::run(const std::string& urls) {
  auto client = Client::create(worker_client_options(urls));
  if (!client) return;  // no samples: the checker then names no holder
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, kEvery, [this] { return stop_; })) {
    lock.unlock();
    auto status = client->status(name_);
    if (status) {
      const Sample s = sample_of(*status, real_now_ns());
      record_(to_line(s));  // a free lock too: during a failed wait, the strongest clue
    }
    lock.lock();
  }
}

}  // namespace dlock::chaos
