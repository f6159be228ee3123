// What durability costs the spool, and what opening a full one costs.
//
// 1. Append throughput with every Append durable before it returns (fdatasync; concurrent
//    appends share one sync), for 1 KiB and 64 KiB records from 1 and 8 writers, beside dd
//    writing the same bytes in the same block size to the same disk, as a child process in
//    the same run: `conv=fsync` (one fsync at the end: what the disk does for these bytes
//    with no durability per block) and `oflag=dsync` (a sync per block, as one writer gets).
//    The spool has the agent's options: its cap is written ahead (files of zeroes) in idle
//    time after it is created, the time that takes is printed. Three regimes: steady state,
//    where a reader consumes as the shipper does while the console answers (after a
//    warm-up); a backlog growing once the cap is held (the console away): both only
//    overwrite blocks written before, which needs no metadata persisted per sync; and, for
//    comparison, a backlog growing in a spool just created, before idle time has written
//    anything ahead (every segment a new file, preallocated where the file system can).
//    Each figure is the median of the rounds (3 by default), each round paired with its own
//    dd runs; the ratios' range over the rounds follows in brackets.
// 2. Opening a full spool (512 MiB, the default options): time and peak RSS, measured in a
//    child process (`bench_spool --open-only DIR`, which reads VmHWM from
//    /proc/self/status), with the spool's files in the page cache and evicted from it.
//
// Disks differ several-fold between machines, so every ratio is against dd on the same disk
// in the same run, and the file system it ran on is printed first. TMPDIR chooses the disk.
// Beside each case: records per segment sync, the share of the time a sync was running (near
// 100% with as many records per sync as writers: the disk's sync latency bounds it), and the
// rate against a loop that writes the same bytes, a group of `writers` records per
// fdatasync, from one thread into the same kind of file (what a closed loop of that many
// writers could reach with perfect group commit and nothing else to do). Where that loop
// is itself under 80% of dd conv=fsync, the disk bounds the case, not the spool. For several
// writers, a line below gives the same from `writers` threads that each write their own
// record and wait for the group's sync: what any design with one record in flight per writer
// pays for waking and running them, on this machine's CPUs, besides the disk. Last, the
// CPUs the process kept busy (its CPU time over the wall time; write-out in kernel threads
// not included): near the machine's count, the CPUs bound it.
//
// Targets (spool issues): appends of 64 KiB records from 8 writers at >= 80% of dd
// conv=fsync's rate, in steady state and with a backlog (one writer pays a sync per record
// by definition: its measure is dd oflag=dsync); open <= 0.5 s and <= 16 MiB.
//
// On a machine whose CPUs are busy with other work, run it under SCHED_FIFO (`chrt -f 50
// bench_spool`): otherwise a writer woken by a finished sync may wait for the scheduler's
// tick (4 ms at HZ=250) before it runs, and every figure measures the other work instead.
//
// Flags: --rounds N; --only-64k-8 (just the targets' cases); --skip-open.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/flags.h"
#include "common/log.h"
#include "spool/file_system.h"
#include "spool/spool.h"
#include "support/process.h"

namespace {

using Clock = std::chrono::steady_clock;
using uplink::spool::PosixFileSystem;
using uplink::spool::Spool;
using uplink::spool::SpoolOptions;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// A field of /proc/self/status in KiB ("VmHWM", "VmRSS").
long StatusKib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) == 0) return std::strtol(line.c_str() + prefix.size(), nullptr, 10);
  }
  return -1;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The mount that holds `path`, from /proc/self/mounts: "/dev/vda on / (ext4, rw,relatime)".
