#include "agent/shipper.h"

#include <algorithm>

#include "protocol/agent_api.h"
#include "protocol/upload.h"

namespace uplink::agent {
namespace {

// A payload is at most protocol::kMaxPayloadBytes serialized. A larger one could not be sent
// even alone (its body may exceed the console's limit, which refuses it before reading it),
// so it is given up here, counted, without a request.
using protocol::kMaxPayloadBytes;

constexpr char kSpoolBytes[] = "uplink_agent_spool_bytes";
constexpr char kSpoolSpareBytes[] = "uplink_agent_spool_spare_bytes";
constexpr char kWriteAheadsCancelled[] = "uplink_agent_spool_write_ahead_cancelled_total";
constexpr char kSpoolRecords[] = "uplink_agent_spool_records";
constexpr char kSpoolOldestAge[] = "uplink_agent_spool_oldest_record_age_seconds";
constexpr char kDroppedRecords[] = "uplink_agent_spool_dropped_records_total";
constexpr char kDroppedBytes[] = "uplink_agent_spool_dropped_bytes_total";
constexpr char kCorruptRecords[] = "uplink_agent_spool_corrupt_records_total";
constexpr char kCorruptBytes[] = "uplink_agent_spool_corrupt_bytes_total";
constexpr char kRejectedRecords[] = "uplink_agent_spool_rejected_records_total";
constexpr char kRejectedBytes[] = "uplink_agent_spool_rejected_bytes_total";
constexpr char kUploads[] = "uplink_agent_ship_uploads_total";
constexpr char kRecordsShipped[] = "uplink_agent_ship_records_total";
constexpr char kFailures[] = "uplink_agent_ship_failures_total";

protocol::LossCount LossOf(const spool::LossCount& loss) {
  return protocol::LossCount{static_cast<std::int64_t>(loss.records),
                             static_cast<std::int64_t>(loss.bytes)};
}

// The failure label of a reply: its status class, or "network" when none came.
std::string_view FailureReason(int http_status) {
  if (http_status == 0) return "network";
  if (http_status < 300) return "bad_reply";
  if (http_status < 400) return "3xx";
  if (http_status < 500) return "4xx";
  return "5xx";
}

}  // namespace

Status ValidateStreamName(std::string_view stream) {
  if (protocol::IsStreamName(stream)) return Status::Ok();
  if (stream.empty() || stream.size() > protocol::kMaxStreamBytes) {
    return InvalidArgumentError("a stream name must be 1-253 characters");
  }
  return InvalidArgumentError("a stream name may hold only letters, digits and . _ / -");
}

void DeclareShipperMetrics(metrics::Registry& registry) {
  registry.DeclareGauge(kSpoolBytes, "Size of the spool's segment files");
  registry.DeclareGauge(kSpoolSpareBytes,
                        "Of the spool's size, files kept for reuse or written ahead of need");
  registry.DeclareGauge(kSpoolRecords, "Records appended and not yet delivered");
  registry.DeclareGauge(kSpoolOldestAge, "Age of the oldest waiting record (0 when none waits)");
  registry.DeclareCounter(kDroppedRecords, "Records dropped at the spool's size cap, oldest first");
  registry.DeclareCounter(kDroppedBytes, "Payload bytes dropped at the spool's size cap");
  registry.DeclareCounter(kCorruptRecords, "Records found damaged in the spool and skipped");
  registry.DeclareCounter(kCorruptBytes, "Bytes of the spool skipped as damaged");
  registry.DeclareCounter(kRejectedRecords,
                          "Records given up: refused by the console, or not JSON");
  registry.DeclareCounter(kRejectedBytes, "Payload bytes of the records given up");
  registry.DeclareCounter(kUploads, "Uploads the console acknowledged");
  registry.DeclareCounter(kRecordsShipped, "Records in uploads the console acknowledged");
  registry.DeclareCounter(kFailures,
                          "Uploads not acknowledged, by reason: network (no reply), 3xx, 4xx, "
                          "5xx, bad_reply (outside the protocol), spool (reading or consuming)");
}

std::string_view StepOutcomeName(StepOutcome outcome) {
  switch (outcome) {
    case StepOutcome::kIdle: return "idle";
    case StepOutcome::kDelivered: return "delivered";
    case StepOutcome::kSplit: return "split";
    case StepOutcome::kRejected: return "rejected";
    case StepOutcome::kRefused: return "refused";
    case StepOutcome::kFailed: return "failed";
    case StepOutcome::kSpoolError: return "spool_error";
  }
  return "unknown";
}

Shipper::Shipper(ShipperOptions options, spool::Spool& spool, ConsoleClient& console,
                 Clock& clock, metrics::Registry& registry, Backoff backoff)
    : options_(std::move(options)),
      spool_(spool),
      console_(console),
      clock_(clock),
      metrics_(registry),
      backoff_(std::move(backoff)) {}

StepResult Shipper::Step() {
  spool::SpoolStats stats = spool_.Stats();
  Prune(stats.consumed_through);
  while (pending_.empty()) {
    Result<bool> read = ReadBatch(stats.consumed_through);
    if (!read.ok()) {
      // Start the next read from the oldest waiting record: nothing is in flight.
      spool_.Rewind();
      return BackOff(StepOutcome::kSpoolError, read.status(), "spool", nullptr);
    }
    stats = spool_.Stats();  // reading may have found damaged records
    if (!*read) {
      UpdateSpoolMetrics(stats);
      return StepResult{StepOutcome::kIdle, Status::Ok(), options_.idle_poll};
    }
    // An Append may have dropped the new batch at the cap meanwhile; then read on.
    Prune(stats.consumed_through);
  }
  UpdateSpoolMetrics(stats);

  Batch& batch = pending_.front();
  if (batch.records.empty()) {
    // Every record of this range was given up: consume it without a request. The console
    // counts the range as lost when the next upload passes it.
    Status consumed = ConsumeThrough(batch.last_sequence);
    if (!consumed.ok()) return BackOff(StepOutcome::kSpoolError, consumed, "spool", nullptr);
    pending_.pop_front();
    UpdateSpoolMetrics(spool_.Stats());
    return StepResult{StepOutcome::kDelivered, Status::Ok(), std::chrono::milliseconds(0)};
  }

  ConsoleReply reply =
      console_.PostJson(protocol::kUploadsPath, UploadBody(batch, stats), Compression::kAlways);
  if (reply.status.ok()) return Acknowledged(reply);
  const int http = reply.http_status;
  // Records are given up only on the console's own verdict (its error body), never on a
  // proxy's: an ingress answering 413 or 400 for its own reasons must not make the agent
  // throw the spool away record by record.
  const bool console_verdict =
      (http == 400 && reply.error_code == "invalid_request") ||
      (http == 413 && reply.error_code == "too_large") ||
      (http == 422 && reply.error_code == "invalid_record");
  if (http == 422 && console_verdict) {
    auto record = batch.records.end();
    if (reply.error && reply.error->sequence && *reply.error->sequence >= 0) {
      const auto refused = static_cast<std::uint64_t>(*reply.error->sequence);
      record = std::find_if(batch.records.begin(), batch.records.end(),
                            [&](const Record& r) { return r.sequence == refused; });
    }
    if (record != batch.records.end()) {
      metrics_.Increment(kFailures, {{"reason", "4xx"}});
      Reject(record->sequence, record->bytes, reply.status.message());
      batch.records.erase(record);
      return StepResult{StepOutcome::kRejected, reply.status, std::chrono::milliseconds(0)};
    }
    // A 422 that names no record of this batch says only that something in it is bad: narrow
    // it down as for 400.
  }
  // A 413 from anyone says the body is too large: halves may pass.
  if (console_verdict || (http == 413 && batch.records.size() > 1)) {
    metrics_.Increment(kFailures, {{"reason", "4xx"}});
    if (batch.records.size() == 1) {
      Reject(batch.records.front().sequence, batch.records.front().bytes, reply.status.message());
      batch.records.clear();
      return StepResult{StepOutcome::kRejected, reply.status, std::chrono::milliseconds(0)};
    }
    size_t half = batch.records.size() / 2;
    Batch second;
    second.first_sequence = batch.records[half - 1].sequence + 1;
    second.last_sequence = batch.last_sequence;
    second.records.assign(std::make_move_iterator(batch.records.begin() + half),
                          std::make_move_iterator(batch.records.end()));
    batch.records.resize(half);
    batch.last_sequence = batch.records.back().sequence;
    log_.Info("the console refused a batch; sending it again in halves",
              {{"http_status", http},
               {"error", reply.status},
               {"first_sequence", batch.first_sequence},
               {"last_sequence", second.last_sequence}});
    pending_.insert(pending_.begin() + 1, std::move(second));
    return StepResult{StepOutcome::kSplit, reply.status, std::chrono::milliseconds(0)};
  }
  // Any other 4xx refuses the upload as a whole and names no record: giving records up
  // would lose everything (a console without this route answers 404, a proxy may refuse a
  // body of any size), so keep them.
  if (http >= 400 && http <= 499 && http != 408 && http != 429) return Refused(reply);
  return BackOff(StepOutcome::kFailed, reply.status, FailureReason(http), &reply);
}

Result<bool> Shipper::ReadBatch(std::uint64_t consumed_through) {
  while (true) {
    UPLINK_ASSIGN_OR_RETURN(std::vector<spool::SpoolRecord> records,
                            spool_.Read(options_.max_batch_bytes, options_.max_batch_records));
    if (records.empty()) return false;
    Batch batch;
    batch.first_sequence = consumed_through + 1;
    for (spool::SpoolRecord& record : records) {
      if (record.sequence <= consumed_through) continue;
      batch.last_sequence = record.sequence;
      // Limits as for any JSON we read; a record the console would refuse for its shape or
      // size is refused there and given up then.
      auto payload = ParseJson(record.payload, JsonLimits{.max_bytes = record.payload.size()});
      if (!payload.ok()) {
        Reject(record.sequence, record.payload.size(),
               "the payload is not JSON: " + payload.status().message());
        continue;
      }
      // Serialized again only when it may be too large: the console measures compact JSON.
      if (record.payload.size() > kMaxPayloadBytes &&
          json::serialize(*payload).size() > kMaxPayloadBytes) {
        Reject(record.sequence, record.payload.size(),
               "the payload is over the console's " + std::to_string(kMaxPayloadBytes) +
                   "-byte limit for one record");
        continue;
      }
      batch.records.push_back(Record{record.sequence, record.appended_at,
                                     std::move(payload).value(), record.payload.size()});
    }
    if (batch.last_sequence == 0) continue;  // all consumed meanwhile: read on
    pending_.push_back(std::move(batch));
    return true;
  }
}

void Shipper::Prune(std::uint64_t consumed_through) {
  while (!pending_.empty()) {
    Batch& front = pending_.front();
    if (front.last_sequence <= consumed_through) {
      pending_.pop_front();
      continue;
    }
    if (front.first_sequence <= consumed_through) {
      // Dropped at the cap while in flight: the spool has counted them; never send them.
      front.first_sequence = consumed_through + 1;
      std::erase_if(front.records,
                    [&](const Record& record) { return record.sequence <= consumed_through; });
    }
    break;
  }
  std::erase_if(rejections_, [&](const Rejection& rejection) {
    return rejection.sequence <= consumed_through;
  });
}

json::value Shipper::UploadBody(const Batch& batch, const spool::SpoolStats& stats) const {
  spool::LossCount rejected = stats.losses.rejected;
  for (const Rejection& rejection : rejections_) {
    if (rejection.sequence > batch.last_sequence) break;
    ++rejected.records;
    rejected.bytes += rejection.bytes;
  }
  json::array records;
  records.reserve(batch.records.size());
  for (const Record& record : batch.records) {
    records.push_back(protocol::EncodeUploadRecord(static_cast<std::int64_t>(record.sequence),
                                                   record.appended_at, record.payload));
  }
  protocol::UploadEnvelope envelope;
  envelope.agent_version = UPLINK_VERSION;
  envelope.agent_instance = options_.instance;
  envelope.stream = options_.stream;
  envelope.spool_id = stats.spool_id;
  envelope.first_sequence = static_cast<std::int64_t>(batch.first_sequence);
  envelope.last_sequence = static_cast<std::int64_t>(batch.last_sequence);
  envelope.losses = protocol::AgentLosses{LossOf(stats.losses.dropped),
                                          LossOf(stats.losses.corrupt), LossOf(rejected)};
  return protocol::EncodeUpload(envelope, std::move(records));
}

Status Shipper::ConsumeThrough(std::uint64_t through) {
  // Rejections at or below consumed_through were dropped at the cap first and are counted
  // there (Prune removes them); count each of the rest once, with the range that holds it.
  const std::uint64_t consumed = spool_.Stats().consumed_through;
  spool::LossCount rejected;
  for (const Rejection& rejection : rejections_) {
    if (rejection.sequence > through) break;
    if (rejection.sequence <= consumed) continue;
    ++rejected.records;
    rejected.bytes += rejection.bytes;
  }
  UPLINK_RETURN_IF_ERROR(spool_.Consume(through, rejected).WithContext("consuming the spool"));
  std::erase_if(rejections_,
                [&](const Rejection& rejection) { return rejection.sequence <= through; });
  return Status::Ok();
}

void Shipper::Reject(std::uint64_t sequence, std::uint64_t bytes, std::string_view why) {
  auto at = std::upper_bound(
      rejections_.begin(), rejections_.end(), sequence,
      [](std::uint64_t s, const Rejection& rejection) { return s < rejection.sequence; });
  rejections_.insert(at, Rejection{sequence, bytes});
  log_.Warn("record given up; it is counted as rejected",
            {{"sequence", sequence}, {"bytes", bytes}, {"reason", why}});
}

StepResult Shipper::Acknowledged(const ConsoleReply& reply) {
  Batch& batch = pending_.front();
  std::optional<std::int64_t> acked = protocol::DecodeAckedThrough(reply.body);
  if (!acked || static_cast<std::uint64_t>(*acked) < batch.last_sequence) {
    // Consuming on a wrong acknowledgement could lose records; keep them and try later.
    std::string got = acked ? "acked_through " + std::to_string(*acked) : "no acked_through";
    return BackOff(StepOutcome::kFailed,
                   UnavailableError("the console answered " + std::to_string(reply.http_status) +
                                    " with " + got + " for records through " +
                                    std::to_string(batch.last_sequence)),
                   "bad_reply", &reply);
  }
  const size_t shipped = batch.records.size();
  const std::uint64_t first = batch.first_sequence;
  const std::uint64_t last = batch.last_sequence;
  // The console never lowers acked_through; past this batch it already holds the records
  // (Prune drops them from the batches still in flight).
  Status consumed = ConsumeThrough(static_cast<std::uint64_t>(*acked));
  if (!consumed.ok()) return BackOff(StepOutcome::kSpoolError, consumed, "spool", nullptr);
  pending_.pop_front();
  metrics_.Increment(kUploads);
  metrics_.Increment(kRecordsShipped, {}, static_cast<double>(shipped));
  UpdateSpoolMetrics(spool_.Stats());
  log_.Debug("batch delivered", {{"first_sequence", first},
                                 {"last_sequence", last},
                                 {"records", shipped},
                                 {"acked_through", *acked}});
  RecordSuccess();
  if (options_.on_acknowledged) options_.on_acknowledged(reply.body);
  return StepResult{StepOutcome::kDelivered, Status::Ok(), std::chrono::milliseconds(0)};
}

StepResult Shipper::Refused(const ConsoleReply& reply) {
  {
    std::lock_guard lock(mutex_);
    refused_ = true;
    refusal_ = reply.error_code.empty() ? reply.status.message() : reply.error_code;
  }
  return BackOff(StepOutcome::kRefused, reply.status, FailureReason(reply.http_status), &reply);
}

StepResult Shipper::BackOff(StepOutcome outcome, const Status& status, std::string_view reason,
                            const ConsoleReply* reply) {
  metrics_.Increment(kFailures, {{"reason", reason}});
  auto wait = backoff_.NextDelay(reply != nullptr ? reply->retry_after : std::nullopt);
  {
    std::lock_guard lock(mutex_);
    last_error_ = status.message();
  }
  log_.Warn("records not delivered; they stay in the spool",
            {{"outcome", StepOutcomeName(outcome)},
             {"error", status},
             {"http_status", reply != nullptr ? reply->http_status : 0},
             {"retry_in_ms", wait.count()},
             {"consecutive_failures", backoff_.failures()}});
  return StepResult{outcome, status, wait};
}

void Shipper::RecordSuccess() {
  bool recovered = false;
  {
    std::lock_guard lock(mutex_);
    recovered = refused_ || !last_error_.empty();
    refused_ = false;
    refusal_.clear();
    last_error_.clear();
  }
  if (recovered) log_.Info("uploads accepted again", {{"after_failures", backoff_.failures()}});
  backoff_.Reset();
}

void Shipper::WriteSpoolAhead() {
  const SteadyTime now = clock_.SteadyNow();
  if (write_ahead_paused_until_ && now < *write_ahead_paused_until_) return;
  Result<bool> wrote = spool_.WriteAhead();
  if (wrote.ok()) {
    if (*wrote) UpdateSpoolMetrics(spool_.Stats());
    return;
  }
  // A full disk, most likely: the spool works without, so try again much later.
  write_ahead_paused_until_ = now + kWriteAheadPause;
  log_.Warn("could not write a spool file ahead of need; trying again later",
            {{"error", wrote.status()},
             {"retry_in_s", std::chrono::duration_cast<std::chrono::seconds>(kWriteAheadPause)
                                .count()}});
}

void Shipper::UpdateSpoolMetrics(const spool::SpoolStats& stats) {
  metrics_.Set(kSpoolBytes, static_cast<double>(stats.bytes));
  metrics_.Set(kSpoolSpareBytes, static_cast<double>(stats.spare_bytes));
  metrics_.Set(kWriteAheadsCancelled, static_cast<double>(stats.write_aheads_cancelled));
  metrics_.Set(kSpoolRecords, static_cast<double>(stats.waiting_records));
  double age = 0;
  if (stats.oldest_appended_at) {
    age = std::max(0.0, std::chrono::duration<double>(clock_.Now() - *stats.oldest_appended_at)
                            .count());
  }
  metrics_.Set(kSpoolOldestAge, age);
  metrics_.Set(kDroppedRecords, static_cast<double>(stats.losses.dropped.records));
  metrics_.Set(kDroppedBytes, static_cast<double>(stats.losses.dropped.bytes));
  metrics_.Set(kCorruptRecords, static_cast<double>(stats.losses.corrupt.records));
  metrics_.Set(kCorruptBytes, static_cast<double>(stats.losses.corrupt.bytes));
  metrics_.Set(kRejectedRecords, static_cast<double>(stats.losses.rejected.records));
  metrics_.Set(kRejectedBytes, static_cast<double>(stats.losses.rejected.bytes));
}

Status Shipper::Drain(std::chrono::milliseconds budget) {
  const SteadyTime deadline = clock_.SteadyNow() + budget;
  while (true) {
    StepResult step = Step();
    if (step.outcome == StepOutcome::kIdle) return Status::Ok();
    if (step.next_wait > std::chrono::milliseconds(0)) return step.status;
    if (clock_.SteadyNow() >= deadline) {
      return DeadlineExceededError("records still waited after " +
                                   std::to_string(budget.count()) + " ms");
    }
  }
}

void Shipper::Run(StopSignal& stop) {
  while (!stop.stopped()) {
    StepResult step = Step();
    // Not in Drain: a run that only delivers what waits (--once, a stop) writes nothing ahead.
    if (step.outcome == StepOutcome::kIdle) WriteSpoolAhead();
    if (!stop.WaitFor(step.next_wait)) break;
  }
  Status drained = Drain(options_.stop_budget);
  if (drained.ok()) {
    log_.Info("stopping: everything in the spool was delivered");
    return;
  }
  log_.Info("stopping; what was not delivered stays in the spool for the next start",
            {{"waiting_records", spool_.Stats().waiting_records}, {"reason", drained}});
}

Readiness Shipper::CheckReadiness() const {
  spool::SpoolStats stats = spool_.Stats();
  std::lock_guard lock(mutex_);
  if (refused_) return {false, "uploads refused: " + refusal_};
  if (stats.oldest_appended_at) {
    auto age = clock_.Now() - *stats.oldest_appended_at;
    if (age >= options_.max_record_age) {
      std::string reason =
          "the oldest waiting record is " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(age).count()) +
          " s old";
      if (!last_error_.empty()) reason += "; last error: " + last_error_;
      return {false, reason};
    }
  }
  return {true, ""};
}

}  // namespace uplink::agent
