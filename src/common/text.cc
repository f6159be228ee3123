#include "common/text.h"

namespace uplink {

std::string OneLineExcerpt(std::string_view text, size_t max_chars) {
  std::string out;
  for (char c : text.substr(0, max_chars)) {
    unsigned char u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? ' ' : c;
  }
  if (text.size() > max_chars) out += "...";
  return out;
}

}  // namespace uplink
