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

}  // namespace uplink
