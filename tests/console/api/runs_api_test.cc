// Experiment runs end to end through the router: the experiments role's records on
// POST /api/v1/agent/uploads, read strictly, stored once, and what users read with
// GET /api/v1/connections/{id}/runs and .../runs/{run_id}.
#include <gtest/gtest.h>

#include <cmath>

#include "common/gzip.h"
#include "api_fixture.h"

namespace uplink::console {
namespace {

using testing::Body;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::Text;

const std::string kStream = "experiments/uplink-agent-7d9f";
const std::string kSpool = "9f2c4e0a5b7d41c3a8e6f0b1c2d3e4f5";

json::object RunJson(const std::string& run_id, const std::string& experiment,
                     const std::string& status, const std::string& started_at,
                     const std::string& user = "konrad") {
  return json::object{{"source", "mlflow"},
                      {"run_id", run_id},
                      {"experiment_id", experiment == "Default" ? "0" : "7"},
                      {"experiment", experiment},
                      {"name", "run " + run_id},
                      {"user", user},
                      {"status", status},
                      {"offline", false},
                      {"location", "0/" + run_id},
                      {"started_at", started_at},
                      {"params", {{"alpha", "0.5"}, {"db_password", "[redacted]"}}},
                      {"tags", {{"mlflow.user", user}}},
                      {"redacted", json::array{"params.db_password"}},
                      {"a_field_from_a_newer_agent", 1}};
}

json::object Series(const std::string& run_id, const std::string& metric, json::array points) {
  return json::object{{"run_id", run_id}, {"metric", metric}, {"points", std::move(points)}};
}

json::object Payload(const std::string& kind, const std::string& field, json::array items) {
  return json::object{{"kind", kind}, {"version", 1}, {field, std::move(items)}};
}

class RunsApiTest : public testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    json::object created = CreateConnection(admin_key_, "prod");
    id_ = Text(created, "id");
    token_ = Text(created, "token");
  }

  // Uploads `payloads` as the next records of the experiments stream.
  net::Response Upload(const std::vector<json::object>& payloads,
                       const std::string& stream = kStream) {
    json::array records;
    std::int64_t first = next_;
    for (const json::object& payload : payloads) {
      records.push_back(json::object{{"sequence", next_++},
                                     {"appended_at", "2026-11-30T03:20:00.125Z"},
                                     {"payload", payload}});
    }
    auto count = json::object{{"records", 0}, {"bytes", 0}};
    json::object body{{"agent_version", "0.1.0"},
                      {"stream", stream},
                      {"spool_id", kSpool},
                      {"first_sequence", first},
                      {"last_sequence", next_ - 1},
                      {"losses", {{"dropped", count}, {"corrupt", count}, {"rejected", count}}},
                      {"records", std::move(records)}};
    net::Request request;
    request.method = "POST";
    request.target = "/api/v1/agent/uploads";
    request.headers.Set("Authorization", "Bearer " + token_);
    request.headers.Set("Content-Type", "application/json");
    request.headers.Set("Content-Encoding", "gzip");
    request.body = GzipCompress(ToJson(body)).value();
    return testing::Call(api_->router(), std::move(request));
  }

  void UploadOk(const std::vector<json::object>& payloads) {
    net::Response response = Upload(payloads);
    ASSERT_EQ(response.status, 200) << response.body.substr(0, 400);
  }

  net::Response Get(const std::string& path, const std::string& credential = "") {
    return Send("GET", "/api/v1/connections/" + id_ + path,
                credential.empty() ? admin_key_ : credential);
  }

  json::object GetOk(const std::string& path) {
    net::Response response = Get(path);
    EXPECT_EQ(response.status, 200) << response.body;
    return Body(response);
  }

  std::vector<std::string> RunIds(const std::string& query) {
    std::vector<std::string> ids;
    json::object body = GetOk("/runs" + query);
    for (const json::value& run : body.at("runs").as_array()) {
      ids.emplace_back(run.at("run_id").as_string());
    }
    return ids;
  }

  std::string id_;
  std::string token_;
  std::int64_t next_ = 1;
};

