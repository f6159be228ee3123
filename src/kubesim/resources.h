// Resource amounts as kube-apiserver adds, compares and prints them, and what a pod asks for:
// the arithmetic behind ResourceQuota, LimitRange, scheduling and QoS classes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/status.h"

namespace uplink::kubesim {

// An exact amount in thousandths, and whether it was written with a binary suffix (Ki, Mi,
// ...), which decides how it prints, as resource.Quantity keeps its format.
struct Amount {
  std::int64_t milli = 0;
  bool binary = false;

  // Quantity grammar; InvalidArgument for anything resource.ParseQuantity refuses and for
  // values finer than 1m or beyond what fits.
  static Result<Amount> Parse(std::string_view text);
  // Canonical form, as resource.Quantity.String(): "500m", "2", "4k", "1536Mi", "0".
  std::string ToString() const;
};

// resource name -> amount, ordered by name.
using ResourceList = std::map<std::string, Amount, std::less<>>;

// A ResourceList from a JSON map of quantities; the first bad one is InvalidArgument naming it.
Result<ResourceList> ParseResourceList(const json::value* quantities);
json::object ResourceListJson(const ResourceList& list);

// `a + b` per name; a name in only one side keeps its amount. The sum keeps a's format.
ResourceList Add(const ResourceList& a, const ResourceList& b);
// The larger of each name's amounts.
ResourceList Max(const ResourceList& a, const ResourceList& b);
// resource=amount pairs joined by ",", as the quota admission's prettyPrint.
std::string PrettyPrint(const ResourceList& list);

// A container's requests and limits (unparsable amounts are left out: validation refused them).
ResourceList ContainerRequests(const json::object& container);
ResourceList ContainerLimits(const json::object& container);

// What a pod asks of a node and of quota: the sum over its containers, or the largest init
// container's amount when that is more (resource helpers' PodRequests / PodLimits), plus
// spec.overhead.
ResourceList PodRequests(const json::object& pod);
ResourceList PodLimits(const json::object& pod);

// Guaranteed, Burstable or BestEffort, as the API server computes status.qosClass.
std::string QosClass(const json::object& pod);

}  // namespace uplink::kubesim
