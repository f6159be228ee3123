// POST /api/v1/agent/uploads and what users see of it (a connection's streams, its records)
// end to end through the router: exactly-once delivery, loss accounting, restarts, every
// kind of hostile body, retention, metrics and paging.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "api_fixture.h"
#include "common/gzip.h"
#include "net/client.h"
#include "net/server.h"
#include "protocol/inventory.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using testing::Body;
using testing::Call;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::Object;
using testing::Text;

const std::string& kStream = testing::kNodeStream;
using testing::kSpoolA;
using testing::kSpoolB;

json::object Record(std::int64_t sequence) {
  return json::object{{"sequence", sequence},
                      {"appended_at", "2026-11-30T03:20:00.125Z"},
                      {"payload", {{"kind", "test_record"}, {"n", sequence}}}};
}

json::object Losses(std::int64_t dropped = 0) {
  auto count = [](std::int64_t records) {
    return json::object{{"records", records}, {"bytes", records * 4096}};
  };
  return json::object{{"dropped", count(dropped)}, {"corrupt", count(0)}, {"rejected", count(0)}};
}

// An upload covering [first, last] with a record for each of `sequences`.
json::object UploadJson(std::int64_t first, std::int64_t last,
                        const std::vector<std::int64_t>& sequences,
                        const std::string& spool_id = kSpoolA) {
  json::array records;
  for (std::int64_t sequence : sequences) records.push_back(Record(sequence));
  return json::object{{"agent_version", "0.1.0"},
                      {"agent_instance", "gpu-node-0001"},
                      {"stream", kStream},
                      {"spool_id", spool_id},
                      {"first_sequence", first},
                      {"last_sequence", last},
                      {"losses", Losses()},
                      {"records", std::move(records)}};
}

std::vector<std::int64_t> Range(std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> sequences;
  for (std::int64_t s = first; s <= last; ++s) sequences.push_back(s);
  return sequences;
}

std::string Gzip(const std::string& text) { return GzipCompress(text).value(); }

class UploadsApiTest : public testing::AgentUploadTest {
 protected:
  json::object UploadOk(const json::object& body) {
    net::Response response = Upload(body);
    EXPECT_EQ(response.status, 200) << response.body.substr(0, 300);
    return Body(response);
  }

  json::array Streams(const std::string& credential = "") {
    json::object connection = ShowConnection(credential.empty() ? admin_key_ : credential, id_);
    const json::value* streams = connection.if_contains("streams");
    EXPECT_TRUE(streams && streams->is_array());
    return streams && streams->is_array() ? streams->get_array() : json::array();
  }

  json::object OnlyStream() {
    json::array streams = Streams();
    EXPECT_EQ(streams.size(), 1u);
    return streams.empty() ? json::object() : streams.front().as_object();
  }

  json::object StreamNamed(const std::string& name) {
    for (const json::value& stream : Streams()) {
      if (Text(stream.as_object(), "stream") == name) return stream.as_object();
    }
    ADD_FAILURE() << "no stream " << name;
    return json::object();
  }

  net::Response Records(const std::string& query, const std::string& credential = "",
                        const std::string& id = "") {
    return Send("GET", "/api/v1/connections/" + (id.empty() ? id_ : id) + "/records" + query,
                credential.empty() ? admin_key_ : credential);
  }

  // Every stored sequence of the stream's current epoch (or `epoch`), page by page.
  std::vector<std::int64_t> StoredSequences(const std::string& epoch = "") {
    std::vector<std::int64_t> sequences;
    std::string after = "0";
    while (true) {
      net::Response page = Records("?stream=" + kStream + "&limit=7&after=" + after + epoch);
      EXPECT_EQ(page.status, 200) << page.body;
      if (page.status != 200) return sequences;
      json::object body = Body(page);
      for (const auto& record : body.at("records").as_array()) {
        sequences.push_back(record.as_object().at("sequence").as_int64());
      }
      if (body.at("next_after").is_null()) return sequences;
      after = std::to_string(body.at("next_after").as_int64());
    }
  }

  double Counter(const char* name, const metrics::Labels& labels = {}) {
    return Metric(name, labels);
  }

};

