// The workspace Pod, field by field: every guarantee docs/security.md makes of it.
#include "agent/workspace/pod_spec.h"

#include <gtest/gtest.h>

namespace uplink::agent::workspace {
namespace {

using namespace std::chrono_literals;

ExecutionConfig Config() {
  ExecutionConfig config;
  config.enabled = true;
  config.namespace_name = "uplink-workspaces";
  config.workspace_image = "localhost/uplink-workspace@sha256:" + std::string(64, 'b');
  config.capacity_gpus = 8;
  config.max_lifetime_seconds = 3600;
  config.nodes = {"gpu-node-0001", "gpu-node-0002"};
  return config;
}

const WallTime kNow = FromUnixSeconds(1'800'000'000);

DesiredReservation Reservation() {
  return DesiredReservation{.id = "res_0123456789abcdef",
                            .gpus = 2,
                            .node = "gpu-node-0002",
                            .cpu_millis = 8000,
                            .memory_bytes = 64ll << 30,
                            .ephemeral_storage_bytes = 100ll << 30,
                            .expires_at = kNow + 1800s + 500ms};
}

json::object Build(const ExecutionConfig& config = Config(),
                   const DesiredReservation& reservation = Reservation()) {
  auto pod = BuildWorkspacePod(config, reservation, kNow);
  EXPECT_TRUE(pod.ok()) << pod.status().ToString();
  return pod.ok() ? *pod : json::object{};
}

const json::object& Container(const json::object& pod) {
  return pod.at("spec").at("containers").at(0).as_object();
}

TEST(WorkspacePodTest, NamesLabelsAndTheExpiryAnnotation) {
  json::object pod = Build();
  EXPECT_EQ(pod.at("metadata").at("name"), "ws-res-0123456789abcdef");
  EXPECT_EQ(pod.at("metadata").at("namespace"), "uplink-workspaces");
  EXPECT_EQ(pod.at("metadata").at("labels"),
            json::parse(R"({"app.kubernetes.io/managed-by": "uplink-workspace",
                            "uplink.dev/reservation": "res_0123456789abcdef"})"));
  EXPECT_EQ(pod.at("metadata").at("annotations").at("uplink.dev/expires-at"),
            json::value(FormatRfc3339(Reservation().expires_at)));
}

TEST(WorkspacePodTest, ThePinnedImageOnTheApprovedNode) {
  json::object pod = Build();
  EXPECT_EQ(Container(pod).at("image"), json::value(Config().workspace_image));
  EXPECT_EQ(pod.at("spec").at("nodeName"), "gpu-node-0002");
  EXPECT_EQ(pod.at("spec").at("restartPolicy"), "Never");
  EXPECT_EQ(pod.at("spec").at("priorityClassName"), "uplink-workspace");
}

TEST(WorkspacePodTest, NonRootWithNothingToEscalateWith) {
  json::object pod = Build();
  EXPECT_EQ(pod.at("spec").at("securityContext"),
            json::parse(R"({"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000,
                            "fsGroup": 1000, "seccompProfile": {"type": "RuntimeDefault"}})"));
  EXPECT_EQ(Container(pod).at("securityContext"),
            json::parse(R"({"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000,
                            "privileged": false, "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}})"));
  for (const char* host : {"hostNetwork", "hostPID", "hostIPC"}) {
    EXPECT_EQ(pod.at("spec").at(host), false) << host;
  }
}

TEST(WorkspacePodTest, NoTokenNoServiceLinksNoSecretsInTheEnvironment) {
  json::object pod = Build();
  EXPECT_EQ(pod.at("spec").at("automountServiceAccountToken"), false);
  EXPECT_EQ(pod.at("spec").at("enableServiceLinks"), false);
  EXPECT_FALSE(Container(pod).contains("env"));
  EXPECT_FALSE(Container(pod).contains("envFrom"));
  EXPECT_FALSE(pod.at("spec").as_object().contains("serviceAccountName"));
}

TEST(WorkspacePodTest, ReadOnlyRootWithSizedScratchAndTmp) {
  json::object pod = Build();
  EXPECT_EQ(Container(pod).at("volumeMounts"),
            json::parse(R"([{"name": "scratch", "mountPath": "/scratch"},
                            {"name": "tmp", "mountPath": "/tmp"}])"));
  EXPECT_EQ(Container(pod).at("workingDir"), "/scratch");
  // Scratch and /tmp together are the reservation's ephemeral storage.
  EXPECT_EQ(pod.at("spec").at("volumes"),
            json::parse(R"([{"name": "scratch", "emptyDir": {"sizeLimit": "106300440576"}},
                            {"name": "tmp", "emptyDir": {"sizeLimit": "1073741824"}}])"));
}

TEST(WorkspacePodTest, RequestsEqualLimits) {
  json::value expected = json::parse(R"({"cpu": "8000m", "memory": "68719476736",
      "ephemeral-storage": "107374182400", "nvidia.com/gpu": "2"})");
  EXPECT_EQ(Container(Build()).at("resources"),
            (json::object{{"requests", expected}, {"limits", expected}}));
  DesiredReservation cpu_only = Reservation();
  cpu_only.gpus = 0;
  EXPECT_FALSE(Container(Build(Config(), cpu_only)).at("resources").at("limits").as_object()
                   .contains("nvidia.com/gpu"));
}

TEST(WorkspacePodTest, TheDeadlineIsTheTimeLeftRoundedUpAndAtMostTheMaximumLifetime) {
  EXPECT_EQ(Build().at("spec").at("activeDeadlineSeconds"), 1801);
  DesiredReservation long_one = Reservation();
  long_one.expires_at = kNow + 100h;
  EXPECT_EQ(Build(Config(), long_one).at("spec").at("activeDeadlineSeconds"), 3600);
  EXPECT_EQ(ActiveDeadlineSeconds(Config(), kNow, kNow), std::nullopt);
  EXPECT_EQ(ActiveDeadlineSeconds(Config(), kNow + 1ms, kNow), 1);
}

TEST(WorkspacePodTest, RuntimeClassAndUserNamespaceOnlyWhenConfigured) {
  EXPECT_FALSE(Build().at("spec").as_object().contains("runtimeClassName"));
  EXPECT_FALSE(Build().at("spec").as_object().contains("hostUsers"));
  ExecutionConfig config = Config();
  config.runtime_class_name = "nvidia";
  config.host_users = false;
  json::object pod = Build(config);
  EXPECT_EQ(pod.at("spec").at("runtimeClassName"), "nvidia");
  EXPECT_EQ(pod.at("spec").at("hostUsers"), false);
}

TEST(WorkspacePodTest, RefusesWhatTheConfigurationDoesNotAllow) {
  DesiredReservation elsewhere = Reservation();
  elsewhere.node = "cpu-node-0001";
  auto refused = BuildWorkspacePod(Config(), elsewhere, kNow);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("not an approved node"), std::string::npos);

  DesiredReservation too_many = Reservation();
  too_many.gpus = 9;
  EXPECT_FALSE(BuildWorkspacePod(Config(), too_many, kNow).ok());
  DesiredReservation expired = Reservation();
  expired.expires_at = kNow;
  EXPECT_FALSE(BuildWorkspacePod(Config(), expired, kNow).ok());
  DesiredReservation no_disk = Reservation();
  no_disk.ephemeral_storage_bytes = 1ll << 30;  // no more than /tmp alone
  EXPECT_FALSE(BuildWorkspacePod(Config(), no_disk, kNow).ok());
  DesiredReservation no_cpu = Reservation();
  no_cpu.cpu_millis = 0;
  EXPECT_FALSE(BuildWorkspacePod(Config(), no_cpu, kNow).ok());
}

TEST(WorkspacePodTest, PodNamesFromReservationIds) {
  EXPECT_EQ(PodNameFor("res_0123456789abcdef"), "ws-res-0123456789abcdef");
}

}  // namespace
}  // namespace uplink::agent::workspace
