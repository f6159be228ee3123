// Contract tests of POST /api/v1/agent/uploads: what the agent's roles put in their spools and
// what the shipper sends, read back by the decoder the console uses (protocol/upload.h), so
// that an agent change the console would refuse fails here, not only end to end. And the
// console's reply, with its plans, as the agent reads it.
#include "protocol/upload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "agent/cluster/snapshot.h"
#include "agent/experiments/emitter.h"
#include "agent/node/format/payload.h"
#include "agent/node/host/host_collector.h"
#include "agent/node/role.h"
#include "common/json.h"
#include "console/api/cluster_plan.h"
#include "console/api/upload_batch.h"
#include "protocol/plans.h"

namespace uplink::protocol {
namespace {

const WallTime kCollectedAt = FromUnixSeconds(1'800'000'000);

json::value Json(std::string_view text) {
  auto parsed = ParseJson(text, JsonLimits{kMaxPayloadBytes, kMaxPayloadDepth});
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : json::value();
}

// A node sample as the node role collects it from a real node's /proc, with a filesystem that
// answered, one whose statvfs failed, and two GPUs.
agent::node::NodeSample CollectedSample() {
  namespace node = agent::node;
  node::HostCollectorOptions options;
  options.host_proc = std::string(UPLINK_FIXTURES_DIR) + "/node/real-capture/proc";
  auto collector = node::HostCollector::Create(options);
  EXPECT_TRUE(collector.ok()) << collector.status().ToString();
  node::NodeSample sample;
  sample.node = "gpu-node-0001";
  sample.collected_at = kCollectedAt;
  node::CollectorSet host = node::CollectorSet::All();
  host.Remove(node::Collector::kFilesystem);
  host.Remove(node::Collector::kGpu);
  if (collector.ok()) (*collector)->Collect(host, sample);
  sample.collected = node::CollectorSet::All();
  sample.filesystems = {
      {"/dev/nvme0n1p1", "/", "ext4", false, 500'000'000'000, 200'000'000'000, 180'000'000'000,
       30'000'000, 20'000'000, ""},
      {"server:/export", "/mnt/nfs", "nfs4", true, 0, 0, 0, 0, 0, "statvfs timed out after 5 s"}};
  node::GpuReport gpus;
  gpus.source = node::GpuSource::kNvml;
  for (unsigned index : {0u, 1u}) {
    node::Gpu gpu;
    gpu.index = index;
    gpu.uuid = "GPU-" + std::to_string(index);
    gpu.name = "NVIDIA H100 80GB HBM3";
    gpu.utilization_percent = 97.5;
    gpu.memory_used_bytes = 70ull << 30;
    gpu.memory_total_bytes = 80ull << 30;
    gpu.temperature_celsius = -3;  // a cold GPU is a negative figure, not a broken one
    gpu.power_watts = 650.25;
    gpu.ecc_uncorrected = 0;
    gpus.gpus.push_back(gpu);
  }
  sample.gpus = gpus;
  sample.gaps.push_back({"pressure", "/host/proc/pressure/io", "Operation not supported", 95});
  return sample;
}

TEST(NodeSampleContract, WhatTheNodeRoleRendersTheConsoleReadsFigureForFigure) {
  const agent::node::NodeSample sample = CollectedSample();
  ASSERT_TRUE(sample.cpu && sample.memory && sample.load && !sample.network.empty() &&
              !sample.disks.empty())
      << "the fixture should fill every host section";
  json::value payload = Json(agent::node::RenderPayload(sample));
  ASSERT_TRUE(payload.is_object());
  ASSERT_TRUE(IsNodeSamplePayload(payload.get_object()));
  auto decoded = DecodeNodeSample(payload.get_object(), "payload");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();

  EXPECT_EQ(decoded->node, "gpu-node-0001");
  EXPECT_EQ(decoded->collected_at, kCollectedAt);
  EXPECT_EQ(decoded->boot_time, sample.cpu->boot_time);
  EXPECT_EQ(decoded->cpu_count, static_cast<std::int64_t>(sample.cpu->per_cpu.size()));
  const agent::node::CpuTimes& t = sample.cpu->total;
  ASSERT_TRUE(decoded->cpu_seconds && decoded->cpu_idle_seconds);
  EXPECT_NEAR(*decoded->cpu_seconds,
              t.user + t.nice + t.system + t.idle + t.iowait + t.irq + t.softirq + t.steal, 1e-6);
  EXPECT_NEAR(*decoded->cpu_idle_seconds, t.idle + t.iowait, 1e-6);
  EXPECT_EQ(decoded->memory_total_bytes, static_cast<double>(*sample.memory->total_bytes));
  EXPECT_EQ(decoded->load15, sample.load->load15);
  double received = 0;
  for (const auto& device : sample.network) {
    if (IsHostInterface(device.device)) received += static_cast<double>(device.receive_bytes);
  }
  EXPECT_EQ(decoded->network_receive_bytes, received);
  double read = 0;
  for (const auto& disk : sample.disks) read += static_cast<double>(disk.sectors_read) * 512;
  EXPECT_EQ(decoded->disk_read_bytes, read);

  ASSERT_EQ(decoded->filesystems.size(), 2u);
  EXPECT_EQ(decoded->filesystems[0].mountpoint, "/");
  EXPECT_EQ(decoded->filesystems[0].size_bytes, 500'000'000'000.0);
  EXPECT_EQ(decoded->filesystems[0].avail_bytes, 180'000'000'000.0);
  EXPECT_EQ(decoded->filesystems[1].error, "statvfs timed out after 5 s");
  EXPECT_EQ(decoded->gpu_source, "nvml");
  ASSERT_EQ(decoded->gpus.size(), 2u);
  EXPECT_EQ(decoded->gpus[1].index, 1);
  EXPECT_EQ(decoded->gpus[1].uuid, "GPU-1");
  EXPECT_EQ(decoded->gpus[1].utilization_percent, 97.5);
  EXPECT_EQ(decoded->gpus[1].memory_total_bytes, static_cast<double>(80ull << 30));
  EXPECT_EQ(decoded->gpus[1].temperature_celsius, -3);
  EXPECT_EQ(decoded->gpus[1].power_watts, 650.25);
  ASSERT_FALSE(decoded->gaps.empty());
  EXPECT_EQ(decoded->gaps.back().source, "pressure");
  EXPECT_EQ(decoded->gaps.back().errno_value, 95);
}

TEST(NodeSampleContract, ASampleAtEveryBoundTheNodeRoleKeepsIsStillAccepted) {
  // More of everything than the protocol carries, and strings longer than its bounds, with
  // bytes that are not UTF-8: the renderer cuts and replaces, the console takes the result.
  agent::node::NodeSample sample;
  sample.node = std::string(400, 'n');
  sample.collected_at = kCollectedAt;
  sample.collected = agent::node::CollectorSet::All();
  for (size_t i = 0; i < kMaxSampleInterfaces + 10; ++i) {
    sample.network.push_back({"eth\xff" + std::to_string(i)});
  }
  // Each part within its own bound, and the whole within one record: a few paths past their
  // bound, the rest short (1,024 mount points of 4 KiB would be 4 MiB, which no upload carries).
  for (size_t i = 0; i < kMaxSampleFilesystems + 10; ++i) {
    agent::node::Filesystem fs;
    fs.mountpoint = "/" + std::string(i < 3 ? 5000 : 20, 'm') + std::to_string(i);
    fs.device = "dev";
    fs.fstype = "ext4";
    sample.filesystems.push_back(fs);
  }
  agent::node::GpuReport gpus;
  gpus.source = agent::node::GpuSource::kNvidiaSmi;
  for (unsigned i = 0; i < kMaxSampleGpus + 3; ++i) {
    agent::node::Gpu gpu;
    gpu.index = i;
    gpu.utilization_percent = std::numeric_limits<double>::quiet_NaN();  // left out
    gpus.gpus.push_back(gpu);
  }
  sample.gpus = gpus;
  for (size_t i = 0; i < kMaxSampleGaps + 10; ++i) {
    sample.gaps.push_back({"disk", std::string(i < 3 ? 5000 : 20, 'p'), std::string(300, 'e'), 5});
  }
  json::value payload = Json(agent::node::RenderPayload(sample));
  auto decoded = DecodeNodeSample(payload.get_object(), "payload");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->node.size(), kMaxSampleString);
  EXPECT_EQ(decoded->filesystems.size(), kMaxSampleFilesystems);
  EXPECT_EQ(decoded->gpus.size(), kMaxSampleGpus);
  EXPECT_EQ(decoded->gaps.size(), kMaxSampleGaps);
  EXPECT_EQ(decoded->filesystems[0].mountpoint.size(), kMaxSamplePath);
  EXPECT_EQ(decoded->gaps[0].path.size(), kMaxSamplePath);
  EXPECT_EQ(decoded->gaps[0].error.size(), kMaxSampleString);
}

TEST(ClusterSnapshotContract, WhatTheClusterRoleSpoolsTheConsoleReadsResultByResult) {
  ClusterSnapshot snapshot;
  snapshot.collected_at = kCollectedAt;
  agent::cluster::KubectlRun ran;
  ran.exit_code = 0;
  ran.stdout_text = "NAME   STATUS\ngpu-0  Ready\n";
  ran.stderr_text = "warning \xff\n";  // not UTF-8: the agent makes it valid
  ran.duration_ms = 120;
  agent::cluster::KubectlRun killed;
  killed.exit_code = -9;
  snapshot.results = {
      {"nodes", {"kubectl", "get", "nodes"}, agent::cluster::RunResult(ran, 0), false},
      {"pods/ml",
       {"kubectl", "get", "pods", "-n", "ml"},
       agent::cluster::RunResult(killed, 7),
       false},
      {"top_pods",
       {"kubectl", "top", "pods", "-A"},
       agent::cluster::RunResult(DeadlineExceededError("kubectl ran for 30 s"), 30'000),
       true},
      {"logs/ml/trainer-0",
       {"kubectl", "logs", "-n", "ml", "trainer-0"},
       agent::cluster::RunResult(PermissionDeniedError("secrets are not readable"), 1),
       false}};
  json::value payload = Json(json::serialize(EncodeClusterSnapshot(snapshot)));
  ASSERT_TRUE(IsClusterSnapshotPayload(payload.get_object()));
  auto decoded = DecodeClusterSnapshot(payload.get_object(), "payload");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->collected_at, kCollectedAt);
  ASSERT_EQ(decoded->results.size(), 4u);
  for (size_t i = 0; i < snapshot.results.size(); ++i) {
    const SnapshotResult& sent = snapshot.results[i];
    const SnapshotResult& read = decoded->results[i];
    EXPECT_EQ(read.name, sent.name);
    EXPECT_EQ(read.argv, sent.argv);
    EXPECT_EQ(read.truncated, sent.truncated);
    EXPECT_EQ(read.outcome.error_code, sent.outcome.error_code) << sent.name;
    EXPECT_EQ(read.outcome.error_message, sent.outcome.error_message);
    EXPECT_EQ(read.outcome.exit_code, sent.outcome.exit_code);
    EXPECT_EQ(read.outcome.stdout_text, sent.outcome.stdout_text);
    EXPECT_EQ(read.outcome.stderr_text, sent.outcome.stderr_text);
    EXPECT_EQ(read.outcome.duration_ms, sent.outcome.duration_ms);
  }
  EXPECT_EQ(decoded->results[1].outcome.error_code, kCommandFailed);
  EXPECT_EQ(decoded->results[2].outcome.error_code, kCommandTimedOut);
  EXPECT_EQ(decoded->results[3].outcome.error_code, kCommandRefused);
}

TEST(ExperimentsContract, EveryRecordTheEmitterWritesTheConsoleReadsItemByItem) {
  agent::experiments::ListSink sink;
  agent::experiments::Emitter emitter(sink);
  agent::experiments::RunRecord run;
  run.source = "mlflow";
  run.run_id = "d057cae15f27465988e72c6212e1f226";
  run.experiment_id = "1";
  run.experiment = "sklearn";
  run.name = "bold-owl-42";
  run.user = "ana";
  run.status = std::string(kRunFinished);
  run.started_at_ms = 1'700'000'000'000;
  run.ended_at_ms = 1'700'000'360'000;
  run.exit_code = 0;
  run.location = "mlruns/1/d057cae15f27465988e72c6212e1f226";
  run.params = {{"alpha", "0.5"}, {"password", "hunter2"}};
  run.tags = {{"mlflow.user", "ana"}};
  run.summary = {{"loss", 0.25}};
  agent::experiments::NormalizeRun(run);
  ASSERT_TRUE(emitter.AddRun(run).ok());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  ASSERT_TRUE(emitter
                  .AddPoints(run.run_id, "loss",
                             {{0, 1.5, 1'700'000'001'000},
                              {1, nan, 1'700'000'002'000},
                              {2, inf, 1'700'000'003'000},
                              {3, -inf, 1'700'000'004'000}})
                  .ok());
  ASSERT_TRUE(emitter.AddDeleted("0123456789abcdef").ok());
  ASSERT_TRUE(emitter.AddProblem("wandb", "wandb/run-1", "the log is cut short").ok());
  ASSERT_TRUE(emitter.Flush().ok());
  ASSERT_EQ(sink.records.size(), 4u);

  ExperimentRecord merged;
  for (const std::string& record : sink.records) {
    json::value payload = Json(record);
    ASSERT_TRUE(IsExperimentPayload(payload.get_object())) << record.substr(0, 80);
    auto decoded = DecodeExperimentPayload(payload.get_object(), "payload");
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    for (auto& r : decoded->runs) merged.runs.push_back(std::move(r));
    for (auto& s : decoded->series) merged.series.push_back(std::move(s));
    for (auto& d : decoded->deleted) merged.deleted.push_back(std::move(d));
    for (auto& p : decoded->problems) merged.problems.push_back(std::move(p));
  }
  ASSERT_EQ(merged.runs.size(), 1u);
  const ExperimentRun& read = merged.runs[0];
  EXPECT_EQ(read.run_id, run.run_id);
  EXPECT_EQ(read.source, "mlflow");
  EXPECT_EQ(read.experiment, "sklearn");
  EXPECT_EQ(read.name, "bold-owl-42");
  EXPECT_EQ(read.status, "finished");
  EXPECT_EQ(read.started_at, FromUnixSeconds(1'700'000'000));
  EXPECT_EQ(read.ended_at, FromUnixSeconds(1'700'000'360));
  EXPECT_EQ(read.exit_code, 0);
  EXPECT_EQ(read.location, run.location);
  EXPECT_EQ(Json(read.params_json).at("alpha"), "0.5");
  EXPECT_NE(Json(read.params_json).at("password"), "hunter2") << "the agent redacts it";
  EXPECT_EQ(Json(read.summary_json).at("loss").to_number<double>(), 0.25);
  ASSERT_EQ(merged.series.size(), 1u);
  ASSERT_EQ(merged.series[0].points.size(), 4u);
  EXPECT_EQ(merged.series[0].points[0].value, 1.5);
  EXPECT_TRUE(std::isnan(merged.series[0].points[1].value));
  EXPECT_EQ(merged.series[0].points[2].value, inf);
  EXPECT_EQ(merged.series[0].points[3].value, -inf);
  EXPECT_EQ(merged.series[0].points[3].timestamp_ms, 1'700'000'004'000);
  EXPECT_EQ(merged.deleted, std::vector<std::string>{"0123456789abcdef"});
  ASSERT_EQ(merged.problems.size(), 1u);
  EXPECT_EQ(merged.problems[0].error, "the log is cut short");
}

// An upload as the shipper builds it (protocol::EncodeUpload with its records), serialized.
json::value UploadOf(const std::string& stream, const std::vector<std::string>& payloads) {
  json::array records;
  std::int64_t sequence = 40;
  for (const std::string& payload : payloads) {
    records.push_back(EncodeUploadRecord(++sequence, kCollectedAt, Json(payload)));
  }
  UploadEnvelope envelope{"0.1.0",
                          "pod-7",
                          stream,
                          std::string(32, 'a'),
                          41,
                          sequence + 2,
                          AgentLosses{{1, 100}, {2, 200}, {3, 300}}};
  auto parsed = ParseJson(json::serialize(EncodeUpload(envelope, std::move(records))),
                          JsonLimits{kDefaultMaxUploadBytes, kMaxUploadDocumentDepth});
  EXPECT_TRUE(parsed.ok());
  return parsed.ok() ? *parsed : json::value();
}

TEST(UploadContract, TheEnvelopeAndEveryKindOfRecordReachTheStoreBatch) {
  const std::string sample = agent::node::RenderPayload(CollectedSample());
  auto decoded = DecodeUpload(UploadOf("node/gpu-node-0001", {sample, R"({"kind":"other"})"}));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_TRUE(std::holds_alternative<DecodedUpload>(*decoded))
      << std::get<InvalidRecord>(*decoded).message;
  const DecodedUpload& upload = std::get<DecodedUpload>(*decoded);
  EXPECT_EQ(upload.envelope.agent_version, "0.1.0");
  EXPECT_EQ(upload.envelope.agent_instance, "pod-7");
  EXPECT_EQ(upload.envelope.first_sequence, 41);
  EXPECT_EQ(upload.envelope.last_sequence, 44);
  EXPECT_EQ(upload.envelope.losses.rejected.bytes, 300);
  ASSERT_EQ(upload.records.size(), 2u);
  EXPECT_EQ(upload.records[0].kind, PayloadKind::kNodeSample);
  EXPECT_EQ(upload.records[1].kind, PayloadKind::kOther);
  EXPECT_EQ(upload.records[1].appended_at, kCollectedAt);
  EXPECT_EQ(upload.Payload(upload.records[1]), R"({"kind":"other"})");

  console::UploadBatch batch = console::StoreBatchOf(std::get<DecodedUpload>(*decoded));
  ASSERT_EQ(batch.node_samples.size(), 1u);
  EXPECT_EQ(batch.records[0].node_sample, 0u);
  EXPECT_FALSE(batch.node_samples[0].values.empty());
  EXPECT_EQ(batch.losses.dropped.records, 1);
}

TEST(UploadDecode, AnInstanceOrVersionWithAControlCharacterIsRefused) {
  for (const char* field : {"agent_instance", "agent_version"}) {
    json::value upload = UploadOf("node/gpu-node-0001", {R"({"kind":"other"})"});
    upload.as_object()[field] = std::string("pod\0x", 5);
    auto refused = DecodeUpload(upload);
    ASSERT_FALSE(refused.ok()) << field;
    EXPECT_NE(refused.status().message().find(std::string(field) + " must not contain control"),
              std::string::npos)
        << refused.status().ToString();
  }
}

TEST(UploadContract, ARecordOnAnotherRolesStreamIsRefusedAsThatRecord) {
  agent::experiments::ListSink sink;
  agent::experiments::Emitter emitter(sink);
  ASSERT_TRUE(emitter.AddDeleted("r1").ok());
  ASSERT_TRUE(emitter.Flush().ok());
  ClusterSnapshot snapshot{kCollectedAt, {}};
  const std::string node_sample = agent::node::RenderPayload(CollectedSample());
  for (auto [stream, payload, kind] :
       {std::tuple{"cluster/pod-1", node_sample, PayloadKind::kNodeSample},
        std::tuple{"node/other-node", node_sample, PayloadKind::kNodeSample},
        std::tuple{"node/gpu-node-0001", json::serialize(EncodeClusterSnapshot(snapshot)),
                   PayloadKind::kClusterSnapshot},
        std::tuple{"cluster/pod-1", sink.records[0], PayloadKind::kExperiments}}) {
    auto decoded = DecodeUpload(UploadOf(stream, {payload}));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    ASSERT_TRUE(std::holds_alternative<InvalidRecord>(*decoded)) << stream;
    const InvalidRecord& invalid = std::get<InvalidRecord>(*decoded);
    EXPECT_EQ(invalid.sequence, 41);
    EXPECT_EQ(invalid.kind, kind);
    EXPECT_NE(invalid.message.find("stream"), std::string::npos) << invalid.message;
  }
}

TEST(UploadReplyContract, TheAgentTakesTheAcknowledgementAndThePlans) {
  json::object reply = EncodeUploadReply(UploadReply{"node/n", 44, 3, 1, kCollectedAt});
  EXPECT_EQ(DecodeAckedThrough(reply), 44);

  // The node plan as the console stores it, as the node role reads it.
  reply["plan"] = EncodeNodePlan(
      NodePlan{std::chrono::seconds(15), std::vector<std::string>{"cpu", "gpu", "future"}});
  auto node_plan = agent::node::PlanFromReply(reply);
  ASSERT_TRUE(node_plan.ok()) << node_plan.status().ToString();
  ASSERT_TRUE(node_plan->has_value());
  EXPECT_EQ((*node_plan)->interval, std::chrono::seconds(15));
  agent::node::CollectorSet expected;
  expected.Add(agent::node::Collector::kCpu);
  expected.Add(agent::node::Collector::kGpu);
  EXPECT_EQ((*node_plan)->collectors, expected)
      << "a collector this agent does not know is ignored";

  // The cluster plan the console builds from a namespace scope, as the cluster role reads it.
  for (const console::NamespaceScope& scope :
       {console::NamespaceScope(), console::NamespaceScope(std::vector<std::string>{"*"}),
        console::NamespaceScope(std::vector<std::string>{"ml", "serving"})}) {
    const ClusterPlan sent = console::ClusterPlanFor(scope);
    json::object with_plan = EncodeUploadReply(UploadReply{"cluster/p", 1, 1, 0, std::nullopt});
    with_plan["plan"] = EncodeClusterPlan(sent);
    auto read = DecodeClusterPlan(with_plan);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    ASSERT_TRUE(read->has_value());
    EXPECT_EQ(**read, sent);
    for (const PlanCommand& command : sent.commands) {
      EXPECT_TRUE(kubectl::CheckKubectlArgv(command.argv).ok())
          << command.name << ": the agent's guard must run what the console plans";
    }
  }
}

TEST(UploadReplyContract, AReplyWithoutAUsableAcknowledgementConsumesNothing) {
  for (std::string_view body :
       {R"({})", R"({"acked_through":-1})", R"({"acked_through":"44"})", R"({"acked_through":4.5})",
        R"({"acked_through":18446744073709551615})", R"([44])", R"("acked_through")"}) {
    EXPECT_EQ(DecodeAckedThrough(Json(body)), std::nullopt) << body;
  }
}

TEST(PlansDecode, RefuseWhatIsOutOfBoundsAndKeepNoPlanWhenThereIsNone) {
  EXPECT_EQ(DecodeNodePlan(Json(R"({"stream":"node/n"})"))->has_value(), false);
  EXPECT_EQ(DecodeNodePlan(Json(R"({"plan":null})"))->has_value(), false);
  for (std::string_view bad :
       {R"({"plan":[]})", R"({"plan":{"interval_seconds":9}})",
        R"({"plan":{"interval_seconds":3601}})", R"({"plan":{"interval_seconds":"30"}})",
        R"({"plan":{"collectors":"cpu"}})", R"({"plan":{"collectors":[1]}})"}) {
    EXPECT_FALSE(DecodeNodePlan(Json(bad)).ok()) << bad;
  }
  std::string many = R"({"plan":{"commands":[)";
  for (int i = 0; i <= 64; ++i)
    many += std::string(i ? "," : "") + R"({"name":"n","argv":["kubectl"]})";
  many += "]}}";
  for (const std::string& bad : std::vector<std::string>{
           R"({"plan":{"commands":[{"name":"","argv":["kubectl"]}]}})",
           R"({"plan":{"commands":[{"name":"a b","argv":["kubectl"]}]}})",
           R"({"plan":{"commands":[{"name":"n","argv":["helm"]}]}})",
           R"({"plan":{"commands":[{"name":"n","argv":[]}]}})",
           R"({"plan":{"commands":[{"name":"n"}]}})",
           R"({"plan":{"commands":[],"failing_pod_logs":{"tail_lines":0}}})",
           R"({"plan":{"commands":[],"failing_pod_logs":{"max_pods":21}}})", many}) {
    EXPECT_FALSE(DecodeClusterPlan(Json(bad)).ok()) << bad.substr(0, 80);
  }
}

}  // namespace
}  // namespace uplink::protocol
