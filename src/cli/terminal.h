// Asking a person: passwords and handover codes without echo, yes/no questions.
//
// Questions go to the controlling terminal (/dev/tty), not to stdin and stdout, so that
// `uplink ... > file` still asks, and so that a script without a terminal is never stuck at
// a prompt: commands check Available() and fall back to a flag (--password-stdin) or a
// usage error. Tests substitute a scripted Terminal.
#pragma once

#include <istream>
#include <memory>
#include <string>
#include <string_view>

#include "common/secret.h"
#include "common/status.h"

namespace uplink::cli {

class Terminal {
 public:
  virtual ~Terminal() = default;
  // True when there is a terminal to ask.
  virtual bool Available() = 0;
  // Shows `prompt` and reads one line without echo. FailedPrecondition without a terminal,
  // InvalidArgument if the input ends (Ctrl-D) before a line.
  virtual Result<Secret> ReadSecret(std::string_view prompt) = 0;
  // Shows `prompt` and reads one line with echo.
  virtual Result<std::string> ReadLine(std::string_view prompt) = 0;
  // Shows `text` (a QR code to scan) to the person at the terminal. FailedPrecondition without
  // a terminal.
  virtual Status Show(std::string_view text) = 0;
};

// The terminal at `device` (normally "/dev/tty"), opened when first needed. Echo is turned
// off only while a secret is read, and turned back on if a signal ends the process first.
std::unique_ptr<Terminal> OpenTerminal(std::string device = "/dev/tty");

// Reads one line of at most `max_bytes` from `in`, without its line ending. InvalidArgument
// when the input ends before any byte or the line is longer. `what` names the input in errors
// ("the password on stdin").
Result<std::string> ReadLineFrom(std::istream& in, std::string_view what, size_t max_bytes = 4096);

}  // namespace uplink::cli
