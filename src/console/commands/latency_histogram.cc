#include "console/commands/latency_histogram.h"

#include <cstdio>

namespace uplink::console {
namespace {

std::string FormatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", seconds);
  return text;
}

}  // namespace

void LatencyHistogram::Observe(std::chrono::nanoseconds duration) {
  double seconds = std::chrono::duration<double>(duration).count();
  if (seconds < 0) seconds = 0;
  std::lock_guard lock(mutex_);
  ++count_;
  sum_seconds_ += seconds;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) {
      ++buckets_[i];
      break;
    }
  }
}

std::uint64_t LatencyHistogram::count() const {
  std::lock_guard lock(mutex_);
  return count_;
}

std::uint64_t LatencyHistogram::CumulativeCount(size_t index) const {
  std::lock_guard lock(mutex_);
  std::uint64_t total = 0;
  for (size_t i = 0; i <= index && i < buckets_.size(); ++i) total += buckets_[i];
  return total;
}

std::string LatencyHistogram::RenderText(std::string_view name, std::string_view help) const {
  std::lock_guard lock(mutex_);
  std::string base(name);
  std::string out = "# HELP " + base + " " + std::string(help) + "\n";
  out += "# TYPE " + base + " histogram\n";
  std::uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets_[i];
    out += base + "_bucket{le=\"" + FormatSeconds(kBounds[i]) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += base + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += base + "_sum " + FormatSeconds(sum_seconds_) + "\n";
  out += base + "_count " + std::to_string(count_) + "\n";
  return out;
}

}  // namespace uplink::console
