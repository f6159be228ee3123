#include "console/api/offers_api.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/crypto.h"
#include "common/kubernetes_names.h"
#include "common/quantity.h"
#include "console/api/chart_repository.h"
#include "console/api/json_fields.h"
#include "console/auth/credentials.h"
#include "console/replies.h"
#include "protocol/credentials.h"

namespace uplink::console {
namespace {

constexpr size_t kIdBytes = 8;
constexpr size_t kMaxNotesBytes = 2000;
constexpr std::int64_t kMaxOfferGpus = 100'000;
constexpr std::int64_t kMinLifetimeSeconds = 60;
constexpr std::string_view kAgentName = "uplink-agent";
// The release name the chart's install commands use, until the controller reports its own.
constexpr std::string_view kDefaultRelease = "uplink-agent";

// "DE", "EUR": `letters` ASCII letters, upper-cased.
Result<std::string> Code(const FieldReader& fields, std::string_view key, size_t letters,
                         std::string_view what) {
  UPLINK_ASSIGN_OR_RETURN(std::string text, fields.RequiredString(key, 8));
  if (text.size() != letters ||
      !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isalpha(c); })) {
    return InvalidArgumentError(std::string(key) + " must be " + std::string(what));
  }
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

// A price as people write it: "2.10", or a JSON number; up to 9 whole and 6 fraction digits.
Result<std::string> Price(const FieldReader& fields) {
  const json::value* value = fields.Find("price_per_gpu_hour");
  if (value == nullptr) return InvalidArgumentError("price_per_gpu_hour is required");
  std::string text;
  if (value->is_string()) {
    text = std::string(value->get_string());
  } else if (value->is_int64() || value->is_uint64() || value->is_double()) {
    text = ToJson(*value);
  } else {
    return InvalidArgumentError("price_per_gpu_hour must be a number such as 2.10");
  }
  size_t dot = text.find('.');
  std::string_view whole = std::string_view(text).substr(0, dot);
  std::string_view fraction =
      dot == std::string::npos ? std::string_view() : std::string_view(text).substr(dot + 1);
  auto digits = [](std::string_view part) {
    return std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (whole.empty() || whole.size() > 9 || !digits(whole) || fraction.size() > 6 ||
      !digits(fraction) || (dot != std::string::npos && fraction.empty())) {
    return InvalidArgumentError("price_per_gpu_hour must be a number from 0 with at most 6 "
                                "decimals, such as 2.10");
  }
  return text;
}

Result<Availability> ReadAvailability(const FieldReader& fields) {
  const json::value* value = fields.Find("availability");
  if (value == nullptr || (value->is_string() && value->get_string() == "always")) {
    return Availability{};
  }
  if (!value->is_object()) {
    return InvalidArgumentError(
        "availability must be \"always\" or {\"from\": TIME, \"until\": TIME}");
  }
  FieldReader window(value->get_object(), "availability");
  UPLINK_RETURN_IF_ERROR(window.OnlyFields({"from", "until"}));
  Availability out;
  for (auto [key, target] : {std::pair{"from", &out.from}, std::pair{"until", &out.until}}) {
    UPLINK_ASSIGN_OR_RETURN(auto text, window.String(key, 64));
    if (!text) continue;
    auto at = ParseRfc3339(*text);
    if (!at.ok()) return InvalidArgumentError(window.FieldPath(key) + " must be an RFC 3339 time");
    *target = *at;
  }
  if (out.always()) {
    return InvalidArgumentError("availability needs from, until or both; or say \"always\"");
  }
  if (out.from && out.until && *out.until <= *out.from) {
    return InvalidArgumentError("availability.until must be after availability.from");
  }
  return out;
}

// A figure per GPU: a JSON number in `unit` (CPUs, bytes) or a Kubernetes quantity ("7500m",
// "64Gi"); in thousandths for CPUs (`milli`), whole bytes otherwise.
Result<std::int64_t> ReadFigure(const FieldReader& fields, std::string_view key, bool milli,
                                std::int64_t min) {
  const json::value* value = fields.Find(key);
  if (value == nullptr) return InvalidArgumentError(std::string(key) + " is required");
  std::string text;
  if (value->is_string()) {
    text = std::string(value->get_string());
  } else if (value->is_int64() || value->is_uint64() || (milli && value->is_double())) {
    text = ToJson(*value);
  } else {
    return InvalidArgumentError(std::string(key) + " must be a number or a Kubernetes quantity" +
                                (milli ? " such as 8 or 7500m" : " such as 64Gi"));
  }
  auto quantity = Quantity::Parse(text);
  Result<std::int64_t> number = quantity.ok()
                                    ? (milli ? quantity->MilliValue() : quantity->WholeCount())
                                    : Result<std::int64_t>(quantity.status());
  if (!number.ok() || *number < min) {
    return InvalidArgumentError(std::string(key) + " must be a quantity of at least " +
                                (milli ? std::to_string(min) + "m CPU" : std::to_string(min)) +
                                ", such as " + (milli ? "8 or 7500m" : "64Gi"));
  }
  return *number;
}

json::value OptionalTimeJson(const std::optional<WallTime>& at) {
  return at ? json::value(FormatRfc3339(*at)) : json::value(nullptr);
}

json::object ReviewJson(const OfferReview& review) {
  return json::object{
      {"authority_confirmed", review.authority_confirmed},
      {"hardware_compatible", review.hardware_compatible},
      {"isolation_verified", review.isolation_verified},
      {"expiry_and_cleanup_checked", review.expiry_and_cleanup_checked},
      {"disk_eviction_tested", review.disk_eviction_tested},
      {"network_policy_enforced", review.network_policy_enforced},
      {"price_includes_traffic", review.price_includes_traffic},
      {"cpu_millis_per_gpu", review.cpu_millis_per_gpu},
      {"memory_bytes_per_gpu", review.memory_bytes_per_gpu},
      {"disk_bytes_per_gpu", review.disk_bytes_per_gpu},
      {"transfer_budget_bytes", review.transfer_budget_bytes},
      {"approved_nodes", json::array(review.approved_nodes.begin(), review.approved_nodes.end())},
      {"notes", review.notes},
      {"qualifies", review.Qualifies()},
      {"reviewed_by", review.reviewed_by_label},
      {"reviewed_at", FormatRfc3339(review.reviewed_at)}};
}

bool CredentialLive(const Offer& offer) {
  return offer.credential && !offer.credential->revoked_at;
}

// The next state after a review: qualified only when the review qualifies it; a suspended
// offer stays suspended until an admin resumes it.
OfferState AfterReview(OfferState now, const OfferReview& review) {
  if (now == OfferState::kSuspended) return now;
  return review.Qualifies() ? OfferState::kQualified : OfferState::kInReview;
}

OfferState Resumed(const Offer& offer) {
  if (!offer.review) return OfferState::kConnected;
  return offer.review->Qualifies() ? OfferState::kQualified : OfferState::kInReview;
}

}  // namespace

std::string HelmUpgradeCommand(const Offer& offer) {
  const auto& chart = AgentChart();
  std::string release = offer.helm_release.empty() ? std::string(kDefaultRelease)
                                                   : offer.helm_release;
  std::string command = "helm upgrade " + release + " uplink/uplink-agent";
  if (chart.ok()) command += " --version " + chart->version;
  return command + " --reset-then-reuse-values -f execution.json";
}

json::object ExecutionValuesJson(const Offer& offer, const ConsoleOptions& options) {
  protocol::ExecutionValues values;
  values.enabled = offer.execution_enabled;
  values.offer_id = offer.id;
  values.connection_id = offer.connection_id;
  values.cluster_name = offer.cluster_name;
  values.workspace_image =
      options.agent_images.workspace ? options.agent_images.workspace->ToString() : "";
  values.ssh_enabled = offer.execution.ssh_enabled;
  values.capacity_gpus = offer.gpus;
  values.max_lifetime_seconds = offer.max_lifetime_seconds;
  if (offer.review) {
    values.nodes = offer.review->approved_nodes;
    values.cpu_millis_per_gpu = offer.review->cpu_millis_per_gpu;
    values.memory_bytes_per_gpu = offer.review->memory_bytes_per_gpu;
    values.ephemeral_storage_bytes_per_gpu = offer.review->disk_bytes_per_gpu;
  }
  values.namespace_name = offer.execution.namespace_name;
  values.kubernetes_api_cidrs = offer.execution.kubernetes_api_cidrs;
  values.kubernetes_api_port = offer.execution.kubernetes_api_port;
  values.console_cidrs = options.workspace_console_cidrs;
  values.console_port = options.workspace_console_port;
  return protocol::EncodeExecutionValues(values);
}

json::object OfferToJson(const Offer& offer) {
  json::value availability = "always";
  if (!offer.availability.always()) {
    availability = json::object{{"from", OptionalTimeJson(offer.availability.from)},
                                {"until", OptionalTimeJson(offer.availability.until)}};
  }
  json::object execution{
      {"enabled", offer.execution_enabled},
      {"namespace", offer.execution.namespace_name},
      {"ssh_enabled", offer.execution.ssh_enabled},
      {"kubernetes_api_cidrs", json::array(offer.execution.kubernetes_api_cidrs.begin(),
                                           offer.execution.kubernetes_api_cidrs.end())},
      {"kubernetes_api_port", offer.execution.kubernetes_api_port},
      {"credential_prefix", offer.credential ? json::value(offer.credential->lookup_prefix)
                                             : json::value(nullptr)},
      {"credential_created_at",
       offer.credential ? json::value(FormatRfc3339(offer.credential->created_at))
                        : json::value(nullptr)},
      {"credential_revoked_at",
       OptionalTimeJson(offer.credential ? offer.credential->revoked_at : std::nullopt)},
      {"helm_release", offer.helm_release},
      {"controller_namespace", offer.controller_namespace},
      {"controller_version", offer.controller_version},
      {"controller_seen_at", OptionalTimeJson(offer.controller_seen_at)},
      {"draining", offer.controller_draining},
      {"helm_upgrade_command", HelmUpgradeCommand(offer)}};
  return json::object{
      {"id", offer.id},
      {"state", OfferStateName(offer.state)},
      {"owner_id", offer.owner_id},
      {"connection_id", offer.connection_id},
      {"cluster_name", offer.cluster_name},
      {"gpus", offer.gpus},
      {"country", offer.country},
      {"availability", std::move(availability)},
      {"price_per_gpu_hour", offer.price_per_gpu_hour},
      {"currency", offer.currency},
      {"max_lifetime_seconds", offer.max_lifetime_seconds},
      {"created_at", FormatRfc3339(offer.created_at)},
      {"updated_at", FormatRfc3339(offer.updated_at)},
      {"review", offer.review ? json::value(ReviewJson(*offer.review)) : json::value(nullptr)},
      {"execution", std::move(execution)}};
}

OffersApi::OffersApi(const ApiContext& context, WorkspaceSignals& signals)
    : ApiArea(context), signals_(signals) {}

void OffersApi::Register(Routes& routes) {
  routes.UserRoute("POST", "/api/v1/offers", Access::kSensitive,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext& caller) { return CreateOffer(request, caller); });
  routes.UserRoute("GET", "/api/v1/offers", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext& caller) { return ListOffers(request, caller); });
  routes.UserRoute("GET", "/api/v1/offers/{id}", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ShowOffer(params.at("id"), caller);
                   });
  routes.UserRoute("POST", "/api/v1/offers/{id}/review", Access::kAdmin,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ReviewOffer(params.at("id"), request, caller);
                   });
  routes.UserRoute("POST", "/api/v1/offers/{id}/suspend", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return SuspendOffer(params.at("id"), true, request, caller);
                   });
  routes.UserRoute("POST", "/api/v1/offers/{id}/resume", Access::kAdmin,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return SuspendOffer(params.at("id"), false, request, caller);
                   });
  routes.UserRoute("POST", "/api/v1/offers/{id}/execution", Access::kSensitive,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return IssueExecution(params.at("id"), false, request, caller);
                   });
  routes.UserRoute("GET", "/api/v1/offers/{id}/execution", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ShowExecution(params.at("id"), caller);
                   });
  routes.UserRoute("POST", "/api/v1/offers/{id}/execution/rotate", Access::kSensitive,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return IssueExecution(params.at("id"), true, request, caller);
                   });
  routes.UserRoute("POST", "/api/v1/offers/{id}/execution/disable", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return DisableExecution(params.at("id"), false, request, caller);
                   });
  routes.UserRoute("POST", "/api/v1/offers/{id}/execution/revoke", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return DisableExecution(params.at("id"), true, request, caller);
                   });
}

