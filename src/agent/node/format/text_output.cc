#include "agent/node/format/text_output.h"

#include <charconv>

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

// A byte a label value keeps as it is: ASCII other than the three the text format escapes.
bool IsPlainAscii(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x80 && c != '\\' && c != '"' && c != '\n';
}

}  // namespace

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
