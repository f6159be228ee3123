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
    const json::value* names = resource.as_object().if_contains("shortNames");
    short_names[std::string(resource.at("name").as_string())] =
        (names ? ToJson(*names) : "none") + (resource.at("namespaced").as_bool() ? " ns" : "");
  }
  EXPECT_EQ(short_names["nodes"], R"(["no"])");
  EXPECT_EQ(short_names["namespaces"], R"(["ns"])");
  EXPECT_EQ(short_names["configmaps"], R"(["cm"] ns)");
  EXPECT_EQ(short_names["pods"], R"(["po"] ns)");
  EXPECT_EQ(short_names["secrets"], "none ns");
  EXPECT_EQ(short_names["events"], R"(["ev"] ns)");
  EXPECT_EQ(short_names["services"], R"(["svc"] ns)");
  for (const json::value& resource : core["resources"].as_array()) {
    if (resource.at("name") != "secrets") continue;
    // Like the real server: namespaced, kind Secret, and no short names at all.
    EXPECT_EQ(resource.at("kind"), "Secret");
    EXPECT_TRUE(resource.at("namespaced").as_bool());
    EXPECT_FALSE(resource.as_object().contains("shortNames"));
    EXPECT_EQ(ToJson(resource.at("verbs")), R"(["create","delete","get","list","patch"])");
  }
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
  EXPECT_EQ(ExpectStatus(Call("POST", "/api/v1/namespaces/default/configmaps",
                              "{\"metadata\":{\"name\":\"" + std::string(3 << 20, 'a') + "\"}}",
                              "application/json"),
                         413, "RequestEntityTooLarge"),
            "Request entity too large: limit is 3145728");
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

// What kubectl 1.32.4 sends for `kubectl create secret generic s1 -n default
// --from-file=UPLINK_AGENT_TOKEN=/dev/stdin` with "tok123" on stdin (captured with -v=9).
constexpr char kKubectlSecretBytes[] =
    "k8s\x00"
    "\x0a\x0c\x0a\x02v1\x12\x06Secret"
    "\x12\x3b"
    "\x0a\x19\x0a\x02s1\x12\x00\x1a\x07" "default" "\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00"
    "\x12\x1c\x0a\x12UPLINK_AGENT_TOKEN\x12\x06tok123"
    "\x1a\x00"
    "\x1a\x00\x22\x00";

TEST_F(ApiTest, SecretsAreCreatedReadListedPatchedAndDeleted) {
  const std::string secrets = "/api/v1/namespaces/uplink-system/secrets";
  net::Response created =
      Call("POST", secrets + "?fieldManager=kubectl-create&fieldValidation=Strict",
           R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"agent"},
               "data":{"UPLINK_AGENT_TOKEN":"dG9rMTIz"}})",
           "application/json");
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(Body(created)["type"], "Opaque");
  EXPECT_EQ(ExpectStatus(Call("POST", secrets, R"({"metadata":{"name":"agent"}})", "application/json"),
                         409, "AlreadyExists"),
            "secrets \"agent\" already exists");
  EXPECT_EQ(ExpectStatus(Call("POST", "/api/v1/namespaces/missing/secrets",
                              R"({"metadata":{"name":"agent"}})", "application/json"),
                         404, "NotFound"),
            "namespaces \"missing\" not found");

  json::object secret = Body(Call("GET", secrets + "/agent"));
  EXPECT_EQ(secret["data"].at("UPLINK_AGENT_TOKEN"), "dG9rMTIz");

  json::object table = Body(Call("GET", secrets + "?limit=500", "", "", kTableAccept));
  std::vector<std::string> columns;
  for (const json::value& column : table["columnDefinitions"].as_array()) {
    columns.emplace_back(column.at("name").as_string());
  }
  EXPECT_EQ(columns, (std::vector<std::string>{"Name", "Type", "Data", "Age"}));
  const json::value& row = table["rows"].as_array().at(0);
  EXPECT_EQ(ToJson(row.at("cells")), R"(["agent","Opaque",1,"0s"])");
  // The default row object is metadata only: a table never carries the data.
  EXPECT_EQ(row.at("object").at("kind"), "PartialObjectMetadata");
  EXPECT_EQ(row.at("object").as_object().find("data"), row.at("object").as_object().end());

  net::Response patched = Call("PATCH", secrets + "/agent?fieldManager=kubectl-patch",
                               R"({"data":{"UPLINK_AGENT_TOKEN":"bmV3"}})",
                               "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(Body(Call("GET", secrets + "/agent"))["data"].at("UPLINK_AGENT_TOKEN"), "bmV3");

  EXPECT_EQ(Call("DELETE", secrets + "/agent").status, 200);
  EXPECT_EQ(ExpectStatus(Call("GET", secrets + "/agent"), 404, "NotFound"),
            "secrets \"agent\" not found");
}

