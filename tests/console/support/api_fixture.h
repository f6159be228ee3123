// A console behind its router, on a scratch SQLite store and a FakeClock, with helpers that
// call the user API and the agent API as a client would. Shared by the *_api_test.cc files.
#pragma once

#include <gtest/gtest.h>
#include <sodium.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/gzip.h"
#include "common/json.h"
#include "common/log.h"
#include "common/time.h"
#include "console/api/console_api.h"
#include "console/setup.h"
#include "test_util.h"

namespace uplink::console::testing {

inline constexpr const char* kPassword = "correct horse battery staple";
inline constexpr const char* kClientAddress = "192.0.2.10";

inline json::object Body(const net::Response& response) {
  auto parsed = ParseJson(response.body);
  EXPECT_TRUE(parsed.ok() && parsed->is_object()) << response.body;
  return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object();
}

inline std::string ErrorField(const net::Response& response, const char* field) {
  json::object body = Body(response);
  const json::value* error = body.if_contains("error");
  if (!error || !error->is_object()) return "";
  const json::value* value = error->get_object().if_contains(field);
  return value && value->is_string() ? std::string(value->get_string()) : "";
}

inline std::string ErrorCode(const net::Response& response) { return ErrorField(response, "code"); }

inline std::string ErrorMessage(const net::Response& response) {
  return ErrorField(response, "message");
}

inline std::string Text(const json::object& object, const char* key) {
  const json::value* value = object.if_contains(key);
  return value && value->is_string() ? std::string(value->get_string()) : "";
}

inline json::object Object(const json::object& object, const char* key) {
  const json::value* value = object.if_contains(key);
  return value && value->is_object() ? value->get_object() : json::object();
}

inline json::object NodeJson(int i) {
  return json::object{
      {"name", "gpu-node-" + std::to_string(i)},
      {"uid", "uid-" + std::to_string(i)},
      {"ready", true},
      {"unschedulable", false},
      {"gpu_resource", "nvidia.com/gpu"},
      {"gpu_capacity", 8},
      {"gpu_allocatable", 8},
      {"gpu_product", "NVIDIA-H100-80GB-HBM3"},
      {"resources", {{"nvidia.com/gpu", {{"capacity", 8}, {"allocatable", 8}}}}},
      {"taints",
       json::array{{{"key", "nvidia.com/gpu"}, {"value", ""}, {"effect", "NoSchedule"}}}}};
}

inline json::object ReportJson(const std::string& cluster_uid, int nodes) {
  json::array list;
  for (int i = 0; i < nodes; ++i) list.push_back(NodeJson(i));
  return json::object{{"agent_version", "0.1.0"},
                      {"cluster_uid", cluster_uid},
                      {"selector", "nvidia.com/gpu.present=true"},
                      {"collected_at", "2027-01-15T08:00:00Z"},
                      {"nodes", std::move(list)}};
}

// The body of POST /api/v1/agent/uploads: `payloads` on `stream`, sequences from `first`
// (docs/protocol.md).
inline json::object AgentUploadJson(
    std::int64_t first, const std::vector<json::object>& payloads, const std::string& stream,
    const std::string& spool_id = "9f2c4e0a5b7d41c3a8e6f0b1c2d3e4f5",
    const std::string& agent_instance = "") {
  json::array records;
  std::int64_t sequence = first;
  for (const json::object& payload : payloads) {
    records.push_back(json::object{{"sequence", sequence++},
                                   {"appended_at", "2026-11-30T03:20:00.125Z"},
                                   {"payload", payload}});
  }
  const json::object none{{"records", 0}, {"bytes", 0}};
  json::object body{{"agent_version", "0.1.0"},
                    {"stream", stream},
                    {"spool_id", spool_id},
                    {"first_sequence", first},
                    {"last_sequence", std::max(first, sequence - 1)},
                    {"losses", {{"dropped", none}, {"corrupt", none}, {"rejected", none}}},
                    {"records", std::move(records)}};
  if (!agent_instance.empty()) body["agent_instance"] = agent_instance;
  return body;
}

// A reply that may come later, from another thread.
class PendingReply {
 public:
  net::Reply Callback() {
    return [state = state_](net::Response response) {
      std::lock_guard lock(state->mutex);
      state->response = std::move(response);
      ++state->replies;
      state->changed.notify_all();
    };
  }
  bool ready() const {
    std::lock_guard lock(state_->mutex);
    return state_->response.has_value();
  }
  // The reply; a hang guard only bounds the wait (the tests' replies come synchronously or
  // from the reaper right after the clock moved).
  net::Response Wait() const {
    std::unique_lock lock(state_->mutex);
    bool came =
        state_->changed.wait_for(lock, std::chrono::seconds(30), [&] { return state_->response.has_value(); });
    EXPECT_TRUE(came) << "no reply";
    return state_->response.value_or(net::Response{});
  }
  int replies() const {
    std::lock_guard lock(state_->mutex);
    return state_->replies;
  }

