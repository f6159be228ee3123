#include "agent/node/host/proc_parsers.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>

#include "common/decimal.h"
#include "common/text.h"

namespace uplink::agent::node {
namespace {

// /proc/stat counts CPU time in USER_HZ ticks, which the kernel fixes at 100 for user space.
constexpr double kUserHz = 100;
constexpr std::uint64_t kMaxCpuId = 1u << 20;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The lines of a file, '\n' excluded; a last line without '\n' counts too.
class Lines {
 public:
  explicit Lines(std::string_view text) : rest_(text) {}
  bool Next(std::string_view& line) {
    if (rest_.empty()) return false;
    const std::size_t end = rest_.find('\n');
    if (end == std::string_view::npos) {
      line = rest_;
      rest_ = {};
    } else {
      line = rest_.substr(0, end);
      rest_.remove_prefix(end + 1);
    }
    ++number_;
    return true;
  }
  std::size_t number() const { return number_; }

 private:
  std::string_view rest_;
  std::size_t number_ = 0;
};

// Whitespace-separated fields of one line, taken one at a time so a line of 10,000 fields
// costs no more than reading it.
class Fields {
 public:
  explicit Fields(std::string_view line) : rest_(line) {}
  bool Next(std::string_view& field) {
    std::size_t begin = 0;
    while (begin < rest_.size() && IsSpace(rest_[begin])) ++begin;
    if (begin == rest_.size()) return false;
    std::size_t end = begin;
    while (end < rest_.size() && !IsSpace(rest_[end])) ++end;
    field = rest_.substr(begin, end - begin);
    rest_.remove_prefix(end);
    return true;
  }
  bool AtEnd() const { return Trim(rest_).empty(); }

 private:
  std::string_view rest_;
};

// Fields separated by exactly one space, as mountinfo prints them (an empty source is an
// empty field there, not a missing one).
class SpaceSeparated {
 public:
  explicit SpaceSeparated(std::string_view line) : rest_(line) {}
  bool Next(std::string_view& field) {
    if (done_) return false;
    const std::size_t end = rest_.find(' ');
    if (end == std::string_view::npos) {
      field = rest_;
      done_ = true;
    } else {
      field = rest_.substr(0, end);
      rest_.remove_prefix(end + 1);
    }
    return true;
  }

 private:
  std::string_view rest_;
  bool done_ = false;
};

// A finite number >= 0 in plain or exponent notation ("0.52", "1e3"); "inf", "nan" and signs
// are refused.
std::optional<double> ParseNonNegative(std::string_view s) {
  if (s.empty() || !((s.front() >= '0' && s.front() <= '9') || s.front() == '.')) {
    return std::nullopt;
  }
  return ParseFiniteDouble(s);
}

std::string Quoted(std::string_view field) { return "'" + OneLineExcerpt(field, 40) + "'"; }

std::string NotACount(std::string_view what, std::string_view field) {
  return std::string(what) + " " + Quoted(field) + " is not a count (digits, at most 2^64-1)";
}

bool HasControlByte(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

bool HasOption(std::string_view options, std::string_view wanted) {
  while (true) {
    const std::size_t comma = options.find(',');
    if (options.substr(0, comma) == wanted) return true;
    if (comma == std::string_view::npos) return false;
    options.remove_prefix(comma + 1);
  }
}

std::string KeyText(std::string_view key) { return Quoted(key); }
std::string KeyText(int key) { return std::to_string(key); }

class ProblemLog {
 public:
  void Skip(std::size_t line, std::string reason) {
    ++skipped_;
    if (problems_.size() < kMaxLineProblems) problems_.push_back({line, std::move(reason)});
  }

  template <typename T>
  Parsed<T> Finish(T value) {
    return Parsed<T>{std::move(value), std::move(problems_), skipped_};
  }

 private:
  std::vector<LineProblem> problems_;
  std::size_t skipped_ = 0;
};

// The next line without a NUL byte (/proc text never has one); a line with one is skipped and
// logged.
bool NextTextLine(Lines& lines, ProblemLog& log, std::string_view& line) {
  while (lines.Next(line)) {
    if (line.find('\0') == std::string_view::npos) return true;
    log.Skip(lines.number(), "holds a NUL byte");
  }
  return false;
}

// Keeps the first of entries with equal keys, in file order; the later ones are reported.
// `lines` holds each entry's line number.
template <typename T, typename KeyOf>
void DropDuplicates(std::vector<T>& items, const std::vector<std::size_t>& lines, KeyOf key_of,
                    std::string_view what, ProblemLog& log) {
  if (items.size() < 2) return;
  // Files almost never repeat a key: distinct hashes prove it for far less than the sort.
  std::vector<std::size_t> hashes;
  hashes.reserve(items.size());
  for (const T& item : items) {
    hashes.push_back(std::hash<std::decay_t<decltype(key_of(item))>>{}(key_of(item)));
  }
  std::sort(hashes.begin(), hashes.end());
  if (std::adjacent_find(hashes.begin(), hashes.end()) == hashes.end()) return;
  std::vector<std::uint32_t> order(items.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return key_of(items[a]) < key_of(items[b]);
  });
  std::vector<bool> drop(items.size(), false);
  bool any = false;
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (key_of(items[order[i]]) == key_of(items[order[i - 1]])) {
      drop[order[i]] = true;
      any = true;
    }
  }
  if (!any) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (drop[i]) {
      log.Skip(lines[i], "duplicate " + std::string(what) + " " + KeyText(key_of(items[i])));
      continue;
    }
    if (kept != i) items[kept] = std::move(items[i]);
    ++kept;
  }
  items.resize(kept);
}

