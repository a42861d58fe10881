// SPDX-License-Identifier: MIT
// TcpProxy: a TCP proxy on a loopback address in front of one server (a redis-server), to
// inject the network faults a process signal cannot: a command that runs on the server while
// its reply never reaches the client, a reply that comes late, a node that neither hears nor
// answers, a connection cut in the middle of a call.
//
//   TcpProxy proxy("127.0.0.1", server.port());           // clients use 127.0.0.1:proxy.port()
//   proxy.drop_replies();                                  // commands run, replies vanish
//   proxy.lose_next_reply("dlock:release:{");              // only the next release's reply
//   proxy.forward();                                       // back to normal
//
// The proxy frames both directions as RESP (support/resp_frames.h): replies are dropped or
// delayed whole, and the n-th reply of a connection is known to answer its n-th request, so a
// single call's reply can be lost. Connections that subscribed (their replies include pushes)
// are never targeted by lose_next_reply, only by the modes, which act on every frame.
// One thread per proxy, poll() on non-blocking sockets; every connection and the thread end
// with the object.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dlock::test {

class TcpProxy {
 public:
  struct Stats {
    std::size_t connections = 0;       // accepted so far
    std::size_t requests = 0;          // requests forwarded to the server
    std::size_t replies = 0;           // replies handed to the client (delayed ones included)
    std::size_t dropped_requests = 0;  // swallowed by blackhole()
    std::size_t dropped_replies = 0;   // discarded, by a mode or by lose_next_reply()
    std::size_t lost_targeted = 0;     // of those, replies that lose_next_reply() chose
    std::size_t cut = 0;               // connections closed by cut() or a targeted cut
  };

  // Listens on listen_host (a loopback address) at a free port and forwards each connection to
  // upstream_host:upstream_port. A connection whose server cannot be reached is closed at once.
  // Throws std::runtime_error when it cannot listen.
  TcpProxy(const std::string& upstream_host, std::uint16_t upstream_port,
           const std::string& listen_host = "127.0.0.1");
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  const std::string& host() const;
  std::uint16_t port() const;

  // Modes, for every connection, from the next frame on (a frame already delayed keeps its due
  // time, and order is always kept).
  void forward();       // pass everything
  void drop_replies();  // requests reach the server and run; every reply is discarded
  void delay_replies(std::chrono::milliseconds delay);  // every reply reaches the client late
  void blackhole();  // nothing passes either way (a partition); connections stay open

  // Closes every current connection now, both sides (new connections are accepted).
  void cut();
  // The next request that contains `match` (on a connection that never subscribed) reaches the
  // server, and its reply is discarded; with then_cut, the connection is closed when that reply
  // arrives. Replaces an earlier arming that had not matched yet.
  void lose_next_reply(const std::string& match, bool then_cut = false);
  void disarm();       // withdraws a lose_next_reply() that has not matched
  bool armed() const;  // a lose_next_reply() waits for its request
  // New connections go to this server from now on (current ones stay where they are): an
  // address that fails over to another server, as a keepalived or load-balancer pair does.
  void retarget(const std::string& upstream_host, std::uint16_t upstream_port);

  Stats stats() const;

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
};

}  // namespace dlock::test
