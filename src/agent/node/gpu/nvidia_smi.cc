#include "agent/node/gpu/nvidia_smi.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "common/decimal.h"
#include "common/files.h"
#include "common/log.h"
#include "common/text.h"

namespace uplink::agent::node {
namespace {

constexpr size_t kMaxLinesRead = 1024;
constexpr size_t kMaxProblemsKept = 8;
constexpr size_t kMaxStringBytes = 253;  // the payload's bound on strings
constexpr std::uint64_t kBytesPerMiB = 1 << 20;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimBlanks(std::string_view text) {
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  return text;
}

// Splits one CSV line. nvidia-smi writes "a, b, c" and never quotes, but a quoted value
// ("a, b" with "" for a quote) is taken whole rather than split. Stops after max_fields + 1
// values (the line is refused anyway). nullopt on an unterminated quote or text after a
// closing quote.
std::optional<std::vector<std::string>> SplitCsvLine(std::string_view line, size_t max_fields) {
  std::vector<std::string> fields;
  size_t pos = 0;
  while (true) {
    if (fields.size() > max_fields) return fields;  // already too many: the caller rejects it
    while (pos < line.size() && IsBlank(line[pos])) ++pos;
    std::string value;
    if (pos < line.size() && line[pos] == '"') {
      ++pos;
      bool closed = false;
      while (pos < line.size()) {
        if (line[pos] == '"') {
          if (pos + 1 < line.size() && line[pos + 1] == '"') {
            value += '"';
            pos += 2;
            continue;
          }
          ++pos;
          closed = true;
          break;
        }
        value += line[pos++];
      }
      if (!closed) return std::nullopt;
      while (pos < line.size() && IsBlank(line[pos])) ++pos;
      if (pos < line.size() && line[pos] != ',') return std::nullopt;
    } else {
      size_t comma = line.find(',', pos);
      std::string_view raw =
          line.substr(pos, comma == std::string_view::npos ? line.npos : comma - pos);
      value = std::string(TrimBlanks(raw));
      pos = comma == std::string_view::npos ? line.size() : comma;
    }
    fields.push_back(std::move(value));
    if (pos >= line.size()) return fields;
    ++pos;  // the comma
  }
}

// "[N/A]", "[Not Supported]", "[Unknown Error]", "[Requested functionality has been
// deprecated]", "N/A", "": nvidia-smi has no value.
bool IsNoValue(std::string_view value) {
  return value.empty() || value == "N/A" || (value.front() == '[' && value.back() == ']');
}

template <typename T>
std::optional<T> ParseInteger(std::string_view text, int base = 10) {
  T value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> ParseFinite(std::string_view text) {
  std::optional<double> value = ParseFiniteDouble(text);
  if (!value || *value < 0) return std::nullopt;
  return value;
}

// "0x0000000000000004" (how nvidia-smi prints the reason masks), or a plain decimal.
std::optional<std::uint64_t> ParseMask(std::string_view text) {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    return ParseInteger<std::uint64_t>(text.substr(2), 16);
  }
  return ParseInteger<std::uint64_t>(text);
}

bool IsPrintable(std::string_view text) {
  return std::none_of(text.begin(), text.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

class RowParser {
 public:
  RowParser(Gpu& gpu, std::vector<std::string>& problems) : gpu_(gpu), problems_(problems) {}

  void Apply(SmiField field, const std::string& value) {
    if (IsNoValue(value)) return;
    switch (field) {
      case SmiField::kIndex: return;  // read before the row is taken
      case SmiField::kUuid: return SetString(field, value, gpu_.uuid);
      case SmiField::kName: return SetString(field, value, gpu_.name);
      case SmiField::kPciBusId: return SetString(field, value, gpu_.pci_bus_id);
      case SmiField::kDriverVersion: return SetString(field, value, driver_version_);
      case SmiField::kUtilizationGpu: return SetNumber(field, value, gpu_.utilization_percent);
      case SmiField::kUtilizationMemory:
        return SetNumber(field, value, gpu_.memory_utilization_percent);
      case SmiField::kMemoryUsed: return SetMiB(field, value, gpu_.memory_used_bytes);
      case SmiField::kMemoryTotal: return SetMiB(field, value, gpu_.memory_total_bytes);
      case SmiField::kTemperature: return SetNumber(field, value, gpu_.temperature_celsius);
      case SmiField::kPowerDraw: return SetNumber(field, value, gpu_.power_watts);
      case SmiField::kPowerLimit: return SetNumber(field, value, gpu_.power_limit_watts);
      case SmiField::kSmClock: return SetCount(field, value, gpu_.sm_clock_mhz);
      case SmiField::kMemoryClock: return SetCount(field, value, gpu_.memory_clock_mhz);
      case SmiField::kEccCorrected: return SetCount(field, value, gpu_.ecc_corrected);
      case SmiField::kEccUncorrected: return SetCount(field, value, gpu_.ecc_uncorrected);
      case SmiField::kClockEventReasons:
      case SmiField::kClockThrottleReasons:
        if (auto mask = ParseMask(value)) {
          gpu_.throttle_reasons = *mask;
        } else {
          Bad(field, value, "is not a bit mask");
        }
        return;
      case SmiField::kPcieGeneration: return SetCount(field, value, gpu_.pcie_generation);
      case SmiField::kPcieWidth: return SetCount(field, value, gpu_.pcie_width);
      case SmiField::kMigMode:
        if (value == "Enabled") {
          gpu_.mig_mode = MigMode::kEnabled;
        } else if (value == "Disabled") {
          gpu_.mig_mode = MigMode::kDisabled;
        } else {
          Bad(field, value, "is neither Enabled nor Disabled");
        }
        return;
    }
  }

  const std::string& driver_version() const { return driver_version_; }

 private:
  void Bad(SmiField field, std::string_view value, std::string_view why) {
    problems_.push_back("GPU " + std::to_string(gpu_.index) + ": " +
                        std::string(SmiFieldName(field)) + " '" + OneLineExcerpt(value, 40) + "' " +
                        std::string(why));
  }

  void SetString(SmiField field, const std::string& value, std::string& out) {
    if (value.size() > kMaxStringBytes || !IsPrintable(value)) {
      return Bad(field, value, "is not a short printable string");
    }
    out = value;
  }

  void SetNumber(SmiField field, const std::string& value, std::optional<double>& out) {
    if (auto number = ParseFinite(value)) {
      out = *number;
    } else {
      Bad(field, value, "is not a number");
    }
  }

  template <typename T>
  void SetCount(SmiField field, const std::string& value, std::optional<T>& out) {
    if (auto number = ParseInteger<T>(value)) {
      out = *number;
    } else {
      Bad(field, value, "is not a count");
    }
  }

  void SetMiB(SmiField field, const std::string& value, std::optional<std::uint64_t>& out) {
    auto mib = ParseInteger<std::uint64_t>(value);
    if (!mib || *mib > std::numeric_limits<std::uint64_t>::max() / kBytesPerMiB) {
      return Bad(field, value, "is not a size in MiB");
    }
    out = *mib * kBytesPerMiB;
  }

  Gpu& gpu_;
  std::vector<std::string>& problems_;
  std::string driver_version_;
};

// Problems beyond the first few are counted, not kept: garbage output must not grow the
// report without bound.
void KeepBounded(std::vector<std::string>& problems, size_t& dropped) {
  if (problems.size() > kMaxProblemsKept) {
    dropped += problems.size() - kMaxProblemsKept;
    problems.resize(kMaxProblemsKept);
  }
}

}  // namespace

std::string_view SmiFieldName(SmiField field) {
  switch (field) {
    case SmiField::kIndex: return "index";
    case SmiField::kUuid: return "uuid";
    case SmiField::kName: return "name";
    case SmiField::kPciBusId: return "pci.bus_id";
    case SmiField::kDriverVersion: return "driver_version";
    case SmiField::kUtilizationGpu: return "utilization.gpu";
    case SmiField::kUtilizationMemory: return "utilization.memory";
    case SmiField::kMemoryUsed: return "memory.used";
    case SmiField::kMemoryTotal: return "memory.total";
    case SmiField::kTemperature: return "temperature.gpu";
    case SmiField::kPowerDraw: return "power.draw";
    case SmiField::kPowerLimit: return "enforced.power.limit";
    case SmiField::kSmClock: return "clocks.current.sm";
    case SmiField::kMemoryClock: return "clocks.current.memory";
    case SmiField::kEccCorrected: return "ecc.errors.corrected.volatile.total";
    case SmiField::kEccUncorrected: return "ecc.errors.uncorrected.volatile.total";
    case SmiField::kClockEventReasons: return "clocks_event_reasons.active";
    case SmiField::kClockThrottleReasons: return "clocks_throttle_reasons.active";
    case SmiField::kPcieGeneration: return "pcie.link.gen.current";
    case SmiField::kPcieWidth: return "pcie.link.width.current";
    case SmiField::kMigMode: return "mig.mode.current";
  }
  return "";
}

std::vector<SmiField> DefaultSmiFields() {
  return {SmiField::kIndex,
          SmiField::kUuid,
          SmiField::kName,
          SmiField::kPciBusId,
          SmiField::kDriverVersion,
          SmiField::kUtilizationGpu,
          SmiField::kUtilizationMemory,
          SmiField::kMemoryUsed,
          SmiField::kMemoryTotal,
          SmiField::kTemperature,
          SmiField::kPowerDraw,
          SmiField::kPowerLimit,
          SmiField::kSmClock,
          SmiField::kMemoryClock,
          SmiField::kEccCorrected,
          SmiField::kEccUncorrected,
          SmiField::kClockEventReasons,
          SmiField::kPcieGeneration,
          SmiField::kPcieWidth,
          SmiField::kMigMode};
}

std::vector<std::string> NvidiaSmiArguments(const std::string& program,
                                            const std::vector<SmiField>& fields) {
  std::string query = "--query-gpu=";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) query += ',';
    query += SmiFieldName(fields[i]);
  }
  return {program, query, "--format=csv,noheader,nounits"};
}

Result<GpuReading> ParseNvidiaSmiCsv(std::string_view output, const std::vector<SmiField>& fields) {
  auto index_at = std::find(fields.begin(), fields.end(), SmiField::kIndex);
  if (index_at == fields.end()) return InternalError("the nvidia-smi query lacks index");
  const size_t index_column = static_cast<size_t>(index_at - fields.begin());

  GpuReading reading;
  size_t lines = 0, non_empty = 0, dropped = 0;
  while (!output.empty()) {
    size_t newline = output.find('\n');
    std::string_view line = output.substr(0, newline);
    output.remove_prefix(newline == std::string_view::npos ? output.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (TrimBlanks(line).empty()) continue;
    ++non_empty;
    if (++lines > kMaxLinesRead) {
      reading.problems.push_back("more than " + std::to_string(kMaxLinesRead) +
                                 " lines; the rest was not read");
      break;
    }
    if (reading.gpus.size() == kMaxGpus) {
      reading.problems.push_back("more than " + std::to_string(kMaxGpus) +
                                 " GPUs; the rest was not read");
      break;
    }
    auto values = SplitCsvLine(line, fields.size());
    if (!values || values->size() != fields.size()) {
      std::string what =
          !values ? "an unterminated quote"
          : values->size() > fields.size()
              ? "more than " + std::to_string(fields.size()) + " values"
              : std::to_string(values->size()) + " values, not " + std::to_string(fields.size());
      reading.problems.push_back("line " + std::to_string(lines) + ": " + what + ": '" +
                                 OneLineExcerpt(line, 60) + "'");
      KeepBounded(reading.problems, dropped);
      continue;
    }
    auto index = ParseInteger<unsigned>((*values)[index_column]);
    if (!index) {
      reading.problems.push_back("line " + std::to_string(lines) + ": index '" +
                                 OneLineExcerpt((*values)[index_column], 40) +
                                 "' is not a GPU index");
      KeepBounded(reading.problems, dropped);
      continue;
    }
    Gpu gpu;
    gpu.index = *index;
    RowParser row(gpu, reading.problems);
    for (size_t i = 0; i < fields.size(); ++i) row.Apply(fields[i], (*values)[i]);
    KeepBounded(reading.problems, dropped);
    if (reading.driver_version.empty()) reading.driver_version = row.driver_version();
    reading.gpus.push_back(std::move(gpu));
  }
  if (dropped > 0) reading.problems.push_back(std::to_string(dropped) + " more problems");
  if (reading.gpus.empty() && non_empty > 0) {
    std::string why = reading.problems.empty() ? "" : ": " + reading.problems.front();
    return InvalidArgumentError("nvidia-smi printed no GPU row" + why);
  }
  return reading;
}

std::optional<SmiField> RejectedSmiField(std::string_view output,
                                         const std::vector<SmiField>& fields) {
  if (output.find("is not a valid field to query") == std::string_view::npos) return std::nullopt;
  for (SmiField field : fields) {
    std::string name(SmiFieldName(field));
    // Windows builds have printed the name in typographic quotes.
    if (output.find("\"" + name + "\"") != std::string_view::npos ||
        output.find("\u201c" + name + "\u201d") != std::string_view::npos) {
      return field;
    }
  }
  return std::nullopt;
}

NvidiaSmi::NvidiaSmi(std::string program, std::chrono::milliseconds timeout)
    : program_(std::move(program)), timeout_(timeout), fields_(DefaultSmiFields()) {}

Result<GpuReading> NvidiaSmi::Read(const std::atomic<bool>* cancel) {
  // Each rejected field is dropped once, so this ends.
  while (true) {
    UPLINK_ASSIGN_OR_RETURN(ProcessResult run,
                            RunProcess(ProcessOptions{.argv = NvidiaSmiArguments(program_, fields_),
                                                      .timeout = timeout_,
                                                      .max_output_bytes = kMaxOutputBytes,
                                                      .cancel = cancel}));
    if (run.exit_code == 0) return ParseNvidiaSmiCsv(run.out, fields_);
    std::optional<SmiField> rejected = RejectedSmiField(run.out + run.err, fields_);
    if (!rejected || *rejected == SmiField::kIndex) {
      std::string said = OneLineExcerpt(TrimWhitespace(run.out.empty() ? run.err : run.out));
      return UnavailableError(program_ + " exited with status " + std::to_string(run.exit_code) +
                              (said.empty() ? "" : ": " + said));
    }
    auto at = std::find(fields_.begin(), fields_.end(), *rejected);
    if (*rejected == SmiField::kClockEventReasons) {
      *at = SmiField::kClockThrottleReasons;
      log::Logger("agent.node.gpu")
          .Info("nvidia-smi predates R535; asking for the clock reasons by their older name",
                {{"field", SmiFieldName(SmiField::kClockThrottleReasons)}});
    } else {
      fields_.erase(at);
      log::Logger("agent.node.gpu")
          .Info("nvidia-smi does not know a query field; asking without it",
                {{"field", SmiFieldName(*rejected)}});
    }
  }
}

}  // namespace uplink::agent::node
