// A stand-in for nvidia-smi that answers `--query-gpu=... --format=csv[,noheader][,nounits]`
// from a real capture: $FAKE_SMI_FIXTURE names a `--format=csv` output (a header with units,
// then one row per GPU) from tests/fixtures/nvidia-smi. Each asked field is looked up
// by its header name; the aliases nvidia-smi accepts are honoured (clocks_throttle_reasons.*
// for clocks_event_reasons.*, clocks.sm, clocks.mem, gpu_uuid, gpu_name, gpu_bus_id); a field
// the capture did not include prints [N/A], except index, which is the row's position (the
// order nvidia-smi lists GPUs in). With nounits, " MiB", " W", " %", " MHz" are cut off.
//
// $FAKE_SMI_REJECT (comma-separated prefixes) makes it an older nvidia-smi that knows none of
// those fields, answering as a real one does: `Field "X" is not a valid field to query.` and
// status 2. $FAKE_SMI_LOG, when set, gets one line per run with the arguments.
//
// $FAKE_SMI_MODE picks a misbehaviour instead: "hang" (prints a partial row, then never
// exits), "garbage" (binary junk with NULs, status 0), "huge" (100 MB of rows), "fail" (the
// driver-not-loaded message and status 9).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) {
    size_t begin = part.find_first_not_of(" \r");
    size_t end = part.find_last_not_of(" \r");
    parts.push_back(begin == std::string::npos ? "" : part.substr(begin, end - begin + 1));
  }
  return parts;
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

void WriteAll(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(1, text.data() + done, text.size() - done);
    if (n <= 0) std::exit(1);
    done += static_cast<size_t>(n);
  }
}

// The header name the capture uses for an asked field.
std::string CanonicalName(const std::string& field, const std::vector<std::string>& names) {
  auto has = [&](const std::string& name) {
    for (const auto& n : names) {
      if (n == name) return true;
    }
    return false;
  };
  if (has(field)) return field;
  if (StartsWith(field, "clocks_throttle_reasons.")) {
    return "clocks_event_reasons." + field.substr(std::strlen("clocks_throttle_reasons."));
  }
  if (StartsWith(field, "clocks_event_reasons.")) {
    return "clocks_throttle_reasons." + field.substr(std::strlen("clocks_event_reasons."));
  }
  if (field == "clocks.sm") return "clocks.current.sm";
  if (field == "clocks.mem") return "clocks.current.memory";
  if (field == "gpu_uuid") return "uuid";
  if (field == "gpu_name") return "name";
  if (field == "gpu_bus_id") return "pci.bus_id";
  return field;
}

int Hang() {
  WriteAll("0, GPU-");
  while (true) ::pause();
}

int Garbage() {
  std::string junk =
      "\x7f"
      "ELF\x02\x01";
  junk += std::string(3, '\0');
  junk += "\xff\xfe, ,,,\n\"unterminated, 12, 0x\n\x1b[31m%n%s\n";
  WriteAll(junk);
  return 0;
}

int Huge() {
  std::string row =
      "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 00000000:00:09.0, "
      "590.48.01, 100, 11, 19818, 81559, 59, 631.95, 700.00, 1980, 2619, 0, 0, "
      "0x0000000000000000, 5, 16, Disabled\n";
  std::string block;
  while (block.size() < (1 << 20)) block += row;
  for (size_t written = 0; written < 100u * 1000 * 1000; written += block.size()) WriteAll(block);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string log = Env("FAKE_SMI_LOG");
  if (!log.empty()) {
    std::ofstream out(log, std::ios::app);
    for (int i = 1; i < argc; ++i) out << (i > 1 ? " " : "") << argv[i];
    out << "\n";
  }
  std::string mode = Env("FAKE_SMI_MODE");
  if (mode == "hang") return Hang();
  if (mode == "garbage") return Garbage();
  if (mode == "huge") return Huge();
  if (mode == "fail") {
    WriteAll(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n\n");
    return 9;
  }

  std::string query, format;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (StartsWith(arg, "--query-gpu=")) query = arg.substr(std::strlen("--query-gpu="));
    if (StartsWith(arg, "--format=")) format = arg.substr(std::strlen("--format="));
  }
  std::vector<std::string> formats = Split(format, ',');
  auto has_format = [&](const char* option) {
    for (const auto& f : formats) {
      if (f == option) return true;
    }
    return false;
  };
  if (query.empty() || !has_format("csv")) {
    WriteAll("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n");
    return 2;
  }
  std::vector<std::string> fields = Split(query, ',');
  for (const auto& prefix : Split(Env("FAKE_SMI_REJECT"), ',')) {
    for (const auto& field : fields) {
      if (!prefix.empty() && StartsWith(field, prefix)) {
        WriteAll("Field \"" + field + "\" is not a valid field to query.\n\n");
        return 2;
      }
    }
  }

  std::ifstream in(Env("FAKE_SMI_FIXTURE"));
  std::string header_line, line;
  if (!std::getline(in, header_line)) {
    std::fprintf(stderr, "fake nvidia-smi: cannot read $FAKE_SMI_FIXTURE\n");
    return 3;
  }
  std::vector<std::string> names, units;
  for (const auto& column : Split(header_line, ',')) {
    size_t bracket = column.find(" [");
    names.push_back(column.substr(0, bracket));
    units.push_back(bracket == std::string::npos
                        ? ""
                        : column.substr(bracket + 2, column.size() - bracket - 3));
  }
  std::string output;
  if (!has_format("noheader")) {
    for (size_t i = 0; i < fields.size(); ++i) output += (i > 0 ? ", " : "") + fields[i];
    output += "\n";
  }
  for (unsigned row = 0; std::getline(in, line); ++row) {
    if (line.find_first_not_of(" \r") == std::string::npos) continue;
    std::vector<std::string> values = Split(line, ',');
    for (size_t i = 0; i < fields.size(); ++i) {
      std::string name = CanonicalName(fields[i], names);
      std::string value = name == "index" ? std::to_string(row) : "[N/A]";
      for (size_t column = 0; column < names.size() && column < values.size(); ++column) {
        if (names[column] != name) continue;
        value = values[column];
        std::string suffix = " " + units[column];
        if (has_format("nounits") && !units[column].empty() && value.size() > suffix.size() &&
            value.compare(value.size() - suffix.size(), suffix.size(), suffix) == 0) {
          value.resize(value.size() - suffix.size());
        }
      }
      output += (i > 0 ? ", " : "") + value;
    }
    output += "\n";
  }
  WriteAll(output);
  return 0;
}
