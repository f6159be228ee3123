#include "net/router.h"

#include <memory>

namespace uplink::net {
namespace {

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> segments;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) segments.emplace_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return segments;
}

bool IsCapture(const std::string& segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

}  // namespace

void Router::Add(std::string method, std::string pattern, Handler handler) {
  AddAsync(std::move(method), std::move(pattern),
           [handler = std::move(handler)](const Request& request, const PathParams& params,
                                          Reply reply) { reply(handler(request, params)); });
}

void Router::AddAsync(std::string method, std::string pattern, AsyncHandler handler) {
  routes_.push_back(Route{std::move(method), SplitPath(pattern), std::move(handler)});
}

void Router::SetNotFound(std::function<Response(const Request&)> handler) {
  not_found_ = std::move(handler);
}

void Router::SetMethodNotAllowed(
    std::function<Response(const Request&, std::string allowed)> handler) {
  method_not_allowed_ = std::move(handler);
}

void Router::Dispatch(Request request, Reply reply) const {
  const std::vector<std::string> segments = SplitPath(request.Path());
  std::string allowed;
  for (const Route& route : routes_) {
    if (route.segments.size() != segments.size()) continue;
    PathParams params;
    bool match = true;
    for (size_t i = 0; i < segments.size() && match; ++i) {
      if (IsCapture(route.segments[i])) {
        params[route.segments[i].substr(1, route.segments[i].size() - 2)] = segments[i];
      } else {
        match = route.segments[i] == segments[i];
      }
    }
    if (!match) continue;
    bool method_matches = route.method == request.method ||
                          (route.method == "GET" && request.method == "HEAD");
    if (!method_matches) {
      if (!allowed.empty()) allowed += ", ";
      allowed += route.method;
      continue;
    }
    route.handler(request, params, std::move(reply));
    return;
  }
  if (!allowed.empty()) {
    Response response = method_not_allowed_
                            ? method_not_allowed_(request, allowed)
                            : Response::Text(405, "method not allowed; use " + allowed + "\n");
    response.headers.Set("Allow", allowed);
    reply(std::move(response));
    return;
  }
  reply(not_found_ ? not_found_(request) : Response::Text(404, "not found\n"));
}

RequestHandler Router::AsHandler() const {
  return [this](Request request, Reply reply) { Dispatch(std::move(request), std::move(reply)); };
}

}  // namespace uplink::net