Result<Offer> OffersApi::VisibleOffer(const std::string& id, const RequestContext& caller,
                                      bool admin_too) {
  Status not_found =
      NotFoundError("you have no offer with this id; list yours with GET /api/v1/offers");
  if (!IsOfferId(id)) return not_found;
  auto offer = store_.GetOffer(id);
  if (!offer.ok()) {
    return offer.status().code() == StatusCode::kNotFound ? not_found : offer.status();
  }
  if (offer->owner_id != caller.user.id && !(admin_too && caller.is_admin())) return not_found;
  return offer;
}

Result<json::object> OffersApi::OfferDetails(const Offer& offer) {
  json::object body = OfferToJson(offer);
  UPLINK_ASSIGN_OR_RETURN(std::vector<Node> nodes, store_.ListNodes(offer.connection_id));
  std::set<std::string> approved;
  if (offer.review) approved.insert(offer.review->approved_nodes.begin(),
                                    offer.review->approved_nodes.end());
  json::array reported;
  for (const Node& node : nodes) {
    reported.push_back(json::object{{"name", node.name},
                                    {"ready", node.ready},
                                    {"unschedulable", node.unschedulable},
                                    {"gpu_product", node.gpu_product},
                                    {"gpu_allocatable", node.gpu_allocatable},
                                    {"approved", approved.contains(node.name)}});
  }
  body["nodes"] = std::move(reported);
  UPLINK_ASSIGN_OR_RETURN(std::vector<Reservation> active,
                          store_.ListReservations(ReservationQuery{
                              .offer_id = offer.id, .active_only = true, .limit = 1000}));
  std::int64_t gpus = 0;
  for (const Reservation& r : active) gpus += r.gpus;
  body["usage"] = json::object{{"active_reservations", static_cast<std::int64_t>(active.size())},
                               {"gpus_reserved", gpus}};
  return body;
}

