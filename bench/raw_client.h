// SPDX-License-Identifier: MIT
// RawNodes: the least any client can do per acquire and release, written with hiredis on one
// blocking connection per node: SET NX PX, then the compare-and-delete script by EVALSHA. On
// N > 1 nodes a command goes to all of them at once and the call returns as soon as a
// majority answered; the stragglers' replies are read and dropped before the next command's.
// This is the floor the benchmark holds dlock against. It also drives the naive lock of seed
// 000 (SET NX, sleep 0-100 ms on failure, release by EVAL of the script text).
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::bench {

class RawNodes {
 public:
  // Connects to 127.0.0.1 on every port; throws std::runtime_error when one cannot be reached.
  explicit RawNodes(const std::vector<std::uint16_t>& ports);
  ~RawNodes();
  RawNodes(const RawNodes&) = delete;
  RawNodes& operator=(const RawNodes&) = delete;

  std::size_t size() const { return nodes_.size(); }
  std::size_t quorum() const { return nodes_.size() / 2 + 1; }

  // SET name token NX PX ttl; true when a majority said OK. wait_all: read every node's reply
  // before returning (dlock's rule for the acquire), not just a majority's.
  bool acquire(const std::string& name, const std::string& token, int ttl_ms,
               bool wait_all = false);
  // The compare-and-delete script by EVALSHA; true when a majority deleted the key.
  bool release(const std::string& name, const std::string& token);
  // On node 0 only: `names.size()` SETs written back to back and their replies read, then as
  // many releases: that many cycles in flight on one connection.
  void pipelined_cycles(const std::vector<std::string>& names, const std::string& token,
                        int ttl_ms);
  // The same on every node at once (the quorum floor, pipelined): each node gets all the SETs,
  // then every node's replies are read, then the releases likewise.
  void pipelined_cycles_all(const std::vector<std::string>& names, const std::string& token,
                            int ttl_ms);
  // Seed 000's release: EVAL with the script text, on node 0.
  void eval_release(const std::string& name, const std::string& token);
  // One field of INFO (e.g. "used_memory") of node i, as an integer.
  long long info(std::size_t i, const std::string& field);
  // One INFO field of node i that is a decimal (e.g. "used_cpu_user").
  double info_real(std::size_t i, const std::string& field);
  // How many times node i ran `command` (INFO commandstats; e.g. "evalsha"), scripts' inner
  // commands not included.
  long long calls(std::size_t i, const std::string& command);
  // Runs a command on node i and returns its integer or status reply as text.
  std::string command(std::size_t i, const std::vector<std::string>& argv);
  // One SCAN step on node i (10,000 keys at a time): the next cursor ("0" at the end).
  std::string scan_cursor(std::size_t i, const std::string& cursor);

 private:
  struct Node {
    redisContext* ctx = nullptr;
    std::size_t owed = 0;  // replies of earlier rounds not read yet
  };
  // Sends argv to every node and returns how many of the first `quorum()` answers (or all
  // answers, when a majority is not reached sooner) satisfied ok().
  template <typename Ok>
  std::size_t round(const std::vector<std::string>& argv, Ok ok, bool wait_all = false);
  redisReply* blocking(std::size_t i, const std::vector<std::string>& argv);

  std::vector<Node> nodes_;
  std::string release_sha_;
};

extern const char* const kCompareAndDelete;

}  // namespace dlock::bench
