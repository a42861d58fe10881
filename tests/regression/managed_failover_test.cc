// SPDX-License-Identifier: MIT
// A managed or hardened Redis, second round (managed_redis_test.cc is the first): what the
// services and careful operators do to a running server, on real redis-server processes.
//   1. a coordinated failover as managed services run it: CLIENT PAUSE WRITE while the replica
//      catches up, FAILOVER (the old master becomes a replica of the new one), the address
//      moved; and the same failover of a master whose replicas accept writes
//      (replica-read-only no), seen by a client that keeps its connection to the old master;
//      and where replicas refuse writes (replica-read-only yes, Redis's default), where the
//      scripts go without their role check (master_only.lua) and are refused all the same;
//   2. a server whose wall clock steps (NTP in step mode): Redis expires keys by it, and the
//      nodes' own records (dlock:boots) are kept on it;
//   3. another program's slow script (busy-reply-threshold): BUSY replies;
//   4. commands renamed (rename-command EVALSHA / EVAL), a database the server lacks;
//   5. a proxy in front of the server that loses one reply and keeps the connection (as one may
//      when its backend fails over with requests in flight).
// docs/safety.md ("What dlock needs from a managed or hardened Redis") sums it up.
#include <dlock/async.h>
#include <dlock/dlock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <asio/use_future.hpp>
#include <atomic>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lock/keys.h"
#include "support/lock_clients.h"
#include "support/redis_server.h"
#include "support/replication.h"
#include "support/tcp_proxy.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::RedisServer;
using test::ServerOptions;

using test::fixed;
using test::in_sync;
using test::info_field;
using test::info_text;
using test::quick_master;
using test::replica_of;
using test::with;

Client client_of(const std::vector<std::string>& urls) {
  return test::client_of(urls, 1000ms);  // generous: a loaded 2-core machine
}

bool ok(const test::ReplyPtr& r) {
  return r && r->type == REDIS_REPLY_STATUS;
}

long long pttl(const RedisServer& server, const std::string& key) {
  auto r = server.command({"PTTL", key});
  return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -3;
}

std::string role(const RedisServer& server) {
  return info_field(server, "replication", "role");
}

// FAILOVER on `old_master`: it pauses writes until its replica has everything, becomes that
// replica's replica, and the replica is master. Waits until both say so.
void fail_over(RedisServer& old_master, RedisServer& replica) {
  ASSERT_TRUE(ok(old_master.command({"FAILOVER"})));
  ASSERT_TRUE(eventually(
      [&] {
        return role(old_master) == "slave" && role(replica) == "master" && in_sync(old_master);
      },
      15s))
      << "the failover did not complete";
}

// ---------------------------------------------------------------------------------------------
// 1. Coordinated failover.

// What ElastiCache, Memorystore and Azure Cache do for a planned failover (an upgrade, a scale
// step): writes paused on the old master while its replica catches up, then the promotion,
// and the address moved to the new master. A holder with a watchdog keeps its lock throughout
// (the new master has its key; renewals count on it while it sits out its restart
// quarantine); a waiter gets the lock once it is released, never before; nothing is left.
// Renewals and attempts blocked by the pause run late on a server that is a replica by then,
// which refuses them (READONLY).
TEST(ManagedFailoverTest, ACoordinatedFailoverBehindOneAddressKeepsOneHolderAtATime) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer first(quick_master());
  RedisServer second(replica_of(first));
  ASSERT_TRUE(eventually([&] { return in_sync(second); }));
  test::TcpProxy address("127.0.0.1", first.port());
  const std::string url = "redis://127.0.0.1:" + std::to_string(address.port());
  Client holder_client = client_of({url});
  Client waiter_client = client_of({url});

  std::atomic<bool> lost{false};
  LockOptions watched;
  watched.ttl = 6s;  // renewed every 2 s
  watched.owner = OwnerToken("holder");
  watched.on_lost = [&](const Error&) { lost = true; };
  auto lease = holder_client.try_lock("job", watched);
  ASSERT_TRUE(lease) << lease.error().message();
  std::atomic<bool> released{false};
  auto waiter = std::async(std::launch::async, [&]() -> Result<bool> {
    auto got = waiter_client.lock("job", 40s, fixed(3s, "waiter"));
    if (!got) return got.error();
    const bool after_release = released.load();
    (void)got->unlock();
    return after_release;
  });
  ASSERT_TRUE(eventually([&] {
    auto r = first.command({"PUBSUB", "NUMSUB", lock::release_channel("job")});
    return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->integer == 1;
  }));

  ASSERT_TRUE(ok(first.command({"CLIENT", "PAUSE", "1500", "WRITE"})));
  fail_over(first, second);
  address.retarget("127.0.0.1", second.port());
  address.cut();

  // Past the holder's ttl, and past the new master's quarantine (the largest ttl, 6 s).
  std::this_thread::sleep_for(8s);
  EXPECT_FALSE(lost) << "the holder lost its lock in a failover that kept every key";
  EXPECT_TRUE(lease->is_held());
  EXPECT_GT(pttl(second, "job"), 1000) << "the new master's key was not renewed";
  released = true;
  auto unlocked = lease->unlock();
  ASSERT_TRUE(unlocked) << unlocked.error().message();
  auto got = waiter.get();
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_TRUE(*got) << "two holders: the waiter got the lock while the holder held it";
  EXPECT_TRUE(eventually([&] { return !second.exists("job") && !first.exists("job"); }))
      << "a key was left behind";
}

