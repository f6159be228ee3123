// Workspace execution end to end with every real part: uplink-console serve, the inventory
// agent and `uplink-agent workspace` against uplink-kubesim (--runtime process: each workspace
// a local process) with the guards the chart renders from the console's own execution.json,
// and the `uplink` CLI. An offer made, reported, reviewed and given its execution credential
// as a supplier and an admin would; a reservation whose pod runs, its commands through the API
// and through `uplink run`, its stop, and the refusals a user meets on the way.
//
// What the process runtime guarantees and what it does not: the pod's spec, phase, node and
// deletion are Kubernetes' (kubesim's), and commands really run in the workspace's directory
// with their output and exit codes; but a process runs as whoever runs kubesim, so `id -u`
// prints the test's own UID here. UID 1000, the read-only root, no token and no network are
// the podman runtime's, asserted in tests/agent/workspace/podman_e2e_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include "cluster.h"
#include "workspace_cluster.h"

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;
using agent::workspace::testing::ClusterOptions;
using agent::workspace::testing::WorkspaceCluster;

// The console pins it and the chart's admission policy admits only it; the process runtime
// runs no image, so its digest need name nothing pulled.
const std::string kImage = "localhost/uplink-workspace@sha256:" + std::string(64, 'c');

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::string String(const json::value& object, const char* field) {
  const json::value* value = object.is_object() ? object.get_object().if_contains(field) : nullptr;
  return value != nullptr && value->is_string() ? std::string(value->get_string()) : "";
}

class WorkspaceEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;  // two nodes of 4 GPUs
    std::string error;
    cluster_ = WorkspaceCluster::StartKubesim(options, &error);
    ASSERT_NE(cluster_, nullptr) << error;
    d_.StartConsole({"--workspace-image", kImage, "--workspace-console-cidrs", "127.0.0.1/32"});
  }
  void TearDown() override {
    if (HasFailure() && cluster_) std::fprintf(stderr, "%s\n", cluster_->ControllerLogs().c_str());
  }

  // An offer of `gpus` GPUs, its inventory reported by the real agent: `connected`.
  std::pair<std::string, std::string> ConnectedOffer(int gpus) {
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

  net::Response Review(const std::string& offer_id, bool all_checks) {
    const std::string checks = all_checks ? "true" : "false";
    return d_.Api("POST", "/api/v1/offers/" + offer_id + "/review",
                  R"({"authority_confirmed":true,"hardware_compatible":true,"isolation_verified":true,)"
                  R"("expiry_and_cleanup_checked":true,"disk_eviction_tested":true,)"
                  R"("network_policy_enforced":)" + checks + R"(,"price_includes_traffic":true,)"
                  R"("cpu_per_gpu":"500m","memory_per_gpu":"256Mi","disk_per_gpu":"2Gi",)"
                  R"("transfer_budget_bytes":"1Ti","approved_nodes":["gpu-node-0001"]})");
  }

  net::Response Reserve(const std::string& offer_id, int gpus) {
    return d_.Api("POST", "/api/v1/reservations",
                  R"({"offer_id":")" + offer_id + R"(","gpus":)" + std::to_string(gpus) +
                      R"(,"duration_seconds":600})");
  }

  // Posts a command and waits for its end through the API's long poll.
  json::value RunCommand(const std::string& reservation, const std::string& kind,
                         const std::string& code) {
    const std::string commands = "/api/v1/reservations/" + reservation + "/commands";
    net::Response posted = d_.Api(
        "POST", commands,
        ToJson(json::object{{"kind", kind}, {"code", code}, {"timeout_s", 60}}));
    EXPECT_EQ(posted.status, 201) << posted.body;
    const std::string id = String(ParseJson(posted.body).value_or(json::value()), "id");
    json::value view;
    testing::WaitFor([&] {
      view = d_.ApiJson("GET", commands + "/" + id + "?wait=5");
      return protocol::IsFinalCommandState(String(view, "state"));
    }, 60s);
    return view;
  }

  Deployment d_;
  std::unique_ptr<WorkspaceCluster> cluster_;
};