// A "cpu" or "cpuN" line past its label: user nice system idle [iowait irq softirq steal
// guest guest_nice]. Returns the reason the line is unusable, or an empty string.
std::string ParseCpuTimes(Fields& fields, CpuTimes& times) {
  double* const modes[] = {&times.user,  &times.nice,    &times.system, &times.idle,
                           &times.iowait, &times.irq,    &times.softirq, &times.steal,
                           &times.guest, &times.guest_nice};
  std::size_t count = 0;
  std::string_view field;
  while (count < std::size(modes) && fields.Next(field)) {
    const auto ticks = ParseDecimal(field);
    if (!ticks) return NotACount("CPU time", field);
    // Divided, not multiplied by 0.01: the same double node_exporter computes.
    *modes[count++] = static_cast<double>(*ticks) / kUserHz;
  }
  if (count < 4) {
    return "has " + std::to_string(count) + " CPU times; user, nice, system and idle are needed";
  }
  return {};
}

}  // namespace

Result<Parsed<CpuStats>> ParseProcStat(std::string_view text) {
  CpuStats stats;
  ProblemLog log;
  std::vector<std::size_t> cpu_lines;
  bool have_total = false, have_ctxt = false, have_intr = false, have_processes = false,
       have_running = false, have_blocked = false, have_btime = false;
  Lines lines(text);
  std::string_view line;
  while (NextTextLine(lines, log, line)) {
    const std::size_t number = lines.number();
    Fields fields(line);
    std::string_view key;
    if (!fields.Next(key)) continue;

    if (key.starts_with("cpu")) {
      const std::string_view id_text = key.substr(3);
      std::optional<std::uint64_t> id;
      if (!id_text.empty()) {
        id = ParseDecimal(id_text);
        if (!id || *id > kMaxCpuId) {
          log.Skip(number, "unknown label " + Quoted(key));
          continue;
        }
      }
      CpuTimes times;
      if (std::string reason = ParseCpuTimes(fields, times); !reason.empty()) {
        log.Skip(number, std::move(reason));
        continue;
      }
      if (!id) {
        if (have_total) {
          log.Skip(number, "second 'cpu' line");
          continue;
        }
        stats.total = times;
        have_total = true;
      } else {
        stats.per_cpu.push_back({static_cast<int>(*id), times});
        cpu_lines.push_back(number);
      }
      continue;
    }

    struct Scalar {
      std::string_view name;
      bool* seen;
      std::uint64_t* unsigned_value;
    };
    std::uint64_t btime = 0;
    const Scalar scalars[] = {{"ctxt", &have_ctxt, &stats.context_switches},
                              {"intr", &have_intr, &stats.interrupts},
                              {"processes", &have_processes, &stats.forks},
                              {"procs_running", &have_running, &stats.procs_running},
                              {"procs_blocked", &have_blocked, &stats.procs_blocked},
                              {"btime", &have_btime, &btime}};
    const auto scalar = std::find_if(std::begin(scalars), std::end(scalars),
                                     [&](const Scalar& s) { return s.name == key; });
    if (scalar == std::end(scalars)) continue;  // page, swap, softirq: not read
    if (*scalar->seen) {
      log.Skip(number, "second " + Quoted(key) + " line");
      continue;
    }
    std::string_view field;
    if (!fields.Next(field)) {
      log.Skip(number, Quoted(key) + " has no value");
      continue;
    }
    // intr's first field is the total; the per-IRQ counts after it are not read.
    const auto value = ParseDecimal(field);
    if (!value || (key == "btime" && *value > std::numeric_limits<std::int64_t>::max())) {
      log.Skip(number, NotACount(key, field));
      continue;
    }
    *scalar->unsigned_value = *value;
    *scalar->seen = true;
    if (key == "btime") stats.boot_time = static_cast<std::int64_t>(btime);
  }
  if (!have_total) return InvalidArgumentError("no usable 'cpu' line, the whole machine's CPU time");
  DropDuplicates(stats.per_cpu, cpu_lines, [](const PerCpuTimes& c) { return c.cpu; }, "CPU",
                 log);
  return log.Finish(std::move(stats));
}

