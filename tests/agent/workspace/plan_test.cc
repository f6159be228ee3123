// The reconciler's decisions: create what is missing within the capacity, delete what is
// stopped, expired, finished or orphaned, and the events each state implies.
#include "agent/workspace/plan.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace uplink::agent::workspace {
namespace {

using namespace std::chrono_literals;

const WallTime kNow = FromUnixSeconds(1'800'000'000);

ExecutionConfig Config() {
  ExecutionConfig config;
  config.namespace_name = "ws";
  config.workspace_image = "localhost/w@sha256:" + std::string(64, 'c');
  config.capacity_gpus = 4;
  config.max_lifetime_seconds = 3600;
  config.nodes = {"gpu-1", "gpu-2"};
  return config;
}

DesiredReservation Wanted(std::string id, std::int64_t gpus = 1, bool running = true,
                          WallTime expires_at = kNow + 1h) {
  return DesiredReservation{.id = std::move(id), .gpus = gpus, .node = "gpu-1",
                            .cpu_millis = 1000, .memory_bytes = 1 << 30,
                            .ephemeral_storage_bytes = 4ll << 30, .expires_at = expires_at,
                            .desired = running ? "running" : "stopped"};
}

ObservedPod Pod(const std::string& reservation, std::string phase = "Running",
                std::int64_t gpus = 1, WallTime expires_at = kNow + 1h) {
  return ObservedPod{.name = PodNameFor(reservation), .reservation_id = reservation,
                     .node = "gpu-1", .phase = std::move(phase), .expires_at = expires_at,
                     .gpus = gpus};
}

std::vector<std::string> Created(const ReconcilePlan& plan) {
  std::vector<std::string> ids;
  for (const DesiredReservation& r : plan.create) ids.push_back(r.id);
  return ids;
}

std::vector<std::string> Removed(const ReconcilePlan& plan) {
  std::vector<std::string> out;
  for (const PodDeletion& d : plan.remove) {
    out.push_back(d.pod + ":" + std::string(DeleteReasonName(d.reason)));
  }
  return out;
}

std::vector<std::string> Keys(const ReconcilePlan& plan) {
  std::vector<std::string> keys;
  for (const WorkspaceEvent& event : plan.events) keys.push_back(event.key);
  return keys;
}

TEST(PlanTest, CreatesWhatIsMissingAndReportsWhatRuns) {
  PlanInput input{.desired = {Wanted("res_a"), Wanted("res_b")}, .desired_fresh = true,
                  .pods = {Pod("res_a", "Pending")}, .now = kNow};
  ReconcilePlan plan = PlanReconcile(Config(), input);
  EXPECT_EQ(Created(plan), std::vector<std::string>{"res_b"});
  EXPECT_TRUE(plan.remove.empty());
  EXPECT_EQ(Keys(plan), std::vector<std::string>{"res_a/provisioning/1"});

  input.pods = {Pod("res_a", "Running"), Pod("res_b", "Pending")};
  plan = PlanReconcile(Config(), input);
  EXPECT_TRUE(plan.create.empty());
  EXPECT_EQ(Keys(plan), (std::vector<std::string>{"res_a/provisioning/1", "res_a/running/1",
                                                  "res_b/provisioning/1"}));
}

TEST(PlanTest, NeverPastTheCapacityLimit) {
  PlanInput input{.desired = {Wanted("res_a", 2), Wanted("res_b", 2), Wanted("res_c", 1)},
                  .pods = {Pod("res_a", "Running", 2)}, .now = kNow};
  ReconcilePlan plan = PlanReconcile(Config(), input);
  EXPECT_EQ(Created(plan), std::vector<std::string>{"res_b"});
  EXPECT_EQ(plan.waiting_for_capacity, std::vector<std::string>{"res_c"});
  // A pod on its way out still holds its GPUs.
  input.pods = {Pod("res_a", "Running", 2), Pod("res_x", "Running", 2)};
  input.pods.back().deleting = true;
  EXPECT_TRUE(PlanReconcile(Config(), input).create.empty());
}

TEST(PlanTest, StopsDeletesAndReportsCompletedOnlyOnceThePodIsGone) {
  PlanInput input{.desired = {Wanted("res_a", 1, false)}, .pods = {Pod("res_a")}, .now = kNow};
  ReconcilePlan plan = PlanReconcile(Config(), input);
  EXPECT_EQ(Removed(plan), std::vector<std::string>{"ws-res-a:stopped"});
  EXPECT_FALSE(EventAfterDeletion(plan.remove.front(), kNow))
      << "Kubernetes accepting the delete is not the pod gone";
  // Terminating: not deleted again, and not completed yet.
  input.pods.front().deleting = true;
  plan = PlanReconcile(Config(), input);
  EXPECT_TRUE(plan.remove.empty());
  const std::vector<std::string> keys = Keys(plan);
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "res_a/completed/1"), 0)
      << ::testing::PrintToString(keys);
  input.pods.clear();
  EXPECT_EQ(Keys(PlanReconcile(Config(), input)), std::vector<std::string>{"res_a/completed/1"});
}

