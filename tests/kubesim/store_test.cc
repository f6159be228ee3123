#include "kubesim/store.h"

#include <gtest/gtest.h>

#include "common/crypto.h"
#include "common/files.h"
#include "kubesim/cluster.h"

namespace uplink::kubesim {
namespace {

const std::string kFixtures = std::string(UPLINK_FIXTURES_DIR) + "/kubernetes/";

const ResourceType& Type(std::string_view plural) {
  const ResourceType* type = FindResource("", "v1", plural);
  EXPECT_NE(type, nullptr) << plural;
  return *type;
}

std::string Text(const json::value& value, std::initializer_list<std::string_view> path) {
  const json::value* current = &value;
  for (std::string_view key : path) {
    if (!current->is_object() || !current->get_object().contains(key)) return "<missing>";
    current = &current->get_object().at(key);
  }
  return current->is_string() ? std::string(current->get_string()) : ToJson(*current);
}

std::vector<json::object> LoadFixture(const std::string& name) {
  Result<std::string> text = ReadFileBounded(kFixtures + name, 8 << 20);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  Result<std::vector<json::object>> objects = ParseObjects(text.value_or(""));
  EXPECT_TRUE(objects.ok()) << objects.status().ToString();
  return objects.ok() ? *objects : std::vector<json::object>();
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (json::object& ns : DefaultNamespaces()) ASSERT_TRUE(store_.Put(ns).ok());
  }
  json::object ConfigMap(std::string name) {
    return json::object{{"metadata", json::object{{"name", name}}},
                        {"data", json::object{{"a", "1"}, {"b", "2"}}}};
  }
  FakeClock clock_;
  ObjectStore store_{clock_};
};

TEST_F(StoreTest, CreateFillsIdentityAndBumpsTheGlobalResourceVersion) {
  std::int64_t before = store_.resource_version();
  Result<json::object> created = store_.Create(Type("configmaps"), "uplink-system", ConfigMap("x"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(Text(*created, {"kind"}), "ConfigMap");
  EXPECT_EQ(Text(*created, {"apiVersion"}), "v1");
  EXPECT_EQ(Text(*created, {"metadata", "namespace"}), "uplink-system");
  EXPECT_EQ(Text(*created, {"metadata", "uid"}).size(), 36u);
  EXPECT_EQ(Text(*created, {"metadata", "uid"})[14], '4');
  EXPECT_EQ(Text(*created, {"metadata", "creationTimestamp"}), FormatRfc3339(clock_.Now()));
  EXPECT_EQ(Text(*created, {"metadata", "resourceVersion"}), std::to_string(before + 1));
  EXPECT_EQ(store_.resource_version(), before + 1);
}

TEST_F(StoreTest, CreatingTwiceIsAlreadyExists) {
  ASSERT_TRUE(store_.Create(Type("configmaps"), "default", ConfigMap("x")).ok());
  Result<json::object> again = store_.Create(Type("configmaps"), "default", ConfigMap("x"));
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.status().message(), "configmaps \"x\" already exists");
}

TEST_F(StoreTest, CreateRejectsMissingNamespacesBadNamesAndMismatchedKinds) {
  EXPECT_EQ(store_.Create(Type("configmaps"), "nope", ConfigMap("x")).status().message(),
            "namespaces \"nope\" not found");
  EXPECT_EQ(store_.Create(Type("configmaps"), "default", ConfigMap("Bad_Name")).status().code(),
            StatusCode::kInvalidArgument);
  json::object wrong_kind = ConfigMap("y");
  wrong_kind["kind"] = "Secret";
  EXPECT_EQ(store_.Create(Type("configmaps"), "default", wrong_kind).status().code(),
            StatusCode::kInvalidArgument);
  json::object other_namespace = ConfigMap("z");
  other_namespace["metadata"].as_object()["namespace"] = "kube-system";
  EXPECT_EQ(store_.Create(Type("configmaps"), "default", other_namespace).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, GenerateNameGetsARandomSuffix) {
  json::object object{{"metadata", json::object{{"generateName", "job-"}}}};
  Result<json::object> created = store_.Create(Type("configmaps"), "default", object);
  ASSERT_TRUE(created.ok());
  std::string name = Text(*created, {"metadata", "name"});
  EXPECT_TRUE(name.starts_with("job-")) << name;
  EXPECT_EQ(name.size(), 9u);
}

TEST_F(StoreTest, MergePatchFollowsRfc7386AndKeepsIdentity) {
  Result<json::object> created = store_.Create(Type("configmaps"), "default", ConfigMap("x"));
  ASSERT_TRUE(created.ok());
  Result<json::value> patch = ParseJson(
      R"({"data":{"a":null,"c":"3"},"metadata":{"labels":{"k":"v"},"uid":"forged"}})");
  ASSERT_TRUE(patch.ok());
  Result<json::object> patched = store_.MergePatch(Type("configmaps"), "default", "x", *patch);
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ(ToJson((*patched)["data"]), R"({"b":"2","c":"3"})");
  EXPECT_EQ(Text(*patched, {"metadata", "labels", "k"}), "v");
  EXPECT_EQ(Text(*patched, {"metadata", "uid"}), Text(*created, {"metadata", "uid"}));
  EXPECT_NE(Text(*patched, {"metadata", "resourceVersion"}),
            Text(*created, {"metadata", "resourceVersion"}));
}

TEST_F(StoreTest, MergePatchWithAStaleResourceVersionIsAConflict) {
  ASSERT_TRUE(store_.Create(Type("configmaps"), "default", ConfigMap("x")).ok());
  Result<json::value> patch = ParseJson(R"({"metadata":{"resourceVersion":"1"},"data":{}})");
  EXPECT_EQ(store_.MergePatch(Type("configmaps"), "default", "x", *patch).status().code(),
            StatusCode::kConflict);
  Result<json::value> rename = ParseJson(R"({"metadata":{"name":"y"}})");
  EXPECT_EQ(store_.MergePatch(Type("configmaps"), "default", "x", *rename).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, DeleteRemovesTheObjectAndMissingOnesAreNotFound) {
  ASSERT_TRUE(store_.Create(Type("configmaps"), "default", ConfigMap("x")).ok());
  EXPECT_TRUE(store_.Delete(Type("configmaps"), "default", "x").ok());
  EXPECT_EQ(store_.Get(Type("configmaps"), "default", "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_.Delete(Type("configmaps"), "default", "x").status().message(),
            "configmaps \"x\" not found");
}

TEST_F(StoreTest, ListsFilterByNamespaceLabelsAndFields) {
  ASSERT_TRUE(store_.Create(Type("configmaps"), "default", ConfigMap("a")).ok());
  ASSERT_TRUE(store_.Create(Type("configmaps"), "kube-system", ConfigMap("b")).ok());
  ListOptions in_default;
  in_default.namespace_name = "default";
  EXPECT_EQ(store_.List(Type("configmaps"), in_default)->items.size(), 1u);
  EXPECT_EQ(store_.List(Type("configmaps"), ListOptions{})->items.size(), 2u);
  ListOptions by_field;
  by_field.field_selector = "metadata.namespace!=default";
  ASSERT_EQ(store_.List(Type("configmaps"), by_field)->items.size(), 1u);
  by_field.field_selector = "spec.bogus=1";
  EXPECT_EQ(store_.List(Type("configmaps"), by_field).status().message(),
            "field label not supported: spec.bogus");
  ListOptions by_label;
  by_label.label_selector = "kubernetes.io/metadata.name in (default,kube-public)";
  EXPECT_EQ(store_.List(Type("namespaces"), by_label)->items.size(), 2u);
  by_label.label_selector = "a in (";
  EXPECT_EQ(store_.List(Type("namespaces"), by_label).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, FieldSelectorsFollowTheRealGrammarWithEscapes) {
  ASSERT_TRUE(store_.Create(Type("configmaps"), "default", ConfigMap("plain")).ok());
  auto names = [&](std::string_view plural, std::string selector) {
    ListOptions options;
    options.field_selector = std::move(selector);
    Result<ListPage> page = store_.List(Type(plural), options);
    if (!page.ok()) return "error: " + page.status().message();
    std::string joined;
    for (const json::object& item : page->items) {
      joined += (joined.empty() ? "" : ",") + Text(item, {"metadata", "name"});
    }
    return joined;
  };
  EXPECT_EQ(names("configmaps", "metadata.name==plain"), "plain");
  EXPECT_EQ(names("configmaps", "metadata.name=plain,"), "plain");
  EXPECT_EQ(names("configmaps", ",,metadata.name=plain"), "plain");
  EXPECT_EQ(names("configmaps", "metadata.name=plain,metadata.namespace=kube-system"), "");
  EXPECT_EQ(names("namespaces", "metadata.name!=default,metadata.name!=kube-system,"
                                "metadata.name!=kube-public,metadata.name!=kube-node-lease"),
            "uplink-system");
  EXPECT_EQ(names("namespaces", "status.phase=Active,metadata.name=default"), "default");
  // Escaped commas and equals signs belong to the value.
  EXPECT_EQ(names("configmaps", "metadata.name=a\\,b"), "");
  EXPECT_EQ(names("configmaps", "metadata.name=plain\\=x"), "");
  const std::pair<std::string, std::string> bad[] = {
      {"metadata.name", "error: invalid selector: 'metadata.name'; can't understand 'metadata.name'"},
      {"metadata.name=a=b", "error: invalid field selector: unescaped character in value: ="},
      {"metadata.name=a\\x", "error: invalid field selector: invalid escape sequence: \\x"},
      {std::string("metadata.name=a\\\0", 17),
       "error: invalid field selector: invalid escape sequence: \\\"\\x00\""},
      {"metadata.name=a\\", "error: invalid field selector: invalid escape sequence: \\"},
      {"=a", "error: field label not supported: "},
      {"spec.nodeName=x", "error: field label not supported: spec.nodeName"},
      {"metadata.name<a", "error: invalid selector: 'metadata.name<a'; can't understand 'metadata.name<a'"},
      {std::string(70000, 'a'), "error: field selector is longer than 65536 bytes"},
  };
  for (const auto& [selector, message] : bad) {
    EXPECT_EQ(names("configmaps", selector), message) << selector.substr(0, 40);
  }
  // A NUL or control byte is just part of a value that matches nothing.
  EXPECT_EQ(names("configmaps", std::string("metadata.name=pl\0ain", 21)), "");
}

TEST_F(StoreTest, EventsSelectOnTheirInvolvedObjectAsDescribeAsks) {
  Result<std::vector<json::object>> events = ParseObjects(R"(
apiVersion: v1
kind: Event
metadata: {name: a.1, namespace: default}
involvedObject: {kind: Pod, name: a, namespace: default, uid: u-1}
source: {component: kubelet, host: gpu-node-0001}
type: Warning
reason: BackOff
---
apiVersion: v1
kind: Event
metadata: {name: n.1, namespace: default}
involvedObject: {kind: Node, name: gpu-node-0001, uid: gpu-node-0001}
type: Normal
reason: Starting
)");
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  for (json::object& event : *events) ASSERT_TRUE(store_.Put(event).ok());
  auto count = [&](std::string selector) {
    ListOptions options;
    options.field_selector = std::move(selector);
    Result<ListPage> page = store_.List(Type("events"), options);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    return page.ok() ? page->items.size() : 0;
  };
  EXPECT_EQ(count("involvedObject.name=a,involvedObject.namespace=default,involvedObject.kind=Pod,"
                  "involvedObject.uid=u-1"),
            1u);
  EXPECT_EQ(count("involvedObject.name=gpu-node-0001,involvedObject.namespace=,"
                  "involvedObject.kind=Node,involvedObject.uid=gpu-node-0001"),
            1u);
  EXPECT_EQ(count("type=Warning"), 1u);
  EXPECT_EQ(count("type!=Warning"), 1u);
  EXPECT_EQ(count("source=kubelet"), 1u);
  EXPECT_EQ(count("reason=BackOff,involvedObject.uid=other"), 0u);
}

TEST_F(StoreTest, NamedGroupTypesAreNamedWithTheirGroupInErrors) {
  const ResourceType* deployments = FindResource("apps", "v1", "deployments");
  EXPECT_EQ(store_.Get(*deployments, "default", "web").status().message(),
            "deployments.apps \"web\" not found");
  const ResourceType* roles = FindResource("rbac.authorization.k8s.io", "v1", "clusterroles");
  json::object role{{"metadata", json::object{{"name", "system:reader"}}},
                    {"rules", json::array{json::object{{"apiGroups", json::array{""}},
                                                       {"resources", json::array{"pods"}},
                                                       {"verbs", json::array{"get"}}}}}};
  // RBAC names are path segments, so the bootstrap roles' colons are fine.
  ASSERT_TRUE(store_.Create(*roles, "", role).ok());
  EXPECT_EQ(store_.Create(*roles, "", role).status().message(),
            "clusterroles.rbac.authorization.k8s.io \"system:reader\" already exists");
  // Metrics types have the same plural as core types and never collide with them.
  EXPECT_EQ(store_.Get(Type("nodes"), "", "system:reader").status().code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, RbacObjectsAreValidatedOnCreatePatchAndLoad) {
  const ResourceType* bindings = FindResource("rbac.authorization.k8s.io", "v1", "rolebindings");
  json::object binding{
      {"metadata", json::object{{"name", "b"}}},
      {"roleRef", json::object{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "r"}}},
      {"subjects", json::array{json::object{{"kind", "User"}, {"name", "jane"}}}}};
  InvalidObject invalid;
  Result<json::object> created = store_.Create(*bindings, "default", binding, &invalid);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(Text(*created, {"subjects"}),
            R"([{"kind":"User","name":"jane","apiGroup":"rbac.authorization.k8s.io"}])");
  Result<json::value> patch = ParseJson(R"({"roleRef":{"kind":"ClusterRole"}})");
  Result<json::object> patched = store_.MergePatch(*bindings, "default", "b", *patch, &invalid);
  ASSERT_FALSE(patched.ok());
  EXPECT_EQ(invalid.causes.at(0).field, "roleRef");
  EXPECT_EQ(patched.status().message(),
            "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: roleRef: Invalid value: "
            "rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"r\"}: "
            "cannot change roleRef");
  json::object no_ref{{"metadata", json::object{{"name", "c"}}}};
  EXPECT_FALSE(store_.Create(*bindings, "default", no_ref).ok());
  json::object loaded{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                      {"kind", "ClusterRole"},
                      {"metadata", json::object{{"name", "bad"}}},
                      {"rules", json::array{json::object{{"resources", json::array{"pods"}}}}}};
  EXPECT_EQ(store_.Put(loaded).status().message(),
            "ClusterRole.rbac.authorization.k8s.io \"bad\" is invalid: [rules[0].verbs: Required "
            "value: verbs must contain at least one value, rules[0].apiGroups: Required value: "
            "resource rules must supply at least one api group]");
}

TEST_F(StoreTest, ContainerLogsGoToTheLogStore) {
  Result<std::vector<json::object>> logs = ParseObjects(
      "apiVersion: kubesim.uplink.dev/v1\nkind: ContainerLog\nmetadata: {namespace: default, "
      "name: p}\ncontainer: c\ncontainerID: containerd://abc\nlog: |\n  2026-01-01T00:00:00Z hi\n");
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  ASSERT_TRUE(store_.Put(logs->at(0)).ok());
  ASSERT_EQ(store_.logs().Lines("containerd://abc").size(), 1u);
  EXPECT_EQ(store_.logs().Lines("containerd://abc")[0].text, "hi");
  json::object broken = logs->at(0);
  broken.erase("containerID");
  EXPECT_FALSE(store_.Put(broken).ok());
}

json::object SecretObject(std::string_view text) {
  Result<json::value> parsed = ParseJson(text);
  EXPECT_TRUE(parsed.ok() && parsed->is_object()) << text;
  return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object();
}

TEST_F(StoreTest, SecretsAreStoredOpaqueWithStringDataMergedIntoData) {
  Result<json::object> created = store_.Create(
      Type("secrets"), "uplink-system",
      SecretObject(R"({"metadata":{"name":"agent"},"stringData":{"UPLINK_AGENT_TOKEN":"tok"}})"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(Text(*created, {"kind"}), "Secret");
  EXPECT_EQ(Text(*created, {"type"}), "Opaque");
  EXPECT_EQ(Text(*created, {"data", "UPLINK_AGENT_TOKEN"}), Base64Encode("tok"));
  EXPECT_EQ(Text(*created, {"stringData"}), "<missing>");
  Result<json::object> read = store_.Get(Type("secrets"), "uplink-system", "agent");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(ToJson(*read), ToJson(*created));
  ListOptions opaque;
  opaque.field_selector = "type=Opaque";
  EXPECT_EQ(store_.List(Type("secrets"), opaque)->items.size(), 1u);
  opaque.field_selector = "type=kubernetes.io/tls";
  EXPECT_EQ(store_.List(Type("secrets"), opaque)->items.size(), 0u);
}

TEST_F(StoreTest, SecretsAlreadyExistingOrInMissingNamespacesAreRefused) {
  json::object secret = SecretObject(R"({"metadata":{"name":"agent"},"data":{"k":"dG9r"}})");
  ASSERT_TRUE(store_.Create(Type("secrets"), "default", secret).ok());
  Result<json::object> again = store_.Create(Type("secrets"), "default", secret);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.status().message(), "secrets \"agent\" already exists");
  Result<json::object> nowhere = store_.Create(Type("secrets"), "nope", secret);
  EXPECT_EQ(nowhere.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(nowhere.status().message(), "namespaces \"nope\" not found");
}

TEST_F(StoreTest, InvalidSecretsNameTheKeyAndNeverTheValue) {
  InvalidObject invalid;
  Result<json::object> refused = store_.Create(
      Type("secrets"), "default",
      SecretObject(R"({"metadata":{"name":"Agent"},"data":{"bad key":"c2VjcmV0LXRva2Vu"}})"),
      &invalid);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid.kind, "Secret");
  ASSERT_EQ(invalid.causes.size(), 2u);
  EXPECT_EQ(invalid.causes[0].field, "metadata.name");
  EXPECT_EQ(invalid.causes[1].field, "data[bad key]");
  EXPECT_TRUE(refused.status().message().starts_with(
      "Secret \"Agent\" is invalid: [metadata.name: Invalid value: \"Agent\": "))
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("c2VjcmV0"), std::string::npos);

  // Undecodable data is a decode error (400), not a validation one, and quotes nothing.
  InvalidObject not_decoded;
  Result<json::object> garbled = store_.Create(
      Type("secrets"), "default",
      SecretObject(R"({"metadata":{"name":"agent"},"data":{"k":"c2VjcmV0LXRva2Vu!"}})"),
      &not_decoded);
  EXPECT_EQ(garbled.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(garbled.status().message(),
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input "
            "byte 16");
  EXPECT_TRUE(not_decoded.causes.empty());

  json::object huge{{"metadata", json::object{{"name", "huge"}}},
                    {"stringData", json::object{{"k", std::string((1 << 20) + 1, 'x')}}}};
  EXPECT_EQ(store_.Create(Type("secrets"), "default", huge, &invalid).status().message(),
            "Secret \"huge\" is invalid: data: Too long: may not be more than 1048576 bytes");
  EXPECT_EQ(store_.Get(Type("secrets"), "default", "huge").status().code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, MergePatchReplacesASecretsTokenAndRefusesBadPatchesWithoutQuotingThem) {
  ASSERT_TRUE(store_.Create(Type("secrets"), "default",
                            SecretObject(R"({"metadata":{"name":"agent"},"data":{"T":"b2xk"}})"))
                  .ok());
  Result<json::value> patch = ParseJson(R"({"data":{"T":"bmV3"}})");
  Result<json::object> patched = store_.MergePatch(Type("secrets"), "default", "agent", *patch);
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ(Text(*patched, {"data", "T"}), "bmV3");
  EXPECT_EQ(Text(*patched, {"type"}), "Opaque");

  InvalidObject invalid;
  Result<json::value> garbled = ParseJson(R"({"data":{"T":"c2VjcmV0LXRva2Vu!"}})");
  Result<json::object> refused =
      store_.MergePatch(Type("secrets"), "default", "agent", *garbled, &invalid);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(invalid.causes.size(), 1u);
  EXPECT_EQ(invalid.causes[0].field, "patch");
  EXPECT_EQ(invalid.causes[0].message,
            "Invalid value: \"<value omitted>\": illegal base64 data at input byte 16");
  EXPECT_EQ(invalid.Message(),
            " \"\" is invalid: patch: Invalid value: \"<value omitted>\": illegal base64 data at "
            "input byte 16");
  EXPECT_EQ(Text(*store_.Get(Type("secrets"), "default", "agent"), {"data", "T"}), "bmV3");

  Result<json::value> bad_key = ParseJson(R"({"data":{"a/b":"bmV3"}})");
  invalid = InvalidObject();
  EXPECT_FALSE(store_.MergePatch(Type("secrets"), "default", "agent", *bad_key, &invalid).ok());
  ASSERT_EQ(invalid.causes.size(), 1u);
  EXPECT_EQ(invalid.causes[0].field, "data[a/b]");
}

TEST_F(StoreTest, ImmutableSecretsRefuseNewData) {
  ASSERT_TRUE(store_.Create(Type("secrets"), "default",
                            SecretObject(R"({"metadata":{"name":"frozen"},"immutable":true,
                                             "data":{"T":"b2xk"}})"))
                  .ok());
  InvalidObject invalid;
  Result<json::value> patch = ParseJson(R"({"data":{"T":"bmV3"}})");
  EXPECT_FALSE(store_.MergePatch(Type("secrets"), "default", "frozen", *patch, &invalid).ok());
  ASSERT_EQ(invalid.causes.size(), 1u);
  EXPECT_EQ(invalid.causes[0].field, "data");
  EXPECT_EQ(invalid.causes[0].reason, "FieldValueForbidden");
  Result<json::value> labels = ParseJson(R"({"metadata":{"labels":{"k":"v"}}})");
  EXPECT_TRUE(store_.MergePatch(Type("secrets"), "default", "frozen", *labels).ok());
}

TEST_F(StoreTest, SecretsLoadedFromObjectsAreValidatedToo) {
  json::object secret = SecretObject(
      R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"default"},
          "data":{"k":"not base64!"}})");
  Result<json::object> stored = store_.Put(secret);
  EXPECT_EQ(stored.status().message(),
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input "
            "byte 3");
  secret["data"] = json::object{{"k k", "dG9r"}};
  EXPECT_TRUE(store_.Put(secret).status().message().starts_with(
      "Secret \"s\" is invalid: data[k k]: Invalid value: \"k k\""));
  secret["data"] = json::object{{"k", "dG9r"}};
  ASSERT_TRUE(store_.Put(secret).ok());
  EXPECT_EQ(Text(*store_.Get(Type("secrets"), "default", "s"), {"type"}), "Opaque");
}

TEST_F(StoreTest, DeletingANamespaceRemovesItsObjectsAndTheSystemOnesAreForbidden) {
  ASSERT_TRUE(store_.Create(Type("namespaces"), "", SecretObject(R"({"metadata":{"name":"team-a"}})")).ok());
  ASSERT_TRUE(store_.Create(Type("configmaps"), "team-a", ConfigMap("c")).ok());
  ASSERT_TRUE(store_.Create(Type("secrets"), "team-a",
                            SecretObject(R"({"metadata":{"name":"s"},"data":{"k":"dG9r"}})"))
                  .ok());
  ASSERT_TRUE(store_.Create(Type("configmaps"), "default", ConfigMap("c")).ok());
  Result<json::object> deleted = store_.Delete(Type("namespaces"), "", "team-a");
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(Text(*deleted, {"status", "phase"}), "Terminating");
  EXPECT_EQ(Text(*deleted, {"metadata", "deletionTimestamp"}), FormatRfc3339(clock_.Now()));
  EXPECT_EQ(store_.Get(Type("namespaces"), "", "team-a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_.Get(Type("secrets"), "team-a", "s").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_.List(Type("configmaps"), ListOptions{})->items.size(), 1u);
  for (const char* name : {"default", "kube-system", "kube-public"}) {
    Result<json::object> refused = store_.Delete(Type("namespaces"), "", name);
    EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << name;
    EXPECT_EQ(refused.status().message(),
              "namespaces \"" + std::string(name) + "\" is forbidden: this namespace may not be deleted");
  }
  EXPECT_EQ(store_.Delete(Type("namespaces"), "", "team-a").status().code(), StatusCode::kNotFound);
}

TEST(ContinueToken, MatchesTheTokenKubeApiserverBuilds) {
  // The exact token in fixtures/kubernetes/derived/nodelist-limit2-page1.json.
  EXPECT_EQ(EncodeContinueToken(1579, "kind-worker"),
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTU3OSwic3RhcnQiOiJraW5kLXdvcmtlclx1MDAwMCJ9");
  Result<ContinuePosition> decoded = DecodeContinueToken(EncodeContinueToken(7, "ns/name"));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->resource_version, 7);
  EXPECT_EQ(decoded->start_key, std::string("ns/name\0", 8));
}

TEST(ContinueToken, MalformedTokensAreRejectedWithTheServersMessage) {
  for (const std::string& token : std::vector<std::string>{std::string("!!!"), std::string("e30="), Base64UrlEncode("not json"),
                            Base64UrlEncode(R"({"v":"meta.k8s.io/v2","rv":1,"start":"a"})"),
                            Base64UrlEncode(R"({"v":"meta.k8s.io/v1","rv":0,"start":"a"})"),
                            Base64UrlEncode(R"({"v":"meta.k8s.io/v1","rv":1,"start":""})"),
                            Base64UrlEncode(R"({"v":"meta.k8s.io/v1","rv":1,"start":"../x"})"),
                            Base64UrlEncode(R"({"v":"meta.k8s.io/v1","rv":1,"start":"/x"})"),
                            std::string(5000, 'a')}) {
    Result<ContinuePosition> decoded = DecodeContinueToken(token);
    ASSERT_FALSE(decoded.ok()) << token;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(decoded.status().message().starts_with("continue key is not valid"))
        << decoded.status().message();
  }
}

TEST(Paging, ReproducesTheShapeOfTheDerivedNodeListPages) {
  FakeClock clock;
  ObjectStore store(clock);
  for (json::object& node : LoadFixture("sonobuoy-kind-v1.20/core_v1_nodes.json")) {
    ASSERT_TRUE(store.Put(node).ok());
  }
  Result<std::string> expected_text =
      ReadFileBounded(kFixtures + "derived/nodelist-limit2-page1.json", 1 << 20);
  ASSERT_TRUE(expected_text.ok());
  json::value expected = *ParseJson(*expected_text);

  ListOptions options;
  options.limit = 2;
  Result<ListPage> first = store.List(Type("nodes"), options);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->items.size(), 2u);
  EXPECT_EQ(Text(first->items[0], {"metadata", "name"}), "kind-control-plane");
  EXPECT_EQ(Text(first->items[1], {"metadata", "name"}), "kind-worker");
  EXPECT_EQ(first->remaining_item_count, 1);
  // Same token as the fixture's except for the resourceVersion this store is at.
  EXPECT_EQ(first->continue_token,
            EncodeContinueToken(first->resource_version, "kind-worker"));
  EXPECT_EQ(Text(expected, {"metadata", "continue"}), EncodeContinueToken(1579, "kind-worker"));

  options.continue_token = first->continue_token;
  Result<ListPage> second = store.List(Type("nodes"), options);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->items.size(), 1u);
  EXPECT_EQ(Text(second->items[0], {"metadata", "name"}), "kind-worker2");
  EXPECT_TRUE(second->continue_token.empty());
  EXPECT_FALSE(second->remaining_item_count.has_value());
  EXPECT_EQ(second->resource_version, first->resource_version);
}

TEST(Paging, SelectorsPageOverMatchesOnlyAndOmitTheRemainingCount) {
  FakeClock clock;
  ObjectStore store(clock);
  for (json::object& node : GenerateNodes(ClusterShape{5, 8, 2}, clock.Now())) {
    ASSERT_TRUE(store.Put(node).ok());
  }
  ListOptions options;
  options.limit = 2;
  options.label_selector = "nvidia.com/gpu.present=true";
  std::vector<std::string> names;
  for (int page = 0; page < 10; ++page) {
    Result<ListPage> result = store.List(Type("nodes"), options);
    ASSERT_TRUE(result.ok());
    EXPECT_FALSE(result->remaining_item_count.has_value());
    for (const json::object& node : result->items) names.push_back(Text(node, {"metadata", "name"}));
    if (result->continue_token.empty()) break;
    options.continue_token = result->continue_token;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-node-0001", "gpu-node-0002", "gpu-node-0003",
                                             "gpu-node-0004", "gpu-node-0005"}));
}

TEST(Fixtures, TheA16VgpuNodeListLoadsAndSelectsByGpuLabels) {
  FakeClock clock;
  ObjectStore store(clock);
  std::vector<json::object> objects = LoadFixture("edgexr-gpu-node-a16-vgpu-nodelist.json");
  ASSERT_EQ(objects.size(), 1u);
  std::string uid = Text(objects[0], {"metadata", "uid"});
  ASSERT_TRUE(store.Put(objects[0]).ok());
  ListOptions options;
  options.label_selector = "nvidia.com/gpu.product=NVIDIA-A16-4Q,nvidia.com/vgpu.present=true";
  Result<ListPage> page = store.List(Type("nodes"), options);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->items.size(), 1u);
  EXPECT_EQ(Text(page->items[0], {"metadata", "name"}), "nori");
  EXPECT_EQ(Text(page->items[0], {"metadata", "uid"}), uid);
  EXPECT_EQ(Text(page->items[0], {"status", "capacity", "nvidia.com/gpu"}), "1");
}

TEST(Fixtures, TheKubeSystemNamespaceKeepsItsUid) {
  FakeClock clock;
  ObjectStore store(clock);
  for (json::object& ns : DefaultNamespaces()) ASSERT_TRUE(store.Put(ns).ok());
  std::vector<json::object> objects = LoadFixture("kube-graffiti/namespace-kube-system.json");
  ASSERT_EQ(objects.size(), 1u);
  ASSERT_TRUE(store.Put(objects[0]).ok());
  Result<json::object> ns = store.Get(Type("namespaces"), "", "kube-system");
  ASSERT_TRUE(ns.ok());
  EXPECT_EQ(Text(*ns, {"metadata", "uid"}), "d4024ffa-b1c0-11e8-979e-080027056a4c");
  EXPECT_EQ(Text(*ns, {"metadata", "creationTimestamp"}), "2018-09-06T10:37:18Z");
  EXPECT_EQ(Text(*ns, {"metadata", "labels", "kubernetes.io/metadata.name"}), "kube-system");
}

TEST(Fixtures, AListWithoutKindsIsRefusedClearly) {
  Result<std::string> text = ReadFileBounded(kFixtures + "kube-graffiti/namespacelist.json", 1 << 20);
  ASSERT_TRUE(text.ok());
  Result<std::vector<json::object>> objects = ParseObjects(*text);
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.status().message(), "document 1 has no kind");
}

TEST(ParseObjects, MultiDocumentYamlAndTypedListsAreExpanded) {
  Result<std::vector<json::object>> objects = ParseObjects(
      "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n---\n"
      "apiVersion: v1\nkind: ConfigMapList\nitems:\n- metadata:\n    name: c\n    namespace: team-a\n");
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
  ASSERT_EQ(objects->size(), 2u);
  EXPECT_EQ(Text((*objects)[1], {"kind"}), "ConfigMap");
  EXPECT_EQ(Text((*objects)[1], {"apiVersion"}), "v1");
  EXPECT_FALSE(ParseObjects("kind: List\nitems: 3\n").ok());
  EXPECT_FALSE(ParseObjects("- just\n- a list\n").ok());
}

TEST(GeneratedNodes, LookLikeRealGpuOperatorNodes) {
  FakeClock clock;
  std::vector<json::object> nodes = GenerateNodes(ClusterShape{2, 8, 1, "v1.31.2"}, clock.Now());
  ASSERT_EQ(nodes.size(), 3u);
  const json::object& gpu = nodes[0];
  EXPECT_EQ(Text(gpu, {"metadata", "name"}), "gpu-node-0001");
  EXPECT_EQ(Text(gpu, {"metadata", "labels", "nvidia.com/gpu.present"}), "true");
  EXPECT_EQ(Text(gpu, {"metadata", "labels", "nvidia.com/gpu.product"}), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(Text(gpu, {"metadata", "labels", "nvidia.com/gpu.count"}), "8");
  EXPECT_EQ(Text(gpu, {"metadata", "labels", "kubernetes.io/hostname"}), "gpu-node-0001");
  EXPECT_EQ(Text(gpu, {"status", "capacity", "nvidia.com/gpu"}), "8");
  EXPECT_EQ(Text(gpu, {"status", "allocatable", "nvidia.com/gpu"}), "8");
  EXPECT_EQ(Text(gpu, {"status", "nodeInfo", "kubeletVersion"}), "v1.31.2");
  EXPECT_EQ(Text(gpu, {"spec", "taints"}), "<missing>");
  EXPECT_TRUE(Text(gpu, {"status", "capacity", "memory"}).ends_with("Ki"));
  const json::object& control_plane = nodes[2];
  EXPECT_EQ(Text(control_plane, {"metadata", "name"}), "cpu-node-0001");
  EXPECT_EQ(Text(control_plane, {"metadata", "labels", "node-role.kubernetes.io/control-plane"}), "");
  EXPECT_EQ(Text(control_plane, {"metadata", "labels", "nvidia.com/gpu.present"}), "<missing>");
  EXPECT_NE(Text(control_plane, {"spec", "taints"}).find("NoSchedule"), std::string::npos);
}

TEST(GeneratedNodes, ShapesAndVersionsAreValidated) {
  EXPECT_TRUE(ValidateClusterShape(ClusterShape{}).ok());
  EXPECT_FALSE(ValidateClusterShape(ClusterShape{-1, 8, 1}).ok());
  EXPECT_FALSE(ValidateClusterShape(ClusterShape{2, 0, 1}).ok());
  EXPECT_FALSE(ValidateClusterShape(ClusterShape{2, 8, 1, "1.32"}).ok());
  Result<VersionParts> parts = ParseServerVersion("v1.31.6+rke2r1");
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->major, "1");
  EXPECT_EQ(parts->minor, "31");
}

}  // namespace
}  // namespace uplink::kubesim
