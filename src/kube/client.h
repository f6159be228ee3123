// A small Kubernetes API client for exactly what uplink needs: read a namespace, list nodes
// page by page, merge-patch a ConfigMap; for the workspace controller, read the server's
// version, get, list, create and delete namespaced objects, and exec into a pod over
// WebSocket. It owns its HTTP connection and its credential; nothing else in uplink can reach
// either.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "kube/credentials.h"
#include "net/client.h"
#include "net/websocket.h"

namespace uplink::kube {

struct KubeClientOptions {
  std::string user_agent = "uplink/" UPLINK_VERSION;
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds request_timeout{30'000};
  size_t max_response_bytes = 16 << 20;  // per page
  int page_size = 500;                   // the `limit` of each list request
  // A report carries at most 20,000 nodes (docs/protocol.md); a listing past that fails, and
  // so does one that has not ended after max_nodes / page_size pages (40 by default).
  int max_nodes = 20'000;
};

struct NodeListInfo {
  std::string resource_version;
  int pages = 0;
  bool restarted = false;  // the listing was restarted once (410 Gone or a changed version)
};

struct NodeList : NodeListInfo {
  std::vector<json::value> items;  // Node objects as the API server sent them
};

// Receives each page's Node objects as the page arrives (and may move them away).
using NodePageVisitor = std::function<void(json::array& items)>;

class KubeClient {
 public:
  static Result<std::unique_ptr<KubeClient>> Create(KubeCredentials credentials,
                                                    KubeClientOptions options = {});

  // GET /api/v1/namespaces/{name}.
  Result<json::value> GetNamespace(std::string_view name);

  // Every node matching `label_selector` (which must not be empty: uplink never lists a
  // whole cluster by accident), following `continue` tokens until the list is complete.
  // More than options.max_nodes nodes is a ResourceExhausted error that says to narrow the
  // selector.
  // Pages go to `on_page` one at a time, so only one page is held in memory; when the
  // listing has to start over, `on_restart` runs first so the caller can drop what it built.
  Result<NodeListInfo> ListNodes(std::string_view label_selector, const NodePageVisitor& on_page,
                                 const std::function<void()>& on_restart);
  // The same, collecting every Node object (for callers that need them all at once).
  Result<NodeList> ListNodes(std::string_view label_selector);

  // PATCH /api/v1/namespaces/{ns}/configmaps/{name} as application/merge-patch+json.
  Status MergePatchConfigMap(std::string_view ns, std::string_view name, const json::value& patch);

  // GET /version: {"major": "1", "minor": "35", "gitVersion": "v1.35.2", ...}.
  Result<json::value> GetVersion();

  // GET of one object by its API path ("/api/v1/namespaces/ns/pods/name"). A missing object
  // is NotFound.
  Result<json::value> GetObject(std::string_view path);

  // Every object of a collection ("/api/v1/namespaces/ns/pods"), optionally filtered by a
  // label selector, following continue tokens; more than `max_items` is ResourceExhausted.
  Result<std::vector<json::value>> ListObjects(std::string_view collection_path,
                                               std::string_view label_selector = {},
                                               size_t max_items = 10'000);

  // POST of `object` to its collection; the created object. A name already taken is
  // AlreadyExists; an admission refusal carries the API server's message.
  Result<json::value> CreateObject(std::string_view collection_path, const json::value& object);

  // DELETE of one object, with gracePeriodSeconds when given. NotFound when it is gone.
  Status DeleteObject(std::string_view path, std::optional<std::int64_t> grace_period_seconds);

  // Opens `command` in a container through the exec API over WebSocket, offering
  // v5.channel.k8s.io then v4.channel.k8s.io (docs/kubesim.md, "Exec"), with stdout, stderr
  // and, when `stdin`, standard input.
  Result<std::unique_ptr<net::WebSocket>> Exec(std::string_view ns, std::string_view pod,
                                               std::string_view container,
                                               const std::vector<std::string>& command,
                                               bool stdin,
                                               net::WebSocketOptions websocket = {});

  const KubeCredentials& credentials() const { return credentials_; }

 private:
  KubeClient(KubeCredentials credentials, KubeClientOptions options,
             std::unique_ptr<net::HttpClient> http);

  // Sends one request with the current token and returns the parsed 2xx body; any other
  // status becomes a short error built from the Kubernetes Status object. `http_status`
  // receives the status code when a reply came back.
  Result<json::value> Call(std::string method, std::string target, std::string content_type,
                           std::string body, int* http_status = nullptr);

  // One attempt at a complete listing; `restart` is set when the caller should start over.
  Result<NodeListInfo> ListNodesOnce(std::string_view label_selector, const NodePageVisitor& on_page,
                                     bool& restart);

  KubeCredentials credentials_;
  KubeClientOptions options_;
  std::unique_ptr<net::HttpClient> http_;
};

// Turns a non-2xx Kubernetes reply into an error: "403 Forbidden (reason Forbidden): nodes
// is forbidden: User ... cannot list ..." with the message cut to about 200 characters.
// The raw body is never included.
Status KubeErrorFromReply(std::string_view what, int http_status, std::string_view body);

}  // namespace uplink::kube
