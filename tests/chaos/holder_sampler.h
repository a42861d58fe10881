// SPDX-License-Identifier: MIT
// HolderSampler: who holds the workers' lock on each node, asked once a second by a client of
// its own (Client::status) and written into the history as a sample. A wait that ends without
// the lock while no fault runs is a liveness violation (history.h, check (c)); the samples
// inside it name the hold that kept the waiters out (owner and hold id, mapped to a worker
// through the owners its events record), which the events alone cannot: a hold whose owner no
// longer uses it is in no event.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace dlock::chaos {

class HolderSampler {
 public:
  // Samples `name` on the lock nodes `urls` (comma-separated) and hands each sample's history
  // line to `record`, from a thread of its own.
  HolderSampler(std::string urls, std::string name, std::function<void(const std::string&)> record);
  ~HolderSampler();  // stops and joins
  HolderSampler(const HolderSampler&) = delete;
  HolderSampler& operator=(const HolderSampler&) = delete;

 private:
  void run(const std::string& urls);

  const std::string name_;
  const std::function<void(const std::string&)> record_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace dlock::chaos
