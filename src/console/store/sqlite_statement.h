// SqliteStore's prepared-statement wrapper, shared by the files that implement the store
// (sqlite_store.cc and one sqlite_<area>.cc per area). Private to the store.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/time.h"
#include "console/store/sqlite_store.h"

namespace uplink::console {

inline std::int64_t ToUnixMillis(WallTime t) {
  return std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

inline WallTime FromUnixMillis(std::int64_t millis) {
  return WallTime(std::chrono::milliseconds(millis));
}

// "SELECT <columns> FROM <table_and_tail>".
inline std::string SelectFrom(const char* columns, const char* table_and_tail) {
  return std::string("SELECT ") + columns + " FROM " + table_and_tail;
}

// A cached prepared statement for one use: binds by position, steps, and is reset (and its
// bindings cleared) when it goes out of scope so the next user finds it clean.
class SqliteStore::Statement {
 public:
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Statement() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(std::string_view value) {
    sqlite3_bind_text(stmt_, ++index_, value.data(), static_cast<int>(value.size()),
                      SQLITE_TRANSIENT);
    return *this;
  }
  // Without copying: `value` must stay unchanged until this statement goes out of scope.
  Statement& BindUnowned(std::string_view value) {
    sqlite3_bind_text(stmt_, ++index_, value.data(), static_cast<int>(value.size()),
                      SQLITE_STATIC);
    return *this;
  }
  // Bytes rather than text; without copying, as BindUnowned.
  Statement& BindBlobUnowned(std::string_view bytes) {
    sqlite3_bind_blob(stmt_, ++index_, bytes.data(), static_cast<int>(bytes.size()),
                      SQLITE_STATIC);
    return *this;
  }
  // Without it a literal would convert to bool rather than to string_view.
  Statement& Bind(const char* value) { return Bind(std::string_view(value)); }
  Statement& Bind(std::int64_t value) {
    sqlite3_bind_int64(stmt_, ++index_, value);
    return *this;
  }
  Statement& Bind(bool value) { return Bind(static_cast<std::int64_t>(value)); }
  // Named apart from Bind: an int argument must never silently become a double.
  Statement& BindDouble(double value) {
    sqlite3_bind_double(stmt_, ++index_, value);
    return *this;
  }
  Statement& BindNull() {
    sqlite3_bind_null(stmt_, ++index_);
    return *this;
  }
  Statement& Bind(WallTime value) { return Bind(ToUnixSeconds(value)); }
  template <typename T>
  Statement& Bind(const std::optional<T>& value) {
    if (value) return Bind(*value);
    sqlite3_bind_null(stmt_, ++index_);
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }

  std::string Text(int column) const {
    const unsigned char* text = sqlite3_column_text(stmt_, column);
    return text ? std::string(reinterpret_cast<const char*>(text),
                              static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
                : std::string();
  }
  // Valid until the next Step() or the end of this statement.
  std::string_view Blob(int column) const {
    const void* bytes = sqlite3_column_blob(stmt_, column);
    return bytes ? std::string_view(static_cast<const char*>(bytes),
                                    static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
                 : std::string_view();
  }
  std::int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) const { return sqlite3_column_double(stmt_, column); }
  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  WallTime Time(int column) const { return FromUnixSeconds(Int(column)); }
  std::optional<WallTime> OptionalTime(int column) const {
    return IsNull(column) ? std::nullopt : std::optional(Time(column));
  }
  std::optional<std::string> OptionalText(int column) const {
    return IsNull(column) ? std::nullopt : std::optional(Text(column));
  }

 private:
  sqlite3_stmt* stmt_;
  int index_ = 0;
};

}  // namespace uplink::console
