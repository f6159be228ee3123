// What storing a node upload costs the console's store, without HTTP: the CPU time of
// SqlStore::AcceptUpload for uploads of one node sample each (what bench_load's agents send:
// eight GPUs, two network interfaces, two disks, three filesystems), decoded by the console's
// own decoder, for many agents, on SQLite and on PostgreSQL.
//
// Baseline, measured in the same run: each node-sample upload is followed (or preceded, in
// turn) by an upload of the same payload as a plain record on a stream of its own. It runs the
// same transaction (token check, stream read and update, retention checks, group commit and
// its flush) and inserts the same bytes, so the two differ only by what a node sample becomes:
// its series looked up or created, its points packed, the sample row and the node's latest.
// The ratio (sample / plain record) is the price of the series path over storing the bytes.
//
// CPU time is the process's (user + system: the store's statements, SQLite's work and the
// flush's system time; PostgreSQL's own work is the server's and not counted), per call, so
// that the machine's other load does not count. A node's first upload, which creates its
// series, is reported apart from the steady state, and so is the upload that runs the store's
// once-a-minute rollups and retention (amortised over all uploads).
//
//   bench_ingest [--agents N (1000)] [--uploads U (15)] [--store sqlite|postgres|both]
//                [--smoke]
// --smoke: a few agents, PostgreSQL without fsync; it checks that every upload was stored and
// that every figure of every sample reads back as sent, and judges no time.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/load/agents.h"
#include "common/json.h"
#include "console/api/upload_batch.h"
#include "console/store/sql/postgres_database.h"
#include "console/store/sql_store.h"
#include "protocol/upload.h"
#include "support/postgres_server.h"
#include "support/process.h"

namespace {

using namespace uplink;
using console::SqlStore;
using console::UploadBatch;
using console::UploadOutcome;

struct Options {
  int agents = 1000;
  int uploads = 15;
  std::string store = "both";
  bool smoke = false;
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "bench_ingest: %s\n", message.c_str());
  std::exit(1);
}

template <typename T>
T Check(Result<T> result, const char* what) {
  if (!result.ok()) Die(std::string(what) + ": " + result.status().ToString());
  return std::move(result).value();
}

void Check(const Status& status, const char* what) {
  if (!status.ok()) Die(std::string(what) + ": " + status.ToString());
}

double ProcessCpuMicros() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

std::int64_t UnixMillis(WallTime at) {
  return std::chrono::floor<std::chrono::milliseconds>(at.time_since_epoch()).count();
}

double Quantile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5)];
}

double Sum(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return sum;
}

double Mean(const std::vector<double>& values) {
  return values.empty() ? 0 : Sum(values) / static_cast<double>(values.size());
}

// The store's view of an upload body, through the console's own decoder.
UploadBatch BatchOf(const std::string& body) {
  const JsonLimits limits{1 << 20, protocol::kMaxUploadDocumentDepth};
  json::value document = Check(ParseJson(body, limits), "parsing an upload");
  auto decoded = Check(protocol::DecodeUpload(document), "decoding an upload");
  auto* upload = std::get_if<protocol::DecodedUpload>(&decoded);
  if (upload == nullptr) Die("the simulated upload has an invalid record");
  return console::StoreBatchOf(std::move(*upload));
}

// The same records with their payloads kept as plain records, on a stream of their own.
UploadBatch AsPlainRecords(const UploadBatch& batch) {
  UploadBatch plain = batch;
  plain.stream = "plain/" + batch.stream;
  plain.node_samples.clear();
  for (console::UploadRecord& record : plain.records) record.node_sample.reset();
  return plain;
}

// A store on a fresh database of `engine`, with the server (PostgreSQL) it needs.
struct BenchStore {
  std::unique_ptr<testing::TempDir> dir;
  std::unique_ptr<testing::PostgresServer> server;
  std::unique_ptr<SqlStore> store;
};

BenchStore OpenStore(const std::string& engine, bool smoke) {
  BenchStore opened;
  if (engine == "sqlite") {
    opened.dir = std::make_unique<testing::TempDir>();
    opened.store = Check(SqlStore::OpenSqlite(opened.dir->File("console.db")), "opening SQLite");
    return opened;
  }
  // Durable as the console's SQLite is (every commit flushed), unless only counts matter.
  opened.server = Check(testing::PostgresServer::Launch(
                            testing::kDebianPostgresBinDir,
                            smoke ? testing::PostgresServer::Durability::kFast
                                  : testing::PostgresServer::Durability::kDurable),
                        "starting PostgreSQL");
  console::sql::PostgresLocation location{
      Check(opened.server->NewDatabase(), "creating a database"), opened.server->password()};
  auto database = Check(console::sql::OpenPostgresDatabase(location), "connecting");
  std::vector<std::unique_ptr<console::sql::Database>> lookups;
  lookups.push_back(Check(console::sql::OpenPostgresDatabase(location), "connecting"));
  opened.store =
      Check(SqlStore::Open(std::move(database), std::move(lookups)), "opening the store");
  return opened;
}

const std::string kTokenHash(64, 'b');

