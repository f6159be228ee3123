// Messages between console replicas that share one PostgreSQL store (docs/architecture.md,
// "Replicas"): a charged authentication failure, a kubectl
// command queued on one replica for an agent polling another. Delivery is best effort and
// immediate; what must not be lost (a claim, a large body) is in the database, and after a
// lost connection subscribers are told to resync, since messages sent meanwhile are gone.
//
// With SQLite there is one console and no bus: callers hold a null ReplicaBus*, so the one-
// server path has no extra step at all (rather than a no-op bus whose calls every caller
// would still make and whose metrics would claim a bus exists).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/json_fwd.h"
#include "common/metrics.h"
#include "common/status.h"
#include "common/time.h"
#include "console/store/sql/postgres_database.h"

namespace uplink::console {

// The channel every replica LISTENs on.
inline constexpr std::string_view kReplicaChannel = "uplink_replicas";
// PostgreSQL refuses a notification payload of 8000 bytes or more; the rest is margin.
inline constexpr size_t kMaxReplicaMessageBytes = 7900;

class ReplicaBus {
 public:
  // A message's fields, "topic" and "from" included.
  using Handler = std::function<void(const json::object& message)>;

  // Unsubscribes when destroyed, after any call of its handler in progress has returned.
  class Subscription {
   public:
    Subscription() = default;
    Subscription(ReplicaBus* bus, std::uint64_t id) : bus_(bus), id_(id) {}
    Subscription(Subscription&& other) noexcept
        : bus_(std::exchange(other.bus_, nullptr)), id_(other.id_) {}
    Subscription& operator=(Subscription&& other) noexcept;
    ~Subscription();

   private:
    ReplicaBus* bus_ = nullptr;
    std::uint64_t id_ = 0;
  };

  virtual ~ReplicaBus() = default;

  // This replica's id, random per process: the "from" of what it sends.
  virtual const std::string& replica_id() const = 0;

  // Sends `fields` with "topic" and "from" added to every other replica. InvalidArgument when
  // the message is over kMaxReplicaMessageBytes (put the body in a table and send its id);
  // Unavailable while the bus has no connection.
  virtual Status Publish(std::string_view topic, const json::object& fields) = 0;

  // `handler` gets every message of `topic` from another replica (and any without a "from",
  // which reaches every replica), on the bus's thread, one at a time.
  [[nodiscard]] virtual Subscription Subscribe(std::string topic, Handler handler) = 0;
  // `handler` runs on the bus's thread after a reconnect: messages may have been missed, so
  // whatever they keep fresh must be dropped or re-read.
  [[nodiscard]] virtual Subscription OnResync(std::function<void()> handler) = 0;

  // Ok while connected and listening; for /readyz.
  virtual Status Health() const = 0;
  // The bus's Prometheus series, appended to /metrics.
  virtual void RenderMetrics(std::string& out) const = 0;

 protected:
  virtual void Unsubscribe(std::uint64_t id) = 0;
};

// A bus over LISTEN/NOTIFY on the store's PostgreSQL database, through a connection of its own.
class PostgresReplicaBus final : public ReplicaBus {
 public:
  struct Options {
    std::chrono::milliseconds reconnect_base{500};
    std::chrono::milliseconds reconnect_cap{15'000};
  };

  // Connects and LISTENs before returning, so that a console does not serve without the bus;
  // then dispatches on a thread of its own until destroyed.
  static Result<std::unique_ptr<PostgresReplicaBus>> Start(sql::PostgresLocation where,
                                                           Options options);
  static Result<std::unique_ptr<PostgresReplicaBus>> Start(sql::PostgresLocation where) {
    return Start(std::move(where), Options{});
  }
  ~PostgresReplicaBus() override;
  PostgresReplicaBus(const PostgresReplicaBus&) = delete;
  PostgresReplicaBus& operator=(const PostgresReplicaBus&) = delete;

  const std::string& replica_id() const override { return replica_id_; }
  Status Publish(std::string_view topic, const json::object& fields) override;
  Subscription Subscribe(std::string topic, Handler handler) override;
  Subscription OnResync(std::function<void()> handler) override;
  Status Health() const override;
  void RenderMetrics(std::string& out) const override;

  // Closes the connection as a lost one would be (the thread then reconnects); for tests.
  void DropConnectionForTest();

 private:
  PostgresReplicaBus(sql::PostgresLocation where, Options options);
  void Unsubscribe(std::uint64_t id) override;
  Status Connect();
  void Run();
  // Reads what arrived and dispatches it; false when the connection is lost.
  bool DrainNotifications();
  void Dispatch(std::string_view payload);
  // Waits up to `wait` for the socket (when >= 0) or the wake-up descriptor; false on stop.
  bool WaitForInput(int socket, std::optional<std::chrono::milliseconds> wait);
  void Wake();

  const sql::PostgresLocation where_;
  const Options options_;
  const std::string replica_id_;
  metrics::Registry metrics_;
  int wake_fd_ = -1;  // an eventfd: Publish (which may read notifications) and stop
  std::atomic<bool> stopping_{false};

  // The connection; publishers and the thread take turns on it.
  mutable std::mutex conn_mutex_;
  sql::PgConnection conn_;
  std::optional<WallTime> lost_since_;  // under conn_mutex_

  // Subscriptions; dispatch_mutex_ is held while handlers run, so Unsubscribe waits them out.
  std::mutex handlers_mutex_;
  std::mutex dispatch_mutex_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::pair<std::string, Handler>> topic_handlers_;
  std::map<std::uint64_t, std::function<void()>> resync_handlers_;

  std::thread thread_;
};

}  // namespace uplink::console
