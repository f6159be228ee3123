// Node sample payloads (docs/protocol.md, "Node samples"), read as the console reads them from
// an upload. Whatever the input, an accepted sample must give what the store relies on: a node
// name, a bounded number of figures, every one finite, counters not negative, labels within
// their limits; a refused one must say which field, under the path it was given.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "console/api/node_sample_figures.h"
#include "fuzz_check.h"
#include "protocol/node_sample.h"
#include "protocol/upload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace uplink;
  using namespace uplink::console;
  using namespace uplink::protocol;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto document = ParseJson(text, JsonLimits{kMaxPayloadBytes, kMaxPayloadDepth});
  if (!document.ok() || !document->is_object()) return 0;
  auto sample = DecodeNodeSample(document->get_object(), "payload");
  if (!sample.ok()) {
    FUZZ_CHECK(sample.status().code() == StatusCode::kInvalidArgument);
    FUZZ_CHECK(sample.status().message().starts_with("payload."));
    return 0;
  }
  FUZZ_CHECK(!sample->node.empty() && sample->node.size() <= kMaxSampleString);
  FUZZ_CHECK(sample->filesystems.size() <= kMaxSampleFilesystems);
  FUZZ_CHECK(sample->gpus.size() <= kMaxSampleGpus);
  FUZZ_CHECK(sample->gaps.size() <= kMaxSampleGaps);
  NodeSampleFigures figures = FiguresOf(*sample);
  FUZZ_CHECK(figures.node == sample->node);
  FUZZ_CHECK(figures.values.size() <= 12 + 2 * kMaxSampleFilesystems + 5 * kMaxSampleGpus);
  for (const SampleValue& value : figures.values) {
    FUZZ_CHECK(std::isfinite(value.value));
    FUZZ_CHECK(value.label.size() <= kMaxSamplePath);
    FUZZ_CHECK(value.label.find('\0') == std::string::npos);
    FUZZ_CHECK(LabelKey(value.metric).empty() == value.label.empty());
    if (KindOf(value.metric) == MetricKind::kCounter) FUZZ_CHECK(value.value >= 0);
  }
  if (sample->cpu_seconds) FUZZ_CHECK(*sample->cpu_idle_seconds <= *sample->cpu_seconds);
  return 0;
}
