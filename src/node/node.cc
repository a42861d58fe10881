// SPDX-License-Identifier: MIT
#include "node/node.h"

#include "node/cluster_node.h"
#include "node/sentinel_node.h"
#include "node/server_node.h"

namespace dlock::node {

std::unique_ptr<Node> make_node(asio::io_context& io, net::NodeAddress address,
                                net::ConnectionOptions options, MessageHandler on_message,
                                std::size_t index, Observer* observer) {
  if (address.kind == net::NodeAddress::Kind::sentinel) {
    return std::make_unique<SentinelNode>(io, std::move(address), options, std::move(on_message),
                                          index, observer);
  }
  if (address.kind == net::NodeAddress::Kind::cluster) {
    return std::make_unique<ClusterNode>(io, std::move(address), options, std::move(on_message),
                                         index, observer);
  }
  Sharding plain;
  plain.remembers_records = true;
  return std::make_unique<ServerNode>(io, std::move(address), options, std::move(on_message), index,
                                      observer, std::move(plain));
}

}  // namespace dlock::node
