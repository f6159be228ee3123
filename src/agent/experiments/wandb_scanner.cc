#include "agent/experiments/wandb_scanner.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "agent/experiments/wandb_log.h"
#include "common/files.h"
#include "common/json.h"
#include "common/text.h"
#include "common/time.h"
#include "common/yaml.h"

namespace uplink::agent::experiments {
namespace {

constexpr std::string_view kKeyPrefix = "wandb:";
constexpr size_t kMaxFileBytes = 4 << 20;  // metadata, config and summary files
constexpr std::int64_t kMinRead = 1 << 20;
constexpr std::int64_t kMaxRead = static_cast<std::int64_t>(kWandbMaxRecordBytes) + (1 << 20);

std::uint64_t Mix(std::uint64_t hash, std::int64_t value) {
  return Fingerprint(std::string_view(reinterpret_cast<const char*>(&value), sizeof value), hash);
}

std::uint64_t MixStat(std::uint64_t hash, const std::string& path) {
  auto stat = StatNoFollow(path);
  hash = Mix(hash, stat ? stat->mtime_ns : -1);
  return Mix(hash, stat ? stat->size : -1);
}

void Set(StringMap& map, std::string key, std::string value) {
  for (auto& entry : map) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  map.emplace_back(std::move(key), std::move(value));
}

template <typename Map>
void Remove(Map& map, std::string_view key) {
  map.erase(std::remove_if(map.begin(), map.end(),
                           [&](const auto& entry) { return entry.first == key; }),
            map.end());
}

void SetNumber(std::vector<std::pair<std::string, double>>& summary, std::string key, double value) {
  for (auto& entry : summary) {
    if (entry.first == key) {
      entry.second = value;
      return;
    }
  }
  summary.emplace_back(std::move(key), value);
}

// A JSON value as a param's text: a string as it is, a number as people write it ("0.9",
// not JSON's "9E-1"), anything else as compact JSON.
std::string ParamText(const json::value& value) {
  if (value.is_string()) return std::string(value.get_string());
  if (value.is_double()) {
    char text[32];
    auto [end, ec] = std::to_chars(text, text + sizeof text, value.get_double());
    if (ec == std::errc()) return std::string(text, end);
  }
  return json::serialize(value);
}

// A config item's value_json as a param's text; W&B's own JSON text is kept for numbers.
std::string ParamTextFromJson(std::string_view value_json) {
  auto parsed = ParseJson(value_json, JsonLimits{1 << 20, 32});
  if (!parsed.ok() || parsed->is_number()) return std::string(TrimWhitespace(value_json));
  return ParamText(*parsed);
}

// files/config.yaml: each key's {desc, value} or {value} (W&B's own `_wandb` and
// `wandb_version` left out).
StringMap ReadConfigYaml(const std::string& path) {
  StringMap params;
  auto text = ReadRegularFile(path, kMaxFileBytes);
  if (!text.ok()) return params;
  auto parsed = ParseYaml(*text);
  if (!parsed.ok() || !parsed->is_object()) return params;
  for (const auto& entry : parsed->get_object()) {
    if (entry.key().starts_with("_") || entry.key() == "wandb_version") continue;
    const json::value& node = entry.value();
    const json::value* value = node.is_object() ? node.get_object().if_contains("value") : nullptr;
    params.emplace_back(entry.key(), ParamText(value ? *value : node));
  }
  return params;
}

// files/wandb-summary.json: its numbers ("_" keys left out).
std::vector<std::pair<std::string, double>> ReadSummaryJson(const std::string& path) {
  std::vector<std::pair<std::string, double>> summary;
  auto text = ReadRegularFile(path, kMaxFileBytes);
  if (!text.ok()) return summary;
  auto parsed = ParseJson(*text, JsonLimits{kMaxFileBytes, 64});
  if (!parsed.ok() || !parsed->is_object()) return summary;
  for (const auto& entry : parsed->get_object()) {
    if (entry.key().starts_with("_") || !entry.value().is_number()) continue;
    summary.emplace_back(entry.key(), entry.value().to_number<double>());
  }
  return summary;
}

struct Metadata {
  std::string user;
  std::string host;
  std::optional<std::int64_t> started_at_ms;
};

// files/wandb-metadata.json, old and new shapes alike for the fields read here.
Metadata ReadMetadata(const std::string& path) {
  Metadata metadata;
  auto text = ReadRegularFile(path, kMaxFileBytes);
  if (!text.ok()) return metadata;
  auto parsed = ParseJson(*text, JsonLimits{kMaxFileBytes, 64});
  if (!parsed.ok() || !parsed->is_object()) return metadata;
  const json::object& object = parsed->get_object();
  metadata.user = StringAt(object, "username");
  metadata.host = StringAt(object, "host");
  std::string started = StringAt(object, "startedAt");
  // W&B wrote UTC without a zone before 0.19.
  if (!started.empty() && started.back() != 'Z') started += 'Z';
  if (auto time = ParseRfc3339(started); time.ok()) {
    metadata.started_at_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(time->time_since_epoch()).count();
  }
  return metadata;
}

// "run-<id>.wandb" -> "<id>"; "" for any other name.
std::string IdFromLogName(std::string_view name) {
  if (!name.starts_with("run-") || !name.ends_with(".wandb")) return "";
  return std::string(name.substr(4, name.size() - 4 - 6));
}

bool IsRunFolder(std::string_view name) {
  return name.starts_with("run-") || name.starts_with("offline-run-") || name == "latest-run";
}

}  // namespace

WandbScanner::WandbScanner(WandbScannerOptions options) : options_(std::move(options)) {}

Status WandbScanner::Scan(ScanPass& pass) {
  auto entries = ListDir(options_.root);
  if (!entries.ok()) return entries.status().WithContext("the W&B folder");
  std::vector<RunFolder> folders;
  std::vector<RunFolder> latest;  // "latest-run" when it is a copy rather than a link
  for (const DirEntry& entry : *entries) {
    if (!entry.stat.is_dir || !IsRunFolder(entry.name)) continue;  // links are not dirs here
    RunFolder folder{entry.name, "", ""};
    auto files = ListDir(options_.root + "/" + entry.name, 10'000);
    if (files.ok()) {
      for (const DirEntry& file : *files) {
        std::string id = IdFromLogName(file.name);
        if (file.stat.is_regular && !id.empty()) {
          folder.run_id = id;
          folder.log = file.name;
          break;
        }
      }
    }
    if (folder.run_id.empty()) {
      size_t dash = entry.name.rfind('-');
      folder.run_id = entry.name.substr(dash == std::string::npos ? 0 : dash + 1);
    }
    (entry.name == "latest-run" ? latest : folders).push_back(std::move(folder));
  }
  std::set<std::string> seen;
  for (const std::vector<RunFolder>* list : {&folders, &latest}) {
    for (const RunFolder& folder : *list) {
      // A run id twice: latest-run copied beside the run's own folder.
      const std::string key = std::string(kKeyPrefix) + folder.run_id;
      if (!seen.insert(key).second) continue;
      UPLINK_RETURN_IF_ERROR(ScanRun(pass, folder));
    }
  }
  return ForgetMissing(pass, kKeyPrefix, seen);
}

Status WandbScanner::ScanRun(ScanPass& pass, const RunFolder& folder) {
  const std::string key = std::string(kKeyPrefix) + folder.run_id;
  const std::string dir = options_.root + "/" + folder.dir;
  const std::string log_path = folder.log.empty() ? "" : dir + "/" + folder.log;
  auto log_stat = log_path.empty() ? std::nullopt : StatNoFollow(log_path);
  const bool stale =
      log_stat && pass.now - WallTime(std::chrono::nanoseconds(log_stat->mtime_ns)) >=
                      options_.stale_after;
  std::uint64_t signature = Fingerprint(folder.dir);
  signature = MixStat(signature, dir);
  signature = MixStat(signature, log_path);
  for (const char* file : {"/files", "/files/config.yaml", "/files/wandb-summary.json",
                           "/files/wandb-metadata.json"}) {
    signature = MixStat(signature, dir + file);
  }
  signature = Mix(signature, stale ? 1 : 0);
  if (Unchanged(pass, key, signature) || !TakeRun(pass)) return Status::Ok();
  if (!log_stat || !log_stat->is_regular) {
    return ReportProblem(pass, key, signature, source(), folder.dir,
                         NotFoundError("no transaction log (run-" + folder.run_id +
                                       ".wandb): the run's status and history cannot be read"),
                         log_);
  }
  const FileStat log_file = *log_stat;

  RunState& state = pass.cursor.runs()[key];
  // Resume where the last pass stopped, on what it saved; a settled run (nothing saved) or a
  // log that shrank (replaced) is read from the start, sending only rows past what was sent.
  const bool replaced = log_file.size < state.log_offset;
  std::optional<RunRecord> saved;
  if (!replaced && !state.saved_run.empty()) saved = RunFromItem(state.saved_run);
  const std::int64_t start = saved ? state.log_offset : 0;
  const std::int64_t history_from = replaced ? 0 : state.log_offset;
  const std::int64_t remaining = log_file.size - start;
  std::int64_t want = std::min<std::int64_t>(remaining, std::max(pass.ReadBudget(), kMinRead));
  Result<WandbLogEvents> events = WandbLogEvents{};
  std::string data;
  while (true) {
    auto read = ReadFileRange(log_path, start, static_cast<size_t>(want));
    if (!read.ok()) {
      log_.Warn("cannot read a W&B log; trying again next cycle", {{"error", read.status()}});
      return Status::Ok();
    }
    data = std::move(*read);
    events = DecodeWandbLog(data, start);
    if (!events.ok()) break;
    // One record larger than what was read: read more, up to the largest record.
    if (events->records == 0 && want < remaining && want < kMaxRead) {
      want = std::min({remaining, want * 2, kMaxRead});
      continue;
    }
    break;
  }
  pass.bytes_read += static_cast<std::int64_t>(data.size());
  if (!events.ok()) {
    return ReportProblem(pass, key, signature, source(), folder.dir + "/" + folder.log,
                         events.status(), log_);
  }
  const bool partial = static_cast<std::int64_t>(data.size()) < remaining;
  if (partial) pass.more = true;

  RunRecord run = saved.value_or(RunRecord{});
  run.source = "wandb";
  run.run_id = folder.run_id;
  run.offline = folder.dir.starts_with("offline-run-");
  run.location = folder.dir;
  Metadata metadata = ReadMetadata(dir + "/files/wandb-metadata.json");
  if (!metadata.user.empty()) run.user = metadata.user;
  if (!metadata.host.empty()) Set(run.tags, "wandb.host", metadata.host);
  if (!run.started_at_ms) run.started_at_ms = metadata.started_at_ms;
  if (events->run) {
    const WandbRunInfo& info = *events->run;
    run.experiment = info.entity.empty() ? info.project : info.entity + "/" + info.project;
    run.experiment_id = run.experiment;
    if (!info.display_name.empty()) run.name = info.display_name;
    if (info.start_time_ms) run.started_at_ms = info.start_time_ms;
    std::string joined;
    for (const std::string& tag : info.tags) joined += (joined.empty() ? "" : ",") + tag;
    const std::string& tags = joined;
    for (auto [name, value] : {std::pair{"wandb.group", &info.group},
                               std::pair{"wandb.job_type", &info.job_type},
                               std::pair{"wandb.notes", &info.notes},
                               std::pair{"wandb.host", &info.host}, std::pair{"wandb.tags", &tags}}) {
      if (!value->empty()) Set(run.tags, name, *value);
    }
  }
  for (auto& [name, value] : ReadConfigYaml(dir + "/files/config.yaml")) {
    Set(run.params, std::move(name), std::move(value));
  }
  for (const WandbItem& item : events->config_updates) {
    if (!item.key.starts_with("_")) Set(run.params, item.key, ParamTextFromJson(item.value_json));
  }
  for (const std::string& removed : events->config_removes) Remove(run.params, removed);
  for (auto& [name, value] : ReadSummaryJson(dir + "/files/wandb-summary.json")) {
    SetNumber(run.summary, std::move(name), value);
  }
  for (const WandbItem& item : events->summary_updates) {
    std::optional<double> number = WandbNumber(item.value_json);
    if (!item.key.starts_with("_") && number && std::isfinite(*number)) {
      SetNumber(run.summary, item.key, *number);
    }
  }
  for (const std::string& removed : events->summary_removes) Remove(run.summary, removed);

  // The status, from the run's own records and the log's age.
  if (events->exit_code) run.exit_code = events->exit_code;
  const std::int64_t log_mtime_ms = log_file.mtime_ns / 1'000'000;
  if (run.exit_code) {
    run.status = std::string(*run.exit_code == 0 ? kRunFinished : kRunFailed);
    if (events->runtime_s && run.started_at_ms) {
      run.ended_at_ms = *run.started_at_ms + *events->runtime_s * 1000;
    } else if (!run.ended_at_ms) {
      run.ended_at_ms = log_mtime_ms;
    }
  } else if (events->ended) {
    run.status = std::string(kRunFinished);
    run.ended_at_ms = log_mtime_ms;
  } else if (stale) {
    run.status = std::string(kRunCrashed);
    run.ended_at_ms = log_mtime_ms;  // the last sign of life
  } else {
    run.status = std::string(kRunRunning);
    run.ended_at_ms.reset();
  }
  NormalizeRun(run);

  UPLINK_ASSIGN_OR_RETURN(const std::string item, UpsertIfChanged(pass, key, state, run));
  std::map<std::string, std::vector<MetricPoint>> points;
  for (const WandbHistoryRow& row : events->history) {
    if (row.end_offset <= history_from) continue;  // sent before
    // A row without _timestamp gets the run's start: the same on every read, so a row read
    // again is still recognised by the console.
    std::int64_t timestamp = row.timestamp_s ? static_cast<std::int64_t>(*row.timestamp_s * 1000)
                                             : run.started_at_ms.value_or(0);
    for (const auto& [name, value] : row.numbers) {
      points[name].push_back(MetricPoint{row.step.value_or(0), value, timestamp});
    }
  }
  for (const auto& [name, series] : points) {
    UPLINK_RETURN_IF_ERROR(pass.emitter.AddPoints(run.run_id, name, series));
    pass.touched.insert(key);
  }
  if (events->damaged_chunks > 0 || events->damaged_records > 0) {
    std::string what = std::to_string(events->damaged_chunks) + " damaged chunk(s) and " +
                       std::to_string(events->damaged_records) +
                       " record(s) skipped in " + folder.log;
    log_.Warn("skipping damaged parts of a W&B log", {{"run_id", run.run_id}, {"what", what}});
    UPLINK_RETURN_IF_ERROR(pass.emitter.AddProblem(source(), folder.dir + "/" + folder.log, what));
    ++pass.problems_reported;
  }
  state.log_offset = events->next_offset;
  state.saved_run = item;
  state.settled = false;
  state.settled_positions.clear();
  state.terminal = IsTerminalStatus(run.status);
  state.signature = partial ? 0 : signature;  // a partial read goes on next pass
  return Status::Ok();
}

}  // namespace uplink::agent::experiments
