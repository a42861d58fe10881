// SPDX-License-Identifier: MIT
// The socket calls of the fault-injecting proxy (tcp_proxy.h): IPv4 on loopback, non-blocking,
// no Nagle.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

namespace dlock::test::proxy {

// host:port as an IPv4 socket address; throws std::runtime_error if host is not one.
sockaddr_in ipv4(const std::string& host, std::uint16_t port);
// A non-blocking listening socket on host at a free port, which it stores in `port`; throws
// std::runtime_error when it cannot listen.
int listen_on(const std::string& host, std::uint16_t& port);
// A connected non-blocking socket, or -1 (refused: the server is down).
int connect_to(const sockaddr_in& to);
// Makes an accepted socket non-blocking, without Nagle.
void tune(int fd);
// Appends what `fd` has to `buf`; false when it reached end of file or failed.
bool read_into(int fd, std::string& buf);
// Writes what it can of `buf` and erases that; false when the socket failed.
bool write_some(int fd, std::string& buf);
// Closes `fd`; with `reset`, by a TCP reset rather than an orderly end of stream.
void close_socket(int fd, bool reset);

}  // namespace dlock::test::proxy
