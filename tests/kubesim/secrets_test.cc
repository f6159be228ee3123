#include "kubesim/secrets.h"

#include <gtest/gtest.h>

#include "common/crypto.h"

namespace uplink::kubesim {
namespace {

json::object Object(std::string_view text) {
  Result<json::value> parsed = ParseJson(text);
  EXPECT_TRUE(parsed.ok() && parsed->is_object()) << text;
  return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object();
}

std::string ErrorOf(const Result<std::string>& result) {
  return result.ok() ? "<ok>" : result.status().message();
}

TEST(DecodeBase64LikeGo, DecodesPaddedTextAndSkipsNewlines) {
  EXPECT_EQ(*DecodeBase64LikeGo("dG9rMTIz"), "tok123");
  EXPECT_EQ(*DecodeBase64LikeGo("dG9r\nMTIz\r\n"), "tok123");
  EXPECT_EQ(*DecodeBase64LikeGo("dG9rMTI="), "tok12");
  EXPECT_EQ(*DecodeBase64LikeGo("dG9rMQ=="), "tok1");
  EXPECT_EQ(*DecodeBase64LikeGo("dG9rMQ=\n="), "tok1");
  EXPECT_EQ(*DecodeBase64LikeGo(""), "");
  EXPECT_EQ(*DecodeBase64LikeGo("AA=="), std::string(1, '\0'));
  // Go's StdEncoding is not strict: unused low bits may be set.
  EXPECT_EQ(*DecodeBase64LikeGo("dG9rMR=="), "tok1");
}

TEST(DecodeBase64LikeGo, ReportsTheOffsetGoReports) {
  // Offsets follow Go's decodeQuantum: the bad symbol, or where the short quantum began.
  EXPECT_EQ(ErrorOf(DecodeBase64LikeGo("dG9!")), "illegal base64 data at input byte 3");
  EXPECT_EQ(ErrorOf(DecodeBase64LikeGo("dG9rMQ")), "illegal base64 data at input byte 4");
  EXPECT_EQ(ErrorOf(DecodeBase64LikeGo("dG9rM")), "illegal base64 data at input byte 4");
  EXPECT_EQ(ErrorOf(DecodeBase64LikeGo("dG9r=")), "illegal base64 data at input byte 4");
  EXPECT_EQ(ErrorOf(DecodeBase64LikeGo("dG9rMQ=")), "illegal base64 data at input byte 7");
  EXPECT_EQ(ErrorOf(DecodeBase64LikeGo("dG9rMQ=x")), "illegal base64 data at input byte 6");
  EXPECT_EQ(ErrorOf(DecodeBase64LikeGo("dG9rMTI=dG9r")), "illegal base64 data at input byte 8");
  EXPECT_EQ(ErrorOf(DecodeBase64LikeGo("dG9r MTIz")), "illegal base64 data at input byte 4");
  EXPECT_EQ(ErrorOf(DecodeBase64LikeGo("dG9r_-Iz")), "illegal base64 data at input byte 4");
}

TEST(ConvertSecret, MergesStringDataDefaultsTheTypeAndStoresCanonicalBase64) {
  json::object secret = Object(R"({"kind":"Secret","data":{"b":"dG9r\nMTIz","a":"eA=="},
                                   "stringData":{"a":"plain","c":"more"}})");
  ASSERT_TRUE(ConvertSecret(secret).ok());
  EXPECT_EQ(ToJson(secret.at("data")),
            R"({"a":")" + Base64Encode("plain") + R"(","b":"dG9rMTIz","c":")" +
                Base64Encode("more") + R"("})");
  EXPECT_FALSE(secret.contains("stringData"));
  EXPECT_EQ(secret.at("type"), "Opaque");

  json::object typed = Object(R"({"type":"kubernetes.io/tls","immutable":null,"data":null})");
  ASSERT_TRUE(ConvertSecret(typed).ok());
  EXPECT_EQ(typed.at("type"), "kubernetes.io/tls");
  EXPECT_FALSE(typed.contains("immutable"));
  EXPECT_FALSE(typed.contains("data"));
}

