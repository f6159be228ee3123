// The identity area of the console's store: users, their API keys and sign-in sessions,
// two-factor credentials, and the console-wide settings admins change.
//
// Credentials are never stored: only their SHA-256 hash (argon2id for passwords) and a
// short, non-secret lookup prefix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "console/store/audit_store.h"

namespace uplink::console {

enum class Role { kAdmin, kMember };

struct User {
  std::string id;
  std::string email;  // stored lower-case; unique
  Role role = Role::kMember;
  // argon2id in libsodium's encoded form ("$argon2id$v=19$m=...,t=...,p=...$salt$hash"), or
  // empty for a user who can sign in only with an API key (the admin made by `init`).
  std::string password_hash;
  WallTime created_at;
  std::optional<WallTime> deactivated_at;  // a deactivated user's credentials all stop working
  // When the user proved a first two-factor code; none: no two-factor sign-in (read with the
  // user, so that authenticating a user is still one query).
  std::optional<WallTime> two_factor_enabled_at;
};

struct ApiKey {
  std::string id;
  std::string user_id;
  std::string name;           // the user's label for it, "ci", "laptop"
  std::string lookup_prefix;  // "uk_" + the first characters of the key; not secret
  std::string token_hash;     // lower-case hex SHA-256 of the whole key
  WallTime created_at;
  std::optional<WallTime> expires_at;  // none: until revoked
  std::optional<WallTime> revoked_at;
};

// A short-lived sign-in made by `uplink login` (email + password).
struct Session {
  std::string id;
  std::string user_id;
  std::string lookup_prefix;  // "skt_…"
  std::string token_hash;
  WallTime created_at;
  WallTime expires_at;
  // Set by a fresh password confirmation; until then the session may not create, rotate or
  // reveal credentials.
  std::optional<WallTime> confirmed_until;
  std::optional<WallTime> revoked_at;  // logout, password change, deactivation
};


// Two-factor sign-in (docs/security.md, "Two-factor sign-in"): a user's TOTP credential.
struct TwoFactorCredential {
  std::string user_id;
  // The TOTP secret sealed by the API (SecretBox, with the user id as context): the store
  // never sees it in the clear.
  std::string sealed_secret;
  WallTime created_at;                 // when enrolment began
  std::optional<WallTime> enabled_at;  // when the first code was proved; none: not yet
  // The TOTP step of the last code accepted: codes of this step or earlier never work again.
  std::int64_t last_used_step = 0;
  std::int64_t recovery_codes_left = 0;  // unused recovery codes
};

// A recovery code as stored: only its hash.
struct RecoveryCode {
  std::string id;         // assigned by the store
  std::string code_hash;  // lower-case hex SHA-256 of the canonical code
};

// The second factor a request proved, used up in the same transaction as what it allows:
// the TOTP step of an accepted code, or the recovery code that matched.
struct SecondFactorUse {
  std::optional<std::int64_t> totp_step;
  std::string recovery_code_id;  // empty for a TOTP code
};

// Console-wide settings that admins change (docs/api.md, "Settings").
struct ConsoleSettings {
  bool require_two_factor = false;
  std::optional<WallTime> updated_at;  // none: never changed
};

class IdentityStore {
 public:
  virtual ~IdentityStore() = default;

  // Conflict when the email is taken.
  virtual Status CreateUser(const User& user, const AuditEvent& audit) = 0;
  virtual Result<User> GetUser(const std::string& id) = 0;
  // NotFound when there is none; `email` is compared lower-cased.
  virtual Result<User> FindUserByEmail(const std::string& email) = 0;
  virtual Result<std::vector<User>> ListUsers() = 0;
  virtual Result<std::int64_t> CountUsers() = 0;
  // Sets or clears deactivated_at. Deactivating also revokes the user's sessions.
  virtual Status SetUserDeactivated(const std::string& id, std::optional<WallTime> at,
                                    const AuditEvent& audit) = 0;
  // Replaces the password hash and revokes every session of the user except `keep_session_id`
  // (empty: all).
  virtual Status SetPassword(const std::string& id, const std::string& password_hash,
                             const std::string& keep_session_id, WallTime at,
                             const AuditEvent& audit) = 0;

