#include "cli/ssh_proxy.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <thread>


namespace uplink::cli {
namespace {

// Writes all of `data`; false when the reader has gone (EPIPE) or another error.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

SshPumpResult PumpSshChannel(net::WebSocket& channel, int in_fd, int out_fd,
                             size_t max_message_bytes) {
  SshPumpResult result;
  std::mutex mutex;  // guards `result` between the two directions
  bool ended = false;
  auto finish = [&](SshPumpResult::End end, Status error = Status::Ok()) {
    std::lock_guard lock(mutex);
    if (ended) return false;
    ended = true;
    result.end = end;
    result.error = std::move(error);
    return true;
  };

  // Wakes the input direction from poll() once the output direction has ended.
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    result.error = ErrnoError("pipe", errno);
    return result;
  }
  std::thread input([&] {
    std::string buffer(max_message_bytes, '\0');
    for (;;) {
      pollfd fds[2] = {{in_fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        if (finish(SshPumpResult::End::kFailed, ErrnoError("poll stdin", errno))) channel.Abort();
        return;
      }
      if (fds[1].revents != 0) return;  // the other direction ended
      ssize_t n = ::read(in_fd, buffer.data(), buffer.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        // ssh closed its end: the session is over. The console's close answer ends the
        // output direction.
        if (finish(n == 0 ? SshPumpResult::End::kInputClosed : SshPumpResult::End::kFailed,
                   n == 0 ? Status::Ok() : ErrnoError("read stdin", errno))) {
          if (!channel.Close(net::kCloseNormal).ok()) channel.Abort();
        }
        return;
      }
      Status written = channel.Write(std::string_view(buffer.data(), static_cast<size_t>(n)));
      if (!written.ok()) return;  // the connection ended; the output direction says how
    }
  });

  for (;;) {
    Result<net::WebSocketMessage> message = channel.Read();
    if (!message.ok()) {
      // After our own close this is the end of the closing handshake, not a failure.
      if (finish(SshPumpResult::End::kFailed, message.status())) channel.Abort();
      break;
    }
    if (message->type == net::WebSocketMessage::Type::kClose) {
      std::lock_guard lock(mutex);
      if (!ended) {
        ended = true;
        result.end = SshPumpResult::End::kPeerClosed;
      }
      result.close_code = message->close_code;
      result.reason = std::move(message->data);
      break;
    }
    if (message->type == net::WebSocketMessage::Type::kText) {
      // The client channel carries binary messages only.
      if (finish(SshPumpResult::End::kFailed,
                 InvalidArgumentError("the console sent a text message on the SSH channel"))) {
        (void)channel.Close(net::kCloseProtocolError, "binary messages only");
      }
      continue;  // wait for the close answer
    }
    if (!WriteAll(out_fd, message->data)) {
      if (finish(SshPumpResult::End::kOutputClosed)) {
        if (!channel.Close(net::kCloseNormal).ok()) channel.Abort();
      }
    }
  }
  const char byte = 0;
  (void)!::write(wake[1], &byte, 1);
  input.join();
  ::close(wake[0]);
  ::close(wake[1]);
  return result;
}

}  // namespace uplink::cli
