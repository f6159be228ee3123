// meta.k8s.io/v1 Table responses, the server-side printing `kubectl get` asks for, with the
// columns kube-apiserver's printers produce.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"
#include "kubesim/store.h"

namespace uplink::kubesim {

// kubectl's age format (apimachinery duration.HumanDuration): "45s", "5m30s", "3h", "2d4h",
// "1y30d".
std::string HumanDuration(std::chrono::seconds age);

enum class IncludeObject { kNone, kMetadata, kObject };
// "None", "Metadata" (the default when empty) or "Object"; anything else is InvalidArgument.
Result<IncludeObject> ParseIncludeObject(std::string_view text);

// True if an Accept header asks for `application/json;as=Table;v=v1;g=meta.k8s.io`.
bool AcceptsTable(std::string_view accept);

// A Table for the objects (one per row); `list_metadata` becomes the Table's metadata
// (resourceVersion, continue, remainingItemCount).
json::object BuildTable(const ResourceType& type, const std::vector<json::object>& objects,
                        json::object list_metadata, IncludeObject include, WallTime now);

}  // namespace uplink::kubesim
