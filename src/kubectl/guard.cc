#include "kubectl/guard.h"

#include <algorithm>
#include <array>
#include <span>

#include "common/kubernetes_names.h"
#include "common/text.h"

namespace uplink::kubectl {
namespace {

constexpr int kMaxVerbosity = 6;
constexpr size_t kMaxScopeNamesShown = 5;

Status Refuse(std::string reason) { return PermissionDeniedError(std::move(reason)); }

// Arguments reach here only after the bounds check (printable ASCII), so an excerpt is safe
// to show; it is kept short so a reason stays one line.
std::string Quoted(std::string_view text) { return "'" + OneLineExcerpt(text, 60) + "'"; }

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

bool AllOf(std::string_view text, bool (*allowed)(char)) {
  return std::all_of(text.begin(), text.end(), allowed);
}

// An object name as it may appear in an API path; it starts with a letter or digit, so it
// can never be read as a flag.
bool IsObjectName(std::string_view text) {
  return !text.empty() && text.size() <= 253 && IsAlnum(text.front()) &&
         AllOf(text, [](char c) {
           return IsAlnum(c) || c == '-' || c == '.' || c == '_' || c == ':';
         });
}

// "secret", "Secrets", "secrets.v1.", "SECRET.foo": the part before the first '.' names
// the secrets type in any case. Applied to every argument that is not a flag or a flag's
// value: types and names alike.
bool SpellsSecrets(std::string_view text) {
  std::string head = AsciiLower(text.substr(0, text.find('.')));
  return head == "secret" || head == "secrets";
}

// Each piece of a TYPE,TYPE or TYPE/NAME argument.
bool MentionsSecrets(std::string_view argument) {
  for (size_t start = 0;;) {
    size_t end = argument.find_first_of(",/", start);
    if (SpellsSecrets(argument.substr(start, end == std::string_view::npos ? end : end - start))) {
      return true;
    }
    if (end == std::string_view::npos) return false;
    start = end + 1;
  }
}

// v1, v2beta1, v1alpha3.
bool IsApiVersion(std::string_view text) {
  if (text.size() < 2 || text[0] != 'v' || !IsDigit(text[1])) return false;
  size_t i = 1;
  while (i < text.size() && IsDigit(text[i])) ++i;
  if (i == text.size()) return true;
  std::string_view rest = text.substr(i);
  for (std::string_view stage : {"alpha", "beta"}) {
    if (rest.substr(0, stage.size()) == stage) {
      rest.remove_prefix(stage.size());
      return !rest.empty() && AllOf(rest, IsDigit);
    }
  }
  return false;
}

// --- resource types -----------------------------------------------------------------------

struct ResourceType {
  std::string_view plural;
  std::string_view singular;  // also the kind, lower-cased
  std::string_view group;     // "" for the core group
  std::array<std::string_view, 2> short_names;
  bool namespaced;
  // Only with its group spelled out: unqualified "nodes" is the core type, not metrics.
  bool qualified_only = false;
  // Named by `kubectl logs TYPE/NAME` (kubectl picks one of its pods).
  bool has_pods = false;
};

// Built-in types that hold no credentials. Core types come first: for an unqualified name
// the first match wins, as kubectl prefers the core group.
constexpr ResourceType kResourceTypes[] = {
    {"pods", "pod", "", {"po"}, true, false, true},
    {"nodes", "node", "", {"no"}, false},
    {"namespaces", "namespace", "", {"ns"}, false},
    {"events", "event", "", {"ev"}, true},
    {"services", "service", "", {"svc"}, true, false, true},
    {"endpoints", "endpoints", "", {"ep"}, true},
    {"persistentvolumes", "persistentvolume", "", {"pv"}, false},
    {"persistentvolumeclaims", "persistentvolumeclaim", "", {"pvc"}, true},
    {"resourcequotas", "resourcequota", "", {"quota"}, true},
    {"limitranges", "limitrange", "", {"limits"}, true},
    {"replicationcontrollers", "replicationcontroller", "", {"rc"}, true, false, true},
    {"podtemplates", "podtemplate", "", {}, true},
    {"deployments", "deployment", "apps", {"deploy"}, true, false, true},
    {"statefulsets", "statefulset", "apps", {"sts"}, true, false, true},
    {"daemonsets", "daemonset", "apps", {"ds"}, true, false, true},
    {"replicasets", "replicaset", "apps", {"rs"}, true, false, true},
    {"controllerrevisions", "controllerrevision", "apps", {}, true},
    {"jobs", "job", "batch", {}, true, false, true},
    {"cronjobs", "cronjob", "batch", {"cj"}, true},
    {"horizontalpodautoscalers", "horizontalpodautoscaler", "autoscaling", {"hpa"}, true},
    {"poddisruptionbudgets", "poddisruptionbudget", "policy", {"pdb"}, true},
    {"events", "event", "events.k8s.io", {"ev"}, true},
    {"ingresses", "ingress", "networking.k8s.io", {"ing"}, true},
    {"ingressclasses", "ingressclass", "networking.k8s.io", {}, false},
    {"networkpolicies", "networkpolicy", "networking.k8s.io", {"netpol"}, true},
    {"endpointslices", "endpointslice", "discovery.k8s.io", {}, true},
    {"storageclasses", "storageclass", "storage.k8s.io", {"sc"}, false},
    {"csidrivers", "csidriver", "storage.k8s.io", {}, false},
    {"csinodes", "csinode", "storage.k8s.io", {}, false},
    {"csistoragecapacities", "csistoragecapacity", "storage.k8s.io", {}, true},
    {"volumeattachments", "volumeattachment", "storage.k8s.io", {}, false},
    {"priorityclasses", "priorityclass", "scheduling.k8s.io", {"pc"}, false},
    {"runtimeclasses", "runtimeclass", "node.k8s.io", {}, false},
    {"leases", "lease", "coordination.k8s.io", {}, true},
    {"resourceclaims", "resourceclaim", "resource.k8s.io", {}, true},
    {"resourceclaimtemplates", "resourceclaimtemplate", "resource.k8s.io", {}, true},
    {"resourceslices", "resourceslice", "resource.k8s.io", {}, false},
    {"deviceclasses", "deviceclass", "resource.k8s.io", {}, false},
    {"customresourcedefinitions", "customresourcedefinition", "apiextensions.k8s.io",
     {"crd", "crds"}, false},
    {"nodes", "nodemetrics", "metrics.k8s.io", {}, false, true},
    {"pods", "podmetrics", "metrics.k8s.io", {}, true, true},
};

// The built-in members of the `all` category.
constexpr std::string_view kAllCategory[] = {"pods",
                                             "services",
                                             "replicationcontrollers",
                                             "daemonsets.apps",
                                             "deployments.apps",
                                             "replicasets.apps",
                                             "statefulsets.apps",
                                             "horizontalpodautoscalers.autoscaling",
                                             "jobs.batch",
                                             "cronjobs.batch"};

struct ExcludedType {
  std::array<std::string_view, 3> spellings;
  std::string_view reason;
};

constexpr ExcludedType kExcludedTypes[] = {
    {{"configmaps", "configmap", "cm"},
     "configmaps often hold credentials; they are not read through the agent"},
    {{"serviceaccounts", "serviceaccount", "sa"},
     "service accounts lead to their tokens; they are not read through the agent"},
};

std::string CanonicalName(const ResourceType& type) {
  if (type.group.empty()) return std::string(type.plural);
  return std::string(type.plural) + "." + std::string(type.group);
}

bool NamedBy(const ResourceType& type, std::string_view name) {
  return !name.empty() &&
         (name == type.plural || name == type.singular ||
          std::find(type.short_names.begin(), type.short_names.end(), name) !=
              type.short_names.end());
}

// One resource type as kubectl's RESTMapper reads it: NAME, NAME.GROUP or NAME.VERSION.GROUP,
// NAME in any case. `all` is the category.
struct ResolvedType {
  const ResourceType* type = nullptr;  // null for `all`
};

Result<ResolvedType> ResolveType(std::string_view spelling) {
  if (spelling.empty()) return Refuse("an empty resource type");
  if (SpellsSecrets(spelling)) return Refuse("secrets are never read through the agent");
  if (!AllOf(spelling, [](char c) { return IsAlnum(c) || c == '.' || c == '-'; })) {
    return Refuse(Quoted(spelling) + " is not a resource type");
  }
  size_t dot = spelling.find('.');
  std::string name = AsciiLower(spelling.substr(0, dot));
  for (const ExcludedType& excluded : kExcludedTypes) {
    if (std::find(excluded.spellings.begin(), excluded.spellings.end(), name) !=
        excluded.spellings.end()) {
      return Refuse(std::string(excluded.reason));
    }
  }
  if (name == "all" && dot == std::string_view::npos) return ResolvedType{};
  for (const ResourceType& type : kResourceTypes) {
    if (!NamedBy(type, name)) continue;
    if (dot == std::string_view::npos) {
      // The metrics types share their plural with the core ones; their kind is their own.
      if (!type.qualified_only || name == type.singular) return ResolvedType{&type};
      continue;
    }
    std::string_view rest = spelling.substr(dot + 1);
    // NAME.GROUP, or NAME.VERSION.GROUP (`pods.v1.` is the core group's v1).
    if (rest == type.group) return ResolvedType{&type};
    size_t version_end = rest.find('.');
    if (version_end != std::string_view::npos && IsApiVersion(rest.substr(0, version_end)) &&
        rest.substr(version_end + 1) == type.group) {
      return ResolvedType{&type};
    }
  }
  return Refuse("unknown resource type " + Quoted(spelling) +
                ": only built-in types that hold no credentials are read");
}

// --- flags --------------------------------------------------------------------------------

enum class Verb {
  kGet,
  kLogs,
  kTop,  // until node or pod follows
  kTopNode,
  kTopPod,
  kDescribe,
  kApiResources,
  kApiVersions,
  kVersion,
  kClusterInfo,
  kExplain,
};

enum class ValueKind {
  kBool,
  kNamespace,
  kVerbosity,
  kDuration,
  kTimestamp,
  kInteger,      // may be negative (--tail=-1)
  kCount,        // not negative
  kLabel,        // container names
  kText,         // selectors, sort-by, label columns: kubectl checks their syntax
  kWords,        // api groups, versions, verbs, categories
  kOutput,       // -o: per verb
  kSubresource,  // status or scale
  kTopSortBy,    // cpu or memory
  kNameOrKind,   // api-resources --sort-by
};

enum class Effect { kNone, kNamespace, kAllNamespaces, kSelector };

struct Flag {
  std::string_view name;
  char shorthand = 0;
  ValueKind value = ValueKind::kBool;
  Effect effect = Effect::kNone;
};

constexpr Flag kGlobalFlags[] = {
    {"namespace", 'n', ValueKind::kNamespace, Effect::kNamespace},
    {"v", 'v', ValueKind::kVerbosity},
    {"request-timeout", 0, ValueKind::kDuration},
    {"match-server-version", 0, ValueKind::kBool},
    {"warnings-as-errors", 0, ValueKind::kBool},
    {"disable-compression", 0, ValueKind::kBool},
};

constexpr Flag kAllNamespaces{"all-namespaces", 'A', ValueKind::kBool, Effect::kAllNamespaces};
constexpr Flag kSelector{"selector", 'l', ValueKind::kText, Effect::kSelector};
constexpr Flag kNoHeaders{"no-headers", 0, ValueKind::kBool};
constexpr Flag kChunkSize{"chunk-size", 0, ValueKind::kCount};
constexpr Flag kOutput{"output", 'o', ValueKind::kOutput};
constexpr Flag kFieldSelector{"field-selector", 0, ValueKind::kText};

constexpr Flag kGetFlags[] = {
    kAllNamespaces,
    {"allow-missing-template-keys", 0, ValueKind::kBool},
    kChunkSize,
    kFieldSelector,
    {"ignore-not-found", 0, ValueKind::kBool},
    {"label-columns", 'L', ValueKind::kText},
    kNoHeaders,
    kOutput,
    kSelector,
    {"server-print", 0, ValueKind::kBool},
    {"show-kind", 0, ValueKind::kBool},
    {"show-labels", 0, ValueKind::kBool},
    {"show-managed-fields", 0, ValueKind::kBool},
    {"sort-by", 0, ValueKind::kText},
    {"subresource", 0, ValueKind::kSubresource},
};

constexpr Flag kDescribeFlags[] = {
    kAllNamespaces, kChunkSize, kSelector, {"show-events", 0, ValueKind::kBool}};

constexpr Flag kLogsFlags[] = {
    {"all-containers", 0, ValueKind::kBool},
    {"all-pods", 0, ValueKind::kBool},
    {"container", 'c', ValueKind::kLabel},
    {"ignore-errors", 0, ValueKind::kBool},
    {"limit-bytes", 0, ValueKind::kCount},
    {"max-log-requests", 0, ValueKind::kCount},
    {"pod-running-timeout", 0, ValueKind::kDuration},
    {"prefix", 0, ValueKind::kBool},
    {"previous", 'p', ValueKind::kBool},
    kSelector,
    {"since", 0, ValueKind::kDuration},
    {"since-time", 0, ValueKind::kTimestamp},
    {"tail", 0, ValueKind::kInteger},
    {"timestamps", 0, ValueKind::kBool},
};

constexpr Flag kTopNodeFlags[] = {
    kNoHeaders,
    kSelector,
    {"show-capacity", 0, ValueKind::kBool},
    {"sort-by", 0, ValueKind::kTopSortBy},
    {"use-protocol-buffers", 0, ValueKind::kBool},
};

constexpr Flag kTopPodFlags[] = {
    kAllNamespaces,
    {"containers", 0, ValueKind::kBool},
    kFieldSelector,
    kNoHeaders,
    kSelector,
    {"sort-by", 0, ValueKind::kTopSortBy},
    {"sum", 0, ValueKind::kBool},
    {"use-protocol-buffers", 0, ValueKind::kBool},
};

constexpr Flag kApiResourcesFlags[] = {
    {"api-group", 0, ValueKind::kWords},
    {"cached", 0, ValueKind::kBool},
    {"categories", 0, ValueKind::kWords},
    {"namespaced", 0, ValueKind::kBool},
    kNoHeaders,
    kOutput,
    {"sort-by", 0, ValueKind::kNameOrKind},
    {"verbs", 0, ValueKind::kWords},
};

constexpr Flag kVersionFlags[] = {{"client", 0, ValueKind::kBool}, kOutput};

// --recursive here prints the name of every field (a schema read); it has no shorthand.
constexpr Flag kExplainFlags[] = {
    {"api-version", 0, ValueKind::kWords}, kOutput, {"recursive", 0, ValueKind::kBool}};

struct VerbSpec {
  std::string_view name;
  Verb verb;
  std::span<const Flag> flags;
};

constexpr VerbSpec kVerbs[] = {
    {"get", Verb::kGet, kGetFlags},
    {"logs", Verb::kLogs, kLogsFlags},
    {"top", Verb::kTop, {}},
    {"describe", Verb::kDescribe, kDescribeFlags},
    {"api-resources", Verb::kApiResources, kApiResourcesFlags},
    {"api-versions", Verb::kApiVersions, {}},
    {"version", Verb::kVersion, kVersionFlags},
    {"cluster-info", Verb::kClusterInfo, {}},
    {"explain", Verb::kExplain, kExplainFlags},
};

constexpr std::string_view kVerbList =
    "get, logs, top, describe, api-resources, api-versions, version, cluster-info and explain";

std::span<const Flag> FlagsOf(Verb verb) {
  switch (verb) {
    case Verb::kTopNode: return kTopNodeFlags;
    case Verb::kTopPod: return kTopPodFlags;
    default:
      for (const VerbSpec& spec : kVerbs) {
        if (spec.verb == verb) return spec.flags;
      }
      return {};
  }
}

std::string_view VerbName(Verb verb) {
  switch (verb) {
    case Verb::kTop:
    case Verb::kTopNode:
    case Verb::kTopPod: return "top";
    default:
      for (const VerbSpec& spec : kVerbs) {
        if (spec.verb == verb) return spec.name;
      }
      return "";
  }
}

// Flags refused whatever the verb, with the reason. A name ending in '*' is a prefix.
struct RefusedFlag {
  std::string_view name;
  std::string_view reason;
};

constexpr std::string_view kTargetReason =
    "changes the cluster, credentials or identity kubectl uses; the agent always uses its own";
constexpr std::string_view kLocalFileReason =
    "reads or writes files on the agent; only API reads are allowed";
constexpr std::string_view kEndlessReason =
    "never ends; the agent runs commands that finish (drop the flag)";

constexpr std::string_view kDumpReason = "cluster-info dump copies the cluster's state into files";

constexpr RefusedFlag kRefusedFlags[] = {
    {"kubeconfig", kTargetReason},
    {"server", kTargetReason},
    {"token", kTargetReason},
    {"user", kTargetReason},
    {"username", kTargetReason},
    {"password", kTargetReason},
    {"cluster", kTargetReason},
    {"context", kTargetReason},
    {"as", kTargetReason},
    {"as-*", kTargetReason},
    {"certificate-authority", kTargetReason},
    {"client-*", kTargetReason},
    {"insecure-*", kTargetReason},
    {"tls-server-name", kTargetReason},
    {"kuberc", kTargetReason},
    {"cache-dir", kLocalFileReason},
    {"log-*", kLocalFileReason},
    {"profile*", kLocalFileReason},
    {"filename", kLocalFileReason},
    {"kustomize", kLocalFileReason},
    {"recursive", kLocalFileReason},
    {"raw", "sends a request to any API path, around the read-only checks"},
    {"watch", kEndlessReason},
    {"watch-only", kEndlessReason},
    {"output-watch-events", kEndlessReason},
    {"follow", kEndlessReason},
    {"template", "runs a Go template; use -o jsonpath=... or -o custom-columns=..."},
    {"vmodule", "raises log verbosity, which prints request headers"},
};

struct RefusedShorthand {
  char shorthand;
  std::string_view flags;
  std::string_view reason;
};

constexpr RefusedShorthand kRefusedShorthands[] = {
    {'s', "--server", kTargetReason},
    {'f', "--filename or --follow", "reads local files or never ends"},
    {'k', "--kustomize", kLocalFileReason},
    {'R', "--recursive", kLocalFileReason},
    {'w', "--watch", kEndlessReason},
};

std::optional<std::string_view> RefusedFlagReason(std::string_view name) {
  for (const RefusedFlag& refused : kRefusedFlags) {
    std::string_view pattern = refused.name;
    if (pattern.back() == '*') {
      pattern.remove_suffix(1);
      if (name.substr(0, pattern.size()) == pattern) return refused.reason;
    } else if (name == pattern) {
      return refused.reason;
    }
  }
  return std::nullopt;
}

// pflag's strconv.ParseBool.
std::optional<bool> ParseBool(std::string_view text) {
  for (std::string_view yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == yes) return true;
  }
  for (std::string_view no : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (text == no) return false;
  }
  return std::nullopt;
}

// -o for each verb that has it.
Status CheckOutput(Verb verb, std::string_view value) {
  auto one_of = [&](std::initializer_list<std::string_view> formats) {
    return std::find(formats.begin(), formats.end(), value) != formats.end();
  };
  std::string_view format = value.substr(0, value.find('='));
  bool has_spec = format.size() < value.size();
  if (format.find("template") != std::string_view::npos) {
    return Refuse("-o " + Quoted(format) +
                  " runs a Go template; use -o jsonpath=... or -o custom-columns=...");
  }
  if (format.find("file") != std::string_view::npos) {
    return Refuse("-o " + Quoted(format) + " " + std::string(kLocalFileReason));
  }
  switch (verb) {
    case Verb::kGet:
      if (one_of({"json", "yaml", "wide", "name"})) return Status::Ok();
      if (format == "jsonpath" || format == "jsonpath-as-json" || format == "custom-columns") {
        if (!has_spec || format.size() + 1 == value.size()) {
          return Refuse("-o " + std::string(format) + " needs its expression: -o " +
                        std::string(format) + "=...");
        }
        return Status::Ok();
      }
      return Refuse("output format " + Quoted(value) +
                    " is not allowed: use json, yaml, wide, name, jsonpath=..., "
                    "jsonpath-as-json=... or custom-columns=...");
    case Verb::kApiResources:
      if (one_of({"wide", "name"})) return Status::Ok();
      return Refuse("api-resources -o takes wide or name");
    case Verb::kVersion:
      if (one_of({"json", "yaml"})) return Status::Ok();
      return Refuse("version -o takes json or yaml");
    case Verb::kExplain:
      if (one_of({"plaintext", "plaintext-openapiv2"})) return Status::Ok();
      return Refuse("explain -o takes plaintext or plaintext-openapiv2");
    default:
      return Refuse("-o is not a flag of " + std::string(VerbName(verb)));
  }
}

Status CheckValue(const Flag& flag, std::string_view spelled, std::string_view value, Verb verb) {
  auto bad = [&](std::string_view what) {
    return Refuse(std::string(spelled) + " takes " + std::string(what) + ", not " + Quoted(value));
  };
  switch (flag.value) {
    case ValueKind::kBool:
      return ParseBool(value) ? Status::Ok() : bad("true or false");
    case ValueKind::kNamespace:
      return IsDnsLabel(value) ? Status::Ok() : bad("a namespace name");
    case ValueKind::kVerbosity:
      if (value.size() > 3 || !ParseDecimal(value)) return bad("a log level");
      if (!ParseDecimal(value, 0, kMaxVerbosity)) {
        return Refuse("log levels above " + std::to_string(kMaxVerbosity) +
                      " print request headers and bodies; use -v=" +
                      std::to_string(kMaxVerbosity) + " or less");
      }
      return Status::Ok();
    case ValueKind::kDuration:
      return !value.empty() && value.size() <= 32 && IsDigit(value.front()) &&
                     AllOf(value, [](char c) { return IsLowerAlnum(c) || c == '.'; })
                 ? Status::Ok()
                 : bad("a duration such as 30s or 1h");
    case ValueKind::kTimestamp:
      return !value.empty() && value.size() <= 40 && IsDigit(value.front()) &&
                     AllOf(value, [](char c) {
                       return IsDigit(c) || c == 'T' || c == 'Z' || c == ':' || c == '.' ||
                              c == '+' || c == '-';
                     })
                 ? Status::Ok()
                 : bad("an RFC 3339 time");
    case ValueKind::kInteger: {
      std::string_view digits = value.substr(!value.empty() && value.front() == '-' ? 1 : 0);
      return !digits.empty() && digits.size() <= 18 && AllOf(digits, IsDigit)
                 ? Status::Ok()
                 : bad("a whole number");
    }
    case ValueKind::kCount:
      return !value.empty() && value.size() <= 18 && AllOf(value, IsDigit)
                 ? Status::Ok()
                 : bad("a whole number");
    case ValueKind::kLabel:
      return IsDnsLabel(value) ? Status::Ok() : bad("a container name");
    case ValueKind::kText:
      return value.empty() ? bad("a value") : Status::Ok();
    case ValueKind::kWords:
      return !value.empty() && AllOf(value, [](char c) {
               return IsLowerAlnum(c) || c == '.' || c == ',' || c == '/' || c == '-';
             })
                 ? Status::Ok()
                 : bad("lower-case names");
    case ValueKind::kOutput:
      return CheckOutput(verb, value);
    case ValueKind::kSubresource:
      return value == "status" || value == "scale" ? Status::Ok() : bad("status or scale");
    case ValueKind::kTopSortBy:
      return value == "cpu" || value == "memory" ? Status::Ok() : bad("cpu or memory");
    case ValueKind::kNameOrKind:
      return value == "name" || value == "kind" ? Status::Ok() : bad("name or kind");
  }
  return InternalError("unhandled flag value kind");
}

// --- the parser ---------------------------------------------------------------------------

class Parser {
 public:
  explicit Parser(const std::vector<std::string>& argv) : argv_(argv) {}

