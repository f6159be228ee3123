// A console with one connection ("prod", the admin's) and helpers that play its user and
// its cluster role: commands, the agent's poll and results, snapshot uploads. Shared by the
// kubectl and approval tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "api_fixture.h"
#include "common/gzip.h"

namespace uplink::console {

using testing::Body;
using testing::PendingReply;
using testing::Text;

inline const std::string kSpool = "9f2c4e0a5b7d41c3a8e6f0b1c2d3e4f5";
inline const std::string kClusterStream = "cluster/uplink-cluster-7d9f-x2";

inline json::object ResultJson(const std::string& out, int exit_code = 0, const std::string& err = "") {
  return json::object{
      {"exit_code", exit_code}, {"stdout", out}, {"stderr", err}, {"duration_ms", 84}};
}

inline json::object SnapshotResult(const std::string& name, const json::array& argv,
                            const std::string& out = "NAME   STATUS\n") {
  return json::object{{"name", name},  {"argv", argv}, {"exit_code", 0},
                      {"stdout", out}, {"stderr", ""}, {"duration_ms", 61}};
}

inline json::object SnapshotJson(const std::string& collected_at, json::array results) {
  return json::object{{"kind", "cluster_snapshot"},
                      {"collected_at", collected_at},
                      {"results", std::move(results)}};
}

class KubectlApiTest : public testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    json::object created = CreateConnection(admin_key_, "prod");
    id_ = Text(created, "id");
    token_ = Text(created, "token");
  }

  std::string Path(const std::string& tail) { return "/api/v1/connections/" + id_ + tail; }

  net::Request UserRequest(const std::string& method, const std::string& target,
                           const std::string& credential, const std::string& body) {
    net::Request request;
    request.method = method;
    request.target = target;
    request.headers.Set("Authorization", "Bearer " + credential);
    if (!body.empty()) request.headers.Set("Content-Type", "application/json");
    request.body = body;
    request.remote_address = testing::kClientAddress;
    return request;
  }

  PendingReply KubectlRaw(const std::string& body, const std::string& credential = "") {
    PendingReply pending;
    api_->router().Dispatch(
        UserRequest("POST", Path("/kubectl"), credential.empty() ? admin_key_ : credential, body),
        pending.Callback());
    return pending;
  }

  PendingReply Kubectl(const std::vector<std::string>& args, const std::string& credential = "") {
    json::array argv{"kubectl"};
    for (const std::string& arg : args) argv.emplace_back(arg);
    return KubectlRaw(ToJson(json::object{{"argv", std::move(argv)}}), credential);
  }

  net::Response SetScope(const std::string& body, const std::string& credential = "") {
    return Send("PUT", Path("/namespaces"), credential.empty() ? admin_key_ : credential, body);
  }

  void ChooseNamespaces(const std::string& list) {
    net::Response response = SetScope("{\"namespaces\":" + list + "}");
    ASSERT_EQ(response.status, 200) << response.body;
  }

  net::Request AgentRequest(const std::string& target, const std::string& body,
                            const std::string& token) {
    net::Request request;
    request.method = "POST";
    request.target = target;
    if (!token.empty()) request.headers.Set("Authorization", "Bearer " + token);
    request.headers.Set("Content-Type", "application/json");
    request.body = body;
    request.remote_address = "198.51.100.4";
    return request;
  }

  PendingReply Poll(const std::string& body = R"({"wait_seconds":50})",
                    const std::string& token = "") {
    PendingReply pending;
    api_->router().Dispatch(
        AgentRequest("/api/v1/agent/commands/poll", body, token.empty() ? token_ : token),
        pending.Callback());
    return pending;
  }

  // The commands a poll was answered with.
  json::array PolledCommands(const PendingReply& poll) {
    net::Response response = poll.Wait();
    EXPECT_EQ(response.status, 200) << response.body;
    json::object body = Body(response);
    return body.contains("commands") ? body.at("commands").as_array() : json::array();
  }

  // Polls once (without waiting) and returns the only command handed out.
  json::object TakeOne() {
    json::array commands = PolledCommands(Poll(R"({"wait_seconds":0})"));
    EXPECT_EQ(commands.size(), 1u);
    return commands.empty() ? json::object() : commands[0].as_object();
  }

  net::Response PostResult(const std::string& command_id, const std::string& body,
                           const std::string& encoding = "gzip", const std::string& token = "") {
    net::Request request = AgentRequest("/api/v1/agent/commands/" + command_id + "/result",
                                        encoding == "gzip" ? GzipCompress(body).value() : body,
                                        token.empty() ? token_ : token);
    if (!encoding.empty()) request.headers.Set("Content-Encoding", encoding);
    return testing::Call(api_->router(), std::move(request));
  }

  net::Response Upload(const std::vector<json::object>& payloads, std::int64_t first = 1,
                       const std::string& stream = kClusterStream) {
    const json::object body =
        testing::AgentUploadJson(first, payloads, stream, kSpool, "uplink-cluster-7d9f-x2");
    net::Request request =
        AgentRequest("/api/v1/agent/uploads", GzipCompress(ToJson(body)).value(), token_);
    request.headers.Set("Content-Encoding", "gzip");
    return testing::Call(api_->router(), std::move(request));
  }

  json::object UploadPlan(const std::vector<json::object>& payloads = {}) {
    net::Response response = Upload(payloads, next_sequence_);
    next_sequence_ += std::max<std::int64_t>(1, static_cast<std::int64_t>(payloads.size()));
    EXPECT_EQ(response.status, 200) << response.body.substr(0, 400);
    json::object body = Body(response);
    return body.contains("plan") ? body.at("plan").as_object() : json::object();
  }

  std::vector<std::string> PlanNames(const json::object& plan) {
    std::vector<std::string> names;
    for (const json::value& command : plan.at("commands").as_array()) {
      names.emplace_back(command.at("name").as_string());
    }
    return names;
  }

  double Outcomes(const std::string& outcome) {
    return Metric("uplink_console_kubectl_commands_total", {{"outcome", outcome}});
  }

  std::string id_;
  std::string token_;
  std::int64_t next_sequence_ = 1;
};

}  // namespace uplink::console