TEST_F(UploadsApiTest, AnUploadIsStoredAcknowledgedAndShownOnTheConnection) {
  json::object body = UploadJson(101, 150, Range(101, 149));
  body["losses"] = Losses(12);
  json::object reply = UploadOk(body);
  EXPECT_EQ(Text(reply, "stream"), kStream);
  EXPECT_EQ(reply.at("acked_through").as_int64(), 150);
  EXPECT_EQ(reply.at("stored").as_int64(), 49);
  EXPECT_EQ(reply.at("duplicates").as_int64(), 0);

  json::object stream = OnlyStream();
  EXPECT_EQ(Text(stream, "stream"), kStream);
  EXPECT_EQ(Text(stream, "spool_id"), kSpoolA);
  EXPECT_EQ(stream.at("acked_through").as_int64(), 150);
  EXPECT_EQ(stream.at("records_stored").as_int64(), 49);
  EXPECT_EQ(stream.at("duplicates_ignored").as_int64(), 0);
  // 1-100 before the first upload and 150 inside it never arrived.
  EXPECT_EQ(stream.at("lost_records").as_int64(), 101);
  json::object losses = Object(stream, "agent_losses");
  EXPECT_EQ(Object(losses, "dropped").at("records").as_int64(), 12);
  EXPECT_EQ(Object(losses, "dropped").at("bytes").as_int64(), 12 * 4096);
  EXPECT_EQ(Object(losses, "corrupt").at("records").as_int64(), 0);
  EXPECT_EQ(Object(losses, "rejected").at("bytes").as_int64(), 0);
  EXPECT_EQ(stream.at("restarts").as_int64(), 0);
  EXPECT_EQ(Text(stream, "first_upload_at"), FormatRfc3339(clock_.Now()));
  EXPECT_EQ(Text(stream, "last_upload_at"), FormatRfc3339(clock_.Now()));
  EXPECT_EQ(Text(stream, "agent_instance"), "gpu-node-0001");
  EXPECT_EQ(Text(stream, "agent_version"), "0.1.0");

  // The list carries the streams too.
  json::object list = Body(Send("GET", "/api/v1/connections", admin_key_));
  const json::object& listed = list.at("connections").as_array().at(0).as_object();
  EXPECT_EQ(listed.at("streams").as_array().size(), 1u);

  net::Response page = Records("?stream=" + kStream + "&limit=2");
  ASSERT_EQ(page.status, 200) << page.body;
  json::object records = Body(page);
  EXPECT_EQ(Text(records, "stream"), kStream);
  EXPECT_EQ(records.at("epoch").as_int64(), 0);
  ASSERT_EQ(records.at("records").as_array().size(), 2u);
  const json::object& first = records.at("records").as_array()[0].as_object();
  EXPECT_EQ(first.at("sequence").as_int64(), 101);
  EXPECT_EQ(Text(first, "appended_at"), "2026-11-30T03:20:00.125Z");
  EXPECT_EQ(Text(first, "received_at"), FormatRfc3339Millis(clock_.Now()));
  EXPECT_EQ(ToJson(first.at("payload")), R"({"kind":"test_record","n":101})");
  EXPECT_EQ(records.at("next_after").as_int64(), 102);
}

TEST_F(UploadsApiTest, IdentityAndCaseInsensitiveGzipBodiesAreAccepted) {
  EXPECT_EQ(Upload(ToJson(UploadJson(1, 2, {1, 2})), "").status, 200);
  EXPECT_EQ(Upload(ToJson(UploadJson(3, 4, {3, 4})), "identity").status, 200);
  net::Request request;
  request.method = "POST";
  request.target = "/api/v1/agent/uploads";
  request.headers.Set("Authorization", "Bearer " + token_);
  request.headers.Set("Content-Type", "Application/JSON; charset=utf-8");
  request.headers.Set("Content-Encoding", "GZip");
  request.body = Gzip(ToJson(UploadJson(5, 6, {5, 6})));
  net::Response response = Call(api_->router(), std::move(request));
  EXPECT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(StoredSequences(), Range(1, 6));
}

TEST_F(UploadsApiTest, ABatchSentTwiceOrOverlappingIsStoredExactlyOnce) {
  json::object batch = UploadJson(1, 20, Range(1, 20));
  EXPECT_EQ(UploadOk(batch).at("stored").as_int64(), 20);
  // The reply was lost: the agent sends the same batch again.
  json::object again = UploadOk(batch);
  EXPECT_EQ(again.at("stored").as_int64(), 0);
  EXPECT_EQ(again.at("duplicates").as_int64(), 20);
  EXPECT_EQ(again.at("acked_through").as_int64(), 20);
  json::object overlap = UploadOk(UploadJson(11, 30, Range(11, 30)));
  EXPECT_EQ(overlap.at("stored").as_int64(), 10);
  EXPECT_EQ(overlap.at("duplicates").as_int64(), 10);
  EXPECT_EQ(StoredSequences(), Range(1, 30));
  json::object stream = OnlyStream();
  EXPECT_EQ(stream.at("records_stored").as_int64(), 30);
  EXPECT_EQ(stream.at("duplicates_ignored").as_int64(), 30);
  EXPECT_EQ(stream.at("lost_records").as_int64(), 0);
}

TEST_F(UploadsApiTest, MissingSequencesAreCountedAsLostInOrder) {
  json::object first = UploadOk(UploadJson(500, 500, {500}));
  EXPECT_EQ(first.at("stored").as_int64(), 1);
  EXPECT_EQ(OnlyStream().at("lost_records").as_int64(), 499);
  // Gaps inside a batch: 502, 503 and 505 never arrive.
  UploadOk(UploadJson(501, 506, {501, 504, 506}));
  EXPECT_EQ(OnlyStream().at("lost_records").as_int64(), 502);
  EXPECT_EQ(StoredSequences(), (std::vector<std::int64_t>{500, 501, 504, 506}));
}

TEST_F(UploadsApiTest, AnEarlierSpoolOfTheStreamComingBackIsRefusedWith409) {
  UploadOk(UploadJson(1, 10, Range(1, 10)));
  UploadOk(UploadJson(1, 3, Range(1, 3), kSpoolB));
  net::Response refused = Upload(UploadJson(11, 12, {11, 12}));
  EXPECT_EQ(refused.status, 409);
  EXPECT_EQ(ErrorCode(refused), "spool_replaced");
  json::object stream = OnlyStream();
  EXPECT_EQ(stream.at("restarts").as_int64(), 1);
  EXPECT_EQ(Text(stream, "spool_id"), kSpoolB);
  EXPECT_EQ(StoredSequences("&epoch=0"), Range(1, 10));
  EXPECT_EQ(Metric("uplink_console_uploads_refused_total", {{"reason", "spool_replaced"}}), 1);
}

