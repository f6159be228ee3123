#include "kubesim/resource_admission.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace uplink::kubesim {
namespace {

ResourceList ListAt(const json::object& parent, std::string_view key) {
  Result<ResourceList> list = ParseResourceList(parent.if_contains(key));
  return list.ok() ? *list : ResourceList{};
}

// Go's %f.
std::string FormatRatio(double ratio) {
  char text[64];
  std::snprintf(text, sizeof(text), "%f", ratio);
  return text;
}

void CheckMin(std::string_view type, const std::string& resource, const Amount& enforced,
              const ResourceList& requests, const ResourceList& limits,
              std::vector<std::string>& errors) {
  auto request = requests.find(resource);
  auto limit = limits.find(resource);
  std::string prefix = "minimum " + resource + " usage per " + std::string(type) + " is " +
                       enforced.ToString();
  if (request == requests.end()) {
    errors.push_back(prefix + ".  No request is specified");
  } else if (request->second.milli < enforced.milli) {
    errors.push_back(prefix + ", but request is " + request->second.ToString());
  } else if (limit != limits.end() && limit->second.milli < enforced.milli) {
    errors.push_back(prefix + ", but limit is " + limit->second.ToString());
  }
}

void CheckMax(std::string_view type, const std::string& resource, const Amount& enforced,
              const ResourceList& requests, const ResourceList& limits,
              std::vector<std::string>& errors) {
  auto request = requests.find(resource);
  auto limit = limits.find(resource);
  std::string prefix = "maximum " + resource + " usage per " + std::string(type) + " is " +
                       enforced.ToString();
  if (limit == limits.end()) {
    errors.push_back(prefix + ".  No limit is specified");
  } else if (limit->second.milli > enforced.milli) {
    errors.push_back(prefix + ", but limit is " + limit->second.ToString());
  } else if (request != requests.end() && request->second.milli > enforced.milli) {
    errors.push_back(prefix + ", but request is " + request->second.ToString());
  }
}

void CheckRatio(std::string_view type, const std::string& resource, const Amount& enforced,
                const ResourceList& requests, const ResourceList& limits,
                std::vector<std::string>& errors) {
  auto request = requests.find(resource);
  auto limit = limits.find(resource);
  std::string prefix = resource + " max limit to request ratio per " + std::string(type) +
                       " is " + enforced.ToString();
  if (request == requests.end() || request->second.milli == 0) {
    errors.push_back(prefix + ", but no request is specified or request is 0");
  } else if (limit == limits.end() || limit->second.milli == 0) {
    errors.push_back(prefix + ", but no limit is specified or limit is 0");
  } else {
    double ratio = static_cast<double>(limit->second.milli) / static_cast<double>(request->second.milli);
    if (ratio * 1000 > static_cast<double>(enforced.milli)) {
      errors.push_back(prefix + ", but provided ratio is " + FormatRatio(ratio));
    }
  }
}

void CheckItem(const json::object& item, std::string_view type, const ResourceList& requests,
               const ResourceList& limits, std::vector<std::string>& errors) {
  for (const auto& [resource, amount] : ListAt(item, "min")) {
    CheckMin(type, resource, amount, requests, limits, errors);
  }
  for (const auto& [resource, amount] : ListAt(item, "max")) {
    CheckMax(type, resource, amount, requests, limits, errors);
  }
  for (const auto& [resource, amount] : ListAt(item, "maxLimitRequestRatio")) {
    CheckRatio(type, resource, amount, requests, limits, errors);
  }
}

// Sets `resources[which]` entries missing from a container, returning their names.
std::vector<std::string> FillMissing(json::object& resources, std::string_view which,
                                     const ResourceList& defaults) {
  std::vector<std::string> set;
  json::object& existing = EnsureObjectAt(resources, which);
  for (const auto& [name, amount] : defaults) {
    if (existing.contains(name)) continue;
    existing[name] = amount.ToString();
    set.push_back(name);
  }
  return set;
}

bool IsExtendedResource(std::string_view name) {
  // Anything in a domain that is not kubernetes.io's, e.g. nvidia.com/gpu.
  size_t slash = name.find('/');
  if (slash == std::string_view::npos) return false;
  std::string_view domain = name.substr(0, slash);
  return domain != "kubernetes.io" && !domain.ends_with(".kubernetes.io") &&
         !name.starts_with("requests.");
}

Amount Count(std::int64_t n) { return Amount{n * 1000, false}; }

// podComputeUsageHelper: what requests and limits count as.
ResourceList ComputeUsage(const ResourceList& requests, const ResourceList& limits) {
  ResourceList usage{{"pods", Count(1)}};
  for (const char* name : {"cpu", "memory", "ephemeral-storage"}) {
    if (auto request = requests.find(name); request != requests.end()) {
      usage[name] = request->second;
      usage[std::string("requests.") + name] = request->second;
    }
    if (auto limit = limits.find(name); limit != limits.end()) {
      usage[std::string("limits.") + name] = limit->second;
    }
  }
  for (const auto& [name, amount] : requests) {
    if (name.starts_with("hugepages-")) {
      usage[name] = amount;
      usage["requests." + name] = amount;
    } else if (IsExtendedResource(name)) {
      usage["requests." + name] = amount;
    }
  }
  return usage;
}

// The names a quota's pod constraints cover: each container must state these.
bool IsComputeConstraint(std::string_view name) {
  return name == "cpu" || name == "memory" || name == "requests.cpu" ||
         name == "requests.memory" || name == "limits.cpu" || name == "limits.memory";
}

}  // namespace

