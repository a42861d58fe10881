// SPDX-License-Identifier: MIT
// The lock service's hardening, without a server: the access log's line, a token's id, the
// guard's token swap (SIGHUP) and the connection flags. End to end: hardening_test.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "service/access_log.h"
#include "service/auth.h"
#include "service/connection_flags.h"
#include "service/guard.h"

namespace dlock::service {
namespace {

using namespace std::chrono_literals;

const std::string kOld = "old-token-0123456789abc";
const std::string kNew = "new-token-0123456789abc";

Tokens tokens_of(const std::string& text) {
  auto t = Tokens::parse(text, "t.txt");
  EXPECT_TRUE(t) << t.error().message();
  return *t;
}

Caller with(const std::string& token) {
  return Caller{"Bearer " + token, "10.0.0.1"};
}

TEST(ServiceHardeningTest, AccessLineHasEveryFieldAndTheStatusAsItsTransportSaysIt) {
  AccessEntry e{
      "http", "POST /v1/locks/{name}:acquire", "jobs/a", "sha256:0123456789ab", "10.0.0.1", "409",
      1500us};
  const auto at = std::chrono::system_clock::time_point(1'700'000'000'123'456us);
  const auto j = nlohmann::json::parse(access_line(e, at));
  EXPECT_EQ(j["time"], "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(j["transport"], "http");
  EXPECT_EQ(j["method"], "POST /v1/locks/{name}:acquire");
  EXPECT_EQ(j["name"], "jobs/a");
  EXPECT_EQ(j["token"], "sha256:0123456789ab");
  EXPECT_EQ(j["peer"], "10.0.0.1");
  EXPECT_EQ(j["status"], 409);
  EXPECT_EQ(j["duration_us"], 1500);
  e.transport = "grpc";
  e.status = "ABORTED";
  EXPECT_EQ(nlohmann::json::parse(access_line(e, at))["status"], "ABORTED");
  // A name that is not UTF-8 still gives one valid line.
  e.name = std::string("a\xff\nb");
  const auto line = access_line(e, at);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_TRUE(nlohmann::json::accept(line));
}

TEST(ServiceHardeningTest, TokenIdsNeverHoldTheTokenAndStayTheSameAcrossFiles) {
  const Tokens first = tokens_of(kOld + " jobs/\n" + kNew + " *\n");
  const Tokens second = tokens_of("# reordered\n" + kNew + " other/\n");
  EXPECT_EQ(first.id(1), second.id(0));
  EXPECT_NE(first.id(0), first.id(1));
  EXPECT_EQ(first.id(0).size(), std::string("sha256:").size() + 12);
  EXPECT_EQ(first.id(0).find(kOld.substr(0, 6)), std::string::npos);
}

TEST(ServiceHardeningTest, ReplacedTokensServeLaterCallsAndRemovedOnesAreRefused) {
  Guard guard(tokens_of(kOld + " jobs/\n"), Limits{});
  EXPECT_FALSE(guard.check(with(kOld), "jobs/a"));
  EXPECT_EQ(guard.check(with(kNew), "jobs/a")->code, Code::unauthenticated);
  const std::string old_id = guard.token_id(with(kOld));
  EXPECT_FALSE(old_id.empty());
  ASSERT_TRUE(guard.replace_tokens(tokens_of(kNew + " other/\n")));
  EXPECT_EQ(guard.check(with(kOld), "jobs/a")->code, Code::unauthenticated);
  EXPECT_EQ(guard.check(with(kNew), "jobs/a")->code, Code::permission_denied);
  EXPECT_FALSE(guard.check(with(kNew), "other/a"));
  EXPECT_EQ(guard.token_id(with(kOld)), "");
  EXPECT_NE(guard.token_id(with(kNew)), old_id);
  // Without tokens at start there is nothing to replace: a reload cannot close (or open) it.
  Guard open(std::nullopt, Limits{});
  EXPECT_FALSE(open.replace_tokens(tokens_of(kNew + " *\n")));
  EXPECT_FALSE(open.check(with("anything"), "x"));
  EXPECT_EQ(open.token_id(with(kNew)), "");
}

TEST(ServiceHardeningTest, ConnectionFlagsGiveTheLimitsOrSayWhichFlagIsWrong) {
  cli::ConnectionFlags flags;
  auto limits = cli::http_limits_of(flags);
  ASSERT_TRUE(limits);
  EXPECT_EQ(limits->max_connections, 1024u);
  EXPECT_EQ(limits->idle_timeout, 10s);
  flags.idle_timeout = "250ms";
  flags.http_max_connections = 7;
  limits = cli::http_limits_of(flags);
  ASSERT_TRUE(limits);
  EXPECT_EQ(limits->max_connections, 7u);
  EXPECT_EQ(limits->idle_timeout, 250ms);
  for (const auto& [max, idle, says] :
       {std::tuple<std::size_t, const char*, const char*>{0, "1s", "--http-max-connections"},
        {1, "0", "--idle-timeout"},
        {1, "soon", "--idle-timeout"}}) {
    flags.http_max_connections = max;
    flags.idle_timeout = idle;
    auto bad = cli::http_limits_of(flags);
    ASSERT_FALSE(bad) << idle;
    EXPECT_NE(bad.error().message().find(says), std::string::npos) << bad.error().message();
  }
}

}  // namespace
}  // namespace dlock::service
