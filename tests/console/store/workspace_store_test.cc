// The SQLite store's workspace area on a real database file: an offer made with its
// connection, the review and states, placement that never passes capacity or a node's room,
// the controller's events applied once, commands and their output (capped, gaps refused), and
// every change with its audit event in one transaction.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <string>
#include <vector>

#include "console/store/sql_store.h"
#include "protocol/workspace.h"
#include "store_fixture.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

const WallTime kT0 = testing::kStoreT0;
const std::string& kConnectionId = testing::kStoreConnectionId;
const std::string kOfferId = "off_00000000000000a1";

AuditEvent Event(const std::string& action, WallTime at = kT0) {
  return testing::AdminEvent(action, "offer", kOfferId, at);
}

OfferReview FullReview(std::vector<std::string> nodes) {
  OfferReview review;
  review.authority_confirmed = review.hardware_compatible = review.isolation_verified = true;
  review.expiry_and_cleanup_checked = review.disk_eviction_tested = true;
  review.network_policy_enforced = review.price_includes_traffic = true;
  review.cpu_millis_per_gpu = 4000;
  review.memory_bytes_per_gpu = 32LL << 30;
  review.disk_bytes_per_gpu = 50LL << 30;
  review.transfer_budget_bytes = 1LL << 40;
  review.approved_nodes = std::move(nodes);
  review.reviewed_by = "u1";
  review.reviewed_by_label = "a@example.com";
  review.reviewed_at = kT0;
  return review;
}

class WorkspaceStoreTest : public testing::SqlStoreFixture {
 protected:
  void SetUp() override {
    testing::SqlStoreFixture::SetUp();
    if (HasFatalFailure()) return;
    offer_.id = kOfferId;
    offer_.owner_id = "u1";
    offer_.connection_id = kConnectionId;
    offer_.gpus = 4;
    offer_.country = "DE";
    offer_.price_per_gpu_hour = "2.10";
    offer_.currency = "EUR";
    offer_.max_lifetime_seconds = 86400;
    offer_.created_at = kT0;
  }

  // An offer, qualified with `nodes` approved, and execution on.
  void Qualified(std::vector<std::string> nodes) {
    ASSERT_TRUE(store_->CreateOffer(offer_, connection_, Event("connection.create"),
                                    Event("offer.create"))
                    .ok());
    ASSERT_TRUE(store_
                    ->SetOfferState(kOfferId, OfferState::kDraft, OfferState::kConnected,
                                    Event("offer.connected"))
                    .ok());
    ASSERT_TRUE(store_
                    ->SaveOfferReview(kOfferId, OfferState::kConnected, FullReview(nodes),
                                      OfferState::kQualified, Event("offer.review"))
                    .ok());
    ExecutionCredential credential{"e1", kOfferId, "exe_abcdefgh", std::string(64, 'e'), kT0, {}};
    ASSERT_TRUE(
        store_->EnableExecution(kOfferId, ExecutionSettings{}, credential, Event("x")).ok());
  }

  Reservation Wanted(std::int64_t gpus) {
    Reservation r;
    r.id = protocol::NewReservationId();
    r.offer_id = kOfferId;
    r.owner_id = "u1";
    r.gpus = gpus;
    r.created_at = kT0;
    r.expires_at = kT0 + hours(1);
    return r;
  }

  WorkspaceCommandRecord Command(const std::string& reservation_id, std::string kind,
                                 std::int64_t cap = protocol::kDefaultOutputCapBytes) {
    WorkspaceCommandRecord command;
    command.id = protocol::NewWorkspaceCommandId();
    command.reservation_id = reservation_id;
    command.kind = std::move(kind);
    command.code = command.kind == "shell" ? "id -u" : "print(1)";
    command.timeout_seconds = 60;
    command.output_cap_bytes = cap;
    command.created_by = "u1";
    command.created_at = kT0;
    return command;
  }

  std::int64_t Events() { return Count("SELECT COUNT(*) FROM audit_events"); }

  Offer offer_;
};

