// When each connection's agents last called the console, and which agents they are
// (docs/api.md, "Liveness"). Every accepted agent call is noted here, in memory: one lock and
// one hash lookup, no store write on the request path, which authenticates every agent call
// and is benchmarked (bench_auth). A flusher thread writes what changed every `interval`, in
// store transactions of a few hundred rows, so the store is at most that far behind for any
// connection;
// the API reads this object over the store, so what users see is exact while the console runs.
// A row the store refuses for good (not for being away or busy) is found, logged, counted and
// dropped, so that it cannot hold back every row after it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "console/store/connection_store.h"

namespace uplink::console {

// Who made an agent call, as far as the call says: its role ("inventory", "cluster", "node"),
// the pod or node it runs as, and its version.
struct AgentIdentity {
  std::string_view role;
  std::string_view instance;
  std::string_view version;
};

class AgentPresence {
 public:
  // Agents noted and not yet written beyond this many still count for their connection's
  // liveness; only their own rows wait for the next flush that has room.
  static constexpr size_t kMaxPendingAgents = 10'000;
  // Rows (connections and agents) a flush writes in one store transaction.
  static constexpr size_t kFlushRows = 256;

  // Declares its counter in `metrics`, which must outlive this object.
  explicit AgentPresence(metrics::Registry& metrics);
  AgentPresence(const AgentPresence&) = delete;
  AgentPresence& operator=(const AgentPresence&) = delete;
  // Stops the flusher, then writes what is left.
  ~AgentPresence();

  // An accepted call of the connection's agent at `at`.
  void Seen(std::string_view connection_id, WallTime at);
  // The same, by a known agent.
  void Seen(std::string_view connection_id, const AgentIdentity& agent, WallTime at);

  // The last call noted since this object was made, if any.
  std::optional<WallTime> LastSeen(std::string_view connection_id) const;
  // The connection's last_seen_at with the calls noted here that the store has not seen yet.
  void Overlay(Connection& connection) const;
  void Overlay(ConnectionLifecycle& lifecycle) const;
  // The connection's agents as read from the store (most recent first, at most `limit`) with
  // the sightings the store has not seen yet.
  void Overlay(std::string_view connection_id, std::vector<AgentSeen>& agents,
               size_t limit) const;

  // Writes what changed since the last flush. When the store is away or busy (Unavailable),
  // what was not written is kept for the next flush and the error returned. When it refuses a
  // part for another reason, the part is halved down to the rows it refuses on their own:
  // every other row is written, and those rows are logged, counted and dropped. Should the
  // store accept no row of the flush, the store, not a row, is failing: everything not
  // written is kept and the error returned.
  Status Flush(ConnectionStore& store);
  // Flushes into `store` every `interval` on a thread of its own until destruction, which
  // flushes once more. `store` must outlive this object.
  void StartFlusher(ConnectionStore& store, std::chrono::milliseconds interval);

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  using AgentKey = std::pair<std::string, std::string>;  // role, instance
  struct ConnectionEntry {
    WallTime last_seen;
    bool dirty = false;  // last_seen not written yet
    std::map<AgentKey, AgentSeen> pending_agents;
  };

  ConnectionEntry& EntryLocked(std::string_view connection_id, WallTime at);
  // `last_seen_at`, as the store has it, raised to the last call noted here.
  void RaiseLastSeen(std::string_view connection_id, std::optional<WallTime>& last_seen_at) const;
  // What changed since the last flush, marked clean.
  PresenceUpdate TakeChanges();
  // Notes again the rows of `update` from `first` on (connections first, then agents), and
  // those listed in `rows`: kept for the next flush, where what was noted meanwhile wins.
  void Keep(const PresenceUpdate& update, size_t first, const std::vector<size_t>& rows);
  // Logs and counts a row the store refused on its own, which is not written.
  void Drop(const PresenceUpdate& update, size_t row, const Status& refusal);
  void FlusherLoop(ConnectionStore& store, std::chrono::milliseconds interval);

  metrics::Registry& metrics_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, ConnectionEntry, StringHash, std::equal_to<>> connections_;
  size_t pending_agents_ = 0;

  std::mutex flusher_mutex_;  // guards stopping_
  std::condition_variable flusher_wake_;
  bool stopping_ = false;
  ConnectionStore* flush_store_ = nullptr;
  std::thread flusher_;
  log::Logger log_{"console.presence"};
};

}  // namespace uplink::console