TEST_F(UploadsApiTest, ANewSpoolIdRestartsTheStreamKeepsTheOldRecordsAndIsAudited) {
  UploadOk(UploadJson(1, 10, Range(1, 10)));
  json::object restarted = UploadOk(UploadJson(1, 3, Range(1, 3), kSpoolB));
  EXPECT_EQ(restarted.at("stored").as_int64(), 3);
  EXPECT_EQ(restarted.at("duplicates").as_int64(), 0);
  EXPECT_EQ(restarted.at("acked_through").as_int64(), 3);

  json::object stream = OnlyStream();
  EXPECT_EQ(stream.at("restarts").as_int64(), 1);
  EXPECT_EQ(Text(stream, "spool_id"), kSpoolB);
  EXPECT_EQ(stream.at("records_stored").as_int64(), 13);
  EXPECT_EQ(StoredSequences(), Range(1, 3));
  EXPECT_EQ(StoredSequences("&epoch=0"), Range(1, 10));
  EXPECT_EQ(StoredSequences("&epoch=1"), Range(1, 3));

  AuditEvent event = LastAudit("stream.restart");
  EXPECT_EQ(event.actor_type, "agent");
  EXPECT_EQ(event.actor_id, id_);
  EXPECT_EQ(event.credential, "agent_token");
  EXPECT_EQ(event.source_address, "198.51.100.4");
  EXPECT_EQ(event.target_id, id_);
  EXPECT_NE(event.detail.find(kSpoolB), std::string::npos);
  EXPECT_NE(event.detail.find("\"previous_acked_through\":10"), std::string::npos);
  // The owner reads it through the audit API, filtered by its action.
  net::Response audit = Send("GET", "/api/v1/audit?action=stream.restart", admin_key_);
  ASSERT_EQ(audit.status, 200) << audit.body;
  EXPECT_EQ(Body(audit).at("events").as_array().size(), 1u);
  EXPECT_EQ(Counter("uplink_console_stream_restarts_total"), 1);
}

TEST_F(UploadsApiTest, OrdinaryUploadsWriteNoAuditEvents) {
  size_t before = AllAudit().size();
  UploadOk(UploadJson(1, 5, Range(1, 5)));
  UploadOk(UploadJson(1, 9, Range(1, 9)));
  EXPECT_EQ(AllAudit().size(), before);
}

// ---- hostile uploads ------------------------------------------------------------------------

class HostileUploadTest : public UploadsApiTest {
 protected:
  void SetUp() override {
    UploadsApiTest::SetUp();
    UploadOk(UploadJson(1, 3, Range(1, 3)));
  }

  // Refused with `status` and a message containing `says`; nothing of it stored.
  void ExpectRefused(const net::Response& response, int status, const std::string& code,
                     const std::string& says) {
    EXPECT_EQ(response.status, status) << response.body.substr(0, 300);
    EXPECT_EQ(ErrorCode(response), code) << response.body.substr(0, 300);
    EXPECT_NE(ErrorMessage(response).find(says), std::string::npos)
        << "wanted \"" << says << "\" in " << response.body.substr(0, 300);
    ExpectNothingMoreStored();
  }

  void ExpectRefused(const json::object& body, int status, const std::string& code,
                     const std::string& says) {
    ExpectRefused(Upload(body), status, code, says);
  }

  // 422 naming the record by its sequence.
  void ExpectInvalidRecord(const json::object& body, std::int64_t sequence,
                           const std::string& says) {
    net::Response response = Upload(body);
    ExpectRefused(response, 422, "invalid_record", says);
    json::object error = Object(Body(response), "error");
    ASSERT_TRUE(error.contains("sequence")) << response.body;
    EXPECT_EQ(error.at("sequence").as_int64(), sequence);
  }

  void ExpectNothingMoreStored() {
    json::object stream = StreamNamed(kStream);
    EXPECT_EQ(stream.at("acked_through").as_int64(), 3);
    EXPECT_EQ(stream.at("records_stored").as_int64(), 3);
    EXPECT_EQ(stream.at("lost_records").as_int64(), 0);
    EXPECT_EQ(Text(stream, "spool_id"), kSpoolA);
    EXPECT_EQ(Call(api_->router(), net::Request{.target = "/healthz"}).status, 200);
  }

  // The valid batch 4-6 with `field` of the top level, or of records[1], replaced.
  template <typename T>
  json::object With(const std::string& field, T&& value) {
    json::object body = UploadJson(4, 6, Range(4, 6));
    body[field] = json::value_from(std::forward<T>(value));
    return body;
  }
  template <typename T>
  json::object WithRecordField(const std::string& field, T&& value) {
    json::object body = UploadJson(4, 6, Range(4, 6));
    body["records"].as_array()[1].as_object()[field] = json::value_from(std::forward<T>(value));
    return body;
  }
  json::object WithoutRecordField(const std::string& field) {
    json::object body = UploadJson(4, 6, Range(4, 6));
    body["records"].as_array()[1].as_object().erase(field);
    return body;
  }
};