TEST_P(WorkspaceStoreTest, AnOfferIsMadeWithItsConnectionAndBothEventsOrNotAtAll) {
  const std::int64_t events = Events();
  ASSERT_TRUE(
      store_->CreateOffer(offer_, connection_, Event("connection.create"), Event("offer.create"))
          .ok());
  EXPECT_EQ(Events(), events + 2);
  auto offer = store_->GetOffer(kOfferId);
  ASSERT_TRUE(offer.ok()) << offer.status().ToString();
  EXPECT_EQ(offer->state, OfferState::kDraft);
  EXPECT_EQ(offer->cluster_name, "prod");
  EXPECT_EQ(offer->price_per_gpu_hour, "2.10");
  EXPECT_TRUE(offer->availability.always());
  EXPECT_FALSE(offer->review);

  // A second offer whose connection cannot be made (same cluster name) leaves nothing.
  Offer twin = offer_;
  twin.id = "off_00000000000000a2";
  Connection twin_connection = connection_;
  twin_connection.id = "00000000000000c2";
  EXPECT_FALSE(store_
                   ->CreateOffer(twin, twin_connection, Event("connection.create"),
                                 Event("offer.create"))
                   .ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM offers"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM connections"), 1);
  EXPECT_EQ(Events(), events + 2);
}

TEST_P(WorkspaceStoreTest, TheFirstInventoryReportConnectsADraftOfferOnceWithAnEvent) {
  ASSERT_TRUE(
      store_->CreateOffer(offer_, connection_, Event("connection.create"), Event("offer.create"))
          .ok());
  InventoryReport report;
  report.cluster_uid = "uid-1";
  report.nodes.push_back({.name = "gpu-1", .ready = true, .gpu_resource = "nvidia.com/gpu",
                          .gpu_capacity = 8, .gpu_allocatable = 8});
  AuditEvent agent = Event("connection.bind");
  agent.actor_type = "agent";
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(
        store_->AcceptReport(kConnectionId, connection_.token_hash, report, kT0, agent).ok());
  }
  EXPECT_EQ(store_->GetOffer(kOfferId)->state, OfferState::kConnected);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'offer.connected'"), 1);
}

TEST_P(WorkspaceStoreTest, AStateChangeThatLostARaceWritesNothing) {
  Qualified({"gpu-1"});
  const std::int64_t events = Events();
  Status stale = store_->SetOfferState(kOfferId, OfferState::kConnected, OfferState::kSuspended,
                                       Event("offer.suspend"));
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.message().find("qualified now"), std::string::npos) << stale.message();
  EXPECT_EQ(Events(), events);
  auto offer = store_->GetOffer(kOfferId);
  ASSERT_TRUE(offer->review);
  EXPECT_EQ(offer->review->approved_nodes, std::vector<std::string>{"gpu-1"});
  EXPECT_EQ(offer->review->memory_bytes_per_gpu, 32LL << 30);
  EXPECT_TRUE(offer->review->Qualifies());
  ASSERT_TRUE(offer->credential);
  EXPECT_FALSE(offer->credential->revoked_at);
}

