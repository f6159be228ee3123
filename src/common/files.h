// File helpers that never trust a file's reported size and never read without a bound.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/secret.h"
#include "common/status.h"

namespace uplink {

// Reads the whole file, failing with ResourceExhausted if it holds more than max_bytes.
// Does not stat: sizes of /proc and sysfs files lie.
Result<std::string> ReadFileBounded(const std::string& path, size_t max_bytes);

// Writes to a temporary file in the same directory, fsyncs it, renames it over `path` and
// fsyncs the directory. `mode` applies to the new file.
Status WriteFileAtomic(const std::string& path, std::string_view content, unsigned mode = 0600);

// Trims ASCII whitespace from both ends (token files often end with a newline).
std::string_view TrimWhitespace(std::string_view text);

// A credential kept in a file (a mounted Secret): its content without surrounding
// whitespace. FailedPrecondition, naming `flag` and the path but never the content, when the
// file is empty or holds control characters (a credential alone, on one line, is expected).
Result<Secret> ReadCredentialFile(const std::string& path, std::string_view flag);

}  // namespace uplink
