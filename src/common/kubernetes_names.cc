#include "common/kubernetes_names.h"

namespace uplink {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// One part between dots: lower-case alphanumerics and '-', alphanumeric at both ends.
bool IsDnsPart(std::string_view part) {
  if (part.empty() || !IsLowerAlnum(part.front()) || !IsLowerAlnum(part.back())) return false;
  for (char c : part) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

}  // namespace

bool IsDnsLabel(std::string_view text) {
  return text.size() <= kMaxDnsLabelBytes && IsDnsPart(text);
}

bool IsDnsSubdomain(std::string_view text) {
  if (text.empty() || text.size() > kMaxDnsSubdomainBytes) return false;
  while (true) {
    size_t dot = text.find('.');
    if (!IsDnsPart(text.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    text.remove_prefix(dot + 1);
  }
}

}  // namespace uplink
