// Prometheus remote write 1.0 (prometheus.io/docs/specs/remote_write_spec): a WriteRequest
// in protobuf, sent compressed with snappy's block format.
//
//   message WriteRequest { repeated TimeSeries timeseries = 1; }
//   message TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
//   message Label        { string name = 1; string value = 2; }
//   message Sample       { double value = 1; int64 timestamp = 2; }  // Unix milliseconds
//
// Encoded here by hand: four messages and five fields do not need a code generator and its
// runtime library in the console. A WriteRequest is nothing but its TimeSeries fields back
// to back, so requests are joined by concatenating their bytes: the forwarder builds one
// piece per node sample and sends any run of pieces as one request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace uplink::console::remote_write {

struct Label {
  std::string_view name;
  std::string_view value;
};

class WriteRequestBuilder {
 public:
  // Appends a series holding one sample. The labels are sorted by name, as the spec requires,
  // after `__name__` is added; a label with an empty value is left out (Prometheus treats it
  // as absent). Names must be distinct and valid Prometheus label names: callers pass fixed
  // names.
  void Add(std::string_view metric_name, std::span<const Label> labels, double value,
           std::int64_t timestamp_ms);

  size_t series() const { return series_; }
  const std::string& bytes() const { return bytes_; }
  std::string Take();

 private:
  std::string bytes_;
  size_t series_ = 0;
  std::vector<Label> sorted_;  // reused between calls
  std::string scratch_;
};

// Snappy's block format (not the framed one), as remote write sends bodies.
std::string SnappyCompress(std::string_view data);

}  // namespace uplink::console::remote_write
