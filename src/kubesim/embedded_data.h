// The simulator's data files (src/kubesim/data/), compiled into the binary by
// embed_data.cmake so that uplink-kubesim needs nothing beside itself.
#pragma once

#include <string_view>
#include <utility>

namespace uplink::kubesim {

// The contents of data file `name` ("openapi-schemas.yaml"); empty for an unknown name.
std::string_view EmbeddedDataFile(std::string_view name);

}  // namespace uplink::kubesim
