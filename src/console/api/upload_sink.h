// Where accepted uploads go beyond the console's store: `serve --remote-write-url` forwards
// node samples to a Prometheus-compatible TSDB (console/remote_write/forwarder.h). The API
// knows only this interface, so the request path carries no network client.
#pragma once

#include <string>

#include "console/store/store.h"

namespace uplink::console {

class UploadSink {
 public:
  virtual ~UploadSink() = default;
  // Called on the store's writer thread once the upload's transaction committed, before the
  // reply. It must not block nor fail the upload: what it cannot take, it drops and counts.
  // The records forwarded are those the upload stored: `outcome.duplicates` of them, at the
  // front (sequences are increasing), were already stored by an earlier upload.
  virtual void UploadStored(const Connection& connection, const UploadBatch& batch,
                            const UploadOutcome& outcome) = 0;
  // Appends its families to the console's /metrics text.
  virtual void RenderMetrics(std::string& out) const = 0;
};

}  // namespace uplink::console
