// kubectl commands across replicas (docs/architecture.md, "Replicas"): the user's request may
// reach replica A while the agent's long poll is held by replica B. A announces each command
// on the replica bus; every replica holds a copy for its polls; whichever hands it out first
// claims it in the database (command_claims: one row per command, so exactly one poll gets
// it) and tells the others; a result posted to B goes to A, where the user waits, and A's
// end of a command (its result, or the give-up) drops the copies. An argv or result too large
// for a notification goes through command_bodies.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "common/time.h"
#include "common/log.h"
#include "console/commands/command_broker.h"
#include "console/replicas/replica_bus.h"
#include "console/store/sql/database.h"

namespace uplink::console {

// The claims and large bodies, on a connection of their own (a claim is one statement and
// needs none of the store's transactions, so it never waits behind the store's mutex).
class CommandClaims {
 public:
  // `db` has the schema (version 14 or later).
  explicit CommandClaims(std::unique_ptr<sql::Database> db) : db_(std::move(db)) {}

  // True when this call made the claim of `id`; claims older than an hour are forgotten
  // (every command has ended by then).
  Result<bool> Claim(const std::string& id, const std::string& replica, WallTime now);
  // kind: "argv" or "result".
  Status PutBody(const std::string& id, const std::string& kind, const std::string& body,
                 WallTime now);
  Result<std::optional<std::string>> ReadBody(const std::string& id, const std::string& kind);
  // Reads and deletes.
  Result<std::optional<std::string>> TakeBody(const std::string& id, const std::string& kind);
  Status DeleteBodies(const std::string& id);

 private:
  std::mutex mutex_;
  std::unique_ptr<sql::Database> db_;
};

class ReplicaCommands final : public CommandPeers {
 public:
  // Joins `broker` to the other replicas; all three must outlive this object, and Leave()
  // must be called before the broker is destroyed.
  ReplicaCommands(ReplicaBus& bus, CommandClaims& claims, CommandBroker& broker,
                  const Clock& clock);
  // Stops taking messages (waits out one being handled) and detaches from nothing else: the
  // broker may still call this object until it is destroyed.
  void Leave();

  Result<bool> Claim(const std::string& id) override;
  void Queued(const std::string& connection_id, const std::string& id,
              const std::vector<std::string>& argv) override;
  void Taken(const std::string& id) override;
  void Ended(const std::string& connection_id, const std::string& id, bool stored) override;
  void ResultForOwner(const std::string& owner, const std::string& connection_id,
                      const std::string& id, const CommandResult& result) override;

 private:
  void OnQueued(const json::object& message);
  void OnResult(const json::object& message);
  // Sends `fields`; when over a notification's size, `body` goes to command_bodies as
  // `kind` and the message says so with "<kind>_row": true instead of `kind`.
  void PublishWithBody(std::string_view topic, json::object fields, const std::string& id,
                       const std::string& kind, json::value body);

  ReplicaBus& bus_;
  CommandClaims& claims_;
  CommandBroker& broker_;
  const Clock& clock_;
  std::vector<ReplicaBus::Subscription> subscriptions_;
  log::Logger log_{"console.replicas"};
};

}  // namespace uplink::console
