// AgentPresence's flush against a real store of each engine: a row the store refuses for good
// (PostgreSQL's text cannot hold a NUL byte) is dropped alone, logged and counted, while every
// other row is stored; a store that is away or busy loses nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/metrics.h"
#include "console/api/agent_presence.h"
#include "console/store/sql_store.h"
#include "store_fixture.h"

namespace uplink::console {
namespace {

using std::chrono::seconds;
using testing::StoreEngine;

const WallTime kT0 = testing::kStoreT0;
constexpr const char* kDropped = "uplink_console_presence_rows_dropped_total";

// The real store, with RecordPresence failing with `failure` from its `fail_from`th call on
// (counted from 1) until Heal(): a database that goes away in the middle of a flush.
class FaultInjectingConnectionStore final : public ConnectionStore {
 public:
  explicit FaultInjectingConnectionStore(ConnectionStore& real) : real_(real) {}

  void FailFrom(int call, Status failure) {
    calls_ = 0;
    fail_from_ = call;
    failure_ = std::move(failure);
  }
  void Heal() { fail_from_ = 0; }
  int calls() const { return calls_; }

  Status RecordPresence(const PresenceUpdate& update) override {
    ++calls_;
    if (fail_from_ > 0 && calls_ >= fail_from_) return failure_;
    return real_.RecordPresence(update);
  }

  Status CreateConnection(const Connection& connection, const AuditEvent& audit) override {
    return real_.CreateConnection(connection, audit);
  }
  Status CreateConnectionWithHandover(const Connection& connection, const Handover& handover,
                                      const AuditEvent& audit) override {
    return real_.CreateConnectionWithHandover(connection, handover, audit);
  }
  Result<Connection> GetConnection(const std::string& id) override {
    return real_.GetConnection(id);
  }
  Result<std::vector<Connection>> ListConnections(const std::string& owner_id) override {
    return real_.ListConnections(owner_id);
  }
  Result<std::vector<Connection>> ListAllConnections() override {
    return real_.ListAllConnections();
  }
  Result<std::vector<ConnectionLifecycle>> ListConnectionLifecycles() override {
    return real_.ListConnectionLifecycles();
  }
  Result<ConnectionRows> FindConnectionsByTokenPrefix(const std::string& prefix) override {
    return real_.FindConnectionsByTokenPrefix(prefix);
  }
  Status ReplaceToken(const std::string& id, const std::string& token_prefix,
                      const std::string& token_hash, WallTime expires_at,
                      const std::optional<Handover>& handover, const AuditEvent& audit) override {
    return real_.ReplaceToken(id, token_prefix, token_hash, expires_at, handover, audit);
  }
  Status RevokeConnection(const std::string& id, WallTime at, const AuditEvent& audit) override {
    return real_.RevokeConnection(id, at, audit);
  }
  Result<std::vector<Handover>> FindHandoversByPrefix(const std::string& prefix) override {
    return real_.FindHandoversByPrefix(prefix);
  }
  Result<std::optional<Handover>> LatestHandover(const std::string& connection_id) override {
    return real_.LatestHandover(connection_id);
  }
  Result<HandoverRedemption> RedeemHandover(const std::string& handover_id, WallTime now,
                                            const std::string& token_prefix,
                                            const std::string& token_hash,
                                            const AuditEvent& audit) override {
    return real_.RedeemHandover(handover_id, now, token_prefix, token_hash, audit);
  }
  Status AcceptReport(const std::string& connection_id, const std::string& token_hash,
                      const InventoryReport& report, WallTime received_at,
                      const AuditEvent& audit) override {
    return real_.AcceptReport(connection_id, token_hash, report, received_at, audit);
  }
  void AcceptReportThen(std::string connection_id, std::string token_hash,
                        std::shared_ptr<const InventoryReport> report, WallTime received_at,
                        AuditEvent audit, std::function<void(Status)> done) override {
    real_.AcceptReportThen(std::move(connection_id), std::move(token_hash), std::move(report),
                           received_at, std::move(audit), std::move(done));
  }
  Result<std::vector<Node>> ListNodes(const std::string& connection_id) override {
    return real_.ListNodes(connection_id);
  }
  Status BindCluster(const std::string& connection_id, const std::string& token_hash,
                     const std::string& cluster_uid, const AuditEvent& audit) override {
    return real_.BindCluster(connection_id, token_hash, cluster_uid, audit);
  }
  Result<std::vector<AgentSeen>> ListAgents(const std::string& connection_id,
                                            int limit) override {
    return real_.ListAgents(connection_id, limit);
  }
  Result<NamespaceScope> GetNamespaceScope(const std::string& connection_id) override {
    return real_.GetNamespaceScope(connection_id);
  }
  Status SetNamespaceScope(const std::string& connection_id,
                           const std::vector<std::string>& namespaces,
                           const AuditEvent& audit) override {
    return real_.SetNamespaceScope(connection_id, namespaces, audit);
  }
  Status CreateConnectionWithScope(const Connection& connection,
                                   const std::optional<Handover>& handover,
                                   const std::vector<std::string>& namespaces,
                                   const AuditEvent& audit) override {
    return real_.CreateConnectionWithScope(connection, handover, namespaces, audit);
  }
  Result<std::optional<InstallPlan>> GetInstallPlan(const std::string& connection_id) override {
    return real_.GetInstallPlan(connection_id);
  }
  Status SetInstallPlan(const std::string& connection_id, const InstallPlan& plan,
                        const AuditEvent& audit) override {
    return real_.SetInstallPlan(connection_id, plan, audit);
  }

