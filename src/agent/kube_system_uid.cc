#include "agent/kube_system_uid.h"

#include "protocol/agent_api.h"

namespace uplink::agent {

Result<std::string> ReadKubeSystemUid(kube::KubeClient& kube) {
  auto ns = kube.GetNamespace("kube-system");
  if (!ns.ok()) return ns.status().WithContext("reading the kube-system namespace UID");
  const json::value* uid = nullptr;
  if (const json::value* metadata = ns->get_object().if_contains("metadata");
      metadata != nullptr && metadata->is_object()) {
    uid = metadata->get_object().if_contains("uid");
  }
  if (uid == nullptr || !uid->is_string() || uid->get_string().empty()) {
    return InvalidArgumentError("the kube-system namespace has no metadata.uid");
  }
  if (!protocol::IsClusterUid(uid->get_string())) {
    return InvalidArgumentError("the kube-system namespace's metadata.uid is not 1-128 printable "
                                "characters without spaces");
  }
  return std::string(uid->get_string());
}

}  // namespace uplink::agent
