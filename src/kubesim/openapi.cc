#include "kubesim/openapi.h"

#include <algorithm>
#include <set>
#include <vector>

#include "common/crypto.h"
#include "common/yaml.h"
#include "kubesim/store.h"

namespace uplink::kubesim {
namespace {

constexpr std::string_view kRefPrefix = "#/components/schemas/";
constexpr int kMaxSchemaDepth = 64;

// Every schema name `value` refers to, recursively.
Status CollectRefs(const json::value& value, std::set<std::string>& refs, int depth = 0) {
  if (depth > kMaxSchemaDepth) return InvalidArgumentError("a schema nests too deeply");
  if (value.is_object()) {
    for (const auto& [key, child] : value.get_object()) {
      if (key == "$ref") {
        if (!child.is_string() || !child.get_string().starts_with(kRefPrefix)) {
          return InvalidArgumentError("a $ref is not of the form " + std::string(kRefPrefix) +
                                      "NAME");
        }
        refs.insert(std::string(std::string_view(child.get_string()).substr(kRefPrefix.size())));
      } else {
        UPLINK_RETURN_IF_ERROR(CollectRefs(child, refs, depth + 1));
      }
    }
  } else if (value.is_array()) {
    for (const json::value& child : value.get_array()) {
      UPLINK_RETURN_IF_ERROR(CollectRefs(child, refs, depth + 1));
    }
  }
  return Status::Ok();
}

bool HasGroupVersionKind(const json::object& schema, const ResourceType& type) {
  const json::value* gvks = schema.if_contains("x-kubernetes-group-version-kind");
  if (!gvks || !gvks->is_array()) return false;
  for (const json::value& gvk : gvks->get_array()) {
    if (!gvk.is_object()) continue;
    const json::object& fields = gvk.get_object();
    auto text = [&](std::string_view key) {
      const json::value* value = fields.if_contains(key);
      return value && value->is_string() ? std::string(value->get_string()) : std::string();
    };
    if (text("group") == type.group && text("version") == type.version &&
        text("kind") == type.kind) {
      return true;
    }
  }
  return false;
}

std::string DocumentPath(const ResourceType& type) {
  return type.group.empty() ? "api/" + type.version : "apis/" + type.group + "/" + type.version;
}

json::object QueryParameter(std::string_view name, std::string_view description) {
  return json::object{{"name", name},
                      {"in", "query"},
                      {"description", description},
                      {"schema", json::object{{"type", "string"}, {"uniqueItems", true}}}};
}

// A create or patch operation of a kind, with the parameters kubectl looks for.
json::object Operation(const ResourceType& type, std::string_view action,
                       std::string_view verb_word) {
  json::object gvk{{"group", type.group}, {"version", type.version}, {"kind", type.kind}};
  json::array parameters{
      QueryParameter("dryRun", "When present, indicates that modifications should not be "
                               "persisted."),
      QueryParameter("fieldManager", "fieldManager is a name associated with the actor or entity "
                                     "that is making these changes."),
      QueryParameter("fieldValidation",
                     "fieldValidation instructs the server on how to handle objects in the "
                     "request containing unknown or duplicate fields.")};
  return json::object{
      {"description", std::string(verb_word) + " the specified " + type.kind},
      {"operationId", std::string(action) + type.kind},
      {"parameters", std::move(parameters)},
      {"responses", json::object{{"200", json::object{{"description", "OK"}}}}},
      {"x-kubernetes-action", action},
      {"x-kubernetes-group-version-kind", std::move(gvk)}};
}

}  // namespace

Result<OpenApiDocuments> OpenApiDocuments::Load(std::string_view schemas_yaml,
                                                std::string_view server_version) {
  UPLINK_ASSIGN_OR_RETURN(json::value parsed, ParseYaml(schemas_yaml));
  if (!parsed.is_object()) return InvalidArgumentError("the OpenAPI schemas are not a map");
  const json::object& schemas = parsed.get_object();
  std::map<std::string, std::set<std::string>, std::less<>> refs_of;
  for (const auto& [name, schema] : schemas) {
    if (!schema.is_object()) {
      return InvalidArgumentError("OpenAPI schema " + std::string(name) + " is not an object");
    }
    std::set<std::string> refs;
    Status collected = CollectRefs(schema, refs);
    if (!collected.ok()) return collected.WithContext("OpenAPI schema " + std::string(name));
    for (const std::string& ref : refs) {
      if (!schemas.contains(ref)) {
        return InvalidArgumentError("OpenAPI schema " + std::string(name) +
                                    " refers to the undefined schema " + ref);
      }
    }
    refs_of[std::string(name)] = std::move(refs);
  }

  std::map<std::string, std::pair<std::set<std::string>, json::object>> by_path;
  for (const ResourceType& type : ResourceTypes()) {
    if (!type.stored) continue;
    for (const auto& [name, schema] : schemas) {
      if (!HasGroupVersionKind(schema.get_object(), type)) continue;
      auto& [roots, paths] = by_path[DocumentPath(type)];
      roots.insert(std::string(name));
      std::string prefix = "/" + DocumentPath(type) +
                           (type.namespaced ? "/namespaces/{namespace}/" : "/") + type.plural;
      paths[prefix] = json::object{{"post", Operation(type, "post", "create")}};
      paths[prefix + "/{name}"] =
          json::object{{"patch", Operation(type, "patch", "partially update")}};
    }
  }

  OpenApiDocuments documents;
  json::object index_paths;
  for (auto& [path, entry] : by_path) {
    auto& [roots, paths] = entry;
    std::set<std::string> included;
    std::vector<std::string> pending(roots.begin(), roots.end());
    while (!pending.empty()) {
      std::string name = std::move(pending.back());
      pending.pop_back();
      if (!included.insert(name).second) continue;
      for (const std::string& ref : refs_of.at(name)) pending.push_back(ref);
    }
    json::object components;
    for (const std::string& name : included) components[name] = schemas.at(name);
    json::object document{
        {"openapi", "3.0.0"},
        {"info", json::object{{"title", "Kubernetes"}, {"version", server_version}}},
        {"paths", std::move(paths)},
        {"components", json::object{{"schemas", std::move(components)}}}};
    Document built;
    built.json = ToJson(document);
    built.hash = Sha256Hex(built.json);
    std::transform(built.hash.begin(), built.hash.end(), built.hash.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    index_paths[path] = json::object{
        {"serverRelativeURL", "/openapi/v3/" + path + "?hash=" + built.hash}};
    documents.documents_.emplace(path, std::move(built));
  }
  documents.index_json_ = ToJson(json::object{{"paths", std::move(index_paths)}});
  return documents;
}

const OpenApiDocuments::Document* OpenApiDocuments::Find(std::string_view path) const {
  auto it = documents_.find(path);
  return it == documents_.end() ? nullptr : &it->second;
}

}  // namespace uplink::kubesim
