// Power loss at every sync point of a scripted workload (LevelDB's fault_injection_test is
// the model): run it once to count the sync points, then for each one run it again, lose
// power right before or right after that sync, reopen, and check what survived.
#include <gtest/gtest.h>

#include <cerrno>
#include <map>
#include <optional>
#include <tuple>

#include "spool/fault_injection_fs.h"
#include "spool/spool.h"

namespace uplink::spool {
namespace {

using testing::CrashTiming;
using testing::FsOp;
using testing::MemoryFileSystem;

constexpr char kDir[] = "/spool";

// ---- the simulation itself ------------------------------------------------------------------

TEST(MemoryFileSystem, LosingPowerKeepsOnlyWhatWasSynced) {
  MemoryFileSystem fs;
  ASSERT_TRUE(fs.CreateDir("/d").ok());
  ASSERT_TRUE(fs.SyncDir("/").ok());
  auto durable = fs.OpenInPlace("/d/durable");
  ASSERT_TRUE(durable.ok());
  ASSERT_TRUE((*durable)->WriteAt(0, "synced").ok());
  ASSERT_TRUE((*durable)->Sync().ok());
  ASSERT_TRUE(fs.SyncDir("/d").ok());
  ASSERT_TRUE((*durable)->WriteAt(6, " and not").ok());
  ASSERT_TRUE((*durable)->WriteAt(0, "SY").ok());
  auto fresh = fs.OpenInPlace("/d/fresh");  // its entry is never synced
  ASSERT_TRUE((*fresh)->WriteAt(0, "data").ok());
  ASSERT_TRUE((*fresh)->Sync().ok());
  ASSERT_TRUE(fs.PutFile("/d/removed", "kept"));
  ASSERT_TRUE(fs.Remove("/d/removed").ok());
  ASSERT_TRUE(fs.PutFile("/d/renamed", "old name"));
  ASSERT_TRUE(fs.Rename("/d/renamed", "/d/new-name").ok());
  ASSERT_TRUE(fs.Truncate("/d/durable", 2).ok());
  auto lock = fs.Lock("/d/LOCK");
  ASSERT_TRUE(lock.ok());

  fs.LosePower();
  EXPECT_FALSE((*durable)->WriteAt(0, "x").ok());
  EXPECT_FALSE(fs.ListDir("/d").ok());
  fs.PowerOn();
  // The unsynced overwrite, extension and truncate are all undone.
  EXPECT_EQ(fs.Contents("/d/durable"), "synced");
  EXPECT_FALSE(fs.Contents("/d/fresh").has_value());
  EXPECT_EQ(fs.Contents("/d/removed"), "kept");
  EXPECT_EQ(fs.Contents("/d/renamed"), "old name");
  EXPECT_FALSE(fs.Contents("/d/new-name").has_value());
  EXPECT_FALSE((*durable)->WriteAt(0, "x").ok());  // handles from before stay dead
  EXPECT_TRUE(fs.Lock("/d/LOCK").ok());        // the holder is gone
}

TEST(MemoryFileSystem, ADirectoryWhoseCreationWasNotSyncedVanishes) {
  MemoryFileSystem fs;
  ASSERT_TRUE(fs.CreateDir("/a").ok());
  ASSERT_TRUE(fs.PutFile("/a/f", "x"));
  fs.LosePower();
  fs.PowerOn();
  EXPECT_EQ(fs.ListDir("/a").status().code(), StatusCode::kNotFound);
}

TEST(MemoryFileSystem, InjectsFaultsAndRunsOutOfSpace) {
  MemoryFileSystem fs;
  auto file = fs.OpenInPlace("/f");
  ASSERT_TRUE(file.ok());
  fs.FailNth(FsOp::kWriteAt, 2, EIO);
  EXPECT_TRUE((*file)->WriteAt(0, "a").ok());
  Status failed = (*file)->WriteAt(1, "b");
  EXPECT_EQ(failed.code(), StatusCode::kIOError);
  EXPECT_NE(failed.message().find("input/output error"), std::string::npos);
  EXPECT_TRUE((*file)->WriteAt(1, "c").ok());
  fs.SetCapacity(5);
  Status full = (*file)->WriteAt(2, "defgh");
  EXPECT_NE(full.message().find("no space left on device"), std::string::npos);
  EXPECT_EQ(fs.Contents("/f"), "ac");  // a write that does not fit writes nothing
  EXPECT_TRUE((*file)->WriteAt(0, "AC").ok());  // overwriting needs no space
  EXPECT_TRUE(fs.Truncate("/f", 1).ok());
  EXPECT_TRUE((*file)->WriteAt(1, "z").ok());
  EXPECT_EQ(fs.Contents("/f"), "Az");
  fs.FailAlways(FsOp::kRemove, EIO);
  EXPECT_FALSE(fs.Remove("/f").ok());
  EXPECT_FALSE(fs.Remove("/f").ok());
  fs.ClearFaults();
  EXPECT_TRUE(fs.Remove("/f").ok());
  EXPECT_EQ(fs.Remove("/f").code(), StatusCode::kNotFound);
}

TEST(MemoryFileSystem, AVectoredWriteThatRunsOutOfSpaceLeavesTheFittingPiecesWritten) {
  MemoryFileSystem fs;
  auto file = fs.OpenInPlace("/f");
  ASSERT_TRUE(file.ok());
  const std::string_view pieces[] = {"ab", "cd", "ef"};
  fs.FailNth(FsOp::kWriteAt, 1, EIO);
  EXPECT_EQ((*file)->WriteAt(0, pieces).code(), StatusCode::kIOError);
  EXPECT_EQ(fs.Contents("/f"), "");
  fs.SetCapacity(5);
  Status full = (*file)->WriteAt(0, pieces);
  EXPECT_NE(full.message().find("no space left on device"), std::string::npos);
  EXPECT_EQ(fs.Contents("/f"), "abcd");  // as a short write, then a failed one
}

// ---- the workload -------------------------------------------------------------------------

enum class StepKind { kAppend, kRead, kConsume, kReopen, kWriteAhead };

struct Step {
  StepKind kind;
  std::uint64_t value = 0;  // Append: record number; Read: how many; Consume: through
  LossCount rejected;
};

std::string PayloadOf(std::uint64_t number) {
  // Sizes from 50 bytes to 3 KiB, and every 17th near the record limit (a quarter of the cap),
  // which crosses a block boundary.
  const size_t size = number % 17 == 0 ? 23'000 : 50 + (number * 389) % 3000;
  std::string payload = "payload-" + std::to_string(number) + ":";
  payload.resize(size, static_cast<char>('A' + number % 26));
  return payload;
}

// With `reserve`, idle time writes the cap ahead at the start and after the consumes, so that
// the appends go into files written ahead, then into the oldest segment's file at the cap.
std::vector<Step> Script(bool reserve) {
  std::vector<Step> steps;
  auto appends = [&](std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t n = first; n <= last; ++n) steps.push_back({StepKind::kAppend, n});
  };
  auto idle = [&] {
    if (!reserve) return;
    for (int i = 0; i < 7; ++i) steps.push_back({StepKind::kWriteAhead});
  };
  idle();
  appends(1, 20);
  steps.push_back({StepKind::kRead, 10});
  steps.push_back({StepKind::kConsume, 10});
  idle();
  appends(21, 40);
  steps.push_back({StepKind::kReopen});
  steps.push_back({StepKind::kRead, 100});
  steps.push_back({StepKind::kConsume, 30, {1, 100}});
  appends(41, 120);  // well past the cap: segments are dropped
  steps.push_back({StepKind::kRead, 1000});
  steps.push_back({StepKind::kConsume, 115});
  appends(121, 130);
  steps.push_back({StepKind::kReopen});
  appends(131, 135);
  steps.push_back({StepKind::kRead, 1000});
  steps.push_back({StepKind::kConsume, 1000});  // everything
  idle();
  steps.push_back({StepKind::kReopen});
  appends(136, 137);
  return steps;
}

SpoolOptions Options(bool reserve) {
  SpoolOptions options;
  options.max_bytes = 96 << 10;
  options.segment_bytes = 16 << 10;
  options.reserve_disk = reserve;
  return options;
}

struct Snapshot {
  std::uint64_t consumed_through = 0;
  SpoolLosses losses;
  std::string spool_id;
};

// What one run of the workload saw.
struct WorkloadRun {
  std::map<std::uint64_t, std::string> acknowledged;  // sequence -> payload
  std::optional<std::string> in_flight;               // an Append that did not return
  std::uint64_t durably_consumed = 0;                 // the cursor as last synced by a Consume
  std::vector<Snapshot> after_step;                   // [0]: after Open, [i + 1]: after step i
  size_t completed_steps = 0;
  bool opened = false;
};

Snapshot Take(const Spool& spool) {
  SpoolStats stats = spool.Stats();
  return {stats.consumed_through, stats.losses, stats.spool_id};
}

// Runs the script until it ends or the power goes.
WorkloadRun RunWorkload(MemoryFileSystem& fs, FakeClock& clock, bool reserve) {
  WorkloadRun run;
  auto opened = Spool::Open(fs, kDir, Options(reserve), clock);
  if (!opened.ok()) return run;
  std::unique_ptr<Spool> spool = std::move(*opened);
  run.opened = true;
  run.after_step.push_back(Take(*spool));
  for (const Step& step : Script(reserve)) {
    clock.Advance(std::chrono::milliseconds(250));
    bool ok = true;
    switch (step.kind) {
      case StepKind::kAppend: {
        const std::string payload = PayloadOf(step.value);
        auto sequence = spool->Append(payload);
        if (sequence.ok()) {
          run.acknowledged[*sequence] = payload;
        } else {
          run.in_flight = payload;
          ok = false;
        }
        break;
      }
      case StepKind::kRead:
        ok = spool->Read(1 << 20, step.value).ok();
        break;
      case StepKind::kConsume: {
        const size_t segments_before = spool->Stats().segments;
        ok = spool->Consume(step.value, step.rejected).ok();
        // The cursor is synced when the Consume retires a segment; otherwise it is written
        // lazily and a power loss may take it back (never past a retired segment).
        if (ok && spool->Stats().segments < segments_before) {
          run.durably_consumed = spool->Stats().consumed_through;
        }
        break;
      }
      case StepKind::kReopen: {
        spool.reset();
        auto reopened = Spool::Open(fs, kDir, Options(reserve), clock);
        ok = reopened.ok();
        if (ok) spool = std::move(*reopened);
        break;
      }
      case StepKind::kWriteAhead:
        ok = spool->WriteAhead().ok();
        break;
    }
    if (!ok || !fs.powered()) break;
    run.after_step.push_back(Take(*spool));
    ++run.completed_steps;
  }
  return run;
}

bool SameLosses(const LossCount& a, const LossCount& b) {
  return a.records == b.records && a.bytes == b.bytes;
}

// Run on a file system that can preallocate and on one that cannot: a new segment's blocks
// are then allocated when it starts, and Open releases what a segment did not fill. And with
// the cap held on disk (files written ahead, every consumed one kept, the oldest segment's
// file reused at the cap).
class PowerLossTest : public ::testing::TestWithParam<std::tuple<CrashTiming, bool, bool>> {
 protected:
  CrashTiming timing() const { return std::get<0>(GetParam()); }
  bool reserve() const { return std::get<2>(GetParam()); }
  void Prepare(MemoryFileSystem& fs) const {
    if (std::get<1>(GetParam())) fs.EnablePreallocation();
  }
};

TEST_P(PowerLossTest, EveryAcknowledgedRecordSurvivesALossOfPowerAtEverySyncPoint) {
  MemoryFileSystem reference_fs;
  Prepare(reference_fs);
  FakeClock reference_clock;
  const WorkloadRun reference = RunWorkload(reference_fs, reference_clock, reserve());
  ASSERT_EQ(reference.completed_steps, Script(reserve()).size());
  const int sync_points = reference_fs.sync_points();
  ASSERT_GT(sync_points, 150);
  ASSERT_GT(reference.after_step.back().losses.dropped.records, 0u);  // the cap was reached

  for (int k = 1; k <= sync_points; ++k) {
    SCOPED_TRACE("power lost " +
                 std::string(timing() == CrashTiming::kBeforeSync ? "before" : "after") +
                 " sync point " + std::to_string(k));
    MemoryFileSystem fs;
    Prepare(fs);
    FakeClock clock;
    fs.CrashAtSyncPoint(k, timing());
    const WorkloadRun run = RunWorkload(fs, clock, reserve());
    ASSERT_FALSE(fs.powered());
    fs.PowerOn();

    auto reopened = Spool::Open(fs, kDir, Options(reserve()), clock);
    ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
    Spool& spool = **reopened;
    const SpoolStats stats = spool.Stats();
    EXPECT_LE(stats.bytes, Options(reserve()).max_bytes);

    // The state is one the workload had, at the step in progress when the power went or
    // before it: a lazily written cursor may go back to the last synced one, with the loss
    // counters written beside it.
    const size_t done = run.opened ? run.completed_steps : 0;
    const size_t newest = run.opened ? done + 1 : 0;
    const bool a_state_it_had =
        std::any_of(reference.after_step.begin(),
                    reference.after_step.begin() + static_cast<long>(newest) + 1,
                    [&](const Snapshot& s) {
                      return s.consumed_through == stats.consumed_through &&
                             SameLosses(s.losses.dropped, stats.losses.dropped) &&
                             SameLosses(s.losses.rejected, stats.losses.rejected);
                    });
    // With the cap held, an append can drop twice (the oldest segment when it starts a
    // segment, then one more if its record outgrows the file it took), each drop persisted:
    // the power may go between them. Then the cursor is partway, and exactly the records it
    // passed are counted as dropped.
    bool partway_through_an_append = false;
    if (!a_state_it_had && reserve() && run.opened && done < Script(true).size() &&
        Script(true)[done].kind == StepKind::kAppend) {
      const Snapshot& before = reference.after_step[done];
      const Snapshot& after = reference.after_step[done + 1];
      partway_through_an_append =
          before.consumed_through < stats.consumed_through &&
          stats.consumed_through < after.consumed_through &&
          stats.losses.dropped.records - before.losses.dropped.records ==
              stats.consumed_through - before.consumed_through &&
          SameLosses(before.losses.rejected, stats.losses.rejected);
    }
    EXPECT_TRUE(a_state_it_had || partway_through_an_append) << stats.consumed_through;
    if (run.opened) {
      EXPECT_EQ(stats.spool_id, run.after_step[0].spool_id);
    }
    EXPECT_GE(stats.consumed_through, run.durably_consumed);

    // Every record read back is intact, in order, once; every acknowledged record that is
    // neither consumed nor dropped is there.
    std::vector<SpoolRecord> records;
    while (true) {
      auto batch = spool.Read(1 << 20, 1000);
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      if (batch->empty()) break;
      for (auto& r : *batch) records.push_back(std::move(r));
    }
    std::uint64_t previous = stats.consumed_through;
    for (const SpoolRecord& record : records) {
      EXPECT_GT(record.sequence, previous);
      previous = record.sequence;
      auto acknowledged = run.acknowledged.find(record.sequence);
      if (acknowledged != run.acknowledged.end()) {
        EXPECT_EQ(record.payload, acknowledged->second) << record.sequence;
      } else {
        // Only the append that was under way can have made it without being acknowledged.
        ASSERT_TRUE(run.in_flight.has_value()) << record.sequence;
        EXPECT_EQ(record.payload, *run.in_flight) << record.sequence;
      }
    }
    size_t present = 0;
    for (const auto& [sequence, payload] : run.acknowledged) {
      if (sequence <= stats.consumed_through) continue;
      ++present;
      EXPECT_TRUE(std::any_of(records.begin(), records.end(),
                              [&](const SpoolRecord& r) { return r.sequence == sequence; }))
          << "acknowledged record " << sequence << " is missing";
    }
    EXPECT_GE(records.size(), present);
    EXPECT_LE(records.size(), present + 1);
    EXPECT_EQ(spool.Stats().losses.corrupt.records, 0u);
    EXPECT_EQ(spool.Stats().losses.corrupt.bytes, 0u);

    // The spool goes on, and no acknowledged sequence is handed out again.
    auto next = spool.Append("after the power came back");
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    if (!run.acknowledged.empty()) {
      EXPECT_GT(*next, run.acknowledged.rbegin()->first);
    }
    EXPECT_GT(*next, stats.consumed_through);
    auto last = spool.Read(1 << 20, 1000);
    ASSERT_TRUE(last.ok());
    ASSERT_EQ(last->size(), 1u);
    EXPECT_EQ(last->front().sequence, *next);
    if (HasFatalFailure() || HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(
    BeforeAndAfterEachSync, PowerLossTest,
    ::testing::Combine(::testing::Values(CrashTiming::kBeforeSync, CrashTiming::kAfterSync),
                       ::testing::Bool(), ::testing::Bool()),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == CrashTiming::kBeforeSync
                             ? "LosePowerBeforeTheSync"
                             : "LosePowerAfterTheSync") +
             (std::get<1>(info.param) ? "Preallocating" : "") +
             (std::get<2>(info.param) ? "ReservingTheCap" : "");
    });

}  // namespace
}  // namespace uplink::spool
