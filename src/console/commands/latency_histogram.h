// A Prometheus histogram of durations, rendered in text format 0.0.4 beside the console's
// metrics::Registry (which keeps counters and gauges only). Thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace uplink::console {

class LatencyHistogram {
 public:
  // Upper bounds in seconds: fine below 100 ms (the pickup goal), coarse up to the 60 s
  // give-up.
  static constexpr std::array<double, 14> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1,     2.5,  5,     10,   30};

  void Observe(std::chrono::nanoseconds duration);
  std::uint64_t count() const;
  // How many observations were at most kBounds[index].
  std::uint64_t CumulativeCount(size_t index) const;

  // "# HELP", "# TYPE … histogram", then NAME_bucket{le=…}, NAME_sum and NAME_count.
  std::string RenderText(std::string_view name, std::string_view help) const;

 private:
  mutable std::mutex mutex_;
  std::array<std::uint64_t, kBounds.size()> buckets_{};  // not cumulative
  std::uint64_t count_ = 0;
  double sum_seconds_ = 0;
};

}  // namespace uplink::console
