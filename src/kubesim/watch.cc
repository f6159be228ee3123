#include "kubesim/watch.h"

#include <charconv>

#include "common/thread_name.h"
#include "kubesim/messages.h"

namespace uplink::kubesim {
namespace {

constexpr std::chrono::seconds kDefaultTimeout{30 * 60};

json::object Status410(const std::string& message) {
  return json::object{{"kind", "Status"},      {"apiVersion", "v1"}, {"metadata", json::object()},
                      {"status", "Failure"},   {"message", message}, {"reason", "Expired"},
                      {"code", 410}};
}

}  // namespace

// One open watch: what it follows, how far it has got, and the server's request for the next
// piece of its body while one waits.
class WatchStream final : public net::BodyStream,
                          public std::enable_shared_from_this<WatchStream> {
 public:
  WatchStream(const ObjectStore& store, const ResourceType& type,
              std::optional<std::string> namespace_name, ObjectFilter filter, std::int64_t since,
              std::chrono::steady_clock::time_point deadline, WatchHub::Render render,
              std::string initial)
      : store_(store),
        type_(type),
        namespace_name_(std::move(namespace_name)),
        filter_(std::move(filter)),
        since_(since),
        deadline_(deadline),
        render_(std::move(render)),
        pending_(std::move(initial)) {}

  void Next(std::function<void(std::optional<std::string>)> deliver) override {
    std::string ready;
    {
      std::lock_guard lock(mutex_);
      if (cancelled_) return;
      if (ended_) {
        ready.clear();
      } else if (!pending_.empty()) {
        ready = std::exchange(pending_, "");
      } else {
        waiting_ = std::move(deliver);
      }
    }
    if (!deliver) {
      // Whatever changed since the last piece goes out at once.
      Poll(std::chrono::steady_clock::now());
      return;
    }
    if (ready.empty()) {
      deliver(std::nullopt);
    } else {
      deliver(std::move(ready));
    }
  }

  void Cancel() override {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    waiting_ = nullptr;
  }

  bool cancelled() {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }

  // On the hub's thread: answers a waiting Next with the changes since the last piece, or the
  // end once the deadline has passed.
  void Poll(std::chrono::steady_clock::time_point now) {
    std::function<void(std::optional<std::string>)> deliver;
    std::optional<std::string> piece;
    {
      std::lock_guard lock(mutex_);
      if (!waiting_ || cancelled_) return;
      if (now >= deadline_ || ended_) {
        ended_ = true;
      } else {
        Result<std::vector<WatchEvent>> events = store_.EventsSince(type_, namespace_name_, since_);
        std::string lines;
        if (!events.ok()) {
          // Too old: the client lists again.
          lines = ToJson(json::object{{"type", "ERROR"},
                                      {"object", Status410(events.status().message())}}) +
                  "\n";
          ended_ = true;
        } else {
          for (const WatchEvent& event : *events) {
            since_ = event.resource_version;
            if (!filter_.Matches(event.object)) continue;
            lines += ToJson(json::object{{"type", event.type},
                                         {"object", render_(event.object, first_)}}) +
                     "\n";
            first_ = false;
          }
        }
        if (lines.empty()) return;
        piece = std::move(lines);
      }
      deliver = std::exchange(waiting_, nullptr);
    }
    deliver(std::move(piece));
  }

  void MarkFirstSent() { first_ = false; }

 private:
  const ObjectStore& store_;
  const ResourceType& type_;
  const std::optional<std::string> namespace_name_;
  const ObjectFilter filter_;
  std::mutex mutex_;
  std::int64_t since_;
  const std::chrono::steady_clock::time_point deadline_;
  const WatchHub::Render render_;
  std::string pending_;  // the initial ADDED events, until the first Next takes them
  std::function<void(std::optional<std::string>)> waiting_;
  bool first_ = true;
  bool ended_ = false;
  bool cancelled_ = false;
};

WatchHub::~WatchHub() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WatchHub::Add(const std::shared_ptr<WatchStream>& stream) {
  std::lock_guard lock(mutex_);
  std::erase_if(streams_, [](const std::weak_ptr<WatchStream>& weak) {
    auto live = weak.lock();
    return !live || live->cancelled();
  });
  streams_.push_back(stream);
  if (!thread_.joinable()) {
    thread_ = std::thread([this] {
      NameThisThread("watch-hub");
      Loop();
    });
  }
}

void WatchHub::Loop() {
  std::int64_t seen = -1;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    seen = store_.WaitForChange(seen, std::chrono::milliseconds(500));
    std::vector<std::shared_ptr<WatchStream>> live;
    {
      std::lock_guard lock(mutex_);
      for (const auto& weak : streams_) {
        if (auto stream = weak.lock()) live.push_back(std::move(stream));
      }
    }
    const auto now = std::chrono::steady_clock::now();
    for (const auto& stream : live) stream->Poll(now);
  }
}

net::Response WatchHub::Watch(const net::Request& request, const ResourceType& type,
                              const std::optional<std::string>& namespace_name, Render render) {
  auto bad_request = [](const std::string& message) {
    return net::Response::Json(
        400, ToJson(json::object{{"kind", "Status"}, {"apiVersion", "v1"},
                                 {"metadata", json::object()}, {"status", "Failure"},
                                 {"message", message}, {"reason", "BadRequest"}, {"code", 400}}));
  };
  Result<ObjectFilter> filter =
      ObjectFilter::Parse(type, request.Query("labelSelector").value_or(""),
                          request.Query("fieldSelector").value_or(""));
  if (!filter.ok()) return bad_request(filter.status().message());
  std::chrono::seconds timeout = kDefaultTimeout;
  if (std::optional<std::string> text = request.Query("timeoutSeconds")) {
    std::int64_t seconds = 0;
    auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), seconds);
    if (error != std::errc() || end != text->data() + text->size() || seconds < 0) {
      return bad_request("timeoutSeconds must be a non-negative integer");
    }
    if (seconds > 0) timeout = std::min(timeout, std::chrono::seconds(seconds));
  }
  std::string version = request.Query("resourceVersion").value_or("");
  std::int64_t since = 0;
  std::string initial;
  bool first = true;
  if (version.empty() || version == "0") {
    // The state now, as ADDED events, then what changes after it.
    ListOptions options;
    options.namespace_name = namespace_name;
    Result<ListPage> page = store_.List(type, options);
    if (!page.ok()) return bad_request(page.status().message());
    since = page->resource_version;
    for (const json::object& item : page->items) {
      if (!filter->Matches(item)) continue;
      initial += ToJson(json::object{{"type", "ADDED"}, {"object", render(item, first)}}) + "\n";
      first = false;
    }
  } else {
    auto [end, error] = std::from_chars(version.data(), version.data() + version.size(), since);
    if (error != std::errc() || end != version.data() + version.size() || since < 0) {
      return bad_request("resourceVersion " + GoQuoted(version) + " is not a resource version");
    }
  }
  auto stream = std::make_shared<WatchStream>(
      store_, type, namespace_name, std::move(*filter), since,
      std::chrono::steady_clock::now() + timeout, std::move(render), std::move(initial));
  if (!first) stream->MarkFirstSent();
  Add(stream);
  net::Response response;
  response.headers.Set("Content-Type", "application/json");
  response.stream = stream;
  return response;
}

}  // namespace uplink::kubesim
