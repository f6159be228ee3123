#include "kubesim/api.h"

#include <algorithm>
#include <charconv>
#include <variant>

#include "common/files.h"
#include "common/text.h"
#include "kubesim/cluster.h"
#include "kubesim/embedded_data.h"
#include "kubesim/exec.h"
#include "kubesim/kubelet.h"
#include "kubesim/logs.h"
#include "kubesim/protobuf.h"
#include "kubesim/resource_metrics.h"
#include "kubesim/table.h"
#include "net/websocket.h"

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
  return AsciiLower(type);
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
  if (!type.categories.empty()) {
    resource["categories"] = json::array(type.categories.begin(), type.categories.end());
  }
  return resource;
}

json::object ApiResourceList(std::string_view group, std::string_view version) {
  json::array resources;
  for (const ResourceType& type : ResourceTypes()) {
    if (type.group != group || type.version != version) continue;
    resources.push_back(ApiResource(type));
    // Subresources follow their resource, as kube-apiserver lists them ("pods/log").
    for (const std::string& subresource : type.subresources) {
      // Exec is created (SPDY's POST) or got (a WebSocket's GET); logs are read.
      json::array verbs = subresource == "exec" ? json::array{"create", "get"} : json::array{"get"};
      resources.push_back(json::object{{"name", type.plural + "/" + subresource},
                                       {"singularName", ""},
                                       {"namespaced", type.namespaced},
                                       {"kind", subresource == "exec" ? "PodExecOptions" : type.kind},
                                       {"verbs", std::move(verbs)}});
    }
  }
  std::string group_version = group.empty() ? std::string(version)
                                            : std::string(group) + "/" + std::string(version);
  return json::object{{"kind", "APIResourceList"},
                      {"apiVersion", "v1"},
                      {"groupVersion", group_version},
                      {"resources", std::move(resources)}};
}

// The named API groups in the order discovery lists them (the order of ResourceTypes()).
std::vector<std::string> GroupNames() {
  std::vector<std::string> names;
  for (const ResourceType& type : ResourceTypes()) {
    if (!type.group.empty() &&
        std::find(names.begin(), names.end(), type.group) == names.end()) {
      names.push_back(type.group);
    }
  }
  return names;
}

