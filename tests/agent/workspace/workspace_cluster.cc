#include "workspace_cluster.h"

#include <filesystem>

#include "common/json.h"
#include "common/time.h"
#include "net/client.h"

namespace uplink::agent::workspace::testing {
namespace {

using uplink::testing::CommandResult;

std::string Values(const ClusterOptions& o, const std::string& ns) {
  json::array nodes;
  for (int i = 1; i <= o.nodes; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "gpu-node-%04d", i);
    nodes.emplace_back(name);
  }
  json::object execution{
      {"enabled", true},
      {"cluster", json::object{{"offerId", "off_test"}, {"name", "kubesim"}}},
      {"workspaceImage", o.image},
      {"sshEnabled", false},
      {"capacityGpus", o.capacity_gpus},
      {"maxLifetimeSeconds", o.max_lifetime_seconds},
      {"nodes", nodes},
      {"namespace", ns},
      {"resourcesPerGpu", json::object{{"cpuMillis", 500},
                                       {"memoryBytes", 256ll << 20},
                                       {"ephemeralStorageBytes", 2ll << 30}}},
      {"kubernetesApi", json::object{{"cidrs", json::array{"127.0.0.1/32"}}, {"port", 443}}},
      {"console", json::object{{"cidrs", json::array{"127.0.0.1/32"}}, {"port", 443}}},
      {"tmpSize", "64Mi"}};
  return ToJson(json::object{{"execution", execution}});
}

}  // namespace

std::unique_ptr<WorkspaceCluster> WorkspaceCluster::Start(const ClusterOptions& options,
                                                          std::string* error) {
  std::unique_ptr<WorkspaceCluster> cluster = StartKubesim(options, error);
  if (!cluster) return nullptr;
  auto console = ConsoleStandIn::Start(kCredential);
  if (!console) {
    *error = "the console stand-in did not start";
    return nullptr;
  }
  Status configured = cluster->Configure(Values(options, cluster->ns_), kCredential, console->url());
  if (!configured.ok()) {
    *error = configured.ToString();
    return nullptr;
  }
  cluster->console_ = std::move(console);
  return cluster;
}

std::unique_ptr<WorkspaceCluster> WorkspaceCluster::StartKubesim(const ClusterOptions& options,
                                                                 std::string* error) {
  std::unique_ptr<WorkspaceCluster> cluster(new WorkspaceCluster());
  cluster->options_ = options;
  cluster->dir_ = std::make_unique<uplink::testing::TempDir>();
  auto kubesim = kubesim::testing::KubesimProcess::Start(
      {"--runtime", options.runtime, "--pod-start-delay", options.pod_start_delay,
       "--server-version", options.server_version, "--nodes", std::to_string(options.nodes),
       "--gpus-per-node", std::to_string(options.gpus_per_node)});
  if (!kubesim.ok()) {
    *error = kubesim.status().ToString();
    return nullptr;
  }
  cluster->kubesim_ = std::move(kubesim).value();
  return cluster;
}

Status WorkspaceCluster::Configure(const std::string& values_json, const std::string& credential,
                                   const std::string& console_url) {
  auto parsed = ParseJson(values_json);
  if (!parsed.ok()) return parsed.status().WithContext("the execution values");
  UPLINK_ASSIGN_OR_RETURN(protocol::ExecutionValues values,
                          protocol::DecodeExecutionValues(*parsed));
  ns_ = values.namespace_name;
  console_url_ = console_url;
  config_path_ = dir_->File("execution.json");
  uplink::testing::WriteFileOrDie(config_path_, values_json, 0644);
  token_path_ = dir_->File("credential");
  uplink::testing::WriteFileOrDie(token_path_, credential + "\n");
  if (!options_.guards) {
    (void)kubesim_->Kubectl({"create", "namespace", ns_});
    return Status::Ok();
  }
  // The guards exactly as the chart makes them from the same values. They do not depend on
  // the credential, so the chart is given a stand-in one: the real one stays out of argv.
  CommandResult rendered = uplink::testing::RunCommand(
      {UPLINK_CHARTRENDER, "--kube-version", "v" + options_.server_version, "--set-string",
       "config.baseUrl=https://console.example", "--set-string",
       "token.value=agt_0123456789abcdefghij", "--set-string",
       "execution.credential.value=" + std::string(kCredential), "-f", config_path_,
       "--show-only", "templates/execution-guards.yaml",
       std::string(UPLINK_SOURCE_DIR) + "/charts/uplink-agent"});
  if (rendered.exit_code != 0) return InternalError("chartrender: " + rendered.err);
  CommandResult applied = kubesim_->Kubectl({"apply", "-f", "-"}, rendered.out);
  if (applied.exit_code != 0) return InternalError("kubectl apply of the guards: " + applied.err);
  return Status::Ok();
}

WorkspaceCluster::~WorkspaceCluster() {
  if (controller_) controller_->Stop();
}

