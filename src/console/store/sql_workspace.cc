// SqlStore's workspace execution (workspace_store.h): offers, reviews, execution
// credentials, reservations and their transitions, the controller's events, and commands
// with their output.

#include <algorithm>
#include <limits>
#include <map>

#include "common/crypto.h"
#include "common/json.h"
#include "console/store/sql_statement.h"
#include "console/store/sql_store.h"
#include "protocol/agent_api.h"

namespace uplink::console {
namespace {

constexpr std::string_view kOfferStateNames[] = {"draft", "connected", "in_review", "qualified",
                                                 "suspended"};

constexpr const char* kOfferColumns =
    "o.id, o.owner_id, o.connection_id, c.cluster_name, o.gpus, o.country, o.available_from, "
    "o.available_until, o.price_per_gpu_hour, o.currency, o.max_lifetime_seconds, o.state, "
    "o.created_at, o.updated_at, o.execution_enabled, o.workload_namespace, o.ssh_enabled, "
    "o.kubernetes_api_cidrs, o.kubernetes_api_port, o.helm_release, o.controller_namespace, "
    "o.controller_version, o.controller_seen_at, o.controller_draining";

constexpr const char* kReviewColumns =
    "authority_confirmed, hardware_compatible, isolation_verified, expiry_and_cleanup_checked, "
    "disk_eviction_tested, network_policy_enforced, price_includes_traffic, cpu_millis_per_gpu, "
    "memory_bytes_per_gpu, disk_bytes_per_gpu, transfer_budget_bytes, notes, reviewed_by, "
    "reviewed_by_label, reviewed_at";

constexpr const char* kReservationColumns =
    "r.id, r.offer_id, r.owner_id, u.email, r.gpus, r.node, r.pod, r.state, r.created_at, "
    "r.expires_at, r.cpu_millis, r.memory_bytes, r.ephemeral_storage_bytes, r.ended_at, "
    "r.transfer_budget_bytes, r.transfer_used_bytes, r.ssh_host_key, r.ssh_reported_at, "
    "r.ssh_handover_at";

constexpr const char* kSshGrantColumns =
    "id, reservation_id, key_type, public_key, fingerprint, comment, created_by, created_at, "
    "expires_at, revoked_at, revoked_by";

constexpr const char* kCommandColumns =
    "id, reservation_id, kind, code, timeout_seconds, output_cap_bytes, state, exit_code, "
    "output_bytes, truncated, message, created_by, created_at, started_at, finished_at";

constexpr const char* kActiveStates = "('reserved', 'provisioning', 'running', 'stopping')";

std::vector<std::string> StringsFromJson(const std::string& text) {
  std::vector<std::string> out;
  auto parsed = ParseJson(text);
  if (!parsed.ok() || !parsed->is_array()) return out;
  for (const json::value& item : parsed->get_array()) {
    if (item.is_string()) out.emplace_back(item.get_string());
  }
  return out;
}

Offer OfferFromRow(const auto& row) {
  Offer offer;
  offer.id = row.Text(0);
  offer.owner_id = row.Text(1);
  offer.connection_id = row.Text(2);
  offer.cluster_name = row.Text(3);
  offer.gpus = row.Int(4);
  offer.country = row.Text(5);
  offer.availability.from = row.OptionalTime(6);
  offer.availability.until = row.OptionalTime(7);
  offer.price_per_gpu_hour = row.Text(8);
  offer.currency = row.Text(9);
  offer.max_lifetime_seconds = row.Int(10);
  offer.state = ParseOfferState(row.Text(11)).value_or(OfferState::kDraft);
  offer.created_at = row.Time(12);
  offer.updated_at = row.Time(13);
  offer.execution_enabled = row.Int(14) != 0;
  offer.execution.namespace_name = row.Text(15);
  offer.execution.ssh_enabled = row.Int(16) != 0;
  offer.execution.kubernetes_api_cidrs = StringsFromJson(row.Text(17));
  offer.execution.kubernetes_api_port = row.Int(18);
  offer.helm_release = row.Text(19);
  offer.controller_namespace = row.Text(20);
  offer.controller_version = row.Text(21);
  offer.controller_seen_at = row.OptionalTime(22);
  offer.controller_draining = row.Int(23) != 0;
  return offer;
}

Reservation ReservationFromRow(const auto& row) {
  Reservation r;
  r.id = row.Text(0);
  r.offer_id = row.Text(1);
  r.owner_id = row.Text(2);
  r.owner_label = row.Text(3);
  r.gpus = row.Int(4);
  r.node = row.Text(5);
  r.pod = row.Text(6);
  r.state = row.Text(7);
  r.created_at = row.Time(8);
  r.expires_at = row.Time(9);
  r.cpu_millis = row.Int(10);
  r.memory_bytes = row.Int(11);
  r.ephemeral_storage_bytes = row.Int(12);
  r.ended_at = row.OptionalTime(13);
  r.transfer_budget_bytes = row.Int(14);
  r.transfer_used_bytes = row.Int(15);
  r.ssh_host_key = row.Text(16);
  r.ssh_reported_at = row.OptionalTime(17);
  r.ssh_handover_at = row.OptionalTime(18);
  return r;
}

// FailedPrecondition, saying that `what` happens only then, unless the reservation is active
// and not stopping.
Status RequireNotStopped(const Reservation& reservation, std::string_view what) {
  if (IsActiveReservationState(reservation.state) &&
      reservation.state != protocol::kReservationStopping) {
    return Status::Ok();
  }
  return FailedPreconditionError("reservation " + reservation.id + " is " + reservation.state +
                                 "; " + std::string(what) +
                                 " only in a reservation that has not been stopped");
}

SshGrant SshGrantFromRow(const auto& row) {
  SshGrant g;
  g.id = row.Text(0);
  g.reservation_id = row.Text(1);
  g.key_type = row.Text(2);
  g.public_key = row.Text(3);
  g.fingerprint = row.Text(4);
  g.comment = row.Text(5);
  g.created_by = row.Text(6);
  g.created_at = row.Time(7);
  g.expires_at = row.Time(8);
  g.revoked_at = row.OptionalTime(9);
  g.revoked_by = row.Text(10);
  return g;
}

WorkspaceCommandRecord CommandFromRow(const auto& row) {
  WorkspaceCommandRecord c;
  c.id = row.Text(0);
  c.reservation_id = row.Text(1);
  c.kind = row.Text(2);
  c.code = row.Text(3);
  c.timeout_seconds = row.Int(4);
  c.output_cap_bytes = row.Int(5);
  c.state = row.Text(6);
  if (!row.IsNull(7)) c.exit_code = static_cast<int>(row.Int(7));
  c.output_bytes = row.Int(8);
  c.truncated = row.Int(9) != 0;
  c.message = row.Text(10);
  c.created_by = row.Text(11);
  c.created_at = row.Time(12);
  c.started_at = row.OptionalTime(13);
  c.finished_at = row.OptionalTime(14);
  return c;
}

// `audit` with `extra` merged into its detail.
AuditEvent WithDetail(const AuditEvent& audit, const json::object& extra) {
  AuditEvent event = audit;
  json::object detail;
  if (auto given = ParseJson(audit.detail.empty() ? "{}" : audit.detail);
      given.ok() && given->is_object()) {
    detail = std::move(given->get_object());
  }
  for (const auto& field : extra) detail[field.key()] = field.value();
  event.detail = ToJson(detail);
  return event;
}

std::string GpuCount(std::int64_t gpus) {
  return std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
}

}  // namespace

// ---- names and rules -------------------------------------------------------------------------

std::string_view OfferStateName(OfferState state) {
  return kOfferStateNames[static_cast<size_t>(state)];
}

std::optional<OfferState> ParseOfferState(std::string_view name) {
  for (size_t i = 0; i < std::size(kOfferStateNames); ++i) {
    if (kOfferStateNames[i] == name) return static_cast<OfferState>(i);
  }
  return std::nullopt;
}

bool IsOfferId(std::string_view id) {
  return protocol::IsPrefixedHexId(id, kOfferIdPrefix, protocol::kWorkspaceIdHexDigits);
}

std::string NewOfferId() {
  return protocol::NewPrefixedHexId(kOfferIdPrefix, protocol::kWorkspaceIdHexDigits);
}

bool OfferReview::Qualifies() const {
  return authority_confirmed && hardware_compatible && isolation_verified &&
         expiry_and_cleanup_checked && disk_eviction_tested && network_policy_enforced &&
         price_includes_traffic && !approved_nodes.empty();
}

bool IsActiveReservationState(std::string_view state) {
  return state == protocol::kReservationReserved || state == protocol::kReservationProvisioning ||
         state == protocol::kReservationRunning || state == protocol::kReservationStopping;
}

bool IsFinalReservationState(std::string_view state) {
  return state == protocol::kReservationCompleted || state == protocol::kReservationCancelled ||
         state == protocol::kReservationFailed || state == protocol::kReservationExpired;
}

bool ReservationTransitionAllowed(std::string_view from, std::string_view to) {
  using namespace protocol;
  struct Edge {
    std::string_view from;
    std::initializer_list<std::string_view> to;
  };
  // Failed and expired can end any active state; the rest go forward only.
  static const Edge kEdges[] = {
      {kReservationReserved,
       {kReservationProvisioning, kReservationRunning, kReservationStopping,
        kReservationCancelled}},
      {kReservationProvisioning, {kReservationRunning, kReservationStopping, kReservationCompleted}},
      {kReservationRunning, {kReservationStopping, kReservationCompleted}},
      {kReservationStopping, {kReservationCompleted, kReservationCancelled}},
  };
  if (!IsActiveReservationState(from)) return false;
  if (to == kReservationFailed || to == kReservationExpired) return true;
  for (const Edge& edge : kEdges) {
    if (edge.from == from) return std::find(edge.to.begin(), edge.to.end(), to) != edge.to.end();
  }
  return false;
}

// ---- offers -----------------------------------------------------------------------------------

Result<std::vector<Offer>> SqlStore::QueryOffers(sql::Database& database, const std::string& tail,
                                                 const Binder& bind) {
  std::vector<Offer> offers;
  std::string sql = std::string("SELECT ") + kOfferColumns +
                    " FROM offers o JOIN connections c ON c.id = o.connection_id " + tail;
  UPLINK_RETURN_IF_ERROR(ForEachRowOn(
      database, sql.c_str(), bind,
      [&](const Statement& row) { offers.push_back(OfferFromRow(row)); }, "reading offers"));
  for (Offer& offer : offers) {
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        (std::string("SELECT ") + kReviewColumns + " FROM offer_reviews WHERE offer_id = ?")
            .c_str(),
        [&](Statement& s) { s.Bind(offer.id); },
        [&](const Statement& row) {
          OfferReview review;
          review.authority_confirmed = row.Int(0) != 0;
          review.hardware_compatible = row.Int(1) != 0;
          review.isolation_verified = row.Int(2) != 0;
          review.expiry_and_cleanup_checked = row.Int(3) != 0;
          review.disk_eviction_tested = row.Int(4) != 0;
          review.network_policy_enforced = row.Int(5) != 0;
          review.price_includes_traffic = row.Int(6) != 0;
          review.cpu_millis_per_gpu = row.Int(7);
          review.memory_bytes_per_gpu = row.Int(8);
          review.disk_bytes_per_gpu = row.Int(9);
          review.transfer_budget_bytes = row.Int(10);
          review.notes = row.Text(11);
          review.reviewed_by = row.Text(12);
          review.reviewed_by_label = row.Text(13);
          review.reviewed_at = row.Time(14);
          offer.review = std::move(review);
        },
        "reading the offer's review"));
    if (offer.review) {
      UPLINK_RETURN_IF_ERROR(ForEachRowOn(
          database, "SELECT node FROM offer_nodes WHERE offer_id = ? ORDER BY node",
          [&](Statement& s) { s.Bind(offer.id); },
          [&](const Statement& row) { offer.review->approved_nodes.push_back(row.Text(0)); },
          "reading the offer's approved nodes"));
    }
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT id, offer_id, lookup_prefix, token_hash, created_at, revoked_at "
        "FROM execution_credentials WHERE offer_id = ? ORDER BY created_at DESC, rowid DESC "
        "LIMIT 1",
        [&](Statement& s) { s.Bind(offer.id); },
        [&](const Statement& row) {
          offer.credential = ExecutionCredential{row.Text(0), row.Text(1),         row.Text(2),
                                                 row.Text(3), row.Time(4), row.OptionalTime(5)};
        },
        "reading the offer's execution credential"));
  }
  return offers;
}

