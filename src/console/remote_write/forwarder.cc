#include "console/remote_write/forwarder.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "common/crypto.h"
#include "common/files.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/secret.h"
#include "common/text.h"
#include "common/thread_name.h"
#include "console/api/upload_batch.h"
#include "console/remote_write/node_series.h"
#include "console/remote_write/queue_record.h"
#include "console/remote_write/write_request.h"
#include "protocol/agent_api.h"
#include "protocol/upload.h"
#include "net/client.h"
#include "net/server.h"
#include "spool/spool.h"

namespace uplink::console::remote_write {
namespace {

// A queue record holds at most this much of the hand-off; the sender reads about this much
// at a time (node samples run about 2 KB, so some hundreds of them).
constexpr size_t kMaxRecordBytes = 256 << 10;
constexpr size_t kReadBytes = 1 << 20;
// How long the writer lets the hand-off fill before appending it.
constexpr std::chrono::milliseconds kHandoffLinger{100};
constexpr size_t kReadRecords = 64;
constexpr size_t kMaxReplyExcerpt = 256;
// A failing TSDB is logged when the failure starts or changes, and at most this often while
// it lasts.
constexpr std::chrono::seconds kFailureLogInterval{60};

constexpr const char* kQueued = "uplink_console_remote_write_node_samples_queued_total";
constexpr const char* kSent = "uplink_console_remote_write_node_samples_sent_total";
constexpr const char* kRefused = "uplink_console_remote_write_node_samples_refused_total";
constexpr const char* kDropped = "uplink_console_remote_write_node_samples_dropped_total";
constexpr const char* kSeriesSent = "uplink_console_remote_write_series_sent_total";
constexpr const char* kRequests = "uplink_console_remote_write_requests_total";
constexpr const char* kQueueBytes = "uplink_console_remote_write_queue_bytes";
constexpr const char* kQueueRecords = "uplink_console_remote_write_queue_records";
constexpr const char* kQueueOldest = "uplink_console_remote_write_queue_oldest_seconds";
constexpr const char* kQueueDroppedRecords =
    "uplink_console_remote_write_queue_dropped_records_total";
constexpr const char* kQueueDroppedBytes = "uplink_console_remote_write_queue_dropped_bytes_total";
constexpr const char* kLastSent = "uplink_console_remote_write_last_sent_timestamp_seconds";

const log::Logger& Log() {
  static const log::Logger logger("console.remote_write");
  return logger;
}

std::string Origin(const net::ParsedUrl& url) {
  const bool v6 = url.host.find(':') != std::string::npos;
  const std::string host = v6 ? "[" + url.host + "]" : url.host;
  return url.scheme + "://" + host + ":" + std::to_string(url.port);
}

// How the sender treats the TSDB's answer to one request.
enum class Answer { kSent, kRefused, kKeep, kRetry };

Answer Classify(int http_status) {
  if (http_status >= 200 && http_status < 300) return Answer::kSent;
  if (http_status == 408 || http_status == 429 || http_status >= 500) return Answer::kRetry;
  if ((http_status >= 300 && http_status < 400) || http_status == 401 || http_status == 403 ||
      http_status == 404) {
    return Answer::kKeep;
  }
  return Answer::kRefused;
}

std::string RequestResult(int http_status) {
  if (http_status <= 0) return "network";
  return std::to_string(http_status / 100) + "xx";
}

// One node sample's series, ready to send: joined with others by concatenation.
struct Piece {
  std::string bytes;
  size_t series = 0;
};

}  // namespace

Status ValidateRemoteWriteOptions(const RemoteWriteOptions& options) {
  auto url = net::ParseBaseUrl(options.url);
  if (!url.ok()) {
    // Never quoted back: the text may carry a credential.
    return InvalidArgumentError(
        "--remote-write-url is not a usable URL: " + url.status().message() +
        "; write http(s)://HOST[:PORT]/PATH and pass credentials in "
        "--remote-write-bearer-token-file or --remote-write-password-file");
  }
  const bool has_token = !options.bearer_token_file.empty();
  const bool has_user = !options.username.empty();
  const bool has_password = !options.password_file.empty();
  if (has_token && (has_user || has_password)) {
    return InvalidArgumentError(
        "pass --remote-write-bearer-token-file or --remote-write-username with "
        "--remote-write-password-file, not both");
  }
  if (has_user != has_password) {
    return InvalidArgumentError(
        "--remote-write-username and --remote-write-password-file go together (HTTP basic "
        "authentication)");
  }
  if (options.username.find(':') != std::string::npos) {
    return InvalidArgumentError(
        "--remote-write-username cannot contain ':' (HTTP basic "
        "authentication separates the user from the password with it)");
  }
  if ((has_token || has_user) && url->scheme == "http" && !net::IsLoopbackHost(url->host)) {
    return InvalidArgumentError("--remote-write-url " + Origin(*url) +
                                " uses plain http: credentials would cross the network in "
                                "clear; use https (http with credentials only on loopback)");
  }
  for (const auto& [file, flag] :
       {std::pair{options.bearer_token_file, "--remote-write-bearer-token-file"},
        std::pair{options.password_file, "--remote-write-password-file"}}) {
    if (file.empty()) continue;
    if (auto credential = ReadCredentialFile(file, flag); !credential.ok()) {
      return InvalidArgumentError(credential.status().message());
    }
  }
  if (options.queue_max_bytes < kMinQueueBytes) {
    return InvalidArgumentError("--remote-write-queue-bytes must be at least " +
                                std::to_string(kMinQueueBytes));
  }
  return Status::Ok();
}

struct RemoteWriteForwarder::Impl {
  Impl(RemoteWriteOptions o, const Clock& c) : options(std::move(o)), clock(c) {}

