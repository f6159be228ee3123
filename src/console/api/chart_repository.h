// The agent's Helm chart, served by the console as a Helm chart repository (docs/api.md,
// "The chart repository"): GET /charts/index.yaml and the packaged chart at the URL the index
// lists, without a credential, as public Helm repositories are. A self-hosted console is then
// also where its agent's chart comes from; the install commands pin its version.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "net/http.h"

namespace uplink::console {

inline constexpr std::string_view kChartRepositoryPath = "/charts";

// A packaged chart and what the repository index says of it: Chart.yaml's fields.
struct ChartPackage {
  std::string api_version;  // "v2"
  std::string name;
  std::string version;
  std::string app_version;
  std::string description;
  std::string type;
  std::string kube_version;
  std::vector<std::string> keywords;
  std::string_view archive;  // the .tgz, as `helm package` lays it out
  std::string digest;        // hex SHA-256 of `archive`, as index.yaml lists it

  // "uplink-agent-0.1.0.tgz": where the archive is, relative to the repository.
  std::string FileName() const { return name + "-" + version + ".tgz"; }
};

// A file's bytes by name; empty when there is no such file.
using ChartFiles = std::function<std::string_view(std::string_view name)>;

// The chart described by `chart_yaml` (its Chart.yaml), packaged as files(FileName()).
// InvalidArgument when Chart.yaml lacks a field Helm's index needs, has one Helm would
// refuse (a name that is not a DNS label, a version that is not SemVer 2), or the package
// is missing.
Result<ChartPackage> ReadChartPackage(std::string_view chart_yaml, const ChartFiles& files);

// index.yaml of a repository that holds `chart` alone, in Helm's repository format
// (apiVersion v1, entries.NAME[] with the chart's metadata, digest, created and urls), with
// only fields Helm's strict parser knows. The URL is relative: Helm resolves it against the
// repository URL, so the index is right behind any proxy or name the console is reached by.
std::string RepositoryIndex(const ChartPackage& chart, WallTime created);

// Generated at build time (cmake/package_chart.sh, cmake/embed_files.cmake): the packaged
// agent chart under its file name, and its Chart.yaml; empty for any other name.
std::string_view EmbeddedChartFile(std::string_view name);

// The embedded agent chart, read once.
const Result<ChartPackage>& AgentChart();

}  // namespace uplink::console