Result<Offer> SqlStore::ReadOffer(sql::Database& database, const std::string& id) {
  UPLINK_ASSIGN_OR_RETURN(
      std::vector<Offer> offers,
      QueryOffers(database, "WHERE o.id = ?", [&](Statement& s) { s.Bind(id); }));
  if (offers.empty()) return NotFoundError("offer " + id + " does not exist");
  return std::move(offers.front());
}

Status SqlStore::CreateOffer(const Offer& offer, const Connection& connection,
                                const AuditEvent& connection_audit,
                                const AuditEvent& offer_audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertConnection(connection));
    UPLINK_RETURN_IF_ERROR(InsertAudit(connection_audit));
    UPLINK_RETURN_IF_ERROR(
        Change("INSERT INTO offers (id, owner_id, connection_id, gpus, country, available_from, "
               "available_until, price_per_gpu_hour, currency, max_lifetime_seconds, state, "
               "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               [&](Statement& s) {
                 s.Bind(offer.id).Bind(offer.owner_id).Bind(connection.id).Bind(offer.gpus);
                 s.Bind(offer.country).Bind(offer.availability.from);
                 s.Bind(offer.availability.until).Bind(offer.price_per_gpu_hour);
                 s.Bind(offer.currency).Bind(offer.max_lifetime_seconds);
                 s.Bind(OfferStateName(offer.state)).Bind(offer.created_at);
                 s.Bind(offer.created_at);
               },
               "creating offer")
            .status());
    return InsertAudit(offer_audit);
  });
}

