// The shipper against a real console: ConsoleApi on a real HttpServer on loopback with its
// SQLite store in a temporary directory, a real spool on disk, and where a test needs a fault
// a real HTTP proxy in between. The shipper is driven one step at a time on a FakeClock, so
// back-off waits are returned, never slept.
#include "agent/shipper.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "common/gzip.h"
#include "console/api/console_api.h"
#include "console/replies.h"
#include "console/setup.h"
#include "net/client.h"
#include "net/server.h"
#include "spool/fault_injection_fs.h"
#include "support/process.h"

namespace uplink::agent {
namespace {

using std::chrono::minutes;
using std::chrono::milliseconds;
using std::chrono::seconds;

const char kStream[] = "node/gpu-node-0001";

json::value Parse(const std::string& text) {
  auto parsed = ParseJson(text, JsonLimits{.max_bytes = 64 << 20});
  EXPECT_TRUE(parsed.ok()) << text.substr(0, 200);
  return parsed.ok() ? *parsed : json::value();
}

// A real console on loopback, administered through its own API with the admin's key.
class LiveConsole {
 public:
  LiveConsole(const Clock& clock, const std::string& data_dir, size_t max_upload_bytes)
      : data_dir_(data_dir) {
    auto key = console::InitializeConsole(data_dir_, "admin@example.com", clock);
    EXPECT_TRUE(key.ok()) << key.status().ToString();
    if (key.ok()) admin_key_ = key->Reveal();
    auto store = console::OpenConsoleStore(data_dir_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    console::ConsoleOptions options;
    options.max_upload_bytes = max_upload_bytes;
    api_ = std::make_unique<console::ConsoleApi>(*store_, clock, options);
    net::ServerOptions server;
    server.max_body_bytes = 64 << 20;
    server.body_limit_for = [max_upload_bytes](const net::Request& head) {
      return console::RouteBodyLimit(head, max_upload_bytes);
    };
    server.refusal = console::ServerRefusalResponse;  // as uplink-console serve has it
    auto started = net::HttpServer::Start(server, api_->router().AsHandler());
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value();
    auto client = net::HttpClient::Create({.base_url = url()});
    EXPECT_TRUE(client.ok());
    client_ = std::move(client).value();
  }
  ~LiveConsole() {
    if (server_) server_->Stop();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

  json::value Api(const std::string& method, const std::string& target,
                  const std::string& body = "", int expected_status = 200) {
    net::Request request;
    request.method = method;
    request.target = target;
    request.headers.Set("Authorization", "Bearer " + admin_key_);
    if (!body.empty()) request.headers.Set("Content-Type", "application/json");
    request.body = body;
    auto response = client_->Send(request);
    EXPECT_TRUE(response.ok()) << response.status().ToString();
    if (!response.ok()) return json::value();
    EXPECT_EQ(response->status, expected_status) << method << " " << target << ": " << response->body;
    return Parse(response->body);
  }

  // A new connection; returns {id, token}.
  std::pair<std::string, std::string> CreateConnection(const std::string& name) {
    json::value created = Api("POST", "/api/v1/connections",
                              R"({"agent_name":"spool","cluster_name":")" + name + "\"}", 201);
    return {std::string(created.at("id").as_string()), std::string(created.at("token").as_string())};
  }

  // Every record the console stored for the stream, in order, by paging.
  std::vector<json::value> Records(const std::string& connection_id,
                                   const std::string& stream = kStream) {
    std::vector<json::value> records;
    std::string after = "0";
    while (true) {
      json::value page = Api("GET", "/api/v1/connections/" + connection_id +
                                        "/records?stream=" + net::PercentEncode(stream) +
                                        "&limit=1000&after=" + after);
      if (!page.is_object()) break;
      for (const json::value& record : page.at("records").as_array()) records.push_back(record);
      const json::value& next = page.at("next_after");
      if (next.is_null()) break;
      after = std::to_string(next.to_number<std::uint64_t>());
    }
    return records;
  }

  // The stream as GET /api/v1/connections/{id} shows it; null when there is none.
  json::value Stream(const std::string& connection_id, const std::string& stream = kStream) {
    json::value connection = Api("GET", "/api/v1/connections/" + connection_id);
    if (!connection.is_object()) return json::value();
    for (const json::value& entry : connection.at("streams").as_array()) {
      if (entry.at("stream") == json::value(stream)) return entry;
    }
    return json::value();
  }

 private:
  std::string data_dir_;
  std::string admin_key_;
  std::unique_ptr<console::SqlStore> store_;
  std::unique_ptr<console::ConsoleApi> api_;
  std::unique_ptr<net::HttpServer> server_;
  std::unique_ptr<net::HttpClient> client_;
};

// An HTTP proxy in front of the console. It forwards every request unless told to answer on
// its own, or to forward and then lose the reply (the console stored the upload; the agent
// never hears so). It keeps every upload it saw, decompressed.
class Proxy {
 public:
  enum class Mode { kForward, kLoseReply, kAnswer };

