#include "console/remote_write/write_request.h"

#include <snappy.h>

#include <algorithm>
#include <bit>
#include <utility>

#include "console/remote_write/varint.h"

namespace uplink::console::remote_write {
namespace {

// Protobuf wire types.
constexpr std::uint8_t kVarint = 0;
constexpr std::uint8_t kFixed64 = 1;
constexpr std::uint8_t kLengthDelimited = 2;

constexpr char Tag(int field, std::uint8_t wire_type) {
  return static_cast<char>((field << 3) | wire_type);
}

void PutBytes(std::string& out, int field, std::string_view bytes) {
  out += Tag(field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out.append(bytes);
}

size_t VarintSize(std::uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

size_t BytesFieldSize(size_t length) { return 1 + VarintSize(length) + length; }

// Label { name = 1; value = 2; } as field 1 of TimeSeries, its length computed up front so
// that it is written straight into `series`.
void PutLabel(std::string& series, std::string_view name, std::string_view value) {
  series += Tag(1, kLengthDelimited);
  PutVarint(series, BytesFieldSize(name.size()) + BytesFieldSize(value.size()));
  PutBytes(series, 1, name);
  PutBytes(series, 2, value);
}

// Sample { double value = 1; int64 timestamp = 2; } as field 2 of TimeSeries.
void PutSample(std::string& series, double value, std::int64_t timestamp_ms) {
  const auto timestamp = static_cast<std::uint64_t>(timestamp_ms);  // int64: two's complement
  series += Tag(2, kLengthDelimited);
  PutVarint(series, 1 + 8 + 1 + VarintSize(timestamp));
  series += Tag(1, kFixed64);
  const auto bits = std::bit_cast<std::uint64_t>(value);
  for (int shift = 0; shift < 64; shift += 8) series += static_cast<char>((bits >> shift) & 0xff);
  series += Tag(2, kVarint);
  PutVarint(series, timestamp);
}

}  // namespace

void WriteRequestBuilder::Add(std::string_view metric_name, std::span<const Label> labels,
                              double value, std::int64_t timestamp_ms) {
  sorted_.clear();
  sorted_.push_back({"__name__", metric_name});
  for (const Label& label : labels) {
    if (!label.value.empty()) sorted_.push_back(label);
  }
  std::sort(sorted_.begin(), sorted_.end(),
            [](const Label& a, const Label& b) { return a.name < b.name; });

  scratch_.clear();
  for (const Label& label : sorted_) PutLabel(scratch_, label.name, label.value);
  PutSample(scratch_, value, timestamp_ms);
  PutBytes(bytes_, 1, scratch_);
  ++series_;
}

std::string WriteRequestBuilder::Take() {
  series_ = 0;
  return std::exchange(bytes_, {});
}

std::string SnappyCompress(std::string_view data) {
  std::string out;
  snappy::Compress(data.data(), data.size(), &out);
  return out;
}

}  // namespace uplink::console::remote_write
