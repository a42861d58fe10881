// SPDX-License-Identifier: MIT
#include <dlock/result.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <system_error>

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

// issue 15: the exception is a std::system_error carrying the Error's code and details.
TEST(ResultTest, ExceptionIsASystemErrorWithTheCode) {
  Result<int> bad = Error(errc::lock_held, "held by another owner");
  try {
    (void)bad.value();
    FAIL() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::lock_held));
    EXPECT_EQ(e.code(), errc::lock_held);
    EXPECT_NE(std::string(e.what()).find("held by another owner"), std::string::npos);
    const auto* dlock_error = dynamic_cast<const Exception*>(&e);
    ASSERT_NE(dlock_error, nullptr);
    EXPECT_EQ(dlock_error->error().summary(), "held by another owner");
  }
}

TEST(ResultTest, ValueOr) {
  Result<std::string> ok = std::string("a");
  Result<std::string> bad = Error(errc::timeout, "t");
  EXPECT_EQ(ok.value_or("b"), "a");
  EXPECT_EQ(bad.value_or("b"), "b");
  EXPECT_EQ(Result<int>(Error(errc::timeout, "t")).value_or(7), 7);
  auto moved = std::move(ok).value_or("b");
  EXPECT_EQ(moved, "a");
}

TEST(ResultTest, AndThenRunsOnlyOnAValue) {
  int calls = 0;
  auto half = [&](int v) -> Result<int> {
    ++calls;
    if (v % 2 != 0) return Error(errc::invalid_argument, "odd");
    return v / 2;
  };
  EXPECT_EQ(*Result<int>(8).and_then(half).and_then(half), 2);
  EXPECT_EQ(calls, 2);
  auto odd = Result<int>(6).and_then(half).and_then(half);
  EXPECT_TRUE(odd.error().is(errc::invalid_argument));
  EXPECT_EQ(calls, 4);
  auto failed = Result<int>(Error(errc::lock_lost, "gone")).and_then(half);
  EXPECT_TRUE(failed.error().is(errc::lock_lost));
  EXPECT_EQ(calls, 4) << "not called on an error";
  // To another type, and from Result<void>.
  Result<std::string> text = Result<int>(3).and_then(
      [](int v) -> Result<std::string> { return std::string(static_cast<std::size_t>(v), 'x'); });
  EXPECT_EQ(*text, "xxx");
  EXPECT_EQ(*Result<void>().and_then([]() -> Result<int> { return 1; }), 1);
  EXPECT_TRUE(Result<void>(Error(errc::timeout, "t"))
                  .and_then([]() -> Result<int> { return 1; })
                  .error()
                  .is(errc::timeout));
}

// A named Result passes its value by reference (std::expected does): the function may change
// it in place, and a move-only value is not moved out of the Result.
TEST(ResultTest, AndThenOnANamedResultPassesAReference) {
  Result<std::unique_ptr<int>> owned = std::make_unique<int>(1);
  auto r = owned.and_then([](std::unique_ptr<int>& p) -> Result<int> {
    *p += 1;
    return *p;
  });
  EXPECT_EQ(*r, 2);
  ASSERT_NE(owned->get(), nullptr) << "still owned by the Result";
  EXPECT_EQ(**owned, 2);
  auto t = owned.transform([](std::unique_ptr<int>& p) { return *p * 10; });
  EXPECT_EQ(*t, 20);
  EXPECT_NE(owned->get(), nullptr);
}

TEST(ResultTest, ExceptionWhatIsTheErrorMessage) {
  Error e(errc::quorum_not_reached, "no quorum",
          {{"redis://a:1", make_error_code(errc::io_error), "connection refused"}});
  Exception x(e);
  EXPECT_EQ(std::string(x.what()), e.message());
}

TEST(ResultTest, TransformMapsTheValue) {
  Result<int> ok = 4;
  Result<std::string> s = ok.transform([](int v) { return std::to_string(v * 10); });
  EXPECT_EQ(*s, "40");
  Result<int> bad = Error(errc::timeout, "t");
  bool called = false;
  auto still_bad = bad.transform([&](int v) {
    called = true;
    return v;
  });
  EXPECT_FALSE(called);
  EXPECT_TRUE(still_bad.error().is(errc::timeout));
  int seen = 0;
  Result<void> done = ok.transform([&](int v) { seen = v; });
  EXPECT_TRUE(done);
  EXPECT_EQ(seen, 4);
  EXPECT_EQ(*Result<void>().transform([] { return 2; }), 2);
  auto moved =
      Result<std::unique_ptr<int>>(std::make_unique<int>(9)).transform([](std::unique_ptr<int> p) {
        return *p;
      });
  EXPECT_EQ(*moved, 9);
}

TEST(ResultTest, OrElseRecoversFromAnError) {
  auto retry = [](const Error& e) -> Result<int> {
    if (e.is(errc::lock_held)) return 0;
    return e;
  };
  EXPECT_EQ(*Result<int>(5).or_else(retry), 5);
  EXPECT_EQ(*Result<int>(Error(errc::lock_held, "h")).or_else(retry), 0);
  EXPECT_TRUE(Result<int>(Error(errc::timeout, "t")).or_else(retry).error().is(errc::timeout));
  int handled = 0;
  Result<void> ignored = Result<void>(Error(errc::lock_lost, "gone")).or_else([&](Error e) {
    handled += e.is(errc::lock_lost) ? 1 : 0;
    return Result<void>();
  });
  EXPECT_TRUE(ignored);
  EXPECT_EQ(handled, 1);
  EXPECT_TRUE(Result<void>().or_else([&](const Error&) {
    ++handled;
    return Result<void>();
  }));
  EXPECT_EQ(handled, 1);
}

}  // namespace
}  // namespace dlock