  explicit Proxy(const std::string& upstream) {
    auto client = net::HttpClient::Create({.base_url = upstream});
    EXPECT_TRUE(client.ok());
    upstream_ = std::move(client).value();
    auto started = net::HttpServer::Start(
        net::ServerOptions{.max_body_bytes = 64 << 20},
        [this](net::Request request, net::Reply reply) { Handle(std::move(request), std::move(reply)); });
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value();
  }
  ~Proxy() {
    if (server_) server_->Stop();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

  // The next `count` requests are handled by `mode` (then forwarded again).
  void Next(Mode mode, int count = 1, net::Response answer = {}) {
    std::lock_guard lock(mutex_);
    mode_ = mode;
    remaining_ = count;
    answer_ = std::move(answer);
  }

  // Every upload holding record `sequence` is answered with `answer` instead of forwarded.
  void RefuseUploadsHolding(std::uint64_t sequence, net::Response answer) {
    std::lock_guard lock(mutex_);
    refused_sequence_ = sequence;
    refusal_ = std::move(answer);
  }

  std::vector<json::value> uploads() const {
    std::lock_guard lock(mutex_);
    return uploads_;
  }

 private:
  void Handle(net::Request request, net::Reply reply) {
    Mode mode = Mode::kForward;
    net::Response answer;
    {
      std::lock_guard lock(mutex_);
      if (remaining_ > 0) {
        mode = mode_;
        answer = answer_;
        --remaining_;
      }
      auto plain = GzipDecompress(request.body, 64 << 20);
      EXPECT_TRUE(plain.ok()) << "uploads are always gzip-compressed";
      if (plain.ok()) {
        uploads_.push_back(Parse(*plain));
        for (const json::value& record : uploads_.back().at("records").as_array()) {
          if (refused_sequence_ && record.at("sequence") == json::value(*refused_sequence_)) {
            mode = Mode::kAnswer;
            answer = refusal_;
          }
        }
      }
    }
    if (mode == Mode::kAnswer) {
      reply(std::move(answer));
      return;
    }
    net::Request forwarded;
    forwarded.method = request.method;
    forwarded.target = request.target;
    for (const char* name : {"Authorization", "Content-Type", "Content-Encoding", "Accept"}) {
      if (auto value = request.headers.Get(name)) forwarded.headers.Set(name, *value);
    }
    forwarded.body = std::move(request.body);
    auto response = upstream_->Send(std::move(forwarded));
    if (mode == Mode::kLoseReply) {
      std::lock_guard lock(mutex_);
      lost_replies_.push_back(std::move(reply));  // never answered: the agent times out
      return;
    }
    reply(response.ok() ? *response : net::Response::Text(502, "upstream failed\n"));
  }

  mutable std::mutex mutex_;
  Mode mode_ = Mode::kForward;
  int remaining_ = 0;
  net::Response answer_;
  std::optional<std::uint64_t> refused_sequence_;
  net::Response refusal_;
  std::vector<json::value> uploads_;
  std::vector<net::Reply> lost_replies_;
  std::unique_ptr<net::HttpClient> upstream_;
  std::unique_ptr<net::HttpServer> server_;
};

std::string Payload(int n, size_t padding = 0) {
  return ToJson(json::object{{"kind", "sample"}, {"n", n}, {"pad", std::string(padding, 'p')}});
}

class ShipperTest : public ::testing::Test {
 protected:
  void SetUp() override { StartConsole(8 << 20); }

  void StartConsole(size_t max_upload_bytes) {
    console_.reset();
    console_ = std::make_unique<LiveConsole>(
        clock_, dir_.File("console-" + std::to_string(++consoles_)), max_upload_bytes);
    auto [id, token] = console_->CreateConnection("gpu-east");
    connection_id_ = id;
    testing::WriteFileOrDie(token_file_, token + "\n");
  }

  void OpenSpool(spool::SpoolOptions options = {}) {
    OpenSpoolOn(spool::PosixFileSystem(), dir_.File("spool"), options);
  }

