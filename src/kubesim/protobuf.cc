#include "kubesim/protobuf.h"

#include <cstdint>
#include <functional>

#include "common/crypto.h"
#include "common/json.h"

namespace uplink::kubesim {
namespace {

enum WireType : std::uint8_t { kVarint = 0, kBytes = 2 };

// One field of a message: its number, its wire type, and its value (bytes for
// length-delimited fields, varint for varints; other wire types are skipped).
struct ProtoField {
  std::uint32_t number = 0;
  std::uint8_t wire_type = 0;
  std::string_view bytes;
  std::uint64_t varint = 0;

  // gogo-protobuf refuses a known field sent with another wire type; so does the simulator.
  Status Expect(WireType expected, std::string_view field_name) const {
    if (wire_type == expected) return Status::Ok();
    return InvalidArgumentError("protobuf body: wrong wire type " + std::to_string(wire_type) +
                                " for field " + std::string(field_name));
  }
};

// A protobuf reader over one message; every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return position_ >= data_.size(); }

  Result<std::uint64_t> Varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) return InvalidArgumentError("protobuf body: truncated varint");
      auto byte = static_cast<std::uint8_t>(data_[position_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    return InvalidArgumentError("protobuf body: varint too long");
  }

  // Reads one field; fixed-width values are skipped.
  Status Next(ProtoField& field) {
    UPLINK_ASSIGN_OR_RETURN(std::uint64_t key, Varint());
    field.number = static_cast<std::uint32_t>(key >> 3);
    field.wire_type = static_cast<std::uint8_t>(key & 7);
    if (field.number == 0) return InvalidArgumentError("protobuf body: illegal field number 0");
    switch (field.wire_type) {
      case kVarint: {
        UPLINK_ASSIGN_OR_RETURN(field.varint, Varint());
        return Status::Ok();
      }
      case 1: return Skip(8);
      case 5: return Skip(4);
      case kBytes: {
        UPLINK_ASSIGN_OR_RETURN(std::uint64_t length, Varint());
        if (length > data_.size() - position_) {
          return InvalidArgumentError("protobuf body: field longer than the message");
        }
        field.bytes = data_.substr(position_, length);
        position_ += length;
        return Status::Ok();
      }
      default: return InvalidArgumentError("protobuf body: unsupported wire type");
    }
  }

 private:
  Status Skip(size_t count) {
    if (count > data_.size() - position_) return InvalidArgumentError("protobuf body: truncated");
    position_ += count;
    return Status::Ok();
  }
  std::string_view data_;
  size_t position_ = 0;
};

using FieldHandler = std::function<Status(const ProtoField& field)>;

// Calls `handler` for each varint and length-delimited field of a message.
Status ForEachField(std::string_view message, const FieldHandler& handler) {
  Reader reader(message);
  while (!reader.done()) {
    ProtoField field;
    UPLINK_RETURN_IF_ERROR(reader.Next(field));
    if (field.wire_type == kVarint || field.wire_type == kBytes) {
      UPLINK_RETURN_IF_ERROR(handler(field));
    }
  }
  return Status::Ok();
}

// A map<string,string|bytes> entry (key = 1, value = 2) added to `target`; bytes values are
// base64-encoded, as JSON carries them. A missing value is empty, as in Go.
Status AddMapEntry(const ProtoField& entry, std::string_view field_name, json::object& target,
                   bool base64_value) {
  UPLINK_RETURN_IF_ERROR(entry.Expect(kBytes, field_name));
  std::string key, value;
  UPLINK_RETURN_IF_ERROR(ForEachField(entry.bytes, [&](const ProtoField& field) -> Status {
    if (field.number == 1) {
      UPLINK_RETURN_IF_ERROR(field.Expect(kBytes, std::string(field_name) + " key"));
      key = field.bytes;
    } else if (field.number == 2) {
      UPLINK_RETURN_IF_ERROR(field.Expect(kBytes, std::string(field_name) + " value"));
      value = field.bytes;
    }
    return Status::Ok();
  }));
  target[key] = base64_value ? Base64Encode(value) : value;
  return Status::Ok();
}

// A string field into `target[key]`. kubectl sends empty strings for unset fields; they are
// Go's zero value, which the JSON form omits.
Status SetString(const ProtoField& field, std::string_view field_name, json::object& target,
                 std::string_view key) {
  UPLINK_RETURN_IF_ERROR(field.Expect(kBytes, field_name));
  if (!field.bytes.empty()) target[key] = field.bytes;
  return Status::Ok();
}

Result<json::object> DecodeObjectMeta(const ProtoField& field) {
  UPLINK_RETURN_IF_ERROR(field.Expect(kBytes, "metadata"));
  json::object metadata;
  json::object labels, annotations;
  UPLINK_RETURN_IF_ERROR(ForEachField(field.bytes, [&](const ProtoField& meta) -> Status {
    switch (meta.number) {
      case 1: return SetString(meta, "ObjectMeta.name", metadata, "name");
      case 2: return SetString(meta, "ObjectMeta.generateName", metadata, "generateName");
      case 3: return SetString(meta, "ObjectMeta.namespace", metadata, "namespace");
      case 11: return AddMapEntry(meta, "ObjectMeta.labels", labels, false);
      case 12: return AddMapEntry(meta, "ObjectMeta.annotations", annotations, false);
      default: return Status::Ok();
    }
  }));
  if (!labels.empty()) metadata["labels"] = std::move(labels);
  if (!annotations.empty()) metadata["annotations"] = std::move(annotations);
  return metadata;
}

// A message of string fields (repeated ones become arrays), by field number: what RBAC rules,
// subjects, role references and access-review attributes are made of.
struct StringField {
  std::uint32_t number;
  const char* key;
  bool repeated;
};

Result<json::object> DecodeStrings(const ProtoField& field, std::string_view message_name,
                                   std::initializer_list<StringField> fields) {
  UPLINK_RETURN_IF_ERROR(field.Expect(kBytes, message_name));
  json::object decoded;
  UPLINK_RETURN_IF_ERROR(ForEachField(field.bytes, [&](const ProtoField& inner) -> Status {
    for (const StringField& known : fields) {
      if (inner.number != known.number) continue;
      std::string name = std::string(message_name) + "." + known.key;
      if (!known.repeated) return SetString(inner, name, decoded, known.key);
      UPLINK_RETURN_IF_ERROR(inner.Expect(kBytes, name));
      json::value& values = decoded[known.key];
      if (!values.is_array()) values = json::array();
      values.get_array().emplace_back(inner.bytes);
    }
    return Status::Ok();
  }));
  return decoded;
}

void AppendTo(json::object& object, std::string_view key, json::object item) {
  json::value& items = object[key];
  if (!items.is_array()) items = json::array();
  items.get_array().push_back(std::move(item));
}

// k8s.io/api/rbac/v1 generated.proto: Role and ClusterRole {metadata = 1, rules = 2};
// PolicyRule {verbs = 1, apiGroups = 2, resources = 3, resourceNames = 4, nonResourceURLs = 5};
// RoleBinding and ClusterRoleBinding {metadata = 1, subjects = 2, roleRef = 3};
// Subject {kind = 1, apiGroup = 2, name = 3, namespace = 4}; RoleRef {apiGroup = 1, kind = 2,
// name = 3}.
Status DecodeRbacField(std::string_view kind, const ProtoField& field, json::object& object) {
  bool role = kind == "Role" || kind == "ClusterRole";
  if (role && field.number == 2) {
    UPLINK_ASSIGN_OR_RETURN(json::object rule,
                            DecodeStrings(field, "PolicyRule", {{1, "verbs", true},
                                                                {2, "apiGroups", true},
                                                                {3, "resources", true},
                                                                {4, "resourceNames", true},
                                                                {5, "nonResourceURLs", true}}));
    AppendTo(object, "rules", std::move(rule));
  } else if (!role && field.number == 2) {
    UPLINK_ASSIGN_OR_RETURN(json::object subject,
                            DecodeStrings(field, "Subject", {{1, "kind", false},
                                                             {2, "apiGroup", false},
                                                             {3, "name", false},
                                                             {4, "namespace", false}}));
    AppendTo(object, "subjects", std::move(subject));
  } else if (!role && field.number == 3) {
    UPLINK_ASSIGN_OR_RETURN(object["roleRef"],
                            DecodeStrings(field, "RoleRef", {{1, "apiGroup", false},
                                                             {2, "kind", false},
                                                             {3, "name", false}}));
  }
  return Status::Ok();
}

// k8s.io/api/authorization/v1 generated.proto: SelfSubjectAccessReview {metadata = 1,
// spec = 2 {resourceAttributes = 1 {namespace = 1, verb = 2, group = 3, version = 4,
// resource = 5, subresource = 6, name = 7}, nonResourceAttributes = 2 {path = 1, verb = 2}}};
// SelfSubjectRulesReview {metadata = 1, spec = 2 {namespace = 1}}.
Status DecodeReviewSpec(std::string_view kind, const ProtoField& field, json::object& object) {
  if (field.number != 2) return Status::Ok();
  if (kind == "SelfSubjectRulesReview") {
    UPLINK_ASSIGN_OR_RETURN(object["spec"], DecodeStrings(field, "SelfSubjectRulesReviewSpec",
                                                          {{1, "namespace", false}}));
    return Status::Ok();
  }
  UPLINK_RETURN_IF_ERROR(field.Expect(kBytes, "SelfSubjectAccessReview.spec"));
  json::object spec;
  UPLINK_RETURN_IF_ERROR(ForEachField(field.bytes, [&](const ProtoField& attributes) -> Status {
    if (attributes.number == 1) {
      UPLINK_ASSIGN_OR_RETURN(spec["resourceAttributes"],
                              DecodeStrings(attributes, "ResourceAttributes",
                                            {{1, "namespace", false},
                                             {2, "verb", false},
                                             {3, "group", false},
                                             {4, "version", false},
                                             {5, "resource", false},
                                             {6, "subresource", false},
                                             {7, "name", false}}));
    } else if (attributes.number == 2) {
      UPLINK_ASSIGN_OR_RETURN(spec["nonResourceAttributes"],
                              DecodeStrings(attributes, "NonResourceAttributes",
                                            {{1, "path", false}, {2, "verb", false}}));
    }
    return Status::Ok();
  }));
  object["spec"] = std::move(spec);
  return Status::Ok();
}

// k8s.io/api/core/v1 generated.proto: ConfigMap {metadata = 1, data = 2, binaryData = 3};
// Namespace {metadata = 1, spec = 2 {finalizers = 1}}; Secret {metadata = 1,
// data = 2 (map<string, bytes>), type = 3, stringData = 4, immutable = 5};
// ServiceAccount {metadata = 1, automountServiceAccountToken = 4}.
Status DecodeBody(std::string_view api_version, std::string_view kind, const ProtoField& field,
                  json::object& object, json::object& data, json::object& binary_data,
                  json::object& string_data, json::array& finalizers) {
  if (field.number == 1) {
    UPLINK_ASSIGN_OR_RETURN(object["metadata"], DecodeObjectMeta(field));
    return Status::Ok();
  }
  if (api_version == "rbac.authorization.k8s.io/v1") return DecodeRbacField(kind, field, object);
  if (api_version == "authorization.k8s.io/v1") return DecodeReviewSpec(kind, field, object);
  if (kind == "ConfigMap") {
    if (field.number == 2) return AddMapEntry(field, "ConfigMap.data", data, false);
    if (field.number == 3) return AddMapEntry(field, "ConfigMap.binaryData", binary_data, true);
  } else if (kind == "Namespace" && field.number == 2) {
    UPLINK_RETURN_IF_ERROR(field.Expect(kBytes, "Namespace.spec"));
    return ForEachField(field.bytes, [&](const ProtoField& spec) -> Status {
      if (spec.number != 1) return Status::Ok();
      UPLINK_RETURN_IF_ERROR(spec.Expect(kBytes, "NamespaceSpec.finalizers"));
      finalizers.emplace_back(spec.bytes);
      return Status::Ok();
    });
  } else if (kind == "ServiceAccount" && field.number == 4) {
    UPLINK_RETURN_IF_ERROR(field.Expect(kVarint, "ServiceAccount.automountServiceAccountToken"));
    object["automountServiceAccountToken"] = field.varint != 0;
  } else if (kind == "Secret") {
    switch (field.number) {
      case 2: return AddMapEntry(field, "Secret.data", data, true);
      case 3: return SetString(field, "Secret.type", object, "type");
      case 4: return AddMapEntry(field, "Secret.stringData", string_data, false);
      case 5:
        UPLINK_RETURN_IF_ERROR(field.Expect(kVarint, "Secret.immutable"));
        object["immutable"] = field.varint != 0;
        return Status::Ok();
      default: break;
    }
  }
  return Status::Ok();
}

bool DecodableKind(std::string_view api_version, std::string_view kind) {
  static constexpr std::pair<std::string_view, std::string_view> kKinds[] = {
      {"v1", "ConfigMap"},
      {"v1", "Namespace"},
      {"v1", "Secret"},
      {"v1", "ServiceAccount"},
      {"rbac.authorization.k8s.io/v1", "Role"},
      {"rbac.authorization.k8s.io/v1", "ClusterRole"},
      {"rbac.authorization.k8s.io/v1", "RoleBinding"},
      {"rbac.authorization.k8s.io/v1", "ClusterRoleBinding"},
      {"authorization.k8s.io/v1", "SelfSubjectAccessReview"},
      {"authorization.k8s.io/v1", "SelfSubjectRulesReview"},
  };
  for (const auto& [known_version, known_kind] : kKinds) {
    if (known_version == api_version && known_kind == kind) return true;
  }
  return false;
}

}  // namespace