TEST_F(RunsApiTest, ARunWithItsPointsIsListedAndShown) {
  UploadOk({Payload("experiment_run", "runs",
                    {RunJson("r1", "Default", "running", "2026-11-30T01:00:00Z")}),
            Payload("metric_points", "series",
                    {Series("r1", "loss", {json::array{0, 2.5, 1000}, json::array{1, 1.5, 2000},
                                           json::array{2, "NaN", 3000}}),
                     Series("r1", "acc", {json::array{0, 0.5, 1000}})})});
  json::object list = GetOk("/runs");
  ASSERT_EQ(list.at("runs").as_array().size(), 1u);
  const json::value& summary = list.at("runs").at(0);
  EXPECT_EQ(summary.at("status"), "running");
  EXPECT_EQ(summary.at("experiment"), "Default");
  EXPECT_EQ(summary.at("started_at"), "2026-11-30T01:00:00.000Z");
  EXPECT_EQ(summary.at("metric_count").to_number<int>(), 2);
  EXPECT_EQ(summary.at("stream").as_string(), kStream);
  EXPECT_EQ(json::serialize(list.at("experiments")), R"([{"name":"Default","runs":1}])");

  json::object run = GetOk("/runs/r1");
  EXPECT_EQ(run.at("params").at("alpha"), "0.5");
  EXPECT_EQ(run.at("params").at("db_password"), "[redacted]");
  EXPECT_EQ(json::serialize(run.at("redacted")), R"(["params.db_password"])");
  EXPECT_EQ(run.at("tags").at("mlflow.user"), "konrad");
  // Latest: the highest step, here a NaN, which JSON cannot hold.
  const json::array& metrics = run.at("metrics").as_array();
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[1].at("key"), "loss");
  EXPECT_EQ(metrics[1].at("step").to_number<int>(), 2);
  EXPECT_EQ(metrics[1].at("value"), "NaN");
  EXPECT_EQ(metrics[1].at("points").to_number<int>(), 3);
  EXPECT_EQ(json::serialize(run.at("history").at("loss")), R"([[0,2.5E0,1000],[1,1.5E0,2000],[2,"NaN",3000]])");
  // Only what was asked for.
  json::object only = GetOk("/runs/r1?metrics=acc");
  EXPECT_EQ(only.at("history").as_object().size(), 1u);
  EXPECT_FALSE(GetOk("/runs/r1?history=false").contains("history"));
}

TEST_F(RunsApiTest, PointsSentAgainAreStoredOnceAndAnUpsertReplacesTheRun) {
  json::object points = Payload("metric_points", "series",
                                {Series("r1", "loss", {json::array{0, 2.5, 1000}, json::array{1, 1.5, 2000}})});
  UploadOk({Payload("experiment_run", "runs", {RunJson("r1", "Default", "running", "2026-11-30T01:00:00Z")}),
            points});
  UploadOk({points});  // a cursor that started over sends them again
  UploadOk({Payload("metric_points", "series", {Series("r1", "loss", {json::array{2, 0.5, 3000}})})});
  json::object run = GetOk("/runs/r1");
  EXPECT_EQ(run.at("metrics").at(0).at("points").to_number<int>(), 3);
  EXPECT_EQ(run.at("history").at("loss").as_array().size(), 3u);
  EXPECT_EQ(Metric("uplink_console_run_items_total", {{"kind", "duplicate_points"}}), 2);
  EXPECT_EQ(Metric("uplink_console_run_items_total", {{"kind", "points"}}), 3);

  json::object finished = RunJson("r1", "Default", "finished", "2026-11-30T01:00:00Z");
  finished["ended_at"] = "2026-11-30T02:00:00Z";
  UploadOk({Payload("experiment_run", "runs", {finished})});
  run = GetOk("/runs/r1");
  EXPECT_EQ(run.at("status"), "finished");
  EXPECT_EQ(run.at("duration_seconds").to_number<double>(), 3600);
  EXPECT_EQ(run.at("metrics").at(0).at("points").to_number<int>(), 3);  // points kept
}

TEST_F(RunsApiTest, ADeletedRunLeavesWithItsPoints) {
  UploadOk({Payload("experiment_run", "runs", {RunJson("r1", "Default", "finished", "2026-11-30T01:00:00Z"),
                                               RunJson("r2", "Default", "finished", "2026-11-30T02:00:00Z")}),
            Payload("metric_points", "series", {Series("r1", "loss", {json::array{0, 1, 1}})})});
  UploadOk({Payload("run_deleted", "run_ids", {"r1", "never-seen"})});
  EXPECT_EQ(Get("/runs/r1").status, 404);
  EXPECT_EQ(RunIds(""), std::vector<std::string>{"r2"});
  EXPECT_EQ(Metric("uplink_console_run_items_total", {{"kind", "deleted"}}), 1);
}

