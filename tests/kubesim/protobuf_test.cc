#include "kubesim/protobuf.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "common/json.h"

namespace uplink::kubesim {
namespace {

// The body kubectl 1.32.4 sent for
//   echo -n tok123 | kubectl create secret generic s1 -n default --from-file=UPLINK_AGENT_TOKEN=/dev/stdin
// (captured with -v=9).
constexpr char kKubectlSecretBytes[] =
    "k8s\x00"
    "\x0a\x0c\x0a\x02v1\x12\x06Secret"
    "\x12\x3b"
    "\x0a\x19\x0a\x02s1\x12\x00\x1a\x07" "default" "\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00"
    "\x12\x1c\x0a\x12UPLINK_AGENT_TOKEN\x12\x06tok123"
    "\x1a\x00"
    "\x1a\x00\x22\x00";
const std::string kKubectlSecret(kKubectlSecretBytes, sizeof(kKubectlSecretBytes) - 1);

std::string Varint(std::uint64_t value) {
  std::string out;
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  return out + static_cast<char>(value);
}

std::string Bytes(int field, std::string_view payload) {
  return Varint(static_cast<std::uint64_t>(field) << 3 | 2) + Varint(payload.size()) +
         std::string(payload);
}

std::string VarintField(int field, std::uint64_t value) {
  return Varint(static_cast<std::uint64_t>(field) << 3) + Varint(value);
}

std::string Envelope(std::string_view kind, std::string_view raw) {
  return std::string("k8s\0", 4) + Bytes(1, Bytes(1, "v1") + Bytes(2, kind)) + Bytes(2, raw);
}

std::string Entry(std::string_view key, std::string_view value) {
  return Bytes(1, key) + Bytes(2, value);
}

TEST(ProtobufSecret, DecodesTheBodyKubectlSends) {
  ASSERT_EQ(kKubectlSecret.size(), 0x53u);  // as in the capture
  Result<json::object> decoded = DecodeProtobufObject(kKubectlSecret);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(ToJson(*decoded),
            R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1","namespace":"default"},)"
            R"("data":{"UPLINK_AGENT_TOKEN":"dG9rMTIz"}})");
}

TEST(ProtobufSecret, DecodesTypeStringDataImmutableLabelsAndBinaryValues) {
  std::string metadata = Bytes(1, "agent") + Bytes(11, Entry("app", "uplink"));
  std::string raw = Bytes(1, metadata) + Bytes(2, Entry("bin", std::string("\0\xff", 2))) +
                    Bytes(2, Entry("empty", "")) + Bytes(3, "kubernetes.io/basic-auth") +
                    Bytes(4, Entry("username", "admin")) + VarintField(5, 1);
  Result<json::object> decoded = DecodeProtobufObject(Envelope("Secret", raw));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(ToJson(*decoded),
            R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"agent","labels":{"app":"uplink"}},)"
            R"("type":"kubernetes.io/basic-auth","immutable":true,"data":{"bin":"AP8=","empty":""},)"
            R"("stringData":{"username":"admin"}})");
}

TEST(ProtobufSecret, WrongWireTypesAreRefused) {
  std::string metadata = Bytes(1, Bytes(1, "agent"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {metadata + Bytes(5, "true"), "protobuf body: wrong wire type 2 for field Secret.immutable"},
      {metadata + VarintField(2, 7), "protobuf body: wrong wire type 0 for field Secret.data"},
      {metadata + VarintField(3, 7), "protobuf body: wrong wire type 0 for field Secret.type"},
      {VarintField(1, 1), "protobuf body: wrong wire type 0 for field metadata"},
      {Bytes(1, VarintField(1, 5)), "protobuf body: wrong wire type 0 for field ObjectMeta.name"},
      {metadata + Bytes(2, VarintField(2, 5)),
       "protobuf body: wrong wire type 0 for field Secret.data value"},
  };
  for (const auto& [raw, message] : cases) {
    Result<json::object> decoded = DecodeProtobufObject(Envelope("Secret", raw));
    ASSERT_FALSE(decoded.ok()) << message;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(decoded.status().message(), message);
  }
}

TEST(ProtobufSecret, EveryTruncationIsRefusedOrDecodedAndNoErrorQuotesTheValue) {
  for (size_t length = 0; length < kKubectlSecret.size(); ++length) {
    std::string body = kKubectlSecret.substr(0, length);
    Result<json::object> decoded = DecodeProtobufObject(body);
    if (decoded.ok()) continue;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument) << length;
    EXPECT_EQ(decoded.status().message().find("tok123"), std::string::npos) << length;
    EXPECT_EQ(decoded.status().message().find("dG9rMTIz"), std::string::npos) << length;
  }
  // Lengths that claim more than there is, varints that never end, field number zero.
  for (const std::string& raw :
       {std::string("\x12\xff\xff\xff\xff\x0f", 6), std::string(12, '\xff'),
        std::string("\x02\x00", 2), std::string("\x0b", 1)}) {
    EXPECT_FALSE(DecodeProtobufObject(Envelope("Secret", raw)).ok()) << ToJson(json::value(raw));
  }
}

std::string TypedEnvelope(std::string_view api_version, std::string_view kind, std::string_view raw) {
  return std::string("k8s\0", 4) + Bytes(1, Bytes(1, api_version) + Bytes(2, kind)) + Bytes(2, raw);
}

