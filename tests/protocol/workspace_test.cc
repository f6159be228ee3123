// Contract tests of workspace execution (protocol/workspace.h): the controller's sync and
// output as the console reads them, the console's sync reply and execution.json as the
// controller reads them, and hostile input to each decoder.
#include "protocol/workspace.h"

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "common/json.h"
#include "protocol/agent_api.h"
#include "protocol/credentials.h"

namespace uplink::protocol {
namespace {

json::value Json(std::string_view text) {
  auto parsed = ParseJson(text, JsonLimits{kMaxSyncReplyBytes, kMaxWorkspaceBodyDepth});
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString() << ": " << text.substr(0, 80);
  return parsed.ok() ? *parsed : json::value();
}

json::value OverTheWire(const json::object& sent, size_t max_bytes) {
  auto parsed = ParseJson(json::serialize(sent), JsonLimits{max_bytes, kMaxWorkspaceBodyDepth});
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : json::value();
}

// `text` with `field` replaced by `value` (JSON text), for one hostile variant at a time.
json::value With(const json::value& base, std::string_view field, std::string_view value) {
  json::object object = base.get_object();
  if (value.empty()) {
    object.erase(field);
  } else {
    object[field] = Json(value);
  }
  return object;
}

// A hostile body and the field its refusal must name.
struct Refusal {
  json::value body;
  std::string_view names;
};

template <typename Decode>
void ExpectRefusals(Decode decode, const std::vector<Refusal>& cases) {
  for (const Refusal& c : cases) {
    auto read = decode(c.body);
    ASSERT_FALSE(read.ok()) << json::serialize(c.body).substr(0, 300);
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(read.status().message().find(c.names), std::string::npos)
        << read.status().message() << " should name " << c.names;
  }
}

constexpr std::string_view kReservation = "res_0123456789abcdef";
constexpr std::string_view kCommand = "wsc_0123456789abcdef";

TEST(WorkspaceIds, AreThePrefixAndSixteenLowerCaseHexDigits) {
  EXPECT_TRUE(IsReservationId(kReservation));
  EXPECT_TRUE(IsWorkspaceCommandId(kCommand));
  for (std::string_view bad :
       {"", "res_", "res_0123456789abcde", "res_0123456789abcdef0", "res_0123456789ABCDEF",
        "res_0123456789abcdeg", "RES_0123456789abcdef", "wsc_0123456789abcdef",
        "res_0123456789abcd/f", "res_../../../etc/pa"}) {
    EXPECT_FALSE(IsReservationId(bad)) << bad;
  }
  EXPECT_FALSE(IsWorkspaceCommandId(kReservation));
  EXPECT_FALSE(IsWorkspaceCommandId("cmd_0123456789abcdef"));
  const std::string a = NewReservationId(), b = NewReservationId();
  EXPECT_TRUE(IsReservationId(a));
  EXPECT_NE(a, b);
  EXPECT_TRUE(IsWorkspaceCommandId(NewWorkspaceCommandId()));
  EXPECT_EQ(kExecutionCredentialPrefix, "exe_");
  EXPECT_EQ(WorkspaceOutputPath(kCommand),
            "/api/v1/agent/workspace/commands/wsc_0123456789abcdef/output");
}

WorkspaceSync FullSync() {
  WorkspaceSync sync;
  sync.instance = "uplink-workspace-7d9f-abcde";
  sync.version = "0.1.0";
  sync.release = "uplink-agent";
  sync.namespace_name = "uplink-workspaces";
  sync.draining = true;
  sync.wait_seconds = kMaxSyncWaitSeconds;
  for (std::string_view state : {"provisioning", "running", "completed", "failed", "expired"}) {
    sync.events.push_back({std::string(kReservation) + "/" + std::string(state) + "/1",
                           std::string(kReservation), std::string(state),
                           std::string(kMaxEventReasonBytes, 'r'), FromUnixSeconds(1'900'000'000),
                           "ws-res-0123456789abcdef", "gpu-node-0001"});
  }
  sync.workspaces.push_back(
      {std::string(kReservation), "ws-res-0123456789abcdef", "Running", "gpu-node-0001"});
  sync.workspaces.push_back({NewReservationId(), "ws-x", "Pending", ""});
  return sync;
}

TEST(WorkspaceSyncContract, WhatTheControllerReportsTheConsoleReads) {
  const WorkspaceSync sent = FullSync();
  auto read = DecodeWorkspaceSync(OverTheWire(EncodeWorkspaceSync(sent), kMaxSyncRequestBytes));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->instance, sent.instance);
  EXPECT_EQ(read->version, sent.version);
  EXPECT_EQ(read->release, sent.release);
  EXPECT_EQ(read->namespace_name, sent.namespace_name);
  EXPECT_EQ(read->draining, sent.draining);
  EXPECT_EQ(read->wait_seconds, sent.wait_seconds);
  ASSERT_EQ(read->events.size(), sent.events.size());
  for (size_t i = 0; i < sent.events.size(); ++i) {
    EXPECT_EQ(read->events[i].key, sent.events[i].key);
    EXPECT_EQ(read->events[i].reservation_id, sent.events[i].reservation_id);
    EXPECT_EQ(read->events[i].state, sent.events[i].state);
    EXPECT_EQ(read->events[i].reason, sent.events[i].reason);
    EXPECT_EQ(read->events[i].at, sent.events[i].at);
    EXPECT_EQ(read->events[i].pod, sent.events[i].pod);
    EXPECT_EQ(read->events[i].node, sent.events[i].node);
  }
  ASSERT_EQ(read->workspaces.size(), 2u);
  EXPECT_EQ(read->workspaces[1].reservation_id, sent.workspaces[1].reservation_id);
  EXPECT_EQ(read->workspaces[0].phase, "Running");
  EXPECT_EQ(read->workspaces[1].node, "");

  // The contract's own example, and the smallest sync.
  auto example = DecodeWorkspaceSync(Json(R"({"instance": "uplink-workspace-7d9f-abcde",
    "version": "0.1.0", "release": "uplink-agent", "namespace": "uplink-workspaces",
    "draining": false, "wait_seconds": 0,
    "events": [{"key": "res_0123456789abcdef/running/1", "reservation_id": "res_0123456789abcdef",
                "state": "running", "reason": "pod Running on gpu-node-0001",
                "at": "2026-12-01T10:00:00Z", "pod": "ws-res-0123456789abcdef",
                "node": "gpu-node-0001"}],
    "workspaces": [{"reservation_id": "res_0123456789abcdef", "pod": "ws-res-0123456789abcdef",
                    "phase": "Running", "node": "gpu-node-0001"}]})"));
  ASSERT_TRUE(example.ok()) << example.status().ToString();
  EXPECT_EQ(example->events.at(0).at, *ParseRfc3339("2026-12-01T10:00:00Z"));
  auto smallest = DecodeWorkspaceSync(Json(R"({"namespace":"ws"})"));
  ASSERT_TRUE(smallest.ok()) << smallest.status().ToString();
  EXPECT_EQ(smallest->wait_seconds, 0);
  EXPECT_TRUE(smallest->events.empty());
}

TEST(WorkspaceSyncDecode, RefusesHostileInputNamingTheField) {
  const json::value good = OverTheWire(EncodeWorkspaceSync(FullSync()), kMaxSyncRequestBytes);
  const json::value event = good.at("events").at(0);
  auto with_event = [&](std::string_view field, std::string_view value) {
    json::object body = good.get_object();
    body["events"] = json::array{With(event, field, value)};
    return json::value(body);
  };
  std::vector<Refusal> cases = {
      {Json("[]"), "JSON object"},
      {Json(R"("sync")"), "JSON object"},
      {With(good, "uid", "0"), "uid"},
      {With(good, "namespace", ""), "namespace"},
      {With(good, "namespace", R"("Uplink_Workspaces")"), "namespace"},
      {With(good, "namespace", "7"), "namespace"},
      {With(good, "wait_seconds", "56"), "wait_seconds"},
      {With(good, "wait_seconds", "-1"), "wait_seconds"},
      {With(good, "wait_seconds", R"("5")"), "wait_seconds"},
      {With(good, "wait_seconds", "18446744073709551616"), "wait_seconds"},
      {With(good, "draining", R"("no")"), "draining"},
      {With(good, "release", R"("x; rm -rf /")"), "release"},
      {With(good, "release", "\"" + std::string(kMaxHelmReleaseBytes + 1, 'r') + "\""),
       "release"},
      {With(good, "instance", "\"" + std::string(kMaxInstanceBytes + 1, 'i') + "\""),
       "instance"},
      {With(good, "events", "{}"), "events"},
      {With(good, "events", "[7]"), "events[0]"},
      {with_event("key", ""), "events[0].key"},
      {with_event("key", R"("has space")"), "events[0].key"},
      {with_event("key", "\"" + std::string(kMaxEventKeyBytes + 1, 'k') + "\""), "events[0].key"},
      {with_event("reservation_id", R"("res_0123")"), "events[0].reservation_id"},
      {with_event("reservation_id", R"("wsc_0123456789abcdef")"), "events[0].reservation_id"},
      {with_event("state", R"("stopping")"), "events[0].state"},
      {with_event("state", R"("RUNNING")"), "events[0].state"},
      {with_event("reason", "\"" + std::string(kMaxEventReasonBytes + 1, 'r') + "\""),
       "events[0].reason"},
      {with_event("at", R"("yesterday")"), "events[0].at"},
      {with_event("at", ""), "events[0].at"},
      {with_event("pod", R"("../../etc")"), "events[0].pod"},
      {with_event("node", "1"), "events[0].node"},
      {with_event("exit", "1"), "events[0].exit"},
      {With(good, "workspaces",
            R"([{"reservation_id":"res_0123456789abcdef","pod":"p","phase":"Exploded"}])"),
       "workspaces[0].phase"},
      {With(good, "workspaces", R"([{"reservation_id":"res_0123456789abcdef","phase":"Running"}])"),
       "workspaces[0].pod"},
      {With(good, "workspaces", R"(["res_0123456789abcdef"])"), "workspaces[0]"},
  };
  std::string too_many = "[";
  for (size_t i = 0; i <= kMaxSyncEvents; ++i) too_many += std::string(i ? "," : "") + "{}";
  cases.push_back({With(good, "events", too_many + "]"), "events"});
  ExpectRefusals(DecodeWorkspaceSync, cases);
}

TEST(WorkspaceSyncDecode, SkipsObservedPodsThatAreNoReservationOfTheConsole) {
  auto read = DecodeWorkspaceSync(Json(R"({"namespace":"ws","workspaces":[
      {"reservation_id":"res_NOTHEX0000000000","pod":"a","phase":"Running"},
      {"reservation_id":7,"pod":"b","phase":"Running"},
      {"pod":"c","phase":"Running"},
      {"reservation_id":"res_00000000000000aa","pod":"d","phase":"Pending"}]})"));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->workspaces.size(), 1u);
  EXPECT_EQ(read->workspaces[0].pod, "d");
}

WorkspaceSyncReply FullReply() {
  WorkspaceSyncReply reply;
  reply.acknowledged = {std::string(kReservation) + "/running/1"};
  reply.accepting = false;
  reply.reservations.push_back({std::string(kReservation), 2, "gpu-node-0001", 8000,
                                68'719'476'736, 107'374'182'400, FromUnixSeconds(1'900'007'200),
                                std::string(kDesiredRunning), std::string(kReservationRunning)});
  reply.reservations.push_back({NewReservationId(), 1, "gpu-node-0002", 0, 0, 0,
                                FromUnixSeconds(1'900'000'000), std::string(kDesiredStopped),
                                std::string(kReservationStopping)});
  for (size_t i = 0; i < kMaxSyncCommands; ++i) {
    reply.commands.push_back({NewWorkspaceCommandId(), std::string(kReservation),
                              i % 2 ? "python" : "shell",
                              std::string(kMaxWorkspaceCodeBytes, i % 2 ? '\x01' : 'c'), 60,
                              kDefaultOutputCapBytes, ""});
  }
  return reply;
}

TEST(WorkspaceSyncReplyContract, WhatTheConsoleHandsOutTheControllerActsOn) {
  const WorkspaceSyncReply sent = FullReply();
  const std::string text = json::serialize(EncodeWorkspaceSyncReply(sent));
  EXPECT_LE(text.size(), kMaxSyncReplyBytes)
      << "the fullest reply, with code that escapes to six bytes a byte, fits what the "
         "controller reads";
  auto read = DecodeWorkspaceSyncReply(Json(text));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->acknowledged, sent.acknowledged);
  EXPECT_EQ(read->accepting, false);
  ASSERT_EQ(read->reservations.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const WorkspaceReservation& a = sent.reservations[i];
    const WorkspaceReservation& b = read->reservations[i];
    EXPECT_EQ(b.id, a.id);
    EXPECT_EQ(b.gpus, a.gpus);
    EXPECT_EQ(b.node, a.node);
    EXPECT_EQ(b.cpu_millis, a.cpu_millis);
    EXPECT_EQ(b.memory_bytes, a.memory_bytes);
    EXPECT_EQ(b.ephemeral_storage_bytes, a.ephemeral_storage_bytes);
    EXPECT_EQ(b.expires_at, a.expires_at);
    EXPECT_EQ(b.desired, a.desired);
    EXPECT_EQ(b.state, a.state);
  }
  ASSERT_EQ(read->commands.size(), kMaxSyncCommands);
  for (size_t i = 0; i < kMaxSyncCommands; ++i) {
    EXPECT_EQ(read->commands[i].id, sent.commands[i].id);
    EXPECT_EQ(read->commands[i].reservation_id, sent.commands[i].reservation_id);
    EXPECT_EQ(read->commands[i].kind, sent.commands[i].kind);
    EXPECT_EQ(read->commands[i].code, sent.commands[i].code);
    EXPECT_EQ(read->commands[i].timeout_seconds, 60);
    EXPECT_EQ(read->commands[i].output_cap_bytes, kDefaultOutputCapBytes);
    EXPECT_EQ(read->commands[i].problem, "");
  }
  // A newer console's extra fields are ignored.
  auto newer = DecodeWorkspaceSyncReply(Json(
      R"({"acknowledged":[],"accepting":true,"reservations":[],"commands":[],"ssh":{"port":22}})"));
  ASSERT_TRUE(newer.ok()) << newer.status().ToString();
}

TEST(WorkspaceSyncReplyDecode, SkipsBadIdsAndRefusesWrongReservations) {
  const std::string reservation =
      R"({"id":"res_0123456789abcdef","gpus":1,"node":"n1","cpu_millis":1,"memory_bytes":1,)"
      R"("ephemeral_storage_bytes":1,"expires_at":"2030-01-01T00:00:00Z","desired":"running"})";
  auto read = DecodeWorkspaceSyncReply(Json(
      R"({"acknowledged":[],"accepting":true,"reservations":[)" + reservation +
      R"(,{"id":"res_XYZ","gpus":"all"},{"gpus":1},7],"commands":[{"id":"cmd_0123456789abcdef"},)"
      R"({"id":"wsc_0123456789abcdef","reservation_id":"res_0123456789abcdef","kind":"perl",)"
      R"("code":"print 1","timeout_seconds":60},)"
      R"({"id":"wsc_00000000000000aa","reservation_id":"res_0123456789abcdef","kind":"shell",)"
      R"("code":"true","timeout_seconds":0}]})"));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->reservations.size(), 1u);
  EXPECT_EQ(read->reservations[0].state, "") << "an older console does not say";
  ASSERT_EQ(read->commands.size(), 2u) << "commands with a valid id are kept to be refused";
  EXPECT_NE(read->commands[0].problem.find("commands[1].kind"), std::string::npos)
      << read->commands[0].problem;
  EXPECT_NE(read->commands[1].problem.find("commands[2].timeout_seconds"), std::string::npos)
      << read->commands[1].problem;

  const json::value good = Json(R"({"acknowledged":[],"accepting":true,"reservations":[)" +
                                reservation + R"(],"commands":[]})");
  auto with_reservation = [&](std::string_view field, std::string_view value) {
    json::object body = good.get_object();
    body["reservations"] = json::array{With(good.at("reservations").at(0), field, value)};
    return json::value(body);
  };
  std::string too_many = "[";
  for (size_t i = 0; i <= kMaxSyncCommands; ++i) too_many += std::string(i ? "," : "") + "{}";
  too_many += "]";
  ExpectRefusals(DecodeWorkspaceSyncReply, {
           {Json("[]"), "JSON object"},
           {With(good, "accepting", ""), "accepting"},
           {With(good, "accepting", "1"), "accepting"},
           {With(good, "reservations", ""), "reservations"},
           {With(good, "commands", R"({"id":1})"), "commands"},
           {With(good, "commands", too_many), "commands"},
           {With(good, "acknowledged", R"([1])"), "acknowledged[0]"},
           {with_reservation("gpus", "0"), "reservations[0].gpus"},
           {with_reservation("gpus", R"("2")"), "reservations[0].gpus"},
           {with_reservation("node", ""), "reservations[0].node"},
           {with_reservation("node", R"("Node One")"), "reservations[0].node"},
           {with_reservation("memory_bytes", "-1"), "reservations[0].memory_bytes"},
           {with_reservation("expires_at", R"("soon")"), "reservations[0].expires_at"},
           {with_reservation("desired", R"("deleted")"), "reservations[0].desired"},
           {with_reservation("state", "1"), "reservations[0].state"},
           {with_reservation("state", R"("running\u0000")"), "reservations[0].state"},
           {with_reservation("state", "\"" + std::string(33, 'r') + "\""),
            "reservations[0].state"},
                 });
}

TEST(WorkspaceOutputContract, EveryChunkAndEndReachesTheConsoleAsSent) {
  std::string binary;
  for (int i = 0; i < 256; ++i) binary += static_cast<char>(i);
  const std::vector<WorkspaceOutput> chunks = {
      {0, "1000\n", "running", std::nullopt, false, ""},
      {5, binary, "running", std::nullopt, false, ""},
      {0, std::string(kMaxOutputChunkBytes, 'x'), "running", std::nullopt, false, ""},
      {kDefaultOutputCapBytes, "", "exited", 0, true, ""},
      {12, "", "exited", 255, false, ""},
      {7, "", "timeout", std::nullopt, false, "killed after 60 s"},
      {0, "", "failed", std::nullopt, false, std::string(kMaxOutputMessageBytes, 'm')}};
  for (const WorkspaceOutput& sent : chunks) {
    auto read =
        DecodeWorkspaceOutput(OverTheWire(EncodeWorkspaceOutput(sent), kMaxOutputRequestBytes));
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(read->offset, sent.offset);
    EXPECT_EQ(read->data, sent.data);
    EXPECT_EQ(read->state, sent.state);
    EXPECT_EQ(read->exit_code, sent.exit_code);
    EXPECT_EQ(read->truncated, sent.truncated);
    EXPECT_EQ(read->message, sent.message);
    EXPECT_EQ(IsFinalCommandState(read->state), sent.state != "running");
  }
  auto example = DecodeWorkspaceOutput(Json(R"({"offset": 0, "data_base64": "MTAwMAo=",
      "state": "running", "exit_code": null, "truncated": false, "message": ""})"));
  ASSERT_TRUE(example.ok()) << example.status().ToString();
  EXPECT_EQ(example->data, "1000\n");

  for (const WorkspaceOutputReply& sent : {WorkspaceOutputReply{0, false}, {1 << 20, true}}) {
    auto read = DecodeWorkspaceOutputReply(
        OverTheWire(EncodeWorkspaceOutputReply(sent), kMaxOutputRequestBytes));
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(read->have, sent.have);
    EXPECT_EQ(read->final, sent.final);
  }
  EXPECT_FALSE(DecodeWorkspaceOutputReply(Json(R"({"have":-1,"final":false})")).ok());
  EXPECT_FALSE(DecodeWorkspaceOutputReply(Json(R"({"have":1})")).ok());

  EXPECT_EQ(DecodeOutputGap(OverTheWire(EncodeOutputGap(4096), 4096)), 4096);
  EXPECT_EQ(DecodeOutputGap(Json(R"({"error":{"code":"conflict","have":1}})")), std::nullopt);
  EXPECT_EQ(DecodeOutputGap(Json(R"({"error":{"code":"output_gap","have":"1"}})")), std::nullopt);
  EXPECT_EQ(DecodeOutputGap(Json(R"([])")), std::nullopt);
}

TEST(WorkspaceOutputDecode, RefusesHostileInputNamingTheField) {
  const json::value good = Json(
      R"({"offset":0,"data_base64":"","state":"running","exit_code":null,"truncated":false,)"
      R"("message":""})");
  const std::string over_chunk =
      "\"" + Base64Encode(std::string(kMaxOutputChunkBytes + 1, 'x')) + "\"";
  ExpectRefusals(DecodeWorkspaceOutput, {
           {Json("[]"), "JSON object"},
           {With(good, "offset", ""), "offset"},
           {With(good, "offset", "-1"), "offset"},
           {With(good, "offset", "1.5"), "offset"},
           {With(good, "offset", std::to_string(kMaxOutputCapBytes + 1)), "offset"},
           {With(good, "data_base64", R"("not base64!")"), "data_base64"},
           {With(good, "data_base64", "[]"), "data_base64"},
           {With(good, "data_base64", over_chunk), "data_base64"},
           {With(good, "state", R"("done")"), "state"},
           {With(good, "state", ""), "state"},
           {With(good, "exit_code", "0"), "exit_code"},
           {With(With(good, "state", R"("exited")"), "exit_code", "null"), "exit_code"},
           {With(With(good, "state", R"("exited")"), "exit_code", "256"), "exit_code"},
           {With(With(good, "state", R"("exited")"), "exit_code", "-1"), "exit_code"},
           {With(good, "truncated", R"("yes")"), "truncated"},
           {With(good, "message", "\"" + std::string(kMaxOutputMessageBytes + 1, 'm') + "\""),
            "message"},
           {With(good, "stdout", R"("x")"), "stdout"},
                 });
}

ExecutionValues FullValues() {
  ExecutionValues values;
  values.enabled = true;
  values.offer_id = "off_0123456789abcdef";
  values.connection_id = "con_0123";
  values.cluster_name = "prod-a";
  values.cluster_uid = "5f0c7a8e-kube-system";
  values.workspace_image = "registry.example:5000/uplink/workspace@sha256:" + std::string(64, 'a');
  values.ssh_enabled = false;
  values.capacity_gpus = 8;
  values.max_lifetime_seconds = 86'400;
  values.nodes = {"gpu-node-0001", "gpu-node-0002"};
  values.namespace_name = "uplink-workspaces";
  values.cpu_millis_per_gpu = 4000;
  values.memory_bytes_per_gpu = 34'359'738'368;
  values.ephemeral_storage_bytes_per_gpu = 53'687'091'200;
  values.kubernetes_api_cidrs = {"10.96.0.1/32", "fd00::1/128"};
  values.kubernetes_api_port = 6443;
  values.console_cidrs = {"192.0.2.0/24"};
  values.console_port = 8443;
  return values;
}

TEST(ExecutionValuesContract, WhatTheConsoleWritesTheControllerReads) {
  const ExecutionValues sent = FullValues();
  const json::value wire = OverTheWire(EncodeExecutionValues(sent), kMaxExecutionValuesBytes);
  for (std::string_view key : {"enabled", "workspaceImage", "sshEnabled", "capacityGpus",
                               "maxLifetimeSeconds", "nodes", "namespace"}) {
    EXPECT_TRUE(wire.at("execution").as_object().contains(key)) << key;
  }
  auto read = DecodeExecutionValues(wire);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->enabled, sent.enabled);
  EXPECT_EQ(read->offer_id, sent.offer_id);
  EXPECT_EQ(read->connection_id, sent.connection_id);
  EXPECT_EQ(read->cluster_name, sent.cluster_name);
  EXPECT_EQ(read->cluster_uid, sent.cluster_uid);
  EXPECT_EQ(read->workspace_image, sent.workspace_image);
  EXPECT_EQ(read->ssh_enabled, sent.ssh_enabled);
  EXPECT_EQ(read->capacity_gpus, sent.capacity_gpus);
  EXPECT_EQ(read->max_lifetime_seconds, sent.max_lifetime_seconds);
  EXPECT_EQ(read->nodes, sent.nodes);
  EXPECT_EQ(read->namespace_name, sent.namespace_name);
  EXPECT_EQ(read->cpu_millis_per_gpu, sent.cpu_millis_per_gpu);
  EXPECT_EQ(read->memory_bytes_per_gpu, sent.memory_bytes_per_gpu);
  EXPECT_EQ(read->ephemeral_storage_bytes_per_gpu, sent.ephemeral_storage_bytes_per_gpu);
  EXPECT_EQ(read->kubernetes_api_cidrs, sent.kubernetes_api_cidrs);
  EXPECT_EQ(read->kubernetes_api_port, sent.kubernetes_api_port);
  EXPECT_EQ(read->console_cidrs, sent.console_cidrs);
  EXPECT_EQ(read->console_port, sent.console_port);

