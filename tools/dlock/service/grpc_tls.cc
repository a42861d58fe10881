// SPDX-License-Identifier: MIT
#include "service/grpc_tls.h"

#include <grpc/grpc.h>

#include <string>

namespace dlock::service {

namespace {

// What grpc::SslServerCredentials makes (grpc::SecureServerCredentials, not a public header):
// the C credentials, added to the server as its port's. gRPC's own C++ credentials declare
// AddPortToServer private; an override may be.
class FetchingCredentials final : public grpc::ServerCredentials {
 public:
  explicit FetchingCredentials(grpc_server_credentials* creds) : creds_(creds) {}
  ~FetchingCredentials() override { grpc_server_credentials_release(creds_); }
  FetchingCredentials(const FetchingCredentials&) = delete;
  FetchingCredentials& operator=(const FetchingCredentials&) = delete;

  // Not used by the service (its tokens are checked by its interceptor, service/auth.h).
  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {}

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }

  grpc_server_credentials* creds_;
};

}  // namespace

std::shared_ptr<grpc::ServerCredentials> GrpcTls::credentials() {
  const std::shared_ptr<ServerTls> first = source_();
  if (!first) return grpc::InsecureServerCredentials();
  // Mutual TLS or not is the flags', the same for every reload: fixed here.
  grpc_ssl_server_credentials_options* options =
      grpc_ssl_server_credentials_create_options_using_config_fetcher(
          first->client_ca_pem().empty()
              ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY,
          &GrpcTls::fetch, this);
  // Takes the options (and frees them); the first fetch comes when the port is added.
  return std::make_shared<FetchingCredentials>(
      grpc_ssl_server_credentials_create_with_options(options));
}

grpc_ssl_certificate_config_reload_status GrpcTls::fetch(
    void* user_data, grpc_ssl_server_certificate_config** config) {
  auto* self = static_cast<GrpcTls*>(user_data);
  // The source asked under the lock: two handshakes that fetch at once, around a reload, cannot
  // give gRPC the newer configuration and then the older.
  std::lock_guard lock(self->mu_);
  std::shared_ptr<ServerTls> newest = self->source_();
  if (!newest || newest == self->served_) return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
  const grpc_ssl_pem_key_cert_pair pair{newest->key_pem().c_str(), newest->cert_pem().c_str()};
  // gRPC wants client roots even when it requests no client certificate (Debian's 1.51 aborts
  // on null ones, `assertion failed: config->pem_root_certs != nullptr`, and an empty list is no
  // PEM): then the service's own chain, never consulted, as no client certificate is asked for.
  const std::string& roots =
      newest->client_ca_pem().empty() ? newest->cert_pem() : newest->client_ca_pem();
  // Copies the text; gRPC destroys the config once it has made its SSL context of it.
  *config = grpc_ssl_server_certificate_config_create(roots.c_str(), &pair, 1);
  self->served_ = std::move(newest);
  return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
}

}  // namespace dlock::service
