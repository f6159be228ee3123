#include "common/decimal.h"

#include <locale.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>

namespace uplink {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Length of the longest run of digits at `text[i]`.
size_t Digits(std::string_view text, size_t i) {
  size_t n = 0;
  while (i + n < text.size() && IsDigit(text[i + n])) ++n;
  return n;
}

// Whether `text` is exactly the grammar above; strtod alone would also take spaces, '+',
// hex and "inf".
bool IsDecimal(std::string_view text) {
  size_t i = 0;
  if (i < text.size() && text[i] == '-') ++i;
  const size_t integer = Digits(text, i);
  i += integer;
  size_t fraction = 0;
  if (i < text.size() && text[i] == '.') {
    fraction = Digits(text, i + 1);
    i += 1 + fraction;
  }
  if (integer == 0 && fraction == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    const size_t exponent = Digits(text, i);
    if (exponent == 0) return false;
    i += exponent;
  }
  return i == text.size();
}

}  // namespace

std::optional<double> ParseFiniteDouble(std::string_view text) {
  // Longer text is no number any of our sources writes; the bound keeps the copy on the stack.
  constexpr size_t kMaxLength = 127;
  if (text.size() > kMaxLength || !IsDecimal(text)) return std::nullopt;
  // strtod_l with the C locale: the decimal point is '.' whatever the process's locale.
  static const locale_t c_locale = ::newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(0));
  if (c_locale == static_cast<locale_t>(0)) return std::nullopt;
  char terminated[kMaxLength + 1];
  std::memcpy(terminated, text.data(), text.size());
  terminated[text.size()] = '\0';
  char* end = nullptr;
  const double value = ::strtod_l(terminated, &end, c_locale);
  if (end != terminated + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace uplink
