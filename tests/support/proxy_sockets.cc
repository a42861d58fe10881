// SPDX-License-Identifier: MIT
#include "support/proxy_sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "redis_process.h"

namespace dlock::test::proxy {

sockaddr_in ipv4(const std::string& host, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    throw std::runtime_error("TcpProxy: not an IPv4 address: " + host);
  }
  return a;
}

namespace {

// Listens on any free port of host.
int listen_on_any(const std::string& host, std::uint16_t& port) {
  sockaddr_in at = ipv4(host, 0);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  socklen_t len = sizeof at;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
      listen(fd, 128) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    throw std::runtime_error("TcpProxy: cannot listen on " + host + ": " + why);
  }
  port = ntohs(at.sin_port);
  return fd;
}

}  // namespace

int listen_on(const std::string& host, std::uint16_t& port) {
  // A port that no other test process claimed (tools/sandbox/redis_process.h): one whose server
  // is down for a moment belongs to a test that will start it again, and whose clients are
  // reconnecting to it.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = listen_on_any(host, port);
    if (sandbox::claim_port(port)) return fd;
    close(fd);
  }
  throw std::runtime_error("TcpProxy: no unclaimed port on " + host);
}

// Small requests and replies must not wait for Nagle: a proxy that batches would add delays
// nobody asked for.
void tune(int fd) {
  const int yes = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// A blocking connect: on loopback it completes or is refused at once (a stopped server's
// kernel still accepts into the backlog).
int connect_to(const sockaddr_in& to) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  tune(fd);
  return fd;
}

bool read_into(int fd, std::string& buf) {
  char chunk[16384];
  for (;;) {
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n > 0) {
      buf.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

bool write_some(int fd, std::string& buf) {
  while (!buf.empty()) {
    const ssize_t n = send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
    if (n > 0) {
      buf.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

void close_socket(int fd, bool reset) {
  if (fd < 0) return;
  if (reset) {
    const linger hard{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  }
  close(fd);
}

}  // namespace dlock::test::proxy
