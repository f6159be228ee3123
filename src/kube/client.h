// A small Kubernetes API client for exactly what uplink needs: read a namespace, list nodes
// page by page, merge-patch a ConfigMap. It owns its HTTP connection and its credential;
// nothing else in uplink can reach either.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "kube/credentials.h"
#include "net/client.h"

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
