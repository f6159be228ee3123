// uplink connections install: the cluster's agent token straight into a Kubernetes Secret,
// then the helm commands for the workloads the person chose (docs/cli.md).
//
// The token lives only in this process's memory and reaches kubectl on its standard input
// (`--from-file=UPLINK_AGENT_TOKEN=/dev/stdin`, or a merge patch read from /dev/stdin): never
// argv, never a file, never the screen. If the person says no, or kubectl is missing or
// fails, the token is printed once with the commands to run by hand, as the install guide
// promises; a failure then exits 9 so scripts notice. A token is issued only when it can be
// used: the token of a connection whose agent has reported is rotated only after a yes,
// since rotating cuts that agent off.
#include <algorithm>
#include <chrono>

#include "cli/commands.h"
#include "cli/connections.h"
#include "cli/render.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/kubernetes_names.h"
#include "common/labels.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "net/client.h"
#include "net/http.h"

namespace uplink::cli {
namespace {

constexpr auto kKubectlTimeout = std::chrono::seconds(60);
constexpr char kTokenKey[] = "UPLINK_AGENT_TOKEN";

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// kubectl says "Error from server (AlreadyExists): namespaces "x" already exists" for a
// namespace but "error: failed to create secret secrets "x" already exists" for
// `create secret generic`; both end the same way.
bool AlreadyExists(const ProcessResult& result) { return Contains(result.err, "already exists"); }

// kubectl never sees the token in its arguments, so its messages cannot hold it; this is the
// second lock on that door.
std::string Redacted(std::string text, const std::vector<std::string>& secrets) {
  for (const std::string& secret : secrets) {
    if (secret.empty()) continue;
    for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
      text.replace(at, secret.size(), "[redacted]");
    }
  }
  return text;
}

class Kubectl {
 public:
  Kubectl(std::string program, const KubeTarget& target, std::vector<std::string> secrets)
      : program_(std::move(program)), secrets_(std::move(secrets)) {
    if (!target.kubeconfig.empty()) base_ = {"--kubeconfig", target.kubeconfig};
    if (!target.context.empty()) {
      base_.push_back("--context");
      base_.push_back(target.context);
    }
  }

  // Runs `kubectl BASE ARGS`; a failure is an error carrying kubectl's own message.
  Result<ProcessResult> Run(const std::vector<std::string>& args, std::string_view input = {}) {
    std::vector<std::string> argv{program_};
    argv.insert(argv.end(), base_.begin(), base_.end());
    argv.insert(argv.end(), args.begin(), args.end());
    // kubectl gets the user's environment (exec credential plugins need it) but never the
    // console credential.
    UPLINK_ASSIGN_OR_RETURN(
        ProcessResult result,
        RunProcess(ProcessOptions{.argv = std::move(argv),
                                  .environment = InheritedEnvironment({"UPLINK_API_KEY"}),
                                  .input = std::string(input),
                                  .timeout = kKubectlTimeout}));
    result.out = Redacted(std::move(result.out), secrets_);
    result.err = Redacted(std::move(result.err), secrets_);
    return result;
  }

  Status Failure(const std::vector<std::string>& args, const ProcessResult& result) const {
    std::string command = "kubectl";
    for (const std::string& arg : args) command += " " + arg;
    std::string message = std::string(TrimWhitespace(result.err));
    if (message.size() > 2000) message = "..." + message.substr(message.size() - 2000);
    return FailedPreconditionError("'" + command + "' failed (exit " +
                                   std::to_string(result.exit_code) + ")" +
                                   (message.empty() ? "" : ":\n" + message));
  }

