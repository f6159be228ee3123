// What the experiments role costs on a large MLflow file store, and what the reference design
// would send for the same store.
//
// A store of --runs runs (10,000) is generated, --metrics metrics (20) of --steps steps
// (1,000) each, one run in ten RUNNING, the rest FINISHED, in the layout `mlflow ui` reads.
// In a child process (so that its peak RSS is its own), the real role scans it into a real
// spool while a consumer thread plays the console (it reads and acknowledges every record at
// once, as a console on loopback would):
//
// 1. The first scan: cycles back to back until nothing is left. Wall time, CPU time, peak RSS,
//    records and bytes spooled.
// 2. An idle re-scan of the unchanged store: one cycle. Wall time, CPU time, bytes spooled.
// 3. The reference design, which re-sends every unfinished run in full each cycle: the bytes
//    of a full scan of the unfinished runs alone (a hard-linked copy of their experiment), in
//    the same encoding, so the two are compared like for like.
//
// Targets (issue 19): idle re-scan <= 1/50 of the first scan's time and < 1 KiB sent; peak RSS
// < 64 MiB.
//
//   bench_experiments [--runs N] [--metrics M] [--steps S] [--dir DIR]
// DIR keeps the generated store between runs (it is made again when the sizes differ).
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "agent/experiments/mlflow_file_store.h"
#include "agent/experiments/role.h"
#include "common/log.h"
#include "spool/file_system.h"
#include "spool/spool.h"
#include "support/process.h"