// A write pause that ends without a promotion (an aborted failover, an operator's CLIENT
// PAUSE): the scripts it held run late, after their callers gave up on them. An unlock is
// reported done only once its release ran (one that timed out may still run), and an
// acquisition that timed out does not keep the lock taken: its clean-up release runs after it.
TEST(ManagedFailoverTest, ScriptsHeldByAWritePauseRunLateAndLeaveNoLockTaken) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_of({server.url()});
  Client other = client_of({server.url()});
  auto held = client.try_lock("held", fixed(20s, "holder"));
  ASSERT_TRUE(held) << held.error().message();
  ASSERT_TRUE(other.try_lock("warm-up", fixed(20s, "late"))->unlock());  // greeted before
  // Longer than both calls below wait (node_timeout, 1 s each).
  ASSERT_TRUE(ok(server.command({"CLIENT", "PAUSE", "4000", "WRITE"})));
  auto during = other.try_lock("job", fixed(20s, "late"));
  EXPECT_FALSE(during) << "granted while every write was paused";
  auto released = held->unlock();
  if (released) {
    EXPECT_FALSE(server.exists("held")) << "a release reported before it ran";
  }
  std::this_thread::sleep_for(3000ms);  // the pause ends (each call waited 1 s at most)
  auto after = other.try_lock("job", fixed(5s, "next"));
  EXPECT_TRUE(after) << "a late acquisition left the lock taken: " << after.error().message();
  EXPECT_LT(pttl(server, "held"), 20000);  // released late, or running down: never re-armed
}