Result<net::Response> OffersApi::CreateOffer(const net::Request& request,
                                             const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"cluster_name", "gpus", "country", "availability",
                                            "price_per_gpu_hour", "currency",
                                            "max_lifetime_seconds"}));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_cluster, fields.RequiredString("cluster_name", 1024));
  Connection connection;
  UPLINK_ASSIGN_OR_RETURN(connection.cluster_name, ValidateName("cluster_name", raw_cluster));
  Offer offer;
  UPLINK_ASSIGN_OR_RETURN(offer.gpus, fields.RequiredInt("gpus", 1, kMaxOfferGpus));
  UPLINK_ASSIGN_OR_RETURN(offer.country,
                          Code(fields, "country", 2, "an ISO 3166 country code such as DE"));
  UPLINK_ASSIGN_OR_RETURN(offer.availability, ReadAvailability(fields));
  UPLINK_ASSIGN_OR_RETURN(offer.price_per_gpu_hour, Price(fields));
  UPLINK_ASSIGN_OR_RETURN(offer.currency,
                          Code(fields, "currency", 3, "an ISO 4217 currency code such as EUR"));
  offer.max_lifetime_seconds = options_.default_max_lifetime.count();
  if (fields.Find("max_lifetime_seconds")) {
    UPLINK_ASSIGN_OR_RETURN(offer.max_lifetime_seconds,
                            fields.RequiredInt("max_lifetime_seconds", kMinLifetimeSeconds,
                                               protocol::kMaxLifetimeSecondsBound));
  }

  const WallTime now = clock_.Now();
  connection.id = HexEncode(RandomBytes(kIdBytes));
  connection.owner_id = caller.user.id;
  connection.agent_name = std::string(kAgentName);
  connection.created_at = now;
  connection.expires_at = now + options_.default_token_lifetime;
  MintedCredential token = MintCredential(protocol::kAgentTokenPrefix);
  connection.token_prefix = token.lookup_prefix;
  connection.token_hash = token.token_hash;
  offer.id = NewOfferId();
  offer.owner_id = caller.user.id;
  offer.connection_id = connection.id;
  offer.created_at = now;
  offer.state = OfferState::kDraft;

  AuditEvent connection_event =
      CallerEvent(caller, now, "connection.create", "connection", connection.id, caller.user.id,
                  {{"token_prefix", connection.token_prefix},
                   {"agent_name", connection.agent_name},
                   {"cluster_name", connection.cluster_name},
                   {"expires_at", FormatRfc3339(connection.expires_at)},
                   {"offer_id", offer.id}});
  AuditEvent offer_event = CallerEvent(caller, now, "offer.create", "offer", offer.id,
                                       caller.user.id,
                                       {{"connection_id", connection.id},
                                        {"gpus", offer.gpus},
                                        {"country", offer.country},
                                        {"price_per_gpu_hour", offer.price_per_gpu_hour},
                                        {"currency", offer.currency}});
  Status created = store_.CreateOffer(offer, connection, connection_event, offer_event);
  if (created.code() == StatusCode::kConflict || created.code() == StatusCode::kAlreadyExists) {
    return ConflictError("you already have a live connection for cluster_name \"" +
                         connection.cluster_name +
                         "\"; choose another name, or revoke that connection first");
  }
  UPLINK_RETURN_IF_ERROR(created);
  log_.Info("offer created", {{"offer_id", offer.id},
                              {"connection_id", connection.id},
                              {"user_id", caller.user.id},
                              {"token_prefix", connection.token_prefix}});
  UPLINK_ASSIGN_OR_RETURN(Offer stored, store_.GetOffer(offer.id));
  UPLINK_ASSIGN_OR_RETURN(json::object reply, OfferDetails(stored));
  reply["token"] = token.token.Reveal();
  return NoStore(JsonResponse(201, reply));
}