 private:
  struct State {
    mutable std::mutex mutex;
    std::condition_variable changed;
    std::optional<net::Response> response;
    int replies = 0;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// Cheapest argon2id, so that tests sign in in microseconds.
inline ConsoleOptions FastOptions() {
  ConsoleOptions options;
  options.password_hashing.opslimit = crypto_pwhash_OPSLIMIT_MIN;
  options.password_hashing.memlimit = crypto_pwhash_MEMLIMIT_MIN;
  return options;
}

// A user made through the API, with a password and an API key of their own.
struct TestUser {
  std::string id;
  std::string email;
  std::string password;
  std::string api_key;
};

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto key = InitializeConsole(dir_.path(), "admin@example.com", clock_);
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    admin_key_ = key->Reveal();
    auto store = OpenConsoleStore(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    StartApi(Options());
    log::SetSinkForTesting([this](std::string_view line) { logs_.emplace_back(line); });
  }
  void TearDown() override { log::SetSinkForTesting(nullptr); }

  // Tests override this to run with other options.
  virtual ConsoleOptions Options() { return FastOptions(); }
  void StartApi(const ConsoleOptions& options) {
    api_ = std::make_unique<ConsoleApi>(*store_, clock_, options);
  }

  net::Response Send(const std::string& method, const std::string& target,
                     const std::string& credential, const std::string& body = "",
                     const std::string& address = kClientAddress) {
    net::Request request;
    request.method = method;
    request.target = target;
    if (!credential.empty()) request.headers.Set("Authorization", "Bearer " + credential);
    if (!body.empty()) request.headers.Set("Content-Type", "application/json");
    request.body = body;
    request.remote_address = address;
    return Call(api_->router(), std::move(request));
  }

  // As the admin made by `init`, with its API key.
  net::Response AsAdmin(const std::string& method, const std::string& target,
                        const std::string& body = "") {
    return Send(method, target, admin_key_, body);
  }

  net::Response Report(const std::string& token, const std::string& body,
                       const std::string& address = kClientAddress) {
    net::Request request;
    request.method = "POST";
    request.target = "/api/v1/agent/inventory";
    if (!token.empty()) request.headers.Set("Authorization", "Bearer " + token);
    request.headers.Set("Content-Type", "application/json");
    request.body = body;
    request.remote_address = address;
    return Call(api_->router(), std::move(request));
  }

  net::Response ReportFrom(const std::string& token, const std::string& cluster_uid,
                           int nodes = 1) {
    return Report(token, ToJson(ReportJson(cluster_uid, nodes)));
  }

  // Creates a connection with `credential` and returns its object (with "token" or
  // "handover_code").
  json::object CreateConnection(const std::string& credential, const std::string& cluster_name,
                                const std::string& extra = "") {
    net::Response response =
        Send("POST", "/api/v1/connections", credential,
             R"({"agent_name":"inventory","cluster_name":")" + cluster_name + "\"" + extra + "}");
    EXPECT_EQ(response.status, 201) << response.body;
    return Body(response);
  }

  json::object ShowConnection(const std::string& credential, const std::string& id) {
    net::Response response = Send("GET", "/api/v1/connections/" + id, credential);
    EXPECT_EQ(response.status, 200) << response.body;
    return Body(response);
  }