TEST_F(ApiTest, TheProtobufSecretKubectlSendsIsCreated) {
  std::string body(kKubectlSecretBytes, sizeof(kKubectlSecretBytes) - 1);
  net::Response created = Call("POST", "/api/v1/namespaces/default/secrets", body,
                               "application/vnd.kubernetes.protobuf");
  ASSERT_EQ(created.status, 201) << created.body;
  json::object secret = Body(created);
  EXPECT_EQ(ToJson(secret["data"]), R"({"UPLINK_AGENT_TOKEN":"dG9rMTIz"})");
  EXPECT_EQ(secret["type"], "Opaque");
  EXPECT_EQ(secret["metadata"].at("namespace"), "default");
  EXPECT_FALSE(secret["metadata"].as_object().contains("generateName"));
  ExpectStatus(Call("POST", "/api/v1/namespaces/default/secrets", body,
                    "application/vnd.kubernetes.protobuf"),
               409, "AlreadyExists");
  ExpectStatus(Call("POST", "/api/v1/namespaces/missing/secrets", body,
                    "application/vnd.kubernetes.protobuf"),
               400, "BadRequest");  // the body names namespace "default"
}

TEST_F(ApiTest, BadSecretsGetTheRealStatusesAndNoResponseQuotesTheirData) {
  // "secret-token" and its base64 must never come back in an error.
  const std::string token = "secret-token";
  const std::string encoded = "c2VjcmV0LXRva2Vu";
  const std::string secrets = "/api/v1/namespaces/default/secrets";
  std::vector<net::Response> responses;
  auto expect = [&](net::Response response, int code, std::string_view reason) {
    std::string message = ExpectStatus(response, code, reason);
    responses.push_back(std::move(response));
    return message;
  };

  net::Response bad_key = Call("POST", secrets,
                               R"({"metadata":{"name":"s"},"data":{"bad key":")" + encoded + R"("}})",
                               "application/json");
  EXPECT_TRUE(expect(bad_key, 422, "Invalid")
                  .starts_with("Secret \"s\" is invalid: data[bad key]: Invalid value: \"bad key\""));
  json::object details = Body(bad_key)["details"].as_object();
  EXPECT_EQ(details["kind"], "Secret");
  EXPECT_EQ(details["causes"].at(0).at("field"), "data[bad key]");

  EXPECT_EQ(expect(Call("POST", secrets,
                        R"({"metadata":{"name":"s"},"data":{"k":")" + encoded + R"(!"}})",
                        "application/json"),
                   400, "BadRequest"),
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input "
            "byte 16");
  EXPECT_EQ(expect(Call("POST", secrets, R"({"metadata":{"name":"s"},"data":{"k":1234}})",
                        "application/json"),
                   400, "BadRequest"),
            "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal number "
            "into Go struct field Secret.data of type []uint8");

  net::Response too_much = Call(
      "POST", secrets,
      R"({"metadata":{"name":"s"},"stringData":{"k":")" + std::string((1 << 20) + 1, 'x') + R"("}})",
      "application/json");
  EXPECT_EQ(expect(too_much, 422, "Invalid"),
            "Secret \"s\" is invalid: data: Too long: may not be more than 1048576 bytes");
  EXPECT_EQ(Body(too_much)["details"].at("causes").at(0).at("reason"), "FieldValueTooLong");
  expect(Call("POST", secrets,
              R"({"metadata":{"name":"s"},"stringData":{"k":")" + std::string(3 << 20, 'x') + R"("}})",
              "application/json"),
         413, "RequestEntityTooLarge");
  std::string truncated(kKubectlSecretBytes, 60);
  expect(Call("POST", secrets, truncated, "application/vnd.kubernetes.protobuf"), 400,
         "BadRequest");

  ASSERT_EQ(Call("POST", secrets, R"({"metadata":{"name":"s"},"stringData":{"k":"v"}})",
                 "application/json")
                .status,
            201);
  net::Response bad_patch = Call("PATCH", secrets + "/s",
                                 R"({"data":{"k":")" + encoded + R"(!"}})",
                                 "application/merge-patch+json");
  EXPECT_EQ(expect(bad_patch, 422, "Invalid"),
            " \"\" is invalid: patch: Invalid value: \"<value omitted>\": illegal base64 data at "
            "input byte 16");
  EXPECT_EQ(ToJson(Body(bad_patch)["details"]),
            R"({"causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \"<value omitted>\": )"
            R"(illegal base64 data at input byte 16","field":"patch"}]})");
  expect(Call("PATCH", secrets + "/s", R"({"data":{"bad/key":")" + encoded + R"("}})",
              "application/strategic-merge-patch+json"),
         422, "Invalid");
  expect(Call("PATCH", secrets + "/s", R"({"stringData":{"k":[")" + token + R"("]}})",
              "application/merge-patch+json"),
         422, "Invalid");

  for (const net::Response& response : responses) {
    EXPECT_EQ(response.body.find(token), std::string::npos) << response.body;
    EXPECT_EQ(response.body.find(encoded), std::string::npos) << response.body;
  }
  EXPECT_EQ(Body(Call("GET", secrets + "/s"))["data"].at("k"), "dg==");
}

