// End to end: the real uplink-kubesim binary over TLS, driven by the real /usr/bin/kubectl.
// kubectl's stderr may carry version-skew warnings, so assertions read stdout only.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/crypto.h"
#include "common/json.h"
#include "kubesim_process.h"

namespace uplink::kubesim {
namespace {

using testing::KubesimProcess;

constexpr const char* kKubeSystemUid = "5e1f0c7a-3b2d-4c55-9a10-7d2c8e4b6f01";

class KubectlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    objects_dir_ = new testing::TempDir();
    std::ofstream(objects_dir_->path() + "/objects.yaml")
        << "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-system\n  uid: "
        << kKubeSystemUid << "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        << "  name: preloaded\n  namespace: kube-system\ndata:\n  k: v\n";
    auto started = KubesimProcess::Start({"--nodes", "3", "--gpus-per-node", "8", "--objects",
                                          objects_dir_->path() + "/objects.yaml"});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    kubesim_ = started->release();
  }
  static void TearDownTestSuite() {
    if (kubesim_) {
      EXPECT_EQ(kubesim_->Stop(), 0) << kubesim_->Logs();
    }
    delete kubesim_;
    kubesim_ = nullptr;
    delete objects_dir_;
  }
  void SetUp() override { ASSERT_NE(kubesim_, nullptr) << "uplink-kubesim did not start"; }
  void TearDown() override { EXPECT_TRUE(kubesim_->Running()) << kubesim_->Logs(); }

  static testing::CommandResult Kubectl(const std::vector<std::string>& args,
                                        const std::string& stdin_data = "") {
    return kubesim_->Kubectl(args, stdin_data);
  }
  static json::value KubectlJson(const std::vector<std::string>& args) {
    testing::CommandResult result = Kubectl(args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    Result<json::value> parsed = ParseJson(result.out, JsonLimits{16 << 20, 64});
    EXPECT_TRUE(parsed.ok()) << result.out;
    return parsed.ok() ? *parsed : json::value();
  }
  static std::vector<std::string> Lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream stream(text);
    for (std::string line; std::getline(stream, line);) lines.push_back(line);
    return lines;
  }
  static std::vector<std::string> Words(const std::string& line) {
    std::vector<std::string> words;
    std::istringstream stream(line);
    for (std::string word; stream >> word;) words.push_back(word);
    return words;
  }

  static testing::TempDir* objects_dir_;
  static KubesimProcess* kubesim_;
};

testing::TempDir* KubectlTest::objects_dir_ = nullptr;
KubesimProcess* KubectlTest::kubesim_ = nullptr;

TEST_F(KubectlTest, TheKubeconfigPointsAtTheBoundLoopbackPort) {
  EXPECT_TRUE(kubesim_->server_url().starts_with("https://127.0.0.1:"));
  EXPECT_NE(kubesim_->server_url(), "https://127.0.0.1:0");
  EXPECT_NE(kubesim_->Logs().find(kubesim_->server_url()), std::string::npos) << kubesim_->Logs();
}

