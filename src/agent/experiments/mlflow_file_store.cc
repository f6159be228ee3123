#include "agent/experiments/mlflow_file_store.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "common/json.h"
#include "common/text.h"
#include "common/yaml.h"

namespace uplink::agent::experiments {
namespace {

constexpr std::string_view kKeyPrefix = "mlflow-dir:";
constexpr size_t kMaxMetaBytes = 64 << 10;
constexpr size_t kMaxValueFileBytes = 64 << 10;
constexpr size_t kMaxMetricFiles = 4096;
constexpr size_t kMaxValueFiles = kMaxFieldsPerMap + 64;

std::uint64_t Mix(std::uint64_t hash, std::int64_t value) {
  return Fingerprint(std::string_view(reinterpret_cast<const char*>(&value), sizeof value), hash);
}

std::int64_t MtimeOf(const std::string& path) {
  auto stat = StatNoFollow(path);
  return stat ? stat->mtime_ns : -1;
}

// The folders and meta.yaml of a run: what changes when anything is added, removed, or the
// run's status moves. Appends to existing metric files and rewritten tags do not show here.
std::uint64_t FolderSignature(const std::string& dir) {
  std::uint64_t hash = Fingerprint("run");
  hash = Mix(hash, MtimeOf(dir));
  auto meta = StatNoFollow(dir + "/meta.yaml");
  hash = Mix(hash, meta ? meta->mtime_ns : -1);
  hash = Mix(hash, meta ? meta->size : -1);
  for (const char* sub : {"/params", "/tags", "/metrics"}) hash = Mix(hash, MtimeOf(dir + sub));
  return hash;
}

// A YAML scalar as text: "0" for experiment_id: '0' and experiment_id: 0 alike.
std::string ScalarText(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  if (!value || value->is_null()) return "";
  if (value->is_string()) return std::string(value->get_string());
  if (value->is_int64()) return std::to_string(value->get_int64());
  if (value->is_uint64()) return std::to_string(value->get_uint64());
  if (value->is_bool()) return value->get_bool() ? "true" : "false";
  if (value->is_double()) return json::serialize(*value);
  return "";
}

std::optional<std::int64_t> Millis(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  if (!value) return std::nullopt;
  if (value->is_int64() && value->get_int64() > 0) return value->get_int64();
  if (value->is_uint64()) return static_cast<std::int64_t>(value->get_uint64());
  return std::nullopt;
}

Result<json::object> ReadMeta(const std::string& path) {
  UPLINK_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path, kMaxMetaBytes));
  auto parsed = ParseYaml(text);
  if (!parsed.ok()) return parsed.status().WithContext(path);
  if (!parsed->is_object()) return InvalidArgumentError(path + " is not a YAML mapping");
  return std::move(parsed->get_object());
}

// Every file under `dir` as key -> content (keys are paths below it: "a/b").
Result<StringMap> ReadValueFiles(const std::string& dir) {
  StringMap values;
  if (!StatNoFollow(dir)) return values;
  UPLINK_ASSIGN_OR_RETURN(std::vector<DirEntry> files, ListFilesRecursive(dir, kMaxValueFiles));
  for (const DirEntry& file : files) {
    UPLINK_ASSIGN_OR_RETURN(std::string value,
                            ReadRegularFile(dir + "/" + file.name, kMaxValueFileBytes));
    values.emplace_back(file.name, std::move(value));
  }
  return values;
}

// Tags can be set again (the file is rewritten in place): their names and times.
std::uint64_t TagSignature(const std::string& dir) {
  std::uint64_t hash = Fingerprint("tags");
  auto tags = ListFilesRecursive(dir + "/tags", kMaxValueFiles);
  if (!tags.ok()) return hash;
  for (const DirEntry& tag : *tags) hash = Mix(Fingerprint(tag.name, hash), tag.stat.mtime_ns);
  return hash;
}

std::string_view TagValue(const StringMap& tags, std::string_view key) {
  for (const auto& [name, value] : tags) {
    if (name == key) return value;
  }
  return {};
}

std::string_view NextField(std::string_view& line) {
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  size_t end = line.find(' ');
  std::string_view field = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  return field;
}

