// A loopback HTTP server for tests that plays a Kubernetes API server or a console: every
// request is recorded and answered by a replaceable handler.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/files.h"
#include "net/server.h"

namespace uplink::testing {

class FakeHttp {
 public:
  using Handler = std::function<net::Response(const net::Request&)>;

  explicit FakeHttp(Handler handler = nullptr) : handler_(std::move(handler)) {
    net::ServerOptions options;
    options.max_body_bytes = 32 << 20;
    auto server = net::HttpServer::Start(
        options,
        [this](net::Request request, net::Reply reply) {
          Handler handler;
          {
            std::lock_guard lock(mutex_);
            requests_.push_back(request);
            handler = handler_;
            if (silent_) {
              held_replies_.push_back(std::move(reply));  // never answered
              return;
            }
          }
          reply(handler ? handler(request) : net::Response::Text(404, "no handler\n"));
        });
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    if (server.ok()) server_ = std::move(server).value();
  }

  ~FakeHttp() {
    if (server_) server_->Stop();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

  void SetHandler(Handler handler) {
    std::lock_guard lock(mutex_);
    handler_ = std::move(handler);
  }
  // From now on requests are accepted but never answered (a console that hangs).
  void SetSilent(bool silent) {
    std::lock_guard lock(mutex_);
    silent_ = silent;
  }

  std::vector<net::Request> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  size_t request_count() const {
    std::lock_guard lock(mutex_);
    return requests_.size();
  }

 private:
  mutable std::mutex mutex_;
  Handler handler_;
  bool silent_ = false;
  std::vector<net::Request> requests_;
  std::vector<net::Reply> held_replies_;
  std::unique_ptr<net::HttpServer> server_;
};

inline std::string Fixture(const std::string& relative) {
  auto text = ReadFileBounded(std::string(UPLINK_FIXTURES_DIR) + "/kubernetes/" + relative, 8 << 20);
  EXPECT_TRUE(text.ok()) << relative << ": " << text.status().ToString();
  return text.value_or("");
}

}  // namespace uplink::testing
