#include "console/auth/qr_code.h"

#include <qrencode.h>

#include <memory>

namespace uplink::console {

Result<std::vector<std::string>> QrModules(std::string_view text) {
  std::unique_ptr<QRcode, decltype(&QRcode_free)> code(
      QRcode_encodeData(static_cast<int>(text.size()),
                        reinterpret_cast<const unsigned char*>(text.data()), 0, QR_ECLEVEL_M),
      &QRcode_free);
  if (!code) {
    return InvalidArgumentError("the text (" + std::to_string(text.size()) +
                                " bytes) does not fit in a QR code");
  }
  const int width = code->width;
  std::vector<std::string> rows(static_cast<size_t>(width), std::string(width, '0'));
  for (int y = 0; y < width; ++y) {
    for (int x = 0; x < width; ++x) {
      // The low bit of each byte is the module's colour; the others say what part it is.
      if (code->data[y * width + x] & 1) rows[y][x] = '1';
    }
  }
  return rows;
}

}  // namespace uplink::console
