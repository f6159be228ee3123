// A remote write receiver on loopback for the forwarder's tests: a real HTTP server that
// decompresses (snappy) and decodes each WriteRequest, keeps the series of those it accepts,
// and answers as a test tells it to. The end-to-end tests use Debian's Prometheus instead.
#pragma once

#include <gtest/gtest.h>
#include <snappy.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "console/remote_write/varint.h"
#include "net/server.h"

namespace uplink::console::testing {

struct DecodedSeries {
  std::map<std::string, std::string> labels;  // __name__ included
  double value = 0;
  std::int64_t timestamp_ms = 0;

  const std::string& Label(const std::string& name) const {
    static const std::string kNone;
    auto it = labels.find(name);
    return it == labels.end() ? kNone : it->second;
  }
};

// The fields of one protobuf message: (field number, wire type, bytes or value).
struct Field {
  int number = 0;
  int wire_type = 0;
  std::string_view bytes;   // length-delimited
  std::uint64_t value = 0;  // varint or fixed64
};

inline bool ReadFields(std::string_view message, std::vector<Field>& fields) {
  using remote_write::GetVarint;
  size_t at = 0;
  while (at < message.size()) {
    std::uint64_t tag = 0;
    if (!GetVarint(message, at, tag)) return false;
    Field field{static_cast<int>(tag >> 3), static_cast<int>(tag & 7)};
    if (field.wire_type == 0) {
      if (!GetVarint(message, at, field.value)) return false;
    } else if (field.wire_type == 1) {
      if (message.size() - at < 8) return false;
      for (int i = 0; i < 8; ++i) {
        field.value |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(message[at + i]))
                       << (8 * i);
      }
      at += 8;
    } else if (field.wire_type == 2) {
      std::uint64_t length = 0;
      if (!GetVarint(message, at, length) || length > message.size() - at) return false;
      field.bytes = message.substr(at, length);
      at += length;
    } else {
      return false;
    }
    fields.push_back(field);
  }
  return true;
}

// A WriteRequest's series, one sample each as the forwarder sends them; empty (with a test
// failure) when the bytes are not one.
inline std::vector<DecodedSeries> DecodeWriteRequest(std::string_view bytes) {
  std::vector<DecodedSeries> decoded;
  std::vector<Field> request;
  if (!ReadFields(bytes, request)) {
    ADD_FAILURE() << "not a protobuf message";
    return {};
  }
  for (const Field& series_field : request) {
    EXPECT_EQ(series_field.number, 1);
    std::vector<Field> series;
    EXPECT_TRUE(ReadFields(series_field.bytes, series));
    DecodedSeries& out = decoded.emplace_back();
    int samples = 0;
    for (const Field& field : series) {
      std::vector<Field> inner;
      EXPECT_TRUE(ReadFields(field.bytes, inner));
      if (field.number == 1) {
        std::string name, value;
        for (const Field& f : inner) (f.number == 1 ? name : value) = std::string(f.bytes);
        EXPECT_FALSE(out.labels.contains(name)) << "label " << name << " twice";
        EXPECT_TRUE(out.labels.empty() || out.labels.rbegin()->first < name)
            << "labels out of order at " << name;
        out.labels[name] = value;
      } else if (field.number == 2) {
        ++samples;
        for (const Field& f : inner) {
          if (f.number == 1) out.value = std::bit_cast<double>(f.value);
          if (f.number == 2) out.timestamp_ms = static_cast<std::int64_t>(f.value);
        }
      }
    }
    EXPECT_EQ(samples, 1);
  }
  return decoded;
}

// One request as the receiver saw it.
struct WriteCall {
  std::map<std::string, std::string> headers;  // the ones a test looks at
  std::vector<DecodedSeries> series;
  int answered = 0;
};

class FakeTsdb {
 public:
  // Decides the answer to a decoded request: an HTTP status, or 0 to never answer.
  using Policy = std::function<int(const WriteCall&)>;

  explicit FakeTsdb(int port = 0) {
    net::ServerOptions options;
    options.listen = "127.0.0.1:" + std::to_string(port);
    options.max_body_bytes = 64 << 20;
    auto server = net::HttpServer::Start(options, [this](net::Request request, net::Reply reply) {
      Handle(std::move(request), std::move(reply));
    });
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    if (server.ok()) server_ = std::move(server).value();
  }
  ~FakeTsdb() { Stop(); }

  void Stop() {
    {
      std::lock_guard lock(mutex_);
      held_.clear();
    }
    if (server_) server_->Stop();
  }

  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + "/api/v1/write";
  }
  int port() const { return server_->port(); }

  void SetPolicy(Policy policy) {
    std::lock_guard lock(mutex_);
    policy_ = std::move(policy);
  }

  // Every request so far, answered or not.
  std::vector<WriteCall> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  // The series of the requests answered 2xx.
  std::vector<DecodedSeries> accepted() const {
    std::lock_guard lock(mutex_);
    return accepted_;
  }

  // Waits until `condition` holds of the accepted series; a hang guard only bounds the wait.
  bool WaitFor(const std::function<bool(const std::vector<DecodedSeries>&)>& condition) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(60), [&] { return condition(accepted_); });
  }
  bool WaitForCalls(size_t count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(60),
                             [&] { return calls_.size() >= count; });
  }

 private:
  void Handle(net::Request request, net::Reply reply) {
    WriteCall call;
    for (const char* name : {"Content-Type", "Content-Encoding", "Authorization",
                             "X-Prometheus-Remote-Write-Version"}) {
      if (auto value = request.headers.Get(name)) call.headers[name] = std::string(*value);
    }
    std::string raw;
    if (!snappy::Uncompress(request.body.data(), request.body.size(), &raw)) {
      ADD_FAILURE() << "the body is not snappy's block format";
      reply(net::Response::Text(400, "not snappy\n"));
      return;
    }
    call.series = DecodeWriteRequest(raw);
    std::lock_guard lock(mutex_);
    call.answered = policy_ ? policy_(call) : 204;
    calls_.push_back(call);
    if (call.answered >= 200 && call.answered < 300) {
      accepted_.insert(accepted_.end(), call.series.begin(), call.series.end());
    }
    changed_.notify_all();
    if (call.answered == 0) {
      held_.push_back(std::move(reply));  // never answered: the forwarder must give up on it
      return;
    }
    reply(net::Response::Text(call.answered, call.answered == 204 ? "" : "refused by the test\n"));
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Policy policy_;
  std::vector<WriteCall> calls_;
  std::vector<DecodedSeries> accepted_;
  std::vector<net::Reply> held_;
  std::unique_ptr<net::HttpServer> server_;
};

// The series named `name` whose labels include `labels`.
inline std::vector<DecodedSeries> Find(const std::vector<DecodedSeries>& all,
                                       const std::string& name,
                                       const std::map<std::string, std::string>& labels = {}) {
  std::vector<DecodedSeries> found;
  for (const DecodedSeries& series : all) {
    if (series.Label("__name__") != name) continue;
    bool match = true;
    for (const auto& [key, value] : labels) match = match && series.Label(key) == value;
    if (match) found.push_back(series);
  }
  return found;
}

}  // namespace uplink::console::testing
