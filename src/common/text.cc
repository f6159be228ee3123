#include "common/text.h"

#include <algorithm>

namespace uplink {

std::string OneLineExcerpt(std::string_view text, size_t max_chars) {
  size_t cut = std::min(max_chars, text.size());
  // Never in the middle of a UTF-8 sequence: the excerpt goes into JSON replies and logs.
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) {
    --cut;
  }
  std::string_view head = text.substr(0, cut);
  std::string out;
  for (size_t i = 0; i < head.size(); ++i) {
    unsigned char u = static_cast<unsigned char>(head[i]);
    // C1 controls (U+0080-U+009F, UTF-8 C2 80-C2 9F) include CSI, which a terminal obeys
    // like ESC [.
    if (u == 0xc2 && i + 1 < head.size() &&
        static_cast<unsigned char>(head[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(head[i + 1]) <= 0x9f) {
      out += ' ';
      ++i;
      continue;
    }
    out += (u < 0x20 || u == 0x7f) ? ' ' : head[i];
  }
  if (text.size() > max_chars) out += "...";
  return out;
}

size_t Utf8SequenceLength(std::string_view text, size_t i) {
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

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      out += kReplacementCharacter;
      ++i;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  return out;
}

}  // namespace uplink