TEST_F(HostileUploadTest, WrongTypesAreRefusedWith400NamingTheField) {
  ExpectRefused(With("first_sequence", "4"), 400, "invalid_request",
                "first_sequence must be an integer");
  ExpectRefused(With("last_sequence", 6.0), 400, "invalid_request",
                "last_sequence must be an integer");
  ExpectRefused(With("agent_version", 1), 400, "invalid_request", "agent_version must be a string");
  ExpectRefused(With("agent_instance", json::array()), 400, "invalid_request",
                "agent_instance must be a string");
  ExpectRefused(With("stream", nullptr), 400, "invalid_request", "stream must be a string");
  ExpectRefused(With("records", json::object()), 400, "invalid_request",
                "records must be an array");
  ExpectRefused(With("losses", json::array()), 400, "invalid_request", "losses must be an object");
  json::object losses = Losses();
  losses["corrupt"].as_object()["bytes"] = "0";
  ExpectRefused(With("losses", losses), 400, "invalid_request",
                "losses.corrupt.bytes must be an integer");
  losses = Losses();
  losses["rejected"] = 3;
  ExpectRefused(With("losses", losses), 400, "invalid_request",
                "losses.rejected must be an object");
  ExpectRefused(WithRecordField("sequence", "5"), 400, "invalid_request",
                "records[1].sequence must be an integer");
  json::object body = UploadJson(4, 6, Range(4, 6));
  body["records"].as_array()[2] = json::array{6};
  ExpectRefused(body, 400, "invalid_request", "records[2] must be an object");
  ExpectRefused(Upload(ToJson(json::array{UploadJson(4, 6, Range(4, 6))})), 400,
                "invalid_request", "must be a JSON object");
}

TEST_F(HostileUploadTest, NumbersOutOfRangeAreRefused) {
  const std::int64_t two_to_53 = std::int64_t{1} << 53;
  ExpectRefused(With("last_sequence", two_to_53), 400, "invalid_request",
                "last_sequence must be between 1 and 9007199254740991");
  ExpectRefused(With("first_sequence", 0), 400, "invalid_request",
                "first_sequence must be between");
  ExpectRefused(With("first_sequence", -4), 400, "invalid_request",
                "first_sequence must be between");
  ExpectRefused(With("last_sequence", std::uint64_t{18'000'000'000'000'000'000u}), 400,
                "invalid_request", "last_sequence must be between");
  ExpectRefused(Upload(R"({"agent_version":"0.1.0","stream":"node/a","spool_id":")" + kSpoolA +
                       R"(","first_sequence":1e300,"last_sequence":1,"losses":{},"records":[]})"),
                400, "invalid_request", "first_sequence must be an integer");
  ExpectRefused(Upload(R"({"first_sequence":123456789012345678901234567890})"), 400,
                "invalid_request", "agent_version is required");
  ExpectRefused(With("first_sequence", 7), 400, "invalid_request",
                "first_sequence (7) must not be greater than last_sequence (6)");
  json::object losses = Losses();
  losses["dropped"].as_object()["records"] = -1;
  ExpectRefused(With("losses", losses), 400, "invalid_request",
                "losses.dropped.records must be between 0 and");
  losses = Losses();
  losses["dropped"].as_object()["bytes"] = two_to_53;
  ExpectRefused(With("losses", losses), 400, "invalid_request", "losses.dropped.bytes");
  ExpectRefused(WithRecordField("sequence", two_to_53), 400, "invalid_request",
                "records[1].sequence must be an integer from 1 to 9007199254740991");
  ExpectRefused(WithRecordField("sequence", -5), 400, "invalid_request",
                "records[1].sequence must be an integer from 1");
  ExpectRefused(WithRecordField("sequence", 5.5), 400, "invalid_request",
                "records[1].sequence must be an integer");
}

TEST_F(HostileUploadTest, TheLargestSequenceIsAccepted) {
  const std::int64_t largest = (std::int64_t{1} << 53) - 1;
  json::object body = UploadJson(largest, largest, {largest});
  body["stream"] = "node/edge";
  json::object reply = UploadOk(body);
  EXPECT_EQ(reply.at("acked_through").as_int64(), largest);
  EXPECT_EQ(reply.at("stored").as_int64(), 1);
}

TEST_F(HostileUploadTest, UnknownAndMissingFieldsAreRefusedWith400) {
  ExpectRefused(With("kubeconfig", "..."), 400, "invalid_request", "unknown field \"kubeconfig\"");
  json::object losses = Losses();
  losses["stolen"] = Losses()["dropped"];
  ExpectRefused(With("losses", losses), 400, "invalid_request", "unknown field \"losses.stolen\"");
  losses = Losses();
  losses["dropped"].as_object()["extra"] = 1;
  ExpectRefused(With("losses", losses), 400, "invalid_request",
                "unknown field \"losses.dropped.extra\"");
  ExpectRefused(WithRecordField("note", "x"), 400, "invalid_request",
                "unknown field \"records[1].note\"");
  for (const char* field : {"agent_version", "stream", "spool_id", "first_sequence",
                            "last_sequence", "losses", "records"}) {
    json::object body = UploadJson(4, 6, Range(4, 6));
    body.erase(field);
    ExpectRefused(body, 400, "invalid_request", std::string(field) + " is required");
  }
  losses = Losses();
  losses.erase("corrupt");
  ExpectRefused(With("losses", losses), 400, "invalid_request", "losses.corrupt is required");
  losses = Losses();
  losses["rejected"].as_object().erase("records");
  ExpectRefused(With("losses", losses), 400, "invalid_request",
                "losses.rejected.records is required");
  ExpectRefused(WithoutRecordField("sequence"), 400, "invalid_request",
                "records[1].sequence is required");
}

