// Pieces both formats share: numbers, and strings from the host (device names, mount points,
// error texts) made valid UTF-8, bounded and escaped. Prometheus sample values are printed
// with metrics::AppendGoFloat.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace uplink::agent::node {

// The shortest digits that read back as `value`, in a form JSON accepts ("0.52", "1e+21").
// `value` must be finite.
void AppendJsonNumber(std::string& out, double value);
void AppendJsonNumber(std::string& out, std::uint64_t value);
void AppendJsonNumber(std::string& out, std::int64_t value);

// `text` as a JSON string literal, quotes included: invalid UTF-8 becomes U+FFFD, control
// characters are escaped, and at most `max_bytes` bytes of content are kept (cut between
// characters, never inside one).
void AppendJsonString(std::string& out, std::string_view text, std::size_t max_bytes);

// `text` as the inside of a Prometheus label value: invalid UTF-8 becomes U+FFFD, and
// backslash, double quote and newline are escaped as the text format requires.
void AppendLabelValue(std::string& out, std::string_view text);

}  // namespace uplink::agent::node
