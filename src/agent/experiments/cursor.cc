#include "agent/experiments/cursor.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>

#include "agent/experiments/run_record.h"
#include "common/files.h"

namespace uplink::agent::experiments {
namespace {

// The file is text, one line per run and per metric, written and read as a stream: a cursor of
// 10,000 runs is about 6 MiB, and building it as a JSON tree first would take several times
// that in memory.
//
//   uplink-experiments-cursor 2 <spool id>
//   R <key> <run id> <sent fp> <signature> <detail signature> <last sequence> <flags> <log offset>
//   M <name> <position> <timestamp>       a metric of the run above
//   S <name hash> <position> <timestamp>  a settled metric of the run above
//   W <item>                              the run's saved upsert (JSON, one line)
//
// Fingerprints and hashes are hex; keys, ids and names are "=" and the text with '%', spaces
// and control characters as %XX; flags: terminal 1, settled 2, problem reported 4.
constexpr std::string_view kMagic = "uplink-experiments-cursor";
constexpr int kVersion = 2;
// Generous: a settled run takes about 600 bytes, an unfinished one more per metric.
constexpr size_t kMaxCursorBytes = 256 << 20;

std::int64_t Flags(const RunState& state) {
  return (state.terminal ? 1 : 0) | (state.settled ? 2 : 0) | (state.problem_reported ? 4 : 0);
}

// "=" and the text with '%', spaces and control characters as %XX: never an empty field.
void AppendEscaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out += '=';
  for (unsigned char c : text) {
    if (c <= 0x20 || c == '%' || c == 0x7f) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
}

std::optional<std::string> Unescape(std::string_view text) {
  if (!text.starts_with("=")) return std::nullopt;
  text.remove_prefix(1);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= text.size() ||
        std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr != text.data() + i + 3) {
      return std::nullopt;
    }
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

template <typename Number>
void AppendNumber(std::string& out, Number value, int base = 10) {
  char buffer[24];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value, base);
  out += ' ';
  out.append(buffer, end);
}

// Splits a line at spaces; fields are never empty.
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  while (!line.empty()) {
    size_t space = line.find(' ');
    fields.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return fields;
}

template <typename Number>
bool Parse(std::string_view text, Number& value, int base = 10) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return ec == std::errc() && end == text.data() + text.size();
}

Status Damaged(const std::string& path, size_t line) {
  return InvalidArgumentError("the cursor " + path + " is damaged at line " + std::to_string(line));
}

}  // namespace

std::uint64_t MetricNameHash(std::string_view name) { return Fingerprint(name); }

