// SPDX-License-Identifier: MIT
// The chaos runner's fault-injecting proxy, against a real redis-server: it forwards (pipelines
// and large values included), and each fault does what it says: a dropped reply's command ran,
// a blackholed one did not, a delayed reply comes late and in order, a cut ends connections,
// and lose_next_reply loses exactly the reply it was aimed at.
#include "support/tcp_proxy.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <thread>

#include "support/redis_server.h"
#include "support/resp_frames.h"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

class TcpProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    // hiredis 0.14 writes with write(): a cut connection must fail the call, not kill the test.
    signal(SIGPIPE, SIG_IGN);
    server_ = std::make_unique<RedisServer>();
    proxy_ = std::make_unique<TcpProxy>("127.0.0.1", server_->port());
  }
  // A hiredis connection through the proxy; a command without a reply fails after `timeout`.
  ContextPtr connect(std::chrono::milliseconds timeout = 2000ms) {
    const timeval tv{static_cast<time_t>(timeout.count() / 1000),
                     static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    const timeval connect_tv{2, 0};
    ContextPtr c(redisConnectWithTimeout("127.0.0.1", proxy_->port(), connect_tv));
    EXPECT_TRUE(c && c->err == 0) << (c ? c->errstr : "no context");
    if (c) redisSetTimeout(c.get(), tv);
    return c;
  }
  static ReplyPtr run(redisContext* c, const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    return ReplyPtr(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())));
  }
  std::string get(const std::string& key) {
    auto r = server_->command({"GET", key});
    return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "(nil)";
  }
  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<TcpProxy> proxy_;
};

TEST_F(TcpProxyTest, ForwardsCommandsPipelinesAndLargeValues) {
  auto c = connect();
  auto pong = run(c.get(), {"PING"});
  ASSERT_TRUE(pong);
  EXPECT_STREQ(pong->str, "PONG");
  const std::string big(3 << 20, 'x');  // several socket buffers' worth, both ways
  ASSERT_TRUE(run(c.get(), {"SET", "big", big}));
  auto back = run(c.get(), {"GET", "big"});
  ASSERT_TRUE(back);
  EXPECT_EQ(std::string(back->str, back->len), big);
  for (int i = 0; i < 100; ++i) redisAppendCommand(c.get(), "INCR n");
  for (long i = 1; i <= 100; ++i) {
    void* reply = nullptr;
    ASSERT_EQ(redisGetReply(c.get(), &reply), REDIS_OK);
    ReplyPtr r(static_cast<redisReply*>(reply));
    EXPECT_EQ(r->integer, i);
  }
  EXPECT_EQ(proxy_->stats().requests, 103u);
  EXPECT_EQ(proxy_->stats().replies, 103u);
}

TEST_F(TcpProxyTest, DroppedRepliesCommandsRunButTheClientNeverHears) {
  auto c = connect(300ms);
  proxy_->drop_replies();
  EXPECT_FALSE(run(c.get(), {"SET", "k", "v"})) << "a reply came through";
  EXPECT_EQ(get("k"), "v") << "the command did not run on the server";
  proxy_->forward();
  auto fresh = connect();
  auto r = run(fresh.get(), {"GET", "k"});
  ASSERT_TRUE(r);
  EXPECT_STREQ(r->str, "v");
  EXPECT_EQ(proxy_->stats().dropped_replies, 1u);
}

TEST_F(TcpProxyTest, DelayedRepliesComeLateAndInOrder) {
  auto c = connect(3000ms);
  proxy_->delay_replies(300ms);
  const auto start = Clock::now();
  redisAppendCommand(c.get(), "SET a 1");
  redisAppendCommand(c.get(), "INCR a");
  void* first = nullptr;
  void* second = nullptr;
  ASSERT_EQ(redisGetReply(c.get(), &first), REDIS_OK);
  ASSERT_EQ(redisGetReply(c.get(), &second), REDIS_OK);
  const auto took = Clock::now() - start;
  ReplyPtr r1(static_cast<redisReply*>(first));
  ReplyPtr r2(static_cast<redisReply*>(second));
  EXPECT_STREQ(r1->str, "OK");
  EXPECT_EQ(r2->integer, 2);
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 2000ms);
  proxy_->forward();
  const auto again = Clock::now();
  ASSERT_TRUE(run(c.get(), {"PING"}));
  EXPECT_LT(Clock::now() - again, 200ms);
}

TEST_F(TcpProxyTest, BlackholeNeitherDirectionPasses) {
  auto c = connect(300ms);
  proxy_->blackhole();
  EXPECT_FALSE(run(c.get(), {"SET", "k", "v"}));
  EXPECT_EQ(get("k"), "(nil)") << "a blackholed request reached the server";
  proxy_->forward();
  auto fresh = connect();
  EXPECT_TRUE(run(fresh.get(), {"PING"}));
  EXPECT_EQ(proxy_->stats().dropped_requests, 1u);
}