  const RemoteWriteOptions options;
  const Clock& clock;
  net::ParsedUrl url;
  std::string origin;  // for logs: scheme://host:port
  std::unique_ptr<spool::Spool> queue;
  std::unique_ptr<net::HttpClient> client;
  metrics::Registry metrics;

  std::mutex mutex;
  std::condition_variable handoff_ready;  // the writer waits on it
  std::condition_variable queue_ready;    // the sender waits on it (also its back-off)
  std::deque<QueuedSample> handoff;
  size_t handoff_bytes = 0;
  bool stopping = false;
  std::thread writer;
  std::thread sender;
  std::once_flag stopped;

  // Sender state, on its thread only.
  Backoff backoff{options.backoff};
  std::string failure;  // the current failure streak's reason, empty when none
  SteadyTime failure_logged_at;

  void Declare() {
    metrics.DeclareCounter(kQueued, "Node samples handed to the remote write queue.");
    metrics.DeclareCounter(kSent, "Node samples the TSDB accepted.");
    metrics.DeclareCounter(kRefused,
                           "Node samples the TSDB refused (a 4xx for them alone); not retried.");
    metrics.DeclareCounter(kDropped,
                           "Node samples dropped before reaching the queue's files, by reason.");
    metrics.DeclareCounter(kSeriesSent, "Series (one sample each) the TSDB accepted.");
    metrics.DeclareCounter(kRequests, "Remote write requests, by result (2xx, 4xx, network, ...).");
    metrics.DeclareGauge(kQueueBytes, "Size of the remote write queue's files.");
    metrics.DeclareGauge(kQueueRecords, "Queue records (batches of node samples) not yet sent.");
    metrics.DeclareGauge(kQueueOldest, "Age of the oldest queue record not yet sent.");
    metrics.DeclareCounter(kQueueDroppedRecords,
                           "Queue records dropped, oldest first, at the queue's size cap.");
    metrics.DeclareCounter(kQueueDroppedBytes,
                           "Bytes of queue records dropped at the queue's size cap.");
    metrics.DeclareGauge(kLastSent, "When the TSDB last accepted a request (Unix time).");
  }

