// The controller's SSH tunnel (`uplink-agent workspace --ssh`) against uplink-kubesim's
// process runtime and the console stand-in's relay side: one authenticated tunnel, capability
// reports with a host key made once, authorized_keys holding exactly the listed keys, clear
// open_failed messages, hostile messages skipped, and reconnects with back-off after the
// console refuses or restarts while commands and /readyz carry on. (sshd itself runs in the
// podman test, ssh_podman_test.cc: here exec runs on the host as root, where `sshd -i` has no
// privilege separation directory and exits at once, which shows the failure path.)
#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/files.h"
#include "workspace_cluster.h"

namespace uplink::agent::workspace::testing {
namespace {

using namespace std::chrono_literals;
using uplink::testing::WaitFor;

constexpr char kReservation[] = "res_00000000000055a1";
constexpr char kPod[] = "ws-res-00000000000055a1";

// A fresh Ed25519 public key as a grant's authorized_keys line ("TYPE BASE64 ssg_...").
std::string NewKeyLine(const uplink::testing::TempDir& dir, const std::string& grant) {
  const std::string path = dir.File(grant);
  uplink::testing::CommandResult made = uplink::testing::RunCommand(
      {"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", grant, "-f", path});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  return std::string(TrimWhitespace(uplink::testing::ReadFileOrEmpty(path + ".pub")));
}

class SshTunnelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    cluster_ = WorkspaceCluster::Start(ClusterOptions{}, &error).release();
    ASSERT_NE(cluster_, nullptr) << error;
    dir_ = new uplink::testing::TempDir();
    StartController();
    cluster_->console().Reserve(cluster_->Reservation(kReservation, 1, 900));
    ASSERT_TRUE(WaitFor([] { return cluster_->Pod(kPod, "{.status.phase}") == "Running"; }, 60s))
        << cluster_->ControllerLogs();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr); }

  static void StartController() {
    cluster_->StartController({"--ssh", "--ssh-dir=" + SshDir(), "--ssh-report-interval=1s"});
  }
  static std::string SshDir() { return dir_->File("ssh"); }
  static std::string AuthorizedKeys() {
    return uplink::testing::ReadFileOrEmpty(SshDir() + "/authorized_keys");
  }
  static std::vector<ConsoleStandIn::Capability> ReportsOf(const std::string& reservation) {
    std::vector<ConsoleStandIn::Capability> reports;
    for (const auto& report : cluster_->console().Capabilities()) {
      if (report.reservation_id == reservation) reports.push_back(report);
    }
    return reports;
  }
  // Waits for `count` reports of the reservation; the last one.
  static std::optional<ConsoleStandIn::Capability> WaitForReports(size_t count) {
    if (!WaitFor([&] { return ReportsOf(kReservation).size() >= count; }, 60s)) return std::nullopt;
    return ReportsOf(kReservation).back();
  }
  static std::optional<std::string> WaitForOpenFailure(const std::string& channel) {
    std::optional<std::string> failure;
    WaitFor([&] { return (failure = cluster_->console().OpenFailure(channel)).has_value(); }, 60s);
    return failure;
  }

  static WorkspaceCluster* cluster_;
  static uplink::testing::TempDir* dir_;
};

WorkspaceCluster* SshTunnelTest::cluster_ = nullptr;
uplink::testing::TempDir* SshTunnelTest::dir_ = nullptr;

TEST_F(SshTunnelTest, OneAuthenticatedTunnelReportsTheHostKeyOfARunningWorkspace) {
  std::optional<ConsoleStandIn::Capability> report = WaitForReports(1);
  ASSERT_TRUE(report) << cluster_->ControllerLogs();
  const std::string public_key(
      TrimWhitespace(uplink::testing::ReadFileOrEmpty(SshDir() + "/host_ed25519_key.pub")));
  EXPECT_TRUE(report->host_key.starts_with("ssh-ed25519 ")) << report->host_key;
  EXPECT_EQ(report->host_key, public_key);
  EXPECT_TRUE(report->sshd.starts_with("OpenSSH_")) << report->sshd;
  struct stat key {};
  ASSERT_EQ(::stat((SshDir() + "/host_ed25519_key").c_str(), &key), 0);
  EXPECT_EQ(key.st_mode & 0777, 0600u);
  // The stand-in accepts the tunnel only with the execution credential and the cluster's UID.
  EXPECT_TRUE(cluster_->console().TunnelOpen());
  EXPECT_NE(cluster_->console().TunnelUserAgent().find("(workspace)"), std::string::npos);
  EXPECT_EQ(cluster_->ControllerMetric("uplink_workspace_ssh_tunnel_connected"), 1);
  // The private key never leaves the workspace: not in the controller's log either.
  const std::string private_key = uplink::testing::ReadFileOrEmpty(SshDir() + "/host_ed25519_key");
  ASSERT_FALSE(private_key.empty());
  EXPECT_EQ(cluster_->ControllerLogs().find(private_key.substr(40, 40)), std::string::npos);
}

