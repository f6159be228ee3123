// `uplink offers`, `uplink reservations` and `uplink run` against a real console, with a
// stand-in for the workspace controller that speaks the protocol through its own encoders:
// an offer made, reviewed and given its execution values as a supplier and an admin would,
// a reservation, and a command whose output streams and whose exit code uplink exits with.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <set>
#include <thread>

#include "cluster.h"
#include "common/files.h"
#include "net/client.h"
#include "protocol/agent_api.h"
#include "protocol/workspace.h"

namespace uplink::e2e {
namespace {

const std::string kImage = "registry.example/uplink/workspace@sha256:" + std::string(64, 'b');
constexpr char kClusterUid[] = "e2e-kube-system-uid";

class WorkspaceCliEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    d_.StartConsole({"--workspace-image", kImage, "--workspace-console-cidrs", "127.0.0.1/32"});
    auto client = net::HttpClient::Create({.base_url = d_.console_url()});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    agent_ = std::move(*client);
  }

  testing::CommandResult Admin(std::vector<std::string> args) {
    return d_.Uplink(std::move(args), {{"UPLINK_API_KEY", d_.admin_key()}});
  }

  net::Response AgentPost(const std::string& path, const std::string& credential,
                          const json::object& body) {
    net::Request request;
    request.method = "POST";
    request.target = path;
    request.headers.Set("Authorization", "Bearer " + credential);
    request.headers.Set(protocol::kClusterUidHeader, kClusterUid);
    request.headers.Set("Content-Type", "application/json");
    request.body = ToJson(body);
    auto response = agent_->Send(request);
    EXPECT_TRUE(response.ok()) << response.status().ToString();
    return response.ok() ? *response : net::Response{};
  }

  Deployment d_;
  std::unique_ptr<net::HttpClient> agent_;
};

