// bench_workspace: how fast `uplink-agent workspace` turns reservations into running
// workspaces and stopped ones into deleted pods, and what it costs.
//
// Real processes on loopback: uplink-kubesim (--runtime process: every workspace a local
// process; a known --pod-start-delay), the chart's namespace guards, the controller with its
// deployed defaults, and the console's side of the workspace contract played by the
// controller tests' console stand-in (tests/agent/workspace), which holds a sync while
// nothing changes, as the contract's long poll does.
//
// 1. N reservations handed out at once (1 GPU each, spread over the nodes): reservation
//    handed out -> pod Running, as the controller reports it (its `running` event reaching
//    the console) and as kubesim sees it (a pod list every 50 ms), p50 and p99, less the
//    simulated pod start. Then all N stopped at once: stop handed out -> the `completed`
//    event (sent once the controller sees the pod gone) and -> the pod gone from kubesim's
//    list.
// 2. The controller's peak RSS (VmHWM) and CPU seconds (utime + stime) per reservation, over
//    its whole run.
// 3. The baseline in the same run: the reference design (peers.md), one booking at a time,
//    a kubectl process per step (create, then `kubectl get` until Running; delete --wait),
//    against the same kubesim with the same pods, the same N bookings arriving at once.
//
// --smoke (in `make test`) runs small counts and checks only that every reservation reached
// Running and was deleted, by both designs; it never judges a time.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/workspace/config.h"
#include "agent/workspace/pod_spec.h"
#include "common/files.h"
#include "common/flags.h"
#include "common/json.h"
#include "kube/client.h"
#include "kube/credentials.h"
#include "workspace_cluster.h"

namespace {

using namespace std::chrono_literals;
using uplink::agent::workspace::testing::ClusterOptions;
using uplink::agent::workspace::testing::ConsoleStandIn;
using uplink::agent::workspace::testing::WorkspaceCluster;
using SteadyClock = std::chrono::steady_clock;
using Instant = SteadyClock::time_point;

double Ms(SteadyClock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[index];
}

std::string ReservationId(int i) {
  char id[32];
  std::snprintf(id, sizeof id, "res_%016x", i + 1);
  return id;
}

std::string NodeName(int i, int nodes) {
  char name[32];
  std::snprintf(name, sizeof name, "gpu-node-%04d", i % nodes + 1);
  return name;
}

// Kubesim's own view: the workspace namespace's pods listed every 50 ms; when each was first
// seen Running and first seen gone.
class PodWatcher {
 public:
  PodWatcher(std::unique_ptr<uplink::kube::KubeClient> client, std::string ns)
      : client_(std::move(client)), path_("/api/v1/namespaces/" + ns + "/pods") {
    thread_ = std::thread([this] { Loop(); });
  }
  ~PodWatcher() {
    stop_ = true;
    thread_.join();
  }
  std::optional<Instant> RunningAt(const std::string& pod) const { return Find(running_, pod); }
  std::optional<Instant> GoneAt(const std::string& pod) const { return Find(gone_, pod); }

