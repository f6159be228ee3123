// The API driven through ApiServer::HandleForTesting: no sockets, no TLS.
#include "kubesim/api.h"

#include <gtest/gtest.h>

#include "kubesim/cluster.h"

namespace uplink::kubesim {
namespace {

constexpr const char* kToken = "kubesim_test-token";
constexpr const char* kTableAccept =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json";

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (json::object& ns : DefaultNamespaces()) ASSERT_TRUE(store_.Put(ns).ok());
    for (json::object& node : GenerateNodes(ClusterShape{3, 8, 1}, clock_.Now())) {
      ASSERT_TRUE(store_.Put(node).ok());
    }
  }

  net::Response Call(std::string method, std::string target, std::string body = "",
                     std::string content_type = "", std::string accept = "") {
    net::Request request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.body = std::move(body);
    request.headers.Set("Authorization", std::string("Bearer ") + kToken);
    if (!content_type.empty()) request.headers.Set("Content-Type", content_type);
    if (!accept.empty()) request.headers.Set("Accept", accept);
    return api_.HandleForTesting(std::move(request));
  }

  static json::object Body(const net::Response& response) {
    Result<json::value> parsed = ParseJson(response.body);
    EXPECT_TRUE(parsed.ok() && parsed->is_object()) << response.body;
    return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object();
  }

  // Checks the response is a real-looking Status and returns its message.
  static std::string ExpectStatus(const net::Response& response, int code, std::string_view reason) {
    EXPECT_EQ(response.status, code) << response.body;
    json::object status = Body(response);
    EXPECT_EQ(status["kind"], "Status");
    EXPECT_EQ(status["apiVersion"], "v1");
    EXPECT_EQ(status["status"], "Failure");
    EXPECT_EQ(ToJson(status["reason"]), ToJson(json::value(reason))) << response.body;
    EXPECT_EQ(status["code"], code);
    EXPECT_TRUE(status["metadata"].is_object());
    return status["message"].is_string() ? std::string(status["message"].get_string()) : "";
  }

  FakeClock clock_;
  ObjectStore store_{clock_};
  ApiServer api_{ApiOptions{Secret(kToken), "v1.33.1"}, store_, clock_};
};

TEST_F(ApiTest, RequestsWithoutTheBearerTokenAreUnauthorized) {
  for (const std::string& authorization : std::vector<std::string>{"", "Bearer wrong", "Basic a2V5", "bearer kubesim_test-token",
                                    std::string("Bearer ") + kToken + "x"}) {
    net::Request request;
    request.target = "/api/v1/nodes";
    if (!authorization.empty()) request.headers.Set("Authorization", authorization);
    ExpectStatus(api_.HandleForTesting(request), 401, "Unauthorized");
  }
}

TEST_F(ApiTest, VersionReportsTheConfiguredServerVersion) {
  json::object version = Body(Call("GET", "/version?timeout=5s"));
  EXPECT_EQ(version["gitVersion"], "v1.33.1");
  EXPECT_EQ(version["major"], "1");
  EXPECT_EQ(version["minor"], "33");
  EXPECT_EQ(version["platform"], "linux/amd64");
  EXPECT_EQ(Call("GET", "/healthz").body, "ok");
}

TEST_F(ApiTest, DiscoveryListsResourcesWithVerbsAndShortNames) {
  EXPECT_EQ(Body(Call("GET", "/api"))["versions"].as_array().at(0), "v1");
  json::object groups = Body(Call("GET", "/apis", "", "",
                                  "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"));
  EXPECT_EQ(groups["kind"], "APIGroupList");
  EXPECT_EQ(groups["groups"].as_array().at(0).at("name"), "apps");
  json::object core = Body(Call("GET", "/api/v1"));
  EXPECT_EQ(core["kind"], "APIResourceList");
  std::map<std::string, std::string> short_names;
  for (const json::value& resource : core["resources"].as_array()) {
    short_names[std::string(resource.at("name").as_string())] =
        ToJson(resource.at("shortNames")) + (resource.at("namespaced").as_bool() ? " ns" : "");
  }
  EXPECT_EQ(short_names["nodes"], R"(["no"])");
  EXPECT_EQ(short_names["namespaces"], R"(["ns"])");
  EXPECT_EQ(short_names["configmaps"], R"(["cm"] ns)");
  EXPECT_EQ(short_names["pods"], R"(["po"] ns)");
  EXPECT_EQ(short_names["events"], R"(["ev"] ns)");
  EXPECT_EQ(short_names["services"], R"(["svc"] ns)");
  json::object apps = Body(Call("GET", "/apis/apps/v1"));
  EXPECT_EQ(apps["resources"].as_array().size(), 2u);
}

