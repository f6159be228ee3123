#include "kubesim/authn.h"

#include <unordered_set>

#include "common/crypto.h"

namespace uplink::kubesim {
namespace {

// One CSV record (encoding/csv with TrimLeadingSpace): fields split on commas, a field that
// starts with a quote runs to the closing quote with "" standing for one quote.
Result<std::vector<std::string>> ParseCsvLine(std::string_view line) {
  std::vector<std::string> fields;
  size_t i = 0;
  while (true) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::string field;
    if (i < line.size() && line[i] == '"') {
      ++i;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          closed = true;
          ++i;
          break;
        }
        field += line[i++];
      }
      if (!closed) return InvalidArgumentError("a quoted field is not closed");
      if (i < line.size() && line[i] != ',') {
        return InvalidArgumentError("extraneous or missing \" in quoted-field");
      }
    } else {
      size_t comma = line.find(',', i);
      std::string_view raw = line.substr(i, comma == std::string_view::npos ? comma : comma - i);
      if (raw.find('"') != std::string_view::npos) {
        return InvalidArgumentError("bare \" in non-quoted-field");
      }
      field = std::string(raw);
      i += raw.size();
    }
    fields.push_back(std::move(field));
    if (i >= line.size()) return fields;
    ++i;  // the comma
  }
}

bool IsHeaderSafeToken(std::string_view token) {
  for (char c : token) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) return false;
  }
  return true;
}

bool HasControlCharacters(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

}  // namespace

Result<std::vector<TokenUser>> ParseTokenAuthFile(std::string_view text) {
  if (text.size() > kMaxTokenFileBytes) {
    return InvalidArgumentError("the token file is larger than " +
                                std::to_string(kMaxTokenFileBytes) + " bytes");
  }
  std::vector<TokenUser> users;
  std::unordered_set<std::string> token_digests;
  size_t line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    std::string where = "token file line " + std::to_string(line_number) + ": ";
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (line.find('\0') != std::string_view::npos) {
      return InvalidArgumentError(where + "holds a NUL byte");
    }
    if (users.size() >= kMaxTokenFileEntries) {
      return InvalidArgumentError("the token file has more than " +
                                  std::to_string(kMaxTokenFileEntries) + " entries");
    }
    Result<std::vector<std::string>> fields = ParseCsvLine(line);
    if (!fields.ok()) return InvalidArgumentError(where + fields.status().message());
    if (fields->size() < 3) {
      return InvalidArgumentError(where + "must have at least 3 columns (token, user name, "
                                          "user uid), found " + std::to_string(fields->size()));
    }
    std::string& token = (*fields)[0];
    if (token.empty()) return InvalidArgumentError(where + "the token is empty");
    if (token.size() > kMaxTokenBytes) {
      return InvalidArgumentError(where + "the token is longer than " +
                                  std::to_string(kMaxTokenBytes) + " bytes");
    }
    if (!IsHeaderSafeToken(token)) {
      return InvalidArgumentError(where + "the token holds characters a bearer token cannot");
    }
    // Digests rather than tokens, so that no unwiped copy of a token outlives the parse.
    if (!token_digests.insert(Sha256Hex(token)).second) {
      return InvalidArgumentError(where + "the token repeats an earlier line's");
    }
    TokenUser entry{Secret(std::move(token)), (*fields)[2], UserInfo{(*fields)[1], {}}};
    UserInfo& user = entry.user;
    if (user.name.empty()) return InvalidArgumentError(where + "the user name is empty");
    if (HasControlCharacters(user.name) || HasControlCharacters(entry.uid)) {
      return InvalidArgumentError(where + "the user name or uid holds control characters");
    }
    if (fields->size() >= 4) {
      std::string_view groups = (*fields)[3];
      size_t group_start = 0;
      while (group_start <= groups.size()) {
        size_t comma = groups.find(',', group_start);
        if (comma == std::string_view::npos) comma = groups.size();
        std::string_view group = groups.substr(group_start, comma - group_start);
        group_start = comma + 1;
        if (group.empty()) continue;
        if (HasControlCharacters(group)) {
          return InvalidArgumentError(where + "a group holds control characters");
        }
        user.groups.emplace_back(group);
      }
    }
    if (user.name.starts_with(kServiceAccountPrefix)) {
      std::string_view rest = std::string_view(user.name).substr(kServiceAccountPrefix.size());
      size_t colon = rest.find(':');
      if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size() ||
          rest.find(':', colon + 1) != std::string_view::npos) {
        return InvalidArgumentError(where + "a service account user must be "
                                            "system:serviceaccount:<namespace>:<name>");
      }
      user.groups.emplace_back("system:serviceaccounts");
      user.groups.push_back("system:serviceaccounts:" + std::string(rest.substr(0, colon)));
    }
    user.groups.emplace_back(kAuthenticatedGroup);
    users.push_back(std::move(entry));
  }
  return users;
}

Status CheckAdminTokenUnique(const Secret& admin_token, const std::vector<TokenUser>& users) {
  for (const TokenUser& user : users) {
    if (user.token.Equals(admin_token)) {
      return InvalidArgumentError("the token of user \"" + user.user.name.substr(0, 253) +
                                  "\" in the token file is the admin token");
    }
  }
  return Status::Ok();
}

TokenAuthenticator::TokenAuthenticator(Secret admin_token, std::vector<TokenUser> users) {
  users_.push_back(
      TokenUser{std::move(admin_token), "",
                UserInfo{std::string(kAdminUser),
                         {std::string(kMastersGroup), std::string(kAuthenticatedGroup)}}});
  for (TokenUser& user : users) users_.push_back(std::move(user));
}

std::optional<UserInfo> TokenAuthenticator::Authenticate(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (!authorization.starts_with(kBearer)) return std::nullopt;
  std::string_view presented = authorization.substr(kBearer.size());
  const TokenUser* found = nullptr;
  for (const TokenUser& user : users_) {
    // No early exit: every token costs the same whichever one matches.
    if (ConstantTimeEquals(presented, user.token.Reveal()) && !found) found = &user;
  }
  if (!found) return std::nullopt;
  return found->user;
}

}  // namespace uplink::kubesim
