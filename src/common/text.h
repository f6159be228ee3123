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
size_t Utf8SequenceLength(std::string_view text, size_t i);

// `text` as valid UTF-8: every byte that is not part of a valid sequence becomes U+FFFD, so
// output from a program prints as a JSON string.
std::string ValidUtf8(std::string_view text);

}  // namespace uplink