namespace {

namespace fs = std::filesystem;
namespace ex = uplink::agent::experiments;
using Steady = std::chrono::steady_clock;

struct Sizes {
  long runs = 10'000;
  long metrics = 20;
  long steps = 1'000;
};

double Seconds(Steady::time_point since) {
  return std::chrono::duration<double>(Steady::now() - since).count();
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

long PeakRssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

// Experiment 0 holds the finished runs, experiment 1 the running ones.
void Generate(const std::string& root, const Sizes& sizes) {
  fs::remove_all(root);
  for (const char* id : {"0", "1"}) {
    fs::create_directories(root + "/" + id);
    WriteFile(root + "/" + id + "/meta.yaml",
              std::string("artifact_location: file:///mlruns/") + id + "\nexperiment_id: '" + id +
                  "'\nlifecycle_stage: active\nname: " + (id[0] == '0' ? "sweep" : "live") + "\n");
  }
  // One metric file's text per metric index, shared by every run (the scanner cannot tell).
  std::vector<std::string> metric_text(static_cast<size_t>(sizes.metrics));
  for (long m = 0; m < sizes.metrics; ++m) {
    char line[96];
    for (long step = 0; step < sizes.steps; ++step) {
      int n = std::snprintf(line, sizeof line, "%lld %.17g %ld\n",
                            1'700'000'000'000LL + step * 1000 + m, 1.0 / (step + m + 1.5), step);
      metric_text[static_cast<size_t>(m)].append(line, static_cast<size_t>(n));
    }
  }
  for (long r = 0; r < sizes.runs; ++r) {
    const bool running = r % 10 == 0;
    char id[40];
    std::snprintf(id, sizeof id, "%032lx", r + 1);
    const std::string dir = root + (running ? "/1/" : "/0/") + id;
    fs::create_directories(dir + "/metrics");
    fs::create_directories(dir + "/params");
    fs::create_directories(dir + "/tags");
    WriteFile(dir + "/meta.yaml",
              std::string("artifact_uri: file:///mlruns/x/") + id + "/artifacts\nend_time: " +
                  (running ? "null" : "1700000999000") + "\nentry_point_name: ''\nexperiment_id: '" +
                  (running ? "1" : "0") + "'\nlifecycle_stage: active\nname: ''\nrun_id: " + id +
                  "\nrun_uuid: " + id + "\nsource_type: 4\nstart_time: " +
                  std::to_string(1'700'000'000'000LL + r) + "\nstatus: " + (running ? "1" : "3") +
                  "\ntags: []\nuser_id: bench\n");
    WriteFile(dir + "/params/lr", "0.001");
    WriteFile(dir + "/params/batch_size", "256");
    WriteFile(dir + "/params/seed", std::to_string(r));
    WriteFile(dir + "/tags/mlflow.user", "bench");
    WriteFile(dir + "/tags/mlflow.runName", std::string("run-") + std::to_string(r));
    for (long m = 0; m < sizes.metrics; ++m) {
      WriteFile(dir + "/metrics/metric_" + std::to_string(m), metric_text[static_cast<size_t>(m)]);
    }
  }
}

struct Scanned {
  double wall = 0;
  double cpu = 0;
  std::uint64_t bytes = 0;
  std::uint64_t records = 0;
  std::uint64_t points = 0;
  std::uint64_t runs = 0;
  int cycles = 0;
};

// Cycles until nothing is left (at most `max_cycles`).
Scanned Scan(ex::ExperimentsRole& role, int max_cycles) {
  Scanned scanned;
  const auto start = Steady::now();
  const double cpu = CpuSeconds();
  for (int i = 0; i < max_cycles; ++i) {
    ex::CycleResult cycle = role.RunCycle();
    ++scanned.cycles;
    scanned.bytes += cycle.counts.bytes;
    scanned.records += cycle.counts.records;
    scanned.points += cycle.counts.points;
    scanned.runs += cycle.counts.runs;
    if (!cycle.status.ok()) {
      std::fprintf(stderr, "cycle failed: %s\n", cycle.status.ToString().c_str());
      break;
    }
    if (!cycle.more) break;
  }
  scanned.wall = Seconds(start);
  scanned.cpu = CpuSeconds() - cpu;
  return scanned;
}

// The child: scans `store` with a spool and cursor in `state`; prints the figures.
int ScanOnly(const std::string& store, const std::string& state) {
  (void)uplink::log::SetMinLevel("warn");  // a constant level: cannot fail
  auto spool = uplink::spool::Spool::Open(uplink::spool::PosixFileSystem(), state + "/spool", {},
                                          uplink::SystemClock());
  if (!spool.ok()) {
    std::fprintf(stderr, "spool: %s\n", spool.status().ToString().c_str());
    return 1;
  }
  // The console: every record read is acknowledged at once.
  std::atomic<bool> done{false};
  std::thread console([&] {
    while (!done) {
      auto records = (*spool)->Read(8 << 20, 10'000);
      if (!records.ok() || records->empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      (void)(*spool)->Consume(records->back().sequence, {});
    }
  });
  uplink::metrics::Registry registry;
  ex::DeclareExperimentsMetrics(registry);
  ex::SpoolSink sink(**spool);
  std::vector<std::unique_ptr<ex::Scanner>> scanners;
  scanners.push_back(std::make_unique<ex::MlflowFileStoreScanner>(store));
  ex::RoleOptions options;
  options.cursor_path = state + "/cursor";
  ex::ExperimentsRole role(options, std::move(scanners), sink, spool->get(), uplink::SystemClock(),
                           registry);
  role.LoadCursor();
  const Scanned first = Scan(role, 1'000'000);
  const long first_peak = PeakRssKib();
  // Let the console catch up, then one cycle settles what it acknowledged.
  while ((*spool)->Stats().consumed_through < (*spool)->Stats().last_sequence) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const Scanned settle = Scan(role, 1);
  const Scanned idle = Scan(role, 1);
  done = true;
  console.join();
  std::printf("%.3f %.3f %llu %llu %llu %llu %d %ld %.4f %.4f %llu %ld\n", first.wall, first.cpu,
              static_cast<unsigned long long>(first.bytes),
              static_cast<unsigned long long>(first.records),
              static_cast<unsigned long long>(first.points),
              static_cast<unsigned long long>(first.runs), first.cycles, first_peak, idle.wall,
              idle.cpu, static_cast<unsigned long long>(idle.bytes + settle.bytes),
              static_cast<long>(fs::file_size(state + "/cursor")));
  return 0;
}

// The reference design's bytes per cycle: every unfinished run in full.
std::uint64_t ReferenceBytes(const std::string& store, const std::string& work) {
  const std::string root = work + "/reference";
  fs::remove_all(root);
  fs::create_directories(root);
  // A hard-linked copy of the running runs' experiment: costs no data.
  fs::copy(store + "/1", root + "/1", fs::copy_options::recursive | fs::copy_options::create_hard_links);
  uplink::metrics::Registry registry;
  ex::DeclareExperimentsMetrics(registry);
  struct CountingSink : ex::RecordSink {
    std::uint64_t bytes = 0;
    std::uint64_t sequence = 0;
    uplink::Result<std::uint64_t> Append(std::string_view payload) override {
      bytes += payload.size();
      return ++sequence;
    }
  } sink;
  std::vector<std::unique_ptr<ex::Scanner>> scanners;
  scanners.push_back(std::make_unique<ex::MlflowFileStoreScanner>(root));
  ex::RoleOptions options;
  options.limits.max_runs_per_cycle = 1'000'000;
  options.limits.max_read_bytes_per_cycle = std::int64_t{1} << 40;
  ex::ExperimentsRole role(options, std::move(scanners), sink, nullptr, uplink::SystemClock(),
                           registry);
  Scan(role, 1'000);
  fs::remove_all(root);
  return sink.bytes;
}

}  // namespace

int main(int argc, char** argv) {
  (void)uplink::log::SetMinLevel("warn");  // a constant level: cannot fail
  if (argc == 4 && std::strcmp(argv[1], "--scan-only") == 0) return ScanOnly(argv[2], argv[3]);
  Sizes sizes;
  std::string dir = (fs::temp_directory_path() / "uplink-bench-experiments").string();
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--runs") sizes.runs = std::atol(argv[i + 1]);
    else if (flag == "--metrics") sizes.metrics = std::atol(argv[i + 1]);
    else if (flag == "--steps") sizes.steps = std::atol(argv[i + 1]);
    else if (flag == "--dir") dir = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--runs N] [--metrics M] [--steps S] [--dir DIR]\n", argv[0]);
      return 2;
    }
  }
  const std::string store = dir + "/mlruns";
  const std::string marker = dir + "/sizes";
  const std::string wanted = std::to_string(sizes.runs) + " " + std::to_string(sizes.metrics) +
                             " " + std::to_string(sizes.steps);
  fs::create_directories(dir);
  if (uplink::testing::ReadFileOrEmpty(marker) != wanted) {
    std::printf("generating %ld runs x %ld metrics x %ld steps in %s ...\n", sizes.runs,
                sizes.metrics, sizes.steps, store.c_str());
    std::fflush(stdout);
    const auto start = Steady::now();
    Generate(store, sizes);
    WriteFile(marker, wanted);
    std::printf("  generated in %.1f s\n", Seconds(start));
  }
  std::uintmax_t store_bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(store)) {
    if (entry.is_regular_file()) store_bytes += entry.file_size();
  }
  const std::string state = dir + "/state";
  fs::remove_all(state);
  fs::create_directories(state);
  // The page cache is left as generating the store left it: dropping it would slow every
  // other process on the machine.
  auto child = uplink::testing::RunCommand({argv[0], "--scan-only", store, state},
                                           std::chrono::hours(2));
  if (child.exit_code != 0) {
    std::fprintf(stderr, "the scan failed:\n%s\n", child.err.c_str());
    return 1;
  }
  double first_wall = 0, first_cpu = 0, idle_wall = 0, idle_cpu = 0;
  unsigned long long first_bytes = 0, records = 0, points = 0, runs = 0, idle_bytes = 0;
  int cycles = 0;
  long peak = 0, cursor_bytes = 0;
  if (std::sscanf(child.out.c_str(), "%lf %lf %llu %llu %llu %llu %d %ld %lf %lf %llu %ld",
                  &first_wall, &first_cpu, &first_bytes, &records, &points, &runs, &cycles, &peak,
                  &idle_wall, &idle_cpu, &idle_bytes, &cursor_bytes) != 12) {
    std::fprintf(stderr, "unexpected child output: %s\n", child.out.c_str());
    return 1;
  }
  const std::uint64_t reference = ReferenceBytes(store, dir);
  fs::remove_all(state);