  Result<KubectlCommand> Parse() {
    for (next_ = 1; next_ < argv_.size();) {
      const std::string& arg = argv_[next_++];
      if (after_dashes_) {
        arguments_.push_back(arg);
      } else if (arg == "--") {
        if (!CommandKnown()) return Refuse("'--' before the kubectl command");
        after_dashes_ = true;
      } else if (arg.size() > 2 && arg[0] == '-' && arg[1] == '-') {
        UPLINK_RETURN_IF_ERROR(LongFlag(arg));
      } else if (arg.size() > 1 && arg[0] == '-') {
        UPLINK_RETURN_IF_ERROR(ShortFlags(arg));
      } else {
        UPLINK_RETURN_IF_ERROR(Word(arg));
      }
    }
    if (!verb_) return Refuse("no kubectl command: allowed are " + std::string(kVerbList));
    if (*verb_ == Verb::kTop) return Refuse("kubectl top needs node or pod");
    for (const std::string& argument : arguments_) {
      if (MentionsSecrets(argument)) return Refuse("secrets are never read through the agent");
    }
    command_.verb = std::string(VerbName(*verb_));
    UPLINK_RETURN_IF_ERROR(CheckArguments());
    return command_;
  }

 private:
  bool CommandKnown() const { return verb_.has_value() && *verb_ != Verb::kTop; }