Result<Offer> SqlStore::GetOffer(const std::string& id) {
  return ReadSnapshotOnLookup([&](sql::Database& database) { return ReadOffer(database, id); });
}

Result<std::vector<Offer>> SqlStore::ListOffers(const std::string& owner_id) {
  return ReadSnapshotOnLookup([&](sql::Database& database) {
    if (owner_id.empty()) {
      return QueryOffers(database, "ORDER BY o.created_at DESC, o.id", [](Statement&) {});
    }
    return QueryOffers(database, "WHERE o.owner_id = ? ORDER BY o.created_at DESC, o.id",
                       [&](Statement& s) { s.Bind(owner_id); });
  });
}

Status SqlStore::MoveOfferState(const std::string& offer_id, OfferState expected,
                                   OfferState state, WallTime at) {
  UPLINK_ASSIGN_OR_RETURN(
      int changed, Change("UPDATE offers SET state = ?, updated_at = ? WHERE id = ? AND state = ?",
                          [&](Statement& s) {
                            s.Bind(OfferStateName(state)).Bind(at).Bind(offer_id);
                            s.Bind(OfferStateName(expected));
                          },
                          "changing the offer's state"));
  if (changed == 0) {
    UPLINK_ASSIGN_OR_RETURN(Offer now, ReadOffer(*db_, offer_id));
    return FailedPreconditionError("the offer is " + std::string(OfferStateName(now.state)) +
                                   " now, not " + std::string(OfferStateName(expected)) +
                                   "; reload it and try again");
  }
  return Status::Ok();
}

Status SqlStore::SaveOfferReview(const std::string& offer_id, OfferState expected,
                                    const OfferReview& review, OfferState state,
                                    const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(MoveOfferState(offer_id, expected, state, audit.at));
    UPLINK_RETURN_IF_ERROR(
        Change("INSERT INTO offer_reviews (offer_id, authority_confirmed, "
               "hardware_compatible, isolation_verified, expiry_and_cleanup_checked, "
               "disk_eviction_tested, network_policy_enforced, price_includes_traffic, "
               "cpu_millis_per_gpu, memory_bytes_per_gpu, disk_bytes_per_gpu, "
               "transfer_budget_bytes, notes, reviewed_by, reviewed_by_label, reviewed_at) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
               "ON CONFLICT (offer_id) DO UPDATE SET "
               "authority_confirmed = excluded.authority_confirmed, "
               "hardware_compatible = excluded.hardware_compatible, "
               "isolation_verified = excluded.isolation_verified, "
               "expiry_and_cleanup_checked = excluded.expiry_and_cleanup_checked, "
               "disk_eviction_tested = excluded.disk_eviction_tested, "
               "network_policy_enforced = excluded.network_policy_enforced, "
               "price_includes_traffic = excluded.price_includes_traffic, "
               "cpu_millis_per_gpu = excluded.cpu_millis_per_gpu, "
               "memory_bytes_per_gpu = excluded.memory_bytes_per_gpu, "
               "disk_bytes_per_gpu = excluded.disk_bytes_per_gpu, "
               "transfer_budget_bytes = excluded.transfer_budget_bytes, "
               "notes = excluded.notes, reviewed_by = excluded.reviewed_by, "
               "reviewed_by_label = excluded.reviewed_by_label, "
               "reviewed_at = excluded.reviewed_at",
               [&](Statement& s) {
                 s.Bind(offer_id).Bind(review.authority_confirmed);
                 s.Bind(review.hardware_compatible).Bind(review.isolation_verified);
                 s.Bind(review.expiry_and_cleanup_checked).Bind(review.disk_eviction_tested);
                 s.Bind(review.network_policy_enforced).Bind(review.price_includes_traffic);
                 s.Bind(review.cpu_millis_per_gpu).Bind(review.memory_bytes_per_gpu);
                 s.Bind(review.disk_bytes_per_gpu).Bind(review.transfer_budget_bytes);
                 s.Bind(review.notes).Bind(review.reviewed_by).Bind(review.reviewed_by_label);
                 s.Bind(review.reviewed_at);
               },
               "storing the review")
            .status());
    UPLINK_RETURN_IF_ERROR(Change("DELETE FROM offer_nodes WHERE offer_id = ?",
                                  [&](Statement& s) { s.Bind(offer_id); },
                                  "replacing approved nodes")
                               .status());
    for (const std::string& node : review.approved_nodes) {
      UPLINK_RETURN_IF_ERROR(Change("INSERT INTO offer_nodes (offer_id, node) VALUES (?, ?)",
                                    [&](Statement& s) { s.Bind(offer_id).Bind(node); },
                                    "storing an approved node")
                                 .status());
    }
    return InsertAudit(audit);
  });
}

Status SqlStore::SetOfferState(const std::string& offer_id, OfferState expected,
                                  OfferState state, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(MoveOfferState(offer_id, expected, state, audit.at));
    return InsertAudit(audit);
  });
}

Status SqlStore::MarkOfferConnected(const std::string& connection_id, const std::string& offer_id,
                                    const std::string& owner_id, const AuditEvent& audit) {
  UPLINK_RETURN_IF_ERROR(
      MoveOfferState(offer_id, OfferState::kDraft, OfferState::kConnected, audit.at));
  AuditEvent connected = audit;
  connected.action = "offer.connected";
  connected.outcome = "ok";
  connected.target_type = "offer";
  connected.target_id = offer_id;
  connected.owner_id = owner_id;
  connected.detail = ToJson(json::object{{"connection_id", connection_id}});
  return DeferAudit(connected);
}

// ---- execution --------------------------------------------------------------------------------

