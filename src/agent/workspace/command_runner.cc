#include "agent/workspace/command_runner.h"

#include "common/files.h"
#include "common/json.h"
#include "common/text.h"

namespace uplink::agent::workspace {
namespace {

constexpr std::string_view kResultPrefix = "uplink-result: ";
constexpr size_t kMaxStderrBytes = 64 * 1024;

// $1 id, $2 kind, $3 timeout in seconds, $4 bytes of output kept, $5 bytes of code on stdin.
// POSIX sh and coreutils only (the workspace image is Debian minbase); the output is capped by
// dd, which writes what each read returns (head -c holds it until its count is reached). The
// marker directory
// lives in the working directory, the scratch volume: it outlasts the controller, not the pod.
constexpr std::string_view kWrapper = R"SH(set -u
id=$1 kind=$2 limit=$3 keep=$4 size=$5
d=$PWD/.uplink/commands/$id
mkdir -p "$PWD/.uplink/commands" || { echo "cannot create $PWD/.uplink/commands" >&2; exit 90; }
if mkdir "$d" 2>/dev/null; then
  head -c "$size" > "$d/code" || exit 91
  case "$kind" in python) run=python3 ;; *) run=$(command -v bash || echo sh) ;; esac
  (
    exec </dev/null >/dev/null 2>&1
    HOME=$PWD; export HOME
    setsid sh -c '{ "$2" "$1/code" </dev/null 2>&1; echo $? > "$1/status"; } | { dd bs=65536 count="$3" iflag=count_bytes 2>/dev/null; cat >/dev/null; } > "$1/out"' \
      uplink-command "$d" "$run" "$keep" &
    child=$!
    ticks=0
    while :; do
      state=$(sed 's/.*) //; s/ .*//' "/proc/$child/stat" 2>/dev/null)
      [ -z "$state" ] || [ "$state" = Z ] && break
      if [ "$ticks" -ge $((limit * 5)) ]; then : > "$d/timedout"; kill -KILL "-$child"; break; fi
      sleep 0.2; ticks=$((ticks + 1))
    done
    wait "$child"
    if [ -e "$d/timedout" ]; then result=timeout
    elif [ -s "$d/status" ]; then result="exit $(cat "$d/status")"
    else result="exit 137"; fi
    echo "$result" > "$d/result.tmp" && mv "$d/result.tmp" "$d/result"
  ) &
else
  head -c "$size" > /dev/null
fi
sent=0
while :; do
  finished=0; [ -e "$d/result" ] && finished=1
  have=$({ wc -c < "$d/out"; } 2>/dev/null || echo 0)
  if [ "$have" -gt "$sent" ]; then
    tail -c +$((sent + 1)) "$d/out" | head -c $((have - sent)); sent=$have
  fi
  [ "$finished" = 1 ] && break
  sleep 0.2
done
echo "uplink-result: $(cat "$d/result")" >&2
)SH";

}  // namespace

bool ExecSessions::Add(net::WebSocket* socket) {
  std::lock_guard lock(mutex_);
  if (aborted_) return false;
  sockets_.insert(socket);
  return true;
}

void ExecSessions::Remove(net::WebSocket* socket) {
  std::lock_guard lock(mutex_);
  sockets_.erase(socket);
}

void ExecSessions::AbortAll() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  for (net::WebSocket* socket : sockets_) socket->Abort();
}

std::vector<std::string> CommandArgv(const WorkspaceCommand& command) {
  return {"sh",
          "-c",
          std::string(kWrapper),
          "uplink-command",
          command.id,
          command.kind == "python" ? "python" : "shell",
          std::to_string(std::max<std::int64_t>(command.timeout_seconds, 1)),
          // One byte more than is sent: the controller sees that the output was cut.
          std::to_string(command.output_cap_bytes + 1),
          std::to_string(command.code.size())};
}

CommandOutcome ParseCommandOutcome(std::string_view stderr_text, std::string_view status_json) {
  size_t at = stderr_text.rfind(kResultPrefix);
  if (at != std::string_view::npos && (at == 0 || stderr_text[at - 1] == '\n')) {
    std::string_view result = TrimWhitespace(stderr_text.substr(at + kResultPrefix.size()));
    if (result == "timeout") return CommandOutcome{.state = "timeout"};
    if (result.starts_with("exit ")) {
      if (auto code = ParseDecimalInt(result.substr(5), 0, 255)) {
        return CommandOutcome{.state = "exited", .exit_code = static_cast<int>(*code)};
      }
    }
  }
  std::string message = "the command could not be run in the workspace";
  std::string detail = OneLineExcerpt(TrimWhitespace(stderr_text), 300);
  if (detail.empty()) {
    auto status = ParseJson(status_json, JsonLimits{.max_bytes = 64 * 1024, .max_depth = 8});
    if (status.ok() && status->is_object()) detail = OneLineExcerpt(StringAt(status->get_object(), "message"), 300);
  }
  if (!detail.empty()) message += ": " + detail;
  return CommandOutcome{.state = "failed", .message = std::move(message)};
}