// The same failover of a master set `replica-read-only no` (writable replicas), seen by a
// client that keeps its connection to the old master (a DNS endpoint that moved: open
// connections stay where they were). It greeted that server as a master moments ago, and
// greets again only after a ttl (or 30 s). Meanwhile the server, a replica now, still runs its
// scripts, and their writes stay there: the new master never sees them. An extension or a
// grant counted from it is a lease the master does not have (the new master's key of 'job'
// expires at its old ttl while the holder believes it extended: two holders once the next
// client is granted there), and a release counted from it leaves the lock held.
TEST(ManagedFailoverTest, AMasterDemotedWhileItAcceptsWritesNeitherGrantsNorExtends) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer first(quick_master({"--replica-read-only", "no"}));
  RedisServer second(replica_of(first, {"--replica-read-only", "no"}));
  ASSERT_TRUE(eventually([&] { return in_sync(second); }));
  Client client = client_of({first.url()});
  auto lease = client.try_lock("job", fixed(20s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(test::replicas_caught_up([&] { return info_text(first, "replication"); }));
  fail_over(first, second);

  // A ttl the key still outlives: renew.lua needs no write for it, so only the role check
  // refuses it here (the server runs scripts that only read, also as a read-only replica).
  auto shorter = lease->extend(5s);
  EXPECT_FALSE(shorter) << "an extension that only the demoted server made was reported";
  if (!shorter) {
    EXPECT_NE(shorter.error().message().find("role:slave"), std::string::npos)
        << "not refused by the role check: " << shorter.error().message();
  }
  // The lease's own ttl, and one no larger: a larger ttl would make the client greet first.
  auto extended = lease->extend();
  EXPECT_FALSE(extended) << "an extension that only the demoted server made was reported";
  auto granted = client.try_lock("other", fixed(20s, "second"));
  EXPECT_FALSE(granted) << "a server that is a replica now granted a lock its master never saw";
  if (!granted) {
    EXPECT_NE(granted.error().message().find("replica"), std::string::npos)
        << granted.error().message();
  }
  EXPECT_FALSE(first.exists("other"));
  auto released = lease->unlock();
  EXPECT_FALSE(released) << "a release that only the demoted server made was reported";
  EXPECT_TRUE(second.exists("job"));
}

// How many INFO commands `server` ran: commandstats counts those that scripts run (the role
// check of master_only.lua reads INFO replication), and the queries made here.
long long info_calls(const RedisServer& server) {
  const std::string stats = info_field(server, "commandstats", "cmdstat_info");  // calls=N,...
  if (stats.rfind("calls=", 0) != 0) return 0;
  return std::atoll(stats.c_str() + 6);
}

// The INFO commands `server` ran during `cycles` lock cycles (try_lock and unlock of `name`)
// of `client`: two a cycle when the scripts check the role, none when they do not (a greeting
// reads INFO too, once per new connection or 30 s).
long long info_per_cycles(const RedisServer& server, Client& client, int cycles,
                          const std::string& name = "cycle") {
  const long long before = info_calls(server);
  for (int i = 0; i < cycles; ++i) {
    auto lease = client.try_lock(name, fixed(20s, "cycler"));
    EXPECT_TRUE(lease) << lease.error().message();
    if (lease) {
      EXPECT_TRUE(lease->unlock());
    }
  }
  return info_calls(server) - before - 1;  // the first query is counted by the second
}

// True once `server` has answered (or refused, as an ACL does) CONFIG GET at least `n` times:
// a client's question was answered, so what follows is what the answer decided, not what no
// answer yet leaves (the check, either way).
bool config_asked(const RedisServer& server, long long n = 1) {
  return eventually([&] {
    const std::string stats = info_field(server, "commandstats", "cmdstat_config|get");
    if (stats.rfind("calls=", 0) != 0) return false;
    long long calls = std::atoll(stats.c_str() + 6);
    if (const auto at = stats.find("rejected_calls="); at != std::string::npos) {
      calls += std::atoll(stats.c_str() + at + 15);
    }
    return calls >= n;
  });
}

// True once `client`'s scripts on `server` run without the role check (a new connection asks
// replica-read-only after its first requests).
bool check_skipped(const RedisServer& server, Client& client, const std::string& name = "cycle") {
  return eventually([&] { return info_per_cycles(server, client, 10, name) < 10; });
}

// Where a replica refuses writes by itself (replica-read-only yes, Redis's default), the scripts
// go without the role check; where it would not, and where the server cannot be asked (CONFIG
// renamed away, or denied by an ACL: managed services do both), they keep it.
TEST(ManagedRoleCheckTest, SkippedOnlyWhereTheServerSaysItsReplicasRefuseWrites) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer read_only;
  RedisServer writable(with({"--replica-read-only", "no"}));
  Client on_read_only = client_of({read_only.url()});
  Client on_writable = client_of({writable.url()});
  EXPECT_TRUE(check_skipped(read_only, on_read_only))
      << "the role check is still sent to a server whose replicas refuse writes";
  ASSERT_TRUE(on_writable.try_lock("warm-up", fixed(20s, "w"))->unlock());
  ASSERT_TRUE(config_asked(writable)) << "the connection never asked";
  EXPECT_GE(info_per_cycles(writable, on_writable, 10), 20)
      << "the role check was left out where a demoted master would keep the writes";
}

TEST(ManagedRoleCheckTest, AServerWhoseConfigIsRenamedOrDeniedKeepsTheCheck) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer renamed(with({"--rename-command", "CONFIG", ""}));
  RedisServer denied;
  // docs/safety.md's ACL user: @dangerous (CONFIG among it) denied, INFO allowed.
  ASSERT_TRUE(denied.command({"ACL", "SETUSER", "app", "on", ">pw", "~app:*", "~dlock:*",
                              "&dlock:*", "+@all", "-@dangerous", "+info"}));
  Client on_renamed = client_of({renamed.url()});
  Client on_denied = client_of({"redis://app:pw@127.0.0.1:" + std::to_string(denied.port())});
  for (auto* c : {&on_renamed, &on_denied}) {
    ASSERT_TRUE(c->try_lock("app:warm-up", fixed(20s, "w"))->unlock());
  }
  // The denied question is counted (rejected_calls); the renamed one leaves no trace, so it is
  // given the time the denied one took and more.
  ASSERT_TRUE(config_asked(denied)) << "the connection never asked";
  std::this_thread::sleep_for(200ms);
  EXPECT_GE(info_per_cycles(renamed, on_renamed, 10, "app:cycle"), 20)
      << "the role check was left out on a server that renamed CONFIG away";
  EXPECT_GE(info_per_cycles(denied, on_denied, 10, "app:cycle"), 20)
      << "the role check was left out for a user whose ACL denies CONFIG";
}

