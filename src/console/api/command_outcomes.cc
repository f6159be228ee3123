#include "console/api/command_outcomes.h"

#include "common/json.h"
#include "console/api/approvals.h"

namespace uplink::console {
namespace {

constexpr const char* kKubectlCommandsTotal = "uplink_console_kubectl_commands_total";

}  // namespace

CommandOutcomes::CommandOutcomes(const ConsoleOptions& options, metrics::Registry& metrics)
    : options_(options), metrics_(metrics) {
  metrics_.DeclareCounter(kKubectlCommandsTotal,
                          "kubectl commands from users, by how they ended (docs/api.md, "
                          "\"kubectl\").");
}

void CommandOutcomes::Count(std::string_view outcome) {
  metrics_.Increment(kKubectlCommandsTotal, {{"outcome", outcome}});
}

CommandOutcome CommandOutcomes::OutcomeOf(CommandEnd& end) const {
  CommandOutcome outcome;
  switch (end.kind) {
    case CommandEnd::Kind::kResult: {
      CommandResult& result = *end.result;
      if (result.error_code.empty()) {
        outcome.outcome = "completed";
        return outcome;
      }
      outcome.outcome = "agent_" + result.error_code;
      outcome.http_status = 502;
      outcome.error_code = outcome.outcome;
      outcome.message = result.error_message.empty()
                            ? "the agent could not run the command (" + result.error_code + ")"
                            : result.error_message;
      return outcome;
    }
    case CommandEnd::Kind::kNotPickedUp:
      outcome.outcome = "not_picked_up";
      outcome.http_status = 504;
      outcome.error_code = "agent_timeout";
      outcome.message =
          "no agent picked the command up within " +
          std::to_string(options_.command_timeout.count()) +
          " s; is the cluster role (uplink-agent cluster) running? The connection's page shows "
          "\"Waiting for agent\" until it polls. Its agent last asked for commands: " +
          (end.last_poll_at ? FormatRfc3339(*end.last_poll_at)
                            : std::string("not since the console started"));
      return outcome;
    case CommandEnd::Kind::kNoResult:
      outcome.outcome = "no_result";
      outcome.http_status = 504;
      outcome.error_code = "agent_timeout";
      outcome.message =
          "the agent took the command at " + FormatRfc3339(end.taken_at.value_or(WallTime{})) +
          " and returned nothing within " + std::to_string(options_.command_timeout.count()) +
          " s; the result, if it comes, is discarded. Check the cluster role's log";
      return outcome;
    case CommandEnd::Kind::kShutdown:
      outcome.outcome = "shutdown";
      outcome.http_status = 503;
      outcome.error_code = "unavailable";
      outcome.message = "the console is shutting down; run the command again once it is back";
      return outcome;
  }
  return outcome;
}

AuditEvent CommandOutcomes::EndedEvent(AuditEvent event, const std::string& command_id,
                                       const std::vector<std::string>& argv, const CommandEnd& end,
                                       const CommandOutcome& outcome) {
  json::object detail{{"command_id", command_id}, {"argv", ArgvJson(argv)}};
  if (end.result) detail["duration_ms"] = end.result->duration_ms;
  if (outcome.outcome == "completed") {
    detail["exit_code"] = end.result->exit_code;
  } else {
    detail["error"] = end.result ? end.result->error_code : outcome.outcome;
  }
  event.detail = ToJson(detail);
  if (end.result && end.result->error_code == "refused") event.outcome = "refused";
  Count(outcome.outcome);
  log_.Info("kubectl command ended", {{"connection_id", event.target_id},
                                      {"command_id", command_id},
                                      {"outcome", outcome.outcome}});
  return event;
}

}  // namespace uplink::console
