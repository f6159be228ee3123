// Connections to one database lent to one caller at a time: the store's lookups on PostgreSQL
// (authentication's reads), so that concurrent requests' lookups do not queue behind each
// other's round trips on a single connection.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "console/store/sql/database.h"

namespace uplink::console::sql {

class ConnectionPool {
 public:
  explicit ConnectionPool(std::vector<std::unique_ptr<Database>> connections);
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  bool empty() const { return connections_.empty(); }
  size_t size() const { return connections_.size(); }

  // One connection, given back when the lease ends.
  class Lease {
   public:
    Lease(ConnectionPool& pool, Database& database) : pool_(&pool), database_(&database) {}
    Lease(Lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)), database_(other.database_) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (pool_ != nullptr) pool_->GiveBack(*database_);
    }
    Database& operator*() const { return *database_; }

   private:
    ConnectionPool* pool_;
    Database* database_;
  };

  // A free connection, waiting while every one is lent. The pool must not be empty.
  Lease Borrow();

 private:
  void GiveBack(Database& database);

  const std::vector<std::unique_ptr<Database>> connections_;
  std::mutex mutex_;
  std::condition_variable given_back_;
  std::vector<Database*> free_;  // under mutex_
};

}  // namespace uplink::console::sql
