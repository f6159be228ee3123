#include "console/replicas/replica_bus.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/backoff.h"
#include "common/crypto.h"
#include "common/json.h"
#include "common/log.h"
#include "common/thread_name.h"

namespace uplink::console {
namespace {

const log::Logger& Log() {
  static const log::Logger logger("console.replicas");
  return logger;
}

constexpr const char* kSentTotal = "uplink_console_replica_messages_sent_total";
constexpr const char* kReceivedTotal = "uplink_console_replica_messages_received_total";
constexpr const char* kDroppedTotal = "uplink_console_replica_messages_dropped_total";
constexpr const char* kReconnectsTotal = "uplink_console_replica_bus_reconnects_total";
constexpr const char* kConnected = "uplink_console_replica_bus_connected";

// A message is flat and small; anything deeper is not one of ours.
constexpr JsonLimits kMessageLimits{.max_bytes = kMaxReplicaMessageBytes + 100, .max_depth = 8};

std::string NewReplicaId() { return HexEncode(RandomBytes(8)); }

}  // namespace

ReplicaBus::Subscription& ReplicaBus::Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    if (bus_ != nullptr) bus_->Unsubscribe(id_);
    bus_ = std::exchange(other.bus_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

ReplicaBus::Subscription::~Subscription() {
  if (bus_ != nullptr) bus_->Unsubscribe(id_);
}

PostgresReplicaBus::PostgresReplicaBus(sql::PostgresLocation where, Options options)
    : where_(std::move(where)), options_(options), replica_id_(NewReplicaId()) {
  metrics_.DeclareCounter(kSentTotal, "Messages this replica sent to the others, by topic.");
  metrics_.DeclareCounter(kReceivedTotal,
                          "Messages from other replicas this replica acted on, by topic.");
  metrics_.DeclareCounter(kDroppedTotal,
                          "Messages on the replica channel that were not understood, by reason.");
  metrics_.DeclareCounter(kReconnectsTotal,
                          "Times the replica bus reconnected to PostgreSQL after losing it.");
  metrics_.DeclareGauge(kConnected, "1 while the replica bus is connected and listening.");
}

Result<std::unique_ptr<PostgresReplicaBus>> PostgresReplicaBus::Start(sql::PostgresLocation where,
                                                                      Options options) {
  std::unique_ptr<PostgresReplicaBus> bus(new PostgresReplicaBus(std::move(where), options));
  bus->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (bus->wake_fd_ < 0) return InternalError("eventfd: " + std::string(std::strerror(errno)));
  UPLINK_RETURN_IF_ERROR(bus->Connect());
  bus->thread_ = std::thread([raw = bus.get()] {
    NameThisThread("replica-bus");
    raw->Run();
  });
  return bus;
}

PostgresReplicaBus::~PostgresReplicaBus() {
  stopping_ = true;
  Wake();
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status PostgresReplicaBus::Connect() {
  UPLINK_ASSIGN_OR_RETURN(sql::PgConnection conn,
                          sql::ConnectPostgres(where_, "uplink-console replica bus"));
  PGresult* listen = PQexec(conn.get(), ("LISTEN " + std::string(kReplicaChannel)).c_str());
  const bool listening = PQresultStatus(listen) == PGRES_COMMAND_OK;
  PQclear(listen);
  if (!listening) {
    return UnavailableError("LISTEN on the replica channel: " +
                            sql::OneLinePostgresMessage(PQerrorMessage(conn.get())));
  }
  std::lock_guard lock(conn_mutex_);
  conn_ = std::move(conn);
  lost_since_.reset();
  metrics_.Set(kConnected, 1);
  return Status::Ok();
}

void PostgresReplicaBus::Wake() {
  std::uint64_t one = 1;
  // A full counter still wakes the reader; nothing to do on failure.
  [[maybe_unused]] ssize_t written = ::write(wake_fd_, &one, sizeof one);
}

bool PostgresReplicaBus::WaitForInput(int socket, std::optional<std::chrono::milliseconds> wait) {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {socket, POLLIN, 0}};
  const nfds_t count = socket >= 0 ? 2 : 1;
  const int timeout = wait ? static_cast<int>(wait->count()) : -1;
  if (::poll(fds, count, timeout) > 0 && (fds[0].revents & POLLIN) != 0) {
    std::uint64_t drained = 0;
    [[maybe_unused]] ssize_t read = ::read(wake_fd_, &drained, sizeof drained);
  }
  return !stopping_;
}

void PostgresReplicaBus::Run() {
  Backoff backoff(BackoffOptions{.base = options_.reconnect_base, .cap = options_.reconnect_cap});
  while (!stopping_) {
    int socket = -1;
    {
      std::lock_guard lock(conn_mutex_);
      if (conn_ != nullptr) socket = PQsocket(conn_.get());
    }
    if (socket >= 0) {
      // Notifications a Publish read along with its reply are already in libpq's buffer: look
      // before waiting, and again after every wake-up.
      if (DrainNotifications()) {
        WaitForInput(socket, std::nullopt);
        continue;
      }
      {
        std::lock_guard lock(conn_mutex_);
        conn_.reset();
        lost_since_ = SystemClock().Now();
        metrics_.Set(kConnected, 0);
      }
      Log().Warn("the replica bus lost its PostgreSQL connection; reconnecting");
    }
    if (!WaitForInput(-1, backoff.NextDelay())) break;
    if (Status connected = Connect(); !connected.ok()) {
      Log().Warn("the replica bus could not reconnect", {{"error", connected}});
      continue;
    }
    backoff.Reset();
    metrics_.Increment(kReconnectsTotal);
    Log().Info("the replica bus reconnected; subscribers resync");
    std::vector<std::function<void()>> resyncs;
    {
      std::lock_guard lock(handlers_mutex_);
      for (const auto& [id, handler] : resync_handlers_) resyncs.push_back(handler);
    }
    std::lock_guard dispatching(dispatch_mutex_);
    for (const auto& resync : resyncs) resync();
  }
}

bool PostgresReplicaBus::DrainNotifications() {
  std::vector<std::string> payloads;
  bool alive = true;
  {
    std::lock_guard lock(conn_mutex_);
    if (conn_ == nullptr) return false;
    alive = PQconsumeInput(conn_.get()) == 1 && PQstatus(conn_.get()) == CONNECTION_OK;
    while (PGnotify* notify = PQnotifies(conn_.get())) {
      payloads.emplace_back(notify->extra);
      PQfreemem(notify);
    }
  }
  for (const std::string& payload : payloads) Dispatch(payload);
  return alive;
}

void PostgresReplicaBus::Dispatch(std::string_view payload) {
  auto parsed = ParseJson(payload, kMessageLimits);
  if (!parsed.ok() || !parsed->is_object()) {
    metrics_.Increment(kDroppedTotal, {{"reason", "not_json_object"}});
    Log().Warn("dropped a replica message that is not a JSON object",
               {{"bytes", payload.size()}});
    return;
  }
  const json::object& message = parsed->as_object();
  const json::value* topic = message.if_contains("topic");
  const json::value* from = message.if_contains("from");
  if (topic == nullptr || !topic->is_string() || (from != nullptr && !from->is_string())) {
    metrics_.Increment(kDroppedTotal, {{"reason", "no_topic"}});
    Log().Warn("dropped a replica message without a string topic", {{"bytes", payload.size()}});
    return;
  }
  if (from != nullptr && from->as_string() == replica_id_) return;
  std::vector<Handler> handlers;
  {
    std::lock_guard lock(handlers_mutex_);
    for (const auto& [id, subscribed] : topic_handlers_) {
      if (subscribed.first == topic->as_string()) handlers.push_back(subscribed.second);
    }
  }
  if (handlers.empty()) {
    // Not labelled by topic: a topic nobody here knows may be anything anyone wrote.
    metrics_.Increment(kDroppedTotal, {{"reason", "unknown_topic"}});
    return;
  }
  metrics_.Increment(kReceivedTotal, {{"topic", std::string_view(topic->as_string())}});
  std::lock_guard dispatching(dispatch_mutex_);
  for (const Handler& handler : handlers) handler(message);
}

Status PostgresReplicaBus::Publish(std::string_view topic, const json::object& fields) {
  json::object message = fields;
  message["topic"] = topic;
  message["from"] = replica_id_;
  const std::string payload = ToJson(message);
  if (payload.size() > kMaxReplicaMessageBytes) {
    return InvalidArgumentError("a replica message of " + std::to_string(payload.size()) +
                                " bytes is over the " + std::to_string(kMaxReplicaMessageBytes) +
                                "-byte limit of a notification; keep its body in a table and "
                                "send the row's id");
  }
  {
    std::lock_guard lock(conn_mutex_);
    if (conn_ == nullptr) {
      return UnavailableError("the replica bus is reconnecting to PostgreSQL");
    }
    const char* values[] = {payload.c_str()};
    PGresult* result = PQexecParams(conn_.get(), "SELECT pg_notify('uplink_replicas', $1)", 1,
                                    nullptr, values, nullptr, nullptr, 0);
    const bool sent = PQresultStatus(result) == PGRES_TUPLES_OK;
    PQclear(result);
    if (!sent) {
      Wake();  // the thread finds the connection's state and reconnects if it was lost
      return UnavailableError("sending on the replica bus: " +
                              sql::OneLinePostgresMessage(PQerrorMessage(conn_.get())));
    }
  }
  metrics_.Increment(kSentTotal, {{"topic", topic}});
  // The reply may have brought notifications with it, which the socket will not signal again.
  Wake();
  return Status::Ok();
}

ReplicaBus::Subscription PostgresReplicaBus::Subscribe(std::string topic, Handler handler) {
  std::lock_guard lock(handlers_mutex_);
  std::uint64_t id = next_id_++;
  topic_handlers_.emplace(id, std::pair{std::move(topic), std::move(handler)});
  return Subscription(this, id);
}

ReplicaBus::Subscription PostgresReplicaBus::OnResync(std::function<void()> handler) {
  std::lock_guard lock(handlers_mutex_);
  std::uint64_t id = next_id_++;
  resync_handlers_.emplace(id, std::move(handler));
  return Subscription(this, id);
}

void PostgresReplicaBus::Unsubscribe(std::uint64_t id) {
  {
    std::lock_guard lock(handlers_mutex_);
    topic_handlers_.erase(id);
    resync_handlers_.erase(id);
  }
  // A handler already copied out may be running: wait it out (never call this from one).
  std::lock_guard dispatching(dispatch_mutex_);
}

Status PostgresReplicaBus::Health() const {
  std::lock_guard lock(conn_mutex_);
  if (conn_ != nullptr) return Status::Ok();
  return UnavailableError(
      "the replica bus lost its PostgreSQL connection at " +
      (lost_since_ ? FormatRfc3339(*lost_since_) : std::string("start")) +
      " and is reconnecting; until it does, other replicas' revocations may not be seen");
}

void PostgresReplicaBus::RenderMetrics(std::string& out) const { metrics_.RenderTextTo(out); }

void PostgresReplicaBus::DropConnectionForTest() {
  std::lock_guard lock(conn_mutex_);
  if (conn_ != nullptr) ::shutdown(PQsocket(conn_.get()), SHUT_RDWR);
  Wake();
}

}  // namespace uplink::console