  std::printf("experiments role on a generated MLflow file store\n");
  std::printf("  store: %ld runs (%ld running), %ld metrics x %ld steps each, %.1f GB on disk\n",
              sizes.runs, (sizes.runs + 9) / 10, sizes.metrics, sizes.steps, store_bytes / 1e9);
  std::printf("  first scan:   %.1f s wall, %.1f s CPU, %d cycles, peak RSS %.1f MiB "
              "(target < 64 MiB)\n",
              first_wall, first_cpu, cycles, peak / 1024.0);
  std::printf("                %llu runs, %llu points, %llu records, %.1f MB spooled\n", runs,
              points, records, first_bytes / 1e6);
  std::printf("  idle re-scan: %.3f s wall, %.3f s CPU, %llu bytes sent (target < 1024)\n",
              idle_wall, idle_cpu, idle_bytes);
  std::printf("                1/%.0f of the first scan's time (target 1/50 or less)\n",
              idle_wall > 0 ? first_wall / idle_wall : 0.0);
  std::printf("  cursor file:  %.1f KiB for %ld runs\n", cursor_bytes / 1024.0, sizes.runs);
  std::printf("  reference design (every unfinished run re-sent in full each cycle): %.1f MB per "
              "cycle; this design: %llu bytes per idle cycle\n",
              reference / 1e6, idle_bytes);
  return 0;
}
