// SPDX-License-Identifier: MIT
// The operator side of the dlock tool, end to end: sandbox lifecycle, release --force, watch,
// signals reaching the command of `dlock run`, and the demo.
#include <dlock/dlock.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/redis_server.h"
#include "support/thread_signals.h"

extern char** environ;

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::RedisServer;

// A dlock process of the test's own: started with argv, its output read from a pipe.
class Tool {
 public:
  explicit Tool(std::vector<std::string> args, std::vector<std::string> env = {},
                const std::string& input = "") {
    int out[2];
    int in[2];
    EXPECT_EQ(pipe(out), 0);
    EXPECT_EQ(pipe(in), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addclose(&actions, in[1]);
    args.insert(args.begin(), DLOCK_TOOL_PATH);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, DLOCK_TOOL_PATH, &actions, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    close(in[0]);
    if (!input.empty()) {
      EXPECT_EQ(write(in[1], input.data(), input.size()), static_cast<ssize_t>(input.size()));
    }
    close(in[1]);
    out_ = fdopen(out[0], "r");
  }
  ~Tool() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      (void)wait();
    }
    if (out_ != nullptr) std::fclose(out_);
  }
  pid_t pid() const { return pid_; }
  std::string line() {
    char buf[4096];
    return std::fgets(buf, sizeof buf, out_) != nullptr ? std::string(buf) : std::string();
  }
  std::string rest() {
    std::string all;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, out_)) > 0;) all.append(buf, n);
    return all;
  }
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  std::ifstream in("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) +
                   "/children");
  for (pid_t p; in >> p;) out.push_back(p);
  return out;
}

bool alive(pid_t pid) {
  return kill(pid, 0) == 0;
}

class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override { DLOCK_REQUIRE_REDIS_OR_SKIP(); }
};

void expect_sandbox_stops_cleanly(int sig) {
  Tool sandbox({"sandbox", "--nodes", "3"});
  const std::string first = sandbox.line();
  ASSERT_EQ(first.rfind("DLOCK_REDIS=", 0), 0u) << first;
  std::string list = first.substr(12);
  list.erase(list.find_last_not_of("\n") + 1);
  ClientOptions options;
  std::stringstream urls(list);
  for (std::string url; std::getline(urls, url, ',');) options.nodes.push_back(url);
  ASSERT_EQ(options.nodes.size(), 3u);
  auto client = Client::create(options);
  ASSERT_TRUE(client);
  auto lease = client->try_lock("job");
  ASSERT_TRUE(lease) << lease.error().message();  // the nodes work
  ASSERT_TRUE(lease->unlock());
  const std::vector<pid_t> servers = children_of(sandbox.pid());
  ASSERT_EQ(servers.size(), 3u);
  const auto dir = std::filesystem::read_symlink("/proc/" + std::to_string(servers[0]) + "/cwd");
  ASSERT_TRUE(std::filesystem::exists(dir));
  kill(sandbox.pid(), sig);
  EXPECT_EQ(sandbox.wait(), 0);
  for (pid_t p : servers) EXPECT_FALSE(alive(p)) << "redis-server " << p << " left running";
  EXPECT_FALSE(std::filesystem::exists(dir.parent_path())) << dir.parent_path() << " left behind";
}

TEST_F(OpsTest, SandboxStopsOnSigtermLeavingNothingBehind) {
  expect_sandbox_stops_cleanly(SIGTERM);
}
TEST_F(OpsTest, SandboxStopsOnCtrlC) {
  expect_sandbox_stops_cleanly(SIGINT);
}