std::vector<std::string> WorkspaceCluster::ControllerArgv(const std::vector<std::string>& extra) const {
  std::vector<std::string> argv = {std::string(UPLINK_BIN_DIR) + "/uplink-agent",
                                   "workspace",
                                   "--config=" + config_path_,
                                   "--kubeconfig=" + kubesim_->kubeconfig(),
                                   "--console=" + console_url_,
                                   "--token-file=" + token_path_,
                                   "--listen=127.0.0.1:" + std::to_string(uplink::testing::FreePort()),
                                   "--instance=workspace-test",
                                   "--release=uplink-agent"};
  if (options_.fast_loops) {
    argv.insert(argv.end(), {"--sync-wait=1s", "--busy-interval=200ms", "--expiry-interval=1s"});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

void WorkspaceCluster::StartController(const std::vector<std::string>& extra) {
  if (controller_) controller_->Stop();
  // A log directory per start, so that each run's logs are its own.
  std::string logs = dir_->File("controller-" + std::to_string(++controller_starts_));
  std::filesystem::create_directories(logs);
  std::vector<std::string> argv = ControllerArgv(extra);
  health_port_ = uplink::testing::FreePort();
  for (std::string& arg : argv) {
    if (arg.starts_with("--listen=")) arg = "--listen=127.0.0.1:" + std::to_string(health_port_);
  }
  controller_ = std::make_unique<uplink::testing::ChildProcess>(argv, logs);
}

namespace {
net::Response HealthGet(int port, const std::string& path) {
  net::Response failed;
  failed.status = 0;
  auto client = net::HttpClient::Create({.base_url = "http://127.0.0.1:" + std::to_string(port)});
  if (!client.ok()) return failed;
  net::Request request;
  request.target = path;
  auto response = (*client)->Send(request);
  return response.ok() ? *response : failed;
}
}  // namespace

std::string WorkspaceCluster::ControllerMetrics() const {
  return HealthGet(health_port_, "/metrics").body;
}

int WorkspaceCluster::ControllerReadyz() const { return HealthGet(health_port_, "/readyz").status; }

double WorkspaceCluster::ControllerMetric(const std::string& sample) const {
  const std::string text = ControllerMetrics();
  size_t at = 0;
  while ((at = text.find(sample + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      return std::strtod(text.c_str() + at + sample.size() + 1, nullptr);
    }
    at += sample.size();
  }
  return -1;
}

int WorkspaceCluster::StopController() {
  if (!controller_) return 0;
  return controller_->Stop(std::chrono::seconds(10));
}

pid_t WorkspaceCluster::ControllerPid() const { return controller_ ? controller_->pid() : -1; }

std::string WorkspaceCluster::ControllerLogs() const {
  return controller_ ? controller_->Stderr() : "";
}

uplink::testing::CommandResult WorkspaceCluster::RunAgent(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {std::string(UPLINK_BIN_DIR) + "/uplink-agent"};
  argv.insert(argv.end(), args.begin(), args.end());
  return uplink::testing::RunCommand(argv, std::chrono::seconds(120));
}

protocol::WorkspaceReservation WorkspaceCluster::Reservation(const std::string& id,
                                                             std::int64_t gpus,
                                                             std::int64_t seconds) const {
  return protocol::WorkspaceReservation{
      .id = id,
      .gpus = gpus,
      .node = "gpu-node-0001",
      .cpu_millis = 500 * gpus,
      .memory_bytes = (256ll << 20) * gpus,
      .ephemeral_storage_bytes = (2ll << 30) * gpus,
      .expires_at = SystemClock().Now() + std::chrono::seconds(seconds),
      .desired = std::string(protocol::kDesiredRunning)};
}

std::string WorkspaceCluster::Pod(const std::string& name, const std::string& jsonpath) const {
  CommandResult result = kubesim_->Kubectl(
      {"get", "pod", name, "-n", ns_, "--ignore-not-found", "-o", "jsonpath=" + jsonpath});
  return result.exit_code == 0 ? result.out : "";
}

bool WorkspaceCluster::PodExists(const std::string& name) const {
  return !Pod(name, "{.metadata.name}").empty();
}

bool WorkspaceCluster::DeletePod(const std::string& name) const {
  return kubesim_->Kubectl({"delete", "pod", name, "-n", ns_, "--wait=false"}).exit_code == 0;
}

bool WorkspaceCluster::PodExistsNow(const std::string& name) const {
  auto access = kubesim_->AdminAccess();
  if (!access.ok()) return true;
  auto client = net::HttpClient::Create({.base_url = access->server_url, .ca_pem = access->ca_pem});
  if (!client.ok()) return true;
  net::Request request;
  request.target = "/api/v1/namespaces/" + ns_ + "/pods/" + name;
  request.headers.Set("Authorization", "Bearer " + access->token);
  auto response = (*client)->Send(request);
  return !response.ok() || response->status != 404;
}

std::vector<std::string> WorkspaceCluster::PodNames() const {
  CommandResult result = kubesim_->Kubectl(
      {"get", "pods", "-n", ns_, "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}"});
  std::vector<std::string> names;
  std::string line;
  for (char c : result.out) {
    if (c == '\n') {
      if (!line.empty()) names.push_back(line);
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) names.push_back(line);
  return names;
}

}  // namespace uplink::agent::workspace::testing