Result<Parsed<Memory>> ParseMeminfo(std::string_view text) {
  Memory memory;
  ProblemLog log;
  std::vector<std::size_t> field_lines;
  constexpr std::size_t kUsualFields = 64;  // kernels print 40 to 60 lines
  memory.fields.reserve(kUsualFields);
  field_lines.reserve(kUsualFields);
  Lines lines(text);
  std::string_view line;
  while (NextTextLine(lines, log, line)) {
    const std::size_t number = lines.number();
    Fields fields(line);
    std::string_view label, value_text, unit;
    if (!fields.Next(label)) continue;
    if (label.size() < 2 || label.back() != ':' || label.size() > kMaxDeviceName + 1 ||
        HasControlByte(label)) {
      log.Skip(number, "no 'Name:' label");
      continue;
    }
    if (!fields.Next(value_text)) {
      log.Skip(number, Quoted(label) + " has no value");
      continue;
    }
    auto value = ParseDecimal(value_text);
    if (!value) {
      log.Skip(number, NotACount(label, value_text));
      continue;
    }
    bool in_bytes = false;
    if (fields.Next(unit)) {
      if (unit != "kB") {
        log.Skip(number, "unknown unit " + Quoted(unit));
        continue;
      }
      if (*value > std::numeric_limits<std::uint64_t>::max() / 1024) {
        log.Skip(number, Quoted(label) + " overflows 64 bits in bytes");
        continue;
      }
      *value *= 1024;
      in_bytes = true;
    }
    if (!fields.AtEnd()) {
      log.Skip(number, "more fields than 'Name: value kB'");
      continue;
    }
    label.remove_suffix(1);
    MeminfoField& field = memory.fields.emplace_back();
    field.name.assign(label);
    field.value = *value;
    field.in_bytes = in_bytes;
    field_lines.push_back(number);
  }
  DropDuplicates(memory.fields, field_lines,
                 [](const MeminfoField& f) { return std::string_view(f.name); }, "field", log);
  if (memory.fields.empty()) return InvalidArgumentError("no usable 'Name: value' line");

  struct Known {
    std::string_view name;
    std::optional<std::uint64_t> Memory::*slot;
  };
  static constexpr Known kKnown[] = {{"MemTotal", &Memory::total_bytes},
                                     {"MemFree", &Memory::free_bytes},
                                     {"MemAvailable", &Memory::available_bytes},
                                     {"Buffers", &Memory::buffers_bytes},
                                     {"Cached", &Memory::cached_bytes},
                                     {"SwapTotal", &Memory::swap_total_bytes},
                                     {"SwapFree", &Memory::swap_free_bytes}};
  for (const MeminfoField& field : memory.fields) {
    if (!field.in_bytes) continue;
    for (const Known& known : kKnown) {
      if (field.name == known.name) memory.*known.slot = field.value;
    }
  }
  return log.Finish(std::move(memory));
}

