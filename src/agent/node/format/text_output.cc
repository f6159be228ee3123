#include "agent/node/format/text_output.h"

#include <charconv>
#include <cmath>

namespace uplink::agent::node {
namespace {

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// The length of the valid UTF-8 sequence starting text[i], or 0 when the byte there does not
// start one (stray continuation byte, overlong form, surrogate, past U+10FFFF, cut short).
std::size_t Utf8SequenceLength(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  std::size_t length;
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
  for (std::size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

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
  char buffer[64];
  const char* end =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific).ptr;
  const std::string_view scientific(buffer, static_cast<std::size_t>(end - buffer));
  // "d.ddde+XX": the sign is always written, which from_chars would refuse.
  const std::size_t e = scientific.find('e');
  int exponent = 0;
  std::from_chars(scientific.data() + e + 2, end, exponent);
  if (scientific[e + 1] == '-') exponent = -exponent;
  if (exponent < -4 || exponent >= 6) {
    out += scientific;  // to_chars writes at least two exponent digits, as Go does
    return;
  }
  end = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed).ptr;
  out.append(buffer, static_cast<std::size_t>(end - buffer));
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
  ForEachCharacter(text, text.size() * kReplacementCharacter.size(),
                   [&](std::string_view character) {
                     switch (character.front()) {
                       case '\\': out += "\\\\"; break;
                       case '"': out += "\\\""; break;
                       case '\n': out += "\\n"; break;
                       default: out += character;
                     }
                   });
}

}  // namespace uplink::agent::node