  // A word that is not a flag: the command while it is not known yet (cobra's rule), else an
  // argument.
  Status Word(const std::string& word) {
    if (!verb_) {
      for (const VerbSpec& spec : kVerbs) {
        if (word == spec.name) {
          verb_ = spec.verb;
          return Status::Ok();
        }
      }
      return Refuse("kubectl " + Quoted(word) + " is not allowed: only " + std::string(kVerbList) +
                    " run through the agent");
    }
    if (*verb_ == Verb::kTop) {
      if (word == "node" || word == "nodes" || word == "no") {
        verb_ = Verb::kTopNode;
      } else if (word == "pod" || word == "pods" || word == "po") {
        verb_ = Verb::kTopPod;
      } else {
        return Refuse("kubectl top needs node or pod, not " + Quoted(word));
      }
      return Status::Ok();
    }
    if (*verb_ == Verb::kClusterInfo && word == "dump") return Refuse(std::string(kDumpReason));
    arguments_.push_back(word);
    return Status::Ok();
  }

  const Flag* FindFlag(std::string_view name, char shorthand) const {
    auto matches = [&](const Flag& flag) {
      return shorthand != 0 ? flag.shorthand == shorthand : flag.name == name;
    };
    for (const Flag& flag : kGlobalFlags) {
      if (matches(flag)) return &flag;
    }
    if (CommandKnown()) {
      for (const Flag& flag : FlagsOf(*verb_)) {
        if (matches(flag)) return &flag;
      }
    }
    return nullptr;
  }

