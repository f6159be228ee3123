#include "kubesim/pod_security.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <vector>

#include "common/json.h"
#include "kubesim/messages.h"

namespace uplink::kubesim {
namespace {

struct CheckResult {
  bool allowed = true;
  std::string reason;
  std::string detail;
};

using PodCheck = std::function<CheckResult(const json::object& metadata, const json::object& spec)>;

struct Check {
  std::string id;
  PodSecurityLevel level;
  PodCheck check;
  int minimum_minor = 0;  // the check applies from Kubernetes 1.<minimum_minor>
};

// Present and a boolean: its value; otherwise nothing.
std::optional<bool> OptionalBool(const json::object& parent, std::string_view key) {
  const json::value* value = parent.if_contains(key);
  if (!value || !value->is_bool()) return std::nullopt;
  return value->get_bool();
}

std::optional<std::int64_t> OptionalInt(const json::object& parent, std::string_view key) {
  const json::value* value = parent.if_contains(key);
  if (!value || !value->is_int64()) return std::nullopt;
  return value->get_int64();
}

bool Has(const json::object& parent, std::string_view key) {
  const json::value* value = parent.if_contains(key);
  return value && !value->is_null();
}

std::string JoinQuote(const std::vector<std::string>& items) {
  if (items.empty()) return "";
  std::string text = "\"";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += "\", \"";
    text += items[i];
  }
  return text + "\"";
}

std::string Pluralize(std::string_view singular, std::string_view plural, size_t count) {
  return std::string(count == 1 ? singular : plural);
}

std::vector<std::string> Sorted(const std::set<std::string>& items) {
  return {items.begin(), items.end()};
}

// Init containers, containers, then ephemeral containers, as visitContainers walks them.
void VisitContainers(const json::object& spec,
                     const std::function<void(const json::object& container)>& visit) {
  for (const char* key : {"initContainers", "containers", "ephemeralContainers"}) {
    for (const json::value& container : ArrayAt(spec, key)) {
      if (container.is_object()) visit(container.get_object());
    }
  }
}

std::string Name(const json::object& container) { return StringAt(container, "name"); }

const json::object& SecurityContext(const json::object& object) {
  return ObjectAt(object, "securityContext");
}

// "pod and containers \"a\", \"b\"": the pod (when it is a bad setter) and the containers.
std::string Setters(bool pod, const std::vector<std::string>& containers) {
  std::vector<std::string> setters;
  if (pod) setters.emplace_back("pod");
  if (!containers.empty()) {
    setters.push_back(Pluralize("container", "containers", containers.size()) + " " +
                      JoinQuote(containers));
  }
  return Join(setters, " and ");
}

CheckResult AllowPrivilegeEscalation(const json::object&, const json::object& spec) {
  std::vector<std::string> bad;
  VisitContainers(spec, [&](const json::object& container) {
    if (OptionalBool(SecurityContext(container), "allowPrivilegeEscalation").value_or(true)) {
      bad.push_back(Name(container));
    }
  });
  if (bad.empty()) return {};
  return {false, "allowPrivilegeEscalation != false",
          Pluralize("container", "containers", bad.size()) + " " + JoinQuote(bad) +
              " must set securityContext.allowPrivilegeEscalation=false"};
}

bool AllowedAppArmorProfile(std::string_view profile) {
  return profile.empty() || profile == "runtime/default" || profile.starts_with("localhost/");
}

CheckResult AppArmorProfile(const json::object& metadata, const json::object& spec) {
  std::vector<std::string> forbidden;
  for (const auto& [key, value] : ObjectAt(metadata, "annotations")) {
    if (key.starts_with("container.apparmor.security.beta.kubernetes.io/") && value.is_string() &&
        !AllowedAppArmorProfile(value.get_string())) {
      forbidden.push_back(std::string(key) + "=\"" + std::string(value.get_string()) + "\"");
    }
  }
  auto unconfined = [](const json::object& context) {
    return StringAt(ObjectAt(context, "appArmorProfile"), "type") == "Unconfined";
  };
  bool pod = unconfined(SecurityContext(spec));
  std::vector<std::string> containers;
  VisitContainers(spec, [&](const json::object& container) {
    if (unconfined(SecurityContext(container))) containers.push_back(Name(container));
  });
  if (pod || !containers.empty()) {
    forbidden.push_back(Setters(pod, containers) +
                        " must not set securityContext.appArmorProfile.type to \"Unconfined\"");
  }
  if (forbidden.empty()) return {};
  std::sort(forbidden.begin(), forbidden.end());
  return {false,
          Pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", forbidden.size()),
          Join(forbidden, ", ")};
}

const std::set<std::string>& BaselineCapabilities() {
  static const std::set<std::string> kAllowed = {
      "AUDIT_WRITE", "CHOWN",  "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",      "MKNOD",
      "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"};
  return kAllowed;
}

CheckResult CapabilitiesBaseline(const json::object&, const json::object& spec) {
  std::vector<std::string> bad;
  std::set<std::string> capabilities;
  VisitContainers(spec, [&](const json::object& container) {
    bool valid = true;
    for (const json::value& added : ArrayAt(ObjectAt(SecurityContext(container), "capabilities"), "add")) {
      std::string name = added.is_string() ? std::string(added.get_string()) : "";
      if (!BaselineCapabilities().count(name)) {
        valid = false;
        capabilities.insert(name);
      }
    }
    if (!valid) bad.push_back(Name(container));
  });
  if (bad.empty()) return {};
  return {false, "non-default capabilities",
          Pluralize("container", "containers", bad.size()) + " " + JoinQuote(bad) +
              " must not include " + JoinQuote(Sorted(capabilities)) +
              " in securityContext.capabilities.add"};
}

CheckResult CapabilitiesRestricted(const json::object&, const json::object& spec) {
  std::vector<std::string> missing_drop_all;
  std::vector<std::string> adding_forbidden;
  std::set<std::string> forbidden;
  VisitContainers(spec, [&](const json::object& container) {
    const json::object& context = SecurityContext(container);
    if (!Has(context, "capabilities")) {
      missing_drop_all.push_back(Name(container));
      return;
    }
    const json::object& capabilities = ObjectAt(context, "capabilities");
    const json::array& drop = ArrayAt(capabilities, "drop");
    if (std::none_of(drop.begin(), drop.end(),
                     [](const json::value& c) { return c.is_string() && c.get_string() == "ALL"; })) {
      missing_drop_all.push_back(Name(container));
    }
    bool adds_forbidden = false;
    for (const json::value& added : ArrayAt(capabilities, "add")) {
      std::string name = added.is_string() ? std::string(added.get_string()) : "";
      if (name != "NET_BIND_SERVICE") {
        adds_forbidden = true;
        forbidden.insert(name);
      }
    }
    if (adds_forbidden) adding_forbidden.push_back(Name(container));
  });
  std::vector<std::string> details;
  if (!missing_drop_all.empty()) {
    details.push_back(Pluralize("container", "containers", missing_drop_all.size()) + " " +
                      JoinQuote(missing_drop_all) +
                      " must set securityContext.capabilities.drop=[\"ALL\"]");
  }
  if (!adding_forbidden.empty()) {
    details.push_back(Pluralize("container", "containers", adding_forbidden.size()) + " " +
                      JoinQuote(adding_forbidden) + " must not include " +
                      JoinQuote(Sorted(forbidden)) + " in securityContext.capabilities.add");
  }
  if (details.empty()) return {};
  return {false, "unrestricted capabilities", Join(details, "; ")};
}

CheckResult HostNamespaces(const json::object&, const json::object& spec) {
  std::vector<std::string> shared;
  for (const char* key : {"hostIPC", "hostNetwork", "hostPID"}) {
    if (OptionalBool(spec, key).value_or(false)) shared.emplace_back(key);
  }
  if (shared.empty()) return {};
  return {false, "host namespaces", Join(shared, ", ")};
}

CheckResult HostPathVolumes(const json::object&, const json::object& spec) {
  std::vector<std::string> volumes;
  for (const json::value& volume : ArrayAt(spec, "volumes")) {
    if (volume.is_object() && Has(volume.get_object(), "hostPath")) {
      volumes.push_back(Name(volume.get_object()));
    }
  }
  if (volumes.empty()) return {};
  return {false, "hostPath volumes",
          Pluralize("volume", "volumes", volumes.size()) + " " + JoinQuote(volumes)};
}

CheckResult HostPorts(const json::object&, const json::object& spec) {
  std::vector<std::string> bad;
  std::set<std::string> ports;
  VisitContainers(spec, [&](const json::object& container) {
    bool valid = true;
    for (const json::value& port : ArrayAt(container, "ports")) {
      if (!port.is_object()) continue;
      std::int64_t host_port = OptionalInt(port.get_object(), "hostPort").value_or(0);
      if (host_port != 0) {
        valid = false;
        ports.insert(std::to_string(host_port));
      }
    }
    if (!valid) bad.push_back(Name(container));
  });
  if (bad.empty()) return {};
  return {false, "hostPort",
          Pluralize("container", "containers", bad.size()) + " " + JoinQuote(bad) + " " +
              Pluralize("uses", "use", bad.size()) + " " +
              Pluralize("hostPort", "hostPorts", ports.size()) + " " + Join(Sorted(ports), ", ")};
}

CheckResult HostProbesAndHostLifecycle(const json::object&, const json::object& spec) {
  std::set<std::string> bad;
  std::set<std::string> hosts;
  VisitContainers(spec, [&](const json::object& container) {
    auto collect = [&](const json::object& handler) {
      for (const char* kind : {"httpGet", "tcpSocket"}) {
        std::string host = StringAt(ObjectAt(handler, kind), "host");
        if (!host.empty()) {
          bad.insert(Name(container));
          hosts.insert(host);
        }
      }
    };
    for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"}) {
      collect(ObjectAt(container, probe));
    }
    const json::object& lifecycle = ObjectAt(container, "lifecycle");
    collect(ObjectAt(lifecycle, "postStart"));
    collect(ObjectAt(lifecycle, "preStop"));
  });
  if (bad.empty()) return {};
  return {false, "probe or lifecycle host",
          Pluralize("container", "containers", bad.size()) + " " + JoinQuote(Sorted(bad)) + " " +
              Pluralize("uses", "use", bad.size()) + " " +
              Pluralize("probe or lifecycle host", "probe or lifecycle hosts", hosts.size()) +
              " " + JoinQuote(Sorted(hosts))};
}