TEST_F(HostileUploadTest, BadNamesAndIdsAreRefusedWith400) {
  for (const char* stream : {"", "node/gpu node", "node/\xc3\xa9", "node\\x", "a?b", "x\n"}) {
    ExpectRefused(With("stream", stream), 400, "invalid_request", "stream must be 1-253");
  }
  ExpectRefused(With("stream", std::string(254, 's')), 400, "invalid_request",
                "stream is 254 bytes long; the limit is 253");
  for (std::string spool : {kSpoolA.substr(1), kSpoolA + "0", std::string(32, 'F'),
                            std::string(31, '0') + "g"}) {
    ExpectRefused(With("spool_id", spool), 400, "invalid_request", "spool_id");
  }
  ExpectRefused(With("spool_id", std::string(32, 'F')), 400, "invalid_request",
                "spool_id must be 32 lower-case hexadecimal digits");
  ExpectRefused(With("agent_version", std::string(257, 'v')), 400, "invalid_request",
                "agent_version is 257 bytes long");
  ExpectRefused(With("agent_instance", std::string(254, 'i')), 400, "invalid_request",
                "agent_instance is 254 bytes long");
}

TEST_F(HostileUploadTest, MoreThanTenThousandRecordsAreRefused) {
  json::object body = UploadJson(4, 20'004, Range(4, 10'004));
  ASSERT_EQ(body.at("records").as_array().size(), 10'001u);
  ExpectRefused(body, 400, "invalid_request", "records has 10001 entries; the limit is 10000");
  // Exactly the limit is fine.
  body = UploadJson(4, 10'003, Range(4, 10'003));
  EXPECT_EQ(UploadOk(body).at("stored").as_int64(), 10'000);
}

