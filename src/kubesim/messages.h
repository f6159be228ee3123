// How the simulator words API errors the way kube-apiserver does: Go-quoted values and the
// field errors of a 422 Invalid Status.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace uplink::kubesim {

// Go's %q for the printable ASCII names messages quote; other bytes are escaped, and only the
// first 300 bytes are quoted so that a hostile name cannot grow a message without bound.
std::string GoQuoted(std::string_view text);

// `parts` with `separator` between them, as Go's strings.Join.
std::string Join(const std::vector<std::string>& parts, std::string_view separator);

// One field the real API server's validation refuses, as one cause of a 422 Invalid Status.
struct FieldError {
  std::string field;    // "metadata.name"
  std::string reason;   // "FieldValueInvalid" or "FieldValueRequired"
  std::string message;  // "Invalid value: \"Foo\": a lowercase RFC 1123 subdomain must ..."
};

// An object that create refuses as the real server does with 422 Invalid.
struct InvalidObject {
  std::string group;  // of the kind; "" for the core group
  std::string kind;
  std::string name;
  std::vector<FieldError> causes;
  // apimachinery's message: `ConfigMap "Foo" is invalid: metadata.name: Invalid value: ...`.
  std::string Message() const;
};

}  // namespace uplink::kubesim