  void OpenSpoolOn(spool::FileSystem& fs, const std::string& dir, spool::SpoolOptions options = {}) {
    spool_.reset();
    auto opened = spool::Spool::Open(fs, dir, options, clock_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    spool_ = std::move(opened).value();
  }

  // A small spool that holds its cap on disk (four segments).
  static spool::SpoolOptions ReservingOptions() {
    spool::SpoolOptions options;
    options.max_bytes = 256 << 10;
    options.segment_bytes = 64 << 10;
    options.reserve_disk = true;
    return options;
  }

  // A shipper sending to `url` (the console's unless a proxy's), with the jitter fixed at half.
  Shipper& MakeShipper(ShipperOptions options = {}, std::string url = "",
                       milliseconds timeout = seconds(5)) {
    if (!spool_) OpenSpool();
    ConsoleClientOptions client;
    client.base_url = url.empty() ? console_->url() : url;
    client.token_file = token_file_;
    client.role = "spool";
    client.request_timeout = timeout;
    client_ = std::move(ConsoleClient::Create(client, clock_).value());
    if (options.stream.empty()) options.stream = kStream;
    if (options.instance.empty()) options.instance = "gpu-node-0001";
    DeclareShipperMetrics(registry_);
    shipper_ = std::make_unique<Shipper>(options, *spool_, *client_, clock_, registry_,
                                         Backoff(BackoffOptions{}, [] { return 0.5; }));
    return *shipper_;
  }

  std::uint64_t Append(const std::string& payload) {
    auto sequence = spool_->Append(payload);
    EXPECT_TRUE(sequence.ok()) << sequence.status().ToString();
    return sequence.value_or(0);
  }

  // Steps until the shipper is idle; the outcomes seen on the way.
  std::vector<StepOutcome> ShipAll(int max_steps = 1000) {
    std::vector<StepOutcome> outcomes;
    for (int i = 0; i < max_steps; ++i) {
      StepResult step = shipper_->Step();
      if (step.outcome == StepOutcome::kIdle) return outcomes;
      outcomes.push_back(step.outcome);
    }
    ADD_FAILURE() << "still not idle after " << max_steps << " steps";
    return outcomes;
  }

  std::vector<std::uint64_t> StoredSequences() {
    std::vector<std::uint64_t> sequences;
    for (const json::value& record : console_->Records(connection_id_)) {
      sequences.push_back(record.at("sequence").to_number<std::uint64_t>());
    }
    return sequences;
  }

  static std::vector<std::uint64_t> Range(std::uint64_t first, std::uint64_t last) {
    std::vector<std::uint64_t> range;
    for (std::uint64_t s = first; s <= last; ++s) range.push_back(s);
    return range;
  }

  static int Count(const std::vector<StepOutcome>& outcomes, StepOutcome outcome) {
    return static_cast<int>(std::count(outcomes.begin(), outcomes.end(), outcome));
  }

  double Metric(const char* name, const metrics::Labels& labels = {}) {
    return registry_.Get(name, labels);
  }

  testing::TempDir dir_;
  std::string token_file_ = dir_.File("token");
  FakeClock clock_;
  metrics::Registry registry_;
  std::unique_ptr<LiveConsole> console_;
  int consoles_ = 0;
  std::string connection_id_;
  spool::testing::MemoryFileSystem memory_fs_;  // outlives a spool opened on it
  std::unique_ptr<spool::Spool> spool_;
  std::unique_ptr<ConsoleClient> client_;
  std::unique_ptr<Shipper> shipper_;
};

TEST(StreamName, OnlyTheProtocolsCharactersAndLengthsAreAccepted) {
  EXPECT_TRUE(ValidateStreamName("node/gpu-node-0001").ok());
  EXPECT_TRUE(ValidateStreamName("spool/A.b_c-9").ok());
  EXPECT_TRUE(ValidateStreamName(std::string(253, 'a')).ok());
  for (std::string bad : {std::string(), std::string(254, 'a'), std::string("node 1"),
                          std::string("node\n1"), std::string("n\xc3\xa9"), std::string("a?b"),
                          std::string("a\0b", 3)}) {
    Status status = ValidateStreamName(bad);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(ShipperTest, RecordsArriveInOrderExactlyOnceAcrossBatches) {
  Shipper& shipper = MakeShipper(ShipperOptions{.max_batch_records = 30});
  EXPECT_EQ(shipper.Step().outcome, StepOutcome::kIdle);
  for (int i = 1; i <= 100; ++i) ASSERT_EQ(Append(Payload(i)), static_cast<std::uint64_t>(i));

  std::vector<StepOutcome> outcomes = ShipAll();
  EXPECT_EQ(outcomes, std::vector<StepOutcome>(4, StepOutcome::kDelivered));
  std::vector<json::value> records = console_->Records(connection_id_);
  ASSERT_EQ(records.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(records[i].at("sequence"), i + 1);
    EXPECT_EQ(records[i].at("payload"), Parse(Payload(i + 1)));
    EXPECT_EQ(records[i].at("appended_at"), json::value(FormatRfc3339Millis(clock_.Now())));
  }
  spool::SpoolStats stats = spool_->Stats();
  EXPECT_EQ(stats.waiting_records, 0u);
  EXPECT_EQ(stats.consumed_through, 100u);
  json::value stream = console_->Stream(connection_id_);
  EXPECT_EQ(stream.at("acked_through"), 100);
  EXPECT_EQ(stream.at("records_stored"), 100);
  EXPECT_EQ(stream.at("duplicates_ignored"), 0);
  EXPECT_EQ(stream.at("lost_records"), 0);
  EXPECT_EQ(stream.at("spool_id"), json::value(stats.spool_id));
  EXPECT_EQ(stream.at("agent_instance"), "gpu-node-0001");
  EXPECT_EQ(Metric("uplink_agent_ship_uploads_total"), 4);
  EXPECT_EQ(Metric("uplink_agent_ship_records_total"), 100);
  EXPECT_EQ(Metric("uplink_agent_spool_records"), 0);
  EXPECT_TRUE(shipper.CheckReadiness().ready);
}

TEST_F(ShipperTest, ABatchWhoseReplyWasLostIsSentAgainAndStoredOnce) {
  Proxy proxy(console_->url());
  Shipper& shipper = MakeShipper({}, proxy.url(), milliseconds(300));
  for (int i = 1; i <= 20; ++i) Append(Payload(i));
  proxy.Next(Proxy::Mode::kLoseReply);

  StepResult lost = shipper.Step();
  EXPECT_EQ(lost.outcome, StepOutcome::kFailed);
  EXPECT_EQ(lost.status.code(), StatusCode::kDeadlineExceeded) << lost.status.ToString();
  EXPECT_EQ(lost.next_wait, milliseconds(500)) << "full jitter at half of the 1 s base";
  EXPECT_EQ(spool_->Stats().waiting_records, 20u) << "nothing is consumed without an ack";
  EXPECT_EQ(Metric("uplink_agent_ship_failures_total", {{"reason", "network"}}), 1);

  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>{StepOutcome::kDelivered});
  EXPECT_EQ(StoredSequences(), Range(1, 20));
  json::value stream = console_->Stream(connection_id_);
  EXPECT_EQ(stream.at("records_stored"), 20);
  EXPECT_EQ(stream.at("duplicates_ignored"), 20);
  EXPECT_EQ(stream.at("lost_records"), 0);
  // The same batch both times: same range, same records.
  auto uploads = proxy.uploads();
  ASSERT_EQ(uploads.size(), 2u);
  EXPECT_EQ(uploads[0], uploads[1]);
  EXPECT_EQ(spool_->Stats().waiting_records, 0u);
}

TEST_F(ShipperTest, ABatchTooLargeForTheConsoleIsHalvedUntilItFits) {
  StartConsole(16 << 10);
  Shipper& shipper = MakeShipper();
  // Distinct text in every record, so that gzip cannot squeeze 40 KiB under the limit.
  for (int i = 1; i <= 40; ++i) {
    std::string text;
    for (int k = 0; k < 120; ++k) text += std::to_string(i * 7919 + k * 104729) + " ";
    Append(ToJson(json::object{{"n", i}, {"text", text}}));
  }
  std::vector<StepOutcome> outcomes = ShipAll();
  EXPECT_GE(Count(outcomes, StepOutcome::kSplit), 1);
  EXPECT_EQ(Count(outcomes, StepOutcome::kRejected), 0);
  EXPECT_EQ(StoredSequences(), Range(1, 40));
  EXPECT_EQ(spool_->Stats().losses.rejected.records, 0u);
  EXPECT_EQ(console_->Stream(connection_id_).at("lost_records"), 0);
  EXPECT_TRUE(shipper.CheckReadiness().ready);
}

TEST_F(ShipperTest, ASingleRecordOverTheConsolesLimitIsRejectedAndCountedAlone) {
  StartConsole(16 << 10);
  MakeShipper();
  for (int i = 1; i <= 5; ++i) Append(Payload(i));
  // Random letters, so that it is over the limit compressed too.
  std::string noise;
  std::uint64_t state = 88172645463325252ull;
  for (int i = 0; i < (40 << 10); ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    noise += static_cast<char>('a' + state % 26);
  }
  std::string huge = ToJson(json::object{{"n", 6}, {"noise", noise}});
  Append(huge);
  for (int i = 7; i <= 10; ++i) Append(Payload(i));

  std::vector<StepOutcome> outcomes = ShipAll();
  EXPECT_EQ(Count(outcomes, StepOutcome::kRejected), 1);
  std::vector<std::uint64_t> expected = Range(1, 10);
  expected.erase(expected.begin() + 5);
  EXPECT_EQ(StoredSequences(), expected);
  spool::SpoolStats stats = spool_->Stats();
  EXPECT_EQ(stats.losses.rejected.records, 1u);
  EXPECT_EQ(stats.losses.rejected.bytes, huge.size());
  EXPECT_EQ(stats.waiting_records, 0u);
  EXPECT_EQ(Metric("uplink_agent_spool_rejected_records_total"), 1);
  json::value stream = console_->Stream(connection_id_);
  EXPECT_EQ(stream.at("lost_records"), 1);
  EXPECT_EQ(stream.at("agent_losses").at("rejected").at("records"), 1);
}

TEST_F(ShipperTest, ARecordTheConsoleRefusesIsDroppedAloneAndTheRestDelivered) {
  MakeShipper();
  for (int i = 1; i <= 3; ++i) Append(Payload(i));
  Append("[1]");  // JSON, but not the object the console takes
  for (int i = 5; i <= 8; ++i) Append(Payload(i));

  std::vector<StepOutcome> outcomes = ShipAll();
  EXPECT_EQ(outcomes, (std::vector<StepOutcome>{StepOutcome::kRejected, StepOutcome::kDelivered}));
  EXPECT_EQ(StoredSequences(), (std::vector<std::uint64_t>{1, 2, 3, 5, 6, 7, 8}));
  spool::SpoolStats stats = spool_->Stats();
  EXPECT_EQ(stats.losses.rejected.records, 1u);
  EXPECT_EQ(stats.losses.rejected.bytes, 3u);
  EXPECT_EQ(Metric("uplink_agent_ship_failures_total", {{"reason", "4xx"}}), 1);
  json::value stream = console_->Stream(connection_id_);
  EXPECT_EQ(stream.at("lost_records"), 1);
  EXPECT_EQ(stream.at("agent_losses").at("rejected").at("records"), 1);
  EXPECT_TRUE(shipper_->CheckReadiness().ready) << "one bad record refuses nothing else";
}

TEST_F(ShipperTest, ARecordThatIsNotJsonIsRejectedWithoutARequest) {
  Proxy proxy(console_->url());
  MakeShipper({}, proxy.url());
  const std::vector<std::string> not_json = {"not json at all", "{\"truncated\": ",
                                             "{\"bad_utf8\": \"\xff\xfe\"}"};
  for (const std::string& payload : not_json) Append(payload);

  // A batch of nothing but such records is consumed without asking the console.
  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>{StepOutcome::kDelivered});
  EXPECT_TRUE(proxy.uploads().empty());
  spool::SpoolStats stats = spool_->Stats();
  EXPECT_EQ(stats.consumed_through, 3u);
  EXPECT_EQ(stats.losses.rejected.records, 3u);
  EXPECT_EQ(stats.losses.rejected.bytes,
            not_json[0].size() + not_json[1].size() + not_json[2].size());

  // Among good records it is left out of the upload, and the upload counts it as rejected.
  Append(Payload(4));
  Append("<html>");
  Append(Payload(6));
  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>{StepOutcome::kDelivered});
  auto uploads = proxy.uploads();
  ASSERT_EQ(uploads.size(), 1u);
  EXPECT_EQ(uploads[0].at("first_sequence"), 4);
  EXPECT_EQ(uploads[0].at("last_sequence"), 6);
  EXPECT_EQ(uploads[0].at("records").as_array().size(), 2u);
  EXPECT_EQ(uploads[0].at("losses").at("rejected").at("records"), 4);
  EXPECT_EQ(StoredSequences(), (std::vector<std::uint64_t>{4, 6}));
  EXPECT_EQ(spool_->Stats().losses.rejected.records, 4u);
  json::value stream = console_->Stream(connection_id_);
  EXPECT_EQ(stream.at("lost_records"), 4);
  EXPECT_EQ(stream.at("agent_losses").at("rejected").at("records"), 4);
}

TEST_F(ShipperTest, ARecordOverTheProtocolsPayloadLimitIsRejectedWithoutARequest) {
  Proxy proxy(console_->url());
  MakeShipper({}, proxy.url());
  // Over 1 MiB serialized, so no console could take it, even alone.
  const std::string huge = ToJson(json::object{{"noise", std::string((1 << 20) + 1, 'a')}});
  // Padded with spaces to over 1 MiB as spooled, but compact it fits: it goes.
  const std::string padded = R"({"n": 2})" + std::string(1 << 20, ' ');
  Append(huge);
  Append(padded);
  Append(Payload(3));

  // Each record over the batch size is a batch of its own: the first is given up without a
  // request, the other two are sent.
  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>(3, StepOutcome::kDelivered));
  auto uploads = proxy.uploads();
  ASSERT_EQ(uploads.size(), 2u);
  EXPECT_EQ(uploads[0].at("first_sequence"), 2);
  EXPECT_EQ(uploads[0].at("losses").at("rejected").at("records"), 1);
  EXPECT_EQ(StoredSequences(), (std::vector<std::uint64_t>{2, 3}));
  spool::SpoolStats stats = spool_->Stats();
  EXPECT_EQ(stats.losses.rejected.records, 1u);
  EXPECT_EQ(stats.losses.rejected.bytes, huge.size());
  EXPECT_EQ(stats.waiting_records, 0u);
}

TEST_F(ShipperTest, ARevokedTokenKeepsTheDataAndSaysWhyUntilANewTokenDeliversIt) {
  Shipper& shipper = MakeShipper();
  for (int i = 1; i <= 10; ++i) Append(Payload(i));
  console_->Api("POST", "/api/v1/connections/" + connection_id_ + "/revoke");

  StepResult refused = shipper.Step();
  EXPECT_EQ(refused.outcome, StepOutcome::kRefused);
  EXPECT_EQ(refused.status.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(refused.next_wait, milliseconds(500));
  Readiness readiness = shipper.CheckReadiness();
  EXPECT_FALSE(readiness.ready);
  EXPECT_EQ(readiness.reason, "uploads refused: revoked");
  EXPECT_EQ(spool_->Stats().waiting_records, 10u);
  EXPECT_EQ(spool_->Stats().losses.rejected.records, 0u);
  EXPECT_EQ(Metric("uplink_agent_ship_failures_total", {{"reason", "4xx"}}), 1);
  // Backing off grows while the refusal lasts.
  EXPECT_EQ(shipper.Step().next_wait, milliseconds(1000));

  // A new connection's token, installed where the old one was, delivers everything.
  auto [id, token] = console_->CreateConnection("gpu-east-2");
  testing::WriteFileOrDie(token_file_, token);
  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>{StepOutcome::kDelivered});
  connection_id_ = id;
  EXPECT_EQ(StoredSequences(), Range(1, 10));
  EXPECT_TRUE(shipper.CheckReadiness().ready);
  EXPECT_EQ(shipper.Step().next_wait, seconds(1)) << "idle polling";
}

TEST_F(ShipperTest, RepliesOutsideTheProtocolConsumeNothing) {
  Proxy proxy(console_->url());
  Shipper& shipper = MakeShipper({}, proxy.url());
  for (int i = 1; i <= 10; ++i) Append(Payload(i));
  for (const char* body : {R"({"stream":"node/gpu-node-0001"})", R"({"acked_through":3})",
                           R"({"acked_through":-1})", R"({"acked_through":"10"})", "[]"}) {
    proxy.Next(Proxy::Mode::kAnswer, 1, net::Response::Json(200, body));
    StepResult step = shipper.Step();
    EXPECT_EQ(step.outcome, StepOutcome::kFailed) << body;
    EXPECT_GT(step.next_wait, milliseconds(0)) << body;
    EXPECT_EQ(spool_->Stats().waiting_records, 10u) << body;
  }
  EXPECT_EQ(Metric("uplink_agent_ship_failures_total", {{"reason", "bad_reply"}}), 5);
  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>{StepOutcome::kDelivered});
  EXPECT_EQ(StoredSequences(), Range(1, 10));
}

TEST_F(ShipperTest, AProxysRefusalsNeverGiveRecordsUp) {
  Proxy proxy(console_->url());
  Shipper& shipper = MakeShipper({}, proxy.url());
  for (int i = 1; i <= 4; ++i) Append(Payload(i));
  // An ingress with a small body limit answers 413 in HTML: halves are worth a try, but a
  // single record is kept, not rejected.
  const net::Response html_413 = net::Response::Text(413, "<html>Request Entity Too Large</html>");
  proxy.Next(Proxy::Mode::kAnswer, 3, html_413);
  EXPECT_EQ(shipper.Step().outcome, StepOutcome::kSplit);  // 4 -> 2 + 2
  EXPECT_EQ(shipper.Step().outcome, StepOutcome::kSplit);  // 2 -> 1 + 1
  StepResult single = shipper.Step();
  EXPECT_EQ(single.outcome, StepOutcome::kRefused);
  EXPECT_GT(single.next_wait, milliseconds(0));
  // A 400 or 422 without the console's error body is a proxy's or a WAF's: kept as well.
  proxy.Next(Proxy::Mode::kAnswer, 1, net::Response::Text(400, "Bad Request"));
  EXPECT_EQ(shipper.Step().outcome, StepOutcome::kRefused);
  proxy.Next(Proxy::Mode::kAnswer, 1,
             net::Response::Json(422, R"({"error":{"code":"blocked","message":"waf"}})"));
  EXPECT_EQ(shipper.Step().outcome, StepOutcome::kRefused);
  EXPECT_FALSE(shipper.CheckReadiness().ready);
  spool::SpoolStats stats = spool_->Stats();
  EXPECT_EQ(stats.losses.rejected.records, 0u);
  EXPECT_EQ(stats.waiting_records, 4u);
  // Once the proxy lets uploads through, everything arrives.
  EXPECT_EQ(Count(ShipAll(), StepOutcome::kDelivered), 3);
  EXPECT_EQ(StoredSequences(), Range(1, 4));
  EXPECT_TRUE(shipper.CheckReadiness().ready);
}

TEST_F(ShipperTest, AnyOther4xxKeepsEverythingAndSaysWhy) {
  Proxy proxy(console_->url());
  Shipper& shipper = MakeShipper({}, proxy.url());
  for (int i = 1; i <= 10; ++i) Append(Payload(i));
  proxy.Next(Proxy::Mode::kAnswer, 1,
             net::Response::Json(404, R"({"error":{"code":"not_found","message":"no such route"}})"));
  StepResult step = shipper.Step();
  EXPECT_EQ(step.outcome, StepOutcome::kRefused);
  EXPECT_EQ(shipper.CheckReadiness().reason, "uploads refused: not_found");
  proxy.Next(Proxy::Mode::kAnswer, 1, net::Response::Text(415, "unsupported\n"));
  EXPECT_EQ(shipper.Step().outcome, StepOutcome::kRefused);
  Readiness readiness = shipper.CheckReadiness();
  EXPECT_FALSE(readiness.ready);
  EXPECT_NE(readiness.reason.find("uploads refused: "), std::string::npos);
  EXPECT_NE(readiness.reason.find("415"), std::string::npos) << readiness.reason;
  EXPECT_EQ(spool_->Stats().waiting_records, 10u);
  EXPECT_EQ(spool_->Stats().losses.rejected.records, 0u);

  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>{StepOutcome::kDelivered});
  EXPECT_EQ(StoredSequences(), Range(1, 10));
  EXPECT_TRUE(shipper.CheckReadiness().ready);
}

TEST_F(ShipperTest, ABatchRefusedFor400IsNarrowedDownToTheOneRecordBehindIt) {
  Proxy proxy(console_->url());
  MakeShipper({}, proxy.url());
  for (int i = 1; i <= 8; ++i) Append(Payload(i));
  proxy.RefuseUploadsHolding(
      5, net::Response::Json(400, R"({"error":{"code":"invalid_request","message":"bad"}})"));
  std::vector<StepOutcome> outcomes = ShipAll();
  // 1-8 -> 1-4 and 5-8 -> 5-6 and 7-8 -> 5 and 6: three halvings, then 5 alone is given up.
  EXPECT_EQ(Count(outcomes, StepOutcome::kSplit), 3);
  EXPECT_EQ(Count(outcomes, StepOutcome::kRejected), 1);
  EXPECT_EQ(StoredSequences(), (std::vector<std::uint64_t>{1, 2, 3, 4, 6, 7, 8}));
  EXPECT_EQ(spool_->Stats().losses.rejected.records, 1u);
  EXPECT_EQ(spool_->Stats().waiting_records, 0u);
  // Every upload covered its records' range and nothing below what was consumed before it.
  std::uint64_t highest_sent = 0;
  for (const json::value& upload : proxy.uploads()) {
    auto first = upload.at("first_sequence").to_number<std::uint64_t>();
    auto last = upload.at("last_sequence").to_number<std::uint64_t>();
    for (const json::value& record : upload.at("records").as_array()) {
      auto sequence = record.at("sequence").to_number<std::uint64_t>();
      EXPECT_GE(sequence, first);
      EXPECT_LE(sequence, last);
    }
    highest_sent = std::max(highest_sent, last);
  }
  EXPECT_EQ(highest_sent, 8u);
}

TEST_F(ShipperTest, A422ThatNamesNoRecordOfTheBatchIsNarrowedDownLikeA400) {
  Proxy proxy(console_->url());
  Shipper& shipper = MakeShipper({}, proxy.url());
  for (int i = 1; i <= 4; ++i) Append(Payload(i));
  proxy.Next(Proxy::Mode::kAnswer, 1,
             net::Response::Json(422, R"({"error":{"code":"invalid_record","message":"?","sequence":999}})"));
  EXPECT_EQ(shipper.Step().outcome, StepOutcome::kSplit);
  EXPECT_EQ(ShipAll(), (std::vector<StepOutcome>{StepOutcome::kDelivered, StepOutcome::kDelivered}));
  EXPECT_EQ(StoredSequences(), Range(1, 4));
}

TEST_F(ShipperTest, IdleTimeWritesTheSpoolsCapAheadAndAFailurePausesThat) {
  const spool::SpoolOptions options = ReservingOptions();
  OpenSpoolOn(memory_fs_, "/spool", options);
  Shipper& shipper = MakeShipper();
  // A full disk: the spool works on without, and the shipper stops asking for a while.
  memory_fs_.FailNth(spool::testing::FsOp::kWriteAt, 1, ENOSPC);
  EXPECT_EQ(shipper.Step().outcome, StepOutcome::kIdle);
  EXPECT_EQ(spool_->Stats().spare_bytes, 0u);  // a step alone writes nothing ahead
  shipper.WriteSpoolAhead();
  EXPECT_EQ(spool_->Stats().spare_bytes, 0u);
  clock_.Advance(minutes(9));
  shipper.WriteSpoolAhead();
  EXPECT_EQ(spool_->Stats().spare_bytes, 0u);
  clock_.Advance(minutes(1));
  // Then one file each time, until the cap is held.
  for (std::uint64_t files = 1; files <= 4; ++files) {
    shipper.WriteSpoolAhead();
    EXPECT_EQ(spool_->Stats().spare_bytes, files * options.segment_bytes);
  }
  shipper.WriteSpoolAhead();
  EXPECT_EQ(spool_->Stats().bytes, options.max_bytes);
  EXPECT_EQ(Metric("uplink_agent_spool_spare_bytes"), static_cast<double>(options.max_bytes));
  EXPECT_EQ(Metric("uplink_agent_spool_write_ahead_cancelled_total"), 0.0);
  // Records go into the files written ahead and are delivered as ever.
  for (int i = 1; i <= 20; ++i) Append(Payload(i, 1000));
  EXPECT_EQ(spool_->Stats().bytes, options.max_bytes);
  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>{StepOutcome::kDelivered});
  EXPECT_EQ(StoredSequences(), Range(1, 20));
}

