#include "kube/credentials.h"

#include <gtest/gtest.h>

#include <map>

#include "common/crypto.h"
#include "support/process.h"

namespace uplink::kube {
namespace {

const char kValidKubeconfig[] = R"(apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: other
  cluster:
    server: https://other.example:6443
- name: gpu-cluster
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: )";

std::string ValidKubeconfig(const std::string& user_block) {
  return std::string(kValidKubeconfig) + Base64Encode("-----BEGIN CERTIFICATE-----\nCA\n") +
         "\n"
         "contexts:\n"
         "- name: prod\n"
         "  context:\n"
         "    cluster: gpu-cluster\n"
         "    user: agent\n"
         "    namespace: uplink-system\n"
         "users:\n"
         "- name: agent\n"
         "  user:\n" +
         user_block;
}

Result<KubeCredentials> Parse(const std::string& text, const std::string& dir = "/cfg") {
  return ParseKubeconfig(text, dir);
}

TEST(Kubeconfig, AValidTokenConfigGivesServerCaNamespaceAndToken) {
  auto creds = Parse(ValidKubeconfig("    token: kube-token-123\n"));
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->server, "https://10.0.0.1:6443");
  EXPECT_EQ(creds->ca_pem, "-----BEGIN CERTIFICATE-----\nCA\n");
  EXPECT_EQ(creds->default_namespace, "uplink-system");
  auto token = creds->CurrentToken();
  ASSERT_TRUE(token.ok());
  ASSERT_TRUE(token->has_value());
  EXPECT_EQ((*token)->AuthorizationHeaderValue(), "Bearer kube-token-123");
}

TEST(Kubeconfig, AnExplicitContextOverridesTheCurrentOne) {
  std::string staging = std::string(kValidKubeconfig) + "Q0E=\n" +
                        "contexts:\n"
                        "- name: prod\n"
                        "  context: {cluster: gpu-cluster, user: agent}\n"
                        "- name: staging\n"
                        "  context: {cluster: other, user: agent}\n"
                        "users:\n"
                        "- name: agent\n"
                        "  user: {token: t}\n";
  auto creds = ParseKubeconfig(staging, "/cfg", "staging");
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->server, "https://other.example:6443");
}

TEST(Kubeconfig, RelativeTokenFileAndCertificatePathsResolveAgainstTheKubeconfigDirectory) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.File("token"), "from-file\n");
  testing::WriteFileOrDie(dir.File("client.crt"), "CERT");
  testing::WriteFileOrDie(dir.File("client.key"), "KEY");
  testing::WriteFileOrDie(dir.File("config"),
                          ValidKubeconfig("    tokenFile: token\n"
                                          "    client-certificate: client.crt\n"
                                          "    client-key: client.key\n"));
  auto creds = LoadKubeconfig(dir.File("config"));
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->token_file, dir.File("token"));
  EXPECT_EQ(creds->client_cert_pem, "CERT");
  EXPECT_EQ(creds->client_key_pem, "KEY");
  EXPECT_EQ((*creds->CurrentToken())->AuthorizationHeaderValue(), "Bearer from-file");
}

TEST(Kubeconfig, ExecAndAuthProviderPluginsAreRefusedAndNeverRun) {
  auto exec = Parse(ValidKubeconfig("    exec:\n"
                                    "      apiVersion: client.authentication.k8s.io/v1\n"
                                    "      command: /bin/touch\n"
                                    "      args: [/tmp/uplink-exec-ran]\n"));
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.status().message().find("exec credential plugin"), std::string::npos);
  EXPECT_NE(exec.status().message().find("never runs programs"), std::string::npos);

  auto provider = Parse(ValidKubeconfig("    auth-provider:\n      name: gcp\n"));
  ASSERT_FALSE(provider.ok());
  EXPECT_NE(provider.status().message().find("auth-provider"), std::string::npos);
}

TEST(Kubeconfig, SkippingTlsVerificationImpersonationAndBasicAuthAreRefused) {
  std::string insecure = std::string(kValidKubeconfig) + "Q0E=\n    insecure-skip-tls-verify: true\n" +
                         "contexts:\n- name: prod\n  context: {cluster: gpu-cluster, user: a}\n"
                         "users:\n- name: a\n  user: {token: t}\n";
  auto refused = Parse(insecure);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("insecure-skip-tls-verify"), std::string::npos);

  auto as = Parse(ValidKubeconfig("    token: t\n    as: system:admin\n"));
  ASSERT_FALSE(as.ok());
  EXPECT_NE(as.status().message().find("impersonation"), std::string::npos);

  auto basic = Parse(ValidKubeconfig("    username: admin\n    password: hunter2\n"));
  ASSERT_FALSE(basic.ok());
  EXPECT_NE(basic.status().message().find("basic authentication"), std::string::npos);
  EXPECT_EQ(basic.status().message().find("hunter2"), std::string::npos);
}