  // A flag not known here: misplaced (a verb's flag before the verb) or unknown.
  Status UnknownFlag(std::string_view spelled, std::string_view name, char shorthand) const {
    if (!CommandKnown()) {
      for (Verb verb : {Verb::kGet, Verb::kLogs, Verb::kDescribe, Verb::kTopNode, Verb::kTopPod,
                        Verb::kApiResources, Verb::kVersion, Verb::kExplain}) {
        for (const Flag& flag : FlagsOf(verb)) {
          if (shorthand != 0 ? flag.shorthand == shorthand : flag.name == name) {
            return Refuse(std::string(spelled) +
                          " must come after the command: before it, kubectl would take the "
                          "next word for its value");
          }
        }
      }
      return Refuse("unknown flag " + std::string(spelled));
    }
    return Refuse("unknown flag " + std::string(spelled) + " for kubectl " +
                  std::string(VerbName(*verb_)));
  }

  // The next argument as the value of `spelled`.
  Result<std::string_view> SeparateValue(std::string_view spelled) {
    if (next_ >= argv_.size()) return Refuse(std::string(spelled) + " needs a value");
    const std::string& value = argv_[next_];
    if (!value.empty() && value.front() == '-') {
      return Refuse("the value of " + std::string(spelled) + " may not start with '-' (write " +
                    std::string(spelled) + "=VALUE)");
    }
    ++next_;
    return std::string_view(value);
  }