CheckResult Privileged(const json::object&, const json::object& spec) {
  std::vector<std::string> bad;
  VisitContainers(spec, [&](const json::object& container) {
    if (OptionalBool(SecurityContext(container), "privileged").value_or(false)) {
      bad.push_back(Name(container));
    }
  });
  if (bad.empty()) return {};
  return {false, "privileged",
          Pluralize("container", "containers", bad.size()) + " " + JoinQuote(bad) +
              " must not set securityContext.privileged=true"};
}

CheckResult ProcMount(const json::object&, const json::object& spec) {
  std::vector<std::string> bad;
  std::set<std::string> types;
  VisitContainers(spec, [&](const json::object& container) {
    const json::value* proc_mount = SecurityContext(container).if_contains("procMount");
    if (proc_mount && proc_mount->is_string() && proc_mount->get_string() != "Default") {
      bad.push_back(Name(container));
      types.insert(std::string(proc_mount->get_string()));
    }
  });
  if (bad.empty()) return {};
  return {false, "procMount",
          Pluralize("container", "containers", bad.size()) + " " + JoinQuote(bad) +
              " must not set securityContext.procMount to " + JoinQuote(Sorted(types))};
}

CheckResult RestrictedVolumes(const json::object&, const json::object& spec) {
  static const std::vector<std::string> kAllowed = {
      "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
      "persistentVolumeClaim", "projected", "secret"};
  static const std::vector<std::string> kKnown = {
      "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
      "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile",
      "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume",
      "scaleIO", "storageos"};
  std::vector<std::string> bad;
  std::set<std::string> types;
  for (const json::value& entry : ArrayAt(spec, "volumes")) {
    if (!entry.is_object()) continue;
    const json::object& volume = entry.get_object();
    if (std::any_of(kAllowed.begin(), kAllowed.end(),
                    [&](const std::string& key) { return Has(volume, key); })) {
      continue;
    }
    bad.push_back(Name(volume));
    auto known = std::find_if(kKnown.begin(), kKnown.end(),
                              [&](const std::string& key) { return Has(volume, key); });
    types.insert(known == kKnown.end() ? "unknown" : *known);
  }
  if (bad.empty()) return {};
  return {false, "restricted volume types",
          Pluralize("volume", "volumes", bad.size()) + " " + JoinQuote(bad) + " " +
              Pluralize("uses", "use", bad.size()) + " " +
              Pluralize("restricted volume type", "restricted volume types", types.size()) + " " +
              JoinQuote(Sorted(types))};
}