Result<net::Response> OffersApi::ListOffers(const net::Request& request,
                                            const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(std::vector<Offer> offers,
                          store_.ListOffers(caller.is_admin() ? "" : caller.user.id));
  std::optional<std::string> connection_id = request.Query("connection_id");
  std::optional<std::string> state = request.Query("state");
  if (state && !ParseOfferState(*state)) {
    return InvalidArgumentError(
        "state must be draft, connected, in_review, qualified or suspended");
  }
  json::array list;
  for (const Offer& offer : offers) {
    if (connection_id && offer.connection_id != *connection_id) continue;
    if (state && OfferStateName(offer.state) != *state) continue;
    json::object entry = OfferToJson(offer);
    entry["mine"] = offer.owner_id == caller.user.id;
    list.push_back(std::move(entry));
  }
  // Everyone may reserve what is qualified: others' qualified offers are listed too, with
  // what a user needs to choose (never their review or execution details).
  if (!caller.is_admin() && !connection_id) {
    UPLINK_ASSIGN_OR_RETURN(std::vector<Offer> all, store_.ListOffers(""));
    for (const Offer& offer : all) {
      if (offer.owner_id == caller.user.id || offer.state != OfferState::kQualified) continue;
      if (state && *state != "qualified") continue;
      json::object entry = OfferToJson(offer);
      for (std::string_view hidden : {"review", "execution", "owner_id", "connection_id"}) {
        entry.erase(hidden);
      }
      entry["mine"] = false;
      list.push_back(std::move(entry));
    }
  }
  return JsonResponse(200, {{"offers", std::move(list)}});
}

