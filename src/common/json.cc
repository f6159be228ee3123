// The single translation unit that compiles Boost.JSON and Boost.URL.
#include <boost/json/src.hpp>
// Boost.URL 1.81's url_base.ipp includes <iostream> without using it, and that include alone
// gives every binary a static std::ios_base::Init, which builds the standard streams and every
// locale facet at start-up: with libstdc++ linked in, about 0.3 MiB of resident pages in the
// agent (bench_node). Defining libstdc++'s include guard keeps the header out.
#define _GLIBCXX_IOSTREAM 1
#include <boost/url/src.hpp>

#include "common/json.h"

#include <cmath>

namespace uplink {
namespace {

// Boost.JSON turns numbers beyond double range (1e400) into infinity, which no JSON text can
// represent; such a document is refused rather than silently altered.
bool AllNumbersFinite(const json::value& root) {
  std::vector<const json::value*> pending{&root};
  while (!pending.empty()) {
    const json::value* v = pending.back();
    pending.pop_back();
    if (v->is_double() && !std::isfinite(v->get_double())) return false;
    if (v->is_array()) {
      for (const auto& item : v->get_array()) pending.push_back(&item);
    } else if (v->is_object()) {
      for (const auto& field : v->get_object()) pending.push_back(&field.value());
    }
  }
  return true;
}

}  // namespace

Result<json::value> ParseJson(std::string_view text, const JsonLimits& limits) {
  return ParseJson(text, limits, {});
}

Result<json::value> ParseJson(std::string_view text, const JsonLimits& limits,
                              json::storage_ptr storage) {
  if (text.size() > limits.max_bytes) {
    return ResourceExhaustedError("JSON body of " + std::to_string(text.size()) +
                                  " bytes is over the " + std::to_string(limits.max_bytes) +
                                  "-byte limit");
  }
  json::parse_options options;
  options.max_depth = limits.max_depth;
  json::stream_parser parser({}, options);
  parser.reset(std::move(storage));
  boost::system::error_code ec;
  size_t consumed = parser.write_some(text.data(), text.size(), ec);
  if (!ec && consumed < text.size()) ec = json::make_error_code(json::error::extra_data);
  if (!ec) parser.finish(ec);
  if (ec) {
    return InvalidArgumentError("invalid JSON at byte " + std::to_string(consumed) + ": " +
                                ec.message());
  }
  json::value value = parser.release();
  if (!AllNumbersFinite(value)) {
    return InvalidArgumentError("invalid JSON: a number is outside the range of a double");
  }
  return value;
}

std::string ToJson(const json::value& value) { return json::serialize(value); }

std::string StringAt(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  return value != nullptr && value->is_string() ? std::string(value->get_string()) : std::string();
}

const json::object& ObjectAt(const json::object& object, std::string_view key) {
  static const json::object kEmpty;
  const json::value* value = object.if_contains(key);
  return value != nullptr && value->is_object() ? value->get_object() : kEmpty;
}

const json::array& ArrayAt(const json::object& object, std::string_view key) {
  static const json::array kEmpty;
  const json::value* value = object.if_contains(key);
  return value != nullptr && value->is_array() ? value->get_array() : kEmpty;
}

json::object& EnsureObjectAt(json::object& object, std::string_view key) {
  json::value& value = object[key];
  if (!value.is_object()) value = json::object();
  return value.get_object();
}

json::array& EnsureArrayAt(json::object& object, std::string_view key) {
  json::value& value = object[key];
  if (!value.is_array()) value = json::array();
  return value.get_array();
}

}  // namespace uplink
