// The streams area of the console's store: what agents upload from their spools. An upload
// is one transaction that accounts for every sequence (stored, duplicate or lost, by epoch)
// and keeps each record as what it is: a record, a node sample's series, the connection's
// latest cluster snapshot and its pod usage, or experiment runs. Also the reads of all of
// those, and the node plan sent back in the upload reply.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "console/store/audit_store.h"
#include "console/store/connection_store.h"
#include "console/store/runs.h"
#include "console/store/sample_series.h"
#include "protocol/plans.h"
#include "protocol/upload.h"

namespace uplink::console {

// What an agent says its spool lost (protocol/upload.h).
using protocol::AgentLosses;
using protocol::LossCount;

// One figure of a node sample: the value of one series at the sample's time.
struct SampleValue {
  SampleMetric metric = SampleMetric::kCpuSeconds;
  std::string label;  // the GPU index or the mount point; empty for node-wide metrics
  double value = 0;
};

// What the console keeps of one node sample (docs/protocol.md, "Node samples"), already
// checked: every value finite, counters not negative.
struct NodeSampleFigures {
  std::string node;
  WallTime collected_at;
  std::int64_t boot_time = 0;  // Unix seconds; 0 when the sample did not say
  std::vector<SampleValue> values;
};

// One pod's CPU and memory use as one cluster snapshot's `kubectl top pods` showed it: kept
// for an hour (kPodUsageWindow) for pod right-sizing (docs/api.md, "Pod right-sizing").
struct PodUsage {
  std::int64_t sequence = 0;  // the snapshot record's
  WallTime collected_at;      // the snapshot's, by the agent's clock
  std::string namespace_name;
  std::string pod;
  std::int64_t cpu_millicores = 0;
  std::int64_t memory_bytes = 0;
};

// One record of an upload; its payload is held by the batch.
struct UploadRecord {
  std::int64_t sequence = 0;
  WallTime appended_at;
  size_t payload_offset = 0;  // into UploadBatch::payloads
  size_t payload_size = 0;
  // A node sample (index into UploadBatch::node_samples): its figures are stored as series
  // and the record itself is not kept.
  std::optional<size_t> node_sample;
  // A cluster snapshot collected at this time: kept as the connection's latest snapshot
  // (when it is the latest), not as a record.
  std::optional<WallTime> cluster_snapshot_at;
  // An experiments record (index into UploadBatch::experiment_records): kept as runs and
  // points, not as a record.
  std::optional<size_t> experiment_record;
};

// One upload from an agent's spool, validated: sequences strictly increase within
// [first_sequence, last_sequence], every payload is a JSON object's text.
struct UploadBatch {
  std::string agent_version;
  std::string agent_instance;
  std::string stream;    // which spool of the connection, e.g. "node/gpu-node-0001"
  std::string spool_id;  // 32 hex digits; a new one means the agent's spool was recreated
  std::int64_t first_sequence = 0;
  std::int64_t last_sequence = 0;
  AgentLosses losses;
  std::vector<UploadRecord> records;
  // Every record's payload back to back: one buffer per batch rather than one per record.
  std::string payloads;
  std::vector<NodeSampleFigures> node_samples;  // of the records that are node samples
  std::vector<PodUsage> pod_usage;  // of the records that are cluster snapshots
  std::vector<ExperimentRecord> experiment_records;  // of the records that are experiments

