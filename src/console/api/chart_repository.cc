#include "console/api/chart_repository.h"

#include <regex>

#include "common/crypto.h"
#include "common/json.h"
#include "common/text.h"
#include "common/yaml.h"

namespace uplink::console {
namespace {

// Chart.yaml's string field `key`; InvalidArgument when it is missing or not a string.
Result<std::string> RequiredString(const json::object& chart, std::string_view key) {
  const json::value* value = chart.if_contains(key);
  if (value == nullptr || !value->is_string() || value->get_string().empty()) {
    return InvalidArgumentError("Chart.yaml has no " + std::string(key));
  }
  return std::string(value->get_string());
}

// A YAML double-quoted scalar: JSON's string escapes are YAML's too.
std::string Quoted(std::string_view text) { return json::serialize(json::string(text)); }

}  // namespace

Result<ChartPackage> ReadChartPackage(std::string_view chart_yaml, const ChartFiles& files) {
  auto parsed = ParseYaml(chart_yaml);
  if (!parsed.ok()) return parsed.status().WithContext("reading Chart.yaml");
  if (!parsed->is_object()) return InvalidArgumentError("Chart.yaml is not a mapping");
  const json::object& chart = parsed->get_object();
  ChartPackage package;
  UPLINK_ASSIGN_OR_RETURN(package.api_version, RequiredString(chart, "apiVersion"));
  UPLINK_ASSIGN_OR_RETURN(package.name, RequiredString(chart, "name"));
  UPLINK_ASSIGN_OR_RETURN(package.version, RequiredString(chart, "version"));
  UPLINK_ASSIGN_OR_RETURN(package.app_version, RequiredString(chart, "appVersion"));
  UPLINK_ASSIGN_OR_RETURN(package.description, RequiredString(chart, "description"));
  UPLINK_ASSIGN_OR_RETURN(package.type, RequiredString(chart, "type"));
  UPLINK_ASSIGN_OR_RETURN(package.kube_version, RequiredString(chart, "kubeVersion"));
  for (const json::value& keyword : ArrayAt(chart, "keywords")) {
    if (!keyword.is_string()) return InvalidArgumentError("Chart.yaml keywords are not strings");
    package.keywords.emplace_back(keyword.get_string());
  }
  static const std::regex kName("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  // SemVer 2 (semver.org), as Helm requires of a chart's version.
  static const std::regex kSemVer(
      "(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)"
      "(-[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?(\\+[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?");
  if (package.name.size() > 63 || !std::regex_match(package.name, kName)) {
    return InvalidArgumentError("Chart.yaml name '" + OneLineExcerpt(package.name, 64) +
                                "' is not a DNS label");
  }
  if (!std::regex_match(package.version, kSemVer)) {
    return InvalidArgumentError("Chart.yaml version '" + OneLineExcerpt(package.version, 64) +
                                "' is not SemVer 2");
  }
  package.archive = files(package.FileName());
  if (package.archive.empty()) {
    return InvalidArgumentError("the packaged chart " + package.FileName() + " is missing");
  }
  package.digest = Sha256Hex(package.archive);
  return package;
}

std::string RepositoryIndex(const ChartPackage& chart, WallTime created) {
  const std::string time = Quoted(FormatRfc3339(created));
  // Keys in Helm's own order (alphabetical, as `helm repo index` writes them).
  std::string entry = "  - apiVersion: " + Quoted(chart.api_version) + "\n";
  entry += "    appVersion: " + Quoted(chart.app_version) + "\n";
  entry += "    created: " + time + "\n";
  entry += "    description: " + Quoted(chart.description) + "\n";
  entry += "    digest: " + Quoted(chart.digest) + "\n";
  if (!chart.keywords.empty()) entry += "    keywords:\n";
  for (const std::string& keyword : chart.keywords) entry += "    - " + Quoted(keyword) + "\n";
  entry += "    kubeVersion: " + Quoted(chart.kube_version) + "\n";
  entry += "    name: " + Quoted(chart.name) + "\n";
  entry += "    type: " + Quoted(chart.type) + "\n";
  entry += "    urls:\n    - " + Quoted(chart.FileName()) + "\n";
  entry += "    version: " + Quoted(chart.version) + "\n";
  return "apiVersion: v1\nentries:\n  " + chart.name + ":\n" + entry + "generated: " + time +
         "\n";
}

const Result<ChartPackage>& AgentChart() {
  static const Result<ChartPackage> chart =
      ReadChartPackage(EmbeddedChartFile("Chart.yaml"), EmbeddedChartFile);
  return chart;
}

}  // namespace uplink::console
