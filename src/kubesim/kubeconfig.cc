#include "kubesim/kubeconfig.h"

#include "common/crypto.h"
#include "common/json.h"

namespace uplink::kubesim {

std::string RenderKubeconfig(const std::string& server_url, const std::string& ca_pem,
                             const Secret& token) {
  // A JSON string is a valid YAML double-quoted scalar.
  auto quoted = [](const std::string& text) { return ToJson(json::value(text)); };
  return "apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- name: uplink-kubesim\n"
         "  cluster:\n"
         "    server: " + quoted(server_url) + "\n"
         "    certificate-authority-data: " + Base64Encode(ca_pem) + "\n"
         "users:\n"
         "- name: uplink-kubesim\n"
         "  user:\n"
         "    token: " + quoted(token.Reveal()) + "\n"
         "contexts:\n"
         "- name: uplink-kubesim\n"
         "  context:\n"
         "    cluster: uplink-kubesim\n"
         "    user: uplink-kubesim\n"
         "current-context: uplink-kubesim\n";
}

}  // namespace uplink::kubesim
