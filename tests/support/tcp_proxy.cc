// SPDX-License-Identifier: MIT
#include "support/tcp_proxy.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support/proxy_sockets.h"
#include "support/resp_frames.h"

namespace dlock::test {
namespace {

using namespace proxy;

using Clock = std::chrono::steady_clock;

enum class Mode { forward, drop, delay, blackhole };
// What becomes of the reply to one forwarded request.
enum class Fate : std::uint8_t { deliver, lose, lose_and_cut };

struct Out {
  Clock::time_point due;
  std::string bytes;
};

struct Conn {
  int client = -1;
  int server = -1;
  std::string from_client;  // read, not yet a whole request
  std::string from_server;  // read, not yet a whole reply
  std::string to_server;    // whole requests, to write
  std::deque<Out> to_client;
  std::deque<Fate> awaiting;  // one per forwarded request whose reply has not come
  bool pubsub = false;        // subscribed: pushes come without requests, so no targeting
  bool raw = false;           // not RESP: bytes pass as they come (modes still apply)
  bool server_done = false;   // the server closed: close the client once to_client drains
  bool dead = false;
};

bool is_subscribe(const std::string& command) {
  return command == "SUBSCRIBE" || command == "PSUBSCRIBE" || command == "SSUBSCRIBE";
}

}  // namespace

class TcpProxy::Loop {
 public:
  Loop(const std::string& upstream_host, std::uint16_t upstream_port,
       const std::string& listen_host);
  ~Loop();

  const std::string& host() const { return host_; }
  std::uint16_t port() const { return port_; }
  void set_mode(Mode mode, std::chrono::milliseconds delay = {}) {
    control([&] {
      mode_ = mode;
      delay_ = delay;
    });
  }
  void cut() {
    control([&] { cut_requested_ = true; });
  }
  void arm(const std::string& match, bool then_cut) {
    control([&] {
      match_ = match;
      then_cut_ = then_cut;
      armed_ = true;
    });
  }
  void disarm() {
    control([&] { armed_ = false; });
  }
  void retarget(const std::string& host, std::uint16_t port) {
    control([&] { upstream_ = ipv4(host, port); });
  }
  bool armed() const {
    std::lock_guard lock(mu_);
    return armed_;
  }
  Stats stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }

 private:
  // Runs `change` under the lock, then wakes the loop so it takes effect before the next frame.
  template <typename Change>
  void control(Change change) {
    {
      std::lock_guard lock(mu_);
      change();
    }
    const char byte = 1;
    (void)!write(wake_[1], &byte, 1);
  }
  void run();
  int build(std::vector<pollfd>& fds, Clock::time_point now);
  void accept_all();
  void handle(Conn& c, short client_events, short server_events, Clock::time_point now);
  void on_requests(Conn& c);
  void on_replies(Conn& c, Clock::time_point now);
  void flush(Conn& c, Clock::time_point now);
  void close_conn(Conn& c, bool abort);

  const std::string host_;
  std::uint16_t port_ = 0;
  sockaddr_in upstream_;  // guarded by mu_
  int listener_ = -1;
  int wake_[2] = {-1, -1};
  std::vector<std::unique_ptr<Conn>> conns_;  // the loop thread's only
  // All guarded by mu_ (the loop holds it while it handles events, never while it polls).
  mutable std::mutex mu_;
  Mode mode_ = Mode::forward;
  std::chrono::milliseconds delay_{0};
  std::string match_;
  bool armed_ = false;
  bool then_cut_ = false;
  bool cut_requested_ = false;
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;  // last: starts after every member above is ready
};

TcpProxy::Loop::Loop(const std::string& upstream_host, std::uint16_t upstream_port,
                     const std::string& listen_host)
    : host_(listen_host),
      upstream_(ipv4(upstream_host, upstream_port)),
      listener_(listen_on(listen_host, port_)) {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(listener_);
    throw std::runtime_error("TcpProxy: no pipe");
  }
  thread_ = std::thread([this] { run(); });
}