void DefaultLimitRange(json::object& limit_range) {
  json::value* spec = limit_range.if_contains("spec");
  if (!spec || !spec->is_object()) return;
  json::value* limits = spec->get_object().if_contains("limits");
  if (!limits || !limits->is_array()) return;
  for (json::value& entry : limits->get_array()) {
    if (!entry.is_object()) continue;
    json::object& item = entry.get_object();
    if (StringAt(item, "type") != "Container") continue;
    ResourceList max = ListAt(item, "max");
    ResourceList min = ListAt(item, "min");
    json::object& defaults = EnsureObjectAt(item, "default");
    for (const auto& [name, amount] : max) {
      if (!defaults.contains(name)) defaults[name] = amount.ToString();
    }
    json::object& default_request = EnsureObjectAt(item, "defaultRequest");
    for (const auto& [name, value] : defaults) {
      if (!default_request.contains(name)) default_request[name] = value;
    }
    for (const auto& [name, amount] : min) {
      if (!default_request.contains(name)) default_request[name] = amount.ToString();
    }
  }
}

std::vector<std::string> ApplyLimitRanges(const std::vector<json::object>& limit_ranges,
                                          json::object& pod) {
  std::vector<std::string> errors;
  json::object& spec = EnsureObjectAt(pod, "spec");
  for (const json::object& limit_range : limit_ranges) {
    const json::array& items = ArrayAt(ObjectAt(limit_range, "spec"), "limits");
    ResourceList default_requests;
    ResourceList default_limits;
    for (const json::value& entry : items) {
      if (!entry.is_object() || StringAt(entry.get_object(), "type") != "Container") continue;
      for (auto& [name, amount] : ListAt(entry.get_object(), "defaultRequest")) {
        default_requests[name] = amount;
      }
      for (auto& [name, amount] : ListAt(entry.get_object(), "default")) default_limits[name] = amount;
    }
    // Defaults first, noted in the annotation as the plugin writes it.
    std::vector<std::string> notes;
    for (const char* key : {"containers", "initContainers"}) {
      json::value* containers = spec.if_contains(key);
      if (!containers || !containers->is_array()) continue;
      std::string kind = std::string_view(key) == "containers" ? "container" : "init container";
      for (json::value& entry : containers->get_array()) {
        if (!entry.is_object()) continue;
        json::object& container = entry.get_object();
        json::object& resources = EnsureObjectAt(container, "resources");
        std::vector<std::string> limits_set = FillMissing(resources, "limits", default_limits);
        std::vector<std::string> requests_set =
            FillMissing(resources, "requests", default_requests);
        std::string name = StringAt(container, "name");
        if (!requests_set.empty()) {
          notes.push_back(Join(requests_set, ", ") + " request for " + kind + " " + name);
        }
        if (!limits_set.empty()) {
          notes.push_back(Join(limits_set, ", ") + " limit for " + kind + " " + name);
        }
      }
    }
    if (!notes.empty()) {
      EnsureObjectAt(EnsureObjectAt(pod, "metadata"), "annotations")["kubernetes.io/limit-ranger"] =
          "LimitRanger plugin set: " + Join(notes, "; ");
    }
    for (const json::value& entry : items) {
      if (!entry.is_object()) continue;
      const json::object& item = entry.get_object();
      std::string type = StringAt(item, "type");
      if (type == "Container") {
        for (const json::value& container : ArrayAt(spec, "containers")) {
          if (!container.is_object()) continue;
          CheckItem(item, type, ContainerRequests(container.get_object()),
                    ContainerLimits(container.get_object()), errors);
        }
      } else if (type == "Pod") {
        ResourceList requests;
        ResourceList limits;
        for (const json::value& container : ArrayAt(spec, "containers")) {
          if (!container.is_object()) continue;
          requests = Add(requests, ContainerRequests(container.get_object()));
          limits = Add(limits, ContainerLimits(container.get_object()));
        }
        CheckItem(item, type, requests, limits, errors);
      }
    }
  }
  return errors;
}

