#include "kubesim/table.h"

#include <algorithm>
#include <set>

namespace uplink::kubesim {
namespace {

struct Column {
  const char* name;
  const char* type;
  const char* format;
  int priority;
  const char* description;
};

const std::vector<Column>& ColumnsFor(const ResourceType& type) {
  static const char* kNameDoc =
      "Name must be unique within a namespace. Is required when creating resources, although "
      "some resources may allow a client to request the generation of an appropriate name "
      "automatically.";
  static const char* kAgeDoc =
      "CreationTimestamp is a timestamp representing the server time when this object was "
      "created.";
  static const std::vector<Column> kNodes = {
      {"Name", "string", "name", 0, kNameDoc},
      {"Status", "string", "", 0, "The status of the node"},
      {"Roles", "string", "", 0, "The roles of the node"},
      {"Age", "string", "", 0, kAgeDoc},
      {"Version", "string", "", 0, "Kubelet Version reported by the node."},
      {"Internal-IP", "string", "", 1, "List of addresses reachable to the node."},
      {"External-IP", "string", "", 1, "List of addresses reachable to the node."},
      {"OS-Image", "string", "", 1, "OS Image reported by the node from /etc/os-release."},
      {"Kernel-Version", "string", "", 1, "Kernel Version reported by the node."},
      {"Container-Runtime", "string", "", 1, "ContainerRuntime Version reported by the node."},
  };
  static const std::vector<Column> kNamespaces = {
      {"Name", "string", "name", 0, kNameDoc},
      {"Status", "string", "", 0, "The status of the namespace"},
      {"Age", "string", "", 0, kAgeDoc},
  };
  static const std::vector<Column> kConfigMaps = {
      {"Name", "string", "name", 0, kNameDoc},
      {"Data", "string", "", 0, "Data contains the configuration data."},
      {"Age", "string", "", 0, kAgeDoc},
  };
  static const std::vector<Column> kSecrets = {
      {"Name", "string", "name", 0, kNameDoc},
      {"Type", "string", "", 0,
       "Used to facilitate programmatic handling of secret data. More info: "
       "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"},
      {"Data", "string", "", 0,
       "Data contains the secret data. Each key must consist of alphanumeric characters, '-', "
       "'_' or '.'. The serialized form of the secret data is a base64 encoded string, "
       "representing the arbitrary (possibly non-string) data value here. Described in "
       "https://tools.ietf.org/html/rfc4648#section-4"},
      {"Age", "string", "", 0, kAgeDoc},
  };
  static const std::vector<Column> kDefault = {
      {"Name", "string", "name", 0, kNameDoc},
      {"Age", "string", "", 0, kAgeDoc},
  };
  if (type.plural == "nodes") return kNodes;
  if (type.plural == "namespaces") return kNamespaces;
  if (type.plural == "configmaps") return kConfigMaps;
  if (type.plural == "secrets") return kSecrets;
  return kDefault;
}

const json::object& Field(const json::object& object, std::string_view key) {
  static const json::object kEmpty;
  const json::value* value = object.if_contains(key);
  return value && value->is_object() ? value->get_object() : kEmpty;
}

std::string Text(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  return value && value->is_string() ? std::string(value->get_string()) : std::string();
}

std::string Age(const json::object& metadata, WallTime now) {
  Result<WallTime> created = ParseRfc3339(Text(metadata, "creationTimestamp"));
  if (!created.ok()) return "<unknown>";
  return HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(now - *created));
}

// As printNode: the Ready condition, then SchedulingDisabled when cordoned.
std::string NodeStatus(const json::object& node) {
  std::string status = "Unknown";
  const json::value* conditions = Field(node, "status").if_contains("conditions");
  if (conditions && conditions->is_array()) {
    for (const json::value& condition : conditions->get_array()) {
      if (!condition.is_object() || Text(condition.get_object(), "type") != "Ready") continue;
      status = Text(condition.get_object(), "status") == "True" ? "Ready" : "NotReady";
    }
  }
  const json::value* unschedulable = Field(node, "spec").if_contains("unschedulable");
  if (unschedulable && unschedulable->is_bool() && unschedulable->get_bool()) {
    status += ",SchedulingDisabled";
  }
  return status;
}

std::string NodeRoles(const json::object& metadata) {
  constexpr std::string_view kRolePrefix = "node-role.kubernetes.io/";
  std::set<std::string> roles;
  for (const auto& [key, value] : Field(metadata, "labels")) {
    if (key.starts_with(kRolePrefix) && key.size() > kRolePrefix.size()) {
      roles.insert(std::string(key.substr(kRolePrefix.size())));
    } else if (key == "kubernetes.io/role" && value.is_string() && !value.get_string().empty()) {
      roles.insert(std::string(value.get_string()));
    }
  }
  std::string joined;
  for (const std::string& role : roles) joined += (joined.empty() ? "" : ",") + role;
  return joined.empty() ? "<none>" : joined;
}

std::string NodeAddress(const json::object& node, std::string_view type) {
  const json::value* addresses = Field(node, "status").if_contains("addresses");
  if (addresses && addresses->is_array()) {
    for (const json::value& address : addresses->get_array()) {
      if (address.is_object() && Text(address.get_object(), "type") == type) {
        return Text(address.get_object(), "address");
      }
    }
  }
  return "<none>";
}

std::string OrUnknown(std::string text) { return text.empty() ? "<unknown>" : text; }

json::array Cells(const ResourceType& type, const json::object& object, WallTime now) {
  const json::object& metadata = Field(object, "metadata");
  std::string name = Text(metadata, "name");
  if (type.plural == "nodes") {
    const json::object& info = Field(Field(object, "status"), "nodeInfo");
    return json::array{name,
                       NodeStatus(object),
                       NodeRoles(metadata),
                       Age(metadata, now),
                       Text(info, "kubeletVersion"),
                       NodeAddress(object, "InternalIP"),
                       NodeAddress(object, "ExternalIP"),
                       OrUnknown(Text(info, "osImage")),
                       OrUnknown(Text(info, "kernelVersion")),
                       OrUnknown(Text(info, "containerRuntimeVersion"))};
  }
  if (type.plural == "namespaces") {
    return json::array{name, Text(Field(object, "status"), "phase"), Age(metadata, now)};
  }
  if (type.plural == "configmaps") {
    std::int64_t entries = static_cast<std::int64_t>(Field(object, "data").size() +
                                                     Field(object, "binaryData").size());
    return json::array{name, entries, Age(metadata, now)};
  }
  if (type.plural == "secrets") {
    // printSecret: the number of keys, never their values.
    return json::array{name, Text(object, "type"),
                       static_cast<std::int64_t>(Field(object, "data").size()), Age(metadata, now)};
  }
  return json::array{name, Age(metadata, now)};
}

}  // namespace

