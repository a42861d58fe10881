// SPDX-License-Identifier: MIT
// Broken servers: a node that answers garbage, a truncated reply, the wrong type, nothing at
// all, or hangs up. Each must give an error naming the node, never a crash or a hang, and
// never leave a lock behind on the good nodes.
#include <dlock/dlock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "support/redis_server.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

enum class Misbehaviour { garbage, truncated, wrong_type, silent, hang_up };

// A TCP server on loopback that reads whatever comes and answers in its one wrong way.
class FakeServer {
 public:
  explicit FakeServer(Misbehaviour how) : how_(how) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(listen_fd_, 16);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
    for (int fd : clients_) close(fd);
    close(listen_fd_);
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_; }

 private:
  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (int fd : clients_) fds.push_back({fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int fd = accept(listen_fd_, nullptr, nullptr);
        if (fd >= 0) ++accepted_;
        if (how_ == Misbehaviour::hang_up) {
          close(fd);
        } else if (fd >= 0) {
          clients_.push_back(fd);
        }
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & POLLIN)) continue;
        char buf[4096];
        if (read(fds[i].fd, buf, sizeof buf) <= 0) continue;
        answer(fds[i].fd);
      }
    }
  }
  void answer(int fd) {
    std::string reply;
    switch (how_) {
      case Misbehaviour::garbage:
        reply = "?!*&garbage\r\n";
        break;
      case Misbehaviour::truncated:
        reply = "*3\r\n:1\r\n$10\r\nabc";
        break;
      case Misbehaviour::wrong_type:
        reply = "+OK\r\n";
        break;
      case Misbehaviour::silent:
      case Misbehaviour::hang_up:
        return;
    }
    // MSG_NOSIGNAL: a client that hung up must not kill the test with SIGPIPE.
    (void)send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
  }

  Misbehaviour how_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::vector<int> clients_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

class FakeServerTest : public ::testing::TestWithParam<Misbehaviour> {
 protected:
  void SetUp() override { DLOCK_REQUIRE_REDIS_OR_SKIP(); }
  // A node broken from the start never answers a lock set's first greeting: the set starts
  // from a quorum only with the opt-in (ClientOptions::start_from_quorum).
  static Client client_for(std::vector<std::string> nodes, bool start_from_quorum = true) {
    ClientOptions o;
    o.nodes = std::move(nodes);
    o.node_timeout = 200ms;
    o.connect_timeout = 500ms;
    o.start_from_quorum = start_from_quorum;
    return std::move(Client::create(o)).value();
  }
};

// Without the opt-in, a brand-new set with a broken node does not start (restart protection
// cannot tell it from a set whose other members all restarted empty), and says so.
TEST_P(FakeServerTest, ABrandNewSetWithItStartsOnlyWithTheOptIn) {
  FakeServer fake(GetParam());
  test::RedisCluster good(2);
  Client strict = client_for({good[0].url(), fake.url(), good[1].url()}, false);
  auto refused = strict.try_lock("job");
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(errc::quorum_not_reached)) << refused.error().message();
  EXPECT_NE(refused.error().message().find("first greeting needs an answer from every node"),
            std::string::npos)
      << refused.error().message();
  EXPECT_FALSE(good[0].exists("job"));
  Client opted_in = client_for({good[0].url(), fake.url(), good[1].url()});
  auto lease = opted_in.try_lock("job");
  ASSERT_TRUE(lease) << lease.error().message();
  // Once the set started, the strict client sees members: it needs no opt-in any more.
  ASSERT_TRUE(lease->unlock());
  Client later = client_for({good[0].url(), fake.url(), good[1].url()}, false);
  auto again = later.try_lock("job");
  EXPECT_TRUE(again) << again.error().message();
}

TEST_P(FakeServerTest, AloneItGivesAnErrorNamingItQuickly) {
  FakeServer fake(GetParam());
  Client client = client_for({fake.url()});
  for (int i = 0; i < 3; ++i) {
    const auto start = Clock::now();
    auto lease = client.try_lock("job");
    EXPECT_FALSE(lease);
    EXPECT_LT(Clock::now() - start, 3s) << "no hang";
    if (!lease) {
      EXPECT_NE(lease.error().message().find(fake.url()), std::string::npos)
          << lease.error().message();
    }
  }
  EXPECT_FALSE(client.status("job")->held);
}

TEST_P(FakeServerTest, TwoGoodNodesOutvoteItAndNothingIsLeftBehind) {
  FakeServer fake(GetParam());
  test::RedisCluster good(2);
  Client client = client_for({good[0].url(), fake.url(), good[1].url()});
  for (int i = 0; i < 10; ++i) {
    auto lease = client.lock("job", 5s);
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_TRUE(good[0].exists("job"));
    ASSERT_TRUE(lease->unlock());
    EXPECT_FALSE(good[0].exists("job"));
    EXPECT_FALSE(good[1].exists("job"));
  }
}

TEST_P(FakeServerTest, WithTwoOfThemTheGoodNodeIsReleased) {
  FakeServer fake_a(GetParam());
  FakeServer fake_b(GetParam());
  test::RedisServer good;
  Client client = client_for({fake_a.url(), good.url(), fake_b.url()});
  auto lease = client.try_lock("job");
  ASSERT_FALSE(lease);
  EXPECT_TRUE(lease.error().is(errc::quorum_not_reached)) << lease.error().message();
  EXPECT_FALSE(good.exists("job")) << "the failed attempt must be rolled back";
}

// A waiter's subscriber connection reconnects by itself (Connection::set_keep_connected). To a
// node that accepts and then fails every connection, that must back off, not loop: a server at
// maxclients, for one, accepts, answers an error and hangs up.
TEST_P(FakeServerTest, WaiterDoesNotHammerItWithReconnections) {
  FakeServer fake(GetParam());
  test::RedisCluster good(2);
  Client client = client_for({good[0].url(), fake.url(), good[1].url()});
  LockOptions holder;
  holder.ttl = 10s;
  holder.owner = OwnerToken("holder");
  auto held = client.lock("job", 10s, holder);  // waited for: a busy machine missed one try
  ASSERT_TRUE(held) << held.error().message();
  auto waiter = std::async(std::launch::async, [&] { return client.lock("job", 4s); });
  std::this_thread::sleep_for(500ms);  // subscribed by now
  const int before = fake.accepted();
  std::this_thread::sleep_for(3s);
  const int during = fake.accepted() - before;
  // Backing off from 50 ms to 2 s makes about 6 connections in 3 s; a loop makes thousands.
  EXPECT_LT(during, 60) << during << " connections in 3 s";
  auto lease = waiter.get();
  EXPECT_FALSE(lease);
}

std::string misbehaviour_name(const ::testing::TestParamInfo<Misbehaviour>& param) {
  const char* names[] = {"Garbage", "Truncated", "WrongType", "Silent", "HangUp"};
  return names[static_cast<int>(param.param)];
}

INSTANTIATE_TEST_SUITE_P(Broken, FakeServerTest,
                         ::testing::Values(Misbehaviour::garbage, Misbehaviour::truncated,
                                           Misbehaviour::wrong_type, Misbehaviour::silent,
                                           Misbehaviour::hang_up),
                         misbehaviour_name);

}  // namespace
}  // namespace dlock