ResourceList QuotaUsage(const ResourceType& type, const json::object& object, WallTime now) {
  std::string count_name = "count/" + type.GroupResource();
  ResourceList usage{{count_name, Count(1)}};
  const json::object& spec = ObjectAt(object, "spec");
  if (type.group.empty() && type.plural == "pods") {
    std::string phase = StringAt(ObjectAt(object, "status"), "phase");
    if (phase == "Succeeded" || phase == "Failed") return usage;
    // A pod past its deletion grace period no longer counts (QuotaV1Pod).
    const json::object& metadata = ObjectAt(object, "metadata");
    std::string deleting = StringAt(metadata, "deletionTimestamp");
    if (!deleting.empty()) {
      Result<WallTime> since = ParseRfc3339(deleting);
      const json::value* grace = metadata.if_contains("deletionGracePeriodSeconds");
      std::int64_t seconds = grace && grace->is_int64() ? grace->get_int64() : 0;
      if (since.ok() && now >= *since + std::chrono::seconds(seconds)) return usage;
    }
    return Add(usage, ComputeUsage(PodRequests(object), PodLimits(object)));
  }
  if (type.group.empty() && type.plural == "services") {
    usage["services"] = Count(1);
    std::string service_type = StringAt(spec, "type");
    std::int64_t node_ports = 0;
    if (service_type == "NodePort" || service_type == "LoadBalancer") {
      node_ports = static_cast<std::int64_t>(ArrayAt(spec, "ports").size());
    }
    usage["services.loadbalancers"] = Count(service_type == "LoadBalancer" ? 1 : 0);
    usage["services.nodeports"] = Count(node_ports);
    return usage;
  }
  // Object counts with their legacy names.
  static const std::set<std::string> kLegacy = {"configmaps", "secrets", "resourcequotas",
                                                "replicationcontrollers",
                                                "persistentvolumeclaims"};
  if (type.group.empty() && kLegacy.count(type.plural)) usage[type.plural] = Count(1);
  return usage;
}

