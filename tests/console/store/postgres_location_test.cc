// The PostgreSQL store's URL (--store) and its `?` numbering: pure functions, hostile input.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "console/store/sql/postgres_database.h"

namespace uplink::console::sql {
namespace {

constexpr const char* kSecret = "hunter2xyz";

TEST(PostgresLocationTest, AcceptsLibpqUrls) {
  for (const char* url :
       {"postgres://db.example.com/uplink", "postgresql://console@db.example.com:5433/uplink",
        "postgres:///uplink?host=/var/run/postgresql&user=console",
        "postgresql://[::1]:5432/uplink?sslmode=verify-full&connect_timeout=3", "postgres://",
        "postgres://console:@db/uplink", "postgres://us%40er@db/uplink",
        "postgresql://db/uplink?passfile=/etc/uplink/pgpass"}) {
    auto location = ParsePostgresLocation(url);
    ASSERT_TRUE(location.ok()) << url << ": " << location.status().ToString();
    EXPECT_EQ(location->url, url);
    EXPECT_FALSE(location->password.has_value());
  }
}

TEST(PostgresLocationTest, RefusesOtherSchemesAndForms) {
  for (const char* url : {"", "mysql://db/uplink", "POSTGRES://db/uplink", "postgres:/db/uplink",
                          "host=/tmp dbname=uplink", "/var/lib/uplink/console.db",
                          " postgres://db/uplink", "sqlite:///x.db"}) {
    auto location = ParsePostgresLocation(url);
    ASSERT_FALSE(location.ok()) << url;
    EXPECT_EQ(location.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(location.status().message().find("the store URL"), std::string::npos);
  }
}

TEST(PostgresLocationTest, RefusesPasswordsWithoutRepeatingThem) {
  const std::string secret = kSecret;
  for (const std::string& url : std::vector<std::string>{
           "postgres://console:" + secret + "@db/uplink",
        "postgresql://console:" + secret + "@/uplink?host=/run/postgresql",
        "postgres://db/uplink?password=" + secret,
        "postgres://db/uplink?sslmode=require&password=" + secret,
        "postgres://db/uplink?pass%77ord=" + secret, "postgres://db/uplink?sslpassword=" + secret,
        "postgres://console:hun@ter2xyz@db/uplink", "mysql://console:" + secret + "@db/x",
        "postgres://console:" + secret + "@db/uplink?x=%zz"}) {
    auto location = ParsePostgresLocation(url);
    ASSERT_FALSE(location.ok()) << url;
    const std::string& message = location.status().message();
    EXPECT_EQ(message.find("hunter"), std::string::npos) << message;
    EXPECT_EQ(message.find("ter2xyz"), std::string::npos) << message;
    EXPECT_EQ(message.find("console:"), std::string::npos) << message;
  }
  auto location = ParsePostgresLocation("postgres://console:" + secret + "@db/uplink");
  const std::string& message = location.status().message();
  EXPECT_NE(message.find("--store-password-file"), std::string::npos) << message;
  EXPECT_NE(message.find("PGPASSFILE"), std::string::npos) << message;
  EXPECT_NE(message.find("PGPASSWORD"), std::string::npos) << message;
}

TEST(PostgresLocationTest, RefusesControlBytesBadEscapesAndHugeUrls) {
  for (const std::string& url : std::vector<std::string>{
           std::string("postgres://db/uplink\n"), std::string("postgres://db/up\0link", 21),
        std::string("postgres://db/uplink?x=\x7f"), std::string("postgres://db/%zz"),
        std::string("postgres://db/%0"), std::string("postgres://db/%"),
        std::string("postgres://db/up%00link"), "postgres://db/" + std::string(5000, 'a')}) {
    auto location = ParsePostgresLocation(url);
    EXPECT_FALSE(location.ok()) << url;
    EXPECT_EQ(location.status().code(), StatusCode::kInvalidArgument);
  }
}

// Random URL-shaped strings around a password: whatever is refused never shows it.
TEST(PostgresLocationTest, RandomInputNeverEchoesAPassword) {
  std::mt19937 random(20);
  const std::vector<std::string> pieces = {"postgres://", "postgresql://", "@", ":", "/", "?",
                                           "&", "=", "password", "%", "%41", "host", "[::1]",
                                           "\n", std::string(1, '\0'), kSecret};
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string url;
    int parts = static_cast<int>(random() % 10);
    for (int p = 0; p < parts; ++p) url += pieces[random() % pieces.size()];
    auto location = ParsePostgresLocation(url);
    if (location.ok()) {
      EXPECT_EQ(location->url, url);
      continue;
    }
    ++refused;
    EXPECT_EQ(location.status().message().find(kSecret), std::string::npos) << url;
  }
  EXPECT_GT(refused, 1000);
}

TEST(PostgresParameterNumberingTest, NumbersOnlyParametersOutsideQuotesAndComments) {
  NumberedSql numbered = NumberParameters(
      "SELECT ?, '?', 'it''s ?', \"a?b\", \"x\"\"?\", ? -- ?\n, $$ ? $$, $t$ ? $t$, "
      "/* ? /* ? */ ? */ ?, a$b ?");
  EXPECT_EQ(numbered.sql,
            "SELECT $1, '?', 'it''s ?', \"a?b\", \"x\"\"?\", $2 -- ?\n, $$ ? $$, $t$ ? $t$, "
            "/* ? /* ? */ ? */ $3, a$b $4");
  EXPECT_EQ(numbered.parameters, 4);
  EXPECT_EQ(NumberParameters("INSERT INTO t VALUES (?, ?, ?)").sql,
            "INSERT INTO t VALUES ($1, $2, $3)");
}

TEST(PostgresParameterNumberingTest, EscapeStringLiteralsEndAtAnUnescapedQuote) {
  // In E'...' a backslash escapes the quote after it; a doubled quote is one quote too.
  NumberedSql numbered = NumberParameters(
      "SELECT E'it\\'s ?', ?, e'\\\\', ?, E'a''?', E'\\\\\\'?', xe'?' ?, ?E'?'");
  EXPECT_EQ(numbered.sql,
            "SELECT E'it\\'s ?', $1, e'\\\\', $2, E'a''?', E'\\\\\\'?', xe'?' $3, $4E'?'");
  EXPECT_EQ(numbered.parameters, 4);
}

TEST(PostgresParameterNumberingTest, UnterminatedQuotesRunToTheEnd) {
  for (const char* sql : {"SELECT '?", "SELECT \"?", "SELECT /* ?", "SELECT $x$ ?", "SELECT -- ?",
                          "SELECT E'?\\' ?"}) {
    NumberedSql numbered = NumberParameters(sql);
    EXPECT_EQ(numbered.sql, sql);
    EXPECT_EQ(numbered.parameters, 0);
  }
  EXPECT_EQ(NumberParameters("?").sql, "$1");
  EXPECT_EQ(NumberParameters("").parameters, 0);
}

}  // namespace
}  // namespace uplink::console::sql
