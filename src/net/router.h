// Routes requests by method and path pattern to handlers.
//
// Patterns are literal segments and `{name}` captures: "/api/v1/connections/{id}/rotate".
// A pattern without captures is found by one lookup of the path and wins over patterns with
// captures; among those, the first added that matches wins. Empty segments are ignored
// ("//healthz" is "/healthz").
// A handler either returns its Response (most routes) or, for long polls, receives a
// Reply callback it may call later from any thread, exactly once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "net/http.h"

namespace uplink::net {

using PathParams = std::map<std::string, std::string, std::less<>>;
using Reply = std::function<void(Response)>;
using Handler = std::function<Response(const Request&, const PathParams&)>;
using AsyncHandler = std::function<void(const Request&, const PathParams&, Reply)>;

// What a server calls for every request. The server guarantees `reply` is safe to call from
// any thread, and ignores calls after the first.
using RequestHandler = std::function<void(Request, Reply)>;

class Router {
 public:
  void Add(std::string method, std::string pattern, Handler handler);
  void AddAsync(std::string method, std::string pattern, AsyncHandler handler);

  // Called when no pattern matches the path (404) or the path matches but not the method
  // (405, with the allowed methods). Defaults produce plain-text replies.
  void SetNotFound(std::function<Response(const Request&)> handler);
  void SetMethodNotAllowed(std::function<Response(const Request&, std::string allowed)> handler);

  void Dispatch(Request request, Reply reply) const;

  // Adapts this router to what HttpServer takes. The router must outlive the server.
  RequestHandler AsHandler() const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;  // "{id}" marks a capture
    AsyncHandler handler;
  };
  static bool MethodMatches(const Route& route, const std::string& method);
  // The literal route for `path` (segments joined by single slashes) that takes `method`.
  const Route* FindLiteral(const std::string& path, const std::string& method) const;

  std::vector<Route> routes_;
  // Indexes into routes_ of the patterns without captures, by their segments joined.
  std::unordered_map<std::string, std::vector<size_t>> literal_routes_;
  std::function<Response(const Request&)> not_found_;
  std::function<Response(const Request&, std::string)> method_not_allowed_;
};

}  // namespace uplink::net