  Status LongFlag(std::string_view arg) {
    std::string_view body = arg.substr(2);
    size_t equals = body.find('=');
    std::string name(body.substr(0, equals));
    // pflag: "bad flag syntax".
    if (name.empty() || name.front() == '-') return Refuse("bad flag " + Quoted(arg));
    // kubectl normalizes word separators: --as_group is --as-group.
    std::replace(name.begin(), name.end(), '_', '-');
    const std::string spelled = "--" + OneLineExcerpt(name, 60);
    // A flag means what it means for its verb: explain's --recursive prints every field, and
    // only the file-reading --recursive of other verbs is refused. No allowed flag shares a
    // name with a refused one otherwise, so the refusal's reason is for flags not found.
    const Flag* flag = FindFlag(name, 0);
    if (flag == nullptr) {
      if (auto reason = RefusedFlagReason(name)) return Refuse(spelled + " " + std::string(*reason));
      return UnknownFlag(spelled, name, 0);
    }
    if (equals != std::string_view::npos) return Apply(*flag, spelled, body.substr(equals + 1));
    if (flag->value == ValueKind::kBool) return Apply(*flag, spelled, "true");
    UPLINK_ASSIGN_OR_RETURN(std::string_view value, SeparateValue(spelled));
    return Apply(*flag, spelled, value);
  }