TcpProxy::Loop::~Loop() {
  control([this] { stop_ = true; });
  thread_.join();
  for (auto& c : conns_) close_conn(*c, /*abort=*/false);
  close(listener_);
  close(wake_[0]);
  close(wake_[1]);
}

// An aborted connection ends with a reset, as a broken path shows itself.
void TcpProxy::Loop::close_conn(Conn& c, bool abort) {
  close_socket(c.client, abort);
  close_socket(c.server, abort);
  c.client = c.server = -1;
  c.dead = true;
}

int TcpProxy::Loop::build(std::vector<pollfd>& fds, Clock::time_point now) {
  fds.clear();
  fds.push_back({wake_[0], POLLIN, 0});
  fds.push_back({listener_, POLLIN, 0});
  int timeout = -1;
  for (const auto& c : conns_) {
    short client = POLLIN;
    if (!c->to_client.empty()) {
      const auto due = c->to_client.front().due;
      if (due <= now) {
        client |= POLLOUT;  // not a zero timeout: the socket may be full, POLLOUT says when not
      } else {
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(due - now).count();
        if (timeout < 0 || ms < timeout) timeout = static_cast<int>(ms);
      }
    }
    short server = c->server_done ? 0 : POLLIN;
    if (!c->to_server.empty()) server |= POLLOUT;
    fds.push_back({c->client, client, 0});
    fds.push_back({c->server_done ? -1 : c->server, server, 0});
  }
  return timeout;
}

void TcpProxy::Loop::run() {
  std::vector<pollfd> fds;
  for (;;) {
    std::size_t polled = 0;
    int timeout = -1;
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      if (cut_requested_) {
        for (auto& c : conns_) close_conn(*c, /*abort=*/true);
        stats_.cut += conns_.size();
        conns_.clear();
        cut_requested_ = false;
      }
      timeout = build(fds, Clock::now());
      polled = conns_.size();
    }
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return;
    std::lock_guard lock(mu_);
    if (fds[0].revents != 0) {
      char drain[64];
      while (read(wake_[0], drain, sizeof drain) > 0) {
      }
    }
    if (fds[1].revents != 0) accept_all();
    const auto now = Clock::now();
    for (std::size_t i = 0; i < polled; ++i) {
      handle(*conns_[i], fds[2 + 2 * i].revents, fds[3 + 2 * i].revents, now);
    }
    std::erase_if(conns_, [this](const std::unique_ptr<Conn>& c) {
      if (c->dead) close_conn(*c, /*abort=*/false);
      return c->dead;
    });
  }
}

void TcpProxy::Loop::accept_all() {
  for (;;) {
    const int client = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client < 0) return;
    ++stats_.connections;
    const int server = connect_to(upstream_);
    if (server < 0) {
      close(client);  // the server is down: so is the path through us
      continue;
    }
    tune(client);
    auto c = std::make_unique<Conn>();
    c->client = client;
    c->server = server;
    conns_.push_back(std::move(c));
  }
}

void TcpProxy::Loop::handle(Conn& c, short client_events, short server_events,
                            Clock::time_point now) {
  if ((client_events & (POLLIN | POLLHUP | POLLERR)) != 0) {
    if (!read_into(c.client, c.from_client)) c.dead = true;
    on_requests(c);
  }
  if ((server_events & (POLLIN | POLLHUP | POLLERR)) != 0) {
    if (!read_into(c.server, c.from_server)) c.server_done = true;
    on_replies(c, now);
  }
  if (!c.dead) flush(c, now);
  if (c.server_done && c.to_client.empty()) c.dead = true;
}

