// What the console keeps of a node sample (protocol/node_sample.h): its figures as the store's
// series values.
#pragma once

#include "console/store/store.h"
#include "protocol/node_sample.h"

namespace uplink::console {

NodeSampleFigures FiguresOf(const protocol::NodeSample& sample);

}  // namespace uplink::console
