// SPDX-License-Identifier: MIT
// BatchMonitor: evidence that group commit ran during a chaos run. It watches every lock node
// with MONITOR (one connection and thread per node, straight to the server, never through a
// fault proxy) and counts the batch scripts' calls by their sha (acquire_batch.lua,
// release_batch.lua: docs/protocol.md, "Group commit") and the items in them (from the number
// of keys). INFO commandstats cannot tell them apart: it counts EVALSHA, whatever the script.
//
// A lower bound: what a node ran while its monitor was not connected (the node killed, stopped
// past the read timeout, or just restarted) is not counted, nor a batch sent by EVAL after a
// NOSCRIPT (a node restarted empty forgets its scripts; the client sends the text once).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace dlock::chaos {

class BatchMonitor {
 public:
  struct Counts {
    std::size_t acquire_batches = 0;  // acquire_batch.lua calls
    std::size_t acquire_items = 0;    // acquisitions in them
    std::size_t release_batches = 0;  // release_batch.lua calls
    std::size_t release_items = 0;    // releases in them
    std::size_t largest = 0;          // items in the largest batch call
    std::size_t evalsha = 0;          // every EVALSHA seen (batch calls included)
  };

  // Starts watching the servers on 127.0.0.1 at these ports (the lock nodes, by index).
  explicit BatchMonitor(std::vector<std::uint16_t> ports);
  ~BatchMonitor();
  BatchMonitor(const BatchMonitor&) = delete;
  BatchMonitor& operator=(const BatchMonitor&) = delete;

  // Stops watching; then counts() is final.
  void stop();
  // Per node, by index.
  std::vector<Counts> counts() const;

 private:
  struct Node {
    std::uint16_t port = 0;
    std::atomic<std::size_t> acquire_batches{0}, acquire_items{0}, release_batches{0},
        release_items{0}, largest{0}, evalsha{0};
  };
  void watch(Node& node);
  void count(Node& node, const std::string& line);

  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::vector<std::string> acquire_shas_;
  std::vector<std::string> release_shas_;
};

}  // namespace dlock::chaos
