// YAML to JSON values (kubeconfigs, Kubernetes object files). Plain scalars are typed by
// the YAML 1.2 core schema (null, true/false, integers, floats); quoted scalars stay strings.
#pragma once

#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"

namespace uplink {

// Every document in a multi-document stream ("---" separated); empty documents are skipped.
// Anchors and aliases are resolved; errors carry the line and column.
Result<std::vector<json::value>> ParseYamlDocuments(std::string_view text);

// Exactly one document.
Result<json::value> ParseYaml(std::string_view text);

}  // namespace uplink