  // -Ap, -nfoo, -n=foo, -n foo: pflag's reading of a shorthand cluster.
  Status ShortFlags(std::string_view arg) {
    std::string_view cluster = arg.substr(1);
    for (size_t i = 0; i < cluster.size(); ++i) {
      const char c = cluster[i];
      const std::string spelled = std::string("-") + c;
      for (const RefusedShorthand& refused : kRefusedShorthands) {
        if (refused.shorthand == c) {
          return Refuse(spelled + " (" + std::string(refused.flags) + ") " +
                        std::string(refused.reason));
        }
      }
      const Flag* flag = FindFlag("", c);
      if (flag == nullptr) return UnknownFlag(spelled, "", c);
      if (i + 1 < cluster.size() && cluster[i + 1] == '=') {
        std::string_view value = cluster.substr(i + 2);
        if (value.empty()) return Refuse(spelled + "= needs a value");
        return Apply(*flag, spelled, value);
      }
      if (flag->value == ValueKind::kBool) {
        UPLINK_RETURN_IF_ERROR(Apply(*flag, spelled, "true"));
        continue;
      }
      if (i + 1 < cluster.size()) return Apply(*flag, spelled, cluster.substr(i + 1));
      UPLINK_ASSIGN_OR_RETURN(std::string_view value, SeparateValue(spelled));
      return Apply(*flag, spelled, value);
    }
    return Status::Ok();
  }

  Status Apply(const Flag& flag, std::string_view spelled, std::string_view value) {
    UPLINK_RETURN_IF_ERROR(CheckValue(flag, spelled, value, verb_.value_or(Verb::kTop)));
    switch (flag.effect) {
      case Effect::kNone: break;
      case Effect::kNamespace: command_.namespace_name = std::string(value); break;
      case Effect::kAllNamespaces: command_.all_namespaces = *ParseBool(value); break;
      case Effect::kSelector: has_selector_ = true; break;
    }
    return Status::Ok();
  }

  void Reads(std::string name) {
    if (std::find(command_.resources.begin(), command_.resources.end(), name) ==
        command_.resources.end()) {
      command_.resources.push_back(std::move(name));
    }
  }

  void Reads(const ResourceType& type) { Reads(CanonicalName(type)); }

  Status NoArguments() const {
    if (arguments_.empty()) return Status::Ok();
    if (*verb_ == Verb::kClusterInfo && arguments_.front() == "dump") {
      return Refuse(std::string(kDumpReason));
    }
    return Refuse("kubectl " + command_.verb + " takes no arguments, not " +
                  Quoted(arguments_.front()));
  }

  Status CheckName(std::string_view name) const {
    if (!IsObjectName(name)) return Refuse(Quoted(name) + " is not an object name");
    return Status::Ok();
  }

