#include "protocol/upload.h"

#include <algorithm>
#include <utility>

#include "common/json.h"
#include "common/text.h"
#include "protocol/agent_api.h"
#include "protocol/field_reader.h"

namespace uplink::protocol {
namespace {

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

Result<AgentLosses> DecodeLosses(const FieldReader& fields) {
  const json::value* value = fields.Find("losses");
  if (!value) return InvalidArgumentError("losses is required");
  if (!value->is_object()) return InvalidArgumentError("losses must be an object");
  FieldReader losses(value->get_object(), "losses");
  UPLINK_RETURN_IF_ERROR(losses.OnlyFields({"dropped", "corrupt", "rejected"}));
  AgentLosses parsed;
  for (auto [name, count] :
       {std::pair{"dropped", &parsed.dropped}, std::pair{"corrupt", &parsed.corrupt},
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

// Checks that a payload of `what` is on its role's stream ("node/" + its node for a node
// sample); the problem, or nullopt.
std::optional<std::string> WrongStream(const std::string& path, std::string_view stream,
                                       std::string_view what, std::string_view prefix,
                                       std::string_view belongs) {
  if (stream.starts_with(prefix)) return std::nullopt;
  return path + " is " + std::string(what) + ", which belongs on " + std::string(belongs) +
         ", not on \"" + std::string(stream) + "\"";
}

PayloadKind KindOf(const json::value* payload) {
  if (payload == nullptr || !payload->is_object()) return PayloadKind::kOther;
  const json::object& object = payload->get_object();
  if (IsNodeSamplePayload(object)) return PayloadKind::kNodeSample;
  if (IsClusterSnapshotPayload(object)) return PayloadKind::kClusterSnapshot;
  if (IsExperimentPayload(object)) return PayloadKind::kExperiments;
  return PayloadKind::kOther;
}

// Decodes a payload the protocol knows into `upload`, or says what is wrong with it.
std::optional<std::string> DecodePayload(const json::value& value, const std::string& path,
                                         DecodedUpload& upload, DecodedRecord& record) {
  const json::object& payload = value.get_object();
  const std::string& stream = upload.envelope.stream;
  record.kind = KindOf(&value);
  switch (record.kind) {
    case PayloadKind::kNodeSample: {
      auto sample = DecodeNodeSample(payload, path);
      if (!sample.ok()) return sample.status().message();
      if (auto wrong = WrongStream(path, stream, "a node_sample", kNodeStreamPrefix,
                                   "a node's stream (node/<name>)")) {
        return wrong;
      }
      if (std::string_view(stream).substr(kNodeStreamPrefix.size()) != sample->node) {
        return path + ".node is \"" + OneLineExcerpt(sample->node, 253) +
               "\" but the stream is \"" + stream +
               "\"; each node's samples go on its own stream, node/<name>";
      }
      record.decoded = upload.node_samples.size();
      upload.node_samples.push_back(std::move(sample).value());
      break;
    }
    case PayloadKind::kClusterSnapshot: {
      auto snapshot = DecodeClusterSnapshot(payload, path);
      if (!snapshot.ok()) return snapshot.status().message();
      if (auto wrong = WrongStream(path, stream, "a cluster_snapshot", kClusterStreamPrefix,
                                   "a cluster role's stream (cluster/...)")) {
        return wrong;
      }
      record.decoded = upload.cluster_snapshots.size();
      upload.cluster_snapshots.push_back(std::move(snapshot).value());
      break;
    }
    case PayloadKind::kExperiments: {
      if (auto wrong = WrongStream(path, stream, "an experiments record", kExperimentsStreamPrefix,
                                   "an experiments role's stream (experiments/<pod>)")) {
        return wrong;
      }
      auto items = DecodeExperimentPayload(payload, path);
      if (!items.ok()) return items.status().message();
      record.decoded = upload.experiment_records.size();
      upload.experiment_records.push_back(std::move(items).value());
      break;
    }
    case PayloadKind::kOther: break;
  }
  return std::nullopt;
}

// The problem with the contents of records[index] (whose sequence is known to be in range),
// or nullopt when it is fine and appended to `upload`.
std::optional<std::string> DecodeRecord(const json::object& record, size_t index,
                                        std::int64_t sequence, std::int64_t previous,
                                        json::serializer& serializer, DecodedUpload& upload) {
  auto path = [&](std::string_view field) {
    return "records[" + std::to_string(index) + "]." + std::string(field);
  };
  const UploadEnvelope& envelope = upload.envelope;
  if (sequence < envelope.first_sequence || sequence > envelope.last_sequence) {
    return path("sequence") + " is " + std::to_string(sequence) +
           ", outside first_sequence..last_sequence (" + std::to_string(envelope.first_sequence) +
           ".." + std::to_string(envelope.last_sequence) + ")";
  }
  if (sequence <= previous) {
    return path("sequence") + " is " + std::to_string(sequence) +
           ", not greater than the record before it (" + std::to_string(previous) +
           "); sequences must strictly increase";
  }
  DecodedRecord decoded;
  decoded.sequence = sequence;
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
  decoded.appended_at = *time;

  const json::value* payload = record.if_contains("payload");
  if (!payload) return path("payload") + " is required";
  if (!payload->is_object()) return path("payload") + " must be a JSON object";
  if (Depth(*payload) > kMaxPayloadDepth) {
    return path("payload") + " nests deeper than " + std::to_string(kMaxPayloadDepth) + " levels";
  }
  decoded.payload_offset = upload.payloads.size();
  if (!AppendSerialized(*payload, kMaxPayloadBytes, serializer, upload.payloads)) {
    upload.payloads.resize(decoded.payload_offset);
    return path("payload") + " is over " + std::to_string(kMaxPayloadBytes) +
           " bytes serialized; the limit is " + std::to_string(kMaxPayloadBytes);
  }
  decoded.payload_size = upload.payloads.size() - decoded.payload_offset;
  if (auto problem = DecodePayload(*payload, path("payload"), upload, decoded)) {
    upload.payloads.resize(decoded.payload_offset);
    return problem;
  }
  upload.records.push_back(decoded);
  return std::nullopt;
}

}  // namespace

json::object EncodeUploadRecord(std::int64_t sequence, WallTime appended_at,
                                const json::value& payload) {
  return json::object{{"sequence", sequence},
                      {"appended_at", FormatRfc3339Millis(appended_at)},
                      {"payload", payload}};
}

json::object EncodeUpload(const UploadEnvelope& envelope, json::array records) {
  auto loss = [](const LossCount& count) {
    return json::object{{"records", count.records}, {"bytes", count.bytes}};
  };
  json::object body{{"agent_version", envelope.agent_version},
                    {"stream", envelope.stream},
                    {"spool_id", envelope.spool_id},
                    {"first_sequence", envelope.first_sequence},
                    {"last_sequence", envelope.last_sequence},
                    {"losses", json::object{{"dropped", loss(envelope.losses.dropped)},
                                            {"corrupt", loss(envelope.losses.corrupt)},
                                            {"rejected", loss(envelope.losses.rejected)}}},
                    {"records", std::move(records)}};
  if (!envelope.agent_instance.empty()) body["agent_instance"] = envelope.agent_instance;
  return body;
}

Result<std::variant<DecodedUpload, InvalidRecord>> DecodeUpload(const json::value& body) {
  if (!body.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  FieldReader fields(body.get_object(), "");
  UPLINK_RETURN_IF_ERROR(
      fields.OnlyFields({"agent_version", "agent_instance", "stream", "spool_id", "first_sequence",
                         "last_sequence", "losses", "records"}));
  DecodedUpload upload;
  UploadEnvelope& envelope = upload.envelope;
  UPLINK_ASSIGN_OR_RETURN(envelope.agent_version,
                          fields.RequiredPlainString("agent_version", kMaxAgentVersionBytes));
  UPLINK_ASSIGN_OR_RETURN(auto instance, fields.PlainString("agent_instance", kMaxInstanceBytes));
  envelope.agent_instance = instance.value_or("");
  UPLINK_ASSIGN_OR_RETURN(envelope.stream, fields.RequiredString("stream", kMaxStreamBytes));
  if (!IsStreamName(envelope.stream)) {
    return InvalidArgumentError(
        "stream must be 1-253 characters of A-Z, a-z, 0-9, '.', '_', "
        "'/' and '-', such as \"node/gpu-node-0001\"");
  }
  UPLINK_ASSIGN_OR_RETURN(envelope.spool_id, fields.RequiredString("spool_id", kSpoolIdChars));
  if (!IsSpoolId(envelope.spool_id)) {
    return InvalidArgumentError("spool_id must be 32 lower-case hexadecimal digits");
  }
  UPLINK_ASSIGN_OR_RETURN(envelope.first_sequence,
                          fields.RequiredInt("first_sequence", 1, kMaxSequence));
  UPLINK_ASSIGN_OR_RETURN(envelope.last_sequence,
                          fields.RequiredInt("last_sequence", 1, kMaxSequence));
  if (envelope.first_sequence > envelope.last_sequence) {
    return InvalidArgumentError("first_sequence (" + std::to_string(envelope.first_sequence) +
                                ") must not be greater than last_sequence (" +
                                std::to_string(envelope.last_sequence) + ")");
  }
  UPLINK_ASSIGN_OR_RETURN(envelope.losses, DecodeLosses(fields));

  const json::value* records = fields.Find("records");
  if (!records) return InvalidArgumentError("records is required");
  if (!records->is_array()) return InvalidArgumentError("records must be an array");
  const json::array& list = records->get_array();
  if (list.size() > kMaxUploadRecords) {
    return InvalidArgumentError("records has " + std::to_string(list.size()) +
                                " entries; the limit is " + std::to_string(kMaxUploadRecords) +
                                " per upload");
  }
  upload.records.reserve(list.size());
  json::serializer serializer;
  std::int64_t previous = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    UPLINK_ASSIGN_OR_RETURN(std::int64_t sequence, ParseSequence(list[i], i));
    const json::object& record = list[i].get_object();
    if (auto problem = DecodeRecord(record, i, sequence, previous, serializer, upload)) {
      return std::variant<DecodedUpload, InvalidRecord>(
          InvalidRecord{sequence, std::move(*problem), KindOf(record.if_contains("payload"))});
    }
    previous = sequence;
  }
  return std::variant<DecodedUpload, InvalidRecord>(std::move(upload));
}

json::object EncodeUploadReply(const UploadReply& reply) {
  json::object body{{"stream", reply.stream},
                    {"acked_through", reply.acked_through},
                    {"stored", reply.stored},
                    {"duplicates", reply.duplicates}};
  if (reply.expires_at) body["expires_at"] = FormatRfc3339(*reply.expires_at);
  return body;
}

std::optional<std::int64_t> DecodeAckedThrough(const json::value& reply) {
  const json::object* object = reply.if_object();
  const json::value* value = object == nullptr ? nullptr : object->if_contains("acked_through");
  if (value == nullptr) return std::nullopt;
  if (value->is_int64() && value->get_int64() >= 0) return value->get_int64();
  if (value->is_uint64() && value->get_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    return static_cast<std::int64_t>(value->get_uint64());
  }
  return std::nullopt;
}

}  // namespace uplink::protocol
