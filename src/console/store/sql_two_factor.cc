// SqlStore's two-factor sign-in (docs/security.md, "Two-factor sign-in"): each user's
// sealed TOTP secret and recovery code hashes, and the console-wide settings.

#include "common/crypto.h"
#include "common/json.h"
#include "console/store/sql_statement.h"
#include "console/store/sql_store.h"

namespace uplink::console {
namespace {

constexpr size_t kRecoveryCodeIdBytes = 8;

}  // namespace

Result<std::optional<TwoFactorCredential>> SqlStore::GetTwoFactor(const std::string& user_id) {
  std::optional<TwoFactorCredential> credential;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT t.sealed_secret, t.created_at, t.enabled_at, t.last_used_step, "
      "(SELECT COUNT(*) FROM recovery_codes r WHERE r.user_id = t.user_id AND r.used_at IS NULL) "
      "FROM two_factor t WHERE t.user_id = ?",
      [&](Statement& s) { s.Bind(user_id); },
      [&](const Statement& row) {
        credential = TwoFactorCredential{user_id,         row.Text(0), row.Time(1),
                                         row.OptionalTime(2), row.Int(3), row.Int(4)};
      },
      "reading two-factor credential"));
  return credential;
}

Result<std::vector<RecoveryCode>> SqlStore::ListUnusedRecoveryCodes(const std::string& user_id) {
  std::vector<RecoveryCode> codes;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT id, code_hash FROM recovery_codes WHERE user_id = ? AND used_at IS NULL",
      [&](Statement& s) { s.Bind(user_id); },
      [&](const Statement& row) {
        codes.push_back({row.Text(0), row.Text(1)});
      },
      "reading recovery codes"));
  return codes;
}

Status SqlStore::BeginTwoFactor(const TwoFactorCredential& pending, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    // Replaces a pending enrolment, never an enabled one.
    auto written = Change(
        "INSERT INTO two_factor (user_id, sealed_secret, created_at) VALUES (?, ?, ?) "
        "ON CONFLICT (user_id) DO UPDATE SET sealed_secret = excluded.sealed_secret, "
        "created_at = excluded.created_at, last_used_step = 0 "
        "WHERE two_factor.enabled_at IS NULL",
        [&](Statement& s) {
          s.Bind(pending.user_id).Bind(pending.sealed_secret).Bind(pending.created_at);
        },
        "beginning two-factor enrolment");
    if (!written.ok() && db_->LastFailure() == sql::Failure::kForeignKey) {
      return NotFoundError("user " + pending.user_id + " does not exist");
    }
    UPLINK_ASSIGN_OR_RETURN(int changed, std::move(written));
    if (changed == 0) {
      return FailedPreconditionError(
          "two-factor sign-in is already set up for this user; to move it to another "
          "authenticator, turn it off (with your password and a code) and set it up again");
    }
    return InsertAudit(audit);
  });
}

Status SqlStore::InsertRecoveryCodes(const std::string& user_id,
                                        const std::vector<RecoveryCode>& codes, WallTime at) {
  UPLINK_RETURN_IF_ERROR(Change("DELETE FROM recovery_codes WHERE user_id = ?",
                                [&](Statement& s) { s.Bind(user_id); },
                                "replacing recovery codes")
                             .status());
  for (const RecoveryCode& code : codes) {
    std::string id = HexEncode(RandomBytes(kRecoveryCodeIdBytes));
    UPLINK_RETURN_IF_ERROR(Change("INSERT INTO recovery_codes (id, user_id, code_hash, "
                                  "created_at) VALUES (?, ?, ?, ?)",
                                  [&](Statement& s) {
                                    s.Bind(id).Bind(user_id).Bind(code.code_hash).Bind(at);
                                  },
                                  "storing recovery codes")
                               .status());
  }
  return Status::Ok();
}

Status SqlStore::EnableTwoFactor(const std::string& user_id, std::int64_t step,
                                    const std::vector<RecoveryCode>& codes,
                                    const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE two_factor SET enabled_at = ?, last_used_step = ? "
               "WHERE user_id = ? AND enabled_at IS NULL",
               [&](Statement& s) { s.Bind(audit.at).Bind(step).Bind(user_id); },
               "enabling two-factor sign-in"));
    if (changed == 0) {
      return FailedPreconditionError(
          "there is no two-factor enrolment to confirm (it is already set up, or was never "
          "begun); begin one first");
    }
    UPLINK_RETURN_IF_ERROR(InsertRecoveryCodes(user_id, codes, audit.at));
    return InsertAudit(audit);
  });
}