TEST_F(ShipperTest, ASpoolThatFailsToConsumeAfterTheAckResendsAndTheConsoleKeepsOneCopy) {
  spool::testing::MemoryFileSystem& fs = memory_fs_;
  OpenSpoolOn(fs, "/spool");
  Shipper& shipper = MakeShipper();
  for (int i = 1; i <= 10; ++i) Append(Payload(i));
  // Consuming rewrites the spool's state in place; that write fails once.
  fs.FailNth(spool::testing::FsOp::kWriteAt, 1, EIO);
  StepResult failed = shipper.Step();
  EXPECT_EQ(failed.outcome, StepOutcome::kSpoolError) << failed.status.ToString();
  EXPECT_GT(failed.next_wait, milliseconds(0));
  EXPECT_EQ(spool_->Stats().waiting_records, 10u);
  EXPECT_EQ(Metric("uplink_agent_ship_failures_total", {{"reason", "spool"}}), 1);
  EXPECT_EQ(StoredSequences(), Range(1, 10)) << "the console has them already";

  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>{StepOutcome::kDelivered});
  EXPECT_EQ(StoredSequences(), Range(1, 10));
  json::value stream = console_->Stream(connection_id_);
  EXPECT_EQ(stream.at("records_stored"), 10);
  EXPECT_EQ(stream.at("duplicates_ignored"), 10);
  EXPECT_EQ(spool_->Stats().waiting_records, 0u);
}

