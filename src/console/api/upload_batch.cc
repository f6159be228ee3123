#include "console/api/upload_batch.h"

#include <utility>

#include "console/api/node_sample_figures.h"
#include "console/api/right_sizing.h"

namespace uplink::console {

UploadBatch StoreBatchOf(protocol::DecodedUpload upload) {
  UploadBatch batch;
  protocol::UploadEnvelope& envelope = upload.envelope;
  batch.agent_version = std::move(envelope.agent_version);
  batch.agent_instance = std::move(envelope.agent_instance);
  batch.stream = std::move(envelope.stream);
  batch.spool_id = std::move(envelope.spool_id);
  batch.first_sequence = envelope.first_sequence;
  batch.last_sequence = envelope.last_sequence;
  batch.losses = envelope.losses;
  batch.payloads = std::move(upload.payloads);
  batch.records.reserve(upload.records.size());
  for (const protocol::DecodedRecord& decoded : upload.records) {
    UploadRecord record;
    record.sequence = decoded.sequence;
    record.appended_at = decoded.appended_at;
    record.payload_offset = decoded.payload_offset;
    record.payload_size = decoded.payload_size;
    switch (decoded.kind) {
      case protocol::PayloadKind::kNodeSample:
        record.node_sample = batch.node_samples.size();
        batch.node_samples.push_back(FiguresOf(upload.node_samples[decoded.decoded]));
        break;
      case protocol::PayloadKind::kClusterSnapshot: {
        const protocol::ClusterSnapshot& snapshot = upload.cluster_snapshots[decoded.decoded];
        record.cluster_snapshot_at = snapshot.collected_at;
        for (PodUsage& usage : PodUsageOfSnapshot(snapshot, decoded.sequence)) {
          batch.pod_usage.push_back(std::move(usage));
        }
        break;
      }
      case protocol::PayloadKind::kExperiments:
        record.experiment_record = batch.experiment_records.size();
        batch.experiment_records.push_back(std::move(upload.experiment_records[decoded.decoded]));
        break;
      case protocol::PayloadKind::kOther: break;
    }
    batch.records.push_back(record);
  }
  return batch;
}

}  // namespace uplink::console