Result<Load> ParseLoadavg(std::string_view text) {
  Fields fields(text);
  Load load;
  double* const slots[] = {&load.load1, &load.load5, &load.load15};
  for (double* slot : slots) {
    std::string_view field;
    if (!fields.Next(field)) return InvalidArgumentError("fewer than 3 load averages");
    const auto value = ParseNonNegative(field);
    if (!value) return InvalidArgumentError("load average " + Quoted(field) + " is not a number >= 0");
    *slot = *value;
  }
  return load;
}

Result<double> ParseUptime(std::string_view text) {
  Fields fields(text);
  std::string_view field;
  if (!fields.Next(field)) return InvalidArgumentError("empty");
  const auto value = ParseNonNegative(field);
  if (!value) return InvalidArgumentError("uptime " + Quoted(field) + " is not a number >= 0");
  return *value;
}

Result<Parsed<PressureFile>> ParsePressure(std::string_view text) {
  PressureFile file;
  ProblemLog log;
  Lines lines(text);
  std::string_view line;
  while (NextTextLine(lines, log, line)) {
    const std::size_t number = lines.number();
    Fields fields(line);
    std::string_view kind;
    if (!fields.Next(kind)) continue;
    std::optional<PressureLine>* slot = kind == "some"   ? &file.some
                                        : kind == "full" ? &file.full
                                                         : nullptr;
    if (slot == nullptr) continue;
    if (slot->has_value()) {
      log.Skip(number, "second " + Quoted(kind) + " line");
      continue;
    }
    PressureLine parsed;
    bool have_avg10 = false, have_avg60 = false, have_avg300 = false, have_total = false;
    std::string reason;
    std::string_view field;
    while (reason.empty() && fields.Next(field)) {
      const std::size_t equals = field.find('=');
      const std::string_view key = field.substr(0, equals);
      const std::string_view value =
          equals == std::string_view::npos ? std::string_view() : field.substr(equals + 1);
      if (key == "total") {
        const auto micros = ParseDecimal(value);
        if (!micros) {
          reason = NotACount("total", value);
        } else {
          // Two divisions, as node_exporter computes it, so both give the same double.
          parsed.total_seconds = static_cast<double>(*micros) / 1000.0 / 1000.0;
          have_total = true;
        }
        continue;
      }
      double* const average = key == "avg10"    ? &parsed.avg10
                              : key == "avg60"  ? &parsed.avg60
                              : key == "avg300" ? &parsed.avg300
                                                : nullptr;
      if (average == nullptr) continue;
      const auto percent = ParseNonNegative(value);
      if (!percent) {
        reason = Quoted(key) + " " + Quoted(value) + " is not a number >= 0";
        continue;
      }
      *average = *percent;
      (key == "avg10" ? have_avg10 : key == "avg60" ? have_avg60 : have_avg300) = true;
    }
    if (reason.empty() && !(have_avg10 && have_avg60 && have_avg300 && have_total)) {
      reason = "lacks one of avg10, avg60, avg300, total";
    }
    if (!reason.empty()) {
      log.Skip(number, std::move(reason));
      continue;
    }
    *slot = parsed;
  }
  if (!file.some && !file.full) return InvalidArgumentError("no usable 'some' or 'full' line");
  return log.Finish(std::move(file));
}

