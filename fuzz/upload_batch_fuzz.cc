// Agents' upload bodies (POST /api/v1/agent/uploads), decoded as the console does. Whatever the
// input, an accepted batch must satisfy what the store relies on: a valid stream and spool id,
// a sane range, strictly increasing sequences inside it, payloads that are JSON objects
// within the limits, and experiments records only on an experiments stream.
#include <cstdint>
#include <string_view>
#include <variant>

#include "common/json.h"
#include "console/api/upload_batch.h"
#include "fuzz_check.h"
#include "protocol/agent_api.h"
#include "protocol/upload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace uplink;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto document = ParseJson(text, JsonLimits{1 << 20, protocol::kMaxUploadDocumentDepth});
  if (!document.ok()) return 0;
  auto parsed = protocol::DecodeUpload(*document);
  if (!parsed.ok()) {
    FUZZ_CHECK(!parsed.status().message().empty());
    return 0;
  }
  if (const auto* invalid = std::get_if<protocol::InvalidRecord>(&*parsed)) {
    FUZZ_CHECK(!invalid->message.empty());
    return 0;
  }
  const console::UploadBatch batch =
      console::StoreBatchOf(std::get<protocol::DecodedUpload>(std::move(*parsed)));
  FUZZ_CHECK(protocol::IsStreamName(batch.stream));
  FUZZ_CHECK(batch.spool_id.size() == 32);
  FUZZ_CHECK(batch.first_sequence >= 1);
  FUZZ_CHECK(batch.first_sequence <= batch.last_sequence);
  FUZZ_CHECK(batch.last_sequence <= protocol::kMaxSequence);
  FUZZ_CHECK(batch.records.size() <= protocol::kMaxUploadRecords);
  std::int64_t previous = batch.first_sequence - 1;
  for (const console::UploadRecord& record : batch.records) {
    FUZZ_CHECK(record.sequence > previous);
    FUZZ_CHECK(record.sequence <= batch.last_sequence);
    previous = record.sequence;
    std::string_view payload = batch.Payload(record);
    FUZZ_CHECK(payload.size() <= protocol::kMaxPayloadBytes);
    auto reparsed = ParseJson(payload, JsonLimits{protocol::kMaxPayloadBytes, 64});
    FUZZ_CHECK(reparsed.ok());
    FUZZ_CHECK(reparsed->is_object());
    if (record.experiment_record) {
      FUZZ_CHECK(*record.experiment_record < batch.experiment_records.size());
      FUZZ_CHECK(batch.stream.starts_with("experiments/"));
    }
  }
  return 0;
}