Result<net::Response> OffersApi::ShowOffer(const std::string& id, const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Offer offer, VisibleOffer(id, caller, true));
  UPLINK_ASSIGN_OR_RETURN(json::object body, OfferDetails(offer));
  return JsonResponse(200, body);
}

Result<net::Response> OffersApi::ReviewOffer(const std::string& id, const net::Request& request,
                                             const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Offer offer, VisibleOffer(id, caller, true));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields(
      {"authority_confirmed", "hardware_compatible", "isolation_verified",
       "expiry_and_cleanup_checked", "disk_eviction_tested", "network_policy_enforced",
       "price_includes_traffic", "cpu_per_gpu", "memory_per_gpu", "disk_per_gpu",
       "transfer_budget_bytes", "approved_nodes", "notes"}));
  OfferReview review;
  for (auto [key, target] :
       {std::pair{"authority_confirmed", &review.authority_confirmed},
        std::pair{"hardware_compatible", &review.hardware_compatible},
        std::pair{"isolation_verified", &review.isolation_verified},
        std::pair{"expiry_and_cleanup_checked", &review.expiry_and_cleanup_checked},
        std::pair{"disk_eviction_tested", &review.disk_eviction_tested},
        std::pair{"network_policy_enforced", &review.network_policy_enforced},
        std::pair{"price_includes_traffic", &review.price_includes_traffic}}) {
    UPLINK_ASSIGN_OR_RETURN(*target, fields.RequiredBool(key));
  }
  UPLINK_ASSIGN_OR_RETURN(review.cpu_millis_per_gpu, ReadFigure(fields, "cpu_per_gpu", true, 1));
  UPLINK_ASSIGN_OR_RETURN(review.memory_bytes_per_gpu,
                          ReadFigure(fields, "memory_per_gpu", false, 1));
  UPLINK_ASSIGN_OR_RETURN(review.disk_bytes_per_gpu, ReadFigure(fields, "disk_per_gpu", false, 0));
  UPLINK_ASSIGN_OR_RETURN(review.transfer_budget_bytes,
                          ReadFigure(fields, "transfer_budget_bytes", false, 0));
  UPLINK_ASSIGN_OR_RETURN(auto notes, fields.String("notes", kMaxNotesBytes));
  review.notes = notes.value_or("");

  if (offer.state == OfferState::kDraft) {
    return FailedPreconditionError(
        "the offer's cluster has not reported its inventory yet, so there are no nodes to "
        "approve; install the inventory agent with the offer's token first");
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<Node> nodes, store_.ListNodes(offer.connection_id));
  const json::value* approved = fields.Find("approved_nodes");
  if (approved == nullptr || !approved->is_array()) {
    return InvalidArgumentError("approved_nodes must be an array of node names from the "
                                "inventory (possibly empty)");
  }
  std::set<std::string> seen;
  for (const json::value& item : approved->get_array()) {
    if (!item.is_string()) {
      return InvalidArgumentError("approved_nodes must hold node names (strings)");
    }
    std::string name(item.get_string());
    bool reported = std::any_of(nodes.begin(), nodes.end(),
                                [&](const Node& node) { return node.name == name; });
    if (!reported) {
      std::string known;
      for (size_t i = 0; i < nodes.size() && i < 10; ++i) known += (i ? ", " : "") + nodes[i].name;
      return InvalidArgumentError("node \"" + name.substr(0, 253) +
                                  "\" is not in the inventory the cluster reported (" +
                                  (known.empty() ? std::string("none") : known) +
                                  "); approve only reported nodes");
    }
    if (seen.insert(name).second) review.approved_nodes.push_back(std::move(name));
  }
  const WallTime now = clock_.Now();
  review.reviewed_by = caller.user.id;
  review.reviewed_by_label = caller.user.email;
  review.reviewed_at = now;
  const OfferState next = AfterReview(offer.state, review);
  json::object detail = ReviewJson(review);
  detail["from"] = OfferStateName(offer.state);
  detail["to"] = OfferStateName(next);
  UPLINK_RETURN_IF_ERROR(store_.SaveOfferReview(
      id, offer.state, review, next,
      CallerEvent(caller, now, "offer.review", "offer", id, offer.owner_id, detail)));
  signals_.Notify("offer:" + id);
  UPLINK_ASSIGN_OR_RETURN(Offer stored, store_.GetOffer(id));
  UPLINK_ASSIGN_OR_RETURN(json::object reply, OfferDetails(stored));
  return JsonResponse(200, reply);
}

