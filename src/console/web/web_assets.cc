#include "console/web/web_assets.h"

#include <string>

namespace uplink::console {
namespace {

constexpr std::string_view kAssetsPrefix = "/assets/";

std::string_view ContentTypeFor(std::string_view name) {
  auto ends_with = [&](std::string_view suffix) { return name.ends_with(suffix); };
  if (ends_with(".html")) return "text/html; charset=utf-8";
  if (ends_with(".js")) return "text/javascript; charset=utf-8";
  if (ends_with(".css")) return "text/css; charset=utf-8";
  if (ends_with(".svg")) return "image/svg+xml";
  if (ends_with(".txt")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

net::Response FileResponse(std::string_view name, std::string_view body,
                           std::string_view cache_control, bool head) {
  net::Response response;
  response.status = 200;
  response.headers.Set("Content-Type", ContentTypeFor(name));
  response.headers.Set("Cache-Control", cache_control);
  if (!head) response.body = std::string(body);
  AddWebSecurityHeaders(response);
  return response;
}

}  // namespace

void AddWebSecurityHeaders(net::Response& response) {
  response.headers.Set("Content-Security-Policy", kWebContentSecurityPolicy);
  response.headers.Set("X-Content-Type-Options", "nosniff");
  response.headers.Set("X-Frame-Options", "DENY");
  response.headers.Set("Referrer-Policy", "no-referrer");
  response.headers.Set("Cross-Origin-Opener-Policy", "same-origin");
}

bool IsWebRequest(const net::Request& request) {
  if (request.method != "GET" && request.method != "HEAD") return false;
  std::string path = request.Path();
  return path != "/api" && !path.starts_with("/api/");
}

net::Response ServeWebFile(const net::Request& request, const WebFiles& files) {
  bool head = request.method == "HEAD";
  std::string path = request.Path();
  if (path.starts_with(kAssetsPrefix)) {
    std::string name = path.substr(1);
    // Only names the build made: no "..", no empty segments, nothing outside assets/.
    std::string_view body =
        name.find("..") == std::string::npos && name.find("//") == std::string::npos
            ? files(name)
            : std::string_view();
    if (body.empty()) {
      net::Response response = net::Response::Text(404, "no such asset; reload the page\n");
      AddWebSecurityHeaders(response);
      return response;
    }
    return FileResponse(name, body, "public, max-age=31536000, immutable", head);
  }
  std::string_view index = files("index.html");
  if (index.empty()) {
    net::Response response =
        net::Response::Text(404, "this uplink-console was built without its web pages\n");
    AddWebSecurityHeaders(response);
    return response;
  }
  return FileResponse("index.html", index, "no-cache", head);
}

}  // namespace uplink::console
