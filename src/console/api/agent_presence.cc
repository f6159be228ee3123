#include "console/api/agent_presence.h"

#include <algorithm>

#include "common/thread_name.h"

namespace uplink::console {

AgentPresence::~AgentPresence() {
  {
    std::lock_guard lock(flusher_mutex_);
    stopping_ = true;
  }
  flusher_wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  if (flush_store_ != nullptr) {
    // A clean shutdown loses no call.
    if (Status flushed = Flush(*flush_store_); !flushed.ok()) {
      log_.Warn("recording the last agent calls at shutdown failed", {{"error", flushed}});
    }
  }
}

AgentPresence::ConnectionEntry& AgentPresence::EntryLocked(std::string_view connection_id,
                                                           WallTime at) {
  auto found = connections_.find(connection_id);
  if (found == connections_.end()) {
    found = connections_.emplace(std::string(connection_id), ConnectionEntry{at}).first;
  }
  ConnectionEntry& entry = found->second;
  entry.last_seen = std::max(entry.last_seen, at);
  entry.dirty = true;
  return entry;
}

void AgentPresence::Seen(std::string_view connection_id, WallTime at) {
  std::lock_guard lock(mutex_);
  EntryLocked(connection_id, at);
}

void AgentPresence::Seen(std::string_view connection_id, const AgentIdentity& agent,
                         WallTime at) {
  std::lock_guard lock(mutex_);
  ConnectionEntry& entry = EntryLocked(connection_id, at);
  AgentKey key(agent.role, agent.instance);
  auto found = entry.pending_agents.find(key);
  if (found == entry.pending_agents.end()) {
    if (pending_agents_ >= kMaxPendingAgents) return;
    ++pending_agents_;
    AgentSeen seen{key.first, key.second, std::string(agent.version), at};
    entry.pending_agents.emplace(std::move(key), std::move(seen));
    return;
  }
  if (at >= found->second.last_seen_at) {
    found->second.last_seen_at = at;
    found->second.version = agent.version;
  }
}

std::optional<WallTime> AgentPresence::LastSeen(std::string_view connection_id) const {
  std::lock_guard lock(mutex_);
  auto found = connections_.find(connection_id);
  if (found == connections_.end()) return std::nullopt;
  return found->second.last_seen;
}

void AgentPresence::Overlay(Connection& connection) const {
  RaiseLastSeen(connection.id, connection.last_seen_at);
}

void AgentPresence::Overlay(ConnectionLifecycle& lifecycle) const {
  RaiseLastSeen(lifecycle.id, lifecycle.last_seen_at);
}

void AgentPresence::RaiseLastSeen(std::string_view connection_id,
                                  std::optional<WallTime>& last_seen_at) const {
  std::optional<WallTime> seen = LastSeen(connection_id);
  if (seen && (!last_seen_at || *seen > *last_seen_at)) last_seen_at = seen;
}

void AgentPresence::Overlay(std::string_view connection_id, std::vector<AgentSeen>& agents,
                            size_t limit) const {
  {
    std::lock_guard lock(mutex_);
    auto found = connections_.find(connection_id);
    if (found == connections_.end() || found->second.pending_agents.empty()) return;
    for (const auto& key_and_agent : found->second.pending_agents) {
      const AgentSeen& pending = key_and_agent.second;
      auto stored = std::find_if(agents.begin(), agents.end(), [&](const AgentSeen& agent) {
        return agent.role == pending.role && agent.instance == pending.instance;
      });
      if (stored == agents.end()) {
        agents.push_back(pending);
      } else if (pending.last_seen_at >= stored->last_seen_at) {
        *stored = pending;
      }
    }
  }
  std::stable_sort(agents.begin(), agents.end(), [](const AgentSeen& a, const AgentSeen& b) {
    return a.last_seen_at > b.last_seen_at;
  });
  if (agents.size() > limit) agents.resize(limit);
}

PresenceUpdate AgentPresence::TakeChanges() {
  PresenceUpdate update;
  std::lock_guard lock(mutex_);
  for (auto& [id, entry] : connections_) {
    if (entry.dirty) update.connections.emplace_back(id, entry.last_seen);
    entry.dirty = false;
    for (auto& [key, agent] : entry.pending_agents) update.agents.emplace_back(id, agent);
    entry.pending_agents.clear();
  }
  pending_agents_ = 0;
  return update;
}

namespace {

// A flush's rows are numbered as one list: its connections, then its agents.
size_t RowCount(const PresenceUpdate& update) {
  return update.connections.size() + update.agents.size();
}

PresenceUpdate Rows(const PresenceUpdate& update, size_t begin, size_t end) {
  const size_t connections = update.connections.size();
  PresenceUpdate rows;
  if (begin < connections) {
    rows.connections.assign(update.connections.begin() + begin,
                            update.connections.begin() + std::min(end, connections));
  }
  if (end > connections) {
    rows.agents.assign(update.agents.begin() + (std::max(begin, connections) - connections),
                       update.agents.begin() + (end - connections));
  }
  return rows;
}

// Writes rows of one flush; when the store refuses some, finds the ones it refuses alone.
class PresenceWriter {
 public:
  PresenceWriter(ConnectionStore& store, const PresenceUpdate& update)
      : store_(store), update_(update) {}

