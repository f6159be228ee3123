// The `uplink` command's exit codes (docs/cli.md lists them for scripts) and how a Status
// becomes one. Every failure inside the CLI is a Status; its code alone picks the exit code,
// so the console client and the local checks choose codes with this table in mind.
#pragma once

#include "common/status.h"

namespace uplink::cli {

enum class ExitCode : int {
  kOk = 0,
  kFailure = 1,            // anything else: a 5xx, a reply uplink cannot use, a local I/O error
  kUsage = 2,              // bad command line or flag value, or a prompt with no terminal
  kNotAuthenticated = 3,   // no usable credential, or the console answered 401
  kForbidden = 4,          // 403, including confirmation_required without a terminal
  kNotFound = 5,           // 404, or an ID or name that matches no connection
  kConflict = 6,           // 409 or 410
  kUnreachable = 7,        // connect, TLS, timeout, or a redirect uplink refused to follow
  kRateLimited = 8,        // 429
  kInstallIncomplete = 9,  // install printed the token for a manual install instead
};

// InvalidArgument → usage; Unauthenticated → 3; PermissionDenied → 4; NotFound → 5;
// Conflict → 6; Unavailable and DeadlineExceeded → 7; ResourceExhausted → 8; every other
// code (FailedPrecondition, Internal, IOError, AlreadyExists, ...) → 1.
ExitCode ExitCodeFor(const Status& status);

inline int ToInt(ExitCode code) { return static_cast<int>(code); }

}  // namespace uplink::cli