 private:
  std::optional<Instant> Find(const std::map<std::string, Instant>& map,
                              const std::string& pod) const {
    std::lock_guard lock(mutex_);
    auto it = map.find(pod);
    return it == map.end() ? std::nullopt : std::optional<Instant>(it->second);
  }
  void Loop() {
    while (!stop_) {
      auto pods = client_->ListObjects(path_);
      const Instant now = SteadyClock::now();
      if (pods.ok()) {
        std::set<std::string> present;
        std::lock_guard lock(mutex_);
        for (const uplink::json::value& pod : *pods) {
          const std::string name(pod.at("metadata").at("name").as_string());
          present.insert(name);
          const auto* status = pod.as_object().if_contains("status");
          const auto* phase = status && status->is_object() ? status->as_object().if_contains("phase")
                                                             : nullptr;
          if (phase && phase->is_string() && phase->as_string() == "Running") {
            running_.emplace(name, now);
          }
          seen_.insert(name);
        }
        for (const std::string& name : seen_) {
          if (!present.contains(name)) gone_.emplace(name, now);
        }
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  std::unique_ptr<uplink::kube::KubeClient> client_;
  const std::string path_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::set<std::string> seen_;
  std::map<std::string, Instant> running_, gone_;
  std::thread thread_;
};

struct ProcessUsage {
  double peak_rss_mib = 0;
  double cpu_seconds = 0;
};

// VmHWM from /proc/PID/status, utime + stime from /proc/PID/stat.
ProcessUsage UsageOf(pid_t pid) {
  ProcessUsage usage;
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string status = uplink::testing::ReadFileOrEmpty(proc + "/status");
  if (size_t at = status.find("VmHWM:"); at != std::string::npos) {
    usage.peak_rss_mib = std::stod(status.substr(at + 6)) / 1024;  // kB
  }
  const std::string stat = uplink::testing::ReadFileOrEmpty(proc + "/stat");
  // Fields after the command name (which may hold spaces), from field 3 on.
  if (size_t paren = stat.rfind(')'); paren != std::string::npos) {
    std::vector<std::string> fields;
    std::string field;
    for (char c : stat.substr(paren + 2)) {
      if (c == ' ') {
        fields.push_back(field);
        field.clear();
      } else {
        field += c;
      }
    }
    if (fields.size() > 12) {  // utime is field 14, stime 15
      usage.cpu_seconds = (std::stod(fields[11]) + std::stod(fields[12])) /
                          static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  return usage;
}

double ChildrenCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct Figures {
  std::vector<double> running_reported, running_kubesim;  // ms, less the simulated start
  std::vector<double> deleted_reported, deleted_kubesim;  // ms
  int incomplete = 0;  // reservations that did not reach Running or were not deleted
  double seconds = 0;  // the whole run, first handed out to last deleted
};

void PrintRow(const char* what, const std::vector<double>& values) {
  std::printf("  %-58s %10.0f %10.0f\n", what, Percentile(values, 0.5), Percentile(values, 0.99));
}

class Bench {
 public:
  Bench(int reservations, int nodes, std::chrono::milliseconds start_delay)
      : reservations_(reservations), nodes_(nodes), start_delay_(start_delay) {}

  bool Start() {
    ClusterOptions options;
    options.nodes = nodes_;
    options.gpus_per_node = (reservations_ + nodes_ - 1) / nodes_;
    options.capacity_gpus = reservations_;
    options.pod_start_delay = std::to_string(start_delay_.count()) + "ms";
    options.fast_loops = false;
    std::string error;
    cluster_ = WorkspaceCluster::Start(options, &error);
    if (!cluster_) return Fail("the cluster did not start: " + error);
    auto credentials = uplink::kube::LoadKubeconfig(cluster_->kubesim().kubeconfig());
    if (!credentials.ok()) return Fail(credentials.status().ToString());
    auto client = uplink::kube::KubeClient::Create(*credentials);
    if (!client.ok()) return Fail(client.status().ToString());
    watcher_ = std::make_unique<PodWatcher>(std::move(client).value(), cluster_->ns());
    auto config = uplink::agent::workspace::ParseExecutionConfig(
        uplink::testing::ReadFileOrEmpty(cluster_->config_path()));
    if (!config.ok()) return Fail(config.status().ToString());
    config_ = std::move(config).value();
    return true;
  }

  // Reservation `index` (1 GPU, an hour) on the nodes in turn; the reference design's
  // bookings take the indices after the controller's, so that their pods have names of their own.
  uplink::agent::workspace::DesiredReservation Reservation(int index) const {
    auto reservation = cluster_->Reservation(ReservationId(index), 1, 3600);
    reservation.node = NodeName(index, nodes_);
    return reservation;
  }

  // The controller: every reservation handed out at once, then every one stopped at once.
  bool RunController(Figures& figures, ProcessUsage& usage) {
    cluster_->StartController();
    ConsoleStandIn& console = cluster_->console();
    // Started and idle (its first sync held) before the reservations arrive.
    if (!uplink::testing::WaitFor([&] { return console.Syncs() >= 1; }, 60s)) {
      return Fail("the controller never synced:\n" + cluster_->ControllerLogs());
    }
    const Instant began = SteadyClock::now();
    for (int i = 0; i < reservations_; ++i) console.Reserve(Reservation(i));
    auto all_in = [&](const char* state) {
      for (int i = 0; i < reservations_; ++i) {
        if (!console.TimelineOf(ReservationId(i)).events.contains(state)) return false;
      }
      return true;
    };
    if (!uplink::testing::WaitFor([&] { return all_in("running"); }, 300s)) {
      std::fprintf(stderr, "bench_workspace: not every reservation reached running\n");
    }
    for (int i = 0; i < reservations_; ++i) console.Stop(ReservationId(i));
    if (!uplink::testing::WaitFor([&] { return all_in("completed"); }, 300s)) {
      std::fprintf(stderr, "bench_workspace: not every reservation completed\n");
    }
    // kubesim's view catches up (its list runs every 50 ms).
    (void)uplink::testing::WaitFor([&] {
      for (int i = 0; i < reservations_; ++i) {
        if (!watcher_->GoneAt(uplink::agent::workspace::PodNameFor(ReservationId(i)))) return false;
      }
      return true;
    }, 30s);
    usage = UsageOf(cluster_->ControllerPid());
    Instant last = began;
    for (int i = 0; i < reservations_; ++i) {
      const std::string pod = uplink::agent::workspace::PodNameFor(ReservationId(i));
      ConsoleStandIn::Timeline timeline = console.TimelineOf(ReservationId(i));
      auto running = timeline.events.find("running");
      auto completed = timeline.events.find("completed");
      std::optional<Instant> kube_running = watcher_->RunningAt(pod);
      std::optional<Instant> kube_gone = watcher_->GoneAt(pod);
      if (!timeline.handed_out || !timeline.stop_handed_out || running == timeline.events.end() ||
          completed == timeline.events.end() || !kube_running || !kube_gone) {
        ++figures.incomplete;
        continue;
      }
      figures.running_reported.push_back(Ms(running->second - *timeline.handed_out - start_delay_));
      figures.running_kubesim.push_back(Ms(*kube_running - *timeline.handed_out - start_delay_));
      figures.deleted_reported.push_back(Ms(completed->second - *timeline.stop_handed_out));
      figures.deleted_kubesim.push_back(Ms(*kube_gone - *timeline.stop_handed_out));
      last = std::max({last, completed->second, *kube_gone});
    }
    figures.seconds = std::chrono::duration<double>(last - began).count();
    if (cluster_->StopController() != 0) return Fail("the controller did not stop cleanly");
    return true;
  }

  // The reference design: the bookings arrive at once and are handled one by one, each step a
  // kubectl process (with a kept discovery cache, as a long-running controller would have).
  bool RunPeer(int bookings, Figures& figures, double& cpu_seconds) {
    const double cpu_before = ChildrenCpuSeconds();
    const Instant began = SteadyClock::now();
    std::vector<Instant> running(bookings), deleted(bookings);
    std::vector<bool> ok(bookings, true);
    auto pod_of = [&](int i) {
      return uplink::agent::workspace::PodNameFor(ReservationId(reservations_ + i));
    };
    for (int i = 0; i < bookings; ++i) {
      const std::string pod = pod_of(i);
      auto object = uplink::agent::workspace::BuildWorkspacePod(config_, Reservation(reservations_ + i),
                                                                uplink::SystemClock().Now());
      if (!object.ok()) return Fail(object.status().ToString());
      if (Kubectl({"create", "-f", "-"}, uplink::ToJson(*object)).exit_code != 0) {
        ok[i] = false;
        continue;
      }
      const Instant deadline = SteadyClock::now() + 60s;
      while (Kubectl({"get", "pod", pod, "-n", cluster_->ns(), "-o", "jsonpath={.status.phase}"})
                 .out != "Running") {
        if (SteadyClock::now() > deadline) {
          ok[i] = false;
          break;
        }
      }
      running[i] = SteadyClock::now();
    }
    const Instant stopped = SteadyClock::now();
    for (int i = 0; i < bookings; ++i) {
      const std::string pod = pod_of(i);
      if (Kubectl({"delete", "pod", pod, "-n", cluster_->ns(), "--wait=true"}).exit_code != 0) {
        ok[i] = false;
      }
      deleted[i] = SteadyClock::now();
    }
    for (int i = 0; i < bookings; ++i) {
      if (!ok[i] || !watcher_->RunningAt(pod_of(i))) {
        ++figures.incomplete;
        continue;
      }
      figures.running_reported.push_back(Ms(running[i] - began - start_delay_));
      figures.deleted_reported.push_back(Ms(deleted[i] - stopped));
    }
    figures.seconds = std::chrono::duration<double>(SteadyClock::now() - began).count();
    cpu_seconds = ChildrenCpuSeconds() - cpu_before;
    // Gone as kubesim sees it, too.
    if (!uplink::testing::WaitFor([&] {
          for (int i = 0; i < bookings; ++i) {
            if (!watcher_->GoneAt(pod_of(i))) return false;
          }
          return true;
        }, 30s)) {
      return Fail("the reference design's pods were not all deleted");
    }
    return true;
  }

 private:
  uplink::testing::CommandResult Kubectl(const std::vector<std::string>& args,
                                         const std::string& stdin_data = "") {
    std::vector<std::string> argv = {"/usr/bin/kubectl", "--kubeconfig",
                                     cluster_->kubesim().kubeconfig(), "--cache-dir",
                                     kubectl_home_.path() + "/cache"};
    argv.insert(argv.end(), args.begin(), args.end());
    return uplink::testing::RunCommand(
        argv, 60s, uplink::testing::EnvWith({{"HOME", kubectl_home_.path()}, {"KUBECONFIG", ""}}),
        stdin_data);
  }
  bool Fail(const std::string& what) {
    std::fprintf(stderr, "bench_workspace: %s\n", what.c_str());
    return false;
  }

  const int reservations_, nodes_;
  const std::chrono::milliseconds start_delay_;
  std::unique_ptr<WorkspaceCluster> cluster_;
  std::unique_ptr<PodWatcher> watcher_;
  uplink::agent::workspace::ExecutionConfig config_;
  uplink::testing::TempDir kubectl_home_;
};

}  // namespace

int main(int argc, char** argv) {
  std::int64_t reservations = 100, nodes = 50, peer_bookings = -1;
  std::chrono::milliseconds start_delay = 1000ms;
  bool smoke = false;
  uplink::FlagSet flags("bench_workspace");
  flags.Int("reservations", &reservations, "reservations handed out at once (1 GPU each)");
  flags.Int("nodes", &nodes, "kubesim nodes, approved, the reservations spread over them");
  flags.Duration("pod-start-delay", &start_delay, "kubesim's simulated pod start");
  flags.Int("peer-bookings", &peer_bookings,
            "bookings for the reference design (default: as many as reservations)");
  flags.Bool("smoke", &smoke, "check that everything ran and was deleted; judge no time");
  if (uplink::Status parsed = flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
      !parsed.ok() || reservations < 1 || nodes < 1) {
    std::fprintf(stderr, "bench_workspace: %s\n",
                 parsed.ok() ? "--reservations and --nodes must be at least 1"
                             : parsed.ToString().c_str());
    return 2;
  }
  if (peer_bookings < 0) peer_bookings = reservations;

  Bench bench(static_cast<int>(reservations), static_cast<int>(nodes), start_delay);
  if (!bench.Start()) return 1;
  Figures controller, peer;
  ProcessUsage usage;
  double peer_cpu = 0;
  if (!bench.RunController(controller, usage)) return 1;
  if (peer_bookings > 0 && !bench.RunPeer(static_cast<int>(peer_bookings), peer, peer_cpu)) return 1;

  std::printf("bench_workspace: %lld reservations at once on a %lld-node uplink-kubesim "
              "(--runtime process, --pod-start-delay %lld ms); %ld CPU cores shared with "
              "whatever else runs\n",
              static_cast<long long>(reservations), static_cast<long long>(nodes),
              static_cast<long long>(start_delay.count()), sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("  %-58s %10s %10s\n", "uplink-agent workspace", "p50 ms", "p99 ms");
  PrintRow("handed out -> Running, reported, less the pod start", controller.running_reported);
  PrintRow("handed out -> Running, kubesim (50 ms list), less pod start",
           controller.running_kubesim);
  // `completed` goes to the console once the controller's pod list shows the pod gone.
  PrintRow("stop handed out -> completed reported (pod gone)", controller.deleted_reported);
  PrintRow("stop handed out -> pod gone, kubesim (50 ms list)", controller.deleted_kubesim);
  std::printf("  controller: peak RSS %.1f MiB, %.1f ms CPU per reservation (%.2f s CPU in all, "
              "%.1f s from first reservation to last deletion)\n",
              usage.peak_rss_mib, usage.cpu_seconds * 1000 / static_cast<double>(reservations),
              usage.cpu_seconds, controller.seconds);
  if (peer_bookings > 0) {
    std::printf("  %-58s %10s %10s\n", "reference design (one booking at a time, kubectl each step)",
                "p50 ms", "p99 ms");
    PrintRow("handed out -> Running, less the pod start", peer.running_reported);
    PrintRow("stop -> pod gone (kubectl delete --wait returned)", peer.deleted_reported);
    std::printf("  reference design: %.1f ms CPU per booking in kubectl processes, %.1f s in all\n",
                peer_cpu * 1000 / static_cast<double>(peer_bookings), peer.seconds);
    // Against the same pod start: the whole time to Running, pod start included.
    const double delay = static_cast<double>(start_delay.count());
    std::printf("  to Running p50: the reference design takes %.1fx as long; p99 %.1fx; "
                "to deleted p99 %.1fx\n",
                (Percentile(peer.running_reported, 0.5) + delay) /
                    (Percentile(controller.running_reported, 0.5) + delay),
                (Percentile(peer.running_reported, 0.99) + delay) /
                    (Percentile(controller.running_reported, 0.99) + delay),
                // kubectl delete --wait returns when the pod is gone: against kubesim's view.
                Percentile(peer.deleted_reported, 0.99) /
                    std::max(1.0, Percentile(controller.deleted_kubesim, 0.99)));
  }
  if (!smoke) {
    const double p99 = Percentile(controller.running_reported, 0.99);
    std::printf("  aims: p99 to Running beyond the pod start %.0f ms (aim < 2000 ms): %s; "
                "peak RSS %.1f MiB (aim < 32 MiB): %s\n",
                p99, p99 < 2000 ? "met" : "NOT met", usage.peak_rss_mib,
                usage.peak_rss_mib < 32 ? "met" : "NOT met");
  }
  if (controller.incomplete > 0 || peer.incomplete > 0) {
    std::fprintf(stderr,
                 "bench_workspace: %d reservations (controller) and %d bookings (reference) did "
                 "not reach Running or were not deleted\n",
                 controller.incomplete, peer.incomplete);
    return 1;
  }
  return 0;
}
