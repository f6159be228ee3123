// The agent's chart repository (GET /charts/index.yaml and the packaged chart, without a
// credential) and install commands (POST /api/v1/connections/{id}/install): what they say,
// what they refuse, and the plan kept and audited with the connection.
#include <gtest/gtest.h>

#include "api_fixture.h"
#include "common/crypto.h"
#include "common/yaml.h"
#include "console/api/chart_repository.h"
#include "console/api/install_plan.h"

namespace uplink::console {
namespace {

using testing::ApiTest;
using testing::Body;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::Object;
using testing::Text;

const std::string kAgentDigest = "sha256:" + std::string(64, 'a');
const std::string kClusterDigest = "sha256:" + std::string(64, 'b');

std::string Install(const json::object& body) { return ToJson(body); }

std::vector<std::string> Strings(const json::object& object, const char* key) {
  std::vector<std::string> out;
  const json::value* value = object.if_contains(key);
  if (value == nullptr || !value->is_array()) return out;
  for (const json::value& item : value->get_array()) {
    if (item.is_string()) out.emplace_back(item.get_string());
  }
  return out;
}

std::vector<std::string> WarningCodes(const json::object& reply) {
  std::vector<std::string> codes;
  if (const json::value* warnings = reply.if_contains("warnings")) {
    for (const json::value& w : warnings->get_array()) {
      codes.push_back(Text(w.get_object(), "code"));
    }
  }
  return codes;
}

class ChartRepositoryTest : public ApiTest {};

TEST_F(ChartRepositoryTest, IndexListsThePackagedChartWithoutACredential) {
  net::Response index = Send("GET", "/charts/index.yaml", "");
  ASSERT_EQ(index.status, 200) << index.body;
  EXPECT_EQ(index.headers.Get("Content-Type"), "application/yaml; charset=utf-8");
  auto parsed = ParseYaml(index.body);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << index.body;
  const json::object& root = parsed->get_object();
  EXPECT_EQ(Text(root, "apiVersion"), "v1");
  const json::object entries_by_name = Object(root, "entries");
  const json::array& entries = entries_by_name.at("uplink-agent").get_array();
  ASSERT_EQ(entries.size(), 1u);
  const json::object& entry = entries[0].get_object();
  const std::string file = "uplink-agent-" UPLINK_VERSION ".tgz";
  EXPECT_EQ(Text(entry, "name"), "uplink-agent");
  EXPECT_EQ(Text(entry, "version"), UPLINK_VERSION);
  EXPECT_EQ(Text(entry, "appVersion"), UPLINK_VERSION);
  EXPECT_EQ(Text(entry, "apiVersion"), "v2");
  EXPECT_EQ(Text(entry, "type"), "application");
  EXPECT_EQ(Text(entry, "kubeVersion"), ">=1.30.0-0");
  EXPECT_EQ(Strings(entry, "urls"), std::vector<std::string>{file});
  EXPECT_EQ(Text(entry, "created"), FormatRfc3339(clock_.Now()));
  EXPECT_NE(Text(entry, "description").find("uplink in-cluster agent"), std::string::npos);

  // The package at that URL, relative to the repository, is what the digest says.
  net::Response archive = Send("GET", "/charts/" + file, "");
  ASSERT_EQ(archive.status, 200) << archive.body;
  EXPECT_EQ(archive.headers.Get("Content-Type"), "application/gzip");
  ASSERT_GT(archive.body.size(), 2u);
  EXPECT_EQ(archive.body.substr(0, 2), "\x1f\x8b") << "not gzip";
  EXPECT_EQ(Text(entry, "digest"), Sha256Hex(archive.body));
  EXPECT_EQ(archive.body, EmbeddedChartFile(file));

  net::Response head = Send("HEAD", "/charts/" + file, "");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
}

TEST_F(ChartRepositoryTest, OtherNamesAreNotFoundAndNothingLeavesTheRepository) {
  for (const std::string path : {"/charts/uplink-agent-0.0.1.tgz", "/charts/Chart.yaml",
                                 "/charts/values.yaml", "/charts/index.yml"}) {
    net::Response response = Send("GET", path, "");
    EXPECT_EQ(response.status, 404) << path << ": " << response.body;
    EXPECT_NE(ErrorMessage(response).find("its index is /charts/index.yaml"), std::string::npos);
  }
  // Paths that are no file name of the repository are the web console's pages, never a
  // chart file.
  for (const std::string path : {"/charts/..%2fChart.yaml", "/charts/", "/charts/a/index.yaml"}) {
    net::Response response = Send("GET", path, "");
    EXPECT_EQ(response.body.find("apiVersion:"), std::string::npos) << path;
    EXPECT_NE(response.body.substr(0, 2), "\x1f\x8b") << path;
  }
  net::Response posted = Send("POST", "/charts/index.yaml", "");
  EXPECT_EQ(posted.status, 405);
}

TEST(ChartPackage, ChartYamlMustSayWhatHelmsIndexNeeds) {
  const std::string good =
      "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"1.0\"\ndescription: d\n"
      "type: application\nkubeVersion: \">=1.30.0-0\"\n";
  auto files = [](std::string_view name) {
    return name == "demo-1.2.3.tgz" ? std::string_view("\x1f\x8b...") : std::string_view();
  };
  auto read = ReadChartPackage(good, files);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->FileName(), "demo-1.2.3.tgz");
  EXPECT_EQ(read->digest, Sha256Hex("\x1f\x8b..."));

  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  for (const auto& [bad, want] : std::vector<std::pair<std::string, std::string>>{
           {replaced("name: demo", "name: Demo_Chart"), "is not a DNS label"},
           {replaced("version: 1.2.3", "version: \"1.2\""), "is not SemVer 2"},
           {replaced("version: 1.2.3", "version: 1.2"), "has no version"},
           {replaced("version: 1.2.3", "version: 01.2.3"), "is not SemVer 2"},
           {replaced("description: d\n", ""), "has no description"},
           {replaced("kubeVersion: \">=1.30.0-0\"", "kubeVersion: 130"), "has no kubeVersion"},
           {replaced("version: 1.2.3", "version: 1.2.4"), "demo-1.2.4.tgz is missing"},
           {"- a\n- b\n", "not a mapping"},
           {"name: [unclosed", "reading Chart.yaml"}}) {
    auto refused = ReadChartPackage(bad, files);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find(want), std::string::npos)
        << refused.status().ToString();
  }
}

