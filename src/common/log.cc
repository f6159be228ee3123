#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "common/time.h"

namespace uplink::log {
namespace {

std::atomic<Level> g_min_level{Level::kInfo};
std::mutex g_sink_mutex;
std::function<void(std::string_view)> g_sink;  // guarded by g_sink_mutex

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void AppendValue(std::string& out, const Field::Value& value) {
  if (const auto* s = std::get_if<std::string>(&value)) {
    AppendJsonString(out, *s);
  } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
    out += std::to_string(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    if (std::isfinite(*d)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", *d);
      out += buf;
    } else {
      out += "null";
    }
  } else {
    out += std::get<bool>(value) ? "true" : "false";
  }
}

}  // namespace

std::string FormatLine(Level level, std::string_view component, std::string_view msg,
                       std::initializer_list<Field> fields) {
  std::string line;
  line.reserve(128);
  line += "{\"ts\":";
  AppendJsonString(line, FormatRfc3339Millis(SystemClock().Now()));
  line += ",\"level\":";
  AppendJsonString(line, LevelName(level));
  line += ",\"component\":";
  AppendJsonString(line, component);
  line += ",\"msg\":";
  AppendJsonString(line, msg);
  for (const Field& field : fields) {
    line += ',';
    AppendJsonString(line, field.key);
    line += ':';
    AppendValue(line, field.value);
  }
  line += "}\n";
  return line;
}

void Logger::Write(Level level, std::string_view msg, std::initializer_list<Field> fields) const {
  if (!Enabled(level)) return;
  std::string line = FormatLine(level, component_, msg, fields);
  std::lock_guard lock(g_sink_mutex);
  if (g_sink) {
    g_sink(line);
    return;
  }
  // One write per line so lines from several threads or processes never interleave.
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, data, left);
    if (n <= 0) break;
    data += n;
    left -= static_cast<size_t>(n);
  }
}

void SetMinLevel(Level level) { g_min_level.store(level); }

bool Enabled(Level level) { return level >= g_min_level.load(std::memory_order_relaxed); }

Status SetMinLevel(std::string_view name) {
  if (name == "debug") SetMinLevel(Level::kDebug);
  else if (name == "info") SetMinLevel(Level::kInfo);
  else if (name == "warn") SetMinLevel(Level::kWarn);
  else if (name == "error") SetMinLevel(Level::kError);
  else return InvalidArgumentError("log level must be one of debug, info, warn, error; got '" +
                                   std::string(name) + "'");
  return Status::Ok();
}

void SetSinkForTesting(std::function<void(std::string_view)> sink) {
  std::lock_guard lock(g_sink_mutex);
  g_sink = std::move(sink);
}

}  // namespace uplink::log
