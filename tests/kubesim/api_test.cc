// The API driven through ApiServer::HandleForTesting: no sockets, no TLS.
#include "kubesim/api.h"

#include <gtest/gtest.h>

#include "api_fixture.h"
#include "kubesim/authn.h"
#include "kubesim/cluster.h"

namespace uplink::kubesim {
namespace {

using testing::kTableAccept;
using testing::kToken;

class ApiTest : public testing::ApiFixture {};

TEST_F(ApiTest, RequestsWithoutTheBearerTokenAreUnauthorized) {
  for (const std::string& authorization : std::vector<std::string>{"", "Bearer wrong", "Basic a2V5", "bearer kubesim_test-token",
                                    std::string("Bearer ") + kToken + "x"}) {
    net::Request request;
    request.target = "/api/v1/nodes";
    if (!authorization.empty()) request.headers.Set("Authorization", authorization);
    ExpectStatus(api_->HandleForTesting(request), 401, "Unauthorized");
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
    EXPECT_EQ(ToJson(resource.at("verbs")), R"(["create","delete","get","list","patch","watch"])");
  }
  json::object apps = Body(Call("GET", "/apis/apps/v1"));
  std::vector<std::string> apps_resources;
  for (const json::value& resource : apps["resources"].as_array()) {
    apps_resources.emplace_back(resource.at("name").as_string());
    // `kubectl get all` lists what is in the "all" category.
    EXPECT_EQ(ToJson(resource.at("categories")), R"(["all"])");
  }
  EXPECT_EQ(apps_resources,
            (std::vector<std::string>{"deployments", "replicasets", "statefulsets"}));
}

TEST_F(ApiTest, DiscoveryListsEveryServedGroupAndThePodLogSubresource) {
  std::vector<std::string> groups;
  json::object group_list = Body(Call("GET", "/apis"));
  for (const json::value& group : group_list["groups"].as_array()) {
    groups.emplace_back(group.at("preferredVersion").at("groupVersion").as_string());
  }
  EXPECT_EQ(groups, (std::vector<std::string>{"apps/v1", "coordination.k8s.io/v1",
                                              "networking.k8s.io/v1", "scheduling.k8s.io/v1",
                                              "admissionregistration.k8s.io/v1",
                                              "rbac.authorization.k8s.io/v1",
                                              "authorization.k8s.io/v1",
                                              "metrics.k8s.io/v1beta1"}));
  json::object log;
  json::object core = Body(Call("GET", "/api/v1"));
  for (const json::value& resource : core["resources"].as_array()) {
    if (resource.at("name") == "pods/log") log = resource.as_object();
  }
  EXPECT_EQ(ToJson(log), R"({"name":"pods/log","singularName":"","namespaced":true,"kind":"Pod","verbs":["get"]})");
  json::object metrics = Body(Call("GET", "/apis/metrics.k8s.io/v1beta1"));
  ASSERT_EQ(metrics["resources"].as_array().size(), 2u);
  EXPECT_EQ(metrics["resources"].as_array()[0].at("kind"), "NodeMetrics");
  EXPECT_FALSE(metrics["resources"].as_array()[0].at("namespaced").as_bool());
  EXPECT_EQ(ToJson(metrics["resources"].as_array()[1].at("verbs")), R"(["get","list"])");
  EXPECT_EQ(Body(Call("GET", "/apis/metrics.k8s.io"))["name"], "metrics.k8s.io");
  ExpectStatus(Call("GET", "/apis/widgets.example.com"), 404, "NotFound");
  ExpectStatus(Call("GET", "/apis/apps/v2"), 404, "NotFound");
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
  // Collections are watched; a single object is not (watch its collection by name instead).
  ExpectStatus(Call("GET", "/api/v1/nodes/gpu-node-0001?watch=true"), 405, "MethodNotAllowed");
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
    return api_->HandleForTesting(std::move(request));
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
  ExpectStatus(api_->HandleForTesting(wrong), 401, "Unauthorized");
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

// The API over the simulated GPU cluster (--workloads), as the read-only kubectl verbs use it.
class WorkloadApiTest : public ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    Result<std::vector<json::object>> workloads = WorkloadObjects(clock_.Now());
    ASSERT_TRUE(workloads.ok()) << workloads.status().ToString();
    std::stable_partition(workloads->begin(), workloads->end(), [](const json::object& object) {
      return object.at("kind") == "Namespace";
    });
    for (json::object& object : *workloads) ASSERT_TRUE(store_.Put(object).ok());
  }
};

TEST_F(WorkloadApiTest, PodLogsAreTextWithTheRealErrorsForBadRequests) {
  const std::string pod = "/api/v1/namespaces/inference/pods/vllm-llama3-8b-6d9f7c5b8d-q9w4t/log";
  net::Response log = Call("GET", pod + "?previous=true&tailLines=1");
  ASSERT_EQ(log.status, 200) << log.body;
  EXPECT_EQ(log.headers.Get("Content-Type").value_or(""), "text/plain");
  EXPECT_EQ(log.body, "ERROR 06-01 11:57:19 api_server.py:188] RuntimeError: Engine process failed to start\n");
  EXPECT_EQ(ExpectStatus(Call("GET", pod + "?follow=true"), 400, "BadRequest"),
            "follow is not supported by uplink-kubesim: it serves logs whole and never streams them");
  EXPECT_EQ(ExpectStatus(Call("GET", pod + "?tailLines=x"), 400, "BadRequest"),
            "tailLines: strconv.ParseInt: parsing \"x\": invalid syntax");
  EXPECT_EQ(ExpectStatus(Call("GET", pod + "?tailLines=-3&limitBytes=0"), 422, "Invalid"),
            "PodLogOptions \"vllm-llama3-8b-6d9f7c5b8d-q9w4t\" is invalid: [tailLines: Invalid value: -3: "
            "must be greater than or equal to 0, limitBytes: Invalid value: 0: must be greater than 0]");
  EXPECT_EQ(ExpectStatus(Call("GET", pod + "?container=sidecar"), 400, "BadRequest"),
            "container sidecar is not valid for pod vllm-llama3-8b-6d9f7c5b8d-q9w4t");
  EXPECT_EQ(ExpectStatus(Call("GET", "/api/v1/namespaces/inference/pods/nope/log"), 404, "NotFound"),
            "pods \"nope\" not found");
  // pods/log is read with GET; pods/exec takes only WebSocket upgrades; nothing else is served.
  ExpectStatus(Call("GET", "/api/v1/namespaces/inference/pods/vllm-llama3-8b-6d9f7c5b8d-q9w4t/attach"),
               404, "NotFound");
  EXPECT_EQ(ExpectStatus(Call("GET", "/api/v1/namespaces/inference/pods/vllm-llama3-8b-6d9f7c5b8d-q9w4t/exec"),
                         400, "BadRequest"),
            "you must specify at least one command for the container");
  ExpectStatus(Call("GET", "/api/v1/namespaces/inference/configmaps/x/log"), 404, "NotFound");
  ExpectStatus(Call("POST", pod), 405, "MethodNotAllowed");
}

TEST_F(WorkloadApiTest, MetricsApiListsGetsAndFiltersLikeMetricsServer) {
  json::object nodes = Body(Call("GET", "/apis/metrics.k8s.io/v1beta1/nodes"));
  EXPECT_EQ(nodes["kind"], "NodeMetricsList");
  EXPECT_EQ(nodes["items"].as_array().size(), 4u);
  json::object gpu = Body(Call("GET", "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=nvidia.com%2Fgpu.present%3Dtrue"));
  EXPECT_EQ(gpu["items"].as_array().size(), 3u);
  json::object pods = Body(Call("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/ml-training/pods"));
  EXPECT_EQ(pods["kind"], "PodMetricsList");
  EXPECT_EQ(pods["items"].as_array().size(), 2u);
  json::object one = Body(Call("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/ml-training/pods/llama3-finetune-0"));
  EXPECT_EQ(one["containers"].as_array().at(0).at("name"), "trainer");
  EXPECT_EQ(ExpectStatus(Call("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/ml-training/pods/hparam-sweep-trial-17"),
                         404, "NotFound"),
            "podmetrics.metrics.k8s.io \"ml-training/hparam-sweep-trial-17\" not found");
  EXPECT_EQ(ExpectStatus(Call("GET", "/apis/metrics.k8s.io/v1beta1/nodes/nope"), 404, "NotFound"),
            "nodemetrics.metrics.k8s.io \"nope\" not found");
  json::object named = Body(Call("GET", "/apis/metrics.k8s.io/v1beta1/pods?fieldSelector=metadata.name%3Dllama3-finetune-1"));
  EXPECT_EQ(named["items"].as_array().size(), 1u);
  ExpectStatus(Call("GET", "/apis/metrics.k8s.io/v1beta1/pods?fieldSelector=spec.nodeName%3Dx"), 400,
               "BadRequest");
  ExpectStatus(Call("DELETE", "/apis/metrics.k8s.io/v1beta1/nodes/gpu-node-0001"), 405,
               "MethodNotAllowed");
  ExpectStatus(Call("POST", "/apis/metrics.k8s.io/v1beta1/nodes", "{}", "application/json"), 405,
               "MethodNotAllowed");
}

TEST_F(WorkloadApiTest, TablesOfPodsAreWhatKubectlGetPodsPrints) {
  json::object table =
      Body(Call("GET", "/api/v1/namespaces/inference/pods?limit=500", "", "", kTableAccept));
  std::vector<std::string> columns;
  for (const json::value& column : table["columnDefinitions"].as_array()) {
    if (column.at("priority").as_int64() == 0) columns.emplace_back(column.at("name").as_string());
  }
  EXPECT_EQ(columns, (std::vector<std::string>{"Name", "Ready", "Status", "Restarts", "Age"}));
  EXPECT_EQ(table["rows"].as_array().size(), 2u);
}

TEST_F(ApiTest, OpenApiV3IsIndexedByHashAndCachedWhenTheHashMatches) {
  json::object index = Body(Call("GET", "/openapi/v3"));
  std::string url(index["paths"].at("apis/apps/v1").at("serverRelativeURL").as_string());
  ASSERT_TRUE(url.starts_with("/openapi/v3/apis/apps/v1?hash=")) << url;
  net::Response document = Call("GET", url);
  ASSERT_EQ(document.status, 200);
  EXPECT_EQ(document.headers.Get("Cache-Control").value_or(""), "public, immutable");
  EXPECT_EQ(Body(document)["openapi"], "3.0.0");
  EXPECT_TRUE(Body(document)["components"].at("schemas").as_object().contains(
      "io.k8s.api.apps.v1.DeploymentSpec"));
  EXPECT_EQ(Call("GET", "/openapi/v3/apis/apps/v1").headers.Get("Cache-Control").value_or(""),
            "no-cache, private");
  EXPECT_EQ(Call("GET", "/openapi/v3/api/v1").status, 200);
  ExpectStatus(Call("GET", "/openapi/v3/apis/widgets.example.com/v1"), 404, "NotFound");
  net::Response v2 = Call("GET", "/openapi/v2");
  EXPECT_EQ(v2.status, 200);
  EXPECT_EQ(v2.body, "");
}

// --authorization-mode=RBAC with the token file's identities.
class RbacApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (json::object& ns : DefaultNamespaces()) ASSERT_TRUE(store_.Put(ns).ok());
    Result<std::vector<json::object>> bootstrap = BootstrapRbacObjects();
    ASSERT_TRUE(bootstrap.ok());
    for (json::object& object : *bootstrap) ASSERT_TRUE(store_.Put(object).ok());
    Result<std::vector<json::object>> policy = ParseObjects(R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: read-pods}
rules: [{apiGroups: [""], resources: [pods, pods/log], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: read-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: read-pods}
subjects: [{kind: ServiceAccount, name: agent, namespace: uplink-system}]
)");
    ASSERT_TRUE(policy.ok());
    for (json::object& object : *policy) ASSERT_TRUE(store_.Put(object).ok());
  }

  net::Response Call(std::string token, std::string method, std::string target,
                     std::string body = "", std::vector<std::pair<std::string, std::string>> headers = {}) {
    net::Request request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.body = std::move(body);
    request.headers.Set("Authorization", "Bearer " + token);
    if (!request.body.empty()) request.headers.Set("Content-Type", "application/json");
    for (const auto& [name, value] : headers) request.headers.Add(name, value);
    return api_.HandleForTesting(std::move(request));
  }

  static ApiOptions Options() {
    ApiOptions options{Secret(kToken), "v1.32.4"};
    options.users = ParseTokenAuthFile(
                        "agent-token,system:serviceaccount:uplink-system:agent,1\n"
                        "jane-token,jane,2,\"dev\"\n")
                        .value();
    options.rbac = true;
    return options;
  }

  FakeClock clock_;
  ObjectStore store_{clock_};
  ApiServer api_{Options(), store_, clock_};
};