  void Hand(std::vector<QueuedSample> samples) {
    const size_t handed = samples.size();
    size_t dropped = 0;
    bool closed = false;
    {
      std::lock_guard lock(mutex);
      closed = stopping;
      if (!closed) {
        for (QueuedSample& sample : samples) {
          handoff_bytes += sample.size();
          handoff.push_back(std::move(sample));
        }
        while (handoff_bytes > options.handoff_max_bytes && !handoff.empty()) {
          handoff_bytes -= handoff.front().size();
          handoff.pop_front();
          ++dropped;
        }
      }
    }
    metrics.Increment(kQueued, {}, static_cast<double>(handed));
    if (closed) {
      metrics.Increment(kDropped, {{"reason", "stopping"}}, static_cast<double>(handed));
      return;
    }
    if (dropped > 0) {
      metrics.Increment(kDropped, {{"reason", "handoff_full"}}, static_cast<double>(dropped));
      Log().Warn("remote write: node samples dropped, the queue's files do not keep up",
                 {{"dropped", dropped}});
    }
    handoff_ready.notify_one();
  }

  // Appends `samples` to the queue in records of at most kMaxRecordBytes, front first, until
  // one fails: how many are durable, and that failure.
  std::pair<size_t, Status> Append(const std::deque<QueuedSample>& samples) {
    size_t done = 0;
    while (done < samples.size()) {
      size_t end = done;
      size_t bytes = 0;
      do {
        bytes += samples[end].size();
        ++end;
      } while (end < samples.size() && bytes + samples[end].size() <= kMaxRecordBytes);
      std::vector<QueuedSample> part(samples.begin() + static_cast<std::ptrdiff_t>(done),
                                     samples.begin() + static_cast<std::ptrdiff_t>(end));
      auto appended = queue->Append(EncodeQueueRecord(part));
      if (!appended.ok()) return {done, appended.status()};
      done = end;
    }
    return {done, Status::Ok()};
  }

  void WriteLoop() {
    std::unique_lock lock(mutex);
    for (;;) {
      handoff_ready.wait(lock, [&] { return !handoff.empty() || stopping; });
      if (handoff.empty()) return;  // stopping, nothing left
      // Let the samples of the next moment join, so that one fdatasync covers the uploads of
      // many agents rather than one each.
      handoff_ready.wait_for(lock, kHandoffLinger,
                             [&] { return stopping || handoff_bytes >= kMaxRecordBytes; });
      std::deque<QueuedSample> taken = std::exchange(handoff, {});
      handoff_bytes = 0;
      const bool last = stopping;
      lock.unlock();
      auto [durable, error] = Append(taken);
      lock.lock();
      if (durable > 0) queue_ready.notify_one();
      if (durable == taken.size()) continue;
      // The disk is full or failing: keep the rest in front of what arrived meanwhile (within
      // the hand-off's bound) and try again in a second; at shutdown they are lost.
      Log().Warn("remote write: appending to the queue failed",
                 {{"error", error}, {"waiting", taken.size() - durable}});
      if (last) {
        metrics.Increment(kDropped, {{"reason", "queue_unwritable"}},
                          static_cast<double>(taken.size() - durable));
        return;
      }
      for (size_t i = taken.size(); i-- > durable;) {
        handoff_bytes += taken[i].size();
        handoff.push_front(std::move(taken[i]));
      }
      handoff_ready.wait_for(lock, std::chrono::seconds(1), [&] { return stopping; });
    }
  }

