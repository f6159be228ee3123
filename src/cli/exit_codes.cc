#include "cli/exit_codes.h"

namespace uplink::cli {

ExitCode ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return ExitCode::kOk;
    case StatusCode::kInvalidArgument:
      return ExitCode::kUsage;
    case StatusCode::kUnauthenticated:
      return ExitCode::kNotAuthenticated;
    case StatusCode::kPermissionDenied:
      return ExitCode::kForbidden;
    case StatusCode::kNotFound:
      return ExitCode::kNotFound;
    case StatusCode::kConflict:
      return ExitCode::kConflict;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return ExitCode::kUnreachable;
    case StatusCode::kResourceExhausted:
      return ExitCode::kRateLimited;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kDataLoss:
    case StatusCode::kIOError:
    case StatusCode::kInternal:
      return ExitCode::kFailure;
  }
  return ExitCode::kFailure;
}

}  // namespace uplink::cli
