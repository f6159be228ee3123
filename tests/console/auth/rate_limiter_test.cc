#include "console/auth/rate_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace uplink::console {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RateLimiter, AllowsABurstThenRefusesWithRetryAfter) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 3, .refill_per_second = 0.5});
  EXPECT_EQ(limiter.Check("10.0.0.1"), std::nullopt);
  EXPECT_EQ(limiter.size(), 0u) << "Check alone keeps nothing";
  EXPECT_EQ(limiter.RecordFailure("10.0.0.1"), std::nullopt);
  EXPECT_EQ(limiter.RecordFailure("10.0.0.1"), std::nullopt);
  EXPECT_EQ(limiter.Check("10.0.0.1"), std::nullopt) << "one token is left";
  EXPECT_EQ(limiter.RecordFailure("10.0.0.1"), seconds(2));
  EXPECT_EQ(limiter.Check("10.0.0.1"), seconds(2));
  EXPECT_EQ(limiter.Check("10.0.0.1"), seconds(2)) << "Check takes nothing";
}

TEST(RateLimiter, RefillsOverTime) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 3, .refill_per_second = 0.5});
  for (int i = 0; i < 3; ++i) (void)limiter.RecordFailure("k");
  clock.Advance(seconds(1));
  EXPECT_EQ(limiter.Check("k"), seconds(1));
  clock.Advance(milliseconds(999));
  EXPECT_EQ(limiter.Check("k"), seconds(1)) << "1 ms left still reads as a whole second";
  clock.Advance(milliseconds(1));
  EXPECT_EQ(limiter.Check("k"), std::nullopt);
  EXPECT_EQ(limiter.RecordFailure("k"), seconds(2));

  // Two tokens' worth of time gives back two tries, not the whole burst.
  clock.Advance(seconds(4));
  EXPECT_EQ(limiter.RecordFailure("k"), std::nullopt);
  EXPECT_EQ(limiter.RecordFailure("k"), seconds(2));

  clock.Advance(seconds(6));
  EXPECT_EQ(limiter.Check("k"), std::nullopt);
  EXPECT_EQ(limiter.size(), 0u) << "a bucket that refilled to full is forgotten";
  EXPECT_EQ(limiter.RecordFailure("k"), std::nullopt);
  EXPECT_EQ(limiter.RecordFailure("k"), std::nullopt);
  EXPECT_EQ(limiter.RecordFailure("k"), seconds(2)) << "refill never exceeds the burst";
}

TEST(RateLimiter, RetryAfterRoundsUpToWholeSeconds) {
  FakeClock clock;
  // The documented email bucket: 10 per 15 minutes.
  RateLimiter limiter(clock, RateLimit{.burst = 10, .refill_per_second = 10.0 / 900});
  for (int i = 0; i < 9; ++i) EXPECT_EQ(limiter.RecordFailure("alice@example.com"), std::nullopt);
  EXPECT_EQ(limiter.RecordFailure("alice@example.com"), seconds(90));
  clock.Advance(milliseconds(500));
  EXPECT_EQ(limiter.Check("alice@example.com"), seconds(90));
  clock.Advance(seconds(89));
  EXPECT_EQ(limiter.Check("alice@example.com"), seconds(1));
  clock.Advance(milliseconds(499));
  EXPECT_EQ(limiter.Check("alice@example.com"), seconds(1));
  clock.Advance(milliseconds(1));
  EXPECT_EQ(limiter.Check("alice@example.com"), std::nullopt);
}

TEST(RateLimiter, RatesThatAreNotExactInBinaryRefillOnTime) {
  FakeClock clock;
  // 10 per minute: a token every 6 s, which 10.0 / 60 cannot hold exactly as a double.
  RateLimiter limiter(clock, RateLimit{.burst = 10, .refill_per_second = 10.0 / 60});
  for (int i = 0; i < 10; ++i) (void)limiter.RecordFailure("agt_Xy12Ab3c");
  EXPECT_EQ(limiter.Check("agt_Xy12Ab3c"), seconds(6));
  clock.Advance(seconds(6));
  EXPECT_EQ(limiter.Check("agt_Xy12Ab3c"), std::nullopt);
  clock.Advance(seconds(54));
  EXPECT_EQ(limiter.Check("agt_Xy12Ab3c"), std::nullopt);
  EXPECT_EQ(limiter.size(), 0u) << "full after exactly 60 s";
}

TEST(RateLimiter, FailuresWhileRefusedDoNotPushTheWaitFurther) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 2, .refill_per_second = 1});
  (void)limiter.RecordFailure("k");
  EXPECT_EQ(limiter.RecordFailure("k"), seconds(1));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(limiter.RecordFailure("k"), seconds(1));
  clock.Advance(seconds(1));
  EXPECT_EQ(limiter.Check("k"), std::nullopt);
}