TEST_F(RbacApiTest, ServiceAccountsGetWhatTheirRolesAllowAndTheRealForbiddenOtherwise) {
  EXPECT_EQ(Call("agent-token", "GET", "/api/v1/pods").status, 200);
  EXPECT_EQ(Call("agent-token", "GET", "/api").status, 200);
  EXPECT_EQ(Call("agent-token", "GET", "/openapi/v3").status, 200);
  net::Response secrets = Call("agent-token", "GET", "/api/v1/namespaces/default/secrets");
  ASSERT_EQ(secrets.status, 403);
  EXPECT_EQ(secrets.body,
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
            R"("message":"secrets is forbidden: User \"system:serviceaccount:uplink-system:agent\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\"",)"
            R"("reason":"Forbidden","code":403,"details":{"kind":"secrets"}})");
  EXPECT_EQ(Call("agent-token", "DELETE", "/api/v1/namespaces/default/pods/x").status, 403);
  EXPECT_EQ(Call("agent-token", "POST", "/api/v1/namespaces", R"({"metadata":{"name":"x"}})").status,
            403);
  EXPECT_EQ(Call("agent-token", "GET", "/metrics").status, 403);
  // The admin token is system:masters and skips RBAC; an unknown token is not anyone.
  EXPECT_EQ(Call(kToken, "GET", "/api/v1/namespaces/default/secrets").status, 200);
  EXPECT_EQ(Call("nobody", "GET", "/api/v1/pods").status, 401);
  EXPECT_EQ(Call("jane-token", "GET", "/api/v1/pods").status, 403);
  EXPECT_EQ(Call("jane-token", "GET", "/version").status, 200);
  // Health stays public.
  net::Request anonymous;
  anonymous.target = "/readyz";
  EXPECT_EQ(api_.HandleForTesting(anonymous).status, 200);
}

