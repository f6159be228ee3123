// QR codes for two-factor enrolment: the otpauth:// URI as a module matrix (libqrencode), which
// the web console draws as SVG and the CLI prints with block characters, so that one encoder
// serves both and neither needs its own.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace uplink::console {

// The QR code of `text` (8-bit mode, error correction level M, the smallest version that
// holds it): one string per row, as many rows as columns, '1' for a dark module and '0' for
// a light one, without the quiet zone. InvalidArgument for text no QR code holds.
Result<std::vector<std::string>> QrModules(std::string_view text);

}  // namespace uplink::console
