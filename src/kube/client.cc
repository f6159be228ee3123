#include "kube/client.h"

#include <algorithm>

#include "common/text.h"
#include "net/http.h"

namespace uplink::kube {
namespace {

constexpr size_t kMaxJsonDepth = 64;

// 20000 -> "20,000", for messages people read.
std::string WithThousandsSeparators(std::int64_t number) {
  std::string digits = std::to_string(number);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0 && digits[i - 1] != '-'; i -= 3) {
    digits.insert(static_cast<size_t>(i), ",");
  }
  return digits;
}

}  // namespace

Status KubeErrorFromReply(std::string_view what, int http_status, std::string_view body) {
  std::string text = std::string(what) + ": Kubernetes API answered " +
                     std::to_string(http_status) + " " +
                     std::string(net::ReasonPhrase(http_status));
  auto parsed = ParseJson(body, JsonLimits{.max_bytes = 1 << 20, .max_depth = 16});
  const json::object* status =
      parsed.ok() && parsed->is_object() ? &parsed->get_object() : nullptr;
  if (status != nullptr && StringAt(*status, "kind") == "Status") {
    std::string reason = StringAt(*status, "reason");
    std::string message = StringAt(*status, "message");
    if (!reason.empty()) text += " (reason " + OneLineExcerpt(reason) + ")";
    if (!message.empty()) text += ": " + OneLineExcerpt(message);
  } else {
    text += " (the reply was not a Kubernetes Status object)";
  }
  return Status(net::StatusCodeForHttpStatus(http_status), std::move(text));
}

Result<std::unique_ptr<KubeClient>> KubeClient::Create(KubeCredentials credentials,
                                                       KubeClientOptions options) {
  net::ClientOptions http;
  http.base_url = credentials.server;
  http.ca_pem = credentials.ca_pem;
  http.ca_file = credentials.ca_file;
  http.client_cert_pem = credentials.client_cert_pem;
  http.client_key_pem = credentials.client_key_pem;
  http.connect_timeout = options.connect_timeout;
  http.request_timeout = options.request_timeout;
  http.max_response_bytes = options.max_response_bytes;
  http.user_agent = options.user_agent;
  auto client = net::HttpClient::Create(std::move(http));
  if (!client.ok()) {
    return client.status().WithContext("connecting to the Kubernetes API (" + credentials.origin +
                                       ")");
  }
  return std::unique_ptr<KubeClient>(
      new KubeClient(std::move(credentials), options, std::move(client).value()));
}

KubeClient::KubeClient(KubeCredentials credentials, KubeClientOptions options,
                       std::unique_ptr<net::HttpClient> http)
    : credentials_(std::move(credentials)), options_(options), http_(std::move(http)) {}

Result<json::value> KubeClient::Call(std::string method, std::string target,
                                     std::string content_type, std::string body,
                                     int* http_status) {
  std::string what = method + " " + target.substr(0, target.find('?'));
  net::Request request;
  request.method = std::move(method);
  request.target = std::move(target);
  request.headers.Set("Accept", "application/json");
  if (!content_type.empty()) request.headers.Set("Content-Type", content_type);
  request.body = std::move(body);
  // Re-read on every request: projected service-account tokens rotate under a running pod.
  UPLINK_ASSIGN_OR_RETURN(std::optional<KubeBearerToken> token, credentials_.CurrentToken());
  if (token) request.headers.Set("Authorization", token->AuthorizationHeaderValue());

  auto response = http_->Send(std::move(request));
  if (!response.ok()) return response.status().WithContext(what);
  if (http_status != nullptr) *http_status = response->status;
  if (response->status < 200 || response->status > 299) {
    return KubeErrorFromReply(what, response->status, response->body);
  }
  auto parsed = ParseJson(response->body, JsonLimits{.max_bytes = options_.max_response_bytes,
                                                     .max_depth = kMaxJsonDepth});
  if (!parsed.ok()) {
    return Status(parsed.status().code(),
                  what + ": the Kubernetes API reply is not valid JSON: " +
                      OneLineExcerpt(parsed.status().message()));
  }
  if (!parsed->is_object()) {
    return InvalidArgumentError(what + ": the Kubernetes API reply is not a JSON object");
  }
  return std::move(parsed).value();
}

Result<json::value> KubeClient::GetNamespace(std::string_view name) {
  return Call("GET", "/api/v1/namespaces/" + net::PercentEncode(name), "", "");
}

