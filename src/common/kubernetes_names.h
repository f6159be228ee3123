// Kubernetes object names as the API server validates them (apimachinery's IsDNS1123Label and
// IsDNS1123Subdomain): one implementation for the agent, the console, the CLI, the kubectl
// guard and the simulator, so that none of them accepts a name the API server refuses, or
// refuses one it takes.
#pragma once

#include <cstddef>
#include <string_view>

namespace uplink {

inline constexpr size_t kMaxDnsLabelBytes = 63;
inline constexpr size_t kMaxDnsSubdomainBytes = 253;

// An RFC 1123 label (namespaces, container names, Service names): 1-63 characters of a-z,
// 0-9 and '-', starting and ending with a letter or digit.
bool IsDnsLabel(std::string_view text);

// An RFC 1123 subdomain (most object names, Secret names, a label key's prefix): at most 253
// characters, dot-separated parts that each follow the label rule except its length (the API
// server bounds only the whole name).
bool IsDnsSubdomain(std::string_view text);

}  // namespace uplink
