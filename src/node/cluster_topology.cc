// SPDX-License-Identifier: MIT
#include "node/cluster_topology.h"

#include <algorithm>
#include <charconv>

namespace dlock::node {
namespace {

std::optional<std::uint16_t> port_of(std::string_view s) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

Error bad(const std::string& why) {
  return Error(errc::protocol_error, "unexpected CLUSTER SLOTS reply: " + why);
}

}  // namespace

Result<std::vector<SlotRange>> parse_cluster_slots(const resp::Reply& reply,
                                                   std::string_view asked_host) {
  if (reply.is_error()) {
    return Error(errc::invalid_argument, "not a Redis Cluster node: " + reply.str);
  }
  if (!reply.is_array()) return bad("not an array");
  std::vector<SlotRange> ranges;
  for (const auto& entry : reply.elements) {
    if (!entry.is_array() || entry.elements.size() < 3 || !entry.elements[0].is_integer() ||
        !entry.elements[1].is_integer() || !entry.elements[2].is_array()) {
      return bad("malformed slot range");
    }
    const auto first = entry.elements[0].integer;
    const auto last = entry.elements[1].integer;
    if (first < 0 || last < first || last >= 16384) return bad("slot range out of bounds");
    const auto& master = entry.elements[2].elements;
    if (master.size() < 2 || master[0].type != resp::Reply::Type::string ||
        !master[1].is_integer()) {
      return bad("malformed master entry");
    }
    SlotRange range;
    range.first = static_cast<std::uint16_t>(first);
    range.last = static_cast<std::uint16_t>(last);
    range.host = master[0].str;
    if (range.host.empty() || range.host == "?") range.host = std::string(asked_host);
    if (master[1].integer <= 0 || master[1].integer > 65535) return bad("port out of range");
    range.port = static_cast<std::uint16_t>(master[1].integer);
    if (master.size() >= 3 && master[2].type == resp::Reply::Type::string) range.id = master[2].str;
    ranges.push_back(std::move(range));
  }
  return ranges;
}

std::optional<std::vector<std::string>> replica_addresses_of_myself(
    std::string_view cluster_nodes) {
  // <id> <ip:port@cport[,hostname]> <flags> <master id or -> <ping-sent> <pong-recv> ...
  struct Line {
    std::string_view id, address, flags, master;
  };
  std::vector<Line> lines;
  while (!cluster_nodes.empty()) {
    const auto end = cluster_nodes.find('\n');
    std::string_view text = cluster_nodes.substr(0, end);
    cluster_nodes.remove_prefix(end == std::string_view::npos ? cluster_nodes.size() : end + 1);
    std::string_view fields[4];
    for (auto& field : fields) {
      const auto space = text.find(' ');
      field = text.substr(0, space);
      text.remove_prefix(space == std::string_view::npos ? text.size() : space + 1);
    }
    if (!fields[3].empty()) lines.push_back(Line{fields[0], fields[1], fields[2], fields[3]});
  }
  const auto flagged = [](std::string_view flags, std::string_view flag) {
    return ("," + std::string(flags) + ",").find("," + std::string(flag) + ",") !=
           std::string::npos;
  };
  const auto myself = std::find_if(lines.begin(), lines.end(),
                                   [&](const Line& l) { return flagged(l.flags, "myself"); });
  if (myself == lines.end() || myself->id.empty()) return std::nullopt;
  // A master demoted since the record was written: its replicas are not the ones to count.
  if (!flagged(myself->flags, "master")) return std::nullopt;
  std::vector<std::string> addresses;
  for (const auto& l : lines) {
    // "fail" (not "fail?", one node's suspicion): a majority of masters cannot reach it, so it
    // cannot win their votes; counting it would refuse every new ttl until CLUSTER FORGET.
    if (l.master != myself->id || flagged(l.flags, "fail")) continue;
    addresses.emplace_back(l.address.substr(0, l.address.find_first_of("@,")));
  }
  return addresses;
}

std::optional<std::size_t> replicas_of_myself(std::string_view cluster_nodes) {
  const auto addresses = replica_addresses_of_myself(cluster_nodes);
  if (!addresses) return std::nullopt;
  return addresses->size();
}

std::optional<std::vector<std::string>> connected_replicas(std::string_view info) {
  std::vector<std::string> addresses;
  bool master = false;
  while (!info.empty()) {
    const auto end = info.find('\n');
    std::string_view line = info.substr(0, end);
    info.remove_prefix(end == std::string_view::npos ? info.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line == "role:master") master = true;
    // slave<N>:ip=<ip>,port=<port>,state=<state>,offset=<offset>,lag=<lag>
    if (!line.starts_with("slave") || line.find(":ip=") == std::string_view::npos) continue;
    std::string_view fields = line.substr(line.find(":ip=") + 1);
    std::string_view ip, port;
    while (!fields.empty()) {
      const auto comma = fields.find(',');
      const std::string_view field = fields.substr(0, comma);
      fields.remove_prefix(comma == std::string_view::npos ? fields.size() : comma + 1);
      if (field.starts_with("ip=")) ip = field.substr(3);
      if (field.starts_with("port=")) port = field.substr(5);
    }
    // A line without an address still names a connected replica: counted under a name no
    // promotable one has (a larger WAIT, the safe side).
    addresses.push_back(ip.empty() || port.empty() ? std::string(line)
                                                   : std::string(ip) + ":" + std::string(port));
  }
  if (!master) return std::nullopt;
  return addresses;
}

std::size_t replicas_to_wait_for(std::vector<std::string> promotable,
                                 const std::vector<std::string>& connected) {
  promotable.insert(promotable.end(), connected.begin(), connected.end());
  std::sort(promotable.begin(), promotable.end());
  return static_cast<std::size_t>(std::unique(promotable.begin(), promotable.end()) -
                                  promotable.begin());
}

std::optional<Redirect> parse_redirect(const resp::Reply& reply) {
  if (!reply.is_error()) return std::nullopt;
  std::string_view s = reply.str;
  Redirect r;
  if (s.starts_with("MOVED ")) {
    s.remove_prefix(6);
  } else if (s.starts_with("ASK ")) {
    r.ask = true;
    s.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = s.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  unsigned slot = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + space, slot);
  if (ec != std::errc() || end != s.data() + space || slot >= 16384) return std::nullopt;
  r.slot = static_cast<std::uint16_t>(slot);
  const std::string_view endpoint = s.substr(space + 1);
  const auto colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;  // an empty host: the same host
  std::string_view host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const auto port = port_of(endpoint.substr(colon + 1));
  if (!port) return std::nullopt;
  r.host = std::string(host);
  r.port = *port;
  return r;
}

}  // namespace dlock::node
