#include "common/metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

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

// Up to 2^53 doubles lie at most 1 apart, so an integer up to there is exact and no shorter
// decimal reads back as it.
constexpr double kMaxExactInteger = 9007199254740992.0;

}  // namespace

void AppendGoFloat(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  if (value == 0) {  // -0 too, as the Prometheus client writes it
    out += '0';
    return;
  }
  // Go's rule, on the shortest digits d1 d2 ... dn of the value and its decimal exponent:
  // "d1.d2...dne+XX" when the exponent is below -4 or at least 6, plain decimals otherwise.
  char digits[64];
  std::size_t count;
  int exponent = 0;
  const double magnitude = std::fabs(value);
  if (magnitude <= kMaxExactInteger && magnitude == std::floor(magnitude)) {
    // Most samples are counters: an integer this size is exact, so its shortest digits are
    // its own decimal digits less the trailing zeros. No float conversion needed.
    const auto integer = static_cast<std::uint64_t>(magnitude);
    count = static_cast<std::size_t>(
        std::to_chars(digits, digits + sizeof digits, integer).ptr - digits);
    exponent = static_cast<int>(count) - 1;
    while (count > 1 && digits[count - 1] == '0') --count;
  } else {
    // "d.ddde+XX" or "de-XX" (the exponent's sign is written, which from_chars refuses).
    const char* end =
        std::to_chars(digits, digits + sizeof digits, magnitude, std::chars_format::scientific)
            .ptr;
    const char* e = std::find(static_cast<const char*>(digits), end, 'e');
    std::from_chars(e + 2, end, exponent);
    if (e[1] == '-') exponent = -exponent;
    // Closes up "d.ddd" to "dddd".
    count = 1;
    if (e - digits > 1) {
      count = static_cast<std::size_t>(e - digits - 1);
      std::memmove(digits + 1, digits + 2, count - 1);
    }
  }
  if (value < 0) out += '-';
  if (exponent < -4 || exponent >= 6) {
    out += digits[0];
    if (count > 1) {
      out += '.';
      out.append(digits + 1, count - 1);
    }
    // At least two exponent digits, as Go writes them.
    char exponent_text[8];
    const int absolute = exponent < 0 ? -exponent : exponent;
    char* exponent_end = std::to_chars(exponent_text, exponent_text + sizeof exponent_text,
                                       absolute)
                             .ptr;
    out += exponent < 0 ? "e-" : "e+";
    if (absolute < 10) out += '0';
    out.append(exponent_text, exponent_end);
  } else if (exponent >= 0) {
    const auto whole = static_cast<std::size_t>(exponent) + 1;
    if (count <= whole) {
      out.append(digits, count);
      out.append(whole - count, '0');
    } else {
      out.append(digits, whole);
      out += '.';
      out.append(digits + whole, count - whole);
    }
  } else {
    out += "0.";
    out.append(static_cast<std::size_t>(-exponent - 1), '0');
    out.append(digits, count);
  }
}

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
      AppendGoFloat(out, sample->second);
      out += '\n';
    }
  }
}

}  // namespace uplink::metrics
