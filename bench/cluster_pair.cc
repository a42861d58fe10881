// SPDX-License-Identifier: MIT
#include "cluster_pair.h"

namespace dlock::bench {

ClusterPair::ClusterPair(std::filesystem::path dir, std::function<void()> on_thread) {
  std::promise<void> ready;
  ready_ = ready.get_future().share();
  thread_ = std::thread([this, dir = std::move(dir), on_thread = std::move(on_thread),
                         ready = std::move(ready), stop = stop_.get_future()]() mutable {
    try {
      on_thread();
      one_ = MeasuredCluster::start(dir / "cluster1", 1);
      // The 1-master cluster sits out Redis' first 2 s while the other forms.
      three_ = MeasuredCluster::start(dir / "cluster3", 3);
      one_->wait_until_ready();
      ready.set_value();
    } catch (...) {
      ready.set_exception(std::current_exception());
    }
    stop.wait();
    one_.reset();
    three_.reset();
  });
}

ClusterPair::~ClusterPair() {
  stop_.set_value();
  thread_.join();
}

const MeasuredCluster& ClusterPair::one() {
  ready_.get();
  return *one_;
}

const MeasuredCluster& ClusterPair::three() {
  ready_.get();
  return *three_;
}

}  // namespace dlock::bench
