// SPDX-License-Identifier: MIT
// dlock::Millis: every std::chrono duration converts, rounded up, saturating, never overflowing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "dlock/client.h"
#include "dlock/mutex.h"
#include "dlock/types.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

TEST(MillisTest, WholeUnitsConvertExactly) {
  EXPECT_EQ(Millis(2s), 2000ms);
  EXPECT_EQ(Millis(1500ms), 1500ms);
  EXPECT_EQ(Millis(std::chrono::minutes(3)), 180000ms);
  EXPECT_EQ(Millis(3000000us), 3000ms);
  EXPECT_EQ(Millis(), 0ms);
  EXPECT_EQ(Millis(42).count(), 42);
}

TEST(MillisTest, FractionsRoundUpSoATtlOrWaitIsNeverShortened) {
  EXPECT_EQ(Millis(std::chrono::duration<double>(1.5)), 1500ms);
  EXPECT_EQ(Millis(1.5s), 1500ms);  // a long double literal
  EXPECT_EQ(Millis(250us), 1ms);
  EXPECT_EQ(Millis(1001us), 2ms);
  EXPECT_EQ(Millis(1ns), 1ms);
  EXPECT_EQ(Millis(std::chrono::duration<double, std::milli>(0.0001)), 1ms);
  EXPECT_EQ(Millis(-1500us), -1ms);  // toward +infinity: still refused as a ttl
}

TEST(MillisTest, HugeValuesSaturateAndNanIsZero) {
  EXPECT_EQ(Millis(std::chrono::hours::max()), milliseconds::max());
  EXPECT_EQ(Millis(std::chrono::hours::min()), milliseconds::min());
  EXPECT_EQ(Millis(std::chrono::duration<double>(1e300)), milliseconds::max());
  EXPECT_EQ(Millis(std::chrono::duration<double>(std::numeric_limits<double>::infinity())),
            milliseconds::max());
  EXPECT_EQ(Millis(std::chrono::duration<double>(std::nan(""))), 0ms);
  // A period whose numerator and denominator are both above 1: no overflowing multiply.
  using Thirds = std::chrono::duration<long long, std::ratio<1, 3>>;
  EXPECT_EQ(Millis(Thirds(2)), 667ms);
  const Millis big(Thirds(20'000'000'000'000'000LL));  // about 6.67e18 ms: fits
  EXPECT_GT(big.count(), 6'666'666'666'666'000'000LL);
  EXPECT_LE(big.count(), 6'666'666'666'666'668'000LL);
}

TEST(MillisTest, IsAMillisecondsDurationEverywhere) {
  const Millis m(2s);
  const milliseconds as_base = m;
  EXPECT_EQ(as_base, 2000ms);
  EXPECT_EQ(m / 4, 500ms);
  EXPECT_EQ(m * 2, 4000ms);
  EXPECT_LT(m, 3s);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(m), 2s);
  static_assert(!std::is_convertible_v<int, Millis>, "a bare number has no unit");
}

// The API takes any unit: options fields, Client::lock's wait, Lease::extend, Mutex waits.
TEST(MillisTest, ApiTakesAnyUnit) {
  LockOptions o;
  o.ttl = std::chrono::duration<double>(1.5);
  o.renew_every = 250us;
  o.retry_delay = std::chrono::duration<float, std::milli>(2.5F);
  EXPECT_EQ(o.ttl, 1500ms);
  EXPECT_EQ(o.renew_every, 1ms);
  EXPECT_EQ(o.retry_delay, 3ms);
  ClientOptions c;
  c.node_timeout = 0.2s;
  EXPECT_EQ(c.node_timeout, 200ms);
  static_assert(
      std::is_invocable_v<decltype(&Client::lock), Client&, std::string_view,
                          std::chrono::duration<double>, const LockOptions&, std::stop_token>);
  static_assert(
      std::is_invocable_v<decltype(static_cast<Result<void> (Lease::*)(Millis)>(&Lease::extend)),
                          Lease&, std::chrono::microseconds>);
  static_assert(std::is_invocable_v<decltype(&Mutex::try_lock_for<double, std::ratio<1>>), Mutex&,
                                    std::chrono::duration<double>>);
}

}  // namespace
}  // namespace dlock
