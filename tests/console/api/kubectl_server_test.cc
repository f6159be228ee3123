// kubectl through the console's router behind the real HTTP server, with real clients: held
// long polls do not hold server threads, and a user's command reaches a polling agent and its
// result comes back over the wire.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "api_fixture.h"
#include "common/gzip.h"
#include "console/api/console_api.h"
#include "console/setup.h"
#include "net/client.h"
#include "net/server.h"
#include "protocol/cluster_snapshot.h"
#include "protocol/commands.h"

namespace uplink::console {
namespace {

class ConsoleServer {
 public:
  ConsoleServer() {
    auto key = InitializeConsole(dir_.path(), "admin@example.com", SystemClock());
    EXPECT_TRUE(key.ok()) << key.status().ToString();
    admin_key_ = key.ok() ? key->Reveal() : "";
    auto store = OpenConsoleStore(dir_.path());
    EXPECT_TRUE(store.ok());
    store_ = std::move(store).value();
    api_ = std::make_unique<ConsoleApi>(*store_, SystemClock(), testing::FastOptions());
    net::ServerOptions options;
    options.threads = 2;
    options.max_body_bytes = protocol::kMaxCommandResultBytes;
    options.body_limit_for = RequestBodyLimit;
    auto server = net::HttpServer::Start(options, api_->router().AsHandler());
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  ~ConsoleServer() {
    Stop();
    api_.reset();
  }
  // Closes every connection, held polls' included. Idempotent.
  void Stop() { server_->Stop(); }

  std::unique_ptr<net::HttpClient> Client() {
    net::ClientOptions options;
    options.base_url = "http://127.0.0.1:" + std::to_string(server_->port());
    options.request_timeout = std::chrono::seconds(120);  // a hang guard only
    auto client = net::HttpClient::Create(options);
    EXPECT_TRUE(client.ok());
    return std::move(client).value();
  }

  net::Response Call(net::HttpClient& client, const std::string& method, const std::string& target,
                     const std::string& credential, const std::string& body, bool gzip = false) {
    net::Request request;
    request.method = method;
    request.target = target;
    request.headers.Set("Authorization", "Bearer " + credential);
    if (!body.empty()) request.headers.Set("Content-Type", "application/json");
    if (gzip) request.headers.Set("Content-Encoding", "gzip");
    request.body = gzip ? GzipCompress(body).value() : body;
    auto response = client.Send(std::move(request));
    EXPECT_TRUE(response.ok()) << response.status().ToString();
    return response.value_or(net::Response{});
  }

  // A connection with every namespace chosen: {id, token}.
  std::pair<std::string, std::string> Connection(const std::string& name) {
    auto client = Client();
    net::Response created = Call(*client, "POST", "/api/v1/connections", admin_key_,
                                 R"({"agent_name":"cluster","cluster_name":")" + name + "\"}");
    EXPECT_EQ(created.status, 201) << created.body;
    json::object body = testing::Body(created);
    std::string id(body.at("id").as_string());
    net::Response scoped = Call(*client, "PUT", "/api/v1/connections/" + id + "/namespaces",
                                admin_key_, R"({"namespaces":["*"]})");
    EXPECT_EQ(scoped.status, 200) << scoped.body;
    return {id, std::string(body.at("token").as_string())};
  }

  const std::string& admin_key() const { return admin_key_; }
  ConsoleApi& api() { return *api_; }

 private:
  testing::ScratchDir dir_;
  std::string admin_key_;
  std::unique_ptr<SqlStore> store_;
  std::unique_ptr<ConsoleApi> api_;
  std::unique_ptr<net::HttpServer> server_;
};

TEST(KubectlOverHttp, HeldPollsDoNotHoldServerThreadsAndACommandRoundTrips) {
  ConsoleServer console;
  // More held polls than the server has threads, on other connections.
  std::vector<std::thread> idle_agents;
  for (int i = 0; i < 4; ++i) {
    auto [id, token] = console.Connection("idle-" + std::to_string(i));
    idle_agents.emplace_back([&console, token = token] {
      auto client = console.Client();
      net::Request poll;
      poll.method = "POST";
      poll.target = "/api/v1/agent/commands/poll";
      poll.headers.Set("Authorization", "Bearer " + token);
      poll.headers.Set("Content-Type", "application/json");
      poll.body = R"({"wait_seconds":55})";
      (void)client->Send(std::move(poll));  // ends when the server stops
    });
  }
  auto [id, token] = console.Connection("prod");
  std::atomic<int> results_posted{0};
  std::thread agent([&console, &results_posted, token = token] {
    auto client = console.Client();
    net::Response polled = console.Call(*client, "POST", "/api/v1/agent/commands/poll", token,
                                        R"({"wait_seconds":55})");
    ASSERT_EQ(polled.status, 200) << polled.body;
    json::array commands = testing::Body(polled).at("commands").as_array();
    ASSERT_EQ(commands.size(), 1u);
    const json::object& command = commands[0].as_object();
    EXPECT_EQ(ToJson(command.at("argv")), R"(["kubectl","version","--client"])");
    std::string result = ToJson(json::object{{"exit_code", 0},
                                             {"stdout", "Client Version: v1.31.0\n"},
                                             {"stderr", ""},
                                             {"duration_ms", 12}});
    net::Response stored = console.Call(
        *client, "POST",
        "/api/v1/agent/commands/" + std::string(command.at("id").as_string()) + "/result", token,
        result, true);
    EXPECT_EQ(stored.status, 200) << stored.body;
    EXPECT_EQ(testing::Text(testing::Body(stored), "status"), "stored");
    ++results_posted;
  });
  // Wait until all five polls are held, so the command meets a waiting agent.
  for (int i = 0; i < 6000 && console.api().commands().stats().waiting_polls < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(console.api().commands().stats().waiting_polls, 5u);

  auto user = console.Client();
  net::Response reply =
      console.Call(*user, "POST", "/api/v1/connections/" + id + "/kubectl", console.admin_key(),
                   R"({"argv":["kubectl","version","--client"]})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(testing::Text(testing::Body(reply), "stdout"), "Client Version: v1.31.0\n");
  agent.join();
  EXPECT_EQ(results_posted, 1);
  // Other calls are served while the idle polls are held.
  EXPECT_EQ(console.Call(*user, "GET", "/api/v1/me", console.admin_key(), "").status, 200);
  EXPECT_EQ(console.api().commands().stats().waiting_polls, 4u);
  console.Stop();
  for (std::thread& idle : idle_agents) idle.join();
}

}  // namespace
}  // namespace uplink::console
