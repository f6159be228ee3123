// A decoder for W&B's transaction log, `run-<id>.wandb`, written from W&B's public source
// (the Python `datastore.py`, the Go `core/pkg/leveldb` writer, `wandb_internal.proto`):
//
//   header  ":W&B" 0xBEE1 (little endian) 0x00        7 bytes: ident, magic, version
//   blocks  32 KiB, counted from the start of the file (the header is in the first one)
//   chunk   crc32 (4, little endian) | length (2, little endian) | type (1) | data
//           crc32 is zlib's CRC-32 (IEEE, not LevelDB's CRC32C, and not masked) of the type
//           byte followed by the data; type 1 FULL, 2 FIRST, 3 MIDDLE, 4 LAST. A chunk never
//           crosses a block; fewer than 7 bytes left in a block are zero padding.
//   record  one protobuf `Record` (FULL, or FIRST MIDDLE* LAST)
//
// Of each Record only what the console shows is read, by field number: `history` (2),
// `summary` (3), `config` (5), `run` (17), `exit` (18), `final` (20) and `footer` (22); every
// other field is skipped by its wire type. The log is untrusted input: every length is
// checked against what is left, a record is at most 16 MiB, a damaged chunk (bad checksum,
// impossible length or type) loses the rest of its block and the record it was part of, and
// decoding goes on at the next block, as LevelDB's reader recovers. Decoding resumes at any
// record boundary a previous call returned, so a growing log is read once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace uplink::agent::experiments {

inline constexpr size_t kWandbHeaderBytes = 7;
inline constexpr size_t kWandbBlockBytes = 32 * 1024;
inline constexpr size_t kWandbMaxRecordBytes = 16 << 20;

// What one record said that the console keeps.
struct WandbRunInfo {
  std::string run_id;
  std::string entity;
  std::string project;
  std::string display_name;
  std::string group;
  std::string job_type;
  std::string notes;
  std::string host;
  std::vector<std::string> tags;
  std::optional<std::int64_t> start_time_ms;
};

// A config or summary item: its key (nested keys joined with '.') and its value as JSON text.
struct WandbItem {
  std::string key;
  std::string value_json;
};

struct WandbHistoryRow {
  std::int64_t end_offset = 0;        // file offset just after the row's record
  std::optional<std::int64_t> step;   // HistoryRecord.step, else the row's _step
  std::optional<double> timestamp_s;  // the row's _timestamp
  std::vector<std::pair<std::string, double>> numbers;  // numeric values, "_" keys left out
};

// Everything decoded from [start, next_offset) of a log.
struct WandbLogEvents {
  std::optional<WandbRunInfo> run;
  std::vector<WandbItem> config_updates;   // in order; applied after the run record's config
  std::vector<std::string> config_removes;
  std::vector<WandbItem> summary_updates;
  std::vector<std::string> summary_removes;
  std::vector<WandbHistoryRow> history;
  std::optional<std::int64_t> exit_code;
  std::optional<std::int64_t> runtime_s;  // of the exit record: how long the run took
  bool ended = false;  // a final or footer record: the writer closed the log
  std::int64_t next_offset = 0;  // after the last complete record: where to resume
  std::int64_t records = 0;
  std::int64_t damaged_chunks = 0;  // chunks whose checksum, length or type was wrong
  std::int64_t damaged_records = 0; // records lost with them (or too large, or not protobuf)
};

// Checks the 7-byte file header. InvalidArgument saying what is wrong.
Status CheckWandbHeader(std::string_view header);

// Decodes the complete records of `data`, the log's bytes from file offset `start` on
// (`start` is 0, which must hold the header, or a next_offset an earlier call returned). A
// record cut off by the end of `data` is left for a later call: next_offset stops before it.
// The error is for a bad file header only; damage inside is counted and skipped.
Result<WandbLogEvents> DecodeWandbLog(std::string_view data, std::int64_t start);

// A history or summary value as a number: JSON numbers, and "NaN", "Infinity" and
// "-Infinity" (which W&B writes bare); nullopt for anything else.
std::optional<double> WandbNumber(std::string_view value_json);

}  // namespace uplink::agent::experiments
