#include "workspace_flow.h"

#include <vector>

#include "protocol/workspace.h"

namespace uplink::e2e {

using namespace std::chrono_literals;
using agent::workspace::testing::ClusterOptions;
using agent::workspace::testing::WorkspaceCluster;

std::string String(const json::value& object, const char* field) {
  const json::value* value = object.is_object() ? object.get_object().if_contains(field) : nullptr;
  return value != nullptr && value->is_string() ? std::string(value->get_string()) : "";
}

void WorkspaceFlow::StartWith(const std::string& runtime, const std::string& image) {
  ClusterOptions options;  // two nodes of 4 GPUs
  options.runtime = runtime;
  image_ = image;
  std::string error;
  cluster_ = WorkspaceCluster::StartKubesim(options, &error);
  ASSERT_NE(cluster_, nullptr) << error;
  d_.StartConsole(ConsoleFlags());
}

std::vector<std::string> WorkspaceFlow::ConsoleFlags() const {
  std::vector<std::string> flags{"--workspace-image", image_, "--workspace-console-cidrs",
                                 "127.0.0.1/32"};
  flags.insert(flags.end(), console_flags_.begin(), console_flags_.end());
  return flags;
}

void WorkspaceFlow::TearDown() {
  if (HasFailure() && cluster_) std::fprintf(stderr, "%s\n", cluster_->ControllerLogs().c_str());
}

std::pair<std::string, std::string> WorkspaceFlow::ConnectedOffer(int gpus) {
  net::Response created = d_.Api(
      "POST", "/api/v1/offers",
      R"({"cluster_name":"prod-a","gpus":)" + std::to_string(gpus) +
          R"(,"country":"DE","availability":"always","price_per_gpu_hour":"2.10","currency":"EUR"})");
  EXPECT_EQ(created.status, 201) << created.body;
  json::value offer = ParseJson(created.body).value_or(json::value());
  const std::string id = String(offer, "id"), token = String(offer, "token");
  EXPECT_EQ(String(offer, "state"), "draft");
  EXPECT_TRUE(token.starts_with("agt_")) << created.body;
  SimulatedCluster kubesim{cluster_->kubesim().kubeconfig(), "", nullptr};
  testing::CommandResult inventory = d_.RunAgentOnce(kubesim, d_.WriteToken(token));
  EXPECT_EQ(inventory.exit_code, 0) << inventory.err;
  EXPECT_EQ(String(d_.ApiJson("GET", "/api/v1/offers/" + id), "state"), "connected");
  return {id, token};
}

net::Response WorkspaceFlow::Review(const std::string& offer_id, bool all_checks) {
  const std::string checks = all_checks ? "true" : "false";
  return d_.Api("POST", "/api/v1/offers/" + offer_id + "/review",
                R"({"authority_confirmed":true,"hardware_compatible":true,"isolation_verified":true,)"
                R"("expiry_and_cleanup_checked":true,"disk_eviction_tested":true,)"
                R"("network_policy_enforced":)" + checks + R"(,"price_includes_traffic":true,)"
                R"("cpu_per_gpu":"500m","memory_per_gpu":")" + memory_per_gpu_ +
                R"(","disk_per_gpu":"2Gi","transfer_budget_bytes":")" + transfer_budget_ +
                R"(","approved_nodes":["gpu-node-0001"]})");
}

net::Response WorkspaceFlow::Reserve(const std::string& offer_id, int gpus) {
  return d_.Api("POST", "/api/v1/reservations",
                R"({"offer_id":")" + offer_id + R"(","gpus":)" + std::to_string(gpus) +
                    R"(,"duration_seconds":600})");
}