TEST_F(ApiTest, NamespaceLabelsChangeByMergeAndStrategicMergePatch) {
  ASSERT_EQ(Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"uplink-test"}})",
                 "application/json")
                .status,
            201);
  // kubectl label sends a merge patch; other clients send strategic merge patches.
  ASSERT_EQ(Call("PATCH", "/api/v1/namespaces/uplink-test?fieldManager=kubectl-label",
                 R"({"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}})",
                 "application/merge-patch+json")
                .status,
            200);
  ASSERT_EQ(Call("PATCH", "/api/v1/namespaces/uplink-test",
                 R"({"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted",
                     "pod-security.kubernetes.io/enforce-version":"latest"}}})",
                 "application/strategic-merge-patch+json")
                .status,
            200);
  json::object ns = Body(Call("GET", "/api/v1/namespaces/uplink-test"));
  EXPECT_EQ(ToJson(ns["metadata"].at("labels")),
            R"({"kubernetes.io/metadata.name":"uplink-test","pod-security.kubernetes.io/enforce":"restricted",)"
            R"("pod-security.kubernetes.io/enforce-version":"latest"})");
  EXPECT_EQ(ns["status"].at("phase"), "Active");
  ASSERT_EQ(Call("PATCH", "/api/v1/namespaces/uplink-test",
                 R"({"metadata":{"labels":{"pod-security.kubernetes.io/enforce-version":null}}})",
                 "application/merge-patch+json")
                .status,
            200);
  EXPECT_FALSE(Body(Call("GET", "/api/v1/namespaces/uplink-test"))["metadata"]
                   .at("labels")
                   .as_object()
                   .contains("pod-security.kubernetes.io/enforce-version"));
  json::object table = Body(Call("GET", "/api/v1/namespaces/uplink-test", "", "", kTableAccept));
  EXPECT_EQ(table["rows"].as_array().at(0).at("cells").at(1), "Active");
}

TEST_F(ApiTest, NamespacesCanBeDeletedExceptTheSystemOnes) {
  ASSERT_EQ(Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"team-a"}})", "application/json")
                .status,
            201);
  ASSERT_EQ(Call("POST", "/api/v1/namespaces/team-a/secrets",
                 R"({"metadata":{"name":"s"},"data":{"k":"dG9r"}})", "application/json")
                .status,
            201);
  net::Response deleted = Call("DELETE", "/api/v1/namespaces/team-a");
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(Body(deleted)["status"].at("phase"), "Terminating");
  ExpectStatus(Call("GET", "/api/v1/namespaces/team-a"), 404, "NotFound");
  ExpectStatus(Call("GET", "/api/v1/namespaces/team-a/secrets/s"), 404, "NotFound");
  EXPECT_EQ(ExpectStatus(Call("DELETE", "/api/v1/namespaces/default"), 403, "Forbidden"),
            "namespaces \"default\" is forbidden: this namespace may not be deleted");
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