TEST_F(ShipperTest, ASpoolThatFailsToReadIsReadAgainFromTheOldestRecord) {
  spool::testing::MemoryFileSystem& fs = memory_fs_;
  OpenSpoolOn(fs, "/spool");
  Shipper& shipper = MakeShipper();
  for (int i = 1; i <= 10; ++i) Append(Payload(i));
  // The segment cannot be opened for reading, once.
  fs.FailNth(spool::testing::FsOp::kOpen, 1, EIO);
  StepResult failed = shipper.Step();
  EXPECT_EQ(failed.outcome, StepOutcome::kSpoolError);
  EXPECT_NE(failed.status.message().find("reading the spool"), std::string::npos)
      << failed.status.ToString();
  EXPECT_GT(failed.next_wait, milliseconds(0));
  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>{StepOutcome::kDelivered});
  EXPECT_EQ(StoredSequences(), Range(1, 10));
  EXPECT_EQ(spool_->Stats().losses.corrupt.records, 0u);
}

TEST_F(ShipperTest, BackOffHonoursRetryAfterInSecondsAndAsADate) {
  Proxy proxy(console_->url());
  Shipper& shipper = MakeShipper({}, proxy.url());
  Append(Payload(1));
  net::Response maintenance = net::Response::Json(
      503, R"({"error":{"code":"unavailable","message":"down for maintenance"}})");
  maintenance.headers.Set("Retry-After", "120");
  proxy.Next(Proxy::Mode::kAnswer, 1, maintenance);
  StepResult first = shipper.Step();
  EXPECT_EQ(first.outcome, StepOutcome::kFailed);
  EXPECT_EQ(first.next_wait, seconds(120));

  maintenance.headers.Set("Retry-After", "Wed, 15 Jan 2027 08:05:00 GMT");
  clock_.SetNow(*ParseRfc3339("2027-01-15T08:00:00Z"));
  proxy.Next(Proxy::Mode::kAnswer, 1, maintenance);
  EXPECT_EQ(shipper.Step().next_wait, seconds(300));

  // Without Retry-After the jittered back-off doubles: half of 4 s on the third failure.
  proxy.Next(Proxy::Mode::kAnswer, 1, net::Response::Text(502, "bad gateway\n"));
  EXPECT_EQ(shipper.Step().next_wait, milliseconds(2000));
  EXPECT_EQ(Metric("uplink_agent_ship_failures_total", {{"reason", "5xx"}}), 3);

  EXPECT_EQ(ShipAll(), std::vector<StepOutcome>{StepOutcome::kDelivered});
  EXPECT_EQ(StoredSequences(), Range(1, 1));
  // Success resets the back-off.
  proxy.Next(Proxy::Mode::kAnswer, 1, net::Response::Text(502, "bad gateway\n"));
  Append(Payload(2));
  EXPECT_EQ(shipper.Step().next_wait, milliseconds(500));
}

