// Workspace execution as the console keeps it (docs/api.md, "Offers", "Reservations"): the
// capacity suppliers offer, its review, the execution credential and settings, reservations
// with every transition, and the commands run in them. The store interface of this area is
// WorkspaceStore, which Store extends; SqlStore implements it in sql_workspace.cc.
//
// Every change to an offer, its credential or a reservation is written with its audit event
// in one transaction.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "protocol/ssh.h"
#include "protocol/workspace.h"

namespace uplink::console {

struct AuditEvent;
struct Connection;

// draft (made, no inventory yet) → connected (the inventory agent reported) → in_review (an
// admin recorded a review that does not qualify it yet) → qualified (bookable) ⇄ suspended.
enum class OfferState { kDraft, kConnected, kInReview, kQualified, kSuspended };
std::string_view OfferStateName(OfferState state);
std::optional<OfferState> ParseOfferState(std::string_view name);

inline constexpr std::string_view kOfferIdPrefix = "off_";
bool IsOfferId(std::string_view id);
std::string NewOfferId();

// When the capacity is offered: always, or within a window.
struct Availability {
  std::optional<WallTime> from;   // none with `until` none: always
  std::optional<WallTime> until;
  bool always() const { return !from && !until; }
};

// The admin's resource review of an offer: every check, the figures each GPU comes with, and
// the nodes approved out of those the inventory reported.
struct OfferReview {
  bool authority_confirmed = false;
  bool hardware_compatible = false;
  bool isolation_verified = false;
  bool expiry_and_cleanup_checked = false;
  bool disk_eviction_tested = false;
  bool network_policy_enforced = false;
  bool price_includes_traffic = false;
  std::int64_t cpu_millis_per_gpu = 0;
  std::int64_t memory_bytes_per_gpu = 0;
  std::int64_t disk_bytes_per_gpu = 0;
  std::int64_t transfer_budget_bytes = 0;
  std::vector<std::string> approved_nodes;
  std::string notes;
  std::string reviewed_by;  // user id
  std::string reviewed_by_label;
  WallTime reviewed_at;

