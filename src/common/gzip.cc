#include "common/gzip.h"

#include <zlib.h>

namespace uplink {

std::string GzipCompress(std::string_view data, int level) {
  z_stream stream{};
  // 15 window bits + 16 selects the gzip wrapper.
  deflateInit2(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out;
  out.resize(deflateBound(&stream, static_cast<uLong>(data.size())) + 32);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

Result<std::string> GzipDecompress(std::string_view data, size_t max_output) {
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 16) != Z_OK) return InternalError("zlib inflateInit2 failed");
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buf[32768];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(buf);
    stream.avail_out = sizeof buf;
    rc = inflate(&stream, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&stream);
      return InvalidArgumentError("gzip body is corrupt or truncated");
    }
    size_t produced = sizeof buf - stream.avail_out;
    if (out.size() + produced > max_output) {
      inflateEnd(&stream);
      return ResourceExhaustedError("gzip body expands past the " + std::to_string(max_output) +
                                    "-byte limit");
    }
    out.append(buf, produced);
    if (rc == Z_OK && produced == 0 && stream.avail_in == 0) {
      inflateEnd(&stream);
      return InvalidArgumentError("gzip body is truncated");
    }
  }
  bool trailing = stream.avail_in != 0;
  inflateEnd(&stream);
  if (trailing) return InvalidArgumentError("gzip body has data after its end");
  return out;
}

}  // namespace uplink
