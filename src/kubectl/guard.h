// The read-only kubectl guard: the one check every kubectl argv passes before the console
// queues it and again before the agent runs it.
//
// The argv is parsed the way kubectl parses it (cobra finds the command, pflag the flags):
// global flags before or after the verb, `--flag=value` and `--flag value`, attached short
// flags (`-nfoo`, `-n=foo`), combined short booleans (`-Ap`), `--` (everything after it is an
// argument), `_` spelled for `-` in long flag names (kubectl normalizes `--as_group` to
// `--as-group`). Everything is allowlisted and anything not understood is refused:
//
// - Verbs: get, logs, top node|pod, describe, api-resources, api-versions, version,
//   cluster-info and explain. Any other word is a write, an interactive command or a plugin.
// - Flags: per verb, a table saying which flags exist and whether each takes a value. Before
//   the verb (and between `top` and node|pod) only global flags may appear, because that is
//   where cobra looks for the command word: there a verb flag would swallow the verb. A
//   separate flag value may not start with '-' (write --tail=-1), so no argument can be read
//   as a flag by one parser and as a value by another.
// - Refused outright: every flag that changes the target, credentials or identity
//   (--kubeconfig, -s/--server, --token, --user, --cluster, --context, --as*, --client-*,
//   --certificate-authority, --insecure-*, --tls-server-name, --username, --password,
//   --kuberc), flags that write or read local files (--cache-dir, --log-file, --log-dir,
//   --profile*, -f/--filename, -k/--kustomize, -R/--recursive, -o *-file=...), --raw, watch
//   and follow (-w, --watch-only, -f/--follow), `cluster-info dump`.
// - -o go-template and --template are refused: a Go template is a program (printf with a
//   huge width allocates as much memory as it is told to before any output bound applies,
//   and nested range multiplies work); jsonpath= and custom-columns= read the same fields.
// - -v/--v: levels 0 to 6 only. Level 6 logs request URLs and timings, which is what one
//   needs to see why a command fails; 7 and above log request headers, response bodies and
//   curl lines, and whether client-go masks the bearer token there depends on its version.
//   --vmodule is refused for the same reason.
// - Resource types: a fixed table of built-in types that hold no credentials, in every
//   spelling kubectl resolves (plural, singular, kind in any case, short name, `.group`,
//   `.version.group`); a group, when given, must be the type's own, so `pods.evil.io` is not
//   pods. Secrets are refused in every spelling (secret, secrets, secret/x, secrets.v1.,
//   Secret, SECRETS, pods,secrets), and so is any argument spelled like them, names
//   included, so that no misreading of where the type is could make one a type. ConfigMaps
//   and ServiceAccounts are refused too (they commonly hold or lead to credentials). Other
//   names are refused: a custom resource could hold anything, and the guard cannot see the
//   cluster's discovery. `all` is allowed; its built-in members hold nothing secret. A
//   custom resource can list itself in the `all` category (and claim a short name); the
//   agent's ClusterRole, which grants nothing on custom resources or secrets, is the lock
//   behind this one for what the client-side guard cannot see.
// - explain reads only schemas, so any well-formed TYPE[.field.path] is allowed except a
//   secret spelling.
// - Bounds: at most 64 arguments of at most 4 KiB each; a NUL, line break or other control
//   character, or any non-ASCII byte (lookalike letters), refuses the whole argv.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace uplink::kubectl {

inline constexpr std::string_view kRefusalHeadline =
    "This cluster is connected through the in-cluster uplink agent, which is read-only.";

inline constexpr size_t kMaxArguments = 64;
inline constexpr size_t kMaxArgumentBytes = 4096;

// What an allowed argv does.
struct KubectlCommand {
  // get, logs, top, describe, api-resources, api-versions, version, cluster-info, explain.
  std::string verb;
  // Canonical lower-case plural names of what it reads ("pods", "nodes", "deployments.apps",
  // "pods/log", "nodes.metrics.k8s.io"), in order, without repeats; empty when it reads no
  // objects (api-resources, api-versions, version, explain).
  std::vector<std::string> resources;
  // -n/--namespace as given (the last one, as kubectl takes it).
  std::optional<std::string> namespace_name;
  // -A/--all-namespaces, or a read that spans every namespace by itself (describe nodes
  // lists the pods of every namespace running on each node).
  bool all_namespaces = false;
  // Touches only cluster-scoped data: nodes, namespaces and other cluster-scoped types,
  // api-resources, api-versions, version, explain, top node.
  bool cluster_scoped = false;

  friend bool operator==(const KubectlCommand&, const KubectlCommand&) = default;
};

// The verbs CheckKubectlArgv allows, as KubectlCommand::verb names them.
inline constexpr std::string_view kAllowedVerbs[] = {
    "get", "logs", "top", "describe", "api-resources", "api-versions", "version", "cluster-info",
    "explain"};

// A resource type as CheckKubectlArgv reports it in KubectlCommand::resources.
struct CanonicalResource {
  std::string name;  // "pods", "deployments.apps", "nodes.metrics.k8s.io"
  bool namespaced = false;
};

// TYPE in any spelling kubectl resolves ("po", "Pod", "pods.v1.", "deploy.apps") as its
// canonical name, so that something matching commands by resource (approval rules) treats
// every spelling alike. PermissionDenied with the reason for what the guard never lets
// through (secrets, configmaps, service accounts, unknown types) and for `all`, a category.
Result<CanonicalResource> CanonicalResourceOf(std::string_view spelling);

// argv[0] must be "kubectl". PermissionDenied with a short one-line reason on refusal.
Result<KubectlCommand> CheckKubectlArgv(const std::vector<std::string>& argv);

// kRefusalHeadline + "\n" + reason: the exact text shown to users.
std::string RefusalText(std::string_view reason);

// Namespace scope of a connection: nullopt = not chosen yet, {"*"} = all, else the listed
// names. Cluster-scoped reads are always allowed, before a scope is chosen too; a namespaced
// read needs a chosen scope (the refusal says how to choose one), -A needs "*", and a
// command without -n reads namespace "default". PermissionDenied with a reason otherwise.
Status CheckNamespaceScope(const KubectlCommand& command,
                           const std::optional<std::vector<std::string>>& scope);

}  // namespace uplink::kubectl