void TcpProxy::Loop::on_requests(Conn& c) {
  while (!c.from_client.empty()) {
    std::size_t n = c.raw ? c.from_client.size() : resp_frame_length(c.from_client);
    if (n == 0) return;
    if (n == kRespMalformed) {
      c.raw = true;  // not ours to understand: pass it on, and target nothing here
      c.awaiting.clear();
      n = c.from_client.size();
    }
    std::string frame = c.from_client.substr(0, n);
    c.from_client.erase(0, n);
    if (mode_ == Mode::blackhole) {
      ++stats_.dropped_requests;
      continue;  // no reply will come for it: nothing awaits
    }
    if (!c.raw && !c.pubsub && is_subscribe(resp_command_name(frame))) {
      c.pubsub = true;
      c.awaiting.clear();
    }
    if (!c.raw && !c.pubsub) {
      Fate fate = Fate::deliver;
      if (armed_ && frame.find(match_) != std::string::npos) {
        armed_ = false;
        fate = then_cut_ ? Fate::lose_and_cut : Fate::lose;
      }
      c.awaiting.push_back(fate);
    }
    c.to_server += frame;
    ++stats_.requests;
  }
}

void TcpProxy::Loop::on_replies(Conn& c, Clock::time_point now) {
  while (!c.from_server.empty() && !c.dead) {
    std::size_t n = c.raw ? c.from_server.size() : resp_frame_length(c.from_server);
    if (n == 0) return;
    if (n == kRespMalformed) {
      c.raw = true;
      c.awaiting.clear();
      n = c.from_server.size();
    }
    std::string frame = c.from_server.substr(0, n);
    c.from_server.erase(0, n);
    Fate fate = Fate::deliver;
    if (!c.raw && !c.pubsub && frame[0] != '>' && !c.awaiting.empty()) {
      fate = c.awaiting.front();
      c.awaiting.pop_front();
    }
    if (fate != Fate::deliver) {
      ++stats_.dropped_replies;
      ++stats_.lost_targeted;
      if (fate == Fate::lose_and_cut) {
        close_conn(c, /*abort=*/true);
        ++stats_.cut;
      }
      continue;
    }
    if (mode_ == Mode::drop || mode_ == Mode::blackhole) {
      ++stats_.dropped_replies;
      continue;
    }
    auto due = mode_ == Mode::delay ? now + delay_ : now;
    if (!c.to_client.empty() && c.to_client.back().due > due) due = c.to_client.back().due;
    c.to_client.push_back({due, std::move(frame)});
    ++stats_.replies;
  }
}

void TcpProxy::Loop::flush(Conn& c, Clock::time_point now) {
  if (!write_some(c.server, c.to_server)) {
    c.dead = true;
    return;
  }
  while (!c.to_client.empty() && c.to_client.front().due <= now) {
    auto& front = c.to_client.front().bytes;
    if (!write_some(c.client, front)) {
      c.dead = true;
      return;
    }
    if (!front.empty()) return;  // the socket is full: POLLOUT brings us back
    c.to_client.pop_front();
  }
}

TcpProxy::TcpProxy(const std::string& upstream_host, std::uint16_t upstream_port,
                   const std::string& listen_host)
    : loop_(std::make_unique<Loop>(upstream_host, upstream_port, listen_host)) {}

TcpProxy::~TcpProxy() = default;

const std::string& TcpProxy::host() const {
  return loop_->host();
}
std::uint16_t TcpProxy::port() const {
  return loop_->port();
}
void TcpProxy::forward() {
  loop_->set_mode(Mode::forward);
}
void TcpProxy::drop_replies() {
  loop_->set_mode(Mode::drop);
}
void TcpProxy::delay_replies(std::chrono::milliseconds delay) {
  loop_->set_mode(Mode::delay, delay);
}
void TcpProxy::blackhole() {
  loop_->set_mode(Mode::blackhole);
}
void TcpProxy::cut() {
  loop_->cut();
}
void TcpProxy::lose_next_reply(const std::string& match, bool then_cut) {
  loop_->arm(match, then_cut);
}
void TcpProxy::disarm() {
  loop_->disarm();
}
bool TcpProxy::armed() const {
  return loop_->armed();
}
void TcpProxy::retarget(const std::string& upstream_host, std::uint16_t upstream_port) {
  loop_->retarget(upstream_host, upstream_port);
}
TcpProxy::Stats TcpProxy::stats() const {
  return loop_->stats();
}

}  // namespace dlock::test
