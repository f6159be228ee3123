// An ApiServer on an in-memory store with the default namespaces and a small cluster's nodes,
// driven through HandleForTesting: no sockets, no TLS.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/time.h"
#include "kubesim/api.h"
#include "kubesim/cluster.h"

namespace uplink::kubesim::testing {

inline constexpr const char* kToken = "kubesim_test-token";
inline constexpr const char* kTableAccept =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json";

class ApiFixture : public ::testing::Test {
 protected:
  // What the server is started with; fixtures with a kubelet add it.
  virtual ApiOptions ServerOptions() { return ApiOptions{Secret(kToken), "v1.33.1"}; }

  void SetUp() override {
    api_ = std::make_unique<ApiServer>(ServerOptions(), store_, clock_);
    for (json::object& ns : DefaultNamespaces()) ASSERT_TRUE(store_.Put(ns).ok());
    for (json::object& node : GenerateNodes(ClusterShape{3, 8, 1}, clock_.Now())) {
      ASSERT_TRUE(store_.Put(node).ok());
    }
  }

  net::Response Call(std::string method, std::string target, std::string body = "",
                     std::string content_type = "", std::string accept = "") {
    net::Request request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.body = std::move(body);
    request.headers.Set("Authorization", std::string("Bearer ") + kToken);
    if (!content_type.empty()) request.headers.Set("Content-Type", content_type);
    if (!accept.empty()) request.headers.Set("Accept", accept);
    return api_->HandleForTesting(std::move(request));
  }

  static json::object Body(const net::Response& response) {
    Result<json::value> parsed = ParseJson(response.body);
    EXPECT_TRUE(parsed.ok() && parsed->is_object()) << response.body;
    return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object();
  }

  // Checks the response is a real-looking Status and returns its message.
  static std::string ExpectStatus(const net::Response& response, int code,
                                  std::string_view reason) {
    EXPECT_EQ(response.status, code) << response.body;
    json::object status = Body(response);
    EXPECT_EQ(status["kind"], "Status");
    EXPECT_EQ(status["apiVersion"], "v1");
    EXPECT_EQ(status["status"], "Failure");
    EXPECT_EQ(ToJson(status["reason"]), ToJson(json::value(reason))) << response.body;
    EXPECT_EQ(status["code"], code);
    EXPECT_TRUE(status["metadata"].is_object());
    return status["message"].is_string() ? std::string(status["message"].get_string()) : "";
  }

  FakeClock clock_;
  ObjectStore store_{clock_};
  std::unique_ptr<ApiServer> api_;
};

}  // namespace uplink::kubesim::testing