TEST_F(WorkspaceEndToEnd, OfferToReservationToCommandsToStopWithTheRealConsoleAndController) {
  auto [offer_id, token] = ConnectedOffer(8);
  ASSERT_FALSE(offer_id.empty());

  // Review, then the execution credential and execution.json.
  net::Response reviewed = Review(offer_id, true);
  ASSERT_EQ(reviewed.status, 200) << reviewed.body;
  EXPECT_EQ(String(ParseJson(reviewed.body).value(), "state"), "qualified");
  net::Response execution = d_.Api("POST", "/api/v1/offers/" + offer_id + "/execution",
                                   R"({"kubernetes_api_cidrs":["127.0.0.1/32"]})");
  ASSERT_EQ(execution.status, 201) << execution.body;
  json::value issued = ParseJson(execution.body).value();
  const std::string credential = String(issued, "credential");
  ASSERT_TRUE(credential.starts_with("exe_"));
  const std::string values_json = ToJson(issued.at("values"));
  EXPECT_TRUE(Contains(values_json, kImage)) << values_json;

  // The controller with those values, the chart's guards and the credential, against kubesim.
  ASSERT_TRUE(cluster_->Configure(values_json, credential, d_.console_url()).ok());
  cluster_->StartController();

  net::Response reserved = Reserve(offer_id, 2);
  ASSERT_EQ(reserved.status, 201) << reserved.body;
  const std::string id = String(ParseJson(reserved.body).value(), "id");
  const std::string path = "/api/v1/reservations/" + id;
  json::value reservation;
  ASSERT_TRUE(testing::WaitFor([&] {
    reservation = d_.ApiJson("GET", path);
    return String(reservation, "state") == "running";
  }, 60s)) << ToJson(reservation) << cluster_->ControllerLogs();
  const std::string pod = "ws-res-" + id.substr(4);
  EXPECT_EQ(String(reservation, "node"), "gpu-node-0001");
  EXPECT_EQ(String(reservation, "pod"), pod);
  EXPECT_EQ(cluster_->Pod(pod, "{.status.phase}"), "Running");
  EXPECT_EQ(cluster_->Pod(pod, "{.spec.nodeName}"), "gpu-node-0001");
  EXPECT_EQ(cluster_->Pod(pod, "{.spec.containers[0].image}"), kImage);
  EXPECT_EQ(cluster_->Pod(pod, "{.spec.containers[0].resources.limits.nvidia\\.com/gpu}"), "2");

  // Commands through the API: the process runtime runs them as the test's own user.
  const std::string uid = std::to_string(::getuid()) + "\n";
  json::value id_u = RunCommand(id, "shell", "id -u");
  EXPECT_EQ(String(id_u, "state"), "exited") << ToJson(id_u);
  EXPECT_EQ(id_u.at("exit_code").as_int64(), 0);
  EXPECT_EQ(String(id_u, "output"), uid);
  json::value shell = RunCommand(id, "shell", "echo out; echo err >&2; exit 3");
  EXPECT_EQ(String(shell, "state"), "exited") << ToJson(shell);
  EXPECT_EQ(shell.at("exit_code").as_int64(), 3);
  EXPECT_EQ(String(shell, "output"), "out\nerr\n");
  json::value python = RunCommand(id, "python", "import sys\nprint(6 * 7)\nsys.exit(4)\n");
  EXPECT_EQ(String(python, "state"), "exited") << ToJson(python);
  EXPECT_EQ(python.at("exit_code").as_int64(), 4);
  EXPECT_EQ(String(python, "output"), "42\n");

  // Through `uplink run`: the output streamed, the command's exit code uplink's.
  const std::map<std::string, std::string> admin{{"UPLINK_API_KEY", d_.admin_key()}};
  testing::CommandResult run_id = d_.Uplink({"run", id, "--", "id", "-u"}, admin);
  EXPECT_EQ(run_id.exit_code, 0) << run_id.err;
  EXPECT_EQ(run_id.out, uid);
  testing::CommandResult run_shell = d_.Uplink({"run", id, "--", "echo", "hi;", "exit", "7"}, admin);
  EXPECT_EQ(run_shell.exit_code, 7) << run_shell.err;
  EXPECT_EQ(run_shell.out, "hi\n");
  testing::CommandResult run_python =
      d_.Uplink({"run", id, "--python", "--", "import sys; print('py'); sys.exit(5)"}, admin);
  EXPECT_EQ(run_python.exit_code, 5) << run_python.err;
  EXPECT_EQ(run_python.out, "py\n");

  // Stop: completed only once the pod is gone.
  net::Response stopped = d_.Api("POST", path + "/stop", "{}");
  ASSERT_EQ(stopped.status, 200) << stopped.body;
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

TEST_F(WorkspaceEndToEnd, RefusesAnUnqualifiedOfferAndMoreThanAnyApprovedNodeHasRoom) {
  auto [offer_id, token] = ConnectedOffer(8);
  ASSERT_FALSE(offer_id.empty());
  net::Response connected = Reserve(offer_id, 1);
  EXPECT_EQ(connected.status, 409) << connected.body;
  EXPECT_TRUE(Contains(connected.body, "is connected, not qualified: it cannot be reserved until "
                                       "an admin qualifies it"))
      << connected.body;

  // One check not confirmed: in review, still not reservable.
  net::Response in_review = Review(offer_id, false);
  ASSERT_EQ(in_review.status, 200) << in_review.body;
  EXPECT_EQ(String(ParseJson(in_review.body).value(), "state"), "in_review");
  net::Response refused = Reserve(offer_id, 1);
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_TRUE(Contains(refused.body, "is in_review, not qualified")) << refused.body;

  // Qualified, with one approved node of 4 GPUs under a capacity of 8.
  ASSERT_EQ(Review(offer_id, true).status, 200);
  ASSERT_EQ(d_.Api("POST", "/api/v1/offers/" + offer_id + "/execution", "{}").status, 201);
  ASSERT_EQ(Reserve(offer_id, 3).status, 201);
  net::Response too_large = Reserve(offer_id, 5);
  EXPECT_EQ(too_large.status, 409) << too_large.body;
  EXPECT_TRUE(Contains(too_large.body, "that is ready has 5 GPUs free (the most free on one node "
                                       "is 1); ask for fewer GPUs or try later"))
      << too_large.body;
  net::Response over_capacity = Reserve(offer_id, 6);
  EXPECT_EQ(over_capacity.status, 409) << over_capacity.body;
  EXPECT_TRUE(Contains(over_capacity.body, "at most 5 GPUs can be reserved now")) << over_capacity.body;
  json::value list = d_.ApiJson("GET", "/api/v1/reservations");
  EXPECT_EQ(list.at("reservations").as_array().size(), 1u) << "a refusal reserves nothing";
}

}  // namespace
}  // namespace uplink::e2e
