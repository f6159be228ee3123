// The agent's health endpoints: /healthz (the process answers), /readyz (a recent report was
// accepted) and /metrics (Prometheus text).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/status.h"
#include "net/router.h"
#include "net/server.h"

namespace uplink::agent {

struct Readiness {
  bool ready = false;
  std::string reason;  // why not ready, e.g. "last report refused: revoked"
};

class HealthServer {
 public:
  // Appends more Prometheus text to /metrics (the node role's samples).
  using MetricsAppender = std::function<void(std::string& out)>;

  // Listens on `listen` (HOST:PORT; port 0 picks one). The callbacks and the registry must
  // outlive the server; they are called from server threads.
  static Result<std::unique_ptr<HealthServer>> Start(const std::string& listen,
                                                     std::function<Readiness()> readiness,
                                                     const metrics::Registry& registry,
                                                     MetricsAppender more_metrics = nullptr);
  ~HealthServer();

  std::uint16_t port() const { return server_->port(); }

 private:
  HealthServer() = default;

  net::Router router_;
  std::unique_ptr<net::HttpServer> server_;
};

}  // namespace uplink::agent
