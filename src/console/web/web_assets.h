// The web console's files (src/console/web/app, bundled by esbuild into index.html and
// content-hashed files under assets/) embedded in uplink-console, and how they are served:
// index.html for every client route, each asset under its hashed name, and the security
// headers of every page (docs/web.md).
#pragma once

#include <functional>
#include <string_view>

#include "net/http.h"

namespace uplink::console {

// No inline script or style, nothing from another origin, no framing.
inline constexpr std::string_view kWebContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

// The embedded file at `name` ("index.html", "assets/app-X1.js"); empty when unknown.
// Generated at build time (cmake/embed_files.cmake).
std::string_view EmbeddedWebFile(std::string_view name);

using WebFiles = std::function<std::string_view(std::string_view name)>;

// Sets the Content-Security-Policy and the other security headers of a page or asset.
void AddWebSecurityHeaders(net::Response& response);

// Whether a request is one for the web console rather than the API: a GET or HEAD of a path
// outside /api/.
bool IsWebRequest(const net::Request& request);

// The reply to a web request: the file under /assets/ (cached for a year: its name changes
// with its content; 404 when unknown), or index.html for every other path, the client's
// routes (never cached, so a new build is picked up at once).
net::Response ServeWebFile(const net::Request& request, const WebFiles& files);

}  // namespace uplink::console
