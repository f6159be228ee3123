// An agent's upload as the store takes it: the decoded upload (protocol/upload.h) with node
// samples turned into their figures, cluster snapshots into their pods' usage, and experiments
// records into their items.
#pragma once

#include "console/store/store.h"
#include "protocol/upload.h"

namespace uplink::console {

UploadBatch StoreBatchOf(protocol::DecodedUpload upload);

}  // namespace uplink::console
