// The web console's own calls (docs/web.md): sign-in that sets the session cookie, the page's
// session (with its CSRF token) and sign-out that clears the cookie.
#pragma once

#include "console/api/accounts_api.h"
#include "console/api/api_context.h"
#include "console/api/routes.h"

namespace uplink::console {

class WebApi : private ApiArea {
 public:
  // `accounts` signs in and out; it must outlive this object.
  WebApi(const ApiContext& context, AccountsApi& accounts);

  void Register(Routes& routes);

 private:
  Result<net::Response> WebSignIn(const net::Request& request);
  Result<net::Response> WebSession(const RequestContext& caller);
  Result<net::Response> WebSignOut(const net::Request& request, const RequestContext& caller);

  AccountsApi& accounts_;
};

}  // namespace uplink::console
