// SPDX-License-Identifier: MIT
#include <dlock/result.h>
#include <gtest/gtest.h>

namespace dlock {
namespace {

TEST(ErrorTest, MessageNamesEachFailingNode) {
  Error e(errc::quorum_not_reached, "no quorum",
          {{"redis://a:1", make_error_code(errc::io_error), "connection refused"},
           {"redis://b:2", make_error_code(errc::timeout), "no reply within 200 ms"}});
  EXPECT_EQ(e.message(),
            "no quorum; redis://a:1: connection refused; redis://b:2: no reply within 200 ms");
  EXPECT_TRUE(e.is(errc::quorum_not_reached));
  EXPECT_EQ(e.code().category().name(), std::string("dlock"));
}

TEST(ErrorTest, ContentionIsTellable) {
  EXPECT_TRUE(is_contention(make_error_code(errc::lock_held)));
  EXPECT_TRUE(is_contention(make_error_code(errc::wait_timeout)));
  EXPECT_FALSE(is_contention(make_error_code(errc::quorum_not_reached)));
}

TEST(ResultTest, ValueOrError) {
  Result<int> ok = 5;
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 5);
  Result<int> bad = Error(errc::lock_lost, "gone");
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error().is(errc::lock_lost));
  EXPECT_THROW((void)bad.value(), Exception);
  Result<void> done;
  EXPECT_TRUE(done);
  EXPECT_THROW(throw_if_error(Result<void>(Error(errc::timeout, "t"))), Exception);
}

}  // namespace
}  // namespace dlock
