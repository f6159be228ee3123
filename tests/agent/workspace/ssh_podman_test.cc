// The SSH tunnel with real OpenSSH: uplink-kubesim's podman runtime runs the workspace SSH
// image (deploy/workspace on the workspace image), the controller starts `sshd -i` in it
// through the exec API for each channel the stand-in console opens, and sshd's
// identification line arrives through the data channel. Also: the channel limit, sshd's exit
// closing the channel with its code, and the controller's memory with channels open.
#include <gtest/gtest.h>


#include "common/files.h"
#include "workspace_cluster.h"

namespace uplink::agent::workspace::testing {
namespace {

using namespace std::chrono_literals;
using uplink::testing::WaitFor;

constexpr int kMaxChannels = 12;

class SshPodmanTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Result<std::string> image = kubesim::testing::WorkspaceSshImage();
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    ClusterOptions options;
    options.runtime = "podman";
    options.image = *image;
    std::string error;
    cluster_ = WorkspaceCluster::Start(options, &error).release();
    ASSERT_NE(cluster_, nullptr) << error;
    StartController();
    cluster_->console().Reserve(cluster_->Reservation(kReservation, 1, 900));
    ASSERT_TRUE(WaitFor([] { return cluster_->Pod(kPod, "{.status.phase}") == "Running"; }, 180s))
        << cluster_->Pod(kPod, "{.status}") << cluster_->ControllerLogs();
    // The console opens channels only after the controller reported the workspace (it knows
    // the pod runs and its host key is made). The pod's phase alone is not that: the
    // controller learns it at its next sync, and an open before then is refused as "not
    // running on this cluster" (seen once in a fresh-clone run: all 12 channels refused).
    ASSERT_TRUE(WaitFor([] { return !Reports().empty(); }, 120s)) << cluster_->ControllerLogs();
  }
  static void TearDownTestSuite() {
    if (cluster_ != nullptr) {
      cluster_->console().Stop(kReservation);
      EXPECT_TRUE(WaitFor([] { return !cluster_->PodExists(kPod); }, 60s));
    }
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr); }

  static void StartController() {
    cluster_->StartController({"--ssh", "--ssh-report-interval=2s",
                               "--ssh-max-channels=" + std::to_string(kMaxChannels)});
  }
  static std::vector<ConsoleStandIn::Capability> Reports() {
    std::vector<ConsoleStandIn::Capability> reports;
    for (const auto& report : cluster_->console().Capabilities()) {
      if (report.reservation_id == kReservation) reports.push_back(report);
    }
    return reports;
  }
  // sshd's identification line through the channel; on an open_failed, at once and with why.
  static ::testing::AssertionResult Banner(const std::string& channel) {
    std::optional<std::string> failed;
    if (WaitFor([&] {
          failed = cluster_->console().OpenFailure(channel);
          return failed || cluster_->console().Channel(channel).received.starts_with("SSH-2.0-OpenSSH");
        }, 60s) && !failed) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << channel << ": " << (failed ? "open_failed: " + *failed : "no SSH-2.0- line within 60 s")
           << "\n" << cluster_->ControllerLogs();
  }
  static ConsoleStandIn::CommandView Run(const std::string& code) {
    return cluster_->console().RunToEnd(kReservation, "shell", code);
  }

  static constexpr char kReservation[] = "res_000000000000a55a";
  static constexpr char kPod[] = "ws-res-000000000000a55a";
  static WorkspaceCluster* cluster_;
};

WorkspaceCluster* SshPodmanTest::cluster_ = nullptr;

