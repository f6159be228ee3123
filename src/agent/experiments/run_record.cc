#include "agent/experiments/run_record.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "agent/experiments/redaction.h"
#include "common/json.h"
#include "common/text.h"
#include "common/time.h"

namespace uplink::agent::experiments {
namespace {

std::string Rfc3339FromMillis(std::int64_t millis) {
  return FormatRfc3339Millis(WallTime(std::chrono::milliseconds(millis)));
}

// Keeps the first kMaxFieldsPerMap entries by key, each key and value within bounds and
// valid UTF-8; counts what it drops.
template <typename Entry>
void Bound(std::vector<Entry>& entries, size_t& omitted) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.first < b.first; });
  // A key seen twice keeps its last value (a tag set again).
  std::vector<Entry> unique;
  unique.reserve(entries.size());
  for (Entry& entry : entries) {
    if (!unique.empty() && unique.back().first == entry.first) {
      unique.back() = std::move(entry);
    } else {
      unique.push_back(std::move(entry));
    }
  }
  entries = std::move(unique);
  std::vector<Entry> kept;
  for (Entry& entry : entries) {
    if (entry.first.empty() || entry.first.size() > kMaxKeyBytes || kept.size() >= kMaxFieldsPerMap) {
      ++omitted;
      continue;
    }
    entry.first = ValidUtf8(entry.first);
    kept.push_back(std::move(entry));
  }
  entries = std::move(kept);
}

void BoundValues(StringMap& entries) {
  for (auto& [key, value] : entries) {
    if (value.size() > kMaxValueBytes) {
      // Cut at a character boundary: ValidUtf8 repairs a sequence the cut split.
      value = ValidUtf8(std::string_view(value).substr(0, kMaxValueBytes));
    } else {
      value = ValidUtf8(value);
    }
  }
}

// Cuts the longest values (to kCutValueBytes) until params and tags together fit in
// kMaxRunPayloadBytes with room for the rest of the payload; each cut counts as omitted.
void FitBudget(StringMap& params, StringMap& tags, size_t& omitted) {
  constexpr size_t kBudget = kMaxRunPayloadBytes - (32 << 10);
  constexpr size_t kCutValueBytes = 256;
  size_t total = 0;
  std::vector<std::string*> values;
  for (StringMap* map : {&params, &tags}) {
    for (auto& [key, value] : *map) {
      // Escaping can double a value's size; count it as if it did.
      total += key.size() + 2 * value.size() + 8;
      values.push_back(&value);
    }
  }
  if (total <= kBudget) return;
  std::sort(values.begin(), values.end(),
            [](const std::string* a, const std::string* b) { return a->size() > b->size(); });
  for (std::string* value : values) {
    if (total <= kBudget || value->size() <= kCutValueBytes) break;
    total -= 2 * (value->size() - kCutValueBytes);
    *value = ValidUtf8(std::string_view(*value).substr(0, kCutValueBytes));
    ++omitted;
  }
}

void Redact(StringMap& entries, std::string_view prefix, std::vector<std::string>& redacted) {
  for (auto& [key, value] : entries) {
    if (value == kRedactedValue || MustRedact(key, value)) {
      value = std::string(kRedactedValue);
      redacted.push_back(std::string(prefix) + key);
    }
  }
}

void AppendNumber(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "\"NaN\"";
  } else if (std::isinf(value)) {
    out += value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  } else {
    char buffer[32];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    out.append(buffer, ec == std::errc() ? end : buffer);
  }
}

void AppendInt(std::string& out, std::int64_t value) {
  char buffer[24];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, end);
}

// A JSON string, escaped (serialize does the escaping; the key is short).
void AppendString(std::string& out, std::string_view text) {
  out += json::serialize(json::value(text));
}

json::object MapJson(const StringMap& entries) {
  json::object object;
  object.reserve(entries.size());
  for (const auto& [key, value] : entries) object[key] = value;
  return object;
}

}  // namespace

bool IsTerminalStatus(std::string_view status) {
  return status == kRunFinished || status == kRunFailed || status == kRunKilled ||
         status == kRunCrashed;
}

void NormalizeRun(RunRecord& run) {
  run.redacted.clear();
  Bound(run.params, run.omitted);
  Bound(run.tags, run.omitted);
  Bound(run.summary, run.omitted);
  // Redacted before values are cut: a cut credential might no longer look like one.
  Redact(run.params, "params.", run.redacted);
  Redact(run.tags, "tags.", run.redacted);
  BoundValues(run.params);
  BoundValues(run.tags);
  FitBudget(run.params, run.tags, run.omitted);
  run.summary.erase(std::remove_if(run.summary.begin(), run.summary.end(),
                                   [&](const auto& entry) {
                                     if (!IsSecretKey(entry.first)) return false;
                                     // A number under a secret's name is no secret, but
                                     // it is not a metric either.
                                     ++run.omitted;
                                     return true;
                                   }),
                    run.summary.end());
  run.name = ValidUtf8(run.name.substr(0, std::min<size_t>(run.name.size(), 1024)));
  run.user = ValidUtf8(run.user.substr(0, std::min<size_t>(run.user.size(), 256)));
  run.experiment =
      ValidUtf8(run.experiment.substr(0, std::min<size_t>(run.experiment.size(), 1024)));
  if (LooksLikeCredential(run.name)) {
    run.name = std::string(kRedactedValue);
    run.redacted.push_back("name");
  }
}

