#include "agent/experiments/wandb_log.h"

#include <zlib.h>

#include <charconv>
#include <cmath>
#include <limits>

namespace uplink::agent::experiments {
namespace {

constexpr std::string_view kIdent = ":W&B";
constexpr std::uint16_t kMagic = 0xBEE1;  // zlib.crc32("Weights & Biases") & 0xffff
constexpr unsigned char kVersion = 0;
constexpr size_t kChunkHeaderBytes = 7;

enum ChunkType : unsigned char { kFull = 1, kFirst = 2, kMiddle = 3, kLast = 4 };

// Record (wandb_internal.proto) fields this decoder reads.
enum RecordField : std::uint32_t {
  kHistory = 2,
  kSummary = 3,
  kConfig = 5,
  kRun = 17,
  kExit = 18,
  kFinal = 20,
  kFooter = 22,
};

std::uint32_t Le32(const unsigned char* p) {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
         std::uint32_t{p[3]} << 24;
}

std::uint32_t ChunkCrc(unsigned char type, std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, &type, 1);
  // zlib takes lengths as uInt; a chunk is under 32 KiB.
  crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()));
  return static_cast<std::uint32_t>(crc);
}

// The protobuf wire format, just enough to walk a message: varint (0), 64-bit (1),
// length-delimited (2) and 32-bit (5) fields; groups (3, 4) are refused.
class ProtoReader {
 public:
  explicit ProtoReader(std::string_view data) : data_(data) {}

  struct Field {
    std::uint32_t number = 0;
    std::uint32_t wire_type = 0;
    std::uint64_t varint = 0;
    std::string_view bytes;
  };

  // The next field; false at the end or on malformed input (then failed() is true).
  bool Next(Field& field) {
    if (failed_ || pos_ >= data_.size()) return false;
    std::uint64_t key = 0;
    if (!Varint(key) || key >> 3 == 0 || key >> 3 > 0x1fffffff) return Fail();
    field = Field{};
    field.number = static_cast<std::uint32_t>(key >> 3);
    field.wire_type = static_cast<std::uint32_t>(key & 7);
    switch (field.wire_type) {
      case 0:
        return Varint(field.varint) || Fail();
      case 1:
        return Skip(8, field);
      case 5:
        return Skip(4, field);
      case 2: {
        std::uint64_t length = 0;
        if (!Varint(length) || length > data_.size() - pos_) return Fail();
        return Skip(static_cast<size_t>(length), field);
      }
      default:
        return Fail();
    }
  }

  bool failed() const { return failed_; }

 private:
  bool Varint(std::uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      auto byte = static_cast<unsigned char>(data_[pos_++]);
      value |= std::uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes
  }
  bool Skip(size_t count, Field& field) {
    if (count > data_.size() - pos_) return Fail();
    field.bytes = data_.substr(pos_, count);
    pos_ += count;
    return true;
  }
  bool Fail() {
    failed_ = true;
    return false;
  }

  std::string_view data_;
  size_t pos_ = 0;
  bool failed_ = false;
};

using Field = ProtoReader::Field;

// A string field's bytes (wire type 2), or nothing.
bool Bytes(const Field& field, std::string_view& out) {
  if (field.wire_type != 2) return false;
  out = field.bytes;
  return true;
}

// ConfigItem, SummaryItem and HistoryItem share their shape: key 1, nested_key 2 (repeated),
// value_json 16. Nested keys are joined with '.'.
bool ReadItem(std::string_view message, WandbItem& item) {
  ProtoReader reader(message);
  Field field;
  std::string key;
  std::string nested;
  while (reader.Next(field)) {
    std::string_view text;
    if (!Bytes(field, text)) continue;
    if (field.number == 1) {
      key = std::string(text);
    } else if (field.number == 2) {
      if (!nested.empty()) nested += '.';
      nested += text;
    } else if (field.number == 16) {
      item.value_json = std::string(text);
    }
  }
  item.key = nested.empty() ? key : nested;
  return !reader.failed() && !item.key.empty();
}

// ConfigRecord and SummaryRecord: update 1, remove 2 (items).
bool ReadUpdates(std::string_view message, std::vector<WandbItem>& updates,
                 std::vector<std::string>& removes) {
  ProtoReader reader(message);
  Field field;
  while (reader.Next(field)) {
    std::string_view text;
    if (!Bytes(field, text) || (field.number != 1 && field.number != 2)) continue;
    WandbItem item;
    if (!ReadItem(text, item)) return false;
    if (field.number == 1) {
      updates.push_back(std::move(item));
    } else {
      removes.push_back(std::move(item.key));
    }
  }
  return !reader.failed();
}

