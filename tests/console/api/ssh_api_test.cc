// The SSH relay through the real HTTP server with real WebSockets on loopback: a fake
// workspace controller (the agent's side of protocol/ssh.h, built from net::ConnectWebSocket)
// holds the tunnel and answers `open` by connecting the data channel and echoing, and the
// console's handover probe with an SSH identification line; users connect as `uplink ssh
// proxy` does. Time-based cases move the FakeClock and run the relay's sweep.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "common/crypto.h"
#include "console/api/console_api.h"
#include "net/server.h"
#include "net/websocket.h"
#include "protocol/ssh.h"
#include "workspace_fixture.h"

namespace uplink::console {
namespace {

const std::string kHostKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEhw0aQDLMFehMBBfgSUSM0uXPEuj3+c6Nnd9l2ljxsQ";
const std::string kOtherHostKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeAroPuUo7dUQn7KP6EiQC5lO9KS1irqIl1dbobik7/";
const std::string kUserKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMascVxUVP54HTTwBeRUuw6YII+uxsRHqGNpzd34QZne user@laptop";
const std::string kSecondUserKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOgi5UgFVG7aZbimqKbIRNGmejGjqPjHKwLc+wP83fSM user@other";
constexpr std::string_view kBanner = "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n";

// Waits for `condition` (a hang guard, not a timing assertion).
bool Eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 2000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

// Reads until the peer's close; its code and reason (code 0 when the connection failed).
net::WebSocketMessage ReadClose(net::WebSocket& socket) {
  for (;;) {
    auto message = socket.Read();
    if (!message.ok()) return {};
    if (message->type == net::WebSocketMessage::Type::kClose) return *message;
  }
}

std::string Bytes(size_t size, std::uint32_t seed) {
  std::string out(size, '\0');
  for (char& c : out) {
    seed = seed * 1664525u + 1013904223u;
    c = static_cast<char>(seed >> 24);
  }
  return out;
}

// The workspace controller's side of the contract.
class FakeAgent {
 public:
  enum class Mode { kEcho, kSilent, kOpenFailed };

  FakeAgent(int port, std::string credential, std::string uid = kClusterUid)
      : port_(port), credential_(std::move(credential)), uid_(std::move(uid)) {}
  ~FakeAgent() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      if (tunnel_) tunnel_->Abort();
      for (auto& socket : channels_) socket->Abort();
    }
    if (reader_.joinable()) reader_.join();
    for (auto& thread : threads_) thread.join();
  }

  // Connects the tunnel; the refusal's response when the console refuses it.
  std::optional<net::Response> Connect() {
    net::Response refusal;
    auto socket = net::ConnectWebSocket(Options(std::string(protocol::kSshTunnelPath),
                                                credential_, protocol::kSshTunnelSubprotocol),
                                        &refusal);
    if (!socket.ok()) return refusal;
    std::lock_guard lock(mutex_);
    tunnel_ = std::shared_ptr<net::WebSocket>(std::move(*socket));
    reader_ = std::thread([this, tunnel = tunnel_] { ReadTunnel(tunnel); });
    return std::nullopt;
  }

  void Capability(const std::string& reservation_id, const std::string& host_key) {
    ASSERT_TRUE(tunnel_->Write(protocol::EncodeSshCapability(
                                   {reservation_id, host_key + " ", "OpenSSH_9.2p1"}),
                               false)
                    .ok());
  }
  void SendText(const std::string& text) { ASSERT_TRUE(tunnel_->Write(text, false).ok()); }

  std::vector<protocol::SshOpen> Opens() {
    std::lock_guard lock(mutex_);
    return opens_;
  }
  std::vector<protocol::SshKeys> Keys() {
    std::lock_guard lock(mutex_);
    return keys_;
  }
  // The tunnel's close as the console sent it (code 0 until then).
  net::WebSocketMessage TunnelClose() {
    std::lock_guard lock(mutex_);
    return tunnel_close_;
  }
  size_t HandoversAnswered() const { return handovers_; }

  // Connects a data channel with `credential`; the refusal's status, or 101.
  int ConnectChannel(const std::string& channel, const std::string& credential) {
    net::Response refusal;
    auto socket = net::ConnectWebSocket(
        Options(protocol::SshChannelPath(channel), credential, protocol::kSshChannelSubprotocol),
        &refusal);
    if (!socket.ok()) return refusal.status;
    Serve(std::shared_ptr<net::WebSocket>(std::move(*socket)), false);
    return 101;
  }

  std::atomic<Mode> mode{Mode::kEcho};
  std::atomic<bool> answer_handover{true};

 private:
  net::WebSocketConnectOptions Options(std::string target, const std::string& credential,
                                       std::string_view subprotocol) {
    net::WebSocketConnectOptions options;
    options.client.base_url = "http://127.0.0.1:" + std::to_string(port_);
    options.target = std::move(target);
    options.headers.Set("Authorization", "Bearer " + credential);
    options.headers.Set("User-Agent", protocol::AgentUserAgent("0.1.0", "workspace"));
    options.headers.Set(protocol::kClusterUidHeader, uid_);
    options.subprotocols = {std::string(subprotocol)};
    return options;
  }

  void ReadTunnel(std::shared_ptr<net::WebSocket> tunnel) {
    for (;;) {
      auto message = tunnel->Read();
      if (!message.ok()) return;
      if (message->type == net::WebSocketMessage::Type::kClose) {
        std::lock_guard lock(mutex_);
        tunnel_close_ = *message;
        return;
      }
      auto decoded = protocol::DecodeSshConsoleMessage(message->data);
      ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
      if (auto* keys = std::get_if<protocol::SshKeys>(&*decoded)) {
        std::lock_guard lock(mutex_);
        keys_.push_back(*keys);
      } else if (auto* open = std::get_if<protocol::SshOpen>(&*decoded)) {
        {
          std::lock_guard lock(mutex_);
          opens_.push_back(*open);
        }
        const bool handover = open->purpose == protocol::kSshPurposeHandover;
        if (handover ? !answer_handover.load() : mode == Mode::kSilent) continue;
        if (!handover && mode == Mode::kOpenFailed) {
          (void)tunnel->Write(protocol::EncodeSshOpenFailed(
                                  {open->channel, "the workspace pod is not running"}),
                              false);
          continue;
        }
        // A channel whose client is already gone is refused: counted, not served.
        auto socket = net::ConnectWebSocket(Options(protocol::SshChannelPath(open->channel),
                                                    open->credential,
                                                    protocol::kSshChannelSubprotocol));
        if (!socket.ok()) {
          ++channels_refused_;
          continue;
        }
        Serve(std::shared_ptr<net::WebSocket>(std::move(*socket)), handover);
      }
    }
  }

  // Echoes (a session) or sends sshd's banner (a handover) until the console closes.
  void Serve(std::shared_ptr<net::WebSocket> socket, bool handover) {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    channels_.push_back(socket);
    threads_.emplace_back([this, socket, handover] {
      if (handover) {
        ++handovers_;
        (void)socket->Write(kBanner, true);
      }
      for (;;) {
        auto message = socket->Read();
        if (!message.ok() || message->type == net::WebSocketMessage::Type::kClose) return;
        if (!handover && !socket->Write(message->data, true).ok()) return;
      }
    });
  }

  const int port_;
  const std::string credential_;
  const std::string uid_;
  std::mutex mutex_;
  bool stopping_ = false;
  std::shared_ptr<net::WebSocket> tunnel_;
  net::WebSocketMessage tunnel_close_;
  std::thread reader_;
  std::vector<std::shared_ptr<net::WebSocket>> channels_;
  std::vector<std::thread> threads_;
  std::vector<protocol::SshOpen> opens_;
  std::vector<protocol::SshKeys> keys_;
  std::atomic<size_t> handovers_{0};
  std::atomic<size_t> channels_refused_{0};
};

struct ReadyReservation {
  std::string id;
  std::string grant;
};

class SshApiTest : public WorkspaceApiTest {
 protected:
  void SetUp() override {
    WorkspaceApiTest::SetUp();
    net::ServerOptions options;
    options.threads = 2;
    options.body_limit_for = RequestBodyLimit;
    auto server = net::HttpServer::Start(options, api_->router().AsHandler());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  void TearDown() override {
    server_->Stop();
    WorkspaceApiTest::TearDown();
  }

  std::unique_ptr<FakeAgent> Agent(const std::string& credential,
                                   const std::string& uid = kClusterUid) {
    auto agent = std::make_unique<FakeAgent>(server_->port(), credential, uid);
    std::optional<net::Response> refused = agent->Connect();
    EXPECT_FALSE(refused) << refused->status << " " << refused->body;
    return agent;
  }

  // A running reservation of the user's with a grant of kUserKey.
  ReadyReservation Running() {
    ReadyReservation r;
    r.id = Text(Reserve(user_.api_key, 1), "id");
    SyncReply(PostSync(credential_, Sync({Event(r.id, "provisioning"), Event(r.id, "running")})));
    net::Response grant = Send("POST", "/api/v1/reservations/" + r.id + "/ssh-grants",
                               user_.api_key, ToJson(json::object{{"public_key", kUserKey}}));
    EXPECT_EQ(grant.status, 201) << grant.body;
    r.grant = Text(Body(grant), "id");
    return r;
  }

  json::object Readiness(const std::string& id) {
    net::Response response = Send("GET", protocol::SshReadinessPath(id), user_.api_key);
    EXPECT_EQ(response.status, 200) << response.body;
    return Body(response);
  }

  // Running, reported and handed over: connection setup is offered.
  ReadyReservation Ready(FakeAgent& agent) {
    ReadyReservation r = Running();
    agent.Capability(r.id, kHostKey);
    EXPECT_TRUE(Eventually([&] { return Text(Readiness(r.id), "state") == "ready"; }))
        << ToJson(Readiness(r.id));
    return r;
  }

  // A client channel as `uplink ssh proxy` opens it; nullptr with `refusal` set when refused.
  std::unique_ptr<net::WebSocket> Client(const std::string& id, const std::string& grant,
                                         net::Response* refusal = nullptr) {
    net::WebSocketConnectOptions options;
    options.client.base_url = "http://127.0.0.1:" + std::to_string(server_->port());
    options.target = protocol::SshConnectPath(id, grant);
    options.headers.Set("Authorization", "Bearer " + user_.api_key);
    options.subprotocols = {std::string(protocol::kSshClientSubprotocol)};
    net::Response refused;
    auto socket = net::ConnectWebSocket(options, &refused);
    if (refusal) *refusal = refused;
    if (!socket.ok()) return nullptr;
    return std::move(socket).value();
  }

  // Writes `data` and reads its echo back.
  void RoundTrip(net::WebSocket& client, const std::string& data) {
    ASSERT_TRUE(client.Write(data, true).ok());
    auto echo = client.Read();
    ASSERT_TRUE(echo.ok()) << echo.status().ToString();
    ASSERT_EQ(echo->type, net::WebSocketMessage::Type::kBinary) << echo->data;
    EXPECT_EQ(echo->data, data);
  }

  std::int64_t UsedBytes(const std::string& id) {
    json::object reservation = Body(Send("GET", "/api/v1/reservations/" + id, user_.api_key));
    return testing::Object(reservation, "transfer").at("used_bytes").as_int64();
  }

  std::unique_ptr<net::HttpServer> server_;
  std::string credential_;
};

class SshReadyTest : public SshApiTest {
 protected:
  void SetUp() override {
    SshApiTest::SetUp();
    credential_ = QualifiedOffer(4, true);
  }
};

TEST_F(SshReadyTest, AChannelPairsAndCarriesSeveralMebibytesBothWaysIntact) {
  auto agent = Agent(credential_);
  ReadyReservation r = Ready(*agent);
  EXPECT_EQ(agent->HandoversAnswered(), 1u);

  auto client = Client(r.id, r.grant);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->subprotocol(), protocol::kSshClientSubprotocol);
  const std::string sent = Bytes(6 << 20, 7);
  std::thread writer([&] {
    for (size_t at = 0; at < sent.size(); at += protocol::kSshDataMessageMaxBytes) {
      ASSERT_TRUE(client->Write(std::string_view(sent).substr(at, protocol::kSshDataMessageMaxBytes),
                                true)
                      .ok());
    }
  });
  std::string received;
  while (received.size() < sent.size()) {
    auto message = client->Read();
    ASSERT_TRUE(message.ok()) << message.status().ToString();
    ASSERT_EQ(message->type, net::WebSocketMessage::Type::kBinary) << message->data;
    EXPECT_LE(message->data.size(), protocol::kSshDataMessageMaxBytes);
    received += message->data;
  }
  writer.join();
  EXPECT_EQ(Sha256Hex(received), Sha256Hex(sent));

  // The open message: the session's grant, and exactly the keys valid now, named by grant.
  std::vector<protocol::SshOpen> opens = agent->Opens();
  ASSERT_EQ(opens.size(), 2u);  // the handover probe, then the session
  EXPECT_EQ(opens[0].purpose, protocol::kSshPurposeHandover);
  EXPECT_EQ(opens[1].purpose, protocol::kSshPurposeSession);
  EXPECT_EQ(opens[1].grant_id, r.grant);
  EXPECT_EQ(opens[1].reservation_id, r.id);
  ASSERT_EQ(opens[1].authorized_keys.size(), 1u);
  EXPECT_EQ(opens[1].authorized_keys[0], kUserKey.substr(0, kUserKey.rfind(' ')) + " " + r.grant);
  EXPECT_EQ(Readiness(r.id).at("open_channels").as_int64(), 1);
  EXPECT_EQ(Metric("uplink_console_ssh_channels_open", {}), 1);

  ASSERT_TRUE(client->Close(net::kCloseNormal, "bye").ok());
  ReadClose(*client);
  ASSERT_TRUE(Eventually([&] { return Metric("uplink_console_ssh_channels_open", {}) == 0; }));
  EXPECT_EQ(UsedBytes(r.id), 2 * static_cast<std::int64_t>(sent.size()));
  EXPECT_EQ(Metric("uplink_console_ssh_relayed_bytes_total", {{"direction", "to_workspace"}}),
            static_cast<double>(sent.size()));
  EXPECT_EQ(Metric("uplink_console_ssh_relayed_bytes_total", {{"direction", "from_workspace"}}),
            static_cast<double>(sent.size()));
  EXPECT_EQ(Metric("uplink_console_ssh_tunnels_connected", {}), 1);
  for (const std::string& line : logs_) {
    EXPECT_EQ(line.find("chn_"), std::string::npos) << line;
    EXPECT_EQ(line.find(credential_), std::string::npos) << line;
  }
}

TEST_F(SshReadyTest, TheChannelCredentialIsSingleUseFreshAndNeverTheExecutionCredential) {
  auto agent = Agent(credential_);
  ReadyReservation r = Ready(*agent);
  agent->mode = FakeAgent::Mode::kSilent;
  auto client = Client(r.id, r.grant);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(Eventually([&] { return agent->Opens().size() == 2; }));
  const protocol::SshOpen open = agent->Opens()[1];
  EXPECT_TRUE(protocol::IsChannelCredentialShape(open.credential));

  const std::string wrong = std::string(NewToken(protocol::kChannelCredentialPrefix).Reveal());
  EXPECT_EQ(agent->ConnectChannel(open.channel, wrong), 401);
  EXPECT_EQ(agent->ConnectChannel(open.channel, credential_), 401);  // exe_ is refused here
  EXPECT_EQ(agent->ConnectChannel("sch_0000000000000000", open.credential), 401);
  EXPECT_EQ(agent->ConnectChannel(open.channel, open.credential), 101);
  RoundTrip(*client, "SSH-2.0-OpenSSH_9.6\r\n");
  EXPECT_EQ(agent->ConnectChannel(open.channel, open.credential), 401);  // used

  // One older than 30 s is refused, even unused.
  auto late = Client(r.id, r.grant);
  ASSERT_NE(late, nullptr);
  ASSERT_TRUE(Eventually([&] { return agent->Opens().size() == 3; }));
  clock_.Advance(protocol::kChannelCredentialLifetime + std::chrono::seconds(1));
  EXPECT_EQ(agent->ConnectChannel(agent->Opens()[2].channel, agent->Opens()[2].credential), 401);
  // And the client waiting for it is told why.
  api_->ssh_relay().Sweep();
  net::WebSocketMessage closed = ReadClose(*late);
  EXPECT_EQ(closed.close_code, net::kCloseInternalError);
  EXPECT_NE(closed.data.find("the agent did not open the data channel within 15 s"),
            std::string::npos)
      << closed.data;
}

TEST_F(SshApiTest, TheTunnelIsRefusedWithoutSshItsCredentialOrItsCluster) {
  credential_ = QualifiedOffer(4, false);
  FakeAgent disabled(server_->port(), credential_);
  std::optional<net::Response> refused = disabled.Connect();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 409);
  EXPECT_EQ(ErrorCode(*refused), protocol::kSshDisabledCode);
  // Commands keep working: the sync is served as before.
  EXPECT_TRUE(SyncReply(PostSync(credential_, Sync())).accepting);

  const std::string current = credential_;
  FakeAgent elsewhere(server_->port(), current, "another-cluster");
  refused = elsewhere.Connect();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 409);
  EXPECT_EQ(ErrorCode(*refused), protocol::kClusterMismatchCode);

  FakeAgent stranger(server_->port(), "exe_" + std::string(43, 'A'));
  refused = stranger.Connect();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);

  // Not a WebSocket: a clear 400.
  net::Request plain;
  plain.method = "GET";
  plain.target = std::string(protocol::kSshTunnelPath);
  plain.headers.Set("Authorization", "Bearer " + current);
  net::Response answer = testing::Call(api_->router(), plain);
  EXPECT_EQ(answer.status, 400);
  EXPECT_NE(ErrorMessage(answer).find("WebSocket"), std::string::npos);
}

TEST_F(SshReadyTest, ANewerTunnelReplacesTheOlderOne) {
  auto first = Agent(credential_);
  ReadyReservation r = Ready(*first);
  auto second = Agent(credential_);
  ASSERT_TRUE(Eventually([&] { return first->TunnelClose().close_code != 0; }));
  EXPECT_EQ(first->TunnelClose().close_code, net::kClosePolicyViolation);
  EXPECT_EQ(first->TunnelClose().data, protocol::kTunnelReplacedReason);
  EXPECT_EQ(Metric("uplink_console_ssh_tunnels_connected", {}), 1);
  // The newer tunnel carries the next channel (after its own handover).
  second->Capability(r.id, kHostKey);
  ASSERT_TRUE(Eventually([&] { return second->HandoversAnswered() == 1; }));
  auto client = Client(r.id, r.grant);
  ASSERT_NE(client, nullptr);
  RoundTrip(*client, "hello");
  EXPECT_EQ(first->Opens().size(), 1u);
}

TEST_F(SshReadyTest, OneGrantHasAtMostItsLimitOfChannels) {
  auto agent = Agent(credential_);
  ReadyReservation r = Ready(*agent);
  std::vector<std::unique_ptr<net::WebSocket>> open;
  for (int i = 0; i < protocol::kDefaultChannelsPerGrant; ++i) {
    open.push_back(Client(r.id, r.grant));
    ASSERT_NE(open.back(), nullptr);
    RoundTrip(*open.back(), "ping " + std::to_string(i));
  }
  net::Response refusal;
  EXPECT_EQ(Client(r.id, r.grant, &refusal), nullptr);
  EXPECT_EQ(refusal.status, 429);
  EXPECT_EQ(ErrorCode(refusal), protocol::kChannelLimitCode);
  EXPECT_EQ(Metric("uplink_console_ssh_channels_refused_total", {{"reason", "channel_limit"}}), 1);

  // Another grant of the same reservation has its own.
  net::Response second = Send("POST", "/api/v1/reservations/" + r.id + "/ssh-grants",
                              user_.api_key, ToJson(json::object{{"public_key", kSecondUserKey}}));
  ASSERT_EQ(second.status, 201);
  auto other = Client(r.id, Text(Body(second), "id"));
  ASSERT_NE(other, nullptr);
  RoundTrip(*other, "other");
  // A closed channel frees its place.
  ASSERT_TRUE(open.back()->Close().ok());
  ReadClose(*open.back());
  ASSERT_TRUE(Eventually([&] { return Readiness(r.id).at("open_channels").as_int64() == 4; }));
  EXPECT_NE(Client(r.id, r.grant), nullptr);
}

// A reservation's channels are capped whatever its grants, revoked ones included: the
// controller's channels are shared by every reservation of the offer.
class SshReservationLimitTest : public SshReadyTest {
 protected:
  ConsoleOptions Options() override {
    ConsoleOptions options = SshReadyTest::Options();
    options.ssh_channels_per_grant = 2;
    options.ssh_channels_per_reservation = 3;
    return options;
  }
};

TEST_F(SshReservationLimitTest, AllGrantsOfAReservationTogetherHaveAtMostItsLimit) {
  auto agent = Agent(credential_);
  ReadyReservation r = Ready(*agent);
  auto grant = [&](const std::string& key) {
    net::Response added = Send("POST", "/api/v1/reservations/" + r.id + "/ssh-grants",
                               user_.api_key, ToJson(json::object{{"public_key", key}}));
    EXPECT_EQ(added.status, 201) << added.body;
    return Text(Body(added), "id");
  };
  const std::string second = grant(kSecondUserKey);
  std::vector<std::unique_ptr<net::WebSocket>> open;
  for (const std::string& id : {r.grant, r.grant, second}) {
    open.push_back(Client(r.id, id));
    ASSERT_NE(open.back(), nullptr);
    RoundTrip(*open.back(), "ping");
  }
  net::Response refusal;
  EXPECT_EQ(Client(r.id, second, &refusal), nullptr) << "the second grant has room, the reservation none";
  EXPECT_EQ(refusal.status, 429);
  EXPECT_EQ(ErrorCode(refusal), protocol::kChannelLimitCode);
  EXPECT_NE(ErrorMessage(refusal).find("reservation"), std::string::npos) << refusal.body;
  // Revoking a grant does not free the places its open channels hold.
  ASSERT_EQ(Send("DELETE", "/api/v1/reservations/" + r.id + "/ssh-grants/" + second,
                 user_.api_key).status, 200);
  EXPECT_EQ(Readiness(r.id).at("open_channels").as_int64(), 3);
  EXPECT_EQ(Client(r.id, r.grant, &refusal), nullptr);
  EXPECT_EQ(refusal.status, 429);
}

TEST_F(SshReadyTest, RevokedExpiredAndForeignGrantsAreRefusedAndTheAgentGetsTheKeysValidNow) {
  auto agent = Agent(credential_);
  ReadyReservation r = Ready(*agent);
  net::Response second = Send(
      "POST", "/api/v1/reservations/" + r.id + "/ssh-grants", user_.api_key,
      ToJson(json::object{{"public_key", kSecondUserKey},
                          {"expires_at", FormatRfc3339(clock_.Now() + std::chrono::minutes(5))}}));
  ASSERT_EQ(second.status, 201);
  const std::string short_lived = Text(Body(second), "id");
  // One keys message per change: the first grant's, then the second's.
  ASSERT_TRUE(Eventually([&] { return agent->Keys().size() == 2; }));
  EXPECT_EQ(agent->Keys()[0].authorized_keys.size(), 1u);
  EXPECT_EQ(agent->Keys()[1].authorized_keys.size(), 2u);  // adding never removes another
  EXPECT_EQ(agent->Keys()[1].reservation_id, r.id);

  ASSERT_EQ(Send("DELETE", "/api/v1/reservations/" + r.id + "/ssh-grants/" + r.grant,
                 user_.api_key)
                .status,
            200);
  ASSERT_TRUE(Eventually([&] { return agent->Keys().size() == 3; }));
  ASSERT_EQ(agent->Keys()[2].authorized_keys.size(), 1u);
  EXPECT_TRUE(agent->Keys()[2].authorized_keys[0].ends_with(" " + short_lived));

  net::Response refusal;
  EXPECT_EQ(Client(r.id, r.grant, &refusal), nullptr);
  EXPECT_EQ(refusal.status, 409);
  EXPECT_EQ(ErrorCode(refusal), protocol::kGrantInvalidCode);
  EXPECT_NE(ErrorMessage(refusal).find("was revoked"), std::string::npos);
  EXPECT_EQ(Client(r.id, "ssg_0123456789abcdef", &refusal), nullptr);
  EXPECT_EQ(ErrorCode(refusal), protocol::kGrantInvalidCode);

  // The short-lived grant works now and not after its expiry; the open message never carries
  // a revoked or expired key.
  auto client = Client(r.id, short_lived);
  ASSERT_NE(client, nullptr);
  RoundTrip(*client, "x");
  EXPECT_EQ(agent->Opens().back().authorized_keys.size(), 1u);
  clock_.Advance(std::chrono::minutes(6));
  agent->Capability(r.id, kHostKey);  // keep the report fresh
  ASSERT_TRUE(Eventually([&] { return Text(Readiness(r.id), "state") == "ready"; }));
  EXPECT_EQ(Client(r.id, short_lived, &refusal), nullptr);
  EXPECT_EQ(ErrorCode(refusal), protocol::kGrantInvalidCode);
  EXPECT_NE(ErrorMessage(refusal).find("expired"), std::string::npos);

  // Someone else's reservation does not exist for them.
  TestUser other = AddUser("other@example.com");
  net::WebSocketConnectOptions options;
  options.client.base_url = "http://127.0.0.1:" + std::to_string(server_->port());
  options.target = protocol::SshConnectPath(r.id, short_lived);
  options.headers.Set("Authorization", "Bearer " + other.api_key);
  options.subprotocols = {std::string(protocol::kSshClientSubprotocol)};
  EXPECT_FALSE(net::ConnectWebSocket(options, &refusal).ok());
  EXPECT_EQ(refusal.status, 404);
}

TEST_F(SshReadyTest, ConnectionSetupWaitsForAFreshReportAndAConfirmedHandover) {
  net::Response refusal;
  ReadyReservation r = Running();
  // No tunnel at all.
  EXPECT_EQ(Client(r.id, r.grant, &refusal), nullptr);
  EXPECT_EQ(refusal.status, 503);
  EXPECT_EQ(ErrorCode(refusal), protocol::kAgentUnavailableCode);

  auto agent = Agent(credential_);
  agent->answer_handover = false;
  // Once the tunnel is in (its handler runs just after the upgrade):
  ASSERT_TRUE(Eventually([&] {
    return Text(Readiness(r.id), "reason") == "no SSH capability report from the workspace yet";
  })) << ToJson(Readiness(r.id));
  json::object readiness = Readiness(r.id);
  EXPECT_EQ(Text(readiness, "state"), "unavailable");
  EXPECT_FALSE(readiness.contains("host_key"));
  EXPECT_EQ(Client(r.id, r.grant, &refusal), nullptr);
  EXPECT_EQ(refusal.status, 409);
  EXPECT_EQ(ErrorCode(refusal), protocol::kSshNotReadyCode);

  // Reported, but sshd never answered the handover probe.
  agent->Capability(r.id, kHostKey);
  ASSERT_TRUE(Eventually([&] { return agent->Opens().size() == 1; }));
  readiness = Readiness(r.id);
  EXPECT_EQ(Text(readiness, "reason"), "the session handover is not confirmed yet");
  EXPECT_FALSE(readiness.contains("host_key"));
  EXPECT_TRUE(Text(readiness, "host_key_fingerprint").starts_with("SHA256:"));
  EXPECT_EQ(Client(r.id, r.grant, &refusal), nullptr);
  EXPECT_NE(ErrorMessage(refusal).find("handover"), std::string::npos);
  clock_.Advance(protocol::kHandoverTimeout + std::chrono::seconds(1));
  api_->ssh_relay().Sweep();
  ASSERT_TRUE(Eventually([&] {
    return Metric("uplink_console_ssh_handovers_total", {{"outcome", "failed"}}) == 1;
  }));

  // The next report probes again; now sshd answers.
  agent->answer_handover = true;
  agent->Capability(r.id, kHostKey);
  ASSERT_TRUE(Eventually([&] { return Text(Readiness(r.id), "state") == "ready"; }));
  readiness = Readiness(r.id);
  EXPECT_EQ(Text(readiness, "reason"), "");
  EXPECT_EQ(Text(readiness, "user"), "workspace");
  EXPECT_EQ(Text(readiness, "host_key"), kHostKey);
  EXPECT_FALSE(Text(readiness, "handover_confirmed_at").empty());
  EXPECT_EQ(testing::Object(readiness, "transfer").at("used_bytes").as_int64(), 0);

  // A report older than 60 s is not enough.
  clock_.Advance(protocol::kCapabilityFreshness);
  readiness = Readiness(r.id);
  EXPECT_EQ(Text(readiness, "state"), "unavailable");
  EXPECT_NE(Text(readiness, "reason").find("no SSH capability report in the last 60 s"),
            std::string::npos);
  EXPECT_EQ(Client(r.id, r.grant, &refusal), nullptr);
  EXPECT_EQ(ErrorCode(refusal), protocol::kSshNotReadyCode);
}

TEST_F(SshReadyTest, TheFirstHostKeyIsPinnedAndAnotherOneIsRefused) {
  auto agent = Agent(credential_);
  ReadyReservation r = Ready(*agent);
  const std::string pinned = Text(Readiness(r.id), "host_key_fingerprint");
  agent->Capability(r.id, kOtherHostKey);
  ASSERT_TRUE(Eventually([&] { return Text(Readiness(r.id), "state") == "unavailable"; }));
  json::object readiness = Readiness(r.id);
  EXPECT_TRUE(Text(readiness, "reason").starts_with("host key changed")) << Text(readiness, "reason");
  EXPECT_EQ(Text(readiness, "host_key_fingerprint"), pinned);
  net::Response refusal;
  EXPECT_EQ(Client(r.id, r.grant, &refusal), nullptr);
  EXPECT_EQ(ErrorCode(refusal), protocol::kSshNotReadyCode);
  EXPECT_EQ(agent->HandoversAnswered(), 1u);  // no probe for a refused key
  EXPECT_EQ(LastAudit("reservation.ssh_host_key_pinned").target_id, r.id);

  // Bad capability reports are refused and the tunnel stays up.
  agent->SendText(R"({"type":"capability","reservation_id":"res_zz","host_key":"x"})");
  agent->SendText(R"({"type":"future_thing"})");
  agent->SendText("not json");
  agent->Capability(r.id, kHostKey);
  ASSERT_TRUE(Eventually([&] { return Text(Readiness(r.id), "state") == "ready"; }));
}

TEST_F(SshApiTest, TheBudgetCutsTheChannelAtTheBudgetAndSaysWhy) {
  // A budget that 15 round trips of 64 KiB do not fill and a 16th passes.
  transfer_budget_ = 2'000'000;
  credential_ = QualifiedOffer(4, true);
  auto agent = Agent(credential_);
  ReadyReservation r = Ready(*agent);
  auto client = Client(r.id, r.grant);
  ASSERT_NE(client, nullptr);
  const std::string chunk = Bytes(protocol::kSshDataMessageMaxBytes, 3);
  for (int i = 0; i < 15; ++i) RoundTrip(*client, chunk);
  // 1,966,080 used: 33,920 left. Half of it each way fills the budget exactly.
  RoundTrip(*client, std::string(16'960, 'a'));
  ASSERT_TRUE(client->Write("z", true).ok());
  net::WebSocketMessage closed = ReadClose(*client);
  EXPECT_EQ(closed.close_code, net::kClosePolicyViolation);
  EXPECT_EQ(closed.data, protocol::TransferBudgetCloseReason(2'000'000, 2'000'000, r.id));
  ASSERT_TRUE(Eventually([&] { return UsedBytes(r.id) == 2'000'000; }));
  EXPECT_EQ(Metric("uplink_console_ssh_budget_cuts_total", {}), 1);

  net::Response refusal;
  EXPECT_EQ(Client(r.id, r.grant, &refusal), nullptr);
  EXPECT_EQ(refusal.status, 409);
  EXPECT_EQ(ErrorCode(refusal), protocol::kTransferBudgetExhaustedCode);
}

TEST_F(SshApiTest, AMessageThatWouldCrossTheBudgetIsNotForwarded) {
  transfer_budget_ = 100'000;
  credential_ = QualifiedOffer(4, true);
  auto agent = Agent(credential_);
  ReadyReservation r = Ready(*agent);
  auto client = Client(r.id, r.grant);
  ASSERT_NE(client, nullptr);
  RoundTrip(*client, std::string(40'000, 'a'));  // 80,000 used
  ASSERT_TRUE(client->Write(std::string(30'000, 'b'), true).ok());
  net::WebSocketMessage closed = ReadClose(*client);
  EXPECT_EQ(closed.close_code, net::kClosePolicyViolation);
  EXPECT_EQ(closed.data, protocol::TransferBudgetCloseReason(80'000, 100'000, r.id));
  ASSERT_TRUE(Eventually([&] { return Metric("uplink_console_ssh_channels_open", {}) == 0; }));
  EXPECT_EQ(UsedBytes(r.id), 80'000);
}

TEST_F(SshReadyTest, TheReservationsEndClosesItsOpenChannels) {
  auto agent = Agent(credential_);
  ReadyReservation stopped = Ready(*agent);
  ReadyReservation expiring = Ready(*agent);
  auto first = Client(stopped.id, stopped.grant);
  auto second = Client(expiring.id, expiring.grant);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  RoundTrip(*first, "a");
  RoundTrip(*second, "b");

  ASSERT_EQ(Send("POST", "/api/v1/reservations/" + stopped.id + "/stop", user_.api_key, "{}")
                .status,
            200);
  api_->ssh_relay().Sweep();
  net::WebSocketMessage closed = ReadClose(*first);
  EXPECT_EQ(closed.close_code, net::kCloseGoingAway);
  EXPECT_EQ(closed.data, protocol::kReservationEndedReason);
  RoundTrip(*second, "still open");

  clock_.Advance(std::chrono::hours(1));  // past expires_at, before the controller says so
  api_->ssh_relay().Sweep();
  closed = ReadClose(*second);
  EXPECT_EQ(closed.close_code, net::kCloseGoingAway);
  EXPECT_EQ(closed.data, protocol::kReservationEndedReason);
}

TEST_F(SshReadyTest, AChannelIdleForTheTimeoutIsClosedAndPingsDoNotCount) {
  auto agent = Agent(credential_);
  ReadyReservation r = Ready(*agent);
  auto client = Client(r.id, r.grant);
  ASSERT_NE(client, nullptr);
  RoundTrip(*client, "a");
  clock_.Advance(protocol::kDefaultSshIdleTimeout - std::chrono::seconds(1));
  api_->ssh_relay().Sweep();
  RoundTrip(*client, "b");  // data resets the idle time
  clock_.Advance(protocol::kDefaultSshIdleTimeout);
  api_->ssh_relay().Sweep();
  net::WebSocketMessage closed = ReadClose(*client);
  EXPECT_EQ(closed.close_code, net::kCloseNormal);
  EXPECT_EQ(closed.data, "idle for 1800 s");
}

TEST_F(SshReadyTest, AnAgentThatCannotOpenTheChannelIsQuotedToTheClient) {
  auto agent = Agent(credential_);
  ReadyReservation r = Ready(*agent);
  agent->mode = FakeAgent::Mode::kOpenFailed;
  auto client = Client(r.id, r.grant);
  ASSERT_NE(client, nullptr);
  net::WebSocketMessage closed = ReadClose(*client);
  EXPECT_EQ(closed.close_code, net::kCloseInternalError);
  EXPECT_EQ(closed.data, "the agent could not open the channel: the workspace pod is not running");
}

}  // namespace
}  // namespace uplink::console
