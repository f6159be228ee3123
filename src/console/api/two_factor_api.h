// Two-factor sign-in (docs/api.md, "Two-factor sign-in"; docs/security.md): enrolment with a
// QR code and a first code, recovery codes, turning it off, an admin's reset, and the console
// setting that requires it, which also shuts out the credentials and agents of users who have
// not set it up (routes.h admits them to what setting it up needs, and nothing else).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "console/api/api_context.h"
#include "console/api/routes.h"
#include "console/auth/secret_box.h"
#include "protocol/field_reader.h"

namespace uplink::console {

class TwoFactorApi : private ApiArea {
 public:
  // Two-factor secrets are sealed with options.two_factor_key.
  explicit TwoFactorApi(const ApiContext& context);

  void Register(Routes& routes);

  // The second factor of a password sign-in (`code` or `recovery_code` from its body): nullopt
  // when the user has none; the reply that refuses the sign-in (two_factor_required, a wrong
  // code, 429), audited as `refusal` when it is a failure.
  std::variant<std::optional<SecondFactorUse>, net::Response> SignInSecondFactor(
      const User& user, const protocol::FieldReader& fields, const net::Request& request,
      AuditEvent refusal);

 private:
  Result<net::Response> TwoFactorStatus(const RequestContext& caller);
  Result<net::Response> BeginTwoFactor(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ConfirmTwoFactor(const net::Request& request, const RequestContext& caller);
  Result<net::Response> DisableTwoFactor(const net::Request& request, const RequestContext& caller);
  Result<net::Response> RegenerateRecoveryCodes(const net::Request& request,
                                                const RequestContext& caller);
  Result<net::Response> ResetTwoFactor(const std::string& id, const net::Request& request,
                                       const RequestContext& caller);
  Result<net::Response> ShowSettings(const RequestContext& caller);
  Result<net::Response> UpdateSettings(const net::Request& request, const RequestContext& caller);
  // Checks `code` or `recovery_code` of a body against `credential`: what to use up, or the
  // refusal (400, 401 invalid_two_factor_code audited as `refusal` with its reason, 429).
  std::variant<SecondFactorUse, net::Response> CheckSecondFactor(
      const User& user, const TwoFactorCredential& credential, const protocol::FieldReader& fields,
      const net::Request& request, AuditEvent refusal);
  // The caller's `password` (when they have one) and, when two-factor is enabled, a second
  // factor, for turning it off or replacing recovery codes (`during` names which in audit
  // events): what to use up, or the refusal.
  std::variant<std::optional<SecondFactorUse>, net::Response> ProveOwnFactors(
      const RequestContext& caller, const TwoFactorCredential& credential,
      const protocol::FieldReader& fields, const net::Request& request, std::string_view during);

  SecretBox two_factor_box_;
};

}  // namespace uplink::console