std::string RunItem(const RunRecord& run) {
  json::object payload{{"source", run.source},
                       {"run_id", run.run_id},
                       {"experiment_id", run.experiment_id},
                       {"experiment", run.experiment},
                       {"name", run.name},
                       {"user", run.user},
                       {"status", run.status},
                       {"offline", run.offline},
                       {"location", ValidUtf8(run.location)},
                       {"params", MapJson(run.params)},
                       {"tags", MapJson(run.tags)}};
  if (run.started_at_ms) payload["started_at"] = Rfc3339FromMillis(*run.started_at_ms);
  if (run.ended_at_ms) payload["ended_at"] = Rfc3339FromMillis(*run.ended_at_ms);
  if (run.exit_code) payload["exit_code"] = *run.exit_code;
  if (!run.summary.empty()) {
    json::object summary;
    for (const auto& [key, value] : run.summary) {
      if (std::isfinite(value)) summary[key] = value;
    }
    payload["summary"] = std::move(summary);
  }
  if (!run.redacted.empty()) {
    json::array redacted;
    for (const std::string& field : run.redacted) redacted.push_back(json::value(field));
    payload["redacted"] = std::move(redacted);
  }
  if (run.omitted > 0) payload["omitted"] = run.omitted;
  return json::serialize(payload);
}

std::vector<std::string> SeriesItems(std::string_view run_id, std::string_view metric,
                                     const std::vector<MetricPoint>& points, size_t max_bytes) {
  std::vector<std::string> items;
  std::string head = "{\"run_id\":";
  AppendString(head, run_id);
  head += ",\"metric\":";
  AppendString(head, ValidUtf8(metric));
  head += ",\"points\":[";
  std::string current;
  std::string point;
  for (const MetricPoint& p : points) {
    point.clear();
    point += '[';
    AppendInt(point, p.step);
    point += ',';
    AppendNumber(point, p.value);
    point += ',';
    AppendInt(point, p.timestamp_ms);
    point += ']';
    bool empty = current.empty();
    if (!empty && current.size() + 1 + point.size() + 2 > max_bytes) {
      current += "]}";
      items.push_back(std::move(current));
      current.clear();
      empty = true;
    }
    if (empty) {
      current = head;
    } else {
      current += ',';
    }
    current += point;
  }
  if (!current.empty()) {
    current += "]}";
    items.push_back(std::move(current));
  }
  return items;
}

std::optional<RunRecord> RunFromItem(std::string_view item) {
  auto parsed = ParseJson(item, JsonLimits{kMaxRunPayloadBytes * 2, 16});
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  const json::object& object = parsed->get_object();
  RunRecord run;
  run.source = StringAt(object, "source");
  run.run_id = StringAt(object, "run_id");
  run.experiment_id = StringAt(object, "experiment_id");
  run.experiment = StringAt(object, "experiment");
  run.name = StringAt(object, "name");
  run.user = StringAt(object, "user");
  run.status = StringAt(object, "status");
  run.location = StringAt(object, "location");
  if (const json::value* offline = object.if_contains("offline"); offline && offline->is_bool()) {
    run.offline = offline->get_bool();
  }
  auto millis = [&](std::string_view key) -> std::optional<std::int64_t> {
    auto time = ParseRfc3339(StringAt(object, key));
    if (!time.ok()) return std::nullopt;
    return std::chrono::duration_cast<std::chrono::milliseconds>(time->time_since_epoch()).count();
  };
  run.started_at_ms = millis("started_at");
  run.ended_at_ms = millis("ended_at");
  if (const json::value* code = object.if_contains("exit_code"); code && code->is_int64()) {
    run.exit_code = code->get_int64();
  }
  for (auto [field, map] : {std::pair{"params", &run.params}, std::pair{"tags", &run.tags}}) {
    for (const auto& entry : ObjectAt(object, field)) {
      if (entry.value().is_string()) map->emplace_back(entry.key(), entry.value().get_string());
    }
  }
  for (const auto& entry : ObjectAt(object, "summary")) {
    if (entry.value().is_number()) run.summary.emplace_back(entry.key(), entry.value().to_number<double>());
  }
  if (run.run_id.empty()) return std::nullopt;
  return run;
}

std::string ProblemItem(std::string_view source, std::string_view location,
                        std::string_view error) {
  return json::serialize(json::object{{"source", source},
                                      {"location", ValidUtf8(location.substr(0, 4096))},
                                      {"error", ValidUtf8(error.substr(0, 1024))}});
}

std::uint64_t Fingerprint(std::string_view data, std::uint64_t seed) {
  std::uint64_t hash = seed;
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace uplink::agent::experiments