// replica-read-only turned to `no` on a live connection is noticed (it is asked again while it
// says yes), and kept until the connection is new: a new connection asks again.
TEST(ManagedRoleCheckTest, AConfigSetIsNoticedAndANewConnectionAsksAgain) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_of({server.url()});
  ASSERT_TRUE(check_skipped(server, client));
  ASSERT_TRUE(ok(server.command({"CONFIG", "SET", "replica-read-only", "no"})));
  EXPECT_TRUE(eventually([&] { return info_per_cycles(server, client, 10) >= 20; }))
      << "the role check did not come back once replicas accept writes";
  ASSERT_TRUE(ok(server.command({"CONFIG", "SET", "replica-read-only", "yes"})));
  EXPECT_GE(info_per_cycles(server, client, 10), 20) << "a `no` is kept on its connection";
  auto killed = server.command({"CLIENT", "KILL", "TYPE", "normal"});
  ASSERT_TRUE(killed && killed->type == REDIS_REPLY_INTEGER && killed->integer > 0);
  EXPECT_TRUE(check_skipped(server, client)) << "a new connection did not ask again";
}

// Found in review: a request bound to its connection epoch fails with io_error where an
// unbound one reconnects. A server that closed the client's idle connection (CLIENT KILL, a
// restart, a proxy's idle timeout) within a second of the last `replica-read-only yes` made
// the next call fail, where the checked text reconnected and went through: the node chose the
// unguarded text from ready_epoch() (the close not known yet), and Connection::send noticed the
// close (peer_closed) only afterwards, then refused to write the bound request on the new
// connection. On the io thread (the asio API; the blocking fast path notices the close in
// try_borrow and falls back after fail()). Now the node asks closed_by_server() first and
// sends the checked text, unbound, where the server may be gone.
// How many of 5 renewals and 5 releases (asio API, or the blocking one if `blocking`) failed
// right after the server closed the client's idle connection (CLIENT KILL); `why`: the last.
int failed_after_kills(RedisServer& server, Client& client, bool blocking, std::string& why) {
  int failed = 0;
  for (int round = 0; round < 5; ++round) {
    // A fresh yes: a cycle whose recheck was answered (asked every half second).
    for (int i = 0; i < 3; ++i) {
      auto lease = client.try_lock("warm", fixed(20s, "w"));
      EXPECT_TRUE(lease && lease->unlock());
      std::this_thread::sleep_for(100ms);
    }
    auto held = client.try_lock("held", fixed(20s, "h"));
    EXPECT_TRUE(held) << held.error().message();
    if (!held) return -1;
    auto killed = server.command({"CLIENT", "KILL", "TYPE", "normal"});
    EXPECT_TRUE(killed && killed->type == REDIS_REPLY_INTEGER && killed->integer > 0);
    std::this_thread::sleep_for(20ms);  // the FIN arrived
    // An acquisition greets first (a closed connection may be a new server to the membership),
    // which reconnects; a renewal and a release do not.
    auto extended = blocking ? held->extend(20s) : async_extend(*held, 20s, asio::use_future).get();
    if (!extended) {
      ++failed;
      why = "extend: " + extended.error().message();
    }
    killed = server.command({"CLIENT", "KILL", "TYPE", "normal"});
    std::this_thread::sleep_for(20ms);
    auto released = blocking ? held->unlock() : async_unlock(*held, asio::use_future).get();
    if (!released) {
      ++failed;
      why = "unlock: " + released.error().message();
      (void)client.unlock("held", OwnerToken("h"));
    }
  }
  return failed;
}

TEST(ManagedRoleCheckTest, AnIdleConnectionClosedByTheServerDoesNotFailTheNextCall) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  // Control: where the check stays (CONFIG renamed away) nothing is bound, and every call
  // reconnects and goes through.
  RedisServer renamed(with({"--rename-command", "CONFIG", ""}));
  Client on_renamed = client_of({renamed.url()});
  std::string why;
  EXPECT_EQ(failed_after_kills(renamed, on_renamed, false, why), 0) << why;
  RedisServer server;
  Client client = client_of({server.url()});
  ASSERT_TRUE(check_skipped(server, client));
  why.clear();
  EXPECT_EQ(failed_after_kills(server, client, false, why), 0)
      << "asio API: calls failed only because their idle connection had been closed: " << why;
  why.clear();
  EXPECT_EQ(failed_after_kills(server, client, true, why), 0)
      << "blocking API: calls failed only because their idle connection had been closed: " << why;
}

