// How an agent names its cluster on every call to the console (docs/protocol.md, "Cluster
// identity"): the metadata.uid of the kube-system Namespace, in a header, so that the same
// check covers every route without touching any body. Shared by the agent and the console.
#pragma once

#include <algorithm>
#include <string_view>

namespace uplink {

inline constexpr std::string_view kClusterUidHeader = "Uplink-Cluster-UID";
inline constexpr size_t kMaxClusterUidBytes = 128;

// 1-128 printable ASCII characters without spaces: what a Kubernetes UID is, and what a
// header can carry unchanged.
inline bool IsClusterUid(std::string_view uid) {
  return !uid.empty() && uid.size() <= kMaxClusterUidBytes &&
         std::all_of(uid.begin(), uid.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace uplink