Status SqlStore::EnableExecution(const std::string& offer_id, const ExecutionSettings& settings,
                                    const std::optional<ExecutionCredential>& credential,
                                    const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    json::array cidrs(settings.kubernetes_api_cidrs.begin(), settings.kubernetes_api_cidrs.end());
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE offers SET execution_enabled = 1, workload_namespace = ?, ssh_enabled = ?, "
               "kubernetes_api_cidrs = ?, kubernetes_api_port = ?, updated_at = ? WHERE id = ?",
               [&](Statement& s) {
                 s.Bind(settings.namespace_name).Bind(settings.ssh_enabled).Bind(ToJson(cidrs));
                 s.Bind(settings.kubernetes_api_port).Bind(audit.at).Bind(offer_id);
               },
               "enabling execution"));
    if (changed == 0) return NotFoundError("offer " + offer_id + " does not exist");
    if (credential) {
      UPLINK_RETURN_IF_ERROR(Change("UPDATE execution_credentials SET revoked_at = ? "
                                    "WHERE offer_id = ? AND revoked_at IS NULL",
                                    [&](Statement& s) { s.Bind(audit.at).Bind(offer_id); },
                                    "revoking the earlier execution credential")
                                 .status());
      UPLINK_RETURN_IF_ERROR(
          Change("INSERT INTO execution_credentials (id, offer_id, lookup_prefix, token_hash, "
                 "created_at) VALUES (?, ?, ?, ?, ?)",
                 [&](Statement& s) {
                   s.Bind(credential->id).Bind(offer_id).Bind(credential->lookup_prefix);
                   s.Bind(credential->token_hash).Bind(credential->created_at);
                 },
                 "storing the execution credential")
              .status());
    }
    return InsertAudit(audit);
  });
}

Result<std::int64_t> SqlStore::CountActiveReservations(const std::string& offer_id) {
  std::int64_t count = 0;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      (std::string("SELECT COUNT(*) FROM reservations WHERE offer_id = ? AND state IN ") +
       kActiveStates)
          .c_str(),
      [&](Statement& s) { s.Bind(offer_id); }, [&](const Statement& row) { count = row.Int(0); },
      "counting active reservations"));
  return count;
}

Status SqlStore::DisableExecution(const std::string& offer_id, bool revoke_credential,
                                     const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(std::int64_t active, CountActiveReservations(offer_id));
    if (active > 0) {
      return FailedPreconditionError(
          "the offer has " + std::to_string(active) + " active reservation" +
          (active == 1 ? "" : "s") +
          "; stop them first (uplink reservations stop ID), then disable execution");
    }
    UPLINK_ASSIGN_OR_RETURN(int changed,
                            Change("UPDATE offers SET execution_enabled = 0, updated_at = ? "
                                   "WHERE id = ?",
                                   [&](Statement& s) { s.Bind(audit.at).Bind(offer_id); },
                                   "disabling execution"));
    if (changed == 0) return NotFoundError("offer " + offer_id + " does not exist");
    if (revoke_credential) {
      UPLINK_RETURN_IF_ERROR(Change("UPDATE execution_credentials SET revoked_at = ? "
                                    "WHERE offer_id = ? AND revoked_at IS NULL",
                                    [&](Statement& s) { s.Bind(audit.at).Bind(offer_id); },
                                    "revoking the execution credential")
                                 .status());
    }
    return InsertAudit(audit);
  });
}

Result<std::vector<ExecutionCredential>> SqlStore::FindExecutionCredentialsByPrefix(
    const std::string& lookup_prefix) {
  std::vector<ExecutionCredential> found;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT id, offer_id, lookup_prefix, token_hash, created_at, revoked_at "
      "FROM execution_credentials WHERE lookup_prefix = ?",
      [&](Statement& s) { s.Bind(lookup_prefix); },
      [&](const Statement& row) {
        found.push_back(ExecutionCredential{row.Text(0), row.Text(1), row.Text(2), row.Text(3),
                                            row.Time(4), row.OptionalTime(5)});
      },
      "looking up execution credentials"));
  return found;
}

Status SqlStore::BindExecutionCluster(const std::string& offer_id,
                                         const std::string& credential_hash,
                                         const std::string& cluster_uid,
                                         const AuditEvent& audit) {
  Status refusal;
  Status status = WriteTransaction([&]() -> Status {
    bool live = false;
    std::string connection_id;
    std::optional<std::string> bound;
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT o.connection_id, c.cluster_uid FROM execution_credentials e "
        "JOIN offers o ON o.id = e.offer_id JOIN connections c ON c.id = o.connection_id "
        "WHERE e.offer_id = ? AND e.token_hash = ? AND e.revoked_at IS NULL",
        [&](Statement& s) { s.Bind(offer_id).Bind(credential_hash); },
        [&](const Statement& row) {
          live = true;
          connection_id = row.Text(0);
          bound = row.OptionalText(1);
        },
        "reading the execution credential"));
    if (!live) {
      return UnauthenticatedError("the execution credential was rotated or revoked while this "
                                  "call was being received; nothing was stored");
    }
    return BindOrRefuse(connection_id, bound, cluster_uid, audit,
                        json::object{{"cluster_uid", cluster_uid}, {"call", "workspace"}},
                        refusal);
  }, CredentialCache::kKeep);
  if (!status.ok()) return status;
  return refusal;
}

// ---- reservations -----------------------------------------------------------------------------

Result<std::vector<Reservation>> SqlStore::QueryReservations(sql::Database& database,
                                                             const std::string& tail,
                                                             const Binder& bind) {
  std::vector<Reservation> reservations;
  std::string sql = std::string("SELECT ") + kReservationColumns +
                    " FROM reservations r JOIN users u ON u.id = r.owner_id " + tail;
  UPLINK_RETURN_IF_ERROR(ForEachRowOn(
      database, sql.c_str(), bind,
      [&](const Statement& row) { reservations.push_back(ReservationFromRow(row)); },
      "reading reservations"));
  for (Reservation& r : reservations) {
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT state, reason, source, at FROM reservation_transitions "
        "WHERE reservation_id = ? ORDER BY id",
        [&](Statement& s) { s.Bind(r.id); },
        [&](const Statement& row) {
          r.transitions.push_back({row.Text(0), row.Text(1), row.Text(2), row.Time(3)});
        },
        "reading transitions"));
  }
  return reservations;
}

Result<Reservation> SqlStore::ReadReservation(sql::Database& database, const std::string& id) {
  UPLINK_ASSIGN_OR_RETURN(
      std::vector<Reservation> found,
      QueryReservations(database, "WHERE r.id = ?", [&](Statement& s) { s.Bind(id); }));
  if (found.empty()) return NotFoundError("reservation " + id + " does not exist");
  return std::move(found.front());
}

