// A small Prometheus registry: counters and gauges with labels, rendered as text format
// 0.0.4 for /metrics. Thread-safe; an update of an existing sample is a mutex and a map
// lookup and allocates nothing, since every request of the console counts itself.
#pragma once

#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace uplink::metrics {

// A sample value as the Go Prometheus client (and so node_exporter) prints it, which is
// strconv.FormatFloat(v, 'g', -1, 64): the shortest digits that read back as `v`, in exponent
// form ("1.6777216e+10") when the exponent is below -4 or at least 6, otherwise plain
// ("123456.5"); NaN and infinities as the text format spells them ("NaN", "+Inf", "-Inf").
void AppendGoFloat(std::string& out, double value);

// Names and values are only read during the call, so a caller's labels allocate nothing.
using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

class Registry {
 public:
  // Declares a family once (help text and type); updates to undeclared names are ignored in
  // release builds and assert in debug builds.
  void DeclareCounter(std::string_view name, std::string_view help);
  void DeclareGauge(std::string_view name, std::string_view help);

  void Increment(std::string_view name, const Labels& labels = {}, double by = 1);
  void Set(std::string_view name, double value, const Labels& labels = {});
  double Get(std::string_view name, const Labels& labels = {}) const;

  std::string RenderText() const;
  // The same text appended to `out`, for a caller that renders more into one buffer.
  void RenderTextTo(std::string& out) const;

 private:
  struct Family {
    std::string type;
    std::string help;
    // Rendered label set -> value. Hashed: label sets share long prefixes ({route="/api/v1/...),
    // which an ordered map would compare on every update; /metrics sorts them instead.
    std::unordered_map<std::string, double> samples;
  };
  void Declare(std::string_view name, std::string_view type, std::string_view help);
  // The sample of `name` for `labels`, created at 0 if new; null if `name` was not declared.
  double* Sample(std::string_view name, const Labels& labels);

  mutable std::mutex mutex_;
  std::map<std::string, Family, std::less<>> families_;
  mutable std::string scratch_;  // rendered labels of the update in progress, under mutex_
};

}  // namespace uplink::metrics
