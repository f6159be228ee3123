#include "common/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace uplink {

namespace {

// One compressor per thread and level, reset for each body: setting one up allocates about
// 270 KiB (window, hash chains, pending output), more than compressing an agent's upload.
class Deflater {
 public:
  Deflater() = default;
  ~Deflater() { End(); }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  // Null, with zlib's code in `rc`, if a compressor at `level` could not be set up.
  z_stream* Reset(int level, int& rc) {
    if (ready_ && level == level_) {
      rc = deflateReset(&stream_);
      if (rc == Z_OK) return &stream_;
    }
    End();
    // 15 window bits + 16 selects the gzip wrapper.
    rc = deflateInit2(&stream_, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    ready_ = rc == Z_OK;
    level_ = level;
    return ready_ ? &stream_ : nullptr;
  }

 private:
  void End() {
    if (ready_) deflateEnd(&stream_);
    stream_ = z_stream{};
    ready_ = false;
  }

  z_stream stream_{};
  bool ready_ = false;
  int level_ = 0;
};

// One inflater per thread, reset for each body: setting one up allocates its state and
// window, which cost more than inflating a node upload. A reset empties the window: a
// back-reference past the body's own output is refused ("invalid distance too far back"),
// so nothing of one sender's body can reach the next one's.
class Inflater {
 public:
  Inflater() { ready_ = inflateInit2(&stream_, 15 + 16) == Z_OK; }
  ~Inflater() {
    if (ready_) inflateEnd(&stream_);
  }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Null if zlib could not set it up.
  z_stream* Reset() { return ready_ && inflateReset(&stream_) == Z_OK ? &stream_ : nullptr; }

 private:
  z_stream stream_{};
  bool ready_ = false;
};

// Room for the whole output at once, from the gzip trailer's ISIZE (the size mod 2^32). The
// trailer is the sender's word, so it is believed only as far as deflate can expand honest
// data, and a tiny body cannot make the console reserve its limit.
size_t InitialOutputSize(std::string_view data, size_t over_limit) {
  constexpr size_t kMinimum = 4096;
  constexpr size_t kBelievedRatio = 256;
  size_t stated = 0;
  if (data.size() >= 18) {  // the smallest gzip member: 10-byte header, 8-byte trailer
    const auto* trailer = reinterpret_cast<const unsigned char*>(data.data() + data.size() - 4);
    stated = size_t{trailer[0]} | size_t{trailer[1]} << 8 | size_t{trailer[2]} << 16 |
             size_t{trailer[3]} << 24;
  }
  // One byte over, so that zlib finds room to finish the stream when the output fills it.
  const size_t believed = std::min(stated, data.size() * kBelievedRatio) + 1;
  return std::max(kMinimum, std::min(believed, over_limit));
}

}  // namespace

Result<std::string> GzipCompress(std::string_view data, int level) {
  thread_local Deflater deflater;
  int rc = Z_OK;
  z_stream* stream = deflater.Reset(level, rc);
  if (stream == nullptr) {
    return InternalError("zlib deflateInit2 failed (" + std::to_string(rc) + ")");
  }
  // Compressed in place into room for the worst case, which zlib bounds; the output grows
  // should the input come in more pieces than the bound allows for. zlib counts in uInt (32
  // bits): the input goes in pieces, so bodies of 4 GiB and more are compressed whole.
  constexpr size_t kPiece = 1 << 20;
  std::string out(deflateBound(stream, data.size()), '\0');
  size_t consumed = 0;
  size_t produced = 0;
  do {
    const size_t piece = std::min(data.size() - consumed, kPiece);
    stream->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + consumed));
    stream->avail_in = static_cast<uInt>(piece);
    consumed += piece;
    const int flush = consumed == data.size() ? Z_FINISH : Z_NO_FLUSH;
    do {
      if (produced == out.size()) out.resize(out.size() * 2);
      const size_t room = std::min<size_t>(out.size() - produced, UINT_MAX);
      stream->next_out = reinterpret_cast<Bytef*>(out.data() + produced);
      stream->avail_out = static_cast<uInt>(room);
      rc = deflate(stream, flush);
      if (rc == Z_STREAM_ERROR) return InternalError("zlib deflate failed");
      produced += room - stream->avail_out;
    } while (stream->avail_out == 0);
    if (stream->avail_in != 0) return InternalError("zlib deflate left input unconsumed");
  } while (consumed < data.size());
  if (rc != Z_STREAM_END) return InternalError("zlib deflate did not finish the stream");
  out.resize(produced);
  return out;
}

Result<std::string> GzipDecompress(std::string_view data, size_t max_output) {
  thread_local Inflater inflater;
  z_stream* stream = inflater.Reset();
  if (stream == nullptr) return InternalError("zlib inflateInit2 failed");
  stream->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream->avail_in = static_cast<uInt>(data.size());
  // Inflated in place: the output grows (doubling, up to one byte past the limit) when full.
  const size_t over_limit = std::min(max_output, SIZE_MAX - 1) + 1;
  std::string out(InitialOutputSize(data, over_limit), '\0');
  size_t produced = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (produced == out.size()) out.resize(std::min(out.size() * 2, over_limit));
    const size_t room = std::min<size_t>(out.size() - produced, UINT_MAX);
    stream->next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    stream->avail_out = static_cast<uInt>(room);
    rc = inflate(stream, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      return InvalidArgumentError("gzip body is corrupt or truncated");
    }
    const size_t step = room - stream->avail_out;
    produced += step;
    if (produced > max_output) {
      return ResourceExhaustedError("gzip body expands past the " + std::to_string(max_output) +
                                    "-byte limit");
    }
    if (rc == Z_OK && step == 0 && stream->avail_in == 0) {
      return InvalidArgumentError("gzip body is truncated");
    }
  }
  if (stream->avail_in != 0) return InvalidArgumentError("gzip body has data after its end");
  out.resize(produced);
  return out;
}

}  // namespace uplink
