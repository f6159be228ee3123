#include "agent/experiments/emitter.h"

#include "common/json.h"

namespace uplink::agent::experiments {
namespace {

// {"kind":"<kind>","version":1,"<field>":[ ... ]}: the bytes around the items.
size_t Framing(std::string_view kind, std::string_view field) {
  return kind.size() + field.size() + 32;
}

}  // namespace

Emitter::Emitter(RecordSink& sink, size_t max_record_bytes)
    : sink_(sink), max_record_bytes_(max_record_bytes) {}

Status Emitter::Add(Buffer& buffer, std::string_view item) {
  size_t framing = Framing(buffer.kind, buffer.field);
  if (buffer.count > 0 && framing + buffer.items.size() + 1 + item.size() > max_record_bytes_) {
    // Points and deletions refer to runs: their upserts must be stored first.
    if (&buffer != &runs_) UPLINK_RETURN_IF_ERROR(Write(runs_));
    UPLINK_RETURN_IF_ERROR(Write(buffer));
  }
  if (buffer.count > 0) buffer.items += ',';
  buffer.items += item;
  ++buffer.count;
  return Status::Ok();
}

Status Emitter::Write(Buffer& buffer) {
  if (buffer.count == 0) return Status::Ok();
  std::string record = "{\"kind\":\"" + buffer.kind +
                       "\",\"version\":" + std::to_string(protocol::kExperimentRecordVersion) +
                       ",\"" + buffer.field + "\":[";
  record += buffer.items;
  record += "]}";
  buffer.items.clear();
  buffer.count = 0;
  if (!status_.ok()) return status_;
  auto appended = sink_.Append(record);
  if (!appended.ok()) {
    status_ = appended.status().WithContext("appending to the spool");
    return status_;
  }
  last_sequence_ = *appended;
  ++counts_.records;
  counts_.bytes += record.size();
  return Status::Ok();
}

Status Emitter::AddRun(const RunRecord& run) {
  ++counts_.runs;
  return Add(runs_, RunItem(run));
}

Status Emitter::AddPoints(std::string_view run_id, std::string_view metric,
                          const std::vector<MetricPoint>& points) {
  if (points.empty()) return Status::Ok();
  counts_.points += points.size();
  size_t item_bytes = max_record_bytes_ - Framing(points_.kind, points_.field);
  for (const std::string& item : SeriesItems(run_id, metric, points, item_bytes)) {
    UPLINK_RETURN_IF_ERROR(Add(points_, item));
  }
  return Status::Ok();
}

Status Emitter::AddDeleted(std::string_view run_id) {
  ++counts_.deleted;
  return Add(deleted_, json::serialize(json::value(run_id)));
}

Status Emitter::AddProblem(std::string_view source, std::string_view location,
                           std::string_view error) {
  ++counts_.problems;
  return Add(problems_, ProblemItem(source, location, error));
}

Status Emitter::Flush() {
  UPLINK_RETURN_IF_ERROR(Write(runs_));
  UPLINK_RETURN_IF_ERROR(Write(points_));
  UPLINK_RETURN_IF_ERROR(Write(deleted_));
  return Write(problems_);
}

}  // namespace uplink::agent::experiments
