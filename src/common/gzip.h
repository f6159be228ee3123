// gzip for request and upload bodies, with a hard bound on what decompression may produce
// (a 1 KiB body can otherwise expand to gigabytes).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace uplink {

// Internal for a zlib failure (out of memory, a bad level); never a silently short result.
Result<std::string> GzipCompress(std::string_view data, int level = 6);

// InvalidArgument for corrupt or truncated input; ResourceExhausted past max_output bytes.
Result<std::string> GzipDecompress(std::string_view data, size_t max_output);

}  // namespace uplink