CheckResult RunAsNonRoot(const json::object&, const json::object& spec) {
  bool pod_bad = false;
  bool pod_non_root = false;
  if (std::optional<bool> value = OptionalBool(SecurityContext(spec), "runAsNonRoot")) {
    pod_bad = !*value;
    pod_non_root = *value;
  }
  std::vector<std::string> explicitly_bad;
  std::vector<std::string> implicitly_bad;
  VisitContainers(spec, [&](const json::object& container) {
    std::optional<bool> value = OptionalBool(SecurityContext(container), "runAsNonRoot");
    if (value) {
      if (!*value) explicitly_bad.push_back(Name(container));
    } else if (!pod_non_root) {
      implicitly_bad.push_back(Name(container));
    }
  });
  if (pod_bad || !explicitly_bad.empty()) {
    return {false, "runAsNonRoot != true",
            Setters(pod_bad, explicitly_bad) + " must not set securityContext.runAsNonRoot=false"};
  }
  if (!implicitly_bad.empty()) {
    return {false, "runAsNonRoot != true",
            "pod or " + Pluralize("container", "containers", implicitly_bad.size()) + " " +
                JoinQuote(implicitly_bad) + " must set securityContext.runAsNonRoot=true"};
  }
  return {};
}

CheckResult RunAsUser(const json::object&, const json::object& spec) {
  bool pod_bad = OptionalInt(SecurityContext(spec), "runAsUser") == std::optional<std::int64_t>(0);
  std::vector<std::string> bad;
  VisitContainers(spec, [&](const json::object& container) {
    if (OptionalInt(SecurityContext(container), "runAsUser") == std::optional<std::int64_t>(0)) {
      bad.push_back(Name(container));
    }
  });
  if (!pod_bad && bad.empty()) return {};
  return {false, "runAsUser=0", Setters(pod_bad, bad) + " must not set runAsUser=0"};
}

