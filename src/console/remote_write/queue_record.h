// One record of the forwarder's durable queue (a spool, src/spool/): node samples as they
// were accepted, each with the connection it came from. They are kept as the agent's JSON
// rather than as protobuf series, which would be about 15 times larger on disk; the series
// are built when the record is sent.
//
//   record  := 0x01 sample*
//   sample  := string(connection_id) string(cluster_name) string(payload)
//   string  := varint(length) bytes
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace uplink::console::remote_write {

struct QueuedSample {
  std::string connection_id;
  std::string cluster_name;
  std::string payload;  // the node_sample payload's JSON text, as the console accepted it

  size_t size() const { return connection_id.size() + cluster_name.size() + payload.size(); }
};

std::string EncodeQueueRecord(std::span<const QueuedSample> samples);

// The queue's files are the console's own, checksummed by the spool; still, a record that is
// not what EncodeQueueRecord writes (an unknown version, a length past its end) is refused
// whole with InvalidArgument rather than read past its bounds.
Result<std::vector<QueuedSample>> DecodeQueueRecord(std::string_view record);

}  // namespace uplink::console::remote_write
