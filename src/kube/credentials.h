// How uplink reaches a Kubernetes API server: from a kubeconfig file or from the pod's
// service account. Only static credentials are accepted; a kubeconfig that asks to run a
// program (exec, auth-provider) is refused, because executing plugins named in a kubeconfig
// is a known way around read-only access.
#pragma once

#include <optional>
#include <string>

#include "common/flags.h"
#include "common/secret.h"
#include "common/status.h"

namespace uplink::kube {

// A Kubernetes bearer token. A type of its own, not a Secret and not convertible to one, so
// that it cannot be handed to anything that talks to the console: the only way to its bytes
// is the Authorization header value for the API server.
class KubeBearerToken {
 public:
  explicit KubeBearerToken(Secret token) : token_(std::move(token)) {}
  // "Bearer <token>"; for the Kubernetes API server's Authorization header only.
  std::string AuthorizationHeaderValue() const { return "Bearer " + token_.Reveal(); }
  bool empty() const { return token_.empty(); }

 private:
  Secret token_;
};

struct KubeCredentials {
  std::string server;  // https://host:port[/path]
  // Trust for the API server's certificate (PEM inline or a file); neither: system store.
  std::string ca_pem;
  std::string ca_file;
  std::string client_cert_pem;
  std::string client_key_pem;
  // A token given inline (kubeconfig `token`), or a file re-read before every request
  // (`tokenFile`, or the projected service-account token, which the kubelet rotates).
  std::optional<KubeBearerToken> token;
  std::string token_file;
  // The namespace of the kubeconfig context or of the service account; may be empty.
  std::string default_namespace;
  // Where these came from, for messages: "kubeconfig /x (context prod)" or "in-cluster".
  std::string origin;

  // The token to send now: the inline one, or the token file's current content. Nothing to
  // send (client-certificate auth) is nullopt; an unreadable or empty file is an error.
  Result<std::optional<KubeBearerToken>> CurrentToken() const;
};

// Loads credentials from a kubeconfig. `context` empty means current-context. Relative
// file paths are resolved against the kubeconfig's directory, as kubectl does.
Result<KubeCredentials> LoadKubeconfig(const std::string& path, const std::string& context = "");

// Parses kubeconfig text (the same rules; `directory` resolves relative paths).
Result<KubeCredentials> ParseKubeconfig(std::string_view text, const std::string& directory,
                                        const std::string& context = "");

struct InClusterPaths {
  std::string token = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_cert = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

// The pod's service account: KUBERNETES_SERVICE_HOST/PORT and the mounted token, CA and
// namespace files. Fails with a clear message when not running in a pod.
Result<KubeCredentials> LoadInCluster(const EnvLookup& env = ProcessEnv(),
                                      const InClusterPaths& paths = {});

}  // namespace uplink::kube