Result<net::Response> OffersApi::SuspendOffer(const std::string& id, bool suspend,
                                              const net::Request& request,
                                              const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Offer offer, VisibleOffer(id, caller, true));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"reason"}));
  UPLINK_ASSIGN_OR_RETURN(auto reason, fields.String("reason", kMaxNotesBytes));
  OfferState next = suspend ? OfferState::kSuspended : Resumed(offer);
  if (suspend && offer.state == OfferState::kDraft) {
    return FailedPreconditionError("a draft offer is not bookable; there is nothing to suspend");
  }
  if (suspend == (offer.state == OfferState::kSuspended)) {
    return FailedPreconditionError(std::string("the offer is ") +
                                   std::string(OfferStateName(offer.state)) + " already" +
                                   (suspend ? "" : ", not suspended"));
  }
  const WallTime now = clock_.Now();
  UPLINK_RETURN_IF_ERROR(store_.SetOfferState(
      id, offer.state, next,
      CallerEvent(caller, now, suspend ? "offer.suspend" : "offer.resume", "offer", id,
                  offer.owner_id,
                  {{"from", OfferStateName(offer.state)},
                   {"to", OfferStateName(next)},
                   {"reason", reason.value_or("")}})));
  signals_.Notify("offer:" + id);
  UPLINK_ASSIGN_OR_RETURN(Offer stored, store_.GetOffer(id));
  UPLINK_ASSIGN_OR_RETURN(json::object reply, OfferDetails(stored));
  return JsonResponse(200, reply);
}