TEST_F(ShipperTest, RecordsDroppedAtTheCapWhileABatchIsInFlightAreNeverSent) {
  OpenSpool(spool::SpoolOptions{.max_bytes = 256 << 10, .segment_bytes = 16 << 10});
  Proxy proxy(console_->url());
  Shipper& shipper = MakeShipper({}, proxy.url());
  for (int i = 1; i <= 20; ++i) Append(Payload(i, 1000));
  proxy.Next(Proxy::Mode::kAnswer, 1, net::Response::Text(503, "unavailable\n"));
  ASSERT_EQ(shipper.Step().outcome, StepOutcome::kFailed);  // 1..20 in flight

  // The console stays away while far more than the cap is appended: the oldest are dropped.
  for (int i = 21; i <= 400; ++i) Append(Payload(i, 1000));
  spool::SpoolStats stats = spool_->Stats();
  ASSERT_GT(stats.consumed_through, 20u) << "the whole batch in flight was dropped";
  const std::uint64_t dropped_through = stats.consumed_through;

  ShipAll();
  std::vector<json::value> uploads = proxy.uploads();
  ASSERT_GE(uploads.size(), 2u);
  for (size_t i = 1; i < uploads.size(); ++i) {
    EXPECT_GT(uploads[i].at("first_sequence").to_number<std::uint64_t>(), dropped_through);
    for (const json::value& record : uploads[i].at("records").as_array()) {
      EXPECT_GT(record.at("sequence").to_number<std::uint64_t>(), dropped_through);
    }
  }
  std::vector<std::uint64_t> stored = StoredSequences();
  ASSERT_FALSE(stored.empty());
  EXPECT_EQ(stored, Range(dropped_through + 1, 400));
  stats = spool_->Stats();
  EXPECT_EQ(stats.losses.dropped.records, dropped_through);
  json::value stream = console_->Stream(connection_id_);
  EXPECT_EQ(stream.at("lost_records").to_number<std::uint64_t>(), dropped_through);
  EXPECT_EQ(stream.at("agent_losses").at("dropped").at("records").to_number<std::uint64_t>(),
            dropped_through);
  EXPECT_EQ(Metric("uplink_agent_spool_dropped_records_total"),
            static_cast<double>(dropped_through));
}