// Found in review: learn_read_only() took any answer but `yes` to a recheck as a `no` kept
// until the connection was new, also a transient error: BUSY (another program's slow script past
// busy-reply-threshold; CONFIG is not allowed while busy). The role check then stayed on that
// connection for good (an idle `timeout` or a restart aside), though the server still said
// yes. Now BUSY and LOADING are no answer: asked again with the next script.
TEST(ManagedRoleCheckTest, ABusyAnswerToARecheckDoesNotKeepTheCheckForGood) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(with({"--busy-reply-threshold", "100"}));
  Client client = client_of({server.url()});
  ASSERT_TRUE(check_skipped(server, client));
  const std::string spin =
      "local s = redis.call('time') while true do local n = redis.call('time') "
      "if (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 1500000 then return 1 end end";
  auto busy = std::async(std::launch::async, [&] { (void)server.command({"EVAL", spin, "0"}); });
  ASSERT_TRUE(eventually([&] {
    auto r = server.command({"PING"});
    return r && r->type == REDIS_REPLY_ERROR && std::string(r->str).rfind("BUSY", 0) == 0;
  }));
  // Calls meanwhile (refused BUSY), past the half second after which a recheck goes.
  for (int i = 0; i < 12; ++i) {
    (void)client.try_lock("during", fixed(20s, "d"));
    std::this_thread::sleep_for(100ms);
  }
  busy.wait();
  ASSERT_TRUE(eventually([&] { return ok(server.command({"PING"})); }));
  auto answer = server.command({"CONFIG", "GET", "replica-read-only"});
  ASSERT_TRUE(answer && answer->type == REDIS_REPLY_ARRAY && answer->elements == 2 &&
              std::string(answer->element[1]->str) == "yes");
  EXPECT_TRUE(check_skipped(server, client))
      << "the role check stays after a BUSY moment, the server still saying yes";
}