  // TYPE[,TYPE...] [NAME...] or TYPE/NAME...: get and describe.
  // `namespaces_named`: set when namespaces are read, to the names given for them (none: all).
  Status CheckTypesAndNames(bool& all_cluster_scoped, bool& reads_nodes,
                            std::optional<std::vector<std::string>>& namespaces_named) {
    if (arguments_.empty()) {
      return Refuse("kubectl " + command_.verb + " needs a resource type");
    }
    all_cluster_scoped = true;
    auto add = [&](const ResolvedType& resolved) {
      if (resolved.type == nullptr) {
        for (std::string_view member : kAllCategory) Reads(std::string(member));
        all_cluster_scoped = false;
        return;
      }
      Reads(*resolved.type);
      // The usage figures of pods or nodes, as `top` reads them: what a rule on pods or
      // nodes should match, as it matches `top`.
      if (resolved.type->group == "metrics.k8s.io") Reads(std::string(resolved.type->plural));
      if (resolved.type->namespaced) all_cluster_scoped = false;
      if (resolved.type->plural == "nodes") reads_nodes = true;
      if (resolved.type->plural == "namespaces" && !namespaces_named) namespaces_named.emplace();
    };
    const bool name_form = arguments_.front().find('/') != std::string::npos;
    if (name_form) {
      for (const std::string& argument : arguments_) {
        size_t slash = argument.find('/');
        if (slash == std::string::npos) {
          return Refuse("arguments in TYPE/NAME form cannot be mixed with a bare " +
                        Quoted(argument));
        }
        std::string_view type = std::string_view(argument).substr(0, slash);
        std::string_view name = std::string_view(argument).substr(slash + 1);
        if (type.find(',') != std::string_view::npos) {
          return Refuse("a TYPE/NAME argument names one type, not " + Quoted(type));
        }
        UPLINK_ASSIGN_OR_RETURN(ResolvedType resolved, ResolveType(type));
        if (resolved.type == nullptr) return Refuse("'all' cannot take a name");
        UPLINK_RETURN_IF_ERROR(CheckName(name));
        add(resolved);
        if (resolved.type->plural == "namespaces") namespaces_named->emplace_back(name);
      }
      return Status::Ok();
    }
    std::string_view types = arguments_.front();
    while (true) {
      size_t comma = types.find(',');
      UPLINK_ASSIGN_OR_RETURN(ResolvedType resolved, ResolveType(types.substr(0, comma)));
      add(resolved);
      if (comma == std::string_view::npos) break;
      types.remove_prefix(comma + 1);
    }
    for (size_t i = 1; i < arguments_.size(); ++i) {
      if (arguments_[i].find('/') != std::string::npos) {
        return Refuse("a TYPE/NAME argument cannot follow a resource type");
      }
      UPLINK_RETURN_IF_ERROR(CheckName(arguments_[i]));
      if (namespaces_named) namespaces_named->push_back(arguments_[i]);
    }
    return Status::Ok();
  }

  // describe namespace lists the ResourceQuotas and LimitRanges inside each namespace it
  // describes: reads within those namespaces, which the connection's scope must hold.
  void DescribesNamespaces(bool only_cluster_types, const std::vector<std::string>& names) {
    Reads("resourcequotas");
    Reads("limitranges");
    command_.cluster_scoped = false;
    if (command_.all_namespaces) return;
    // One namespace, and nothing else namespaced read outside it (-n, or kubectl's default).
    const bool one_namespace =
        names.size() == 1 &&
        (only_cluster_types || command_.namespace_name.value_or("default") == names.front());
    if (one_namespace) {
      command_.namespace_name = names.front();
    } else {
      command_.all_namespaces = true;
    }
  }

  // POD [CONTAINER], TYPE/NAME [CONTAINER], or nothing with -l.
  Status CheckLogsArguments() {
    Reads("pods");
    Reads("pods/log");
    if (has_selector_) {
      if (!arguments_.empty()) return Refuse("kubectl logs takes a pod name or -l, not both");
      return Status::Ok();
    }
    if (arguments_.empty()) return Refuse("kubectl logs needs a pod name");
    if (arguments_.size() > 2) return Refuse("kubectl logs takes a pod and a container name");
    std::string_view target = arguments_.front();
    size_t slash = target.find('/');
    if (slash != std::string_view::npos) {
      UPLINK_ASSIGN_OR_RETURN(ResolvedType resolved, ResolveType(target.substr(0, slash)));
      if (resolved.type == nullptr || !resolved.type->has_pods) {
        return Refuse("kubectl logs reads pods, or the pods of a workload, not " +
                      Quoted(target.substr(0, slash)));
      }
      if (resolved.type->plural != "pods") Reads(*resolved.type);
      target.remove_prefix(slash + 1);
    }
    UPLINK_RETURN_IF_ERROR(CheckName(target));
    if (arguments_.size() == 2 && !IsDnsLabel(arguments_[1])) {
      return Refuse(Quoted(arguments_[1]) + " is not a container name");
    }
    return Status::Ok();
  }

