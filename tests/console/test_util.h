// Helpers shared by the console tests: a scratch directory and calling a router directly.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "net/router.h"

namespace uplink::console::testing {

// A fresh directory under $TMPDIR, removed with everything in it at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "console-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The first column of the first row `sql` returns, read from the database file directly
// (bypassing the store); -1 when there is no row.
inline std::int64_t RawCount(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  std::int64_t value = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : -1;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}

inline net::Response Call(const net::Router& router, net::Request request) {
  std::optional<net::Response> response;
  router.Dispatch(std::move(request), [&](net::Response r) { response = std::move(r); });
  EXPECT_TRUE(response.has_value()) << "the handler did not reply";
  return response.value_or(net::Response{});
}

}  // namespace uplink::console::testing