Status SqlStore::TransitionReservation(const Reservation& reservation, std::string_view state,
                                          std::string_view reason, std::string_view source,
                                          WallTime at, const AuditEvent& audit) {
  const bool final = IsFinalReservationState(state);
  UPLINK_RETURN_IF_ERROR(
      Change("UPDATE reservations SET state = ?, ended_at = CASE WHEN ? <> 0 THEN ? ELSE ended_at END "
             "WHERE id = ?",
             [&](Statement& s) { s.Bind(state).Bind(final).Bind(at).Bind(reservation.id); },
             "changing the reservation's state")
          .status());
  UPLINK_RETURN_IF_ERROR(
      Change("INSERT INTO reservation_transitions (reservation_id, state, reason, source, at) "
             "VALUES (?, ?, ?, ?, ?)",
             [&](Statement& s) {
               s.Bind(reservation.id).Bind(state).Bind(reason).Bind(source).Bind(at);
             },
             "recording the transition")
          .status());
  if (final) {
    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE workspace_commands SET state = 'cancelled', finished_at = ?, message = ? "
               "WHERE reservation_id = ? AND state IN ('queued', 'running')",
               [&](Statement& s) {
                 s.Bind(at).Bind("the reservation ended (" + std::string(state) + ")");
                 s.Bind(reservation.id);
               },
               "cancelling the reservation's commands")
            .status());
  }
  AuditEvent event = WithDetail(audit, {{"from", reservation.state},
                                        {"to", state},
                                        {"reason", reason},
                                        {"source", source}});
  event.action = "reservation." + std::string(state);
  event.target_type = "reservation";
  event.target_id = reservation.id;
  event.owner_id = reservation.owner_id;
  return InsertAudit(event);
}

Result<Reservation> SqlStore::CreateReservation(
    const Reservation& reservation, const std::vector<PlacementCandidate>& candidates,
    const AuditEvent& audit) {
  Reservation placed = reservation;
  Status status = WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(Offer offer, ReadOffer(*db_, reservation.offer_id));
    if (offer.state != OfferState::kQualified) {
      return FailedPreconditionError("offer " + offer.id + " is " +
                                     std::string(OfferStateName(offer.state)) +
                                     ", not qualified: it cannot be reserved until an admin "
                                     "qualifies it");
    }
    if (!offer.execution_enabled) {
      return FailedPreconditionError("offer " + offer.id +
                                     " has execution disabled; its supplier must enable it");
    }
    std::int64_t reserved = 0;
    std::map<std::string, std::int64_t, std::less<>> used_by_node;
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        (std::string("SELECT node, SUM(gpus) FROM reservations WHERE offer_id = ? AND state IN ") +
         kActiveStates + " GROUP BY node")
            .c_str(),
        [&](Statement& s) { s.Bind(offer.id); },
        [&](const Statement& row) {
          used_by_node[row.Text(0)] = row.Int(1);
          reserved += row.Int(1);
        },
        "counting reserved GPUs"));
    if (reserved + reservation.gpus > offer.gpus) {
      return FailedPreconditionError(
          "offer " + offer.id + " has a capacity limit of " + GpuCount(offer.gpus) + " and " +
          std::to_string(reserved) + " are reserved: at most " +
          GpuCount(std::max<std::int64_t>(0, offer.gpus - reserved)) +
          " can be reserved now; ask for fewer or try later");
    }
    const PlacementCandidate* best = nullptr;
    std::int64_t best_free = std::numeric_limits<std::int64_t>::max();
    std::int64_t most_free = 0;
    for (const PlacementCandidate& candidate : candidates) {
      auto used = used_by_node.find(candidate.node);
      std::int64_t free =
          candidate.allocatable_gpus - (used == used_by_node.end() ? 0 : used->second);
      most_free = std::max(most_free, free);
      // The least room that fits: large nodes stay free for large reservations.
      if (free >= reservation.gpus && free < best_free) {
        best = &candidate;
        best_free = free;
      }
    }
    if (best == nullptr) {
      return FailedPreconditionError(
          "no approved node of offer " + offer.id + " that is ready has " +
          GpuCount(reservation.gpus) + " free (the most free on one node is " +
          std::to_string(most_free) + "); ask for fewer GPUs or try later");
    }
    placed.node = best->node;
    placed.state = std::string(protocol::kReservationReserved);
    UPLINK_RETURN_IF_ERROR(
        Change("INSERT INTO reservations (id, offer_id, owner_id, gpus, node, state, created_at, "
               "expires_at, cpu_millis, memory_bytes, ephemeral_storage_bytes, "
               "transfer_budget_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               [&](Statement& s) {
                 s.Bind(placed.id).Bind(placed.offer_id).Bind(placed.owner_id).Bind(placed.gpus);
                 s.Bind(placed.node).Bind(placed.state).Bind(placed.created_at);
                 s.Bind(placed.expires_at).Bind(placed.cpu_millis).Bind(placed.memory_bytes);
                 s.Bind(placed.ephemeral_storage_bytes).Bind(placed.transfer_budget_bytes);
               },
               "storing the reservation")
            .status());
    UPLINK_RETURN_IF_ERROR(
        Change("INSERT INTO reservation_transitions (reservation_id, state, reason, source, at) "
               "VALUES (?, ?, ?, ?, ?)",
               [&](Statement& s) {
                 s.Bind(placed.id).Bind(placed.state);
                 s.Bind("placed on " + placed.node).Bind("user").Bind(placed.created_at);
               },
               "recording the transition")
            .status());
    return InsertAudit(WithDetail(audit, {{"node", placed.node}}));
  });
  UPLINK_RETURN_IF_ERROR(status);
  return GetReservation(placed.id);
}

Result<Reservation> SqlStore::GetReservation(const std::string& id) {
  return ReadSnapshotOnLookup(
      [&](sql::Database& database) { return ReadReservation(database, id); });
}

Result<std::vector<Reservation>> SqlStore::ListReservations(const ReservationQuery& query) {
  std::string where = "WHERE TRUE";
  if (query.owner_id) where += " AND r.owner_id = ?";
  if (query.offer_id) where += " AND r.offer_id = ?";
  if (query.active_only) where += std::string(" AND r.state IN ") + kActiveStates;
  where += " ORDER BY r.created_at DESC, r.id LIMIT ?";
  return ReadSnapshotOnLookup([&](sql::Database& database) {
    return QueryReservations(database, where, [&](Statement& s) {
      if (query.owner_id) s.Bind(*query.owner_id);
      if (query.offer_id) s.Bind(*query.offer_id);
      s.Bind(static_cast<std::int64_t>(std::clamp(query.limit, 1, 1000)));
    });
  });
}