CheckResult SeLinuxOptions(const json::object&, const json::object& spec) {
  static const std::set<std::string> kTypes = {"", "container_t", "container_init_t",
                                               "container_kvm_t"};
  std::set<std::string> bad_types;
  bool set_user = false;
  bool set_role = false;
  auto valid = [&](const json::object& context) {
    if (!Has(context, "seLinuxOptions")) return true;
    const json::object& options = ObjectAt(context, "seLinuxOptions");
    bool ok = true;
    std::string type = StringAt(options, "type");
    if (!kTypes.count(type)) {
      ok = false;
      bad_types.insert(type);
    }
    if (!StringAt(options, "user").empty()) {
      ok = false;
      set_user = true;
    }
    if (!StringAt(options, "role").empty()) {
      ok = false;
      set_role = true;
    }
    return ok;
  };
  bool pod_bad = !valid(SecurityContext(spec));
  std::vector<std::string> bad;
  VisitContainers(spec, [&](const json::object& container) {
    if (!valid(SecurityContext(container))) bad.push_back(Name(container));
  });
  if (!pod_bad && bad.empty()) return {};
  std::vector<std::string> data;
  if (!bad_types.empty()) {
    data.push_back(Pluralize("type", "types", bad_types.size()) + " " +
                   JoinQuote(Sorted(bad_types)));
  }
  if (set_user) data.emplace_back("user may not be set");
  if (set_role) data.emplace_back("role may not be set");
  return {false, "seLinuxOptions",
          Setters(pod_bad, bad) + " set forbidden securityContext.seLinuxOptions: " +
              Join(data, "; ")};
}

bool ValidSeccomp(std::string_view type) { return type == "RuntimeDefault" || type == "Localhost"; }

