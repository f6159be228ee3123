#include "agent/node/format/text_output.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "common/text.h"

namespace uplink::agent::node {
namespace {

// Calls emit(character) for each character of `text`, an invalid byte counting as U+FFFD,
// while the characters emitted so far stay within `max_bytes`.
template <typename Emit>
void ForEachCharacter(std::string_view text, std::size_t max_bytes, Emit emit) {
  std::size_t used = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = Utf8SequenceLength(text, i);
    const std::string_view character =
        length == 0 ? kReplacementCharacter : text.substr(i, length);
    if (used + character.size() > max_bytes) return;
    used += character.size();
    emit(character);
    i += length == 0 ? 1 : length;
  }
}

// Up to 2^53 doubles lie at most 1 apart, so an integer up to there is exact and no shorter
// decimal reads back as it.
constexpr double kMaxExactInteger = 9007199254740992.0;

// A byte a label value keeps as it is: ASCII other than the three the text format escapes.
bool IsPlainAscii(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x80 && c != '\\' && c != '"' && c != '\n';
}

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

void AppendJsonNumber(std::string& out, double value) {
  char buffer[64];
  out.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, value).ptr);
}

void AppendJsonNumber(std::string& out, std::uint64_t value) {
  char buffer[32];
  out.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, value).ptr);
}

void AppendJsonNumber(std::string& out, std::int64_t value) {
  char buffer[32];
  out.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, value).ptr);
}

void AppendJsonString(std::string& out, std::string_view text, std::size_t max_bytes) {
  out += '"';
  ForEachCharacter(text, max_bytes, [&](std::string_view character) {
    const auto c = static_cast<unsigned char>(character.front());
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += character;
    }
  });
  out += '"';
}

void AppendLabelValue(std::string& out, std::string_view text) {
  while (!text.empty()) {
    // Runs of plain ASCII, nearly every value whole, go out as they are.
    std::size_t plain = 0;
    while (plain < text.size() && IsPlainAscii(text[plain])) ++plain;
    out.append(text.data(), plain);
    text.remove_prefix(plain);
    if (text.empty()) return;
    const std::size_t length = Utf8SequenceLength(text, 0);
    switch (text.front()) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += length == 0 ? kReplacementCharacter : text.substr(0, length);
    }
    text.remove_prefix(length == 0 ? 1 : length);
  }
}

}  // namespace uplink::agent::node
