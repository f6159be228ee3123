#include "common/status.h"

#include <cstring>

namespace uplink {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kConflict: return "Conflict";
    case StatusCode::kUnauthenticated: return "Unauthenticated";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kDeadlineExceeded: return "DeadlineExceeded";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kIOError: return "IOError";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  return Status(code_, std::move(message));
}

Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status AlreadyExistsError(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
Status ConflictError(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
Status UnauthenticatedError(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
Status PermissionDeniedError(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
Status ResourceExhaustedError(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
Status FailedPreconditionError(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
Status DeadlineExceededError(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

Status ErrnoError(std::string_view what, int errno_value) {
  std::string message(what);
  message += ": ";
  message += std::strerror(errno_value);
  return Status(StatusCode::kIOError, std::move(message));
}

}  // namespace uplink
