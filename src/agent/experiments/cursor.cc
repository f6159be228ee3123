#include "agent/experiments/cursor.h"

#include <sys/stat.h>

#include <cerrno>

#include "agent/experiments/run_record.h"
#include "common/files.h"
#include "common/json.h"

namespace uplink::agent::experiments {
namespace {

constexpr int kVersion = 1;
// Generous: a settled run takes about 120 bytes, an unfinished one more per metric.
constexpr size_t kMaxCursorBytes = 256 << 20;

// Flags packed in one number: terminal 1, settled 2, problem reported 4.
std::int64_t Flags(const RunState& state) {
  return (state.terminal ? 1 : 0) | (state.settled ? 2 : 0) | (state.problem_reported ? 4 : 0);
}

std::uint64_t Unsigned(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  if (!value) return 0;
  if (value->is_uint64()) return value->get_uint64();
  if (value->is_int64() && value->get_int64() >= 0) return static_cast<std::uint64_t>(value->get_int64());
  return 0;
}

std::int64_t Signed(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  return value && value->is_int64() ? value->get_int64() : 0;
}

}  // namespace

std::uint64_t MetricNameHash(std::string_view name) { return Fingerprint(name); }

Result<Cursor> Cursor::Load(const std::string& path) {
  Cursor cursor;
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 && errno == ENOENT) return cursor;
  auto text = ReadFileBounded(path, kMaxCursorBytes);
  if (!text.ok()) return text.status().WithContext("reading the cursor " + path);
  auto parsed = ParseJson(*text, JsonLimits{kMaxCursorBytes, 16});
  if (!parsed.ok()) return parsed.status().WithContext("the cursor " + path + " is damaged");
  if (!parsed->is_object()) return InvalidArgumentError("the cursor " + path + " is not an object");
  const json::object& root = parsed->get_object();
  if (Signed(root, "version") != kVersion) {
    return InvalidArgumentError("the cursor " + path + " has an unknown version");
  }
  cursor.spool_id_ = StringAt(root, "spool_id");
  for (const auto& entry : ObjectAt(root, "runs")) {
    if (!entry.value().is_object()) continue;
    const json::object& run = entry.value().get_object();
    RunState state;
    state.run_id = StringAt(run, "id");
    state.sent_fingerprint = Unsigned(run, "fp");
    state.signature = Unsigned(run, "sig");
    state.detail_signature = Unsigned(run, "dsig");
    state.last_sequence = Unsigned(run, "seq");
    std::int64_t flags = Signed(run, "f");
    state.terminal = (flags & 1) != 0;
    state.settled = (flags & 2) != 0;
    state.problem_reported = (flags & 4) != 0;
    state.log_offset = Signed(run, "log");
    state.saved_run = StringAt(run, "run");
    for (const auto& metric : ObjectAt(run, "m")) {
      if (!metric.value().is_array() || metric.value().get_array().size() != 2) continue;
      const json::array& pair = metric.value().get_array();
      MetricCursor position;
      if (pair[0].is_int64()) position.position = pair[0].get_int64();
      if (pair[1].is_int64()) position.timestamp_ms = pair[1].get_int64();
      state.metrics.emplace(std::string(metric.key()), position);
    }
    for (const json::value& entry : ArrayAt(run, "sp")) {
      if (!entry.is_array() || entry.get_array().size() != 3) continue;
      const json::array& fields = entry.get_array();
      auto number = [](const json::value& value) {
        return value.is_int64() ? value.get_int64() : 0;
      };
      state.settled_positions.push_back(RunState::SettledMetric{
          fields[0].is_uint64() ? fields[0].get_uint64()
                                : static_cast<std::uint64_t>(number(fields[0])),
          MetricCursor{number(fields[1]), number(fields[2])}});
    }
    cursor.runs_.emplace(std::string(entry.key()), std::move(state));
  }
  return cursor;
}

std::string Cursor::Serialize() const {
  json::object runs;
  runs.reserve(runs_.size());
  for (const auto& [key, state] : runs_) {
    json::object run{{"id", state.run_id},
                     {"fp", state.sent_fingerprint},
                     {"sig", state.signature},
                     {"seq", state.last_sequence},
                     {"f", Flags(state)}};
    if (state.detail_signature != 0) run["dsig"] = state.detail_signature;
    if (state.log_offset != 0) run["log"] = state.log_offset;
    if (!state.saved_run.empty()) run["run"] = state.saved_run;
    if (!state.metrics.empty()) {
      json::object metrics;
      for (const auto& [name, position] : state.metrics) {
        metrics[name] = json::array{position.position, position.timestamp_ms};
      }
      run["m"] = std::move(metrics);
    }
    if (!state.settled_positions.empty()) {
      json::array positions;
      for (const RunState::SettledMetric& metric : state.settled_positions) {
        positions.push_back(
            json::array{metric.name_hash, metric.cursor.position, metric.cursor.timestamp_ms});
      }
      run["sp"] = std::move(positions);
    }
    runs[key] = std::move(run);
  }
  return json::serialize(
      json::object{{"version", kVersion}, {"spool_id", spool_id_}, {"runs", std::move(runs)}});
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
