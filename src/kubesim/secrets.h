// Secrets as kube-apiserver decodes, converts and validates them.
//
// Secret values are credentials: nothing here puts a data or stringData value (or its base64)
// into an error message. Keys may appear (the real server names them too); values never do.
// Type-specific rules (kubernetes.io/tls needs tls.crt, ...) are not enforced: the simulator's
// users create Opaque Secrets.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "kubesim/store.h"

namespace uplink::kubesim {

// core.MaxSecretSize: the most bytes a Secret's values may hold together.
inline constexpr size_t kMaxSecretBytes = 1 << 20;

// Go's base64.StdEncoding.DecodeString, which decodes `[]byte` fields from JSON: padding is
// required, '\r' and '\n' are skipped, and an error names the offending offset exactly as Go's
// CorruptInputError does ("illegal base64 data at input byte 4").
Result<std::string> DecodeBase64LikeGo(std::string_view text);

// What decoding and conversion do to a Secret before validation: data values are
// base64-decoded and stored re-encoded canonically, stringData is merged into data (its
// entries win) and dropped, and a missing or empty type becomes "Opaque". A field of the wrong
// JSON type or undecodable base64 is InvalidArgument with the Go decoder's message, e.g.
// "json: cannot unmarshal number into Go struct field Secret.data of type []uint8".
Status ConvertSecret(json::object& secret);

// ValidateSecret's data rules for a converted Secret: every key a valid config key (causes on
// "data[KEY]"), and at most kMaxSecretBytes of values in total (a FieldValueTooLong cause on
// "data").
std::vector<FieldError> ValidateSecretData(const json::object& secret);

// ValidateSecretUpdate's rules beyond ValidateSecret: an immutable Secret keeps its data and
// stays immutable, and type never changes.
std::vector<FieldError> ValidateSecretUpdate(const json::object& updated,
                                             const json::object& current);

}  // namespace uplink::kubesim
