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
  std::optional<WallTime> seen = LastSeen(connection.id);
  if (seen && (!connection.last_seen_at || *seen > *connection.last_seen_at)) {
    connection.last_seen_at = seen;
  }
}

void AgentPresence::Overlay(std::string_view connection_id, std::vector<AgentSeen>& agents,
                            size_t limit) const {
  {
    std::lock_guard lock(mutex_);
    auto found = connections_.find(connection_id);
    if (found == connections_.end() || found->second.pending_agents.empty()) return;
    for (const auto& [key, pending] : found->second.pending_agents) {
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

Status AgentPresence::Flush(ConnectionStore& store) {
  PresenceUpdate update;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, entry] : connections_) {
      if (entry.dirty) update.connections.emplace_back(id, entry.last_seen);
      entry.dirty = false;
      for (auto& [key, agent] : entry.pending_agents) update.agents.emplace_back(id, agent);
      entry.pending_agents.clear();
    }
    pending_agents_ = 0;
  }
  // Written in transactions of kFlushRows rows, so that uploads wait for one of them at most:
  // with 10,000 agents a flush is 40,000 rows, and as one transaction it held the store for
  // a second or more every interval.
  size_t connection_at = 0;
  size_t agent_at = 0;
  while (connection_at < update.connections.size() || agent_at < update.agents.size()) {
    PresenceUpdate part;
    const size_t connections = std::min(kFlushRows, update.connections.size() - connection_at);
    const size_t agents = std::min(kFlushRows - connections, update.agents.size() - agent_at);
    part.connections.assign(update.connections.begin() + connection_at,
                            update.connections.begin() + connection_at + connections);
    part.agents.assign(update.agents.begin() + agent_at,
                       update.agents.begin() + agent_at + agents);
    if (Status recorded = store.RecordPresence(part); !recorded.ok()) {
      // This part and the rest are kept for the next flush: what was noted meanwhile is newer
      // or the same.
      for (size_t i = connection_at; i < update.connections.size(); ++i) {
        Seen(update.connections[i].first, update.connections[i].second);
      }
      for (size_t i = agent_at; i < update.agents.size(); ++i) {
        const auto& [id, agent] = update.agents[i];
        Seen(id, AgentIdentity{agent.role, agent.instance, agent.version}, agent.last_seen_at);
      }
      return recorded;
    }
    connection_at += connections;
    agent_at += agents;
  }
  return Status::Ok();
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