TEST_F(RbacApiTest, ImpersonationNeedsTheImpersonateVerb) {
  net::Response as_agent = Call(kToken, "GET", "/api/v1/namespaces/default/secrets", "",
                                {{"Impersonate-User", "system:serviceaccount:uplink-system:agent"}});
  ASSERT_EQ(as_agent.status, 403) << as_agent.body;
  EXPECT_NE(as_agent.body.find("User \\\"system:serviceaccount:uplink-system:agent\\\" cannot list"),
            std::string::npos)
      << as_agent.body;
  EXPECT_EQ(Call(kToken, "GET", "/api/v1/pods", "",
                 {{"Impersonate-User", "system:serviceaccount:uplink-system:agent"}})
                .status,
            200);
  // Impersonating system:masters is itself an impersonation that needs permission.
  net::Response escalate = Call("agent-token", "GET", "/api/v1/namespaces/default/secrets", "",
                                {{"Impersonate-User", "admin"}, {"Impersonate-Group", "system:masters"}});
  ASSERT_EQ(escalate.status, 403);
  EXPECT_NE(escalate.body.find("users \\\"admin\\\" is forbidden: User \\\"system:serviceaccount:uplink-system:agent\\\" "
                               "cannot impersonate resource \\\"users\\\" in API group \\\"\\\" at the cluster scope"),
            std::string::npos)
      << escalate.body;
  EXPECT_EQ(Call("agent-token", "GET", "/api/v1/pods", "",
                 {{"Impersonate-User", "system:serviceaccount:kube-system:admin"}})
                .status,
            403);
  EXPECT_EQ(Call(kToken, "GET", "/api/v1/pods", "", {{"Impersonate-Group", "system:masters"}}).status,
            400);
  EXPECT_EQ(Call(kToken, "GET", "/api/v1/pods", "", {{"Impersonate-Uid", "1"}, {"Impersonate-User", "a"}})
                .status,
            400);
  EXPECT_EQ(Call(kToken, "GET", "/api/v1/pods", "",
                 {{"Impersonate-User", "system:serviceaccount:broken"}})
                .status,
            400);
}

