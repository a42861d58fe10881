// SPDX-License-Identifier: MIT
#include "service/grpc_service.h"

#include <chrono>
#include <mutex>
#include <optional>
#include <utility>

#include "service/grpc_keepalive.h"

namespace dlock::service {

Mode mode_of(v1::Mode mode) {
  switch (mode) {
    case v1::SHARED:
      return Mode::shared;
    case v1::PERMIT:
      return Mode::permit;
    default:
      return Mode::exclusive;
  }
}

grpc::StatusCode grpc_code(Code code) {
  switch (code) {
    case Code::ok:
      return grpc::StatusCode::OK;
    case Code::invalid_argument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case Code::held:
      return grpc::StatusCode::ABORTED;
    case Code::wait_timeout:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case Code::not_owner:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case Code::unavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case Code::cancelled:
      return grpc::StatusCode::CANCELLED;
    case Code::unimplemented:
      return grpc::StatusCode::UNIMPLEMENTED;
    case Code::unauthenticated:
      return grpc::StatusCode::UNAUTHENTICATED;
    case Code::permission_denied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case Code::resource_exhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  return grpc::StatusCode::INTERNAL;
}

namespace {

grpc::Status status_of(const Failure& f) {
  return grpc::Status(grpc_code(f.code), f.message);
}

// The call's deadline on the steady clock (gRPC gives it on the system clock), if it has one.
std::optional<std::chrono::steady_clock::time_point> steady_deadline(
    const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return std::nullopt;
  const auto left = deadline - std::chrono::system_clock::now();
  if (left > std::chrono::hours(24 * 365)) return std::nullopt;  // "infinite" in other forms
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

// An Acquire in flight: the reactor hears of a cancelled call and cancels the wait. It lives
// until gRPC calls OnDone, after Finish, so the completion may use it until it calls Finish.
class AcquireReactor final : public grpc::ServerUnaryReactor {
 public:
  AcquireReactor(Operations& ops, std::shared_ptr<PendingAcquire> pending,
                 grpc::CallbackServerContext& context)
      : ops_(ops), pending_(std::move(pending)), context_(context) {}

  // `slot`: the caller's place among its concurrent waits, given back before the answer.
  void start(AcquireInput in, v1::AcquireResponse* response, WaitCounter::Slot slot) {
    // Finish is the last use of `this`: OnDone may delete it right after, on another thread.
    std::function<void(Outcome<Grant>)> done = [this, response, name = in.name, mode = in.mode,
                                                own = in.owner.empty()](Outcome<Grant> outcome) {
      if (auto* f = std::get_if<Failure>(&outcome)) {
        // HTTP's 409 body has it as holder_ttl_ms; gRPC's ABORTED, in the trailers.
        if (f->holder_ttl_ms) {
          context_.AddTrailingMetadata(kHolderTtlTrailer, std::to_string(*f->holder_ttl_ms));
        }
        return Finish(status_of(*f));
      }
      const Grant& grant = std::get<Grant>(outcome);
      response->set_owner(grant.owner);
      response->set_fencing_token(grant.fencing_token);
      response->set_validity_ms(grant.validity_ms);
      if (grant.permit) response->set_permit(*grant.permit);
      // Only an owner this call made (Operations::release, operations.h, says why).
      if (own) {
        std::lock_guard lock(mu_);
        granted_ = HoldRef{name, grant.owner, mode, grant.permit.value_or(0)};
      }
      Finish(grpc::Status::OK);
    };
    ops_.acquire(std::move(in), pending_, holding(std::move(slot), std::move(done)));
  }
  void OnCancel() override { pending_->cancel(); }
  void OnDone() override {
    // A grant whose call failed before its answer reached the caller (it hung up, or its
    // deadline passed, while the grant was on its way): the caller treats it as not granted,
    // so nobody will hear of it. Given back rather than left to block the name for a ttl, when
    // its owner was made for this call (granted_ is set only then).
    std::optional<HoldRef> granted;
    {
      std::lock_guard lock(mu_);  // gRPC orders Finish before OnDone, unseen by ThreadSanitizer
      granted = std::move(granted_);
    }
    if (granted && context_.IsCancelled()) ops_.release(std::move(*granted), [](Outcome<bool>) {});
    delete this;
  }

 private:
  Operations& ops_;
  std::shared_ptr<PendingAcquire> pending_;
  grpc::CallbackServerContext& context_;  // gRPC's, valid until OnDone
  std::mutex mu_;
  std::optional<HoldRef> granted_;  // guarded by mu_: set before Finish(OK), read in OnDone
};

// A call that the guard refused: answered at once, nothing sent to the nodes.
grpc::ServerUnaryReactor* refuse(grpc::CallbackServerContext& context, const Failure& why) {
  auto* reactor = context.DefaultReactor();
  reactor->Finish(status_of(why));
  return reactor;
}

}  // namespace

Caller caller_of(const grpc::ServerContextBase& context) {
  Caller caller;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    caller.authorization.assign(it->second.data(), it->second.size());
  }
  // gRPC's peer is "ipv4:127.0.0.1:5000" or "ipv6:[::1]:5000" (or "ipv6:%5B::1%5D:5000"):
  // the bare address, as HTTP's, so that one client's waits count the same on both.
  std::string peer = context.peer();
  peer = peer.substr(peer.find(':') + 1);
  peer = peer.substr(0, peer.rfind(':'));
  for (std::string_view open : {"[", "%5B"}) {
    if (peer.starts_with(open)) peer = peer.substr(open.size(), peer.size() - 2 * open.size());
  }
  caller.address = std::move(peer);
  return caller;
}

grpc::ServerUnaryReactor* GrpcLocks::Acquire(grpc::CallbackServerContext* context,
                                             const v1::AcquireRequest* request,
                                             v1::AcquireResponse* response) {
  AcquireInput in;
  in.name = request->name();
  if (request->has_ttl_ms()) in.ttl_ms = request->ttl_ms();
  in.wait_ms = request->wait_ms();
  in.owner = request->owner();
  in.mode = mode_of(request->mode());
  in.permits = request->permits();
  in.fair = request->fair();
  in.deadline = steady_deadline(*context);
  auto slot = guard_.admit(caller_of(*context), in);
  if (auto* refused = std::get_if<Failure>(&slot)) return refuse(*context, *refused);
  auto* reactor = new AcquireReactor(ops_, ops_.make_pending(), *context);
  reactor->start(std::move(in), response, std::move(std::get<WaitCounter::Slot>(slot)));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcLocks::Extend(grpc::CallbackServerContext* context,
                                            const v1::ExtendRequest* request,
                                            v1::ExtendResponse* response) {
  std::optional<std::int64_t> ttl;
  if (request->has_ttl_ms()) ttl = request->ttl_ms();
  if (auto refused = guard_.check_extend(caller_of(*context), request->name(), ttl)) {
    return refuse(*context, *refused);
  }
  auto* reactor = context->DefaultReactor();
  ops_.extend(
      HoldRef{request->name(), request->owner(), mode_of(request->mode()), request->permit()}, ttl,
      [reactor, response](Outcome<std::int64_t> outcome) {
        if (auto* f = std::get_if<Failure>(&outcome)) return reactor->Finish(status_of(*f));
        response->set_validity_ms(std::get<std::int64_t>(outcome));
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcLocks::Release(grpc::CallbackServerContext* context,
                                             const v1::ReleaseRequest* request,
                                             v1::ReleaseResponse* /*response*/) {
  if (auto refused = guard_.check(caller_of(*context), request->name())) {
    return refuse(*context, *refused);
  }
  auto* reactor = context->DefaultReactor();
  const HoldRef hold{request->name(), request->owner(), mode_of(request->mode()),
                     request->permit()};
  ops_.release(hold, [reactor](Outcome<bool> outcome) {
    if (auto* f = std::get_if<Failure>(&outcome)) return reactor->Finish(status_of(*f));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcLocks::Status(grpc::CallbackServerContext* context,
                                            const v1::StatusRequest* request,
                                            v1::StatusResponse* response) {
  if (auto refused = guard_.check(caller_of(*context), request->name())) {
    return refuse(*context, *refused);
  }
  auto* reactor = context->DefaultReactor();
  ops_.status(request->name(), [reactor, response](Outcome<LockStatus> outcome) {
    if (auto* f = std::get_if<Failure>(&outcome)) return reactor->Finish(status_of(*f));
    fill_status(std::get<LockStatus>(outcome), *response);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>* GrpcLocks::KeepAlive(
    grpc::CallbackServerContext* context) {
  return keepalives_.start(ops_, guard_, caller_of(*context));
}

grpc::ServerWriteReactor<v1::WatchEvent>* GrpcLocks::Watch(grpc::CallbackServerContext* context,
                                                           const v1::WatchRequest* request) {
  return watches_.start(ops_, guard_, caller_of(*context), *request);
}

void fill_status(const LockStatus& status, v1::StatusResponse& out) {
  out.set_name(status.name);
  out.set_held(status.held);
  out.set_quorum(status.quorum);
  for (const NodeLockState& n : status.nodes) {
    v1::NodeStatus* node = out.add_nodes();
    node->set_node(n.node);
    if (n.error) {
      node->set_error(n.error->reason);
      continue;
    }
    node->set_kind(std::string(to_string(n.kind)));
    for (const NodeHolder& h : n.owners) {
      v1::Holder* holder = node->add_owners();
      holder->set_owner(h.owner.str());
      holder->set_hold(h.hold);
    }
    for (const NodeReader& r : n.readers) {
      v1::Holder* reader = node->add_readers();
      reader->set_owner(r.owner.str());
      reader->set_hold(r.hold);
    }
    if (n.ttl) node->set_ttl_ms(n.ttl->count());
    node->set_fence(n.fence.value());
    node->set_queued(n.queued);
    node->set_quarantine_ms(n.quarantine.count());
  }
}

}  // namespace dlock::service
