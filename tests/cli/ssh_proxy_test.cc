// `uplink ssh proxy` against a real local WebSocket peer (net::HttpServer with
// net::AcceptWebSocket, as the console answers): several MiB echoed intact in messages of at
// most 64 KiB, the credential only in the Authorization header, close reasons and refusals on
// stderr with nothing but SSH bytes on stdout; and real OpenSSH end to end: `uplink ssh setup`
// (the real binary) writes the config, then plain ssh and scp reach a real `sshd -i` through
// the proxy, and a host key unlike the pinned one is refused by ssh.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "cli/ssh_proxy.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/pipe.h"
#include "net/websocket.h"
#include "protocol/ssh.h"
#include "ssh_support.h"
#include "support/process.h"

namespace uplink::cli::testing {
namespace {

using namespace std::chrono_literals;
using uplink::testing::ReadFileOrEmpty;
using uplink::testing::RunCommand;
using uplink::testing::TempDir;
using uplink::testing::WriteFileOrDie;

constexpr char kGrant[] = "ssg_0123456789abcdef";

std::string ConnectPath() {
  return std::string("/api/v1/reservations/") + kReservation + "/ssh/connect";
}

std::string RandomBytesOf(size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(random() & 0xff);
  return out;
}

bool WriteAllTo(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until `size` bytes or the end of the stream.
std::string ReadUpTo(int fd, size_t size) {
  std::string out;
  char buffer[1 << 16];
  while (out.size() < size) {
    ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, size - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// `uplink ssh proxy` running in a thread with its stdin and stdout on pipes.
class RunningProxy {
 public:
  RunningProxy(Cli& cli, std::vector<std::string> args) {
    thread_ = std::thread([this, &cli, args] {
      result_ = cli.RunOnFds(args, stdin_.read_end(), stdout_.write_end());
      stdout_.Close(1);  // as the process's exit would: the reader sees the end
    });
  }
  ~RunningProxy() {
    if (thread_.joinable()) Finish();
  }
  int input() const { return stdin_.write_end(); }
  int output() const { return stdout_.read_end(); }
  void CloseInput() { stdin_.Close(1); }
  void CloseOutput() { stdout_.Close(0); }
  CliResult Finish() {
    thread_.join();
    return result_;
  }

 private:
  Pipe stdin_;
  Pipe stdout_;
  std::thread thread_;
  CliResult result_;
};

class SshProxyTest : public ::testing::Test {
 protected:
  SshProxyTest() { cli_.StoreCredential(console_.url(), kApiKey, "api_key"); }

  std::vector<std::string> ProxyArgs() const {
    return {"ssh", "proxy", kReservation, "--grant", kGrant};
  }

  // The console answers the connect call by upgrading and running `peer` on the channel.
  void PeerIs(std::function<void(net::WebSocket&)> peer,
              size_t max_message_bytes = protocol::kSshDataMessageMaxBytes) {
    console_.On("GET", ConnectPath(), [peer, max_message_bytes](const net::Request& request) {
      net::WebSocketOptions options;
      options.max_message_bytes = max_message_bytes;
      auto offered = net::OfferedSubprotocols(request);
      EXPECT_EQ(offered, std::vector<std::string>{"uplink.ssh-client.v1"});
      return net::AcceptWebSocket(
          std::string(protocol::kSshClientSubprotocol),
          [peer](std::unique_ptr<net::WebSocket> ws) { peer(*ws); }, options);
    });
  }

  FakeConsole console_;
  Cli cli_;
};

TEST_F(SshProxyTest, EchoesSeveralMebibytesIntactInMessagesOfAtMost64KiB) {
  std::atomic<size_t> largest{0};
  std::atomic<int> messages{0};
  PeerIs([&](net::WebSocket& ws) {
    for (;;) {
      auto message = ws.Read();
      if (!message.ok() || message->type != net::WebSocketMessage::Type::kBinary) return;
      largest = std::max(largest.load(), message->data.size());
      ++messages;
      if (!ws.Write(message->data).ok()) return;
    }
  });
  const std::string sent = RandomBytesOf(6 << 20, 18);
  RunningProxy proxy(cli_, ProxyArgs());
  // Uneven pieces, as ssh writes them.
  std::thread writer([&] {
    std::mt19937 random(7);
    for (size_t at = 0; at < sent.size();) {
      const size_t piece = std::min<size_t>(1 + random() % 200'000, sent.size() - at);
      ASSERT_TRUE(WriteAllTo(proxy.input(), std::string_view(sent).substr(at, piece)));
      at += piece;
    }
  });
  const std::string echoed = ReadUpTo(proxy.output(), sent.size());
  writer.join();
  EXPECT_EQ(echoed.size(), sent.size());
  EXPECT_EQ(Sha256Hex(echoed), Sha256Hex(sent));
  proxy.CloseInput();  // ssh is done: the proxy closes the channel and exits 0
  CliResult r = proxy.Finish();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_LE(largest.load(), protocol::kSshDataMessageMaxBytes);
  EXPECT_GE(messages.load(), static_cast<int>(sent.size() / protocol::kSshDataMessageMaxBytes));

  // The credential went in the Authorization header, never in the URL.
  auto upgrades = console_.RequestsTo("GET", ConnectPath());
  ASSERT_EQ(upgrades.size(), 1u);
  EXPECT_EQ(upgrades[0].headers.Get("Authorization").value_or(""),
            std::string("Bearer ") + kApiKey);
  EXPECT_EQ(upgrades[0].target, protocol::SshConnectPath(kReservation, kGrant));
  EXPECT_EQ(upgrades[0].target.find(kApiKey), std::string::npos);
}

TEST_F(SshProxyTest, TheConsolesCloseReasonGoesToStderrAndStdoutKeepsOnlySshBytes) {
  struct Case {
    std::uint16_t code;
    std::string reason;
    std::string printed;
  };
  const std::vector<Case> cases = {
      {net::kClosePolicyViolation, protocol::TransferBudgetCloseReason(10, 10, kReservation),
       "uplink ssh proxy: transfer budget used up: 10 of 10 bytes for res_0123456789abcdef\n"},
      {net::kCloseGoingAway, std::string(protocol::kReservationEndedReason),
       "uplink ssh proxy: the reservation ended\n"},
      {net::kCloseNormal, protocol::IdleCloseReason(1800s), "uplink ssh proxy: idle for 1800 s\n"},
      {net::kCloseInternalError, "the agent could not start sshd: pod not running",
       "uplink ssh proxy: the agent could not start sshd: pod not running\n"},
      {net::kCloseInternalError, "", "uplink ssh proxy: the console closed the connection (code "
                                     "1011)\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    PeerIs([c](net::WebSocket& ws) {
      auto hello = ws.Read();  // the client's identification, then the cut
      ASSERT_TRUE(hello.ok());
      ASSERT_TRUE(ws.Write("SSH-2.0-OpenSSH_9.2p1\r\n").ok());
      ASSERT_TRUE(ws.Close(c.code, c.reason).ok());
      (void)ws.Read();
    });
    RunningProxy proxy(cli_, ProxyArgs());
    ASSERT_TRUE(WriteAllTo(proxy.input(), "SSH-2.0-OpenSSH_9.2p1\r\n"));
    // ssh keeps stdin open: the console's close alone ends the proxy.
    CliResult r = proxy.Finish();
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, c.printed);
    EXPECT_EQ(ReadUpTo(proxy.output(), 1 << 20), "SSH-2.0-OpenSSH_9.2p1\r\n");
  }
}

TEST_F(SshProxyTest, WhenSshStopsReadingTheProxyClosesTheChannelQuietly) {
  std::atomic<bool> closed{false};
  // The console reads while it writes, as the relay does both ways at once.
  PeerIs([&](net::WebSocket& ws) {
    std::thread writer([&ws] {
      const std::string chunk(protocol::kSshDataMessageMaxBytes, 'x');
      while (ws.Write(chunk).ok()) {
      }
    });
    for (auto message = ws.Read(); message.ok(); message = ws.Read()) {
      if (message->type == net::WebSocketMessage::Type::kClose) {
        closed = message->close_code == net::kCloseNormal;
      }
    }
    writer.join();
  });
  RunningProxy proxy(cli_, ProxyArgs());
  proxy.CloseOutput();
  CliResult r = proxy.Finish();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(uplink::testing::WaitFor([&] { return closed.load(); }));
}

TEST_F(SshProxyTest, AConsoleThatBreaksTheChannelsRulesIsCutOff) {
  // A text message: the channel carries SSH bytes only.
  PeerIs([](net::WebSocket& ws) {
    ASSERT_TRUE(ws.Write("{\"type\":\"open\"}", /*binary=*/false).ok());
    (void)ws.Read();
  });
  {
    RunningProxy proxy(cli_, ProxyArgs());
    CliResult r = proxy.Finish();
    EXPECT_EQ(r.code, 7);
    EXPECT_EQ(r.err, "uplink ssh proxy: lost the connection to the console: the console sent a "
                     "text message on the SSH channel\n");
    EXPECT_EQ(ReadUpTo(proxy.output(), 1 << 20), "");
  }
  // A message over 64 KiB, which would let one side fill the other's memory.
  PeerIs(
      [](net::WebSocket& ws) {
        (void)ws.Write(std::string(protocol::kSshDataMessageMaxBytes + 1, 'x'));
        (void)ws.Read();
      },
      1 << 20);
  RunningProxy proxy(cli_, ProxyArgs());
  CliResult r = proxy.Finish();
  EXPECT_EQ(r.code, 7);
  EXPECT_NE(r.err.find("larger than 65536 bytes"), std::string::npos) << r.err;
  EXPECT_EQ(ReadUpTo(proxy.output(), 1 << 20), "");
}

TEST_F(SshProxyTest, ARefusalBeforeTheUpgradeIsPrintedWithItsExitCode) {
  struct Case {
    int status;
    std::string code;
    std::string message;
    int exit_code;
  };
  const std::vector<Case> cases = {
      {409, "ssh_not_ready", "no capability report in the last 60 s", 6},
      {409, "grant_invalid", "grant ssg_0123456789abcdef was revoked", 6},
      {429, "channel_limit", "4 channels are open with this grant", 8},
      {503, "agent_unavailable", "the workspace controller is not connected", 1},
      {404, "not_found", "no reservation res_0123456789abcdef", 5},
      {401, "unauthenticated", "the API key was revoked", 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.code);
    console_.On("GET", ConnectPath(),
                [c](const net::Request&) { return ErrorReply(c.status, c.code, c.message); });
    RunningProxy proxy(cli_, ProxyArgs());
    CliResult r = proxy.Finish();
    EXPECT_EQ(r.code, c.exit_code) << r.err;
    EXPECT_TRUE(r.err.starts_with("uplink ssh proxy: the console answered " +
                                  std::to_string(c.status) + " " + c.code + ": " + c.message))
        << r.err;
    EXPECT_EQ(r.err.find(kApiKey), std::string::npos);
    EXPECT_EQ(ReadUpTo(proxy.output(), 1 << 20), "");
  }
}

TEST_F(SshProxyTest, BadOperandsAndAnUnreachableConsoleAreOneLineOnStderr) {
  {
    RunningProxy proxy(cli_, {"ssh", "proxy", kReservation, "--grant", "ssg_x; rm -rf /"});
    CliResult r = proxy.Finish();
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(r.err.starts_with("uplink ssh proxy: --grant must name the grant")) << r.err;
  }
  Cli other;
  other.env["UPLINK_API_KEY"] = kApiKey;
  other.env["UPLINK_CONSOLE"] = "http://127.0.0.1:" + std::to_string(uplink::testing::FreePort());
  RunningProxy proxy(other, ProxyArgs());
  CliResult r = proxy.Finish();
  EXPECT_EQ(r.code, 7);
  EXPECT_TRUE(r.err.starts_with("uplink ssh proxy: cannot reach the console")) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

// ---- real OpenSSH -----------------------------------------------------------------------

std::string CurrentUser() {
  const passwd* pw = ::getpwuid(::getuid());
  return pw != nullptr ? pw->pw_name : "root";
}

// The console's end of a channel as the relay and the agent give it: a real `sshd -i` whose
// stdin and stdout are the channel's bytes.
void ServeSshd(net::WebSocket& ws, const uplink::testing::InetdSshd& sshd) {
  auto process = sshd.Start();
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  // sshd's output is the proxy's input and the other way round.
  PumpSshChannel(ws, process->stdout_fd, process->stdin_fd, protocol::kSshDataMessageMaxBytes);
  ::close(process->stdin_fd);
  ::close(process->stdout_fd);
  ::waitpid(process->pid, nullptr, 0);
}

class SshOpenSshTest : public SshProxyTest {
 protected:
  SshOpenSshTest() : sshd_(work_.path()) {
    ssh_dir_ = cli_.home() + "/.ssh";
    std::filesystem::create_directory(ssh_dir_);
    identity_ = MakeSshKeyPair(ssh_dir_ + "/id_ed25519");
    WriteFileOrDie(sshd_.authorized_keys_path(), identity_ + "\n", 0600);
    PeerIs([this](net::WebSocket& ws) { ServeSshd(ws, sshd_); });
  }

  // `uplink ssh setup` as a person runs it: the real binary, so the ProxyCommand names it.
  uplink::testing::CommandResult RunSetup() {
    return RunCommand({std::string(UPLINK_BIN_DIR) + "/uplink", "ssh", "setup", kReservation},
                      60s, uplink::testing::EnvWith({{"HOME", cli_.home()}}));
  }

  uplink::testing::CommandResult Ssh(std::vector<std::string> args,
                                     const std::string& program = "/usr/bin/ssh") {
    std::vector<std::string> argv = {program, "-F", ssh_dir_ + "/config", "-o", "BatchMode=yes"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, 120s, uplink::testing::EnvWith({{"HOME", cli_.home()}}));
  }

  TempDir work_;
  uplink::testing::InetdSshd sshd_;
  std::string ssh_dir_;
  std::string identity_;
};

TEST_F(SshOpenSshTest, SshAndScpWorkThroughTheProxyWithTheConfigSetupWrote) {
  ScriptedSshConsole ssh(console_, sshd_.host_key(), CurrentUser());
  auto setup = RunSetup();
  ASSERT_EQ(setup.exit_code, 0) << setup.out << setup.err;
  const std::string host = std::string("uplink-") + kReservation;

  auto hello = Ssh({host, "echo", "hello from the workspace"});
  EXPECT_EQ(hello.exit_code, 0) << hello.err << sshd_.Log();
  EXPECT_EQ(hello.out, "hello from the workspace\n");

  // scp (SFTP underneath) both ways, 4 MiB, checksums compared.
  const std::string data = RandomBytesOf(4 << 20, 99);
  WriteFileOrDie(work_.File("up.bin"), data, 0600);
  auto up = Ssh({work_.File("up.bin"), host + ":" + work_.File("there.bin")}, "/usr/bin/scp");
  ASSERT_EQ(up.exit_code, 0) << up.err;
  EXPECT_EQ(Sha256Hex(ReadFileOrEmpty(work_.File("there.bin"))), Sha256Hex(data));
  auto down = Ssh({host + ":" + work_.File("there.bin"), work_.File("back.bin")}, "/usr/bin/scp");
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(Sha256Hex(ReadFileOrEmpty(work_.File("back.bin"))), Sha256Hex(data));
}

TEST_F(SshOpenSshTest, AHostKeyUnlikeThePinnedOneIsRefusedBySsh) {
  // The console pinned another key than the one this sshd presents.
  ScriptedSshConsole ssh(console_, MakeSshKeyPair(work_.File("other_host_key")), CurrentUser());
  ASSERT_EQ(RunSetup().exit_code, 0);
  auto r = Ssh({std::string("uplink-") + kReservation, "echo", "should not run"});
  EXPECT_EQ(r.exit_code, 255);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("Host key verification failed"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace uplink::cli::testing