TEST_F(WorkspaceCliEndToEnd, OfferReviewExecutionReservationAndRun) {
  auto created = Admin({"offers", "create", "prod-a", "--gpus", "4", "--country", "de", "--price",
                        "2.10", "--currency", "eur", "--output", "json"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  json::value offer = ParseJson(created.out).value();
  const std::string offer_id(offer.at("id").as_string());
  const std::string token(offer.at("token").as_string());
  EXPECT_EQ(offer.at("state").as_string(), "draft");

  // The inventory agent's report, as it sends it.
  json::object report{{"agent_version", "0.1.0"},
                      {"cluster_uid", kClusterUid},
                      {"selector", ""},
                      {"nodes", json::array{json::object{{"name", "gpu-node-0"},
                                                         {"ready", true},
                                                         {"unschedulable", false},
                                                         {"gpu_resource", "nvidia.com/gpu"},
                                                         {"gpu_capacity", 8},
                                                         {"gpu_allocatable", 8}}}}};
  net::Request inventory;
  inventory.method = "POST";
  inventory.target = std::string(protocol::kInventoryPath);
  inventory.headers.Set("Authorization", "Bearer " + token);
  inventory.headers.Set("Content-Type", "application/json");
  inventory.body = ToJson(report);
  ASSERT_EQ(agent_->Send(inventory)->status, 200);

  auto unqualified = Admin({"offers", "review", offer_id, "--checks", "authority_confirmed",
                            "--approve-nodes", "gpu-node-0", "--cpu-per-gpu", "8",
                            "--memory-per-gpu", "64Gi", "--disk-per-gpu", "100Gi",
                            "--transfer-budget", "1Ti"});
  ASSERT_EQ(unqualified.exit_code, 0) << unqualified.err;
  EXPECT_NE(unqualified.out.find("Not qualified"), std::string::npos) << unqualified.out;
  auto reviewed = Admin({"offers", "review", offer_id, "--checks", "all", "--approve-nodes",
                         "gpu-node-0", "--cpu-per-gpu", "8", "--memory-per-gpu", "64Gi",
                         "--disk-per-gpu", "100Gi", "--transfer-budget", "1Ti"});
  ASSERT_EQ(reviewed.exit_code, 0) << reviewed.err;
  EXPECT_NE(reviewed.out.find("qualified"), std::string::npos) << reviewed.out;

  const std::string values = d_.dir() + "/execution.json";
  const std::string credential_file = d_.dir() + "/execution-credential";
  auto execution = Admin({"offers", "execution", offer_id, "--out", values, "--credential-out",
                          credential_file, "--kubernetes-api-cidrs", "10.96.0.1/32"});
  ASSERT_EQ(execution.exit_code, 0) << execution.err;
  EXPECT_NE(execution.out.find("helm upgrade uplink-agent uplink/uplink-agent"), std::string::npos)
      << execution.out;
  EXPECT_NE(execution.out.find("--reset-then-reuse-values -f execution.json"), std::string::npos);
  EXPECT_EQ(execution.out.find("exe_"), std::string::npos) << execution.out;
  for (const std::string& file : {values, credential_file}) {
    struct stat info {};
    ASSERT_EQ(::stat(file.c_str(), &info), 0) << file;
    EXPECT_EQ(info.st_mode & 0777, 0600u) << file;
  }
  auto decoded = protocol::DecodeExecutionValues(ParseJson(testing::ReadFileOrEmpty(values)).value());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->workspace_image, kImage);
  EXPECT_EQ(decoded->nodes, std::vector<std::string>{"gpu-node-0"});
  std::string credential = testing::ReadFileOrEmpty(credential_file);
  EXPECT_TRUE(credential.starts_with("exe_"));
  auto again = Admin({"offers", "execution", offer_id, "--rotate", "--out", values});
  EXPECT_EQ(again.exit_code, 1) << "an existing file is never overwritten";
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;

  auto reserved =
      Admin({"reservations", "create", offer_id, "--gpus", "2", "--duration", "2h", "--output",
             "json"});
  ASSERT_EQ(reserved.exit_code, 0) << reserved.err;
  const std::string reservation(ParseJson(reserved.out)->at("id").as_string());
  auto too_many = Admin({"reservations", "create", offer_id, "--gpus", "3"});
  EXPECT_EQ(too_many.exit_code, 6) << too_many.err;
  EXPECT_NE(too_many.err.find("at most 2 GPUs"), std::string::npos) << too_many.err;

  // The controller: runs the reservation, then every command it is handed, once.
  std::atomic<bool> stop = false;
  std::thread controller([&] {
    protocol::WorkspaceSync sync;
    sync.namespace_name = "uplink-workspaces";
    sync.events.push_back({reservation + "/running/1", reservation, "running", "pod Running",
                           FromUnixSeconds(1'900'000'000), "ws-" + reservation.substr(4),
                           "gpu-node-0"});
    std::set<std::string> ran;
    while (!stop) {
      net::Response response = AgentPost(std::string(protocol::kWorkspaceSyncPath), credential,
                                         protocol::EncodeWorkspaceSync(sync));
      sync.events.clear();
      auto reply = protocol::DecodeWorkspaceSyncReply(ParseJson(response.body).value());
      if (!reply.ok()) break;
      for (const protocol::WorkspaceCommand& command : reply->commands) {
        if (!ran.insert(command.id).second) continue;
        const std::string path = protocol::WorkspaceOutputPath(command.id);
        AgentPost(path, credential,
                  protocol::EncodeWorkspaceOutput({0, "hello\n", "running", {}, false, ""}));
        AgentPost(path, credential,
                  protocol::EncodeWorkspaceOutput(
                      {6, "ran: " + command.code + "\n", "exited", 3, false, ""}));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  auto run = Admin({"run", reservation, "--", "echo", "hello;", "exit", "3"});
  stop = true;
  controller.join();
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_EQ(run.out, "hello\nran: echo hello; exit 3\n");

  auto show = Admin({"reservations", "show", reservation});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  for (const char* expected : {"running", "gpu-node-0", "pod Running", "controller"}) {
    EXPECT_NE(show.out.find(expected), std::string::npos) << expected << "\n" << show.out;
  }
  auto stopped = Admin({"reservations", "stop", reservation});
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_NE(stopped.out.find("stopping"), std::string::npos) << stopped.out;
  auto list = Admin({"reservations", "list"});
  EXPECT_NE(list.out.find(reservation), std::string::npos) << list.out;
  EXPECT_EQ(Admin({"run", reservation, "--", "true"}).exit_code, 6)
      << "a stopped reservation runs nothing";
}

}  // namespace
}  // namespace uplink::e2e