  // Every check true and at least one node approved: the offer may be qualified.
  bool Qualifies() const;
};

// An offer's execution credential ("exe_…"), hashed like agent tokens.
struct ExecutionCredential {
  std::string id;
  std::string offer_id;
  std::string lookup_prefix;
  std::string token_hash;
  WallTime created_at;
  std::optional<WallTime> revoked_at;
};

// What the owner chose for execution (POST /api/v1/offers/{id}/execution).
struct ExecutionSettings {
  std::string namespace_name = "uplink-workspaces";
  bool ssh_enabled = false;
  std::vector<std::string> kubernetes_api_cidrs;
  std::int64_t kubernetes_api_port = 443;
};

struct Offer {
  std::string id;
  std::string owner_id;
  std::string connection_id;
  std::string cluster_name;  // the connection's, read with it
  std::int64_t gpus = 0;     // the capacity limit
  std::string country;       // ISO 3166-1 alpha-2, upper-case
  Availability availability;
  std::string price_per_gpu_hour;  // a decimal number as the supplier wrote it
  std::string currency;            // ISO 4217, upper-case
  std::int64_t max_lifetime_seconds = 0;
  OfferState state = OfferState::kDraft;
  WallTime created_at;
  WallTime updated_at;
  std::optional<OfferReview> review;
  bool execution_enabled = false;
  ExecutionSettings execution;
  std::optional<ExecutionCredential> credential;  // the newest, live or revoked
  // What the workspace controller last said (sync): its Helm release, namespace, version.
  std::string helm_release;
  std::string controller_namespace;
  std::string controller_version;
  std::optional<WallTime> controller_seen_at;
  bool controller_draining = false;
};

// A reservation's states (protocol/workspace.h): reserved → provisioning → running → stopping
// → completed | cancelled | failed | expired.
bool IsActiveReservationState(std::string_view state);
bool IsFinalReservationState(std::string_view state);
// Whether the state machine allows `from` → `to`.
bool ReservationTransitionAllowed(std::string_view from, std::string_view to);

struct ReservationTransition {
  std::string state;
  std::string reason;
  std::string source;  // "user", "controller", "console"
  WallTime at;
};

struct Reservation {
  std::string id;  // protocol::IsReservationId
  std::string offer_id;
  std::string owner_id;
  std::string owner_label;  // email, read with it
  std::int64_t gpus = 0;
  std::string node;
  std::string pod;  // as the controller reported it; "" before
  std::string state;
  WallTime created_at;
  WallTime expires_at;
  std::int64_t cpu_millis = 0;  // totals: the review's per-GPU figures × gpus
  std::int64_t memory_bytes = 0;
  std::int64_t ephemeral_storage_bytes = 0;
  std::optional<WallTime> ended_at;
  // Bytes SSH may move both ways (the review's transfer budget when it was placed), and
  // moved so far.
  std::int64_t transfer_budget_bytes = 0;
  std::int64_t transfer_used_bytes = 0;
  // SSH (docs/protocol.md, "SSH relay"): the workspace's host key, pinned at its first
  // capability report ("" before); the latest report with that key; the latest handover
  // confirmed with it.
  std::string ssh_host_key;
  std::optional<WallTime> ssh_reported_at;
  std::optional<WallTime> ssh_handover_at;
  std::vector<ReservationTransition> transitions;  // oldest first
};

// An SSH grant: a public key the reservation's owner (or an admin) allows into the workspace
// until `expires_at` (at most the reservation's end) or its revocation.
struct SshGrant {
  std::string id;  // "ssg_…"
  std::string reservation_id;
  std::string key_type;
  std::string public_key;  // "TYPE BASE64", as authorized_keys holds it
  std::string fingerprint;
  std::string comment;
  std::string created_by;  // user id
  WallTime created_at;
  WallTime expires_at;
  std::optional<WallTime> revoked_at;
  std::string revoked_by;  // user id, "" while not revoked

  // Valid at `now`: neither revoked nor expired.
  bool LiveAt(WallTime now) const { return !revoked_at && now < expires_at; }
};

// Grant ids are part of the SSH relay's contract (protocol/ssh.h).
using protocol::IsSshGrantId;
using protocol::kSshGrantIdPrefix;
using protocol::NewSshGrantId;
// A limit on the keys valid at once in one workspace.
inline constexpr std::int64_t kMaxLiveSshGrantsPerReservation = 16;

// What a capability report's host key was to the reservation's pinned one.
enum class SshHostKeyCheck {
  kPinned,   // none was pinned: this one is now
  kSame,     // the pinned one
  kChanged,  // another: refused, nothing recorded
};

struct ReservationQuery {
  std::optional<std::string> owner_id;  // only this user's
  std::optional<std::string> offer_id;
  bool active_only = false;
  int limit = 200;  // newest first
};

// A node the console may place a reservation on, with the GPUs the inventory says it has.
struct PlacementCandidate {
  std::string node;
  std::int64_t allocatable_gpus = 0;
};

struct WorkspaceCommandRecord {
  std::string id;  // protocol::IsWorkspaceCommandId
  std::string reservation_id;
  std::string kind;
  std::string code;
  std::int64_t timeout_seconds = 0;
  std::int64_t output_cap_bytes = protocol::kDefaultOutputCapBytes;
  std::string state;  // queued, running, exited, timeout, failed, cancelled
  std::optional<int> exit_code;
  std::int64_t output_bytes = 0;
  bool truncated = false;
  std::string message;
  std::string created_by;  // user id
  WallTime created_at;
  std::optional<WallTime> started_at;
  std::optional<WallTime> finished_at;
};

// What the controller is told to do (the sync reply's lists).
struct WorkspaceWork {
  std::vector<protocol::WorkspaceReservation> reservations;
  std::vector<protocol::WorkspaceCommand> commands;
};

// What an output post did: the bytes the console now holds and whether the command ended;
// `gap` when the chunk started past `have` (nothing stored).
struct OutputAck {
  std::int64_t have = 0;
  bool final = false;
  bool gap = false;
};

// A command limit: commands of one reservation not yet finished.
inline constexpr std::int64_t kMaxOpenCommandsPerReservation = 16;

class WorkspaceStore {
 public:
  virtual ~WorkspaceStore() = default;

