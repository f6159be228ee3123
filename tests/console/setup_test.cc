// `uplink-console init|serve --store postgres://…`: the store's location and its password.
#include "console/setup.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/time.h"
#include "postgres_fixture.h"
#include "support/postgres_server.h"
#include "test_util.h"

namespace uplink::console {
namespace {

using testing::ScratchDir;
using uplink::testing::WriteFileOrDie;

class PostgresSetupTest : public testing::PostgresFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PostgresFixture::SetUp());
    WriteFileOrDie(password_file_, server_->password() + "\n");
  }

  ScratchDir dir_;
  std::string password_file_ = dir_.File("pg-password");
  FakeClock clock_;
};

TEST_F(PostgresSetupTest, InitAndServeShareTheDatabaseAndNeitherTakesADataDirectoryLock) {
  StoreLocation store{url_, password_file_};
  auto before = OpenConsoleStore(dir_.File("replica-a"), store);
  EXPECT_EQ(before.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(before.status().message().find("never initialised"), std::string::npos)
      << before.status().message();

  auto key = InitializeConsole(dir_.File("replica-a"), "admin@example.com", clock_, store);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_TRUE(key->Reveal().starts_with("uk_"));
  auto again = InitializeConsole(dir_.File("replica-b"), "admin@example.com", clock_, store);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("already initialised"), std::string::npos);
  // Messages name the store by its flag, never by its URL.
  EXPECT_EQ(again.status().message().find(url_), std::string::npos);

  // Two replicas, each with its own data directory, on the one database.
  auto a = OpenConsoleStore(dir_.File("replica-a"), store);
  auto b = OpenConsoleStore(dir_.File("replica-b"), store);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*(*a)->CountUsers(), 1);
  EXPECT_EQ(*(*b)->CountUsers(), 1);
}

TEST_F(PostgresSetupTest, ThePasswordComesFromItsFileOrLibpqsEnvironmentAndIsNeverEchoed) {
  const std::string password = server_->password();
  ::unsetenv("PGPASSWORD");
  auto without = OpenConsoleStore(dir_.File("d"), StoreLocation{url_, ""});
  EXPECT_EQ(without.status().code(), StatusCode::kUnavailable) << without.status().ToString();

  ::setenv("PGPASSWORD", password.c_str(), 1);
  auto from_environment = InitializeConsole(dir_.File("d"), "a@example.com", clock_,
                                            StoreLocation{url_, ""});
  ::unsetenv("PGPASSWORD");
  EXPECT_TRUE(from_environment.ok()) << from_environment.status().ToString();

  WriteFileOrDie(password_file_, "wrong-" + password);
  auto wrong = OpenConsoleStore(dir_.File("d"), StoreLocation{url_, password_file_});
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(wrong.status().message().find(password), std::string::npos);

  WriteFileOrDie(password_file_, "");
  auto empty = OpenConsoleStore(dir_.File("d"), StoreLocation{url_, password_file_});
  EXPECT_EQ(empty.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(empty.status().message().find("--store-password-file"), std::string::npos);
}

TEST(StoreLocationTest, AUrlWithAPasswordOrAnotherSchemeIsRefusedWithoutEchoingIt) {
  auto inline_password = ResolvePostgresLocation({"postgres://u:s3cr3t-pw@db/uplink", ""});
  EXPECT_EQ(inline_password.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(inline_password.status().message().find("s3cr3t-pw"), std::string::npos);
  EXPECT_NE(inline_password.status().message().find("--store"), std::string::npos);

  auto query_password = ResolvePostgresLocation({"postgres://db/uplink?password=s3cr3t-pw", ""});
  EXPECT_EQ(query_password.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(query_password.status().message().find("s3cr3t-pw"), std::string::npos);

  EXPECT_EQ(ResolvePostgresLocation({"mysql://db/uplink", ""}).status().code(),
            StatusCode::kInvalidArgument);
  auto missing_file = ResolvePostgresLocation({"postgres://db/uplink", "/nonexistent/password"});
  EXPECT_FALSE(missing_file.ok());
  EXPECT_NE(missing_file.status().message().find("--store-password-file"), std::string::npos)
      << missing_file.status().message();
}

}  // namespace
}  // namespace uplink::console
