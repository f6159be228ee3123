#include "agent/node/host/exclude_pattern.h"

#include <boost/regex.hpp>
#include <exception>

namespace uplink::agent::node {

// C-library character traits rather than the default std::locale ones: a std::locale builds
// every facet of the statically linked libstdc++ on first use, about 0.3 MiB of resident pages
// in the node agent, and node_exporter's patterns need nothing locale-specific.
using Regex = boost::basic_regex<char, boost::c_regex_traits<char>>;

struct ExcludePattern::Compiled {
  Regex regex;
};

ExcludePattern::ExcludePattern(std::string pattern, std::shared_ptr<const Compiled> compiled)
    : pattern_(std::move(pattern)), compiled_(std::move(compiled)) {}

Result<ExcludePattern> ExcludePattern::Compile(std::string_view pattern) {
  if (pattern.empty()) return ExcludePattern(std::string(), nullptr);
  try {
    // no_mod_m: '^' and '$' anchor the whole name, not each line; no_mod_s: '.' stops at '\n'.
    auto compiled = std::make_shared<Compiled>(Compiled{Regex(
        pattern.begin(), pattern.end(), Regex::perl | Regex::no_mod_m | Regex::no_mod_s)});
    return ExcludePattern(std::string(pattern), std::move(compiled));
  } catch (const std::exception& e) {
    return InvalidArgumentError("pattern '" + std::string(pattern) + "' does not compile: " +
                                e.what());
  }
}

bool ExcludePattern::Excludes(std::string_view name) const {
  if (compiled_ == nullptr) return false;
  try {
    return boost::regex_search(name.begin(), name.end(), compiled_->regex);
  } catch (const std::exception&) {
    // Boost gives up on a match that grows too complex; the name is kept rather than lost.
    return false;
  }
}

}  // namespace uplink::agent::node