Result<Reservation> SqlStore::StopReservation(const std::string& id, const std::string& reason,
                                                 const AuditEvent& audit) {
  Status status = WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(Reservation reservation, ReadReservation(*db_, id));
    if (IsFinalReservationState(reservation.state)) {
      return FailedPreconditionError("reservation " + id + " already ended (" +
                                     reservation.state + "); there is nothing to stop");
    }
    if (reservation.state == protocol::kReservationStopping) return Status::Ok();
    // Nothing was created for a reserved one yet: it ends now. A workspace the controller
    // made meanwhile is an orphan to it and deleted.
    std::string_view next = reservation.state == protocol::kReservationReserved
                                ? protocol::kReservationCancelled
                                : protocol::kReservationStopping;
    return TransitionReservation(reservation, next, reason, "user", audit.at, audit);
  });
  UPLINK_RETURN_IF_ERROR(status);
  return GetReservation(id);
}

Result<Reservation> SqlStore::ExtendReservation(const std::string& id, WallTime expires_at,
                                                   const AuditEvent& audit) {
  Status status = WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(Reservation reservation, ReadReservation(*db_, id));
    if (!IsActiveReservationState(reservation.state) ||
        reservation.state == protocol::kReservationStopping) {
      return FailedPreconditionError("reservation " + id + " is " + reservation.state +
                                     "; only a reservation that has not been stopped can be "
                                     "extended");
    }
    UPLINK_RETURN_IF_ERROR(Change("UPDATE reservations SET expires_at = ? WHERE id = ?",
                                  [&](Statement& s) { s.Bind(expires_at).Bind(id); },
                                  "extending the reservation")
                               .status());
    return InsertAudit(
        WithDetail(audit, {{"previous_expires_at", FormatRfc3339(reservation.expires_at)},
                           {"expires_at", FormatRfc3339(expires_at)}}));
  });
  UPLINK_RETURN_IF_ERROR(status);
  return GetReservation(id);
}

Result<std::int64_t> SqlStore::ExpireOverdueReservations(WallTime now,
                                                            std::chrono::seconds grace,
                                                            const AuditEvent& audit) {
  std::int64_t ended = 0;
  Status status = WriteTransaction([&]() -> Status {
    ended = 0;
    UPLINK_ASSIGN_OR_RETURN(std::vector<Reservation> overdue,
                            QueryReservations(*db_,
                                              std::string("WHERE r.state IN ") + kActiveStates +
                                                  " AND r.expires_at < ? LIMIT 256",
                                              [&](Statement& s) { s.Bind(now - grace); }));
    for (const Reservation& reservation : overdue) {
      UPLINK_RETURN_IF_ERROR(TransitionReservation(
          reservation, protocol::kReservationExpired,
          "past its expiry and the workspace controller has not reported its end; the pod's "
          "activeDeadlineSeconds ended it in the cluster",
          "console", now, audit));
      ++ended;
    }
    return Status::Ok();
  });
  UPLINK_RETURN_IF_ERROR(status);
  return ended;
}

// ---- the controller ---------------------------------------------------------------------------

Result<std::vector<std::string>> SqlStore::ApplyWorkspaceSync(
    const std::string& offer_id, const protocol::WorkspaceSync& sync, WallTime now,
    const AuditEvent& audit) {
  std::vector<std::string> acknowledged;
  Status status = WriteTransaction([&]() -> Status {
    acknowledged.clear();
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE offers SET helm_release = ?, controller_namespace = ?, "
               "controller_version = ?, controller_seen_at = ?, controller_draining = ? "
               "WHERE id = ?",
               [&](Statement& s) {
                 s.Bind(sync.release).Bind(sync.namespace_name).Bind(sync.version).Bind(now);
                 s.Bind(sync.draining).Bind(offer_id);
               },
               "recording the controller"));
    if (changed == 0) return NotFoundError("offer " + offer_id + " does not exist");
    for (const protocol::WorkspaceEvent& event : sync.events) {
      UPLINK_ASSIGN_OR_RETURN(
          int fresh, Change("INSERT INTO workspace_event_keys (offer_id, key, "
                            "applied_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                            [&](Statement& s) { s.Bind(offer_id).Bind(event.key).Bind(now); },
                            "remembering the event"));
      acknowledged.push_back(event.key);
      if (fresh == 0) continue;  // applied before
      auto reservation = ReadReservation(*db_, event.reservation_id);
      if (!reservation.ok()) {
        if (reservation.status().code() == StatusCode::kNotFound) continue;
        return reservation.status();
      }
      // Another offer's reservation, or a transition the state machine does not allow (an
      // event older than a stop, a repeat): remembered, changes nothing.
      if (reservation->offer_id != offer_id ||
          !ReservationTransitionAllowed(reservation->state, event.state)) {
        continue;
      }
      if (!event.pod.empty()) {
        UPLINK_RETURN_IF_ERROR(Change("UPDATE reservations SET pod = ? WHERE id = ?",
                                      [&](Statement& s) { s.Bind(event.pod).Bind(reservation->id); },
                                      "recording the pod")
                                   .status());
      }
      UPLINK_RETURN_IF_ERROR(TransitionReservation(
          *reservation, event.state, event.reason, "controller", std::min(event.at, now),
          WithDetail(audit, {{"key", event.key}})));
    }
    return Status::Ok();
  }, CredentialCache::kKeep);
  UPLINK_RETURN_IF_ERROR(status);
  return acknowledged;
}

Result<WorkspaceWork> SqlStore::ReadWorkspaceWork(const std::string& offer_id,
                                                     size_t max_commands) {
  return ReadSnapshotOnLookup([&](sql::Database& database) -> Result<WorkspaceWork> {
    WorkspaceWork work;
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        (std::string("SELECT id, gpus, node, cpu_millis, memory_bytes, ephemeral_storage_bytes, "
                     "expires_at, state FROM reservations WHERE offer_id = ? AND state IN ") +
         kActiveStates + " ORDER BY created_at, id LIMIT " +
         std::to_string(protocol::kMaxSyncReservations))
            .c_str(),
        [&](Statement& s) { s.Bind(offer_id); },
        [&](const Statement& row) {
          const std::string state(row.Text(7));
          work.reservations.push_back(protocol::WorkspaceReservation{
              row.Text(0), row.Int(1), row.Text(2), row.Int(3), row.Int(4), row.Int(5), row.Time(6),
              std::string(state == protocol::kReservationStopping ? protocol::kDesiredStopped
                                                                  : protocol::kDesiredRunning),
              state});
        },
        "reading the offer's reservations"));
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT c.id, c.reservation_id, c.kind, c.code, c.timeout_seconds, c.output_cap_bytes "
        "FROM workspace_commands c JOIN reservations r ON r.id = c.reservation_id "
        "WHERE r.offer_id = ? AND r.state = 'running' AND c.state IN ('queued', 'running') "
        "ORDER BY c.created_at, c.rowid LIMIT ?",
        [&](Statement& s) { s.Bind(offer_id).Bind(static_cast<std::int64_t>(max_commands)); },
        [&](const Statement& row) {
          work.commands.push_back(protocol::WorkspaceCommand{
              row.Text(0), row.Text(1), row.Text(2), row.Text(3), row.Int(4), row.Int(5), ""});
        },
        "reading the offer's commands"));
    return work;
  });
}