  Status CheckArguments() {
    switch (*verb_) {
      case Verb::kGet:
      case Verb::kDescribe: {
        bool cluster_scoped = false, reads_nodes = false;
        std::optional<std::vector<std::string>> namespaces_named;
        UPLINK_RETURN_IF_ERROR(CheckTypesAndNames(cluster_scoped, reads_nodes, namespaces_named));
        command_.cluster_scoped = cluster_scoped;
        if (*verb_ == Verb::kDescribe) {
          Reads("events");
          // describe node lists the pods of every namespace that run on the node.
          if (reads_nodes) {
            Reads("pods");
            command_.all_namespaces = true;
            command_.cluster_scoped = false;
          }
          if (namespaces_named) DescribesNamespaces(cluster_scoped, *namespaces_named);
        }
        return Status::Ok();
      }
      case Verb::kLogs:
        return CheckLogsArguments();
      case Verb::kTopNode:
      case Verb::kTopPod: {
        if (arguments_.size() > 1) return Refuse("kubectl top takes at most one name");
        if (!arguments_.empty()) UPLINK_RETURN_IF_ERROR(CheckName(arguments_.front()));
        const bool nodes = *verb_ == Verb::kTopNode;
        // The metrics of nodes or pods: what an approval rule on nodes or pods should match.
        Reads(nodes ? "nodes" : "pods");
        Reads(nodes ? "nodes.metrics.k8s.io" : "pods.metrics.k8s.io");
        command_.cluster_scoped = nodes;
        return Status::Ok();
      }
      case Verb::kClusterInfo:
        UPLINK_RETURN_IF_ERROR(NoArguments());
        Reads("services");
        // It prints the API server's address and the cluster's own add-on Services (those
        // labelled kubernetes.io/cluster-service=true): facts about the cluster, not a
        // namespace's workloads.
        command_.cluster_scoped = true;
        return Status::Ok();
      case Verb::kApiResources:
      case Verb::kApiVersions:
      case Verb::kVersion:
        command_.cluster_scoped = true;
        return NoArguments();
      case Verb::kExplain: {
        command_.cluster_scoped = true;
        if (arguments_.size() != 1) return Refuse("kubectl explain takes one TYPE[.FIELD...]");
        const std::string& path = arguments_.front();
        if (path.empty() || !IsAlnum(path.front()) ||
            !AllOf(path, [](char c) { return IsAlnum(c) || c == '.' || c == '-'; })) {
          return Refuse(Quoted(path) + " is not a TYPE[.FIELD...] to explain");
        }
        return Status::Ok();
      }
      case Verb::kTop:
        break;
    }
    return InternalError("unhandled kubectl verb");
  }

  const std::vector<std::string>& argv_;
  size_t next_ = 1;
  bool after_dashes_ = false;
  std::optional<Verb> verb_;
  std::vector<std::string> arguments_;
  bool has_selector_ = false;
  KubectlCommand command_;
};

Status CheckBounds(const std::vector<std::string>& argv) {
  if (argv.empty()) return Refuse("the command is empty");
  if (argv.size() > kMaxArguments) {
    return Refuse("more than " + std::to_string(kMaxArguments) + " arguments");
  }
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string where = "argument " + std::to_string(i);
    if (argv[i].size() > kMaxArgumentBytes) {
      return Refuse(where + " is longer than " + std::to_string(kMaxArgumentBytes) + " bytes");
    }
    for (char c : argv[i]) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte == 0) return Refuse(where + " holds a NUL byte");
      if (c == '\n' || c == '\r') return Refuse(where + " holds a line break");
      if (byte < 0x20 || byte == 0x7f) return Refuse(where + " holds a control character");
      if (byte >= 0x80) {
        return Refuse(where + " holds a non-ASCII character (lookalike letters are refused)");
      }
    }
  }
  if (argv.front() != "kubectl") {
    return Refuse(Quoted(argv.front()) +
                  " is not kubectl: only read-only kubectl commands run through the agent (no "
                  "Helm, shells or other programs)");
  }
  return Status::Ok();
}

std::string ScopeList(const std::vector<std::string>& scope) {
  if (scope.empty()) return "none";
  std::string list;
  for (size_t i = 0; i < scope.size() && i < kMaxScopeNamesShown; ++i) {
    if (i > 0) list += ", ";
    list += OneLineExcerpt(scope[i], 63);
  }
  if (scope.size() > kMaxScopeNamesShown) {
    list += " and " + std::to_string(scope.size() - kMaxScopeNamesShown) + " more";
  }
  return list;
}

}  // namespace

Result<CanonicalResource> CanonicalResourceOf(std::string_view spelling) {
  UPLINK_ASSIGN_OR_RETURN(ResolvedType resolved, ResolveType(spelling));
  if (resolved.type == nullptr) {
    return Refuse("'all' is a category, not a resource type: name the types it holds");
  }
  return CanonicalResource{CanonicalName(*resolved.type), resolved.type->namespaced};
}

Result<KubectlCommand> CheckKubectlArgv(const std::vector<std::string>& argv) {
  UPLINK_RETURN_IF_ERROR(CheckBounds(argv));
  return Parser(argv).Parse();
}

std::string RefusalText(std::string_view reason) {
  return std::string(kRefusalHeadline) + "\n" + std::string(reason);
}

Status CheckNamespaceScope(const KubectlCommand& command,
                           const std::optional<std::vector<std::string>>& scope) {
  if (command.cluster_scoped) return Status::Ok();
  if (!scope) {
    return Refuse("no namespaces have been chosen for this connection, so only cluster-scoped "
                  "reads (nodes, namespaces, top nodes, api-resources, version, ...) run; its "
                  "owner chooses namespaces with 'uplink connections namespaces'");
  }
  if (std::find(scope->begin(), scope->end(), "*") != scope->end()) return Status::Ok();
  if (command.all_namespaces) {
    return Refuse("this command reads every namespace; this connection may read only: " +
                  ScopeList(*scope));
  }
  const std::string name = command.namespace_name.value_or(
      command.verb == "cluster-info" ? "kube-system" : "default");
  if (std::find(scope->begin(), scope->end(), name) != scope->end()) return Status::Ok();
  return Refuse("namespace " + Quoted(name) + " is outside this connection's namespaces: " +
                ScopeList(*scope));
}

}  // namespace uplink::kubectl