TEST(PlanTest, ExpiredAndFinishedPodsGoWhateverTheConsoleSays) {
  PlanInput input{.desired = {Wanted("res_a"), Wanted("res_b")},
                  .pods = {Pod("res_a", "Running", 1, kNow - 1s), Pod("res_b", "Failed")},
                  .now = kNow};
  input.pods[1].reason = "DeadlineExceeded";
  input.pods[1].message = "Pod was active on the node longer than the specified deadline";
  ReconcilePlan plan = PlanReconcile(Config(), input);
  EXPECT_EQ(Removed(plan), (std::vector<std::string>{"ws-res-a:expired", "ws-res-b:finished"}));
  ASSERT_EQ(Keys(plan), (std::vector<std::string>{"res_a/provisioning/1", "res_a/running/1",
                                                  "res_b/failed/1"}));
  EXPECT_EQ(plan.events[2].reason,
            "DeadlineExceeded: Pod was active on the node longer than the specified deadline");
  EXPECT_EQ(EventAfterDeletion(plan.remove[0], kNow)->key, "res_a/expired/1");
  EXPECT_FALSE(EventAfterDeletion(plan.remove[1], kNow));
  EXPECT_TRUE(plan.create.empty()) << "a pod that is there is never created again";
}

TEST(PlanTest, AReservationThatEndedHereIsNotCreatedAgain) {
  PlanInput input{.desired = {Wanted("res_a")}, .ended = {"res_a"}, .now = kNow};
  EXPECT_TRUE(PlanReconcile(Config(), input).create.empty());
}

// The console says a pod was seen (provisioning, running) and none is there: deleted
// outside uplink. Created again it would have an empty scratch and a new host key, so the
// reservation fails instead; one the console holds as reserved is still created.
TEST(PlanTest, APodDeletedOutsideUplinkFailsItsReservationInsteadOfStartingAfresh) {
  PlanInput input{.desired = {Wanted("res_a"), Wanted("res_b"), Wanted("res_c"), Wanted("res_d")},
                  .now = kNow};
  input.desired[0].state = "running";
  input.desired[1].state = "provisioning";
  input.desired[2].state = "reserved";  // and res_d from a console that does not say
  ReconcilePlan plan = PlanReconcile(Config(), input);
  EXPECT_EQ(Created(plan), (std::vector<std::string>{"res_c", "res_d"}));
  ASSERT_EQ(Keys(plan), (std::vector<std::string>{"res_a/failed/1", "res_b/failed/1"}));
  EXPECT_EQ(plan.events[0].reason,
            "its workspace pod ws-res-a was deleted outside uplink (kubectl delete, its node "
            "removed, or while the controller was down); its files went with it, so it is not "
            "created again");
  EXPECT_EQ(plan.events[0].pod, "ws-res-a");
  EXPECT_EQ(plan.events[0].node, "gpu-1");

  // A drain deleting it (the controller saw the pod gone with the drain marker): drained.
  input.draining = true;
  plan = PlanReconcile(Config(), input);
  ASSERT_EQ(Keys(plan), (std::vector<std::string>{"res_a/failed/1", "res_b/failed/1"}));
  EXPECT_EQ(plan.events[0].reason, "the supplier drained the workspace namespace");
  input.draining = false;

  // With its pod there, or expired, or stopped, the rules before this one apply.
  input.desired = {Wanted("res_a"), Wanted("res_b", 1, true, kNow), Wanted("res_c", 1, false)};
  for (DesiredReservation& reservation : input.desired) reservation.state = "running";
  input.desired[2].state = "stopping";
  input.pods = {Pod("res_a")};
  plan = PlanReconcile(Config(), input);
  EXPECT_TRUE(plan.create.empty());
  EXPECT_EQ(Keys(plan), (std::vector<std::string>{"res_a/provisioning/1", "res_a/running/1",
                                                  "res_b/expired/1", "res_c/completed/1"}));
}

TEST(PlanTest, AnExpiredReservationIsReportedNotCreated) {
  PlanInput input{.desired = {Wanted("res_a", 1, true, kNow)}, .now = kNow};
  ReconcilePlan plan = PlanReconcile(Config(), input);
  EXPECT_TRUE(plan.create.empty());
  EXPECT_EQ(Keys(plan), std::vector<std::string>{"res_a/expired/1"});
}

