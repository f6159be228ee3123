// End to end: the helm command `uplink connections install` prints, run as helm would run it
// against the repository the console serves. The index and the package are fetched from a
// real console without a credential, the package must be listed in the index with its digest
// (chartrender --repo-index), and the command's own values render the workloads chosen, with
// the images by digest, the selector and the runtime class.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "e2e/cluster.h"
#include "net/client.h"
#include "support/process.h"

namespace uplink {
namespace {

const std::string kAgentImage =
    "registry.example:5000/uplink/uplink-agent@sha256:" + std::string(64, 'a');
const std::string kClusterImage =
    "registry.example:5000/uplink/uplink-agent-cluster@sha256:" + std::string(64, 'b');

// The words of the printed `helm upgrade --install` command: its continuation lines joined,
// then split as a POSIX shell would (blanks, single quotes).
std::vector<std::string> HelmUpgradeWords(const std::string& out) {
  size_t at = out.find("helm upgrade --install");
  if (at == std::string::npos) return {};
  std::string command;
  for (size_t start = at;;) {
    size_t end = out.find('\n', start);
    std::string line = out.substr(start, end == std::string::npos ? end : end - start);
    if (!line.ends_with("\\")) {
      command += line;
      break;
    }
    command += line.substr(0, line.size() - 1);
    start = end + 1;
  }
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, quoted = false;
  for (char c : command) {
    if (quoted) {
      if (c == '\'') {
        quoted = false;
      } else {
        word += c;
      }
    } else if (c == '\'') {
      quoted = in_word = true;
    } else if (c == ' ') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

class InstallChartE2e : public ::testing::Test {
 protected:
  // The console's chart repository, fetched as helm does: no credential.
  std::string Fetch(const std::string& path) {
    auto client = net::HttpClient::Create({.base_url = d_.console_url()});
    EXPECT_TRUE(client.ok());
    net::Request request;
    request.method = "GET";
    request.target = path;
    auto response = (*client)->Send(request);
    EXPECT_TRUE(response.ok()) << response.status().ToString();
    EXPECT_EQ(response.ok() ? response->status : 0, 200) << path;
    return response.ok() ? response->body : "";
  }

  // Installs with `flags`, then renders the printed command against the served repository.
  json::object RenderPrintedCommand(const std::vector<std::string>& flags) {
    std::vector<std::string> args{"connections",  "install",         "gpu-prod",
                                  "--kubeconfig", cluster_->kubeconfig, "--yes",
                                  "--agent-console", "https://console.example.com"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto installed = d_.Uplink(args, {{"UPLINK_API_KEY", d_.admin_key()}});
    EXPECT_EQ(installed.exit_code, 0) << installed.out << installed.err;
    EXPECT_EQ(installed.err.find("warning"), std::string::npos) << installed.err;

    std::vector<std::string> words = HelmUpgradeWords(installed.out);
    EXPECT_GE(words.size(), 8u) << installed.out;
    if (words.size() < 8) return {};
    EXPECT_EQ(std::vector<std::string>(words.begin(), words.begin() + 8),
              (std::vector<std::string>{"helm", "upgrade", "--install", "uplink-agent",
                                        "uplink/uplink-agent", "--version", UPLINK_VERSION,
                                        "--namespace"}));
    const std::string index_file = d_.dir() + "/index.yaml";
    const std::string package = d_.dir() + "/uplink-agent-" UPLINK_VERSION ".tgz";
    testing::WriteFileOrDie(index_file, Fetch("/charts/index.yaml"));
    testing::WriteFileOrDie(package, Fetch("/charts/uplink-agent-" UPLINK_VERSION ".tgz"));

    std::vector<std::string> render{UPLINK_CHARTRENDER,   "--output",   "json",
                                    "--repo-index",       index_file,   "--repo-url",
                                    d_.console_url() + "/charts", "--namespace", words[8]};
    for (size_t i = 9; i + 1 < words.size(); ++i) {
      if (words[i] == "--set" || words[i] == "--set-string") {
        render.push_back(words[i]);
        render.push_back(words[++i]);
      }
    }
    render.push_back(package);
    testing::CommandResult rendered = testing::RunCommand(render);
    EXPECT_EQ(rendered.exit_code, 0) << rendered.err;
    auto parsed = ParseJson(rendered.out, JsonLimits{16 << 20, 128});
    EXPECT_TRUE(parsed.ok()) << rendered.out.substr(0, 2000);
    return parsed.ok() ? parsed->get_object() : json::object{};
  }

  void SetUp() override {
    d_.StartConsole({"--agent-image", kAgentImage, "--agent-cluster-image", kClusterImage});
    cluster_ = &d_.StartCluster("5b0e3a52-4c9e-4f7c-9d51-1d2f3c4b5a69", 2, 8);
  }

  e2e::Deployment d_;
  e2e::SimulatedCluster* cluster_ = nullptr;
};

// name → the first container of that workload.
std::map<std::string, json::object> Workloads(const json::object& rendered) {
  std::map<std::string, json::object> out;
  for (const json::value& m : rendered.at("manifests").get_array()) {
    const json::object& object = m.at("object").get_object();
    std::string kind(object.at("kind").get_string());
    if (kind != "Deployment" && kind != "DaemonSet") continue;
    const json::object& spec = object.at("spec").at("template").at("spec").get_object();
    json::object container = spec.at("containers").get_array()[0].get_object();
    if (const json::value* runtime = spec.if_contains("runtimeClassName")) {
      container["runtimeClassName"] = *runtime;
    }
    out[std::string(object.at("metadata").at("name").get_string())] = container;
  }
  return out;
}

bool HasArg(const json::object& container, const std::string& arg) {
  for (const json::value& a : container.at("args").get_array()) {
    if (a.is_string() && a.get_string() == arg) return true;
  }
  return false;
}

TEST_F(InstallChartE2e, ThePrintedCommandInstallsEveryWorkloadPinnedFromTheServedRepository) {
  json::object rendered = RenderPrintedCommand(
      {"--selector", "nvidia.com/gpu.present=true,pool in (train, serve)"});
  auto workloads = Workloads(rendered);
  ASSERT_EQ(workloads.size(), 3u) << ToJson(rendered).substr(0, 2000);
  const json::object& inventory = workloads.at("uplink-agent-inventory");
  const json::object& cluster = workloads.at("uplink-agent-cluster");
  const json::object& node = workloads.at("uplink-agent-node");
  EXPECT_EQ(inventory.at("image"), json::value(kAgentImage));
  EXPECT_EQ(node.at("image"), json::value(kAgentImage));
  EXPECT_EQ(cluster.at("image"), json::value(kClusterImage));
  EXPECT_TRUE(HasArg(inventory, "--selector=nvidia.com/gpu.present=true,pool in (serve,train)"))
      << ToJson(inventory);
  EXPECT_TRUE(HasArg(inventory, "--console=https://console.example.com")) << ToJson(inventory);
  EXPECT_EQ(node.at("runtimeClassName"), "nvidia");
}

TEST_F(InstallChartE2e, InventoryAloneOnAClusterWithoutGpus) {
  json::object rendered =
      RenderPrintedCommand({"--workloads", "inventory", "--selector", "node-role/gpu"});
  auto workloads = Workloads(rendered);
  ASSERT_EQ(workloads.size(), 1u);
  EXPECT_TRUE(HasArg(workloads.at("uplink-agent-inventory"), "--selector=node-role/gpu"));
  EXPECT_EQ(std::string(rendered.at("notes").get_string()).find("privileged"), std::string::npos);
}

}  // namespace
}  // namespace uplink
