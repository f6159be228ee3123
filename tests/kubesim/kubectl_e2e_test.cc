// End to end: the real uplink-kubesim binary over TLS, driven by the real /usr/bin/kubectl.
// kubectl's stderr may carry version-skew warnings, so assertions read stdout only.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

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

  static testing::CommandResult Kubectl(const std::vector<std::string>& args) {
    return kubesim_->Kubectl(args);
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