  // A values file with the chart's other keys beside and inside "execution".
  json::object merged = wire.get_object();
  merged["image"] = json::object{{"digest", "sha256:x"}};
  merged["execution"].as_object()["runtimeClassName"] = "nvidia";
  EXPECT_TRUE(DecodeExecutionValues(merged).ok());
}

TEST(ExecutionValuesDecode, RefusesWhatWouldLoosenTheWorkspaceNamingTheField) {
  const json::value good = EncodeExecutionValues(FullValues());
  auto with = [&](std::string_view field, std::string_view value) {
    json::object body = good.get_object();
    body["execution"] = With(good.at("execution"), field, value);
    return json::value(body);
  };
  ExpectRefusals(DecodeExecutionValues, {
           {Json("{}"), "execution"},
           {Json(R"({"execution":[]})"), "execution"},
           {with("enabled", ""), "execution.enabled"},
           {with("workspaceImage", R"("debian:12")"), "execution.workspaceImage"},
           {with("workspaceImage", R"("repo@sha256:abc")"), "execution.workspaceImage"},
           {with("workspaceImage", "\"repo@sha256:" + std::string(64, 'A') + "\""),
            "execution.workspaceImage"},
           {with("workspaceImage", "\"@sha256:" + std::string(64, 'a') + "\""),
            "execution.workspaceImage"},
           {with("capacityGpus", "0"), "execution.capacityGpus"},
           {with("maxLifetimeSeconds", std::to_string(kMaxLifetimeSecondsBound + 1)),
            "execution.maxLifetimeSeconds"},
           {with("nodes", "[]"), "execution.nodes"},
           {with("nodes", R"(["ok","Not A Node"])"), "execution.nodes[1]"},
           {with("namespace", R"("kube-system/x")"), "execution.namespace"},
           {with("sshEnabled", R"("false")"), "execution.sshEnabled"},
           {with("kubernetesApi", R"({"cidrs":["10.0.0.0/33"]})"), "execution.kubernetesApi.cidrs[0]"},
           {with("kubernetesApi", R"({"cidrs":["10.0.0.0"]})"), "execution.kubernetesApi.cidrs[0]"},
           {with("console", R"({"cidrs":[],"port":0})"), "execution.console.port"},
           {with("resourcesPerGpu", R"({"cpuMillis":-1,"memoryBytes":0,"ephemeralStorageBytes":0})"),
            "execution.resourcesPerGpu.cpuMillis"},
                 });
}

TEST(WorkspaceNetworks, CidrsAndImagesAreReadExactly) {
  for (std::string_view good : {"10.0.0.0/8", "0.0.0.0/0", "192.0.2.7/32", "fd00::/8", "::1/128"}) {
    EXPECT_TRUE(IsCidr(good)) << good;
  }
  for (std::string_view bad : {"", "10.0.0.0", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/08",
                               "10.0.0.0/33", "fd00::/129", "example.com/8", "10.0.0.0/8 "}) {
    EXPECT_FALSE(IsCidr(bad)) << bad;
  }
  EXPECT_TRUE(IsImageByDigest("localhost:5000/ws@sha256:" + std::string(64, '0')));
  EXPECT_FALSE(IsImageByDigest("ws:latest"));
  EXPECT_FALSE(IsImageByDigest("ws@sha256:" + std::string(63, '0')));
  EXPECT_FALSE(IsImageByDigest("ws $(id)@sha256:" + std::string(64, '0')));
}

}  // namespace
}  // namespace uplink::protocol