  // Creates the offer and its connection in one transaction with both audit events.
  // AlreadyExists as CreateConnection for a cluster name the owner already uses.
  virtual Status CreateOffer(const Offer& offer, const Connection& connection,
                             const AuditEvent& connection_audit, const AuditEvent& offer_audit) = 0;
  virtual Result<Offer> GetOffer(const std::string& id) = 0;
  // Every offer (owner_id empty) or one user's, newest first.
  virtual Result<std::vector<Offer>> ListOffers(const std::string& owner_id) = 0;
  // Records the review and moves the offer to `state`. FailedPrecondition when the offer is
  // no longer in `expected` (another change landed first).
  virtual Status SaveOfferReview(const std::string& offer_id, OfferState expected,
                                 const OfferReview& review, OfferState state,
                                 const AuditEvent& audit) = 0;
  // FailedPrecondition when the offer is no longer in `expected`.
  virtual Status SetOfferState(const std::string& offer_id, OfferState expected, OfferState state,
                               const AuditEvent& audit) = 0;

  // Enables execution with `settings`; with `credential`, it becomes the offer's live one and
  // any earlier one is revoked at `audit.at`.
  virtual Status EnableExecution(const std::string& offer_id, const ExecutionSettings& settings,
                                 const std::optional<ExecutionCredential>& credential,
                                 const AuditEvent& audit) = 0;
  // Disables execution, and revokes the live credential when `revoke_credential`.
  // FailedPrecondition (saying to stop them first) while the offer has active reservations.
  virtual Status DisableExecution(const std::string& offer_id, bool revoke_credential,
                                  const AuditEvent& audit) = 0;
  virtual Result<std::vector<ExecutionCredential>> FindExecutionCredentialsByPrefix(
      const std::string& lookup_prefix) = 0;
  // As BindCluster, for a call made with the offer's execution credential: Unauthenticated
  // when it is no longer live; binds the offer's connection on first use (connection.bind);
  // Conflict (writing connection.cluster_mismatch) when bound to another cluster.
  virtual Status BindExecutionCluster(const std::string& offer_id,
                                      const std::string& credential_hash,
                                      const std::string& cluster_uid, const AuditEvent& audit) = 0;

  // Places `reservation` (gpus, expiry, resources set; node empty) on the candidate with the
  // least room that fits, counting the GPUs of the offer's active reservations, in one
  // transaction; FailedPrecondition saying why when the offer is not qualified, execution is
  // off, the capacity limit would be passed, or no candidate has room. Returns it placed.
  virtual Result<Reservation> CreateReservation(const Reservation& reservation,
                                                const std::vector<PlacementCandidate>& candidates,
                                                const AuditEvent& audit) = 0;
  virtual Result<Reservation> GetReservation(const std::string& id) = 0;
  virtual Result<std::vector<Reservation>> ListReservations(const ReservationQuery& query) = 0;
  // reserved → cancelled, provisioning/running → stopping (a stopping one is left as it is);
  // FailedPrecondition for one that ended. Returns it as it now is.
  virtual Result<Reservation> StopReservation(const std::string& id, const std::string& reason,
                                              const AuditEvent& audit) = 0;
  // Moves the expiry; FailedPrecondition unless it is active.
  virtual Result<Reservation> ExtendReservation(const std::string& id, WallTime expires_at,
                                                const AuditEvent& audit) = 0;
  // Ends the active reservations whose expiry passed more than `grace` ago (the controller
  // did not report their end): expired, with their open commands cancelled; a copy of
  // `audit` for each. How many it ended.
  virtual Result<std::int64_t> ExpireOverdueReservations(WallTime now, std::chrono::seconds grace,
                                                         const AuditEvent& audit) = 0;