// ---- SSH grants ------------------------------------------------------------------------------

Status SqlStore::CreateSshGrant(const SshGrant& grant, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(Reservation reservation, ReadReservation(*db_, grant.reservation_id));
    UPLINK_RETURN_IF_ERROR(RequireNotStopped(reservation, "SSH keys are granted"));
    std::int64_t live = 0;
    bool duplicate = false;
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT fingerprint FROM ssh_grants WHERE reservation_id = ? AND revoked_at IS NULL "
        "AND expires_at > ?",
        [&](Statement& s) { s.Bind(reservation.id).Bind(grant.created_at); },
        [&](const Statement& row) {
          ++live;
          duplicate = duplicate || row.Text(0) == grant.fingerprint;
        },
        "counting the reservation's SSH grants"));
    if (duplicate) {
      return AlreadyExistsError("key " + grant.fingerprint + " is already granted in "
                                "reservation " + reservation.id +
                                "; revoke that grant first to change its expiry");
    }
    if (live >= kMaxLiveSshGrantsPerReservation) {
      return FailedPreconditionError("reservation " + reservation.id + " has " +
                                     std::to_string(live) +
                                     " valid SSH grants, the most it may have; revoke one first");
    }
    UPLINK_RETURN_IF_ERROR(
        Change("INSERT INTO ssh_grants (id, reservation_id, key_type, public_key, fingerprint, "
               "comment, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               [&](Statement& s) {
                 s.Bind(grant.id).Bind(grant.reservation_id).Bind(grant.key_type);
                 s.Bind(grant.public_key).Bind(grant.fingerprint).Bind(grant.comment);
                 s.Bind(grant.created_by).Bind(grant.created_at).Bind(grant.expires_at);
               },
               "storing the SSH grant")
            .status());
    AuditEvent event = audit;
    event.owner_id = reservation.owner_id;
    return InsertAudit(event);
  });
}

Result<std::vector<SshGrant>> SqlStore::ListSshGrants(const std::string& reservation_id) {
  std::vector<SshGrant> grants;
  const std::string sql = std::string("SELECT ") + kSshGrantColumns +
                          " FROM ssh_grants WHERE reservation_id = ? ORDER BY created_at DESC, id";
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(reservation_id); },
      [&](const Statement& row) { grants.push_back(SshGrantFromRow(row)); }, "reading SSH grants"));
  return grants;
}

Result<SshHostKeyCheck> SqlStore::RecordSshCapability(const std::string& reservation_id,
                                                         const std::string& host_key,
                                                         const AuditEvent& audit) {
  SshHostKeyCheck check = SshHostKeyCheck::kSame;
  Status status = WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(Reservation reservation, ReadReservation(*db_, reservation_id));
    if (!reservation.ssh_host_key.empty() && reservation.ssh_host_key != host_key) {
      check = SshHostKeyCheck::kChanged;
      return Status::Ok();
    }
    check = reservation.ssh_host_key.empty() ? SshHostKeyCheck::kPinned : SshHostKeyCheck::kSame;
    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE reservations SET ssh_host_key = ?, ssh_reported_at = ? WHERE id = ?",
               [&](Statement& s) { s.Bind(host_key).Bind(audit.at).Bind(reservation_id); },
               "recording the SSH capability report")
            .status());
    if (check != SshHostKeyCheck::kPinned) return Status::Ok();
    AuditEvent event = audit;
    event.owner_id = reservation.owner_id;
    return InsertAudit(event);
  });
  UPLINK_RETURN_IF_ERROR(status);
  return check;
}

Status SqlStore::RecordSshHandover(const std::string& reservation_id,
                                      const std::string& host_key, WallTime at) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE reservations SET ssh_handover_at = ? WHERE id = ? AND ssh_host_key = ?",
               [&](Statement& s) { s.Bind(at).Bind(reservation_id).Bind(host_key); },
               "recording the SSH handover"));
    if (changed == 0) {
      return FailedPreconditionError("reservation " + reservation_id +
                                     " has another host key pinned (or none)");
    }
    return Status::Ok();
  });
}

Status SqlStore::AddTransferUsed(const std::string& reservation_id, std::int64_t bytes) {
  if (bytes < 0) return InvalidArgumentError("a transfer is counted in bytes from 0 up");
  if (bytes == 0) return Status::Ok();
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE reservations SET transfer_used_bytes = transfer_used_bytes + ? "
               "WHERE id = ?",
               [&](Statement& s) { s.Bind(bytes).Bind(reservation_id); },
               "counting the SSH transfer"));
    if (changed == 0) return NotFoundError("reservation " + reservation_id + " does not exist");
    return Status::Ok();
  });
}

Result<SshGrant> SqlStore::RevokeSshGrant(const std::string& reservation_id,
                                             const std::string& grant_id, const std::string& by,
                                             const AuditEvent& audit) {
  std::optional<SshGrant> found;
  Status status = WriteTransaction([&]() -> Status {
    found.reset();
    const std::string sql = std::string("SELECT ") + kSshGrantColumns +
                            " FROM ssh_grants WHERE id = ? AND reservation_id = ?";
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        sql.c_str(), [&](Statement& s) { s.Bind(grant_id).Bind(reservation_id); },
        [&](const Statement& row) { found = SshGrantFromRow(row); }, "reading the SSH grant"));
    if (!found) {
      return NotFoundError("reservation " + reservation_id + " has no SSH grant " + grant_id +
                           "; list them with GET /api/v1/reservations/" + reservation_id +
                           "/ssh-grants");
    }
    if (found->revoked_at) return Status::Ok();
    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE ssh_grants SET revoked_at = ?, revoked_by = ? WHERE id = ?",
               [&](Statement& s) { s.Bind(audit.at).Bind(by).Bind(grant_id); },
               "revoking the SSH grant")
            .status());
    found->revoked_at = audit.at;
    found->revoked_by = by;
    UPLINK_ASSIGN_OR_RETURN(Reservation reservation, ReadReservation(*db_, reservation_id));
    AuditEvent event = audit;
    event.owner_id = reservation.owner_id;
    return InsertAudit(event);
  });
  UPLINK_RETURN_IF_ERROR(status);
  return *found;
}

// ---- commands ---------------------------------------------------------------------------------

