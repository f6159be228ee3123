// Every HTTP body and every kubeconfig or objects file passes through these parsers.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "common/yaml.h"
#include "fuzz_check.h"

namespace {

// Structural equality, with doubles allowed one ulp or so apart: Boost 1.81 parses decimal
// doubles fast but not always correctly rounded (precise parsing arrived in 1.83), so a
// value can move by an ulp through print-and-parse. Integers, strings and shape must match.
bool SameDocument(const uplink::json::value& a, const uplink::json::value& b) {
  if (a.is_double() && b.is_double()) {
    double x = a.get_double(), y = b.get_double();
    return x == y || std::fabs(x - y) <= 1e-15 * std::max(std::fabs(x), std::fabs(y));
  }
  if (a.kind() != b.kind()) return false;
  if (a.is_array()) {
    const auto &l = a.get_array(), &r = b.get_array();
    if (l.size() != r.size()) return false;
    for (size_t i = 0; i < l.size(); ++i) {
      if (!SameDocument(l[i], r[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    const auto &l = a.get_object(), &r = b.get_object();
    if (l.size() != r.size()) return false;
    for (const auto& field : l) {
      const auto* other = r.if_contains(field.key());
      if (other == nullptr || !SameDocument(field.value(), *other)) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto value = uplink::ParseJson(text);
  if (value.ok()) {
    // Serialising and parsing again gives the same document.
    auto again = uplink::ParseJson(uplink::ToJson(*value));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(SameDocument(*again, *value));
  }
  if (size <= 64 * 1024) (void)uplink::ParseYamlDocuments(text);
  return 0;
}