Result<json::object> DecodeProtobufObject(std::string_view body) {
  constexpr std::string_view kMagic("k8s\0", 4);
  if (!body.starts_with(kMagic)) {
    return InvalidArgumentError("protobuf body does not start with the k8s magic number");
  }
  std::string api_version, kind;
  std::string_view raw;
  UPLINK_RETURN_IF_ERROR(ForEachField(body.substr(4), [&](const ProtoField& field) -> Status {
    if (field.number == 2) {
      UPLINK_RETURN_IF_ERROR(field.Expect(kBytes, "Unknown.raw"));
      raw = field.bytes;
    }
    if (field.number != 1) return Status::Ok();
    UPLINK_RETURN_IF_ERROR(field.Expect(kBytes, "Unknown.typeMeta"));
    return ForEachField(field.bytes, [&](const ProtoField& type_field) -> Status {
      if (type_field.number == 1) {
        UPLINK_RETURN_IF_ERROR(type_field.Expect(kBytes, "TypeMeta.apiVersion"));
        api_version = type_field.bytes;
      } else if (type_field.number == 2) {
        UPLINK_RETURN_IF_ERROR(type_field.Expect(kBytes, "TypeMeta.kind"));
        kind = type_field.bytes;
      }
      return Status::Ok();
    });
  }));
  if (!DecodableKind(api_version, kind)) {
    return InvalidArgumentError(
        "protobuf bodies are accepted for the kinds kubectl's create commands send (ConfigMap, "
        "Namespace, Secret, ServiceAccount, RBAC roles and bindings, self access reviews), not " +
        api_version.substr(0, 64) + " " + kind.substr(0, 64) + "; send application/json");
  }
  json::object object{{"apiVersion", api_version}, {"kind", kind}};
  json::object data, binary_data, string_data;
  json::array finalizers;
  UPLINK_RETURN_IF_ERROR(ForEachField(raw, [&](const ProtoField& field) {
    return DecodeBody(api_version, kind, field, object, data, binary_data, string_data,
                      finalizers);
  }));
  if (!data.empty()) object["data"] = std::move(data);
  if (!binary_data.empty()) object["binaryData"] = std::move(binary_data);
  if (!string_data.empty()) object["stringData"] = std::move(string_data);
  if (!finalizers.empty()) object["spec"] = json::object{{"finalizers", std::move(finalizers)}};
  return object;
}

}  // namespace uplink::kubesim
