// SqlStore's prepared-statement wrapper, shared by the files that implement the store
// (sql_store.cc and one sql_<area>.cc per area). Private to the store.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/time.h"
#include "console/store/sql/database.h"
#include "console/store/sql_store.h"

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
class SqlStore::Statement {
 public:
  using StepResult = sql::Statement::StepResult;
  static constexpr StepResult kRow = StepResult::kRow;
  static constexpr StepResult kDone = StepResult::kDone;

  explicit Statement(sql::Statement* stmt) : stmt_(stmt) {}
  ~Statement() { stmt_->Reset(); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(std::string_view value) {
    stmt_->BindText(++index_, value, /*copy=*/true);
    return *this;
  }
  // Without copying: `value` must stay unchanged until this statement goes out of scope.
  Statement& BindUnowned(std::string_view value) {
    stmt_->BindText(++index_, value, /*copy=*/false);
    return *this;
  }
  // Bytes rather than text; without copying, as BindUnowned.
  Statement& BindBlobUnowned(std::string_view bytes) {
    stmt_->BindBlob(++index_, bytes);
    return *this;
  }
  // Without it a literal would convert to bool rather than to string_view.
  Statement& Bind(const char* value) { return Bind(std::string_view(value)); }
  Statement& Bind(std::int64_t value) {
    stmt_->BindInt(++index_, value);
    return *this;
  }
  Statement& Bind(bool value) { return Bind(static_cast<std::int64_t>(value)); }
  // Named apart from Bind: an int argument must never silently become a double.
  Statement& BindDouble(double value) {
    stmt_->BindDouble(++index_, value);
    return *this;
  }
  Statement& BindNull() {
    stmt_->BindNull(++index_);
    return *this;
  }
  Statement& Bind(WallTime value) { return Bind(ToUnixSeconds(value)); }
  template <typename T>
  Statement& Bind(const std::optional<T>& value) {
    if (value) return Bind(*value);
    return BindNull();
  }

  StepResult Step() { return stmt_->Step(); }
  // Rows the statement changed, once Step() returned kDone.
  std::int64_t Changes() const { return stmt_->Changes(); }

  std::string Text(int column) const { return std::string(stmt_->Text(column)); }
  // Valid until the next Step() or the end of this statement.
  std::string_view Blob(int column) const { return stmt_->Blob(column); }
  std::int64_t Int(int column) const { return stmt_->Int(column); }
  double Double(int column) const { return stmt_->Double(column); }
  bool IsNull(int column) const { return stmt_->IsNull(column); }
  WallTime Time(int column) const { return FromUnixSeconds(Int(column)); }
  std::optional<WallTime> OptionalTime(int column) const {
    return IsNull(column) ? std::nullopt : std::optional(Time(column));
  }
  std::optional<std::string> OptionalText(int column) const {
    return IsNull(column) ? std::nullopt : std::optional(Text(column));
  }

 private:
  sql::Statement* stmt_;
  int index_ = 0;
};

}  // namespace uplink::console