  // The controller's sync, in one transaction: records what it said of itself, applies each
  // event not applied before (a transition the state machine allows, with its audit event;
  // one it does not allow is only remembered), and returns the keys acknowledged.
  virtual Result<std::vector<std::string>> ApplyWorkspaceSync(const std::string& offer_id,
                                                              const protocol::WorkspaceSync& sync,
                                                              WallTime now,
                                                              const AuditEvent& audit) = 0;
  // What the controller must act on now: active reservations, and unfinished commands of
  // running ones (oldest first, at most `max_commands`).
  virtual Result<WorkspaceWork> ReadWorkspaceWork(const std::string& offer_id,
                                                  size_t max_commands) = 0;

  // Stores the grant, in one transaction with `audit`: FailedPrecondition unless the
  // reservation is active and not stopping; AlreadyExists when the key is already granted and
  // valid; FailedPrecondition too beyond kMaxLiveSshGrantsPerReservation valid grants.
  virtual Status CreateSshGrant(const SshGrant& grant, const AuditEvent& audit) = 0;
  // The reservation's grants, newest first.
  virtual Result<std::vector<SshGrant>> ListSshGrants(const std::string& reservation_id) = 0;
  // Revokes the grant at `audit.at` by `audit`'s actor, with `audit`; one already revoked is
  // returned as it is (no second event). NotFound for a grant not of the reservation.
  virtual Result<SshGrant> RevokeSshGrant(const std::string& reservation_id,
                                          const std::string& grant_id, const std::string& by,
                                          const AuditEvent& audit) = 0;

  // A capability report at `audit.at`: pins `host_key` when none is pinned (with `audit`, in
  // one transaction) and records the report's time when the key is the pinned one; a
  // different key changes nothing.
  virtual Result<SshHostKeyCheck> RecordSshCapability(const std::string& reservation_id,
                                                      const std::string& host_key,
                                                      const AuditEvent& audit) = 0;
  // The handover probe read sshd's identification line at `at`; FailedPrecondition when
  // `host_key` is not the pinned one.
  virtual Status RecordSshHandover(const std::string& reservation_id, const std::string& host_key,
                                   WallTime at) = 0;
  // Adds `bytes` to the reservation's transfer.used_bytes in one statement (several relay
  // threads and replicas may add at once).
  virtual Status AddTransferUsed(const std::string& reservation_id, std::int64_t bytes) = 0;

  // ResourceExhausted beyond kMaxOpenCommandsPerReservation open commands; FailedPrecondition
  // unless the reservation is active.
  virtual Status CreateWorkspaceCommand(const WorkspaceCommandRecord& command,
                                        const AuditEvent& audit) = 0;
  virtual Result<WorkspaceCommandRecord> GetWorkspaceCommand(const std::string& id) = 0;
  virtual Result<std::vector<WorkspaceCommandRecord>> ListWorkspaceCommands(
      const std::string& reservation_id, int limit) = 0;
  // The output from `offset`, at most `max_bytes`.
  virtual Result<std::string> ReadCommandOutput(const std::string& id, std::int64_t offset,
                                                size_t max_bytes) = 0;
  // Appends the bytes of `output` past what is held (up to the command's cap, beyond which it
  // is truncated) and applies its state. NotFound for a command not of `offer_id`.
  virtual Result<OutputAck> AppendCommandOutput(const std::string& offer_id,
                                                const std::string& command_id,
                                                const protocol::WorkspaceOutput& output,
                                                WallTime now) = 0;
};

}  // namespace uplink::console
