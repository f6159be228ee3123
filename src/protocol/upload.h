// POST /api/v1/agent/uploads (docs/protocol.md): a batch of records from an agent's spool, and
// the console's acknowledgement. The shipper (agent/shipper.h) encodes the batch; the console
// decodes it strictly: a malformed envelope is refused as a whole (400); a problem with one
// record's contents names that record's sequence (422), so that the agent can give up that
// record alone and send the rest again. Records whose payload is of a kind the protocol knows
// (node samples, cluster snapshots, experiments records) are decoded too, and must be on their
// role's stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"
#include "protocol/cluster_snapshot.h"
#include "protocol/experiments.h"
#include "protocol/node_sample.h"

namespace uplink::protocol {

// Compressed and decompressed; the console's `serve --max-upload-bytes` changes it.
inline constexpr size_t kDefaultMaxUploadBytes = 8 << 20;
inline constexpr size_t kMaxUploadRecords = 10'000;
// One record's payload, serialized compactly: a larger one could not be sent even alone.
inline constexpr size_t kMaxPayloadBytes = 1 << 20;
inline constexpr size_t kMaxPayloadDepth = 32;  // the payload object itself is depth 1
// Parsing stops at this depth: a payload nested between kMaxPayloadDepth and this is refused
// as its record (422), anything deeper as a malformed body (400), since the parser gives up
// before it knows which record it was reading.
inline constexpr size_t kMaxUploadDocumentDepth = 64;
inline constexpr std::int64_t kMaxSequence = (std::int64_t{1} << 53) - 1;

// What the agent's spool lost before it could send it, counted since the spool was created.
struct LossCount {
  std::int64_t records = 0;
  std::int64_t bytes = 0;
};

struct AgentLosses {
  LossCount dropped;   // forced out at the spool's size cap
  LossCount corrupt;   // found damaged on disk
  LossCount rejected;  // refused by the console or not JSON, given up by the agent
};

// What an upload says about itself.
struct UploadEnvelope {
  std::string agent_version;
  std::string agent_instance;  // optional
  std::string stream;          // which spool of the connection, e.g. "node/gpu-node-0001"
  std::string spool_id;        // 32 hex digits; a new one means the agent's spool was recreated
  std::int64_t first_sequence = 0;
  std::int64_t last_sequence = 0;
  AgentLosses losses;
};

// {"sequence", "appended_at", "payload"}: one record of an upload.
json::object EncodeUploadRecord(std::int64_t sequence, WallTime appended_at,
                                const json::value& payload);
// The body: the envelope with `records` (EncodeUploadRecord's, in sequence order).
json::object EncodeUpload(const UploadEnvelope& envelope, json::array records);

// What kind of payload a record carries.
enum class PayloadKind { kOther, kNodeSample, kClusterSnapshot, kExperiments };

struct DecodedRecord {
  std::int64_t sequence = 0;
  WallTime appended_at;
  size_t payload_offset = 0;  // into DecodedUpload::payloads
  size_t payload_size = 0;
  PayloadKind kind = PayloadKind::kOther;
  // Into the decoded payloads of its kind (node_samples, cluster_snapshots,
  // experiment_records); unused for kOther.
  size_t decoded = 0;
};

// An upload, validated: sequences strictly increase within [first_sequence, last_sequence],
// every payload is a JSON object, serialized compactly into `payloads`.
struct DecodedUpload {
  UploadEnvelope envelope;
  std::vector<DecodedRecord> records;
  // Every record's payload back to back: one buffer per upload rather than one per record.
  std::string payloads;
  std::vector<NodeSample> node_samples;
  std::vector<ClusterSnapshot> cluster_snapshots;
  std::vector<ExperimentRecord> experiment_records;

  std::string_view Payload(const DecodedRecord& record) const {
    return std::string_view(payloads).substr(record.payload_offset, record.payload_size);
  }
};

// One record refused for its contents: a 422 invalid_record naming it.
struct InvalidRecord {
  std::int64_t sequence = 0;
  std::string message;
  PayloadKind kind = PayloadKind::kOther;  // the refused record's payload
};

// InvalidArgument (naming the field by its path) for a malformed envelope; the upload, or the
// first record refused for its contents.
Result<std::variant<DecodedUpload, InvalidRecord>> DecodeUpload(const json::value& body);

// The console's acknowledgement. To a node's or a cluster role's stream the console adds the
// role's plan as "plan" (plans.h).
struct UploadReply {
  std::string stream;
  std::int64_t acked_through = 0;  // the agent may consume its spool up to here
  std::int64_t stored = 0;
  std::int64_t duplicates = 0;
  std::optional<WallTime> expires_at;
};

json::object EncodeUploadReply(const UploadReply& reply);
// acked_through of a reply: nullopt when it is missing or not a whole number from 0 up (the
// agent then keeps its records).
std::optional<std::int64_t> DecodeAckedThrough(const json::value& reply);

}  // namespace uplink::protocol
