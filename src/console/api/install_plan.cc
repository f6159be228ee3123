#include "console/api/install_plan.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "common/json.h"
#include "common/kubernetes_names.h"
#include "common/labels.h"
#include "common/text.h"
#include "common/time.h"
#include "console/api/json_fields.h"
#include "net/client.h"
#include "net/server.h"

namespace uplink::console {
namespace {

constexpr size_t kMaxUrlBytes = 2048;
constexpr size_t kMaxNameBytes = 253;
constexpr size_t kMaxKubeconfigBytes = 4096;
// Helm's name for the console's repository in the commands.
constexpr std::string_view kRepositoryName = "uplink";
constexpr std::string_view kReleaseName = "uplink-agent";

// The chart's own defaults, for the warning that says what a command without a digest
// installs instead.
constexpr std::string_view kChartDefaultAgentRepository = "ghcr.io/uplink/uplink-agent";
constexpr std::string_view kChartDefaultClusterRepository = "ghcr.io/uplink/uplink-agent-cluster";

// A value as helm's --set-string reads it: '\' and ',' escaped (a ',' separates
// assignments), then quoted for the shell.
std::string SetString(std::string_view key, std::string_view value) {
  std::string escaped;
  for (char c : value) {
    if (c == '\\' || c == ',') escaped += '\\';
    escaped += c;
  }
  return "--set-string " + ShellQuote(std::string(key) + "=" + escaped);
}

Result<std::vector<std::string>> ReadStringList(const json::value& value, std::string_view field) {
  std::vector<std::string> items;
  if (!value.is_array()) return InvalidArgumentError(std::string(field) + " must be a list");
  for (const json::value& item : value.get_array()) {
    if (!item.is_string()) {
      return InvalidArgumentError(std::string(field) + " must be a list of workload names");
    }
    items.emplace_back(item.get_string());
  }
  return items;
}

// ["inventory"] or ["inventory", "cluster", "node"], in any order: whether cluster and node
// are installed.
Result<bool> ParseWorkloads(const std::vector<std::string>& workloads) {
  bool inventory = false, cluster = false, node = false;
  for (const std::string& name : workloads) {
    if (name == kInventoryWorkload) {
      inventory = true;
    } else if (name == kClusterWorkload) {
      cluster = true;
    } else if (name == kNodeWorkload) {
      node = true;
    } else if (std::find(std::begin(kLaterWorkloads), std::end(kLaterWorkloads), name) !=
               std::end(kLaterWorkloads)) {
      return InvalidArgumentError("workloads: " + name +
                                  " cannot be installed yet; the agent has no such role in this "
                                  "release");
    } else {
      return InvalidArgumentError("workloads: '" + OneLineExcerpt(name, 32) +
                                  "' is not a workload; choose [\"inventory\"] or [\"inventory\", "
                                  "\"cluster\", \"node\"]");
    }
  }
  if (!inventory) {
    return InvalidArgumentError(
        "workloads must include inventory: the chart always installs it (it reports the GPU "
        "nodes)");
  }
  if (cluster != node) {
    return InvalidArgumentError(
        "workloads: cluster and node come together (the chart's kubernetes.enabled installs "
        "both); choose [\"inventory\"] or [\"inventory\", \"cluster\", \"node\"]");
  }
  return cluster;
}

}  // namespace

Result<ImageReference> ParseImageReference(std::string_view text) {
  // [HOST[:PORT]/]PATH as the distribution spec names repositories (lower case), then a
  // sha256 digest.
  static const std::regex kReference(
      "((?:[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)*"
      "(?::[0-9]{1,5})?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
      "(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)@(sha256:[a-f0-9]{64})");
  std::match_results<std::string_view::const_iterator> match;
  if (text.size() > 512 || !std::regex_match(text.begin(), text.end(), match, kReference)) {
    return InvalidArgumentError(
        "an image must be REPOSITORY@sha256:DIGEST (64 lower-case hex digits), as 'make images' "
        "prints it, e.g. registry.example:5000/uplink/uplink-agent@sha256:0123...; '" +
        OneLineExcerpt(text, 128) + "' is not");
  }
  ImageReference reference{match[1].str(), match[2].str()};
  // As container tools read a name: its first component is a registry host only when it has
  // a '.' or a ':' or is localhost; otherwise it is a path component, lower case.
  std::string_view first =
      std::string_view(reference.repository).substr(0, reference.repository.find('/'));
  bool host = first.find_first_of(".:") != std::string_view::npos || first == "localhost";
  if (!host && std::any_of(first.begin(), first.end(),
                           [](char c) { return std::isupper(static_cast<unsigned char>(c)); })) {
    return InvalidArgumentError(
        "an image must be REPOSITORY@sha256:DIGEST with a lower-case repository path; '" +
        OneLineExcerpt(text, 128) + "' is not");
  }
  return reference;
}

Result<InstallRequest> ParseInstallRequest(const json::object& body) {
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(
      fields.OnlyFields({"console_url", "workloads", "gpu_runtime_class", "selector", "namespace",
                         "secret_name", "kube_context", "kubeconfig", "preview"}));
  InstallRequest request;
  InstallTarget& target = request.target;
  InstallPlan& plan = request.plan;

  UPLINK_ASSIGN_OR_RETURN(std::string url, fields.RequiredString("console_url", kMaxUrlBytes));
  while (url.ends_with('/')) url.pop_back();
  if (!net::ParseBaseUrl(url).ok()) {
    return InvalidArgumentError(
        "console_url must be the console's address as the cluster reaches it, https://HOST[:PORT] "
        "(no user, query or fragment)");
  }
  target.console_url = url;
  UPLINK_ASSIGN_OR_RETURN(auto preview, fields.Bool("preview"));
  request.preview = preview.value_or(false);

  if (const json::value* workloads = fields.Find("workloads")) {
    UPLINK_ASSIGN_OR_RETURN(std::vector<std::string> names,
                            ReadStringList(*workloads, "workloads"));
    UPLINK_ASSIGN_OR_RETURN(plan.kubernetes, ParseWorkloads(names));
  }
  UPLINK_ASSIGN_OR_RETURN(auto runtime_class, fields.String("gpu_runtime_class", kMaxNameBytes));
  plan.gpu_runtime_class = runtime_class.value_or(std::string(kDefaultGpuRuntimeClass));
  if (!plan.gpu_runtime_class.empty() && !IsDnsSubdomain(plan.gpu_runtime_class)) {
    return InvalidArgumentError(
        "gpu_runtime_class must be a RuntimeClass name (lower-case letters, digits, '-' and '.'; "
        "see kubectl get runtimeclass), or \"\" for a cluster without GPUs");
  }
  if (!plan.kubernetes) plan.gpu_runtime_class.clear();  // only the node pods use it

  UPLINK_ASSIGN_OR_RETURN(auto selector_text, fields.String("selector", labels::kMaxSelectorBytes));
  auto selector =
      labels::CanonicalNodeSelector(selector_text.value_or(std::string(kDefaultGpuSelector)));
  if (!selector.ok()) return selector.status().WithContext("selector");
  plan.selector = std::move(selector).value();

  UPLINK_ASSIGN_OR_RETURN(auto ns, fields.String("namespace", 63));
  if (ns) target.namespace_name = *ns;
  if (!IsDnsLabel(target.namespace_name)) {
    return InvalidArgumentError(
        "namespace must be a Kubernetes namespace name: 1-63 of a-z, 0-9 and '-', starting and "
        "ending with a letter or digit");
  }
  UPLINK_ASSIGN_OR_RETURN(auto secret, fields.String("secret_name", kMaxNameBytes));
  if (secret) target.secret_name = *secret;
  if (!IsDnsSubdomain(target.secret_name)) {
    return InvalidArgumentError(
        "secret_name must be a Kubernetes object name: lower-case letters, digits, '-' and '.', "
        "at most 253");
  }
  UPLINK_ASSIGN_OR_RETURN(auto context, fields.String("kube_context", kMaxNameBytes));
  UPLINK_ASSIGN_OR_RETURN(auto kubeconfig, fields.String("kubeconfig", kMaxKubeconfigBytes));
  target.kube_context = context.value_or("");
  target.kubeconfig = kubeconfig.value_or("");
  // Shell-quoted in the command, but never a flag of its own nor a second line.
  for (const auto& [field, value] : {std::pair{"kube_context", &target.kube_context},
                                     std::pair{"kubeconfig", &target.kubeconfig}}) {
    if (value->starts_with('-') || std::any_of(value->begin(), value->end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
        })) {
      return InvalidArgumentError(std::string(field) +
                                  " must not start with '-' or hold control characters");
    }
  }
  return request;
}

