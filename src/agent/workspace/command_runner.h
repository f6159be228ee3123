// Runs a console command inside a workspace through the exec API (kube::KubeClient::Exec), so
// that it runs at most once however often it is delivered: a small POSIX shell wrapper makes a
// marker directory named after the command id in the workspace's scratch volume with mkdir
// (atomic), runs the code detached in a process group of its own with its output capped in a
// file, kills the whole group at the timeout, and writes the result beside it. A second
// delivery (the console hands a command out until its final output arrives; the controller
// may have restarted) finds the marker, runs nothing, and streams the same output and result.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kube/client.h"
#include "protocol/workspace.h"

namespace uplink::agent::workspace {

using protocol::WorkspaceCommand;

struct CommandOutcome {
  std::string state;  // exited, timeout or failed
  std::optional<int> exit_code;
  std::string message;  // for failed: why
};

// The exec argv that runs `command` (its code goes on stdin, read to its exact length).
std::vector<std::string> CommandArgv(const WorkspaceCommand& command);

// What the wrapper reported on stderr ("uplink-result: exit N" or "uplink-result: timeout"),
// else a failure quoting what it wrote, and what the exec Status said.
CommandOutcome ParseCommandOutcome(std::string_view stderr_text, std::string_view status_json);

// The exec sessions under way, so that shutdown can end them at once (their commands go on
// running in the workspace; a later delivery re-attaches).
class ExecSessions {
 public:
  // False when the registry was aborted already: the session must not start.
  bool Add(net::WebSocket* socket);
  void Remove(net::WebSocket* socket);
  void AbortAll();

 private:
  std::mutex mutex_;
  std::set<net::WebSocket*> sockets_;
  bool aborted_ = false;
};

// Receives output as it arrives (stdout and stderr interleaved as the command wrote them).
using OutputSink = std::function<void(std::string_view chunk)>;

struct ExecResult {
  std::string stderr_text;  // at most 64 KiB
  std::string status_json;  // the final Status (channel 3)
};

// Runs `argv` in `container` of `pod` through the exec API to its end: `stdin_data` goes to
// its standard input, which then ends (so a reader can read it to its exact length), stdout
// goes to `sink`. Errors are for what kept the exec from happening or finishing.
Result<ExecResult> RunExec(kube::KubeClient& kube, std::string_view ns, std::string_view pod,
                           std::string_view container, const std::vector<std::string>& argv,
                           std::string_view stdin_data, const OutputSink& sink,
                           ExecSessions& sessions);

// Writes `data` to an exec session's standard input in messages within the server's frame
// limit; `end` then closes it (v5.channel.k8s.io only; v4 has no such signal).
Status WriteExecStdin(net::WebSocket& socket, std::string_view data, bool end);

// The exit code an exec session's final Status carries (Success: 0), if it names one.
std::optional<int> ExecExitCode(std::string_view status_json);

// Runs (or re-attaches to) `command` in `container` of `pod`. Errors are for what kept the
// exec from happening at all (pod gone, API refusal, a session cut): the caller may try again,
// and the marker keeps a retry from running anything twice.
Result<CommandOutcome> RunCommandInPod(kube::KubeClient& kube, std::string_view ns,
                                       std::string_view pod, std::string_view container,
                                       const WorkspaceCommand& command, const OutputSink& sink,
                                       ExecSessions& sessions);

}  // namespace uplink::agent::workspace