bool ReadHistory(std::string_view message, WandbHistoryRow& row) {
  ProtoReader reader(message);
  Field field;
  while (reader.Next(field)) {
    std::string_view text;
    if (!Bytes(field, text)) continue;
    if (field.number == 1) {
      WandbItem item;
      if (!ReadItem(text, item)) return false;
      std::optional<double> number = WandbNumber(item.value_json);
      if (item.key == "_step") {
        if (number && !row.step && std::isfinite(*number)) row.step = static_cast<std::int64_t>(*number);
      } else if (item.key == "_timestamp") {
        if (number && std::isfinite(*number)) row.timestamp_s = *number;
      } else if (!item.key.starts_with("_") && number) {
        row.numbers.emplace_back(std::move(item.key), *number);
      }
    } else if (field.number == 2) {  // HistoryStep { num = 1 }
      ProtoReader step(text);
      Field num;
      while (step.Next(num)) {
        if (num.number == 1 && num.wire_type == 0) row.step = static_cast<std::int64_t>(num.varint);
      }
      if (step.failed()) return false;
    }
  }
  return !reader.failed();
}

bool ReadRun(std::string_view message, WandbRunInfo& run, WandbLogEvents& events) {
  ProtoReader reader(message);
  Field field;
  while (reader.Next(field)) {
    std::string_view text;
    if (!Bytes(field, text)) continue;
    switch (field.number) {
      case 1: run.run_id = std::string(text); break;
      case 2: run.entity = std::string(text); break;
      case 3: run.project = std::string(text); break;
      case 4:  // the run's config at start, as a ConfigRecord
        if (!ReadUpdates(text, events.config_updates, events.config_removes)) return false;
        break;
      case 5:
        if (!ReadUpdates(text, events.summary_updates, events.summary_removes)) return false;
        break;
      case 6: run.group = std::string(text); break;
      case 7: run.job_type = std::string(text); break;
      case 8: run.display_name = std::string(text); break;
      case 9: run.notes = std::string(text); break;
      case 10: run.tags.emplace_back(text); break;
      case 13: run.host = std::string(text); break;
      case 17: {  // google.protobuf.Timestamp { seconds = 1; nanos = 2 }
        ProtoReader time(text);
        Field part;
        std::int64_t seconds = 0;
        std::int64_t nanos = 0;
        while (time.Next(part)) {
          if (part.wire_type != 0) continue;
          if (part.number == 1) seconds = static_cast<std::int64_t>(part.varint);
          if (part.number == 2) nanos = static_cast<std::int64_t>(part.varint);
        }
        if (time.failed()) return false;
        if (seconds > 0 && seconds < (std::int64_t{1} << 40)) {
          run.start_time_ms = seconds * 1000 + nanos / 1'000'000;
        }
        break;
      }
      default: break;
    }
  }
  return !reader.failed();
}

// One Record, which ends at file offset `end_offset`; false when it is not a protobuf message.
bool ReadRecord(std::string_view message, std::int64_t end_offset, WandbLogEvents& events) {
  ProtoReader reader(message);
  Field field;
  while (reader.Next(field)) {
    std::string_view text;
    switch (field.number) {
      case kHistory: {
        if (!Bytes(field, text)) break;
        WandbHistoryRow row;
        row.end_offset = end_offset;
        if (!ReadHistory(text, row)) return false;
        if (!row.numbers.empty()) events.history.push_back(std::move(row));
        break;
      }
      case kSummary:
        if (Bytes(field, text) &&
            !ReadUpdates(text, events.summary_updates, events.summary_removes)) {
          return false;
        }
        break;
      case kConfig:
        if (Bytes(field, text) &&
            !ReadUpdates(text, events.config_updates, events.config_removes)) {
          return false;
        }
        break;
      case kRun: {
        if (!Bytes(field, text)) break;
        WandbRunInfo run;
        if (!ReadRun(text, run, events)) return false;
        events.run = std::move(run);
        break;
      }
      case kExit: {  // RunExitRecord { int32 exit_code = 1; int32 runtime = 2 }
        if (!Bytes(field, text)) break;
        ProtoReader exit(text);
        Field part;
        std::int64_t code = 0;
        while (exit.Next(part)) {
          if (part.wire_type != 0) continue;
          // int32 is sign-extended to 64 bits on the wire.
          auto value = static_cast<std::int32_t>(static_cast<std::uint32_t>(part.varint));
          if (part.number == 1) code = value;
          if (part.number == 2 && value >= 0) events.runtime_s = value;
        }
        if (exit.failed()) return false;
        events.exit_code = code;
        break;
      }
      case kFinal:
      case kFooter:
        events.ended = true;
        break;
      default:
        break;
    }
  }
  return !reader.failed();
}

}  // namespace

Status CheckWandbHeader(std::string_view header) {
  if (header.size() < kWandbHeaderBytes) {
    return InvalidArgumentError("the file is shorter than a W&B log header (7 bytes)");
  }
  if (header.substr(0, 4) != kIdent) {
    return InvalidArgumentError("not a W&B transaction log (it does not start with \":W&B\")");
  }
  auto magic = static_cast<std::uint16_t>(static_cast<unsigned char>(header[4]) |
                                          static_cast<unsigned char>(header[5]) << 8);
  if (magic != kMagic) return InvalidArgumentError("the W&B log header has the wrong magic number");
  if (static_cast<unsigned char>(header[6]) != kVersion) {
    return InvalidArgumentError("the W&B log has version " +
                                std::to_string(static_cast<unsigned char>(header[6])) +
                                "; this agent reads version 0");
  }
  return Status::Ok();
}

