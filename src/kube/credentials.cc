#include "kube/credentials.h"

#include "common/crypto.h"
#include "common/files.h"
#include "common/json.h"
#include "common/yaml.h"
#include "net/client.h"
#include "net/server.h"

namespace uplink::kube {
namespace {

constexpr size_t kMaxKubeconfigBytes = 1 << 20;
constexpr size_t kMaxTokenBytes = 64 * 1024;
constexpr size_t kMaxPemBytes = 1 << 20;

// The entry called `name` in a kubeconfig list ("clusters", "users", "contexts"), returning
// its `field` object ("cluster", "user", "context").
Result<const json::object*> FindNamed(const json::object& config, std::string_view list,
                                      const std::string& name, std::string_view field) {
  const json::value* entries = config.if_contains(list);
  if (entries == nullptr || !entries->is_array()) {
    return InvalidArgumentError("kubeconfig has no '" + std::string(list) + "' list");
  }
  for (const json::value& entry : entries->get_array()) {
    const json::object* object = entry.if_object();
    if (object == nullptr) continue;
    const json::value* entry_name = object->if_contains("name");
    if (entry_name == nullptr || !entry_name->is_string() || entry_name->get_string() != name) {
      continue;
    }
    const json::value* body = object->if_contains(field);
    if (body == nullptr || !body->is_object()) {
      return InvalidArgumentError("kubeconfig " + std::string(list) + " entry '" + name +
                                  "' has no '" + std::string(field) + "' object");
    }
    return &body->get_object();
  }
  return InvalidArgumentError("kubeconfig has no " + std::string(list) + " entry named '" + name +
                              "'");
}

// An optional string field; present but not a string is an error.
Result<std::string> StringField(const json::object& object, std::string_view key,
                                std::string_view where) {
  const json::value* value = object.if_contains(key);
  if (value == nullptr || value->is_null()) return std::string();
  if (!value->is_string()) {
    return InvalidArgumentError("kubeconfig " + std::string(where) + "." + std::string(key) +
                                " must be a string");
  }
  return std::string(value->get_string());
}

std::string ResolvePath(const std::string& directory, const std::string& path) {
  if (path.empty() || path.front() == '/' || directory.empty()) return path;
  return directory + "/" + path;
}

// PEM material given either inline as base64 (`<key>-data`) or as a file (`<key>`).
Result<std::string> PemField(const json::object& object, const std::string& key,
                             std::string_view where, const std::string& directory) {
  UPLINK_ASSIGN_OR_RETURN(std::string data, StringField(object, key + "-data", where));
  UPLINK_ASSIGN_OR_RETURN(std::string file, StringField(object, key, where));
  if (!data.empty() && !file.empty()) {
    return InvalidArgumentError("kubeconfig " + std::string(where) + " sets both " + key +
                                " and " + key + "-data; keep one");
  }
  if (!data.empty()) {
    auto decoded = Base64Decode(data);
    if (!decoded.ok()) {
      return InvalidArgumentError("kubeconfig " + std::string(where) + "." + key +
                                  "-data is not valid base64");
    }
    return std::move(decoded).value();
  }
  if (!file.empty()) {
    std::string resolved = ResolvePath(directory, file);
    auto pem = ReadFileBounded(resolved, kMaxPemBytes);
    if (!pem.ok()) return pem.status().WithContext("kubeconfig " + std::string(where) + "." + key);
    return std::move(pem).value();
  }
  return std::string();
}

// The API server URL: https, or http only on a loopback host (a bearer token must not cross
// a network in clear text).
Status CheckServerUrl(const std::string& server, std::string_view where) {
  if (server.empty()) {
    return InvalidArgumentError(std::string(where) + " has no server URL");
  }
  // The URL is never quoted: it may carry a credential (user:password@, ?token=...).
  auto url = net::ParseBaseUrl(server);
  if (!url.ok()) {
    return InvalidArgumentError(std::string(where) + " server is not a valid URL: " +
                                url.status().message());
  }
  if (url->scheme == "http" && !net::IsLoopbackHost(url->host)) {
    std::string host = url->host.find(':') != std::string::npos ? "[" + url->host + "]" : url->host;
    return InvalidArgumentError(std::string(where) + " server http://" + host + ":" +
                                std::to_string(url->port) +
                                " uses plain http; only https is accepted (http only on loopback)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::optional<KubeBearerToken>> KubeCredentials::CurrentToken() const {
  if (!token_file.empty()) {
    auto content = ReadFileBounded(token_file, kMaxTokenBytes);
    if (!content.ok()) {
      return content.status().WithContext("reading the Kubernetes token file");
    }
    std::string_view trimmed = TrimWhitespace(*content);
    if (trimmed.empty()) {
      return UnauthenticatedError("the Kubernetes token file " + token_file + " is empty");
    }
    return std::optional<KubeBearerToken>(KubeBearerToken(Secret(std::string(trimmed))));
  }
  return token;
}

Result<KubeCredentials> ParseKubeconfig(std::string_view text, const std::string& directory,
                                        const std::string& context) {
  auto parsed = ParseYaml(text);
  if (!parsed.ok()) return parsed.status().WithContext("kubeconfig is not valid YAML");
  if (!parsed->is_object()) return InvalidArgumentError("kubeconfig is not a YAML mapping");
  const json::object& config = parsed->get_object();

  std::string context_name = context;
  if (context_name.empty()) {
    UPLINK_ASSIGN_OR_RETURN(context_name, StringField(config, "current-context", "top level"));
    if (context_name.empty()) {
      return InvalidArgumentError("kubeconfig has no current-context; set one (kubectl config "
                                  "use-context NAME)");
    }
  }
  UPLINK_ASSIGN_OR_RETURN(const json::object* ctx,
                          FindNamed(config, "contexts", context_name, "context"));
  std::string ctx_where = "context '" + context_name + "'";
  UPLINK_ASSIGN_OR_RETURN(std::string cluster_name, StringField(*ctx, "cluster", ctx_where));
  UPLINK_ASSIGN_OR_RETURN(std::string user_name, StringField(*ctx, "user", ctx_where));
  if (cluster_name.empty()) return InvalidArgumentError("kubeconfig " + ctx_where + " names no cluster");
  if (user_name.empty()) return InvalidArgumentError("kubeconfig " + ctx_where + " names no user");

  KubeCredentials creds;
  creds.origin = "kubeconfig (" + ctx_where + ")";
  UPLINK_ASSIGN_OR_RETURN(creds.default_namespace, StringField(*ctx, "namespace", ctx_where));

  UPLINK_ASSIGN_OR_RETURN(const json::object* cluster,
                          FindNamed(config, "clusters", cluster_name, "cluster"));
  std::string cluster_where = "cluster '" + cluster_name + "'";
  if (const json::value* insecure = cluster->if_contains("insecure-skip-tls-verify");
      insecure != nullptr && !(insecure->is_bool() && !insecure->get_bool()) &&
      !insecure->is_null()) {
    return InvalidArgumentError("kubeconfig " + cluster_where +
                                " sets insecure-skip-tls-verify; uplink always verifies the API "
                                "server's certificate (set certificate-authority-data instead)");
  }
  for (std::string_view unsupported : {"proxy-url", "tls-server-name"}) {
    if (cluster->contains(unsupported)) {
      return InvalidArgumentError("kubeconfig " + cluster_where + " sets " +
                                  std::string(unsupported) + ", which uplink does not support");
    }
  }
  UPLINK_ASSIGN_OR_RETURN(creds.server, StringField(*cluster, "server", cluster_where));
  UPLINK_RETURN_IF_ERROR(CheckServerUrl(creds.server, "kubeconfig " + cluster_where));
  UPLINK_ASSIGN_OR_RETURN(creds.ca_pem,
                          PemField(*cluster, "certificate-authority", cluster_where, directory));

  UPLINK_ASSIGN_OR_RETURN(const json::object* user, FindNamed(config, "users", user_name, "user"));
  std::string user_where = "user '" + user_name + "'";
  if (user->contains("exec")) {
    return InvalidArgumentError("kubeconfig " + user_where +
                                " uses an exec credential plugin; uplink never runs programs "
                                "named in a kubeconfig (use a token, tokenFile or client "
                                "certificate)");
  }
  if (user->contains("auth-provider")) {
    return InvalidArgumentError("kubeconfig " + user_where +
                                " uses an auth-provider plugin; uplink accepts only a token, "
                                "tokenFile or client certificate");
  }
  for (std::string_view impersonation : {"as", "as-uid", "as-groups", "as-user-extra"}) {
    if (user->contains(impersonation)) {
      return InvalidArgumentError("kubeconfig " + user_where + " sets '" +
                                  std::string(impersonation) +
                                  "' (impersonation); uplink uses its credential as it is");
    }
  }
  if (user->contains("username") || user->contains("password")) {
    return InvalidArgumentError("kubeconfig " + user_where +
                                " uses basic authentication, which uplink does not support");
  }
  UPLINK_ASSIGN_OR_RETURN(std::string token, StringField(*user, "token", user_where));
  UPLINK_ASSIGN_OR_RETURN(std::string token_file, StringField(*user, "tokenFile", user_where));
  if (!token.empty() && !token_file.empty()) {
    return InvalidArgumentError("kubeconfig " + user_where + " sets both token and tokenFile; "
                                "keep one");
  }
  if (!token.empty()) creds.token = KubeBearerToken(Secret(std::move(token)));
  creds.token_file = ResolvePath(directory, token_file);
  UPLINK_ASSIGN_OR_RETURN(creds.client_cert_pem,
                          PemField(*user, "client-certificate", user_where, directory));
  UPLINK_ASSIGN_OR_RETURN(creds.client_key_pem, PemField(*user, "client-key", user_where, directory));
  if (creds.client_cert_pem.empty() != creds.client_key_pem.empty()) {
    return InvalidArgumentError("kubeconfig " + user_where +
                                " needs both client-certificate and client-key, or neither");
  }
  if (!creds.token && creds.token_file.empty() && creds.client_cert_pem.empty()) {
    return InvalidArgumentError("kubeconfig " + user_where +
                                " has no credential (token, tokenFile or client-certificate)");
  }
  return creds;
}

Result<KubeCredentials> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = ReadFileBounded(path, kMaxKubeconfigBytes);
  if (!text.ok()) return text.status().WithContext("reading kubeconfig");
  std::string directory;
  if (auto slash = path.rfind('/'); slash != std::string::npos) {
    directory = slash == 0 ? "/" : path.substr(0, slash);
  }
  auto creds = ParseKubeconfig(*text, directory, context);
  if (!creds.ok()) return creds.status().WithContext(path);
  creds->origin = "kubeconfig " + path;
  return creds;
}

Result<KubeCredentials> LoadInCluster(const EnvLookup& env, const InClusterPaths& paths) {
  const char* host = env("KUBERNETES_SERVICE_HOST");
  const char* port = env("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return FailedPreconditionError(
        "not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
        "are not set); pass --kubeconfig FILE");
  }
  KubeCredentials creds;
  creds.origin = "in-cluster service account";
  std::string host_text = host;
  if (host_text.find(':') != std::string::npos) host_text = "[" + host_text + "]";  // IPv6
  creds.server = "https://" + host_text + ":" + port;
  UPLINK_RETURN_IF_ERROR(CheckServerUrl(creds.server, "in-cluster configuration"));
  creds.token_file = paths.token;
  // Fail early with a clear message if the token or CA is not mounted (automount disabled).
  UPLINK_RETURN_IF_ERROR(creds.CurrentToken().status());
  auto ca = ReadFileBounded(paths.ca_cert, kMaxPemBytes);
  if (!ca.ok()) return ca.status().WithContext("reading the service-account CA certificate");
  creds.ca_pem = std::move(ca).value();
  auto ns = ReadFileBounded(paths.namespace_file, 4096);
  if (ns.ok()) creds.default_namespace = std::string(TrimWhitespace(*ns));
  return creds;
}

}  // namespace uplink::kube
