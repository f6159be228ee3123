#include "console/api/web_api.h"

#include "common/json.h"
#include "console/api/api_objects.h"
#include "console/auth/web_session.h"
#include "console/replies.h"

namespace uplink::console {

WebApi::WebApi(const ApiContext& context, AccountsApi& accounts)
    : ApiArea(context), accounts_(accounts) {}

void WebApi::Register(Routes& routes) {
  // It hashes as the API's sign-in does: on the hasher's threads, never an HTTP thread.
  routes.PublicRoute(
      "POST", "/api/v1/web/sign-in",
      [this](const net::Request& request) { return WebSignIn(request); }, Work::kHashesPassword);
  routes.UserRoute("GET", "/api/v1/web/session", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams&,
                          const RequestContext& caller) { return WebSession(caller); });
  routes.UserRoute("POST", "/api/v1/web/sign-out", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext& caller) { return WebSignOut(request, caller); });
}

Result<net::Response> WebApi::WebSignIn(const net::Request& request) {
  UPLINK_ASSIGN_OR_RETURN(net::Response signed_in, accounts_.SignIn(request));
  if (signed_in.status != 201) return signed_in;  // refusals (401, 429) pass through
  UPLINK_ASSIGN_OR_RETURN(json::value parsed, ParseJson(signed_in.body));
  json::object& body = parsed.as_object();
  Secret token(std::string(body.at("token").as_string()));
  // The page never sees the session token: only the cookie carries it.
  body.erase("token");
  body["csrf_token"] = CsrfTokenFor(token);
  net::Response response = NoStore(JsonResponse(201, body));
  response.headers.Set(
      "Set-Cookie",
      SessionCookie(token, std::chrono::duration_cast<std::chrono::seconds>(options_.session_lifetime),
                    options_.secure_cookies));
  return response;
}

Result<net::Response> WebApi::WebSession(const RequestContext& caller) {
  if (!caller.cookie_csrf_token) {
    return InvalidArgumentError(
        "this call is for the web console's session cookie; use GET /api/v1/me with a bearer "
        "credential");
  }
  UPLINK_ASSIGN_OR_RETURN(bool enrollment_required, NeedsTwoFactorEnrollment(caller.user));
  return NoStore(JsonResponse(200, {{"user", UserToJson(caller.user)},
                                    {"session", SessionToJson(*caller.session)},
                                    {"csrf_token", *caller.cookie_csrf_token},
                                    {"two_factor_enrollment_required", enrollment_required}}));
}

Result<net::Response> WebApi::WebSignOut(const net::Request& request,
                                         const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(net::Response signed_out, accounts_.Logout(request, caller));
  signed_out.headers.Set("Set-Cookie", ExpiredSessionCookie(options_.secure_cookies));
  return signed_out;
}

}  // namespace uplink::console