Result<NodeListInfo> KubeClient::ListNodesOnce(std::string_view label_selector,
                                               const NodePageVisitor& on_page, bool& restart) {
  NodeListInfo list;
  std::string continue_token;
  // Enough pages for max_nodes full pages; a listing still going after them has more nodes
  // than a report can carry (or an API server that never ends it).
  const int page_size = std::max(options_.page_size, 1);
  const int max_pages = std::max((options_.max_nodes + page_size - 1) / page_size, 1);
  const std::string too_many = "listing nodes: more than " +
                               WithThousandsSeparators(options_.max_nodes) +
                               " nodes match the selector; narrow it";
  std::int64_t nodes = 0;
  while (true) {
    if (list.pages >= max_pages) {
      return ResourceExhaustedError(too_many + " (the listing had not ended after " +
                                    std::to_string(max_pages) + " pages of up to " +
                                    std::to_string(page_size) + ")");
    }
    std::string target = "/api/v1/nodes?labelSelector=" + net::PercentEncode(label_selector) +
                         "&limit=" + std::to_string(page_size);
    if (!continue_token.empty()) target += "&continue=" + net::PercentEncode(continue_token);
    int http_status = 0;
    auto page = Call("GET", std::move(target), "", "", &http_status);
    if (!page.ok()) {
      // 410 Gone: the continue token expired (the snapshot was compacted); start over.
      if (http_status == 410 && !continue_token.empty()) restart = true;
      return page.status();
    }
    ++list.pages;
    const json::object& object = page->get_object();
    const json::value* items = object.if_contains("items");
    if (items == nullptr || !(items->is_array() || items->is_null())) {
      return InvalidArgumentError("listing nodes: the reply has no 'items' list");
    }
    std::string resource_version;
    std::string next;
    if (const json::value* metadata = object.if_contains("metadata");
        metadata != nullptr && metadata->is_object()) {
      resource_version = StringAt(metadata->get_object(), "resourceVersion");
      next = StringAt(metadata->get_object(), "continue");
    }
    if (list.pages == 1) {
      list.resource_version = resource_version;
    } else if (resource_version != list.resource_version) {
      // Pages of one listing come from one snapshot; a different version means mixing two.
      restart = true;
      return FailedPreconditionError("listing nodes: the resource version changed between pages (" +
                                     OneLineExcerpt(list.resource_version) + " then " +
                                     OneLineExcerpt(resource_version) + ")");
    }
    if (items->is_array()) {
      nodes += static_cast<std::int64_t>(items->get_array().size());
      if (nodes > options_.max_nodes) return ResourceExhaustedError(too_many);
      on_page(page->get_object()["items"].get_array());
    }
    if (next.empty()) return list;
    if (next == continue_token) {
      return InvalidArgumentError("listing nodes: the API server returned the same continue "
                                  "token twice");
    }
    continue_token = std::move(next);
  }
}

Result<NodeListInfo> KubeClient::ListNodes(std::string_view label_selector,
                                           const NodePageVisitor& on_page,
                                           const std::function<void()>& on_restart) {
  if (label_selector.empty()) {
    return InvalidArgumentError("listing nodes: the label selector is empty; uplink lists only "
                                "selected nodes (e.g. nvidia.com/gpu.present=true)");
  }
  bool restart = false;
  auto first = ListNodesOnce(label_selector, on_page, restart);
  if (first.ok() || !restart) return first;
  on_restart();
  bool restart_again = false;
  auto second = ListNodesOnce(label_selector, on_page, restart_again);
  if (second.ok()) second->restarted = true;
  return second;
}

Result<NodeList> KubeClient::ListNodes(std::string_view label_selector) {
  std::vector<json::value> items;
  auto info = ListNodes(
      label_selector,
      [&](json::array& page) {
        for (json::value& item : page) items.push_back(std::move(item));
      },
      [&] { items.clear(); });
  if (!info.ok()) return info.status();
  NodeList list;
  static_cast<NodeListInfo&>(list) = std::move(*info);
  list.items = std::move(items);
  return list;
}

Result<json::value> KubeClient::GetVersion() { return Call("GET", "/version", "", ""); }

Result<json::value> KubeClient::GetObject(std::string_view path) {
  return Call("GET", std::string(path), "", "");
}

