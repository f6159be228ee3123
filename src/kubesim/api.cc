#include "kubesim/api.h"

#include <algorithm>
#include <charconv>

#include "common/files.h"
#include "kubesim/cluster.h"
#include "kubesim/protobuf.h"
#include "kubesim/table.h"

namespace uplink::kubesim {
namespace {

constexpr std::string_view kRequestsMetric = "kubesim_requests_total";

// The verb and resource of a request for metrics, from its path alone.
std::pair<std::string, std::string> VerbAndResource(const net::Request& request) {
  std::vector<std::string_view> segments;
  std::string path = request.Path();
  std::string_view rest = path;
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    if (!part.empty()) segments.push_back(part);
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  size_t base = !segments.empty() && segments[0] == "api" ? 2 : 3;  // after api/v1, apis/g/v
  if (segments.empty() || (segments[0] != "api" && segments[0] != "apis") ||
      segments.size() <= base) {
    return {"get", "nonresource"};
  }
  size_t resource = base;
  if (segments[base] == "namespaces" && segments.size() > base + 2) resource = base + 2;
  bool named = segments.size() > resource + 1;
  std::string verb = request.method == "GET"      ? (named ? "get" : "list")
                     : request.method == "POST"   ? "create"
                     : request.method == "PATCH"  ? "patch"
                     : request.method == "DELETE" ? "delete"
                                                  : "other";
  // Only served resource names become label values, so hostile paths cannot grow metrics.
  std::string name(segments[resource]);
  bool known = std::any_of(ResourceTypes().begin(), ResourceTypes().end(),
                           [&](const ResourceType& type) { return type.plural == name; });
  return {verb, known ? name : "unknown"};
}

std::string MediaType(const net::Request& request) {
  std::string_view type = request.headers.Get("Content-Type").value_or("application/json");
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  std::string lower(type);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

// The first strategic-merge directive key in a patch ("$patch", "$setElementOrder/..."), if any.
std::optional<std::string> FindDirective(const json::value& value, int depth = 0) {
  if (depth > 64) return std::nullopt;
  if (value.is_object()) {
    for (const auto& [key, child] : value.get_object()) {
      if (key.starts_with("$")) return std::string(key);
      if (auto found = FindDirective(child, depth + 1)) return found;
    }
  } else if (value.is_array()) {
    for (const json::value& child : value.get_array()) {
      if (auto found = FindDirective(child, depth + 1)) return found;
    }
  }
  return std::nullopt;
}

json::object ListMetadata(const ListPage& page) {
  json::object metadata{{"resourceVersion", std::to_string(page.resource_version)}};
  if (!page.continue_token.empty()) metadata["continue"] = page.continue_token;
  if (page.remaining_item_count) metadata["remainingItemCount"] = *page.remaining_item_count;
  return metadata;
}

net::Response JsonResponse(int code, const json::value& body) {
  return net::Response::Json(code, ToJson(body));
}

json::object ApiResource(const ResourceType& type) {
  json::array verbs(type.verbs.begin(), type.verbs.end());
  json::object resource{{"name", type.plural},     {"singularName", type.singular},
                        {"namespaced", type.namespaced}, {"kind", type.kind},
                        {"verbs", std::move(verbs)}};
  if (!type.short_names.empty()) {
    resource["shortNames"] = json::array(type.short_names.begin(), type.short_names.end());
  }
  return resource;
}

json::object ApiResourceList(std::string_view group_version, std::string_view group) {
  json::array resources;
  for (const ResourceType& type : ResourceTypes()) {
    if (type.group == group) resources.push_back(ApiResource(type));
  }
  return json::object{{"kind", "APIResourceList"},
                      {"apiVersion", "v1"},
                      {"groupVersion", group_version},
                      {"resources", std::move(resources)}};
}

json::object AppsGroup() {
  json::object version{{"groupVersion", "apps/v1"}, {"version", "v1"}};
  return json::object{{"kind", "APIGroup"},
                      {"apiVersion", "v1"},
                      {"name", "apps"},
                      {"versions", json::array{version}},
                      {"preferredVersion", version}};
}

}  // namespace

namespace {

json::object StatusObject(int code, std::string_view reason, std::string_view message) {
  json::object status{{"kind", "Status"},       {"apiVersion", "v1"},
                      {"metadata", json::object()}, {"status", "Failure"},
                      {"message", message},     {"reason", reason},
                      {"code", code}};
  // metav1.Status omits an empty reason (StatusReasonUnknown).
  if (reason.empty()) status.erase("reason");
  return status;
}

// What system:public-info-viewer lets anyone read.
bool IsPublicInfo(const net::Request& request) {
  if (request.method != "GET" && request.method != "HEAD") return false;
  std::string path = request.Path();
  return path == "/version" || path == "/healthz" || path == "/readyz" || path == "/livez";
}

// apierrors.NewInvalid: 422 with the field errors as causes.
net::Response InvalidResponse(const InvalidObject& invalid) {
  json::array causes;
  for (const FieldError& cause : invalid.causes) {
    causes.push_back(json::object{
        {"reason", cause.reason}, {"message", cause.message}, {"field", cause.field}});
  }
  // StatusDetails omits empty fields: a patch that cannot be decoded has no kind or name.
  json::object details;
  if (!invalid.name.empty()) details["name"] = invalid.name;
  if (!invalid.group.empty()) details["group"] = invalid.group;
  if (!invalid.kind.empty()) details["kind"] = invalid.kind;
  details["causes"] = std::move(causes);
  json::object status = StatusObject(422, "Invalid", invalid.Message());
  status["details"] = std::move(details);
  return JsonResponse(422, status);
}

}  // namespace

net::Response StatusResponse(int code, std::string_view reason, std::string_view message) {
  return JsonResponse(code, StatusObject(code, reason, message));
}

net::Response ErrorResponse(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound: return StatusResponse(404, "NotFound", status.message());
    case StatusCode::kAlreadyExists: return StatusResponse(409, "AlreadyExists", status.message());
    case StatusCode::kConflict: return StatusResponse(409, "Conflict", status.message());
    case StatusCode::kPermissionDenied: return StatusResponse(403, "Forbidden", status.message());
    case StatusCode::kInvalidArgument: return StatusResponse(400, "BadRequest", status.message());
    case StatusCode::kResourceExhausted:
      return StatusResponse(413, "RequestEntityTooLarge", status.message());
    default: return StatusResponse(500, "InternalError", status.message());
  }
}

ApiServer::ApiServer(ApiOptions options, ObjectStore& store, Clock& clock)
    : options_(std::move(options)), store_(store), clock_(clock) {
  metrics_.DeclareCounter(std::string(kRequestsMetric),
                          "API requests by verb, resource and HTTP status code.");
  AddRoutes();
}

void ApiServer::AddRoutes() {
  auto text = [](std::string body) {
    return [body](const net::Request&, const net::PathParams&) {
      return net::Response::Text(200, body);
    };
  };
  router_.Add("GET", "/version", [this](const net::Request&, const net::PathParams&) {
    return Version();
  });
  for (const char* path : {"/healthz", "/readyz", "/livez"}) router_.Add("GET", path, text("ok"));
  router_.Add("GET", "/metrics", [this](const net::Request&, const net::PathParams&) {
    net::Response response = net::Response::Text(200, metrics_.RenderText());
    response.headers.Set("Content-Type", "text/plain; version=0.0.4");
    return response;
  });
  // Plain discovery documents: kubectl accepts them even when it asks for the aggregated
  // apidiscovery.k8s.io/v2 form first.
  router_.Add("GET", "/api", [](const net::Request& request, const net::PathParams&) {
    std::string host(request.headers.Get("Host").value_or("127.0.0.1"));
    return JsonResponse(200, json::object{{"kind", "APIVersions"},
                                          {"versions", json::array{"v1"}},
                                          {"serverAddressByClientCIDRs",
                                           json::array{json::object{{"clientCIDR", "0.0.0.0/0"},
                                                                    {"serverAddress", host}}}}});
  });
  router_.Add("GET", "/apis", [](const net::Request&, const net::PathParams&) {
    json::object group = AppsGroup();
    group.erase("kind");
    group.erase("apiVersion");
    return JsonResponse(200, json::object{{"kind", "APIGroupList"},
                                          {"apiVersion", "v1"},
                                          {"groups", json::array{group}}});
  });
  router_.Add("GET", "/api/v1", [](const net::Request&, const net::PathParams&) {
    return JsonResponse(200, ApiResourceList("v1", ""));
  });
  router_.Add("GET", "/apis/apps", [](const net::Request&, const net::PathParams&) {
    return JsonResponse(200, AppsGroup());
  });
  router_.Add("GET", "/apis/apps/v1", [](const net::Request&, const net::PathParams&) {
    return JsonResponse(200, ApiResourceList("apps/v1", "apps"));
  });

  auto core = [this](const net::Request& request, const net::PathParams& params) {
    return ResourceRequest(request, "", "v1", params);
  };
  auto grouped = [this](const net::Request& request, const net::PathParams& params) {
    return ResourceRequest(request, params.at("group"), params.at("version"), params);
  };
  for (const char* method : {"GET", "POST"}) {
    router_.Add(method, "/api/v1/{resource}", core);
    router_.Add(method, "/api/v1/namespaces/{namespace}/{resource}", core);
    router_.Add(method, "/apis/{group}/{version}/{resource}", grouped);
    router_.Add(method, "/apis/{group}/{version}/namespaces/{namespace}/{resource}", grouped);
  }
  for (const char* method : {"GET", "PATCH", "DELETE"}) {
    router_.Add(method, "/api/v1/{resource}/{name}", core);
    router_.Add(method, "/api/v1/namespaces/{namespace}/{resource}/{name}", core);
    router_.Add(method, "/apis/{group}/{version}/{resource}/{name}", grouped);
    router_.Add(method, "/apis/{group}/{version}/namespaces/{namespace}/{resource}/{name}",
                grouped);
  }
  router_.SetNotFound([](const net::Request&) {
    return StatusResponse(404, "NotFound", "the server could not find the requested resource");
  });
  router_.SetMethodNotAllowed([](const net::Request& request, std::string allowed) {
    return StatusResponse(405, "MethodNotAllowed",
                          "the server does not allow this method on the requested resource (" +
                              request.method.substr(0, 16) + "; allowed: " + allowed + ")");
  });
}

void ApiServer::Handle(net::Request request, net::Reply reply) const {
  auto [verb, resource] = VerbAndResource(request);
  net::Reply counted = [this, verb = verb, resource = resource,
                        reply = std::move(reply)](net::Response response) {
    metrics_.Increment(kRequestsMetric,
                       {{"verb", verb}, {"resource", resource},
                        {"code", std::to_string(response.status)}});
    reply(std::move(response));
  };
  std::optional<std::string_view> authorization_header = request.headers.Get("Authorization");
  // Like a real API server (anonymous auth and system:public-info-viewer), a client without
  // credentials may read /version and the health endpoints; a wrong token is still refused.
  if (!authorization_header && IsPublicInfo(request)) {
    router_.Dispatch(std::move(request), std::move(counted));
    return;
  }
  std::string_view authorization = authorization_header.value_or("");
  constexpr std::string_view kBearer = "Bearer ";
  bool authorized = authorization.starts_with(kBearer) &&
                    ConstantTimeEquals(authorization.substr(kBearer.size()),
                                       options_.token.Reveal());
  if (!authorized) {
    counted(StatusResponse(401, "Unauthorized", "Unauthorized"));
    return;
  }
  router_.Dispatch(std::move(request), std::move(counted));
}

net::RequestHandler ApiServer::AsHandler() const {
  return [this](net::Request request, net::Reply reply) {
    Handle(std::move(request), std::move(reply));
  };
}

net::Response ApiServer::HandleForTesting(net::Request request) const {
  net::Response result;
  Handle(std::move(request), [&result](net::Response response) { result = std::move(response); });
  return result;
}

net::Response ApiServer::Version() const {
  Result<VersionParts> parts = ParseServerVersion(options_.server_version);
  if (!parts.ok()) return ErrorResponse(parts.status());
  return JsonResponse(200, json::object{{"major", parts->major},
                                        {"minor", parts->minor},
                                        {"gitVersion", options_.server_version},
                                        {"gitCommit", "0000000000000000000000000000000000000000"},
                                        {"gitTreeState", "clean"},
                                        {"buildDate", "2025-04-22T16:00:00Z"},
                                        {"goVersion", "go1.23.6"},
                                        {"compiler", "gc"},
                                        {"platform", "linux/amd64"}});
}

Status ApiServer::CheckBodySize(const net::Request& request) const {
  if (request.body.size() <= options_.max_body_bytes) return Status::Ok();
  return ResourceExhaustedError("Request entity too large: limit is " +
                                std::to_string(options_.max_body_bytes));
}

Result<json::value> ApiServer::ParseBody(const net::Request& request) const {
  UPLINK_RETURN_IF_ERROR(CheckBodySize(request));
  Result<json::value> body = ParseJson(request.body, JsonLimits{options_.max_body_bytes, 64});
  if (!body.ok()) {
    return InvalidArgumentError("the request body is not valid JSON: " + body.status().message());
  }
  if (!body->is_object()) return InvalidArgumentError("the request body must be a JSON object");
  return body;
}

net::Response ApiServer::ResourceRequest(const net::Request& request, std::string_view group,
                                         std::string_view version,
                                         const net::PathParams& params) const {
  const ResourceType* type = FindResource(group, version, params.at("resource"));
  auto namespace_param = params.find("namespace");
  auto name_param = params.find("name");
  bool namespaced_path = namespace_param != params.end();
  // A namespaced path for a cluster-scoped type (or a named cluster path for a namespaced
  // type) does not exist on a real server either.
  if (!type || (namespaced_path && !type->namespaced) ||
      (!namespaced_path && type->namespaced && name_param != params.end())) {
    return StatusResponse(404, "NotFound", "the server could not find the requested resource");
  }
  std::string namespace_name = namespaced_path ? namespace_param->second : "";
  std::string name = name_param != params.end() ? name_param->second : "";
  std::string verb = request.method == "POST"     ? "create"
                     : request.method == "PATCH"  ? "patch"
                     : request.method == "DELETE" ? "delete"
                     : name.empty()               ? "list"
                                                  : "get";
  if (std::find(type->verbs.begin(), type->verbs.end(), verb) == type->verbs.end()) {
    return StatusResponse(405, "MethodNotAllowed",
                          "the server does not allow this method on the requested resource");
  }
  if (auto watch = request.Query("watch"); watch && (*watch == "true" || *watch == "1")) {
    return StatusResponse(405, "MethodNotAllowed", "watch is not supported by uplink-kubesim");
  }
  if (request.Query("dryRun")) {
    return StatusResponse(400, "BadRequest", "dryRun is not supported by uplink-kubesim");
  }
  if (verb == "list") {
    return List(request, *type,
                namespaced_path ? std::optional<std::string>(namespace_name) : std::nullopt);
  }
  if (verb == "get") return GetOne(request, *type, namespace_name, name);
  if (verb == "create") {
    if (type->namespaced && !namespaced_path) {
      return StatusResponse(404, "NotFound", "the server could not find the requested resource");
    }
    return Create(request, *type, namespace_name);
  }
  if (verb == "patch") return Patch(request, *type, namespace_name, name);
  return Delete(request, *type, namespace_name, name);
}

net::Response ApiServer::List(const net::Request& request, const ResourceType& type,
                              const std::optional<std::string>& namespace_name) const {
  ListOptions options;
  options.namespace_name = namespace_name;
  options.label_selector = request.Query("labelSelector").value_or("");
  options.field_selector = request.Query("fieldSelector").value_or("");
  options.continue_token = request.Query("continue").value_or("");
  if (std::string limit = request.Query("limit").value_or(""); !limit.empty()) {
    auto [end, error] = std::from_chars(limit.data(), limit.data() + limit.size(), options.limit);
    if (error != std::errc() || end != limit.data() + limit.size()) {
      return StatusResponse(400, "BadRequest", "limit must be an integer");
    }
  }
  Result<IncludeObject> include = ParseIncludeObject(request.Query("includeObject").value_or(""));
  if (!include.ok()) return ErrorResponse(include.status());
  Result<ListPage> page = store_.List(type, options);
  if (!page.ok()) return ErrorResponse(page.status());
  if (AcceptsTable(request.headers.Get("Accept").value_or(""))) {
    return JsonResponse(200, BuildTable(type, page->items, ListMetadata(*page), *include,
                                        clock_.Now()));
  }
  json::array items;
  for (json::object& item : page->items) items.push_back(std::move(item));
  return JsonResponse(200, json::object{{"kind", type.kind + "List"},
                                        {"apiVersion", type.ApiVersion()},
                                        {"metadata", ListMetadata(*page)},
                                        {"items", std::move(items)}});
}

net::Response ApiServer::GetOne(const net::Request& request, const ResourceType& type,
                                const std::string& namespace_name, const std::string& name) const {
  Result<json::object> object = store_.Get(type, namespace_name, name);
  if (!object.ok()) return ErrorResponse(object.status());
  if (AcceptsTable(request.headers.Get("Accept").value_or(""))) {
    Result<IncludeObject> include = ParseIncludeObject(request.Query("includeObject").value_or(""));
    if (!include.ok()) return ErrorResponse(include.status());
    json::object metadata{{"resourceVersion", object->at("metadata").at("resourceVersion")}};
    return JsonResponse(200, BuildTable(type, {*object}, std::move(metadata), *include,
                                        clock_.Now()));
  }
  return JsonResponse(200, *object);
}

net::Response ApiServer::Create(const net::Request& request, const ResourceType& type,
                                const std::string& namespace_name) const {
  std::string media = MediaType(request);
  Result<json::value> body = InvalidArgumentError("no body");
  if (media == kProtobufMediaType) {
    if (Status size = CheckBodySize(request); !size.ok()) return ErrorResponse(size);
    Result<json::object> decoded = DecodeProtobufObject(request.body);
    if (!decoded.ok()) return ErrorResponse(decoded.status());
    body = json::value(std::move(*decoded));
  } else if (media == "application/json") {
    body = ParseBody(request);
  } else {
    return StatusResponse(415, "UnsupportedMediaType",
                          "the body of the request was in an unknown format (" + media.substr(0, 64) +
                              "); accepted media types include: application/json, " +
                              std::string(kProtobufMediaType) +
                              " (ConfigMap, Namespace and Secret)");
  }
  if (!body.ok()) return ErrorResponse(body.status());
  InvalidObject invalid;
  Result<json::object> created = store_.Create(type, namespace_name, body->get_object(), &invalid);
  if (!created.ok()) {
    if (!invalid.causes.empty()) return InvalidResponse(invalid);
    // Storage errors that are not API statuses (a resourceVersion set on create) reach clients
    // as a 500 Status without a reason.
    if (created.status().code() == StatusCode::kInternal) {
      return StatusResponse(500, "", created.status().message());
    }
    return ErrorResponse(created.status());
  }
  return JsonResponse(201, *created);
}

net::Response ApiServer::Patch(const net::Request& request, const ResourceType& type,
                               const std::string& namespace_name, const std::string& name) const {
  std::string media = MediaType(request);
  bool strategic = media == "application/strategic-merge-patch+json";
  if (media != "application/merge-patch+json" && !strategic) {
    return StatusResponse(415, "UnsupportedMediaType",
                          "the body of the request was in an unknown format (" + media.substr(0, 64) +
                              "); accepted media types include: application/merge-patch+json, "
                              "application/strategic-merge-patch+json");
  }
  Result<json::value> patch = ParseBody(request);
  if (!patch.ok()) return ErrorResponse(patch.status());
  if (strategic) {
    if (std::optional<std::string> directive = FindDirective(*patch)) {
      return StatusResponse(415, "UnsupportedMediaType",
                            "uplink-kubesim applies strategic merge patches as JSON merge patches "
                            "and does not support the directive " + directive->substr(0, 64));
    }
  }
  InvalidObject invalid;
  Result<json::object> patched = store_.MergePatch(type, namespace_name, name, *patch, &invalid);
  if (!patched.ok()) {
    if (!invalid.causes.empty()) return InvalidResponse(invalid);
    return ErrorResponse(patched.status());
  }
  return JsonResponse(200, *patched);
}

net::Response ApiServer::Delete(const net::Request& request, const ResourceType& type,
                                const std::string& namespace_name, const std::string& name) const {
  // The body, when there is one, is DeleteOptions; it must still be well-formed.
  if (!TrimWhitespace(request.body).empty()) {
    Result<json::value> options = ParseBody(request);
    if (!options.ok()) return ErrorResponse(options.status());
  }
  Result<json::object> deleted = store_.Delete(type, namespace_name, name);
  if (!deleted.ok()) return ErrorResponse(deleted.status());
  return JsonResponse(200, *deleted);
}

}  // namespace uplink::kubesim