 private:
  ConnectionStore& real_;
  int calls_ = 0;
  int fail_from_ = 0;
  Status failure_;
};

// The lines the presence logs while a test runs.
class PresenceLog {
 public:
  PresenceLog() {
    log::SetSinkForTesting([this](std::string_view line) {
      if (line.find("\"console.presence\"") == std::string_view::npos) return;
      std::lock_guard lock(mutex_);
      lines_.emplace_back(line);
    });
  }
  ~PresenceLog() { log::SetSinkForTesting(nullptr); }
  std::vector<std::string> Take() {
    std::lock_guard lock(mutex_);
    return std::exchange(lines_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

std::string ConnectionId(int i) {
  char text[17];
  std::snprintf(text, sizeof text, "%08x000000c2", static_cast<unsigned>(i + 1));
  return text;
}

std::string Instance(int agent) { return "gpu-node-" + std::to_string(agent); }

class AgentPresenceFlushTest : public testing::SqlStoreFixture {
 protected:
  // Agent rows each connection gets: with one row per connection, a flush of every connection
  // is kConnections * (kAgents + 1) rows, more than one part of kFlushRows.
  static constexpr int kConnections = 40;
  static constexpr int kAgents = 8;
  // The agent of connection kBadConnection whose instance PostgreSQL cannot store.
  static constexpr int kBadConnection = 7;
  inline static const std::string kBadInstance{"gpu-node-\0evil", 14};

  void SetUp() override {
    SqlStoreFixture::SetUp();
    for (int i = 0; i < kConnections; ++i) {
      Connection connection = connection_;
      connection.id = ConnectionId(i);
      connection.cluster_name = "cluster-" + std::to_string(i);
      connection.token_prefix = "agt_" + connection.id.substr(0, 8);
      connection.token_hash = std::string(56, 'a') + connection.id.substr(0, 8);
      Status created = store_->CreateConnection(
          connection, testing::AdminEvent("connection.create", "connection", connection.id));
      ASSERT_TRUE(created.ok()) << created.ToString();
    }
  }

  // Every connection's agents call at `at`, and the bad agent too when `with_bad`.
  void NoteCalls(WallTime at, bool with_bad) {
    for (int i = 0; i < kConnections; ++i) {
      for (int agent = 0; agent < kAgents; ++agent) {
        presence_.Seen(ConnectionId(i), AgentIdentity{"node", Instance(agent), "0.2.0"}, at);
      }
    }
    if (with_bad) {
      presence_.Seen(ConnectionId(kBadConnection), AgentIdentity{"node", kBadInstance, "0.2.0"},
                     at);
    }
  }

  // Every connection's last call and each of its good agents were stored as of `at`.
  void ExpectStored(WallTime at) {
    for (int i = 0; i < kConnections; ++i) {
      auto connection = store_->GetConnection(ConnectionId(i));
      ASSERT_TRUE(connection.ok()) << connection.status().ToString();
      EXPECT_EQ(connection->last_seen_at, at) << i;
      auto agents = store_->ListAgents(ConnectionId(i), 100);
      ASSERT_TRUE(agents.ok()) << agents.status().ToString();
      int good = 0;
      for (const AgentSeen& agent : *agents) {
        if (agent.instance == kBadInstance) continue;
        ++good;
        EXPECT_EQ(agent.last_seen_at, at) << i << " " << agent.instance;
      }
      EXPECT_EQ(good, kAgents) << i;
    }
  }

  // Whether the bad agent's row is in the store.
  bool BadAgentStored() {
    auto agents = store_->ListAgents(ConnectionId(kBadConnection), 100);
    EXPECT_TRUE(agents.ok()) << agents.status().ToString();
    if (!agents.ok()) return false;
    for (const AgentSeen& agent : *agents) {
      if (agent.instance == kBadInstance) return true;
    }
    return false;
  }

  metrics::Registry metrics_;
  AgentPresence presence_{metrics_};
};

INSTANTIATE_TEST_SUITE_P(Engines, AgentPresenceFlushTest, testing::kStoreEngines,
                         testing::StoreEngineName);

TEST_P(AgentPresenceFlushTest, ARowTheStoreRefusesIsDroppedAloneAndBlocksNoOther) {
  ASSERT_GT(kConnections * (kAgents + 1), static_cast<int>(AgentPresence::kFlushRows));
  PresenceLog log;
  NoteCalls(kT0 + seconds(10), /*with_bad=*/true);
  Status flushed = presence_.Flush(*store_);
  ASSERT_TRUE(flushed.ok()) << flushed.ToString();
  ExpectStored(kT0 + seconds(10));
  std::vector<std::string> lines = log.Take();

  if (GetParam() == StoreEngine::kSqlite) {
    // SQLite's text holds a NUL: nothing is refused.
    EXPECT_TRUE(BadAgentStored());
    EXPECT_EQ(metrics_.Get(kDropped), 0);
    EXPECT_TRUE(lines.empty()) << lines.front();
  } else {
    EXPECT_FALSE(BadAgentStored());
    EXPECT_EQ(metrics_.Get(kDropped), 1);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("\"connection_id\":\"" + ConnectionId(kBadConnection) + "\""),
              std::string::npos)
        << lines[0];
    EXPECT_NE(lines[0].find("\"role\":\"node\""), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("NUL byte"), std::string::npos) << lines[0];
  }
  EXPECT_NE(metrics_.RenderText().find(kDropped), std::string::npos);

  // Dropped, not kept: the next flush has nothing to write and nothing to refuse.
  flushed = presence_.Flush(*store_);
  EXPECT_TRUE(flushed.ok()) << flushed.ToString();
  EXPECT_EQ(metrics_.Get(kDropped), GetParam() == StoreEngine::kSqlite ? 0 : 1);
  EXPECT_TRUE(log.Take().empty());
  ExpectStored(kT0 + seconds(10));

  // The agent calls again: its row is refused again, and the others' newer calls stored.
  NoteCalls(kT0 + seconds(20), /*with_bad=*/true);
  flushed = presence_.Flush(*store_);
  EXPECT_TRUE(flushed.ok()) << flushed.ToString();
  ExpectStored(kT0 + seconds(20));
  EXPECT_EQ(metrics_.Get(kDropped), GetParam() == StoreEngine::kSqlite ? 0 : 2);
}

TEST_P(AgentPresenceFlushTest, AStoreAwayInTheMiddleOfAFlushLosesNothing) {
  FaultInjectingConnectionStore store(*store_);
  NoteCalls(kT0 + seconds(10), /*with_bad=*/false);
  // The first part is stored, the second finds the database gone.
  store.FailFrom(2, UnavailableError("recording when agents called: server closed the "
                                     "connection unexpectedly"));
  Status flushed = presence_.Flush(store);
  EXPECT_EQ(flushed.code(), StatusCode::kUnavailable) << flushed.ToString();
  EXPECT_EQ(store.calls(), 2) << "an unavailable store is not searched for refused rows";
  // Newer calls noted meanwhile win over the ones kept.
  presence_.Seen(ConnectionId(0), kT0 + seconds(15));
  for (int agent = 0; agent < kAgents; ++agent) {
    presence_.Seen(ConnectionId(0), AgentIdentity{"node", Instance(agent), "0.2.0"},
                   kT0 + seconds(15));
  }

  store.Heal();
  flushed = presence_.Flush(store);
  ASSERT_TRUE(flushed.ok()) << flushed.ToString();
  EXPECT_EQ(metrics_.Get(kDropped), 0);
  EXPECT_EQ(store_->GetConnection(ConnectionId(0))->last_seen_at, kT0 + seconds(15));
  EXPECT_EQ(store_->ListAgents(ConnectionId(0), 100)->front().last_seen_at, kT0 + seconds(15));
  for (int i = 1; i < kConnections; ++i) {
    EXPECT_EQ(store_->GetConnection(ConnectionId(i))->last_seen_at, kT0 + seconds(10)) << i;
    EXPECT_EQ(store_->ListAgents(ConnectionId(i), 100)->size(), static_cast<size_t>(kAgents));
  }
}

TEST_P(AgentPresenceFlushTest, AStoreThatRefusesEveryRowHasNoRowDropped) {
  // A full disk refuses every write, not any one row: nothing is dropped, and the search
  // stops after the first part.
  FaultInjectingConnectionStore store(*store_);
  NoteCalls(kT0 + seconds(10), /*with_bad=*/false);
  store.FailFrom(1, IOError("recording when agents called: database or disk is full"));
  Status flushed = presence_.Flush(store);
  EXPECT_EQ(flushed.code(), StatusCode::kIOError) << flushed.ToString();
  EXPECT_EQ(store.calls(), static_cast<int>(2 * AgentPresence::kFlushRows - 1));
  EXPECT_EQ(metrics_.Get(kDropped), 0);

  store.Heal();
  flushed = presence_.Flush(store);
  ASSERT_TRUE(flushed.ok()) << flushed.ToString();
  ExpectStored(kT0 + seconds(10));
  EXPECT_EQ(metrics_.Get(kDropped), 0);
}

// PostgreSQL only: it is the engine that refuses the NUL byte.
class AgentPresencePostgresTest : public AgentPresenceFlushTest {};

INSTANTIATE_TEST_SUITE_P(Engines, AgentPresencePostgresTest,
                         ::testing::Values(StoreEngine::kPostgres), testing::StoreEngineName);

TEST_P(AgentPresencePostgresTest, AStoreGoneWhileARefusedRowIsSoughtKeepsWhatIsLeft) {
  FaultInjectingConnectionStore store(*store_);
  // One part of 21 rows: 10 connections, then their agents and the bad one.
  for (int i = 0; i < 10; ++i) {
    presence_.Seen(ConnectionId(i), AgentIdentity{"node", Instance(0), "0.2.0"},
                   kT0 + seconds(10));
  }
  presence_.Seen(ConnectionId(kBadConnection), AgentIdentity{"node", kBadInstance, "0.2.0"},
                 kT0 + seconds(10));
  // Call 1 (the part) is refused for the NUL byte; call 2 (its first half, the connections)
  // is stored; call 3 (the agents) finds the database gone.
  store.FailFrom(3, UnavailableError("recording an agent: the database system is shutting "
                                     "down"));
  Status flushed = presence_.Flush(store);
  EXPECT_EQ(flushed.code(), StatusCode::kUnavailable) << flushed.ToString();
  EXPECT_EQ(store.calls(), 3);
  EXPECT_EQ(metrics_.Get(kDropped), 0);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(store_->GetConnection(ConnectionId(i))->last_seen_at, kT0 + seconds(10)) << i;
    EXPECT_TRUE(store_->ListAgents(ConnectionId(i), 100)->empty()) << i;
  }

  store.Heal();
  flushed = presence_.Flush(store);
  ASSERT_TRUE(flushed.ok()) << flushed.ToString();
  EXPECT_EQ(metrics_.Get(kDropped), 1);
  for (int i = 0; i < 10; ++i) {
    auto agents = store_->ListAgents(ConnectionId(i), 100);
    ASSERT_EQ(agents->size(), 1u) << i;
    EXPECT_EQ(agents->front().instance, Instance(0));
  }
}

}  // namespace
}  // namespace uplink::console