TEST_F(ShipperTest, AnUnreachableConsoleMakesTheAgentUnreadyOnceTheOldestRecordIsTenMinutesOld) {
  Shipper& shipper = MakeShipper({}, "http://127.0.0.1:" + std::to_string(testing::FreePort()));
  Append(Payload(1));
  StepResult failed = shipper.Step();
  EXPECT_EQ(failed.outcome, StepOutcome::kFailed);
  EXPECT_TRUE(shipper.CheckReadiness().ready) << "a young record is no reason";
  clock_.Advance(std::chrono::minutes(10) - seconds(1));
  shipper.Step();
  EXPECT_TRUE(shipper.CheckReadiness().ready);
  EXPECT_EQ(Metric("uplink_agent_spool_oldest_record_age_seconds"), 599);
  clock_.Advance(seconds(1));
  Readiness readiness = shipper.CheckReadiness();
  EXPECT_FALSE(readiness.ready);
  EXPECT_NE(readiness.reason.find("the oldest waiting record is 600 s old; last error: "),
            std::string::npos) << readiness.reason;
  EXPECT_EQ(Metric("uplink_agent_ship_failures_total", {{"reason", "network"}}), 2);
  EXPECT_EQ(spool_->Stats().waiting_records, 1u);
}

TEST_F(ShipperTest, AfterAStopOneLastAttemptDeliversWhatWaits) {
  Shipper& shipper = MakeShipper(ShipperOptions{.max_batch_records = 10});
  for (int i = 1; i <= 35; ++i) Append(Payload(i));
  StopSignal stop;
  stop.Stop();
  shipper.Run(stop);  // stopped before it began: only the last attempt runs
  EXPECT_EQ(StoredSequences(), Range(1, 35));
  EXPECT_EQ(spool_->Stats().waiting_records, 0u);
}