std::string CheckQuota(const json::object& quota, const ResourceType& type,
                       const json::object& object, const ResourceList& requested,
                       const ResourceList& used) {
  const std::string name = StringAt(ObjectAt(quota, "metadata"), "name");
  const ResourceList hard = QuotaHard(quota);
  if (type.group.empty() && type.plural == "pods") {
    // Each container must state what a compute quota counts.
    std::set<std::string> required;
    for (const auto& [resource, amount] : hard) {
      if (IsComputeConstraint(resource)) required.insert(resource);
    }
    std::map<std::string, std::set<std::string>> missing;
    const json::object& spec = ObjectAt(object, "spec");
    for (const char* key : {"containers", "initContainers"}) {
      for (const json::value& container : ArrayAt(spec, key)) {
        if (!container.is_object()) continue;
        ResourceList usage = ComputeUsage(ContainerRequests(container.get_object()),
                                          ContainerLimits(container.get_object()));
        for (const std::string& resource : required) {
          if (!usage.contains(resource)) {
            missing[resource].insert(StringAt(container.get_object(), "name"));
          }
        }
      }
    }
    if (!missing.empty()) {
      std::vector<std::string> parts;
      for (const auto& [resource, containers] : missing) {
        parts.push_back(resource + " for: " +
                        Join(std::vector<std::string>(containers.begin(), containers.end()),
                                   ","));
      }
      return "failed quota: " + name + ": must specify " + Join(parts, "; ");
    }
  }
  ResourceList asked;
  for (const auto& [resource, amount] : requested) {
    if (hard.contains(resource) && amount.milli != 0) asked[resource] = amount;
  }
  ResourceList exceeded_requested, exceeded_used, exceeded_hard;
  for (const auto& [resource, amount] : asked) {
    auto in_use = used.find(resource);
    Amount current = in_use == used.end() ? Amount{} : in_use->second;
    const Amount& limit = hard.at(resource);
    if (current.milli + amount.milli > limit.milli) {
      exceeded_requested[resource] = amount;
      exceeded_used[resource] = in_use == used.end() ? Amount{0, limit.binary} : current;
      exceeded_hard[resource] = limit;
    }
  }
  if (exceeded_requested.empty()) return "";
  return "exceeded quota: " + name + ", requested: " + PrettyPrint(exceeded_requested) +
         ", used: " + PrettyPrint(exceeded_used) + ", limited: " + PrettyPrint(exceeded_hard);
}

ResourceList QuotaHard(const json::object& quota) {
  return ListAt(ObjectAt(quota, "spec"), "hard");
}

json::object QuotaStatus(const json::object& quota, const ResourceList& used) {
  // Both maps in key order, as a Go server marshals them.
  ResourceList hard = QuotaHard(quota);
  json::object used_json;
  for (const auto& [resource, limit] : hard) {
    auto in_use = used.find(resource);
    used_json[resource] = in_use == used.end() ? "0" : in_use->second.ToString();
  }
  return json::object{{"hard", ResourceListJson(hard)}, {"used", std::move(used_json)}};
}

ResourceList NamespaceUsage(const ObjectStore& store, const std::string& namespace_name,
                            WallTime now) {
  ResourceList used;
  for (const ResourceType& type : ResourceTypes()) {
    if (!type.namespaced || !type.stored) continue;
    ListOptions options;
    options.namespace_name = namespace_name;
    Result<ListPage> page = store.List(type, options);
    if (!page.ok()) continue;
    for (const json::object& item : page->items) used = Add(used, QuotaUsage(type, item, now));
  }
  return used;
}

void SyncQuotaStatuses(ObjectStore& store, WallTime now) {
  const ResourceType& quotas = *FindResource("", "v1", "resourcequotas");
  Result<ListPage> page = store.List(quotas, ListOptions{});
  if (!page.ok()) return;
  std::map<std::string, ResourceList> usage;  // by namespace
  for (const json::object& quota : page->items) {
    const json::object& metadata = ObjectAt(quota, "metadata");
    std::string namespace_name = StringAt(metadata, "namespace");
    auto used = usage.find(namespace_name);
    if (used == usage.end()) {
      used = usage.emplace(namespace_name, NamespaceUsage(store, namespace_name, now)).first;
    }
    json::object status = QuotaStatus(quota, used->second);
    const json::value* current = quota.if_contains("status");
    if (current && *current == json::value(status)) continue;
    (void)store.ReplaceStatus(quotas, namespace_name, StringAt(metadata, "name"), std::move(status),
                              StringAt(metadata, "uid"));
  }
}

}  // namespace uplink::kubesim
