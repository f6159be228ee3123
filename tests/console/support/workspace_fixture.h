// A console with a supplier and a user, and helpers that play them and the workspace
// controller: offers reviewed and qualified with execution on, reservations, the controller's
// sync and output. Shared by the workspace and SSH tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api_fixture.h"
#include "protocol/agent_api.h"
#include "protocol/workspace.h"

namespace uplink::console {

using testing::ApiTest;
using testing::Body;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::Object;
using testing::PendingReply;
using testing::TestUser;
using testing::Text;

inline const std::string kImage = "registry.example/uplink/workspace@sha256:" + std::string(64, 'a');
inline const std::string kClusterUid = "5f0c7a8e-kube-system";

inline std::int64_t Int(const json::object& object, const char* key) {
  const json::value* value = object.if_contains(key);
  return value && value->is_int64() ? value->get_int64() : -1;
}

class WorkspaceApiTest : public ApiTest {
 protected:
  ConsoleOptions Options() override {
    ConsoleOptions options = testing::FastOptions();
    options.agent_images.workspace = ParseImageReference(kImage).value();
    options.workspace_console_cidrs = {"192.0.2.0/24"};
    options.workspace_output_cap_bytes = 64;
    return options;
  }

  void SetUp() override {
    ApiTest::SetUp();
    supplier_ = AddUser("supplier@example.com");
    user_ = AddUser("user@example.com");
  }

  // An offer of `gpus` by the supplier; its reply (with "token").
  json::object CreateOffer(int gpus = 4, const std::string& cluster = "prod-a") {
    net::Response response =
        Send("POST", "/api/v1/offers", supplier_.api_key,
             ToJson(json::object{{"cluster_name", cluster},
                                 {"gpus", gpus},
                                 {"country", "de"},
                                 {"availability", "always"},
                                 {"price_per_gpu_hour", "2.10"},
                                 {"currency", "eur"}}));
    EXPECT_EQ(response.status, 201) << response.body;
    return Body(response);
  }

  std::string ReviewBody(bool all_checked, const json::array& nodes) {
    return ToJson(json::object{{"authority_confirmed", true},
                               {"hardware_compatible", true},
                               {"isolation_verified", true},
                               {"expiry_and_cleanup_checked", true},
                               {"disk_eviction_tested", true},
                               {"network_policy_enforced", all_checked},
                               {"price_includes_traffic", true},
                               {"cpu_per_gpu", "7500m"},
                               {"memory_per_gpu", "64Gi"},
                               {"disk_per_gpu", 107374182400},
                               {"transfer_budget_bytes", transfer_budget_},
                               {"approved_nodes", nodes}});
  }

  // The qualifying review with `from` replaced by `to` (JSON text).
  std::string ReviewWith(const std::string& from, const std::string& to) {
    std::string body = ReviewBody(true, {"gpu-node-0"});
    size_t at = body.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? body : body.replace(at, from.size(), to);
  }

  // An offer whose cluster reported 2 nodes, reviewed and qualified with gpu-node-0 approved,
  // execution enabled (with SSH when `ssh`); the execution credential.
  std::string QualifiedOffer(int gpus = 4, bool ssh = false) {
    json::object offer = CreateOffer(gpus);
    offer_id_ = Text(offer, "id");
    EXPECT_EQ(ReportFrom(Text(offer, "token"), kClusterUid, 2).status, 200);
    net::Response reviewed = AsAdmin("POST", "/api/v1/offers/" + offer_id_ + "/review",
                                     ReviewBody(true, {"gpu-node-0"}));
    EXPECT_EQ(reviewed.status, 200) << reviewed.body;
    net::Response execution = Send("POST", "/api/v1/offers/" + offer_id_ + "/execution",
                                   supplier_.api_key,
                                   ssh ? R"({"kubernetes_api_cidrs":["10.96.0.1/32"],"ssh_enabled":true})"
                                       : R"({"kubernetes_api_cidrs":["10.96.0.1/32"]})");
    EXPECT_EQ(execution.status, 201) << execution.body;
    return Text(Body(execution), "credential");
  }

  net::Request AgentRequest(const std::string& target, const std::string& credential,
                            const json::object& body, const std::string& uid = kClusterUid) {
    net::Request request;
    request.method = "POST";
    request.target = target;
    if (!credential.empty()) request.headers.Set("Authorization", "Bearer " + credential);
    request.headers.Set("User-Agent", protocol::AgentUserAgent("0.1.0", "workspace"));
    if (!uid.empty()) request.headers.Set(protocol::kClusterUidHeader, uid);
    request.headers.Set("Content-Type", "application/json");
    request.body = ToJson(body);
    request.remote_address = testing::kClientAddress;
    return request;
  }

  protocol::WorkspaceSync Sync(std::vector<protocol::WorkspaceEvent> events = {},
                               std::int64_t wait = 0) {
    protocol::WorkspaceSync sync;
    sync.instance = "uplink-workspace-7d9f-abcde";
    sync.version = "0.1.0";
    sync.release = "gpu-supply";
    sync.namespace_name = "uplink-workspaces";
    sync.wait_seconds = wait;
    sync.events = std::move(events);
    return sync;
  }

  net::Response PostSync(const std::string& credential, const protocol::WorkspaceSync& sync,
                         const std::string& uid = kClusterUid) {
    return testing::Call(api_->router(),
                         AgentRequest(std::string(protocol::kWorkspaceSyncPath), credential,
                                      protocol::EncodeWorkspaceSync(sync), uid));
  }

  protocol::WorkspaceSyncReply SyncReply(const net::Response& response) {
    EXPECT_EQ(response.status, 200) << response.body;
    auto reply = protocol::DecodeWorkspaceSyncReply(ParseJson(response.body).value());
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    return reply.value_or(protocol::WorkspaceSyncReply{});
  }

  net::Response PostOutput(const std::string& credential, const std::string& command_id,
                           const protocol::WorkspaceOutput& output) {
    return testing::Call(api_->router(),
                         AgentRequest(protocol::WorkspaceOutputPath(command_id), credential,
                                      protocol::EncodeWorkspaceOutput(output)));
  }

  json::object Reserve(const std::string& key, int gpus, int seconds = 3600, int status = 201) {
    net::Response response = Send("POST", "/api/v1/reservations", key,
                                  ToJson(json::object{{"offer_id", offer_id_},
                                                      {"gpus", gpus},
                                                      {"duration_seconds", seconds}}));
    EXPECT_EQ(response.status, status) << response.body;
    return Body(response);
  }

  protocol::WorkspaceEvent Event(const std::string& reservation, const std::string& state,
                                 int n = 1) {
    return {reservation + "/" + state + "/" + std::to_string(n), reservation, state, "seen",
            clock_.Now(), "ws-" + reservation.substr(4), "gpu-node-0"};
  }

  TestUser supplier_;
  TestUser user_;
  std::string offer_id_;
  // The review's transfer budget: what each reservation gets for SSH.
  json::value transfer_budget_ = "1Ti";
};

}  // namespace uplink::console