  // The series of one queued node sample; nullopt (counted, logged) for one that cannot be
  // read, which the console accepted and so should never happen.
  std::optional<Piece> Build(const QueuedSample& sample) {
    auto document = ParseJson(sample.payload,
                              JsonLimits{protocol::kMaxPayloadBytes, protocol::kMaxPayloadDepth});
    WriteRequestBuilder builder;
    Result<size_t> series = InvalidArgumentError("the payload is not a JSON object");
    if (document.ok() && document->is_object()) {
      series = AppendNodeSampleSeries(document->get_object(),
                                      {sample.connection_id, sample.cluster_name}, builder);
    }
    if (!series.ok()) {
      metrics.Increment(kDropped, {{"reason", "unreadable"}});
      Log().Error("remote write: a queued node sample cannot be read; dropped",
                  {{"connection_id", sample.connection_id}, {"error", series.status()}});
      return std::nullopt;
    }
    return Piece{builder.Take(), *series};
  }

  // Sends one request; its HTTP status, or 0 when no reply came.
  int Post(std::string_view body, std::optional<std::chrono::milliseconds>& retry_after) {
    net::Request request;
    request.method = "POST";
    request.target = url.path.empty() ? "/" : url.path;
    request.headers.Set("Content-Type", "application/x-protobuf");
    request.headers.Set("Content-Encoding", "snappy");
    request.headers.Set("X-Prometheus-Remote-Write-Version", "0.1.0");
    if (!options.bearer_token_file.empty()) {
      auto token = ReadCredentialFile(options.bearer_token_file, "--remote-write-bearer-token-file");
      if (!token.ok()) return NoteFailure(token.status().ToString(), 0);
      request.headers.Set("Authorization", "Bearer " + token->Reveal());
    } else if (!options.password_file.empty()) {
      auto password = ReadCredentialFile(options.password_file, "--remote-write-password-file");
      if (!password.ok()) return NoteFailure(password.status().ToString(), 0);
      Secret pair{options.username + ":" + password->Reveal()};
      request.headers.Set("Authorization", "Basic " + Base64Encode(pair.Reveal()));
    }
    request.body = SnappyCompress(body);
    auto reply = client->Send(std::move(request));
    if (!reply.ok()) {
      metrics.Increment(kRequests, {{"result", "network"}});
      return NoteFailure("no reply: " + reply.status().message(), 0);
    }
    metrics.Increment(kRequests, {{"result", RequestResult(reply->status)}});
    if (auto value = reply->headers.Get("Retry-After")) {
      if (auto parsed = ParseRetryAfter(*value, clock.Now()); parsed.ok()) retry_after = *parsed;
    }
    const Answer answer = Classify(reply->status);
    if (answer == Answer::kRetry || answer == Answer::kKeep) {
      NoteFailure("HTTP " + std::to_string(reply->status) + ": " +
                      OneLineExcerpt(reply->body, kMaxReplyExcerpt),
                  reply->status);
    } else if (answer == Answer::kRefused) {
      refusal = OneLineExcerpt(reply->body, kMaxReplyExcerpt);
    }
    return reply->status;
  }
  std::string refusal;  // the TSDB's words for the last refused request

  int NoteFailure(const std::string& reason, int http_status) {
    const SteadyTime now = clock.SteadyNow();
    if (reason != failure || now - failure_logged_at >= kFailureLogInterval) {
      const bool keep = Classify(http_status) == Answer::kKeep;
      Log().Warn(keep ? "remote write refused by the TSDB: check --remote-write-url and its "
                        "credentials; samples stay queued"
                      : "remote write failed; retrying with back-off",
                 {{"url", origin}, {"error", reason}});
      failure_logged_at = now;
    }
    failure = reason;
    return http_status;
  }

  // Waits for the back-off; false when stopping.
  bool Wait(std::optional<std::chrono::milliseconds> retry_after) {
    std::unique_lock lock(mutex);
    return !queue_ready.wait_for(lock, backoff.NextDelay(retry_after), [&] { return stopping; });
  }

  bool Stopping() {
    std::lock_guard lock(mutex);
    return stopping;
  }