// What Check says, as a number of seconds (0 when it may try).
std::int64_t WaitSeconds(RateLimiter& limiter, const std::string& key) {
  auto wait = limiter.Check(key);
  return wait ? wait->count() : 0;
}

TEST(RateLimiter, FailuresHeardLateInTimeOrderWeighAsIfTakenThen) {
  FakeClock clock;
  const RateLimit limit{.burst = 3, .refill_per_second = 1};
  RateLimiter live(clock, limit);
  RateLimiter late(clock, limit);
  // A burst past the bucket's size (the cap clips it), a pause in which it fills again, and two
  // more.
  std::vector<SteadyTime> times;
  for (int step_ms : {0, 200, 200, 200, 200, 4200, 100}) {
    clock.Advance(milliseconds(step_ms));
    times.push_back(clock.SteadyNow());
    (void)live.RecordFailure("k");
  }
  clock.Advance(milliseconds(400));
  for (SteadyTime at : times) (void)late.RecordFailureAt("k", at);
  for (int step = 0; step < 16; ++step) {
    EXPECT_EQ(WaitSeconds(late, "k"), WaitSeconds(live, "k")) << "step " << step;
    clock.Advance(milliseconds(250));
  }
  EXPECT_EQ(late.Check("k"), std::nullopt);
}

TEST(RateLimiter, AFailureHeardLateThatNoLongerWeighsTakesNothing) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 2, .refill_per_second = 1});
  const SteadyTime then = clock.SteadyNow();
  clock.Advance(seconds(5));
  (void)limiter.RecordFailureAt("k", then);
  (void)limiter.RecordFailureAt("k", then);
  EXPECT_EQ(limiter.Check("k"), std::nullopt) << "both refilled 3 s ago";
  (void)limiter.RecordFailure("k");
  EXPECT_EQ(limiter.Check("k"), std::nullopt) << "one token is left, as without them";
}

TEST(RateLimiter, AFailureAtALaterTimeIsTakenAsNow) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 1, .refill_per_second = 1});
  EXPECT_EQ(limiter.RecordFailureAt("k", clock.SteadyNow() + seconds(100)), seconds(1));
  clock.Advance(seconds(1));
  EXPECT_EQ(limiter.Check("k"), std::nullopt);
}

TEST(RateLimiter, AFailureOlderThanTheLatestDoesNotFillAnEmptyBucketFurther) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 1, .refill_per_second = 1});
  const SteadyTime earlier = clock.SteadyNow();
  clock.Advance(milliseconds(500));
  EXPECT_EQ(limiter.RecordFailure("k"), seconds(1));
  // Taken in its place, it would have been refilled by half when the later one emptied the
  // bucket to its cap: it adds nothing.
  (void)limiter.RecordFailureAt("k", earlier);
  clock.Advance(milliseconds(1000));
  EXPECT_EQ(limiter.Check("k"), std::nullopt);
}

// Failures split between two sources, one heard here live and one heard late, out of order:
// the bucket is never emptier than with every failure taken in its place, and still counts
// the late ones that surely weigh.
TEST(RateLimiter, FailuresHeardOutOfOrderNeverWeighMoreThanInTheirPlace) {
  std::mt19937 random(20261202);
  const RateLimit limit{.burst = 5, .refill_per_second = 0.5};
  int counted_some = 0;
  for (int trial = 0; trial < 300; ++trial) {
    FakeClock clock;
    RateLimiter in_place(clock, limit);
    RateLimiter split(clock, limit);
    std::vector<SteadyTime> heard_late;
    const int failures = 1 + static_cast<int>(random() % 40);
    for (int i = 0; i < failures; ++i) {
      clock.Advance(milliseconds(random() % 1500));
      (void)in_place.RecordFailure("k");
      if (random() % 2 == 0) {
        (void)split.RecordFailure("k");
      } else {
        heard_late.push_back(clock.SteadyNow());
      }
    }
    clock.Advance(milliseconds(random() % 300));
    const std::int64_t before_late = WaitSeconds(split, "k");
    for (SteadyTime at : heard_late) (void)split.RecordFailureAt("k", at);
    if (WaitSeconds(split, "k") > before_late) ++counted_some;
    for (int step = 0; step < 24; ++step) {
      ASSERT_LE(WaitSeconds(split, "k"), WaitSeconds(in_place, "k"))
          << "trial " << trial << ", step " << step;
      clock.Advance(milliseconds(500));
    }
  }
  EXPECT_GT(counted_some, 30);
}

TEST(RateLimiter, KeysAreIndependent) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 1, .refill_per_second = 0.1});
  EXPECT_EQ(limiter.RecordFailure("a"), seconds(10));
  EXPECT_EQ(limiter.Check("b"), std::nullopt);
  EXPECT_EQ(limiter.Check("A"), std::nullopt) << "keys are compared exactly";
  EXPECT_EQ(limiter.RecordFailure("b"), seconds(10));
  clock.Advance(seconds(5));
  EXPECT_EQ(limiter.RecordFailure("c"), seconds(10));
  EXPECT_EQ(limiter.Check("a"), seconds(5));
  EXPECT_EQ(limiter.size(), 3u);
}

