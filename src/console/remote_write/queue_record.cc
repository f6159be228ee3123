#include "console/remote_write/queue_record.h"

#include <cstdint>

#include "console/remote_write/varint.h"

namespace uplink::console::remote_write {
namespace {

constexpr char kVersion = 0x01;

void PutString(std::string& out, std::string_view text) {
  PutVarint(out, text.size());
  out.append(text);
}

// Reads one string at `at`, advancing it; false when the record ends first.
bool GetString(std::string_view record, size_t& at, std::string& out) {
  std::uint64_t length = 0;
  if (!GetVarint(record, at, length) || length > record.size() - at) return false;
  out.assign(record.substr(at, length));
  at += length;
  return true;
}

}  // namespace

std::string EncodeQueueRecord(std::span<const QueuedSample> samples) {
  std::string record(1, kVersion);
  for (const QueuedSample& sample : samples) {
    PutString(record, sample.connection_id);
    PutString(record, sample.cluster_name);
    PutString(record, sample.payload);
  }
  return record;
}

Result<std::vector<QueuedSample>> DecodeQueueRecord(std::string_view record) {
  if (record.empty() || record[0] != kVersion) {
    return InvalidArgumentError("a remote write queue record of an unknown version");
  }
  std::vector<QueuedSample> samples;
  for (size_t at = 1; at < record.size();) {
    QueuedSample& sample = samples.emplace_back();
    if (!GetString(record, at, sample.connection_id) ||
        !GetString(record, at, sample.cluster_name) || !GetString(record, at, sample.payload)) {
      return InvalidArgumentError("a remote write queue record ends inside sample " +
                                  std::to_string(samples.size()));
    }
  }
  return samples;
}

}  // namespace uplink::console::remote_write