TEST_F(TcpProxyTest, CutClosesEveryConnectionAndNewOnesWork) {
  auto a = connect();
  auto b = connect();
  ASSERT_TRUE(run(a.get(), {"PING"}));
  ASSERT_TRUE(run(b.get(), {"PING"}));
  proxy_->cut();
  ASSERT_TRUE(eventually([&] { return proxy_->stats().cut == 2; }, 2000ms));
  const auto start = Clock::now();
  EXPECT_FALSE(run(a.get(), {"PING"}));
  EXPECT_LT(Clock::now() - start, 1000ms) << "a cut connection should fail at once";
  auto fresh = connect();
  EXPECT_TRUE(run(fresh.get(), {"PING"}));
}

TEST_F(TcpProxyTest, LoseNextReplyLosesOnlyTheMatchingCallsReply) {
  auto c = connect(300ms);
  proxy_->lose_next_reply("target");
  EXPECT_TRUE(proxy_->armed());
  ASSERT_TRUE(run(c.get(), {"SET", "other", "1"}));
  EXPECT_FALSE(run(c.get(), {"SET", "target", "1"})) << "the aimed-at reply came through";
  EXPECT_FALSE(proxy_->armed());
  EXPECT_EQ(get("target"), "1");
  // One shot: the same call again is answered (on a new connection: hiredis gives up on one
  // that timed out).
  auto fresh = connect();
  auto r = run(fresh.get(), {"INCR", "target"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->integer, 2);
  EXPECT_EQ(proxy_->stats().lost_targeted, 1u);
}

TEST_F(TcpProxyTest, LoseNextReplyThenCutClosesAfterTheCommandRan) {
  auto c = connect(3000ms);
  proxy_->lose_next_reply("target", /*then_cut=*/true);
  const auto start = Clock::now();
  EXPECT_FALSE(run(c.get(), {"SET", "target", "1"}));
  EXPECT_LT(Clock::now() - start, 1000ms) << "the connection should close, not time out";
  EXPECT_EQ(get("target"), "1");
  EXPECT_EQ(proxy_->stats().cut, 1u);
}

TEST_F(TcpProxyTest, SubscribedConnectionsAreNeverTargeted) {
  auto subscriber = connect();
  proxy_->lose_next_reply("target");
  auto sub = run(subscriber.get(), {"SUBSCRIBE", "target"});
  ASSERT_TRUE(sub) << "the subscription's confirmation was lost";
  EXPECT_TRUE(proxy_->armed());
  auto c = connect(300ms);
  EXPECT_FALSE(run(c.get(), {"PUBLISH", "target", "m"}));
  void* message = nullptr;
  ASSERT_EQ(redisGetReply(subscriber.get(), &message), REDIS_OK) << "the published message";
  ReplyPtr m(static_cast<redisReply*>(message));
  ASSERT_EQ(m->elements, 3u);
  EXPECT_STREQ(m->element[2]->str, "m");
}

TEST_F(TcpProxyTest, ServerDownClosesConnectionsThroughTheProxy) {
  auto c = connect();
  ASSERT_TRUE(run(c.get(), {"PING"}));
  server_->kill9();
  EXPECT_FALSE(run(c.get(), {"PING"}));
  const timeval tv{1, 0};
  ContextPtr fresh(redisConnectWithTimeout("127.0.0.1", proxy_->port(), tv));
  ASSERT_TRUE(fresh);
  if (fresh->err == 0) {
    redisSetTimeout(fresh.get(), tv);
    EXPECT_FALSE(run(fresh.get(), {"PING"})) << "answered for a server that is down";
  }
  server_->restart();
  auto back = connect();
  EXPECT_TRUE(run(back.get(), {"PING"}));
}

TEST(RespFramesTest, FindsWhereEachValueEnds) {
  EXPECT_EQ(resp_frame_length("+OK\r\n"), 5u);
  EXPECT_EQ(resp_frame_length("+OK\r"), 0u);
  EXPECT_EQ(resp_frame_length("$3\r\nabc\r\n+x"), 9u);
  EXPECT_EQ(resp_frame_length("$3\r\nab"), 0u);
  EXPECT_EQ(resp_frame_length("$-1\r\n"), 5u);
  EXPECT_EQ(resp_frame_length("*2\r\n:1\r\n*1\r\n$1\r\na\r\n"), 19u);
  EXPECT_EQ(resp_frame_length("*2\r\n:1\r\n*1\r\n$1\r\n"), 0u);
  EXPECT_EQ(resp_frame_length("%1\r\n+k\r\n:1\r\n"), 12u);
  EXPECT_EQ(resp_frame_length("PING\r\n+x"), 6u);
  EXPECT_EQ(resp_frame_length("$3\r\nabcd\r\n"), kRespMalformed);
  EXPECT_EQ(resp_frame_length("*1\r\n?\r\n"), kRespMalformed);
  EXPECT_EQ(resp_command_name("*2\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n"), "SUBSCRIBE");
  EXPECT_EQ(resp_command_name("ping\r\n"), "PING");
}

}  // namespace
}  // namespace dlock::test