Status WriteExecStdin(net::WebSocket& socket, std::string_view data, bool end) {
  // In messages within the server's frame limit, then (v5 only) the end of stdin.
  constexpr size_t kStdinChunk = 32 * 1024;
  for (size_t offset = 0; offset < data.size(); offset += kStdinChunk) {
    std::string message(1, '\0');
    message.append(data.substr(offset, kStdinChunk));
    UPLINK_RETURN_IF_ERROR(socket.Write(message));
  }
  if (end && socket.subprotocol() == "v5.channel.k8s.io") {
    UPLINK_RETURN_IF_ERROR(socket.Write(std::string("\xff\0", 2)));
  }
  return Status::Ok();
}

std::optional<int> ExecExitCode(std::string_view status_json) {
  auto status = ParseJson(status_json, JsonLimits{.max_bytes = 64 * 1024, .max_depth = 8});
  if (!status.ok() || !status->is_object()) return std::nullopt;
  const json::object& object = status->get_object();
  if (StringAt(object, "status") == "Success") return 0;
  if (StringAt(object, "reason") != "NonZeroExitCode") return std::nullopt;
  const json::value* causes = ObjectAt(object, "details").if_contains("causes");
  if (causes == nullptr || !causes->is_array()) return std::nullopt;
  for (const json::value& cause : causes->get_array()) {
    if (!cause.is_object() || StringAt(cause.get_object(), "reason") != "ExitCode") continue;
    if (auto code = ParseDecimalInt(StringAt(cause.get_object(), "message"), 0, 255)) {
      return static_cast<int>(*code);
    }
  }
  return std::nullopt;
}

Result<ExecResult> RunExec(kube::KubeClient& kube, std::string_view ns, std::string_view pod,
                           std::string_view container, const std::vector<std::string>& argv,
                           std::string_view stdin_data, const OutputSink& sink,
                           ExecSessions& sessions) {
  net::WebSocketOptions options;
  options.max_message_bytes = 1 << 20;
  options.idle_timeout = std::chrono::seconds(60);
  UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<net::WebSocket> socket,
                          kube.Exec(ns, pod, container, argv, true, options));
  if (!sessions.Add(socket.get())) return UnavailableError("the controller is stopping");
  struct Unregister {
    ExecSessions& sessions;
    net::WebSocket* socket;
    ~Unregister() { sessions.Remove(socket); }
  } unregister{sessions, socket.get()};
  UPLINK_RETURN_IF_ERROR(WriteExecStdin(*socket, stdin_data, true));

  ExecResult result;
  while (true) {
    auto message = socket->Read();
    if (!message.ok()) {
      if (!result.status_json.empty()) break;  // the Status came; the close may be lost
      return message.status().WithContext("exec session in " + std::string(pod));
    }
    if (message->type == net::WebSocketMessage::Type::kClose) break;
    if (message->data.empty()) continue;
    const auto channel = static_cast<unsigned char>(message->data[0]);
    std::string_view payload = std::string_view(message->data).substr(1);
    if (channel == 1) {
      if (!payload.empty()) sink(payload);
    } else if (channel == 2) {
      if (result.stderr_text.size() < kMaxStderrBytes) {
        result.stderr_text.append(payload.substr(0, kMaxStderrBytes));
      }
    } else if (channel == 3) {
      result.status_json.append(payload);
    }
  }
  if (result.status_json.empty()) {
    return UnavailableError("exec session in " + std::string(pod) + " ended without a status");
  }
  return result;
}

Result<CommandOutcome> RunCommandInPod(kube::KubeClient& kube, std::string_view ns,
                                       std::string_view pod, std::string_view container,
                                       const WorkspaceCommand& command, const OutputSink& sink,
                                       ExecSessions& sessions) {
  UPLINK_ASSIGN_OR_RETURN(ExecResult ran, RunExec(kube, ns, pod, container, CommandArgv(command),
                                                  command.code, sink, sessions));
  return ParseCommandOutcome(ran.stderr_text, ran.status_json);
}

}  // namespace uplink::agent::workspace