std::optional<double> WandbNumber(std::string_view value_json) {
  if (value_json == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (value_json == "Infinity") return std::numeric_limits<double>::infinity();
  if (value_json == "-Infinity") return -std::numeric_limits<double>::infinity();
  if (value_json.empty()) return std::nullopt;
  char first = value_json.front();
  if (first != '-' && (first < '0' || first > '9')) return std::nullopt;  // strings, objects
  double value = 0;
  auto [end, ec] = std::from_chars(value_json.data(), value_json.data() + value_json.size(), value);
  if (ec != std::errc() || end != value_json.data() + value_json.size()) return std::nullopt;
  return value;
}

Result<WandbLogEvents> DecodeWandbLog(std::string_view data, std::int64_t start) {
  WandbLogEvents events;
  events.next_offset = start;
  size_t pos = 0;  // in `data`; the file offset is start + pos
  if (start == 0) {
    UPLINK_RETURN_IF_ERROR(CheckWandbHeader(data));
    pos = kWandbHeaderBytes;
    events.next_offset = kWandbHeaderBytes;
  }
  std::string record;  // the record being assembled from FIRST/MIDDLE/LAST chunks
  bool in_record = false;
  bool discarding = false;  // the chunks of a record over kWandbMaxRecordBytes, until its LAST
  auto file_offset = [&](size_t at) { return start + static_cast<std::int64_t>(at); };
  // Damage: the rest of the block is skipped, and the record being assembled is lost.
  auto skip_block = [&] {
    ++events.damaged_chunks;
    if (in_record) ++events.damaged_records;
    in_record = false;
    record.clear();
    size_t in_block = static_cast<size_t>(file_offset(pos) % kWandbBlockBytes);
    pos += kWandbBlockBytes - in_block;
    if (pos > data.size()) pos = data.size();
    events.next_offset = file_offset(pos);
  };
  while (pos < data.size()) {
    const size_t left_in_block = kWandbBlockBytes - static_cast<size_t>(file_offset(pos) % kWandbBlockBytes);
    if (left_in_block < kChunkHeaderBytes) {
      // The block's trailer: zeros the writer padded with.
      if (data.size() - pos < left_in_block) break;  // not all written yet
      pos += left_in_block;
      if (!in_record) events.next_offset = file_offset(pos);
      continue;
    }
    if (data.size() - pos < kChunkHeaderBytes) break;  // a header not fully written yet
    const auto* header = reinterpret_cast<const unsigned char*>(data.data() + pos);
    const std::uint32_t crc = Le32(header);
    const size_t length = header[4] | static_cast<size_t>(header[5]) << 8;
    const unsigned char type = header[6];
    if (crc == 0 && length == 0 && type == 0) {
      // A zeroed rest of block (a preallocated or mmap-written file): skip it.
      if (data.size() - pos < left_in_block) break;
      if (in_record) ++events.damaged_records;
      in_record = false;
      record.clear();
      pos += left_in_block;
      events.next_offset = file_offset(pos);
      continue;
    }
    if (kChunkHeaderBytes + length > left_in_block || type < kFull || type > kLast) {
      skip_block();
      continue;
    }
    if (data.size() - pos < kChunkHeaderBytes + length) break;  // a chunk still being written
    std::string_view payload = data.substr(pos + kChunkHeaderBytes, length);
    if (ChunkCrc(type, payload) != crc) {
      skip_block();
      continue;
    }
    pos += kChunkHeaderBytes + length;
    if (type == kFull || type == kFirst) {
      if (in_record) ++events.damaged_records;  // a record that never got its LAST chunk
      discarding = false;
      record.assign(payload);
      in_record = type == kFirst;
    } else {
      if (!in_record) {
        // MIDDLE or LAST of a record too large to keep, or whose start was lost.
        if (!discarding) ++events.damaged_records;
        discarding = type == kMiddle;
        // Nothing of it is kept: a later call may start after it.
        events.next_offset = file_offset(pos);
        continue;
      }
      if (record.size() + payload.size() > kWandbMaxRecordBytes) {
        ++events.damaged_records;
        in_record = false;
        discarding = type == kMiddle;
        record.clear();
        events.next_offset = file_offset(pos);
        continue;
      }
      record.append(payload);
      if (type == kMiddle) continue;
      in_record = false;
    }
    if (in_record) continue;
    ++events.records;
    if (!ReadRecord(record, file_offset(pos), events)) ++events.damaged_records;
    record.clear();
    events.next_offset = file_offset(pos);
  }
  return events;
}

}  // namespace uplink::agent::experiments
