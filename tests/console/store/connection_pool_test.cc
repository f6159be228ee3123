// The lookup connections' pool: each connection lent to one caller at a time, a caller waiting
// while every one is lent.
#include "console/store/sql/connection_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include "console/store/sql/sqlite_database.h"
#include "support/process.h"

namespace uplink::console::sql {
namespace {

std::vector<std::unique_ptr<Database>> Connections(const uplink::testing::TempDir& dir, int count) {
  std::vector<std::unique_ptr<Database>> connections;
  for (int i = 0; i < count; ++i) {
    auto opened = OpenSqliteDatabase(dir.File("lookups.db"));
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (opened.ok()) connections.push_back(std::move(opened).value());
  }
  return connections;
}

TEST(ConnectionPool, LendsEachConnectionToOneCallerAtATimeAndTheNextWaitsForOneBack) {
  uplink::testing::TempDir dir;
  ConnectionPool pool(Connections(dir, 2));
  ASSERT_EQ(pool.size(), 2u);
  std::optional<ConnectionPool::Lease> first(pool.Borrow());
  std::optional<ConnectionPool::Lease> second(pool.Borrow());
  EXPECT_NE(&**first, &**second);

  std::atomic<bool> lent{false};
  std::future<Database*> third = std::async(std::launch::async, [&] {
    ConnectionPool::Lease lease = pool.Borrow();
    lent = true;
    return &*lease;
  });
  // Both are lent: the third caller waits.
  EXPECT_EQ(third.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  EXPECT_FALSE(lent);
  Database* given_back = &**second;
  second.reset();
  ASSERT_EQ(third.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(third.get(), given_back);
  // Lent again once the third gave it back.
  ConnectionPool::Lease again = pool.Borrow();
  EXPECT_EQ(&*again, given_back);
}

TEST(ConnectionPool, ManyThreadsShareTheConnectionsWithoutTwoOnOne) {
  uplink::testing::TempDir dir;
  ConnectionPool pool(Connections(dir, 3));
  std::mutex mutex;
  std::set<Database*> in_use;
  std::atomic<int> overlaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        ConnectionPool::Lease lease = pool.Borrow();
        {
          std::lock_guard lock(mutex);
          if (!in_use.insert(&*lease).second) ++overlaps;
        }
        std::this_thread::yield();
        std::lock_guard lock(mutex);
        in_use.erase(&*lease);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(overlaps, 0);
}

}  // namespace
}  // namespace uplink::console::sql
