// SPDX-License-Identifier: MIT
#include "node/replica_confirm.h"

#include "node/server_node.h"

namespace dlock::node {

void RecordConfirmations::wait_for_replicas(ServerNode& master, const Recorded& recorded,
                                            std::size_t replicas, resp::Reply grant,
                                            net::Connection::Callback done) {
  auto wait = wait_call(replicas, recorded.deadline);
  if (!wait) return done(not_confirmed(nullptr, replicas, master_, recorded));
  master.run(std::move(wait), recorded.deadline,
             [this, recorded, replicas, grant = std::move(grant),
              done = std::move(done)](Result<resp::Reply> w) mutable {
               if (hooks_.closing()) return;
               if (!w || !confirms(*w, replicas)) record_.refuse(recorded.epoch);
               if (!w) {
                 hooks_.wait_failed(w.error());
                 return done(std::move(w));
               }
               if (!confirms(*w, replicas)) {
                 return done(not_confirmed(&*w, replicas, master_, recorded));
               }
               confirmed(recorded, std::move(grant), done);
             });
}

void RecordConfirmations::confirmed(const Recorded& recorded, resp::Reply grant,
                                    net::Connection::Callback& done) {
  if (recorded.epoch != hooks_.epoch()) {
    // Another master or connection since the grant: what was confirmed is not known.
    return done(Error(errc::io_error, master_ + " changed while its record was confirmed"));
  }
  record_ = ReplicatedRecord{recorded.ttl, recorded.epoch,
                             record_lives_until(recorded.sent, recorded.ttl, recorded.drift)};
  done(std::move(grant));
}

}  // namespace dlock::node