// The seccomp rule; `required` is the restricted form, where leaving it unset is a violation.
CheckResult SeccompProfile(const json::object&, const json::object& spec, bool required) {
  std::set<std::string> bad_values;
  bool pod_bad = false;
  bool pod_set = false;
  const json::object& pod_context = SecurityContext(spec);
  if (Has(pod_context, "seccompProfile")) {
    std::string type = StringAt(ObjectAt(pod_context, "seccompProfile"), "type");
    if (ValidSeccomp(type)) {
      pod_set = true;
    } else {
      pod_bad = true;
      bad_values.insert(type);
    }
  }
  std::vector<std::string> explicitly_bad;
  std::vector<std::string> implicitly_bad;
  VisitContainers(spec, [&](const json::object& container) {
    const json::object& context = SecurityContext(container);
    if (Has(context, "seccompProfile")) {
      std::string type = StringAt(ObjectAt(context, "seccompProfile"), "type");
      if (!ValidSeccomp(type)) {
        explicitly_bad.push_back(Name(container));
        bad_values.insert(type);
      }
    } else if (!pod_set) {
      implicitly_bad.push_back(Name(container));
    }
  });
  if (pod_bad || !explicitly_bad.empty()) {
    return {false, "seccompProfile",
            Setters(pod_bad, explicitly_bad) + " must not set securityContext.seccompProfile.type to " +
                JoinQuote(Sorted(bad_values))};
  }
  if (required && !implicitly_bad.empty()) {
    return {false, "seccompProfile",
            "pod or " + Pluralize("container", "containers", implicitly_bad.size()) + " " +
                JoinQuote(implicitly_bad) +
                " must set securityContext.seccompProfile.type to \"RuntimeDefault\" or "
                "\"Localhost\""};
  }
  return {};
}

CheckResult Sysctls(const json::object&, const json::object& spec) {
  static const std::set<std::string> kAllowed = {
      "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
      "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"};
  std::vector<std::string> forbidden;
  for (const json::value& sysctl : ArrayAt(SecurityContext(spec), "sysctls")) {
    if (!sysctl.is_object()) continue;
    std::string name = StringAt(sysctl.get_object(), "name");
    if (!kAllowed.count(name)) forbidden.push_back(name);
  }
  if (forbidden.empty()) return {};
  return {false, "forbidden sysctls", Join(forbidden, ", ")};
}

CheckResult WindowsHostProcess(const json::object&, const json::object& spec) {
  auto host_process = [](const json::object& context) {
    return OptionalBool(ObjectAt(context, "windowsOptions"), "hostProcess").value_or(false);
  };
  bool pod = host_process(SecurityContext(spec));
  std::vector<std::string> bad;
  VisitContainers(spec, [&](const json::object& container) {
    if (host_process(SecurityContext(container))) bad.push_back(Name(container));
  });
  if (!pod && bad.empty()) return {};
  return {false, "hostProcess",
          Setters(pod, bad) + " must not set securityContext.windowsOptions.hostProcess=true"};
}

// Every check, sorted by ID as the policy registry evaluates them. A restricted check that
// replaces a baseline one (capabilities, volumes, seccomp) is the only one run at restricted.
const std::vector<Check>& Checks() {
  static const std::vector<Check> kChecks = {
      {"allowPrivilegeEscalation", PodSecurityLevel::kRestricted, AllowPrivilegeEscalation},
      {"appArmorProfile", PodSecurityLevel::kBaseline, AppArmorProfile},
      {"capabilities_baseline", PodSecurityLevel::kBaseline, CapabilitiesBaseline},
      {"capabilities_restricted", PodSecurityLevel::kRestricted, CapabilitiesRestricted},
      {"hostNamespaces", PodSecurityLevel::kBaseline, HostNamespaces},
      {"hostPathVolumes", PodSecurityLevel::kBaseline, HostPathVolumes},
      {"hostPorts", PodSecurityLevel::kBaseline, HostPorts},
      {"hostProbesAndHostLifecycle", PodSecurityLevel::kBaseline, HostProbesAndHostLifecycle, 34},
      {"privileged", PodSecurityLevel::kBaseline, Privileged},
      {"procMount", PodSecurityLevel::kBaseline, ProcMount},
      {"restrictedVolumes", PodSecurityLevel::kRestricted, RestrictedVolumes},
      {"runAsNonRoot", PodSecurityLevel::kRestricted, RunAsNonRoot},
      {"runAsUser", PodSecurityLevel::kRestricted, RunAsUser},
      {"seLinuxOptions", PodSecurityLevel::kBaseline, SeLinuxOptions},
      {"seccompProfile_baseline", PodSecurityLevel::kBaseline,
       [](const json::object& m, const json::object& s) { return SeccompProfile(m, s, false); }},
      {"seccompProfile_restricted", PodSecurityLevel::kRestricted,
       [](const json::object& m, const json::object& s) { return SeccompProfile(m, s, true); }},
      {"sysctls", PodSecurityLevel::kBaseline, Sysctls},
      {"windowsHostProcess", PodSecurityLevel::kBaseline, WindowsHostProcess},
  };
  return kChecks;
}

