// SPDX-License-Identifier: MIT
#include "sim/sim_trace.h"

#include <cstdio>

namespace dlock::sim {

void Trace::step(std::size_t index, const std::string& what) {
  lines_.push_back("#" + std::to_string(index) + " @" + at(Clock::now()) + "ms " + what);
}

void Trace::line(const std::string& text) {
  lines_.push_back("    " + text);
}

std::string Trace::str() const {
  std::string out;
  for (const auto& l : lines_) out += l + "\n";
  return out;
}

std::string Trace::at(Clock::time_point t) const {
  const double ms = std::chrono::duration<double, std::milli>(t - start_).count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  return buf;
}

std::uint64_t shape_digest(std::string_view trace) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a
  const auto add = [&](char c) { h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL; };
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  for (std::size_t i = 0; i < trace.size();) {
    if (!hex(trace[i])) {
      add(trace[i++]);
      continue;
    }
    // A run of hex characters: kept if it is a short word ("a", "faded"), else one '#'.
    std::size_t end = i;
    bool digit = false;
    for (; end < trace.size() && hex(trace[end]); ++end)
      digit = digit || (trace[end] >= '0' && trace[end] <= '9');
    if (digit || end - i >= 8) {
      add('#');
    } else {
      for (std::size_t k = i; k < end; ++k) add(trace[k]);
    }
    i = end;
  }
  return h;
}

std::vector<std::uint64_t> shape_digests(std::string_view trace) {
  std::vector<std::uint64_t> parts;
  std::size_t from = 0;
  // A step's line starts with '#' (Trace::step).
  for (auto at = trace.find("\n#"); at != std::string_view::npos; at = trace.find("\n#", at + 1)) {
    parts.push_back(shape_digest(trace.substr(from, at + 1 - from)));
    from = at + 1;
  }
  parts.push_back(shape_digest(trace.substr(from)));
  return parts;
}

std::string describe(const node::Call& call) {
  if (!call.script) {
    std::string out;
    for (const std::string_view a : call.keys) (out += (out.empty() ? "" : " ")) += a;
    return out;
  }
  std::string out(call.script->name);
  out += " keys=";
  for (std::size_t i = 0; i < call.keys.size(); ++i) (out += (i ? "," : "")) += call.keys[i];
  out += " args=";
  for (std::size_t i = 0; i < call.args.size(); ++i) {
    // run_ids are long: their first 8 characters tell them apart in a trace.
    const std::string a(call.args[i]);
    out += (i ? "," : "") + (a.size() > 24 ? a.substr(0, 8) + ".." : a);
  }
  return out;
}

std::string describe(const resp::Reply& reply) {
  switch (reply.type) {
    case resp::Reply::Type::nil:
      return "nil";
    case resp::Reply::Type::status:
      return reply.str;
    case resp::Reply::Type::error:
      return "ERR(" + reply.str + ")";
    case resp::Reply::Type::integer:
      return std::to_string(reply.integer);
    case resp::Reply::Type::string: {
      // INFO: only the fields the client reads.
      const auto field = [&](const std::string& name) {
        const auto at = reply.str.find(name + ":");
        if (at == std::string::npos) return std::string("?");
        const auto from = at + name.size() + 1;
        return reply.str.substr(from, reply.str.find('\r', from) - from);
      };
      if (reply.str.find("run_id:") == std::string::npos) return "\"" + reply.str + "\"";
      return "info(run_id=" + field("run_id").substr(0, 8) + " up=" + field("uptime_in_seconds") +
             "s)";
    }
    case resp::Reply::Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < reply.elements.size(); ++i) {
        out += (i ? "," : "") + describe(reply.elements[i]);
      }
      return out + "]";
    }
  }
  return "?";
}

}  // namespace dlock::sim