  // Writes rows [begin, end). A part the store refuses (for a reason other than being away or
  // busy) is halved, and the halves written, down to the single rows it refuses, which land in
  // refused(): a healthy part costs one statement, one bad row about twice log2(rows) more.
  // Returns the first Unavailable failure, with unwritten_from() the first row not tried.
  Status Write(size_t begin, size_t end) {
    Status status = store_.RecordPresence(Rows(update_, begin, end));
    if (status.ok()) {
      stored_ += end - begin;
      return status;
    }
    if (status.code() == StatusCode::kUnavailable) {
      unwritten_from_ = begin;
      return status;
    }
    if (end - begin == 1) {
      refused_.emplace_back(begin, std::move(status));
      return Status::Ok();
    }
    const size_t middle = begin + (end - begin) / 2;
    UPLINK_RETURN_IF_ERROR(Write(begin, middle));
    return Write(middle, end);
  }

  size_t stored() const { return stored_; }
  size_t unwritten_from() const { return unwritten_from_; }
  const std::vector<std::pair<size_t, Status>>& refused() const { return refused_; }

 private:
  ConnectionStore& store_;
  const PresenceUpdate& update_;
  size_t stored_ = 0;
  size_t unwritten_from_ = 0;
  std::vector<std::pair<size_t, Status>> refused_;  // row, why
};

constexpr const char* kPresenceRowsDroppedTotal = "uplink_console_presence_rows_dropped_total";

}  // namespace

AgentPresence::AgentPresence(metrics::Registry& metrics) : metrics_(metrics) {
  metrics_.DeclareCounter(kPresenceRowsDroppedTotal,
                          "Agent calls (connection or agent rows) whose presence the store "
                          "refused for good, so that they were not recorded.");
}

Status AgentPresence::Flush(ConnectionStore& store) {
  const PresenceUpdate update = TakeChanges();
  const size_t rows = RowCount(update);
  // Written in transactions of kFlushRows rows, so that uploads wait for one of them at most:
  // with 10,000 agents a flush is 40,000 rows, and as one transaction it held the store for
  // a second or more every interval.
  PresenceWriter writer(store, update);
  Status failed;
  size_t unwritten_from = rows;
  for (size_t at = 0; at < rows && failed.ok(); at += kFlushRows) {
    const size_t end = std::min(at + kFlushRows, rows);
    failed = writer.Write(at, end);
    if (!failed.ok()) {
      unwritten_from = writer.unwritten_from();
    } else if (writer.stored() == 0 && !writer.refused().empty()) {
      // Not one row taken: the store itself is failing (a full disk, say), not a row. Stop
      // before halving every part.
      failed = writer.refused().front().second;
      unwritten_from = end;
    }
  }
  std::vector<size_t> kept;
  for (const auto& [row, refusal] : writer.refused()) {
    if (writer.stored() == 0) {
      kept.push_back(row);
    } else {
      Drop(update, row, refusal);
    }
  }
  Keep(update, unwritten_from, kept);
  return failed;
}

void AgentPresence::Keep(const PresenceUpdate& update, size_t first,
                         const std::vector<size_t>& rows) {
  auto keep = [&](size_t row) {
    if (row < update.connections.size()) {
      Seen(update.connections[row].first, update.connections[row].second);
      return;
    }
    const auto& [id, agent] = update.agents[row - update.connections.size()];
    Seen(id, AgentIdentity{agent.role, agent.instance, agent.version}, agent.last_seen_at);
  };
  for (size_t row : rows) keep(row);
  for (size_t row = first; row < RowCount(update); ++row) keep(row);
}

void AgentPresence::Drop(const PresenceUpdate& update, size_t row, const Status& refusal) {
  metrics_.Increment(kPresenceRowsDroppedTotal);
  constexpr std::string_view kDropped = "presence row refused by the store; dropped";
  if (row < update.connections.size()) {
    log_.Warn(kDropped, {{"connection_id", update.connections[row].first}, {"error", refusal}});
    return;
  }
  const auto& [id, agent] = update.agents[row - update.connections.size()];
  log_.Warn(kDropped, {{"connection_id", id}, {"role", agent.role}, {"error", refusal}});
}

void AgentPresence::StartFlusher(ConnectionStore& store, std::chrono::milliseconds interval) {
  std::lock_guard lock(flusher_mutex_);
  if (flusher_.joinable() || stopping_) return;
  flush_store_ = &store;
  flusher_ = std::thread([this, &store, interval] {
    NameThisThread("presence-flush");
    FlusherLoop(store, interval);
  });
}

void AgentPresence::FlusherLoop(ConnectionStore& store, std::chrono::milliseconds interval) {
  std::unique_lock lock(flusher_mutex_);
  while (!flusher_wake_.wait_for(lock, interval, [this] { return stopping_; })) {
    lock.unlock();
    if (Status flushed = Flush(store); !flushed.ok()) {
      log_.Warn("recording agent calls failed; retrying at the next flush", {{"error", flushed}});
    }
    lock.lock();
  }
}

}  // namespace uplink::console
