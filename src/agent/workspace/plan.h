// What the controller does next, decided from what the console wants and what Kubernetes
// has: pure functions of their inputs (and the time), so that every rule (create, stop,
// expire, reap orphans, stay within the capacity) has a unit test without a cluster.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/workspace/config.h"
#include "agent/workspace/pod_spec.h"
#include "common/json.h"
#include "common/time.h"

namespace uplink::agent::workspace {

// A workspace pod as the controller reads it back from Kubernetes.
struct ObservedPod {
  std::string name;
  std::string reservation_id;       // its label; empty: not a workspace of a reservation
  std::string node;                 // spec.nodeName
  std::string phase;                // Pending, Running, Succeeded, Failed
  std::string reason;               // status.reason (DeadlineExceeded, ...)
  std::string message;              // status.message
  std::optional<WallTime> expires_at;  // its annotation; nullopt when missing or unreadable
  bool deleting = false;            // metadata.deletionTimestamp is set
  std::int64_t gpus = 0;            // what its containers request

  bool Finished() const { return phase == "Succeeded" || phase == "Failed"; }
};

// Reads the fields above from a Pod object.
ObservedPod ObservePod(const json::object& pod);

// A transition the controller reports (the sync request's events). Its key makes a re-sent
// event harmless: "<reservation>/<state>/1".
using protocol::WorkspaceEvent;
WorkspaceEvent MakeEvent(std::string_view reservation_id, std::string_view state,
                         std::string reason, WallTime at, std::string_view pod = {},
                         std::string_view node = {});

enum class DeleteReason { kStopped, kExpired, kFinished, kOrphan, kDraining };
std::string_view DeleteReasonName(DeleteReason reason);

struct PodDeletion {
  std::string pod;
  std::string reservation_id;
  DeleteReason reason = DeleteReason::kOrphan;
  std::string detail;  // for the log and the event's reason
};

// The event to report once Kubernetes accepted a deletion: none for an orphan the console
// does not know, nor for a stop, whose `completed` waits until the pod is gone (PlanReconcile
// reports it when a stopped reservation has no pod left).
std::optional<WorkspaceEvent> EventAfterDeletion(const PodDeletion& deletion, WallTime now);

struct PlanInput {
  // The last set the console sent; an empty set before the first reply.
  std::vector<DesiredReservation> desired;
  // True when `desired` came from a sync that succeeded just now: only then may a pod that
  // the console does not list be treated as an orphan.
  bool desired_fresh = false;
  // Pods that were missing from the console's list at the previous fresh sync.
  std::set<std::string> unlisted_before;
  bool accepting = true;   // the console accepts reservations for this offer
  bool draining = false;   // the supplier drains the namespace: create nothing, delete all
  // Reservations whose workspace already ended here (finished, expired, stopped): never
  // created again, even while the console, not yet told, still lists them as running.
  std::set<std::string> ended;
  std::vector<ObservedPod> pods;
  WallTime now;
};

struct ReconcilePlan {
  std::vector<DesiredReservation> create;
  std::vector<PodDeletion> remove;
  // Level-triggered: every transition the current state implies (the outbox drops the keys it
  // has already delivered).
  std::vector<WorkspaceEvent> events;
  // Pods missing from the console's list now (the next fresh sync's unlisted_before).
  std::set<std::string> unlisted_now;
  // Reservations not created for want of capacity (they are tried again next time).
  std::vector<std::string> waiting_for_capacity;
};

ReconcilePlan PlanReconcile(const ExecutionConfig& config, const PlanInput& input);

// The local expiry loop's part of the plan: deletions decided from the pods alone (their
// expiry annotation, their phase), needing nothing from the console.
std::vector<PodDeletion> PlanLocalExpiry(const std::vector<ObservedPod>& pods, WallTime now);

}  // namespace uplink::agent::workspace