TEST_F(ApiTest, NodeListsAreNodeListsOrTablesByAcceptHeader) {
  json::object list = Body(Call("GET", "/api/v1/nodes?labelSelector=nvidia.com%2Fgpu.present%3Dtrue"));
  EXPECT_EQ(list["kind"], "NodeList");
  EXPECT_EQ(list["apiVersion"], "v1");
  EXPECT_TRUE(list["metadata"].at("resourceVersion").is_string());
  EXPECT_EQ(list["items"].as_array().size(), 3u);
  json::object table = Body(Call("GET", "/api/v1/nodes?limit=500", "", "", kTableAccept));
  EXPECT_EQ(table["kind"], "Table");
  EXPECT_EQ(table["rows"].as_array().size(), 4u);
  json::object one = Body(Call("GET", "/api/v1/nodes/gpu-node-0002", "", "", kTableAccept));
  EXPECT_EQ(one["rows"].as_array().at(0).at("cells").at(0), "gpu-node-0002");
}

TEST_F(ApiTest, PagedListsCarryContinueAndRemainingItemCount) {
  json::object first = Body(Call("GET", "/api/v1/nodes?limit=3"));
  EXPECT_EQ(first["items"].as_array().size(), 3u);
  EXPECT_EQ(first["metadata"].at("remainingItemCount"), 1);
  std::string token(first["metadata"].at("continue").as_string());
  json::object second = Body(Call("GET", "/api/v1/nodes?limit=3&continue=" + token));
  // cpu-node-0001 sorts first, so the last GPU node is alone on the second page.
  EXPECT_EQ(second["items"].as_array().at(0).at("metadata").at("name"), "gpu-node-0003");
  EXPECT_FALSE(second["metadata"].as_object().contains("continue"));
}

TEST_F(ApiTest, BadSelectorsTokensAndParametersAreBadRequests) {
  EXPECT_NE(ExpectStatus(Call("GET", "/api/v1/nodes?labelSelector=a%20in%20(x"), 400, "BadRequest")
                .find("expected"),
            std::string::npos);
  ExpectStatus(Call("GET", "/api/v1/nodes?fieldSelector=status.capacity%3D1"), 400, "BadRequest");
  EXPECT_TRUE(ExpectStatus(Call("GET", "/api/v1/nodes?limit=1&continue=garbage%21"), 400,
                           "BadRequest")
                  .starts_with("continue key is not valid"));
  ExpectStatus(Call("GET", "/api/v1/nodes?limit=ten"), 400, "BadRequest");
  ExpectStatus(Call("GET", "/api/v1/nodes?includeObject=All"), 400, "BadRequest");
}