Result<net::Response> OffersApi::IssueExecution(const std::string& id, bool rotate,
                                                const net::Request& request,
                                                const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Offer offer, VisibleOffer(id, caller, false));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  ExecutionSettings settings = offer.execution;
  if (rotate) {
    UPLINK_RETURN_IF_ERROR(fields.OnlyFields({}));
    if (!offer.credential) {
      return FailedPreconditionError("the offer has no execution credential to rotate; create "
                                     "one with POST /api/v1/offers/" + id + "/execution");
    }
  } else {
    UPLINK_RETURN_IF_ERROR(fields.OnlyFields(
        {"namespace", "ssh_enabled", "kubernetes_api_cidrs", "kubernetes_api_port"}));
    if (CredentialLive(offer)) {
      return ConflictError("the offer has a live execution credential (" +
                           offer.credential->lookup_prefix +
                           "…); rotate it to get a new one (POST /api/v1/offers/" + id +
                           "/execution/rotate)");
    }
    UPLINK_ASSIGN_OR_RETURN(auto ns, fields.String("namespace", kMaxDnsLabelBytes));
    if (ns) {
      if (!IsDnsLabel(*ns)) {
        return InvalidArgumentError("namespace must be a Kubernetes namespace name");
      }
      settings.namespace_name = *ns;
    }
    UPLINK_ASSIGN_OR_RETURN(auto ssh, fields.Bool("ssh_enabled"));
    settings.ssh_enabled = ssh.value_or(settings.ssh_enabled);
    if (const json::value* cidrs = fields.Find("kubernetes_api_cidrs")) {
      if (!cidrs->is_array() || cidrs->get_array().size() > protocol::kMaxExecutionCidrs) {
        return InvalidArgumentError("kubernetes_api_cidrs must be an array of at most " +
                                    std::to_string(protocol::kMaxExecutionCidrs) + " networks");
      }
      settings.kubernetes_api_cidrs.clear();
      for (const json::value& item : cidrs->get_array()) {
        if (!item.is_string() || !protocol::IsCidr(item.get_string())) {
          return InvalidArgumentError(
              "kubernetes_api_cidrs must hold networks in CIDR notation, such as 10.96.0.1/32");
        }
        settings.kubernetes_api_cidrs.emplace_back(item.get_string());
      }
    }
    if (fields.Find("kubernetes_api_port")) {
      UPLINK_ASSIGN_OR_RETURN(settings.kubernetes_api_port,
                              fields.RequiredInt("kubernetes_api_port", 1, 65535));
    }
  }
  if (offer.state != OfferState::kQualified) {
    return FailedPreconditionError("the offer is " + std::string(OfferStateName(offer.state)) +
                                   "; execution is configured only for a qualified offer (an "
                                   "admin qualifies it after the resource review)");
  }
  if (!options_.agent_images.workspace) {
    return FailedPreconditionError(
        "this console was not told which workspace image to pin; start it with "
        "--workspace-image REPOSITORY@sha256:DIGEST");
  }
  const WallTime now = clock_.Now();
  MintedCredential minted = MintCredential(protocol::kExecutionCredentialPrefix);
  ExecutionCredential credential{HexEncode(RandomBytes(kIdBytes)), id, minted.lookup_prefix,
                                 minted.token_hash, now, std::nullopt};
  json::object detail{{"credential_prefix", credential.lookup_prefix},
                      {"namespace", settings.namespace_name},
                      {"ssh_enabled", settings.ssh_enabled}};
  if (offer.credential) detail["old_credential_prefix"] = offer.credential->lookup_prefix;
  UPLINK_RETURN_IF_ERROR(store_.EnableExecution(
      id, settings, credential,
      CallerEvent(caller, now, rotate ? "offer.execution_rotate" : "offer.execution_create",
                  "offer", id, offer.owner_id, detail)));
  log_.Info(rotate ? "execution credential rotated" : "execution credential created",
            {{"offer_id", id}, {"credential_prefix", credential.lookup_prefix}});
  signals_.Notify("offer:" + id);
  UPLINK_ASSIGN_OR_RETURN(Offer stored, store_.GetOffer(id));
  return NoStore(JsonResponse(rotate ? 200 : 201,
                              {{"credential", minted.token.Reveal()},
                               {"values", ExecutionValuesJson(stored, options_)},
                               {"helm_upgrade_command", HelmUpgradeCommand(stored)},
                               {"offer", OfferToJson(stored)}}));
}

