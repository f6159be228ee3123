// SqlStore's identity area (identity_store.h): users, API keys and sessions. Two-factor
// credentials and the console settings are in sql_two_factor.cc.

#include <string>

#include "common/text.h"
#include "console/store/sql_statement.h"
#include "console/store/sql_store.h"

namespace uplink::console {
namespace {

constexpr const char* kUserColumns =
    "id, email, role, password_hash, created_at, deactivated_at, "
    "(SELECT enabled_at FROM two_factor WHERE two_factor.user_id = users.id)";

constexpr const char* kApiKeyColumns =
    "id, user_id, name, lookup_prefix, token_hash, created_at, expires_at, revoked_at";

constexpr const char* kSessionColumns =
    "id, user_id, lookup_prefix, token_hash, created_at, expires_at, confirmed_until, "
    "revoked_at";

// What SQLite's lower() does without ICU, so that stored and queried emails agree.
std::string LowerAscii(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

std::string_view RoleName(Role role) { return role == Role::kAdmin ? "admin" : "member"; }

User UserFromRow(const auto& row) {
  User user;
  user.id = row.Text(0);
  user.email = row.Text(1);
  user.role = row.Text(2) == "admin" ? Role::kAdmin : Role::kMember;
  user.password_hash = row.Text(3);
  user.created_at = row.Time(4);
  user.deactivated_at = row.OptionalTime(5);
  user.two_factor_enabled_at = row.OptionalTime(6);
  return user;
}

ApiKey ApiKeyFromRow(const auto& row) {
  ApiKey key;
  key.id = row.Text(0);
  key.user_id = row.Text(1);
  key.name = row.Text(2);
  key.lookup_prefix = row.Text(3);
  key.token_hash = row.Text(4);
  key.created_at = row.Time(5);
  key.expires_at = row.OptionalTime(6);
  key.revoked_at = row.OptionalTime(7);
  return key;
}

Session SessionFromRow(const auto& row) {
  Session session;
  session.id = row.Text(0);
  session.user_id = row.Text(1);
  session.lookup_prefix = row.Text(2);
  session.token_hash = row.Text(3);
  session.created_at = row.Time(4);
  session.expires_at = row.Time(5);
  session.confirmed_until = row.OptionalTime(6);
  session.revoked_at = row.OptionalTime(7);
  return session;
}

}  // namespace

// --- Users ---------------------------------------------------------------------------------

Status SqlStore::InsertUser(const User& user) {
  std::string email = LowerAscii(user.email);
  auto inserted = Change(
      "INSERT INTO users (id, email, role, password_hash, created_at, deactivated_at) "
      "VALUES (?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(user.id).Bind(email).Bind(RoleName(user.role)).Bind(user.password_hash);
        s.Bind(user.created_at).Bind(user.deactivated_at);
      },
      "creating user");
  if (!inserted.ok() && db_->LastFailure() == sql::Failure::kUnique) {
    return ConflictError("the email " + OneLineExcerpt(email, 254) +
                         " is taken by another user; choose another email");
  }
  return inserted.status();
}

Status SqlStore::CreateUser(const User& user, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertUser(user));
    return InsertAudit(audit);
  });
}

Status SqlStore::CreateUserWithApiKey(const User& user, const ApiKey& key,
                                         const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertUser(user));
    UPLINK_RETURN_IF_ERROR(InsertApiKey(key));
    return InsertAudit(audit);
  });
}

Result<User> SqlStore::GetUser(const std::string& id) {
  static const std::string sql = SelectFrom(kUserColumns, "users WHERE id = ?");
  std::optional<User> user;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(id); },
      [&](const Statement& row) { user = UserFromRow(row); }, "reading user"));
  if (!user) return NotFoundError("user " + id + " does not exist");
  return std::move(*user);
}

Result<User> SqlStore::FindUserByEmail(const std::string& email) {
  static const std::string sql = SelectFrom(kUserColumns, "users WHERE email = ?");
  std::string lowered = LowerAscii(email);
  std::optional<User> user;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(lowered); },
      [&](const Statement& row) { user = UserFromRow(row); }, "looking up user"));
  if (!user) return NotFoundError("no user has this email");
  return std::move(*user);
}

Result<std::vector<User>> SqlStore::ListUsers() {
  static const std::string sql = SelectFrom(kUserColumns, "users ORDER BY created_at, rowid");
  std::vector<User> users;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [](Statement&) {},
      [&](const Statement& row) { users.push_back(UserFromRow(row)); }, "listing users"));
  return users;
}

Result<std::int64_t> SqlStore::CountUsers() {
  std::int64_t count = 0;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT COUNT(*) FROM users", [](Statement&) {},
      [&](const Statement& row) { count = row.Int(0); }, "counting users"));
  return count;
}

Status SqlStore::RevokeLiveSessions(const std::string& user_id,
                                       const std::string& except_session_id, WallTime at) {
  return Change(
             "UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND id != ? "
             "AND revoked_at IS NULL AND expires_at > ?",
             [&](Statement& s) { s.Bind(at).Bind(user_id).Bind(except_session_id).Bind(at); },
             "revoking sessions")
      .status();
}

Status SqlStore::SetUserDeactivated(const std::string& id, std::optional<WallTime> at,
                                       const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(int changed,
                            Change("UPDATE users SET deactivated_at = ? WHERE id = ?",
                                   [&](Statement& s) { s.Bind(at).Bind(id); },
                                   "deactivating user"));
    if (changed == 0) return NotFoundError("user " + id + " does not exist");
    if (at) {
      // Checked inside the transaction, so two admins deactivating each other at once cannot
      // both succeed and leave nobody able to administer the console.
      UPLINK_ASSIGN_OR_RETURN(sql::Statement * stmt,
                              Prepare("SELECT COUNT(*) FROM users WHERE role = 'admin' AND "
                                      "deactivated_at IS NULL"));
      Statement query(stmt);
      if (query.Step() != Statement::kRow) return Error("counting active admins");
      if (query.Int(0) == 0) {
        return FailedPreconditionError(
            "this would leave no active admin; make another user an admin first");
      }
      // Reactivation leaves sessions revoked: the user signs in again.
      UPLINK_RETURN_IF_ERROR(RevokeLiveSessions(id, "", *at));
    }
    return InsertAudit(audit);
  });
}