void WorkspaceFlow::QualifyAndStartController(Qualified* qualified) {
  std::tie(qualified->offer_id, qualified->inventory_token) = ConnectedOffer(8);
  ASSERT_FALSE(qualified->offer_id.empty());

  // Review, then the execution credential and execution.json.
  net::Response reviewed = Review(qualified->offer_id, true);
  ASSERT_EQ(reviewed.status, 200) << reviewed.body;
  EXPECT_EQ(String(ParseJson(reviewed.body).value(), "state"), "qualified");
  net::Response execution = d_.Api("POST", "/api/v1/offers/" + qualified->offer_id + "/execution",
                                   ToJson(json::object{{"kubernetes_api_cidrs", json::array{"127.0.0.1/32"}},
                                                        {"ssh_enabled", ssh_enabled_}}));
  ASSERT_EQ(execution.status, 201) << execution.body;
  json::value issued = ParseJson(execution.body).value();
  qualified->credential = String(issued, "credential");
  ASSERT_TRUE(qualified->credential.starts_with("exe_"));
  const std::string values_json = ToJson(issued.at("values"));
  EXPECT_NE(values_json.find(image_), std::string::npos) << values_json;

  // The controller with those values, the chart's guards and the credential, against kubesim.
  Status configured = cluster_->Configure(values_json, qualified->credential, d_.console_url());
  ASSERT_TRUE(configured.ok()) << configured.ToString();
  std::vector<std::string> flags;
  if (ssh_enabled_) flags.push_back("--ssh");
  flags.insert(flags.end(), controller_flags_.begin(), controller_flags_.end());
  cluster_->StartController(flags);
}

void WorkspaceFlow::ReserveUntilRunning(const std::string& offer_id, int gpus, std::string* id,
                                        std::string* pod) {
  net::Response reserved = Reserve(offer_id, gpus);
  ASSERT_EQ(reserved.status, 201) << reserved.body;
  *id = String(ParseJson(reserved.body).value(), "id");
  json::value reservation;
  // A container's start is podman's: seconds, more on a busy machine.
  ASSERT_TRUE(testing::WaitFor([&] {
    reservation = d_.ApiJson("GET", "/api/v1/reservations/" + *id);
    return String(reservation, "state") == "running";
  }, 180s)) << ToJson(reservation) << cluster_->ControllerLogs();
  *pod = "ws-res-" + id->substr(4);
  EXPECT_EQ(String(reservation, "node"), "gpu-node-0001");
  EXPECT_EQ(String(reservation, "pod"), *pod);
  EXPECT_EQ(cluster_->Pod(*pod, "{.status.phase}"), "Running");
  EXPECT_EQ(cluster_->Pod(*pod, "{.spec.nodeName}"), "gpu-node-0001");
  EXPECT_EQ(cluster_->Pod(*pod, "{.spec.containers[0].image}"), image_);
  EXPECT_EQ(cluster_->Pod(*pod, "{.spec.containers[0].resources.limits.nvidia\\.com/gpu}"),
            std::to_string(gpus));
}

json::value WorkspaceFlow::RunCommand(const std::string& reservation, const std::string& kind,
                                      const std::string& code) {
  const std::string commands = "/api/v1/reservations/" + reservation + "/commands";
  net::Response posted = d_.Api(
      "POST", commands, ToJson(json::object{{"kind", kind}, {"code", code}, {"timeout_s", 60}}));
  EXPECT_EQ(posted.status, 201) << posted.body;
  const std::string id = String(ParseJson(posted.body).value_or(json::value()), "id");
  json::value view;
  testing::WaitFor([&] {
    view = d_.ApiJson("GET", commands + "/" + id + "?wait=5");
    return protocol::IsFinalCommandState(String(view, "state"));
  }, 60s);
  return view;
}

void WorkspaceFlow::StopUntilCompleted(const std::string& id, const std::string& pod) {
  const std::string path = "/api/v1/reservations/" + id;
  net::Response stopped = d_.Api("POST", path + "/stop", "{}");
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  json::value reservation;
  ASSERT_TRUE(testing::WaitFor([&] {
    reservation = d_.ApiJson("GET", path);
    return String(reservation, "state") == "completed";
  }, 60s)) << ToJson(reservation);
  EXPECT_FALSE(cluster_->PodExistsNow(pod)) << "completed is reported once the pod is gone";
  EXPECT_FALSE(cluster_->PodExists(pod));
  std::vector<std::string> states;
  for (const json::value& transition : reservation.at("transitions").as_array()) {
    states.push_back(String(transition, "state"));
  }
  EXPECT_EQ(states, (std::vector<std::string>{"reserved", "provisioning", "running", "stopping",
                                              "completed"}))
      << ToJson(reservation);
  EXPECT_TRUE(cluster_->PodNames().empty());
}

}  // namespace uplink::e2e
