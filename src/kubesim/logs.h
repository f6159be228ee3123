// Container logs: what GET /api/v1/namespaces/NS/pods/NAME/log returns, as kube-apiserver
// and the kubelet decide it (container defaulting, the current or previous container instance
// by container ID, tailLines, sinceSeconds/sinceTime, timestamps, limitBytes).
//
// Logs come from ContainerLog documents, a simulator-only kind loaded with the workloads or
// with --objects and never served by the API:
//
//   apiVersion: kubesim.uplink.dev/v1
//   kind: ContainerLog
//   metadata: {namespace: inference, name: POD}
//   container: vllm
//   containerID: containerd://...   # the instance: status.containerStatuses[].containerID,
//                                   # or lastState.terminated.containerID for --previous
//   log: |
//     2025-06-01T11:58:01.123456789Z first line   # RFC 3339 time, one space, the text
//
// A container instance without a ContainerLog has written nothing. follow=true is refused:
// the simulator serves logs whole and never holds a request open.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"
#include "kubesim/messages.h"

namespace uplink::kubesim {

inline constexpr std::string_view kContainerLogApiVersion = "kubesim.uplink.dev/v1";
inline constexpr std::string_view kContainerLogKind = "ContainerLog";
// A ContainerLog's `log` text may be at most this long.
inline constexpr size_t kMaxContainerLogBytes = 8 << 20;

struct LogLine {
  WallTime time;
  std::string text;
};

// Go's time.RFC3339Nano: "2025-06-01T11:58:01.123456789Z", trailing zeros of the fraction
// dropped ("...:01.5Z", "...:01Z").
std::string FormatRfc3339Nano(WallTime time);

class LogStore {
 public:
  // Adds (or replaces) one ContainerLog document. InvalidArgument for a document without a
  // container ID, a line without a time, or a log over kMaxContainerLogBytes; the message
  // names the line.
  Status Add(const json::object& container_log);
  // The lines an instance wrote, oldest first; none when it wrote nothing.
  std::vector<LogLine> Lines(const std::string& container_id) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::vector<LogLine>> logs_;  // by container ID
};

// corev1.PodLogOptions from the query string.
struct LogOptions {
  std::string container;
  bool follow = false;
  bool previous = false;
  bool timestamps = false;
  std::optional<std::int64_t> tail_lines;
  std::optional<std::int64_t> since_seconds;
  std::optional<WallTime> since_time;
  std::optional<std::int64_t> limit_bytes;
};

// Decodes the query parameters (the first of each wins; unknown ones are ignored, as the
// real parameter codec ignores them). InvalidArgument for a value that does not decode
// (tailLines=abc, previous=maybe, sinceTime that is not RFC 3339).
Result<LogOptions> ParseLogOptions(const std::vector<std::pair<std::string, std::string>>& query);

// ValidatePodLogOptions: negative tailLines, limitBytes or sinceSeconds below 1, and both
// sinceSeconds and sinceTime, as the causes of a 422 on the PodLogOptions kind.
std::vector<FieldError> ValidateLogOptions(const LogOptions& options);

// The log text for `pod` (a stored Pod), or InvalidArgument with the real server's message
// (a missing or unknown container, a container waiting to start, no previous instance,
// follow=true). `now` anchors sinceSeconds.
Result<std::string> ReadContainerLog(const json::object& pod, const LogOptions& options,
                                     const LogStore& logs, WallTime now);

}  // namespace uplink::kubesim
