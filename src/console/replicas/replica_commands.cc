#include "console/replicas/replica_commands.h"

#include "common/json.h"
#include "protocol/agent_api.h"
#include "protocol/commands.h"

namespace uplink::console {
namespace {

constexpr std::chrono::hours kClaimKeep{1};

std::int64_t Millis(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// The statement's error, without its SQL or values.
Status SqlError(sql::Database& db, std::string_view doing) {
  return UnavailableError(std::string(doing) + ": " + db.LastMessage());
}

// Runs `statement` (bound already) to its end; resets it.
Status RunToEnd(sql::Database& db, sql::Statement& statement, std::string_view doing) {
  sql::Statement::StepResult step;
  while ((step = statement.Step()) == sql::Statement::StepResult::kRow) {
  }
  statement.Reset();
  return step == sql::Statement::StepResult::kDone ? Status::Ok() : SqlError(db, doing);
}

// Fields of a message from another replica, checked: a message is written by anyone with a
// connection to the database, so nothing in it is trusted to be well-formed.
bool ValidCommandFields(const json::object& message) {
  std::string connection_id = StringAt(message, "connection");
  return !connection_id.empty() && connection_id.size() <= 64 &&
         protocol::IsCommandId(StringAt(message, "id"));
}

std::optional<std::vector<std::string>> ArgvOf(const json::value& value) {
  if (!value.is_array() || value.as_array().size() > protocol::kMaxCommandArgs) return std::nullopt;
  std::vector<std::string> argv;
  for (const json::value& arg : value.as_array()) {
    if (!arg.is_string() || arg.as_string().size() > protocol::kMaxCommandArgBytes) {
      return std::nullopt;
    }
    argv.emplace_back(arg.as_string());
  }
  return argv;
}

}  // namespace

Result<bool> CommandClaims::Claim(const std::string& id, const std::string& replica, WallTime now) {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(sql::Statement * prune,
                          db_->Prepare("DELETE FROM command_claims WHERE claimed_at < ?"));
  prune->BindInt(1, Millis(now - kClaimKeep));
  UPLINK_RETURN_IF_ERROR(RunToEnd(*db_, *prune, "forgetting old command claims"));
  UPLINK_ASSIGN_OR_RETURN(
      sql::Statement * claim,
      db_->Prepare("INSERT INTO command_claims (id, replica, claimed_at) VALUES (?, ?, ?) "
                   "ON CONFLICT (id) DO NOTHING"));
  claim->BindText(1, id, false);
  claim->BindText(2, replica, false);
  claim->BindInt(3, Millis(now));
  if (claim->Step() != sql::Statement::StepResult::kDone) {
    claim->Reset();
    return SqlError(*db_, "claiming a command");
  }
  const bool made = claim->Changes() == 1;
  claim->Reset();
  return made;
}

Status CommandClaims::PutBody(const std::string& id, const std::string& kind,
                              const std::string& body, WallTime now) {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(sql::Statement * prune,
                          db_->Prepare("DELETE FROM command_bodies WHERE created_at < ?"));
  prune->BindInt(1, Millis(now - kClaimKeep));
  UPLINK_RETURN_IF_ERROR(RunToEnd(*db_, *prune, "forgetting old command bodies"));
  UPLINK_ASSIGN_OR_RETURN(
      sql::Statement * put,
      db_->Prepare("INSERT INTO command_bodies (command_id, kind, body, created_at) "
                   "VALUES (?, ?, ?, ?) ON CONFLICT (command_id, kind) DO NOTHING"));
  put->BindText(1, id, false);
  put->BindText(2, kind, false);
  put->BindText(3, body, false);
  put->BindInt(4, Millis(now));
  return RunToEnd(*db_, *put, "keeping a command's body");
}

Result<std::optional<std::string>> CommandClaims::ReadBody(const std::string& id,
                                                           const std::string& kind) {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(
      sql::Statement * read,
      db_->Prepare("SELECT body FROM command_bodies WHERE command_id = ? AND kind = ?"));
  read->BindText(1, id, false);
  read->BindText(2, kind, false);
  std::optional<std::string> body;
  sql::Statement::StepResult step = read->Step();
  if (step == sql::Statement::StepResult::kRow) body = std::string(read->Text(0));
  read->Reset();
  if (step == sql::Statement::StepResult::kError) return SqlError(*db_, "reading a command's body");
  return body;
}

Result<std::optional<std::string>> CommandClaims::TakeBody(const std::string& id,
                                                           const std::string& kind) {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(sql::Statement * take,
                          db_->Prepare("DELETE FROM command_bodies WHERE command_id = ? AND "
                                       "kind = ? RETURNING body"));
  take->BindText(1, id, false);
  take->BindText(2, kind, false);
  std::optional<std::string> body;
  sql::Statement::StepResult step = take->Step();
  if (step == sql::Statement::StepResult::kRow) body = std::string(take->Text(0));
  while (step == sql::Statement::StepResult::kRow) step = take->Step();
  take->Reset();
  if (step == sql::Statement::StepResult::kError) return SqlError(*db_, "taking a command's body");
  return body;
}

Status CommandClaims::DeleteBodies(const std::string& id) {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(sql::Statement * remove,
                          db_->Prepare("DELETE FROM command_bodies WHERE command_id = ?"));
  remove->BindText(1, id, false);
  return RunToEnd(*db_, *remove, "deleting a command's bodies");
}

ReplicaCommands::ReplicaCommands(ReplicaBus& bus, CommandClaims& claims, CommandBroker& broker,
                                 const Clock& clock)
    : bus_(bus), claims_(claims), broker_(broker), clock_(clock) {
  subscriptions_.push_back(
      bus_.Subscribe("command_queued", [this](const json::object& m) { OnQueued(m); }));
  subscriptions_.push_back(bus_.Subscribe("command_taken", [this](const json::object& m) {
    if (protocol::IsCommandId(StringAt(m, "id"))) broker_.TakenOnReplica(StringAt(m, "id"));
  }));
  subscriptions_.push_back(bus_.Subscribe("command_ended", [this](const json::object& m) {
    const json::value* stored = m.if_contains("stored");
    if (protocol::IsCommandId(StringAt(m, "id")) && stored != nullptr && stored->is_bool()) {
      broker_.EndedOnReplica(StringAt(m, "id"), stored->as_bool());
    }
  }));
  subscriptions_.push_back(
      bus_.Subscribe("command_result", [this](const json::object& m) { OnResult(m); }));
  broker_.SetPeers(this);
}

void ReplicaCommands::Leave() { subscriptions_.clear(); }

Result<bool> ReplicaCommands::Claim(const std::string& id) {
  auto claimed = claims_.Claim(id, bus_.replica_id(), clock_.Now());
  if (!claimed.ok()) log_.Warn("could not claim a command", {{"error", claimed.status()}});
  return claimed;
}

void ReplicaCommands::PublishWithBody(std::string_view topic, json::object fields,
                                      const std::string& id, const std::string& kind,
                                      json::value body) {
  json::object inline_fields = fields;
  inline_fields[kind] = body;
  Status sent = bus_.Publish(topic, inline_fields);
  if (sent.code() == StatusCode::kInvalidArgument) {  // too large for a notification
    sent = claims_.PutBody(id, kind, ToJson(body), clock_.Now());
    fields[kind + "_row"] = true;
    if (sent.ok()) sent = bus_.Publish(topic, fields);
  }
  if (!sent.ok()) {
    log_.Warn("could not tell the other replicas about a command",
              {{"topic", topic}, {"command_id", id}, {"error", sent}});
  }
}

void ReplicaCommands::Queued(const std::string& connection_id, const std::string& id,
                             const std::vector<std::string>& argv) {
  json::array args;
  for (const std::string& arg : argv) args.emplace_back(arg);
  PublishWithBody("command_queued", json::object{{"connection", connection_id}, {"id", id}}, id,
                  "argv", std::move(args));
}

void ReplicaCommands::Taken(const std::string& id) {
  if (Status sent = bus_.Publish("command_taken", json::object{{"id", id}}); !sent.ok()) {
    log_.Warn("could not tell the other replicas a command was taken",
              {{"command_id", id}, {"error", sent}});
  }
}

void ReplicaCommands::Ended(const std::string& connection_id, const std::string& id,
                            bool stored) {
  Status sent = bus_.Publish(
      "command_ended", json::object{{"connection", connection_id}, {"id", id}, {"stored", stored}});
  if (!sent.ok()) {
    log_.Warn("could not tell the other replicas a command ended",
              {{"command_id", id}, {"error", sent}});
  }
  // An argv row, or a result row whose notification was lost: the command is over.
  if (Status deleted = claims_.DeleteBodies(id); !deleted.ok()) {
    log_.Warn("could not delete a command's bodies", {{"command_id", id}, {"error", deleted}});
  }
}

void ReplicaCommands::ResultForOwner(const std::string& owner, const std::string& connection_id,
                                     const std::string& id, const CommandResult& result) {
  PublishWithBody("command_result",
                  json::object{{"connection", connection_id}, {"id", id}, {"owner", owner}}, id,
                  "result", protocol::EncodeCommandResult(result));
}

void ReplicaCommands::OnQueued(const json::object& message) {
  if (!ValidCommandFields(message)) return;
  const std::string id = StringAt(message, "id");
  std::optional<std::vector<std::string>> argv;
  if (const json::value* inline_argv = message.if_contains("argv")) {
    argv = ArgvOf(*inline_argv);
  } else if (message.contains("argv_row")) {
    auto row = claims_.ReadBody(id, "argv");
    if (row.ok() && *row) {
      auto parsed = ParseJson(**row);
      if (parsed.ok()) argv = ArgvOf(*parsed);
    }
  }
  if (!argv) {
    log_.Warn("dropped another replica's command without a usable argv", {{"command_id", id}});
    return;
  }
  broker_.AddFromReplica(StringAt(message, "from"), StringAt(message, "connection"), id,
                         std::move(*argv));
}

void ReplicaCommands::OnResult(const json::object& message) {
  if (!ValidCommandFields(message)) return;
  const std::string id = StringAt(message, "id");
  const std::string connection_id = StringAt(message, "connection");
  if (StringAt(message, "owner") != bus_.replica_id()) {
    broker_.EndedOnReplica(id, /*stored=*/true);  // another replica's command: drop the copy
    return;
  }
  Result<CommandResult> result = InvalidArgumentError("no result in the message");
  if (const json::value* inline_result = message.if_contains("result")) {
    result = protocol::DecodeCommandResult(*inline_result);
  } else if (message.contains("result_row")) {
    auto row = claims_.TakeBody(id, "result");
    if (!row.ok()) {
      result = row.status();
    } else if (*row) {
      auto parsed = ParseJson(**row, JsonLimits{.max_bytes = protocol::kMaxCommandResultBytes,
                                                .max_depth = protocol::kMaxCommandResultDepth});
      result = parsed.ok() ? protocol::DecodeCommandResult(*parsed) : parsed.status();
    }
  }
  if (!result.ok()) {
    log_.Warn("dropped another replica's result for a command",
              {{"command_id", id}, {"error", result.status()}});
    return;
  }
  broker_.ResultFromReplica(connection_id, id, std::move(*result));
}

}  // namespace uplink::console
