// Pod Security admission as kube-apiserver runs it: the namespace's
// pod-security.kubernetes.io/{enforce,warn,audit}[-version] labels pick a level, and a pod is
// checked against every baseline and restricted rule, with the real messages
// (k8s.io/pod-security-admission/policy).
#pragma once

#include <string>

#include "common/json_fwd.h"

namespace uplink::kubesim {

enum class PodSecurityLevel { kPrivileged, kBaseline, kRestricted };

struct PodSecurityMode {
  PodSecurityLevel level = PodSecurityLevel::kPrivileged;
  std::string version = "latest";  // "latest" or "v1.30"
  // "restricted:latest", as messages name a policy.
  std::string ToString() const;
};

struct NamespacePodSecurity {
  PodSecurityMode enforce;
  PodSecurityMode warn;
  PodSecurityMode audit;
};

// The modes a namespace's labels set. As the real admission does, an unreadable level or
// version fails closed: restricted:latest.
NamespacePodSecurity PodSecurityFromLabels(const json::object& labels);

// What `pod` does that `mode` forbids, as the admission's aggregate detail: each reason with
// its detail in parentheses, joined by ", " in check order ("allowPrivilegeEscalation != false
// (container \"c\" must set securityContext.allowPrivilegeEscalation=false), ..."); empty when
// the pod complies.
std::string PodSecurityViolations(const PodSecurityMode& mode, const json::object& pod);

}  // namespace uplink::kubesim