TEST_F(SshTunnelTest, CapabilityReportsRepeatWithTheSameKeyOnTheSameTunnel) {
  ASSERT_TRUE(WaitForReports(1));
  const size_t before = ReportsOf(kReservation).size();
  const int tunnels = cluster_->console().TunnelsAccepted();
  ASSERT_TRUE(WaitForReports(before + 3));
  std::set<std::string> keys;
  for (const auto& report : ReportsOf(kReservation)) keys.insert(report.host_key);
  EXPECT_EQ(keys.size(), 1u);
  // Not rebuilt per reconcile: the controller reconciles many times a second here.
  EXPECT_EQ(cluster_->console().TunnelsAccepted(), tunnels);
  EXPECT_GE(cluster_->ControllerMetric("uplink_workspace_ssh_capability_reports_total"), 3);
}

TEST_F(SshTunnelTest, AuthorizedKeysHoldExactlyTheListedKeys) {
  ASSERT_TRUE(WaitForReports(1));
  const std::string a = NewKeyLine(*dir_, "ssg_000000000000000a");
  const std::string b = NewKeyLine(*dir_, "ssg_000000000000000b");
  const std::string c = NewKeyLine(*dir_, "ssg_000000000000000c");
  cluster_->console().SendKeys(kReservation, {a});
  EXPECT_TRUE(WaitFor([&] { return AuthorizedKeys() == a + "\n"; }, 30s)) << AuthorizedKeys();
  // Adding a grant keeps the other.
  cluster_->console().SendKeys(kReservation, {a, b});
  EXPECT_TRUE(WaitFor([&] { return AuthorizedKeys() == a + "\n" + b + "\n"; }, 30s));
  // A revoked grant's key is gone.
  cluster_->console().SendKeys(kReservation, {b});
  EXPECT_TRUE(WaitFor([&] { return AuthorizedKeys() == b + "\n"; }, 30s)) << AuthorizedKeys();
  // Every channel writes the keys valid now before sshd starts (here sshd then fails).
  const std::string channel = cluster_->console().OpenChannel(kReservation, {b, c});
  ASSERT_TRUE(WaitForOpenFailure(channel));
  EXPECT_EQ(AuthorizedKeys(), b + "\n" + c + "\n");
  // Written through temporary files renamed into place: none is left.
  for (const auto& entry : std::filesystem::directory_iterator(SshDir())) {
    const std::string name = entry.path().filename().string();
    EXPECT_FALSE(name.starts_with("ak.") || name.find(".tmp") != std::string::npos) << name;
  }
}

TEST_F(SshTunnelTest, ABurstOfKeysMessagesIsWrittenAsItsNewestListByOneWriter) {
  ASSERT_TRUE(WaitForReports(1));
  const std::string a = NewKeyLine(*dir_, "ssg_00000000000000d1");
  const std::string b = NewKeyLine(*dir_, "ssg_00000000000000d2");
  constexpr int kBurst = 100;
  for (int i = 0; i < kBurst; ++i) {
    cluster_->console().SendKeys(kReservation, i % 2 == 0 ? std::vector<std::string>{a}
                                                          : std::vector<std::string>{a, b});
  }
  cluster_->console().SendKeys(kReservation, {b});
  EXPECT_TRUE(WaitFor([&] { return AuthorizedKeys() == b + "\n"; }, 60s)) << AuthorizedKeys();
  // Not one exec (and thread) per message: lists that arrived while one was written are
  // replaced by the newest.
  const std::string logs = cluster_->ControllerLogs();
  size_t writes = 0;
  for (size_t at = logs.find("authorized_keys rewritten"); at != std::string::npos;
       at = logs.find("authorized_keys rewritten", at + 1)) {
    ++writes;
  }
  EXPECT_LT(writes, static_cast<size_t>(kBurst)) << writes << " writes for " << kBurst + 1;
}

