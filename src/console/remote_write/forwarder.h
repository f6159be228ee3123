// `uplink-console serve --remote-write-url URL`: the node samples of accepted uploads,
// forwarded with Prometheus remote write to any compatible TSDB (Prometheus, Mimir, Thanos,
// VictoriaMetrics, ...), under node_exporter's and dcgm-exporter's names (node_series.h).
//
// An upload is never held up nor failed by the TSDB. Its new node samples are copied to a
// bounded hand-off in memory; a writer thread appends them to a durable queue on disk (a
// spool in DATA_DIR/remote-write, src/spool/: fdatasync'ed, bounded, oldest dropped and
// counted at its cap), and a sender thread reads the queue in order, builds the series and
// posts them, one request at a time, consuming records only once the TSDB has answered for
// every sample in them. So the queue survives restarts and TSDB outages up to its cap.
//
// The TSDB's answer decides:
//   2xx                      sent.
//   400, 413, 422, other 4xx the request's samples are refused: a request of several node
//                            samples is split in halves, sent again at once, so one bad sample
//                            (out of order, too old for the TSDB) does not take the others
//                            with it; a single node sample refused is dropped and counted.
//   401, 403, 404, 3xx       the credentials or the URL are wrong: nothing is dropped; the
//                            queue waits (and fills to its cap) until an operator fixes them.
//   408, 429, 5xx, no reply  backed off (exponential, full jitter, Retry-After honoured) and
//                            sent again.
//
// A sample is in the queue's files about 0.1 s after its upload's reply (the writer lets the
// hand-off fill that long, so that one fdatasync covers many uploads): a console killed in
// that moment (not stopped) forwards none of what the hand-off held, which the console's own
// store still has. Stop() writes the hand-off to the queue first.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/backoff.h"
#include "common/status.h"
#include "common/time.h"
#include "console/api/upload_sink.h"

namespace uplink::console::remote_write {

struct RemoteWriteOptions {
  // http(s)://HOST[:PORT]/PATH, without credentials, query or fragment.
  std::string url;
  // For https: a PEM CA bundle to trust instead of the system store.
  std::string ca_file;
  // Credentials, read from files before every request (so a rotated file takes effect
  // without a restart): a bearer token, or a user name with a password file (HTTP basic).
  std::string bearer_token_file;
  std::string username;
  std::string password_file;
  // The durable queue's directory and its cap (the spool's segment files).
  std::string queue_dir;
  std::uint64_t queue_max_bytes = 256ull << 20;
  // Node samples waiting in memory for the writer; beyond it the oldest are dropped.
  size_t handoff_max_bytes = 16 << 20;
  // Series in one request (a node sample with 8 GPUs has about 200). One node sample always
  // goes whole.
  size_t max_series_per_request = 10'000;
  BackoffOptions backoff{.base = std::chrono::milliseconds(500),
                         .cap = std::chrono::milliseconds(60'000)};
  std::chrono::milliseconds request_timeout{30'000};
};

inline constexpr std::uint64_t kMinQueueBytes = 4ull << 20;

// InvalidArgument, naming the flag (--remote-write-url, ...), for options that cannot work: a
// URL that is not http(s) or carries credentials, a query or a fragment; credentials sent over
// plain http to a host other than loopback; both a token and a user; a user without a
// password file or the reverse; credential files that cannot be read now; a queue under
// kMinQueueBytes. Messages quote no URL beyond its scheme, host and port.
Status ValidateRemoteWriteOptions(const RemoteWriteOptions& options);

class RemoteWriteForwarder final : public UploadSink {
 public:
  // Validates the options, opens (or creates) the queue and starts the writer and sender.
  static Result<std::unique_ptr<RemoteWriteForwarder>> Start(RemoteWriteOptions options,
                                                             const Clock& clock);
  ~RemoteWriteForwarder() override;
  RemoteWriteForwarder(const RemoteWriteForwarder&) = delete;
  RemoteWriteForwarder& operator=(const RemoteWriteForwarder&) = delete;

  void UploadStored(const Connection& connection, const UploadBatch& batch,
                    const UploadOutcome& outcome) override;
  void RenderMetrics(std::string& out) const override;

  // Writes what the hand-off holds to the queue, ends the request under way and stops both
  // threads; what was not sent stays queued for the next start. Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit RemoteWriteForwarder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace uplink::console::remote_write