// The failover of the test above, where replicas refuse writes (replica-read-only yes): the
// client sent its scripts without the role check before, and goes on doing so on the same
// connection after the demotion (it greets again only after a ttl, or 30 s). The demoted server
// must refuse each of them, also those that would only read: an acquisition of a lock held
// (acquire.lua's refusal), a release of a hold that is not there (release.lua's "not held"),
// an extension to a ttl the key still outlives (renew.lua writes nothing then; the round's
// max_ttl_raise.lua, which writes, is refused too). Their shebang (#!lua) makes a read-only
// replica refuse the whole script before it runs: the server's own READONLY, not the role
// check's.
TEST(ManagedFailoverTest, AMasterDemotedWhileItRefusesWritesRunsNoScriptWithoutTheCheck) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer first(quick_master());
  RedisServer second(replica_of(first));
  ASSERT_TRUE(eventually([&] { return in_sync(second); }));
  Client client = client_of({first.url()});
  ASSERT_TRUE(check_skipped(first, client)) << "the role check is still sent";
  auto lease = client.try_lock("job", fixed(20s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(test::replicas_caught_up([&] { return info_text(first, "replication"); }));
  fail_over(first, second);

  // A node trusts a `yes` for a second (ServerNode::kReadOnlyTrust): after the failover's
  // quiet time its first script goes with the check, and asks again. A probe (an acquisition
  // of a new name, refused) before each call below brings the node back to the scripts without
  // it, which the probe's refusal shows (the server's READONLY, not the check's), and leaves
  // the call at least half a second of trust.
  constexpr std::string_view kUpFront = "You can't write against a read only replica";
  const auto probe = [&] {
    ASSERT_TRUE(eventually([&] {
      auto r = client.try_lock("probe", fixed(20s, "probe"));
      return !r && r.error().message().find(kUpFront) != std::string::npos;
    })) << "the client never went back to the scripts without the role check";
  };
  int up_front = 0;
  const auto refused = [&](const char* what, const Error& e) {
    const bool by_server = e.message().find(kUpFront) != std::string::npos;
    const bool by_check = e.message().find("role:slave") != std::string::npos;
    up_front += by_server ? 1 : 0;
    // Never the normal reply of a path that only reads ("held", "not held", "renewed").
    EXPECT_TRUE(by_server || by_check) << what << ": " << e.message();
    if (by_check) std::cout << what << ": refused by the role check (a stall past the trust)\n";
  };
  probe();
  auto shorter = lease->extend(5s);
  EXPECT_FALSE(shorter) << "an extension no write made was reported by the demoted server";
  if (!shorter) refused("extension to a shorter ttl", shorter.error());
  probe();
  auto taken = client.try_lock("job", fixed(20s, "intruder"));
  EXPECT_FALSE(taken);
  if (!taken) refused("acquisition of a held lock", taken.error());
  probe();
  auto granted = client.try_lock("other", fixed(20s, "second"));
  EXPECT_FALSE(granted) << "a server that is a replica now granted a lock its master never saw";
  if (!granted) refused("acquisition", granted.error());
  probe();
  auto nobody = client.unlock("free", OwnerToken("nobody"));
  EXPECT_FALSE(nobody);
  if (!nobody) refused("release of a hold not there", nobody.error());
  probe();
  auto released = lease->unlock();
  EXPECT_FALSE(released) << "a release that only the demoted server made was reported";
  if (!released) refused("release", released.error());
  EXPECT_GT(up_front, 0) << "every call went with the role check";
  EXPECT_FALSE(first.exists("other"));
  EXPECT_FALSE(first.exists("probe"));
  EXPECT_TRUE(second.exists("job"));
}

// ---------------------------------------------------------------------------------------------
// 2. A server's wall clock steps.

ServerOptions steppable() {
  ServerOptions o;
  o.steppable_clock = true;
  return o;
}

// The CPU time (user and system, all threads) process `pid` used so far; -1 ms if it is gone.
std::chrono::milliseconds cpu_time_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  if (text.rfind(')') == std::string::npos) return std::chrono::milliseconds(-1);
  std::istringstream fields(text.substr(text.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  long long ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stoll(field);  // utime, stime
  }
  return std::chrono::milliseconds(ticks * 1000 / sysconf(_SC_CLK_TCK));
}

// A server whose clock is behind stays idle when idle. Its jemalloc background thread took
// the deadlines of its timed waits from the shifted clock, each already past: with memory to
// give back it spun, a core for as long as the server ran, and slowed every other test on the
// machine (kClockShiftServerArgs).
TEST(ManagedClockTest, AServerWhoseClockIsBehindDoesNotSpin) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer x(steppable());
  x.set_clock_shift(-60s);
  const std::string value(100'000, 'v');
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(ok(x.command({"SET", "k" + std::to_string(i), value})));
  for (int i = 0; i < 200; ++i) x.command({"DEL", "k" + std::to_string(i)});  // pages to purge
  const auto before = cpu_time_of(x.pid());
  ASSERT_GE(before, 0ms) << "the server is gone";
  std::this_thread::sleep_for(3s);
  const auto after = cpu_time_of(x.pid());
  ASSERT_GE(after, 0ms) << "the server is gone";
  const auto used = after - before;
  EXPECT_LT(used, 1s) << "an idle server used " << used.count() << " ms of CPU in 3 s";
}

// One of three nodes steps forward a minute: Redis expires its keys at once, the lock key
// among them. A minority that forgets is what Redlock tolerates: the next client is refused,
// and the holder still extends and releases.
TEST(ManagedClockTest, OneNodeOfThreeSteppingForwardDoesNotGiveTheLockTwice) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer x(steppable());
  RedisServer y;
  RedisServer z;
  const std::vector<std::string> urls{x.url(), y.url(), z.url()};
  Client holder = client_of(urls);
  Client other = client_of(urls);
  auto held = holder.try_lock("job", fixed(10s, "holder"));
  ASSERT_TRUE(held) << held.error().message();
  x.set_clock_shift(60s);
  ASSERT_TRUE(eventually([&] { return !x.exists("job"); })) << "the key outlived the step";
  auto stolen = other.try_lock("job", fixed(10s, "other"));
  EXPECT_FALSE(stolen) << "two holders after one node's clock stepped forward";
  auto extended = held->extend();
  EXPECT_TRUE(extended) << extended.error().message();
  auto released = held->unlock();
  EXPECT_TRUE(released) << released.error().message();
}