  std::string_view Payload(const UploadRecord& record) const {
    return std::string_view(payloads).substr(record.payload_offset, record.payload_size);
  }
};

// What a connection's node role collects, and how often (docs/protocol.md, "The collection
// plan in the upload reply").
struct NodePlan {
  std::int64_t interval_seconds = 30;  // 10-3600
  // Collector names from kNodeCollectors, in that order, no repeats.
  std::vector<std::string> collectors;
  std::optional<WallTime> updated_at;  // none: the default plan, never set
};

// The node role's collectors (protocol/plans.h), and the interval of the default plan.
using protocol::kNodeCollectors;
inline constexpr std::int64_t kDefaultSampleInterval = protocol::kDefaultPlanInterval.count();

// The plan a connection has until its owner sets one: every collector, every 30 s.
NodePlan DefaultNodePlan();

// What one accepted upload did.
struct UploadOutcome {
  std::int64_t acked_through = 0;  // the agent may consume its spool up to here
  std::int64_t stored = 0;
  std::int64_t duplicates = 0;     // at or below the previous acked_through: not stored again
  std::int64_t lost = 0;           // sequences newly counted as never arriving
  bool new_stream = false;
  bool restarted = false;          // the spool_id changed: the stream began a new epoch
  std::int64_t epoch = 0;
  std::int64_t records_pruned = 0;  // old records this upload's transaction deleted (retention)
  // Cluster snapshots among the stored records, and whether one became the connection's
  // latest.
  std::int64_t snapshots_received = 0;
  bool snapshot_replaced = false;
  // Node samples among the stored records: their figures kept, or not kept because they
  // were collected before the raw retention or too far ahead of the console's clock, or at
  // the same time as a sample already kept for the node.
  std::int64_t samples_stored = 0;
  std::int64_t samples_too_old = 0;
  std::int64_t samples_in_future = 0;
  std::int64_t samples_same_time = 0;
  // Values left out because their node already has kMaxSeriesPerNode series.
  std::int64_t sample_values_dropped = 0;
  // What this upload's transaction did for retention (SampleRetention).
  std::int64_t samples_pruned = 0;
  std::int64_t rollups_written = 0;
  std::int64_t rollups_pruned = 0;
  // Experiment runs: upserts stored, points new to the store (a point sent again is not
  // stored twice), runs deleted, problems reported.
  std::int64_t runs_upserted = 0;
  std::int64_t run_points_stored = 0;
  std::int64_t run_points_duplicate = 0;
  std::int64_t runs_deleted = 0;
  std::int64_t run_problems = 0;
  // The connection's node plan and namespace scope as the upload's transaction read them, for
  // the reply's plan: read with its first query rather than by a query of their own after.
  NodePlan node_plan;
  NamespaceScope namespace_scope;
};

// A stream of a connection: one agent spool, as the console has received it.
struct StreamSummary {
  std::string stream;
  std::string spool_id;
  // Starts at 0 and grows by one at every restart (spool_id change), so it is also the
  // number of restarts. Records are kept per epoch: a new spool's sequences start again at 1.
  std::int64_t epoch = 0;
  std::int64_t acked_through = 0;  // in the current epoch
  // The three counts below cover every epoch of the stream.
  std::int64_t records_stored = 0;
  std::int64_t duplicates_ignored = 0;
  std::int64_t lost_records = 0;
  AgentLosses agent_losses;  // of the current spool only: reset at a restart
  WallTime first_upload_at;
  WallTime last_upload_at;
  std::string agent_instance;  // as of the last upload
  std::string agent_version;
};

struct StoredRecord {
  std::int64_t sequence = 0;
  WallTime appended_at;  // by the agent's clock
  WallTime received_at;  // by the console's
  std::string payload;   // a JSON object
};

struct RecordQuery {
  std::string connection_id;
  std::string stream;
  std::optional<std::int64_t> epoch;  // none: the stream's current epoch
  std::int64_t after_sequence = 0;
  int limit = 100;  // clamped to 1..kMaxRecordPage
  // A page ends early, after at least one record, once its payloads reach this many bytes.
  size_t max_payload_bytes = 8 << 20;
};

inline constexpr int kMaxRecordPage = 1000;

struct RecordPage {
  std::int64_t epoch = 0;
  std::vector<StoredRecord> records;  // in sequence order
  bool more = false;                  // records after the last one exist
};

// How long node samples are kept, by collected_at: raw for `raw_max_age`, then as 5-minute
// rollups until `max_age`. Like records, this is done by uploads inside their transaction, at
// most once per RecordRetention::interval, bounded per run.
struct SampleRetention {
  std::chrono::seconds raw_max_age{48 * 3600};
  std::chrono::seconds max_age{7 * 24 * 3600};
  // A sample collected further ahead of the console's clock is not kept.
  std::chrono::seconds max_clock_skew{300};
  // Rollups are made for a bucket this long after it ends (late samples rework it anyway).
  std::chrono::seconds rollup_delay{120};
  std::int64_t max_rollup_buckets_per_run = 2'000;  // node-buckets
  std::int64_t max_rows_per_run = 10'000;           // deleted, of each kind
};

// A node whose sample would add a series beyond this many keeps its values for the series it
// has (a node has ~60; mount points coming and going make more, forgotten after max_age).
inline constexpr std::int64_t kMaxSeriesPerNode = 4096;

// How long uploaded records are kept, by the time the console received them. Deleting is
// done by uploads, inside their transaction, at most once per `interval` and at most
// `max_records_per_run` records at a time, so that no upload waits long for it.
struct RecordRetention {
  std::chrono::seconds max_age{7 * 24 * 3600};
  std::chrono::seconds interval{60};
  std::int64_t max_records_per_run = 10'000;
  SampleRetention samples;
};


// The latest cluster snapshot of a connection (docs/protocol.md, "Cluster snapshots").
struct ClusterSnapshot {
  std::string stream;  // "cluster/...", the cluster role's
  WallTime collected_at;  // by the agent's clock, milliseconds
  WallTime received_at;   // by the console's
  std::string payload;    // the record's payload, a JSON object as the agent sent it
};

// How long pod usage is kept: right-sizing looks at the last hour.
inline constexpr std::chrono::seconds kPodUsageWindow{3600};

// A pod's usage over a window: the `kubectl top pods` figures of every snapshot in it.
struct PodUsageSummary {
  std::string namespace_name;
  std::string pod;
  std::int64_t samples = 0;
  std::int64_t cpu_average_millicores = 0;
  std::int64_t cpu_peak_millicores = 0;
  std::int64_t memory_average_bytes = 0;
  std::int64_t memory_peak_bytes = 0;
};


// A node of a connection that has sent samples, as of its latest one.
struct SampleNodeState {
  std::string node;
  WallTime latest_at;
  std::int64_t latest_boot_time = 0;
  std::string latest_payload;  // the latest sample's payload as the agent sent it
  // The sample before the latest (by collected_at), when its raw figures are still kept.
  std::optional<WallTime> previous_at;
  std::int64_t previous_boot_time = 0;
  std::vector<SampleValue> previous_values;
};

// One series of a node: its raw points, or its 5-minute rollups, in time order.
struct SeriesPoints {
  SampleMetric metric = SampleMetric::kCpuSeconds;
  std::string label;
  std::vector<RawPoint> points;
};

struct SeriesRollups {
  SampleMetric metric = SampleMetric::kCpuSeconds;
  std::string label;
  std::vector<std::pair<std::int64_t, BucketAggregate>> buckets;  // by start, Unix seconds
};

struct RollupRead {
  // Rollups are complete for buckets before this one (Unix seconds): from here on, the raw
  // points are the only source.
  std::int64_t rolled_through = 0;
  std::vector<SeriesRollups> series;
};

inline constexpr int kMaxSampleNodePage = 500;

struct SampleNodePage {
  std::vector<SampleNodeState> nodes;  // by name
  bool more = false;                   // nodes after the last one exist
};

class StreamStore {
 public:
  virtual ~StreamStore() = default;

