// Install commands (docs/api.md, "Install commands"): what `uplink connections install` and
// the web console's token card install, checked, and the helm commands that install exactly
// that from the console's own chart repository, with the chart version and the agent images
// pinned. One generator, so the CLI and the web console cannot drift apart.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/labels.h"
#include "common/status.h"
#include "console/api/chart_repository.h"
#include "console/store/store.h"

namespace uplink::console {

// The chart's workloads an install chooses from. The chart always installs inventory, and
// cluster and node together (kubernetes.enabled). The chart's next workloads, experiments
// (config.enableWandb, config.enableMlflow) and workspaces (execution.enabled), are refused by
// name until their roles exist; they then join this list and InstallPlan.
inline constexpr std::string_view kInventoryWorkload = "inventory";
inline constexpr std::string_view kClusterWorkload = "cluster";
inline constexpr std::string_view kNodeWorkload = "node";
inline constexpr std::string_view kLaterWorkloads[] = {"experiments", "workspaces"};

inline constexpr std::string_view kDefaultGpuRuntimeClass = "nvidia";
inline constexpr std::string_view kDefaultGpuSelector = labels::kDefaultGpuNodeSelector;

// An image by digest: REPOSITORY@sha256:HEX, as `make images` prints it.
struct ImageReference {
  std::string repository;
  std::string digest;  // "sha256:" + 64 hex digits
  std::string ToString() const { return repository + "@" + digest; }
};

// InvalidArgument, saying what is expected, unless `text` is REPOSITORY@sha256:HEX with a
// repository as container registries name them ([HOST[:PORT]/]PATH, lower case).
Result<ImageReference> ParseImageReference(std::string_view text);

// The agent images install commands pin (uplink-console serve --agent-image and
// --agent-cluster-image); unset when the console was not told them.
struct AgentImages {
  std::optional<ImageReference> agent;    // inventory and node roles
  std::optional<ImageReference> cluster;  // the cluster role (the agent plus kubectl)
  // The workspace image execution.json pins (serve --workspace-image).
  std::optional<ImageReference> workspace;
};

// Where and how the user installs; not stored.
struct InstallTarget {
  std::string console_url;  // as the cluster's pods reach the console, without a trailing '/'
  std::string namespace_name = "uplink";
  std::string secret_name = "uplink-agent-token";
  std::string kube_context;  // helm's --kube-context; "" for the current one
  std::string kubeconfig;    // helm's --kubeconfig; "" for the default
};

struct InstallRequest {
  InstallPlan plan;  // updated_at unset
  InstallTarget target;
  bool preview = false;  // render only: the plan is not kept (the web card, while you type)
};

// The body of POST /api/v1/connections/{id}/install. Absent fields take their defaults (every
// workload, runtime class nvidia, selector nvidia.com/gpu.present=true); the selector is
// parsed and kept in canonical form. InvalidArgument names the field and what it takes.
Result<InstallRequest> ParseInstallRequest(const json::object& body);

// "privileged" when the node DaemonSet is installed (it mounts host paths, which baseline
// and restricted refuse), else "restricted", which the inventory and cluster pods satisfy.
std::string_view PodSecurityLevel(const InstallPlan& plan);

std::vector<std::string_view> Workloads(const InstallPlan& plan);

// Why the agent in a cluster cannot reach a console at `host` (from a URL, without
// brackets), or nullopt: loopback (localhost, *.localhost, 127.0.0.0/8, ::1) and the
// unspecified addresses mean the pod itself, and .local names are multicast DNS, which
// cluster DNS does not resolve.
std::optional<std::string> UnreachableFromCluster(std::string_view host);

struct InstallWarning {
  std::string code;
  std::string message;
};

struct InstallCommands {
  std::string pod_security;
  std::string repository_url;     // console_url + /charts
  std::vector<std::string> helm;  // complete shell commands, in order
  std::vector<InstallWarning> warnings;
};

// `helm repo add` for the console's repository and `helm upgrade --install` of `chart` at its
// version, with the plan's values and the images by digest where `images` knows them; a
// warning for each thing that would make the install fail or float.
InstallCommands RenderInstallCommands(const InstallRequest& request, const ChartPackage& chart,
                                      const AgentImages& images);

// {"workloads": [...], "gpu_runtime_class": ..., "selector": ..., "updated_at": ...}
json::object InstallPlanJson(const InstallPlan& plan);

}  // namespace uplink::console