bool OverriddenAtRestricted(std::string_view id) {
  return id == "capabilities_baseline" || id == "hostPathVolumes" ||
         id == "seccompProfile_baseline";
}

std::optional<PodSecurityLevel> ParseLevel(std::string_view text) {
  if (text == "privileged") return PodSecurityLevel::kPrivileged;
  if (text == "baseline") return PodSecurityLevel::kBaseline;
  if (text == "restricted") return PodSecurityLevel::kRestricted;
  return std::nullopt;
}

// "latest" or "vMAJOR.MINOR" (e.g. "v1.30").
bool ValidVersion(std::string_view text) {
  if (text == "latest") return true;
  if (text.size() < 4 || text.substr(0, 3) != "v1.") return false;
  std::string_view minor = text.substr(3);
  return !minor.empty() && minor.size() <= 3 &&
         minor.find_first_not_of("0123456789") == std::string_view::npos;
}

PodSecurityMode ModeFromLabels(const json::object& labels, std::string_view mode) {
  std::string prefix = "pod-security.kubernetes.io/" + std::string(mode);
  PodSecurityMode result;
  const json::value* level = labels.if_contains(prefix);
  const json::value* version = labels.if_contains(prefix + "-version");
  if (level) {
    std::optional<PodSecurityLevel> parsed =
        level->is_string() ? ParseLevel(level->get_string()) : std::nullopt;
    if (!parsed) return PodSecurityMode{PodSecurityLevel::kRestricted, "latest"};
    result.level = *parsed;
  }
  if (version) {
    if (!version->is_string() || !ValidVersion(version->get_string())) {
      return PodSecurityMode{PodSecurityLevel::kRestricted, "latest"};
    }
    result.version = std::string(version->get_string());
  }
  return result;
}

}  // namespace

std::string PodSecurityMode::ToString() const {
  std::string name = level == PodSecurityLevel::kRestricted ? "restricted"
                     : level == PodSecurityLevel::kBaseline ? "baseline"
                                                            : "privileged";
  return name + ":" + version;
}

NamespacePodSecurity PodSecurityFromLabels(const json::object& labels) {
  return NamespacePodSecurity{ModeFromLabels(labels, "enforce"), ModeFromLabels(labels, "warn"),
                              ModeFromLabels(labels, "audit")};
}

std::string PodSecurityViolations(const PodSecurityMode& mode, const json::object& pod) {
  if (mode.level == PodSecurityLevel::kPrivileged) return "";
  int minor = 1000;  // latest
  if (mode.version != "latest") minor = std::stoi(mode.version.substr(3));
  const json::object& metadata = ObjectAt(pod, "metadata");
  const json::object& spec = ObjectAt(pod, "spec");
  std::vector<std::string> violations;
  for (const Check& check : Checks()) {
    if (check.level == PodSecurityLevel::kRestricted && mode.level != PodSecurityLevel::kRestricted) {
      continue;
    }
    if (mode.level == PodSecurityLevel::kRestricted && OverriddenAtRestricted(check.id)) continue;
    if (minor < check.minimum_minor) continue;
    CheckResult result = check.check(metadata, spec);
    if (result.allowed) continue;
    violations.push_back(result.detail.empty() ? result.reason
                                               : result.reason + " (" + result.detail + ")");
  }
  return Join(violations, ", ");
}

}  // namespace uplink::kubesim