  // In one transaction (docs/protocol.md, "POST /api/v1/agent/uploads"): checks the token as
  // AcceptReport does (Unauthenticated, nothing written); finds or creates the stream
  // (connection, batch.stream); when its spool_id changed, starts a new epoch at
  // acked_through 0 and writes `audit` with action "stream.restart"; stores the records above
  // acked_through (a node sample as its figures, not as a record), counts the others as
  // duplicates and every missing sequence up to last_sequence as lost; keeps the larger of
  // the stored and sent agent losses; moves acked_through to last_sequence (never back).
  // Then, when `retention` is due, deletes old records and rolls up and prunes node samples.
  // Writes no other audit event: records are data, not changes to credentials.
  virtual Result<UploadOutcome> AcceptUpload(const std::string& connection_id,
                                             const std::string& token_hash,
                                             const UploadBatch& batch, WallTime received_at,
                                             const RecordRetention& retention,
                                             const AuditEvent& audit) = 0;
  // AcceptUpload without waiting for it, for callers that must not hold a thread meanwhile
  // (the HTTP handler of uploads): `done` gets what AcceptUpload would return, once, on a
  // thread of the store's, after the upload is durable or refused. `done` must be short
  // and must not throw.
  using UploadDone = std::function<void(Result<UploadOutcome>)>;
  virtual void AcceptUploadThen(std::string connection_id, std::string token_hash,
                                std::shared_ptr<const UploadBatch> batch, WallTime received_at,
                                RecordRetention retention, AuditEvent audit,
                                UploadDone done) = 0;
  // The connection's streams, by name.
  virtual Result<std::vector<StreamSummary>> ListStreams(const std::string& connection_id) = 0;
  // NotFound when the connection has no such stream; InvalidArgument for an epoch the stream
  // never had.
  virtual Result<RecordPage> ListStreamRecords(const RecordQuery& query) = 0;

