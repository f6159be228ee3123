#include "common/metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace uplink::metrics {
namespace {

void AppendEscapedLabelValue(std::string& out, std::string_view value) {
  // Runs without a character to escape are appended whole: every request updates a sample.
  for (size_t i = 0; i < value.size();) {
    size_t run_end = std::min(value.find_first_of("\\\"\n", i), value.size());
    out.append(value, i, run_end - i);
    if (run_end == value.size()) break;
    char c = value[run_end];
    out += c == '\n' ? "\\n" : c == '"' ? "\\\"" : "\\\\";
    i = run_end + 1;
  }
}

// Renders into `out` (cleared first), so that a caller can reuse one buffer.
void RenderLabels(const Labels& labels, std::string& out) {
  out.clear();
  if (labels.size() == 0) return;
  out += '{';
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ',';
    out += name;
    out += "=\"";
    AppendEscapedLabelValue(out, value);
    out += '"';
  }
  out += '}';
}

void AppendValue(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[40];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    // Counters and most gauges: exact integers, written without printf (an exporter renders
    // these on every scrape).
    if (value == 0 && std::signbit(value)) {
      out += "-0";
      return;
    }
    const auto integer = static_cast<std::int64_t>(value);
    out.append(buf, std::to_chars(buf, buf + sizeof buf, integer).ptr);
    return;
  }
  out.append(buf, static_cast<size_t>(std::snprintf(buf, sizeof buf, "%.9g", value)));
}

}  // namespace

void Registry::Declare(std::string_view name, std::string_view type, std::string_view help) {
  std::lock_guard lock(mutex_);
  auto family = families_.find(name);
  if (family == families_.end()) family = families_.emplace(std::string(name), Family{}).first;
  family->second.type = type;
  family->second.help = help;
}

void Registry::DeclareCounter(std::string_view name, std::string_view help) {
  Declare(name, "counter", help);
}

void Registry::DeclareGauge(std::string_view name, std::string_view help) {
  Declare(name, "gauge", help);
}

double* Registry::Sample(std::string_view name, const Labels& labels) {
  auto family = families_.find(name);
  assert(family != families_.end() && "metric not declared");
  if (family == families_.end()) return nullptr;
  RenderLabels(labels, scratch_);
  auto& samples = family->second.samples;
  auto sample = samples.find(scratch_);
  if (sample == samples.end()) sample = samples.emplace(scratch_, 0.0).first;
  return &sample->second;
}

void Registry::Increment(std::string_view name, const Labels& labels, double by) {
  std::lock_guard lock(mutex_);
  if (double* sample = Sample(name, labels)) *sample += by;
}

void Registry::Set(std::string_view name, double value, const Labels& labels) {
  std::lock_guard lock(mutex_);
  if (double* sample = Sample(name, labels)) *sample = value;
}

double Registry::Get(std::string_view name, const Labels& labels) const {
  std::lock_guard lock(mutex_);
  auto family = families_.find(name);
  if (family == families_.end()) return 0;
  RenderLabels(labels, scratch_);
  auto sample = family->second.samples.find(scratch_);
  return sample == family->second.samples.end() ? 0 : sample->second;
}

std::string Registry::RenderText() const {
  std::string out;
  RenderTextTo(out);
  return out;
}

void Registry::RenderTextTo(std::string& out) const {
  std::lock_guard lock(mutex_);
  std::vector<const std::pair<const std::string, double>*> samples;
  for (const auto& [name, family] : families_) {
    out.append("# HELP ").append(name).append(" ").append(family.help).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(family.type).append("\n");
    if (family.samples.empty() && family.type == "counter") out.append(name).append(" 0\n");
    samples.clear();
    for (const auto& sample : family.samples) samples.push_back(&sample);
    std::sort(samples.begin(), samples.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
    for (const auto* sample : samples) {
      out.append(name).append(sample->first).append(" ");
      AppendValue(out, sample->second);
      out += '\n';
    }
  }
}

}  // namespace uplink::metrics