TEST_F(RbacApiTest, SelfReviewsAnswerForTheRequester) {
  auto allowed = [&](const std::string& token, const std::string& attributes) {
    net::Response response =
        Call(token, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
             R"({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":)" +
                 attributes + "}");
    EXPECT_EQ(response.status, 201) << response.body;
    Result<json::value> body = ParseJson(response.body);
    return body.ok() && body->at("status").at("allowed").as_bool();
  };
  EXPECT_TRUE(allowed("agent-token", R"({"resourceAttributes":{"verb":"list","resource":"pods"}})"));
  EXPECT_FALSE(allowed("agent-token", R"({"resourceAttributes":{"verb":"get","resource":"secrets","namespace":"default"}})"));
  EXPECT_TRUE(allowed("agent-token", R"({"resourceAttributes":{"verb":"get","resource":"pods","subresource":"log","namespace":"x"}})"));
  EXPECT_TRUE(allowed("agent-token", R"({"nonResourceAttributes":{"verb":"get","path":"/version"}})"));
  EXPECT_FALSE(allowed("agent-token", R"({"nonResourceAttributes":{"verb":"get","path":"/metrics"}})"));
  EXPECT_TRUE(allowed(kToken, R"({"resourceAttributes":{"verb":"delete","resource":"nodes"}})"));
  net::Response neither = Call("agent-token", "POST",
                               "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", R"({"spec":{}})");
  EXPECT_EQ(neither.status, 422) << neither.body;
  net::Response rules = Call("agent-token", "POST",
                             "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                             R"({"spec":{"namespace":"default"}})");
  ASSERT_EQ(rules.status, 201) << rules.body;
  EXPECT_NE(rules.body.find(R"({"verbs":["get","list"],"apiGroups":[""],"resources":["pods","pods/log"]})"),
            std::string::npos)
      << rules.body;
  EXPECT_EQ(Call(kToken, "GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").status,
            405);
}

}  // namespace
}  // namespace uplink::kubesim
