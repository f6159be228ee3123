// The LimitRanger and ResourceQuota admission plugins and the quota controller's arithmetic,
// with kube-apiserver's own messages.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "kubesim/resources.h"
#include "kubesim/store.h"

namespace uplink::kubesim {

// LimitRanger on a pod being created: fills containers' missing requests and limits from the
// Container items' defaultRequest and default (noting what it set in the
// kubernetes.io/limit-ranger annotation), then checks every item's min, max and
// maxLimitRequestRatio for containers and for the pod. The violations, in the plugin's words
// ("maximum cpu usage per Container is 2, but limit is 4"); empty when the pod fits.
std::vector<std::string> ApplyLimitRanges(const std::vector<json::object>& limit_ranges,
                                          json::object& pod);

// A LimitRange as the API server stores it: a Container item's missing default taken from its
// max, and its missing defaultRequest from its default, then its min.
void DefaultLimitRange(json::object& limit_range);

// What one object counts against quota: pods (while not terminal) their pods, cpu, memory,
// ephemeral storage and extended resources (requests.nvidia.com/gpu), services their
// services, load balancers and node ports, every object its count/<resource>[.<group>].
ResourceList QuotaUsage(const ResourceType& type, const json::object& object, WallTime now);

// The quota admission check of creating `object` (whose usage is `requested`) against one
// quota that currently sees `used`. Its error message ("exceeded quota: NAME, requested: ...,
// used: ..., limited: ..." or "failed quota: NAME: must specify ..."), or empty.
std::string CheckQuota(const json::object& quota, const ResourceType& type,
                       const json::object& object, const ResourceList& requested,
                       const ResourceList& used);

// The status the quota controller writes: hard as in spec.hard, used for each hard resource.
json::object QuotaStatus(const json::object& quota, const ResourceList& used);

// The resources a quota limits (spec.hard's names).
ResourceList QuotaHard(const json::object& quota);

// Everything the objects of a namespace count against quota now.
ResourceList NamespaceUsage(const ObjectStore& store, const std::string& namespace_name,
                            WallTime now);

// The quota controller's pass: every ResourceQuota's status brought up to date.
void SyncQuotaStatuses(ObjectStore& store, WallTime now);

}  // namespace uplink::kubesim