// `dlock sandbox --cluster` and `--sentinel`: the printed line works as DLOCK_REDIS for `dlock
// run` (a sentinel URL keeps the commas between its sentinels), and Ctrl-C stops every process.
// The node timeout is 2 s, not the default 200 ms: a sentinel node's first grant of a ttl waits
// for WAIT on the master's replica, and a replica on a 2-core machine running four test programs
// at once has been seen to take longer than the ~100 ms that leaves (and the greeting's INFO
// longer than 200 ms). WAIT returns as soon as the replica confirms, so this costs nothing when
// the machine is idle.
void expect_sandbox_of_sets(std::vector<std::string> args, std::size_t processes) {
  Tool sandbox(std::move(args));
  std::string line = sandbox.line();
  ASSERT_EQ(line.rfind("DLOCK_REDIS=", 0), 0u) << line;
  line.erase(line.find_last_not_of("\n") + 1);
  Tool run({"run", "-t", "5s", "job", "--", "sh", "-c", "echo token=$DLOCK_TOKEN"},
           {line, "DLOCK_NODE_TIMEOUT=2s"});
  const std::string out = run.rest();
  EXPECT_EQ(run.wait(), 0) << out;
  EXPECT_NE(out.find("token=1"), std::string::npos) << out;
  const std::vector<pid_t> servers = children_of(sandbox.pid());
  EXPECT_EQ(servers.size(), processes);
  kill(sandbox.pid(), SIGINT);
  EXPECT_EQ(sandbox.wait(), 0);
  for (pid_t p : servers) EXPECT_FALSE(alive(p)) << "redis-server " << p << " left running";
}

TEST_F(OpsTest, SandboxOfAClusterWorksWithRun) {
  expect_sandbox_of_sets({"sandbox", "--cluster", "--replicas", "0"}, 3);
}

TEST_F(OpsTest, SandboxOfSentinelSetsWorksWithRun) {
  // Two sets: Redlock over two sentinel-managed masters, each of a master, a replica and three
  // sentinels.
  expect_sandbox_of_sets({"sandbox", "--sentinel", "--nodes", "2"}, 2 * (2 + 3));
}

TEST_F(OpsTest, SandboxWithoutRedisServerSaysHowToInstallIt) {
  Tool sandbox({"sandbox"}, {"DLOCK_REDIS_SERVER=/nonexistent/redis-server"});
  const std::string out = sandbox.rest();
  EXPECT_EQ(sandbox.wait(), 69);
  EXPECT_NE(out.find("apt-get install redis-server"), std::string::npos) << out;
}

TEST_F(OpsTest, SandboxOnAPortInUseSaysSo) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  Tool sandbox({"sandbox", "--port", port});
  const std::string out = sandbox.rest();
  EXPECT_EQ(sandbox.wait(), 69);
  EXPECT_NE(out.find("port " + port + " on 127.0.0.1 is in use"), std::string::npos) << out;
  close(fd);
}

TEST_F(OpsTest, ReleaseForceClearsAStuckLockAndTheHolderLearnsItLostIt) {
  RedisServer server;
  ClientOptions options;
  options.nodes = {server.url()};
  Client client = std::move(Client::create(options)).value();
  std::atomic<bool> lost{false};
  LockOptions o;
  o.ttl = 900ms;
  o.on_lost = [&](const Error&) { lost = true; };
  auto lease = client.try_lock("job", o);
  ASSERT_TRUE(lease) << lease.error().message();

  Tool refused({"release", "-r", server.url(), "job"});
  EXPECT_EQ(refused.wait(), 64) << "without --force";
  Tool declined({"release", "--force", "-r", server.url(), "job"}, {}, "n\n");
  EXPECT_EQ(declined.wait(), 1);
  EXPECT_TRUE(server.exists("job"));

  Tool confirmed({"release", "--force", "-r", server.url(), "job"}, {}, "y\n");
  const std::string out = confirmed.rest();
  EXPECT_EQ(confirmed.wait(), 0) << out;
  EXPECT_NE(out.find("deleted"), std::string::npos) << out;
  EXPECT_FALSE(server.exists("job"));
  EXPECT_TRUE(eventually([&] { return lost.load(); }, 5s)) << "the holder's watchdog notices";
}