TEST_F(SshTunnelTest, ChannelsOpenedTogetherShareAuthorizedKeysWritesInsteadOfTakingTurns) {
  ASSERT_TRUE(WaitForReports(1));
  const std::string key = NewKeyLine(*dir_, "ssg_00000000000000e1");
  const double writes_before = cluster_->ControllerMetric("uplink_workspace_ssh_keys_writes_total");
  constexpr int kChannels = 12;
  std::vector<std::string> channels;
  for (int i = 0; i < kChannels; ++i) channels.push_back(cluster_->console().OpenChannel(kReservation, {key}));
  // Each channel's keys were in place before its sshd ran (which then fails here, as root).
  for (const std::string& channel : channels) {
    std::optional<std::string> failure = WaitForOpenFailure(channel);
    ASSERT_TRUE(failure) << channel;
    EXPECT_TRUE(failure->starts_with("sshd ended before it spoke")) << *failure;
  }
  EXPECT_EQ(AuthorizedKeys(), key + "\n");
  // One write in flight and one for all that came meanwhile, not one per channel in turn
  // (then the last channel waited for twelve execs: 13 s on a loaded machine).
  const double writes = cluster_->ControllerMetric("uplink_workspace_ssh_keys_writes_total") - writes_before;
  std::printf("%g authorized_keys writes for %d channels opened at once\n", writes, kChannels);
  EXPECT_GE(writes, 1);
  EXPECT_LE(writes, kChannels / 3) << writes << " authorized_keys writes for " << kChannels << " channels";
}

TEST_F(SshTunnelTest, AChannelToAWorkspaceNotRunningIsRefusedWithWhy) {
  ASSERT_TRUE(WaitFor([] { return cluster_->console().TunnelOpen(); }, 60s));
  const std::string channel = cluster_->console().OpenChannel("res_00000000000fffff", {});
  std::optional<std::string> failure = WaitForOpenFailure(channel);
  ASSERT_TRUE(failure);
  EXPECT_EQ(*failure, "the workspace of res_00000000000fffff is not running on this cluster");
  EXPECT_FALSE(cluster_->console().Channel(channel).connected);
}

TEST_F(SshTunnelTest, AnSshdThatCannotStartIsAnOpenFailureAndItsLogIsKept) {
  ASSERT_TRUE(WaitForReports(1));
  const double failures = cluster_->ControllerMetric("uplink_workspace_ssh_open_failures_total");
  const std::string channel = cluster_->console().OpenChannel(kReservation, {});
  std::optional<std::string> failure = WaitForOpenFailure(channel);
  ASSERT_TRUE(failure);
  EXPECT_EQ(*failure, "sshd ended before it spoke: sshd exited (code 255)");
  // No data channel was opened, so its credential was never presented.
  EXPECT_FALSE(cluster_->console().Channel(channel).connected);
  EXPECT_EQ(cluster_->console().BadChannelCredentials(), 0);
  EXPECT_TRUE(WaitFor([&] {
    return cluster_->ControllerMetric("uplink_workspace_ssh_open_failures_total") > failures;
  }, 10s));
  // sshd's own words, with the channel's id, in the controller's log.
  const std::string logs = cluster_->ControllerLogs();
  EXPECT_NE(logs.find("privilege separation"), std::string::npos) << logs;
  EXPECT_NE(logs.find(channel), std::string::npos);
}