TEST(ProtobufRbac, DecodesRolesBindingsAndServiceAccountsAsKubectlCreateSendsThem) {
  std::string rule = Bytes(1, "get") + Bytes(1, "list") + Bytes(2, "") + Bytes(3, "pods") +
                     Bytes(4, "web-0");
  Result<json::object> role = DecodeProtobufObject(TypedEnvelope(
      "rbac.authorization.k8s.io/v1", "ClusterRole",
      Bytes(1, Bytes(1, "reader")) + Bytes(2, rule) + Bytes(2, Bytes(1, "get") + Bytes(5, "/metrics"))));
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ(ToJson(*role),
            R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"reader"},)"
            R"("rules":[{"verbs":["get","list"],"apiGroups":[""],"resources":["pods"],"resourceNames":["web-0"]},)"
            R"({"verbs":["get"],"nonResourceURLs":["/metrics"]}]})");
  Result<json::object> binding = DecodeProtobufObject(TypedEnvelope(
      "rbac.authorization.k8s.io/v1", "RoleBinding",
      Bytes(1, Bytes(1, "b") + Bytes(3, "ns")) +
          Bytes(2, Bytes(1, "ServiceAccount") + Bytes(2, "") + Bytes(3, "agent") + Bytes(4, "ns")) +
          Bytes(3, Bytes(1, "rbac.authorization.k8s.io") + Bytes(2, "ClusterRole") + Bytes(3, "reader"))));
  ASSERT_TRUE(binding.ok()) << binding.status().ToString();
  EXPECT_EQ(ToJson(*binding),
            R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"b","namespace":"ns"},)"
            R"("subjects":[{"kind":"ServiceAccount","name":"agent","namespace":"ns"}],)"
            R"("roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"reader"}})");
  Result<json::object> account = DecodeProtobufObject(
      Envelope("ServiceAccount", Bytes(1, Bytes(1, "agent")) + VarintField(4, 0)));
  ASSERT_TRUE(account.ok()) << account.status().ToString();
  EXPECT_EQ(ToJson(*account),
            R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"agent"},"automountServiceAccountToken":false})");
}

TEST(ProtobufRbac, DecodesTheSelfReviewsOfKubectlAuthCanI) {
  Result<json::object> access = DecodeProtobufObject(TypedEnvelope(
      "authorization.k8s.io/v1", "SelfSubjectAccessReview",
      Bytes(1, "") + Bytes(2, Bytes(1, Bytes(1, "ml") + Bytes(2, "delete") + Bytes(3, "") +
                                           Bytes(5, "pods") + Bytes(7, "train-0")))));
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_EQ(ToJson(access->at("spec")),
            R"({"resourceAttributes":{"namespace":"ml","verb":"delete","resource":"pods","name":"train-0"}})");
  Result<json::object> urls = DecodeProtobufObject(TypedEnvelope(
      "authorization.k8s.io/v1", "SelfSubjectAccessReview",
      Bytes(2, Bytes(2, Bytes(1, "/metrics") + Bytes(2, "get")))));
  ASSERT_TRUE(urls.ok());
  EXPECT_EQ(ToJson(urls->at("spec")), R"({"nonResourceAttributes":{"path":"/metrics","verb":"get"}})");
  Result<json::object> rules = DecodeProtobufObject(
      TypedEnvelope("authorization.k8s.io/v1", "SelfSubjectRulesReview", Bytes(2, Bytes(1, "ml"))));
  ASSERT_TRUE(rules.ok());
  EXPECT_EQ(ToJson(rules->at("spec")), R"({"namespace":"ml"})");
}

TEST(ProtobufRbac, MalformedNestedMessagesAreRefused) {
  const std::string cases[] = {
      // A rule that is a varint, a verb that is a varint, a truncated subject, a roleRef name
      // that claims more bytes than there are.
      TypedEnvelope("rbac.authorization.k8s.io/v1", "Role", VarintField(2, 1)),
      TypedEnvelope("rbac.authorization.k8s.io/v1", "Role", Bytes(2, VarintField(1, 7))),
      TypedEnvelope("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", Bytes(2, "\x0a\x05" "ab")),
      TypedEnvelope("rbac.authorization.k8s.io/v1", "RoleBinding", Bytes(3, "\x1a\xff\x01x")),
      TypedEnvelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", Bytes(2, VarintField(1, 3))),
      TypedEnvelope("authorization.k8s.io/v1", "SelfSubjectRulesReview", Bytes(2, VarintField(1, 3))),
      Envelope("ServiceAccount", Bytes(4, "yes")),
  };
  for (const std::string& body : cases) {
    Result<json::object> decoded = DecodeProtobufObject(body);
    EXPECT_FALSE(decoded.ok()) << ToJson(json::value(body));
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(DecodeProtobufObject(TypedEnvelope("rbac.authorization.k8s.io/v2", "Role", "")).ok());
  EXPECT_FALSE(DecodeProtobufObject(TypedEnvelope("v1", "Role", "")).ok());
}

TEST(ProtobufSecret, OtherKindsAreRefusedWithAHint) {
  Result<json::object> decoded = DecodeProtobufObject(Envelope("Pod", ""));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(),
            "protobuf bodies are accepted for the kinds kubectl's create commands send (ConfigMap, "
            "Namespace, Secret, ServiceAccount, RBAC roles and bindings, self access reviews), not "
            "v1 Pod; send application/json");
}

}  // namespace
}  // namespace uplink::kubesim
