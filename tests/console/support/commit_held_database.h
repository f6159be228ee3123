// A database wrapper for tests that need a write group caught in its COMMIT, as an fsync or a
// slow network holds one: what may, and what must not, wait for the writer meanwhile.
#pragma once

#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "console/store/sql/database.h"
#include "console/store/sql_store.h"
#include "store_database.h"

namespace uplink::console::testing {

// A real database whose COMMIT, once armed, waits to be let through: a write group held in
// its commit, as an fsync holds one.
class CommitHeldDatabase : public sql::Database {
 public:
  explicit CommitHeldDatabase(std::unique_ptr<sql::Database> inner) : inner_(std::move(inner)) {}

  // The next COMMIT signals `reached` and waits for `release`.
  void HoldNextCommit(std::promise<void>* reached, std::shared_future<void> release) {
    reached_ = reached;
    release_ = std::move(release);
  }

  Status Exec(const std::string& sql) override {
    HoldIfCommit(sql);
    return inner_->Exec(sql);
  }
  // A write alone in its group defers its COMMIT.
  Status DeferExec(const std::string& sql) override {
    HoldIfCommit(sql);
    return inner_->DeferExec(sql);
  }
  sql::Engine engine() const override { return inner_->engine(); }
  std::span<const sql::Migration> Migrations() const override { return inner_->Migrations(); }
  Result<sql::Statement*> Prepare(const std::string& sql) override { return inner_->Prepare(sql); }
  Status ExecUnbounded(const std::string& sql) override { return inner_->ExecUnbounded(sql); }
  Status Defer(sql::Statement& statement, std::string_view what) override {
    return inner_->Defer(statement, what);
  }
  Status AwaitDeferred() override { return inner_->AwaitDeferred(); }
  std::int64_t DeferredSent() const override { return inner_->DeferredSent(); }
  std::int64_t DeferredAnswered() const override { return inner_->DeferredAnswered(); }
  std::optional<DeferredFailure> LastDeferredFailure() const override {
    return inner_->LastDeferredFailure();
  }
  Status BeginWrite() override { return inner_->BeginWrite(); }
  Status BeginSnapshot() override { return inner_->BeginSnapshot(); }
  bool InTransaction() const override { return inner_->InTransaction(); }
  std::int64_t RoundTrips() const override { return inner_->RoundTrips(); }
  sql::Failure LastFailure() const override { return inner_->LastFailure(); }
  std::string LastMessage() const override { return inner_->LastMessage(); }

 private:
  void HoldIfCommit(const std::string& sql) {
    if (sql != "COMMIT" || reached_ == nullptr) return;
    std::exchange(reached_, nullptr)->set_value();
    release_.wait();
  }

  const std::unique_ptr<sql::Database> inner_;
  std::promise<void>* reached_ = nullptr;  // set and taken on the writer's side only
  std::shared_future<void> release_;
};

// A store on `database` whose writer's connection is wrapped in a CommitHeldDatabase, set in
// `held` (owned by the store).
inline Result<std::unique_ptr<SqlStore>> OpenStoreWithHeldCommits(const TestDatabase& database,
                                                                  CommitHeldDatabase*& held) {
  return database.OpenStore([&](std::unique_ptr<sql::Database> inner) {
    auto wrapper = std::make_unique<CommitHeldDatabase>(std::move(inner));
    held = wrapper.get();
    return wrapper;
  });
}

}  // namespace uplink::console::testing
