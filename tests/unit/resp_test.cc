// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <random>

#include "resp/encode.h"
#include "resp/reader.h"

namespace dlock::resp {
namespace {

TEST(EncodeTest, EncodesArgvAsRespArray) {
  EXPECT_EQ(encode_command({"SET", "k", "v a"}), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv a\r\n");
}

TEST(EncodeTest, BinarySafe) {
  const std::string bin("a\0b\r\n", 5);
  EXPECT_EQ(encode_command({"GET", bin}), std::string("*2\r\n$3\r\nGET\r\n$5\r\na\0b\r\n\r\n", 24));
}

// hiredis is the reference: our encoder must write exactly what redisFormatCommandArgv writes,
// for empty, binary and long arguments and for many of them.
TEST(EncodeTest, SameBytesAsHiredis) {
  std::mt19937 rng(7);
  for (int round = 0; round < 500; ++round) {
    std::vector<std::string> args(1 + rng() % 40);
    for (auto& a : args) {
      a.resize(rng() % 4 == 0 ? rng() % 20000 : rng() % 40);
      for (auto& c : a) c = static_cast<char>(rng());
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    std::vector<std::string_view> views;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
      views.emplace_back(a);
    }
    char* expected = nullptr;
    const int n =
        redisFormatCommandArgv(&expected, static_cast<int>(argv.size()), argv.data(), lens.data());
    ASSERT_GT(n, 0);
    const std::string want(expected, static_cast<std::size_t>(n));
    std::free(expected);  // NOLINT: allocated by hiredis with malloc
    ASSERT_EQ(encode_command(views), want) << "round " << round;
  }
}

TEST(ReaderTest, ReadsEveryReplyType) {
  Reader r;
  ASSERT_TRUE(r.feed("+OK\r\n-ERR bad\r\n:42\r\n$3\r\nabc\r\n$-1\r\n*2\r\n:1\r\n$1\r\nx\r\n"));
  auto s = r.next();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->type, Reply::Type::status);
  EXPECT_EQ(s->str, "OK");
  auto e = r.next();
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->is_error());
  EXPECT_TRUE(e->is_error_code("ERR"));
  EXPECT_FALSE(e->is_error_code("ER"));
  auto i = r.next();
  ASSERT_TRUE(i);
  EXPECT_EQ(i->integer, 42);
  auto b = r.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->str, "abc");
  auto n = r.next();
  ASSERT_TRUE(n);
  EXPECT_TRUE(n->is_nil());
  auto a = r.next();
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->is_array());
  ASSERT_EQ(a->elements.size(), 2u);
  EXPECT_EQ(a->elements[0].integer, 1);
  EXPECT_EQ(a->elements[1].str, "x");
  EXPECT_FALSE(r.next());
  EXPECT_TRUE(r.error().empty());
}

TEST(ReaderTest, ReassemblesRepliesSplitAtEveryByte) {
  const std::string wire = "*3\r\n:1\r\n$5\r\nhello\r\n*1\r\n-NOSCRIPT x\r\n";
  Reader r;
  std::optional<Reply> got;
  for (char c : wire) {
    ASSERT_FALSE(got);
    ASSERT_TRUE(r.feed(std::string_view(&c, 1)));
    got = r.next();
  }
  ASSERT_TRUE(got);
  ASSERT_EQ(got->elements.size(), 3u);
  EXPECT_EQ(got->elements[1].str, "hello");
  EXPECT_TRUE(got->elements[2].elements[0].is_error_code("NOSCRIPT"));
}

TEST(ReaderTest, ReportsProtocolErrors) {
  for (const char* bad : {"?what\r\n", "$abc\r\n", ":12x\r\n"}) {
    Reader r;
    r.feed(bad);
    EXPECT_FALSE(r.next()) << bad;
    EXPECT_FALSE(r.error().empty()) << bad;
    EXPECT_FALSE(r.feed("+OK\r\n")) << "a broken stream stays broken";
  }
}

TEST(ReaderTest, RefusesAnArrayHeaderThatWouldAllocateGigabytes) {
  Reader r;
  r.feed("*444444445\r\n");  // found by reply_fuzz: 3.5 GB of pointers in hiredis 0.14
  EXPECT_FALSE(r.next());
  EXPECT_NE(r.error().find("reply too large"), std::string::npos) << r.error();
}

TEST(ReaderTest, ElementBudgetIsPerReply) {
  Reader r;
  std::string many = "*1000\r\n";
  for (int i = 0; i < 1000; ++i) many += ":1\r\n";
  for (int round = 0; round < 3000; ++round) {  // 3 million elements over many replies
    ASSERT_TRUE(r.feed(many));
    auto reply = r.next();
    ASSERT_TRUE(reply) << r.error();
    ASSERT_EQ(reply->elements.size(), 1000u);
  }
}

TEST(ReaderTest, DeepNestingDoesNotCrash) {
  std::string deep;
  for (int i = 0; i < 20; ++i) deep += "*1\r\n";
  deep += ":1\r\n";
  Reader r;
  r.feed(deep);
  auto got = r.next();
  // hiredis limits nesting depth; either a value or a clean error, never a crash.
  EXPECT_TRUE(got.has_value() || !r.error().empty());
}

}  // namespace
}  // namespace dlock::resp
