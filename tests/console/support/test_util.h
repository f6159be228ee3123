// Helpers shared by the console tests: a scratch directory and calling a router directly.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "net/router.h"
#include "support/process.h"

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

// The reply to `request`, which may come from another thread (an upload is answered by the
// store's writer once committed).
inline net::Response Call(const net::Router& router, net::Request request) {
  auto answer = std::make_shared<std::promise<net::Response>>();
  std::future<net::Response> response = answer->get_future();
  router.Dispatch(std::move(request), [answer](net::Response r) { answer->set_value(std::move(r)); });
  if (response.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "the handler did not reply";
    return net::Response{};
  }
  return response.get();
}

// Transactions committed to the database's write-ahead log so far: its frames that end a
// commit (a non-zero database size), up to the first frame of an older generation (other
// salts), as SQLite's WAL format documents it. 0 without a log.
inline std::int64_t CommittedTransactions(const std::string& wal_path) {
  const std::string wal = uplink::testing::ReadFileOrEmpty(wal_path);
  auto u32 = [&](size_t at) {
    return (static_cast<std::uint32_t>(static_cast<unsigned char>(wal[at])) << 24) |
           (static_cast<std::uint32_t>(static_cast<unsigned char>(wal[at + 1])) << 16) |
           (static_cast<std::uint32_t>(static_cast<unsigned char>(wal[at + 2])) << 8) |
           static_cast<std::uint32_t>(static_cast<unsigned char>(wal[at + 3]));
  };
  if (wal.size() < 32) return 0;
  const size_t frame_size = 24 + u32(8);
  std::int64_t commits = 0;
  for (size_t at = 32; at + frame_size <= wal.size(); at += frame_size) {
    if (u32(at + 8) != u32(16) || u32(at + 12) != u32(20)) break;
    if (u32(at + 4) != 0) ++commits;
  }
  return commits;
}

}  // namespace uplink::console::testing
