// `uplink kubectl` and `uplink connections namespaces` against a scripted console: what they
// send, what they print, and how they exit.
#include <gtest/gtest.h>

#include "cli_harness.h"

namespace uplink::cli {
namespace {

using testing::Cli;
using testing::ConnectionJson;
using testing::ErrorReply;
using testing::FakeConsole;

constexpr char kKey[] = "uk_KKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKK";
constexpr char kId[] = "0123456789abcdef";
const std::string kKubectlPath = std::string("/api/v1/connections/") + kId + "/kubectl";
const std::string kNamespacesPath = std::string("/api/v1/connections/") + kId + "/namespaces";
constexpr char kHeadline[] =
    "This cluster is connected through the in-cluster uplink agent, which is read-only.";

json::object Body(const net::Request& request) {
  auto parsed = ParseJson(request.body);
  return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object{};
}

class KubectlCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    cli_.env["UPLINK_API_KEY"] = kKey;
    console_.OnJson(
        "GET", "/api/v1/connections", 200,
        json::object{{"connections", json::array{ConnectionJson(kId, "prod", "active")}}});
  }
  // Globals first: everything after "--" belongs to kubectl.
  testing::CliResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--console", console_.url()});
    return cli_.Run(args);
  }
  void ReplyWith(int status, json::object body) {
    console_.OnJson("POST", kKubectlPath, status, body);
  }
  std::string SentArgv() {
    auto sent = console_.RequestsTo("POST", kKubectlPath);
    EXPECT_EQ(sent.size(), 1u);
    return sent.empty() ? "" : ToJson(Body(sent[0]).at("argv"));
  }

  Cli cli_;
  FakeConsole console_;
};

TEST_F(KubectlCommand, PrintsKubectlsOutputAndExitsWithItsCode) {
  ReplyWith(200, json::object{{"id", "cmd_5f2a9c0e4b7d13a6"},
                              {"exit_code", 3},
                              {"stdout", "NAME        READY\ntrainer-0   1/1\n"},
                              {"stderr", "Warning: something\n"},
                              {"duration_ms", 84}});
  auto r = Run({"kubectl", "prod", "--", "get", "pods", "-n", "ml"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.out, "NAME        READY\ntrainer-0   1/1\n");
  EXPECT_EQ(r.err, "Warning: something\n");
  EXPECT_EQ(SentArgv(), R"(["kubectl","get","pods","-n","ml"])");
  auto sent = console_.RequestsTo("POST", kKubectlPath);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].headers.Get("Authorization"), "Bearer " + std::string(kKey));
}