TEST_F(RunsApiTest, PointsBeforeTheirRunAreKeptUnderAPlaceholder) {
  UploadOk({Payload("metric_points", "series", {Series("lost-upsert", "loss", {json::array{0, 1, 1}})})});
  json::object run = GetOk("/runs/lost-upsert");
  EXPECT_EQ(run.at("status"), "unknown");
  EXPECT_TRUE(run.at("started_at").is_null());
  UploadOk({Payload("experiment_run", "runs", {RunJson("lost-upsert", "Default", "running", "2026-11-30T01:00:00Z")})});
  run = GetOk("/runs/lost-upsert");
  EXPECT_EQ(run.at("status"), "running");
  EXPECT_EQ(run.at("metrics").at(0).at("points").to_number<int>(), 1);
}

TEST_F(RunsApiTest, FiltersAndPages) {
  UploadOk({Payload("experiment_run", "runs",
                    {RunJson("a", "Default", "finished", "2026-11-30T01:00:00Z"),
                     RunJson("b", "Default", "running", "2026-11-30T02:00:00Z", "ana"),
                     RunJson("c", "mltrace", "failed", "2026-11-30T03:00:00Z"),
                     RunJson("d", "mltrace", "finished", "2026-11-30T04:00:00Z", "ana"),
                     RunJson("e", "mltrace", "finished", "2026-11-30T05:00:00Z")})});
  EXPECT_EQ(RunIds(""), (std::vector<std::string>{"e", "d", "c", "b", "a"}));  // newest first
  EXPECT_EQ(RunIds("?experiment=mltrace"), (std::vector<std::string>{"e", "d", "c"}));
  EXPECT_EQ(RunIds("?experiment=7&status=finished"), (std::vector<std::string>{"e", "d"}));
  EXPECT_EQ(RunIds("?status=running"), std::vector<std::string>{"b"});
  EXPECT_EQ(RunIds("?user=ana"), (std::vector<std::string>{"d", "b"}));
  EXPECT_EQ(RunIds("?started_after=2026-11-30T02:00:00Z&started_before=2026-11-30T04:00:00Z"),
            (std::vector<std::string>{"c", "b"}));
  std::vector<std::string> paged;
  std::string after;
  for (int page = 0; page < 5; ++page) {
    json::object body = GetOk("/runs?limit=2" + (after.empty() ? "" : "&after=" + after));
    for (const json::value& run : body.at("runs").as_array()) paged.emplace_back(run.at("run_id").as_string());
    if (body.at("next_after").is_null()) break;
    after = std::string(body.at("next_after").as_string());
  }
  EXPECT_EQ(paged, (std::vector<std::string>{"e", "d", "c", "b", "a"}));
  json::object facets = GetOk("/runs");
  EXPECT_EQ(json::serialize(facets.at("statuses")),
            R"([{"name":"failed","runs":1},{"name":"finished","runs":3},{"name":"running","runs":1}])");
  EXPECT_EQ(Get("/runs?status=sleeping").status, 400);
  EXPECT_EQ(Get("/runs?after=bogus").status, 400);
  EXPECT_EQ(Get("/runs?started_after=yesterday").status, 400);
  net::Response unknown = Get("/runs?colour=red");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(ErrorMessage(unknown).find("experiment, status, user"), std::string::npos);
}

TEST_F(RunsApiTest, ALongHistoryIsThinnedWithItsFirstAndLastPoints) {
  json::array points;
  for (int i = 0; i < 3000; ++i) points.push_back(json::array{i, i * 1.0, 1000 + i});
  UploadOk({Payload("experiment_run", "runs", {RunJson("r1", "Default", "running", "2026-11-30T01:00:00Z")}),
            Payload("metric_points", "series", {Series("r1", "loss", std::move(points))})});
  json::object run = GetOk("/runs/r1?points=100");
  const json::array& history = run.at("history").at("loss").as_array();
  EXPECT_LE(history.size(), 100u);
  EXPECT_GE(history.size(), 90u);
  EXPECT_EQ(history.front().at(0).to_number<int>(), 0);
  EXPECT_EQ(history.back().at(0).to_number<int>(), 2999);
  EXPECT_EQ(run.at("metrics").at(0).at("points").to_number<int>(), 3000);
}