  // Delivers `pieces` in requests of at most max_series_per_request series; false when
  // stopping first (nothing is consumed then, and the records are sent again next time).
  bool Deliver(const std::vector<Piece>& pieces) {
    // Ranges of `pieces` still to send, front first.
    std::deque<std::pair<size_t, size_t>> ranges;
    for (size_t begin = 0; begin < pieces.size();) {
      size_t end = begin;
      size_t series = 0;
      do {
        series += pieces[end].series;
        ++end;
      } while (end < pieces.size() &&
               series + pieces[end].series <= options.max_series_per_request);
      ranges.emplace_back(begin, end);
      begin = end;
    }
    std::string body;
    while (!ranges.empty()) {
      if (Stopping()) return false;
      const auto [begin, end] = ranges.front();
      body.clear();
      size_t series = 0;
      for (size_t i = begin; i < end; ++i) {
        body += pieces[i].bytes;
        series += pieces[i].series;
      }
      std::optional<std::chrono::milliseconds> retry_after;
      const int status = Post(body, retry_after);
      const Answer answer = status == 0 ? Answer::kRetry : Classify(status);
      if (answer == Answer::kRetry || answer == Answer::kKeep) {
        if (!Wait(retry_after)) return false;
        continue;
      }
      ranges.pop_front();
      if (answer == Answer::kSent) {
        if (!failure.empty()) {
          Log().Info("remote write recovered", {{"url", origin}, {"failures", backoff.failures()}});
          failure.clear();
        }
        backoff.Reset();
        metrics.Increment(kSent, {}, static_cast<double>(end - begin));
        metrics.Increment(kSeriesSent, {}, static_cast<double>(series));
        metrics.Set(kLastSent, static_cast<double>(ToUnixSeconds(clock.Now())));
      } else if (end - begin > 1) {
        // Refused: find the node samples at fault by halves, sending the rest.
        const size_t middle = begin + (end - begin) / 2;
        ranges.emplace_front(middle, end);
        ranges.emplace_front(begin, middle);
      } else {
        metrics.Increment(kRefused);
        Log().Warn("remote write: the TSDB refused a node sample; dropped",
                   {{"url", origin}, {"status", status}, {"reply", refusal}});
      }
    }
    return true;
  }

