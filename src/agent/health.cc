#include "agent/health.h"

#include <atomic>
#include <memory>

namespace uplink::agent {

Result<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& listen,
                                                          std::function<Readiness()> readiness,
                                                          const metrics::Registry& registry,
                                                          MetricsAppender more_metrics) {
  std::unique_ptr<HealthServer> health(new HealthServer());
  health->router_.Add("GET", "/healthz", [](const net::Request&, const net::PathParams&) {
    return net::Response::Text(200, "ok\n");
  });
  health->router_.Add("GET", "/readyz",
                       [readiness = std::move(readiness)](const net::Request&,
                                                          const net::PathParams&) {
                         Readiness state = readiness();
                         if (state.ready) return net::Response::Text(200, "ready\n");
                         return net::Response::Text(503, "not ready: " + state.reason + "\n");
                       });
  health->router_.Add("GET", "/metrics", [&registry, more_metrics = std::move(more_metrics),
                                           last_size = std::make_shared<std::atomic<size_t>>(0)](
                                              const net::Request&, const net::PathParams&) {
    // Room for what the last scrape wrote, so an exporter's tens of KiB are not grown into.
    std::string text;
    text.reserve(last_size->load(std::memory_order_relaxed) + 4096);
    // The appender first: an exporter that collects now shows this collection's own counts.
    if (more_metrics) more_metrics(text);
    registry.RenderTextTo(text);
    last_size->store(text.size(), std::memory_order_relaxed);
    net::Response response = net::Response::Text(200, std::move(text));
    response.headers.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    return response;
  });
  net::ServerOptions options;
  options.listen = listen;
  options.max_body_bytes = 4096;  // nothing here takes a body
  options.threads = 1;
  auto server = net::HttpServer::Start(options, health->router_.AsHandler());
  if (!server.ok()) return server.status().WithContext("--health-listen " + listen);
  health->server_ = std::move(server).value();
  return health;
}

HealthServer::~HealthServer() {
  if (server_) server_->Stop();
}

}  // namespace uplink::agent
