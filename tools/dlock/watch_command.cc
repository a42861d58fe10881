// SPDX-License-Identifier: MIT
#include "watch_command.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "duration.h"
#include "exit_codes.h"
#include "stop_signals.h"
#include "watch_stats.h"

namespace dlock::cli {
namespace {

// The holder as a line to print, and what changes exactly when the holder changes: its owner
// and hold ids, not the fence (on a lock set of one node the name's counter is the node's, which
// every grant of any name there moves).
struct HolderLine {
  std::string text;
  std::string identity;
};

HolderLine holder_line(const LockStatus& s) {
  std::size_t answered = 0;
  std::map<std::string, std::size_t> votes;  // holder -> nodes that say so
  std::map<std::string, std::string> holds;  // holder -> its hold ids, as the nodes name them
  FencingToken fence;
  for (const auto& n : s.nodes) {
    if (n.error) continue;
    ++answered;
    fence = std::max(fence, n.fence);
    if (n.kind == KeyKind::foreign) ++votes["(another library's key)"];
    for (const auto& holder : n.owners) {
      ++votes[holder.owner.str()];
      holds[holder.owner.str()] += " " + holder.hold;
    }
    for (const auto& reader : n.readers) ++votes["reader " + reader.owner.str()];
  }
  if (answered < s.quorum) {
    const std::string unknown = "unknown: fewer than a quorum of nodes answer";
    return {unknown, unknown};
  }
  for (const auto& [holder, count] : votes) {
    if (count >= s.quorum) {
      return {"held by " + holder + " (fence " + std::to_string(fence.value()) + ")",
              "held by " + holder + holds[holder]};
    }
  }
  const std::string free = votes.empty() ? "free" : "free (stale keys on a minority of nodes)";
  return {free, free};
}

std::string wall_time() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  std::ostringstream out;
  out << std::put_time(&tm, "%H:%M:%S") << '.' << std::setw(3) << std::setfill('0') << ms;
  return out.str();
}

}  // namespace

CLI::App* add_watch_command(CLI::App& app, WatchFlags& flags) {
  CLI::App* watch = app.add_subcommand("watch", "Print a line each time a lock's holder changes");
  add_connect_flags(*watch, flags.connect);
  watch->add_option("--interval", flags.interval, "how often to look (default 200ms)");
  watch->add_option("--changes", flags.changes, "stop after this many changes (default: never)");
  watch->add_flag("--stats", flags.stats,
                  "also print a line of counts every --stats-every: fencing counter (grants by "
                  "all clients), polls that found it held, queued waiters, and per node this "
                  "watch's requests (ok, errors, latency, quarantines)");
  watch->add_option("--stats-every", flags.stats_every, "period of --stats lines (default 1s)");
  watch->add_option("name", flags.name, "lock name")->required();
  watch->footer(
      "Stops on Ctrl-C (exit 0).\n\n"
      "Examples:\n"
      "  dlock watch nightly-report\n"
      "  dlock watch --interval 1s -r redis://10.0.0.1:6379 nightly-report\n"
      "  dlock watch --stats --stats-every 10s nightly-report");
  return watch;
}

int watch_command(const WatchFlags& flags) {
  auto interval = parse_duration(flags.interval);
  if (!interval || interval->count() <= 0) {
    std::cerr << "dlock: --interval must be a positive duration\n";
    return kExitUsage;
  }
  auto stats_every = parse_duration(flags.stats_every);
  if (!stats_every || stats_every->count() <= 0) {
    std::cerr << "dlock: --stats-every must be a positive duration\n";
    return kExitUsage;
  }
  std::shared_ptr<WatchStats> stats;
  if (flags.stats) stats = std::make_shared<WatchStats>();
  StopSignals stop;  // before the client starts its threads
  auto client = make_client(flags.connect, stats);
  if (!client) {
    std::cerr << "dlock: " << client.error().message() << "\n";
    return kExitUsage;
  }
  using Clock = std::chrono::steady_clock;
  auto period_start = Clock::now();
  // A last stats line for the period cut short, whichever way the watch ends.
  auto finish = [&] {
    if (stats) {
      std::cout << wall_time() << "  " << flags.name << ": "
                << stats->take_line(Clock::now() - period_start) << std::endl;
    }
    return kExitOk;
  };
  std::string last;
  int changes = -1;  // the first line is the initial state, not a change
  for (;;) {
    auto status = client->status(flags.name);
    if (!status) {
      finish();
      std::cerr << "dlock: " << status.error().message() << "\n";
      return kExitUsage;
    }
    if (stats) stats->poll(*status);
    const HolderLine line = holder_line(*status);
    if (line.identity != last) {
      std::cout << wall_time() << "  " << flags.name << ": " << line.text << std::endl;
      last = line.identity;
      if (++changes == flags.changes && flags.changes > 0) return finish();
    }
    if (stats && Clock::now() - period_start >= *stats_every) {
      const auto now = Clock::now();
      std::cout << wall_time() << "  " << flags.name << ": " << stats->take_line(now - period_start)
                << std::endl;
      period_start = now;
    }
    if (stop.wait_for(*interval) != 0) return finish();
  }
}

}  // namespace dlock::cli
