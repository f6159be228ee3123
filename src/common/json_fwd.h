// The JSON types by name only, for headers that pass them by reference or return them: the
// whole of Boost.JSON (common/json.h) is then compiled only where a value is built or read.
#pragma once

#include <boost/json/fwd.hpp>

namespace uplink {

namespace json = boost::json;

}  // namespace uplink
