#include "console/api/errors.h"

namespace uplink::console {
namespace {

std::string_view ErrorCodeFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return "invalid_request";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kAlreadyExists:
    case StatusCode::kConflict: return "conflict";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kUnauthenticated: return "invalid_token";
    case StatusCode::kPermissionDenied: return "forbidden";
    case StatusCode::kResourceExhausted: return "too_large";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kDeadlineExceeded: return "timeout";
    default: return "internal";
  }
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kConflict:
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kResourceExhausted: return 413;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kDeadlineExceeded: return 504;
    case StatusCode::kDataLoss:
    case StatusCode::kIOError:
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

net::Response JsonResponse(int status, const json::object& body) {
  return net::Response::Json(status, ToJson(body));
}

net::Response ServerRefusalResponse(int status) {
  switch (status) {
    case 413:
      return ErrorResponse(413, "too_large", "the request body is over this endpoint's limit");
    case 431:
      return ErrorResponse(431, "header_too_large", "the request header is over 16 KiB");
    default:
      return ErrorResponse(status, "invalid_request", "the request is not valid HTTP/1.1");
  }
}

net::Response NoStore(net::Response response) {
  response.headers.Set("Cache-Control", "no-store");
  return response;
}

net::Response ErrorResponse(int status, std::string_view code, std::string_view message) {
  json::object error{{"code", code}, {"message", message}};
  return JsonResponse(status, json::object{{"error", std::move(error)}});
}

net::Response ErrorResponse(const Status& status) {
  int http_status = HttpStatusFor(status.code());
  if (http_status >= 500) {
    return ErrorResponse(http_status, ErrorCodeFor(status.code()),
                         "the console could not complete the request; try again later");
  }
  if (status.code() == StatusCode::kUnauthenticated) {
    return UnauthorizedResponse(ErrorCodeFor(status.code()), status.message());
  }
  return ErrorResponse(http_status, ErrorCodeFor(status.code()), status.message());
}

net::Response UnauthorizedResponse(std::string_view code, std::string_view message) {
  net::Response response = ErrorResponse(401, code, message);
  response.headers.Set("WWW-Authenticate", "Bearer");
  return response;
}

net::Response InvalidRecordResponse(std::int64_t sequence, std::string_view message) {
  json::object error{{"code", "invalid_record"}, {"message", message}, {"sequence", sequence}};
  return JsonResponse(422, json::object{{"error", std::move(error)}});
}

net::Response RateLimitedResponse(std::chrono::seconds retry_after, std::string_view message) {
  net::Response response = ErrorResponse(429, "rate_limited", message);
  response.headers.Set("Retry-After", std::to_string(retry_after.count()));
  return response;
}

}  // namespace uplink::console
