#include "protocol/experiments.h"

#include <array>
#include <cmath>
#include <limits>

#include "common/json.h"
#include "common/text.h"
#include "common/time.h"
#include "protocol/agent_api.h"

namespace uplink::protocol {
namespace {

constexpr std::array<std::string_view, 4> kKinds = {kExperimentRunKind, kMetricPointsKind,
                                                    kRunDeletedKind, kScanProblemKind};
constexpr std::array<std::string_view, 7> kStatuses = {
    kRunRunning, kRunScheduled, kRunFinished, kRunFailed, kRunKilled, kRunCrashed, kRunUnknown};
constexpr size_t kMaxSourceBytes = 32;
constexpr size_t kMaxLocationBytes = 4096;
constexpr size_t kMaxErrorBytes = 1024;
constexpr size_t kMaxNameBytes = 1024;
constexpr size_t kMaxRedacted = 2 * kMaxRunMapEntries + 8;

std::string At(const std::string& path, std::string_view field) {
  return path + "." + std::string(field);
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

bool Printable(std::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

Result<std::int64_t> Integer(const json::value& value, const std::string& path,
                             std::int64_t min = std::numeric_limits<std::int64_t>::min()) {
  std::int64_t number = 0;
  if (value.is_int64()) {
    number = value.get_int64();
  } else if (value.is_uint64() &&
             value.get_uint64() <=
                 static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    number = static_cast<std::int64_t>(value.get_uint64());
  } else {
    return InvalidArgumentError(path + " must be an integer");
  }
  if (number < min) return InvalidArgumentError(path + " must be at least " + std::to_string(min));
  return number;
}

// A finite number, or "NaN", "Infinity" or "-Infinity" (what JSON cannot hold).
Result<double> MetricValue(const json::value& value, const std::string& path) {
  if (value.is_double()) return value.get_double();
  if (value.is_int64()) return static_cast<double>(value.get_int64());
  if (value.is_uint64()) return static_cast<double>(value.get_uint64());
  if (value.is_string()) {
    std::string_view text = value.get_string();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return InvalidArgumentError(path +
                              " must be a number, or \"NaN\", \"Infinity\" or \"-Infinity\"");
}

Result<std::string> Text(const json::object& object, std::string_view key, const std::string& path,
                         size_t max_bytes, bool required) {
  const json::value* value = object.if_contains(key);
  if (!value) {
    if (required) return InvalidArgumentError(At(path, key) + " is required");
    return std::string();
  }
  if (!value->is_string()) return InvalidArgumentError(At(path, key) + " must be a string");
  std::string_view text = value->get_string();
  if (text.size() > max_bytes) {
    return InvalidArgumentError(At(path, key) + " is longer than " + std::to_string(max_bytes) +
                                " bytes");
  }
  return std::string(text);
}

Result<std::string> RunId(const json::value& value, const std::string& path) {
  if (!value.is_string()) return InvalidArgumentError(path + " must be a string");
  std::string_view id = value.get_string();
  if (id.empty() || id.size() > kMaxRunIdBytes || !Printable(id)) {
    return InvalidArgumentError(path + " must be 1-" + std::to_string(kMaxRunIdBytes) +
                                " printable characters");
  }
  return std::string(id);
}

std::optional<WallTime> Time(const json::value& value) {
  if (!value.is_string() || value.get_string().size() > kMaxTimeBytes) return std::nullopt;
  auto parsed = ParseRfc3339(value.get_string());
  if (!parsed.ok()) return std::nullopt;
  return *parsed;
}

// An object of strings (params, tags) within bounds, serialized compactly.
Result<std::string> StringMap(const json::object& run, std::string_view key,
                              const std::string& path) {
  const json::value* value = run.if_contains(key);
  if (!value) return std::string("{}");
  std::string field = At(path, key);
  if (!value->is_object()) return InvalidArgumentError(field + " must be an object of strings");
  const json::object& map = value->get_object();
  if (map.size() > kMaxRunMapEntries) {
    return InvalidArgumentError(field + " has more than " + std::to_string(kMaxRunMapEntries) +
                                " entries");
  }
  for (const auto& entry : map) {
    if (entry.key().empty() || entry.key().size() > kMaxRunKeyBytes) {
      return InvalidArgumentError(field + " has a key that is empty or longer than " +
                                  std::to_string(kMaxRunKeyBytes) + " bytes");
    }
    if (!entry.value().is_string() || entry.value().get_string().size() > kMaxRunValueBytes) {
      return InvalidArgumentError(field + "[\"" + OneLineExcerpt(entry.key(), 64) +
                                  "\"] must be a string of at most " +
                                  std::to_string(kMaxRunValueBytes) + " bytes");
    }
  }
  return json::serialize(map);
}

Result<ExperimentRun> ParseRun(const json::value& value, const std::string& path) {
  if (!value.is_object()) return InvalidArgumentError(path + " must be an object");
  const json::object& object = value.get_object();
  ExperimentRun run;
  const json::value* id = object.if_contains("run_id");
  if (!id) return InvalidArgumentError(At(path, "run_id") + " is required");
  UPLINK_ASSIGN_OR_RETURN(run.run_id, RunId(*id, At(path, "run_id")));
  UPLINK_ASSIGN_OR_RETURN(run.source, Text(object, "source", path, kMaxSourceBytes, true));
  UPLINK_ASSIGN_OR_RETURN(run.status, Text(object, "status", path, 16, true));
  if (!IsRunStatus(run.status) || run.status == kRunUnknown) {
    return InvalidArgumentError(At(path, "status") +
                                " must be running, scheduled, finished, failed, killed or crashed");
  }
  UPLINK_ASSIGN_OR_RETURN(run.experiment_id,
                          Text(object, "experiment_id", path, kMaxRunIdBytes, false));
  UPLINK_ASSIGN_OR_RETURN(run.experiment, Text(object, "experiment", path, kMaxNameBytes, false));
  UPLINK_ASSIGN_OR_RETURN(run.name, Text(object, "name", path, kMaxNameBytes, false));
  UPLINK_ASSIGN_OR_RETURN(run.user, Text(object, "user", path, kMaxRunIdBytes, false));
  UPLINK_ASSIGN_OR_RETURN(run.location, Text(object, "location", path, kMaxLocationBytes, false));
  if (const json::value* offline = object.if_contains("offline")) {
    if (!offline->is_bool())
      return InvalidArgumentError(At(path, "offline") + " must be a boolean");
    run.offline = offline->get_bool();
  }
  for (auto [key, target] :
       {std::pair{"started_at", &run.started_at}, std::pair{"ended_at", &run.ended_at}}) {
    const json::value* time = object.if_contains(key);
    if (!time) continue;
    *target = Time(*time);
    if (!*target) return InvalidArgumentError(At(path, key) + " must be an RFC 3339 time");
  }
  if (const json::value* code = object.if_contains("exit_code")) {
    UPLINK_ASSIGN_OR_RETURN(run.exit_code, Integer(*code, At(path, "exit_code")));
  }
  UPLINK_ASSIGN_OR_RETURN(run.params_json, StringMap(object, "params", path));
  UPLINK_ASSIGN_OR_RETURN(run.tags_json, StringMap(object, "tags", path));
  if (const json::value* summary = object.if_contains("summary")) {
    if (!summary->is_object() || summary->get_object().size() > kMaxRunMapEntries) {
      return InvalidArgumentError(At(path, "summary") + " must be an object of at most " +
                                  std::to_string(kMaxRunMapEntries) + " numbers");
    }
    for (const auto& entry : summary->get_object()) {
      bool finite = entry.value().is_number() && std::isfinite(entry.value().to_number<double>());
      if (!finite || entry.key().size() > kMaxRunKeyBytes) {
        return InvalidArgumentError(At(path, "summary") + " must map keys to numbers");
      }
    }
    run.summary_json = json::serialize(summary->get_object());
  }
  if (const json::value* redacted = object.if_contains("redacted")) {
    bool ok = redacted->is_array() && redacted->get_array().size() <= kMaxRedacted;
    if (ok) {
      for (const json::value& field : redacted->get_array()) {
        ok = ok && field.is_string() && field.get_string().size() <= kMaxRunKeyBytes + 16;
      }
    }
    if (!ok) return InvalidArgumentError(At(path, "redacted") + " must be an array of field names");
    run.redacted_json = json::serialize(redacted->get_array());
  }
  if (const json::value* omitted = object.if_contains("omitted")) {
    UPLINK_ASSIGN_OR_RETURN(run.omitted, Integer(*omitted, At(path, "omitted"), 0));
  }
  return run;
}

Result<RunSeries> ParseSeries(const json::value& value, const std::string& path,
                              size_t& points_left) {
  if (!value.is_object()) return InvalidArgumentError(path + " must be an object");
  const json::object& object = value.get_object();
  RunSeries series;
  const json::value* id = object.if_contains("run_id");
  if (!id) return InvalidArgumentError(At(path, "run_id") + " is required");
  UPLINK_ASSIGN_OR_RETURN(series.run_id, RunId(*id, At(path, "run_id")));
  UPLINK_ASSIGN_OR_RETURN(series.metric, Text(object, "metric", path, kMaxRunKeyBytes, true));
  if (series.metric.empty()) return InvalidArgumentError(At(path, "metric") + " is empty");
  const json::value* points = object.if_contains("points");
  if (!points || !points->is_array()) {
    return InvalidArgumentError(At(path, "points") + " must be an array");
  }
  const json::array& list = points->get_array();
  if (list.size() > points_left) {
    return InvalidArgumentError("the record holds more than " +
                                std::to_string(kMaxPointsPerRecord) + " points");
  }
  points_left -= list.size();
  series.points.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    std::string point_path = Index(At(path, "points"), i);
    if (!list[i].is_array() || list[i].get_array().size() != 3) {
      return InvalidArgumentError(point_path + " must be [step, value, timestamp_ms]");
    }
    const json::array& triple = list[i].get_array();
    RunPoint point;
    UPLINK_ASSIGN_OR_RETURN(point.step, Integer(triple[0], point_path + "[0]"));
    UPLINK_ASSIGN_OR_RETURN(point.value, MetricValue(triple[1], point_path + "[1]"));
    UPLINK_ASSIGN_OR_RETURN(point.timestamp_ms, Integer(triple[2], point_path + "[2]", 0));
    series.points.push_back(point);
  }
  return series;
}

Result<RunProblem> ParseProblem(const json::value& value, const std::string& path) {
  if (!value.is_object()) return InvalidArgumentError(path + " must be an object");
  const json::object& object = value.get_object();
  RunProblem problem;
  UPLINK_ASSIGN_OR_RETURN(problem.source, Text(object, "source", path, kMaxSourceBytes, true));
  UPLINK_ASSIGN_OR_RETURN(problem.location,
                          Text(object, "location", path, kMaxLocationBytes, true));
  UPLINK_ASSIGN_OR_RETURN(problem.error, Text(object, "error", path, kMaxErrorBytes, true));
  return problem;
}

// The payload's array `field`, at most kMaxRunItems long.
Result<const json::array*> Items(const json::object& payload, std::string_view field,
                                 const std::string& path) {
  const json::value* value = payload.if_contains(field);
  if (!value || !value->is_array()) {
    return InvalidArgumentError(At(path, field) + " must be an array");
  }
  if (value->get_array().size() > kMaxRunItems) {
    return InvalidArgumentError(At(path, field) + " has more than " + std::to_string(kMaxRunItems) +
                                " items");
  }
  return &value->get_array();
}

}  // namespace

bool IsRunStatus(std::string_view status) {
  return std::find(kStatuses.begin(), kStatuses.end(), status) != kStatuses.end();
}

bool IsExperimentPayload(const json::object& payload) {
  const json::value* kind = payload.if_contains("kind");
  if (!kind || !kind->is_string()) return false;
  return std::find(kKinds.begin(), kKinds.end(), std::string_view(kind->get_string())) !=
         kKinds.end();
}

Result<ExperimentRecord> DecodeExperimentPayload(const json::object& payload,
                                                 const std::string& path) {
  const std::string_view kind = payload.at("kind").get_string();
  const json::value* version = payload.if_contains("version");
  if (!version || !version->is_int64() || version->get_int64() != kExperimentRecordVersion) {
    return InvalidArgumentError(At(path, "version") + " must be 1 (this console reads " +
                                std::string(kind) + " version 1)");
  }
  ExperimentRecord record;
  if (kind == kExperimentRunKind) {
    UPLINK_ASSIGN_OR_RETURN(const json::array* runs, Items(payload, "runs", path));
    for (size_t i = 0; i < runs->size(); ++i) {
      UPLINK_ASSIGN_OR_RETURN(ExperimentRun run, ParseRun((*runs)[i], Index(At(path, "runs"), i)));
      record.runs.push_back(std::move(run));
    }
  } else if (kind == kMetricPointsKind) {
    UPLINK_ASSIGN_OR_RETURN(const json::array* series, Items(payload, "series", path));
    size_t points_left = kMaxPointsPerRecord;
    for (size_t i = 0; i < series->size(); ++i) {
      UPLINK_ASSIGN_OR_RETURN(RunSeries one,
                              ParseSeries((*series)[i], Index(At(path, "series"), i), points_left));
      record.series.push_back(std::move(one));
    }
  } else if (kind == kRunDeletedKind) {
    UPLINK_ASSIGN_OR_RETURN(const json::array* ids, Items(payload, "run_ids", path));
    for (size_t i = 0; i < ids->size(); ++i) {
      UPLINK_ASSIGN_OR_RETURN(std::string id, RunId((*ids)[i], Index(At(path, "run_ids"), i)));
      record.deleted.push_back(std::move(id));
    }
  } else {
    UPLINK_ASSIGN_OR_RETURN(const json::array* problems, Items(payload, "problems", path));
    for (size_t i = 0; i < problems->size(); ++i) {
      UPLINK_ASSIGN_OR_RETURN(RunProblem problem,
                              ParseProblem((*problems)[i], Index(At(path, "problems"), i)));
      record.problems.push_back(std::move(problem));
    }
  }
  return record;
}

}  // namespace uplink::protocol
