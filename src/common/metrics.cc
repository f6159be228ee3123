#include "common/metrics.h"

#include <cassert>
#include <cmath>
#include <cstdio>

namespace uplink::metrics {
namespace {

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", value);
  } else {
    std::snprintf(buf, sizeof buf, "%.9g", value);
  }
  return buf;
}

}  // namespace

std::string Registry::RenderLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    out += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
  }
  return out + "}";
}

void Registry::DeclareCounter(const std::string& name, const std::string& help) {
  std::lock_guard lock(mutex_);
  auto& family = families_[name];
  family.type = "counter";
  family.help = help;
}

void Registry::DeclareGauge(const std::string& name, const std::string& help) {
  std::lock_guard lock(mutex_);
  auto& family = families_[name];
  family.type = "gauge";
  family.help = help;
}

void Registry::Increment(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mutex_);
  auto it = families_.find(name);
  assert(it != families_.end() && "metric not declared");
  if (it == families_.end()) return;
  it->second.samples[RenderLabels(labels)] += by;
}

void Registry::Set(const std::string& name, double value, const Labels& labels) {
  std::lock_guard lock(mutex_);
  auto it = families_.find(name);
  assert(it != families_.end() && "metric not declared");
  if (it == families_.end()) return;
  it->second.samples[RenderLabels(labels)] = value;
}

double Registry::Get(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mutex_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto sample = it->second.samples.find(RenderLabels(labels));
  return sample == it->second.samples.end() ? 0 : sample->second;
}

std::string Registry::RenderText() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, family] : families_) {
    out += "# HELP " + name + " " + family.help + "\n";
    out += "# TYPE " + name + " " + family.type + "\n";
    if (family.samples.empty() && family.type == "counter") out += name + " 0\n";
    for (const auto& [labels, value] : family.samples) {
      out += name + labels + " " + FormatValue(value) + "\n";
    }
  }
  return out;
}

}  // namespace uplink::metrics
