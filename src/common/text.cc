#include "common/text.h"

#include <algorithm>
#include <cctype>

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

std::string ShellQuote(std::string_view text) {
  bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_./:=@%+,").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(text);
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

bool EqualsIgnoringAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

bool StartsWithIgnoringAsciiCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         EqualsIgnoringAsciiCase(text.substr(0, prefix.size()), prefix);
}

}  // namespace uplink