// Every group serves one version.
std::optional<json::object> ApiGroup(std::string_view name) {
  for (const ResourceType& type : ResourceTypes()) {
    if (type.group != name || name.empty()) continue;
    json::object version{{"groupVersion", type.ApiVersion()}, {"version", type.version}};
    return json::object{{"kind", "APIGroup"},
                        {"apiVersion", "v1"},
                        {"name", type.group},
                        {"versions", json::array{version}},
                        {"preferredVersion", version}};
  }
  return std::nullopt;
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
    : options_(std::move(options)),
      store_(store),
      clock_(clock),
      authenticator_(options_.token, std::move(options_.users)),
      openapi_(OpenApiDocuments::Load(EmbeddedDataFile("openapi-schemas.yaml"),
                                      options_.server_version)),
      admission_(store, clock),
      watches_(store) {
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
  AddDiscoveryRoutes();

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
  for (const char* method : {"GET", "POST"}) {
    router_.Add(method, "/api/v1/namespaces/{namespace}/{resource}/{name}/{subresource}", core);
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

void ApiServer::AddDiscoveryRoutes() {
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
    json::array groups;
    for (const std::string& name : GroupNames()) {
      json::object group = *ApiGroup(name);
      group.erase("kind");
      group.erase("apiVersion");
      groups.push_back(std::move(group));
    }
    return JsonResponse(200, json::object{{"kind", "APIGroupList"},
                                          {"apiVersion", "v1"},
                                          {"groups", std::move(groups)}});
  });
  router_.Add("GET", "/api/v1", [](const net::Request&, const net::PathParams&) {
    return JsonResponse(200, ApiResourceList("", "v1"));
  });
  router_.Add("GET", "/apis/{group}", [](const net::Request&, const net::PathParams& params) {
    std::optional<json::object> group = ApiGroup(params.at("group"));
    if (!group) {
      return StatusResponse(404, "NotFound", "the server could not find the requested resource");
    }
    return JsonResponse(200, *group);
  });
  router_.Add("GET", "/apis/{group}/{version}",
              [](const net::Request&, const net::PathParams& params) {
                json::object list = ApiResourceList(params.at("group"), params.at("version"));
                if (list.at("resources").as_array().empty() || params.at("group").empty()) {
                  return StatusResponse(404, "NotFound",
                                        "the server could not find the requested resource");
                }
                return JsonResponse(200, list);
              });
  router_.Add("GET", "/openapi/v3", [this](const net::Request&, const net::PathParams&) {
    if (!openapi_.ok()) return ErrorResponse(openapi_.status());
    net::Response response = net::Response::Json(200, openapi_->IndexJson());
    response.headers.Set("Cache-Control", "no-cache, private");
    return response;
  });
  // An empty OpenAPI v2 document (a protobuf message with no fields): kubectl 1.27 and 1.28
  // fetch it before `explain`, which then renders from OpenAPI v3. Definitions are only
  // published in v3.
  router_.Add("GET", "/openapi/v2", [](const net::Request&, const net::PathParams&) {
    net::Response response = net::Response::Text(200, "");
    response.headers.Set("Content-Type",
                         "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    return response;
  });
  router_.Add("GET", "/openapi/v3/api/{version}",
              [this](const net::Request& request, const net::PathParams& params) {
                return OpenApiDocument(request, "api/" + params.at("version"));
              });
  router_.Add("GET", "/openapi/v3/apis/{group}/{version}",
              [this](const net::Request& request, const net::PathParams& params) {
                return OpenApiDocument(request,
                                       "apis/" + params.at("group") + "/" + params.at("version"));
              });
}

std::optional<net::Response> ApiServer::Authorize(const UserInfo& user,
                                                  const RequestAttributes& attributes) const {
  if (!options_.rbac || user.InGroup(kMastersGroup)) return std::nullopt;
  if (RbacAllows(store_, user, attributes)) return std::nullopt;
  Forbidden forbidden = ForbiddenFor(user, attributes);
  json::object status = StatusObject(403, "Forbidden", forbidden.message);
  status["details"] = std::move(forbidden.details);
  return JsonResponse(403, status);
}

std::optional<net::Response> ApiServer::Impersonate(const net::Request& request,
                                                    UserInfo& user) const {
  std::optional<std::string> impersonated_user;
  std::vector<std::string> impersonated_groups;
  for (const auto& [name, value] : request.headers.all()) {
    std::string lower = AsciiLower(name);
    if (lower == "impersonate-user") {
      impersonated_user = value;
    } else if (lower == "impersonate-group") {
      impersonated_groups.push_back(value);
    } else if (lower == "impersonate-uid" || lower.starts_with("impersonate-extra-")) {
      return StatusResponse(400, "BadRequest",
                            "uplink-kubesim does not support the " + name.substr(0, 64) +
                                " impersonation header");
    }
  }
  if (!impersonated_user) {
    if (impersonated_groups.empty()) return std::nullopt;
    return StatusResponse(400, "BadRequest",
                          "requested impersonation of groups without impersonating a user");
  }
  // Each impersonated identity is a request to "impersonate" it, authorized for the caller.
  RequestAttributes check;
  check.resource_request = true;
  check.verb = "impersonate";
  const std::string& name = *impersonated_user;
  std::vector<std::string> service_account_groups;
  if (name.starts_with(kServiceAccountPrefix)) {
    std::string_view rest = std::string_view(name).substr(kServiceAccountPrefix.size());
    size_t colon = rest.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size()) {
      return StatusResponse(400, "BadRequest", "impersonated service account name is invalid");
    }
    check.resource = "serviceaccounts";
    check.namespace_name = std::string(rest.substr(0, colon));
    check.name = std::string(rest.substr(colon + 1));
    service_account_groups = {"system:serviceaccounts",
                              "system:serviceaccounts:" + check.namespace_name};
  } else {
    check.resource = "users";
    check.name = name;
  }
  if (std::optional<net::Response> denied = Authorize(user, check)) return denied;
  for (const std::string& group : impersonated_groups) {
    RequestAttributes group_check;
    group_check.resource_request = true;
    group_check.verb = "impersonate";
    group_check.resource = "groups";
    group_check.name = group;
    if (std::optional<net::Response> denied = Authorize(user, group_check)) return denied;
  }
  UserInfo impersonated{name, impersonated_groups};
  for (std::string& group : service_account_groups) impersonated.groups.push_back(std::move(group));
  if (name != "system:anonymous" && !impersonated.InGroup(kAuthenticatedGroup)) {
    impersonated.groups.emplace_back(kAuthenticatedGroup);
  }
  user = std::move(impersonated);
  return std::nullopt;
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
  std::optional<UserInfo> user = authenticator_.Authenticate(authorization_header.value_or(""));
  if (!user) {
    counted(StatusResponse(401, "Unauthorized", "Unauthorized"));
    return;
  }
  if (std::optional<net::Response> refused = Impersonate(request, *user)) {
    counted(std::move(*refused));
    return;
  }
  // The request is read the way the router dispatches it: the same decoded path, with
  // empty segments skipped.
  auto watch = request.Query("watch");
  bool watching = watch && (*watch == "true" || *watch == "1");
  RequestAttributes attributes = RequestAttributesFor(
      request.method, request.Path(), watching, request.Query("fieldSelector").value_or(""));
  if (std::optional<net::Response> denied = Authorize(*user, attributes)) {
    counted(std::move(*denied));
    return;
  }
  // From 1.35 a WebSocket GET of pods/exec needs create too, as the POST of SPDY always did.
  if (attributes.verb == "get" && attributes.resource == "pods" &&
      attributes.subresource == "exec" && net::IsWebSocketUpgrade(request) && ExecNeedsCreate()) {
    RequestAttributes create = attributes;
    create.verb = "create";
    if (std::optional<net::Response> denied = Authorize(*user, create)) {
      counted(std::move(*denied));
      return;
    }
  }
  // Self reviews answer for the requester, whom only this point knows.
  if (attributes.resource_request && attributes.verb == "create" &&
      attributes.api_group == "authorization.k8s.io" && attributes.api_version == "v1" &&
      attributes.namespace_name.empty() && attributes.name.empty() &&
      (attributes.resource == "selfsubjectaccessreviews" ||
       attributes.resource == "selfsubjectrulesreviews")) {
    counted(SelfSubjectReview(request, *user, attributes.resource));
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
  if (auto subresource = params.find("subresource"); subresource != params.end()) {
    if (std::find(type->subresources.begin(), type->subresources.end(), subresource->second) ==
        type->subresources.end()) {
      return StatusResponse(404, "NotFound", "the server could not find the requested resource");
    }
    if (subresource->second == "exec") return Exec(request, namespace_name, name);
    if (request.method != "GET") {
      return StatusResponse(405, "MethodNotAllowed",
                            "the server does not allow this method on the requested resource");
    }
    return PodLog(request, namespace_name, name);
  }
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
    if (verb != "list" || !type->stored) {
      return StatusResponse(405, "MethodNotAllowed",
                            "uplink-kubesim watches collections of stored objects only");
    }
    return Watch(request, *type,
                 namespaced_path ? std::optional<std::string>(namespace_name) : std::nullopt);
  }
  if (request.Query("dryRun")) {
    return StatusResponse(400, "BadRequest", "dryRun is not supported by uplink-kubesim");
  }
  if (type->group == "metrics.k8s.io") {
    return MetricsRequest(request, *type,
                          namespaced_path ? std::optional<std::string>(namespace_name)
                                          : std::nullopt,
                          name);
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

net::Response ApiServer::Watch(const net::Request& request, const ResourceType& type,
                               const std::optional<std::string>& namespace_name) const {
  WatchHub::Render render = [](const json::object& object, bool) { return json::value(object); };
  if (AcceptsTable(request.headers.Get("Accept").value_or(""))) {
    Result<IncludeObject> include = ParseIncludeObject(request.Query("includeObject").value_or(""));
    if (!include.ok()) return ErrorResponse(include.status());
    render = [this, &type, include = *include](const json::object& object, bool first) {
      json::object table = BuildTable(type, {object}, json::object(), include, clock_.Now());
      // Only the first event says what the columns are.
      if (!first) table.erase("columnDefinitions");
      return json::value(std::move(table));
    };
  }
  return watches_.Watch(request, type, namespace_name, std::move(render));
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

std::variant<json::object, net::Response> ApiServer::ObjectBody(
    const net::Request& request) const {
  std::string media = MediaType(request);
  if (media == kProtobufMediaType) {
    if (Status size = CheckBodySize(request); !size.ok()) return ErrorResponse(size);
    Result<json::object> decoded = DecodeProtobufObject(request.body);
    if (!decoded.ok()) return ErrorResponse(decoded.status());
    return std::move(*decoded);
  }
  if (media == "application/json") {
    Result<json::value> body = ParseBody(request);
    if (!body.ok()) return ErrorResponse(body.status());
    return std::move(body->as_object());
  }
  return StatusResponse(415, "UnsupportedMediaType",
                        "the body of the request was in an unknown format (" + media.substr(0, 64) +
                            "); accepted media types include: application/json, " +
                            std::string(kProtobufMediaType));
}

net::Response ApiServer::Create(const net::Request& request, const ResourceType& type,
                                const std::string& namespace_name) const {
  std::variant<json::object, net::Response> body = ObjectBody(request);
  if (auto* error = std::get_if<net::Response>(&body)) return std::move(*error);
  json::object object = std::get<json::object>(std::move(body));
  InvalidObject invalid;
  std::vector<std::string> warnings;
  // Admission and storage together, so that quota sees every create before this one.
  std::lock_guard admitting(admission_.lock());
  if (type.namespaced && namespace_name.empty()) {
    return StatusResponse(404, "NotFound", "the server could not find the requested resource");
  }
  Status admitted = admission_.AdmitCreate(type, namespace_name, object, warnings, &invalid);
  if (!admitted.ok()) {
    if (!invalid.causes.empty()) return InvalidResponse(invalid);
    return ErrorResponse(admitted);
  }
  Result<json::object> created = store_.Create(type, namespace_name, std::move(object), &invalid);
  if (!created.ok()) {
    if (!invalid.causes.empty()) return InvalidResponse(invalid);
    // Storage errors that are not API statuses (a resourceVersion set on create) reach clients
    // as a 500 Status without a reason.
    if (created.status().code() == StatusCode::kInternal) {
      return StatusResponse(500, "", created.status().message());
    }
    return ErrorResponse(created.status());
  }
  net::Response response = JsonResponse(201, *created);
  for (const std::string& warning : warnings) {
    // RFC 7234 warn-code 299 with the text quoted, as kube-apiserver writes Warning headers.
    std::string quoted;
    for (char c : warning) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    response.headers.Add("Warning", "299 - \"" + quoted + "\"");
  }
  return response;
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
  std::optional<std::int64_t> grace;
  if (!TrimWhitespace(request.body).empty()) {
    Result<json::value> options = ParseBody(request);
    const json::value* seconds = options.ok() ? options->as_object().if_contains("gracePeriodSeconds")
                                              : nullptr;
    if (seconds && seconds->is_int64()) grace = seconds->get_int64();
  }
  if (const std::optional<std::string> query = request.Query("gracePeriodSeconds")) {
    grace = std::atoll(query->c_str());
  }
  // A pod on a node is stopped first and removed by its kubelet, as on a real cluster.
  if (options_.kubelet && type.group.empty() && type.plural == "pods") {
    if (auto graceful = options_.kubelet->DeletePod(namespace_name, name, grace)) {
      if (!graceful->ok()) return ErrorResponse(graceful->status());
      return JsonResponse(200, **graceful);
    }
  }
  Result<json::object> deleted = store_.Delete(type, namespace_name, name);
  if (!deleted.ok()) return ErrorResponse(deleted.status());
  return JsonResponse(200, *deleted);
}

net::Response ApiServer::Exec(const net::Request& request, const std::string& namespace_name,
                              const std::string& name) const {
  // As kube-apiserver: the options and the pod first, then the upgrade.
  Result<ExecRequest> exec = ParseExecRequest(request);
  if (!exec.ok()) return StatusResponse(400, "BadRequest", exec.status().message());
  if (!options_.kubelet) {
    return StatusResponse(400, "BadRequest",
                          "this uplink-kubesim runs no pods, so there is nothing to exec into");
  }
  Result<std::string> container =
      options_.kubelet->ExecContainer(namespace_name, name, exec->container);
  if (!container.ok()) {
    if (container.status().code() == StatusCode::kNotFound) return ErrorResponse(container.status());
    return StatusResponse(400, "BadRequest", container.status().message());
  }
  if (!net::IsWebSocketUpgrade(request)) {
    std::string_view upgrade = request.headers.Get("Upgrade").value_or("");
    if (!upgrade.empty()) {
      return StatusResponse(400, "BadRequest",
                            "uplink-kubesim serves exec over WebSocket only (v5.channel.k8s.io or "
                            "v4.channel.k8s.io), not " + std::string(upgrade.substr(0, 32)));
    }
    return StatusResponse(400, "BadRequest", "Upgrade request required");
  }
  if (request.method != "GET") {
    return StatusResponse(400, "BadRequest", "a WebSocket upgrade must be a GET request");
  }
  std::string protocol;
  std::vector<std::string> offered = net::OfferedSubprotocols(request);
  for (std::string_view supported : {kExecProtocolV5, kExecProtocolV4}) {
    if (std::find(offered.begin(), offered.end(), supported) != offered.end()) {
      protocol = std::string(supported);
      break;
    }
  }
  if (protocol.empty()) {
    std::string asked;
    for (const std::string& name : offered) asked += (asked.empty() ? "" : " ") + name.substr(0, 64);
    return StatusResponse(400, "BadRequest",
                          "requested protocol(s) are not supported: [" + asked + "]; supports [" +
                              std::string(kExecProtocolV5) + " " + std::string(kExecProtocolV4) +
                              "]");
  }
  Result<ExecCommand> command =
      options_.kubelet->runtime().Exec(*container, exec->command, exec->stdin);
  return net::AcceptWebSocket(protocol, [exec = *exec, command](std::unique_ptr<net::WebSocket> socket) {
    ServeExec(std::move(socket), exec, command);
  });
}

bool ApiServer::ExecNeedsCreate() const {
  Result<VersionParts> parts = ParseServerVersion(options_.server_version);
  if (!parts.ok()) return false;
  return parts->major != "1" || std::atoi(parts->minor.c_str()) >= 35;
}

net::Response ApiServer::PodLog(const net::Request& request, const std::string& namespace_name,
                               const std::string& name) const {
  Result<json::object> pod = store_.Get(*FindResource("", "v1", "pods"), namespace_name, name);
  if (!pod.ok()) return ErrorResponse(pod.status());
  Result<LogOptions> options = ParseLogOptions(request.QueryParams());
  if (!options.ok()) return ErrorResponse(options.status());
  std::vector<FieldError> causes = ValidateLogOptions(*options);
  if (!causes.empty()) return InvalidResponse(InvalidObject{"", "PodLogOptions", name, causes});
  Result<std::string> log = ReadContainerLog(*pod, *options, store_.logs(), clock_.Now());
  if (!log.ok()) return ErrorResponse(log.status());
  net::Response response = net::Response::Text(200, std::move(*log));
  response.headers.Set("Content-Type", "text/plain");
  return response;
}

net::Response ApiServer::MetricsRequest(const net::Request& request, const ResourceType& type,
                                        const std::optional<std::string>& namespace_name,
                                        const std::string& name) const {
  bool nodes = type.kind == "NodeMetrics";
  std::vector<json::object> items = nodes ? NodeMetricsItems(store_, clock_.Now())
                                          : PodMetricsItems(store_, namespace_name, clock_.Now());
  // metrics-server names its resources nodemetrics and podmetrics in errors.
  std::string group_resource = nodes ? "nodemetrics.metrics.k8s.io" : "podmetrics.metrics.k8s.io";
  if (!name.empty()) {
    for (json::object& item : items) {
      if (item.at("metadata").at("name").as_string() == name) return JsonResponse(200, item);
    }
    std::string missing = nodes ? name : namespace_name.value_or("") + "/" + name;
    return StatusResponse(404, "NotFound", group_resource + " " + GoQuoted(missing) + " not found");
  }
  Result<ObjectFilter> filter =
      ObjectFilter::Parse(type, request.Query("labelSelector").value_or(""),
                          request.Query("fieldSelector").value_or(""));
  if (!filter.ok()) return ErrorResponse(filter.status());
  json::array selected;
  for (json::object& item : items) {
    if (filter->Matches(item)) selected.push_back(std::move(item));
  }
  return JsonResponse(200, json::object{{"kind", type.kind + "List"},
                                        {"apiVersion", type.ApiVersion()},
                                        {"metadata", json::object()},
                                        {"items", std::move(selected)}});
}

net::Response ApiServer::SelfSubjectReview(const net::Request& request, const UserInfo& user,
                                           const std::string& resource) const {
  std::variant<json::object, net::Response> body = ObjectBody(request);
  if (auto* error = std::get_if<net::Response>(&body)) return std::move(*error);
  json::object review = std::get<json::object>(std::move(body));
  bool access = resource == "selfsubjectaccessreviews";
  std::string kind = access ? "SelfSubjectAccessReview" : "SelfSubjectRulesReview";
  const json::value* spec_value = review.if_contains("spec");
  json::object spec = spec_value && spec_value->is_object() ? spec_value->get_object()
                                                            : json::object();
  auto text = [](const json::object& object, std::string_view key) {
    const json::value* value = object.if_contains(key);
    return value && value->is_string() ? std::string(value->get_string()) : std::string();
  };
  auto field = [](const json::object& object, std::string_view key) {
    const json::value* value = object.if_contains(key);
    return value && value->is_object() ? value->get_object() : json::object();
  };
  bool everything_allowed = !options_.rbac || user.InGroup(kMastersGroup);
  json::object status;
  if (access) {
    json::object resource_attributes = field(spec, "resourceAttributes");
    json::object non_resource_attributes = field(spec, "nonResourceAttributes");
    if (spec.contains("resourceAttributes") == spec.contains("nonResourceAttributes")) {
      return InvalidResponse(InvalidObject{
          "authorization.k8s.io", kind, "",
          {FieldError{"spec.resourceAttributes", "FieldValueInvalid",
                      "Invalid value: \"null\": exactly one of nonResourceAttributes or "
                      "resourceAttributes must be specified"}}});
    }
    RequestAttributes asked;
    if (spec.contains("resourceAttributes")) {
      asked.resource_request = true;
      asked.verb = text(resource_attributes, "verb");
      asked.api_group = text(resource_attributes, "group");
      asked.api_version = text(resource_attributes, "version");
      asked.resource = text(resource_attributes, "resource");
      asked.subresource = text(resource_attributes, "subresource");
      asked.name = text(resource_attributes, "name");
      asked.namespace_name = text(resource_attributes, "namespace");
    } else {
      asked.verb = text(non_resource_attributes, "verb");
      asked.path = text(non_resource_attributes, "path");
    }
    status["allowed"] = everything_allowed || RbacAllows(store_, user, asked);
  } else if (options_.rbac) {
    UserRules rules = RulesFor(store_, user, text(spec, "namespace"));
    status["resourceRules"] = std::move(rules.resource_rules);
    status["nonResourceRules"] = std::move(rules.non_resource_rules);
    status["incomplete"] = false;
  } else {
    // AlwaysAllow's rules: everything.
    json::array all{"*"};
    status["resourceRules"] = json::array{
        json::object{{"verbs", all}, {"apiGroups", all}, {"resources", all}}};
    status["nonResourceRules"] =
        json::array{json::object{{"verbs", all}, {"nonResourceURLs", all}}};
    status["incomplete"] = false;
  }
  return JsonResponse(201, json::object{{"kind", kind},
                                        {"apiVersion", "authorization.k8s.io/v1"},
                                        {"metadata", json::object{{"creationTimestamp", nullptr}}},
                                        {"spec", std::move(spec)},
                                        {"status", std::move(status)}});
}

net::Response ApiServer::OpenApiDocument(const net::Request& request,
                                         const std::string& path) const {
  if (!openapi_.ok()) return ErrorResponse(openapi_.status());
  const OpenApiDocuments::Document* document = openapi_->Find(path);
  if (!document) {
    return StatusResponse(404, "NotFound", "the server could not find the requested resource");
  }
  net::Response response = net::Response::Json(200, document->json);
  response.headers.Set("Etag", "\"" + document->hash + "\"");
  // A request for the current hash may be cached for good, as kube-apiserver allows.
  bool current = request.Query("hash").value_or("") == document->hash;
  response.headers.Set("Cache-Control", current ? "public, immutable" : "no-cache, private");
  return response;
}

}  // namespace uplink::kubesim