  // A session token for `email`.
  std::string SignIn(const std::string& email, const std::string& password = kPassword) {
    net::Response response = Send("POST", "/api/v1/sessions", "",
                                  ToJson(json::object{{"email", email}, {"password", password}}));
    EXPECT_EQ(response.status, 201) << response.body;
    return Text(Body(response), "token");
  }

  void Confirm(const std::string& session, const std::string& password = kPassword) {
    net::Response response = Send("POST", "/api/v1/session/confirm", session,
                                  ToJson(json::object{{"password", password}}));
    EXPECT_EQ(response.status, 200) << response.body;
  }

  // An API key for the holder of `session` (confirmed first).
  std::string NewApiKey(const std::string& session, const std::string& password = kPassword) {
    Confirm(session, password);
    net::Response response = Send("POST", "/api/v1/api-keys", session, R"({"name":"tests"})");
    EXPECT_EQ(response.status, 201) << response.body;
    return Text(Body(response), "key");
  }

  // A user created by the admin, signed in once to get an API key.
  TestUser AddUser(const std::string& email, const std::string& role = "member") {
    net::Response response =
        AsAdmin("POST", "/api/v1/users",
                ToJson(json::object{{"email", email}, {"role", role}, {"password", kPassword}}));
    EXPECT_EQ(response.status, 201) << response.body;
    TestUser user{Text(Body(response), "id"), email, kPassword, ""};
    user.api_key = NewApiKey(SignIn(email));
    return user;
  }

  std::string AdminId() { return Text(Object(Body(AsAdmin("GET", "/api/v1/me")), "user"), "id"); }

  // Every audit event, oldest first.
  std::vector<AuditEvent> AllAudit() {
    AuditQuery query;
    query.limit = 100'000;
    auto events = store_->ListAudit(query);
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    std::vector<AuditEvent> list = events.value_or(std::vector<AuditEvent>{});
    std::reverse(list.begin(), list.end());
    return list;
  }

  // The newest audit event with `action`; a default one (empty action) when there is none.
  AuditEvent LastAudit(const std::string& action) {
    AuditQuery query;
    query.action = action;
    query.limit = 1;
    auto events = store_->ListAudit(query);
    EXPECT_TRUE(events.ok() && !events->empty()) << "no audit event " << action;
    return events.ok() && !events->empty() ? events->front() : AuditEvent{};
  }

  double Metric(const std::string& name, const metrics::Labels& labels) {
    return api_->metrics().Get(name, labels);
  }

  ScratchDir dir_;
  FakeClock clock_;
  std::string admin_key_;
  std::unique_ptr<SqlStore> store_;
  std::unique_ptr<ConsoleApi> api_;
  std::vector<std::string> logs_;
};

// The node stream and two spools the upload tests write to.
inline const std::string kNodeStream = "node/gpu-node-0001";
inline const std::string kSpoolA = "9f2c4e0a5b7d41c3a8e6f0b1c2d3e4f5";
inline const std::string kSpoolB = "0123456789abcdef0123456789abcdef";

// An ApiTest with the admin's connection `prod` (id_, token_) for an agent to upload to.
class AgentUploadTest : public ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    if (HasFatalFailure()) return;
    json::object created = CreateConnection(admin_key_, "prod");
    id_ = Text(created, "id");
    token_ = Text(created, "token");
  }

  // POST /api/v1/agent/uploads as the agent sends it: gzip unless `encoding` says otherwise
  // ("" sends the body as is, without the header).
  net::Response Upload(const std::string& body, const std::string& encoding = "gzip",
                       const std::string& content_type = "application/json",
                       const std::string& token = "") {
    net::Request request;
    request.method = "POST";
    request.target = "/api/v1/agent/uploads";
    request.headers.Set("Authorization", "Bearer " + (token.empty() ? token_ : token));
    request.headers.Set("Content-Type", content_type);
    if (!encoding.empty()) request.headers.Set("Content-Encoding", encoding);
    request.body = encoding == "gzip" ? GzipCompress(body).value() : body;
    request.remote_address = "198.51.100.4";
    return Call(api_->router(), std::move(request));
  }
  net::Response Upload(const json::object& body) { return Upload(ToJson(body)); }

  std::string id_;
  std::string token_;
};

}  // namespace uplink::console::testing
