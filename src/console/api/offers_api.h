// Offers (docs/api.md, "Offers"): the capacity a supplier offers, made with its connection in
// one step; the admin's resource review that qualifies it; suspension; and the execution
// credential and execution.json its workspace controller runs with.
#pragma once

#include <string>

#include "console/api/api_context.h"
#include "console/api/routes.h"
#include "console/api/workspace_signals.h"

namespace uplink::console {

// The JSON of an offer as its owner and admins see it, and the execution.json values and the
// helm command of one.
json::object OfferToJson(const Offer& offer);
json::object ExecutionValuesJson(const Offer& offer, const ConsoleOptions& options);
std::string HelmUpgradeCommand(const Offer& offer);

class OffersApi : private ApiArea {
 public:
  OffersApi(const ApiContext& context, WorkspaceSignals& signals);

  void Register(Routes& routes);

 private:
  Result<net::Response> CreateOffer(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ListOffers(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ShowOffer(const std::string& id, const RequestContext& caller);
  Result<net::Response> ReviewOffer(const std::string& id, const net::Request& request,
                                    const RequestContext& caller);
  Result<net::Response> SuspendOffer(const std::string& id, bool suspend,
                                     const net::Request& request, const RequestContext& caller);
  // POST …/execution (`rotate` false: the first credential) and …/execution/rotate.
  Result<net::Response> IssueExecution(const std::string& id, bool rotate,
                                       const net::Request& request, const RequestContext& caller);
  Result<net::Response> ShowExecution(const std::string& id, const RequestContext& caller);
  // …/execution/disable and …/execution/revoke (which also revokes the credential).
  Result<net::Response> DisableExecution(const std::string& id, bool revoke,
                                         const net::Request& request,
                                         const RequestContext& caller);

  // NotFound unless the caller owns the offer (or is an admin, when `admin_too`).
  Result<Offer> VisibleOffer(const std::string& id, const RequestContext& caller, bool admin_too);
  // The offer's JSON with the reported nodes and what is reserved.
  Result<json::object> OfferDetails(const Offer& offer);

  WorkspaceSignals& signals_;
};

}  // namespace uplink::console