// A lone node behind one address (a managed endpoint) fails over to a replica that was cut off
// before the last grant (a lossy failover). The promoted replica is a new identity, and the
// node reports it booted when a greeting first saw it, by its own clock (hello.lua: now - the
// time it recorded): it sits out the largest ttl. Its clock then steps back a minute: now is
// before that time, the age negative, and a negative age was read as "no restart seen" (the
// reply's -1): the next client took the node for one that kept its keys, and it granted the
// lock a second time while the first lease, which it never had, was valid.
TEST(ManagedClockTest, AQuarantineOutlastsTheNodesClockSteppingBack) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer first(quick_master());
  ServerOptions replica = replica_of(first);
  replica.steppable_clock = true;
  RedisServer second(replica);
  ASSERT_TRUE(eventually([&] { return in_sync(second); }));
  test::TcpProxy address("127.0.0.1", first.port());
  const std::string url = "redis://127.0.0.1:" + std::to_string(address.port());
  Client holder_client = client_of({url});
  ASSERT_TRUE(holder_client.try_lock("warm-up", fixed(20s, "w"))->unlock());  // the records
  ASSERT_TRUE(test::replicas_caught_up([&] { return info_text(first, "replication"); }));
  ASSERT_TRUE(ok(second.command({"REPLICAOF", "NO", "ONE"})));  // promoted before the grant
  auto held = holder_client.try_lock("job", fixed(20s, "first"));
  ASSERT_TRUE(held) << held.error().message();
  ASSERT_FALSE(second.exists("job"));
  address.retarget("127.0.0.1", second.port());
  address.cut();

  Client second_client = client_of({url});  // sees the new identity: kept out
  auto refused = second_client.try_lock("job", fixed(20s, "second"));
  ASSERT_FALSE(refused) << "granted by a promoted replica that lacks a live lease";
  second.set_clock_shift(-60s);  // NTP steps the new master's clock back
  Client third_client = client_of({url});
  auto stolen = third_client.try_lock("job", fixed(20s, "third"));
  EXPECT_TRUE(held->is_held());
  EXPECT_FALSE(stolen) << "two holders: the promoted replica, its clock stepped back, granted "
                          "'job' while 'first' holds it";
  if (!stolen) {
    EXPECT_NE(stolen.error().message().find("restarted recently"), std::string::npos)
        << stolen.error().message();
  }
}

// ---------------------------------------------------------------------------------------------
// 3. A slow script of another program.

// Past busy-reply-threshold (lua-time-limit before Redis 7), Redis answers every other command
// BUSY until the script ends. dlock's calls meanwhile fail with that error and change nothing,
// and none of them runs late. An unlock() that failed so ends the lease without releasing it:
// a retried unlock() reported success, the key still there until its ttl (fixed); the owner's
// release by name releases it.
TEST(ManagedBusyTest, AnotherProgramsSlowScriptFailsCallsClearlyAndNothingRunsLate) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(with({"--busy-reply-threshold", "200"}));
  Client client = client_of({server.url()});
  auto lease = client.try_lock("job", fixed(20s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  // Reads only (TIME), so SCRIPT KILL could end it; it ends by itself after 3 s.
  const std::string spin =
      "local s = redis.call('time') while true do local n = redis.call('time') "
      "if (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 3000000 then return 1 end end";
  auto busy = std::async(std::launch::async, [&] { (void)server.command({"EVAL", spin, "0"}); });
  ASSERT_TRUE(eventually([&] {
    auto r = server.command({"PING"});
    return r && r->type == REDIS_REPLY_ERROR && std::string(r->str).rfind("BUSY", 0) == 0;
  }));
  auto released = lease->unlock();
  const bool busy_still = server.command({"PING"})->type == REDIS_REPLY_ERROR;
  if (released) {
    EXPECT_FALSE(server.exists("job")) << "a release reported that did not run";
  } else {
    EXPECT_NE(released.error().message().find("BUSY"), std::string::npos)
        << released.error().message();
  }
  busy.wait();
  ASSERT_TRUE(eventually([&] { return ok(server.command({"PING"})); }));
  if (!released && busy_still) {
    EXPECT_TRUE(server.exists("job")) << "a release refused BUSY ran late";
    // The caller retries: the lease ended with the first unlock(), which did not release it.
    auto again = lease->unlock();
    EXPECT_FALSE(again) << "a retried unlock() reported a release that did not happen";
    EXPECT_TRUE(server.exists("job"));
    auto by_owner = client.unlock("job", OwnerToken("holder"));  // what does release it
    ASSERT_TRUE(by_owner) << by_owner.error().message();
  }
  EXPECT_FALSE(server.exists("job"));
}

// ---------------------------------------------------------------------------------------------
// 4. Renamed commands, databases.

// rename-command EVALSHA "" (and SCRIPT): every script goes by EVAL, as when an ACL denies
// EVALSHA (managed_redis_test.cc).
TEST(ManagedRenamedTest, ScriptsRunByEvalWhenEvalshaIsRenamedAway) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(
      with({"--rename-command", "EVALSHA", "", "--rename-command", "SCRIPT", "SCRIPT_x"}));
  Client client = client_of({server.url()});
  auto lease = client.try_lock("job", fixed(10s, "x"));
  ASSERT_TRUE(lease) << lease.error().message();
  auto extended = lease->extend();
  ASSERT_TRUE(extended) << extended.error().message();
  auto released = lease->unlock();
  ASSERT_TRUE(released) << released.error().message();
  EXPECT_FALSE(server.exists("job"));
}

