// Text from peers (error messages, Status objects) shortened before it reaches our own
// messages and logs: one line, bounded, control characters blanked.
#pragma once

#include <cstddef>
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

}  // namespace uplink