TEST_F(KubectlCommand, EverythingAfterTheDashesGoesToKubectlEvenUplinksOwnFlags) {
  ReplyWith(200, json::object{{"exit_code", 0}, {"stdout", "{}"}, {"stderr", ""}});
  auto r =
      Run({"kubectl", kId, "--", "get", "pods", "--output", "json", "--console", "x", "--", "-h"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "{}");
  EXPECT_EQ(SentArgv(), R"(["kubectl","get","pods","--output","json","--console","x","--","-h"])");
  // A connection id needs no lookup.
  EXPECT_TRUE(console_.RequestsTo("GET", "/api/v1/connections").empty());
}

TEST_F(KubectlCommand, WithoutTheDashesOrArgumentsItIsAUsageError) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"kubectl", "prod", "get", "pods"},
                                             {"kubectl", "--", "prod", "get", "pods"},
                                             {"kubectl", "prod", "--"}}) {
    auto r = Run(args);
    EXPECT_EQ(r.code, 2) << args[1] << " " << r.err;
    EXPECT_NE(r.err.find("after --"), std::string::npos) << r.err;
  }
  // A flag before the dashes is uplink's, and kubectl takes no flags of uplink's.
  auto r = Run({"kubectl", "prod", "-n", "ml", "--", "get", "pods"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(console_.requests().empty());
}

TEST_F(KubectlCommand, ARefusalPrintsTheConsolesWordsAndExits4) {
  ReplyWith(403, json::object{{"error",
                               {{"code", "refused"},
                                {"message", std::string(kHeadline) +
                                                "\ndelete changes the cluster; only reads are "
                                                "allowed\x1b[2J"}}}});
  auto r = Run({"kubectl", "prod", "--", "delete", "pod", "x"});
  EXPECT_EQ(r.code, 4);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(r.err, "uplink: " + std::string(kHeadline) +
                       "\ndelete changes the cluster; only reads are allowed [2J\n");

  for (const char* code : {"namespaces_not_chosen", "namespace_not_allowed"}) {
    ReplyWith(403, json::object{
                       {"error", {{"code", code}, {"message", std::string(kHeadline) + "\nwhy"}}}});
    r = Run({"kubectl", "prod", "--", "get", "pods"});
    EXPECT_EQ(r.code, 4) << code;
    EXPECT_EQ(r.err, "uplink: " + std::string(kHeadline) + "\nwhy\n") << code;
  }
}

TEST_F(KubectlCommand, TheAgentsFailuresAndTimeoutsExit1WithTheConsolesMessage) {
  ReplyWith(504, json::object{{"error",
                               {{"code", "agent_timeout"},
                                {"message", "no agent picked the command up within 60 s"}}}});
  auto r = Run({"kubectl", "prod", "--", "get", "nodes"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "uplink: no agent picked the command up within 60 s\n");

  ReplyWith(502, json::object{
                     {"error",
                      {{"code", "agent_output_too_large"}, {"message", "stdout was over 4 MiB"}}}});
  r = Run({"kubectl", "prod", "--", "get", "pods", "-A"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "uplink: stdout was over 4 MiB\n");
}

TEST_F(KubectlCommand, OtherRefusalsKeepTheirExitCodes) {
  ReplyWith(429, json::object{{"error",
                               {{"code", "too_many_commands"},
                                {"message", "16 commands of this connection are waiting"}}}});
  EXPECT_EQ(Run({"kubectl", "prod", "--", "get", "nodes"}).code, 8);
  ReplyWith(
      409,
      json::object{
          {"error", {{"code", "connection_revoked"}, {"message", "this connection was revoked"}}}});
  auto r = Run({"kubectl", "prod", "--", "get", "nodes"});
  EXPECT_EQ(r.code, 6);
  EXPECT_NE(r.err.find("connection_revoked"), std::string::npos);
  EXPECT_EQ(Run({"kubectl", "staging", "--", "get", "nodes"}).code, 5);  // no such connection
}

TEST_F(KubectlCommand, JsonOutputIsTheConsolesReply) {
  ReplyWith(200, json::object{{"id", "cmd_1"},
                              {"exit_code", 1},
                              {"stdout", ""},
                              {"stderr", "Error from server (NotFound)\n"},
                              {"duration_ms", 9}});
  auto r = Run({"--output", "json", "kubectl", "prod", "--", "get", "pod", "nope", "-n", "ml"});
  EXPECT_EQ(r.code, 1);
  auto printed = ParseJson(r.out);
  ASSERT_TRUE(printed.ok()) << r.out;
  EXPECT_EQ(printed->at("stderr"), "Error from server (NotFound)\n");
  EXPECT_TRUE(r.err.empty());
}

TEST_F(KubectlCommand, LargeOutputsArriveWhole) {
  std::string big(6 << 20, 'x');
  ReplyWith(200, json::object{{"exit_code", 0}, {"stdout", big}, {"stderr", ""}});
  auto r = Run({"kubectl", "prod", "--", "logs", "-n", "ml", "trainer-0"});
  EXPECT_EQ(r.code, 0) << r.err.substr(0, 300);
  EXPECT_EQ(r.out.size(), big.size());
}

TEST_F(KubectlCommand, AReplyWithoutAnExitCodeIsAFailure) {
  for (json::value exit_code : {json::value(nullptr), json::value("0"), json::value(256),
                                json::value(-1), json::value(1.5)}) {
    ReplyWith(200, json::object{{"exit_code", exit_code}, {"stdout", "x"}, {"stderr", ""}});
    auto r = Run({"kubectl", "prod", "--", "version"});
    EXPECT_EQ(r.code, 1) << ToJson(exit_code);
    EXPECT_TRUE(r.out.empty());
  }
}

TEST_F(KubectlCommand, NamespacesAreShown) {
  console_.OnJson("GET", kNamespacesPath, 200,
                  json::object{{"connection_id", kId}, {"namespaces", nullptr}});
  auto r = Run({"connections", "namespaces", "prod"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("No namespaces are chosen yet"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("uplink connections namespaces prod --set NS1,NS2"), std::string::npos);

  console_.OnJson("GET", kNamespacesPath, 200,
                  json::object{{"namespaces", json::array{"dev", "ml\x1b[31m"}}});
  r = Run({"connections", "namespaces", "prod"});
  EXPECT_EQ(r.out, "Namespaces kubectl may read:\n  dev\n  ml [31m\n");

  console_.OnJson("GET", kNamespacesPath, 200, json::object{{"namespaces", json::array{"*"}}});
  EXPECT_NE(Run({"connections", "namespaces", "prod"}).out.find("Every namespace"),
            std::string::npos);
  console_.OnJson("GET", kNamespacesPath, 200, json::object{{"namespaces", json::array{}}});
  EXPECT_NE(Run({"connections", "namespaces", "prod"}).out.find("cluster-scoped"),
            std::string::npos);
  EXPECT_TRUE(console_.RequestsTo("PUT", kNamespacesPath).empty());
}

TEST_F(KubectlCommand, NamespacesAreSet) {
  console_.On("PUT", kNamespacesPath, [](const net::Request& request) {
    return net::Response::Json(200, json::serialize(Body(request)));
  });
  auto r = Run({"connections", "namespaces", "prod", "--set", " ml, dev,,x "});
  EXPECT_EQ(r.code, 0) << r.err;
  auto sent = console_.RequestsTo("PUT", kNamespacesPath);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(ToJson(Body(sent[0])), R"({"namespaces":["ml","dev","x"]})");
  EXPECT_NE(r.out.find("  ml\n  dev\n  x\n"), std::string::npos) << r.out;

  EXPECT_EQ(Run({"connections", "namespaces", "prod", "--all"}).code, 0);
  EXPECT_EQ(Run({"connections", "namespaces", "prod", "--set="}).code, 0);
  sent = console_.RequestsTo("PUT", kNamespacesPath);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(ToJson(Body(sent[1])), R"({"namespaces":["*"]})");
  EXPECT_EQ(ToJson(Body(sent[2])), R"({"namespaces":[]})");

  r = Run({"connections", "namespaces", "prod", "--set", "ml", "--all"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not both"), std::string::npos);
  EXPECT_EQ(console_.RequestsTo("PUT", kNamespacesPath).size(), 3u);
}

TEST_F(KubectlCommand, TheConsolesRefusalOfANamespaceListIsShown) {
  console_.On("PUT", kNamespacesPath, [](const net::Request&) {
    return ErrorReply(400, "invalid_request",
                      "namespaces[0] is \"ML\", which is not a namespace name");
  });
  auto r = Run({"connections", "namespaces", "prod", "--set", "ML"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("not a namespace name"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace uplink::cli