Result<Cursor> Cursor::Load(const std::string& path) {
  Cursor cursor;
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 && errno == ENOENT) return cursor;
  auto text = ReadFileBounded(path, kMaxCursorBytes);
  if (!text.ok()) return text.status().WithContext("reading the cursor " + path);
  std::string_view rest = *text;
  RunState* run = nullptr;
  for (size_t number = 1; !rest.empty(); ++number) {
    size_t newline = rest.find('\n');
    if (newline == std::string_view::npos) return Damaged(path, number);  // a cut-off file
    std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline + 1);
    if (number == 1) {
      std::vector<std::string_view> header = Fields(line);
      int version = 0;
      if (header.size() < 2 || header[0] != kMagic || !Parse(header[1], version)) {
        return InvalidArgumentError("the cursor " + path + " is damaged: not a cursor file");
      }
      if (version != kVersion) {
        return InvalidArgumentError("the cursor " + path + " has an unknown version");
      }
      if (header.size() > 2) {
        auto spool_id = Unescape(header[2]);
        if (!spool_id) return Damaged(path, number);
        cursor.spool_id_ = std::move(*spool_id);
      }
      continue;
    }
    if (line.starts_with("W ")) {
      if (run == nullptr) return Damaged(path, number);
      run->saved_run = std::string(line.substr(2));
      continue;
    }
    std::vector<std::string_view> fields = Fields(line);
    if (fields.empty()) return Damaged(path, number);
    if (fields[0] == "R" && fields.size() == 9) {
      auto key = Unescape(fields[1]);
      auto id = Unescape(fields[2]);
      RunState state;
      std::int64_t flags = 0;
      if (!key || !id || !Parse(fields[3], state.sent_fingerprint, 16) ||
          !Parse(fields[4], state.signature, 16) || !Parse(fields[5], state.detail_signature, 16) ||
          !Parse(fields[6], state.last_sequence) || !Parse(fields[7], flags) ||
          !Parse(fields[8], state.log_offset)) {
        return Damaged(path, number);
      }
      state.run_id = std::move(*id);
      state.terminal = (flags & 1) != 0;
      state.settled = (flags & 2) != 0;
      state.problem_reported = (flags & 4) != 0;
      run = &cursor.runs_.insert_or_assign(std::move(*key), std::move(state)).first->second;
    } else if (fields[0] == "M" && fields.size() == 4 && run != nullptr) {
      auto name = Unescape(fields[1]);
      MetricCursor metric;
      if (!name || !Parse(fields[2], metric.position) || !Parse(fields[3], metric.timestamp_ms)) {
        return Damaged(path, number);
      }
      run->metrics.insert_or_assign(std::move(*name), metric);
    } else if (fields[0] == "S" && fields.size() == 4 && run != nullptr) {
      RunState::SettledMetric metric;
      if (!Parse(fields[1], metric.name_hash, 16) || !Parse(fields[2], metric.cursor.position) ||
          !Parse(fields[3], metric.cursor.timestamp_ms)) {
        return Damaged(path, number);
      }
      run->settled_positions.push_back(metric);
    } else {
      return Damaged(path, number);
    }
  }
  return cursor;
}

std::string Cursor::Serialize() const {
  std::string out;
  out += kMagic;
  AppendNumber(out, kVersion);
  if (!spool_id_.empty()) {
    out += ' ';
    AppendEscaped(out, spool_id_);
  }
  out += '\n';
  for (const auto& [key, state] : runs_) {
    out += 'R';
    out += ' ';
    AppendEscaped(out, key);
    out += ' ';
    AppendEscaped(out, state.run_id);
    AppendNumber(out, state.sent_fingerprint, 16);
    AppendNumber(out, state.signature, 16);
    AppendNumber(out, state.detail_signature, 16);
    AppendNumber(out, state.last_sequence);
    AppendNumber(out, Flags(state));
    AppendNumber(out, state.log_offset);
    out += '\n';
    for (const auto& [name, metric] : state.metrics) {
      out += "M ";
      AppendEscaped(out, name);
      AppendNumber(out, metric.position);
      AppendNumber(out, metric.timestamp_ms);
      out += '\n';
    }
    for (const RunState::SettledMetric& metric : state.settled_positions) {
      out += 'S';
      AppendNumber(out, metric.name_hash, 16);
      AppendNumber(out, metric.cursor.position);
      AppendNumber(out, metric.cursor.timestamp_ms);
      out += '\n';
    }
    if (!state.saved_run.empty()) {
      // A run item is compact JSON: it has no raw newline.
      out += "W ";
      out += state.saved_run;
      out += '\n';
    }
  }
  return out;
}

Status Cursor::Save(const std::string& path) const {
  return WriteFileAtomic(path, Serialize());
}

size_t Cursor::Settle(std::uint64_t consumed_through) {
  size_t settled = 0;
  for (auto& [key, state] : runs_) {
    if (state.settled || !state.terminal || state.last_sequence > consumed_through) continue;
    state.settled = true;
    state.settled_positions.clear();
    for (const auto& [name, cursor] : state.metrics) {
      state.settled_positions.push_back(RunState::SettledMetric{MetricNameHash(name), cursor});
    }
    state.metrics.clear();
    state.saved_run.clear();
    state.detail_signature = 0;
    ++settled;
  }
  return settled;
}

}  // namespace uplink::agent::experiments