TEST(PlanTest, AnUnapprovedNodeFailsTheReservation) {
  DesiredReservation elsewhere = Wanted("res_a");
  elsewhere.node = "gpu-9";
  ReconcilePlan plan = PlanReconcile(Config(), PlanInput{.desired = {elsewhere}, .now = kNow});
  EXPECT_TRUE(plan.create.empty());
  ASSERT_EQ(Keys(plan), std::vector<std::string>{"res_a/failed/1"});
  EXPECT_NE(plan.events[0].reason.find("gpu-9 is not approved"), std::string::npos);
}

TEST(PlanTest, OrphansGoAfterAFullSyncWithoutThem) {
  PlanInput input{.desired = {}, .desired_fresh = true, .pods = {Pod("res_gone")}, .now = kNow};
  ReconcilePlan first = PlanReconcile(Config(), input);
  EXPECT_TRUE(first.remove.empty()) << "one sync without it may be a race with its creation";
  EXPECT_EQ(first.unlisted_now, std::set<std::string>{"ws-res-gone"});
  input.unlisted_before = first.unlisted_now;
  EXPECT_EQ(Removed(PlanReconcile(Config(), input)),
            std::vector<std::string>{"ws-res-gone:orphan"});
  // A stale list (the console unreachable) proves nothing.
  input.desired_fresh = false;
  EXPECT_TRUE(PlanReconcile(Config(), input).remove.empty());
}

TEST(PlanTest, PodsWithoutAReservationOrAnExpiryAreOrphans) {
  ObservedPod unlabelled = Pod("");
  unlabelled.name = "stray";
  ObservedPod no_expiry = Pod("res_a");
  no_expiry.expires_at.reset();
  EXPECT_EQ(Removed(PlanReconcile(Config(), PlanInput{.pods = {unlabelled, no_expiry}, .now = kNow})),
            (std::vector<std::string>{"stray:orphan", "ws-res-a:orphan"}));
}

TEST(PlanTest, DrainingCreatesNothingAndDeletesEverything) {
  PlanInput input{.desired = {Wanted("res_a"), Wanted("res_b")}, .draining = true,
                  .pods = {Pod("res_a")}, .now = kNow};
  ReconcilePlan plan = PlanReconcile(Config(), input);
  EXPECT_TRUE(plan.create.empty());
  EXPECT_EQ(Removed(plan), std::vector<std::string>{"ws-res-a:draining"});
  EXPECT_EQ(EventAfterDeletion(plan.remove[0], kNow)->key, "res_a/failed/1");
  input.draining = false;
  input.accepting = false;
  EXPECT_TRUE(PlanReconcile(Config(), input).create.empty());
}

TEST(PlanTest, PodsBeingDeletedAreLeftToFinish) {
  ObservedPod going = Pod("res_a", "Running", 1, kNow - 1h);
  going.deleting = true;
  EXPECT_TRUE(PlanReconcile(Config(), PlanInput{.pods = {going}, .now = kNow}).remove.empty());
  EXPECT_TRUE(PlanLocalExpiry({going}, kNow).empty());
}

TEST(PlanTest, ObservesAPodAsTheApiServerWritesIt) {
  json::value pod = json::parse(R"({"metadata": {"name": "ws-res-a", "labels":
      {"uplink.dev/reservation": "res_a"}, "annotations": {"uplink.dev/expires-at":
      "2027-01-15T08:00:00Z"}, "deletionTimestamp": "2027-01-15T07:00:00Z"},
      "spec": {"nodeName": "gpu-1", "containers": [{"name": "w", "resources":
      {"limits": {"nvidia.com/gpu": "2"}}}]},
      "status": {"phase": "Failed", "reason": "DeadlineExceeded", "message": "too long"}})");
  ObservedPod observed = ObservePod(pod.as_object());
  EXPECT_EQ(observed.name, "ws-res-a");
  EXPECT_EQ(observed.reservation_id, "res_a");
  EXPECT_EQ(observed.node, "gpu-1");
  EXPECT_EQ(observed.phase, "Failed");
  EXPECT_EQ(observed.reason, "DeadlineExceeded");
  EXPECT_EQ(observed.expires_at, ParseRfc3339("2027-01-15T08:00:00Z").value());
  EXPECT_TRUE(observed.deleting);
  EXPECT_EQ(observed.gpus, 2);
  // Hostile shapes read as nothing, never crash.
  for (const char* text : {R"({})", R"({"metadata": 5, "spec": [], "status": "x"})",
                           R"({"metadata": {"annotations": {"uplink.dev/expires-at": 7}},
                               "spec": {"containers": [1, {"resources": {"limits":
                               {"nvidia.com/gpu": "lots"}}}]}})"}) {
    ObservedPod odd = ObservePod(json::parse(text).as_object());
    EXPECT_EQ(odd.gpus, 0);
    EXPECT_FALSE(odd.expires_at);
  }
}

}  // namespace
}  // namespace uplink::agent::workspace
