// The pods/exec subresource over WebSocket: the request's options and the session, in
// Kubernetes' channel.k8s.io protocols. Each binary message starts with its channel: 0 stdin,
// 1 stdout, 2 stderr, 3 the final Status, 4 terminal resizes; v5.channel.k8s.io adds 255,
// the close signal ([255, 0] ends stdin), which v4.channel.k8s.io lacks.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kubesim/runtime.h"
#include "net/http.h"
#include "net/websocket.h"

namespace uplink::kubesim {

inline constexpr std::string_view kExecProtocolV5 = "v5.channel.k8s.io";
inline constexpr std::string_view kExecProtocolV4 = "v4.channel.k8s.io";

struct ExecRequest {
  std::vector<std::string> command;
  std::string container;
  bool stdin = false;
  bool stdout = false;
  bool stderr = false;
  bool tty = false;
};

// The query of an exec request (command repeated, container, stdin, stdout, stderr, tty);
// InvalidArgument with the API server's message when it cannot run.
Result<ExecRequest> ParseExecRequest(const net::Request& request);

// Runs `command` (or reports why it cannot run) over `socket` until the process exits, then
// writes its Status on channel 3 (Success, or Failure with reason NonZeroExitCode and the exit
// code as cause ExitCode) and closes the connection. A client that goes away leaves the
// process to get SIGPIPE on its next write, as a container runtime does.
void ServeExec(std::unique_ptr<net::WebSocket> socket, const ExecRequest& request,
               const Result<ExecCommand>& command);

}  // namespace uplink::kubesim