TEST_F(KubectlTest, GetNodesPrintsTheRealColumnsAndEveryNode) {
  testing::CommandResult result = Kubectl({"get", "nodes"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 5u) << result.out;
  EXPECT_EQ(Words(lines[0]), (std::vector<std::string>{"NAME", "STATUS", "ROLES", "AGE", "VERSION"}));
  std::vector<std::string> names;
  for (size_t i = 1; i < lines.size(); ++i) names.push_back(Words(lines[i]).at(0));
  EXPECT_EQ(names, (std::vector<std::string>{"cpu-node-0001", "gpu-node-0001", "gpu-node-0002",
                                             "gpu-node-0003"}));
  EXPECT_EQ(Words(lines[1]).at(2), "control-plane");
  EXPECT_EQ(Words(lines[2]).at(1), "Ready");
  EXPECT_EQ(Words(lines[2]).at(4), "v1.32.4");
}

TEST_F(KubectlTest, ALabelSelectorReturnsOnlyGpuNodes) {
  json::value list = KubectlJson({"get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o", "json"});
  ASSERT_TRUE(list.is_object());
  const json::array& items = list.at("items").as_array();
  ASSERT_EQ(items.size(), 3u);
  for (const json::value& node : items) {
    EXPECT_EQ(node.at("metadata").at("labels").at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
    EXPECT_EQ(node.at("status").at("capacity").at("nvidia.com/gpu"), "8");
  }
}

TEST_F(KubectlTest, TheKubeSystemNamespaceHasTheUidFromObjects) {
  json::value ns = KubectlJson({"get", "ns", "kube-system", "-o", "json"});
  ASSERT_TRUE(ns.is_object());
  EXPECT_EQ(ns.at("metadata").at("uid"), kKubeSystemUid);
  json::value config_map = KubectlJson({"get", "cm", "preloaded", "-n", "kube-system", "-o", "json"});
  ASSERT_TRUE(config_map.is_object());
  EXPECT_EQ(config_map.at("data").at("k"), "v");
}

TEST_F(KubectlTest, CreateConfigMapThenGetItBack) {
  testing::CommandResult created = Kubectl(
      {"create", "configmap", "x", "-n", "uplink-system", "--from-literal=a=b"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_NE(created.out.find("configmap/x created"), std::string::npos) << created.out;
  json::value config_map = KubectlJson({"get", "configmap", "x", "-n", "uplink-system", "-o", "json"});
  ASSERT_TRUE(config_map.is_object());
  EXPECT_EQ(config_map.at("data").at("a"), "b");
  EXPECT_EQ(config_map.at("metadata").at("namespace"), "uplink-system");
  testing::CommandResult again = Kubectl(
      {"create", "configmap", "x", "-n", "uplink-system", "--from-literal=a=b"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("configmaps \"x\" already exists"), std::string::npos) << again.err;
}

TEST_F(KubectlTest, AnInvalidNameIsReportedAsInvalidWithTheField) {
  testing::CommandResult refused =
      Kubectl({"create", "configmap", "Foo", "-n", "uplink-system", "--from-literal=a=b"});
  EXPECT_NE(refused.exit_code, 0);
  // kubectl words it "ConfigMap \"Foo\" is invalid: ..." or, from the Status details,
  // "The ConfigMap \"Foo\" is invalid: * metadata.name: ...", depending on the command.
  EXPECT_NE(refused.err.find("\"Foo\" is invalid"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("metadata.name: Invalid value"), std::string::npos) << refused.err;
}

TEST_F(KubectlTest, CordonShowsSchedulingDisabledAndUncordonClearsIt) {
  testing::CommandResult cordon = Kubectl({"cordon", "gpu-node-0001"});
  ASSERT_EQ(cordon.exit_code, 0) << cordon.err;
  testing::CommandResult nodes = Kubectl({"get", "nodes", "gpu-node-0001", "--no-headers"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_EQ(Words(nodes.out).at(1), "Ready,SchedulingDisabled") << nodes.out;
  ASSERT_EQ(Kubectl({"uncordon", "gpu-node-0001"}).exit_code, 0);
  nodes = Kubectl({"get", "nodes", "gpu-node-0001", "--no-headers"});
  EXPECT_EQ(Words(nodes.out).at(1), "Ready") << nodes.out;
}

TEST_F(KubectlTest, LabelAndShowLabelsWork) {
  ASSERT_EQ(Kubectl({"label", "node", "gpu-node-0003", "team=ml"}).exit_code, 0);
  testing::CommandResult result = Kubectl({"get", "nodes", "-l", "team=ml", "--show-labels"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 2u) << result.out;
  EXPECT_EQ(Words(lines[0]).back(), "LABELS");
  EXPECT_NE(lines[1].find("team=ml"), std::string::npos);
}

TEST_F(KubectlTest, ChunkedListingPagesThroughEveryNode) {
  testing::CommandResult result = Kubectl({"get", "nodes", "--chunk-size=2", "--no-headers"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> names;
  for (const std::string& line : Lines(result.out)) names.push_back(Words(line).at(0));
  EXPECT_EQ(names, (std::vector<std::string>{"cpu-node-0001", "gpu-node-0001", "gpu-node-0002",
                                             "gpu-node-0003"}));
  EXPECT_NE(kubesim_->Logs().find("ready"), std::string::npos);
}

TEST_F(KubectlTest, ABadTokenIsAnUnauthorizedError) {
  std::ifstream in(kubesim_->kubeconfig());
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  size_t token = config.find("token: \"");
  ASSERT_NE(token, std::string::npos);
  config.insert(token + 8, "wrong");
  std::string path = kubesim_->dir() + "/bad-kubeconfig";
  std::ofstream(path) << config;
  testing::TempDir home;
  testing::CommandResult result = testing::RunCommand(
      {"/usr/bin/kubectl", "--kubeconfig", path, "--cache-dir", home.path(), "get", "nodes"},
      {"HOME=" + home.path(), "PATH=/usr/bin:/bin"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("You must be logged in to the server"), std::string::npos) << result.err;
}

TEST_F(KubectlTest, HostileRequestsGetStatusErrorsAndTheServerStaysUp) {
  auto raw = [](const std::string& path) { return Kubectl({"get", "--raw", path}); };
  testing::CommandResult bad_selector = raw("/api/v1/nodes?labelSelector=a%20in%20((x");
  EXPECT_NE(bad_selector.exit_code, 0);
  EXPECT_NE(bad_selector.err.find("BadRequest"), std::string::npos) << bad_selector.err;
  testing::CommandResult bad_continue = raw("/api/v1/nodes?limit=1&continue=not-a-token");
  EXPECT_NE(bad_continue.err.find("continue key is not valid"), std::string::npos) << bad_continue.err;
  testing::CommandResult missing = raw("/api/v1/nodes/does-not-exist");
  EXPECT_NE(missing.err.find("NotFound"), std::string::npos) << missing.err;
  std::string garbage = kubesim_->dir() + "/garbage.json";
  std::ofstream(garbage) << "{\"metadata\": {\"name\": ";
  testing::CommandResult bad_body =
      Kubectl({"create", "--raw", "/api/v1/namespaces/default/configmaps", "-f", garbage});
  EXPECT_NE(bad_body.exit_code, 0);
  EXPECT_NE(bad_body.err.find("not valid JSON"), std::string::npos) << bad_body.err;
  EXPECT_TRUE(kubesim_->Running());
  testing::CommandResult healthy = raw("/readyz");
  EXPECT_EQ(healthy.out, "ok");
}

// The kubectl commands `uplink connections install` runs, in its order.
TEST_F(KubectlTest, ConfigCurrentContextNamesTheSimulatorsContext) {
  testing::CommandResult context = Kubectl({"config", "current-context"});
  ASSERT_EQ(context.exit_code, 0) << context.err;
  EXPECT_EQ(context.out, "uplink-kubesim\n");
  testing::CommandResult named =
      Kubectl({"--context", "uplink-kubesim", "get", "namespace", "default", "-o", "name"});
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(named.out, "namespace/default\n");
}

TEST_F(KubectlTest, GetNamespaceByNamePrintsItsNameOrFailsWithNotFound) {
  testing::CommandResult found = Kubectl({"get", "namespace", "kube-system", "-o", "name"});
  ASSERT_EQ(found.exit_code, 0) << found.err;
  EXPECT_EQ(found.out, "namespace/kube-system\n");
  testing::CommandResult missing = Kubectl({"get", "namespace", "not-there", "-o", "name"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_EQ(missing.out, "");
  EXPECT_NE(missing.err.find("Error from server (NotFound): namespaces \"not-there\" not found"),
            std::string::npos)
      << missing.err;
}

TEST_F(KubectlTest, CreatingANamespaceTwiceIsAlreadyExists) {
  testing::CommandResult created = Kubectl({"create", "namespace", "e2e-twice"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_EQ(created.out, "namespace/e2e-twice created\n");
  testing::CommandResult again = Kubectl({"create", "namespace", "e2e-twice"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("Error from server (AlreadyExists): namespaces \"e2e-twice\" already exists"),
            std::string::npos)
      << again.err;
  testing::CommandResult invalid = Kubectl({"create", "namespace", "Not_A_Label"});
  EXPECT_NE(invalid.exit_code, 0);
  EXPECT_NE(invalid.err.find("metadata.name: Invalid value: \"Not_A_Label\""), std::string::npos)
      << invalid.err;
}

TEST_F(KubectlTest, PodSecurityLabelsAreSetOverwrittenAndShown) {
  ASSERT_EQ(Kubectl({"create", "namespace", "e2e-labels"}).exit_code, 0);
  testing::CommandResult privileged = Kubectl({"label", "namespace", "e2e-labels",
                                               "pod-security.kubernetes.io/enforce=privileged",
                                               "--overwrite"});
  ASSERT_EQ(privileged.exit_code, 0) << privileged.err;
  EXPECT_EQ(privileged.out, "namespace/e2e-labels labeled\n");
  testing::CommandResult restricted = Kubectl(
      {"label", "namespace", "e2e-labels", "pod-security.kubernetes.io/enforce=restricted",
       "pod-security.kubernetes.io/enforce-version=latest", "--overwrite"});
  ASSERT_EQ(restricted.exit_code, 0) << restricted.err;
  testing::CommandResult shown = Kubectl({"get", "ns", "e2e-labels", "--show-labels"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  std::vector<std::string> lines = Lines(shown.out);
  ASSERT_EQ(lines.size(), 2u) << shown.out;
  EXPECT_EQ(Words(lines[0]), (std::vector<std::string>{"NAME", "STATUS", "AGE", "LABELS"}));
  std::vector<std::string> row = Words(lines[1]);
  ASSERT_EQ(row.size(), 4u) << shown.out;
  EXPECT_EQ(row[0], "e2e-labels");
  EXPECT_EQ(row[1], "Active");
  EXPECT_EQ(row[3],
            "kubernetes.io/metadata.name=e2e-labels,pod-security.kubernetes.io/enforce-version=latest,"
            "pod-security.kubernetes.io/enforce=restricted");
}

TEST_F(KubectlTest, GetNamespacesPrintsNameStatusAndAge) {
  testing::CommandResult result = Kubectl({"get", "namespaces"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> lines = Lines(result.out);
  ASSERT_GE(lines.size(), 6u) << result.out;
  EXPECT_EQ(Words(lines[0]), (std::vector<std::string>{"NAME", "STATUS", "AGE"}));
  bool saw_default = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> row = Words(lines[i]);
    ASSERT_EQ(row.size(), 3u) << lines[i];
    EXPECT_EQ(row[1], "Active") << lines[i];
    saw_default |= row[0] == "default";
  }
  EXPECT_TRUE(saw_default) << result.out;
}

TEST_F(KubectlTest, TheAgentTokenSecretIsCreatedFromStdinReplacedReadAndDeleted) {
  const std::string ns = "e2e-install";
  const std::string token = "uplink_agent_first-token-0123456789";
  const std::string replacement = "uplink_agent_second-token-9876543210";
  ASSERT_EQ(Kubectl({"create", "namespace", ns}).exit_code, 0);

  testing::CommandResult created = Kubectl(
      {"create", "secret", "generic", "uplink-agent", "-n", ns,
       "--from-file=UPLINK_AGENT_TOKEN=/dev/stdin"},
      token);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_EQ(created.out, "secret/uplink-agent created\n");
  testing::CommandResult read = Kubectl({"get", "secret", "uplink-agent", "-n", ns, "-o",
                                         "jsonpath={.data.UPLINK_AGENT_TOKEN}"});
  ASSERT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, Base64Encode(token));

  testing::CommandResult again = Kubectl(
      {"create", "secret", "generic", "uplink-agent", "-n", ns,
       "--from-file=UPLINK_AGENT_TOKEN=/dev/stdin"},
      token);
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("secrets \"uplink-agent\" already exists"), std::string::npos)
      << again.err;

  testing::CommandResult patched = Kubectl(
      {"patch", "secret", "uplink-agent", "-n", ns, "--type", "merge", "--patch-file=/dev/stdin"},
      R"({"data":{"UPLINK_AGENT_TOKEN":")" + Base64Encode(replacement) + R"("}})");
  ASSERT_EQ(patched.exit_code, 0) << patched.err;
  EXPECT_EQ(patched.out, "secret/uplink-agent patched\n");
  read = Kubectl({"get", "secret", "uplink-agent", "-n", ns, "-o",
                  "jsonpath={.data.UPLINK_AGENT_TOKEN}"});
  EXPECT_EQ(read.out, Base64Encode(replacement)) << read.err;

  testing::CommandResult listed = Kubectl({"get", "secrets", "-n", ns});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  std::vector<std::string> lines = Lines(listed.out);
  ASSERT_EQ(lines.size(), 2u) << listed.out;
  EXPECT_EQ(Words(lines[0]), (std::vector<std::string>{"NAME", "TYPE", "DATA", "AGE"}));
  std::vector<std::string> row = Words(lines[1]);
  ASSERT_EQ(row.size(), 4u) << listed.out;
  EXPECT_EQ(row[0], "uplink-agent");
  EXPECT_EQ(row[1], "Opaque");
  EXPECT_EQ(row[2], "1");

  testing::CommandResult deleted = Kubectl({"delete", "secret", "uplink-agent", "-n", ns});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(deleted.out, "secret \"uplink-agent\" deleted\n");
  testing::CommandResult gone = Kubectl({"get", "secret", "uplink-agent", "-n", ns});
  EXPECT_NE(gone.err.find("Error from server (NotFound): secrets \"uplink-agent\" not found"),
            std::string::npos)
      << gone.err;

  testing::CommandResult removed = Kubectl({"delete", "namespace", ns});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_EQ(removed.out, "namespace \"" + ns + "\" deleted\n");
  EXPECT_NE(Kubectl({"get", "namespace", ns, "-o", "name"}).exit_code, 0);
  testing::CommandResult immortal = Kubectl({"delete", "namespace", "default"});
  EXPECT_NE(immortal.exit_code, 0);
  EXPECT_NE(immortal.err.find("Error from server (Forbidden): namespaces \"default\" is forbidden: "
                              "this namespace may not be deleted"),
            std::string::npos)
      << immortal.err;
}

TEST_F(KubectlTest, ASecretInAMissingNamespaceIsNotFound) {
  testing::CommandResult result = Kubectl(
      {"create", "secret", "generic", "s", "-n", "no-such-namespace",
       "--from-file=UPLINK_AGENT_TOKEN=/dev/stdin"},
      "token");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("namespaces \"no-such-namespace\" not found"), std::string::npos)
      << result.err;
}

TEST_F(KubectlTest, AnInvalidSecretKeyIsInvalidAndNamesTheKey) {
  testing::CommandResult result = Kubectl(
      // kubectl validates on the server (fieldValidation=Strict), finding the parameter in the
      // simulator's OpenAPI documents.
      {"create", "-n", "default", "-f", "-"},
      R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"bad-key"},"data":{"bad key":"dG9rZW4="}})");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("data[bad key]: Invalid value: \"bad key\": a valid config key"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(result.err.find("dG9rZW4="), std::string::npos) << result.err;
}

// kubectl 1.32 and later send the Secret as protobuf, earlier ones as JSON; both must land,
// and neither may leave the token in the simulator's output, even with debug logging on.
TEST(KubesimSecretLogsTest, TheTokenNeverAppearsInTheSimulatorsOutput) {
  for (const std::string version : {"v1.32.4", "v1.31.2"}) {
    SCOPED_TRACE(version);
    auto started = KubesimProcess::Start(
        {"--nodes", "1", "--server-version", version, "--log-level", "debug"});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    KubesimProcess& kubesim = **started;
    const std::string token = "uplink_agent_Zq7xK2mN4pR8sT1vW5yB3dF6hJ9";
    const std::string replacement = "uplink_agent_Lc0aE4gI8kO2qU6wY1zX5vT9rP3";
    const std::vector<std::string> forbidden = {token, Base64Encode(token), replacement,
                                                Base64Encode(replacement)};
    const std::vector<std::string> create = {"create", "secret", "generic", "uplink-agent", "-n",
                                             "uplink-system",
                                             "--from-file=UPLINK_AGENT_TOKEN=/dev/stdin"};
    testing::CommandResult created = kubesim.Kubectl(create, token);
    ASSERT_EQ(created.exit_code, 0) << created.err;
    EXPECT_NE(kubesim.Kubectl(create, token).exit_code, 0);  // AlreadyExists
    std::vector<std::string> patch = {"patch", "secret", "uplink-agent", "-n", "uplink-system",
                                      "--type", "merge", "--patch-file=/dev/stdin"};
    // A replacement that is not base64 is refused; the error must not quote it either.
    testing::CommandResult not_base64 =
        kubesim.Kubectl(patch, R"({"data":{"UPLINK_AGENT_TOKEN":")" + replacement + R"(!"}})");
    EXPECT_NE(not_base64.exit_code, 0);
    EXPECT_NE(not_base64.err.find("illegal base64 data at input byte"), std::string::npos)
        << not_base64.err;
    EXPECT_EQ(kubesim
                  .Kubectl(patch, R"({"data":{"UPLINK_AGENT_TOKEN":")" + Base64Encode(replacement) +
                                      R"("}})")
                  .exit_code,
              0);
    testing::CommandResult bad_key = kubesim.Kubectl(
        {"create", "-n", "uplink-system", "-f", "-"},
        R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"bad"},"data":{"bad key":")" +
            Base64Encode(token) + R"("}})");
    EXPECT_NE(bad_key.err.find("data[bad key]"), std::string::npos) << bad_key.err;
    testing::CommandResult read = kubesim.Kubectl(
        {"get", "secret", "uplink-agent", "-n", "uplink-system", "-o",
         "jsonpath={.data.UPLINK_AGENT_TOKEN}"});
    EXPECT_EQ(read.out, Base64Encode(replacement)) << read.err;
    EXPECT_EQ(kubesim.Kubectl({"get", "secrets", "-n", "uplink-system"}).exit_code, 0);
    EXPECT_EQ(kubesim.Kubectl({"delete", "secret", "uplink-agent", "-n", "uplink-system"}).exit_code,
              0);
    EXPECT_EQ(kubesim.Stop(), 0);

    std::string output = kubesim.Stdout() + kubesim.Logs();
    // Debug logging was on and saw the Secret requests...
    EXPECT_NE(output.find("/api/v1/namespaces/uplink-system/secrets"), std::string::npos) << output;
    // ...and none of them left the token behind.
    for (const std::string& needle : forbidden) {
      EXPECT_EQ(output.find(needle), std::string::npos) << needle << " in:\n" << output;
    }
    for (const std::string& needle : forbidden) {
      EXPECT_EQ(not_base64.err.find(needle), std::string::npos) << not_base64.err;
      EXPECT_EQ(bad_key.err.find(needle), std::string::npos) << bad_key.err;
    }
  }
}

TEST(KubesimProcessTest, BadFlagsFailWithAClearMessage) {
  testing::CommandResult no_kubeconfig = testing::RunCommand(
      {std::string(UPLINK_BIN_DIR) + "/uplink-kubesim", "--nodes", "2"}, {}, std::chrono::seconds(20));
  EXPECT_EQ(no_kubeconfig.exit_code, 2);
  EXPECT_NE(no_kubeconfig.err.find("--kubeconfig-out is required"), std::string::npos);
  testing::CommandResult bad_gpus = testing::RunCommand(
      {std::string(UPLINK_BIN_DIR) + "/uplink-kubesim", "--gpus-per-node", "99", "--kubeconfig-out",
       "/tmp/unused"},
      {}, std::chrono::seconds(20));
  EXPECT_EQ(bad_gpus.exit_code, 2);
  EXPECT_NE(bad_gpus.err.find("--gpus-per-node must be between 1 and 16"), std::string::npos);
  testing::CommandResult bad_level = testing::RunCommand(
      {std::string(UPLINK_BIN_DIR) + "/uplink-kubesim", "--log-level", "loud", "--kubeconfig-out",
       "/tmp/unused"},
      {}, std::chrono::seconds(20));
  EXPECT_EQ(bad_level.exit_code, 2);
  EXPECT_NE(bad_level.err.find("--log-level: log level must be one of debug, info, warn, error"),
            std::string::npos)
      << bad_level.err;
}

TEST(KubesimProcessTest, HelpListsEveryFlagAndExitsZero) {
  testing::CommandResult help = testing::RunCommand(
      {std::string(UPLINK_BIN_DIR) + "/uplink-kubesim", "--help"}, {}, std::chrono::seconds(20));
  EXPECT_EQ(help.exit_code, 0) << help.err;
  for (const char* flag : {"--authorization-mode", "--token-auth-file", "--workloads", "--objects",
                           "--kubeconfig-out", "--server-version", "--token-file"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag << "\n" << help.out;
  }
}

TEST(KubesimProcessTest, BadRbacAndWorkloadFlagsFailWithAClearMessage) {
  testing::TempDir dir;
  std::ofstream(dir.path() + "/admin") << "same-token\n";
  std::ofstream(dir.path() + "/collides.csv") << "same-token,jane,1\n";
  std::ofstream(dir.path() + "/short.csv") << "tok,jane\n";
  const std::string bin = std::string(UPLINK_BIN_DIR) + "/uplink-kubesim";
  const std::string out = dir.path() + "/kubeconfig";
  struct Bad {
    std::vector<std::string> args;
    std::string message;
  };
  const Bad cases[] = {
      {{"--authorization-mode", "ABAC"}, "--authorization-mode must be AlwaysAllow or RBAC, not \"ABAC\""},
      {{"--workloads", "--nodes", "1"},
       "--workloads places pods on gpu-node-0002, which this cluster shape does not have: use "
       "--nodes 2 or more and --cpu-nodes 1 or more"},
      {{"--workloads", "--cpu-nodes", "0"}, "--workloads places pods on cpu-node-0001"},
      {{"--token-auth-file", dir.path() + "/short.csv"},
       "token file line 1: must have at least 3 columns (token, user name, user uid), found 2"},
      {{"--token-file", dir.path() + "/admin", "--token-auth-file", dir.path() + "/collides.csv"},
       "the token of user \"jane\" in the token file is the admin token"},
      {{"--token-auth-file", dir.path() + "/missing.csv"}, "missing.csv"},
  };
  for (const Bad& bad : cases) {
    std::vector<std::string> argv = {bin, "--kubeconfig-out", out};
    argv.insert(argv.end(), bad.args.begin(), bad.args.end());
    testing::CommandResult result = testing::RunCommand(argv, {}, std::chrono::seconds(20));
    EXPECT_EQ(result.exit_code, 2) << bad.message;
    EXPECT_NE(result.err.find(bad.message), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find("same-token"), std::string::npos) << result.err;
  }
}

TEST(KubesimProcessTest, TheTokenFileAndServerVersionAreUsedAndSigtermExitsZero) {
  testing::TempDir dir;
  std::ofstream(dir.path() + "/token") << "fixed-token-123\n";
  auto started = KubesimProcess::Start(
      {"--nodes", "1", "--cpu-nodes", "0", "--token-file", dir.path() + "/token",
       "--server-version", "v1.33.2"});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::ifstream in((*started)->kubeconfig());
  std::stringstream config;
  config << in.rdbuf();
  EXPECT_NE(config.str().find("token: \"fixed-token-123\""), std::string::npos);
  testing::CommandResult version = (*started)->Kubectl({"get", "--raw", "/version"});
  EXPECT_NE(version.out.find("\"gitVersion\":\"v1.33.2\""), std::string::npos) << version.err;
  EXPECT_EQ((*started)->Stop(), 0);
}

}  // namespace
}  // namespace uplink::kubesim
