// HTTP messages as plain values. Nothing here includes Beast or Asio: the rest of uplink
// speaks HTTP through these types, and only net/*.cc touches the heavy libraries.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace uplink::net {

struct WebSocketAccept;  // net/websocket.h

// Header fields with case-insensitive names, in insertion order.
class Headers {
 public:
  // The first value of `name`, if present.
  std::optional<std::string_view> Get(std::string_view name) const;
  // Replaces every field called `name` with one.
  void Set(std::string_view name, std::string_view value);
  void Add(std::string_view name, std::string_view value);
  void Remove(std::string_view name);
  const std::vector<std::pair<std::string, std::string>>& all() const { return fields_; }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

struct Request {
  std::string method = "GET";  // upper case
  std::string target = "/";    // origin-form: path plus optional ?query, still percent-encoded
  Headers headers;
  std::string body;
  std::string remote_address;  // set by the server: "127.0.0.1"

  // The decoded path without the query, e.g. "/api/v1/connections/7".
  std::string Path() const;
  // The first value of a decoded query parameter.
  std::optional<std::string> Query(std::string_view key) const;
  // All decoded query parameters in order.
  std::vector<std::pair<std::string, std::string>> QueryParams() const;
};

// A body produced over time (a Kubernetes watch): the server sends the response chunked, one
// chunk per piece, until the stream ends.
class BodyStream {
 public:
  virtual ~BodyStream() = default;
  // Asks for the next piece; `deliver` is called once, from any thread, with it or with
  // nothing (or an empty piece) when the body has ended.
  virtual void Next(std::function<void(std::optional<std::string>)> deliver) = 0;
  // The response is over (ended, the client gone, the server stopping): no more Next calls.
  virtual void Cancel() = 0;
};

struct Response {
  int status = 200;
  Headers headers;
  std::string body;
  // Set by AcceptWebSocket (net/websocket.h): the server upgrades the connection instead of
  // writing this response.
  std::shared_ptr<const WebSocketAccept> websocket;
  // When set, the body is what the stream produces, not `body`.
  std::shared_ptr<BodyStream> stream;

  static Response Json(int status, std::string body);
  static Response Text(int status, std::string body);
};

// "a%2Fb+c" -> "a/b c" for query components; nullopt on a malformed escape.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_as_space);
// Escapes everything but unreserved characters (RFC 3986).
std::string PercentEncode(std::string_view text);

// How an HTTP error status reads as a StatusCode, for clients turning a peer's reply into an
// error: 401 Unauthenticated, 403 PermissionDenied, 404 NotFound, 409 Conflict, 413
// ResourceExhausted, 408/504 DeadlineExceeded, 429 and 5xx Unavailable (try again later),
// other 4xx InvalidArgument or FailedPrecondition.
StatusCode StatusCodeForHttpStatus(int http_status);

// Standard reason phrase: 404 -> "Not Found".
std::string_view ReasonPhrase(int status);

}  // namespace uplink::net
