#include "console/store/sql/connection_pool.h"

namespace uplink::console::sql {

ConnectionPool::ConnectionPool(std::vector<std::unique_ptr<Database>> connections)
    : connections_(std::move(connections)) {
  for (const auto& connection : connections_) free_.push_back(connection.get());
}

ConnectionPool::Lease ConnectionPool::Borrow() {
  std::unique_lock lock(mutex_);
  given_back_.wait(lock, [this] { return !free_.empty(); });
  Database* database = free_.back();
  free_.pop_back();
  return Lease(*this, *database);
}

void ConnectionPool::GiveBack(Database& database) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(&database);
  }
  given_back_.notify_one();
}

}  // namespace uplink::console::sql
