// The simulator's HTTP API: authentication, authorization, discovery, OpenAPI v3, /version
// and the resource endpoints kubectl and the uplink agent use (including pods/log and
// metrics.k8s.io), answering errors with real `Status` objects.
//
// Authentication takes the admin token (system:masters) and the identities of a token file.
// Authorization is AlwaysAllow unless `rbac` is set: then every request of an identity
// outside system:masters is decided by the RBAC objects in the store, and refused with the
// real server's 403. Impersonation headers (Impersonate-User, Impersonate-Group) are honoured
// when the requester may impersonate, as on a real server; Impersonate-Uid and
// Impersonate-Extra-* are refused.
//
// Everything here works on net::Request/Response values, so tests can drive it without a
// socket. Strategic merge patches are applied as JSON merge patches (RFC 7386): for the
// fields kubectl cordon/uncordon/label/annotate touch (scalars and string maps) the two are
// the same; patches using strategic-merge directives ("$patch", "$setElementOrder/...")
// are refused with 415 rather than misapplied.
//
// Bodies are never logged, and no error quotes a body: Secrets travel in them.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/json.h"
#include "common/metrics.h"
#include "common/secret.h"
#include "common/time.h"
#include "kubesim/admission.h"
#include "kubesim/authn.h"
#include "kubesim/openapi.h"
#include "kubesim/rbac.h"
#include "kubesim/store.h"
#include "kubesim/watch.h"
#include "net/router.h"

namespace uplink::kubesim {

class Kubelet;  // kubesim/kubelet.h

struct ApiOptions {
  Secret token;  // the admin bearer token; anonymous clients get only /version and health
  std::string server_version = "v1.32.4";
  // kube-apiserver's MaxRequestBodyBytes: larger bodies get 413 RequestEntityTooLarge.
  size_t max_body_bytes = 3 << 20;
  std::vector<TokenUser> users;  // further identities (--token-auth-file)
  bool rbac = false;             // --authorization-mode=RBAC
  // Runs created pods and serves pods/exec; without one, pods are only stored.
  Kubelet* kubelet = nullptr;
};

// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",...} as JSON text.
net::Response StatusResponse(int code, std::string_view reason, std::string_view message);
// The Status response for a store error: NotFound 404, AlreadyExists 409, Conflict 409,
// InvalidArgument 400 BadRequest, PermissionDenied 403 Forbidden, ResourceExhausted 413
// RequestEntityTooLarge, anything else 500 InternalError.
net::Response ErrorResponse(const Status& status);

class ApiServer {
 public:
  // `store` and `clock` must outlive the ApiServer.
  ApiServer(ApiOptions options, ObjectStore& store, Clock& clock);
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Authenticates, dispatches and counts one request.
  void Handle(net::Request request, net::Reply reply) const;
  // What HttpServer takes; the ApiServer must outlive the server.
  net::RequestHandler AsHandler() const;
  // Synchronous form for tests.
  net::Response HandleForTesting(net::Request request) const;

 private:
  void AddRoutes();
  void AddDiscoveryRoutes();
  // The identity a request acts as: its own, or the one it impersonates when allowed (an
  // error response otherwise).
  std::optional<net::Response> Impersonate(const net::Request& request, UserInfo& user) const;
  // The 403 for a request RBAC does not allow; nothing when it may go ahead.
  std::optional<net::Response> Authorize(const UserInfo& user,
                                         const RequestAttributes& attributes) const;
  net::Response Version() const;
  net::Response OpenApiDocument(const net::Request& request, const std::string& path) const;
  net::Response ResourceRequest(const net::Request& request, std::string_view group,
                                std::string_view version, const net::PathParams& params) const;
  net::Response List(const net::Request& request, const ResourceType& type,
                     const std::optional<std::string>& namespace_name) const;
  net::Response Watch(const net::Request& request, const ResourceType& type,
                      const std::optional<std::string>& namespace_name) const;
  net::Response GetOne(const net::Request& request, const ResourceType& type,
                       const std::string& namespace_name, const std::string& name) const;
  net::Response Create(const net::Request& request, const ResourceType& type,
                       const std::string& namespace_name) const;
  net::Response Patch(const net::Request& request, const ResourceType& type,
                      const std::string& namespace_name, const std::string& name) const;
  net::Response Delete(const net::Request& request, const ResourceType& type,
                       const std::string& namespace_name, const std::string& name) const;
  net::Response PodLog(const net::Request& request, const std::string& namespace_name,
                       const std::string& name) const;
  // pods/exec: a WebSocket session in v5.channel.k8s.io or v4.channel.k8s.io.
  net::Response Exec(const net::Request& request, const std::string& namespace_name,
                     const std::string& name) const;
  // Whether this server version also asks for `create` on a WebSocket GET of pods/exec
  // (AuthorizePodWebsocketUpgradeCreatePermission, on from Kubernetes 1.35).
  bool ExecNeedsCreate() const;
  // metrics.k8s.io: computed rather than stored.
  net::Response MetricsRequest(const net::Request& request, const ResourceType& type,
                               const std::optional<std::string>& namespace_name,
                               const std::string& name) const;
  // ResourceExhausted ("Request entity too large: limit is N") for a body over the limit.
  Status CheckBodySize(const net::Request& request) const;
  Result<json::value> ParseBody(const net::Request& request) const;
  // The object a create request sends, as JSON or protobuf; the error response otherwise.
  std::variant<json::object, net::Response> ObjectBody(const net::Request& request) const;
  // POST selfsubjectaccessreviews and selfsubjectrulesreviews: what `user` may do.
  net::Response SelfSubjectReview(const net::Request& request, const UserInfo& user,
                                  const std::string& resource) const;

  ApiOptions options_;
  ObjectStore& store_;
  Clock& clock_;
  TokenAuthenticator authenticator_;
  Result<OpenApiDocuments> openapi_;
  mutable Admission admission_;
  mutable WatchHub watches_;
  net::Router router_;
  mutable metrics::Registry metrics_;
};

}  // namespace uplink::kubesim
