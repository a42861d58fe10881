// SPDX-License-Identifier: MIT
// Connections: TLS with CA verification and client certificates, ACL users, passwords, SELECT.
// Certificates are made by the test with the openssl command.
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/redis_server.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;
using test::ServerOptions;

// A CA, a server certificate for 127.0.0.1 and a client certificate, in a temporary folder.
// The server's key is RSA, the others P-256: an RSA key takes some 300 ms of CPU to make, and
// four of them were made per test process in each of CI's three builds. The client so still
// verifies an RSA server certificate (signed by a P-256 CA).
class Certificates {
 public:
  Certificates() {
    char tmpl[] = "/tmp/dlock-certs-XXXXXX";
    dir = mkdtemp(tmpl);
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string rsa_key = "-newkey rsa:2048 -nodes";
    const std::string sign = "openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -days 2";
    const std::vector<std::string> steps{
        "cd '" + dir.string() + "'",
        "openssl req -x509 " + key +
            " -keyout ca.key -out ca.crt -days 2 -subj '/CN=dlock test CA'",
        "openssl req -x509 " + key +
            " -keyout other-ca.key -out other-ca.crt -days 2 -subj '/CN=unrelated CA'",
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.cnf",
        "openssl req " + rsa_key + " -keyout server.key -out server.csr -subj '/CN=127.0.0.1'",
        sign + " -in server.csr -out server.crt -extfile san.cnf",
        "openssl req " + key + " -keyout client.key -out client.csr -subj '/CN=dlock client'",
        sign + " -in client.csr -out client.crt",
    };
    std::string script = "set -e";
    for (const auto& step : steps) script += "; " + step + " 2>/dev/null";
    ok = std::system(script.c_str()) == 0;  // NOLINT(cert-env33-c): test set-up
  }
  ~Certificates() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  std::filesystem::path dir;
  bool ok = false;
};

LockOptions ttl10s() {
  LockOptions o;
  o.ttl = 10s;
  return o;
}

Result<Client> client_for(const std::string& url, TlsOptions tls = {}) {
  ClientOptions options;
  options.nodes = {url};
  options.tls = std::move(tls);
  return Client::create(options);
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    ASSERT_TRUE(certs_.ok) << "openssl could not make test certificates";
  }
  ServerOptions tls_server(bool require_client_cert) {
    ServerOptions o;
    o.tls = true;
    o.tls_dir = certs_.dir;
    if (require_client_cert) o.extra_args = {"--tls-auth-clients", "yes"};
    return o;
  }
  Certificates certs_;
};

TEST_F(TlsTest, LocksOverTlsWithTheRightCa) {
  RedisServer server(tls_server(false));
  TlsOptions tls;
  tls.ca_file = (certs_.dir / "ca.crt").string();
  auto client = client_for(server.url(), tls);
  ASSERT_TRUE(client) << client.error().message();
  auto lease = client->try_lock("job", ttl10s());
  ASSERT_TRUE(lease) << lease.error().message();
  auto status = client->status("job");
  ASSERT_TRUE(status);
  EXPECT_TRUE(status->held);
  ASSERT_TRUE(lease->unlock());
}

TEST_F(TlsTest, RefusesAServerItCannotVerify) {
  RedisServer server(tls_server(false));
  TlsOptions tls;
  tls.ca_file = (certs_.dir / "other-ca.crt").string();
  auto client = client_for(server.url(), tls);
  ASSERT_TRUE(client);
  auto lease = client->try_lock("job", ttl10s());
  ASSERT_FALSE(lease);
  EXPECT_TRUE(lease.error().is(errc::quorum_not_reached));
  EXPECT_NE(lease.error().message().find("TLS handshake failed"), std::string::npos)
      << lease.error().message();
  EXPECT_NE(lease.error().message().find(server.url()), std::string::npos);
}