Status SqlStore::UseSecondFactor(const std::string& user_id, const SecondFactorUse& use,
                                    const AuditEvent& audit) {
  if (use.totp_step) {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE two_factor SET last_used_step = ? WHERE user_id = ? "
               "AND enabled_at IS NOT NULL AND last_used_step < ?",
               [&](Statement& s) {
                 s.Bind(*use.totp_step).Bind(user_id).Bind(*use.totp_step);
               },
               "using a two-factor code"));
    if (changed == 0) {
      return FailedPreconditionError(
          "this two-factor code was already used; wait for the next one");
    }
    return Status::Ok();
  }
  UPLINK_ASSIGN_OR_RETURN(
      int changed,
      Change("UPDATE recovery_codes SET used_at = ? WHERE id = ? AND user_id = ? "
             "AND used_at IS NULL",
             [&](Statement& s) { s.Bind(audit.at).Bind(use.recovery_code_id).Bind(user_id); },
             "using a recovery code"));
  if (changed == 0) {
    return FailedPreconditionError("this recovery code was already used; use another one");
  }
  std::int64_t left = 0;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "SELECT COUNT(*) FROM recovery_codes WHERE user_id = ? AND used_at IS NULL",
      [&](Statement& s) { s.Bind(user_id); }, [&](const Statement& row) { left = row.Int(0); },
      "counting recovery codes"));
  AuditEvent used = audit;
  used.action = "two_factor.recovery_code_used";
  used.target_type = "user";
  used.target_id = user_id;
  used.owner_id = user_id;
  used.outcome = "ok";
  used.detail = ToJson(json::object{{"for", audit.action}, {"recovery_codes_left", left}});
  return InsertAudit(used);
}

Status SqlStore::DisableTwoFactor(const std::string& user_id,
                                     const std::optional<SecondFactorUse>& use,
                                     const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    if (use) UPLINK_RETURN_IF_ERROR(UseSecondFactor(user_id, *use, audit));
    UPLINK_ASSIGN_OR_RETURN(int changed,
                            Change("DELETE FROM two_factor WHERE user_id = ?",
                                   [&](Statement& s) { s.Bind(user_id); },
                                   "turning two-factor sign-in off"));
    if (changed == 0) {
      return NotFoundError("this user has no two-factor sign-in to turn off");
    }
    UPLINK_RETURN_IF_ERROR(InsertRecoveryCodes(user_id, {}, audit.at));
    return InsertAudit(audit);
  });
}

Status SqlStore::ReplaceRecoveryCodes(const std::string& user_id, const SecondFactorUse& use,
                                         const std::vector<RecoveryCode>& codes,
                                         const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(UseSecondFactor(user_id, use, audit));
    UPLINK_RETURN_IF_ERROR(InsertRecoveryCodes(user_id, codes, audit.at));
    return InsertAudit(audit);
  });
}

Status SqlStore::CreateSessionWithSecondFactor(const Session& session,
                                                  const SecondFactorUse& use,
                                                  const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(UseSecondFactor(session.user_id, use, audit));
    UPLINK_RETURN_IF_ERROR(InsertSession(session));
    return InsertAudit(audit);
  });
}

Result<ConsoleSettings> SqlStore::GetConsoleSettings() {
  auto read = [](sql::Database& database) -> Result<ConsoleSettings> {
    ConsoleSettings settings;
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database, "SELECT require_two_factor, updated_at FROM console_settings WHERE id = 1",
        [](Statement&) {},
        [&](const Statement& row) {
          settings.require_two_factor = row.Int(0) != 0;
          settings.updated_at = row.OptionalTime(1);
        },
        "reading console settings"));
    return settings;
  };
  if (AuthenticatesOnLookups()) return read(*lookups_.Borrow());
  auto cached = [&] {
    std::lock_guard cache(credential_cache_mutex_);
    return settings_;
  };
  if (auto hit = cached()) return *hit;
  std::lock_guard lock(mutex_);
  if (auto hit = cached()) return *hit;  // read by another caller meanwhile
  UPLINK_ASSIGN_OR_RETURN(ConsoleSettings settings, read(*db_));
  if (caches_credentials_) {
    std::lock_guard cache(credential_cache_mutex_);
    settings_ = settings;
  }
  return settings;
}

Status SqlStore::SetConsoleSettings(const ConsoleSettings& settings, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    // Emptied whether or not the write commits: the next read asks the database.
    ForgetCachedCredentials();
    UPLINK_RETURN_IF_ERROR(Change("UPDATE console_settings SET require_two_factor = ?, "
                                  "updated_at = ? WHERE id = 1",
                                  [&](Statement& s) {
                                    s.Bind(settings.require_two_factor).Bind(audit.at);
                                  },
                                  "changing console settings")
                               .status());
    return InsertAudit(audit);
  });
}

}  // namespace uplink::console