bool ParseInt(std::string_view text, std::int64_t& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool ParseDouble(std::string_view text, double& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec == std::errc::result_out_of_range) {
    // Python writes what it read; a value beyond double's range is an infinity.
    out = text.front() == '-' ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string MlflowStatus(std::string_view status) {
  if (status == "1" || status == "RUNNING") return std::string(kRunRunning);
  if (status == "2" || status == "SCHEDULED") return std::string(kRunScheduled);
  if (status == "3" || status == "FINISHED") return std::string(kRunFinished);
  if (status == "4" || status == "FAILED") return std::string(kRunFailed);
  if (status == "5" || status == "KILLED") return std::string(kRunKilled);
  return "";
}

MetricLines ParseMetricLines(std::string_view text, std::int64_t base_offset) {
  MetricLines out;
  size_t start = 0;
  while (true) {
    size_t newline = text.find('\n', start);
    if (newline == std::string_view::npos) break;
    std::string_view line = text.substr(start, newline - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) {
      std::string_view rest = line;
      std::string_view timestamp = NextField(rest);
      std::string_view value = NextField(rest);
      std::string_view step = NextField(rest);
      std::string_view extra = NextField(rest);
      MetricPoint point;
      bool ok = ParseInt(timestamp, point.timestamp_ms) && ParseDouble(value, point.value) &&
                extra.empty() && (step.empty() || ParseInt(step, point.step));
      if (ok) {
        out.points.push_back(point);
      } else if (out.bad_lines++ == 0) {
        out.first_error = "the line at byte " +
                          std::to_string(base_offset + static_cast<std::int64_t>(start)) +
                          " is not \"<timestamp> <value> <step>\": \"" +
                          OneLineExcerpt(line, 80) + "\"";
      }
    }
    start = newline + 1;
  }
  out.consumed = start;
  return out;
}

MlflowFileStoreScanner::MlflowFileStoreScanner(std::string root) : root_(std::move(root)) {}

Status MlflowFileStoreScanner::Scan(ScanPass& pass) {
  auto root_entries = ListDir(root_);
  if (!root_entries.ok()) return root_entries.status().WithContext("the MLflow folder");
  std::set<std::string> seen;
  for (const DirEntry& entry : *root_entries) {
    // .trash holds deleted experiments; other dot folders and files are not experiments.
    if (!entry.stat.is_dir || entry.name.starts_with(".")) continue;
    const std::string experiment_path = root_ + "/" + entry.name;
    auto meta_stat = StatNoFollow(experiment_path + "/meta.yaml");
    if (!meta_stat || !meta_stat->is_regular) continue;  // "models" and other folders
    const std::string problem_key = std::string(kKeyPrefix) + entry.name;
    auto meta = ReadMeta(experiment_path + "/meta.yaml");
    Status broken = meta.ok() && ScalarText(*meta, "experiment_id").empty()
                        ? InvalidArgumentError(experiment_path + "/meta.yaml has no experiment_id")
                        : meta.status();
    if (!broken.ok()) {
      seen.insert(problem_key);
      // Its runs stay as they were: a half-written meta.yaml must not delete them.
      std::string run_prefix = problem_key + "/";
      auto& runs = pass.cursor.runs();
      for (auto it = runs.lower_bound(run_prefix);
           it != runs.end() && it->first.starts_with(run_prefix); ++it) {
        seen.insert(it->first);
      }
      UPLINK_RETURN_IF_ERROR(ReportProblem(pass, problem_key,
                                           Mix(meta_stat->mtime_ns, meta_stat->size), source(),
                                           entry.name + "/meta.yaml", broken, log_));
      continue;
    }
    if (ScalarText(*meta, "lifecycle_stage") == "deleted") continue;
    Experiment experiment{entry.name, ScalarText(*meta, "experiment_id"),
                          ScalarText(*meta, "name")};
    auto runs = ListDir(experiment_path);
    if (!runs.ok()) {
      // Unreadable for now: keep its runs rather than report them deleted.
      log_.Warn("cannot list an MLflow experiment's runs", {{"error", runs.status()}});
      std::string run_prefix = problem_key + "/";
      for (auto it = pass.cursor.runs().lower_bound(run_prefix);
           it != pass.cursor.runs().end() && it->first.starts_with(run_prefix); ++it) {
        seen.insert(it->first);
      }
      continue;
    }
    for (const DirEntry& run : *runs) {
      if (!run.stat.is_dir || run.name.starts_with(".")) continue;
      auto run_meta = StatNoFollow(experiment_path + "/" + run.name + "/meta.yaml");
      if (!run_meta || !run_meta->is_regular) continue;  // tags/, datasets/, traces/, ...
      UPLINK_RETURN_IF_ERROR(ScanRun(pass, experiment, run.name, seen));
    }
  }
  return ForgetMissing(pass, kKeyPrefix, seen);
}

Status MlflowFileStoreScanner::ScanRun(ScanPass& pass, const Experiment& experiment,
                                       const std::string& run_dir, std::set<std::string>& seen) {
  const std::string key = std::string(kKeyPrefix) + experiment.dir + "/" + run_dir;
  const std::string dir = root_ + "/" + experiment.dir + "/" + run_dir;
  const std::string location = experiment.dir + "/" + run_dir;
  seen.insert(key);
  auto& runs = pass.cursor.runs();
  auto existing = runs.find(key);
  const std::uint64_t signature = FolderSignature(dir);

  // Metric files are watched one by one (their size); tags only while the run is unsettled.
  bool changed = existing == runs.end() || existing->second.signature != signature;
  if (!changed && existing->second.problem_reported) return Status::Ok();
  std::optional<std::vector<DirEntry>> metric_files;
  if (!changed) {
    const RunState& state = existing->second;
    auto listed = ListFilesRecursive(dir + "/metrics", kMaxMetricFiles);
    if (listed.ok()) metric_files = std::move(*listed);
    if (metric_files && state.settled) {
      // Both in name order: one pass compares them.
      changed = metric_files->size() != state.settled_positions.size();
      for (size_t i = 0; !changed && i < metric_files->size(); ++i) {
        const DirEntry& file = (*metric_files)[i];
        const RunState::SettledMetric& settled = state.settled_positions[i];
        changed = settled.name_hash != MetricNameHash(file.name) ||
                  settled.cursor.position != file.stat.size;
      }
    } else if (metric_files) {
      for (const DirEntry& file : *metric_files) {
        auto position = state.metrics.find(file.name);
        if (position == state.metrics.end() || position->second.position != file.stat.size) {
          changed = true;
          break;
        }
      }
      changed = changed || TagSignature(dir) != state.detail_signature;
    }
  }
  if (!changed || !TakeRun(pass)) return Status::Ok();

  auto meta = ReadMeta(dir + "/meta.yaml");
  if (!meta.ok()) {
    return ReportProblem(pass, key, signature, source(), location + "/meta.yaml", meta.status(),
                         log_);
  }
  RunRecord run;
  run.source = "mlflow";
  run.run_id = ScalarText(*meta, "run_id");
  if (run.run_id.empty()) run.run_id = ScalarText(*meta, "run_uuid");
  if (run.run_id.empty()) {
    return ReportProblem(pass, key, signature, source(), location + "/meta.yaml",
                         InvalidArgumentError("meta.yaml has no run_id"), log_);
  }
  if (ScalarText(*meta, "lifecycle_stage") == "deleted") {
    // Deleted in MLflow (it stays on disk until garbage-collected): gone for the console,
    // and remembered as settled so that it is not read again until it changes (a restore).
    RunState& state = runs[key];
    if (state.sent_fingerprint != 0) UPLINK_RETURN_IF_ERROR(pass.emitter.AddDeleted(run.run_id));
    state = RunState{};
    state.run_id = run.run_id;
    state.signature = signature;
    state.terminal = true;
    state.settled = true;
    return Status::Ok();
  }
  auto params = ReadValueFiles(dir + "/params");
  auto tags = params.ok() ? ReadValueFiles(dir + "/tags") : Result<StringMap>(params.status());
  if (!tags.ok()) {
    return ReportProblem(pass, key, signature, source(), location, tags.status(), log_);
  }
  run.experiment_id = experiment.id;
  run.experiment = experiment.name;
  run.status = MlflowStatus(ScalarText(*meta, "status"));
  if (run.status.empty()) {
    return ReportProblem(pass, key, signature, source(), location + "/meta.yaml",
                         InvalidArgumentError("meta.yaml has an unknown status \"" +
                                              OneLineExcerpt(ScalarText(*meta, "status"), 32) +
                                              "\""),
                         log_);
  }
  run.started_at_ms = Millis(*meta, "start_time");
  run.ended_at_ms = Millis(*meta, "end_time");
  run.user = ScalarText(*meta, "user_id");
  if (run.user.empty()) run.user = std::string(TagValue(*tags, "mlflow.user"));
  run.name = std::string(TagValue(*tags, "mlflow.runName"));
  if (run.name.empty()) run.name = ScalarText(*meta, "run_name");
  if (run.name.empty()) run.name = ScalarText(*meta, "name");
  run.location = location;
  run.params = std::move(*params);
  run.tags = std::move(*tags);
  NormalizeRun(run);

  RunState& state = runs[key];
  UPLINK_RETURN_IF_ERROR(UpsertIfChanged(pass, key, state, run).status());
  if (state.settled) {
    // A settled run changed: each metric file it had takes its position back (by the hash of
    // its name), so only what is new is read.
    state.settled = false;
    state.metrics.clear();
    if (!metric_files) {
      auto listed = ListFilesRecursive(dir + "/metrics", kMaxMetricFiles);
      if (listed.ok()) metric_files = std::move(*listed);
    }
    RestoreSettledMetrics(state, [&](auto&& restore) {
      for (const DirEntry& file : metric_files.value_or(std::vector<DirEntry>{})) restore(file.name);
    });
  }
  state.terminal = IsTerminalStatus(run.status);
  state.signature = signature;
  state.detail_signature = TagSignature(dir);
  return ReadMetrics(pass, key, dir, run.run_id, state);
}

Status MlflowFileStoreScanner::ReadMetrics(ScanPass& pass, const std::string& key,
                                           const std::string& dir, const std::string& run_id,
                                           RunState& state) {
  const std::string metrics_dir = dir + "/metrics";
  if (!StatNoFollow(metrics_dir)) return Status::Ok();
  auto files = ListFilesRecursive(metrics_dir, kMaxMetricFiles);
  if (!files.ok()) {
    return ReportProblem(pass, key, state.signature, source(), run_id + "/metrics",
                         files.status(), log_);
  }
  for (const DirEntry& file : *files) {
    MetricCursor& position = state.metrics[file.name];
    if (file.stat.size < position.position) position = MetricCursor{};  // rewritten
    if (file.stat.size == position.position) continue;
    const std::int64_t budget = pass.ReadBudget();
    if (budget <= 0) {
      pass.more = true;  // the next pass sees the size differ and goes on
      continue;
    }
    std::int64_t want = std::min<std::int64_t>(file.stat.size - position.position, budget);
    auto text = ReadFileRange(metrics_dir + "/" + file.name, position.position,
                              static_cast<size_t>(want));
    if (!text.ok()) {
      log_.Warn("cannot read a metric file; trying again next cycle",
                {{"run_id", run_id}, {"error", text.status()}});
      continue;
    }
    MetricLines lines = ParseMetricLines(*text, position.position);
    if (lines.consumed == 0 && want == budget && want < file.stat.size - position.position) {
      // One line longer than the whole budget: skip it rather than stall on it.
      lines.consumed = text->size();
      ++lines.bad_lines;
      lines.first_error = "a line longer than " + std::to_string(want) + " bytes";
    }
    if (lines.bad_lines > 0) {
      log_.Warn("skipping malformed lines of a metric file",
                {{"run_id", run_id}, {"metric", file.name}, {"error", lines.first_error}});
      UPLINK_RETURN_IF_ERROR(pass.emitter.AddProblem(
          source(), run_id + "/metrics/" + file.name,
          std::to_string(lines.bad_lines) + " malformed line(s) skipped; " + lines.first_error));
      ++pass.problems_reported;
    }
    pass.bytes_read += static_cast<std::int64_t>(text->size());
    UPLINK_RETURN_IF_ERROR(pass.emitter.AddPoints(run_id, file.name, lines.points));
    position.position += static_cast<std::int64_t>(lines.consumed);
    if (!lines.points.empty()) pass.touched.insert(key);
  }
  return Status::Ok();
}

}  // namespace uplink::agent::experiments
