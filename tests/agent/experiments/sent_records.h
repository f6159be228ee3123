// What the records of a scan pass said, item by item, for the scanners' tests.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/json.h"

namespace uplink::agent::experiments {

// What the records of a pass said, item by item.
struct Sent {
  std::vector<json::object> runs;
  std::map<std::string, std::vector<json::array>> points;  // "run/metric" -> points
  std::vector<std::string> deleted;
  std::vector<json::object> problems;
  size_t records = 0;
};

inline Sent Decode(const std::vector<std::string>& records) {
  Sent sent;
  sent.records = records.size();
  for (const std::string& record : records) {
    json::value parsed = *ParseJson(record, JsonLimits{8 << 20, 64});
    std::string kind(parsed.at("kind").as_string());
    if (kind == "experiment_run") {
      for (const json::value& run : parsed.at("runs").as_array()) sent.runs.push_back(run.as_object());
    } else if (kind == "metric_points") {
      for (const json::value& series : parsed.at("series").as_array()) {
        auto& points = sent.points[std::string(series.at("run_id").as_string()) + "/" +
                                   std::string(series.at("metric").as_string())];
        for (const json::value& point : series.at("points").as_array()) points.push_back(point.as_array());
      }
    } else if (kind == "run_deleted") {
      for (const json::value& id : parsed.at("run_ids").as_array()) sent.deleted.emplace_back(id.as_string());
    } else if (kind == "scan_problem") {
      for (const json::value& problem : parsed.at("problems").as_array()) sent.problems.push_back(problem.as_object());
    }
  }
  return sent;
}

// Points of every series together.
inline size_t CountPoints(const Sent& sent) {
  size_t total = 0;
  for (const auto& [key, points] : sent.points) total += points.size();
  return total;
}

// How many points each series ("run/metric") got.
inline std::map<std::string, size_t> PointCounts(const Sent& sent) {
  std::map<std::string, size_t> counts;
  for (const auto& [key, points] : sent.points) counts[key] = points.size();
  return counts;
}

}  // namespace uplink::agent::experiments
