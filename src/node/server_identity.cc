// SPDX-License-Identifier: MIT
#include "node/server_identity.h"

#include <algorithm>
#include <cstdlib>

#include "scripts/script.h"

namespace dlock::node {

std::string info_field(const std::string& info, std::string_view field) {
  const std::string key = std::string(field) + ":";
  for (std::size_t at = 0; at < info.size();) {
    const auto end = std::min(info.find_first_of("\r\n", at), info.size());
    if (info.compare(at, key.size(), key) == 0) {
      return info.substr(at + key.size(), end - at - key.size());
    }
    at = end + 1;
  }
  return {};
}

std::string master_identity(const std::string& info) {
  const std::string run_id = info_field(info, "run_id");
  const std::string replid = info_field(info, "master_replid");
  if (run_id.empty() || replid.empty() || info_field(info, "role") != "master") return {};
  return run_id + "/" + replid;
}

bool may_evict(const std::string& info) {
  const std::string limit = info_field(info, "maxmemory");
  const std::string policy = info_field(info, "maxmemory_policy");
  return !limit.empty() && limit != "0" && !policy.empty() && policy != "noeviction";
}

resp::Reply identity_reply(std::vector<std::string> parts, const std::vector<std::string>& infos) {
  std::sort(parts.begin(), parts.end());
  std::string all;
  std::string servers;
  for (const auto& part : parts) {
    all += part + ",";
    servers += (servers.empty() ? "" : ",") + part.substr(0, part.find('/'));
  }
  resp::Reply info;
  info.type = resp::Reply::Type::string;
  info.str =
      "run_id:" + scripts::sha1_hex(all) + "\r\nuptime_in_seconds:0\r\nservers:" + servers + "\r\n";
  long long evicted = 0;
  bool risk_named = false;
  for (const auto& server : infos) {
    evicted += std::atoll(info_field(server, "evicted_keys").c_str());
    if (!risk_named && may_evict(server)) {
      risk_named = true;
      info.str += "maxmemory:" + info_field(server, "maxmemory") +
                  "\r\nmaxmemory_policy:" + info_field(server, "maxmemory_policy") + "\r\n";
    }
  }
  info.str += "evicted_keys:" + std::to_string(evicted) + "\r\n";
  return info;
}

}  // namespace dlock::node