TEST(ConvertSecret, WrongTypesAndBadBase64GetGoMessagesWithoutTheValue) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"data":"c2VjcmV0LXZhbHVl"})",
       "json: cannot unmarshal string into Go struct field Secret.data of type map[string][]uint8"},
      {R"({"data":{"k":12345}})",
       "json: cannot unmarshal number into Go struct field Secret.data of type []uint8"},
      {R"({"data":{"k":["c2VjcmV0LXZhbHVl"]}})",
       "json: cannot unmarshal array into Go struct field Secret.data of type []uint8"},
      {R"({"data":{"k":"c2VjcmV0LXZhbHVl!"}})", "illegal base64 data at input byte 16"},
      {R"({"stringData":{"k":{"v":"secret-value"}}})",
       "json: cannot unmarshal object into Go struct field Secret.stringData of type string"},
      {R"({"stringData":["secret-value"]})",
       "json: cannot unmarshal array into Go struct field Secret.stringData of type map[string]string"},
      {R"({"type":7})", "json: cannot unmarshal number into Go struct field Secret.type of type v1.SecretType"},
      {R"({"immutable":"yes"})",
       "json: cannot unmarshal string into Go struct field Secret.immutable of type bool"},
  };
  for (const auto& [body, message] : cases) {
    json::object secret = Object(body);
    Status status = ConvertSecret(secret);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << body;
    EXPECT_EQ(status.message(), message) << body;
    EXPECT_EQ(status.message().find("c2VjcmV0"), std::string::npos);
    EXPECT_EQ(status.message().find("secret-value"), std::string::npos);
    EXPECT_EQ(status.message().find("12345"), std::string::npos);
  }
}

TEST(ValidateSecretData, KeysMustBeConfigKeysAndAreNamedButValuesNeverQuoted) {
  json::object secret = Object(R"({"data":{"good-key_1.x":"c2VjcmV0","bad key":"c2VjcmV0",
                                   "..":"c2VjcmV0","..x":"c2VjcmV0","":"c2VjcmV0"}})");
  std::vector<FieldError> causes = ValidateSecretData(secret);
  std::vector<std::string> rendered;
  for (const FieldError& cause : causes) {
    EXPECT_EQ(cause.reason, "FieldValueInvalid");
    EXPECT_EQ(cause.message.find("c2VjcmV0"), std::string::npos) << cause.message;
    rendered.push_back(cause.field + ": " + cause.message.substr(0, cause.message.find(" (e.g.")));
  }
  EXPECT_EQ(rendered,
            (std::vector<std::string>{
                "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of "
                "alphanumeric characters, '-', '_' or '.'",
                "data[..]: Invalid value: \"..\": must not be '..'",
                "data[..x]: Invalid value: \"..x\": must not start with '..'",
                "data[]: Invalid value: \"\": a valid config key must consist of alphanumeric "
                "characters, '-', '_' or '.'"}));
  EXPECT_EQ(causes[0].message,
            "Invalid value: \"bad key\": a valid config key must consist of alphanumeric "
            "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex "
            "used for validation is '[-._a-zA-Z0-9]+')");

  json::object long_key{{"data", json::object{{std::string(254, 'k'), ""}}}};
  causes = ValidateSecretData(long_key);
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_TRUE(causes[0].message.ends_with(": must be no more than 253 characters"));
  json::object hostile_key{{"data", json::object{{std::string("a\n\xff", 3), ""}}}};
  causes = ValidateSecretData(hostile_key);
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].field, "data[a\\x0a\\xff]");
}

TEST(ValidateSecretData, AtMostOneMebibyteOfValuesInTotal) {
  json::object at_limit{{"data", json::object{{"a", Base64Encode(std::string(kMaxSecretBytes - 1, 'x'))},
                                              {"b", Base64Encode("y")}}}};
  EXPECT_TRUE(ValidateSecretData(at_limit).empty());
  json::object over{{"data", json::object{{"a", Base64Encode(std::string(kMaxSecretBytes - 1, 'x'))},
                                          {"b", Base64Encode("yz")}}}};
  std::vector<FieldError> causes = ValidateSecretData(over);
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].field, "data");
  EXPECT_EQ(causes[0].reason, "FieldValueTooLong");
  EXPECT_EQ(causes[0].message, "Too long: may not be more than 1048576 bytes");
}

TEST(ValidateSecretUpdate, ImmutableSecretsKeepTheirDataAndTypesNeverChange) {
  json::object current = Object(R"({"type":"Opaque","immutable":true,"data":{"a":"eA=="}})");
  json::object relabelled = current;
  relabelled["metadata"] = json::object{{"labels", json::object{{"k", "v"}}}};
  EXPECT_TRUE(ValidateSecretUpdate(relabelled, current).empty());

  json::object changed = Object(R"({"type":"Opaque","immutable":false,"data":{"a":"eQ=="}})");
  std::vector<FieldError> causes = ValidateSecretUpdate(changed, current);
  ASSERT_EQ(causes.size(), 2u);
  EXPECT_EQ(causes[0].field, "immutable");
  EXPECT_EQ(causes[1].field, "data");
  EXPECT_EQ(causes[1].reason, "FieldValueForbidden");
  EXPECT_EQ(causes[1].message, "Forbidden: field is immutable when `immutable` is set");

  json::object retyped = Object(R"({"type":"kubernetes.io/tls","data":{"a":"eA=="}})");
  causes = ValidateSecretUpdate(retyped, Object(R"({"type":"Opaque","data":{"a":"eA=="}})"));
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].field, "type");
  EXPECT_EQ(causes[0].message, "Invalid value: \"kubernetes.io/tls\": field is immutable");
}

}  // namespace
}  // namespace uplink::kubesim
