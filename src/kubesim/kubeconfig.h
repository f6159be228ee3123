// The kubeconfig uplink-kubesim writes for kubectl and the agent.
#pragma once

#include <string>

#include "common/secret.h"

namespace uplink::kubesim {

// A single-cluster kubeconfig (YAML) trusting `ca_pem` and presenting `token`. Strings are
// written as double-quoted scalars so any token survives.
std::string RenderKubeconfig(const std::string& server_url, const std::string& ca_pem,
                             const Secret& token);

}  // namespace uplink::kubesim