TEST_F(TlsTest, PresentsAClientCertificateWhenTheServerWantsOne) {
  RedisServer server(tls_server(true));
  TlsOptions tls;
  tls.ca_file = (certs_.dir / "ca.crt").string();
  auto without = client_for(server.url(), tls);
  ASSERT_TRUE(without);
  EXPECT_FALSE(without->try_lock("job", ttl10s())) << "the server requires a client certificate";

  tls.cert_file = (certs_.dir / "client.crt").string();
  tls.key_file = (certs_.dir / "client.key").string();
  auto with = client_for(server.url(), tls);
  ASSERT_TRUE(with) << with.error().message();
  auto lease = with->try_lock("job", ttl10s());
  ASSERT_TRUE(lease) << lease.error().message();
}

TEST_F(TlsTest, MissingCaFileIsAConfigurationError) {
  TlsOptions tls;
  tls.ca_file = "/nonexistent/ca.crt";
  auto client = client_for("rediss://127.0.0.1:1", tls);
  ASSERT_FALSE(client);
  EXPECT_TRUE(client.error().is(errc::invalid_argument));
  EXPECT_NE(client.error().message().find("TLS"), std::string::npos);
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override { DLOCK_REQUIRE_REDIS_OR_SKIP(); }
};

TEST_F(AuthTest, AclUserWithPassword) {
  ServerOptions o;
  o.extra_args = {"--user", "alice", "on", ">wonderland", "~*", "&*", "+@all"};
  RedisServer server(o);
  const std::string port = std::to_string(server.port());
  auto client = client_for("redis://alice:wonderland@127.0.0.1:" + port);
  ASSERT_TRUE(client);
  auto lease = client->try_lock("job", ttl10s());
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->unlock());
}

TEST_F(AuthTest, WrongPasswordIsNamedAndLeavesNothingLocked) {
  ServerOptions o;
  o.extra_args = {"--user", "alice", "on", ">wonderland", "~*", "&*", "+@all"};
  RedisServer server(o);
  const std::string url = "redis://alice:rabbit@127.0.0.1:" + std::to_string(server.port());
  auto client = client_for(url);
  ASSERT_TRUE(client);
  auto lease = client->try_lock("job", ttl10s());
  ASSERT_FALSE(lease);
  const std::string message = lease.error().message();
  EXPECT_NE(message.find("WRONGPASS"), std::string::npos) << message;
  EXPECT_NE(message.find("redis://alice@127.0.0.1:"), std::string::npos) << message;
  EXPECT_EQ(message.find("rabbit"), std::string::npos) << "never print the password";
  ASSERT_EQ(lease.error().nodes().size(), 1u);
  EXPECT_EQ(lease.error().nodes()[0].code, make_error_code(errc::auth_error));
  EXPECT_FALSE(server.exists("job"));
}

TEST_F(AuthTest, RequirePassServer) {
  ServerOptions o;
  o.extra_args = {"--requirepass", "sesame"};
  o.password = "sesame";
  RedisServer server(o);
  const std::string port = std::to_string(server.port());
  auto good = client_for("redis://:sesame@127.0.0.1:" + port);
  ASSERT_TRUE(good);
  auto lease = good->try_lock("job", ttl10s());
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->unlock());

  auto none = client_for("redis://127.0.0.1:" + port);
  ASSERT_TRUE(none);
  auto refused = none->try_lock("job", ttl10s());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("NOAUTH"), std::string::npos)
      << refused.error().message();
  EXPECT_FALSE(server.exists("job"));
}

TEST_F(AuthTest, SelectsTheDatabaseOfTheUrl) {
  RedisServer server;
  auto client = client_for("redis://127.0.0.1:" + std::to_string(server.port()) + "/3");
  ASSERT_TRUE(client);
  auto lease = client->try_lock("job", ttl10s());
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_FALSE(server.exists("job"));
  auto in_db3 = server.command({"EXISTS", "job"}, 3);
  EXPECT_EQ(in_db3->integer, 1);
}

TEST_F(AuthTest, DatabaseOutOfRangeIsAnErrorNotTheWrongDatabase) {
  RedisServer server;
  auto client = client_for("redis://127.0.0.1:" + std::to_string(server.port()) + "/99");
  ASSERT_TRUE(client);
  auto lease = client->try_lock("job", ttl10s());
  ASSERT_FALSE(lease);
  EXPECT_NE(lease.error().message().find("SELECT 99"), std::string::npos)
      << lease.error().message();
  EXPECT_FALSE(server.exists("job"));
}

}  // namespace
}  // namespace dlock