Result<Parsed<std::vector<NetDevice>>> ParseNetDev(std::string_view text) {
  std::vector<NetDevice> devices;
  ProblemLog log;
  std::vector<std::size_t> device_lines;
  Lines lines(text);
  std::string_view line;
  while (lines.Next(line)) {
    const std::size_t number = lines.number();
    // "Inter-|   Receive ..." and " face |bytes ...".
    if (number <= 2 && line.find('|') != std::string_view::npos) continue;
    if (Trim(line).empty()) continue;
    if (line.find('\0') != std::string_view::npos) {
      log.Skip(number, "holds a NUL byte");
      continue;
    }
    const std::size_t colon = line.rfind(':');
    if (colon == std::string_view::npos) {
      log.Skip(number, "no ':' after the interface name");
      continue;
    }
    const std::string_view name = Trim(line.substr(0, colon));
    if (name.empty() || name.size() > kMaxDeviceName || HasControlByte(name) ||
        std::any_of(name.begin(), name.end(), IsSpace)) {
      log.Skip(number, "interface name " + Quoted(name) + " is empty, too long or has spaces");
      continue;
    }
    NetDevice device;
    std::uint64_t* const counters[] = {
        &device.receive_bytes,     &device.receive_packets,    &device.receive_errs,
        &device.receive_drop,      &device.receive_fifo,       &device.receive_frame,
        &device.receive_compressed, &device.receive_multicast, &device.transmit_bytes,
        &device.transmit_packets,  &device.transmit_errs,      &device.transmit_drop,
        &device.transmit_fifo,     &device.transmit_colls,     &device.transmit_carrier,
        &device.transmit_compressed};
    Fields fields(line.substr(colon + 1));
    std::size_t count = 0;
    std::string reason;
    std::string_view field;
    while (count < std::size(counters) && fields.Next(field)) {
      const auto value = ParseDecimal(field);
      if (!value) {
        reason = NotACount("counter", field);
        break;
      }
      *counters[count++] = *value;
    }
    if (reason.empty() && count < std::size(counters)) {
      reason = "has " + std::to_string(count) + " of the 16 counters";
    }
    if (!reason.empty()) {
      log.Skip(number, std::move(reason));
      continue;
    }
    device.device = std::string(name);
    devices.push_back(std::move(device));
    device_lines.push_back(number);
  }
  DropDuplicates(devices, device_lines,
                 [](const NetDevice& d) { return std::string_view(d.device); }, "interface", log);
  return log.Finish(std::move(devices));
}

Result<Parsed<std::vector<DiskStats>>> ParseDiskstats(std::string_view text) {
  std::vector<DiskStats> disks;
  ProblemLog log;
  std::vector<std::size_t> disk_lines;
  Lines lines(text);
  std::string_view line;
  while (lines.Next(line)) {
    const std::size_t number = lines.number();
    if (Trim(line).empty()) continue;
    if (line.find('\0') != std::string_view::npos) {
      log.Skip(number, "holds a NUL byte");
      continue;
    }
    Fields fields(line);
    std::string_view major_text, minor_text, name;
    fields.Next(major_text);
    if (!fields.Next(minor_text) || !fields.Next(name)) {
      log.Skip(number, "lacks 'major minor name'");
      continue;
    }
    const auto major = ParseDecimal(major_text);
    const auto minor = ParseDecimal(minor_text);
    constexpr std::uint64_t kMaxDeviceNumber = std::numeric_limits<std::uint32_t>::max();
    if (!major || !minor || *major > kMaxDeviceNumber || *minor > kMaxDeviceNumber) {
      log.Skip(number, "device number " + Quoted(major_text) + ":" + Quoted(minor_text) +
                           " is not two 32-bit counts");
      continue;
    }
    if (name.size() > kMaxDeviceName || HasControlByte(name)) {
      log.Skip(number, "device name " + Quoted(name) + " is too long or has control bytes");
      continue;
    }
    std::uint64_t values[17] = {};
    std::size_t count = 0;
    std::string reason;
    std::string_view field;
    while (count < std::size(values) && fields.Next(field)) {
      const auto value = ParseDecimal(field);
      if (!value) {
        reason = NotACount("counter", field);
        break;
      }
      values[count++] = *value;
    }
    if (reason.empty() && count < 11) {
      reason = "has " + std::to_string(count) + " counters; at least 11 are needed";
    }
    if (!reason.empty()) {
      log.Skip(number, std::move(reason));
      continue;
    }
    DiskStats disk;
    disk.major = static_cast<std::uint32_t>(*major);
    disk.minor = static_cast<std::uint32_t>(*minor);
    disk.device = std::string(name);
    disk.reads_completed = values[0];
    disk.reads_merged = values[1];
    disk.sectors_read = values[2];
    disk.read_ms = values[3];
    disk.writes_completed = values[4];
    disk.writes_merged = values[5];
    disk.sectors_written = values[6];
    disk.write_ms = values[7];
    disk.io_in_progress = values[8];
    disk.io_ms = values[9];
    disk.weighted_io_ms = values[10];
    if (count >= 15) {
      disk.discards_completed = values[11];
      disk.discards_merged = values[12];
      disk.sectors_discarded = values[13];
      disk.discard_ms = values[14];
    }
    if (count >= 17) {
      disk.flushes_completed = values[15];
      disk.flush_ms = values[16];
    }
    disks.push_back(std::move(disk));
    disk_lines.push_back(number);
  }
  DropDuplicates(disks, disk_lines, [](const DiskStats& d) { return std::string_view(d.device); },
                 "device", log);
  return log.Finish(std::move(disks));
}

