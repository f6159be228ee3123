// How a user's kubectl command ended, for its reply, its metric and its audit event: shared by
// the commands users run at once (kubectl_api.h) and those that waited for approval
// (approvals_api.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "common/metrics.h"
#include "console/api/console_options.h"
#include "console/commands/command_broker.h"
#include "console/store/store.h"

namespace uplink::console {

struct CommandOutcome {
  std::string outcome;  // the metric's label: completed, agent_timeout, not_picked_up, ...
  int http_status = 200;
  std::string error_code;  // the reply's, when http_status is not 200
  std::string message;
};

class CommandOutcomes {
 public:
  // Both must outlive this object.
  CommandOutcomes(const ConsoleOptions& options, metrics::Registry& metrics);

  CommandOutcome OutcomeOf(CommandEnd& end) const;
  // `event` (a kubectl.run) with the command's detail; counts the outcome and logs it.
  AuditEvent EndedEvent(AuditEvent event, const std::string& command_id,
                        const std::vector<std::string>& argv, const CommandEnd& end,
                        const CommandOutcome& outcome);
  // Counts a command that never ran: refused, sent to approval, or over its connection's
  // limit.
  void Count(std::string_view outcome);

 private:
  const ConsoleOptions& options_;
  metrics::Registry& metrics_;
  log::Logger log_{"console.api"};
};

}  // namespace uplink::console
