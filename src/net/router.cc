#include "net/router.h"

#include <algorithm>

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

std::string JoinPath(const std::vector<std::string>& segments) {
  std::string path;
  for (const std::string& segment : segments) path += "/" + segment;
  return path.empty() ? "/" : path;
}

}  // namespace

void Router::Add(std::string method, std::string pattern, Handler handler) {
  AddAsync(std::move(method), std::move(pattern),
           [handler = std::move(handler)](const Request& request, const PathParams& params,
                                          Reply reply) { reply(handler(request, params)); });
}

void Router::AddAsync(std::string method, std::string pattern, AsyncHandler handler) {
  std::vector<std::string> segments = SplitPath(pattern);
  if (std::none_of(segments.begin(), segments.end(), IsCapture)) {
    literal_routes_[JoinPath(segments)].push_back(routes_.size());
  }
  routes_.push_back(Route{std::move(method), std::move(segments), std::move(handler)});
}

bool Router::MethodMatches(const Route& route, const std::string& method) {
  return route.method == method || (route.method == "GET" && method == "HEAD");
}

const Router::Route* Router::FindLiteral(const std::string& path,
                                         const std::string& method) const {
  auto literal = literal_routes_.find(path);
  if (literal == literal_routes_.end()) return nullptr;
  for (size_t index : literal->second) {
    if (MethodMatches(routes_[index], method)) return &routes_[index];
  }
  return nullptr;
}

void Router::SetNotFound(std::function<Response(const Request&)> handler) {
  not_found_ = std::move(handler);
}

void Router::SetMethodNotAllowed(
    std::function<Response(const Request&, std::string allowed)> handler) {
  method_not_allowed_ = std::move(handler);
}

void Router::Dispatch(Request request, Reply reply) const {
  const std::string path = request.Path();
  const Route* literal = FindLiteral(path, request.method);
  const std::vector<std::string> segments = literal ? std::vector<std::string>{} : SplitPath(path);
  if (!literal) literal = FindLiteral(JoinPath(segments), request.method);
  if (literal) {
    literal->handler(request, PathParams{}, std::move(reply));
    return;
  }
  // Patterns with captures; a literal route that matches here has another method (405).
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
    if (!MethodMatches(route, request.method)) {
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
