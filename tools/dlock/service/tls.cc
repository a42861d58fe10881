// SPDX-License-Identifier: MIT
#include "service/tls.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dlock::service {

namespace {

Result<std::string> read_pem(const char* flag, const std::string& path) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  if (!in || std::filesystem::is_directory(path, ec)) {
    return Error(errc::invalid_argument, std::string(flag) + ": cannot read " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error(errc::invalid_argument, std::string(flag) + ": cannot read " + path);
  return text.str();
}

Error bad_file(const char* flag, const std::string& path, const std::error_code& ec) {
  return Error(errc::invalid_argument, std::string(flag) + " " + path + ": " + ec.message());
}

}  // namespace

Result<std::shared_ptr<ServerTls>> ServerTls::load(const std::string& cert_file,
                                                   const std::string& key_file,
                                                   const std::string& client_ca_file) {
  if (cert_file.empty() && key_file.empty() && client_ca_file.empty()) {
    return std::shared_ptr<ServerTls>();
  }
  if (cert_file.empty() != key_file.empty()) {
    return Error(errc::invalid_argument,
                 "--tls-cert and --tls-key go together: the certificate and its key");
  }
  if (cert_file.empty()) {
    return Error(errc::invalid_argument, "--tls-client-ca needs --tls-cert and --tls-key");
  }
  std::shared_ptr<ServerTls> tls(new ServerTls());
  auto configured = tls->configure(cert_file, key_file, client_ca_file);
  if (!configured) return configured.error();
  return tls;
}

Result<bool> ServerTls::configure(const std::string& cert_file, const std::string& key_file,
                                  const std::string& client_ca_file) {
  auto cert = read_pem("--tls-cert", cert_file);
  if (!cert) return cert.error();
  auto key = read_pem("--tls-key", key_file);
  if (!key) return key.error();
  cert_ = std::move(*cert);
  key_ = std::move(*key);
  // TLS 1.2 and later only; OpenSSL checks each file here, so a bad one stops the start.
  context_.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1);
  std::error_code ec;
  context_.use_certificate_chain(asio::buffer(cert_), ec);
  if (ec) return bad_file("--tls-cert", cert_file, ec);
  context_.use_private_key(asio::buffer(key_), asio::ssl::context::pem, ec);
  if (ec) return bad_file("--tls-key", key_file, ec);
  if (SSL_CTX_check_private_key(context_.native_handle()) != 1) {
    return Error(errc::invalid_argument,
                 "--tls-key " + key_file + " is not the key of --tls-cert " + cert_file);
  }
  if (client_ca_file.empty()) return true;
  auto ca = read_pem("--tls-client-ca", client_ca_file);
  if (!ca) return ca.error();
  client_ca_ = std::move(*ca);
  context_.add_certificate_authority(asio::buffer(client_ca_), ec);
  if (ec) return bad_file("--tls-client-ca", client_ca_file, ec);
  // Mutual TLS: a client without a certificate signed by that CA fails the handshake.
  context_.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  return true;
}

}  // namespace dlock::service
