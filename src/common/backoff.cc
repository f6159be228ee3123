#include "common/backoff.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <string>

namespace uplink {
namespace {

double DefaultRandom() {
  static std::mutex mutex;
  static std::mt19937_64 engine{std::random_device{}()};
  std::lock_guard lock(mutex);
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

// Parses one of the three HTTP-date forms (RFC 9110 section 5.6.7) as UTC seconds since the
// epoch. Kept in seconds: a date such as year 9999 does not fit the nanosecond system_clock.
std::optional<std::int64_t> ParseHttpDate(const std::string& text) {
  static constexpr const char* kFormats[] = {
      "%a, %d %b %Y %H:%M:%S GMT",  // IMF-fixdate
      "%A, %d-%b-%y %H:%M:%S GMT",  // RFC 850
      "%a %b %e %H:%M:%S %Y",       // asctime
  };
  for (const char* format : kFormats) {
    std::tm tm{};
    const char* end = ::strptime(text.c_str(), format, &tm);
    if (end != nullptr && *end == '\0') {
      std::time_t seconds = ::timegm(&tm);
      if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
      return static_cast<std::int64_t>(seconds);
    }
  }
  return std::nullopt;
}

}  // namespace

Backoff::Backoff(BackoffOptions options, RandomSource random)
    : options_(options), random_(random ? std::move(random) : RandomSource(DefaultRandom)) {}

std::chrono::milliseconds Backoff::NextDelay(std::optional<std::chrono::milliseconds> retry_after) {
  // base * 2^failures, saturating at the cap without overflowing.
  std::chrono::milliseconds ceiling = options_.base;
  for (int i = 0; i < failures_ && ceiling < options_.cap; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, options_.cap);
  if (failures_ < 64) ++failures_;

  double fraction = std::clamp(random_(), 0.0, 1.0);
  auto delay = std::chrono::milliseconds(
      static_cast<std::int64_t>(fraction * static_cast<double>(ceiling.count())));
  if (retry_after) {
    delay = std::max(delay, std::clamp(*retry_after, std::chrono::milliseconds(0),
                                       options_.max_retry_after));
  }
  return delay;
}

Result<std::chrono::milliseconds> ParseRetryAfter(std::string_view value, WallTime now) {
  std::string_view text = value;
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  auto invalid = [&] {
    std::string shown(text.substr(0, 64));
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    return InvalidArgumentError("Retry-After '" + shown +
                                "' is neither delta-seconds nor an HTTP date");
  };
  if (text.empty() || text.size() > 64) return invalid();
  const std::int64_t max_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(kMaxRetryAfter).count();
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    // More than ten digits is already centuries; saturate rather than overflow.
    if (text.size() > 10) return kMaxRetryAfter;
    return std::chrono::milliseconds(
        std::min<std::int64_t>(std::stoll(std::string(text)), max_seconds) * 1000);
  }
  auto date = ParseHttpDate(std::string(text));
  if (!date) return invalid();
  // Compared in whole seconds first: only a date within the cap is turned into a time point.
  const std::int64_t now_seconds = ToUnixSeconds(now);
  if (*date - now_seconds > max_seconds) return kMaxRetryAfter;
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::from_time_t(static_cast<std::time_t>(*date)) - now);
  return std::clamp(wait, std::chrono::milliseconds(0), kMaxRetryAfter);
}

}  // namespace uplink
