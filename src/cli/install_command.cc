// uplink connections install: the cluster's agent token straight into a Kubernetes Secret.
//
// The token lives only in this process's memory and reaches kubectl on its standard input
// (`--from-file=UPLINK_AGENT_TOKEN=/dev/stdin`, or a merge patch read from /dev/stdin): never
// argv, never a file, never the screen. If the person says no, or kubectl is missing or
// fails, the token is printed once with the commands to run by hand, as the install guide
// promises; a failure then exits 9 so scripts notice.
#include <algorithm>
#include <cctype>
#include <chrono>

#include "cli/commands.h"
#include "cli/connections.h"
#include "cli/render.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "common/text.h"

namespace uplink::cli {
namespace {

constexpr auto kKubectlTimeout = std::chrono::seconds(60);
constexpr char kTokenKey[] = "UPLINK_AGENT_TOKEN";

// RFC 1123 label (namespaces): 1-63 of [a-z0-9-], alphanumeric at both ends.
bool IsDnsLabel(std::string_view s, size_t max = 63) {
  if (s.empty() || s.size() > max) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-'; });
}

// RFC 1123 subdomain (Secret names): dot-separated labels, 253 characters at most.
bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (size_t start = 0;;) {
    size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string_view::npos ? dot : dot - start)))
      return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

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
  if (t.pod_security != "privileged" && t.pod_security != "baseline" &&
      t.pod_security != "restricted") {
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

bool AskToProceed(Invocation& inv, const std::string& question) {
  if (inv.line.Has("yes")) return true;
  Result<std::string> answer = InternalError("unanswered");
  if (inv.terminal.Available()) {
    answer = inv.terminal.ReadLine(question);
  } else {
    inv.err << question << std::flush;
    answer = ReadLineFrom(inv.in, "the answer on stdin", 64);
    inv.err << "\n";
  }
  if (!answer.ok()) return false;  // no answer is no
  std::string text(TrimWhitespace(*answer));
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text == "y" || text == "yes";
}

}  // namespace

Status RunConnectionsInstall(Invocation& inv) {
  const std::string& cluster = inv.operand(0);
  UPLINK_ASSIGN_OR_RETURN(KubeTarget target, TargetFromFlags(inv.line));
  const std::string chart = inv.line.Get("chart", "charts/uplink-agent");
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));

  // 1. Which cluster kubectl would change, and whether that is wanted.
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
  bool proceed = false;
  if (kubectl_problem.ok()) {
    inv.out << "kubectl context: " << context << "\n" << std::flush;
    proceed = AskToProceed(
        inv, "Create Secret " + target.secret_name + " in namespace " + target.namespace_name +
                 " and set that namespace's Pod Security enforcement to " + target.pod_security +
                 ", using kubectl context '" + context + "'? [y/N] ");
  }

  // 2. A connection for the cluster: a new one, or a new token for the live one.
  ApiClient& api = *session.api;
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> existing, FindLiveConnection(api, cluster));
  Result<json::object> reply = InternalError("no call made");
  UPLINK_ASSIGN_OR_RETURN(std::optional<json::array> namespaces,
                          existing && !inv.line.Has("read-namespaces")
                              ? std::optional<json::array>()
                              : ReadNamespacesChoice(inv));
  // The scope of a live connection is set first: a failure then changes nothing, while one
  // after the rotation would lose the new token.
  if (existing && namespaces) {
    UPLINK_RETURN_IF_ERROR(api.Call("PUT", "/api/v1/connections/" + *existing + "/namespaces",
                                    json::object{{"namespaces", *namespaces}})
                               .status());
  }
  if (existing) {
    reply = CallSensitive(inv, api, "POST", "/api/v1/connections/" + *existing + "/rotate",
                          std::nullopt, kAgentTokenPurpose);
  } else {
    json::object body{{"agent_name", inv.line.Get("agent-name", "uplink-agent")},
                      {"cluster_name", cluster}};
    if (namespaces) body["namespaces"] = *namespaces;
    reply = CallSensitive(inv, api, "POST", "/api/v1/connections", body, kAgentTokenPurpose);
  }
  if (!reply.ok()) return reply.status();
  UPLINK_ASSIGN_OR_RETURN(Secret token, TakeAgentToken(*reply));
  inv.out << (existing ? "Rotated the token of connection " : "Created connection ")
          << Display(*reply, "id", 32) << " for cluster " << Display(*reply, "cluster_name", 63)
          << (existing ? "; the old token no longer works.\n" : ".\n");

  // 3. The Secret, through kubectl.
  if (proceed) {
    Kubectl kubectl(*program, target, {token.Reveal(), Base64Encode(token.Reveal())});
    kubectl_problem = InstallSecret(kubectl, target, token, inv.out);
    if (kubectl_problem.ok()) {
      inv.out << "The token went to kubectl on its standard input only; it was not shown or "
                 "written to disk.\n\nNow install the agent:\n\n  "
              << HelmCommand(chart, target, api.console()) << "\n";
      return Status::Ok();
    }
  }

  // 4. By hand.
  if (!kubectl_problem.ok()) {
    inv.err << "uplink: the Secret was not created: " << kubectl_problem.message() << "\n";
    inv.success = ExitCode::kInstallIncomplete;
  } else {
    inv.out << "Nothing was changed in the cluster.\n";
  }
  inv.out << "\nAgent token (shown only this once; uplink keeps no copy):\n\n  " << token.Reveal()
          << "\n\nCreate the Secret yourself:\n\n";
  PrintManualSecretCommands(inv.out, target);
  inv.out << "\nThen install the agent:\n\n  " << HelmCommand(chart, target, api.console()) << "\n";
  return Status::Ok();
}

}  // namespace uplink::cli