TEST(RateLimiter, AtCapacityTheFullestBucketIsForgotten) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 3, .refill_per_second = 0.01}, /*max_keys=*/4);
  for (int i = 0; i < 3; ++i) (void)limiter.RecordFailure("empty");
  for (int i = 0; i < 2; ++i) (void)limiter.RecordFailure("one left");
  (void)limiter.RecordFailure("two left");
  for (int i = 0; i < 3; ++i) (void)limiter.RecordFailure("also empty");
  ASSERT_EQ(limiter.size(), 4u);

  (void)limiter.RecordFailure("newcomer");
  EXPECT_EQ(limiter.size(), 4u);
  EXPECT_NE(limiter.Check("empty"), std::nullopt);
  EXPECT_NE(limiter.Check("also empty"), std::nullopt);
  EXPECT_NE(limiter.RecordFailure("one left"), std::nullopt) << "its bucket was kept";
  // "two left" was forgotten: it starts again from a full bucket (and pushes out "newcomer",
  // now the fullest).
  EXPECT_EQ(limiter.RecordFailure("two left"), std::nullopt);
  EXPECT_EQ(limiter.RecordFailure("two left"), std::nullopt);
  EXPECT_EQ(limiter.size(), 4u);
}

TEST(RateLimiter, AtCapacityEveryFullBucketIsForgottenAtOnce) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 3, .refill_per_second = 1}, /*max_keys=*/8);
  for (int i = 0; i < 7; ++i) (void)limiter.RecordFailure("refills " + std::to_string(i));
  clock.Advance(milliseconds(500));
  (void)limiter.RecordFailure("still short");
  clock.Advance(milliseconds(600));  // the first seven are full again, the last is not
  ASSERT_EQ(limiter.size(), 8u);
  (void)limiter.RecordFailure("newcomer");
  EXPECT_EQ(limiter.size(), 2u);
}

TEST(RateLimiter, ManyKeysStayWithinTheBoundAndTheEmptiestSurvive) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 5, .refill_per_second = 0.01}, /*max_keys=*/1000);
  for (int i = 0; i < 5; ++i) (void)limiter.RecordFailure("attacker");
  for (int i = 0; i < 20'000; ++i) {
    (void)limiter.RecordFailure("spray " + std::to_string(i));
    ASSERT_LE(limiter.size(), 1000u);
  }
  EXPECT_NE(limiter.Check("attacker"), std::nullopt);
}

TEST(RateLimiter, ConcurrentFailuresAreCountedExactly) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 10, .refill_per_second = 0.001});
  std::atomic<int> allowed = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (!limiter.RecordFailure("shared")) ++allowed;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(allowed.load(), 9) << "failures 1 to 9 leave a token, the 10th empties the bucket";
}

TEST(RateLimiter, ManyThreadsWithEvictionAndAMovingClock) {
  FakeClock clock;
  RateLimiter limiter(clock, RateLimit{.burst = 4, .refill_per_second = 50}, /*max_keys=*/64);
  std::atomic<bool> stop = false;
  std::thread ticker([&] {
    while (!stop) {
      clock.Advance(milliseconds(7));
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        std::string key = "k" + std::to_string((t * 7919 + i) % 300);
        std::optional<seconds> wait =
            i % 3 == 0 ? limiter.Check(key) : limiter.RecordFailure(key);
        if (wait) {
          EXPECT_GE(*wait, seconds(1));
        }
        EXPECT_LE(limiter.size(), 64u);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  stop = true;
  ticker.join();
  EXPECT_LE(limiter.size(), 64u);
}

TEST(RateLimiterDeathTest, ImpossibleLimitsStopTheProcess) {
  FakeClock clock;
  auto make = [&clock](RateLimit limit, std::size_t max_keys) {
    RateLimiter limiter(clock, limit, max_keys);
  };
  EXPECT_DEATH(make(RateLimit{.burst = 0.5, .refill_per_second = 1}, 10), "burst >= 1");
  EXPECT_DEATH(make(RateLimit{.burst = 5, .refill_per_second = 0}, 10), "refill_per_second > 0");
  EXPECT_DEATH(make(RateLimit{.burst = 5, .refill_per_second = -1}, 10), "refill_per_second > 0");
  EXPECT_DEATH(make(RateLimit{.burst = 5, .refill_per_second = 1e-12}, 10), "ten years");
  EXPECT_DEATH(make(RateLimit{}, 0), "max_keys >= 1");
}

}  // namespace
}  // namespace uplink::console
