#include "agent/workspace/plan.h"

#include <map>

#include "common/quantity.h"

namespace uplink::agent::workspace {
namespace {

// A drain's deletion, whether the controller made it or only saw its pod gone.
constexpr std::string_view kDrainedReason = "the supplier drained the workspace namespace";

std::int64_t RequestedGpus(const json::object& spec) {
  std::int64_t total = 0;
  for (const json::value& container : ArrayAt(spec, "containers")) {
    if (!container.is_object()) continue;
    const json::object& limits =
        ObjectAt(ObjectAt(container.get_object(), "resources"), "limits");
    auto quantity = Quantity::Parse(StringAt(limits, kGpuResource));
    if (!quantity.ok()) continue;
    auto count = quantity->WholeCount();
    if (count.ok()) total += *count;
  }
  return total;
}

std::string FailureReason(const ObservedPod& pod) {
  if (pod.phase == "Succeeded") return "the workspace's container exited";
  std::string reason = pod.reason.empty() ? "the workspace pod failed" : pod.reason;
  if (!pod.message.empty()) reason += ": " + pod.message;
  return reason;
}

}  // namespace

ObservedPod ObservePod(const json::object& pod) {
  ObservedPod observed;
  const json::object& metadata = ObjectAt(pod, "metadata");
  const json::object& spec = ObjectAt(pod, "spec");
  const json::object& status = ObjectAt(pod, "status");
  observed.name = StringAt(metadata, "name");
  observed.reservation_id = StringAt(ObjectAt(metadata, "labels"), kReservationLabel);
  observed.node = StringAt(spec, "nodeName");
  observed.phase = StringAt(status, "phase");
  observed.reason = StringAt(status, "reason");
  observed.message = StringAt(status, "message");
  auto expires = ParseRfc3339(StringAt(ObjectAt(metadata, "annotations"), kExpiresAtAnnotation));
  if (expires.ok()) observed.expires_at = *expires;
  observed.deleting = metadata.contains("deletionTimestamp") &&
                      !metadata.at("deletionTimestamp").is_null();
  observed.gpus = RequestedGpus(spec);
  return observed;
}

WorkspaceEvent MakeEvent(std::string_view reservation_id, std::string_view state,
                         std::string reason, WallTime at, std::string_view pod,
                         std::string_view node) {
  return WorkspaceEvent{.key = std::string(reservation_id) + "/" + std::string(state) + "/1",
                        .reservation_id = std::string(reservation_id),
                        .state = std::string(state),
                        .reason = std::move(reason),
                        .at = at,
                        .pod = std::string(pod),
                        .node = std::string(node)};
}

std::string_view DeleteReasonName(DeleteReason reason) {
  switch (reason) {
    case DeleteReason::kStopped: return "stopped";
    case DeleteReason::kExpired: return "expired";
    case DeleteReason::kFinished: return "finished";
    case DeleteReason::kOrphan: return "orphan";
    case DeleteReason::kDraining: return "draining";
  }
  return "unknown";
}

std::optional<WorkspaceEvent> EventAfterDeletion(const PodDeletion& deletion, WallTime now) {
  if (deletion.reservation_id.empty()) return std::nullopt;
  switch (deletion.reason) {
    case DeleteReason::kExpired:
      return MakeEvent(deletion.reservation_id, "expired",
                       "the reservation expired; the local expiry loop deleted its workspace",
                       now, deletion.pod);
    case DeleteReason::kDraining:
      return MakeEvent(deletion.reservation_id, "failed", std::string(kDrainedReason), now,
                       deletion.pod);
    case DeleteReason::kStopped:   // completed once the pod is gone (PlanReconcile)
    case DeleteReason::kFinished:  // its failed event was reported when it was seen finished
    case DeleteReason::kOrphan:    // the console does not know it
      return std::nullopt;
  }
  return std::nullopt;
}

std::vector<PodDeletion> PlanLocalExpiry(const std::vector<ObservedPod>& pods, WallTime now) {
  std::vector<PodDeletion> deletions;
  for (const ObservedPod& pod : pods) {
    if (pod.deleting) continue;
    if (pod.reservation_id.empty()) {
      deletions.push_back({pod.name, "", DeleteReason::kOrphan, "it names no reservation"});
    } else if (!pod.expires_at) {
      deletions.push_back({pod.name, pod.reservation_id, DeleteReason::kOrphan,
                           "it has no readable expiry annotation"});
    } else if (*pod.expires_at <= now) {
      deletions.push_back({pod.name, pod.reservation_id, DeleteReason::kExpired,
                           "it expired at " + FormatRfc3339(*pod.expires_at)});
    } else if (pod.Finished()) {
      deletions.push_back({pod.name, pod.reservation_id, DeleteReason::kFinished,
                           "it is " + pod.phase});
    }
  }
  return deletions;
}

ReconcilePlan PlanReconcile(const ExecutionConfig& config, const PlanInput& input) {
  ReconcilePlan plan;
  std::map<std::string, const DesiredReservation*> desired;
  for (const DesiredReservation& reservation : input.desired) desired[reservation.id] = &reservation;
  std::map<std::string, const ObservedPod*> pod_of;
  std::set<std::string> removing;
  auto remove = [&](PodDeletion deletion) {
    if (removing.insert(deletion.pod).second) plan.remove.push_back(std::move(deletion));
  };

  for (PodDeletion& deletion : PlanLocalExpiry(input.pods, input.now)) remove(std::move(deletion));
  std::int64_t gpus_in_use = 0;
  for (const ObservedPod& pod : input.pods) {
    if (!pod.reservation_id.empty()) pod_of[pod.reservation_id] = &pod;
    // A pod on its way out still holds its GPUs until it is gone.
    if (!pod.Finished()) gpus_in_use += pod.gpus;
    if (pod.reservation_id.empty()) continue;
    if (pod.phase == "Pending" || pod.phase == "Running") {
      plan.events.push_back(MakeEvent(pod.reservation_id, "provisioning", "pod created", input.now,
                                      pod.name, pod.node));
    }
    if (pod.phase == "Running") {
      plan.events.push_back(MakeEvent(pod.reservation_id, "running", "pod Running on " + pod.node,
                                      input.now, pod.name, pod.node));
    }
    if (pod.Finished()) {
      plan.events.push_back(MakeEvent(pod.reservation_id, "failed", FailureReason(pod), input.now,
                                      pod.name, pod.node));
    }
    if (pod.deleting) continue;
    if (input.draining) {
      remove({pod.name, pod.reservation_id, DeleteReason::kDraining, "the namespace is draining"});
      continue;
    }
    auto wanted = desired.find(pod.reservation_id);
    if (wanted != desired.end()) {
      if (wanted->second->desired != protocol::kDesiredRunning) {
        remove({pod.name, pod.reservation_id, DeleteReason::kStopped, "the reservation was stopped"});
      }
      continue;
    }
    if (!input.desired_fresh) continue;
    if (input.unlisted_before.contains(pod.name)) {
      remove({pod.name, pod.reservation_id, DeleteReason::kOrphan,
              "the console has not listed its reservation for a full sync"});
    } else {
      plan.unlisted_now.insert(pod.name);
    }
  }

  for (const DesiredReservation& reservation : input.desired) {
    if (pod_of.contains(reservation.id)) continue;
    if (reservation.desired != protocol::kDesiredRunning) {
      plan.events.push_back(MakeEvent(reservation.id, "completed",
                                      "stopped; no workspace pod is left", input.now));
      continue;
    }
    if (input.ended.contains(reservation.id)) continue;
    if (reservation.expires_at <= input.now) {
      plan.events.push_back(MakeEvent(reservation.id, "expired",
                                      "the reservation expired before its workspace ran",
                                      input.now));
      continue;
    }
    // Its pod was seen (the console says so, which outlives this controller) and is gone
    // without our deleting it: `kubectl delete`, its node removed, or a deletion while the
    // controller was down. A new pod would start with an empty scratch and a new SSH host
    // key behind the user's back, so the reservation fails and says why instead.
    if (reservation.state == protocol::kReservationProvisioning ||
        reservation.state == protocol::kReservationRunning) {
      plan.events.push_back(MakeEvent(
          reservation.id, "failed",
          input.draining ? std::string(kDrainedReason)
                         : "its workspace pod " + PodNameFor(reservation.id) +
                               " was deleted outside uplink (kubectl delete, its node removed, "
                               "or while the controller was down); its files went with it, so "
                               "it is not created again",
          input.now, PodNameFor(reservation.id), reservation.node));
      continue;
    }
    if (input.draining || !input.accepting) continue;
    if (!config.IsApprovedNode(reservation.node)) {
      plan.events.push_back(MakeEvent(reservation.id, "failed",
                                      "node " + reservation.node +
                                          " is not approved in this cluster's execution "
                                          "configuration",
                                      input.now, "", reservation.node));
      continue;
    }
    if (gpus_in_use + reservation.gpus > config.capacity_gpus) {
      plan.waiting_for_capacity.push_back(reservation.id);
      continue;
    }
    gpus_in_use += reservation.gpus;
    plan.create.push_back(reservation);
  }
  return plan;
}

}  // namespace uplink::agent::workspace
