// Structured logs: one JSON object per line on stderr.
//
//   {"ts":"2026-11-30T03:20:00.123Z","level":"info","component":"agent.inventory",
//    "msg":"report accepted","nodes":12}
//
// A Secret passed as a field prints "[redacted]"; there is no way to log its bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "common/secret.h"
#include "common/status.h"

namespace uplink::log {

enum class Level { kDebug = 0, kInfo, kWarn, kError };

struct Field {
  using Value = std::variant<std::string, std::int64_t, double, bool>;

  Field(std::string_view k, std::string_view v) : key(k), value(std::string(v)) {}
  Field(std::string_view k, const std::string& v) : key(k), value(v) {}
  Field(std::string_view k, const char* v) : key(k), value(std::string(v ? v : "")) {}
  Field(std::string_view k, bool v) : key(k), value(v) {}
  Field(std::string_view k, double v) : key(k), value(v) {}
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>>>
  Field(std::string_view k, I v) : key(k), value(static_cast<std::int64_t>(v)) {}
  Field(std::string_view k, const Secret&) : key(k), value(std::string("[redacted]")) {}
  Field(std::string_view k, const Status& s) : key(k), value(s.ToString()) {}

  std::string key;
  Value value;
};

class Logger {
 public:
  explicit Logger(std::string component) : component_(std::move(component)) {}

  void Debug(std::string_view msg, std::initializer_list<Field> fields = {}) const {
    Write(Level::kDebug, msg, fields);
  }
  void Info(std::string_view msg, std::initializer_list<Field> fields = {}) const {
    Write(Level::kInfo, msg, fields);
  }
  void Warn(std::string_view msg, std::initializer_list<Field> fields = {}) const {
    Write(Level::kWarn, msg, fields);
  }
  void Error(std::string_view msg, std::initializer_list<Field> fields = {}) const {
    Write(Level::kError, msg, fields);
  }

  void Write(Level level, std::string_view msg, std::initializer_list<Field> fields) const;

  const std::string& component() const { return component_; }

 private:
  std::string component_;
};

void SetMinLevel(Level level);
// Whether lines of `level` are written: lets a hot path skip preparing fields for a line that
// would be dropped.
bool Enabled(Level level);
// Parses "debug", "info", "warn", "error".
Status SetMinLevel(std::string_view name);

// Replaces the stderr sink (tests capture lines with this); nullptr restores stderr.
void SetSinkForTesting(std::function<void(std::string_view line)> sink);

// Formats one line without writing it (exposed for tests).
std::string FormatLine(Level level, std::string_view component, std::string_view msg,
                       std::initializer_list<Field> fields);

}  // namespace uplink::log
