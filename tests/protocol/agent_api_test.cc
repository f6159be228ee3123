// The agent API's names, ids and headers (protocol/agent_api.h), the error body every refusal
// carries (protocol/errors.h) and whoami's reply (protocol/whoami.h): one rule each for both
// sides, with hostile input.
#include "protocol/agent_api.h"

#include <gtest/gtest.h>

#include "common/json.h"
#include "console/replies.h"
#include "protocol/credentials.h"
#include "protocol/errors.h"
#include "protocol/whoami.h"

namespace uplink::protocol {
namespace {

TEST(CommandId, TheIdsTheConsoleMintsAreTheOnlyOnesEitherSideTakes) {
  for (int i = 0; i < 100; ++i) {
    std::string id = NewCommandId();
    EXPECT_TRUE(IsCommandId(id)) << id;
    EXPECT_EQ(CommandResultPath(id), "/api/v1/agent/commands/" + id + "/result");
  }
  EXPECT_TRUE(IsCommandId("cmd_0123456789abcdef"));
  for (const std::string& bad : std::vector<std::string>{
           "", "cmd_", "cmd_0123456789abcde", "cmd_0123456789abcdef0", "cmd_0123456789ABCDEF",
           "CMD_0123456789abcdef", "cmd-0123456789abcdef", "cmd_0123456789abcdeg",
           "cmd_../../../users", "cmd_0123456789abcd%2f", std::string("cmd_0123456789abcde\0", 20),
           "cmd_" + std::string(200, 'a'), "x" + NewCommandId()}) {
    EXPECT_FALSE(IsCommandId(bad)) << bad;
  }
}

TEST(StreamAndSpoolId, BoundAndCharacterSet) {
  EXPECT_TRUE(IsStreamName("node/gpu-node-0001"));
  EXPECT_TRUE(IsStreamName("spool/A.b_c-9"));
  EXPECT_TRUE(IsStreamName(std::string(kMaxStreamBytes, 'a')));
  for (const std::string& bad :
       std::vector<std::string>{"", std::string(kMaxStreamBytes + 1, 'a'), "node/gpu node",
                                "node\\n", "node/é", std::string("node\0", 5), "node?x=1"}) {
    EXPECT_FALSE(IsStreamName(bad)) << bad;
  }
  EXPECT_TRUE(IsSpoolId(std::string(32, 'f')));
  for (const std::string& bad :
       std::vector<std::string>{std::string(31, 'a'), std::string(33, 'a'), std::string(32, 'A'),
                                std::string(32, 'g'), ""}) {
    EXPECT_FALSE(IsSpoolId(bad)) << bad;
  }
}

TEST(ClusterUid, PrintableAsciiWithoutSpacesUpTo128) {
  EXPECT_TRUE(IsClusterUid("5f0c7a8e-8f3c-4a43-9d8f-0b4b5a6c7d8e"));
  EXPECT_TRUE(IsClusterUid(std::string(kMaxClusterUidBytes, 'u')));
  for (const std::string& bad :
       std::vector<std::string>{"", std::string(kMaxClusterUidBytes + 1, 'u'), "a b", "a\r\nX: y",
                                "\x7f", "uid\xc3\xa9", std::string("a\0", 2)}) {
    EXPECT_FALSE(IsClusterUid(bad)) << bad;
  }
}

TEST(UserAgent, TheConsoleReadsBackTheVersionTheAgentWrites) {
  EXPECT_EQ(AgentVersionFromUserAgent(AgentUserAgent("0.1.0", "cluster")), "0.1.0");
  EXPECT_EQ(AgentVersionFromUserAgent(AgentUserAgent("1.2.3-rc.1+g0ffee", "node")),
            "1.2.3-rc.1+g0ffee");
  for (std::optional<std::string_view> other :
       {std::optional<std::string_view>(), std::optional<std::string_view>("curl/8.0"),
        std::optional<std::string_view>("uplink-agent/"),
        std::optional<std::string_view>("uplink-agent/<script> (x)"),
        std::optional<std::string_view>("uplink-agent/" + std::string(65, '1'))}) {
    EXPECT_EQ(AgentVersionFromUserAgent(other), "") << other.value_or("(none)");
  }
}

TEST(CredentialPrefixes, AreDistinctAndNonePrefixesAnother) {
  const std::string_view prefixes[] = {kAgentTokenPrefix, kApiKeyPrefix, kSessionPrefix,
                                       kHandoverCodePrefix};
  for (std::string_view a : prefixes) {
    for (std::string_view b : prefixes) {
      if (a != b) {
        EXPECT_FALSE(a.starts_with(b)) << a << " " << b;
      }
    }
  }
}

TEST(ErrorBodyContract, WhatTheConsoleRefusesWithTheAgentAndTheCliRead) {
  net::Response refused = console::ErrorResponse(409, "cluster_mismatch", "bound to another");
  auto read = DecodeErrorBody(std::string_view(refused.body));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->code, "cluster_mismatch");
  EXPECT_EQ(read->message, "bound to another");
  EXPECT_EQ(read->sequence, std::nullopt);