TEST(ChartPackage, IndexQuotesEveryValueSoAnyDescriptionStaysOneScalar) {
  ChartPackage chart;
  chart.api_version = "v2";
  chart.name = "demo";
  chart.version = "1.2.3";
  chart.app_version = "1.0";
  chart.description = "a \"quoted\"\nline: with # and {braces}, 'single' and \\ too";
  chart.type = "application";
  chart.kube_version = ">=1.30.0-0";
  chart.keywords = {"gpu", "key: value"};
  chart.digest = std::string(64, 'c');
  auto parsed = ParseYaml(RepositoryIndex(chart, WallTime{}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const json::object& entry = parsed->at("entries").at("demo").get_array()[0].get_object();
  EXPECT_EQ(Text(entry, "description"), chart.description);
  EXPECT_EQ(Strings(entry, "keywords"), chart.keywords);
  EXPECT_EQ(Text(entry, "created"), "1970-01-01T00:00:00Z");
}

class InstallApiTest : public ApiTest {
 protected:
  ConsoleOptions Options() override {
    ConsoleOptions options = testing::FastOptions();
    options.agent_images.agent =
        *ParseImageReference("registry.example:5000/uplink/uplink-agent@" + kAgentDigest);
    options.agent_images.cluster =
        *ParseImageReference("registry.example:5000/uplink/uplink-agent-cluster@" + kClusterDigest);
    return options;
  }

  void SetUp() override {
    ApiTest::SetUp();
    id_ = Text(CreateConnection(admin_key_, "gpu-a"), "id");
  }

  net::Response Generate(const json::object& body, const std::string& id = "") {
    return AsAdmin("POST", "/api/v1/connections/" + (id.empty() ? id_ : id) + "/install",
                   Install(body));
  }

  json::object Generated(const json::object& body) {
    net::Response response = Generate(body);
    EXPECT_EQ(response.status, 200) << response.body;
    return Body(response);
  }

  std::string id_;
};

TEST_F(InstallApiTest, EveryWorkloadByDefaultFromTheConsolesRepositoryPinned) {
  json::object reply = Generated({{"console_url", "https://console.example.com:8443/"}});
  EXPECT_EQ(Strings(reply, "helm_commands"),
            (std::vector<std::string>{
                "helm repo add --force-update uplink https://console.example.com:8443/charts",
                "helm upgrade --install uplink-agent uplink/uplink-agent --version " UPLINK_VERSION
                " --namespace uplink \\\n"
                "    --set-string config.baseUrl=https://console.example.com:8443 \\\n"
                "    --set-string token.existingSecret=uplink-agent-token \\\n"
                "    --set-string nodes.selector=nvidia.com/gpu.present=true \\\n"
                "    --set kubernetes.enabled=true \\\n"
                "    --set-string kubernetes.node.gpu.runtimeClassName=nvidia \\\n"
                "    --set-string image.repository=registry.example:5000/uplink/uplink-agent \\\n"
                "    --set-string image.digest=" +
                    kAgentDigest +
                    " \\\n"
                    "    --set-string "
                    "image.clusterRepository=registry.example:5000/uplink/uplink-agent-cluster \\\n"
                    "    --set-string image.clusterDigest=" +
                    kClusterDigest}));
  EXPECT_TRUE(WarningCodes(reply).empty()) << ToJson(reply);
  json::object install = Object(reply, "install");
  EXPECT_EQ(Strings(install, "workloads"),
            (std::vector<std::string>{"inventory", "cluster", "node"}));
  EXPECT_EQ(Text(install, "pod_security"), "privileged");
  EXPECT_EQ(Text(install, "gpu_runtime_class"), "nvidia");
  EXPECT_EQ(Text(install, "selector"), "nvidia.com/gpu.present=true");
  json::object chart = Object(reply, "chart");
  EXPECT_EQ(Text(chart, "version"), UPLINK_VERSION);
  EXPECT_EQ(Text(chart, "repository"), "https://console.example.com:8443/charts");
  EXPECT_EQ(Text(chart, "digest"),
            "sha256:" + Sha256Hex(EmbeddedChartFile("uplink-agent-" UPLINK_VERSION ".tgz")));
}

TEST_F(InstallApiTest, InventoryAloneIsRestrictedWithoutKubernetesValuesOrTheClusterImage) {
  json::object reply = Generated({{"console_url", "https://console.example.com"},
                                  {"workloads", json::array{"inventory"}},
                                  {"gpu_runtime_class", "nvidia"},
                                  {"selector", "gpu-type in (h100, a100),pool=train"},
                                  {"namespace", "gpu-agents"},
                                  {"secret_name", "agent.token"},
                                  {"kube_context", "prod east"},
                                  {"kubeconfig", "/home/me/.kube/prod"}});
  std::vector<std::string> helm = Strings(reply, "helm_commands");
  ASSERT_EQ(helm.size(), 2u);
  EXPECT_EQ(helm[1],
            "helm upgrade --install uplink-agent uplink/uplink-agent --version " UPLINK_VERSION
            " --namespace gpu-agents --kubeconfig /home/me/.kube/prod --kube-context 'prod east' "
            "\\\n"
            "    --set-string config.baseUrl=https://console.example.com \\\n"
            "    --set-string token.existingSecret=agent.token \\\n"
            "    --set-string 'nodes.selector=gpu-type in (a100\\,h100)\\,pool=train' \\\n"
            "    --set-string image.repository=registry.example:5000/uplink/uplink-agent \\\n"
            "    --set-string image.digest=" +
                kAgentDigest);
  json::object install = Object(reply, "install");
  EXPECT_EQ(Strings(install, "workloads"), std::vector<std::string>{"inventory"});
  EXPECT_EQ(Text(install, "pod_security"), "restricted");
  EXPECT_EQ(Text(install, "gpu_runtime_class"), "") << "only the node pods use one";
}

TEST_F(InstallApiTest, AClusterWithoutGpusLeavesTheRuntimeClassOut) {
  json::object reply = Generated({{"console_url", "https://console.example.com"},
                                  {"gpu_runtime_class", ""},
                                  {"selector", "node-role.kubernetes.io/worker"}});
  const std::string helm = Strings(reply, "helm_commands").at(1);
  EXPECT_EQ(helm.find("runtimeClassName"), std::string::npos) << helm;
  EXPECT_NE(helm.find("--set kubernetes.enabled=true"), std::string::npos) << helm;
}

TEST_F(InstallApiTest, AnAddressTheClusterCannotReachIsWarnedOf) {
  for (const std::string url :
       {"http://127.0.0.1:8443", "https://localhost", "https://LocalHost.:9443",
        "https://gpu.localhost", "https://127.3.2.1", "https://[::1]:8443",
        "https://[::ffff:127.0.0.1]", "https://0.0.0.0:8443", "https://[::]",
        "https://studio.local", "https://Studio.LOCAL."}) {
    json::object reply = Generated({{"console_url", url}});
    std::vector<std::string> codes = WarningCodes(reply);
    ASSERT_FALSE(codes.empty()) << url;
    EXPECT_EQ(codes[0], "console_unreachable") << url;
    const std::string message = Text(reply.at("warnings").get_array()[0].get_object(), "message");
    EXPECT_NE(message.find("The agent cannot reach the console at "), std::string::npos);
    EXPECT_NE(message.find("as the cluster's pods reach it"), std::string::npos) << message;
  }
  for (const std::string url :
       {"https://console.example.com", "https://10.1.2.3:8443", "https://[2001:db8::1]",
        "https://localhost.example.com", "https://local.example.com"}) {
    EXPECT_TRUE(WarningCodes(Generated({{"console_url", url}})).empty()) << url;
  }
  EXPECT_EQ(WarningCodes(Generated({{"console_url", "http://127.0.0.1:8443"}})),
            (std::vector<std::string>{"console_unreachable", "console_not_https"}));
}

TEST_F(InstallApiTest, KeepsThePlanWithTheConnectionAndAuditsEachChange) {
  Generated({{"console_url", "https://console.example.com"}});
  clock_.Advance(std::chrono::minutes(1));
  Generated({{"console_url", "https://other.example.com"}, {"namespace", "elsewhere"}});
  clock_.Advance(std::chrono::minutes(1));
  Generated({{"console_url", "https://console.example.com"}, {"selector", "pool=a"}});

  json::object shown = ShowConnection(admin_key_, id_);
  json::object install = Object(shown, "install");
  EXPECT_EQ(Text(install, "selector"), "pool=a");
  EXPECT_EQ(Text(install, "updated_at"), FormatRfc3339(clock_.Now()));
  EXPECT_EQ(Text(shown, "selector"), "") << "the agent has reported no selector yet";

  // Where the console_url or namespace alone changed, the choice did not: one event.
  json::object audit = Body(AsAdmin("GET", "/api/v1/audit?action=connection.install_plan"));
  const json::array& events = audit.at("events").get_array();
  ASSERT_EQ(events.size(), 2u) << ToJson(audit);
  const json::object& newest = events[0].get_object();
  EXPECT_EQ(Text(Object(newest, "target"), "id"), id_);
  json::object detail = Object(newest, "detail");
  EXPECT_EQ(Text(detail, "selector"), "pool=a");
  EXPECT_EQ(Text(detail, "previous_selector"), "nvidia.com/gpu.present=true");
  EXPECT_EQ(Text(detail, "pod_security"), "privileged");
}

TEST_F(InstallApiTest, APreviewRendersButKeepsNothing) {
  json::object reply = Generated({{"console_url", "https://console.example.com"},
                                  {"selector", "pool=a"},
                                  {"preview", true}});
  EXPECT_NE(Strings(reply, "helm_commands").at(1).find("nodes.selector=pool=a"), std::string::npos);
  EXPECT_TRUE(Object(reply, "install").at("updated_at").is_null());
  EXPECT_TRUE(ShowConnection(admin_key_, id_).at("install").is_null());
  EXPECT_TRUE(Body(AsAdmin("GET", "/api/v1/audit?action=connection.install_plan"))
                  .at("events")
                  .get_array()
                  .empty());
  // Once kept, a preview of the same choice says when it was kept.
  Generated({{"console_url", "https://console.example.com"}, {"selector", "pool=a"}});
  json::object again = Generated(
      {{"console_url", "https://console.example.com"}, {"selector", "pool=a"}, {"preview", true}});
  EXPECT_EQ(Text(Object(again, "install"), "updated_at"), FormatRfc3339(clock_.Now()));
}

TEST_F(InstallApiTest, RefusesWhatCannotBeInstalledSayingWhy) {
  const json::object base{{"console_url", "https://console.example.com"}};
  auto with = [&](const char* key, json::value value) {
    json::object body = base;
    body[key] = std::move(value);
    return body;
  };
  for (const auto& [body, want] : std::vector<std::pair<json::object, std::string>>{
           {with("workloads", json::array{"inventory", "experiments"}),
            "experiments cannot be installed yet"},
           {with("workloads", json::array{"inventory", "workspaces"}),
            "workspaces cannot be installed yet"},
           {with("workloads", json::array{"inventory", "cluster"}),
            "cluster and node come together"},
           {with("workloads", json::array{"cluster", "node"}), "must include inventory"},
           {with("workloads", json::array{"gpu"}), "'gpu' is not a workload"},
           {with("workloads", "inventory"), "workloads must be a list"},
           {with("selector", "a b"), "selector: not a label selector"},
           {with("selector", ""), "an empty selector would report every node"},
           {with("gpu_runtime_class", "Nvidia_GPU"), "gpu_runtime_class must be a RuntimeClass"},
           {with("namespace", "Bad_NS"), "namespace must be a Kubernetes namespace name"},
           {with("secret_name", "a..b"), "secret_name must be a Kubernetes object name"},
           {with("kube_context", "--all"), "kube_context must not start with '-'"},
           {with("kubeconfig", "a\nrm -rf /"), "kubeconfig must not start with '-' or hold"},
           {with("console_url", "https://console.example.com/?x=1"), "console_url must be"},
           {with("console_url", "ftp://console.example.com"), "console_url must be"},
           {with("console_url", "https://user:pw@console.example.com"), "console_url must be"},
           {json::object{}, "console_url"},
           {with("token", "agt_x"), "token"}}) {
    net::Response response = Generate(body);
    EXPECT_EQ(response.status, 400) << ToJson(body) << ": " << response.body;
    EXPECT_NE(ErrorMessage(response).find(want), std::string::npos)
        << ErrorMessage(response) << "\nwanted: " << want;
  }
  EXPECT_TRUE(Body(AsAdmin("GET", "/api/v1/audit?action=connection.install_plan"))
                  .at("events")
                  .get_array()
                  .empty());
}

TEST_F(InstallApiTest, OnlyTheOwnerOfALiveConnection) {
  testing::TestUser other = AddUser("other@example.com");
  net::Response theirs = Send("POST", "/api/v1/connections/" + id_ + "/install", other.api_key,
                              Install({{"console_url", "https://console.example.com"}}));
  EXPECT_EQ(theirs.status, 404) << theirs.body;
  net::Response anonymous = Send("POST", "/api/v1/connections/" + id_ + "/install", "",
                                 Install({{"console_url", "https://console.example.com"}}));
  EXPECT_EQ(anonymous.status, 401);
  ASSERT_EQ(AsAdmin("POST", "/api/v1/connections/" + id_ + "/revoke").status, 200);
  net::Response revoked = Generate({{"console_url", "https://console.example.com"}});
  EXPECT_EQ(revoked.status, 409) << revoked.body;
  EXPECT_NE(ErrorMessage(revoked).find("revoked"), std::string::npos);
}

class UnpinnedInstallApiTest : public InstallApiTest {
 protected:
  ConsoleOptions Options() override { return testing::FastOptions(); }
};

TEST_F(UnpinnedInstallApiTest, WithoutKnownDigestsTheCommandSaysSoRatherThanInventOne) {
  json::object reply = Generated({{"console_url", "https://console.example.com"}});
  const std::string helm = Strings(reply, "helm_commands").at(1);
  EXPECT_EQ(helm.find("image."), std::string::npos) << helm;
  EXPECT_EQ(WarningCodes(reply),
            (std::vector<std::string>{"image_not_pinned", "image_not_pinned"}));
  const std::string message = Text(reply.at("warnings").get_array()[0].get_object(), "message");
  EXPECT_NE(message.find("was not told the digest of its ghcr.io/uplink/uplink-agent image "
                         "(uplink-console serve --agent-image"),
            std::string::npos)
      << message;
  EXPECT_TRUE(Object(reply, "images").at("agent").is_null());
  // The inventory alone needs no cluster image.
  EXPECT_EQ(WarningCodes(Generated({{"console_url", "https://console.example.com"},
                                    {"workloads", json::array{"inventory"}}})),
            std::vector<std::string>{"image_not_pinned"});
}

TEST(ImageReference, OnlyARepositoryWithASha256Digest) {
  const std::string digest = "sha256:" + std::string(64, 'f');
  for (const std::string good :
       {"registry.example:5000/uplink/uplink-agent", "localhost:5000/a/b/c", "uplink-agent",
        "ghcr.io/uplink/uplink-agent", "127.0.0.1:35000/x__y/z.w-v"}) {
    auto parsed = ParseImageReference(good + "@" + digest);
    ASSERT_TRUE(parsed.ok()) << good << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->repository, good);
    EXPECT_EQ(parsed->digest, digest);
    EXPECT_EQ(parsed->ToString(), good + "@" + digest);
  }
  for (const std::string& bad : std::vector<std::string>{
           "uplink-agent", "uplink-agent:0.1.0", "uplink-agent:0.1.0@" + digest,
           "Uplink/agent@" + digest, "uplink-agent@sha256:" + std::string(63, 'f'),
           "uplink-agent@sha256:" + std::string(64, 'F'), "uplink-agent@md5:abc",
           " uplink-agent@" + digest, "a//b@" + digest, "/a@" + digest, "@" + digest,
           std::string(600, 'a') + "@" + digest}) {
    auto parsed = ParseImageReference(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find("REPOSITORY@sha256:DIGEST"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace uplink::console
