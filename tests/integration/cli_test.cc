// SPDX-License-Identifier: MIT
// The dlock tool end to end against real servers: exit codes, the child's environment, renewal
// of long commands, lost locks, status output, and processes sharing a counter.
#include <dlock/dlock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/redis_server.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::RedisCluster;
using test::RedisServer;
using test::ServerOptions;

struct Ran {
  int status = -1;
  std::string output;  // stdout and stderr together
};

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the dlock tool through the shell, with `env` (NAME=value, already quoted as needed).
Ran dlock_tool(const std::vector<std::string>& args, const std::string& env = "") {
  std::string cmd = env + " " + quote(DLOCK_TOOL_PATH);
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " 2>&1";
  Ran ran;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return ran;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) ran.output.append(buf, n);
  const int status = pclose(p);
  ran.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    server_ = std::make_unique<RedisServer>();
  }
  std::vector<std::string> node() { return {"-r", server_->url()}; }
  std::vector<std::string> args(std::initializer_list<std::string> before,
                                std::initializer_list<std::string> after = {}) {
    std::vector<std::string> out(before);
    const std::vector<std::string> flags = node();
    out.insert(out.begin() + 1, flags.begin(), flags.end());
    out.insert(out.end(), after);
    return out;
  }
  Client client() {
    ClientOptions o;
    o.nodes = {server_->url()};
    return std::move(Client::create(o)).value();
  }
  // `name` held for 30 s by an owner other than the tool's (the lease keeps its client alive).
  Result<Lease> held_by_someone_else(const std::string& name) {
    LockOptions o;
    o.ttl = 30s;
    o.owner = OwnerToken("someone-else");
    return client().try_lock(name, o);
  }
  std::unique_ptr<RedisServer> server_;
};

// The number after the last `prefix` in `text` (0 if absent): a fencing token the command
// printed. Tokens start from the node's clock in microseconds and grow by one per grant.
std::uint64_t token_after(const std::string& text, const std::string& prefix) {
  const auto at = text.rfind(prefix);
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + prefix.size()));
}

TEST_F(CliTest, ReturnsTheCommandsOwnExitStatus) {
  EXPECT_EQ(dlock_tool(args({"run", "job", "--", "sh", "-c", "exit 7"})).status, 7);
  EXPECT_EQ(dlock_tool(args({"run", "job", "--", "true"})).status, 0);
  EXPECT_FALSE(server_->exists("job")) << "released after the command";
}

TEST_F(CliTest, CommandSeesNameTokenAndValidity) {
  Ran ran = dlock_tool(args({"run", "-t", "10s", "job", "--", "sh", "-c",
                             "echo \"N=$DLOCK_NAME T=$DLOCK_TOKEN V=$DLOCK_VALIDITY_MS\""}));
  ASSERT_EQ(ran.status, 0) << ran.output;
  EXPECT_NE(ran.output.find("N=job T="), std::string::npos) << ran.output;
  const std::uint64_t first = token_after(ran.output, "T=");
  EXPECT_GT(first, 0u) << ran.output;
  const auto v = std::stol(ran.output.substr(ran.output.find("V=") + 2));
  EXPECT_GT(v, 8000);
  EXPECT_LE(v, 10000);
  Ran again = dlock_tool(args({"run", "job", "--", "sh", "-c", "echo T=$DLOCK_TOKEN"}));
  EXPECT_EQ(token_after(again.output, "T="), first + 1) << again.output;
}

// --min-replicas on a server without replicas: WAIT confirms none, so no node counts (69), the
// message says why, and nothing is left locked. A bad --replica-timeout is a usage error.
TEST_F(CliTest, ReplicaGuardWithoutReplicasRefusesTheLock) {
  Ran ran = dlock_tool(args(
      {"run", "--min-replicas", "1", "--replica-timeout", "20ms", "job", "--", "echo", "never"}));
  EXPECT_EQ(ran.status, 69) << ran.output;
  EXPECT_NE(ran.output.find("REPLICAS 0 of 1"), std::string::npos) << ran.output;
  EXPECT_EQ(ran.output.find("never"), std::string::npos);
  EXPECT_FALSE(server_->exists("job"));
  Ran bad = dlock_tool(args({"acquire", "--min-replicas", "1", "--replica-timeout", "1h", "job"}));
  EXPECT_EQ(bad.status, 64) << bad.output;
  EXPECT_FALSE(server_->exists("job"));
}

TEST_F(CliTest, HeldBySomeoneElseExits75) {
  auto lease = held_by_someone_else("job");
  ASSERT_TRUE(lease) << lease.error().message();
  Ran ran = dlock_tool(args({"run", "job", "--", "echo", "never"}));
  EXPECT_EQ(ran.status, 75) << ran.output;
  EXPECT_EQ(ran.output.find("never"), std::string::npos);
  const auto start = std::chrono::steady_clock::now();
  Ran waited = dlock_tool(args({"run", "-w", "500ms", "job", "--", "true"}));
  EXPECT_EQ(waited.status, 75) << waited.output;
  EXPECT_GE(std::chrono::steady_clock::now() - start, 450ms);
}