TEST_F(ShipperTest, TheLastAttemptGivesUpAtTheFirstFailureAndKeepsTheRecords) {
  Shipper& shipper = MakeShipper({}, "http://127.0.0.1:" + std::to_string(testing::FreePort()));
  for (int i = 1; i <= 5; ++i) Append(Payload(i));
  Status drained = shipper.Drain(seconds(5));
  EXPECT_EQ(drained.code(), StatusCode::kUnavailable) << drained.ToString();
  EXPECT_EQ(spool_->Stats().waiting_records, 5u);
  StopSignal stop;
  stop.Stop();
  shipper.Run(stop);
  EXPECT_EQ(spool_->Stats().waiting_records, 5u);
}

TEST_F(ShipperTest, ARunningShipperWritesTheCapAheadWhileIdleButALastAttemptDoesNot) {
  const spool::SpoolOptions options = ReservingOptions();
  OpenSpoolOn(memory_fs_, "/spool", options);
  Shipper& shipper = MakeShipper(ShipperOptions{.idle_poll = milliseconds(10)});
  // Only delivering what waits (a stop, --once) writes nothing ahead.
  Append(Payload(1));
  ASSERT_TRUE(shipper.Drain(seconds(5)).ok());
  StopSignal stopped;
  stopped.Stop();
  shipper.Run(stopped);
  EXPECT_EQ(spool_->Stats().spare_bytes, 0u);
  // Running, its idle polls hold the cap: three files beside the segment holding record 1.
  StopSignal stop;
  std::thread runner([&] { shipper.Run(stop); });
  EXPECT_TRUE(testing::WaitFor(
      [&] { return spool_->Stats().spare_bytes == 3 * options.segment_bytes; }, seconds(20)));
  stop.Stop();
  runner.join();
  EXPECT_FALSE(*spool_->WriteAhead());  // nothing more fits
  EXPECT_LE(spool_->Stats().bytes, options.max_bytes);
}

TEST_F(ShipperTest, ARunningShipperDeliversRecordsAppendedWhileItRuns) {
  Shipper& shipper = MakeShipper(ShipperOptions{.idle_poll = milliseconds(10)});
  StopSignal stop;
  std::thread runner([&] { shipper.Run(stop); });
  for (int i = 1; i <= 50; ++i) Append(Payload(i));
  EXPECT_TRUE(testing::WaitFor([&] { return spool_->Stats().waiting_records == 0; }, seconds(20)));
  stop.Stop();
  runner.join();
  EXPECT_EQ(StoredSequences(), Range(1, 50));
}

}  // namespace
}  // namespace uplink::agent