std::string HumanDuration(std::chrono::seconds age) {
  std::int64_t seconds = age.count();
  // Clocks a second or so apart still read as "now".
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return std::to_string(seconds) + "s";
  std::int64_t minutes = seconds / 60;
  if (minutes < 10) {
    std::int64_t rest = seconds % 60;
    return std::to_string(minutes) + "m" + (rest ? std::to_string(rest) + "s" : "");
  }
  if (minutes < 180) return std::to_string(minutes) + "m";
  std::int64_t hours = minutes / 60;
  if (hours < 8) {
    std::int64_t rest = minutes % 60;
    return std::to_string(hours) + "h" + (rest ? std::to_string(rest) + "m" : "");
  }
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 24 * 8) {
    std::int64_t rest = hours % 24;
    return std::to_string(hours / 24) + "d" + (rest ? std::to_string(rest) + "h" : "");
  }
  if (hours < 24 * 365 * 2) return std::to_string(hours / 24) + "d";
  if (hours < 24 * 365 * 8) {
    std::int64_t rest = (hours / 24) % 365;
    return std::to_string(hours / 24 / 365) + "y" + (rest ? std::to_string(rest) + "d" : "");
  }
  return std::to_string(hours / 24 / 365) + "y";
}

Result<IncludeObject> ParseIncludeObject(std::string_view text) {
  if (text.empty() || text == "Metadata") return IncludeObject::kMetadata;
  if (text == "None") return IncludeObject::kNone;
  if (text == "Object") return IncludeObject::kObject;
  return InvalidArgumentError("includeObject must be None, Metadata or Object, not \"" +
                              std::string(text.substr(0, 32)) + "\"");
}

bool AcceptsTable(std::string_view accept) {
  size_t start = 0;
  while (start <= accept.size()) {
    size_t comma = accept.find(',', start);
    if (comma == std::string_view::npos) comma = accept.size();
    std::string_view media = accept.substr(start, comma - start);
    bool as_table = false, v1 = false, meta_group = false;
    size_t param = 0;
    while ((param = media.find(';', param)) != std::string_view::npos) {
      size_t end = media.find(';', param + 1);
      std::string_view pair = media.substr(param + 1, end == std::string_view::npos ? end : end - param - 1);
      while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
      while (!pair.empty() && pair.back() == ' ') pair.remove_suffix(1);
      as_table |= pair == "as=Table";
      v1 |= pair == "v=v1";
      meta_group |= pair == "g=meta.k8s.io";
      param += 1;
    }
    if (as_table && v1 && meta_group) return true;
    start = comma + 1;
  }
  return false;
}

json::object BuildTable(const ResourceType& type, const std::vector<json::object>& objects,
                        json::object list_metadata, IncludeObject include, WallTime now) {
  json::array columns;
  for (const Column& column : ColumnsFor(type)) {
    columns.push_back(json::object{{"name", column.name},
                                   {"type", column.type},
                                   {"format", column.format},
                                   {"description", column.description},
                                   {"priority", column.priority}});
  }
  json::array rows;
  for (const json::object& object : objects) {
    json::object row{{"cells", Cells(type, object, now)}};
    if (include == IncludeObject::kObject) {
      row["object"] = object;
    } else if (include == IncludeObject::kMetadata) {
      // PartialObjectMetadata: what `--show-labels` and `-L` read.
      row["object"] = json::object{{"kind", "PartialObjectMetadata"},
                                   {"apiVersion", "meta.k8s.io/v1"},
                                   {"metadata", Field(object, "metadata")}};
    }
    rows.push_back(std::move(row));
  }
  return json::object{{"kind", "Table"},
                      {"apiVersion", "meta.k8s.io/v1"},
                      {"metadata", std::move(list_metadata)},
                      {"columnDefinitions", std::move(columns)},
                      {"rows", std::move(rows)}};
}

}  // namespace uplink::kubesim