 private:
  std::string program_;
  std::vector<std::string> base_;
  std::vector<std::string> secrets_;
};

Result<ProcessResult> RunChecked(Kubectl& kubectl, const std::vector<std::string>& args,
                                 std::string_view input = {}) {
  UPLINK_ASSIGN_OR_RETURN(ProcessResult result, kubectl.Run(args, input));
  if (result.exit_code != 0) return kubectl.Failure(args, result);
  return result;
}

Status InstallSecret(Kubectl& kubectl, const KubeTarget& t, const Secret& token,
                     std::ostream& out) {
  const std::string& ns = t.namespace_name;
  UPLINK_ASSIGN_OR_RETURN(ProcessResult found, kubectl.Run({"get", "namespace", ns, "-o", "name"}));
  if (found.exit_code == 0) {
    out << "Namespace " << ns << " exists.\n";
  } else if (Contains(found.err, "NotFound") || Contains(found.err, "not found")) {
    std::vector<std::string> create{"create", "namespace", ns};
    UPLINK_ASSIGN_OR_RETURN(ProcessResult created, kubectl.Run(create));
    if (created.exit_code != 0 && !AlreadyExists(created)) {
      return kubectl.Failure(create, created);
    }
    out << "Created namespace " << ns << ".\n";
  } else {
    return kubectl.Failure({"get", "namespace", ns, "-o", "name"}, found);
  }
  UPLINK_RETURN_IF_ERROR(
      RunChecked(kubectl,
                 {"label", "namespace", ns, "pod-security.kubernetes.io/enforce=" + t.pod_security,
                  "pod-security.kubernetes.io/enforce-version=latest", "--overwrite"})
          .status());
  out << "Set Pod Security enforcement of namespace " << ns << " to " << t.pod_security << ".\n";

  std::vector<std::string> create_secret{"-n",
                                         ns,
                                         "create",
                                         "secret",
                                         "generic",
                                         t.secret_name,
                                         "--from-file=" + std::string(kTokenKey) + "=/dev/stdin"};
  UPLINK_ASSIGN_OR_RETURN(ProcessResult created, kubectl.Run(create_secret, token.Reveal()));
  if (created.exit_code == 0) {
    out << "Created Secret " << t.secret_name << " in namespace " << ns << ".\n";
    return Status::Ok();
  }
  if (!AlreadyExists(created)) return kubectl.Failure(create_secret, created);
  Secret patch(json::serialize(
      json::object{{"data", json::object{{kTokenKey, Base64Encode(token.Reveal())}}}}));
  UPLINK_RETURN_IF_ERROR(RunChecked(kubectl,
                                    {"-n", ns, "patch", "secret", t.secret_name, "--type", "merge",
                                     "--patch-file=/dev/stdin"},
                                    patch.Reveal())
                             .status());
  out << "Updated the token in the existing Secret " << t.secret_name << " in namespace " << ns
      << ".\n";
  return Status::Ok();
}

Result<KubeTarget> TargetFromFlags(const CommandLine& line) {
  KubeTarget t;
  t.namespace_name = line.Get("namespace", t.namespace_name);
  t.secret_name = line.Get("secret-name", t.secret_name);
  t.pod_security = line.Get("pod-security", t.pod_security);
  t.kubeconfig = line.Get("kubeconfig");
  t.context = line.Get("context");
  if (!IsDnsLabel(t.namespace_name)) {
    return InvalidArgumentError(
        "--namespace must be a Kubernetes namespace name: 1-63 of a-z, "
        "0-9 and '-', starting and ending with a letter or digit");
  }
  if (!IsDnsSubdomain(t.secret_name)) {
    return InvalidArgumentError(
        "--secret-name must be a Kubernetes object name: lower-case "
        "letters, digits, '-' and '.', at most 253");
  }
  if (line.Has("pod-security") && t.pod_security != "privileged" &&
      t.pod_security != "baseline" && t.pod_security != "restricted") {
    return InvalidArgumentError("--pod-security must be privileged, baseline or restricted");
  }
  if (line.Has("context") && (t.context.empty() || t.context.front() == '-')) {
    return InvalidArgumentError("--context needs a context name");
  }
  if (line.Has("kubeconfig") && (t.kubeconfig.empty() || t.kubeconfig.front() == '-')) {
    return InvalidArgumentError(
        "--kubeconfig needs a file (write ./-name for one that starts "
        "with '-')");
  }
  return t;
}

// The kubectl program: --kubectl (a path, or a name looked up on PATH), else kubectl on PATH.
std::optional<std::string> FindKubectl(const Invocation& inv) {
  std::string wanted = inv.line.Get("kubectl", "kubectl");
  if (wanted.find('/') != std::string::npos) return wanted;
  const char* path = inv.env("PATH");
  return FindProgram(wanted, path != nullptr ? path : "");
}


// Reads one answer; no answer (end of input, no terminal to ask) is nullopt.
std::optional<std::string> Ask(Invocation& inv, const std::string& question) {
  Result<std::string> answer = InternalError("unanswered");
  if (inv.terminal.Available()) {
    answer = inv.terminal.ReadLine(question);
  } else {
    inv.err << question << std::flush;
    answer = ReadLineFrom(inv.in, "the answer on stdin", 64);
    inv.err << "\n";
  }
  if (!answer.ok()) return std::nullopt;
  return std::string(TrimWhitespace(*answer));
}

bool AskToProceed(Invocation& inv, const std::string& question) {
  if (inv.line.Has("yes")) return true;
  std::string text = AsciiLower(Ask(inv, question).value_or(""));  // no answer is no
  return text == "y" || text == "yes";
}

// What to install (docs/api.md, "Install commands"): the workloads, the GPU runtime class of
// the node pods and the GPU node selector.
struct Choices {
  bool kubernetes = true;  // the cluster Deployment and node DaemonSet besides inventory
  std::string gpu_runtime_class = "nvidia";
  std::string selector = std::string(labels::kDefaultGpuNodeSelector);