std::string FileSystemOf(const std::string& path) {
  std::ifstream mounts("/proc/self/mounts");
  std::string device, mount_point, type, options, rest, best;
  size_t best_length = 0;
  while (mounts >> device >> mount_point >> type >> options && std::getline(mounts, rest)) {
    const bool holds = path.rfind(mount_point, 0) == 0 &&
                       (mount_point == "/" || path.size() == mount_point.size() ||
                        path[mount_point.size()] == '/');
    if (holds && mount_point.size() >= best_length) {
      best_length = mount_point.size();
      best = device + " on " + mount_point + " (" + type + ", " + options + ")";
    }
  }
  return best.empty() ? "an unknown file system" : best;
}

// The child: opens the spool and prints milliseconds, peak RSS before and after (KiB).
int OpenOnly(const char* dir) {
  const long before = StatusKib("VmHWM");
  const auto start = Clock::now();
  auto spool = Spool::Open(PosixFileSystem(), dir, {}, uplink::SystemClock());
  const double seconds = Seconds(start);
  if (!spool.ok()) {
    std::fprintf(stderr, "open failed: %s\n", spool.status().ToString().c_str());
    return 1;
  }
  std::printf("%.3f %ld %ld %llu\n", seconds * 1000, before, StatusKib("VmHWM"),
              static_cast<unsigned long long>((*spool)->Stats().bytes));
  return 0;
}

// Every file operation of the spool, through PosixFileSystem, with its segment syncs counted
// and timed: records per sync and the share of the time a sync was running say whether a
// figure is bound by the disk's sync latency (a sync always running, as many records per
// sync as there are writers) or by what the spool does between syncs.
class CountingFileSystem final : public uplink::spool::FileSystem {
 public:
  struct Counts {
    std::uint64_t syncs = 0;
    double sync_seconds = 0;
  };

  Counts Take() {
    Counts counts{syncs_.exchange(0), static_cast<double>(sync_nanos_.exchange(0)) / 1e9};
    return counts;
  }

  uplink::Status CreateDir(const std::string& path) override { return posix_.CreateDir(path); }
  uplink::Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    return posix_.ListDir(dir);
  }
  uplink::Result<std::uint64_t> FileSize(const std::string& path) override {
    return posix_.FileSize(path);
  }
  uplink::Result<std::unique_ptr<uplink::spool::ReadableFile>> OpenReadable(
      const std::string& path) override {
    return posix_.OpenReadable(path);
  }
  uplink::Result<std::unique_ptr<uplink::spool::InPlaceFile>> OpenInPlace(
      const std::string& path) override {
    auto file = posix_.OpenInPlace(path);
    const bool segment = path.ends_with(".seg") || path.ends_with(".rseg");
    if (!file.ok() || !segment) return file;
    return std::unique_ptr<uplink::spool::InPlaceFile>(new CountedFile(std::move(*file), *this));
  }
  uplink::Status Truncate(const std::string& path, std::uint64_t size) override {
    return posix_.Truncate(path, size);
  }
  uplink::Status Remove(const std::string& path) override { return posix_.Remove(path); }
  uplink::Status Rename(const std::string& from, const std::string& to) override {
    return posix_.Rename(from, to);
  }
  uplink::Status SyncDir(const std::string& dir) override { return posix_.SyncDir(dir); }
  uplink::Result<std::unique_ptr<uplink::spool::FileLock>> Lock(const std::string& path) override {
    return posix_.Lock(path);
  }
  bool OverwritesInPlace(const std::string& dir) override { return posix_.OverwritesInPlace(dir); }

 private:
  class CountedFile final : public uplink::spool::InPlaceFile {
   public:
    CountedFile(std::unique_ptr<uplink::spool::InPlaceFile> file, CountingFileSystem& counts)
        : file_(std::move(file)), counts_(counts) {}
    uplink::Result<std::string_view> Read(std::uint64_t offset, size_t n,
                                          char* scratch) const override {
      return file_->Read(offset, n, scratch);
    }
    uplink::Status WriteAt(std::uint64_t offset, std::string_view data) override {
      return file_->WriteAt(offset, data);
    }
    uplink::Status WriteAt(std::uint64_t offset,
                           std::span<const std::string_view> pieces) override {
      return file_->WriteAt(offset, pieces);
    }
    uplink::Status Sync() override {
      const auto start = Clock::now();
      uplink::Status status = file_->Sync();
      counts_.sync_nanos_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 Clock::now() - start).count();
      ++counts_.syncs_;
      return status;
    }
    void StartWriteback(std::uint64_t offset, std::uint64_t n) override {
      file_->StartWriteback(offset, n);
    }
    uplink::Status Preallocate(std::uint64_t bytes) override { return file_->Preallocate(bytes); }

   private:
    std::unique_ptr<uplink::spool::InPlaceFile> file_;
    CountingFileSystem& counts_;
  };

  uplink::spool::FileSystem& posix_ = PosixFileSystem();
  std::atomic<std::uint64_t> syncs_{0};
  std::atomic<std::int64_t> sync_nanos_{0};
};