// Without EVAL and EVALSHA under their names (Lua turned off by renaming), nothing works, and
// the error says why.
TEST(ManagedRenamedTest, AServerWithoutEvalSaysDlockNeedsIt) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(
      with({"--rename-command", "EVAL", "EVAL_x", "--rename-command", "EVALSHA", "EVALSHA_x"}));
  Client client = client_of({server.url()});
  auto lease = client.try_lock("job", fixed(10s, "x"));
  ASSERT_FALSE(lease);
  const std::string message = lease.error().message();
  EXPECT_NE(message.find("unknown command"), std::string::npos) << message;
  EXPECT_NE(message.find("Lua script"), std::string::npos) << message;
}

// A URL's database that the server does not have (`databases`): the error names it.
TEST(ManagedDatabaseTest, ADatabaseTheServerLacksIsNamed) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(with({"--databases", "4"}));
  Client client = client_of({server.url() + "/7"});
  auto lease = client.try_lock("job", fixed(10s, "x"));
  ASSERT_FALSE(lease);
  EXPECT_NE(lease.error().message().find("DB index is out of range"), std::string::npos)
      << lease.error().message();
}

// Replies are matched to requests by order. When a proxy lost a release's reply, the
// asynchronous acquisitions pipelined behind it each read their successor's reply: a chaos run
// saw one read another name's grant while a second client held its name (two holders). Here
// a second client holds half the names; none of them may be granted to the first, whatever
// replies are lost, and every name the first is granted is held on the server.
TEST(ManagedProxyTest, ALostReplyNeverGrantsAPipelinedAcquisitionANameHeldElsewhere) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  test::TcpProxy proxy("127.0.0.1", server.port());
  Client other = client_of({server.url()});
  Client client = client_of({"redis://127.0.0.1:" + std::to_string(proxy.port())});
  constexpr int kNames = 16;
  std::vector<Lease> held_elsewhere;
  for (int i = 0; i < kNames; ++i) {
    auto lease = other.try_lock("held-" + std::to_string(i), test::fixed(60s));
    ASSERT_TRUE(lease) << lease.error().message();
    held_elsewhere.push_back(std::move(*lease));
  }
  int granted = 0;
  for (int round = 0; round < 6; ++round) {
    const std::string mine = "mine-" + std::to_string(round);
    Result<Lease> lease = Error(errc::io_error, "not tried");
    ASSERT_TRUE(eventually(
        [&] {
          lease = client.try_lock(mine, test::fixed(60s));
          return lease.has_value();
        },
        5s))
        << "the connection did not serve again after a lost reply: " << lease.error().message();
    proxy.lose_next_reply("dlock:release:{" + mine + "}");
    std::vector<std::future<Result<Lease>>> asked;
    std::vector<std::string> names;
    auto unlocked = dlock::async_unlock(*lease, asio::use_future);
    for (int i = 0; i < kNames; ++i) {
      names.push_back("held-" + std::to_string(i));
      names.push_back("free-" + std::to_string(round) + "-" + std::to_string(i));
    }
    // Apart, so that each is a call of its own (not one batch call), sent while the release
    // and the calls before it may still wait for their replies.
    for (const auto& name : names) {
      asked.push_back(dlock::async_try_lock(client, name, test::fixed(60s), asio::use_future));
      std::this_thread::sleep_for(2ms);
    }
    (void)unlocked.get();
    for (std::size_t k = 0; k < names.size(); ++k) {
      auto got = asked[k].get();
      if (!got) continue;
      ++granted;
      EXPECT_EQ(names[k].rfind("free-", 0), 0U) << names[k] << " granted while held elsewhere";
      EXPECT_EQ(server.command({"EXISTS", names[k]})->integer, 1)
          << names[k] << " granted, not held";
      (void)got->unlock();
    }
    // What failed undid what it did: no name is left locked by an acquisition that failed.
    for (const auto& name : names) {
      if (name.rfind("free-", 0) != 0) continue;
      EXPECT_TRUE(eventually(
          [&] {
            return server.command({"EXISTS", name})->integer == 0;
          },
          5s))
          << name << " left locked";
    }
    proxy.disarm();
  }
  EXPECT_GT(granted, 0) << "nothing was granted at all: the test proves nothing";
  EXPECT_EQ(proxy.stats().lost_targeted, 6U) << "a release's reply was lost in every round";
}

}  // namespace
}  // namespace dlock