console::AuditEvent Audit(WallTime at, const std::string& action) {
  console::AuditEvent event;
  event.at = at;
  event.actor_type = "user";
  event.actor_id = "bench-user";
  event.action = action;
  event.owner_id = "bench-user";
  event.outcome = "ok";
  return event;
}

std::vector<bench::SimulatedAgent> CreateAgents(SqlStore& store, int count, WallTime at) {
  console::User user;
  user.id = "bench-user";
  user.email = "bench@example.com";
  user.role = console::Role::kAdmin;
  user.created_at = at;
  Check(store.CreateUser(user, Audit(at, "user.create")), "creating the user");
  std::vector<bench::SimulatedAgent> agents;
  for (int i = 0; i < count; ++i) {
    char id[32];
    std::snprintf(id, sizeof(id), "%016x", 0xc0000000u + static_cast<unsigned>(i));
    console::Connection connection;
    connection.id = id;
    connection.owner_id = user.id;
    connection.agent_name = "load-" + std::to_string(i);
    connection.cluster_name = "load-cluster-" + std::to_string(i);
    connection.token_prefix = std::string("agt_") + id;
    connection.token_hash = kTokenHash;
    connection.created_at = at;
    connection.expires_at = at + std::chrono::hours(24 * 365);
    Check(store.CreateConnection(connection, Audit(at, "connection.create")),
          "creating a connection");
    agents.push_back(bench::MakeAgent(i, connection.id, ""));
  }
  return agents;
}

struct Calls {
  std::vector<double> cpu_us;
  std::vector<double> wall_us;
  std::int64_t rollups_written = 0;
};

// An upload, timed into `calls`, or into `maintenance` when it was the one that ran the
// once-a-minute rollups and retention for the whole store: that work is the store's, not the
// upload's, and lands on a sample or a plain record by chance.
UploadOutcome TimedUpload(SqlStore& store, const std::string& connection_id,
                          const UploadBatch& batch, WallTime at, Calls& calls,
                          Calls& maintenance) {
  const console::AuditEvent audit = Audit(at, "stream.restart");
  const console::RecordRetention retention;
  const double cpu = ProcessCpuMicros();
  const auto wall = std::chrono::steady_clock::now();
  auto result = store.AcceptUpload(connection_id, kTokenHash, batch, at, retention, audit);
  const double wall_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall).count();
  const double cpu_us = ProcessCpuMicros() - cpu;
  UploadOutcome outcome = Check(std::move(result), "storing an upload");
  Calls& into = outcome.rollups_written > 0 ? maintenance : calls;
  into.wall_us.push_back(wall_us);
  into.cpu_us.push_back(cpu_us);
  into.rollups_written += outcome.rollups_written;
  return outcome;
}

// Every figure of every sample of `sent` read back from the store, as sent.
void CheckReadBack(SqlStore& store, const bench::SimulatedAgent& agent,
                   const std::vector<console::NodeSampleFigures>& sent) {
  const console::NodeSampleFigures& first = sent.front();
  std::map<std::pair<console::SampleMetric, std::string>, std::vector<console::RawPoint>> expected;
  for (const console::NodeSampleFigures& sample : sent) {
    for (const console::SampleValue& value : sample.values) {
      expected[{value.metric, value.label}].push_back(
          {UnixMillis(sample.collected_at), value.value, sample.boot_time});
    }
  }
  auto series = Check(store.ReadSamplePoints(agent.connection_id, first.node,
                                             console::kAllSampleMetrics, first.collected_at,
                                             sent.back().collected_at + std::chrono::seconds(1)),
                      "reading samples back");
  if (series.size() != expected.size()) {
    Die(agent.connection_id + ": " + std::to_string(series.size()) + " series read back, " +
        std::to_string(expected.size()) + " sent");
  }
  for (const console::SeriesPoints& read : series) {
    auto it = expected.find({read.metric, read.label});
    if (it == expected.end()) Die(agent.connection_id + ": a series that was never sent");
    const std::vector<console::RawPoint>& want = it->second;
    bool same = want.size() == read.points.size();
    for (size_t i = 0; same && i < want.size(); ++i) {
      same = want[i].at_ms == read.points[i].at_ms && want[i].value == read.points[i].value &&
             want[i].boot_time == read.points[i].boot_time;
    }
    if (!same) {
      Die(agent.connection_id + ": " + std::string(console::SampleMetricName(read.metric)) +
          "{" + read.label + "} read back differs from what was sent");
    }
  }
}

