#include "console/api/upload_batch.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "common/text.h"
#include "console/api/json_fields.h"
#include "console/api/kubectl_results.h"
#include "console/api/node_sample.h"
#include "console/api/right_sizing.h"
#include "console/api/run_records.h"

namespace uplink::console {
namespace {

constexpr size_t kMaxVersionBytes = 256;
constexpr size_t kMaxInstanceBytes = 253;
constexpr size_t kMaxStreamBytes = 253;
constexpr size_t kSpoolIdChars = 32;
// The longest RFC 3339 time with nanoseconds and an offset is 35 bytes; a little headroom.
constexpr size_t kMaxTimeBytes = 64;

bool IsSpoolId(std::string_view id) {
  if (id.size() != kSpoolIdChars) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Nesting depth of a JSON value, counting objects and arrays (a scalar is 0). The document
// was parsed with a depth limit, so the recursion is bounded.
size_t Depth(const json::value& value) {
  size_t deepest = 0;
  if (value.is_object()) {
    for (const auto& field : value.get_object()) deepest = std::max(deepest, Depth(field.value()));
    return deepest + 1;
  }
  if (value.is_array()) {
    for (const auto& item : value.get_array()) deepest = std::max(deepest, Depth(item));
    return deepest + 1;
  }
  return 0;
}

// Appends the compact serialization of `payload` to `out`, giving up once it grows past
// `max_bytes`; false when it did. Written straight into the batch's buffer by a serializer
// reused for every record: no allocation per record.
bool AppendSerialized(const json::value& payload, size_t max_bytes, json::serializer& serializer,
                      std::string& out) {
  size_t start = out.size();
  serializer.reset(&payload);
  char chunk[4096];
  while (!serializer.done()) {
    out.append(serializer.read(chunk));
    if (out.size() - start > max_bytes) return false;
  }
  return true;
}

Result<AgentLosses> ParseLosses(const FieldReader& fields) {
  const json::value* value = fields.Find("losses");
  if (!value) return InvalidArgumentError("losses is required");
  if (!value->is_object()) return InvalidArgumentError("losses must be an object");
  FieldReader losses(value->get_object(), "losses");
  UPLINK_RETURN_IF_ERROR(losses.OnlyFields({"dropped", "corrupt", "rejected"}));
  AgentLosses parsed;
  for (auto [name, count] : {std::pair{"dropped", &parsed.dropped},
                             std::pair{"corrupt", &parsed.corrupt},
                             std::pair{"rejected", &parsed.rejected}}) {
    const json::value* kind = losses.Find(name);
    std::string path = losses.FieldPath(name);
    if (!kind) return InvalidArgumentError(path + " is required");
    if (!kind->is_object()) return InvalidArgumentError(path + " must be an object");
    FieldReader counts(kind->get_object(), path);
    UPLINK_RETURN_IF_ERROR(counts.OnlyFields({"records", "bytes"}));
    UPLINK_ASSIGN_OR_RETURN(count->records, counts.RequiredInt("records", 0, kMaxSequence));
    UPLINK_ASSIGN_OR_RETURN(count->bytes, counts.RequiredInt("bytes", 0, kMaxSequence));
  }
  return parsed;
}

// The sequence of records[index], read before anything else of the record so that every
// later problem can name it. Paths are built only for messages: a valid record allocates
// nothing here.
Result<std::int64_t> ParseSequence(const json::value& value, size_t index) {
  auto path = [&](std::string_view field) {
    std::string text = "records[" + std::to_string(index) + "]";
    if (!field.empty()) text += "." + std::string(field);
    return text;
  };
  if (!value.is_object()) return InvalidArgumentError(path("") + " must be an object");
  const json::object& record = value.get_object();
  for (const auto& field : record) {
    std::string_view key = field.key();
    if (key != "sequence" && key != "appended_at" && key != "payload") {
      return InvalidArgumentError("unknown field \"" + path(OneLineExcerpt(key, 64)) +
                                  "\"; remove it (known fields: sequence appended_at payload)");
    }
  }
  const json::value* sequence = record.if_contains("sequence");
  if (!sequence) return InvalidArgumentError(path("sequence") + " is required");
  bool in_range = (sequence->is_int64() && sequence->get_int64() >= 1 &&
                   sequence->get_int64() <= kMaxSequence) ||
                  (sequence->is_uint64() && sequence->get_uint64() >= 1 &&
                   sequence->get_uint64() <= static_cast<std::uint64_t>(kMaxSequence));
  if (!in_range) {
    return InvalidArgumentError(path("sequence") + " must be an integer from 1 to " +
                                std::to_string(kMaxSequence));
  }
  return sequence->is_int64() ? sequence->get_int64()
                              : static_cast<std::int64_t>(sequence->get_uint64());
}

// The problem with a node sample payload at `path`, or nullopt when it is fine and its figures
// are appended to `batch`. A node's samples belong on its own stream, node/<name>.
std::optional<std::string> ReadNodeSample(const json::object& payload, const std::string& path,
                                          UploadBatch& batch) {
  auto sample = ParseNodeSample(payload, path);
  if (!sample.ok()) return sample.status().message();
  if (!batch.stream.starts_with(kNodeStreamPrefix)) {
    return path + " is a node_sample, which belongs on a node's stream (node/<name>), not on \"" +
           batch.stream + "\"";
  }
  if (std::string_view(batch.stream).substr(kNodeStreamPrefix.size()) != sample->node) {
    return path + ".node is \"" + OneLineExcerpt(sample->node, 253) + "\" but the stream is \"" +
           batch.stream + "\"; each node's samples go on its own stream, node/<name>";
  }
  batch.node_samples.push_back(FiguresOf(*sample));
  return std::nullopt;
}

// The problem with a cluster snapshot payload at `path`, or nullopt when it is fine, `record`
// is marked as one and its pods' usage is added to `batch`. Snapshots belong on a cluster
// role's stream, cluster/....
std::optional<std::string> ReadClusterSnapshot(const json::object& payload,
                                               const std::string& path, UploadBatch& batch,
                                               UploadRecord& record) {
  auto collected_at = ParseClusterSnapshot(payload, path);
  if (!collected_at.ok()) return collected_at.status().message();
  if (!batch.stream.starts_with(kClusterStreamPrefix)) {
    return path + " is a cluster_snapshot, which belongs on a cluster role's stream "
                  "(cluster/...), not on \"" +
           batch.stream + "\"";
  }
  record.cluster_snapshot_at = *collected_at;
  for (PodUsage& usage : PodUsageOfSnapshot(payload, record.sequence, *collected_at)) {
    batch.pod_usage.push_back(std::move(usage));
  }
  return std::nullopt;
}

// The problem with an experiments payload at `path`, or nullopt when it is fine and its items
// are appended to `batch`. They belong on an experiments role's stream, experiments/<pod>.
std::optional<std::string> ReadExperimentRecord(const json::object& payload,
                                                const std::string& path, UploadBatch& batch,
                                                UploadRecord& record) {
  if (!batch.stream.starts_with(kExperimentsStreamPrefix)) {
    return path + " is an experiments record, which belongs on an experiments role's stream "
                  "(experiments/<pod>), not on \"" +
           batch.stream + "\"";
  }
  auto items = ParseExperimentPayload(payload, path);
  if (!items.ok()) return items.status().message();
  batch.experiment_records.push_back(std::move(*items));
  record.experiment_record = batch.experiment_records.size() - 1;
  return std::nullopt;
}

// The problem with the contents of records[index] (whose sequence is known to be in range),
// or nullopt when it is fine and appended to `batch`.
std::optional<std::string> ReadRecord(const json::object& record, size_t index,
                                      std::int64_t sequence, std::int64_t previous,
                                      json::serializer& serializer, UploadBatch& batch) {
  auto path = [&](std::string_view field) {
    return "records[" + std::to_string(index) + "]." + std::string(field);
  };
  if (sequence < batch.first_sequence || sequence > batch.last_sequence) {
    return path("sequence") + " is " + std::to_string(sequence) +
           ", outside first_sequence..last_sequence (" + std::to_string(batch.first_sequence) +
           ".." + std::to_string(batch.last_sequence) + ")";
  }
  if (sequence <= previous) {
    return path("sequence") + " is " + std::to_string(sequence) +
           ", not greater than the record before it (" + std::to_string(previous) +
           "); sequences must strictly increase";
  }
  UploadRecord parsed;
  parsed.sequence = sequence;
  const json::value* appended_at = record.if_contains("appended_at");
  if (!appended_at) return path("appended_at") + " is required";
  std::optional<WallTime> time;
  if (appended_at->is_string() && appended_at->get_string().size() <= kMaxTimeBytes) {
    auto parsed_time = ParseRfc3339(appended_at->get_string());
    if (parsed_time.ok()) time = *parsed_time;
  }
  if (!time) {
    return path("appended_at") + " must be an RFC 3339 time such as \"2026-11-30T03:20:00.125Z\"";
  }
  parsed.appended_at = *time;

  const json::value* payload = record.if_contains("payload");
  if (!payload) return path("payload") + " is required";
  if (!payload->is_object()) return path("payload") + " must be a JSON object";
  if (Depth(*payload) > kMaxPayloadDepth) {
    return path("payload") + " nests deeper than " + std::to_string(kMaxPayloadDepth) + " levels";
  }
  parsed.payload_offset = batch.payloads.size();
  if (!AppendSerialized(*payload, kMaxPayloadBytes, serializer, batch.payloads)) {
    batch.payloads.resize(parsed.payload_offset);
    return path("payload") + " is over " + std::to_string(kMaxPayloadBytes) +
           " bytes serialized; the limit is " + std::to_string(kMaxPayloadBytes);
  }
  parsed.payload_size = batch.payloads.size() - parsed.payload_offset;
  if (IsNodeSamplePayload(payload->get_object())) {
    auto problem = ReadNodeSample(payload->get_object(), path("payload"), batch);
    if (problem) {
      batch.payloads.resize(parsed.payload_offset);
      return problem;
    }
    parsed.node_sample = batch.node_samples.size() - 1;
  } else if (IsClusterSnapshotPayload(payload->get_object())) {
    auto problem = ReadClusterSnapshot(payload->get_object(), path("payload"), batch, parsed);
    if (problem) {
      batch.payloads.resize(parsed.payload_offset);
      return problem;
    }
  } else if (IsExperimentPayload(payload->get_object())) {
    auto problem = ReadExperimentRecord(payload->get_object(), path("payload"), batch, parsed);
    if (problem) {
      batch.payloads.resize(parsed.payload_offset);
      return problem;
    }
  }
  batch.records.push_back(parsed);
  return std::nullopt;
}

}  // namespace

bool IsStreamName(std::string_view name) {
  if (name.empty() || name.size() > kMaxStreamBytes) return false;
  for (char c : name) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '.' || c == '_' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<ParsedUpload> ParseUploadBatch(const json::value& body) {
  if (!body.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  FieldReader fields(body.get_object(), "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"agent_version", "agent_instance", "stream",
                                            "spool_id", "first_sequence", "last_sequence",
                                            "losses", "records"}));
  UploadBatch batch;
  UPLINK_ASSIGN_OR_RETURN(batch.agent_version,
                          fields.RequiredString("agent_version", kMaxVersionBytes));
  UPLINK_ASSIGN_OR_RETURN(auto instance, fields.String("agent_instance", kMaxInstanceBytes));
  batch.agent_instance = instance.value_or("");
  UPLINK_ASSIGN_OR_RETURN(batch.stream, fields.RequiredString("stream", kMaxStreamBytes));
  if (!IsStreamName(batch.stream)) {
    return InvalidArgumentError("stream must be 1-253 characters of A-Z, a-z, 0-9, '.', '_', "
                                "'/' and '-', such as \"node/gpu-node-0001\"");
  }
  UPLINK_ASSIGN_OR_RETURN(batch.spool_id, fields.RequiredString("spool_id", kSpoolIdChars));
  if (!IsSpoolId(batch.spool_id)) {
    return InvalidArgumentError("spool_id must be 32 lower-case hexadecimal digits");
  }
  UPLINK_ASSIGN_OR_RETURN(batch.first_sequence,
                          fields.RequiredInt("first_sequence", 1, kMaxSequence));
  UPLINK_ASSIGN_OR_RETURN(batch.last_sequence,
                          fields.RequiredInt("last_sequence", 1, kMaxSequence));
  if (batch.first_sequence > batch.last_sequence) {
    return InvalidArgumentError("first_sequence (" + std::to_string(batch.first_sequence) +
                                ") must not be greater than last_sequence (" +
                                std::to_string(batch.last_sequence) + ")");
  }
  UPLINK_ASSIGN_OR_RETURN(batch.losses, ParseLosses(fields));

  const json::value* records = fields.Find("records");
  if (!records) return InvalidArgumentError("records is required");
  if (!records->is_array()) return InvalidArgumentError("records must be an array");
  const json::array& list = records->get_array();
  if (list.size() > kMaxUploadRecords) {
    return InvalidArgumentError("records has " + std::to_string(list.size()) +
                                " entries; the limit is " + std::to_string(kMaxUploadRecords) +
                                " per upload");
  }
  batch.records.reserve(list.size());
  json::serializer serializer;
  std::int64_t previous = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    UPLINK_ASSIGN_OR_RETURN(std::int64_t sequence, ParseSequence(list[i], i));
    const json::object& record = list[i].get_object();
    if (auto problem = ReadRecord(record, i, sequence, previous, serializer, batch)) {
      const json::value* payload = record.if_contains("payload");
      bool node_sample =
          payload && payload->is_object() && IsNodeSamplePayload(payload->get_object());
      return ParsedUpload(InvalidRecord{sequence, std::move(*problem), node_sample});
    }
    previous = sequence;
  }
  return ParsedUpload(std::move(batch));
}

}  // namespace uplink::console