// The CPU time (user and system) of this process's threads so far, in seconds.
double ProcessCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct AppendResult {
  double seconds = 0;
  double cpu_seconds = 0;  // of every thread of the process, the reader's included
  bool ok = true;
};

// Appends `records` records from `writers` threads; with `steady`, a reader consumes what
// was appended (at most 1 MiB at a time, as the shipper's batches) while they run.
AppendResult TimeAppends(Spool& spool, size_t record_bytes, int writers, int records,
                         bool steady) {
  const std::string payload(record_bytes, 'r');
  std::atomic<bool> failed{false}, writing{true};
  std::thread reader;
  if (steady) {
    reader = std::thread([&] {
      while (writing) {
        auto batch = spool.Read(1 << 20, 5000);
        if (!batch.ok()) failed = true;
        if (!batch.ok() || batch->empty()) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          continue;
        }
        if (!spool.Consume(batch->back().sequence).ok()) failed = true;
      }
    });
  }
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  const double cpu_start = ProcessCpuSeconds();
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&] {
      for (int i = 0; i < records / writers; ++i) {
        if (!spool.Append(payload).ok()) failed = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = Seconds(start);
  const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
  writing = false;
  if (reader.joinable()) reader.join();
  return {seconds, cpu_seconds, !failed};
}

// Writes groups of `writers` records of `record_bytes` into `file` from offset 0, each group
// followed by one fdatasync, until `bytes` are written: from one thread, each group in one
// write; or with `threads`, from `writers` threads, each writing its own record of every
// group and waiting until the group is synced (a barrier whose completion syncs), as the
// spool's writers do. False when a write or sync fails.
bool WriteSyncedGroups(uplink::spool::InPlaceFile& file, std::uint64_t bytes, size_t record_bytes,
                       int writers, bool threads) {
  const std::uint64_t group_bytes = record_bytes * static_cast<std::uint64_t>(writers);
  if (!threads) {
    const std::string group(group_bytes, 'g');
    for (std::uint64_t at = 0; at < bytes; at += group_bytes) {
      if (!file.WriteAt(at, group).ok() || !file.Sync().ok()) return false;
    }
    return true;
  }
  const std::string record(record_bytes, 'g');
  std::atomic<bool> ok{true};
  std::barrier synced(writers, [&]() noexcept {
    if (!file.Sync().ok()) ok = false;
  });
  std::vector<std::thread> threads_;
  for (int w = 0; w < writers; ++w) {
    threads_.emplace_back([&, w] {
      for (std::uint64_t at = 0; at < bytes; at += group_bytes) {
        if (!file.WriteAt(at + w * record_bytes, record).ok()) ok = false;
        synced.arrive_and_wait();
      }
    });
  }
  for (auto& t : threads_) t.join();
  return ok;
}

// The bounds on any durable append from `writers` closed-loop writers: the same bytes
// written `writers` records at a time, each group followed by one fdatasync (perfect group
// commit, no framing), into the kind of file the spool writes: a segment's worth overwritten
// in files written before (steady state: recycled files), or new files preallocated as the
// spool does (a backlog). From one thread (no hand-off), or with `threads` from `writers`
// threads that each write their own record and wait for its sync (what the spool's writers
// cannot avoid: each is woken, and writes, once per group). Seconds, or -1.
double TimeGroupCommitLoop(const std::string& dir, size_t record_bytes, int writers, int records,
                           bool overwrite, bool threads) {
  constexpr std::uint64_t kSegmentBytes = 8 << 20;  // the default options' segment size
  const std::uint64_t group_bytes = record_bytes * static_cast<std::uint64_t>(writers);
  const std::uint64_t total = static_cast<std::uint64_t>(record_bytes) * records;
  uplink::spool::FileSystem& fs = PosixFileSystem();
  double seconds = 0;
  int files = 0;
  for (std::uint64_t done = 0; done < total; ++files) {
    const std::string path = dir + "/loop-" + std::to_string(files);
    auto file = fs.OpenInPlace(path);
    if (!file.ok()) return -1;
    if (overwrite) {
      const std::string group(group_bytes, 'g');
      for (std::uint64_t at = 0; at < kSegmentBytes; at += group_bytes) {
        if (!(*file)->WriteAt(at, group).ok()) return -1;
      }
      if (!(*file)->Sync().ok()) return -1;
    } else if (!(*file)->Preallocate(kSegmentBytes).ok()) {
      return -1;
    }
    const std::uint64_t bytes = std::min(kSegmentBytes, total - done);
    const auto start = Clock::now();
    if (!overwrite && !fs.SyncDir(dir).ok()) return -1;
    if (!WriteSyncedGroups(**file, bytes, record_bytes, writers, threads)) return -1;
    seconds += Seconds(start);
    done += (bytes + group_bytes - 1) / group_bytes * group_bytes;
    (void)fs.Remove(path);
  }
  return seconds;
}

double TimeDd(const std::string& file, size_t block, int count, const char* flag) {
  const auto start = Clock::now();
  auto result = uplink::testing::RunCommand(
      {"/bin/dd", "if=/dev/zero", "of=" + file, "bs=" + std::to_string(block),
       "count=" + std::to_string(count), flag},
      std::chrono::minutes(5));
  const double seconds = Seconds(start);
  std::filesystem::remove(file);
  if (result.exit_code != 0) {
    std::fprintf(stderr, "dd failed: %s\n", result.err.c_str());
    return -1;
  }
  return seconds;
}

// Drops the spool's files from the page cache (they are clean: everything was synced).
void EvictFromPageCache(const std::string& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

struct OpenFigures {
  double milliseconds = 0;
  long hwm_before_kib = 0;
  long hwm_kib = 0;
};

bool RunOpenOnly(const std::string& self, const std::string& dir, OpenFigures* figures) {
  auto result = uplink::testing::RunCommand({self, "--open-only", dir}, std::chrono::minutes(2));
  unsigned long long bytes = 0;
  if (result.exit_code != 0 ||
      std::sscanf(result.out.c_str(), "%lf %ld %ld %llu", &figures->milliseconds,
                  &figures->hwm_before_kib, &figures->hwm_kib, &bytes) != 4) {
    std::fprintf(stderr, "bench_spool --open-only failed: %s\n", result.err.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--open-only") == 0) return OpenOnly(argv[2]);
  std::int64_t rounds = 3;
  bool only_targets = false, skip_open = false;
  uplink::FlagSet flags("bench_spool");
  const std::vector<std::string> args(argv + 1, argv + argc);
  flags.Int("rounds", &rounds, "paired rounds per figure (the median is printed)");
  flags.Bool("only-64k-8", &only_targets, "only the 64 KiB x 8 writers cases (the targets')");
  flags.Bool("skip-open", &skip_open, "skip timing the opening of a full spool");
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::printf("%s", flags.Usage().c_str());
    return 0;
  }
  if (uplink::Status parsed = flags.Parse(args); !parsed.ok() || rounds < 1) {
    std::fprintf(stderr, "%s\n%s",
                 parsed.ok() ? "--rounds must be at least 1" : parsed.ToString().c_str(),
                 flags.Usage().c_str());
    return 2;
  }
  (void)uplink::log::SetMinLevel("error");
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  uplink::testing::TempDir dir;

  struct statvfs space {};
  constexpr std::uint64_t kNeeded = 1200ull << 20;  // a full spool, with room to spare
  if (::statvfs(dir.path().c_str(), &space) != 0 ||
      static_cast<std::uint64_t>(space.f_bavail) * space.f_frsize < kNeeded) {
    std::fprintf(stderr, "bench_spool needs %llu MiB free under %s\n",
                 static_cast<unsigned long long>(kNeeded >> 20), dir.path().c_str());
    return 1;
  }

  struct Case {
    size_t record_bytes;
    int writers;
    int records;
  };
  std::vector<Case> cases = {{64 << 10, 8, 2048}};
  if (!only_targets) {
    cases = {{1 << 10, 1, 1000}, {1 << 10, 8, 4000}, {64 << 10, 1, 256}, {64 << 10, 8, 2048}};
  }
  std::printf("bench_spool: durable appends under %s, on %s (each Append returns after "
              "fdatasync; median of %lld rounds, [range])\n",
              dir.path().c_str(), FileSystemOf(dir.path()).c_str(),
              static_cast<long long>(rounds));
  std::printf("  %-34s %10s %10s %22s %14s %12s %10s %10s %10s\n", "", "records/s", "MB/s", "vs dd fsync",
              "vs dd dsync", "records/sync", "syncing", "vs bound", "CPUs busy");
  // The regimes, all with the agent's options (reserve_disk: the cap is written ahead in idle
  // time after the spool is created, timed below): steady state; a backlog once the cap is
  // held; and a backlog in a spool just created, before idle time has written anything ahead
  // (new files, preallocated), for comparison.
  enum class Regime { kSteady, kBacklog, kBacklogInNewFiles };
  double steady_64k = 0, backlog_64k = 0;
  std::vector<double> write_ahead_s;
  std::uint64_t written_ahead_bytes = 0;
  int run = 0;
  for (Regime regime : {Regime::kSteady, Regime::kBacklog, Regime::kBacklogInNewFiles}) {
    const bool steady = regime == Regime::kSteady;
    const bool overwrites = regime != Regime::kBacklogInNewFiles;
    for (const Case& c : cases) {
      std::vector<double> spool_s, fsync_s, dsync_s, fsync_ratios, dsync_ratios;
      std::vector<double> records_per_sync, syncing_shares, bound_s, bound_ratios, bound_vs_dd;
      std::vector<double> cpus_busy, threaded_s, threaded_ratios, threaded_vs_dd;
      for (int round = 0; round < rounds; ++round) {
        const std::string spool_dir = dir.File("append-" + std::to_string(run++));
        CountingFileSystem counting;
        SpoolOptions options;
        options.reserve_disk = true;
        auto spool = Spool::Open(counting, spool_dir, options, uplink::SystemClock());
        if (!spool.ok()) {
          std::fprintf(stderr, "open failed: %s\n", spool.status().ToString().c_str());
          return 1;
        }
        if (overwrites) {
          const auto start = Clock::now();
          while (true) {
            auto wrote = (*spool)->WriteAhead();
            if (!wrote.ok()) {
              std::fprintf(stderr, "write ahead failed: %s\n", wrote.status().ToString().c_str());
              return 1;
            }
            if (!*wrote) break;
          }
          write_ahead_s.push_back(Seconds(start));
          written_ahead_bytes = (*spool)->Stats().spare_bytes;
        }
        // Steady state: a few segments' worth appended and consumed first, so that the
        // segment files the timed appends reach are recycled ones.
        if (steady && !TimeAppends(**spool, 64 << 10, 8, 512, true).ok) return 1;
        counting.Take();
        AppendResult appended = TimeAppends(**spool, c.record_bytes, c.writers, c.records, steady);
        if (!appended.ok) return 1;
        const CountingFileSystem::Counts counts = counting.Take();
        records_per_sync.push_back(static_cast<double>(c.records) /
                                   static_cast<double>(std::max<std::uint64_t>(counts.syncs, 1)));
        syncing_shares.push_back(counts.sync_seconds / appended.seconds);
        cpus_busy.push_back(appended.cpu_seconds / appended.seconds);
        spool->reset();
        std::filesystem::remove_all(spool_dir);
        const double fsync_seconds =
            TimeDd(dir.File("dd"), c.record_bytes, c.records, "conv=fsync");
        const double dsync_seconds =
            TimeDd(dir.File("dd"), c.record_bytes, c.records, "oflag=dsync");
        const double bound_seconds = TimeGroupCommitLoop(dir.path(), c.record_bytes, c.writers,
                                                         c.records, overwrites, false);
        if (fsync_seconds < 0 || dsync_seconds < 0 || bound_seconds < 0) return 1;
        if (c.writers > 1) {
          const double threaded_seconds = TimeGroupCommitLoop(dir.path(), c.record_bytes, c.writers,
                                                              c.records, overwrites, true);
          if (threaded_seconds < 0) return 1;
          threaded_s.push_back(threaded_seconds);
          threaded_ratios.push_back(threaded_seconds / appended.seconds);
          threaded_vs_dd.push_back(fsync_seconds / threaded_seconds);
        }
        bound_s.push_back(bound_seconds);
        bound_ratios.push_back(bound_seconds / appended.seconds);
        bound_vs_dd.push_back(fsync_seconds / bound_seconds);
        spool_s.push_back(appended.seconds);
        fsync_s.push_back(fsync_seconds);
        dsync_s.push_back(dsync_seconds);
        fsync_ratios.push_back(fsync_seconds / appended.seconds);
        dsync_ratios.push_back(dsync_seconds / appended.seconds);
      }
      const double bytes = static_cast<double>(c.record_bytes) * c.records;
      const double seconds = Median(spool_s);
      const double fsync_ratio = Median(fsync_ratios), dsync_ratio = Median(dsync_ratios);
      char label[64], versus[64];
      std::snprintf(label, sizeof label, "%s: %zu KiB x %d writer%s",
                    steady                       ? "steady"
                    : regime == Regime::kBacklog ? "backlog"
                                                 : "backlog, new files",
                    c.record_bytes >> 10, c.writers, c.writers > 1 ? "s" : "");
      std::snprintf(versus, sizeof versus, "%.1f%% [%.0f-%.0f%%]", fsync_ratio * 100,
                    *std::min_element(fsync_ratios.begin(), fsync_ratios.end()) * 100,
                    *std::max_element(fsync_ratios.begin(), fsync_ratios.end()) * 100);
      std::printf("  %-34s %10.0f %10.1f %22s %13.1f%% %12.1f %9.0f%% %9.1f%% %10.2f\n", label,
                  c.records / seconds, bytes / seconds / 1e6, versus, dsync_ratio * 100,
                  Median(records_per_sync), Median(syncing_shares) * 100,
                  Median(bound_ratios) * 100, Median(cpus_busy));
      std::printf("  %-34s %10s %10.1f %22s %14s\n", "  dd conv=fsync", "",
                  bytes / Median(fsync_s) / 1e6, "", "");
      std::printf("  %-34s %10s %10.1f %22s %14s\n", "  dd oflag=dsync", "",
                  bytes / Median(dsync_s) / 1e6, "", "");
      std::printf("  %-34s %10s %10.1f %21.1f%%\n", "  bound: group commit loop", "",
                  bytes / Median(bound_s) / 1e6, Median(bound_vs_dd) * 100);
      if (!threaded_s.empty()) {
        std::printf("  %-34s %10s %10.1f %21.1f%%   (the spool: %.1f%% of it)\n",
                    "  bound: the same from each writer", "", bytes / Median(threaded_s) / 1e6,
                    Median(threaded_vs_dd) * 100, Median(threaded_ratios) * 100);
      }
      if (c.record_bytes == (64 << 10) && c.writers > 1 && overwrites) {
        (steady ? steady_64k : backlog_64k) = fsync_ratio;
      }
    }
  }
  std::printf("  the cap written ahead after each spool was created: %.0f MiB in %.2f s "
              "(median; the agent does it a segment per idle second)\n",
              static_cast<double>(written_ahead_bytes) / (1 << 20), Median(write_ahead_s));
  std::printf(
      "  64 KiB appends from 8 writers: %.1f%% of dd conv=fsync in steady state, %.1f%% with a "
      "backlog (target >= 80%%): %s, %s\n",
      steady_64k * 100, backlog_64k * 100, steady_64k >= 0.8 ? "met" : "NOT met",
      backlog_64k >= 0.8 ? "met" : "NOT met");
  if (skip_open) return 0;

  // A full spool: 64 KiB records from 8 writers until the cap drops segments.
  const std::string full = dir.File("full");
  {
    auto spool = Spool::Open(PosixFileSystem(), full, {}, uplink::SystemClock());
    if (!spool.ok()) return 1;
    const std::string payload(64 << 10, 'f');
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    std::atomic<bool> failed{false};
    for (int w = 0; w < 8; ++w) {
      threads.emplace_back([&] {
        while (!failed && (*spool)->Stats().losses.dropped.records == 0) {
          if (!(*spool)->Append(payload).ok()) failed = true;
        }
      });
    }
    for (auto& t : threads) t.join();
    if (failed) return 1;
    auto stats = (*spool)->Stats();
    // A few records into the oldest segment: Open must find the first waiting record inside
    // it, and nothing is removed, so the spool stays full.
    if (!(*spool)->Consume(stats.consumed_through + 7).ok()) return 1;
    stats = (*spool)->Stats();
    std::printf(
        "bench_spool: opening a full spool (%.0f MiB in %llu segments, %llu records waiting; "
        "filled in %.1f s)\n",
        static_cast<double>(stats.bytes) / (1 << 20),
        static_cast<unsigned long long>(stats.segments),
        static_cast<unsigned long long>(stats.waiting_records), Seconds(start));
  }
  std::vector<double> warm_ms, cold_ms;
  long hwm = 0, hwm_before = 0;
  for (int round = 0; round < 5; ++round) {
    OpenFigures figures;
    EvictFromPageCache(full);
    if (!RunOpenOnly(self, full, &figures)) return 1;
    cold_ms.push_back(figures.milliseconds);
    hwm = std::max(hwm, figures.hwm_kib);
    hwm_before = std::max(hwm_before, figures.hwm_before_kib);
    if (!RunOpenOnly(self, full, &figures)) return 1;
    warm_ms.push_back(figures.milliseconds);
    hwm = std::max(hwm, figures.hwm_kib);
  }
  std::printf("  open, files in the page cache   %8.1f ms (median of 5)\n", Median(warm_ms));
  std::printf("  open, files evicted from it     %8.1f ms (median of 5)\n", Median(cold_ms));
  std::printf(
      "  peak RSS of the process         %8.1f MiB (%.1f MiB before Open: the binary and its "
      "libraries)\n",
      hwm / 1024.0, hwm_before / 1024.0);
  const double worst_ms = std::max(Median(warm_ms), Median(cold_ms));
  std::printf("  open %.1f ms (target <= 500 ms): %s; peak RSS %.1f MiB (target <= 16 MiB): %s\n",
              worst_ms, worst_ms <= 500 ? "met" : "NOT met", hwm / 1024.0,
              hwm <= 16 * 1024 ? "met" : "NOT met");
  return 0;
}
