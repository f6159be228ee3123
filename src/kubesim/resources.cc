#include "kubesim/resources.h"

#include <array>

#include "common/quantity.h"

namespace uplink::kubesim {
namespace {

bool HasBinarySuffix(std::string_view text) {
  if (text.size() < 2 || text.back() != 'i') return false;
  return std::string_view("KMGTPE").find(text[text.size() - 2]) != std::string_view::npos;
}

// The pod's containers (or init containers); empty when it has none.
const json::array& Containers(const json::object& pod, std::string_view key) {
  static const json::array kNone;
  const json::value* spec = pod.if_contains("spec");
  if (!spec || !spec->is_object()) return kNone;
  const json::value* containers = spec->get_object().if_contains(key);
  return containers && containers->is_array() ? containers->get_array() : kNone;
}

ResourceList ContainerAmounts(const json::object& container, std::string_view which) {
  const json::value* resources = container.if_contains("resources");
  if (!resources || !resources->is_object()) return {};
  Result<ResourceList> list = ParseResourceList(resources->get_object().if_contains(which));
  return list.ok() ? *list : ResourceList{};
}

ResourceList PodAmounts(const json::object& pod, std::string_view which) {
  ResourceList total;
  for (const json::value& container : Containers(pod, "containers")) {
    if (container.is_object()) total = Add(total, ContainerAmounts(container.get_object(), which));
  }
  for (const json::value& container : Containers(pod, "initContainers")) {
    if (container.is_object()) total = Max(total, ContainerAmounts(container.get_object(), which));
  }
  const json::value* spec = pod.if_contains("spec");
  if (spec && spec->is_object()) {
    Result<ResourceList> overhead = ParseResourceList(spec->get_object().if_contains("overhead"));
    if (overhead.ok()) total = Add(total, *overhead);
  }
  return total;
}

}  // namespace

Result<Amount> Amount::Parse(std::string_view text) {
  UPLINK_ASSIGN_OR_RETURN(Quantity quantity, Quantity::Parse(text));
  UPLINK_ASSIGN_OR_RETURN(std::int64_t milli, quantity.MilliValue());
  return Amount{milli, HasBinarySuffix(text)};
}

std::string Amount::ToString() const {
  if (milli == 0) return "0";
  const bool negative = milli < 0;
  std::uint64_t magnitude = negative ? static_cast<std::uint64_t>(-(milli + 1)) + 1
                                     : static_cast<std::uint64_t>(milli);
  std::string sign = negative ? "-" : "";
  if (magnitude % 1000 != 0) return sign + std::to_string(magnitude) + "m";
  std::uint64_t value = magnitude / 1000;
  // Binary amounts print with a binary suffix when one divides them; below 1024 they print as
  // decimal amounts, as resource.Quantity does.
  if (binary && value >= 1024) {
    static constexpr std::array<const char*, 7> kBinary = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    size_t index = 0;
    while (index + 1 < kBinary.size() && value % 1024 == 0) {
      value /= 1024;
      ++index;
    }
    return sign + std::to_string(value) + kBinary[index];
  }
  static constexpr std::array<const char*, 7> kDecimal = {"", "k", "M", "G", "T", "P", "E"};
  size_t index = 0;
  while (index + 1 < kDecimal.size() && value % 1000 == 0) {
    value /= 1000;
    ++index;
  }
  return sign + std::to_string(value) + kDecimal[index];
}

Result<ResourceList> ParseResourceList(const json::value* quantities) {
  ResourceList list;
  if (!quantities || quantities->is_null()) return list;
  if (!quantities->is_object()) return InvalidArgumentError("resources must be a map of quantities");
  for (const auto& [name, value] : quantities->get_object()) {
    std::string text;
    if (value.is_string()) {
      text = std::string(value.get_string());
    } else if (value.is_int64()) {
      text = std::to_string(value.get_int64());
    } else if (value.is_uint64()) {
      text = std::to_string(value.get_uint64());
    } else {
      return InvalidArgumentError("quantities must match the regular expression "
                                  "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
    }
    Result<Amount> amount = Amount::Parse(text);
    if (!amount.ok()) {
      return InvalidArgumentError("quantities must match the regular expression "
                                  "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
    }
    list.emplace(std::string(name), *amount);
  }
  return list;
}

json::object ResourceListJson(const ResourceList& list) {
  json::object out;
  for (const auto& [name, amount] : list) out[name] = amount.ToString();
  return out;
}

ResourceList Add(const ResourceList& a, const ResourceList& b) {
  ResourceList sum = a;
  for (const auto& [name, amount] : b) {
    auto [it, inserted] = sum.emplace(name, amount);
    if (!inserted) it->second.milli += amount.milli;
  }
  return sum;
}

ResourceList Max(const ResourceList& a, const ResourceList& b) {
  ResourceList result = a;
  for (const auto& [name, amount] : b) {
    auto [it, inserted] = result.emplace(name, amount);
    if (!inserted && amount.milli > it->second.milli) it->second = amount;
  }
  return result;
}

std::string PrettyPrint(const ResourceList& list) {
  std::string text;
  for (const auto& [name, amount] : list) {
    if (!text.empty()) text += ",";
    text += name + "=" + amount.ToString();
  }
  return text;
}

ResourceList ContainerRequests(const json::object& container) {
  return ContainerAmounts(container, "requests");
}

ResourceList ContainerLimits(const json::object& container) {
  return ContainerAmounts(container, "limits");
}

ResourceList PodRequests(const json::object& pod) { return PodAmounts(pod, "requests"); }
ResourceList PodLimits(const json::object& pod) { return PodAmounts(pod, "limits"); }

std::string QosClass(const json::object& pod) {
  ResourceList requests;
  ResourceList limits;
  bool guaranteed = true;
  auto visit = [&](const json::value& entry) {
    if (!entry.is_object()) return;
    int limited = 0;
    for (const auto& [name, amount] : ContainerRequests(entry.get_object())) {
      if ((name == "cpu" || name == "memory") && amount.milli > 0) {
        requests = Add(requests, ResourceList{{name, amount}});
      }
    }
    for (const auto& [name, amount] : ContainerLimits(entry.get_object())) {
      if ((name == "cpu" || name == "memory") && amount.milli > 0) {
        ++limited;
        limits = Add(limits, ResourceList{{name, amount}});
      }
    }
    if (limited < 2) guaranteed = false;
  };
  for (const json::value& container : Containers(pod, "containers")) visit(container);
  for (const json::value& container : Containers(pod, "initContainers")) visit(container);
  if (requests.empty() && limits.empty()) return "BestEffort";
  if (guaranteed) {
    for (const auto& [name, amount] : requests) {
      auto limit = limits.find(name);
      if (limit == limits.end() || limit->second.milli != amount.milli) guaranteed = false;
    }
  }
  return guaranteed && requests.size() == limits.size() ? "Guaranteed" : "Burstable";
}

}  // namespace uplink::kubesim
