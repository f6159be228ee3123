// A small Prometheus registry: counters and gauges with labels, rendered as text format
// 0.0.4 for /metrics. Thread-safe; updates are a mutex and a map lookup, well off any hot
// path in uplink.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace uplink::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Registry {
 public:
  // Declares a family once (help text and type); updates to undeclared names are ignored in
  // release builds and assert in debug builds.
  void DeclareCounter(const std::string& name, const std::string& help);
  void DeclareGauge(const std::string& name, const std::string& help);

  void Increment(const std::string& name, const Labels& labels = {}, double by = 1);
  void Set(const std::string& name, double value, const Labels& labels = {});
  double Get(const std::string& name, const Labels& labels = {}) const;

  std::string RenderText() const;

 private:
  struct Family {
    std::string type;
    std::string help;
    std::map<std::string, double> samples;  // rendered label set -> value
  };
  static std::string RenderLabels(const Labels& labels);

  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

}  // namespace uplink::metrics
