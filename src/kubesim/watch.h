// Watches as kube-apiserver serves them: a chunked stream of {"type":...,"object":...} lines,
// starting from the objects that exist (as ADDED) when no resourceVersion (or "0") is given,
// else from the changes after it, filtered by the request's label and field selectors, until
// timeoutSeconds (30 minutes by default). A resourceVersion older than the changes the store
// keeps ends the stream with an ERROR event carrying a 410 Expired Status, as a real server
// does; its client lists again.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/json_fwd.h"
#include "kubesim/store.h"
#include "net/http.h"

namespace uplink::kubesim {

class WatchStream;

class WatchHub {
 public:
  // `store` must outlive this.
  explicit WatchHub(const ObjectStore& store) : store_(store) {}
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // How an object is sent: as it is, or (for kubectl's `get -w`) as a Table row, whose
  // column definitions only the first event carries.
  using Render = std::function<json::value(const json::object& object, bool first)>;

  // The response to a watch of `type` (in `namespace_name` when given); a Status response for
  // a bad request.
  net::Response Watch(const net::Request& request, const ResourceType& type,
                      const std::optional<std::string>& namespace_name, Render render);

 private:
  friend class WatchStream;
  void Add(const std::shared_ptr<WatchStream>& stream);
  void Loop();

  const ObjectStore& store_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::weak_ptr<WatchStream>> streams_;
  std::thread thread_;  // started by the first watch
  bool stopping_ = false;
};

}  // namespace uplink::kubesim