std::string_view PodSecurityLevel(const InstallPlan& plan) {
  return plan.kubernetes ? "privileged" : "restricted";
}

std::vector<std::string_view> Workloads(const InstallPlan& plan) {
  if (!plan.kubernetes) return {kInventoryWorkload};
  return {kInventoryWorkload, kClusterWorkload, kNodeWorkload};
}

std::optional<std::string> UnreachableFromCluster(std::string_view host) {
  std::string name = AsciiLower(host);
  while (name.ends_with('.')) name.pop_back();
  if (net::IsLoopbackHost(name) || name.ends_with(".localhost")) {
    return name + " is a loopback address: in the cluster it means the agent's own pod";
  }
  if (name == "0.0.0.0" || name == "::" || name == "0:0:0:0:0:0:0:0") {
    return name + " is the unspecified address, which nothing can connect to";
  }
  if (name.ends_with(".local")) {
    return name + " is a multicast DNS (.local) name, which cluster DNS does not resolve";
  }
  return std::nullopt;
}

InstallCommands RenderInstallCommands(const InstallRequest& request, const ChartPackage& chart,
                                      const AgentImages& images) {
  const InstallPlan& plan = request.plan;
  const InstallTarget& target = request.target;
  InstallCommands out;
  out.pod_security = PodSecurityLevel(plan);
  out.repository_url = target.console_url + std::string(kChartRepositoryPath);

  std::string helm_flags;
  if (!target.kubeconfig.empty()) helm_flags += " --kubeconfig " + ShellQuote(target.kubeconfig);
  if (!target.kube_context.empty()) {
    helm_flags += " --kube-context " + ShellQuote(target.kube_context);
  }
  out.helm.push_back("helm repo add --force-update " + std::string(kRepositoryName) + " " +
                     ShellQuote(out.repository_url));

  std::vector<std::string> values{
      SetString("config.baseUrl", target.console_url),
      SetString("token.existingSecret", target.secret_name),
      SetString("nodes.selector", plan.selector),
  };
  if (plan.kubernetes) {
    values.push_back("--set kubernetes.enabled=true");
    if (!plan.gpu_runtime_class.empty()) {
      values.push_back(SetString("kubernetes.node.gpu.runtimeClassName", plan.gpu_runtime_class));
    }
  }
  auto pin = [&](const std::optional<ImageReference>& image, std::string_view repository_key,
                 std::string_view digest_key, std::string_view flag,
                 std::string_view chart_default) {
    if (image) {
      values.push_back(SetString(repository_key, image->repository));
      values.push_back(SetString(digest_key, image->digest));
      return;
    }
    out.warnings.push_back(InstallWarning{
        "image_not_pinned",
        "This console was not told the digest of its " + std::string(chart_default) +
            " image (uplink-console serve " + std::string(flag) +
            " REPOSITORY@sha256:..., which 'make images' prints), so the command installs the "
            "chart's default " +
            std::string(chart_default) + ":" + chart.app_version +
            " by tag, which its registry can move. Add --set-string " + std::string(digest_key) +
            "=sha256:... with the digest you trust."});
  };
  pin(images.agent, "image.repository", "image.digest", "--agent-image",
      kChartDefaultAgentRepository);
  if (plan.kubernetes) {
    pin(images.cluster, "image.clusterRepository", "image.clusterDigest", "--agent-cluster-image",
        kChartDefaultClusterRepository);
  }

  std::string upgrade = "helm upgrade --install " + std::string(kReleaseName) + " " +
                        std::string(kRepositoryName) + "/" + chart.name + " --version " +
                        chart.version + " --namespace " + target.namespace_name + helm_flags;
  for (const std::string& value : values) upgrade += " \\\n    " + value;
  out.helm.push_back(upgrade);

  auto url = net::ParseBaseUrl(target.console_url);
  if (url.ok()) {
    if (std::optional<std::string> why = UnreachableFromCluster(url->host)) {
      out.warnings.insert(
          out.warnings.begin(),
          InstallWarning{"console_unreachable",
                         "The agent cannot reach the console at " + target.console_url + ": " +
                             *why +
                             ". Generate the commands with the console's address as the "
                             "cluster's pods reach it (a DNS name or IP address of this console on "
                             "a network the nodes share)."});
    }
    if (url->scheme != "https") {
      out.warnings.push_back(InstallWarning{
          "console_not_https",
          "The chart accepts only an https:// console address, and " + target.console_url +
              " is not one: serve the console over HTTPS (uplink-console serve --tls-cert "
              "--tls-key) and generate the commands with its https:// address."});
    }
  }
  return out;
}

json::object InstallPlanJson(const InstallPlan& plan) {
  json::array workloads;
  for (std::string_view workload : Workloads(plan)) workloads.emplace_back(workload);
  return json::object{{"workloads", std::move(workloads)},
                      {"gpu_runtime_class", plan.gpu_runtime_class},
                      {"selector", plan.selector},
                      {"pod_security", PodSecurityLevel(plan)},
                      {"updated_at", FormatRfc3339(plan.updated_at)}};
}

}  // namespace uplink::console