void Run(const std::string& engine, const Options& options) {
  BenchStore opened = OpenStore(engine, options.smoke);
  SqlStore& store = *opened.store;
  // On a 5-minute boundary, so that the first bucket is complete, and rolled up, from the
  // 15th upload on (its end plus the rollup delay) whatever the time of day.
  const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  const WallTime start = now - now.time_since_epoch() % std::chrono::minutes(5);
  std::vector<bench::SimulatedAgent> agents = CreateAgents(store, options.agents, start);
  std::vector<std::vector<console::NodeSampleFigures>> sent(agents.size());

  Calls first_sample, first_plain, samples, plain, maintenance;
  size_t figures = 0;
  for (int round = 0; round < options.uploads; ++round) {
    // An agent's uploads are 30 s apart, as the node role's default plan sends them.
    const WallTime collected = start + std::chrono::seconds(30) * round;
    const WallTime received = collected + std::chrono::seconds(1);
    for (size_t i = 0; i < agents.size(); ++i) {
      bench::SimulatedAgent& agent = agents[i];
      UploadBatch batch = BatchOf(bench::NodeUploadBody(agent, collected));
      UploadBatch plain_batch = AsPlainRecords(batch);
      figures = batch.node_samples.front().values.size();
      Calls& sample_calls = round == 0 ? first_sample : samples;
      Calls& plain_calls = round == 0 ? first_plain : plain;
      // In turn first and second, so that neither gains from what the other warmed.
      const bool sample_first = (i + static_cast<size_t>(round)) % 2 == 0;
      auto upload = [&](const UploadBatch& upload_batch, Calls& calls) {
        return TimedUpload(store, agent.connection_id, upload_batch, received, calls, maintenance);
      };
      if (!sample_first) upload(plain_batch, plain_calls);
      UploadOutcome outcome = upload(batch, sample_calls);
      if (sample_first) upload(plain_batch, plain_calls);
      if (outcome.samples_stored != 1 || outcome.sample_values_dropped != 0) {
        Die(agent.connection_id + ": the sample was not stored whole");
      }
      sent[i].push_back(std::move(batch.node_samples.front()));
    }
  }
  // Every agent in a smoke run; else a spread of them.
  const size_t step = options.smoke ? 1 : std::max<size_t>(1, agents.size() / 50);
  for (size_t i = 0; i < agents.size(); i += step) CheckReadBack(store, agents[i], sent[i]);

  const char* label = engine == "sqlite" ? "ingest" : "ingest (postgres)";
  std::printf("%s: %d agents x %d uploads of one node sample (%zu figures), %s\n", label,
              options.agents, options.uploads, figures,
              engine == "sqlite" ? "SQLite (synchronous=FULL)"
              : options.smoke    ? "PostgreSQL (fsync off)"
                                 : "PostgreSQL (durable: fsync on)");
  if (options.smoke) {
    std::printf("%s: smoke run: every upload stored, every figure read back as sent\n", label);
    return;
  }
  const double sample_cpu = Mean(samples.cpu_us);
  const double plain_cpu = Mean(plain.cpu_us);
  std::printf("  node-sample upload: %.1f us CPU per upload (p50 %.1f, p99 %.1f); wall p50 "
              "%.0f us, p99 %.0f us\n",
              sample_cpu, Quantile(samples.cpu_us, 0.5), Quantile(samples.cpu_us, 0.99),
              Quantile(samples.wall_us, 0.5), Quantile(samples.wall_us, 0.99));
  std::printf("  the same payload as a plain record (baseline): %.1f us CPU per upload (p50 "
              "%.1f); wall p50 %.0f us\n",
              plain_cpu, Quantile(plain.cpu_us, 0.5), Quantile(plain.wall_us, 0.5));
  std::printf("  a node's first upload (creates its series): %.1f us CPU; its plain record's "
              "%.1f us\n",
              Mean(first_sample.cpu_us), Mean(first_plain.cpu_us));
  // A node's bucket holds ten samples at 30 s: its rollup's share of each.
  const auto buckets = static_cast<double>(std::max<std::int64_t>(1, maintenance.rollups_written));
  const double bucket_cpu = Sum(maintenance.cpu_us) / buckets;
  const double bucket_wall = Sum(maintenance.wall_us) / buckets;
  std::printf("  rollups and retention: %zu runs, %lld node-buckets rolled up, %.1f us CPU and "
              "%.0f us wall each (%.1f us CPU per sample)\n",
              maintenance.cpu_us.size(), static_cast<long long>(maintenance.rollups_written),
              bucket_cpu, bucket_wall, bucket_cpu / 10);
  std::printf("%s: sample / plain record = %.2f (the series path adds %.1f us CPU per upload)\n",
              label, sample_cpu / plain_cpu, sample_cpu - plain_cpu);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    bool has_value = i + 1 < argc;
    if (flag == "--agents" && has_value) {
      options.agents = std::atoi(argv[++i]);
    } else if (flag == "--uploads" && has_value) {
      options.uploads = std::atoi(argv[++i]);
    } else if (flag == "--store" && has_value) {
      options.store = argv[++i];
    } else if (flag == "--smoke") {
      options.smoke = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--agents N] [--uploads U] [--store sqlite|postgres|both] "
                   "[--smoke]\n",
                   argv[0]);
      return 2;
    }
  }
  if (options.agents < 1 || options.uploads < 2 ||
      (options.store != "sqlite" && options.store != "postgres" && options.store != "both")) {
    std::fprintf(stderr, "bench_ingest: --agents must be at least 1, --uploads at least 2, "
                         "--store sqlite, postgres or both\n");
    return 2;
  }
  if (options.store != "postgres") Run("sqlite", options);
  if (options.store != "sqlite") Run("postgres", options);
  return 0;
}