  void SendLoop() {
    while (!Stopping()) {
      auto records = queue->Read(kReadBytes, kReadRecords);
      if (!records.ok()) {
        Log().Error("remote write: reading the queue failed", {{"error", records.status()}});
        queue->Rewind();
        if (!Wait(std::chrono::milliseconds(1000))) return;
        continue;
      }
      if (records->empty()) {
        std::unique_lock lock(mutex);
        queue_ready.wait_for(lock, std::chrono::seconds(1));
        continue;
      }
      std::vector<Piece> pieces;
      for (const spool::SpoolRecord& record : *records) {
        auto samples = DecodeQueueRecord(record.payload);
        if (!samples.ok()) {
          metrics.Increment(kDropped, {{"reason", "unreadable"}});
          Log().Error("remote write: a queue record cannot be read; dropped",
                      {{"sequence", record.sequence}, {"error", samples.status()}});
          continue;
        }
        for (const QueuedSample& sample : *samples) {
          if (auto piece = Build(sample)) pieces.push_back(std::move(*piece));
        }
      }
      if (!Deliver(pieces)) {
        queue->Rewind();
        return;
      }
      if (Status consumed = queue->Consume(records->back().sequence); !consumed.ok()) {
        Log().Error("remote write: consuming the queue failed; its records will be sent again",
                    {{"error", consumed}});
        queue->Rewind();
      }
    }
  }
};

RemoteWriteForwarder::RemoteWriteForwarder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RemoteWriteForwarder::~RemoteWriteForwarder() { Stop(); }

Result<std::unique_ptr<RemoteWriteForwarder>> RemoteWriteForwarder::Start(
    RemoteWriteOptions options, const Clock& clock) {
  UPLINK_RETURN_IF_ERROR(ValidateRemoteWriteOptions(options));
  auto impl = std::make_unique<Impl>(std::move(options), clock);
  UPLINK_ASSIGN_OR_RETURN(impl->url, net::ParseBaseUrl(impl->options.url));
  impl->origin = Origin(impl->url);
  net::ClientOptions client;
  client.base_url = impl->origin;
  client.ca_file = impl->options.ca_file;
  client.request_timeout = impl->options.request_timeout;
  client.max_response_bytes = 64 << 10;
  UPLINK_ASSIGN_OR_RETURN(impl->client, net::HttpClient::Create(std::move(client)));
  spool::SpoolOptions queue;
  queue.max_bytes = impl->options.queue_max_bytes;
  queue.max_record_bytes = std::min<std::uint64_t>(queue.max_bytes / 4, 16ull << 20);
  auto opened = spool::Spool::Open(spool::PosixFileSystem(), impl->options.queue_dir, queue, clock);
  if (!opened.ok()) return opened.status().WithContext("opening the remote write queue");
  impl->queue = std::move(opened).value();
  impl->Declare();
  Impl& self = *impl;
  impl->writer = std::thread([&self] {
    NameThisThread("rw-writer");
    self.WriteLoop();
  });
  impl->sender = std::thread([&self] {
    NameThisThread("rw-sender");
    self.SendLoop();
  });
  const spool::SpoolStats stats = impl->queue->Stats();
  Log().Info("forwarding node samples with remote write",
             {{"url", impl->origin},
              {"queue", impl->options.queue_dir},
              {"queued_records", stats.waiting_records}});
  return std::unique_ptr<RemoteWriteForwarder>(new RemoteWriteForwarder(std::move(impl)));
}

void RemoteWriteForwarder::UploadStored(const Connection& connection, const UploadBatch& batch,
                                        const UploadOutcome& outcome) {
  if (!batch.stream.starts_with(protocol::kNodeStreamPrefix)) return;
  std::vector<QueuedSample> samples;
  const auto first_new = static_cast<size_t>(std::max<std::int64_t>(outcome.duplicates, 0));
  for (size_t i = first_new; i < batch.records.size(); ++i) {
    const UploadRecord& record = batch.records[i];
    if (!record.node_sample) continue;
    samples.push_back({connection.id, connection.cluster_name, std::string(batch.Payload(record))});
  }
  if (!samples.empty()) impl_->Hand(std::move(samples));
}

void RemoteWriteForwarder::RenderMetrics(std::string& out) const {
  const spool::SpoolStats stats = impl_->queue->Stats();
  metrics::Registry& metrics = impl_->metrics;
  metrics.Set(kQueueBytes, static_cast<double>(stats.bytes));
  metrics.Set(kQueueRecords, static_cast<double>(stats.waiting_records));
  double oldest = 0;
  if (stats.oldest_appended_at) {
    oldest = std::max(
        0.0, std::chrono::duration<double>(impl_->clock.Now() - *stats.oldest_appended_at).count());
  }
  metrics.Set(kQueueOldest, oldest);
  // The spool's own cumulative counts (persisted across restarts).
  metrics.Set(kQueueDroppedRecords, static_cast<double>(stats.losses.dropped.records));
  metrics.Set(kQueueDroppedBytes, static_cast<double>(stats.losses.dropped.bytes));
  metrics.RenderTextTo(out);
}

void RemoteWriteForwarder::Stop() {
  std::call_once(impl_->stopped, [this] {
    {
      std::lock_guard lock(impl_->mutex);
      impl_->stopping = true;
    }
    impl_->handoff_ready.notify_all();
    impl_->writer.join();  // writes the hand-off out first
    impl_->queue_ready.notify_all();
    impl_->client->Abort();
    impl_->sender.join();
  });
}

}  // namespace uplink::console::remote_write