Status SqlStore::SetPassword(const std::string& id, const std::string& password_hash,
                                const std::string& keep_session_id, WallTime at,
                                const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(int changed,
                            Change("UPDATE users SET password_hash = ? WHERE id = ?",
                                   [&](Statement& s) { s.Bind(password_hash).Bind(id); },
                                   "changing password"));
    if (changed == 0) return NotFoundError("user " + id + " does not exist");
    UPLINK_RETURN_IF_ERROR(RevokeLiveSessions(id, keep_session_id, at));
    return InsertAudit(audit);
  });
}

// --- API keys ------------------------------------------------------------------------------

Status SqlStore::InsertApiKey(const ApiKey& key) {
  auto inserted = Change(
      "INSERT INTO api_keys (id, user_id, name, lookup_prefix, token_hash, created_at, "
      "expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(key.id).Bind(key.user_id).Bind(key.name).Bind(key.lookup_prefix);
        s.Bind(key.token_hash).Bind(key.created_at).Bind(key.expires_at).Bind(key.revoked_at);
      },
      "creating API key");
  if (!inserted.ok() && db_->LastFailure() == sql::Failure::kForeignKey) {
    return NotFoundError("user " + key.user_id + " does not exist");
  }
  return inserted.status();
}

Status SqlStore::CreateApiKey(const ApiKey& key, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertApiKey(key));
    return InsertAudit(audit);
  });
}

Result<ApiKey> SqlStore::GetApiKey(const std::string& id) {
  static const std::string sql = SelectFrom(kApiKeyColumns, "api_keys WHERE id = ?");
  std::optional<ApiKey> key;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(id); },
      [&](const Statement& row) { key = ApiKeyFromRow(row); }, "reading API key"));
  if (!key) return NotFoundError("API key " + id + " does not exist");
  return std::move(*key);
}

Result<std::vector<ApiKey>> SqlStore::ListApiKeys(const std::string& user_id) {
  static const std::string sql =
      SelectFrom(kApiKeyColumns, "api_keys WHERE user_id = ? ORDER BY created_at, rowid");
  std::vector<ApiKey> keys;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(user_id); },
      [&](const Statement& row) { keys.push_back(ApiKeyFromRow(row)); }, "listing API keys"));
  return keys;
}

Result<std::vector<ApiKey>> SqlStore::FindApiKeysByPrefix(const std::string& prefix) {
  static const std::string sql = SelectFrom(kApiKeyColumns, "api_keys WHERE lookup_prefix = ?");
  std::vector<ApiKey> keys;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(prefix); },
      [&](const Statement& row) { keys.push_back(ApiKeyFromRow(row)); }, "looking up API key"));
  return keys;
}

Status SqlStore::RevokeApiKey(const std::string& id, WallTime at, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
               [&](Statement& s) { s.Bind(at).Bind(id); }, "revoking API key"));
    if (changed == 0) return CheckExists("SELECT 1 FROM api_keys WHERE id = ?", id, "API key");
    return InsertAudit(audit);
  });
}

// --- Sessions ------------------------------------------------------------------------------

Status SqlStore::InsertSession(const Session& session) {
  auto inserted = Change(
      "INSERT INTO sessions (id, user_id, lookup_prefix, token_hash, created_at, expires_at, "
      "confirmed_until, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(session.id).Bind(session.user_id).Bind(session.lookup_prefix);
        s.Bind(session.token_hash).Bind(session.created_at).Bind(session.expires_at);
        s.Bind(session.confirmed_until).Bind(session.revoked_at);
      },
      "creating session");
  if (!inserted.ok() && db_->LastFailure() == sql::Failure::kForeignKey) {
    return NotFoundError("user " + session.user_id + " does not exist");
  }
  return inserted.status();
}

Status SqlStore::CreateSession(const Session& session, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertSession(session));
    return InsertAudit(audit);
  });
}

Result<std::vector<Session>> SqlStore::FindSessionsByPrefix(const std::string& prefix) {
  static const std::string sql = SelectFrom(kSessionColumns, "sessions WHERE lookup_prefix = ?");
  std::vector<Session> sessions;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(prefix); },
      [&](const Statement& row) { sessions.push_back(SessionFromRow(row)); },
      "looking up session"));
  return sessions;
}

Status SqlStore::ConfirmSession(const std::string& id, WallTime until,
                                   const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE sessions SET confirmed_until = ? WHERE id = ? AND revoked_at IS NULL",
               [&](Statement& s) { s.Bind(until).Bind(id); }, "confirming session"));
    if (changed == 0) {
      UPLINK_RETURN_IF_ERROR(CheckExists("SELECT 1 FROM sessions WHERE id = ?", id, "session"));
      return FailedPreconditionError("this session was revoked; sign in again with "
                                     "\"uplink login\"");
    }
    return InsertAudit(audit);
  });
}

Status SqlStore::RevokeSession(const std::string& id, WallTime at, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
               [&](Statement& s) { s.Bind(at).Bind(id); }, "revoking session"));
    if (changed == 0) return CheckExists("SELECT 1 FROM sessions WHERE id = ?", id, "session");
    return InsertAudit(audit);
  });
}

}  // namespace uplink::console
