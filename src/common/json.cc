// The single translation unit that compiles Boost.JSON and Boost.URL.
#include <boost/json/src.hpp>
#include <boost/url/src.hpp>

#include "common/json.h"

namespace uplink {

Result<json::value> ParseJson(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return ResourceExhaustedError("JSON body of " + std::to_string(text.size()) +
                                  " bytes is over the " + std::to_string(limits.max_bytes) +
                                  "-byte limit");
  }
  json::parse_options options;
  options.max_depth = limits.max_depth;
  json::stream_parser parser({}, options);
  boost::system::error_code ec;
  size_t consumed = parser.write_some(text.data(), text.size(), ec);
  if (!ec && consumed < text.size()) ec = json::make_error_code(json::error::extra_data);
  if (!ec) parser.finish(ec);
  if (ec) {
    return InvalidArgumentError("invalid JSON at byte " + std::to_string(consumed) + ": " +
                                ec.message());
  }
  return parser.release();
}

std::string ToJson(const json::value& value) { return json::serialize(value); }

}  // namespace uplink
