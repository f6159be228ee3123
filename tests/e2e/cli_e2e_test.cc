// The `uplink` command against a real console.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "cluster.h"
#include "net/server.h"

namespace uplink::e2e {
namespace {

class CliEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override { d_.StartConsole(); }

  testing::CommandResult Uplink(std::vector<std::string> args, bool with_key = true) {
    args.insert(args.begin(), {d_.bin("uplink"), "--console", d_.console_url()});
    std::map<std::string, std::string> env{{"UPLINK_API_KEY", with_key ? d_.admin_key() : ""}};
    return testing::RunCommand(args, std::chrono::seconds(30), testing::EnvWith(env));
  }

  Deployment d_;
};

TEST_F(CliEndToEnd, CreateListGetRotateRevoke) {
  auto created = Uplink({"connections", "create", "--agent-name", "cli-agent", "--cluster-name",
                         "cli-cluster", "--output", "json"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  auto value = ParseJson(created.out);
  ASSERT_TRUE(value.ok()) << created.out;
  const std::string id(value->at("id").as_string());
  EXPECT_EQ(value->at("token").as_string().subview(0, 4), "agt_");

  auto list = Uplink({"connections", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("cli-cluster"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("never"), std::string::npos) << list.out;

  auto get = Uplink({"connections", "get", id});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_NE(get.out.find("none reported yet"), std::string::npos) << get.out;

  auto rotated = Uplink({"connections", "rotate", id});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.err;
  EXPECT_NE(rotated.out.find("shown only this once"), std::string::npos) << rotated.out;

  auto revoked = Uplink({"connections", "revoke", id});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_NE(revoked.out.find("revoked"), std::string::npos) << revoked.out;
}

TEST_F(CliEndToEnd, TokenOutWritesAPrivateFileAndNeverPrintsTheToken) {
  const std::string token_file = d_.dir() + "/new-token";
  auto created = Uplink({"connections", "create", "--agent-name", "a", "--cluster-name", "quiet",
                         "--token-out", token_file});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string token = testing::ReadFileOrEmpty(token_file);
  ASSERT_EQ(token.rfind("agt_", 0), 0u);
  EXPECT_EQ(created.out.find(token), std::string::npos);
  EXPECT_EQ(created.err.find(token), std::string::npos);
  struct stat st{};
  ASSERT_EQ(::stat(token_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(CliEndToEnd, TokenOutRefusesAnExistingFileOrSymlinkBeforeAskingTheConsole) {
  const std::string existing = d_.dir() + "/existing-token";
  { std::ofstream(existing) << "keep me"; }
  auto refused = Uplink({"connections", "create", "--agent-name", "a", "--cluster-name",
                         "not-created", "--token-out", existing});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("already exists"), std::string::npos) << refused.err;
  EXPECT_EQ(testing::ReadFileOrEmpty(existing), "keep me");

  const std::string link = d_.dir() + "/token-link";
  ASSERT_EQ(::symlink((d_.dir() + "/link-target").c_str(), link.c_str()), 0);
  auto via_link = Uplink({"connections", "create", "--agent-name", "a", "--cluster-name",
                          "not-created", "--token-out", link});
  EXPECT_EQ(via_link.exit_code, 1);
  struct stat st{};
  EXPECT_NE(::stat((d_.dir() + "/link-target").c_str(), &st), 0) << "the symlink was followed";

  // Neither attempt reached the console.
  auto list = Uplink({"connections", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out.find("not-created"), std::string::npos) << list.out;
}

TEST_F(CliEndToEnd, TokenOutFileIsRemovedWhenTheConsoleRefuses) {
  const std::string token_file = d_.dir() + "/unused-token";
  auto refused = Uplink({"connections", "rotate", "0123456789abcdef", "--token-out", token_file});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("404"), std::string::npos) << refused.err;
  struct stat st{};
  EXPECT_NE(::stat(token_file.c_str(), &st), 0) << "the --token-out file was left behind";
}

TEST_F(CliEndToEnd, AReplyThatIsJsonButNotAnObjectIsAClearErrorNotACrash) {
  // A proxy in front of the console that answers every call with 200 and [].
  auto proxy = net::HttpServer::Start(net::ServerOptions{}, [](net::Request, net::Reply reply) {
    reply(net::Response::Json(200, "[]"));
  });
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  const std::string url = "http://127.0.0.1:" + std::to_string((*proxy)->port());
  std::map<std::string, std::string> env{{"UPLINK_API_KEY", d_.admin_key()}};
  for (std::vector<std::string> command :
       {std::vector<std::string>{"connections", "list"},
        std::vector<std::string>{"connections", "get", "0123456789abcdef"},
        std::vector<std::string>{"connections", "create", "--agent-name", "a", "--cluster-name",
                                 "c"}}) {
    command.insert(command.begin(), {d_.bin("uplink"), "--console", url});
    auto result = testing::RunCommand(command, std::chrono::seconds(30), testing::EnvWith(env));
    EXPECT_EQ(result.exit_code, 1) << command[3] << ": " << result.err;
    EXPECT_NE(result.err.find("not the JSON object"), std::string::npos)
        << command[3] << ": " << result.err;
  }
}

TEST_F(CliEndToEnd, RefusesToRunWithoutAKeyAndExplainsWhere) {
  auto result = Uplink({"connections", "list"}, /*with_key=*/false);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("UPLINK_API_KEY"), std::string::npos) << result.err;
}

TEST_F(CliEndToEnd, AWrongKeyIsRefusedWithTheConsolesReason) {
  std::map<std::string, std::string> env{{"UPLINK_API_KEY", "uk_not-a-real-key"}};
  auto result = testing::RunCommand(
      {d_.bin("uplink"), "--console", d_.console_url(), "connections", "list"},
      std::chrono::seconds(30), testing::EnvWith(env));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("401"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("uk_not-a-real-key"), std::string::npos) << "the key reached an error";
}

TEST_F(CliEndToEnd, UsageErrorsExitWith2) {
  EXPECT_EQ(Uplink({"connections", "get"}).exit_code, 2);
  EXPECT_EQ(Uplink({"connections", "get", "../../etc"}).exit_code, 2);
  EXPECT_EQ(Uplink({"connections", "create", "--agent-name", "a"}).exit_code, 2);
  EXPECT_EQ(Uplink({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(Uplink({"connections", "list", "--output", "xml"}).exit_code, 2);
}

TEST_F(CliEndToEnd, PlainHttpToANonLoopbackConsoleIsRefused) {
  std::map<std::string, std::string> env{{"UPLINK_API_KEY", d_.admin_key()}};
  auto result = testing::RunCommand(
      {d_.bin("uplink"), "--console", "http://console.example:8080", "connections", "list"},
      std::chrono::seconds(30), testing::EnvWith(env));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("https"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace uplink::e2e