TEST_F(HostileUploadTest, BadRecordsAreRefusedWith422NamingTheirSequence) {
  ExpectInvalidRecord(WithRecordField("payload", json::array{1, 2}), 5,
                      "records[1].payload must be a JSON object");
  ExpectInvalidRecord(WithRecordField("payload", "text"), 5,
                      "records[1].payload must be a JSON object");
  ExpectInvalidRecord(WithRecordField("payload", nullptr), 5,
                      "records[1].payload must be a JSON object");
  ExpectInvalidRecord(WithoutRecordField("payload"), 5, "records[1].payload is required");
  ExpectInvalidRecord(WithRecordField("appended_at", "yesterday"), 5,
                      "records[1].appended_at must be an RFC 3339 time");
  ExpectInvalidRecord(WithRecordField("appended_at", 1700000000), 5,
                      "records[1].appended_at must be an RFC 3339 time");
  ExpectInvalidRecord(WithRecordField("appended_at", std::string(100'000, '2')), 5,
                      "records[1].appended_at must be an RFC 3339 time");
  ExpectInvalidRecord(WithoutRecordField("appended_at"), 5, "records[1].appended_at is required");
  // Sequences outside the range the upload says it covers, or not increasing.
  ExpectInvalidRecord(WithRecordField("sequence", 9), 9,
                      "records[1].sequence is 9, outside first_sequence..last_sequence (4..6)");
  ExpectInvalidRecord(WithRecordField("sequence", 3), 3, "outside first_sequence..last_sequence");
  ExpectInvalidRecord(WithRecordField("sequence", 4), 4,
                      "records[1].sequence is 4, not greater than the record before it (4)");
  json::object body = UploadJson(4, 9, {4, 6, 5});
  ExpectInvalidRecord(body, 5, "records[2].sequence is 5, not greater than the record before "
                               "it (6)");
}

TEST_F(HostileUploadTest, OversizedAndDeepPayloadsAreRefusedAsTheirRecord) {
  json::object big{{"blob", std::string(1 << 20, 'x')}};
  ExpectInvalidRecord(WithRecordField("payload", big), 5,
                      "records[1].payload is over 1048576 bytes serialized");
  // Just under the limit is fine.
  json::object fits{{"blob", std::string((1 << 20) - 20, 'x')}};
  json::object body = WithRecordField("payload", fits);
  body["stream"] = "node/big";
  EXPECT_EQ(UploadOk(body).at("stored").as_int64(), 3);

  auto nested = [](int depth) {
    json::value value = json::object();
    for (int i = 1; i < depth; ++i) value = json::object{{"d", std::move(value)}};
    return value;
  };
  ExpectInvalidRecord(WithRecordField("payload", nested(33)), 5,
                      "records[1].payload nests deeper than 32 levels");
  body = WithRecordField("payload", nested(32));
  body["stream"] = "node/deep";
  EXPECT_EQ(UploadOk(body).at("stored").as_int64(), 3);
  // Deeper than the parser goes: the record cannot be named, so the body is refused.
  ExpectRefused(WithRecordField("payload", nested(70)), 400, "invalid_request", "invalid JSON");
  ExpectRefused(Upload(std::string(100'000, '[') + std::string(100'000, ']')), 400,
                "invalid_request", "invalid JSON");
}

TEST_F(HostileUploadTest, InvalidJsonAndInvalidUtf8AreRefusedWith400) {
  ExpectRefused(Upload(""), 400, "invalid_request", "invalid JSON");
  ExpectRefused(Upload("{\"agent_version\": "), 400, "invalid_request", "invalid JSON");
  ExpectRefused(Upload("not json at all"), 400, "invalid_request", "invalid JSON");
  std::string body = ToJson(UploadJson(4, 6, Range(4, 6)));
  size_t at = body.find("test_record");
  ASSERT_NE(at, std::string::npos);
  body.replace(at, 3, "\xff\xfe\xc0");
  ExpectRefused(Upload(body), 400, "invalid_request", "invalid JSON");
  ExpectRefused(Upload(ToJson(UploadJson(4, 6, Range(4, 6))) + "{}"), 400, "invalid_request",
                "invalid JSON");
}

TEST_F(HostileUploadTest, BadGzipIsRefusedWith400) {
  std::string gz = Gzip(ToJson(UploadJson(4, 6, Range(4, 6))));
  net::Request request;
  request.method = "POST";
  request.target = "/api/v1/agent/uploads";
  request.headers.Set("Authorization", "Bearer " + token_);
  request.headers.Set("Content-Type", "application/json");
  request.headers.Set("Content-Encoding", "gzip");
  request.body = gz.substr(0, gz.size() / 2);
  ExpectRefused(Call(api_->router(), request), 400, "invalid_request", "gzip");
  request.body = ToJson(UploadJson(4, 6, Range(4, 6)));  // says gzip, is not
  ExpectRefused(Call(api_->router(), request), 400, "invalid_request", "gzip");
}

TEST_F(HostileUploadTest, BodiesOverTheLimitAre413CompressedOrNot) {
  // Compresses to a few KiB, inflates past 8 MiB.
  std::string bomb = GzipCompress(std::string((8 << 20) + 1, ' '), 9).value();
  ASSERT_LT(bomb.size(), 64u << 10);
  net::Request request;
  request.method = "POST";
  request.target = "/api/v1/agent/uploads";
  request.headers.Set("Authorization", "Bearer " + token_);
  request.headers.Set("Content-Type", "application/json");
  request.headers.Set("Content-Encoding", "gzip");
  request.body = bomb;
  ExpectRefused(Call(api_->router(), request), 413, "too_large", "decompressing");
  ExpectRefused(Upload(std::string((8 << 20) + 1, ' '), ""), 413, "too_large",
                "the limit is 8388608");
  EXPECT_EQ(Counter("uplink_console_uploads_refused_total", {{"reason", "too_large"}}), 2);
}

TEST_F(HostileUploadTest, AnythingButJsonOrAnUnknownEncodingIs415) {
  ExpectRefused(Upload(ToJson(UploadJson(4, 6, Range(4, 6))), "gzip", "text/plain"), 415,
                "unsupported_media_type", "Content-Type: application/json");
  ExpectRefused(Upload(ToJson(UploadJson(4, 6, Range(4, 6))), "br"), 415,
                "unsupported_media_type", "Content-Encoding must be gzip or absent");
  EXPECT_EQ(Counter("uplink_console_uploads_refused_total", {{"reason", "unsupported_media_type"}}),
            2);
}

TEST_F(HostileUploadTest, ARevokedTokenIs401AndStoresNothing) {
  ASSERT_EQ(Send("POST", "/api/v1/connections/" + id_ + "/revoke", admin_key_).status, 200);
  net::Response response = Upload(UploadJson(4, 6, Range(4, 6)));
  EXPECT_EQ(response.status, 401);
  EXPECT_EQ(ErrorCode(response), "revoked");
  ExpectNothingMoreStored();
  net::Response unknown = Upload(ToJson(UploadJson(4, 6, Range(4, 6))), "gzip",
                                 "application/json", "agt_" + std::string(43, 'x'));
  EXPECT_EQ(unknown.status, 401);
  EXPECT_EQ(ErrorCode(unknown), "invalid_token");
  // Refused by authentication, before the upload is looked at.
  EXPECT_EQ(Counter("uplink_console_auth_failures_total",
                    {{"kind", "agent_token"}, {"reason", "invalid_token"}}),
            1);
  EXPECT_EQ(Counter("uplink_console_uploads_refused_total", {{"reason", "invalid_token"}}), 0);
}

TEST_F(UploadsApiTest, ADeactivatedOwnersAgentIs403UntilReactivatedAndNothingIsStored) {
  testing::TestUser member = AddUser("member@example.com");
  json::object theirs = CreateConnection(member.api_key, "theirs");
  std::string their_token = Text(theirs, "token");
  ASSERT_EQ(AsAdmin("POST", "/api/v1/users/" + member.id + "/deactivate").status, 200);
  net::Response refused = Upload(ToJson(UploadJson(1, 3, Range(1, 3))), "gzip",
                                 "application/json", their_token);
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(ErrorCode(refused), "owner_deactivated");
  ASSERT_EQ(AsAdmin("POST", "/api/v1/users/" + member.id + "/reactivate").status, 200);
  EXPECT_TRUE(ShowConnection(member.api_key, Text(theirs, "id")).at("streams").as_array().empty());
  net::Response accepted = Upload(ToJson(UploadJson(1, 3, Range(1, 3))), "gzip",
                                  "application/json", their_token);
  EXPECT_EQ(accepted.status, 200) << accepted.body;
}

TEST_F(HostileUploadTest, AUserCredentialIsNoAgentToken) {
  net::Response response = Upload(ToJson(UploadJson(4, 6, Range(4, 6))), "gzip",
                                  "application/json", admin_key_);
  EXPECT_EQ(response.status, 401);
  ExpectNothingMoreStored();
}

TEST_F(HostileUploadTest, RefusalsAreCountedByReasonAndTheConsoleKeepsAccepting) {
  Upload(With("stream", ""));
  Upload(WithRecordField("payload", "x"));
  EXPECT_EQ(Counter("uplink_console_uploads_refused_total", {{"reason", "invalid_request"}}), 1);
  EXPECT_EQ(Counter("uplink_console_uploads_refused_total", {{"reason", "invalid_record"}}), 1);
  EXPECT_EQ(UploadOk(UploadJson(4, 6, Range(4, 6))).at("stored").as_int64(), 3);
}

// ---- options, metrics, retention, paging -----------------------------------------------------

class SmallUploadLimitTest : public UploadsApiTest {
 protected:
  ConsoleOptions Options() override {
    ConsoleOptions options = testing::FastOptions();
    options.max_upload_bytes = kLimit;
    return options;
  }
  static constexpr size_t kLimit = 128 << 10;
};

TEST_F(SmallUploadLimitTest, TheUploadLimitIsAnOption) {
  json::object body = UploadJson(1, 1, {1});
  body["records"].as_array()[0].as_object()["payload"] =
      json::object{{"blob", std::string(kLimit, 'x')}};
  net::Response response = Upload(ToJson(body), "");
  EXPECT_EQ(response.status, 413);
  // Compressed it is small, but it inflates past the limit.
  response = Upload(ToJson(body));
  EXPECT_EQ(response.status, 413) << response.body;
  EXPECT_TRUE(Streams().empty());
}

// A sink that fails while the first upload is being answered, as an allocation could.
class ThrowingSink : public UploadSink {
 public:
  void UploadStored(const Connection&, const UploadBatch&, const UploadOutcome&) override {
    if (!thrown_.exchange(true)) throw std::runtime_error("out of memory");
  }
  void RenderMetrics(std::string&) const override {}

 private:
  std::atomic<bool> thrown_{false};
};

class ThrowingSinkTest : public UploadsApiTest {
 protected:
  ConsoleOptions Options() override {
    ConsoleOptions options = testing::FastOptions();
    options.upload_sink = &sink_;
    return options;
  }
  void TearDown() override {
    api_.reset();  // waits for every handed-over upload's answer, then drops its sink pointer
    UploadsApiTest::TearDown();
  }
  ThrowingSink sink_;
};

TEST_F(ThrowingSinkTest, AFailureWhileAnsweringIs500AndTheResentBatchIsADuplicate) {
  net::Response failed = Upload(UploadJson(1, 3, Range(1, 3)));
  EXPECT_EQ(failed.status, 500) << failed.body;
  EXPECT_EQ(ErrorCode(failed), "internal");
  // Stored before the answer failed: sent again, it is acknowledged as duplicates.
  json::object again = UploadOk(UploadJson(1, 3, Range(1, 3)));
  EXPECT_EQ(again.at("stored").as_int64(), 0);
  EXPECT_EQ(again.at("duplicates").as_int64(), 3);
  EXPECT_EQ(UploadOk(UploadJson(4, 4, {4})).at("stored").as_int64(), 1);
  EXPECT_EQ(StoredSequences(), Range(1, 4));
}

TEST(UploadBodyLimit, UploadsGetTheirOwnLimitFromTheRequestHead) {
  net::Request head;
  head.method = "POST";
  head.target = "/api/v1/agent/uploads";
  EXPECT_EQ(RequestBodyLimit(head), protocol::kDefaultMaxUploadBytes);
  EXPECT_EQ(RouteBodyLimit(head, 3 << 20), size_t{3} << 20);
  head.target = "/api/v1/agent/uploads?x=1";
  EXPECT_EQ(RouteBodyLimit(head, 3 << 20), size_t{3} << 20);
  head.target = "/api/v1/agent/uploads/x";
  EXPECT_EQ(RouteBodyLimit(head, 3 << 20), kMaxUserBodyBytes);
  head.method = "GET";
  head.target = "/api/v1/agent/uploads";
  EXPECT_EQ(RouteBodyLimit(head, 3 << 20), 0u);
}

TEST_F(SmallUploadLimitTest, OverHttpUploadsHaveTheirOwnLimitAppliedBeforeTheBodyIsRead) {
  net::ServerOptions options;  // as uplink-console serve sets them
  options.max_body_bytes = std::max(protocol::kMaxReportBytes, kLimit);
  options.body_limit_for = [](const net::Request& head) { return RouteBodyLimit(head, kLimit); };
  auto server = net::HttpServer::Start(options, api_->router().AsHandler());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  net::ClientOptions client_options;
  client_options.base_url = "http://127.0.0.1:" + std::to_string((*server)->port());
  auto client = net::HttpClient::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  net::Request upload;
  upload.method = "POST";
  upload.target = "/api/v1/agent/uploads";
  upload.headers.Set("Authorization", "Bearer " + token_);
  upload.headers.Set("Content-Type", "application/json");
  upload.headers.Set("Content-Encoding", "gzip");
  upload.body = Gzip(ToJson(UploadJson(1, 100, Range(1, 100))));
  auto accepted = (*client)->Send(upload);
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  EXPECT_EQ(accepted->status, 200) << accepted->body;
  EXPECT_EQ(Body(*accepted).at("stored").as_int64(), 100);

  // Over the user API's 64 KiB yet within the upload limit: read, and the body decides.
  upload.headers.Remove("Content-Encoding");
  upload.body = std::string(kLimit - 1, ' ');
  auto read = (*client)->Send(upload);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->status, 400) << read->body;
  // Over the upload limit: refused by the server before the body is read.
  upload.body = std::string(kLimit + 1, ' ');
  auto refused = (*client)->Send(upload);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->status, 413);
  (*server)->Stop();
  EXPECT_EQ(OnlyStream().at("records_stored").as_int64(), 100);
}

TEST_F(UploadsApiTest, MetricsCountUploadsRecordsDuplicatesAndLosses) {
  UploadOk(UploadJson(5, 10, {5, 6, 8}));       // 1-4, 7, 9, 10 lost
  UploadOk(UploadJson(5, 12, {5, 6, 8, 11, 12}));  // 3 duplicates, 2 stored
  net::Response metrics = Call(api_->router(), net::Request{.target = "/metrics"});
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("uplink_console_uploads_accepted_total 2"), std::string::npos);
  EXPECT_NE(metrics.body.find("uplink_console_upload_records_stored_total 5"), std::string::npos);
  EXPECT_NE(metrics.body.find("uplink_console_upload_duplicates_total 3"), std::string::npos);
  EXPECT_NE(metrics.body.find("uplink_console_upload_records_lost_total 7"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("uplink_console_http_requests_total{route=\"/api/v1/agent/uploads\","
                              "method=\"POST\",status=\"200\"} 2"),
            std::string::npos);
}

class RetentionTest : public UploadsApiTest {
 protected:
  ConsoleOptions Options() override {
    ConsoleOptions options = testing::FastOptions();
    options.record_retention = hours(24);
    return options;
  }
};

TEST_F(RetentionTest, RecordsOlderThanTheRetentionAreDeletedByLaterUploads) {
  UploadOk(UploadJson(1, 5, Range(1, 5)));
  clock_.Advance(hours(23));
  UploadOk(UploadJson(6, 8, Range(6, 8)));
  EXPECT_EQ(StoredSequences(), Range(1, 8));
  clock_.Advance(hours(2));  // 1-5 are 25 hours old, 6-8 one hour
  UploadOk(UploadJson(9, 9, {9}));
  EXPECT_EQ(StoredSequences(), Range(6, 9));
  EXPECT_EQ(Counter("uplink_console_records_pruned_total"), 5);
  // The stream's history is kept.
  EXPECT_EQ(OnlyStream().at("records_stored").as_int64(), 9);
}

TEST_F(UploadsApiTest, RecordsArePagedWithNextAfter) {
  UploadOk(UploadJson(1, 12, Range(1, 12)));
  json::object page = Body(Records("?stream=" + kStream + "&limit=5&after=3"));
  ASSERT_EQ(page.at("records").as_array().size(), 5u);
  EXPECT_EQ(page.at("records").as_array()[0].as_object().at("sequence").as_int64(), 4);
  EXPECT_EQ(page.at("next_after").as_int64(), 8);
  page = Body(Records("?stream=" + kStream + "&after=8"));
  EXPECT_EQ(page.at("records").as_array().size(), 4u);
  EXPECT_TRUE(page.at("next_after").is_null());
  // The stream name may be percent-encoded, as clients send "/" in a query.
  page = Body(Records("?stream=node%2Fgpu-node-0001&after=11"));
  EXPECT_EQ(page.at("records").as_array().size(), 1u);
  EXPECT_EQ(StoredSequences(), Range(1, 12));
}

TEST_F(UploadsApiTest, RecordQueryParametersAreValidatedWithClearErrors) {
  UploadOk(UploadJson(1, 3, Range(1, 3)));
  struct Case {
    std::string query;
    int status;
    std::string says;
  };
  std::vector<Case> cases = {
      {"", 400, "stream is required"},
      {"?after=1", 400, "stream is required"},
      {"?stream=", 400, "stream must be 1-253"},
      {"?stream=node%20x", 400, "stream must be 1-253"},
      {"?stream=" + kStream + "&after=-1", 400, "after must be a whole number from 0"},
      {"?stream=" + kStream + "&after=x", 400, "after must be a whole number"},
      {"?stream=" + kStream + "&after=9007199254740992", 400, "after must be a whole number"},
      {"?stream=" + kStream + "&after=99999999999999999999", 400, "after must be"},
      {"?stream=" + kStream + "&limit=0", 400, "limit must be a whole number from 1 to 1000"},
      {"?stream=" + kStream + "&limit=1001", 400, "limit must be a whole number from 1 to 1000"},
      {"?stream=" + kStream + "&limit=", 400, "limit must be"},
      {"?stream=" + kStream + "&epoch=1", 400, "epoch must be from 0 to 0"},
      {"?stream=" + kStream + "&epoch=-1", 400, "epoch must be a whole number"},
      {"?stream=" + kStream + "&color=red", 400, "unknown query parameter \"color\""},
      {"?stream=node/other", 404, "no stream \"node/other\""},
  };
  for (const Case& c : cases) {
    net::Response response = Records(c.query);
    EXPECT_EQ(response.status, c.status) << c.query << " " << response.body;
    EXPECT_NE(ErrorMessage(response).find(c.says), std::string::npos)
        << c.query << " " << response.body;
  }
  EXPECT_EQ(Records("?stream=" + kStream + "&limit=1000&after=0&epoch=0").status, 200);
}

TEST_F(UploadsApiTest, AnotherOwnersStreamsAndRecordsAreNotFound) {
  UploadOk(UploadJson(1, 3, Range(1, 3)));
  testing::TestUser member = AddUser("member@example.com");
  net::Response records = Records("?stream=" + kStream, member.api_key);
  EXPECT_EQ(records.status, 404);
  EXPECT_EQ(ErrorCode(records), "not_found");
  EXPECT_EQ(records.body.find("test_record"), std::string::npos);
  EXPECT_EQ(Send("GET", "/api/v1/connections/" + id_, member.api_key).status, 404);
  // Their own connection has no streams, and names no one else's.
  std::string own = Text(CreateConnection(member.api_key, "theirs"), "id");
  EXPECT_TRUE(ShowConnection(member.api_key, own).at("streams").as_array().empty());
  EXPECT_EQ(Records("?stream=" + kStream, member.api_key, own).status, 404);
  EXPECT_EQ(Records("?stream=" + kStream, member.api_key, "..%2F..").status, 404);
  // Without a credential nothing is answered.
  EXPECT_EQ(Send("GET", "/api/v1/connections/" + id_ + "/records?stream=" + kStream, "").status,
            401);
}

}  // namespace
}  // namespace uplink::console
