// SPDX-License-Identifier: MIT
#include "status_command.h"

#include <dlock/semaphore.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exit_codes.h"

namespace dlock::cli {

nlohmann::json to_json(const LockStatus& s) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : s.nodes) {
    nlohmann::json j{{"node", n.node}, {"ok", !n.error.has_value()}};
    j["quarantined_ms"] = n.quarantine.count();
    if (n.evicted_keys) j["evicted_keys"] = *n.evicted_keys;
    if (!n.never_votes.empty()) j["never_votes"] = n.never_votes;
    if (n.error) {
      j["error"] = n.error->reason;
    } else {
      j["kind"] = to_string(n.kind);
      j["ttl_ms"] = n.ttl ? n.ttl->count() : -1;  // -1: none (free, or a foreign key's no expiry)
      j["fence"] = n.fence.value();
      j["queued"] = n.queued;
      nlohmann::json owners = nlohmann::json::array();
      for (const auto& [owner, hold] : n.owners) {
        owners.push_back({{"owner", owner.str()}, {"hold", hold}});
      }
      j["owners"] = owners;
      nlohmann::json readers = nlohmann::json::array();
      for (const auto& r : n.readers) {
        readers.push_back({{"owner", r.owner.str()}, {"hold", r.hold}, {"ttl_ms", r.ttl.count()}});
      }
      j["readers"] = readers;
      j["writers_waiting"] = n.writers_waiting;
    }
    nodes.push_back(std::move(j));
  }
  return {{"name", s.name}, {"held", s.held}, {"quorum", s.quorum}, {"nodes", nodes}};
}

namespace {

std::string holder_of(const NodeLockState& n) {
  if (n.kind == KeyKind::foreign) return "(another library's key)";
  std::string out;
  for (const auto& holder : n.owners) {
    if (!out.empty()) out += ", ";
    out += holder.owner.str();
  }
  for (const auto& reader : n.readers) {
    if (!out.empty()) out += ", ";
    out += "reader " + reader.owner.str() + " (" + std::to_string(reader.ttl.count()) + "ms)";
  }
  if (n.writers_waiting > 0)
    out += "  [" + std::to_string(n.writers_waiting) + " writer(s) waiting]";
  return out.empty() ? "-" : out;
}

void print_table(const LockStatus& s) {
  std::size_t present = 0;
  for (const auto& n : s.nodes) present += (!n.error && n.kind != KeyKind::free) ? 1 : 0;
  std::cout << "lock " << s.name << ": " << (s.held ? "HELD" : "free") << " (present on " << present
            << " of " << s.nodes.size() << " nodes, quorum " << s.quorum << ")\n";
  // As wide as the longest node (a sentinel URL lists every sentinel), 28 at least.
  int width = 28;
  for (const auto& n : s.nodes) width = std::max(width, static_cast<int>(n.node.size()) + 2);
  std::cout << std::left << std::setw(width) << "NODE" << std::setw(9) << "STATE" << std::setw(10)
            << "TTL" << std::setw(18) << "FENCE" << std::setw(7) << "QUEUE"
            << "HOLDER / ERROR\n";
  for (const auto& n : s.nodes) {
    std::cout << std::setw(width) << n.node;
    if (n.error) {
      std::cout << std::setw(9) << "error" << std::setw(10) << "-" << std::setw(18) << "-"
                << std::setw(7) << "-" << n.error->reason << "\n";
      continue;
    }
    const std::string ttl = n.ttl ? std::to_string(n.ttl->count()) + "ms" : "-";
    std::string note = n.quarantine.count() > 0 ? "  [restarted: out of quorums for " +
                                                      std::to_string(n.quarantine.count()) + " ms]"
                                                : "";
    if (!n.never_votes.empty()) note += "  [never votes: " + n.never_votes + "]";
    if (n.evicted_keys.value_or(0) > 0) {
      note += "  [evicted " + std::to_string(*n.evicted_keys) + " keys]";
    }
    const char* state = n.kind == KeyKind::free     ? "free"
                        : n.kind == KeyKind::shared ? "read"
                                                    : "held";
    std::cout << std::setw(9) << state << std::setw(10) << ttl << std::setw(18) << n.fence.value()
              << std::setw(7) << n.queued << holder_of(n) << note << "\n";
  }
}

}  // namespace

CLI::App* add_status_command(CLI::App& app, StatusFlags& flags) {
  CLI::App* status = app.add_subcommand("status", "Show what each node knows about a lock");
  add_connect_flags(*status, flags.connect);
  status->add_flag("--json", flags.json, "print one JSON object instead of a table");
  status
      ->add_option("-n,--permits", flags.permits,
                   "NAME is a semaphore of N permits (dlock run -n N): show each permit's slot")
      ->check(CLI::Range(1, 1024));
  status->add_option("name", flags.name, "lock name")->required();
  status->footer(
      "Exit status: 0 when a quorum of nodes answered, 69 when not, 64 for a usage error.\n\n"
      "Examples:\n"
      "  dlock status nightly-report\n"
      "  dlock status --json -r redis://10.0.0.1:6379 -r redis://10.0.0.2:6379 "
      "-r redis://10.0.0.3:6379 nightly-report");
  return status;
}

int status_command(const StatusFlags& flags) {
  auto client = make_client(flags.connect);
  if (!client) {
    std::cerr << "dlock: " << client.error().message() << "\n";
    return kExitUsage;
  }
  // A semaphore is its slots, each an ordinary lock (dlock/semaphore.h).
  std::vector<std::string> names{flags.name};
  if (flags.permits > 0) {
    const Semaphore semaphore(*client, flags.name, flags.permits);
    names.clear();
    for (std::size_t i = 0; i < flags.permits; ++i) names.push_back(semaphore.slot_name(i));
  }
  nlohmann::json slots = nlohmann::json::array();
  bool all_answered = true;
  std::size_t taken = 0;
  for (const auto& name : names) {
    auto status = client->status(name);
    if (!status) {
      std::cerr << "dlock: " << status.error().message() << "\n";
      return kExitUsage;
    }
    if (flags.json) {
      slots.push_back(to_json(*status));
    } else {
      print_table(*status);
    }
    std::size_t answered = 0;
    for (const auto& n : status->nodes) answered += n.error ? 0 : 1;
    all_answered = all_answered && answered >= status->quorum;
    taken += status->held ? 1 : 0;
  }
  if (flags.permits > 0 && flags.json) {
    std::cout << nlohmann::json{{"semaphore", flags.name},
                                {"permits", flags.permits},
                                {"taken", taken},
                                {"slots", slots}}
                     .dump()
              << "\n";
  } else if (flags.json) {
    std::cout << slots[0].dump() << "\n";
  } else if (flags.permits > 0) {
    std::cout << "semaphore " << flags.name << ": " << taken << " of " << flags.permits
              << " permits taken\n";
  }
  return all_answered ? kExitOk : kExitUnavailable;
}

}  // namespace dlock::cli