  net::Response invalid = console::InvalidRecordResponse(104, "records[3].payload ...");
  read = DecodeErrorBody(std::string_view(invalid.body));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->code, "invalid_record");
  EXPECT_EQ(read->sequence, 104);

  read = DecodeErrorBody(std::string_view(console::ErrorResponse(InternalError("disk")).body));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->code, "internal");
  EXPECT_EQ(read->message.find("disk"), std::string::npos) << "internals stay in the console";
}

TEST(ErrorBodyDecode, TakesNothingButTheProtocolsErrorObject) {
  for (std::string_view body :
       {"", "<html>502 Bad Gateway</html>", "null", "[]", R"({"error":"x"})", R"({"code":"x"})",
        R"({"error":null})", "{\"error\":{\"code\":\"x\"", R"({"error":[]})"}) {
    EXPECT_EQ(DecodeErrorBody(body), std::nullopt) << body;
  }
  auto odd =
      DecodeErrorBody(std::string_view(R"({"error":{"code":7,"message":["m"],"sequence":-4}})"));
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->code, "");
  EXPECT_EQ(odd->message, "");
  EXPECT_EQ(odd->sequence, std::nullopt);
  EXPECT_EQ(
      DecodeErrorBody(std::string_view(R"({"error":{"sequence":18446744073709551615}})"))->sequence,
      std::nullopt);
  std::string deep(100, '[');
  EXPECT_EQ(DecodeErrorBody(std::string_view("{\"error\":" + deep)), std::nullopt);
}

TEST(WhoAmIContract, TheReplyReadsBackFieldForField) {
  unsigned char arena[1024];
  json::monotonic_resource resource(arena, sizeof arena);
  WhoAmIReply sent{"c0ffee", "uplink-agent", "gpu-east", FromUnixSeconds(1'900'000'000), 60};
  json::value wire = *ParseJson(json::serialize(EncodeWhoAmIReply(sent, &resource)));
  auto read = DecodeWhoAmIReply(wire);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->connection_id, "c0ffee");
  EXPECT_EQ(read->agent_name, "uplink-agent");
  EXPECT_EQ(read->cluster_name, "gpu-east");
  EXPECT_EQ(read->expires_at, sent.expires_at);
  EXPECT_EQ(read->report_interval_seconds, 60);
  EXPECT_EQ(DecodeExpiresAt(wire), sent.expires_at);
  for (std::string_view bad :
       {R"({})", R"([])", R"({"connection_id":1,"agent_name":"a","cluster_name":"c"})",
        R"({"connection_id":"c","agent_name":"a","cluster_name":"c","expires_at":"x",)"
        R"("report_interval_seconds":60})",
        R"({"connection_id":"c","agent_name":"a","cluster_name":"c",)"
        R"("expires_at":"2030-01-01T00:00:00Z","report_interval_seconds":0})"}) {
    EXPECT_FALSE(DecodeWhoAmIReply(*ParseJson(bad)).ok()) << bad;
  }
}

}  // namespace
}  // namespace uplink::protocol
