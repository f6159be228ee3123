// Where the CLI's credential comes from, and the credentials file `uplink login` keeps.
//
// First found wins: --api-key-file F (UPLINK_API_KEY_FILE), the UPLINK_API_KEY variable, then
// the credentials file $XDG_CONFIG_HOME/uplink/credentials.json (~/.config/uplink/... without
// XDG_CONFIG_HOME). The file is written atomically with mode 0600 in a 0700 directory; like
// ssh with a private key, uplink refuses to use one that others may read or write. A stored
// credential belongs to the console it was issued by and is never sent to another.
#pragma once

#include <optional>
#include <string>

#include "common/flags.h"
#include "common/secret.h"
#include "common/status.h"
#include "common/time.h"
#include "protocol/credentials.h"

namespace uplink::cli {

using protocol::kApiKeyPrefix;
using protocol::kSessionPrefix;

enum class CredentialKind { kApiKey, kSession };
std::string_view CredentialKindName(CredentialKind kind);  // "api_key", "session"

// True for prefix + 1-512 base64url characters: what the console issues, and nothing that
// could break a header or a terminal.
bool LooksLikeToken(std::string_view text, std::string_view prefix);

// What the credentials file holds.
struct StoredCredential {
  std::string console;  // the console URL it was issued by
  Secret credential;    // uk_... or skt_...
  CredentialKind kind = CredentialKind::kApiKey;
  std::string expires_at;  // RFC 3339, or "" for none
  std::string email;
};

class CredentialsFile {
 public:
  explicit CredentialsFile(std::string path) : path_(std::move(path)) {}
  // $XDG_CONFIG_HOME/uplink/credentials.json, else $HOME/.config/uplink/credentials.json.
  static Result<CredentialsFile> Default(const EnvLookup& env);

  const std::string& path() const { return path_; }

  // nullopt when there is no file. Unauthenticated when the file may be read or written by
  // others, is not a regular file of this user, or does not hold a credential.
  Result<std::optional<StoredCredential>> Load() const;
  // Creates the directory (0700) if needed and replaces the file atomically (0600).
  Status Save(const StoredCredential& credential) const;
  // Removes the file; false if there was none.
  Result<bool> Remove() const;

 private:
  std::string path_;
};

// The credential a command uses, and where it came from (for messages; never the value).
struct Credential {
  Secret secret;
  CredentialKind kind = CredentialKind::kApiKey;
  std::string source;      // "--api-key-file /x", "UPLINK_API_KEY", "the credentials file ..."
  bool from_file = false;  // true: from the credentials file
  std::string console;     // the stored console, when from the file
};

// Finds the credential by the precedence above. `api_key_file` is the --api-key-file value
// (or UPLINK_API_KEY_FILE). Unauthenticated when there is none, when a stored session has
// expired by `clock`, or when a value is not a credential.
Result<Credential> FindCredential(const std::string& api_key_file, const EnvLookup& env,
                                  const Clock& clock);

}  // namespace uplink::cli
