#include "console/replies.h"

#include <string>

#include "common/files.h"
#include "common/gzip.h"
#include "common/json.h"
#include "common/text.h"
#include "protocol/errors.h"

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

bool IsJsonContentType(std::optional<std::string_view> content_type) {
  if (!content_type) return false;
  std::string_view media = TrimWhitespace(content_type->substr(0, content_type->find(';')));
  return EqualsIgnoringAsciiCase(media, "application/json");
}

net::Response JsonResponse(int status, const json::object& body) {
  return net::Response::Json(status, ToJson(body));
}

net::Response ServerRefusalResponse(int status) {
  switch (status) {
    case 413:
      return ErrorResponse(413, "too_large", "the request body is over this endpoint's limit");
    case 431: return ErrorResponse(431, "header_too_large", "the request header is over 16 KiB");
    default: return ErrorResponse(status, "invalid_request", "the request is not valid HTTP/1.1");
  }
}

net::Response NoStore(net::Response response) {
  response.headers.Set("Cache-Control", "no-store");
  return response;
}

net::Response ErrorResponse(int status, std::string_view code, std::string_view message) {
  return JsonResponse(status, protocol::EncodeErrorBody(protocol::ErrorBody{
                                  std::string(code), std::string(message), std::nullopt}));
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
  return JsonResponse(422, protocol::EncodeErrorBody(protocol::ErrorBody{
                               "invalid_record", std::string(message), sequence}));
}

net::Response RateLimitedResponse(std::chrono::seconds retry_after, std::string_view message) {
  net::Response response = ErrorResponse(429, "rate_limited", message);
  response.headers.Set("Retry-After", std::to_string(retry_after.count()));
  return response;
}

std::variant<std::string_view, net::Response> AgentJsonBody(const net::Request& request,
                                                            size_t max_bytes,
                                                            std::string& storage) {
  if (!IsJsonContentType(request.headers.Get("Content-Type"))) {
    return ErrorResponse(415, "unsupported_media_type",
                         "send the body as JSON with Content-Type: application/json");
  }
  const std::string_view encoding =
      TrimWhitespace(request.headers.Get("Content-Encoding").value_or(""));
  // Content codings are case-insensitive (RFC 9110 section 8.4.1): "GZIP" is gzip.
  if (EqualsIgnoringAsciiCase(encoding, "gzip")) {
    auto inflated = GzipDecompress(request.body, max_bytes);
    if (!inflated.ok()) {
      return ErrorResponse(inflated.status().WithContext("decompressing the gzip body"));
    }
    storage = std::move(inflated).value();
    return std::string_view(storage);
  }
  if (!encoding.empty() && !EqualsIgnoringAsciiCase(encoding, "identity")) {
    return ErrorResponse(415, "unsupported_media_type", "Content-Encoding must be gzip or absent");
  }
  if (request.body.size() > max_bytes) {
    return ErrorResponse(
        ResourceExhaustedError("the body is " + std::to_string(request.body.size()) +
                               " bytes; the limit is " + std::to_string(max_bytes)));
  }
  return std::string_view(request.body);
}

}  // namespace uplink::console