TEST_P(WorkspaceStoreTest, PlacementFillsTheTightestNodeAndNeverPassesCapacityOrRoom) {
  Qualified({"big", "small"});
  const std::vector<PlacementCandidate> nodes = {{"big", 4}, {"small", 2}};
  auto first = store_->CreateReservation(Wanted(2), nodes, Event("reservation.create"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->node, "small") << "the least room that fits";
  EXPECT_EQ(first->state, "reserved");
  ASSERT_EQ(first->transitions.size(), 1u);
  EXPECT_EQ(first->transitions[0].reason, "placed on small");
  auto second = store_->CreateReservation(Wanted(1), nodes, Event("reservation.create"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->node, "big");
  // 3 of the 4 GPUs of capacity are reserved.
  auto over = store_->CreateReservation(Wanted(2), nodes, Event("reservation.create"));
  EXPECT_EQ(over.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(over.status().message().find("at most 1 GPU"), std::string::npos)
      << over.status().message();
  // Room: a candidate list where the capacity allows it but no node has room.
  auto no_room = store_->CreateReservation(Wanted(1), {{"small", 2}}, Event("reservation.create"));
  EXPECT_EQ(no_room.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(no_room.status().message().find("most free on one node is 0"), std::string::npos)
      << no_room.status().message();
  // A stopped reservation frees its GPUs.
  ASSERT_TRUE(store_->StopReservation(first->id, "done", Event("reservation.stop")).ok());
  EXPECT_EQ(store_->GetReservation(first->id)->state, "cancelled");
  EXPECT_TRUE(store_->CreateReservation(Wanted(2), nodes, Event("reservation.create")).ok());
}

TEST_P(WorkspaceStoreTest, AnUnqualifiedOfferOrDisabledExecutionIsRefused) {
  ASSERT_TRUE(
      store_->CreateOffer(offer_, connection_, Event("connection.create"), Event("offer.create"))
          .ok());
  auto draft = store_->CreateReservation(Wanted(1), {{"gpu-1", 8}}, Event("reservation.create"));
  EXPECT_EQ(draft.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(draft.status().message().find("draft, not qualified"), std::string::npos);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM reservations"), 0);
}

TEST_P(WorkspaceStoreTest, DisablingExecutionIsRefusedWhileReservationsAreActive) {
  Qualified({"gpu-1"});
  auto reservation =
      store_->CreateReservation(Wanted(1), {{"gpu-1", 8}}, Event("reservation.create"));
  ASSERT_TRUE(reservation.ok());
  Status refused = store_->DisableExecution(kOfferId, true, Event("offer.execution_disable"));
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("stop them first"), std::string::npos) << refused.message();
  EXPECT_TRUE(store_->GetOffer(kOfferId)->execution_enabled);
  ASSERT_TRUE(store_->StopReservation(reservation->id, "", Event("reservation.stop")).ok());
  ASSERT_TRUE(store_->DisableExecution(kOfferId, true, Event("offer.execution_disable")).ok());
  auto offer = store_->GetOffer(kOfferId);
  EXPECT_FALSE(offer->execution_enabled);
  EXPECT_TRUE(offer->credential->revoked_at);
}

TEST_P(WorkspaceStoreTest, ControllerEventsApplyOnceAndOnlyAsTheStateMachineAllows) {
  Qualified({"gpu-1"});
  auto r = store_->CreateReservation(Wanted(1), {{"gpu-1", 8}}, Event("reservation.create"));
  ASSERT_TRUE(r.ok());
  auto event = [&](std::string key, std::string state) {
    return protocol::WorkspaceEvent{std::move(key), r->id,          std::move(state), "why",
                                    kT0 + seconds(5), "ws-" + r->id.substr(4), "gpu-1"};
  };
  protocol::WorkspaceSync sync;
  sync.release = "uplink-agent";
  sync.namespace_name = "uplink-workspaces";
  sync.events = {event("k1", "provisioning"), event("k2", "running"),
                 event("k3", "provisioning") /* backwards: remembered, ignored */,
                 event("k1", "provisioning") /* the same key twice */};
  const std::int64_t events = Events();
  auto acked = store_->ApplyWorkspaceSync(kOfferId, sync, kT0 + seconds(6), Event("agent"));
  ASSERT_TRUE(acked.ok()) << acked.status().ToString();
  EXPECT_EQ(*acked, (std::vector<std::string>{"k1", "k2", "k3", "k1"}));
  EXPECT_EQ(Events(), events + 2);
  auto running = store_->GetReservation(r->id);
  EXPECT_EQ(running->state, "running");
  EXPECT_EQ(running->pod, "ws-" + r->id.substr(4));
  ASSERT_EQ(running->transitions.size(), 3u);
  EXPECT_EQ(running->transitions[2].source, "controller");
  EXPECT_EQ(store_->GetOffer(kOfferId)->helm_release, "uplink-agent");
  // Sent again after a lost reply: acknowledged, nothing changes.
  ASSERT_TRUE(store_->ApplyWorkspaceSync(kOfferId, sync, kT0 + seconds(7), Event("agent")).ok());
  EXPECT_EQ(Events(), events + 2);
  EXPECT_EQ(store_->GetReservation(r->id)->transitions.size(), 3u);

  auto work = store_->ReadWorkspaceWork(kOfferId, 16);
  ASSERT_EQ(work->reservations.size(), 1u);
  EXPECT_EQ(work->reservations[0].desired, "running");
  EXPECT_EQ(work->reservations[0].state, "running") << "the controller learns a pod was seen";
  EXPECT_EQ(work->reservations[0].node, "gpu-1");
  ASSERT_TRUE(store_->StopReservation(r->id, "user asked", Event("reservation.stop")).ok());
  EXPECT_EQ(store_->ReadWorkspaceWork(kOfferId, 16)->reservations.at(0).desired, "stopped");
  EXPECT_EQ(store_->ReadWorkspaceWork(kOfferId, 16)->reservations.at(0).state, "stopping");
  sync.events = {event("k4", "completed")};
  ASSERT_TRUE(store_->ApplyWorkspaceSync(kOfferId, sync, kT0 + seconds(8), Event("agent")).ok());
  auto done = store_->GetReservation(r->id);
  EXPECT_EQ(done->state, "completed");
  EXPECT_TRUE(done->ended_at);
  EXPECT_TRUE(store_->ReadWorkspaceWork(kOfferId, 16)->reservations.empty());
}

TEST_P(WorkspaceStoreTest, OutputIsAppendedOnceCappedAndGapsAreRefused) {
  Qualified({"gpu-1"});
  auto r = store_->CreateReservation(Wanted(1), {{"gpu-1", 8}}, Event("reservation.create"));
  ASSERT_TRUE(r.ok());
  const WorkspaceCommandRecord command = Command(r->id, "shell", 10);
  ASSERT_TRUE(store_->CreateWorkspaceCommand(command, Event("reservation.command")).ok());
  // Commands are handed out only for running reservations.
  EXPECT_TRUE(store_->ReadWorkspaceWork(kOfferId, 16)->commands.empty());
  protocol::WorkspaceSync sync;
  sync.namespace_name = "ws";
  sync.events = {{"k", r->id, "running", "", kT0, "", ""}};
  ASSERT_TRUE(store_->ApplyWorkspaceSync(kOfferId, sync, kT0, Event("agent")).ok());
  ASSERT_EQ(store_->ReadWorkspaceWork(kOfferId, 16)->commands.size(), 1u);

  auto post = [&](std::int64_t offset, std::string data, std::string state = "running",
                  std::optional<int> exit_code = std::nullopt) {
    return store_->AppendCommandOutput(kOfferId, command.id,
                                       {offset, std::move(data), std::move(state), exit_code,
                                        false, ""},
                                       kT0);
  };
  EXPECT_EQ(post(0, "1000\n")->have, 5);
  EXPECT_EQ(post(0, "1000\n")->have, 5) << "a chunk sent again adds nothing";
  EXPECT_TRUE(post(9, "x")->gap);
  EXPECT_EQ(post(3, "0\nabcdefgh")->have, 10) << "the overlap is skipped, the rest cut at the cap";
  auto ended = post(10, "more", "exited", 0);
  EXPECT_TRUE(ended->final);
  EXPECT_EQ(store_->ReadCommandOutput(command.id, 0, 100).value(), "1000\nabcde");
  EXPECT_EQ(store_->ReadCommandOutput(command.id, 7, 2).value(), "cd");
  auto stored = store_->GetWorkspaceCommand(command.id);
  EXPECT_EQ(stored->state, "exited");
  EXPECT_EQ(stored->exit_code, 0);
  EXPECT_TRUE(stored->truncated);
  EXPECT_TRUE(stored->finished_at);
  EXPECT_TRUE(post(10, "", "failed")->final) << "a final state is kept as it was";
  EXPECT_EQ(store_->GetWorkspaceCommand(command.id)->state, "exited");
  EXPECT_EQ(store_->AppendCommandOutput("off_00000000000000ff", command.id,
                                        {0, "", "running", {}, false, ""}, kT0)
                .status()
                .code(),
            StatusCode::kNotFound)
      << "another offer's controller cannot write it";
  EXPECT_TRUE(store_->ReadWorkspaceWork(kOfferId, 16)->commands.empty());
}

TEST_P(WorkspaceStoreTest, OverdueReservationsExpireAndTheirCommandsAreCancelled) {
  Qualified({"gpu-1"});
  auto r = store_->CreateReservation(Wanted(1), {{"gpu-1", 8}}, Event("reservation.create"));
  ASSERT_TRUE(r.ok());
  const WorkspaceCommandRecord command = Command(r->id, "python");
  ASSERT_TRUE(store_->CreateWorkspaceCommand(command, Event("reservation.command")).ok());
  EXPECT_EQ(store_->ExpireOverdueReservations(kT0 + hours(1), seconds(60), Event("e")).value(), 0);
  EXPECT_EQ(
      store_->ExpireOverdueReservations(kT0 + hours(1) + seconds(61), seconds(60), Event("e"))
          .value(),
      1);
  EXPECT_EQ(store_->GetReservation(r->id)->state, "expired");
  EXPECT_EQ(store_->GetWorkspaceCommand(command.id)->state, "cancelled");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'reservation.expired'"), 1);
}

TEST(ReservationStates, TheMachineGoesForwardOnly) {
  EXPECT_TRUE(ReservationTransitionAllowed("reserved", "provisioning"));
  EXPECT_TRUE(ReservationTransitionAllowed("running", "failed"));
  EXPECT_TRUE(ReservationTransitionAllowed("stopping", "completed"));
  EXPECT_FALSE(ReservationTransitionAllowed("running", "provisioning"));
  EXPECT_FALSE(ReservationTransitionAllowed("stopping", "running"));
  EXPECT_FALSE(ReservationTransitionAllowed("completed", "running"));
  EXPECT_FALSE(ReservationTransitionAllowed("expired", "failed"));
  EXPECT_FALSE(ReservationTransitionAllowed("reserved", "bogus"));
}

TEST_P(WorkspaceStoreTest, TheFirstHostKeyReportedIsPinnedWithItsEventAndAnotherChangesNothing) {
  Qualified({"gpu-1"});
  auto r = store_->CreateReservation(Wanted(1), {{"gpu-1", 8}}, Event("reservation.create"));
  ASSERT_TRUE(r.ok());
  const std::string key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEhw0aQDLMFehMBBfgSUSM0uXPEuj3+c6Nnd9l2ljxsQ";
  const std::string other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOuQ8oAMYHEhOXMFdPhZ5NyAY3LTDIXZMUZWtQKmjsPr";
  // No handover before a key is pinned.
  EXPECT_EQ(store_->RecordSshHandover(r->id, key, kT0).code(), StatusCode::kFailedPrecondition);

  AuditEvent pin = Event("reservation.ssh_host_key_pinned");
  pin.at = kT0 + seconds(5);
  EXPECT_EQ(store_->RecordSshCapability(r->id, key, pin).value(), SshHostKeyCheck::kPinned);
  pin.at = kT0 + seconds(35);
  EXPECT_EQ(store_->RecordSshCapability(r->id, key, pin).value(), SshHostKeyCheck::kSame);
  pin.at = kT0 + seconds(65);
  EXPECT_EQ(store_->RecordSshCapability(r->id, other, pin).value(), SshHostKeyCheck::kChanged);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = "
                  "'reservation.ssh_host_key_pinned'"),
            1);
  Reservation read = store_->GetReservation(r->id).value();
  EXPECT_EQ(read.ssh_host_key, key);
  EXPECT_EQ(read.ssh_reported_at, kT0 + seconds(35));  // the changed key's report not recorded
  EXPECT_FALSE(read.ssh_handover_at);

  EXPECT_EQ(store_->RecordSshHandover(r->id, other, kT0 + seconds(66)).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store_->RecordSshHandover(r->id, key, kT0 + seconds(40)).ok());
  EXPECT_EQ(store_->GetReservation(r->id)->ssh_handover_at, kT0 + seconds(40));
  EXPECT_EQ(store_->RecordSshCapability("res_0000000000000000", key, pin).status().code(),
            StatusCode::kNotFound);
}

TEST_P(WorkspaceStoreTest, TransferUsedIsAddedAtomicallyFromManyThreads) {
  Qualified({"gpu-1"});
  auto r = store_->CreateReservation(Wanted(1), {{"gpu-1", 8}}, Event("reservation.create"));
  ASSERT_TRUE(r.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) ASSERT_TRUE(store_->AddTransferUsed(r->id, 1000).ok());
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(store_->GetReservation(r->id)->transfer_used_bytes, 200'000);
  EXPECT_TRUE(store_->AddTransferUsed(r->id, 0).ok());
  EXPECT_EQ(store_->AddTransferUsed(r->id, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->AddTransferUsed("res_0000000000000000", 5).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetReservation(r->id)->transfer_used_bytes, 200'000);
}

INSTANTIATE_TEST_SUITE_P(Engines, WorkspaceStoreTest, testing::kStoreEngines, testing::StoreEngineName);

}  // namespace
}  // namespace uplink::console
