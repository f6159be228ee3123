// The node role parses /proc files of hosts it does not control, and renders what it parsed
// for Prometheus and the console. Whatever bytes a file holds, every parser must answer
// (never crash, hang or read past the text), keep only entries within its bounds, and the
// payload built from what it kept must be JSON the console's parser accepts.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/node/format/payload.h"
#include "agent/node/format/prometheus.h"
#include "agent/node/host/proc_parsers.h"
#include "common/json.h"
#include "fuzz_check.h"

namespace {

using namespace uplink::agent::node;

template <typename T>
void CheckProblems(const Parsed<T>& parsed) {
  FUZZ_CHECK(parsed.problems.size() <= kMaxLineProblems);
  FUZZ_CHECK(parsed.problems.size() <= parsed.skipped_lines);
  for (const LineProblem& problem : parsed.problems) {
    FUZZ_CHECK(problem.line >= 1);
    FUZZ_CHECK(!problem.reason.empty());
  }
}

bool Finite(const CpuTimes& t) {
  for (double v : {t.user, t.nice, t.system, t.idle, t.iowait, t.irq, t.softirq, t.steal, t.guest,
                   t.guest_nice}) {
    if (!std::isfinite(v) || v < 0) return false;
  }
  return true;
}

bool NoNul(std::string_view s) { return s.find('\0') == std::string_view::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  NodeSample sample;
  sample.node = "fuzz";
  sample.collected = CollectorSet::All();

  if (auto stat = ParseProcStat(text); stat.ok()) {
    CheckProblems(*stat);
    FUZZ_CHECK(Finite(stat->value.total));
    for (const PerCpuTimes& cpu : stat->value.per_cpu) {
      FUZZ_CHECK(cpu.cpu >= 0);
      FUZZ_CHECK(Finite(cpu.times));
    }
    FUZZ_CHECK(stat->value.boot_time >= 0);
    sample.cpu = stat->value;
  }
  if (auto memory = ParseMeminfo(text); memory.ok()) {
    CheckProblems(*memory);
    FUZZ_CHECK(!memory->value.fields.empty());
    for (const MeminfoField& field : memory->value.fields) {
      FUZZ_CHECK(!field.name.empty() && field.name.size() <= kMaxDeviceName);
      FUZZ_CHECK(NoNul(field.name));
    }
    sample.memory = memory->value;
  }
  if (auto load = ParseLoadavg(text); load.ok()) {
    FUZZ_CHECK(std::isfinite(load->load1) && std::isfinite(load->load15) && load->load5 >= 0);
    sample.load = *load;
  }
  if (auto uptime = ParseUptime(text); uptime.ok()) {
    FUZZ_CHECK(std::isfinite(*uptime) && *uptime >= 0);
    sample.uptime_seconds = *uptime;
  }
  if (auto pressure = ParsePressure(text); pressure.ok()) {
    CheckProblems(*pressure);
    FUZZ_CHECK(pressure->value.some || pressure->value.full);
    Pressure all;
    all.cpu_some = all.memory_some = all.io_some = pressure->value.some;
    all.cpu_full = all.memory_full = all.io_full = pressure->value.full;
    sample.pressure = all;
  }
  if (auto network = ParseNetDev(text); network.ok()) {
    CheckProblems(*network);
    for (const NetDevice& device : network->value) {
      FUZZ_CHECK(!device.device.empty() && device.device.size() <= kMaxDeviceName);
      FUZZ_CHECK(NoNul(device.device));
    }
    sample.network = network->value;
  }
  if (auto disks = ParseDiskstats(text); disks.ok()) {
    CheckProblems(*disks);
    for (const DiskStats& disk : disks->value) {
      FUZZ_CHECK(disk.device.size() <= kMaxDeviceName && NoNul(disk.device));
      FUZZ_CHECK(!disk.flushes_completed || disk.discards_completed);
    }
    sample.disks = disks->value;
  }
  if (auto mounts = ParseMountinfo(text); mounts.ok()) {
    CheckProblems(*mounts);
    FUZZ_CHECK(!mounts->value.empty());
    for (const Mount& mount : mounts->value) {
      FUZZ_CHECK(!mount.mount_point.empty() && mount.mount_point.front() == '/');
      FUZZ_CHECK(mount.mount_point.size() <= kMaxMountPath && NoNul(mount.mount_point));
      FUZZ_CHECK(!mount.fstype.empty() && mount.fstype.size() <= kMaxDeviceName);
      Filesystem filesystem;
      filesystem.device = mount.source;
      filesystem.mountpoint = mount.mount_point;
      filesystem.fstype = mount.fstype;
      filesystem.readonly = mount.readonly;
      sample.filesystems.push_back(filesystem);
    }
  }
  // The raw input as every free-form string too: names and errors reach both formats.
  sample.gaps.push_back({"fuzz", std::string(text), std::string(text), 0});

  const std::string payload = RenderPayload(sample);
  auto parsed = uplink::ParseJson(payload, {.max_bytes = 64 << 20});
  FUZZ_CHECK(parsed.ok());
  FUZZ_CHECK(parsed->is_object());

  std::string exposition;
  RenderPrometheus(sample, exposition);
  FUZZ_CHECK(exposition.empty() || exposition.back() == '\n');
  return 0;
}