TEST_F(OpsTest, ReleaseForceKeepsAnotherLibrarysKeyUnlessAsked) {
  RedisServer server;
  server.command({"SET", "job", "theirs", "PX", "60000"});
  Tool kept({"release", "--force", "--yes", "-r", server.url(), "job"});
  EXPECT_NE(kept.rest().find("kept-foreign"), std::string::npos);
  EXPECT_EQ(kept.wait(), 0);
  EXPECT_TRUE(server.exists("job"));
  Tool deleted({"release", "--force", "--yes", "--foreign", "-r", server.url(), "job"});
  EXPECT_EQ(deleted.wait(), 0);
  EXPECT_FALSE(server.exists("job"));
}

TEST_F(OpsTest, WatchPrintsHolderChanges) {
  RedisServer server;
  Tool watch({"watch", "--interval", "20ms", "--changes", "2", "-r", server.url(), "job"});
  EXPECT_NE(watch.line().find("job: free"), std::string::npos);
  ClientOptions options;
  options.nodes = {server.url()};
  Client client = std::move(Client::create(options)).value();
  LockOptions o;
  o.owner = OwnerToken("worker-9");
  auto lease = client.try_lock("job", o);
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_NE(watch.line().find("held by worker-9"), std::string::npos);
  // Other names taken on the node meanwhile move its counter (one node counts tokens per node):
  // no change of job's holder, no line.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(client.try_lock("other")->unlock());
    std::this_thread::sleep_for(30ms);
  }
  ASSERT_TRUE(lease->unlock());
  EXPECT_NE(watch.line().find("job: free"), std::string::npos);
  EXPECT_EQ(watch.wait(), 0);
}

TEST_F(OpsTest, WatchStatsCountGrantsTooShortToBeSeenAndEachNodesRequests) {
  RedisServer server;
  ClientOptions options;
  options.nodes = {server.url()};
  Client client = std::move(Client::create(options)).value();
  // Taken once before: the watch starts from a known counter (a name never taken has none, and
  // its first counter starts from the node's clock).
  std::uint64_t before = 0;
  {
    auto lease = client.try_lock("job");
    ASSERT_TRUE(lease) << lease.error().message();
    before = lease->fencing_token().value();
    ASSERT_TRUE(lease->unlock());
  }
  Tool watch({"watch", "--stats", "--stats-every", "100ms", "--interval", "50ms", "-r",
              server.url(), "job"});
  EXPECT_NE(watch.line().find("job: free"), std::string::npos);
  // Three holds far shorter than the poll interval: the fencing counter still counts them.
  for (int i = 0; i < 3; ++i) {
    auto lease = client.try_lock("job");
    ASSERT_TRUE(lease) << lease.error().message();
    ASSERT_TRUE(lease->unlock());
  }
  std::this_thread::sleep_for(300ms);
  kill(watch.pid(), SIGINT);
  const std::string out = watch.rest();
  EXPECT_EQ(watch.wait(), 0) << out;
  // The last line is the final stats line, for the period cut short by Ctrl-C.
  const auto last_start = out.rfind('\n', out.size() - 2);
  const std::string last = out.substr(last_start == std::string::npos ? 0 : last_start + 1);
  EXPECT_NE(last.find("job: stats"), std::string::npos) << out;
  EXPECT_NE(last.find("fence " + std::to_string(before + 3) + " ("), std::string::npos) << out;
  EXPECT_NE(last.find("+3 since start"), std::string::npos) << out;
  EXPECT_NE(last.find(server.url() + " ok "), std::string::npos) << out;
  EXPECT_NE(last.find(" err 0"), std::string::npos) << out;
  // Every period had its line: at least one before the last.
  EXPECT_GE(std::count(out.begin(), out.end(), '\n'), 3) << out;
}

