#include "common/quantity.h"

#include <array>
#include <limits>

namespace uplink {
namespace {

// Decimal exponents beyond this are refused outright (apimachinery limits them to int32;
// anything past a few dozen cannot produce an exact int64 anyway, except for zero).
constexpr int kMaxDecimalExponent = 1000;
constexpr size_t kMaxSignificantDigits = 38;  // fits unsigned __int128

// Quotes user text in messages, cut short so a hostile value cannot flood a log line.
std::string Quoted(std::string_view text) {
  constexpr size_t kMaxShown = 40;
  std::string shown;
  for (char c : text.substr(0, kMaxShown)) {
    unsigned char u = static_cast<unsigned char>(c);
    shown += (u < 0x20 || u >= 0x7f) ? '?' : c;
  }
  if (text.size() > kMaxShown) shown += "...";
  return "'" + shown + "'";
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

struct Suffix {
  std::string_view text;
  int decimal_exponent;
  int binary_exponent;
};

constexpr std::array<Suffix, 16> kSuffixes{{
    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"", 0, 0},    {"k", 3, 0},   {"M", 6, 0},
    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
}};

}  // namespace

Result<Quantity> Quantity::Parse(std::string_view text) {
  auto not_a_quantity = [&] {
    return InvalidArgumentError(Quoted(text) + " is not a Kubernetes quantity");
  };
  if (text.empty()) return InvalidArgumentError("'' is not a Kubernetes quantity (it is empty)");
  if (text.size() > kMaxLength) {
    return InvalidArgumentError(Quoted(text) + " is not a Kubernetes quantity (longer than " +
                                std::to_string(kMaxLength) + " characters)");
  }

  Quantity q;
  q.text_ = std::string(text);
  size_t pos = 0;
  if (text[pos] == '+' || text[pos] == '-') {
    q.negative_ = text[pos] == '-';
    ++pos;
  }
  size_t int_start = pos;
  while (pos < text.size() && IsDigit(text[pos])) ++pos;
  std::string_view integer_part = text.substr(int_start, pos - int_start);
  std::string_view fraction_part;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    size_t frac_start = pos;
    while (pos < text.size() && IsDigit(text[pos])) ++pos;
    fraction_part = text.substr(frac_start, pos - frac_start);
  }
  if (integer_part.empty() && fraction_part.empty()) return not_a_quantity();

  // Suffix.
  std::string_view suffix = text.substr(pos);
  int decimal_exponent = 0;
  int binary_exponent = 0;
  bool known = false;
  for (const Suffix& s : kSuffixes) {
    if (s.text == suffix) {
      decimal_exponent = s.decimal_exponent;
      binary_exponent = s.binary_exponent;
      known = true;
      break;
    }
  }
  if (!known) {
    if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) return not_a_quantity();
    size_t i = 1;
    bool exponent_negative = false;
    if (suffix[i] == '+' || suffix[i] == '-') {
      exponent_negative = suffix[i] == '-';
      ++i;
    }
    if (i >= suffix.size()) return not_a_quantity();
    int exponent = 0;
    for (; i < suffix.size(); ++i) {
      if (!IsDigit(suffix[i])) return not_a_quantity();
      exponent = exponent * 10 + (suffix[i] - '0');
      if (exponent > kMaxDecimalExponent) {
        return InvalidArgumentError(Quoted(text) +
                                    " is not a Kubernetes quantity (exponent out of range)");
      }
    }
    decimal_exponent = exponent_negative ? -exponent : exponent;
  }

  // Significand: all digits without leading zeros; fraction digits lower the exponent and
  // trailing zeros raise it, so "1.50" and "15e-1" are the same value.
  std::string digits = std::string(integer_part) + std::string(fraction_part);
  decimal_exponent -= static_cast<int>(fraction_part.size());
  size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) {
    q.negative_ = false;  // -0 is 0
    return q;
  }
  digits.erase(0, first);
  while (digits.back() == '0') {
    digits.pop_back();
    ++decimal_exponent;
  }
  if (digits.size() > kMaxSignificantDigits) {
    return InvalidArgumentError(Quoted(text) + " has more than " +
                                std::to_string(kMaxSignificantDigits) + " significant digits");
  }
  for (char c : digits) q.significand_ = q.significand_ * 10 + static_cast<unsigned>(c - '0');
  q.decimal_exponent_ = decimal_exponent;
  q.binary_exponent_ = binary_exponent;
  return q;
}

Result<std::int64_t> Quantity::MilliValue() const {
  if (significand_ == 0) return std::int64_t{0};
  constexpr unsigned __int128 kLimit = std::numeric_limits<std::int64_t>::max();
  auto too_large = [&] {
    return ResourceExhaustedError("quantity " + Quoted(text_) + " is too large to count exactly");
  };
  unsigned __int128 value = significand_;
  int exponent = decimal_exponent_ + 3;  // thousandths
  // Scale up by 2^b first: the significand is below 2^127 / 10 only when it is short, so
  // check before each step instead of relying on that.
  for (int i = 0; i < binary_exponent_; ++i) {
    if (value > (std::numeric_limits<unsigned __int128>::max() >> 1)) return too_large();
    value <<= 1;
  }
  for (; exponent > 0; --exponent) {
    if (value > kLimit / 10) return too_large();
    value *= 10;
  }
  for (; exponent < 0; ++exponent) {
    if (value % 10 != 0) {
      return InvalidArgumentError("quantity " + Quoted(text_) +
                                  " is finer than a thousandth and cannot be counted exactly");
    }
    value /= 10;
  }
  if (value > kLimit) return too_large();
  std::int64_t milli = static_cast<std::int64_t>(value);
  return negative_ ? -milli : milli;
}

Result<std::int64_t> Quantity::WholeCount() const {
  if (negative_) {
    return InvalidArgumentError("quantity " + Quoted(text_) + " is negative; a count cannot be");
  }
  auto milli = MilliValue();
  if (!milli.ok()) {
    if (milli.status().code() == StatusCode::kResourceExhausted) return milli.status();
    return InvalidArgumentError("quantity " + Quoted(text_) + " is not a whole number");
  }
  if (*milli % 1000 != 0) {
    return InvalidArgumentError("quantity " + Quoted(text_) + " is not a whole number");
  }
  return *milli / 1000;
}

}  // namespace uplink