// flock's -E: a script picks the status that means "someone else has it".
TEST_F(CliTest, ConflictExitCodeIsChosenWithE) {
  auto lease = held_by_someone_else("job");
  ASSERT_TRUE(lease) << lease.error().message();
  Ran ran = dlock_tool(args({"run", "-E", "3", "job", "--", "echo", "never"}));
  EXPECT_EQ(ran.status, 3) << ran.output;
  EXPECT_EQ(ran.output.find("never"), std::string::npos);
  Ran waited = dlock_tool(
      args({"run", "--conflict-exit-code", "0", "-w", "200ms", "job", "--", "echo", "never"}));
  EXPECT_EQ(waited.status, 0) << waited.output;
  EXPECT_EQ(waited.output.find("never"), std::string::npos);
  ASSERT_TRUE(lease->unlock());
  // Only a conflict: the command's own status and other failures keep theirs.
  EXPECT_EQ(dlock_tool(args({"run", "-E", "3", "job", "--", "sh", "-c", "exit 9"})).status, 9);
  EXPECT_EQ(dlock_tool(args({"run", "-E", "256", "job", "--", "true"})).status, 64);
  EXPECT_EQ(dlock_tool(args({"run", "-E", "x", "job", "--", "true"})).status, 64);
}

// flock's -c: one shell command line instead of a program and its arguments after '--'.
TEST_F(CliTest, ShellCommandWithC) {
  Ran ran = dlock_tool(args({"run", "job", "-c", "echo \"T=$DLOCK_TOKEN\"; exit 5"}));
  EXPECT_EQ(ran.status, 5) << ran.output;
  const std::uint64_t token = token_after(ran.output, "T=");
  EXPECT_GT(token, 0u) << ran.output;
  EXPECT_FALSE(server_->exists("job")) << "released after the command";
  // Both forms at once, or an empty one, is a usage error and takes no lock.
  EXPECT_EQ(dlock_tool(args({"run", "job", "-c", "true", "--", "true"})).status, 64);
  EXPECT_EQ(dlock_tool(args({"run", "job", "-c", ""})).status, 64);
  EXPECT_EQ(dlock_tool(args({"run", "job", "-c", "", "--", "true"})).status, 64);
  // One node: the token is its counter (acquire.lua's node counter).
  EXPECT_EQ(server_->command({"GET", "dlock:fence-floor"})->str, std::to_string(token));
}

// --fair: waiters queue in arrival order (docs/features.md); from the shell it must take the
// lock and wait like the default mode.
TEST_F(CliTest, FairModeTakesAndWaits) {
  auto lease = held_by_someone_else("job");
  ASSERT_TRUE(lease) << lease.error().message();
  auto ran = std::async(std::launch::async, [&] {
    return dlock_tool(args({"run", "--fair", "-w", "20s", "job", "--", "true"}));
  });
  ASSERT_TRUE(test::eventually(
      [&] {
        return server_->command({"EXISTS", "dlock:queue:{job}"})->integer == 1;
      },
      10s))
      << "the fair waiter must queue";
  ASSERT_TRUE(lease->unlock());
  EXPECT_EQ(ran.get().status, 0);
  EXPECT_FALSE(server_->exists("job"));
}

