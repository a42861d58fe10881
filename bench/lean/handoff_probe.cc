// SPDX-License-Identifier: MIT
// What a client's thread hand-offs cost Redis at one request in flight (issue 32): the same
// SET NX PX / DEL requests, 2 per cycle, driven four ways, with the client and the server on one
// CPU as bench/run.sh places them. bench/lean/handoff.py runs it and reads the server's CPU.
//
//   dlock_handoff_probe MODE PORT CYCLES
//
//   inline  one thread writes a request and blocks reading its reply (hiredis, dlock's blocking
//           API on an idle connection)
//   single  one thread, asynchronously: the socket on the caller's io_context (an asio-native
//           client whose connection runs on the caller's executor)
//   onehop  the caller's thread writes, a second thread (with the socket's io_context) reads and
//           posts the reply to the caller
//   twohop  the caller posts each request to a second thread, which writes it, reads the reply
//           and posts it back (dlock's asio API today: its io thread)
#include <sys/socket.h>

#include <asio.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace {

using asio::ip::tcp;

constexpr std::string_view kSet =
    "*6\r\n$3\r\nSET\r\n$4\r\nlock\r\n$5\r\nhello\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n10000\r\n";
constexpr std::string_view kDel = "*2\r\n$3\r\nDEL\r\n$4\r\nlock\r\n";

std::string_view request(long i) {
  return i % 2 == 0 ? kSet : kDel;
}

tcp::socket connect(asio::io_context& io, unsigned short port) {
  tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  socket.set_option(tcp::no_delay(true));
  return socket;
}

// Every reply here is one short line, read whole by one read.
void run_inline(unsigned short port, long requests) {
  asio::io_context io;
  tcp::socket socket = connect(io, port);
  char reply[256];
  for (long i = 0; i < requests; ++i) {
    asio::write(socket, asio::buffer(request(i)));
    socket.read_some(asio::buffer(reply));
  }
}

void run_single(unsigned short port, long requests) {
  asio::io_context io;
  tcp::socket socket = connect(io, port);
  char reply[256];
  long done = 0;
  std::function<void()> next = [&] {
    asio::async_write(socket, asio::buffer(request(done)), [](std::error_code, std::size_t) {});
    socket.async_read_some(asio::buffer(reply), [&](std::error_code ec, std::size_t) {
      if (ec) std::abort();
      if (++done < requests) next();
    });
  };
  next();
  io.run();
}

// The caller's io_context and a second thread's, which owns the socket.
void run_two_threads(unsigned short port, long requests, bool caller_writes) {
  asio::io_context caller, other;
  auto caller_work = asio::make_work_guard(caller);
  auto other_work = asio::make_work_guard(other);
  tcp::socket socket = connect(other, port);
  char reply[256];
  long done = 0;
  std::function<void()> next;
  const auto finished = [&] {
    if (++done < requests) return next();
    caller_work.reset();
    other_work.reset();
    asio::post(other, [&] { socket.cancel(); });
  };
  std::function<void()> read_on = [&] {
    socket.async_read_some(asio::buffer(reply), [&](std::error_code ec, std::size_t) {
      if (ec) return;
      asio::post(caller, finished);
      read_on();
    });
  };
  if (caller_writes) {
    asio::post(other, read_on);
    next = [&] {
      const std::string_view r = request(done);
      if (::send(socket.native_handle(), r.data(), r.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(r.size())) {
        std::abort();
      }
    };
  } else {
    next = [&] {
      asio::post(other, [&] {
        asio::async_write(socket, asio::buffer(request(done)), [](std::error_code, std::size_t) {});
        socket.async_read_some(asio::buffer(reply), [&](std::error_code ec, std::size_t) {
          if (ec) std::abort();
          asio::post(caller, finished);
        });
      });
    };
  }
  std::thread thread([&] { other.run(); });
  // The reader armed before the first request (onehop).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  asio::post(caller, next);
  caller.run();
  thread.join();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s inline|single|onehop|twohop PORT CYCLES\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const auto port = static_cast<unsigned short>(std::atoi(argv[2]));
  const long requests = 2 * std::atol(argv[3]);
  if (mode == "inline") {
    run_inline(port, requests);
  } else if (mode == "single") {
    run_single(port, requests);
  } else if (mode == "onehop" || mode == "twohop") {
    run_two_threads(port, requests, mode == "onehop");
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  return 0;
}