Result<std::vector<json::value>> KubeClient::ListObjects(std::string_view collection_path,
                                                         std::string_view label_selector,
                                                         size_t max_items) {
  std::vector<json::value> items;
  std::string continue_token;
  const std::string what = "listing " + std::string(collection_path);
  for (size_t pages = 0;; ++pages) {
    // Enough pages for max_items; a listing still going after them is cut off, not followed.
    if (pages > max_items / static_cast<size_t>(std::max(options_.page_size, 1)) + 1) {
      return ResourceExhaustedError(what + ": more than " + std::to_string(max_items) + " objects");
    }
    std::string target = std::string(collection_path) + "?limit=" + std::to_string(options_.page_size);
    if (!label_selector.empty()) target += "&labelSelector=" + net::PercentEncode(label_selector);
    if (!continue_token.empty()) target += "&continue=" + net::PercentEncode(continue_token);
    UPLINK_ASSIGN_OR_RETURN(json::value page, Call("GET", std::move(target), "", ""));
    json::object& object = page.get_object();
    json::value* page_items = object.if_contains("items");
    if (page_items == nullptr || !(page_items->is_array() || page_items->is_null())) {
      return InvalidArgumentError(what + ": the reply has no 'items' list");
    }
    if (page_items->is_array()) {
      for (json::value& item : page_items->get_array()) {
        if (items.size() >= max_items) {
          return ResourceExhaustedError(what + ": more than " + std::to_string(max_items) +
                                        " objects");
        }
        items.push_back(std::move(item));
      }
    }
    std::string next = StringAt(ObjectAt(object, "metadata"), "continue");
    if (next.empty()) return items;
    if (next == continue_token) {
      return InvalidArgumentError(what + ": the API server returned the same continue token twice");
    }
    continue_token = std::move(next);
  }
}

Result<json::value> KubeClient::CreateObject(std::string_view collection_path,
                                             const json::value& object) {
  int http_status = 0;
  auto created = Call("POST", std::string(collection_path), "application/json", ToJson(object),
                      &http_status);
  if (!created.ok() && http_status == 409 &&
      created.status().message().find("(reason AlreadyExists)") != std::string::npos) {
    return Status(StatusCode::kAlreadyExists, created.status().message());
  }
  return created;
}

Status KubeClient::DeleteObject(std::string_view path,
                                std::optional<std::int64_t> grace_period_seconds) {
  std::string body;
  if (grace_period_seconds) {
    body = ToJson(json::object{{"kind", "DeleteOptions"},
                               {"apiVersion", "v1"},
                               {"gracePeriodSeconds", *grace_period_seconds}});
  }
  return Call("DELETE", std::string(path), body.empty() ? "" : "application/json", body).status();
}

Result<std::unique_ptr<net::WebSocket>> KubeClient::Exec(std::string_view ns, std::string_view pod,
                                                         std::string_view container,
                                                         const std::vector<std::string>& command,
                                                         bool stdin,
                                                         net::WebSocketOptions websocket) {
  net::WebSocketConnectOptions options;
  options.client.base_url = credentials_.server;
  options.client.ca_pem = credentials_.ca_pem;
  options.client.ca_file = credentials_.ca_file;
  options.client.client_cert_pem = credentials_.client_cert_pem;
  options.client.client_key_pem = credentials_.client_key_pem;
  options.client.connect_timeout = options_.connect_timeout;
  options.client.request_timeout = options_.request_timeout;
  options.client.user_agent = options_.user_agent;
  options.target = "/api/v1/namespaces/" + net::PercentEncode(ns) + "/pods/" +
                   net::PercentEncode(pod) + "/exec?container=" + net::PercentEncode(container) +
                   "&stdout=true&stderr=true" + (stdin ? "&stdin=true" : "");
  for (const std::string& arg : command) options.target += "&command=" + net::PercentEncode(arg);
  options.subprotocols = {"v5.channel.k8s.io", "v4.channel.k8s.io"};
  options.websocket = websocket;
  UPLINK_ASSIGN_OR_RETURN(std::optional<KubeBearerToken> token, credentials_.CurrentToken());
  if (token) options.headers.Set("Authorization", token->AuthorizationHeaderValue());
  const std::string what = "exec in pod " + std::string(ns) + "/" + std::string(pod);
  net::Response refusal;
  refusal.status = 0;
  auto socket = net::ConnectWebSocket(options, &refusal);
  if (!socket.ok()) {
    if (refusal.status >= 300) return KubeErrorFromReply(what, refusal.status, refusal.body);
    return socket.status().WithContext(what);
  }
  return socket;
}

Status KubeClient::MergePatchConfigMap(std::string_view ns, std::string_view name,
                                       const json::value& patch) {
  auto reply = Call("PATCH",
                    "/api/v1/namespaces/" + net::PercentEncode(ns) + "/configmaps/" +
                        net::PercentEncode(name),
                    "application/merge-patch+json", ToJson(patch));
  return reply.status();
}

}  // namespace uplink::kube
