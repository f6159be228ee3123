#include "common/time.h"

#include <string>

namespace uplink {
namespace {

class RealClock final : public Clock {
 public:
  WallTime Now() const override { return std::chrono::system_clock::now(); }
  SteadyTime SteadyNow() const override { return std::chrono::steady_clock::now(); }
};

bool ParseDigits(std::string_view text, size_t pos, size_t count, int& out) {
  if (pos + count > text.size()) return false;
  int value = 0;
  for (size_t i = pos; i < pos + count; ++i) {
    char c = text[i];
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  out = value;
  return true;
}

// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

}  // namespace

Clock& SystemClock() {
  static RealClock clock;
  return clock;
}

FakeClock::FakeClock(WallTime start) : wall_(start), steady_(SteadyTime(std::chrono::hours(1))) {}

WallTime FakeClock::Now() const {
  std::lock_guard lock(mutex_);
  return wall_;
}

SteadyTime FakeClock::SteadyNow() const {
  std::lock_guard lock(mutex_);
  return steady_;
}

void FakeClock::Advance(std::chrono::nanoseconds by) {
  std::lock_guard lock(mutex_);
  wall_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(by);
  steady_ += by;
}

void FakeClock::SetNow(WallTime now) {
  std::lock_guard lock(mutex_);
  wall_ = now;
}

namespace {

void AppendDigits(std::string& out, unsigned value, int width) {
  char digits[10];
  for (int i = width - 1; i >= 0; --i, value /= 10) digits[i] = static_cast<char>('0' + value % 10);
  out.append(digits, static_cast<size_t>(width));
}

// "YYYY-MM-DDTHH:MM:SS" by calendar arithmetic rather than gmtime_r and strftime, whose
// locale and time-zone machinery showed in the cost of every agent request (a reply carries
// expires_at) and of every log line.
std::string DateTime(std::chrono::sys_seconds t) {
  const auto day = std::chrono::floor<std::chrono::days>(t);
  const std::chrono::year_month_day date{day};
  const std::chrono::hh_mm_ss time{t - day};
  std::string out;
  out.reserve(24);
  // WallTime counts nanoseconds in 64 bits: its years are 1677 to 2262.
  AppendDigits(out, static_cast<unsigned>(static_cast<int>(date.year())), 4);
  out += '-';
  AppendDigits(out, static_cast<unsigned>(date.month()), 2);
  out += '-';
  AppendDigits(out, static_cast<unsigned>(date.day()), 2);
  out += 'T';
  AppendDigits(out, static_cast<unsigned>(time.hours().count()), 2);
  out += ':';
  AppendDigits(out, static_cast<unsigned>(time.minutes().count()), 2);
  out += ':';
  AppendDigits(out, static_cast<unsigned>(time.seconds().count()), 2);
  return out;
}

}  // namespace

std::string FormatRfc3339(WallTime t) {
  return DateTime(std::chrono::floor<std::chrono::seconds>(t)) + 'Z';
}

std::string FormatRfc3339Millis(WallTime t) {
  const auto seconds = std::chrono::floor<std::chrono::seconds>(t);
  std::string out = DateTime(seconds);
  out += '.';
  AppendDigits(out, static_cast<unsigned>(
                        std::chrono::duration_cast<std::chrono::milliseconds>(t - seconds).count()),
               3);
  out += 'Z';
  return out;
}

std::string FormatRfc3339Micro(WallTime t) {
  const auto seconds = std::chrono::floor<std::chrono::seconds>(t);
  std::string out = DateTime(seconds);
  out += '.';
  AppendDigits(out, static_cast<unsigned>(
                        std::chrono::duration_cast<std::chrono::microseconds>(t - seconds).count()),
               6);
  out += 'Z';
  return out;
}

Result<WallTime> ParseRfc3339(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError("'" + std::string(text.substr(0, 64)) +
                                "' is not an RFC 3339 time such as 2026-11-30T03:20:00Z");
  };
  int year, month, day, hour, minute, second;
  if (text.size() < 20 || !ParseDigits(text, 0, 4, year) || text[4] != '-' ||
      !ParseDigits(text, 5, 2, month) || text[7] != '-' || !ParseDigits(text, 8, 2, day) ||
      (text[10] != 'T' && text[10] != 't') || !ParseDigits(text, 11, 2, hour) ||
      text[13] != ':' || !ParseDigits(text, 14, 2, minute) || text[16] != ':' ||
      !ParseDigits(text, 17, 2, second)) {
    return bad();
  }
  static constexpr int kDaysInMonth[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDaysInMonth[month - 1] || hour > 23 ||
      minute > 59 || second > 60) {
    return bad();
  }
  size_t pos = 19;
  std::int64_t nanos = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    size_t digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 9) nanos = nanos * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return bad();
    for (size_t i = digits; i < 9; ++i) nanos *= 10;
  }
  std::int64_t offset_seconds = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int oh, om;
    if (!ParseDigits(text, pos + 1, 2, oh) || pos + 3 >= text.size() || text[pos + 3] != ':' ||
        !ParseDigits(text, pos + 4, 2, om) || oh > 23 || om > 59) {
      return bad();
    }
    offset_seconds = (oh * 3600 + om * 60) * (text[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return bad();
  }
  if (pos != text.size()) return bad();
  std::int64_t days = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  std::int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_seconds;
  // system_clock counts nanoseconds in 64 bits: about 1678 to 2262. Refuse what it cannot hold
  // rather than wrap around.
  constexpr std::int64_t kMaxSeconds =
      std::chrono::duration_cast<std::chrono::seconds>(WallTime::duration::max()).count() - 1;
  if (seconds > kMaxSeconds || seconds < -kMaxSeconds) {
    return InvalidArgumentError("'" + std::string(text.substr(0, 64)) +
                                "' is outside the years this clock can represent (1678-2262)");
  }
  return WallTime(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(seconds) + std::chrono::nanoseconds(nanos)));
}

std::int64_t ToUnixSeconds(WallTime t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

WallTime FromUnixSeconds(std::int64_t seconds) { return WallTime(std::chrono::seconds(seconds)); }

}  // namespace uplink
