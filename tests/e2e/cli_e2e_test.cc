// The `uplink` command against a real console: sessions, connections, handovers, users,
// API keys and the audit log, as a person or a script would use them.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "cluster.h"
#include "common/files.h"
#include "net/server.h"

namespace uplink::e2e {
namespace {

constexpr char kPassword[] = "correct horse battery staple";

size_t Count(const std::string& text, const std::string& needle) {
  if (needle.empty()) return 0;
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The agent token a table output shows on its own line, or "".
std::string ShownToken(const std::string& out) {
  const size_t at = out.find("\n  agt_");
  if (at == std::string::npos) return "";
  const size_t start = at + 3;
  const size_t end = out.find_first_of("\r\n", start);
  return out.substr(start, end - start);
}

class CliEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override { d_.StartConsole(); }

  // With the admin API key from the environment, as a script would run it.
  testing::CommandResult Admin(std::vector<std::string> args, const std::string& in = "") {
    return d_.Uplink(std::move(args), {{"UPLINK_API_KEY", d_.admin_key()}}, in);
  }
  // With whatever credential `uplink login` stored.
  testing::CommandResult Stored(std::vector<std::string> args, const std::string& in = "") {
    return d_.Uplink(std::move(args), {}, in);
  }
  json::value Json(const testing::CommandResult& r) {
    auto value = ParseJson(r.out);
    EXPECT_TRUE(value.ok()) << r.out << r.err;
    return value.ok() ? *value : json::value();
  }

  Deployment d_;
};

TEST_F(CliEndToEnd, CreateListShowRotateRevoke) {
  auto created = Admin({"connections", "create", "--agent-name", "cli-agent", "--cluster-name",
                        "cli-cluster", "--output", "json"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  json::value value = Json(created);
  const std::string id(value.at("id").as_string());
  const std::string token(value.at("token").as_string());
  EXPECT_EQ(token.rfind("agt_", 0), 0u);
  EXPECT_EQ(d_.AgentWhoami(token), 200);

  auto list = Admin({"connections", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  // The agent's whoami above is an accepted call: the connection is connected.
  for (const char* expected : {"cli-cluster", "connected", "GPUS READY", "0/0"}) {
    EXPECT_NE(list.out.find(expected), std::string::npos) << expected << "\n" << list.out;
  }

  auto show = Admin({"connections", "show", "cli-cluster"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find(id), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("none reported yet"), std::string::npos) << show.out;
  EXPECT_EQ(Admin({"connections", "get", id}).exit_code, 0) << "get is show";

  auto rotated = Admin({"connections", "rotate", "cli-cluster"});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.err;
  EXPECT_NE(rotated.out.find("shown only this once"), std::string::npos) << rotated.out;
  EXPECT_EQ(d_.AgentWhoami(token), 401) << "the old token still works after rotate";

  auto revoked = Admin({"connections", "revoke", id});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_NE(revoked.out.find("revoked"), std::string::npos) << revoked.out;
  auto rotate_revoked = Admin({"connections", "rotate", id});
  EXPECT_EQ(rotate_revoked.exit_code, 6) << rotate_revoked.err;
  EXPECT_EQ(Admin({"connections", "show", "no-such-cluster"}).exit_code, 5);
}

TEST_F(CliEndToEnd, TokenOutWritesAPrivateFileAndNeverPrintsTheToken) {
  const std::string token_file = d_.dir() + "/new-token";
  auto created = Admin({"connections", "create", "quiet", "--token-out", token_file});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string token = testing::ReadFileOrEmpty(token_file);
  ASSERT_EQ(token.rfind("agt_", 0), 0u);
  EXPECT_EQ(created.out.find(token), std::string::npos);
  EXPECT_EQ(created.err.find(token), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(token_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(CliEndToEnd, TokenOutRefusesAnExistingFileOrSymlinkBeforeAskingTheConsole) {
  const std::string existing = d_.dir() + "/existing-token";
  { std::ofstream(existing) << "keep me"; }
  auto refused = Admin({"connections", "create", "not-created", "--token-out", existing});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("already exists"), std::string::npos) << refused.err;
  EXPECT_EQ(testing::ReadFileOrEmpty(existing), "keep me");

  const std::string link = d_.dir() + "/token-link";
  ASSERT_EQ(::symlink((d_.dir() + "/link-target").c_str(), link.c_str()), 0);
  auto via_link = Admin({"connections", "create", "not-created", "--token-out", link});
  EXPECT_EQ(via_link.exit_code, 1);
  struct stat st {};
  EXPECT_NE(::stat((d_.dir() + "/link-target").c_str(), &st), 0) << "the symlink was followed";

  auto list = Admin({"connections", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out.find("not-created"), std::string::npos) << "the console was asked";
}

TEST_F(CliEndToEnd, TokenOutFileIsRemovedWhenTheConsoleRefuses) {
  const std::string token_file = d_.dir() + "/unused-token";
  auto refused = Admin({"connections", "rotate", "0123456789abcdef", "--token-out", token_file});
  EXPECT_EQ(refused.exit_code, 5);
  EXPECT_NE(refused.err.find("404"), std::string::npos) << refused.err;
  struct stat st {};
  EXPECT_NE(::stat(token_file.c_str(), &st), 0) << "the --token-out file was left behind";
}

TEST_F(CliEndToEnd, LoginWithAPasswordAndASessionNeedsConfirmationForTokens) {
  auto user = Admin({"users", "create", "ada@example.com", "--role", "admin", "--password-stdin"},
                    std::string(kPassword) + "\n");
  ASSERT_EQ(user.exit_code, 0) << user.err;

  auto wrong =
      Stored({"login", "--email", "ada@example.com", "--password-stdin"}, "not the password\n");
  EXPECT_EQ(wrong.exit_code, 3) << wrong.err;
  auto login = Stored({"login", "--email", "ada@example.com", "--password-stdin"},
                      std::string(kPassword) + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  struct stat st {};
  ASSERT_EQ(::stat(d_.cli_credentials_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto stored = ParseJson(testing::ReadFileOrEmpty(d_.cli_credentials_file()));
  ASSERT_TRUE(stored.ok());
  const std::string session(stored->at("credential").as_string());
  EXPECT_EQ(session.rfind("skt_", 0), 0u);
  EXPECT_EQ(login.out.find(session), std::string::npos);

  auto whoami = Stored({"whoami"});
  ASSERT_EQ(whoami.exit_code, 0) << whoami.err;
  EXPECT_NE(whoami.out.find("ada@example.com"), std::string::npos) << whoami.out;
  EXPECT_NE(whoami.out.find("session"), std::string::npos) << whoami.out;
  EXPECT_EQ(Stored({"connections", "list"}).exit_code, 0);

  // No terminal: the sensitive call is refused with the console's reason.
  auto refused = Stored({"connections", "create", "needs-confirmation"});
  EXPECT_EQ(refused.exit_code, 4) << refused.err;
  EXPECT_NE(refused.err.find("confirmation_required"), std::string::npos) << refused.err;

  auto confirm = Stored({"login", "--confirm", "--password-stdin"}, std::string(kPassword) + "\n");
  ASSERT_EQ(confirm.exit_code, 0) << confirm.err;
  auto created = Stored({"connections", "create", "needs-confirmation"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string token = ShownToken(created.out);
  EXPECT_EQ(d_.AgentWhoami(token), 200) << created.out;
  EXPECT_EQ(Count(created.out, token), 1u) << created.out;

  auto logout = Stored({"logout"});
  ASSERT_EQ(logout.exit_code, 0) << logout.err;
  EXPECT_NE(::stat(d_.cli_credentials_file().c_str(), &st), 0) << "logout left the file";
  // The session is over on the console too, not only forgotten here.
  net::Request request;
  auto client = net::HttpClient::Create({.base_url = d_.console_url()});
  ASSERT_TRUE(client.ok());
  request.target = "/api/v1/me";
  request.headers.Set("Authorization", "Bearer " + session);
  auto me = (*client)->Send(request);
  ASSERT_TRUE(me.ok());
  EXPECT_EQ(me->status, 401);
  EXPECT_EQ(Stored({"whoami"}).exit_code, 3);
}

TEST_F(CliEndToEnd, OnATerminalPasswordsAreAskedWithoutEchoAndConfirmationIsAskedForAndRetried) {
  ASSERT_EQ(Admin({"users", "create", "ada@example.com", "--role", "admin", "--password-stdin"},
                  std::string(kPassword) + "\n")
                .exit_code,
            0);
  auto login =
      d_.UplinkInTerminal({"login"}, {},
                          {{"Email: ", "ada@example.com\n"},
                           {"Password for ada@example.com: ", std::string(kPassword) + "\n"}});
  ASSERT_EQ(login.exit_code, 0) << login.out;
  EXPECT_EQ(login.out.find(kPassword), std::string::npos) << "the password was echoed";

  auto created = d_.UplinkInTerminal(
      {"connections", "create", "typed-at-a-terminal"}, {},
      {{"Enter to choose later): ", "\n"},
       {"Confirm your password to create/rotate agent tokens: ", std::string(kPassword) + "\n"}});
  ASSERT_EQ(created.exit_code, 0) << created.out;
  EXPECT_EQ(created.out.find(kPassword), std::string::npos) << "the password was echoed";
  const std::string token = ShownToken(created.out);
  EXPECT_EQ(d_.AgentWhoami(token), 200) << created.out;
  EXPECT_EQ(Count(created.out, token), 1u) << created.out;
  EXPECT_NE(created.out.find("Password confirmed"), std::string::npos) << created.out;

  // Confirmed once, the next sensitive call within the window asks nothing.
  auto rotated = d_.UplinkInTerminal({"connections", "rotate", "typed-at-a-terminal"}, {}, {});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.out;
  EXPECT_EQ(rotated.out.find("Confirm your password"), std::string::npos) << rotated.out;
}

TEST_F(CliEndToEnd, AStoredCredentialReadableByOthersIsRefused) {
  auto login = Stored({"login", "--api-key-stdin"}, d_.admin_key() + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  ASSERT_EQ(Stored({"whoami"}).exit_code, 0);
  ASSERT_EQ(::chmod(d_.cli_credentials_file().c_str(), 0644), 0);
  auto refused = Stored({"whoami"});
  EXPECT_EQ(refused.exit_code, 3);
  EXPECT_NE(refused.err.find("chmod 600"), std::string::npos) << refused.err;
}

TEST_F(CliEndToEnd, AHandoverCodeIsRedeemedOnceFromStdin) {
  auto created = Admin({"connections", "create", "handed-over", "--handover", "--output", "json"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  json::value value = Json(created);
  ASSERT_FALSE(value.as_object().contains("token"));
  const std::string code(value.at("handover_code").as_string());
  EXPECT_EQ(code.rfind("hoc_", 0), 0u);

  auto table = Admin({"connections", "rotate", "handed-over", "--handover"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("uplink connections redeem"), std::string::npos) << table.out;
  const std::string marker = "Handover code (works once, until ";
  ASSERT_NE(table.out.find(marker), std::string::npos) << table.out;
  const size_t at = table.out.find("hoc_");
  const std::string new_code = table.out.substr(at, table.out.find('\n', at) - at);

  auto superseded = d_.Uplink({"connections", "redeem", "--code-stdin"}, {}, code + "\n");
  EXPECT_EQ(superseded.exit_code, 6) << superseded.err;

  const std::string token_file = d_.dir() + "/redeemed-token";
  auto redeemed = d_.Uplink({"connections", "redeem", "--code-stdin", "--token-out", token_file},
                            {}, new_code + "\n");
  ASSERT_EQ(redeemed.exit_code, 0) << redeemed.err;
  const std::string token = testing::ReadFileOrEmpty(token_file);
  EXPECT_EQ(token.rfind("agt_", 0), 0u);
  EXPECT_EQ(d_.AgentWhoami(token), 200);
  EXPECT_EQ(redeemed.out.find(token), std::string::npos);

  auto again = d_.Uplink({"connections", "redeem", "--code-stdin"}, {}, new_code + "\n");
  EXPECT_EQ(again.exit_code, 6) << again.err;
  EXPECT_NE(again.err.find("410"), std::string::npos) << again.err;
  EXPECT_EQ(again.out.find("agt_"), std::string::npos);

  auto show = Admin({"connections", "show", "handed-over"});
  ASSERT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("redeemed"), std::string::npos) << show.out;
  EXPECT_EQ(d_.Uplink({"connections", "redeem"}).exit_code, 2) << "no terminal, no --code-stdin";
}

TEST_F(CliEndToEnd, UsersAndApiKeys) {
  auto created = Admin({"users", "create", "bob@example.com", "--output", "json"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string bob(Json(created).at("id").as_string());
  EXPECT_EQ(Admin({"users", "create", "BOB@example.com"}).exit_code, 6) << "the email is taken";

  auto list = Admin({"users", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("bob@example.com"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("none"), std::string::npos) << "bob has no password\n" << list.out;

  auto set = Admin({"users", "set-password", "bob@example.com", "--password-stdin"},
                   std::string(kPassword) + "\n");
  ASSERT_EQ(set.exit_code, 0) << set.err;
  auto login = Stored({"login", "--email", "bob@example.com", "--password-stdin"},
                      std::string(kPassword) + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  EXPECT_EQ(Stored({"users", "list"}).exit_code, 4) << "a member may not list users";
  auto own = Stored({"users", "set-password", "--password-stdin"},
                    std::string(kPassword) + "\nanother long passphrase\n");
  EXPECT_EQ(own.exit_code, 0) << own.err;

  auto deactivated = Admin({"users", "deactivate", bob});
  ASSERT_EQ(deactivated.exit_code, 0) << deactivated.err;
  EXPECT_NE(deactivated.out.find("deactivated"), std::string::npos) << deactivated.out;
  EXPECT_EQ(Stored({"whoami"}).exit_code, 3) << "a deactivated user's session still works";
  ASSERT_EQ(Admin({"users", "reactivate", bob}).exit_code, 0);
  EXPECT_EQ(Admin({"users", "show", "0000000000000000"}).exit_code, 5);

  const std::string key_file = d_.dir() + "/ci.key";
  auto key = Admin({"api-keys", "create", "ci", "--key-out", key_file, "--output", "json"});
  ASSERT_EQ(key.exit_code, 0) << key.err;
  const std::string new_key = std::string(TrimWhitespace(testing::ReadFileOrEmpty(key_file)));
  ASSERT_EQ(new_key.rfind("uk_", 0), 0u);
  EXPECT_EQ(key.out.find(new_key), std::string::npos);
  const std::string key_id(Json(key).at("id").as_string());

  auto with_new_key = d_.Uplink({"whoami", "--api-key-file", key_file});
  ASSERT_EQ(with_new_key.exit_code, 0) << with_new_key.err;
  auto keys = Admin({"api-keys", "list"});
  ASSERT_EQ(keys.exit_code, 0);
  EXPECT_NE(keys.out.find("ci"), std::string::npos) << keys.out;
  ASSERT_EQ(Admin({"api-keys", "revoke", key_id}).exit_code, 0);
  auto revoked = d_.Uplink({"whoami", "--api-key-file", key_file});
  EXPECT_EQ(revoked.exit_code, 3) << revoked.err;
  EXPECT_EQ(revoked.err.find(new_key), std::string::npos);
}

TEST_F(CliEndToEnd, TheAuditLogShowsWhatHappened) {
  auto created = Admin({"connections", "create", "audited", "--output", "json"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  auto rotated = Admin({"connections", "rotate", "audited", "--output", "json"});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.err;
  const std::string first(Json(created).at("token").as_string());
  const std::string second(Json(rotated).at("token").as_string());
  auto audit = Admin({"audit", "--connection", "audited"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  EXPECT_NE(audit.out.find("connection.create"), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("connection.rotate"), std::string::npos) << audit.out;
  auto one = Admin({"audit", "--action", "connection.rotate", "--limit", "1", "--output", "json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(Json(one).at("events").as_array().size(), 1u);
  EXPECT_EQ(audit.out.find(first), std::string::npos) << "an event holds a token";
  EXPECT_EQ(audit.out.find(second), std::string::npos) << "an event holds a token";
}

TEST_F(CliEndToEnd, AReplyThatIsJsonButNotAnObjectIsAClearErrorNotACrash) {
  // A proxy in front of the console that answers every call with 200 and [].
  auto proxy = net::HttpServer::Start(net::ServerOptions{}, [](net::Request, net::Reply reply) {
    reply(net::Response::Json(200, "[]"));
  });
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  const std::string url = "http://127.0.0.1:" + std::to_string((*proxy)->port());
  for (std::vector<std::string> command :
       {std::vector<std::string>{"connections", "list"},
        std::vector<std::string>{"connections", "show", "0123456789abcdef"},
        std::vector<std::string>{"connections", "create", "c"}}) {
    command.insert(command.begin(), {"--console", url});
    auto result = Admin(command);
    EXPECT_EQ(result.exit_code, 1) << command[3] << ": " << result.err;
    EXPECT_NE(result.err.find("not the JSON object"), std::string::npos)
        << command[3] << ": " << result.err;
  }
}

TEST_F(CliEndToEnd, RefusesToRunWithoutACredentialAndExplainsWhere) {
  auto result = Stored({"connections", "list"});
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_NE(result.err.find("UPLINK_API_KEY"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("uplink login"), std::string::npos) << result.err;
}

TEST_F(CliEndToEnd, AWrongKeyIsRefusedWithTheConsolesReason) {
  auto result = d_.Uplink({"connections", "list"}, {{"UPLINK_API_KEY", "uk_notarealkey"}});
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_NE(result.err.find("401"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("uk_notarealkey"), std::string::npos) << "the key reached an error";
}

TEST_F(CliEndToEnd, UsageErrorsExitWith2) {
  EXPECT_EQ(Admin({"connections", "get"}).exit_code, 2);
  EXPECT_EQ(Admin({"connections", "create", "--agent-name", "a"}).exit_code, 2);
  EXPECT_EQ(Admin({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(Admin({"connections", "list", "--output", "xml"}).exit_code, 2);
  auto help = Admin({"connections", "install", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--pod-security"), std::string::npos);
}

TEST_F(CliEndToEnd, PlainHttpToANonLoopbackConsoleIsRefused) {
  auto result = Admin({"connections", "list", "--console", "http://console.example:8080"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("https"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace uplink::e2e

namespace uplink::e2e {
namespace {

TEST(CliTls, AConsoleBehindAPrivateCaIsReachedWithCaFileAndRefusedWithoutIt) {
  Deployment d;
  d.StartTlsConsole();
  auto trusted = d.Uplink({"--ca-file", d.ca_file(), "connections", "list"},
                          {{"UPLINK_API_KEY", d.admin_key()}});
  EXPECT_EQ(trusted.exit_code, 0) << trusted.err;
  auto from_env = d.Uplink({"connections", "list"},
                           {{"UPLINK_API_KEY", d.admin_key()}, {"UPLINK_CA_FILE", d.ca_file()}});
  EXPECT_EQ(from_env.exit_code, 0) << from_env.err;

  // The system store does not know the private CA: the certificate is refused, and the key
  // never leaves.
  auto untrusted = d.Uplink({"connections", "list"}, {{"UPLINK_API_KEY", d.admin_key()}});
  EXPECT_EQ(untrusted.exit_code, 7) << untrusted.out << untrusted.err;
  EXPECT_NE(untrusted.err.find("certificate"), std::string::npos) << untrusted.err;

  auto missing = d.Uplink({"--ca-file", d.dir() + "/no-such-ca.pem", "connections", "list"},
                          {{"UPLINK_API_KEY", d.admin_key()}});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("--ca-file"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace uplink::e2e