TEST_F(ApiTest, ConfigMapsCanBeCreatedPatchedListedAndDeleted) {
  net::Response created = Call("POST", "/api/v1/namespaces/uplink-system/configmaps?fieldManager=kubectl-create",
                               R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"}})",
                               "application/json");
  ASSERT_EQ(created.status, 201) << created.body;
  ExpectStatus(Call("POST", "/api/v1/namespaces/uplink-system/configmaps",
                    R"({"metadata":{"name":"x"}})", "application/json"),
               409, "AlreadyExists");
  net::Response patched = Call("PATCH", "/api/v1/namespaces/uplink-system/configmaps/x",
                               R"({"data":{"a":null,"c":"d"}})", "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(ToJson(Body(patched)["data"]), R"({"c":"d"})");
  EXPECT_EQ(Body(Call("GET", "/api/v1/configmaps"))["items"].as_array().size(), 1u);
  EXPECT_EQ(Body(Call("GET", "/api/v1/namespaces/default/configmaps"))["items"].as_array().size(), 0u);
  EXPECT_EQ(Call("DELETE", "/api/v1/namespaces/uplink-system/configmaps/x",
                 R"({"propagationPolicy":"Background"})", "application/json")
                .status,
            200);
  EXPECT_EQ(ExpectStatus(Call("GET", "/api/v1/namespaces/uplink-system/configmaps/x"), 404, "NotFound"),
            "configmaps \"x\" not found");
  ExpectStatus(Call("POST", "/api/v1/namespaces/missing/configmaps", R"({"metadata":{"name":"y"}})"),
               404, "NotFound");
}

TEST_F(ApiTest, StrategicMergePatchCordonsAndUncordonsNodes) {
  ASSERT_EQ(Call("PATCH", "/api/v1/nodes/gpu-node-0001", R"({"spec":{"unschedulable":true}})",
                 "application/strategic-merge-patch+json")
                .status,
            200);
  json::object table = Body(Call("GET", "/api/v1/nodes/gpu-node-0001", "", "", kTableAccept));
  EXPECT_EQ(table["rows"].as_array().at(0).at("cells").at(1), "Ready,SchedulingDisabled");
  ASSERT_EQ(Call("PATCH", "/api/v1/nodes/gpu-node-0001", R"({"spec":{"unschedulable":null}})",
                 "application/strategic-merge-patch+json")
                .status,
            200);
  EXPECT_FALSE(Body(Call("GET", "/api/v1/nodes/gpu-node-0001"))["spec"].as_object().contains("unschedulable"));
  ExpectStatus(Call("PATCH", "/api/v1/nodes/gpu-node-0001", R"({"spec":{"$retainKeys":["x"]}})",
                    "application/strategic-merge-patch+json"),
               415, "UnsupportedMediaType");
  ExpectStatus(Call("PATCH", "/api/v1/nodes/gpu-node-0001", R"([{"op":"remove","path":"/spec"}])",
                    "application/json-patch+json"),
               415, "UnsupportedMediaType");
}

TEST_F(ApiTest, GarbageBodiesAreBadRequestsWithoutHarm) {
  for (const std::string& body : std::vector<std::string>{"", "{", "nope", "[1,2]", "{\"a\":1}}", "{\"metadata\":{\"name\":\"x\"}} trailing",
                           std::string(100, '[')}) {
    ExpectStatus(Call("POST", "/api/v1/namespaces/default/configmaps", body, "application/json"), 400,
                 "BadRequest");
    ExpectStatus(Call("PATCH", "/api/v1/nodes/gpu-node-0001", body, "application/merge-patch+json"),
                 400, "BadRequest");
  }
  ExpectStatus(Call("POST", "/api/v1/namespaces/default/configmaps",
                    "{\"metadata\":{\"name\":\"" + std::string(2 << 20, 'a') + "\"}}",
                    "application/json"),
               413, "RequestEntityTooLarge");
  ExpectStatus(Call("POST", "/api/v1/namespaces/default/configmaps", "a: b", "application/yaml"),
               415, "UnsupportedMediaType");
  // Protobuf envelopes (what kubectl create sends) that are truncated or not ConfigMaps.
  for (const std::string& body : std::vector<std::string>{
           "", "k8s", std::string("k8s\0\x0a\xff", 6), std::string("k8s\0\x0a\x05\x0a\x02v1", 9),
           std::string("k8s\0\x0a\x0c\x0a\x02v1\x12\x06Secret", 18)}) {
    ExpectStatus(Call("POST", "/api/v1/namespaces/default/configmaps", body,
                      "application/vnd.kubernetes.protobuf"),
                 400, "BadRequest");
  }
  EXPECT_EQ(Body(Call("GET", "/api/v1/nodes"))["items"].as_array().size(), 4u);
}

TEST_F(ApiTest, UnknownPathsAndVerbsGetNotFoundAndMethodNotAllowed) {
  ExpectStatus(Call("GET", "/api/v1/widgets"), 404, "NotFound");
  ExpectStatus(Call("GET", "/nothing/here"), 404, "NotFound");
  ExpectStatus(Call("GET", "/api/v1/namespaces/default/nodes"), 404, "NotFound");
  ExpectStatus(Call("GET", "/api/v1/configmaps/x"), 404, "NotFound");
  ExpectStatus(Call("PUT", "/api/v1/nodes/gpu-node-0001", "{}", "application/json"), 405,
               "MethodNotAllowed");
  ExpectStatus(Call("DELETE", "/api/v1/namespaces/default"), 405, "MethodNotAllowed");
  ExpectStatus(Call("GET", "/api/v1/nodes?watch=true"), 405, "MethodNotAllowed");
}

TEST_F(ApiTest, NamespacesCanBeCreatedAndCarryTheirNameLabel) {
  ASSERT_EQ(Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"team-a"}})", "application/json")
                .status,
            201);
  json::object ns = Body(Call("GET", "/api/v1/namespaces/team-a"));
  EXPECT_EQ(ns["metadata"].at("labels").at("kubernetes.io/metadata.name"), "team-a");
  EXPECT_EQ(ns["status"].at("phase"), "Active");
  ExpectStatus(Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"Team.A"}})",
                    "application/json"),
               422, "Invalid");
}

