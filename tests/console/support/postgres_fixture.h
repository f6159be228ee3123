// What the PostgreSQL tests of the console start from: a fresh database on the run's server
// (or on a server of the test's own, when it restarts the server), dropped at the test's end
// so that a run's databases do not pile up on the shared server.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "console/store/sql/postgres_database.h"
#include "support/postgres_server.h"

namespace uplink::console::testing {

class PostgresFixture : public ::testing::Test {
 protected:
  // A test that restarts the server has one of its own; the rest share the run's.
  virtual bool RestartsTheServer() const { return false; }

  void SetUp() override {
    auto server = uplink::testing::PostgresServer::ForTest(RestartsTheServer(), own_server_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = *server;
    auto url = server_->NewDatabase();
    ASSERT_TRUE(url.ok()) << url.status().ToString();
    url_ = *url;
  }
  // Whatever the test left connected is ended with the database.
  void TearDown() override {
    if (server_ != nullptr && !url_.empty()) (void)server_->DropDatabase(url_);
  }

  // The test's database, with the password apart from the URL, as the console is given it.
  sql::PostgresLocation location() const { return {url_, server_->password()}; }

  uplink::testing::PostgresServer* server_ = nullptr;
  std::unique_ptr<uplink::testing::PostgresServer> own_server_;
  std::string url_;
};

}  // namespace uplink::console::testing
