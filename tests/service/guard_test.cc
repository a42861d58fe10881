// SPDX-License-Identifier: MIT
// The lock service's security and limits, without a server: the token file's format (each
// error naming its line), bearer headers, prefixes, the limits, the count of concurrent waits,
// and the order in which the guard checks them. End to end: security_test.py.
#include "service/guard.h"

#include <gtest/gtest.h>

#include "service/auth.h"
#include "service/limits.h"
#include "service/security_flags.h"

namespace dlock::service {
namespace {

using namespace std::chrono_literals;

const char* kJobs = "jobs-token-0123456789";
const char* kAdmin = "admin-token-0123456789";

Tokens tokens() {
  auto t = Tokens::parse(
      std::string("# comment\n\n") + kJobs + " jobs/ reports/\n" + kAdmin + "\t*\n", "t.txt");
  EXPECT_TRUE(t) << t.error().message();
  return *t;
}

Code code_of(const std::optional<Failure>& f) {
  return f ? f->code : Code::ok;
}

template <typename T>
Code code_of(const Outcome<T>& o) {
  const auto* f = std::get_if<Failure>(&o);
  return f ? f->code : Code::ok;
}

TEST(ServiceSecurityTest, TokenFileErrorsNameTheLineAndNeverTheToken) {
  auto error = [](const std::string& text) {
    auto t = Tokens::parse(text, "t.txt");
    EXPECT_FALSE(t) << text;
    return t ? std::string() : t.error().message();
  };
  EXPECT_NE(error("# only a comment\n").find("no token"), std::string::npos);
  EXPECT_NE(error("\nshort jobs/\n").find("t.txt:2: "), std::string::npos);
  EXPECT_NE(error("jobs-token-0123456789\n").find("t.txt:1: a token without"), std::string::npos);
  EXPECT_NE(error("bad\"token\"0123456789 jobs/\n").find("t.txt:1: "), std::string::npos);
  EXPECT_NE(error("jobs-token-0123456789 jobs/\r\n").find("control character"), std::string::npos);
  EXPECT_NE(error("jobs-token-0123456789 * jobs/\n").find("stands alone"), std::string::npos);
  const auto twice = error("x\n#\njobs-token-0123456789 a\njobs-token-0123456789 b\n");
  EXPECT_NE(twice.find("t.txt:1: "), std::string::npos) << twice;  // "x": too short, first
  const auto dup = error("jobs-token-0123456789 a\njobs-token-0123456789 b\n");
  EXPECT_NE(dup.find("t.txt:2: the same token"), std::string::npos) << dup;
  EXPECT_EQ(dup.find("jobs-token"), std::string::npos) << dup;
  EXPECT_FALSE(Tokens::load("/nonexistent/tokens"));
  EXPECT_FALSE(Tokens::load("/"));
}

TEST(ServiceSecurityTest, BearerTokensAndPrefixes) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer   abc  "), "abc");
  EXPECT_EQ(bearer_token("Basic abc"), "");
  EXPECT_EQ(bearer_token("Bearer"), "");
  EXPECT_EQ(bearer_token("Bearerabc"), "");
  const Tokens t = tokens();
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(code_of(t.authenticate("")), Code::unauthenticated);
  EXPECT_EQ(code_of(t.authenticate("Bearer jobs-token-012345678")), Code::unauthenticated);
  auto jobs = t.authenticate(std::string("Bearer ") + kJobs);
  ASSERT_EQ(code_of(jobs), Code::ok);
  const std::size_t entry = std::get<std::size_t>(jobs);
  EXPECT_EQ(code_of(t.authorize(entry, "jobs/a")), Code::ok);
  EXPECT_EQ(code_of(t.authorize(entry, "reports/x")), Code::ok);
  EXPECT_EQ(code_of(t.authorize(entry, "jobs")), Code::permission_denied);
  EXPECT_EQ(code_of(t.authorize(entry, "other")), Code::permission_denied);
  auto admin = t.authenticate(std::string("Bearer ") + kAdmin);
  ASSERT_EQ(code_of(admin), Code::ok);
  EXPECT_EQ(code_of(t.authorize(std::get<std::size_t>(admin), "anything")), Code::ok);
}

TEST(ServiceSecurityTest, LimitsOnNameTtlAndWait) {
  Limits limits;
  limits.max_ttl = 1000ms;
  limits.max_wait = 500ms;
  EXPECT_EQ(code_of(check_name_limit(limits, std::string(512, 'n'))), Code::ok);
  EXPECT_EQ(code_of(check_name_limit(limits, std::string(513, 'n'))), Code::invalid_argument);
  EXPECT_EQ(code_of(check_name_limit(limits, "")), Code::invalid_argument);
  EXPECT_EQ(code_of(check_ttl_limit(limits, 1000)), Code::ok);
  EXPECT_EQ(code_of(check_ttl_limit(limits, 1001)), Code::invalid_argument);
  EXPECT_EQ(code_of(check_wait_limit(limits, 500)), Code::ok);
  EXPECT_EQ(code_of(check_wait_limit(limits, 501)), Code::invalid_argument);
}

TEST(ServiceSecurityTest, WaitCounterGivesPlacesBackWithTheirLastSlot) {
  WaitCounter counter(2);
  auto a = counter.enter("x");
  auto b = counter.enter("x");
  ASSERT_EQ(code_of(a), Code::ok);
  ASSERT_EQ(code_of(b), Code::ok);
  EXPECT_EQ(code_of(counter.enter("x")), Code::resource_exhausted);
  EXPECT_EQ(code_of(counter.enter("y")), Code::ok);  // another caller; its slot goes at once
  EXPECT_EQ(counter.waiting("x"), 2u);
  EXPECT_EQ(counter.waiting("y"), 0u);
  std::get<WaitCounter::Slot>(a).reset();
  EXPECT_EQ(counter.waiting("x"), 1u);
  EXPECT_EQ(code_of(counter.enter("x")), Code::ok);
}

TEST(ServiceSecurityTest, GuardChecksTheTokenFirstThenLimitsThenPrefixThenPlaces) {
  Limits limits;
  limits.max_ttl = 1000ms;
  limits.max_wait = 1000ms;
  limits.max_waits = 1;
  Guard guard(tokens(), limits);
  const Caller none{"", "127.0.0.1"};
  const Caller jobs{std::string("Bearer ") + kJobs, "127.0.0.1"};
  AcquireInput in;
  in.name = "other";
  in.ttl_ms = 5000;
  EXPECT_EQ(code_of(guard.admit(none, in)), Code::unauthenticated);
  EXPECT_EQ(code_of(guard.admit(jobs, in)), Code::invalid_argument);  // ttl over the maximum
  in.ttl_ms = 1000;
  EXPECT_EQ(code_of(guard.admit(jobs, in)), Code::permission_denied);
  in.name = "jobs/a";
  in.wait_ms = 1000;
  auto place = guard.admit(jobs, in);
  ASSERT_EQ(code_of(place), Code::ok);
  EXPECT_EQ(code_of(guard.admit(jobs, in)), Code::resource_exhausted);
  in.wait_ms = 0;  // a try takes no place
  EXPECT_EQ(code_of(guard.admit(jobs, in)), Code::ok);
  EXPECT_EQ(code_of(guard.check_extend(jobs, "jobs/a", 2000)), Code::invalid_argument);
  EXPECT_EQ(code_of(guard.check_extend(jobs, "jobs/a", 1000)), Code::ok);
  // No ttl: the default (30 s) is over this guard's 1 s maximum.
  EXPECT_EQ(code_of(guard.check_extend(jobs, "jobs/a", std::nullopt)), Code::invalid_argument);
  in.ttl_ms.reset();
  EXPECT_EQ(code_of(guard.admit(jobs, in)), Code::invalid_argument);
  EXPECT_EQ(code_of(guard.check(jobs, "jobs/a")), Code::ok);  // Release, Status: no ttl
  EXPECT_EQ(code_of(guard.check(jobs, "other")), Code::permission_denied);
  EXPECT_EQ(code_of(guard.check_token(none)), Code::unauthenticated);
  EXPECT_EQ(code_of(guard.check_token(jobs)), Code::ok);
  // Without tokens every name is allowed, and waits count per address.
  Guard open(std::nullopt, limits);
  in.ttl_ms = 1000;
  in.wait_ms = 1000;
  auto first = open.admit(none, in);
  ASSERT_EQ(code_of(first), Code::ok);
  EXPECT_EQ(code_of(open.admit(none, in)), Code::resource_exhausted);
  EXPECT_EQ(code_of(open.admit(Caller{"", "10.0.0.2"}, in)), Code::ok);
}

TEST(ServiceSecurityTest, LimitFlags) {
  cli::SecurityFlags flags;
  auto limits = cli::limits_of(flags);
  ASSERT_TRUE(limits);
  EXPECT_EQ(limits->max_ttl, std::chrono::minutes(10));
  EXPECT_EQ(limits->max_wait, std::chrono::minutes(10));
  EXPECT_EQ(limits->max_waits, 256u);
  EXPECT_EQ(limits->max_name_bytes, 512u);
  flags.max_ttl = "0";
  EXPECT_FALSE(cli::limits_of(flags));
  flags.max_ttl = "1h";
  flags.max_wait = "x";
  EXPECT_FALSE(cli::limits_of(flags));
  flags.max_wait = "30s";
  flags.max_waits = 0;
  EXPECT_FALSE(cli::limits_of(flags));
}

}  // namespace
}  // namespace dlock::service