Status SqlStore::CreateWorkspaceCommand(const WorkspaceCommandRecord& command,
                                           const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(Reservation reservation, ReadReservation(*db_, command.reservation_id));
    UPLINK_RETURN_IF_ERROR(RequireNotStopped(reservation, "commands run"));
    std::int64_t open = 0;
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT COUNT(*) FROM workspace_commands WHERE reservation_id = ? "
        "AND state IN ('queued', 'running')",
        [&](Statement& s) { s.Bind(reservation.id); },
        [&](const Statement& row) { open = row.Int(0); }, "counting open commands"));
    if (open >= kMaxOpenCommandsPerReservation) {
      return ResourceExhaustedError("reservation " + reservation.id + " has " +
                                    std::to_string(open) +
                                    " commands not finished; wait for one to end");
    }
    UPLINK_RETURN_IF_ERROR(
        Change("INSERT INTO workspace_commands (id, reservation_id, kind, code, timeout_seconds, "
               "output_cap_bytes, state, created_by, created_at) "
               "VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?)",
               [&](Statement& s) {
                 s.Bind(command.id).Bind(command.reservation_id).Bind(command.kind);
                 s.Bind(command.code).Bind(command.timeout_seconds);
                 s.Bind(command.output_cap_bytes).Bind(command.created_by);
                 s.Bind(command.created_at);
               },
               "storing the command")
            .status());
    AuditEvent event = audit;
    event.owner_id = reservation.owner_id;
    return InsertAudit(event);
  });
}

Result<WorkspaceCommandRecord> SqlStore::ReadWorkspaceCommand(sql::Database& database,
                                                              const std::string& id) {
  std::optional<WorkspaceCommandRecord> found;
  UPLINK_RETURN_IF_ERROR(ForEachRowOn(
      database,
      (std::string("SELECT ") + kCommandColumns + " FROM workspace_commands WHERE id = ?").c_str(),
      [&](Statement& s) { s.Bind(id); }, [&](const Statement& row) { found = CommandFromRow(row); },
      "reading the command"));
  if (!found) return NotFoundError("command " + id + " does not exist");
  return std::move(*found);
}

Result<WorkspaceCommandRecord> SqlStore::GetWorkspaceCommand(const std::string& id) {
  return ReadOnLookup([&](sql::Database& database) { return ReadWorkspaceCommand(database, id); });
}

Result<std::vector<WorkspaceCommandRecord>> SqlStore::ListWorkspaceCommands(
    const std::string& reservation_id, int limit) {
  std::vector<WorkspaceCommandRecord> commands;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      (std::string("SELECT ") + kCommandColumns +
       " FROM workspace_commands WHERE reservation_id = ? ORDER BY created_at DESC, rowid DESC "
       "LIMIT ?")
          .c_str(),
      [&](Statement& s) {
        s.Bind(reservation_id).Bind(static_cast<std::int64_t>(std::clamp(limit, 1, 500)));
      },
      [&](const Statement& row) { commands.push_back(CommandFromRow(row)); }, "listing commands"));
  return commands;
}

Result<std::string> SqlStore::ReadCommandOutput(const std::string& id, std::int64_t offset,
                                                size_t max_bytes) {
  std::string out;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT start, data FROM workspace_command_output WHERE command_id = ? "
      "AND start + length(data) > ? ORDER BY start",
      [&](Statement& s) { s.Bind(id).Bind(offset); },
      [&](const Statement& row) {
        if (out.size() >= max_bytes) return;
        std::string_view data = row.Blob(1);
        std::int64_t start = row.Int(0);
        if (start < offset) data.remove_prefix(static_cast<size_t>(offset - start));
        out.append(data.substr(0, max_bytes - out.size()));
      },
      "reading the command's output"));
  return out;
}

Result<OutputAck> SqlStore::AppendCommandOutput(const std::string& offer_id,
                                                   const std::string& command_id,
                                                   const protocol::WorkspaceOutput& output,
                                                   WallTime now) {
  OutputAck ack;
  Status status = WriteTransaction([&]() -> Status {
    ack = OutputAck{};
    std::optional<std::string> command_offer;
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT r.offer_id FROM workspace_commands c JOIN reservations r "
        "ON r.id = c.reservation_id WHERE c.id = ?",
        [&](Statement& s) { s.Bind(command_id); },
        [&](const Statement& row) { command_offer = row.Text(0); }, "reading the command"));
    if (command_offer != offer_id) {
      return NotFoundError("this offer has no command " + command_id);
    }
    UPLINK_ASSIGN_OR_RETURN(WorkspaceCommandRecord command, ReadWorkspaceCommand(*db_, command_id));
    ack.have = command.output_bytes;
    ack.final = protocol::IsFinalCommandState(command.state);
    if (ack.final) return Status::Ok();  // a final state posted again, or a cancelled command
    if (output.offset > command.output_bytes) {
      ack.gap = true;
      return Status::Ok();
    }
    std::string_view fresh(output.data);
    fresh.remove_prefix(std::min(fresh.size(),
                                 static_cast<size_t>(command.output_bytes - output.offset)));
    const std::int64_t room = std::max<std::int64_t>(0, command.output_cap_bytes - ack.have);
    bool truncated = command.truncated || output.truncated;
    if (static_cast<std::int64_t>(fresh.size()) > room) {
      fresh = fresh.substr(0, static_cast<size_t>(room));
      truncated = true;
    }
    if (!fresh.empty()) {
      UPLINK_RETURN_IF_ERROR(
          Change("INSERT INTO workspace_command_output (command_id, start, data) "
                 "VALUES (?, ?, ?)",
                 [&](Statement& s) { s.Bind(command_id).Bind(ack.have).BindBlobUnowned(fresh); },
                 "storing output")
              .status());
      ack.have += static_cast<std::int64_t>(fresh.size());
    }
    ack.final = protocol::IsFinalCommandState(output.state);
    return Change(
               "UPDATE workspace_commands SET output_bytes = ?, truncated = ?, state = ?, "
               "exit_code = ?, message = ?, started_at = coalesce(started_at, ?), "
               "finished_at = CASE WHEN ? <> 0 THEN ? ELSE finished_at END WHERE id = ?",
               [&](Statement& s) {
                 s.Bind(ack.have).Bind(truncated).Bind(output.state);
                 if (output.exit_code) {
                   s.Bind(static_cast<std::int64_t>(*output.exit_code));
                 } else {
                   s.BindNull();
                 }
                 s.Bind(output.message).Bind(now).Bind(ack.final).Bind(now).Bind(command_id);
               },
               "updating the command")
        .status();
  }, CredentialCache::kKeep);
  UPLINK_RETURN_IF_ERROR(status);
  return ack;
}

}  // namespace uplink::console
