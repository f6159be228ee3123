// Workspace execution through the API as its callers use it: a supplier's offer made with its
// connection, the admin's review, the execution credential and execution.json, reservations
// placed and seen only by whom they concern, commands and their streamed output; and the
// controller's calls with bodies built by the protocol's own encoders, with every refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "workspace_fixture.h"
#include "common/crypto.h"
#include "common/files.h"
#include "support/process.h"
#include "protocol/agent_api.h"
#include "protocol/workspace.h"

namespace uplink::console {
namespace {

TEST_F(WorkspaceApiTest, AnOfferIsMadeWithItsConnectionAndTheTokenShownOnce) {
  json::object offer = CreateOffer();
  EXPECT_TRUE(Text(offer, "id").starts_with("off_"));
  EXPECT_EQ(Text(offer, "state"), "draft");
  EXPECT_EQ(Text(offer, "country"), "DE");
  EXPECT_EQ(Text(offer, "currency"), "EUR");
  EXPECT_TRUE(Text(offer, "token").starts_with("agt_"));
  const std::string connection_id = Text(offer, "connection_id");
  EXPECT_EQ(Text(ShowConnection(supplier_.api_key, connection_id), "cluster_name"), "prod-a");
  json::object shown = Body(Send("GET", "/api/v1/offers/" + Text(offer, "id"), supplier_.api_key));
  EXPECT_FALSE(shown.contains("token"));
  EXPECT_EQ(LastAudit("offer.create").target_id, Text(offer, "id"));
  EXPECT_EQ(LastAudit("connection.create").target_id, connection_id);
  // The first inventory report connects it.
  ASSERT_EQ(ReportFrom(Text(offer, "token"), kClusterUid, 2).status, 200);
  shown = Body(Send("GET", "/api/v1/offers/" + Text(offer, "id"), supplier_.api_key));
  EXPECT_EQ(Text(shown, "state"), "connected");
  EXPECT_EQ(shown.at("nodes").as_array().size(), 2u);
  // Someone else's offer does not exist for them.
  EXPECT_EQ(Send("GET", "/api/v1/offers/" + Text(offer, "id"), user_.api_key).status, 404);
}

TEST_F(WorkspaceApiTest, HostileOfferBodiesAreRefusedNamingTheField) {
  struct Case {
    std::string body;
    std::string names;
  };
  const std::string ok = R"("cluster_name":"c","country":"DE","currency":"EUR",)";
  for (const Case& c : std::vector<Case>{
           {R"({"cluster_name":"c","country":"DE","currency":"EUR","price_per_gpu_hour":"1"})",
            "gpus"},
           {"{" + ok + R"("gpus":0,"price_per_gpu_hour":"1"})", "gpus"},
           {"{" + ok + R"("gpus":"8","price_per_gpu_hour":"1"})", "gpus"},
           {"{" + ok + R"("gpus":1,"price_per_gpu_hour":"-1"})", "price_per_gpu_hour"},
           {"{" + ok + R"("gpus":1,"price_per_gpu_hour":"1e9"})", "price_per_gpu_hour"},
           {"{" + ok + R"("gpus":1,"price_per_gpu_hour":[1]})", "price_per_gpu_hour"},
           {R"({"cluster_name":"c","country":"Germany","currency":"EUR","gpus":1,"price_per_gpu_hour":"1"})",
            "country"},
           {R"({"cluster_name":"c","country":"DE","currency":"E1R","gpus":1,"price_per_gpu_hour":"1"})",
            "currency"},
           {"{" + ok + R"("gpus":1,"price_per_gpu_hour":"1","availability":"sometimes"})",
            "availability"},
           {"{" + ok +
                R"("gpus":1,"price_per_gpu_hour":"1","availability":{"from":"2030-01-02T00:00:00Z","until":"2030-01-01T00:00:00Z"}})",
            "availability.until"},
           {"{" + ok + R"("gpus":1,"price_per_gpu_hour":"1","max_lifetime_seconds":10})",
            "max_lifetime_seconds"},
           {"{" + ok + R"("gpus":1,"price_per_gpu_hour":"1","node_name":"x"})", "node_name"},
       }) {
    net::Response response = Send("POST", "/api/v1/offers", supplier_.api_key, c.body);
    EXPECT_EQ(response.status, 400) << c.body;
    EXPECT_NE(ErrorMessage(response).find(c.names), std::string::npos)
        << ErrorMessage(response) << " should name " << c.names;
  }
  EXPECT_EQ(Body(Send("GET", "/api/v1/offers", supplier_.api_key)).at("offers").as_array().size(),
            0u);
}

TEST_F(WorkspaceApiTest, QualificationNeedsEveryCheckAndAReportedNode) {
  json::object offer = CreateOffer();
  const std::string id = Text(offer, "id");
  const std::string review = "/api/v1/offers/" + id + "/review";
  EXPECT_EQ(Send("POST", review, supplier_.api_key, ReviewBody(true, {"gpu-node-0"})).status, 403)
      << "only an admin reviews";
  net::Response draft = AsAdmin("POST", review, ReviewBody(true, {"gpu-node-0"}));
  EXPECT_EQ(draft.status, 409);
  EXPECT_NE(ErrorMessage(draft).find("not reported its inventory"), std::string::npos);
  ASSERT_EQ(ReportFrom(Text(offer, "token"), kClusterUid, 2).status, 200);

  net::Response unreported = AsAdmin("POST", review, ReviewBody(true, {"gpu-node-9"}));
  EXPECT_EQ(unreported.status, 400);
  EXPECT_NE(ErrorMessage(unreported).find("gpu-node-9"), std::string::npos);
  EXPECT_NE(ErrorMessage(unreported).find("gpu-node-0, gpu-node-1"), std::string::npos);
  net::Response no_node = AsAdmin("POST", review, ReviewBody(true, {}));
  EXPECT_EQ(Text(Body(no_node), "state"), "in_review") << "detection alone never qualifies";
  net::Response unchecked = AsAdmin("POST", review, ReviewBody(false, {"gpu-node-0"}));
  EXPECT_EQ(Text(Body(unchecked), "state"), "in_review");
  for (const std::string& bad :
       {std::string(R"({"authority_confirmed":true})"),
        ReviewWith("\"7500m\"", "\"lots\""), ReviewWith("\"64Gi\"", "-1"),
        ReviewWith("true,\"hardware", "\"yes\",\"hardware"),
        ReviewWith("[\"gpu-node-0\"]", "\"gpu-node-0\""),
        ReviewWith("[\"gpu-node-0\"]", "[7]")}) {
    EXPECT_EQ(AsAdmin("POST", review, bad).status, 400) << bad;
  }
  net::Response qualified = AsAdmin("POST", review, ReviewBody(true, {"gpu-node-0"}));
  json::object body = Body(qualified);
  EXPECT_EQ(Text(body, "state"), "qualified");
  json::object stored = Object(body, "review");
  EXPECT_EQ(Int(stored, "cpu_millis_per_gpu"), 7500);
  EXPECT_EQ(Int(stored, "memory_bytes_per_gpu"), 64LL << 30);
  EXPECT_EQ(Int(stored, "transfer_budget_bytes"), 1LL << 40);
  EXPECT_EQ(LastAudit("offer.review").detail.find("\"to\":\"qualified\"") != std::string::npos,
            true);

  // Suspended: not bookable; only an admin resumes.
  EXPECT_EQ(Text(Body(Send("POST", "/api/v1/offers/" + id + "/suspend", supplier_.api_key)),
                 "state"),
            "suspended");
  EXPECT_EQ(Send("POST", "/api/v1/offers/" + id + "/resume", supplier_.api_key).status, 403);
  EXPECT_EQ(Text(Body(AsAdmin("POST", "/api/v1/offers/" + id + "/resume")), "state"),
            "qualified");
}

TEST_F(WorkspaceApiTest, ExecutionValuesAndTheCredentialAreGivenOnceForAQualifiedOffer) {
  json::object offer = CreateOffer();
  offer_id_ = Text(offer, "id");
  const std::string execution = "/api/v1/offers/" + offer_id_ + "/execution";
  net::Response early = Send("POST", execution, supplier_.api_key);
  EXPECT_EQ(early.status, 409);
  EXPECT_NE(ErrorMessage(early).find("qualified"), std::string::npos);
  ASSERT_EQ(ReportFrom(Text(offer, "token"), kClusterUid, 2).status, 200);
  ASSERT_EQ(AsAdmin("POST", "/api/v1/offers/" + offer_id_ + "/review",
                    ReviewBody(true, {"gpu-node-0", "gpu-node-1"}))
                .status,
            200);
  EXPECT_EQ(Send("POST", execution, supplier_.api_key, R"({"kubernetes_api_cidrs":["10.0.0.0/33"]})")
                .status,
            400);
  EXPECT_EQ(Send("POST", execution, user_.api_key).status, 404);
  net::Response made = Send("POST", execution, supplier_.api_key,
                            R"({"kubernetes_api_cidrs":["10.96.0.1/32"],"kubernetes_api_port":6443})");
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.headers.Get("Cache-Control").value_or(""), "no-store");
  json::object body = Body(made);
  EXPECT_TRUE(Text(body, "credential").starts_with("exe_"));
  auto values = protocol::DecodeExecutionValues(body.at("values"));
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  EXPECT_EQ(values->workspace_image, kImage);
  EXPECT_EQ(values->nodes, (std::vector<std::string>{"gpu-node-0", "gpu-node-1"}));
  EXPECT_EQ(values->capacity_gpus, 4);
  EXPECT_EQ(values->namespace_name, "uplink-workspaces");
  EXPECT_EQ(values->kubernetes_api_port, 6443);
  EXPECT_EQ(values->console_cidrs, std::vector<std::string>{"192.0.2.0/24"});
  EXPECT_EQ(values->cpu_millis_per_gpu, 7500);
  EXPECT_EQ(values->cluster_uid, "") << "the reference names the offer and connection";
  EXPECT_EQ(values->connection_id, Text(offer, "connection_id"));
  EXPECT_NE(Text(body, "helm_upgrade_command").find("--reset-then-reuse-values -f execution.json"),
            std::string::npos);
  // Once: a second one is a rotation.
  net::Response again = Send("POST", execution, supplier_.api_key);
  EXPECT_EQ(again.status, 409);
  EXPECT_NE(ErrorMessage(again).find("rotate"), std::string::npos);
  json::object shown = Body(Send("GET", execution, supplier_.api_key));
  EXPECT_FALSE(shown.contains("credential"));
  EXPECT_TRUE(shown.at("credential_live").as_bool());
  // Nowhere in the audit log.
  for (const AuditEvent& event : AllAudit()) {
    EXPECT_EQ(event.detail.find(Text(body, "credential")), std::string::npos) << event.action;
  }
}

TEST_F(WorkspaceApiTest, TheControllerIsRefusedWithoutItsCredentialAndClusterAndBindsOnFirstUse) {
  const std::string credential = QualifiedOffer();
  EXPECT_EQ(PostSync("", Sync()).status, 401);
  EXPECT_EQ(ErrorCode(PostSync("exe_" + std::string(43, 'A'), Sync())), "invalid_token");
  json::object offer = Body(Send("GET", "/api/v1/offers/" + offer_id_, supplier_.api_key));
  // An agent token is not an execution credential.
  net::Response missing_uid = PostSync(credential, Sync(), "");
  EXPECT_EQ(missing_uid.status, 400);
  EXPECT_NE(ErrorMessage(missing_uid).find("Uplink-Cluster-UID"), std::string::npos);
  net::Response other = PostSync(credential, Sync(), "another-cluster");
  EXPECT_EQ(other.status, 409);
  EXPECT_EQ(ErrorCode(other), "cluster_mismatch");
  protocol::WorkspaceSyncReply reply = SyncReply(PostSync(credential, Sync()));
  EXPECT_TRUE(reply.accepting);
  EXPECT_TRUE(reply.reservations.empty());
  // Hostile bodies: 400 naming the field, nothing stored.
  for (const std::string& bad :
       {std::string(R"({"namespace":"ws","events":[{"key":"k","reservation_id":"res_1"}]})"),
        std::string(R"({"namespace":"ws","wait_seconds":600})"), std::string(R"([1,2])"),
        std::string(R"({"namespace":"ws","uid":0})")}) {
    net::Request request = AgentRequest(std::string(protocol::kWorkspaceSyncPath), credential, {});
    request.body = bad;
    net::Response refused = testing::Call(api_->router(), std::move(request));
    EXPECT_EQ(refused.status, 400) << bad << " " << refused.body;
  }
  // Counted for liveness as the workspace role; the release shown with the helm command.
  ASSERT_TRUE(api_->presence().Flush(*store_).ok());
  json::object connection = ShowConnection(supplier_.api_key, Text(offer, "connection_id"));
  EXPECT_NE(ToJson(connection).find("\"workspace\""), std::string::npos) << ToJson(connection);
  json::object execution = Object(Body(Send("GET", "/api/v1/offers/" + offer_id_,
                                            supplier_.api_key)),
                                  "execution");
  EXPECT_EQ(Text(execution, "helm_release"), "gpu-supply");
  EXPECT_TRUE(Text(execution, "helm_upgrade_command").starts_with("helm upgrade gpu-supply "));

  // Revoking the inventory connection does not stop execution.
  ASSERT_EQ(Send("POST", "/api/v1/connections/" + Text(offer, "connection_id") + "/revoke",
                 supplier_.api_key)
                .status,
            200);
  EXPECT_EQ(PostSync(credential, Sync()).status, 200);
  // A rotation does: the old credential is refused.
  net::Response rotated =
      Send("POST", "/api/v1/offers/" + offer_id_ + "/execution/rotate", supplier_.api_key);
  ASSERT_EQ(rotated.status, 200) << rotated.body;
  EXPECT_EQ(ErrorCode(PostSync(credential, Sync())), "revoked");
  EXPECT_EQ(PostSync(Text(Body(rotated), "credential"), Sync()).status, 200);
}

TEST_F(WorkspaceApiTest, ReservationsArePlacedWithinCapacityAndRefusedClearly) {
  const std::string credential = QualifiedOffer(4);
  EXPECT_EQ(Reserve(user_.api_key, 5, 3600, 400).size(), 1u);  // over the offer's GPUs
  json::object over_lifetime = Reserve(user_.api_key, 1, 90000, 400);
  EXPECT_NE(ToJson(over_lifetime).find("duration_seconds"), std::string::npos);
  json::object first = Reserve(user_.api_key, 3);
  EXPECT_EQ(Text(first, "state"), "reserved");
  EXPECT_EQ(Text(first, "node"), "gpu-node-0");
  ASSERT_EQ(first.at("transitions").as_array().size(), 1u);
  json::object full = Reserve(user_.api_key, 2, 3600, 409);
  EXPECT_NE(ToJson(full).find("at most 1 GPU"), std::string::npos) << ToJson(full);
  EXPECT_EQ(LastAudit("reservation.create").outcome, "refused");

  // Only the owner and admins see it; the supplier sees its usage.
  const std::string id = Text(first, "id");
  EXPECT_EQ(Send("GET", "/api/v1/reservations/" + id, user_.api_key).status, 200);
  EXPECT_EQ(AsAdmin("GET", "/api/v1/reservations/" + id).status, 200);
  json::object usage = Body(Send("GET", "/api/v1/reservations/" + id, supplier_.api_key));
  EXPECT_TRUE(usage.at("usage_only").as_bool());
  EXPECT_FALSE(usage.contains("transitions"));
  EXPECT_EQ(Int(usage, "gpus"), 3);
  TestUser stranger = AddUser("stranger@example.com");
  EXPECT_EQ(Send("GET", "/api/v1/reservations/" + id, stranger.api_key).status, 404);
  EXPECT_EQ(Send("POST", "/api/v1/reservations/" + id + "/stop", stranger.api_key).status, 404);
  EXPECT_EQ(Send("POST", "/api/v1/reservations/" + id + "/stop", supplier_.api_key).status, 404);
  EXPECT_EQ(Send("POST", "/api/v1/reservations/" + id + "/commands", supplier_.api_key,
                 R"({"kind":"shell","code":"id"})")
                .status,
            404)
      << "the supplier never runs commands in it";

  // Disabling execution is refused while it is active.
  net::Response disable =
      Send("POST", "/api/v1/offers/" + offer_id_ + "/execution/disable", supplier_.api_key);
  EXPECT_EQ(disable.status, 409);
  EXPECT_NE(ErrorMessage(disable).find("stop them first"), std::string::npos);

  // Extend within the maximum lifetime only.
  EXPECT_EQ(Send("POST", "/api/v1/reservations/" + id + "/extend", user_.api_key,
                 R"({"duration_seconds":86400})")
                .status,
            409);
  json::object extended = Body(Send("POST", "/api/v1/reservations/" + id + "/extend",
                                    user_.api_key, R"({"duration_seconds":600})"));
  EXPECT_EQ(Text(extended, "expires_at"), FormatRfc3339(clock_.Now() + std::chrono::seconds(4200)));
  // A reserved one stopped is cancelled, and its GPUs are free again.
  EXPECT_EQ(Text(Body(Send("POST", "/api/v1/reservations/" + id + "/stop", user_.api_key)),
                 "state"),
            "cancelled");
  Reserve(user_.api_key, 4);
  EXPECT_EQ(Send("POST", "/api/v1/reservations/" + id + "/stop", user_.api_key).status, 409);
  (void)credential;
}

TEST_F(WorkspaceApiTest, TheControllerRunsAReservationAndItsCommandsStreamOutput) {
  const std::string credential = QualifiedOffer();
  // A held sync is answered when a reservation is made.
  PendingReply held;
  api_->router().Dispatch(AgentRequest(std::string(protocol::kWorkspaceSyncPath), credential,
                                       protocol::EncodeWorkspaceSync(Sync({}, 30))),
                          held.Callback());
  EXPECT_FALSE(held.ready());
  const std::string id = Text(Reserve(user_.api_key, 2), "id");
  protocol::WorkspaceSyncReply woken = SyncReply(held.Wait());
  ASSERT_EQ(woken.reservations.size(), 1u);
  EXPECT_EQ(woken.reservations[0].id, id);
  EXPECT_EQ(woken.reservations[0].gpus, 2);
  EXPECT_EQ(woken.reservations[0].cpu_millis, 15000);
  EXPECT_EQ(woken.reservations[0].memory_bytes, 128LL << 30);
  EXPECT_EQ(woken.reservations[0].desired, "running");

  protocol::WorkspaceSyncReply acked =
      SyncReply(PostSync(credential, Sync({Event(id, "provisioning"), Event(id, "running")})));
  EXPECT_EQ(acked.acknowledged.size(), 2u);
  json::object running = Body(Send("GET", "/api/v1/reservations/" + id, user_.api_key));
  EXPECT_EQ(Text(running, "state"), "running");
  EXPECT_EQ(Text(running, "pod"), "ws-" + id.substr(4));
  EXPECT_EQ(running.at("transitions").as_array().size(), 3u);

  // A command, its timeout bounded by the time left.
  net::Response created = Send("POST", "/api/v1/reservations/" + id + "/commands", user_.api_key,
                               R"({"kind":"shell","code":"id -u","timeout_s":86400})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string command = Text(Body(created), "id");
  EXPECT_TRUE(protocol::IsWorkspaceCommandId(command));
  EXPECT_EQ(Int(Body(created), "timeout_s"), 3600);
  EXPECT_TRUE(Body(created).at("timeout_bounded").as_bool());
  for (const std::string& bad : {std::string(R"({"kind":"perl","code":"1"})"),
                                 std::string(R"({"kind":"shell","code":""})"),
                                 std::string(R"({"kind":"shell"})"),
                                 std::string(R"({"kind":"shell","code":"x","timeout_s":0})"),
                                 std::string(R"({"kind":"shell","code":"x","user":"root"})")}) {
    EXPECT_EQ(Send("POST", "/api/v1/reservations/" + id + "/commands", user_.api_key, bad).status,
              400)
        << bad;
  }
  protocol::WorkspaceSyncReply work = SyncReply(PostSync(credential, Sync()));
  ASSERT_EQ(work.commands.size(), 1u);
  EXPECT_EQ(work.commands[0].code, "id -u");
  EXPECT_EQ(work.commands[0].output_cap_bytes, 64);

  // A reader waiting for output is answered when it comes.
  PendingReply reader;
  net::Request get;
  get.method = "GET";
  get.target = "/api/v1/reservations/" + id + "/commands/" + command + "?offset=0&wait=30";
  get.headers.Set("Authorization", "Bearer " + user_.api_key);
  get.remote_address = testing::kClientAddress;
  api_->router().Dispatch(std::move(get), reader.Callback());
  EXPECT_FALSE(reader.ready());
  net::Response first =
      PostOutput(credential, command, {0, "1000\n", "running", std::nullopt, false, ""});
  ASSERT_EQ(first.status, 200) << first.body;
  json::object streamed = Body(reader.Wait());
  EXPECT_EQ(Text(streamed, "output"), "1000\n");
  EXPECT_EQ(Int(streamed, "next_offset"), 5);
  EXPECT_EQ(Text(streamed, "state"), "running");

  // A gap is refused with what the console has; past the cap the output is cut.
  net::Response gap = PostOutput(credential, command, {9, "x", "running", std::nullopt, false, ""});
  EXPECT_EQ(gap.status, 409);
  EXPECT_EQ(protocol::DecodeOutputGap(ParseJson(gap.body).value()), 5);
  net::Response last = PostOutput(credential, command,
                                  {5, std::string(100, 'y'), "exited", 3, false, ""});
  ASSERT_EQ(last.status, 200);
  auto ack = protocol::DecodeWorkspaceOutputReply(ParseJson(last.body).value());
  EXPECT_EQ(ack->have, 64);
  EXPECT_TRUE(ack->final);
  json::object done = Body(Send("GET", "/api/v1/reservations/" + id + "/commands/" + command +
                                           "?offset=5",
                                user_.api_key));
  EXPECT_EQ(Text(done, "state"), "exited");
  EXPECT_EQ(Int(done, "exit_code"), 3);
  EXPECT_TRUE(done.at("truncated").as_bool());
  EXPECT_EQ(Text(done, "output"), std::string(59, 'y'));
  EXPECT_TRUE(SyncReply(PostSync(credential, Sync())).commands.empty());

  // Another offer's controller cannot touch it; an unknown command is 404.
  EXPECT_EQ(PostOutput(credential, protocol::NewWorkspaceCommandId(),
                       {0, "", "running", std::nullopt, false, ""})
                .status,
            404);
  EXPECT_EQ(PostOutput(credential, "wsc_../../x", {0, "", "running", std::nullopt, false, ""})
                .status,
            404);

  // Stop: the controller is told, reports completed, and the reservation ends.
  ASSERT_EQ(Send("POST", "/api/v1/reservations/" + id + "/stop", user_.api_key).status, 200);
  protocol::WorkspaceSyncReply stopping = SyncReply(PostSync(credential, Sync()));
  ASSERT_EQ(stopping.reservations.size(), 1u);
  EXPECT_EQ(stopping.reservations[0].desired, "stopped");
  SyncReply(PostSync(credential, Sync({Event(id, "completed")})));
  EXPECT_EQ(Text(Body(Send("GET", "/api/v1/reservations/" + id, user_.api_key)), "state"),
            "completed");
  EXPECT_TRUE(SyncReply(PostSync(credential, Sync())).reservations.empty());
  // Now execution may be disabled; the controller is told it is not accepting.
  ASSERT_EQ(Send("POST", "/api/v1/offers/" + offer_id_ + "/execution/disable", supplier_.api_key)
                .status,
            200);
  EXPECT_FALSE(SyncReply(PostSync(credential, Sync())).accepting);
}

TEST_F(WorkspaceApiTest, AReservationPastItsExpiryThatTheControllerNeverEndedIsExpired) {
  QualifiedOffer();
  const std::string id = Text(Reserve(user_.api_key, 1, 60), "id");
  clock_.Advance(std::chrono::seconds(60 + 121));
  json::object expired = Body(Send("GET", "/api/v1/reservations/" + id, user_.api_key));
  EXPECT_EQ(Text(expired, "state"), "expired");
  EXPECT_EQ(Text(expired.at("transitions").as_array().back().as_object(), "source"), "console");
}

// An Ed25519 key's .pub line, made by ssh-keygen.
std::string NewPublicKey(const std::string& comment) {
  const std::string path = std::filesystem::temp_directory_path() /
                           ("grant-" + HexEncode(RandomBytes(8)));
  auto made = uplink::testing::RunCommand(
      {"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path},
      std::chrono::seconds(60));
  EXPECT_EQ(made.exit_code, 0) << made.err;
  std::string line = ReadFileBounded(path + ".pub", 4096).value_or("");
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".pub");
  return line;
}

TEST_F(WorkspaceApiTest, SshGrantsAreAddedListedAndRevokedByTheOwnerWithTheirAudit) {
  QualifiedOffer();
  json::object reservation = Reserve(user_.api_key, 1, 3600);
  const std::string id = Text(reservation, "id");
  // The reservation carries the review's transfer budget, nothing used yet.
  EXPECT_EQ(Int(Object(reservation, "transfer"), "budget_bytes"), std::int64_t{1} << 40);
  EXPECT_EQ(Int(Object(reservation, "transfer"), "used_bytes"), 0);
  const std::string grants = "/api/v1/reservations/" + id + "/ssh-grants";

  const std::string key = NewPublicKey("ana@laptop");
  net::Response created =
      Send("POST", grants, user_.api_key, ToJson(json::object{{"public_key", key}}));
  ASSERT_EQ(created.status, 201) << created.body;
  json::object grant = Body(created);
  const std::string grant_id = Text(grant, "id");
  EXPECT_EQ(Text(grant, "key_type"), "ssh-ed25519");
  EXPECT_EQ(Text(grant, "comment"), "ana@laptop");
  EXPECT_EQ(Text(grant, "state"), "active");
  EXPECT_EQ(Text(grant, "public_key") + " ana@laptop\n", key);
  // Without expires_at it lasts as long as the reservation; a later one is cut to its end.
  EXPECT_EQ(Text(grant, "expires_at"), Text(reservation, "expires_at"));
  net::Response later = Send(
      "POST", grants, user_.api_key,
      ToJson(json::object{{"public_key", NewPublicKey("b")},
                          {"expires_at", FormatRfc3339(clock_.Now() + std::chrono::hours(48))}}));
  ASSERT_EQ(later.status, 201) << later.body;
  EXPECT_EQ(Text(Body(later), "expires_at"), Text(reservation, "expires_at"));
  net::Response shorter = Send(
      "POST", grants, user_.api_key,
      ToJson(json::object{{"public_key", NewPublicKey("c")},
                          {"expires_at", FormatRfc3339(clock_.Now() + std::chrono::minutes(10))}}));
  ASSERT_EQ(shorter.status, 201) << shorter.body;
  // The same key twice is refused; adding one grant keeps the others.
  EXPECT_EQ(Send("POST", grants, user_.api_key, ToJson(json::object{{"public_key", key}})).status,
            409);
  json::array listed = Body(Send("GET", grants, user_.api_key)).at("ssh_grants").as_array();
  EXPECT_EQ(listed.size(), 3u);
  clock_.Advance(std::chrono::minutes(11));
  listed = Body(Send("GET", grants, user_.api_key)).at("ssh_grants").as_array();
  std::vector<std::string> states;
  for (const json::value& each : listed) states.push_back(Text(each.as_object(), "state"));
  std::sort(states.begin(), states.end());
  EXPECT_EQ(states, (std::vector<std::string>{"active", "active", "expired"}));

  AuditEvent audited = LastAudit("ssh_grant.create");
  EXPECT_EQ(audited.target_id, id);
  EXPECT_NE(audited.detail.find("SHA256:"), std::string::npos);

  // Others see nothing of it: not the supplier, not another user.
  TestUser other = AddUser("other@example.com");
  EXPECT_EQ(Send("GET", grants, other.api_key).status, 404);
  EXPECT_EQ(Send("GET", grants, supplier_.api_key).status, 404);
  EXPECT_EQ(Send("POST", grants, other.api_key,
                 ToJson(json::object{{"public_key", NewPublicKey("x")}})).status,
            404);
  EXPECT_EQ(Send("DELETE", grants + "/" + grant_id, other.api_key).status, 404);

  net::Response revoked = Send("DELETE", grants + "/" + grant_id, user_.api_key);
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_EQ(Text(Body(revoked), "state"), "revoked");
  EXPECT_EQ(LastAudit("ssh_grant.revoke").target_id, id);
  const size_t events = AllAudit().size();
  EXPECT_EQ(Send("DELETE", grants + "/" + grant_id, user_.api_key).status, 200);
  EXPECT_EQ(AllAudit().size(), events);  // revoking twice changes nothing
  EXPECT_EQ(Send("DELETE", grants + "/ssg_0000", user_.api_key).status, 404);
  // Once revoked, the key may be granted again; an admin may act too.
  EXPECT_EQ(AsAdmin("POST", grants, ToJson(json::object{{"public_key", key}})).status, 201);

  // A stopped reservation takes no new grants.
  ASSERT_EQ(Send("POST", "/api/v1/reservations/" + id + "/stop", user_.api_key, "{}").status, 200);
  net::Response stopped = Send("POST", grants, user_.api_key,
                               ToJson(json::object{{"public_key", NewPublicKey("d")}}));
  EXPECT_EQ(stopped.status, 409) << stopped.body;
}

TEST_F(WorkspaceApiTest, AReservationHoldsAtMostSixteenValidSshGrants) {
  QualifiedOffer();
  const std::string id = Text(Reserve(user_.api_key, 1, 3600), "id");
  const std::string grants = "/api/v1/reservations/" + id + "/ssh-grants";
  std::string first;
  for (int k = 0; k < kMaxLiveSshGrantsPerReservation; ++k) {
    net::Response created = Send("POST", grants, user_.api_key,
                                 ToJson(json::object{{"public_key", NewPublicKey("k")}}));
    ASSERT_EQ(created.status, 201) << created.body;
    if (first.empty()) first = Text(Body(created), "id");
  }
  const std::string one_more = ToJson(json::object{{"public_key", NewPublicKey("more")}});
  net::Response refused = Send("POST", grants, user_.api_key, one_more);
  EXPECT_EQ(refused.status, 409);
  EXPECT_NE(ErrorMessage(refused).find("revoke one first"), std::string::npos) << refused.body;
  ASSERT_EQ(Send("DELETE", grants + "/" + first, user_.api_key).status, 200);
  EXPECT_EQ(Send("POST", grants, user_.api_key, one_more).status, 201);
}

TEST_F(WorkspaceApiTest, SshGrantBodiesThatAreNotAnAllowedKeyAreRefusedSayingWhy) {
  QualifiedOffer();
  const std::string id = Text(Reserve(user_.api_key, 1, 3600), "id");
  const std::string grants = "/api/v1/reservations/" + id + "/ssh-grants";
  const std::string key = NewPublicKey("k");
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"{}", "public_key"},
      {R"({"public_key":7})", "public_key"},
      {ToJson(json::object{{"public_key", "ssh-rsa AAAAB3NzaC1yc2E= old"}}), "ssh-keygen -t ed25519"},
      {ToJson(json::object{{"public_key", "ssh-ed25519 AAAA"}}), "public_key"},
      {ToJson(json::object{{"public_key", key}, {"expires_at", "tomorrow"}}), "expires_at"},
      {ToJson(json::object{{"public_key", key}, {"expires_at", "2001-01-01T00:00:00Z"}}),
       "expires_at"},
      {ToJson(json::object{{"public_key", key}, {"options", "command=sh"}}), "options"}};
  for (const auto& [body, why] : refused) {
    net::Response response = Send("POST", grants, user_.api_key, body);
    EXPECT_EQ(response.status, 400) << body << ": " << response.body;
    EXPECT_NE(ErrorMessage(response).find(why), std::string::npos) << body << ": " << response.body;
  }
  EXPECT_TRUE(Body(Send("GET", grants, user_.api_key)).at("ssh_grants").as_array().empty());
}

}  // namespace
}  // namespace uplink::console