  // Node samples (docs/api.md, "Node metrics"). AcceptUpload stores the figures of the
  // batch's node samples (those above acked_through) in its transaction, each node's latest
  // sample with them, and rolls up and prunes them by `retention.samples`.

  // The connection's plan, or DefaultNodePlan() when none was set.
  virtual Result<NodePlan> GetNodePlan(const std::string& connection_id) = 0;
  // Replaces the plan (updated_at is set from `audit.at`), writing `audit`.
  virtual Status SetNodePlan(const std::string& connection_id, const NodePlan& plan,
                             const AuditEvent& audit) = 0;
  // The nodes of the connection that sent samples, by name, after `after_node`, at most
  // `limit` (clamped to 1..kMaxSampleNodePage).
  virtual Result<SampleNodePage> ListSampleNodes(const std::string& connection_id,
                                                 const std::string& after_node, int limit) = 0;
  // The raw points of the node's series of `metrics` collected in [from, to). NotFound when
  // the connection has no samples from `node`.
  virtual Result<std::vector<SeriesPoints>> ReadSamplePoints(
      const std::string& connection_id, const std::string& node,
      std::span<const SampleMetric> metrics, WallTime from, WallTime to) = 0;
  // The 5-minute rollups of those series for buckets starting in [from, to). NotFound as above.
  virtual Result<RollupRead> ReadSampleRollups(const std::string& connection_id,
                                               const std::string& node,
                                               std::span<const SampleMetric> metrics,
                                               WallTime from, WallTime to) = 0;

  // kubectl (docs/api.md, "kubectl"). AcceptUpload keeps the batch's newest cluster snapshot
  // (above acked_through) as the connection's, unless the kept one was collected later.
  virtual Result<std::optional<ClusterSnapshot>> GetClusterSnapshot(
      const std::string& connection_id) = 0;
  // Each pod's usage in the pod_usage of the snapshots AcceptUpload stored, collected at or
  // after `since`, by namespace and pod. AcceptUpload keeps kPodUsageWindow and a little more.
  virtual Result<std::vector<PodUsageSummary>> SummarizePodUsage(
      const std::string& connection_id, WallTime since) = 0;

  // Experiment runs (docs/api.md, "Experiment runs"). AcceptUpload stores the batch's
  // experiments records (above acked_through) in its transaction: upserts, new points only,
  // deletions and problems. Reads are per connection; NotFound for a run it does not have.
  virtual Result<RunPage> ListRuns(const RunQuery& query) = 0;
  virtual Result<RunFacets> ListRunFacets(const std::string& connection_id) = 0;
  virtual Result<StoredRun> GetRun(const std::string& connection_id,
                                   const std::string& run_id) = 0;
  virtual Result<std::vector<RunMetric>> ListRunMetrics(const std::string& connection_id,
                                                        const std::string& run_id) = 0;
  // The history of `metrics` of the run (empty: every metric), each thinned to at most
  // `max_points`.
  virtual Result<std::vector<RunHistory>> ReadRunHistory(const std::string& connection_id,
                                                         const std::string& run_id,
                                                         const std::vector<std::string>& metrics,
                                                         size_t max_points) = 0;
  // The newest problems the connection's agents reported, newest first.
  virtual Result<std::vector<RunProblem>> ListRunProblems(const std::string& connection_id,
                                                          int limit) = 0;
};

}  // namespace uplink::console