TEST_F(RunsApiTest, ProblemsAreListedUntilTheRunReads) {
  UploadOk({Payload("scan_problem", "problems",
                    {json::object{{"source", "mlflow"}, {"location", "0/r1/meta.yaml"},
                                  {"error", "meta.yaml: expected a mapping"}}})});
  json::object list = GetOk("/runs");
  ASSERT_EQ(list.at("problems").as_array().size(), 1u);
  EXPECT_EQ(list.at("problems").at(0).at("error"), "meta.yaml: expected a mapping");
  UploadOk({Payload("experiment_run", "runs", {RunJson("r1", "Default", "running", "2026-11-30T01:00:00Z")})});
  EXPECT_EQ(GetOk("/runs").at("problems").as_array().size(), 0u);
}

TEST_F(RunsApiTest, MalformedRecordsAreRefusedNamingTheField) {
  struct Case {
    json::object payload;
    std::string expected;
  };
  json::object bad_status = RunJson("r1", "Default", "sleeping", "2026-11-30T01:00:00Z");
  json::object bad_params = RunJson("r1", "Default", "running", "2026-11-30T01:00:00Z");
  bad_params["params"] = json::object{{"lr", 0.1}};
  json::object no_id = RunJson("r1", "Default", "running", "2026-11-30T01:00:00Z");
  no_id.erase("run_id");
  json::object bad_time = RunJson("r1", "Default", "running", "yesterday");
  std::vector<Case> cases = {
      {Payload("experiment_run", "runs", {bad_status}), "runs[0].status"},
      {Payload("experiment_run", "runs", {bad_params}), "runs[0].params[\"lr\"]"},
      {Payload("experiment_run", "runs", {no_id}), "runs[0].run_id is required"},
      {Payload("experiment_run", "runs", {bad_time}), "runs[0].started_at"},
      {Payload("metric_points", "series", {Series("r1", "loss", {json::array{0, "big", 1}})}),
       "series[0].points[0][1]"},
      {Payload("metric_points", "series", {Series("r1", "loss", {json::array{0.5, 1, 1}})}),
       "series[0].points[0][0] must be an integer"},
      {Payload("metric_points", "series", {Series("r1", "", {json::array{0, 1, 1}})}),
       "series[0].metric is empty"},
      {Payload("run_deleted", "run_ids", {json::array{}}), "run_ids[0] must be a string"},
      {json::object{{"kind", "experiment_run"}, {"version", 2}, {"runs", json::array{}}},
       "version must be 1"},
      {json::object{{"kind", "metric_points"}, {"version", 1}}, "series must be an array"},
  };
  for (const Case& c : cases) {
    net::Response response = Upload({c.payload});
    EXPECT_EQ(response.status, 422) << c.expected << ": " << response.body;
    EXPECT_EQ(ErrorCode(response), "invalid_record");
    EXPECT_NE(ErrorMessage(response).find(c.expected), std::string::npos)
        << c.expected << " not in " << ErrorMessage(response);
    next_ -= 1;  // refused: the same sequence goes again
  }
  // On another role's stream.
  net::Response elsewhere = Upload({Payload("run_deleted", "run_ids", {"r1"})}, "node/gpu-node-1");
  EXPECT_EQ(elsewhere.status, 422);
  EXPECT_NE(ErrorMessage(elsewhere).find("experiments role's stream"), std::string::npos);
  EXPECT_EQ(GetOk("/runs").at("runs").as_array().size(), 0u);
}

TEST_F(RunsApiTest, RunsAreTheOwnersOnly) {
  UploadOk({Payload("experiment_run", "runs", {RunJson("r1", "Default", "running", "2026-11-30T01:00:00Z")})});
  testing::TestUser other = AddUser("other@example.com");
  EXPECT_EQ(Get("/runs", other.api_key).status, 404);
  EXPECT_EQ(Get("/runs/r1", other.api_key).status, 404);
  EXPECT_EQ(Get("/runs/nope").status, 404);
  EXPECT_EQ(Get("/runs/r1?history=maybe").status, 400);
  EXPECT_EQ(Send("GET", "/api/v1/connections/" + id_ + "/runs", "").status, 401);
}

}  // namespace
}  // namespace uplink::console