TEST_F(SshPodmanTest, SshdSpeaksThroughTheDataChannelWithTheGrantedKeysInPlace) {
  EXPECT_TRUE(Reports().back().sshd.starts_with("OpenSSH_")) << Reports().back().sshd;
  const std::string key =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGv5y9AMwUDfxtwDkCRYuxLpnzuN6JBcsYIuZMqfg8Ts ssg_00000000000000b1";
  const std::string channel = cluster_->console().OpenChannel(kReservation, {key});
  ASSERT_TRUE(Banner(channel));
  EXPECT_GE(cluster_->ControllerMetric("uplink_workspace_ssh_channels_open"), 1);
  EXPECT_GT(cluster_->ControllerMetric("uplink_workspace_ssh_bytes_total{direction=\"from_workspace\"}"), 0);
  EXPECT_EQ(cluster_->console().BadChannelCredentials(), 0);
  // The workspace holds exactly the granted key, and its host key is its user's alone.
  EXPECT_EQ(Run("cat /scratch/.uplink-ssh/authorized_keys").output, key + "\n");
  EXPECT_EQ(Run("stat -c '%u %a' /scratch/.uplink-ssh/host_ed25519_key").output, "1000 600\n");
  // The client going ends sshd, and the channel.
  cluster_->console().CloseChannel(channel);
  EXPECT_TRUE(WaitFor([] {
    return cluster_->ControllerMetric("uplink_workspace_ssh_channels_open") == 0;
  }, 30s));
}

TEST_F(SshPodmanTest, SshdsExitClosesTheChannelWithItsCode) {
  const std::string channel = cluster_->console().OpenChannel(kReservation, {});
  ASSERT_TRUE(Banner(channel));
  // Not an SSH client: sshd says so in its log and exits.
  ASSERT_TRUE(cluster_->console().WriteChannel(channel, "GET / HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(WaitFor([&] { return cluster_->console().Channel(channel).closed; }, 30s));
  ConsoleStandIn::ChannelView view = cluster_->console().Channel(channel);
  EXPECT_EQ(view.close_code, 1000);
  EXPECT_TRUE(view.close_reason.starts_with("sshd exited (code ")) << view.close_reason;
  EXPECT_NE(cluster_->ControllerLogs().find(channel), std::string::npos) << "sshd's log names the channel";
}

TEST_F(SshPodmanTest, ChannelsRunConcurrentlyUpToTheLimit) {
  ASSERT_TRUE(WaitFor([] { return cluster_->ControllerMetric("uplink_workspace_ssh_channels_open") == 0; }, 30s));
  const long idle_rss = uplink::testing::ProcessStatusKib(cluster_->ControllerPid(), "VmRSS");
  std::vector<std::string> channels;
  for (int i = 0; i < kMaxChannels; ++i) channels.push_back(cluster_->console().OpenChannel(kReservation, {}));
  for (const std::string& channel : channels) ASSERT_TRUE(Banner(channel));
  const long busy_rss = uplink::testing::ProcessStatusKib(cluster_->ControllerPid(), "VmRSS");
  std::printf("controller RSS: %ld KiB idle, %ld KiB with %d channels open (%ld KiB each)\n",
              idle_rss, busy_rss, kMaxChannels, (busy_rss - idle_rss) / kMaxChannels);
  const std::string over = cluster_->console().OpenChannel(kReservation, {});
  std::optional<std::string> refused;
  ASSERT_TRUE(WaitFor([&] { return (refused = cluster_->console().OpenFailure(over)).has_value(); }, 30s));
  EXPECT_NE(refused->find("its limit"), std::string::npos) << *refused;
  for (const std::string& channel : channels) cluster_->console().CloseChannel(channel);
  EXPECT_TRUE(WaitFor([] { return cluster_->ControllerMetric("uplink_workspace_ssh_channels_open") == 0; }, 60s));
}

TEST_F(SshPodmanTest, TheHostKeyStaysAcrossAControllerRestart) {
  ASSERT_TRUE(WaitFor([] { return !Reports().empty(); }, 120s));
  const std::string before = Reports().back().host_key;
  const size_t reports = Reports().size();
  StartController();
  ASSERT_TRUE(WaitFor([&] { return Reports().size() > reports; }, 120s)) << cluster_->ControllerLogs();
  EXPECT_EQ(Reports().back().host_key, before);
}

}  // namespace
}  // namespace uplink::agent::workspace::testing