TEST_F(OpsTest, WatchStatsRejectABadPeriod) {
  RedisServer server;
  Tool watch({"watch", "--stats", "--stats-every", "0s", "-r", server.url(), "job"});
  const std::string out = watch.rest();
  EXPECT_EQ(watch.wait(), 64) << out;
  EXPECT_NE(out.find("--stats-every"), std::string::npos) << out;
}

TEST_F(OpsTest, SigtermToRunReachesTheCommandThenTheLockIsReleased) {
  RedisServer server;
  Tool run({"run", "-r", server.url(), "job", "--", "sh", "-c",
            "trap 'echo got-term; exit 3' TERM; echo started; while true; do sleep 0.05; done"});
  EXPECT_NE(run.line().find("started"), std::string::npos);
  EXPECT_TRUE(server.exists("job"));
  kill(run.pid(), SIGTERM);
  const std::string out = run.rest();
  EXPECT_EQ(run.wait(), 3) << out;
  EXPECT_NE(out.find("got-term"), std::string::npos) << out;
  EXPECT_FALSE(server.exists("job"));
}

// A SIGTERM for `dlock run` can land on any of its threads that does not block it; only the
// main thread may take it. Once one landed on the thread waiting in waitpid() for the command:
// under TSan its handler was held back until waitpid() returned, which it never did, as the
// command never got the signal.
TEST_F(OpsTest, RunTakesSignalsOnItsMainThreadOnly) {
  constexpr int kStops[] = {SIGINT, SIGTERM, SIGHUP};
  RedisServer server;
  Tool run({"run", "-r", server.url(), "job", "--", "sh", "-c", "echo started; exec sleep 60"});
  EXPECT_NE(run.line().find("started"), std::string::npos);
  // Right after the command starts, the main thread may still be starting the reaper thread,
  // with the signals blocked for that moment.
  const auto only_main_takes_them = [&] {
    const auto threads = test::blocked_signals_by_thread(run.pid());
    return threads.size() >= 3 &&  // main, the io thread and the command's reaper at least
           std::all_of(threads.begin(), threads.end(), [&](const auto& thread) {
             return std::all_of(std::begin(kStops), std::end(kStops), [&](int sig) {
               return test::blocks(thread.second, sig) == (thread.first != run.pid());
             });
           });
  };
  EXPECT_TRUE(eventually(only_main_takes_them, 5s)) << [&] {
    std::ostringstream masks;
    for (const auto& [tid, mask] : test::blocked_signals_by_thread(run.pid())) {
      masks << "thread " << tid << " blocks " << std::hex << mask << std::dec << "\n";
    }
    return masks.str();
  }();
  kill(run.pid(), SIGTERM);
  EXPECT_EQ(run.wait(), 128 + SIGTERM);
  EXPECT_FALSE(server.exists("job"));
}

TEST_F(OpsTest, SecondCtrlCKillsACommandThatIgnoresTheFirst) {
  RedisServer server;
  Tool run({"run", "-r", server.url(), "job", "--", "sh", "-c",
            "trap '' INT; echo started; exec sleep 60"});
  EXPECT_NE(run.line().find("started"), std::string::npos);
  std::this_thread::sleep_for(100ms);
  kill(run.pid(), SIGINT);
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(alive(run.pid())) << "the command ignores the first SIGINT";
  kill(run.pid(), SIGINT);
  EXPECT_EQ(run.wait(), 128 + SIGKILL);
  EXPECT_FALSE(server.exists("job"));
}

TEST_F(OpsTest, DemoRunsWithFaultsAndReportsNoViolation) {
  Tool demo({"demo", "--workers", "4", "--duration", "6s"});
  const std::string out = demo.rest();
  EXPECT_EQ(demo.wait(), 0) << out;
  EXPECT_NE(out.find("VIOLATIONS                0"), std::string::npos) << out;
  EXPECT_NE(out.find("refused by the fencing check"), std::string::npos) << out;
  EXPECT_NE(out.find("kept out of quorums for"), std::string::npos) << out;
}

}  // namespace
}  // namespace dlock