Result<net::Response> OffersApi::ShowExecution(const std::string& id,
                                               const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Offer offer, VisibleOffer(id, caller, true));
  return JsonResponse(200, {{"values", ExecutionValuesJson(offer, options_)},
                            {"helm_upgrade_command", HelmUpgradeCommand(offer)},
                            {"helm_release", offer.helm_release},
                            {"enabled", offer.execution_enabled},
                            {"credential_live", CredentialLive(offer)}});
}

Result<net::Response> OffersApi::DisableExecution(const std::string& id, bool revoke,
                                                  const net::Request& request,
                                                  const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Offer offer, VisibleOffer(id, caller, false));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  UPLINK_RETURN_IF_ERROR(FieldReader(body, "").OnlyFields({}));
  const WallTime now = clock_.Now();
  json::object detail;
  if (offer.credential) detail["credential_prefix"] = offer.credential->lookup_prefix;
  UPLINK_RETURN_IF_ERROR(store_.DisableExecution(
      id, revoke,
      CallerEvent(caller, now, revoke ? "offer.execution_revoke" : "offer.execution_disable",
                  "offer", id, offer.owner_id, detail)));
  signals_.Notify("offer:" + id);
  UPLINK_ASSIGN_OR_RETURN(Offer stored, store_.GetOffer(id));
  UPLINK_ASSIGN_OR_RETURN(json::object reply, OfferDetails(stored));
  return JsonResponse(200, reply);
}

}  // namespace uplink::console
