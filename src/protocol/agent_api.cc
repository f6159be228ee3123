#include "protocol/agent_api.h"

#include <algorithm>

#include "common/crypto.h"

namespace uplink::protocol {
namespace {

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::string CommandResultPath(std::string_view command_id) {
  std::string path(kCommandsPathPrefix);
  path += command_id;
  path += kCommandResultSuffix;
  return path;
}

bool IsClusterUid(std::string_view uid) {
  return !uid.empty() && uid.size() <= kMaxClusterUidBytes &&
         std::all_of(uid.begin(), uid.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::string AgentUserAgent(std::string_view version, std::string_view role) {
  return "uplink-agent/" + std::string(version) + " (" + std::string(role) + ")";
}

std::string_view AgentVersionFromUserAgent(std::optional<std::string_view> user_agent) {
  constexpr std::string_view kProduct = "uplink-agent/";
  constexpr size_t kMaxVersionBytes = 64;
  if (!user_agent || !user_agent->starts_with(kProduct)) return "";
  std::string_view version = user_agent->substr(kProduct.size());
  version = version.substr(0, version.find(' '));
  bool plain = !version.empty() && version.size() <= kMaxVersionBytes &&
               std::all_of(version.begin(), version.end(), [](char c) {
                 return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                        (c >= 'A' && c <= 'Z') || c == '.' || c == '-' || c == '+' || c == '_';
               });
  return plain ? version : "";
}

bool IsStreamName(std::string_view name) {
  if (name.empty() || name.size() > kMaxStreamBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
           c == '_' || c == '/' || c == '-';
  });
}

bool IsSpoolId(std::string_view id) {
  return id.size() == kSpoolIdChars && std::all_of(id.begin(), id.end(), IsLowerHex);
}

bool IsPrefixedHexId(std::string_view id, std::string_view prefix, size_t hex_digits) {
  return id.size() == prefix.size() + hex_digits && id.starts_with(prefix) &&
         std::all_of(id.begin() + prefix.size(), id.end(), IsLowerHex);
}

std::string NewPrefixedHexId(std::string_view prefix, size_t hex_digits) {
  return std::string(prefix) + HexEncode(RandomBytes(hex_digits / 2));
}

bool IsCommandId(std::string_view id) {
  return IsPrefixedHexId(id, kCommandIdPrefix, kCommandIdHexDigits);
}

std::string NewCommandId() { return NewPrefixedHexId(kCommandIdPrefix, kCommandIdHexDigits); }

}  // namespace uplink::protocol
