// The shipper: delivers a spool's records to the console in order, exactly once
// (docs/protocol.md, "POST /api/v1/agent/uploads").
//
// It reads a batch, keeps it in memory until the console acknowledges it, and only then
// consumes it from the spool, so a crash at any point re-sends at most one batch, which the
// console recognises. A batch refused as too large or malformed is halved down to single
// records; a single record the console refuses, or one that is not JSON, is given up and
// counted as rejected, so one bad record never blocks those behind it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/console_client.h"
#include "agent/health.h"
#include "agent/stop_signal.h"
#include "common/backoff.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "spool/spool.h"

namespace uplink::agent {

struct ShipperOptions {
  std::string stream;    // which spool of the connection, e.g. "node/gpu-node-0001"
  std::string instance;  // agent_instance; empty: not sent
  size_t max_batch_bytes = 1 << 20;  // payload bytes per upload (one larger record still goes)
  size_t max_batch_records = 5'000;
  std::chrono::milliseconds idle_poll{1'000};  // how often an empty spool is looked at again
  // After a stop: how long the last attempt to deliver what waits may take in all.
  std::chrono::milliseconds stop_budget{5'000};
  // /readyz fails once the oldest waiting record is this old: the console is unreachable.
  std::chrono::milliseconds max_record_age{10 * 60'000};
  // Called with the body of every reply that acknowledged a batch (the node role takes its
  // collection plan from it), on the shipper's thread.
  std::function<void(const json::value& reply)> on_acknowledged;
};

// A stream name as the protocol bounds it (protocol::IsStreamName), or the error that says
// what is wrong with it.
Status ValidateStreamName(std::string_view stream);

// Declares the spool and shipping metric families in `registry`.
void DeclareShipperMetrics(metrics::Registry& registry);

enum class StepOutcome {
  kIdle,        // nothing waits
  kDelivered,   // the console acknowledged a batch, or a batch of only rejected records was
                // consumed without a request
  kSplit,       // refused as too large or malformed: halved, sent again at once
  kRejected,    // one record was given up and counted; the rest goes again at once
  kRefused,     // the console refuses uploads (401, 403, another 4xx): kept, backing off
  kFailed,      // no reply, 429, 5xx, a redirect or a reply outside the protocol: kept,
                // backing off
  kSpoolError,  // reading or consuming the spool failed: backing off
};

std::string_view StepOutcomeName(StepOutcome outcome);

struct StepResult {
  StepOutcome outcome = StepOutcome::kIdle;
  Status status;  // why, for every outcome but kIdle and kDelivered
  std::chrono::milliseconds next_wait{0};  // before the next step
};

class Shipper {
 public:
  // `spool`, `console`, `clock` and `registry` must outlive the shipper; DeclareShipperMetrics
  // must have been called on `registry`. The options must be valid (ValidateStreamName).
  Shipper(ShipperOptions options, spool::Spool& spool, ConsoleClient& console, Clock& clock,
          metrics::Registry& registry, Backoff backoff = Backoff());

  // One step: send the batch in flight (reading a new one when none is), and act on the
  // reply. Never throws and never gives up; the result says how long to wait.
  StepResult Step();

  // Steps until `stop`, then makes one last attempt bounded by options.stop_budget.
  void Run(StopSignal& stop);

  // Steps until nothing waits (ok), an attempt has to back off, or `budget` has passed (the
  // error says so). What is not delivered stays in the spool.
  Status Drain(std::chrono::milliseconds budget);

  // What Run does after each idle step: lets the spool write one file ahead of need
  // (SpoolOptions::reserve_disk); after a failure (a full disk), none for 10 minutes.
  void WriteSpoolAhead();

  // Thread-safe; for /readyz.
  Readiness CheckReadiness() const;

 private:
  struct Record {
    std::uint64_t sequence = 0;
    WallTime appended_at;
    json::value payload;
    std::uint64_t bytes = 0;  // of the payload as spooled, for the loss count
  };
  // A range of sequences sent as one upload. It may hold fewer records than it spans: the
  // missing ones were dropped, damaged or rejected, and the console counts them as lost.
  struct Batch {
    std::uint64_t first_sequence = 0;
    std::uint64_t last_sequence = 0;
    std::vector<Record> records;
  };
  // A record given up but not yet consumed: counted when the range holding it is consumed, so
  // that a crash before then neither loses nor doubles the count.
  struct Rejection {
    std::uint64_t sequence = 0;
    std::uint64_t bytes = 0;
  };

  // Reads the next batch into pending_; false when nothing waits.
  Result<bool> ReadBatch(std::uint64_t consumed_through);
  // Drops what the spool consumed meanwhile (dropped at the cap) from the batches in flight.
  void Prune(std::uint64_t consumed_through);
  json::value UploadBody(const Batch& batch, const spool::SpoolStats& stats) const;
  // Consumes through `through`, counting the rejections at or below it.
  Status ConsumeThrough(std::uint64_t through);
  void Reject(std::uint64_t sequence, std::uint64_t bytes, std::string_view why);
  StepResult Acknowledged(const ConsoleReply& reply);
  StepResult Refused(const ConsoleReply& reply);
  StepResult BackOff(StepOutcome outcome, const Status& status, std::string_view reason,
                     const ConsoleReply* reply);
  void RecordSuccess();
  void UpdateSpoolMetrics(const spool::SpoolStats& stats);

  ShipperOptions options_;
  spool::Spool& spool_;
  ConsoleClient& console_;
  Clock& clock_;
  metrics::Registry& metrics_;
  Backoff backoff_;
  log::Logger log_{"agent.shipper"};

  // After a failed WriteAhead (a full disk), none is tried before then.
  static constexpr std::chrono::minutes kWriteAheadPause{10};
  std::optional<SteadyTime> write_ahead_paused_until_;
  std::deque<Batch> pending_;          // in sequence order; the front is sent next
  std::vector<Rejection> rejections_;  // ascending sequences

  mutable std::mutex mutex_;  // guards the fields below (read by health threads)
  bool refused_ = false;      // the console refuses this agent's uploads
  std::string refusal_;       // why, e.g. "revoked"
  std::string last_error_;    // empty after a delivered batch
};

}  // namespace uplink::agent
