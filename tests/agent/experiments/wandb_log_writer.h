// Writes W&B transaction logs for tests, the way W&B's Go writer does: the 7-byte header,
// 32 KiB blocks, FULL/FIRST/MIDDLE/LAST chunks with zlib CRC-32 of type and data, and a few
// protobuf Records (history, config, summary, run, exit, footer) encoded by hand. It is the
// other side of the decoder under test, written from the same public description, so that
// tests can grow a real log between a scanner's passes and build hostile inputs.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace uplink::testing {

// Protobuf encoding helpers.
inline void PutVarint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

inline void PutTag(std::string& out, std::uint32_t field, std::uint32_t wire_type) {
  PutVarint(out, (std::uint64_t{field} << 3) | wire_type);
}

inline void PutBytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  PutTag(out, field, 2);
  PutVarint(out, bytes.size());
  out.append(bytes);
}

inline void PutInt(std::string& out, std::uint32_t field, std::int64_t value) {
  PutTag(out, field, 0);
  PutVarint(out, static_cast<std::uint64_t>(value));
}

// An item (HistoryItem, ConfigItem, SummaryItem): key 1, value_json 16.
inline std::string Item(std::string_view key, std::string_view value_json) {
  std::string item;
  PutBytes(item, 1, key);
  PutBytes(item, 16, value_json);
  return item;
}

// Record { history = 2 { item = 1..., step = 2 { num = 1 } } }
inline std::string HistoryRecord(std::int64_t step, double timestamp_s,
                                 const std::vector<std::pair<std::string, std::string>>& values) {
  std::string history;
  for (const auto& [key, value] : values) PutBytes(history, 1, Item(key, value));
  PutBytes(history, 1, Item("_timestamp", std::to_string(timestamp_s)));
  PutBytes(history, 1, Item("_step", std::to_string(step)));
  std::string step_message;
  PutInt(step_message, 1, step);
  PutBytes(history, 2, step_message);
  std::string record;
  PutInt(record, 1, step + 100);  // num
  PutBytes(record, 2, history);
  return record;
}

// Record { config = 5 { update = 1 ... } } (or summary = 3).
inline std::string UpdatesRecord(std::uint32_t field,
                                 const std::vector<std::pair<std::string, std::string>>& values) {
  std::string updates;
  for (const auto& [key, value] : values) PutBytes(updates, 1, Item(key, value));
  std::string record;
  PutBytes(record, field, updates);
  return record;
}

// Record { run = 17 { run_id 1, entity 2, project 3, display_name 8, start_time 17 } }
inline std::string RunRecordMessage(std::string_view id, std::string_view entity,
                                    std::string_view project, std::string_view name,
                                    std::int64_t start_seconds) {
  std::string run;
  PutBytes(run, 1, id);
  PutBytes(run, 2, entity);
  PutBytes(run, 3, project);
  PutBytes(run, 8, name);
  std::string time;
  PutInt(time, 1, start_seconds);
  PutBytes(run, 17, time);
  std::string record;
  PutBytes(record, 17, run);
  return record;
}

// Record { exit = 18 { exit_code = 1, runtime = 2 } }
inline std::string ExitRecord(std::int64_t code, std::int64_t runtime_s) {
  std::string exit;
  PutInt(exit, 1, code);
  PutInt(exit, 2, runtime_s);
  std::string record;
  PutBytes(record, 18, exit);
  return record;
}

// LevelDB-log framing with W&B's header and CRC.
class WandbLogWriter {
 public:
  static constexpr size_t kBlock = 32 * 1024;

  WandbLogWriter() { bytes_ = std::string(":W&B\xe1\xbe\x00", 7); }
  // Goes on writing after an existing log's bytes.
  explicit WandbLogWriter(std::string existing) : bytes_(std::move(existing)) {}

  void Add(std::string_view record) {
    bool first = true;
    do {
      size_t left = kBlock - bytes_.size() % kBlock;
      if (left < 7) {
        bytes_.append(left, '\0');
        left = kBlock;
      }
      size_t room = left - 7;
      size_t take = std::min(room, record.size());
      bool last = take == record.size();
      unsigned char type = first ? (last ? 1 : 2) : (last ? 4 : 3);
      Chunk(type, record.substr(0, take));
      record.remove_prefix(take);
      first = false;
      if (last) break;
    } while (true);
  }

  const std::string& bytes() const { return bytes_; }

 private:
  void Chunk(unsigned char type, std::string_view data) {
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, &type, 1);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()));
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
    bytes_.push_back(static_cast<char>(data.size() & 0xff));
    bytes_.push_back(static_cast<char>(data.size() >> 8));
    bytes_.push_back(static_cast<char>(type));
    bytes_.append(data);
  }

  std::string bytes_;
};

}  // namespace uplink::testing
