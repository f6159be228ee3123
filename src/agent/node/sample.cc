#include "agent/node/sample.h"

#include <bit>
#include <iterator>

#include "protocol/plans.h"

namespace uplink::agent::node {

static_assert(std::size(kAllCollectors) == std::size(protocol::kNodeCollectors));

std::string_view CollectorName(Collector c) {
  // Collector bit i is the i-th of the protocol's collector names.
  const auto bit = static_cast<std::uint32_t>(c);
  const int index = std::countr_zero(bit);
  if (std::has_single_bit(bit) && index < static_cast<int>(std::size(protocol::kNodeCollectors))) {
    return protocol::kNodeCollectors[index];
  }
  return "unknown";
}

Result<Collector> ParseCollectorName(std::string_view name) {
  for (Collector c : kAllCollectors) {
    if (CollectorName(c) == name) return c;
  }
  std::string known;
  for (std::string_view collector : protocol::kNodeCollectors) {
    known += (known.empty() ? "" : ", ") + std::string(collector);
  }
  return InvalidArgumentError("unknown collector '" + std::string(name) + "'; known: " + known);
}

std::string_view GpuSourceName(GpuSource source) {
  switch (source) {
    case GpuSource::kNone: return "none";
    case GpuSource::kNvml: return "nvml";
    case GpuSource::kNvidiaSmi: return "nvidia-smi";
  }
  return "none";
}

}  // namespace uplink::agent::node
