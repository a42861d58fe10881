// SPDX-License-Identifier: MIT
// Keep-alive's pure parts: which sets are refused before anything is sent, how often a set is
// renewed, and the HTTP renew endpoint's route and body.
#include <gtest/gtest.h>

#include "service/http_routes.h"
#include "service/keepalive.h"

namespace dlock::service {
namespace {

LeaseRenewal lease(std::int64_t ttl_ms, std::string owner = "o") {
  return LeaseRenewal{HoldRef{"job", std::move(owner)}, ttl_ms};
}

TEST(ServiceKeepAliveTest, SetsAreCheckedBeforeAnythingIsSent) {
  EXPECT_FALSE(check_renewals({}));  // an empty set: renew nothing
  EXPECT_FALSE(check_renewals({lease(1000), lease(50, "p")}));
  EXPECT_TRUE(check_renewals({lease(0)}));  // a keep-alive names its ttl
  EXPECT_TRUE(check_renewals({lease(-1)}));
  EXPECT_TRUE(check_renewals({lease(1000, "")}));
  LeaseRenewal no_name = lease(1000);
  no_name.hold.name.clear();
  EXPECT_TRUE(check_renewals({no_name}));
  LeaseRenewal stray_permit = lease(1000);
  stray_permit.hold.permit = 2;  // a permit outside PERMIT
  EXPECT_TRUE(check_renewals({stray_permit}));
  std::vector<LeaseRenewal> many(kMaxKeepAliveLeases + 1, lease(1000));
  EXPECT_EQ(check_renewals(many)->code, Code::invalid_argument);
  many.pop_back();
  EXPECT_FALSE(check_renewals(many));
}

TEST(ServiceKeepAliveTest, RenewedEveryThirdOfTheShortestTtl) {
  EXPECT_EQ(renew_period({lease(3000), lease(900), lease(6000)}), std::chrono::milliseconds(300));
  EXPECT_EQ(renew_period({lease(15)}), std::chrono::milliseconds(10));  // at least 10 ms
}

TEST(ServiceKeepAliveTest, TheHttpRenewEndpoint) {
  EXPECT_EQ(route("POST", "/v1/leases:renew").route, Route::renew);
  EXPECT_FALSE(route("GET", "/v1/leases:renew").method_ok);
  auto in = renew_input(
      R"({"leases": [{"name": "a", "owner": "o", "ttl_ms": 900},
                     {"name": "b", "owner": "p", "ttl_ms": 500, "mode": "PERMIT", "permit": 3}]})");
  ASSERT_TRUE(std::holds_alternative<std::vector<LeaseRenewal>>(in));
  const auto& leases = std::get<std::vector<LeaseRenewal>>(in);
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_EQ(leases[0].hold.name, "a");
  EXPECT_EQ(leases[0].ttl_ms, 900);
  EXPECT_EQ(leases[1].hold.mode, Mode::permit);
  EXPECT_EQ(leases[1].hold.permit, 3u);
  for (const char* bad :
       {"", "[]", R"({"leases": {}})", R"({"leases": [7]})", R"({"leases": [{"owner": "o"}]})",
        R"({"leases": [{"name": "a", "owner": "o"}]})",
        R"({"leases": [{"name": "a", "owner": "o", "ttl_ms": 5, "mode": "READ"}]})"}) {
    EXPECT_TRUE(std::holds_alternative<Failure>(renew_input(bad))) << bad;
  }
}

}  // namespace
}  // namespace dlock::service