TEST_F(ApiTest, AnonymousClientsMayReadVersionAndHealthButNothingElse) {
  auto anonymous = [this](std::string method, std::string target) {
    net::Request request;
    request.method = std::move(method);
    request.target = std::move(target);
    return api_.HandleForTesting(std::move(request));
  };
  EXPECT_EQ(Body(anonymous("GET", "/version"))["gitVersion"], "v1.33.1");
  for (const char* path : {"/healthz", "/readyz", "/livez"}) {
    net::Response health = anonymous("GET", path);
    EXPECT_EQ(health.status, 200) << path;
    EXPECT_EQ(health.body, "ok") << path;
  }
  for (const char* path : {"/api", "/api/v1/nodes", "/metrics", "/apis"}) {
    ExpectStatus(anonymous("GET", path), 401, "Unauthorized");
  }
  ExpectStatus(anonymous("POST", "/api/v1/namespaces"), 401, "Unauthorized");
  // A wrong token is refused even where no token is needed, as the real server does.
  net::Request wrong;
  wrong.target = "/version";
  wrong.headers.Set("Authorization", "Bearer wrong");
  ExpectStatus(api_.HandleForTesting(wrong), 401, "Unauthorized");
}

TEST_F(ApiTest, CreatingAnObjectWithAResourceVersionIsRefusedLikeTheRealServer) {
  net::Response refused = Call(
      "POST", "/api/v1/namespaces/default/configmaps",
      R"({"metadata":{"name":"copied","resourceVersion":"123"},"data":{}})", "application/json");
  EXPECT_EQ(refused.status, 500) << refused.body;
  json::object status = Body(refused);
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["message"], "resourceVersion should not be set on objects to be created");
  EXPECT_FALSE(status.contains("reason")) << refused.body;
  ExpectStatus(Call("GET", "/api/v1/namespaces/default/configmaps/copied"), 404, "NotFound");
  // "0" and values the storage layer cannot parse are ignored there.
  for (const char* version : {"0", "-1"}) {
    EXPECT_EQ(Call("POST", "/api/v1/namespaces/default/configmaps",
                   std::string(R"({"metadata":{"generateName":"cm-","resourceVersion":")") +
                       version + R"("}})",
                   "application/json")
                  .status,
              201)
        << version;
  }
}

TEST_F(ApiTest, InvalidNamesAre422InvalidWithTheFieldAsACause) {
  net::Response refused = Call("POST", "/api/v1/namespaces/default/configmaps",
                               R"({"metadata":{"name":"Foo"}})", "application/json");
  EXPECT_EQ(ExpectStatus(refused, 422, "Invalid"),
            "ConfigMap \"Foo\" is invalid: metadata.name: Invalid value: \"Foo\": a lowercase "
            "RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'example.com', regex "
            "used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  json::object details = Body(refused)["details"].as_object();
  EXPECT_EQ(details["name"], "Foo");
  EXPECT_EQ(details["kind"], "ConfigMap");
  EXPECT_FALSE(details.contains("group"));
  ASSERT_EQ(details["causes"].as_array().size(), 1u);
  const json::object& cause = details["causes"].as_array()[0].as_object();
  EXPECT_EQ(cause.at("reason"), "FieldValueInvalid");
  EXPECT_EQ(cause.at("field"), "metadata.name");
  EXPECT_TRUE(cause.at("message").as_string().starts_with("Invalid value: \"Foo\": a lowercase"));

  // An invalid name is reported before a resourceVersion, as validation runs first.
  ExpectStatus(Call("POST", "/api/v1/namespaces/default/configmaps",
                    R"({"metadata":{"name":"Foo","resourceVersion":"7"}})", "application/json"),
               422, "Invalid");
  net::Response unnamed =
      Call("POST", "/api/v1/namespaces/default/configmaps", R"({"data":{}})", "application/json");
  EXPECT_NE(ExpectStatus(unnamed, 422, "Invalid").find("Required value"), std::string::npos);
  EXPECT_EQ(Body(unnamed)["details"].at("causes").at(0).at("reason"), "FieldValueRequired");
}

TEST_F(ApiTest, MetricsCountRequestsByVerbResourceAndCode) {
  Call("GET", "/api/v1/nodes");
  Call("GET", "/api/v1/nodes/missing");
  std::string metrics = Call("GET", "/metrics").body;
  EXPECT_NE(metrics.find(R"(kubesim_requests_total{verb="list",resource="nodes",code="200"} 1)"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(kubesim_requests_total{verb="get",resource="nodes",code="404"} 1)"),
            std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace uplink::kubesim