TEST_F(SshTunnelTest, HostileTunnelMessagesCostOnlyThemselves) {
  // A report says the workspace is running here: keys for one not yet seen are skipped.
  ASSERT_TRUE(WaitForReports(1));
  const int tunnels = cluster_->console().TunnelsAccepted();
  const std::string granted = NewKeyLine(*dir_, "ssg_00000000000000aa");
  cluster_->console().SendKeys(kReservation, {granted});
  ASSERT_TRUE(WaitFor([&] { return AuthorizedKeys() == granted + "\n"; }, 30s));
  EXPECT_TRUE(cluster_->console().SendRaw("{"));
  EXPECT_TRUE(cluster_->console().SendRaw(R"({"type":"rekey","reservation_id":"res_00000000000055a1"})"));
  EXPECT_TRUE(cluster_->console().SendRaw(
      R"({"type":"keys","reservation_id":"res_00000000000055a1","authorized_keys":["command=\"sh\" ssh-ed25519 AAAA x"]})"));
  EXPECT_TRUE(cluster_->console().SendRaw(
      R"({"type":"open","channel":"sch_../../x","reservation_id":"res_00000000000055a1","grant_id":"ssg_0000000000000001","credential":"chn_x","authorized_keys":[],"purpose":"session"})"));
  // The tunnel is the same one, and answers the next good message.
  const std::string channel = cluster_->console().OpenChannel("res_00000000000feeee", {});
  ASSERT_TRUE(WaitForOpenFailure(channel));
  EXPECT_EQ(cluster_->console().TunnelsAccepted(), tunnels);
  EXPECT_EQ(AuthorizedKeys(), granted + "\n") << "a key with options is never written";
  EXPECT_NE(cluster_->ControllerLogs().find("a message on the SSH tunnel was refused"), std::string::npos);
}

TEST_F(SshTunnelTest, WhileTheRelayRefusesItBacksOffAndCommandsCarryOn) {
  ASSERT_TRUE(WaitFor([] { return cluster_->console().TunnelOpen(); }, 60s));
  const int accepted = cluster_->console().TunnelsAccepted();
  cluster_->console().SetSshDown(true);
  ASSERT_TRUE(WaitFor([] {
    return cluster_->ControllerMetric("uplink_workspace_ssh_tunnel_connected") == 0;
  }, 30s));
  // Attempts over a window: a back-off from 0.5 s doubling to 15 s makes a handful; a tight
  // loop would make thousands.
  const int before = cluster_->console().TunnelAttempts();
  std::this_thread::sleep_for(8s);
  const int attempts = cluster_->console().TunnelAttempts() - before;
  EXPECT_GE(attempts, 1);
  EXPECT_LE(attempts, 20);
  EXPECT_GE(cluster_->ControllerMetric("uplink_workspace_ssh_tunnel_reconnects_total"), attempts);

  // Commands and readiness do not depend on SSH.
  EXPECT_EQ(cluster_->ControllerReadyz(), 200);
  const std::string command = cluster_->console().AddCommand(kReservation, "shell", "echo still");
  EXPECT_TRUE(WaitFor([&] { return cluster_->console().Command(command).state == "exited"; }, 60s));
  EXPECT_EQ(cluster_->console().Command(command).output, "still\n");

  const size_t reports = ReportsOf(kReservation).size();
  cluster_->console().SetSshDown(false);
  // Back within the back-off's cap, with a report on the new tunnel.
  EXPECT_TRUE(WaitFor([&] { return cluster_->console().TunnelsAccepted() > accepted; }, 60s));
  EXPECT_TRUE(WaitForReports(reports + 1));
  const std::string logs = cluster_->ControllerLogs();
  EXPECT_NE(logs.find("SSH tunnel to the console is down; connecting again"), std::string::npos);
  EXPECT_NE(logs.find("503"), std::string::npos) << "each reconnect says why";
  EXPECT_EQ(logs.find("exe_"), std::string::npos) << "no credential in the log";
}

TEST_F(SshTunnelTest, AfterTheConsoleRestartsTheTunnelComesBack) {
  ASSERT_TRUE(WaitFor([] { return cluster_->console().TunnelOpen(); }, 60s));
  const int accepted = cluster_->console().TunnelsAccepted();
  const size_t reports = ReportsOf(kReservation).size();
  ASSERT_TRUE(cluster_->console().Restart());
  EXPECT_TRUE(WaitFor([&] { return cluster_->console().TunnelsAccepted() > accepted; }, 60s))
      << cluster_->ControllerLogs();
  EXPECT_TRUE(WaitForReports(reports + 1));
}

TEST_F(SshTunnelTest, TheHostKeyIsMadeOnceAcrossControllerRestarts) {
  std::optional<ConsoleStandIn::Capability> first = WaitForReports(1);
  ASSERT_TRUE(first);
  const size_t reports = ReportsOf(kReservation).size();
  StartController();
  std::optional<ConsoleStandIn::Capability> later = WaitForReports(reports + 1);
  ASSERT_TRUE(later) << cluster_->ControllerLogs();
  EXPECT_EQ(later->host_key, first->host_key);
}

}  // namespace
}  // namespace uplink::agent::workspace::testing