  std::string_view pod_security() const { return kubernetes ? "privileged" : "restricted"; }
  json::array workloads() const {
    if (!kubernetes) return json::array{"inventory"};
    return json::array{"inventory", "cluster", "node"};
  }
};

Result<bool> ParseWorkloadsFlag(std::string_view text) {
  std::string value(TrimWhitespace(text));
  if (value == "inventory") return false;
  if (value == "all" || value == "inventory,cluster,node") return true;
  return InvalidArgumentError(
      "--workloads must be 'inventory' (the GPU node inventory alone) or 'all' (inventory, cluster "
      "and node telemetry)");
}

Status CheckRuntimeClass(std::string_view name) {
  if (name.empty() || IsDnsSubdomain(name)) return Status::Ok();
  return InvalidArgumentError(
      "the GPU runtime class must be a RuntimeClass name (lower-case letters, digits, '-' and "
      "'.'; see kubectl get runtimeclass), or empty for a cluster without GPUs");
}

Result<Choices> ChoicesFromFlags(const CommandLine& line) {
  Choices choices;
  if (line.Has("workloads")) {
    UPLINK_ASSIGN_OR_RETURN(choices.kubernetes, ParseWorkloadsFlag(line.Get("workloads")));
  }
  if (line.Has("gpu-runtime-class") && line.Has("no-gpu-runtime-class")) {
    return InvalidArgumentError("give --gpu-runtime-class or --no-gpu-runtime-class, not both");
  }
  choices.gpu_runtime_class = line.Get("gpu-runtime-class", choices.gpu_runtime_class);
  if (line.Has("no-gpu-runtime-class")) choices.gpu_runtime_class.clear();
  UPLINK_RETURN_IF_ERROR(
      CheckRuntimeClass(choices.gpu_runtime_class).WithContext("--gpu-runtime-class"));
  if (line.Has("selector")) {
    auto selector = labels::CanonicalNodeSelector(line.Get("selector"));
    if (!selector.ok()) return selector.status().WithContext("--selector");
    choices.selector = std::move(selector).value();
  }
  return choices;
}

// Asks, on the terminal, what the flags left open; an empty answer keeps the default, a
// wrong one is asked again.
Status AskChoices(Invocation& inv, Choices& choices) {
  constexpr int kTries = 3;
  auto ask = [&](const std::string& question, auto accept) -> Status {
    for (int attempt = 0; attempt < kTries; ++attempt) {
      Result<std::string> answer = inv.terminal.ReadLine(question);
      if (!answer.ok()) return answer.status();
      Status taken = accept(std::string(TrimWhitespace(*answer)));
      if (taken.ok()) return taken;
      inv.err << "uplink: " << taken.message() << "\n";
    }
    return InvalidArgumentError("no usable answer after " + std::to_string(kTries) + " tries");
  };
  if (!inv.line.Has("workloads")) {
    UPLINK_RETURN_IF_ERROR(ask(
        std::string("Which workloads should the agent run in the cluster?\n"
                    "  1) inventory only: reports the GPU nodes that match the selector\n"
                    "     (Pod Security restricted)\n"
                    "  2) inventory, cluster and node telemetry: also read-only kubectl for the\n"
                    "     console and each node's CPU, memory, disk, network and GPU figures\n"
                    "     (Pod Security privileged: the node DaemonSet mounts host paths)\n"
                    "Workloads [") + (choices.kubernetes ? "2" : "1") + "]: ",
        [&](const std::string& answer) -> Status {
          if (answer.empty()) return Status::Ok();
          if (answer == "1" || answer == "2") {
            choices.kubernetes = answer == "2";
            return Status::Ok();
          }
          return InvalidArgumentError("answer 1 or 2");
        }));
  }
  if (choices.kubernetes && !inv.line.Has("gpu-runtime-class") &&
      !inv.line.Has("no-gpu-runtime-class")) {
    UPLINK_RETURN_IF_ERROR(ask(
        "GPU runtime class of the node pods ('none' on a cluster without GPUs; see kubectl get "
        "runtimeclass) [" + choices.gpu_runtime_class + "]: ",
        [&](const std::string& answer) -> Status {
          if (answer.empty()) return Status::Ok();
          std::string name = answer == "none" ? "" : answer;
          UPLINK_RETURN_IF_ERROR(CheckRuntimeClass(name));
          choices.gpu_runtime_class = name;
          return Status::Ok();
        }));
  }
  if (!inv.line.Has("selector")) {
    UPLINK_RETURN_IF_ERROR(ask(
        "GPU node selector: the nodes the inventory reports [" + choices.selector + "]: ",
        [&](const std::string& answer) -> Status {
          if (answer.empty()) return Status::Ok();
          auto selector = labels::CanonicalNodeSelector(answer);
          if (!selector.ok()) return selector.status().WithContext("the GPU node selector");
          choices.selector = std::move(selector).value();
          return Status::Ok();
        }));
  }
  return Status::Ok();
}

// Whether an agent has ever been heard from on this connection: then its token is in use.
// last_seen_at counts every accepted call of any role; the others serve older consoles.
bool AgentHasReported(const json::object& connection) {
  const json::array* agents = ArrayField(connection, "agents");
  return StringField(connection, "last_seen_at").has_value() ||
         StringField(connection, "last_report_at").has_value() ||
         (agents != nullptr && !agents->empty());
}

std::string LastHeard(const json::object& connection) {
  if (StringField(connection, "last_seen_at")) return Display(connection, "last_seen_at", 40);
  if (StringField(connection, "last_report_at")) return Display(connection, "last_report_at", 40);
  const json::array* agents = ArrayField(connection, "agents");
  if (agents != nullptr && !agents->empty() && (*agents)[0].is_object()) {
    return Display((*agents)[0].get_object(), "last_seen_at", 40);
  }
  return "-";
}

// The console's commands, each line cleaned (the reply is the console's, but a reply never
// moves the cursor) and indented.
void PrintCommands(std::ostream& out, const json::object& install) {
  const json::array* commands = ArrayField(install, "helm_commands");
  if (commands == nullptr) return;
  for (const json::value& command : *commands) {
    if (!command.is_string()) continue;
    std::string_view text = command.get_string();
    for (size_t start = 0; start <= text.size();) {
      size_t end = std::min(text.find('\n', start), text.size());
      out << "  " << OneLineExcerpt(text.substr(start, end - start), 2000) << "\n";
      start = end + 1;
    }
  }
}

void PrintWarnings(Invocation& inv, const json::object& install) {
  const json::array* warnings = ArrayField(install, "warnings");
  if (warnings == nullptr) return;
  for (const json::value& warning : *warnings) {
    if (!warning.is_object()) continue;
    const json::object& w = warning.get_object();
    inv.err << "\nuplink: warning: " << Display(w, "message", 1000) << "\n";
    if (StringField(w, "code") == "console_unreachable") {
      inv.err << "  (pass --agent-console URL: the console's address as the cluster reaches "
                 "it)\n";
    }
  }
}

// POST /api/v1/connections/{id}/install: the helm commands for `choices`, which the console
// also keeps with the connection (its page shows the selector beside the agent's).
Result<json::object> GenerateInstallCommands(ApiClient& api, const std::string& id,
                                             const Choices& choices, const KubeTarget& target,
                                             const std::string& agent_console) {
  json::object body{{"console_url", agent_console},
                    {"workloads", choices.workloads()},
                    {"gpu_runtime_class", choices.gpu_runtime_class},
                    {"selector", choices.selector},
                    {"namespace", target.namespace_name},
                    {"secret_name", target.secret_name}};
  if (!target.context.empty()) body["kube_context"] = target.context;
  if (!target.kubeconfig.empty()) body["kubeconfig"] = target.kubeconfig;
  return api.Post("/api/v1/connections/" + net::PercentEncode(id) + "/install", body);
}

}  // namespace

