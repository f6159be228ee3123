#include "common/gzip.h"

#include <zlib.h>

#include <algorithm>

namespace uplink {

Result<std::string> GzipCompress(std::string_view data, int level) {
  z_stream stream{};
  // 15 window bits + 16 selects the gzip wrapper.
  int rc = deflateInit2(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  if (rc != Z_OK) return InternalError("zlib deflateInit2 failed (" + std::to_string(rc) + ")");
  // zlib counts in uInt (32 bits): feed the input and take the output in chunks, so bodies
  // of 4 GiB and more are compressed whole rather than cut.
  constexpr size_t kChunk = 1 << 20;
  std::string out;
  std::string buffer(64 * 1024, '\0');
  size_t consumed = 0;
  do {
    size_t piece = std::min(data.size() - consumed, kChunk);
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + consumed));
    stream.avail_in = static_cast<uInt>(piece);
    consumed += piece;
    const int flush = consumed == data.size() ? Z_FINISH : Z_NO_FLUSH;
    do {
      stream.next_out = reinterpret_cast<Bytef*>(buffer.data());
      stream.avail_out = static_cast<uInt>(buffer.size());
      rc = deflate(&stream, flush);
      if (rc == Z_STREAM_ERROR) {
        deflateEnd(&stream);
        return InternalError("zlib deflate failed");
      }
      out.append(buffer.data(), buffer.size() - stream.avail_out);
    } while (stream.avail_out == 0);
    if (stream.avail_in != 0) {
      deflateEnd(&stream);
      return InternalError("zlib deflate left input unconsumed");
    }
  } while (consumed < data.size());
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) return InternalError("zlib deflate did not finish the stream");
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
