// The body of POST /api/v1/agent/uploads (docs/protocol.md), read strictly. A malformed
// envelope is refused as a whole (400); a problem with one record's contents names that
// record's sequence (422), so that the agent can give up that record alone and send the
// rest again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "common/json.h"
#include "common/status.h"
#include "console/store/store.h"

namespace uplink::console {

// Compressed and decompressed; `serve --max-upload-bytes` changes it.
inline constexpr size_t kDefaultMaxUploadBytes = 8 << 20;
inline constexpr size_t kMaxUploadRecords = 10'000;
inline constexpr size_t kMaxPayloadBytes = 1 << 20;  // serialized
inline constexpr size_t kMaxPayloadDepth = 32;       // the payload object itself is depth 1
// Parsing stops at this depth: a payload nested between kMaxPayloadDepth and this is refused
// as its record (422), anything deeper as a malformed body (400), since the parser gives up
// before it knows which record it was reading.
inline constexpr size_t kMaxUploadDocumentDepth = 64;
inline constexpr std::int64_t kMaxSequence = (std::int64_t{1} << 53) - 1;

// One record refused for its contents: a 422 invalid_record naming it.
struct InvalidRecord {
  std::int64_t sequence = 0;
  std::string message;
  bool node_sample = false;  // the record's payload is a node sample
};

using ParsedUpload = std::variant<UploadBatch, InvalidRecord>;

// The streams of the node role: "node/" + the node's name.
inline constexpr std::string_view kNodeStreamPrefix = "node/";

// 1-253 characters of [A-Za-z0-9._/-], as "node/gpu-node-0001".
bool IsStreamName(std::string_view name);

// InvalidArgument (naming the field by its path) for a malformed envelope; the batch, or the
// first record refused for its contents. A node sample (payload kind "node_sample") is also
// read as docs/protocol.md, "Node samples", says, and refused when it is not valid or not on
// its node's stream; likewise a cluster snapshot (payload kind "cluster_snapshot",
// "Cluster snapshots"), which belongs on a cluster role's stream, and the experiments role's
// records ("Experiment runs", run_records.h), which belong on an experiments stream.
Result<ParsedUpload> ParseUploadBatch(const json::value& body);

}  // namespace uplink::console
