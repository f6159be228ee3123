// The SQLite engine's read-only connections: what the store's lookups read beside its writer.
#include "console/store/sql/sqlite_database.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "support/process.h"

namespace uplink::console::sql {
namespace {

// The first column of `sql`'s first row, or -1.
std::int64_t Count(Database& database, const std::string& sql) {
  auto statement = database.Prepare(sql);
  EXPECT_TRUE(statement.ok()) << statement.status().ToString();
  if (!statement.ok()) return -1;
  Statement& query = **statement;
  const std::int64_t value = query.Step() == Statement::StepResult::kRow ? query.Int(0) : -1;
  query.Reset();
  return value;
}

class SqliteReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto writer = OpenSqliteDatabase(path_);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    writer_ = std::move(writer).value();
    ASSERT_TRUE(writer_->Exec("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1)").ok());
    auto reader = OpenSqliteReader(path_);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    reader_ = std::move(reader).value();
  }

  uplink::testing::TempDir dir_;
  std::string path_ = dir_.File("console.db");
  std::unique_ptr<Database> writer_;
  std::unique_ptr<Database> reader_;
};

TEST_F(SqliteReaderTest, SeesEachCommitAndNothingBefore) {
  EXPECT_EQ(Count(*reader_, "SELECT count(*) FROM t"), 1);
  ASSERT_TRUE(writer_->BeginWrite().ok());
  ASSERT_TRUE(writer_->Exec("INSERT INTO t VALUES (2)").ok());
  // The writer holds the write lock: the reader neither waits for it nor sees its rows.
  EXPECT_EQ(Count(*reader_, "SELECT count(*) FROM t"), 1);
  ASSERT_TRUE(writer_->Exec("COMMIT").ok());
  EXPECT_EQ(Count(*reader_, "SELECT count(*) FROM t"), 2);
}

TEST_F(SqliteReaderTest, ASnapshotHoldsAcrossTheWritersCommits) {
  ASSERT_TRUE(reader_->BeginSnapshot().ok());
  EXPECT_EQ(Count(*reader_, "SELECT count(*) FROM t"), 1);
  ASSERT_TRUE(writer_->Exec("INSERT INTO t VALUES (2)").ok());
  EXPECT_EQ(Count(*reader_, "SELECT count(*) FROM t"), 1);
  ASSERT_TRUE(reader_->Exec("COMMIT").ok());
  EXPECT_EQ(Count(*reader_, "SELECT count(*) FROM t"), 2);
}

TEST_F(SqliteReaderTest, RefusesToWriteAndGoesOnReading) {
  Status refused = reader_->Exec("INSERT INTO t VALUES (3)");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("readonly"), std::string::npos) << refused.ToString();
  EXPECT_FALSE(reader_->Exec("DELETE FROM t").ok());
  EXPECT_EQ(Count(*reader_, "SELECT count(*) FROM t"), 1);
  EXPECT_EQ(Count(*writer_, "SELECT count(*) FROM t"), 1);
}

TEST(SqliteReader, OfAMissingFileFailsNamingItAndCreatesNothing) {
  uplink::testing::TempDir dir;
  const std::string path = dir.File("absent.db");
  auto reader = OpenSqliteReader(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find(path), std::string::npos)
      << reader.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace uplink::console::sql