  virtual Status CreateApiKey(const ApiKey& key, const AuditEvent& audit) = 0;
  // Both or neither: `init` must never leave a user whose only key was lost.
  virtual Status CreateUserWithApiKey(const User& user, const ApiKey& key,
                                      const AuditEvent& audit) = 0;
  virtual Result<ApiKey> GetApiKey(const std::string& id) = 0;
  virtual Result<std::vector<ApiKey>> ListApiKeys(const std::string& user_id) = 0;
  // Every key with this lookup prefix (normally one; prefixes are not unique by design).
  virtual Result<std::vector<ApiKey>> FindApiKeysByPrefix(const std::string& prefix) = 0;
  // Sets revoked_at unless already set.
  virtual Status RevokeApiKey(const std::string& id, WallTime at, const AuditEvent& audit) = 0;

  virtual Status CreateSession(const Session& session, const AuditEvent& audit) = 0;
  virtual Result<std::vector<Session>> FindSessionsByPrefix(const std::string& prefix) = 0;
  virtual Status ConfirmSession(const std::string& id, WallTime until,
                                const AuditEvent& audit) = 0;
  // Sets revoked_at unless already set.
  virtual Status RevokeSession(const std::string& id, WallTime at, const AuditEvent& audit) = 0;

  // Two-factor sign-in. Using up a second factor fails with FailedPrecondition, writing
  // nothing, when its TOTP step is not after the last one used (a replay, or a code raced by
  // another request) or its recovery code was used meanwhile. Using a recovery code also
  // writes an audit event "two_factor.recovery_code_used" (like `audit`, with
  // {"for": audit.action, "recovery_codes_left": N} as its detail).

  // Nullopt for a user who never began enrolment (or whose two-factor was turned off).
  virtual Result<std::optional<TwoFactorCredential>> GetTwoFactor(const std::string& user_id) = 0;
  virtual Result<std::vector<RecoveryCode>> ListUnusedRecoveryCodes(
      const std::string& user_id) = 0;
  // Begins (or begins again) enrolment with a new sealed secret. FailedPrecondition when the
  // user's two-factor is already enabled.
  virtual Status BeginTwoFactor(const TwoFactorCredential& pending, const AuditEvent& audit) = 0;
  // Enables the pending credential: the code of `step` was proved, and `codes` become the
  // user's recovery codes. FailedPrecondition when there is nothing pending (never begun,
  // already enabled, or turned off meanwhile).
  virtual Status EnableTwoFactor(const std::string& user_id, std::int64_t step,
                                 const std::vector<RecoveryCode>& codes,
                                 const AuditEvent& audit) = 0;
  // Turns two-factor off and forgets the secret and recovery codes, using up `use` first
  // (none: an admin's reset). NotFound when the user has no two-factor credential.
  virtual Status DisableTwoFactor(const std::string& user_id,
                                  const std::optional<SecondFactorUse>& use,
                                  const AuditEvent& audit) = 0;
  // Uses up `use`, then replaces every recovery code of the user with `codes`.
  virtual Status ReplaceRecoveryCodes(const std::string& user_id, const SecondFactorUse& use,
                                      const std::vector<RecoveryCode>& codes,
                                      const AuditEvent& audit) = 0;
  // CreateSession for a password sign-in that also proved `use`, which it uses up.
  virtual Status CreateSessionWithSecondFactor(const Session& session, const SecondFactorUse& use,
                                               const AuditEvent& audit) = 0;

  virtual Result<ConsoleSettings> GetConsoleSettings() = 0;
  // Replaces the settings (updated_at from `audit.at`), writing `audit`.
  virtual Status SetConsoleSettings(const ConsoleSettings& settings, const AuditEvent& audit) = 0;
};

}  // namespace uplink::console
