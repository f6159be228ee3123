// Status and Result<T>: expected failures are values, never exceptions.
//
// Modelled on LevelDB's Status (a code plus a message a person can act on) and osquery's
// Expected (a value or the reason there is none). Exceptions are kept for programmer errors
// and start-up configuration.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace uplink {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller sent something malformed; fix the input
  kNotFound,
  kAlreadyExists,
  kConflict,            // valid input that contradicts stored state (e.g. cluster binding)
  kUnauthenticated,     // no credential, or one that is invalid, revoked or expired
  kPermissionDenied,    // a valid credential that may not do this
  kResourceExhausted,   // a size or rate limit was hit
  kFailedPrecondition,  // the system is not in a state that allows this
  kUnavailable,         // try again later (network, peer down, 5xx)
  kDeadlineExceeded,
  kDataLoss,            // stored data is corrupt
  kIOError,
  kInternal,            // a bug: an invariant did not hold
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "NotFound: connection 7 does not exist"
  std::string ToString() const;

  // Prefixes the message with what was being done: "reading token file: No such file".
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status&, const Status&) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status ConflictError(std::string message);
Status UnauthenticatedError(std::string message);
Status PermissionDeniedError(std::string message);
Status ResourceExhaustedError(std::string message);
Status FailedPreconditionError(std::string message);
Status UnavailableError(std::string message);
Status DeadlineExceededError(std::string message);
Status DataLossError(std::string message);
Status IOError(std::string message);
Status InternalError(std::string message);

// An error from errno: "open /etc/x: No such file or directory".
Status ErrnoError(std::string_view what, int errno_value);

// A value, or the Status saying why there is none. Never holds an ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(data_).ok() && "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return ok(); }

  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(data_);
  }

  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  template <typename U>
  T value_or(U&& fallback) const& {
    return ok() ? value() : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, Status> data_;
};

}  // namespace uplink

#define UPLINK_CONCAT_INNER(a, b) a##b
#define UPLINK_CONCAT(a, b) UPLINK_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not ok.
#define UPLINK_RETURN_IF_ERROR(expr)                  \
  do {                                                \
    ::uplink::Status uplink_status_ = (expr);         \
    if (!uplink_status_.ok()) return uplink_status_;  \
  } while (0)

// UPLINK_ASSIGN_OR_RETURN(auto nodes, ListNodes()); returns the error if there is one.
#define UPLINK_ASSIGN_OR_RETURN(lhs, expr) \
  UPLINK_ASSIGN_OR_RETURN_IMPL(UPLINK_CONCAT(uplink_result_, __LINE__), lhs, expr)
#define UPLINK_ASSIGN_OR_RETURN_IMPL(result, lhs, expr) \
  auto result = (expr);                                 \
  if (!result.ok()) return result.status();             \
  lhs = std::move(result).value()
