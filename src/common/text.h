// Small text helpers every component needs: excerpts of text from peers (error messages,
// Status objects) shortened before they reach our own messages and logs, UTF-8 checks, ASCII
// case, and decimal numbers read with bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace uplink {

// At most `max_chars` bytes of `text` on one line, cut before a UTF-8 sequence rather than
// inside it, with "..." when cut.
std::string OneLineExcerpt(std::string_view text, size_t max_chars = 200);

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence starting at text[i], or 0 when the byte there does
// not start one (stray continuation byte, overlong form, surrogate, past U+10FFFF, cut short).
// Inline: the Prometheus renderer calls it for every character of every label value.
inline size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;
    if (lead == 0xED) second_max = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;
    if (lead == 0xF4) second_max = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < second_min || byte(i + 1) > second_max) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

// `text` as valid UTF-8: every byte that is not part of a valid sequence becomes U+FFFD, so
// output from a program prints as a JSON string.
std::string ValidUtf8(std::string_view text);

// `text` as one word of a POSIX shell command: as it is when it holds only characters no
// shell treats specially, else in single quotes.
std::string ShellQuote(std::string_view text);

// A-Z as a-z, every other byte as it is. Unlike std::tolower: the same under every locale,
// and defined for every char (std::tolower of a negative char is undefined).
constexpr char AsciiLower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}
std::string AsciiLower(std::string_view text);
// Equal when A-Z and a-z count as the same (HTTP header names, media types, codings).
bool EqualsIgnoringAsciiCase(std::string_view a, std::string_view b);
bool StartsWithIgnoringAsciiCase(std::string_view text, std::string_view prefix);

// A whole number written in decimal digits only, from `min` to `max`: nullopt for anything
// else (empty, a sign, a space, any other character, a value out of range or past 64 bits).
// Leading zeros are allowed ("007" is 7). Every bounded number people or peers send goes
// through here: query parameters, flags, ports, /proc fields. Inline: the node role reads
// thousands of /proc fields a cycle with it.
inline std::optional<std::uint64_t> ParseDecimal(
    std::string_view text, std::uint64_t min = 0,
    std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
  if (text.empty()) return std::nullopt;
  // 19 digits never reach 2^64: only longer numbers need the overflow checks.
  constexpr size_t kDigitsThatFit = 19;
  std::uint64_t value = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const std::uint64_t digit = static_cast<unsigned char>(text[i]) - std::uint64_t{'0'};
    if (digit > 9) return std::nullopt;
    if (i < kDigitsThatFit) {
      value = value * 10 + digit;
    } else if (__builtin_mul_overflow(value, std::uint64_t{10}, &value) ||
               __builtin_add_overflow(value, digit, &value)) {
      return std::nullopt;
    }
  }
  if (value < min || value > max) return std::nullopt;
  return value;
}
// ParseDecimal for a signed destination: `max` at most INT64_MAX.
inline std::optional<std::int64_t> ParseDecimalInt(std::string_view text, std::int64_t min,
                                                   std::int64_t max) {
  if (min < 0 || max < min) return std::nullopt;
  auto value = ParseDecimal(text, static_cast<std::uint64_t>(min), static_cast<std::uint64_t>(max));
  if (!value) return std::nullopt;
  return static_cast<std::int64_t>(*value);
}

}  // namespace uplink