Status RunConnectionsInstall(Invocation& inv) {
  const std::string& cluster = inv.operand(0);
  UPLINK_ASSIGN_OR_RETURN(KubeTarget target, TargetFromFlags(inv.line));
  UPLINK_ASSIGN_OR_RETURN(Choices choices, ChoicesFromFlags(inv.line));
  std::string agent_console = inv.line.Get("agent-console");
  if (inv.line.Has("agent-console") && !net::ParseBaseUrl(agent_console).ok()) {
    return InvalidArgumentError(
        "--agent-console must be the console's address as the cluster reaches it, "
        "https://HOST[:PORT]");
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  ApiClient& api = *session.api;
  if (agent_console.empty()) agent_console = api.console();

  // 1. What to install, and where.
  if (inv.terminal.Available() && !inv.line.Has("yes")) {
    UPLINK_RETURN_IF_ERROR(AskChoices(inv, choices));
  }
  if (!inv.line.Has("pod-security")) {
    target.pod_security = choices.pod_security();
  } else if (choices.kubernetes && target.pod_security != "privileged") {
    return InvalidArgumentError(
        "--pod-security " + target.pod_security +
        " refuses the node DaemonSet, which mounts host paths: leave --pod-security out, or "
        "install --workloads inventory");
  }
  inv.out << "Workloads: "
          << (choices.kubernetes ? "inventory, cluster and node telemetry" : "inventory only")
          << "\nGPU node selector: " << choices.selector;
  if (choices.kubernetes) {
    inv.out << "\nGPU runtime class: "
            << (choices.gpu_runtime_class.empty() ? "none" : choices.gpu_runtime_class);
  }
  inv.out << "\n";

  // 2. Which cluster kubectl would change.
  Status kubectl_problem = Status::Ok();
  std::optional<std::string> program = FindKubectl(inv);
  std::string context = target.context;
  if (!program) {
    kubectl_problem = NotFoundError("kubectl was not found on PATH (pass --kubectl PATH)");
  } else {
    Kubectl probe(*program, target, {});
    auto current = probe.Run({"config", "current-context"});
    if (!current.ok()) {
      kubectl_problem = current.status();
    } else if (current->exit_code != 0) {
      // With --context, a kubeconfig without a current context is fine.
      if (context.empty()) kubectl_problem = probe.Failure({"config", "current-context"}, *current);
    } else if (context.empty()) {
      context = OneLineExcerpt(TrimWhitespace(current->out), 200);
    }
  }

  // 3. Whether to change the cluster.
  bool proceed = false;
  if (kubectl_problem.ok()) {
    inv.out << "kubectl context: " << context << "\n" << std::flush;
    proceed = AskToProceed(
        inv, "Create Secret " + target.secret_name + " in namespace " + target.namespace_name +
                 " and set that namespace's Pod Security enforcement to " + target.pod_security +
                 ", using kubectl context '" + context + "'? [y/N] ");
  }

  // 4. The connection. An agent that reports uses the token: it is replaced only after a yes.
  UPLINK_ASSIGN_OR_RETURN(std::optional<json::object> existing, FindLiveConnection(api, cluster));
  const bool in_use = existing && AgentHasReported(*existing);
  if (in_use && !proceed) {
    const std::string id = Display(*existing, "id", 32);
    if (!kubectl_problem.ok()) {
      inv.err << "uplink: the Secret was not created: " << kubectl_problem.message() << "\n";
      inv.success = ExitCode::kInstallIncomplete;
    }
    inv.out << "Connection " << id << " for cluster " << OneLineExcerpt(cluster, 63)
            << " has an agent that last reported " << LastHeard(*existing)
            << ". Its token was left as it is, so that agent keeps working; nothing was "
               "changed.\n";
    Result<json::object> install = GenerateInstallCommands(api, id, choices, target, agent_console);
    if (install.ok()) {
      inv.out << "\nTo install or upgrade the agent with the Secret that holds that token:\n\n";
      PrintCommands(inv.out, *install);
      PrintWarnings(inv, *install);
    } else {
      inv.err << "uplink: no install commands: " << install.status().message() << "\n";
    }
    inv.out << "\nTo give the cluster a new token instead (the running agent is refused until "
               "the Secret holds it), run this again and answer yes, or run 'uplink "
               "connections rotate "
            << id << " --token-out FILE'.\n";
    return install.ok() ? Status::Ok() : install.status();
  }
  Result<json::object> reply = InternalError("no call made");
  UPLINK_ASSIGN_OR_RETURN(std::optional<json::array> namespaces,
                          existing && !inv.line.Has("read-namespaces")
                              ? std::optional<json::array>()
                              : ReadNamespacesChoice(inv));
  // The scope of a live connection is set first: a failure then changes nothing, while one
  // after the rotation would lose the new token.
  if (existing && namespaces) {
    UPLINK_RETURN_IF_ERROR(api.Call("PUT",
                                    "/api/v1/connections/" + Display(*existing, "id", 32) +
                                        "/namespaces",
                                    json::object{{"namespaces", *namespaces}})
                               .status());
  }
  if (existing) {
    reply = CallSensitive(inv, api, "POST",
                          "/api/v1/connections/" + Display(*existing, "id", 32) + "/rotate",
                          std::nullopt, kAgentTokenPurpose);
  } else {
    json::object body{{"agent_name", inv.line.Get("agent-name", "uplink-agent")},
                      {"cluster_name", cluster}};
    if (namespaces) body["namespaces"] = *namespaces;
    reply = CallSensitive(inv, api, "POST", "/api/v1/connections", body, kAgentTokenPurpose);
  }
  if (!reply.ok()) return reply.status();
  UPLINK_ASSIGN_OR_RETURN(Secret token, TakeAgentToken(*reply));
  const std::string id = Display(*reply, "id", 32);
  if (!existing) {
    inv.out << "Created connection " << id << " for cluster "
            << Display(*reply, "cluster_name", 63) << ".\n";
  } else if (in_use) {
    inv.out << "Rotated the token of connection " << id
            << "; the old token no longer works. The running agent reads the new one from the "
               "Secret once the kubelet refreshes it (within about a minute).\n";
  } else {
    inv.out << "Rotated the token of connection " << id
            << " (its agent has never reported, so no running agent loses it); the old token "
               "no longer works.\n";
  }
  Result<json::object> install =
      GenerateInstallCommands(api, id, choices, target, agent_console);

  // 5. The Secret, through kubectl.
  if (proceed) {
    Kubectl kubectl(*program, target, {token.Reveal(), Base64Encode(token.Reveal())});
    kubectl_problem = InstallSecret(kubectl, target, token, inv.out);
    if (kubectl_problem.ok()) {
      inv.out << "The token went to kubectl on its standard input only; it was not shown or "
                 "written to disk.\n";
      if (!install.ok()) return install.status();
      inv.out << "\nNow install the agent:\n\n";
      PrintCommands(inv.out, *install);
      PrintWarnings(inv, *install);
      return Status::Ok();
    }
  }

  // 6. By hand.
  if (!kubectl_problem.ok()) {
    inv.err << "uplink: the Secret was not created: " << kubectl_problem.message() << "\n";
    inv.success = ExitCode::kInstallIncomplete;
  } else {
    inv.out << "Nothing was changed in the cluster.\n";
  }
  inv.out << "\nAgent token (shown only this once; uplink keeps no copy):\n\n  " << token.Reveal()
          << "\n\nCreate the Secret yourself:\n\n";
  PrintManualSecretCommands(inv.out, target);
  if (!install.ok()) {
    inv.err << "uplink: no install commands: " << install.status().message() << "\n";
    inv.success = ExitCode::kInstallIncomplete;
    return Status::Ok();
  }
  inv.out << "\nThen install the agent:\n\n";
  PrintCommands(inv.out, *install);
  PrintWarnings(inv, *install);
  return Status::Ok();
}

}  // namespace uplink::cli