TEST_F(CliTest, WaitsForTheLockWhenAllowedTo) {
  auto lease = held_by_someone_else("job");
  ASSERT_TRUE(lease) << lease.error().message();
  auto ran = std::async(std::launch::async, [&] {
    return dlock_tool(args({"run", "-w", "20s", "job", "--", "true"}));
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(lease->unlock());
  EXPECT_EQ(ran.get().status, 0);
}

TEST_F(CliTest, NoQuorumExits69) {
  const std::string url = server_->url();
  server_->kill9();
  Ran ran = dlock_tool({"run", "-r", url, "job", "--", "true"});
  EXPECT_EQ(ran.status, 69) << ran.output;
  EXPECT_NE(ran.output.find(url), std::string::npos) << ran.output;
}

TEST_F(CliTest, UsageErrorsExit64) {
  EXPECT_EQ(dlock_tool(args({"run", "-t", "0", "job", "--", "true"})).status, 64);
  EXPECT_EQ(dlock_tool(args({"run", "-t", "abc", "job", "--", "true"})).status, 64);
  EXPECT_EQ(dlock_tool(args({"run", "-w", "-1s", "job", "--", "true"})).status, 64);
  EXPECT_EQ(dlock_tool(args({"run", "--kill-after=-1s", "job", "--", "true"})).status, 64);
  EXPECT_EQ(dlock_tool(args({"run", "--kill-after", "soon", "job", "--", "true"})).status, 64);
  EXPECT_EQ(dlock_tool(args({"run", "job"})).status, 64);
  EXPECT_EQ(dlock_tool(args({"run", "", "--", "true"})).status, 64);
  EXPECT_EQ(dlock_tool({"run", "-r", "nope://x", "job", "--", "true"}).status, 64);
  EXPECT_EQ(
      dlock_tool({"run", "-r", server_->url(), "-r", server_->url(), "job", "--", "true"}).status,
      64);
  EXPECT_EQ(dlock_tool({"frobnicate"}).status, 64);
  EXPECT_EQ(dlock_tool({}).status, 64);
  EXPECT_FALSE(server_->exists("job"));
}

// Options may follow the lock name, after -r too: -r takes one URL, not the name after it.
TEST_F(CliTest, OptionsAfterTheNameFollowingR) {
  Ran ran = dlock_tool({"run", "-r", server_->url(), "job", "-t", "5s", "--", "true"});
  EXPECT_EQ(ran.status, 0) << ran.output;
  Ran status = dlock_tool({"status", "-r", server_->url(), "job", "--json"});
  EXPECT_EQ(status.status, 0) << status.output;
  EXPECT_EQ(status.output.find("required"), std::string::npos) << status.output;
}

// A file in the test's temp dir with `text`, mode `mode`; removed with the test.
class TempFile {
 public:
  TempFile(const std::string& text, mode_t mode) {
    char tmpl[] = "/tmp/dlock-nodes-XXXXXX";
    const int fd = mkstemp(tmpl);
    path_ = tmpl;
    if (fd >= 0) {
      (void)!write(fd, text.data(), text.size());
      fchmod(fd, mode);
      close(fd);
    }
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// issue 15: no password in ps. The URLs come from --redis-file (or DLOCK_REDIS_FILE); the
// command line dlock runs with, as the command sees it in /proc, holds no password.
TEST(CliRedisFileTest, KeepsThePasswordOutOfTheCommandLine) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  ServerOptions o;
  o.extra_args = {"--requirepass", "sesame"};
  o.password = "sesame";
  RedisServer server(o);
  const std::string url = "redis://:sesame@127.0.0.1:" + std::to_string(server.port());
  TempFile nodes("# the lock's node\n" + url + "\n", 0600);
  Ran ran = dlock_tool({"run", "--redis-file", nodes.path(), "job", "--", "sh", "-c",
                        "tr '\\0' ' ' < /proc/$PPID/cmdline; echo; echo T=$DLOCK_TOKEN"});
  ASSERT_EQ(ran.status, 0) << ran.output;
  EXPECT_NE(ran.output.find("dlock run --redis-file"), std::string::npos) << ran.output;
  const std::uint64_t first = token_after(ran.output, "T=");
  EXPECT_GT(first, 0u) << ran.output;
  EXPECT_EQ(ran.output.find("sesame"), std::string::npos) << ran.output;
  EXPECT_EQ(ran.output.find("warning"), std::string::npos) << ran.output;
  Ran from_env = dlock_tool({"run", "job", "--", "true"}, "DLOCK_REDIS_FILE=" + nodes.path());
  EXPECT_EQ(from_env.status, 0) << from_env.output;
  // -r wins over an exported DLOCK_REDIS_FILE (docs/cli.md's order), it is no conflict.
  Ran over_env = dlock_tool({"run", "-r", "redis://127.0.0.1:1", "job", "--", "true"},
                            "DLOCK_REDIS_FILE=" + nodes.path());
  EXPECT_EQ(over_env.status, 69) << over_env.output;
  EXPECT_NE(over_env.output.find("127.0.0.1:1"), std::string::npos) << over_env.output;
  Ran status = dlock_tool({"status", "--redis-file", nodes.path(), "job"});
  EXPECT_EQ(status.status, 0) << status.output;

  // A password on the command line works, with a warning; so does a file others can read.
  Ran visible = dlock_tool({"run", "-r", url, "job", "--", "true"});
  EXPECT_EQ(visible.status, 0) << visible.output;
  EXPECT_NE(visible.output.find("warning: a password given with -r"), std::string::npos)
      << visible.output;
  TempFile readable(url + "\n", 0644);
  Ran open_file = dlock_tool({"run", "--redis-file", readable.path(), "job", "--", "true"});
  EXPECT_EQ(open_file.status, 0) << open_file.output;
  EXPECT_NE(open_file.output.find("chmod 600"), std::string::npos) << open_file.output;
  EXPECT_EQ(server.command({"GET", "dlock:fence-floor"})->str, std::to_string(first + 3));
}

// '#' starts a comment at the start of a line or after a blank (a URL may hold one); a
// password with '#' is written URL-encoded, as in any URL.
TEST(CliRedisFileTest, CommentsAfterABlankAndAnEncodedPassword) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  ServerOptions o;
  o.extra_args = {"--requirepass", "se#cret"};
  o.password = "se#cret";
  RedisServer server(o);
  TempFile nodes("redis://:se%23cret@127.0.0.1:" + std::to_string(server.port()) +
                     "  # the password is URL-encoded\n",
                 0600);
  Ran ran = dlock_tool({"run", "--redis-file", nodes.path(), "job", "--", "true"});
  EXPECT_EQ(ran.status, 0) << ran.output;
}

TEST(CliRedisFileTest, BadFilesAreUsageErrors) {
  TempFile empty("# nothing here\n\n", 0600);
  EXPECT_EQ(dlock_tool({"run", "--redis-file", empty.path(), "job", "--", "true"}).status, 64);
  Ran missing = dlock_tool({"run", "--redis-file", "/nonexistent/nodes", "job", "--", "true"});
  EXPECT_EQ(missing.status, 64);
  EXPECT_NE(missing.output.find("/nonexistent/nodes"), std::string::npos) << missing.output;
  TempFile one("redis://127.0.0.1:1\n", 0600);
  EXPECT_EQ(dlock_tool({"run", "-r", "redis://127.0.0.1:1", "--redis-file", one.path(), "job", "--",
                        "true"})
                .status,
            64)
      << "-r and --redis-file together";
}

TEST_F(CliTest, MissingCommandExits127) {
  Ran ran = dlock_tool(args({"run", "job", "--", "/nonexistent/program"}));
  EXPECT_EQ(ran.status, 127) << ran.output;
  EXPECT_FALSE(server_->exists("job"));
}

TEST_F(CliTest, NodesComeFromDlockRedisWhenNoFlagIsGiven) {
  Ran ran = dlock_tool({"run", "job", "--", "true"}, "DLOCK_REDIS=" + quote(server_->url()));
  EXPECT_EQ(ran.status, 0) << ran.output;
  EXPECT_EQ(server_->command({"EXISTS", "dlock:fence-floor"})->integer, 1) << "taken there";
}

TEST_F(CliTest, KeepsTheLockForACommandThreeTimesLongerThanTheTtl) {
  char tmpl[] = "/tmp/dlock-done-XXXXXX";
  const std::string done = std::string(mkdtemp(tmpl)) + "/done";
  auto ran = std::async(std::launch::async, [&] {
    return dlock_tool(args({"run", "-t", "1s", "job", "--", "sh", "-c", "sleep 3; touch " + done}));
  });
  Client c = client();
  LockOptions o;
  o.ttl = 10s;
  o.owner = OwnerToken("intruder");
  ASSERT_TRUE(test::eventually([&] { return server_->exists("job"); }));
  int probes = 0;
  while (ran.wait_for(50ms) != std::future_status::ready) {
    auto intruder = c.try_lock("job", o);
    if (intruder) {
      // Only fine once the command has finished and dlock has released the lock.
      EXPECT_TRUE(std::filesystem::exists(done))
          << "the lock was free while the command ran (probe " << probes << ")";
      break;
    }
    ++probes;
  }
  Ran result = ran.get();
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_GT(probes, 20);
  std::filesystem::remove_all(std::filesystem::path(done).parent_path());
}

TEST_F(CliTest, LostLockStopsTheCommandAndExits76) {
  const auto start = std::chrono::steady_clock::now();
  auto ran = std::async(std::launch::async, [&] {
    return dlock_tool(args({"run", "-t", "1s", "job", "--", "sleep", "60"}));
  });
  ASSERT_TRUE(test::eventually([&] { return server_->exists("job"); }));
  server_->command({"DEL", "job"});  // the lock vanishes (an operator, a node that lost it)
  Ran result = ran.get();
  EXPECT_EQ(result.status, 76) << result.output;
  EXPECT_NE(result.output.find("lost lock"), std::string::npos) << result.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s) << "the command must be stopped";
}

// docs/cli.md: a command whose lock is lost gets SIGTERM and time to clean up; SIGKILL comes
// only after --kill-after (default 10 s). The trap takes a while on purpose: a SIGKILL sent
// right behind the SIGTERM would land before it writes the file.
TEST_F(CliTest, LostLockGivesTheCommandTimeToRunItsTermTrap) {
  char tmpl[] = "/tmp/dlock-trap-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string ready = dir + "/ready";
  const std::string cleaned = dir + "/cleaned";
  const std::string child = dir + "/child";
  // `wait` (not a foreground sleep) lets the shell take the trap as soon as SIGTERM arrives.
  const std::string script = "trap 'sleep 0.5; echo cleaned > " + quote(cleaned) +
                             "; kill $!; exit 3' TERM; "
                             "sleep 60 </dev/null >/dev/null 2>&1 & echo $! > " +
                             quote(child) + "; touch " + quote(ready) + "; wait";
  auto ran = std::async(std::launch::async, [&] {
    return dlock_tool(args({"run", "-t", "1s", "job", "--", "sh", "-c", script}));
  });
  auto started = [&] {
    return std::filesystem::exists(ready) || ran.wait_for(0s) == std::future_status::ready;
  };
  ASSERT_TRUE(test::eventually(started, 20s));
  ASSERT_TRUE(std::filesystem::exists(ready)) << ran.get().output;
  server_->command({"DEL", "job"});  // the lock vanishes
  ASSERT_EQ(ran.wait_for(40s), std::future_status::ready) << "dlock run must end";
  Ran result = ran.get();
  EXPECT_EQ(result.status, 76) << result.output;
  EXPECT_NE(result.output.find("SIGTERM"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("sending SIGKILL"), std::string::npos) << result.output;
  std::string line;
  std::getline(std::ifstream(cleaned), line);
  EXPECT_EQ(line, "cleaned") << "the TERM trap did not run to its end: " << result.output;
  if (line != "cleaned") {
    pid_t sleeper = 0;
    std::ifstream pid_file(child);
    if (pid_file >> sleeper && sleeper > 0) kill(sleeper, SIGKILL);  // orphaned by the SIGKILL
  }
  std::filesystem::remove_all(dir);
}

TEST_F(CliTest, LostLockKillsACommandThatIgnoresSigtermAfterKillAfter) {
  char tmpl[] = "/tmp/dlock-ignore-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string ready = dir + "/ready";
  // An ignored signal stays ignored across exec: the process dlock started ignores SIGTERM.
  auto ran = std::async(std::launch::async, [&] {
    return dlock_tool(args({"run", "-t", "1s", "--kill-after", "500ms", "job", "--", "sh", "-c",
                            "trap '' TERM; touch " + quote(ready) + "; exec sleep 60"}));
  });
  auto started = [&] {
    return std::filesystem::exists(ready) || ran.wait_for(0s) == std::future_status::ready;
  };
  ASSERT_TRUE(test::eventually(started, 20s));
  ASSERT_TRUE(std::filesystem::exists(ready)) << ran.get().output;
  const auto deleted = std::chrono::steady_clock::now();
  server_->command({"DEL", "job"});
  ASSERT_EQ(ran.wait_for(40s), std::future_status::ready) << "SIGKILL must follow the SIGTERM";
  const auto took = std::chrono::steady_clock::now() - deleted;
  Ran result = ran.get();
  EXPECT_EQ(result.status, 76) << result.output;
  EXPECT_NE(result.output.find("sending SIGKILL"), std::string::npos) << result.output;
  // A lower bound only: the grace was kept. How much later the kill came depends on the load.
  EXPECT_GE(took, 450ms) << result.output;
  std::filesystem::remove_all(dir);
}

// flock -s: readers run side by side, a writer waits for them, and readers wait for a writer.
TEST_F(CliTest, SharedRunsReadTogetherAndExcludeWriters) {
  Client c = client();
  LockOptions o;
  o.ttl = 30s;
  o.owner = OwnerToken("reader-1");
  auto reader = c.try_lock_shared("catalog", o);
  ASSERT_TRUE(reader);
  // Another reader runs at once.
  Ran side =
      dlock_tool(args({"run", "--shared", "catalog", "--", "sh", "-c", "echo $DLOCK_TOKEN"}));
  EXPECT_EQ(side.status, 0) << side.output;
  // A writer does not, while the reader holds it.
  Ran writer = dlock_tool(args({"run", "catalog", "--", "echo", "never"}));
  EXPECT_EQ(writer.status, 75) << writer.output;
  EXPECT_EQ(writer.output.find("never"), std::string::npos);
  // status shows the reader, its kind and ttl.
  auto j = nlohmann::json::parse(dlock_tool(args({"status", "--json", "catalog"})).output);
  EXPECT_EQ(j["held"], true);
  EXPECT_EQ(j["nodes"][0]["kind"], "shared");
  ASSERT_EQ(j["nodes"][0]["readers"].size(), 1u);
  EXPECT_EQ(j["nodes"][0]["readers"][0]["owner"], "reader-1");
  EXPECT_GT(j["nodes"][0]["readers"][0]["ttl_ms"].get<long>(), 20000);
  Ran table = dlock_tool(args({"status", "catalog"}));
  EXPECT_NE(table.output.find("reader reader-1"), std::string::npos) << table.output;
  // release --force clears readers too; then the writer runs.
  Ran forced = dlock_tool(args({"release", "--force", "--yes", "catalog"}));
  EXPECT_EQ(forced.status, 0) << forced.output;
  Ran after = dlock_tool(args({"run", "catalog", "--", "echo", "wrote"}));
  EXPECT_EQ(after.status, 0) << after.output;
  EXPECT_NE(after.output.find("wrote"), std::string::npos);
  // A reader waits for a writer past --wait: the conflict status.
  o.owner = OwnerToken("writer-1");
  auto w = c.try_lock("catalog", o);
  ASSERT_TRUE(w);
  Ran blocked = dlock_tool(args({"run", "--shared", "-w", "300ms", "catalog", "--", "true"}));
  EXPECT_EQ(blocked.status, 75) << blocked.output;
  // --fair is for writers only.
  Ran fair = dlock_tool(args({"run", "--shared", "--fair", "catalog", "--", "true"}));
  EXPECT_EQ(fair.status, 64) << fair.output;
}

// consul lock -n: at most N runs at once; status and release --force see every permit.
TEST_F(CliTest, PermitsLetNRunsHoldTheSemaphoreAtOnce) {
  Client c = client();
  LockOptions o;
  o.ttl = 30s;
  Semaphore held(c, "downloads", 2, o);
  auto first = held.try_acquire_lease();
  ASSERT_TRUE(first);
  // One permit left: a run gets it and sees its slot in DLOCK_NAME.
  Ran one = dlock_tool(args({"run", "-n", "2", "downloads", "--", "sh", "-c", "echo $DLOCK_NAME"}));
  EXPECT_EQ(one.status, 0) << one.output;
  EXPECT_NE(one.output.find("dlock:sem:{downloads}:"), std::string::npos) << one.output;
  auto second = held.try_acquire_lease();
  ASSERT_TRUE(second);
  // Both taken: the conflict status, also after a short wait.
  Ran full =
      dlock_tool(args({"run", "-n", "2", "-w", "300ms", "downloads", "--", "echo", "never"}));
  EXPECT_EQ(full.status, 75) << full.output;
  EXPECT_EQ(full.output.find("never"), std::string::npos);
  auto j =
      nlohmann::json::parse(dlock_tool(args({"status", "--json", "-n", "2", "downloads"})).output);
  EXPECT_EQ(j["semaphore"], "downloads");
  EXPECT_EQ(j["taken"], 2);
  ASSERT_EQ(j["slots"].size(), 2u);
  Ran table = dlock_tool(args({"status", "-n", "2", "downloads"}));
  EXPECT_NE(table.output.find("2 of 2 permits taken"), std::string::npos) << table.output;
  Ran forced = dlock_tool(args({"release", "--force", "--yes", "-n", "2", "downloads"}));
  EXPECT_EQ(forced.status, 0) << forced.output;
  EXPECT_FALSE(first->extend()) << "the holder learns it lost its permit";
  Ran after = dlock_tool(args({"run", "-n", "2", "downloads", "--", "true"}));
  EXPECT_EQ(after.status, 0) << after.output;
  Ran bad = dlock_tool(args({"run", "-n", "2", "--shared", "downloads", "--", "true"}));
  EXPECT_EQ(bad.status, 64) << bad.output;
  Ran zero = dlock_tool(args({"run", "-n", "0", "downloads", "--", "true"}));
  EXPECT_EQ(zero.status, 64) << zero.output;
  // --fair with -n: the run queues for the semaphore, as a fair lock run queues for the lock.
  auto only = held.try_acquire_lease();
  auto other = held.try_acquire_lease();
  ASSERT_TRUE(only && other);
  auto fair_run = std::async(std::launch::async, [&] {
    return dlock_tool(args({"run", "-n", "2", "--fair", "-w", "20s", "downloads", "--", "true"}));
  });
  ASSERT_TRUE(test::eventually(
      [&] {
        return server_->command({"ZCARD", "dlock:queue:{downloads}:dlock:sem:{downloads}"})
                   ->integer == 1;
      },
      10s));
  ASSERT_TRUE(only->unlock());
  EXPECT_EQ(fair_run.get().status, 0);
  EXPECT_EQ(server_->command({"EXISTS", "dlock:queue:{downloads}:dlock:sem:{downloads}"})->integer,
            0);
}

// Issue 28 item 3: two holders of a 2-permit semaphore, and a run that says -n 4 is refused as
// a usage error naming both counts (before: it got a permit, three holders of two permits).
// `dlock semaphore resize` changes the count, shrinking only when no permit above it is held.
TEST_F(CliTest, APermitCountOtherThanTheSemaphoresIsAUsageError) {
  Client c = client();
  LockOptions o;
  o.ttl = 30s;
  Semaphore held(c, "uploads", 2, o);
  // The tool with a 2 s node timeout: under TSan its 200 ms default ran out on a resize.
  auto first = held.try_acquire_lease();
  auto second = held.try_acquire_lease();
  ASSERT_TRUE(first && second);
  Ran more = dlock_tool(
      args({"run", "--node-timeout", "2s", "-n", "4", "uploads", "--", "echo", "never"}));
  EXPECT_EQ(more.status, 64) << more.output;
  EXPECT_EQ(more.output.find("never"), std::string::npos) << more.output;
  EXPECT_NE(more.output.find("2 permits"), std::string::npos) << more.output;
  EXPECT_NE(more.output.find("not 4"), std::string::npos) << more.output;

  Ran grow = dlock_tool(args({"semaphore", "--node-timeout", "2s", "resize", "uploads", "3"}));
  EXPECT_EQ(grow.status, 0) << grow.output;
  Ran third =
      dlock_tool(args({"run", "--node-timeout", "2s", "-n", "3", "uploads", "--", "echo", "ran"}));
  EXPECT_EQ(third.status, 0) << third.output;
  EXPECT_NE(third.output.find("ran"), std::string::npos) << third.output;
  Ran old = dlock_tool(args({"run", "--node-timeout", "2s", "-n", "2", "uploads", "--", "true"}));
  EXPECT_EQ(old.status, 64) << old.output;
  // Slots 0 and 1 are held: shrinking to 1 would leave two holders of one permit.
  Ran shrink = dlock_tool(args({"semaphore", "--node-timeout", "2s", "resize", "uploads", "1"}));
  EXPECT_EQ(shrink.status, 75) << shrink.output;
  Ran bad = dlock_tool(args({"semaphore", "--node-timeout", "2s", "resize", "uploads", "0"}));
  EXPECT_EQ(bad.status, 64) << bad.output;
  ASSERT_TRUE(first->unlock());
  ASSERT_TRUE(second->unlock());
  Ran after = dlock_tool(args({"semaphore", "--node-timeout", "2s", "resize", "uploads", "1"}));
  EXPECT_EQ(after.status, 0) << after.output;
}

TEST_F(CliTest, StatusJsonDescribesEachNode) {
  Client c = client();
  LockOptions o;
  o.ttl = 30s;
  o.owner = OwnerToken("worker-7");
  auto lease = c.try_lock("job", o);
  ASSERT_TRUE(lease) << lease.error().message();
  Ran ran = dlock_tool(args({"status", "--json", "job"}));
  ASSERT_EQ(ran.status, 0) << ran.output;
  auto j = nlohmann::json::parse(ran.output);
  EXPECT_EQ(j["name"], "job");
  EXPECT_EQ(j["held"], true);
  ASSERT_EQ(j["nodes"].size(), 1u);
  EXPECT_EQ(j["nodes"][0]["owners"][0]["owner"], "worker-7");
  EXPECT_GT(j["nodes"][0]["ttl_ms"].get<long>(), 20000);
  EXPECT_EQ(j["nodes"][0]["fence"], lease->fencing_token().value());
  ASSERT_TRUE(lease->unlock());
  auto free = nlohmann::json::parse(dlock_tool(args({"status", "--json", "job"})).output);
  EXPECT_EQ(free["held"], false);
  Ran table = dlock_tool(args({"status", "job"}));
  EXPECT_NE(table.output.find("free"), std::string::npos) << table.output;
}

TEST_F(CliTest, StatusReportsUnreachableNodes) {
  RedisServer other;
  const std::string url = other.url();
  other.kill9();
  Ran ran = dlock_tool({"status", "--json", "-r", server_->url(), "-r", url, "job"});
  EXPECT_EQ(ran.status, 69) << ran.output;  // 1 of 2 answered: no quorum
  auto j = nlohmann::json::parse(ran.output);
  EXPECT_EQ(j["nodes"][1]["ok"], false);
  EXPECT_NE(j["nodes"][1]["error"].get<std::string>().find("refused"), std::string::npos);
}

// Hold mode: `dlock acquire` keeps the lock after it exits and prints the owner token that
// releases it; nothing else can take or release it meanwhile.
TEST_F(CliTest, AcquirePrintsAnOwnerTokenThatReleasesTheLockLater) {
  Ran acquired = dlock_tool(args({"acquire", "-t", "30s", "deploy"}));
  ASSERT_EQ(acquired.status, 0) << acquired.output;
  ASSERT_FALSE(acquired.output.empty());
  EXPECT_EQ(acquired.output.back(), '\n');
  const std::string owner = acquired.output.substr(0, acquired.output.size() - 1);
  EXPECT_EQ(owner.find_first_of(" \n"), std::string::npos) << "one token, one line";
  ASSERT_TRUE(server_->exists("deploy")) << "held after dlock exited";
  auto pttl = server_->command({"PTTL", "deploy"});
  EXPECT_GT(pttl->integer, 20000);

  EXPECT_EQ(dlock_tool(args({"acquire", "deploy"})).status, 75);
  EXPECT_EQ(dlock_tool(args({"acquire", "-E", "3", "deploy"})).status, 3);
  EXPECT_EQ(dlock_tool(args({"run", "deploy", "--", "true"})).status, 75);
  Ran wrong = dlock_tool(args({"release", "deploy", "--owner", "someone-else"}));
  EXPECT_EQ(wrong.status, 1) << wrong.output;
  EXPECT_TRUE(server_->exists("deploy"));

  Ran released = dlock_tool(args({"release", "deploy", "--owner", owner}));
  EXPECT_EQ(released.status, 0) << released.output;
  EXPECT_FALSE(server_->exists("deploy"));
  EXPECT_EQ(dlock_tool(args({"release", "deploy", "--owner", owner})).status, 1)
      << "released already";
  EXPECT_EQ(dlock_tool(args({"run", "deploy", "--", "true"})).status, 0);
}

TEST_F(CliTest, AcquireJsonAndAnOwnerFromTheEnvironment) {
  Ran acquired = dlock_tool(args({"acquire", "--json", "--owner", "job-42", "-t", "1m", "deploy"}));
  ASSERT_EQ(acquired.status, 0) << acquired.output;
  auto j = nlohmann::json::parse(acquired.output);
  EXPECT_EQ(j["name"], "deploy");
  EXPECT_EQ(j["owner"], "job-42");
  EXPECT_GT(j["fence"].get<std::uint64_t>(), 0u);
  EXPECT_GT(j["validity_ms"].get<long>(), 50000);
  Ran released = dlock_tool(args({"release", "deploy"}), "DLOCK_OWNER=job-42");
  EXPECT_EQ(released.status, 0) << released.output;
  EXPECT_FALSE(server_->exists("deploy"));
}

TEST_F(CliTest, AcquiredLockEndsWithItsTtlWhenNeverReleased) {
  Ran acquired = dlock_tool(args({"acquire", "-t", "300ms", "deploy"}));
  ASSERT_EQ(acquired.status, 0) << acquired.output;
  EXPECT_TRUE(test::eventually([&] { return !server_->exists("deploy"); }, 5s))
      << "nothing renews a lock taken by dlock acquire";
}

TEST_F(CliTest, AcquireReleasesWhenTheTokenCannotBePrinted) {
  const std::string cmd = quote(DLOCK_TOOL_PATH) + " acquire -r " + quote(server_->url()) +
                          " deploy > /dev/full 2> /dev/null";
  const int status = std::system(cmd.c_str());  // NOLINT(cert-env33-c)
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 69);
  EXPECT_FALSE(server_->exists("deploy")) << "held by an owner nobody knows";
}

TEST_F(CliTest, AcquireInterruptedWhileWaitingLeavesNothingBehind) {
  auto held = held_by_someone_else("deploy");
  ASSERT_TRUE(held) << held.error().message();
  const std::string script = quote(DLOCK_TOOL_PATH) + " acquire -r " + quote(server_->url()) +
                             " -w 30s deploy & p=$!; sleep 1; kill -TERM $p; wait $p; echo rc=$?";
  // dlock_tool runs "ENV TOOL ARGS": here ENV is the script and a "#" that comments the rest out.
  Ran ran = dlock_tool({}, "sh -c " + quote(script) + " #");
  EXPECT_NE(ran.output.find("rc=143"), std::string::npos) << ran.output;
  ASSERT_TRUE(held->unlock());
  EXPECT_FALSE(server_->exists("deploy")) << "the interrupted acquire left a hold";
}

TEST_F(CliTest, ReleaseNeedsAnOwnerOrForceButNotBoth) {
  auto held = held_by_someone_else("deploy");
  ASSERT_TRUE(held) << held.error().message();
  EXPECT_EQ(dlock_tool(args({"release", "deploy"})).status, 64);
  EXPECT_EQ(dlock_tool(args({"release", "--force", "--yes", "--owner", "x", "deploy"})).status, 64);
  EXPECT_EQ(dlock_tool(args({"release", "--owner", "", "deploy"})).status, 64);
  EXPECT_TRUE(server_->exists("deploy"));
}

// Six processes, each running `dlock run` around a read-modify-write of a file, against five
// nodes of which two are killed midway: the counter must come out exact.
TEST(CliProcessesTest, SixProcessesKeepAFileCounterExactWithTwoNodesKilled) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisCluster nodes(5);
  char tmpl[] = "/tmp/dlock-counter-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string counter = dir + "/counter";
  std::ofstream(counter) << 0 << "\n";
  constexpr int kProcesses = 6;
  constexpr int kRounds = 15;
  const std::string body =
      "n=$(cat " + quote(counter) + "); sleep 0.01; echo $((n+1)) > " + quote(counter);
  const std::string loop = "fails=0; for i in $(seq " + std::to_string(kRounds) + "); do " +
                           quote(DLOCK_TOOL_PATH) + " run -t 5s -w 60s counter -- sh -c " +
                           quote(body) + " || fails=$((fails+1)); done; exit $fails";
  std::vector<std::future<int>> workers;
  for (int p = 0; p < kProcesses; ++p) {
    workers.push_back(std::async(std::launch::async, [&] {
      const std::string cmd = "DLOCK_REDIS=" + quote(nodes.url_list()) + " sh -c " + quote(loop);
      const int status = std::system(cmd.c_str());  // NOLINT(cert-env33-c)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }));
  }
  auto value = [&] {
    std::ifstream in(counter);
    long v = 0;
    in >> v;
    return v;
  };
  EXPECT_TRUE(test::eventually([&] { return value() >= kProcesses * kRounds / 3; }, 120s));
  nodes[1].kill9();
  nodes[3].kill9();
  for (auto& w : workers) EXPECT_EQ(w.get(), 0) << "every dlock run must have succeeded";
  EXPECT_EQ(value(), kProcesses * kRounds);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlock
