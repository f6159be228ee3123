// Real OpenSSH through the real console relay: the console's API on a real HTTP server, a
// workspace controller's tunnel that answers each `open` as the contract says (authorized_keys
// written from the message, then a real `sshd -i` whose stdin and stdout are the data
// channel), and on the user's side the real `uplink ssh setup` and plain `ssh` and `scp` with
// the config it wrote, `uplink ssh proxy` as their ProxyCommand.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <thread>

#include "cli/ssh_proxy.h"
#include "common/crypto.h"
#include "common/files.h"
#include "console/api/routes.h"
#include "net/server.h"
#include "net/websocket.h"
#include "protocol/ssh.h"
#include "support/process.h"
#include "support/sshd.h"
#include "workspace_fixture.h"

namespace uplink::console {
namespace {

using namespace std::chrono_literals;

// The controller's side of protocol/ssh.h with a real sshd per channel.
class SshdController {
 public:
  SshdController(int port, std::string credential, const uplink::testing::InetdSshd& sshd)
      : port_(port), credential_(std::move(credential)), sshd_(sshd) {}
  ~SshdController() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      if (tunnel_) tunnel_->Abort();
      for (auto& channel : channels_) channel->Abort();
    }
    if (reader_.joinable()) reader_.join();
    for (auto& thread : threads_) thread.join();
  }

  void Connect() {
    auto tunnel = net::ConnectWebSocket(Options(std::string(protocol::kSshTunnelPath),
                                                credential_, protocol::kSshTunnelSubprotocol));
    ASSERT_TRUE(tunnel.ok()) << tunnel.status().ToString();
    tunnel_ = std::shared_ptr<net::WebSocket>(std::move(*tunnel));
    reader_ = std::thread([this] { ReadTunnel(); });
  }

  void Capability(const std::string& reservation_id, const std::string& host_key) {
    ASSERT_TRUE(
        tunnel_->Write(protocol::EncodeSshCapability({reservation_id, host_key, "OpenSSH_9.2p1"}),
                       false)
            .ok());
  }

 private:
  net::WebSocketConnectOptions Options(std::string target, const std::string& credential,
                                       std::string_view subprotocol) const {
    net::WebSocketConnectOptions options;
    options.client.base_url = "http://127.0.0.1:" + std::to_string(port_);
    options.target = std::move(target);
    options.headers.Set("Authorization", "Bearer " + credential);
    options.headers.Set("User-Agent", protocol::AgentUserAgent("0.1.0", "workspace"));
    options.headers.Set(protocol::kClusterUidHeader, kClusterUid);
    options.subprotocols = {std::string(subprotocol)};
    options.websocket.max_message_bytes = protocol::kSshDataMessageMaxBytes;
    return options;
  }

  void ReadTunnel() {
    for (;;) {
      auto message = tunnel_->Read();
      if (!message.ok() || message->type == net::WebSocketMessage::Type::kClose) return;
      auto decoded = protocol::DecodeSshConsoleMessage(message->data);
      ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
      auto* open = std::get_if<protocol::SshOpen>(&*decoded);
      if (open == nullptr) continue;
      // (1) authorized_keys: exactly the grants valid now, before sshd starts.
      std::string keys;
      for (const std::string& line : open->authorized_keys) keys += line + "\n";
      ASSERT_TRUE(WriteFileAtomic(sshd_.authorized_keys_path(), keys, 0600).ok());
      // (2) sshd, (3) the data channel.
      auto sshd = sshd_.Start();
      ASSERT_TRUE(sshd.ok()) << sshd.status().ToString();
      auto channel = net::ConnectWebSocket(Options(protocol::SshChannelPath(open->channel),
                                                   open->credential,
                                                   protocol::kSshChannelSubprotocol));
      std::lock_guard lock(mutex_);
      if (!channel.ok() || stopping_) {
        ::close(sshd->stdin_fd);
        ::close(sshd->stdout_fd);
        ::waitpid(sshd->pid, nullptr, 0);
        continue;
      }
      std::shared_ptr<net::WebSocket> socket(std::move(*channel));
      channels_.push_back(socket);
      threads_.emplace_back([socket, sshd = *sshd] {
        // sshd's output is the channel's input and the other way round, one message at a time.
        cli::PumpSshChannel(*socket, sshd.stdout_fd, sshd.stdin_fd,
                            protocol::kSshDataMessageMaxBytes);
        ::close(sshd.stdin_fd);
        ::close(sshd.stdout_fd);
        ::waitpid(sshd.pid, nullptr, 0);
      });
    }
  }

  const int port_;
  const std::string credential_;
  const uplink::testing::InetdSshd& sshd_;
  std::mutex mutex_;
  bool stopping_ = false;
  std::shared_ptr<net::WebSocket> tunnel_;
  std::thread reader_;
  std::vector<std::shared_ptr<net::WebSocket>> channels_;
  std::vector<std::thread> threads_;
};

class SshOpenSshRelayTest : public WorkspaceApiTest {
 protected:
  void SetUp() override {
    WorkspaceApiTest::SetUp();
    net::ServerOptions options;
    options.threads = 4;
    options.body_limit_for = RequestBodyLimit;
    auto server = net::HttpServer::Start(options, api_->router().AsHandler());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    std::filesystem::create_directory(home_.path() + "/.ssh");
    uplink::testing::MakeSshKeyPair(home_.path() + "/.ssh/id_ed25519");
  }
  void TearDown() override {
    controller_.reset();
    server_->Stop();
    WorkspaceApiTest::TearDown();
  }

  std::string Console() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

  // `uplink ARGS...` as the user runs it: the real binary, their HOME, their API key.
  uplink::testing::CommandResult Uplink(std::vector<std::string> args) {
    args.insert(args.begin(), std::string(UPLINK_BIN_DIR) + "/uplink");
    return uplink::testing::RunCommand(args, 60s, Env());
  }
  // ssh or scp with the config setup wrote. The workspace's user is `workspace`; this
  // machine's sshd runs as this test's user, so -l names that one (command-line options come
  // before the config's).
  uplink::testing::CommandResult Ssh(const std::string& program, std::vector<std::string> args) {
    std::vector<std::string> argv = {program, "-F", home_.path() + "/.ssh/config", "-o",
                                     "BatchMode=yes", "-o", "User=root"};
    argv.insert(argv.end(), args.begin(), args.end());
    return uplink::testing::RunCommand(argv, 120s, Env());
  }
  std::vector<std::string> Env() const {
    return uplink::testing::EnvWith({{"HOME", home_.path()},
                             {"UPLINK_CONSOLE", Console()},
                             {"UPLINK_API_KEY", user_.api_key}});
  }

  uplink::testing::TempDir home_;
  uplink::testing::TempDir workspace_;
  uplink::testing::InetdSshd sshd_{workspace_.path()};
  std::unique_ptr<net::HttpServer> server_;
  std::unique_ptr<SshdController> controller_;
};

TEST_F(SshOpenSshRelayTest, SetupThenSshAndScpThroughTheRelayAndARevokedGrantIsRefused) {
  ASSERT_EQ(::getuid(), 0u) << "sshd logs in this test's user, root, as CI runs tests";
  const std::string credential = QualifiedOffer(4, true);
  const std::string id = Text(Reserve(user_.api_key, 1), "id");
  SyncReply(PostSync(credential, Sync({Event(id, "provisioning"), Event(id, "running")})));
  controller_ = std::make_unique<SshdController>(server_->port(), credential, sshd_);
  controller_->Connect();
  controller_->Capability(id, sshd_.host_key());
  ASSERT_TRUE(uplink::testing::WaitFor([&] {
    auto readiness = Body(Send("GET", protocol::SshReadinessPath(id), user_.api_key));
    return Text(readiness, "state") == "ready";
  })) << sshd_.Log();

  auto setup = Uplink({"ssh", "setup", id});
  ASSERT_EQ(setup.exit_code, 0) << setup.out << setup.err;
  const std::string host = "uplink-" + id;

  auto hello = Ssh("/usr/bin/ssh", {host, "echo", "hello through the relay"});
  ASSERT_EQ(hello.exit_code, 0) << hello.err << sshd_.Log();
  EXPECT_EQ(hello.out, "hello through the relay\n");

  const std::string data = RandomBytes(3 << 20);
  uplink::testing::WriteFileOrDie(workspace_.File("up.bin"), data, 0600);
  auto up = Ssh("/usr/bin/scp", {workspace_.File("up.bin"), host + ":" + workspace_.File("there.bin")});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  auto down = Ssh("/usr/bin/scp", {host + ":" + workspace_.File("there.bin"), workspace_.File("back.bin")});
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(Sha256Hex(uplink::testing::ReadFileOrEmpty(workspace_.File("back.bin"))), Sha256Hex(data));

  // Every byte both ways was metered.
  EXPECT_TRUE(uplink::testing::WaitFor([&] {
    json::object reservation = Body(Send("GET", "/api/v1/reservations/" + id, user_.api_key));
    return testing::Object(reservation, "transfer").at("used_bytes").as_int64() >
           2 * static_cast<std::int64_t>(data.size());
  }));

  // Revoked: the console refuses the channel and ssh shows the proxy's line saying why.
  auto grants = Uplink({"ssh", "grants", id, "--output", "json"});
  ASSERT_EQ(grants.exit_code, 0) << grants.err;
  const json::value parsed = ParseJson(grants.out).value();
  const json::array& list = parsed.as_object().at("ssh_grants").as_array();
  ASSERT_EQ(list.size(), 1u);
  auto revoked = Uplink({"ssh", "revoke", id, std::string(list[0].as_object().at("id").as_string())});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  auto refused = Ssh("/usr/bin/ssh", {host, "echo", "should not run"});
  EXPECT_EQ(refused.exit_code, 255);
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("uplink ssh proxy: the console answered 409 grant_invalid"),
            std::string::npos)
      << refused.err;
}

}  // namespace
}  // namespace uplink::console
