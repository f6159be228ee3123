#include "agent/experiments/redaction.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

#include "common/text.h"
#include "protocol/credentials.h"

namespace uplink::agent::experiments {
namespace {

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsLowerOrDigit(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// The key's words, lower-cased: split at anything not alphanumeric and at camelCase
// boundaries ("dbPassword" -> db, password; "HF_TOKEN" -> hf, token).
std::vector<std::string> Words(std::string_view key) {
  std::vector<std::string> words;
  std::string word;
  for (size_t i = 0; i < key.size(); ++i) {
    char c = key[i];
    if (!IsAlnum(c)) {
      if (!word.empty()) words.push_back(std::move(word)), word.clear();
      continue;
    }
    if (IsUpper(c) && !word.empty() && i > 0 && IsLowerOrDigit(key[i - 1])) {
      words.push_back(std::move(word)), word.clear();
    }
    word.push_back(AsciiLower(c));
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

constexpr std::array<std::string_view, 13> kSecretWords = {
    "password", "passwd",     "passphrase", "secret", "secrets",  "token",  "apikey",
    "authorization", "credential", "credentials", "bearer", "cookie", "privatekey"};

// Two words that name a secret together ("api key", "access key").
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kSecretPairs = {{
    {"api", "key"}, {"access", "key"}, {"private", "key"}, {"secret", "key"},
    {"session", "key"}, {"auth", "key"}}};

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.substr(0, prefix.size()) == prefix;
}

// Characters a token body is made of.
bool IsTokenChar(char c) { return IsAlnum(c) || c == '-' || c == '_'; }

// `value` is `prefix` followed by at least `min_body` token characters and nothing else.
bool PrefixedToken(std::string_view value, std::string_view prefix, size_t min_body) {
  if (!StartsWith(value, prefix)) return false;
  std::string_view body = value.substr(prefix.size());
  return body.size() >= min_body && std::all_of(body.begin(), body.end(), IsTokenChar);
}

bool IsBase64UrlChar(char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '='; }

// header.payload.signature, the first two base64url JSON objects ("eyJ").
bool LooksLikeJwt(std::string_view value) {
  if (!StartsWith(value, "eyJ")) return false;
  size_t dots = 0;
  for (char c : value) {
    if (c == '.') {
      ++dots;
    } else if (!IsBase64UrlChar(c)) {
      return false;
    }
  }
  return dots == 2 && value.size() >= 30;
}

// scheme://user:password@host: the part before '@' has a ':' in it.
bool UrlWithPassword(std::string_view value) {
  size_t scheme = value.find("://");
  if (scheme == std::string_view::npos) return false;
  std::string_view rest = value.substr(scheme + 3);
  size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return false;
  return authority.substr(0, at).find(':') != std::string_view::npos;
}

bool IsNumber(std::string_view value) {
  if (value.empty()) return false;
  size_t i = (value[0] == '-' || value[0] == '+') ? 1 : 0;
  bool digits = false;
  for (; i < value.size(); ++i) {
    char c = value[i];
    if (c >= '0' && c <= '9') {
      digits = true;
    } else if (c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+') {
      return false;
    }
  }
  return digits;
}

// Values that cannot hold a credential: empty, null, booleans, numbers.
bool CannotBeSecret(std::string_view value) {
  std::string lower;
  for (char c : value) lower.push_back(AsciiLower(c));
  if (lower.empty() || lower == "null" || lower == "none" || lower == "\"\"" || lower == "true" ||
      lower == "false") {
    return true;
  }
  return IsNumber(value);
}

}  // namespace

bool IsSecretKey(std::string_view key) {
  std::vector<std::string> words = Words(key);
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (std::find(kSecretWords.begin(), kSecretWords.end(), word) != kSecretWords.end()) {
      return true;
    }
    if (i + 1 < words.size()) {
      for (const auto& [first, second] : kSecretPairs) {
        if (word == first && words[i + 1] == second) return true;
      }
    }
  }
  return false;
}

bool LooksLikeCredential(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '"')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '"')) value.remove_suffix(1);
  if (StartsWithIgnoringAsciiCase(value, "bearer ") ||
      StartsWithIgnoringAsciiCase(value, "basic ")) {
    return value.size() > 12;
  }
  if (value.find("-----BEGIN") != std::string_view::npos &&
      value.find("PRIVATE KEY") != std::string_view::npos) {
    return true;
  }
  if (UrlWithPassword(value) || LooksLikeJwt(value)) return true;
  struct Prefix {
    std::string_view text;
    size_t min_body;
  };
  static constexpr Prefix kPrefixes[] = {
      {"sk-", 20},       {"hf_", 30},     {"ghp_", 30},  {"gho_", 30},  {"ghu_", 30},
      {"ghs_", 30},      {"ghr_", 30},    {"github_pat_", 30},          {"glpat-", 20},
      {"xoxb-", 20},     {"xoxp-", 20},   {"xoxa-", 20}, {"AKIA", 16},  {"ASIA", 16},
      {"AIza", 35},      {"wandb_v1_", 20}, {"local-", 40},
      // uplink's own credentials.
      {protocol::kAgentTokenPrefix, 20}, {protocol::kApiKeyPrefix, 20},
      {protocol::kSessionPrefix, 20},    {protocol::kHandoverCodePrefix, 20},
      {protocol::kExecutionCredentialPrefix, 20},
  };
  for (const Prefix& prefix : kPrefixes) {
    if (PrefixedToken(value, prefix.text, prefix.min_body)) return true;
  }
  return false;
}

bool MustRedact(std::string_view key, std::string_view value) {
  if (LooksLikeCredential(value)) return true;
  return IsSecretKey(key) && !CannotBeSecret(value);
}

}  // namespace uplink::agent::experiments
