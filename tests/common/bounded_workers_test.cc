#include "common/bounded_workers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

namespace uplink {
namespace {

using namespace std::chrono_literals;

// Waits (at most 10 s) until `condition` holds.
template <typename Condition>
bool Eventually(Condition condition) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(1ms)) {
    if (condition()) return true;
  }
  return condition();
}

TEST(BoundedWorkers, RunsJobsOnItsThreadsAndRefusesBeyondTheQueue) {
  BoundedWorkers workers("test-workers", 2, 3);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> running{0};
  std::atomic<int> done{0};
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> ran_elsewhere{true};
  auto blocking = [&] {
    ran_elsewhere = ran_elsewhere && std::this_thread::get_id() != caller;
    ++running;
    released.wait();
    ++done;
  };
  ASSERT_TRUE(workers.Submit(blocking));
  ASSERT_TRUE(workers.Submit(blocking));
  ASSERT_TRUE(Eventually([&] { return running == 2; }));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(workers.Submit([&] { ++done; }));
  EXPECT_FALSE(workers.Submit([&] { ++done; })) << "a fourth waiting job is refused";

  release.set_value();
  ASSERT_TRUE(Eventually([&] { return done == 5; }));
  EXPECT_TRUE(ran_elsewhere);
  EXPECT_TRUE(workers.Submit([&] { ++done; })) << "room again once the queue drains";
  EXPECT_TRUE(Eventually([&] { return done == 6; }));
}

TEST(BoundedWorkers, StopFinishesWhatRunsDropsWhatWaitsAndRefusesMore) {
  auto workers = std::make_unique<BoundedWorkers>("test-workers", 1, 8);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  ASSERT_TRUE(workers->Submit([&] {
    started = true;
    released.wait();
    finished = true;
  }));
  ASSERT_TRUE(Eventually([&] { return started.load(); }));
  // A queued job's captures are destroyed unrun: a reply it holds is dropped, not answered.
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  std::atomic<bool> queued_ran{false};
  ASSERT_TRUE(workers->Submit([held = std::move(held), &queued_ran] { queued_ran = true; }));
  std::thread stopper([&] { workers->Stop(); });
  std::this_thread::sleep_for(20ms);
  release.set_value();
  stopper.join();
  EXPECT_TRUE(finished) << "Stop waits for a running job";
  EXPECT_FALSE(queued_ran);
  EXPECT_TRUE(watch.expired());
  EXPECT_FALSE(workers->Submit([] {}));
  workers->Stop();  // idempotent
}

TEST(BoundedWorkers, AThrowingJobKeepsItsThread) {
  BoundedWorkers workers("test-workers", 1, 4);
  ASSERT_TRUE(workers.Submit([] { throw std::runtime_error("boom"); }));
  std::atomic<bool> ran{false};
  ASSERT_TRUE(workers.Submit([&] { ran = true; }));
  EXPECT_TRUE(Eventually([&] { return ran.load(); }));
}

}  // namespace
}  // namespace uplink
