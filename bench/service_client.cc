// SPDX-License-Identifier: MIT
#include "service_client.h"

#include <curl/curl.h>
#include <dlock/v1/lock.grpc.pb.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "stats.h"

namespace dlock::bench {

struct GrpcLocks::State {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Locks::Stub> stub;
};

GrpcLocks::GrpcLocks(const std::string& address) : state_(std::make_unique<State>()) {
  grpc::ChannelArguments args;
  // Channels with equal arguments share one connection by default: each client gets its own.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  state_->channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  if (!state_->channel->WaitForConnected(std::chrono::system_clock::now() +
                                         std::chrono::seconds(10))) {
    throw std::runtime_error("cannot connect to the service's gRPC listener " + address);
  }
  state_->stub = v1::Locks::NewStub(state_->channel);
}

GrpcLocks::~GrpcLocks() = default;
GrpcLocks::GrpcLocks(GrpcLocks&&) noexcept = default;
GrpcLocks& GrpcLocks::operator=(GrpcLocks&&) noexcept = default;

std::string GrpcLocks::acquire(const std::string& name, std::int64_t wait_ms) {
  grpc::ClientContext context;
  v1::AcquireRequest request;
  request.set_name(name);
  request.set_wait_ms(wait_ms);
  v1::AcquireResponse response;
  const grpc::Status status = state_->stub->Acquire(&context, request, &response);
  if (!status.ok()) throw std::runtime_error("gRPC Acquire: " + status.error_message());
  return response.owner();
}

void GrpcLocks::release(const std::string& name, const std::string& owner) {
  grpc::ClientContext context;
  v1::ReleaseRequest request;
  request.set_name(name);
  request.set_owner(owner);
  v1::ReleaseResponse response;
  const grpc::Status status = state_->stub->Release(&context, request, &response);
  if (!status.ok()) throw std::runtime_error("gRPC Release: " + status.error_message());
}

namespace {

// The cycles in flight: each slot chains Acquire -> Release -> Acquire ... from the callbacks
// (gRPC's threads) until told to stop; the last slot to stop wakes the waiting caller.
struct Loop {
  struct Slot {
    v1::AcquireRequest acquire;
    v1::AcquireResponse granted;
    v1::ReleaseRequest release;
    v1::ReleaseResponse released;
    std::unique_ptr<grpc::ClientContext> context;
  };
  v1::Locks::Stub* stub = nullptr;
  std::vector<Slot> slots;
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> cycles{0};
  std::atomic<int> failures{0};
  std::mutex mu;
  std::condition_variable done;
  int running = 0;  // guarded by mu

  void start_acquire(Slot& s) {
    if (stop.load(std::memory_order_relaxed)) return finish();
    s.context = std::make_unique<grpc::ClientContext>();
    stub->async()->Acquire(s.context.get(), &s.acquire, &s.granted, [this, &s](grpc::Status st) {
      if (!st.ok()) {
        failures.fetch_add(1);
        return finish();
      }
      s.release.set_owner(s.granted.owner());
      s.context = std::make_unique<grpc::ClientContext>();
      stub->async()->Release(s.context.get(), &s.release, &s.released,
                             [this, &s](grpc::Status released) {
                               if (!released.ok()) {
                                 failures.fetch_add(1);
                                 return finish();
                               }
                               cycles.fetch_add(1, std::memory_order_relaxed);
                               start_acquire(s);
                             });
    });
  }
  void finish() {
    std::lock_guard lock(mu);
    if (--running == 0) done.notify_all();
  }
};

}  // namespace

double GrpcLocks::cycles_in_flight(const std::vector<std::string>& names,
                                   std::chrono::milliseconds run) {
  Loop loop;
  loop.stub = state_->stub.get();
  loop.slots.resize(names.size());
  loop.running = static_cast<int>(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    loop.slots[i].acquire.set_name(names[i]);
    loop.slots[i].release.set_name(names[i]);
  }
  const auto t0 = monotonic_ns();
  for (auto& s : loop.slots) loop.start_acquire(s);
  std::this_thread::sleep_for(run);
  const auto counted = loop.cycles.load();
  const auto t1 = monotonic_ns();
  loop.stop = true;
  std::unique_lock lock(loop.mu);
  loop.done.wait(lock, [&] { return loop.running == 0; });
  if (loop.failures.load() > 0) throw std::runtime_error("gRPC: a cycle in flight failed");
  return static_cast<double>(counted) / (static_cast<double>(t1 - t0) / 1e9);
}

namespace {

std::size_t append(char* data, std::size_t size, std::size_t n, void* to) {
  static_cast<std::string*>(to)->append(data, size * n);
  return size * n;
}

}  // namespace

HttpLocks::HttpLocks(const std::string& address)
    : curl_(curl_easy_init()), headers_(nullptr), base_("http://" + address) {
  if (curl_ == nullptr) throw std::runtime_error("curl_easy_init failed");
  auto* curl = static_cast<CURL*>(curl_);
  auto* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  headers_ = headers;
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply_);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for timeouts
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 120L);
}

HttpLocks::~HttpLocks() {
  curl_easy_cleanup(static_cast<CURL*>(curl_));
  curl_slist_free_all(static_cast<curl_slist*>(headers_));
}

std::string HttpLocks::post(const std::string& path, const std::string& body) {
  auto* curl = static_cast<CURL*>(curl_);
  reply_.clear();
  const std::string url = base_ + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  if (const CURLcode rc = curl_easy_perform(curl); rc != CURLE_OK) {
    throw std::runtime_error("HTTP " + path + ": " + curl_easy_strerror(rc));
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    throw std::runtime_error("HTTP " + path + ": " + std::to_string(status) + " " + reply_);
  }
  return reply_;
}

// "/v1/locks/NAME:verb", the name percent-encoded (a ':' in it must not look like the verb's).
std::string HttpLocks::path(const std::string& name, const char* verb) {
  char* escaped =
      curl_easy_escape(static_cast<CURL*>(curl_), name.data(), static_cast<int>(name.size()));
  if (escaped == nullptr) throw std::runtime_error("curl_easy_escape failed");
  std::string out = "/v1/locks/" + std::string(escaped) + ":" + verb;
  curl_free(escaped);
  return out;
}

std::string HttpLocks::acquire(const std::string& name, std::int64_t wait_ms) {
  const nlohmann::json body{{"wait_ms", wait_ms}};
  const auto reply = nlohmann::json::parse(post(path(name, "acquire"), body.dump()));
  return reply.at("owner").get<std::string>();
}

void HttpLocks::release(const std::string& name, const std::string& owner) {
  const nlohmann::json body{{"owner", owner}};
  post(path(name, "release"), body.dump());
}

}  // namespace dlock::bench