TEST(Kubeconfig, MissingPiecesAreNamedInTheError) {
  struct Case {
    std::string text;
    std::string expected;
  };
  std::vector<Case> cases = {
      {"apiVersion: v1\nkind: Config\n", "no current-context"},
      {"current-context: nope\ncontexts: []\n", "no contexts entry named 'nope'"},
      {ValidKubeconfig(""), "users entry 'agent' has no 'user' object"},
      {ValidKubeconfig("    token: a\n    tokenFile: b\n"), "both token and tokenFile"},
      {ValidKubeconfig("    client-certificate-data: Q0VSVA==\n"),
       "needs both client-certificate and client-key"},
      {ValidKubeconfig("    token: [1, 2]\n"), "user 'agent'.token must be a string"},
      {ValidKubeconfig("    {}\n"), "no credential"},
  };
  for (const Case& c : cases) {
    auto creds = Parse(c.text);
    ASSERT_FALSE(creds.ok()) << c.text;
    EXPECT_NE(creds.status().message().find(c.expected), std::string::npos)
        << creds.status().message();
  }
}

TEST(Kubeconfig, PlainHttpIsAcceptedOnlyForALoopbackServer) {
  auto build = [](const std::string& server) {
    return "current-context: c\n"
           "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
           "clusters: [{name: k, cluster: {server: '" + server + "'}}]\n"
           "users: [{name: u, user: {token: t}}]\n";
  };
  EXPECT_TRUE(Parse(build("http://127.0.0.1:8080")).ok());
  auto remote = Parse(build("http://10.0.0.1:8080"));
  ASSERT_FALSE(remote.ok());
  EXPECT_NE(remote.status().message().find("plain http"), std::string::npos);
  EXPECT_FALSE(Parse(build("ftp://10.0.0.1")).ok());
  EXPECT_FALSE(Parse(build("")).ok());
}

TEST(Kubeconfig, ARejectedServerUrlIsNeverQuotedBackOnlyItsOrigin) {
  auto build = [](const std::string& server) {
    return "current-context: c\n"
           "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
           "clusters: [{name: k, cluster: {server: '" + server + "'}}]\n"
           "users: [{name: u, user: {token: t}}]\n";
  };
  for (const char* server : {"https://admin:hunter2@10.0.0.1:6443", "https://10.0.0.1/?token=sekrit",
                             "http://10.0.0.1:8080/sekrit", "ftp://sekrit@10.0.0.1"}) {
    auto parsed = Parse(build(server));
    ASSERT_FALSE(parsed.ok()) << server;
    for (const char* secret : {"hunter2", "admin", "sekrit"}) {
      EXPECT_EQ(parsed.status().message().find(secret), std::string::npos)
          << parsed.status().message();
    }
  }
  auto userinfo = Parse(build("https://admin:hunter2@10.0.0.1:6443"));
  EXPECT_NE(userinfo.status().message().find("https://10.0.0.1:6443"), std::string::npos)
      << userinfo.status().message();
  auto plain = Parse(build("http://10.0.0.1:8080/sekrit"));
  EXPECT_NE(plain.status().message().find("http://10.0.0.1:8080 uses plain http"),
            std::string::npos) << plain.status().message();
}

TEST(Kubeconfig, GarbageYamlAndMissingFilesGiveClearErrors) {
  auto garbage = Parse("clusters: [unclosed\n  - : :\n");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("not valid YAML"), std::string::npos);
  auto scalar = Parse("just a string\n");
  ASSERT_FALSE(scalar.ok());
  EXPECT_NE(scalar.status().message().find("not a YAML mapping"), std::string::npos);
  auto missing = LoadKubeconfig("/nonexistent/uplink/kubeconfig");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("reading kubeconfig"), std::string::npos);
  auto bad_base64 = Parse(std::string(kValidKubeconfig) + "not*base64!\n" +
                          "contexts: [{name: prod, context: {cluster: gpu-cluster, user: a}}]\n"
                          "users: [{name: a, user: {token: t}}]\n");
  ASSERT_FALSE(bad_base64.ok());
  EXPECT_NE(bad_base64.status().message().find("not valid base64"), std::string::npos)
      << bad_base64.status().message();
}

EnvLookup Env(std::map<std::string, std::string> values) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(values));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(InCluster, TheServiceAccountFilesAndServiceEnvironmentGiveCredentials) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.File("token"), "sa-token\n");
  testing::WriteFileOrDie(dir.File("ca.crt"), "CA PEM");
  testing::WriteFileOrDie(dir.File("namespace"), "uplink-system\n");
  InClusterPaths paths{dir.File("token"), dir.File("ca.crt"), dir.File("namespace")};
  auto creds = LoadInCluster(
      Env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}}), paths);
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->server, "https://10.96.0.1:443");
  EXPECT_EQ(creds->ca_pem, "CA PEM");
  EXPECT_EQ(creds->default_namespace, "uplink-system");
  EXPECT_EQ(creds->token_file, dir.File("token"));

  auto v6 = LoadInCluster(
      Env({{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "443"}}), paths);
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6->server, "https://[fd00::1]:443");
}

TEST(InCluster, OutsideAPodTheErrorSaysToPassAKubeconfig) {
  auto creds = LoadInCluster(Env({}));
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("--kubeconfig"), std::string::npos);
}

TEST(InCluster, AnUnmountedOrEmptyTokenIsAClearError) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.File("ca.crt"), "CA PEM");
  InClusterPaths paths{dir.File("token"), dir.File("ca.crt"), dir.File("namespace")};
  auto env = Env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  auto missing = LoadInCluster(env, paths);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("Kubernetes token file"), std::string::npos);
  testing::WriteFileOrDie(dir.File("token"), "\n");
  auto empty = LoadInCluster(env, paths);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos);
}

}  // namespace
}  // namespace uplink::kube
