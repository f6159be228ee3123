// The cluster's identity as the agent reads it from Kubernetes: the metadata.uid of the
// kube-system Namespace, which Kubernetes generates when the cluster is made and never changes.
// The inventory role reports it, and the inventory and cluster roles name it on every call to
// the console (docs/protocol.md, "Cluster identity").
#pragma once

#include <string>

#include "common/status.h"
#include "kube/client.h"

namespace uplink::agent {

Result<std::string> ReadKubeSystemUid(kube::KubeClient& kube);

}  // namespace uplink::agent
