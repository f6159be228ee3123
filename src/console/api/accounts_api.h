// Sessions, users and API keys (docs/api.md): the routes by which people sign in and manage
// who may call the console.
#pragma once

#include <string>

#include "console/api/api_context.h"
#include "console/api/routes.h"
#include "console/api/two_factor_api.h"

namespace uplink::console {

class AccountsApi : private ApiArea {
 public:
  // `two_factor` checks a sign-in's second factor; it must outlive this object.
  AccountsApi(const ApiContext& context, TwoFactorApi& two_factor);

  void Register(Routes& routes);

  // POST /api/v1/sessions, and the web console's sign-in (web_api.h).
  Result<net::Response> SignIn(const net::Request& request);
  // POST /api/v1/session/logout, and the web console's sign-out.
  Result<net::Response> Logout(const net::Request& request, const RequestContext& caller);

 private:
  Result<net::Response> Me(const RequestContext& caller);
  Result<net::Response> ConfirmSession(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ListUsers(const net::Request& request);
  Result<net::Response> CreateUser(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ShowUser(const std::string& id, const RequestContext& caller);
  Result<net::Response> SetDeactivated(const std::string& id, const net::Request& request,
                                       const RequestContext& caller, bool deactivate);
  Result<net::Response> ChangePassword(const std::string& id, const net::Request& request,
                                       const RequestContext& caller);
  Result<net::Response> ListApiKeys(const RequestContext& caller);
  Result<net::Response> CreateApiKey(const net::Request& request, const RequestContext& caller);
  Result<net::Response> RevokeApiKey(const std::string& id, const net::Request& request,
                                     const RequestContext& caller);

  TwoFactorApi& two_factor_;
};

}  // namespace uplink::console