namespace {

// Undoes the kernel's mangling of " \t\n\\" in mountinfo; any other backslash is literal.
std::string UnescapeMountField(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string_view code = field.substr(i + 1, 3);
      const char decoded = code == "040"   ? ' '
                           : code == "011" ? '\t'
                           : code == "012" ? '\n'
                           : code == "134" ? '\\'
                                           : '\0';
      if (decoded != '\0') {
        out += decoded;
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

bool IsDeviceNumber(std::string_view field) {
  const std::size_t colon = field.find(':');
  return colon != std::string_view::npos && ParseDecimal(field.substr(0, colon)) &&
         ParseDecimal(field.substr(colon + 1));
}

}  // namespace

Result<Parsed<std::vector<Mount>>> ParseMountinfo(std::string_view text) {
  std::vector<Mount> mounts;
  ProblemLog log;
  Lines lines(text);
  std::string_view line;
  while (lines.Next(line)) {
    const std::size_t number = lines.number();
    if (line.empty()) continue;
    if (line.find('\0') != std::string_view::npos) {
      log.Skip(number, "holds a NUL byte");
      continue;
    }
    SpaceSeparated fields(line);
    std::string_view id, parent, device_number, root, mount_point, options;
    if (!fields.Next(id) || !fields.Next(parent) || !fields.Next(device_number) ||
        !fields.Next(root) || !fields.Next(mount_point) || !fields.Next(options)) {
      log.Skip(number, "fewer than the 6 fields before the optional ones");
      continue;
    }
    if (!ParseDecimal(id) || !ParseDecimal(parent) || !IsDeviceNumber(device_number)) {
      log.Skip(number, "mount id, parent id or major:minor is not a number");
      continue;
    }
    // Optional fields ("shared:1", "master:2") run up to a lone "-".
    std::string_view field;
    bool separated = false;
    while (fields.Next(field)) {
      if (field == "-") {
        separated = true;
        break;
      }
    }
    std::string_view fstype, source, super_options;
    if (!separated || !fields.Next(fstype) || !fields.Next(source) ||
        !fields.Next(super_options)) {
      log.Skip(number, "no ' - fstype source options' part");
      continue;
    }
    Mount mount;
    mount.mount_point = UnescapeMountField(mount_point);
    mount.fstype = UnescapeMountField(fstype);
    mount.source = UnescapeMountField(source);
    if (mount.mount_point.empty() || mount.mount_point.front() != '/' ||
        mount.mount_point.size() > kMaxMountPath) {
      log.Skip(number, "mount point " + Quoted(mount_point) + " is not an absolute path");
      continue;
    }
    if (mount.fstype.empty() || mount.fstype.size() > kMaxDeviceName ||
        mount.source.size() > kMaxMountPath) {
      log.Skip(number, "filesystem type or source is empty or too long");
      continue;
    }
    mount.readonly = HasOption(options, "ro") || HasOption(super_options, "ro");
    mounts.push_back(std::move(mount));
  }
  if (mounts.empty()) return InvalidArgumentError("no usable mount line");
  return log.Finish(std::move(mounts));
}

}  // namespace uplink::agent::node
