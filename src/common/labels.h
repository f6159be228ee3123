// Kubernetes label selectors: parsing, validation and matching, as kube-apiserver and
// kubectl understand them (`-l`, `labelSelector=`).
//
//   gpu=true,zone in (a,b),!cordoned,tier!=batch,nvidia.com/gpu.count>4
//
// Requirements are ANDed. An empty selector matches everything. Keys and values are validated
// like k8s.io/apimachinery does, so a selector the real API server rejects is rejected here
// too, with a message that says which part is wrong.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace uplink::labels {

using LabelMap = std::map<std::string, std::string, std::less<>>;

enum class Operator {
  kEquals,        // a=b, a==b
  kNotEquals,     // a!=b (also matches objects without the label)
  kIn,            // a in (x,y)
  kNotIn,         // a notin (x) (also matches objects without the label)
  kExists,        // a
  kDoesNotExist,  // !a
  kGreaterThan,   // a>4 (integer comparison)
  kLessThan,      // a<4
};

struct Requirement {
  std::string key;
  Operator op = Operator::kExists;
  std::vector<std::string> values;  // sorted and unique for kIn/kNotIn; one for =, !=, <, >

  bool Matches(const LabelMap& labels) const;
  friend bool operator==(const Requirement&, const Requirement&) = default;
};

// Longer selectors are refused before parsing (a URL carries far less anyway).
inline constexpr size_t kMaxSelectorBytes = 64 * 1024;

class Selector {
 public:
  // The empty selector: matches everything.
  Selector() = default;

  // InvalidArgument for syntax errors and invalid keys or values; the message names the
  // offending token and its position.
  static Result<Selector> Parse(std::string_view text);

  bool Matches(const LabelMap& labels) const;
  bool empty() const { return requirements_.empty(); }
  const std::vector<Requirement>& requirements() const { return requirements_; }

  // Canonical form, e.g. "a=b,c in (x,y),!d".
  std::string ToString() const;

 private:
  std::vector<Requirement> requirements_;
};

// The GPU node selector installs default to: the label the NVIDIA GPU Operator sets.
inline constexpr std::string_view kDefaultGpuNodeSelector = "nvidia.com/gpu.present=true";

// The canonical form of a selector that chooses the nodes to report: InvalidArgument when it
// does not parse, or is empty (an empty selector would report every node).
Result<std::string> CanonicalNodeSelector(std::string_view text);

// "[prefix/]name": prefix a DNS-1123 subdomain of at most 253 characters, name at most 63
// alphanumerics, '-', '_' or '.', starting and ending alphanumeric.
Status ValidateLabelKey(std::string_view key);
// Empty, or at most 63 characters following the same rule as a key's name part.
Status ValidateLabelValue(std::string_view value);

}  // namespace uplink::labels
