// Each command against a scripted console: what it sends, what it shows, what it keeps.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "cli_harness.h"
#include "common/files.h"

namespace uplink::cli {
namespace {

using testing::Cli;
using testing::ConnectionJson;
using testing::ErrorReply;
using testing::FakeConsole;

constexpr char kKey[] = "uk_KKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKK";
constexpr char kSession[] = "skt_SSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSS";
constexpr char kToken[] = "agt_TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT";
constexpr char kCode[] = "hoc_HHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHH";
constexpr char kId[] = "0123456789abcdef";

json::object Body(const net::Request& request) {
  auto parsed = ParseJson(request.body);
  return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object{};
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class Commands : public ::testing::Test {
 protected:
  void UseKey() { cli_.env["UPLINK_API_KEY"] = kKey; }
  void UseSession() { cli_.StoreCredential(console_.url(), kSession, "session"); }
  testing::CliResult Run(std::vector<std::string> args, const std::string& in = "") {
    args.insert(args.end(), {"--console", console_.url()});
    return cli_.Run(args, in);
  }
  json::object WithToken(json::object connection) {
    connection["token"] = kToken;
    return connection;
  }

  Cli cli_;
  FakeConsole console_;
};

TEST_F(Commands, LoginWithAPasswordFromStdinStoresThePrivateSession) {
  console_.On("POST", "/api/v1/sessions", [](const net::Request& r) {
    json::object body = Body(r);
    if (body["email"] != "ada@example.com" || body["password"] != "a long passphrase") {
      return ErrorReply(401, "invalid_credentials", "wrong email or password");
    }
    return net::Response::Json(
        201, json::serialize(
                 json::object{{"token", kSession},
                              {"session", {{"id", "s1"}, {"expires_at", "2027-01-16T00:00:00Z"}}},
                              {"user", {{"id", "u1"}, {"email", "ada@example.com"}}}}));
  });
  auto r = Run({"login", "--email", "ada@example.com", "--password-stdin"}, "a long passphrase\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find(kSession), std::string::npos);
  EXPECT_NE(r.out.find("ada@example.com"), std::string::npos);
  EXPECT_TRUE(console_.requests().front().headers.Get("Authorization") == std::nullopt);

  auto stored = ParseJson(uplink::testing::ReadFileOrEmpty(cli_.credentials_path()));
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->at("credential"), kSession);
  EXPECT_EQ(stored->at("kind"), "session");
  EXPECT_EQ(stored->at("console").as_string(), console_.url());
  EXPECT_EQ(stored->at("expires_at"), "2027-01-16T00:00:00Z");
  struct stat st {};
  ASSERT_EQ(::stat(cli_.credentials_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // The stored session is what later commands send, to that console.
  console_.OnJson("GET", "/api/v1/connections", 200, json::object{{"connections", json::array{}}});
  auto list = cli_.Run({"connections", "list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_EQ(console_.requests().back().headers.Get("Authorization").value_or(""),
            std::string("Bearer ") + kSession);

  auto wrong = Run({"login", "--email", "ada@example.com", "--password-stdin"}, "nope\n");
  EXPECT_EQ(wrong.code, 3);
}

TEST_F(Commands, LoginAsksOnTheTerminalOrIsAUsageError) {
  console_.OnJson("POST", "/api/v1/sessions", 201,
                  json::object{{"token", kSession},
                               {"session", {{"expires_at", nullptr}}},
                               {"user", {{"email", "ada@example.com"}}}});
  auto no_tty = Run({"login"});
  EXPECT_EQ(no_tty.code, 2);
  EXPECT_NE(no_tty.err.find("--email"), std::string::npos) << no_tty.err;
  auto no_password = Run({"login", "--email", "ada@example.com"});
  EXPECT_EQ(no_password.code, 2);
  EXPECT_NE(no_password.err.find("--password-stdin"), std::string::npos) << no_password.err;
  EXPECT_TRUE(console_.requests().empty());

  cli_.terminal.available = true;
  cli_.terminal.answers = {"ada@example.com", "typed passphrase"};
  auto r = Run({"login"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(cli_.terminal.prompts,
            (std::vector<std::string>{"Email: ", "Password for ada@example.com: "}));
  EXPECT_EQ(Body(console_.requests().back())["password"], "typed passphrase");
}

TEST_F(Commands, LoginWithAnApiKeyChecksItFirst) {
  console_.On("GET", "/api/v1/me", [](const net::Request& r) {
    if (r.headers.Get("Authorization").value_or("") != std::string("Bearer ") + kKey) {
      return ErrorReply(401, "invalid_token", "unknown key");
    }
    return net::Response::Json(
        200, json::serialize(json::object{
                 {"user", {{"id", "u1"}, {"email", "ci@example.com"}}},
                 {"credential",
                  {{"kind", "api_key"}, {"prefix", "uk_KKKK"}, {"expires_at", nullptr}}}}));
  });
  auto bad = Run({"login", "--api-key-stdin"}, "uk_wrongwrongwrong\n");
  EXPECT_EQ(bad.code, 3);
  EXPECT_FALSE(std::filesystem::exists(cli_.credentials_path()));
  auto not_key = Run({"login", "--api-key-stdin"}, "password123\n");
  EXPECT_EQ(not_key.code, 2);

  auto r = Run({"login", "--api-key-stdin"}, std::string(kKey) + "\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find(kKey), std::string::npos);
  auto stored = ParseJson(uplink::testing::ReadFileOrEmpty(cli_.credentials_path()));
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->at("kind"), "api_key");
  EXPECT_EQ(stored->at("credential"), kKey);
  EXPECT_EQ(stored->at("email"), "ci@example.com");
}

TEST_F(Commands, LoginConfirmConfirmsTheStoredSession) {
  UseSession();
  console_.OnJson("POST", "/api/v1/session/confirm", 200,
                  json::object{{"session", {{"confirmed_until", "2027-01-15T08:05:00Z"}}}});
  auto r = cli_.Run({"login", "--confirm", "--password-stdin"}, "my passphrase\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2027-01-15T08:05:00Z"), std::string::npos);
  auto confirm = console_.RequestsTo("POST", "/api/v1/session/confirm");
  ASSERT_EQ(confirm.size(), 1u);
  EXPECT_EQ(Body(confirm[0])["password"], "my passphrase");
  EXPECT_EQ(confirm[0].headers.Get("Authorization").value_or(""),
            std::string("Bearer ") + kSession);

  cli_.env["UPLINK_API_KEY"] = kKey;
  EXPECT_EQ(cli_.Run({"login", "--confirm", "--password-stdin"}, "x\n").code, 2)
      << "an API key needs no confirmation";
}

TEST_F(Commands, LogoutEndsTheSessionAndRemovesTheFile) {
  UseSession();
  console_.OnJson("POST", "/api/v1/session/logout", 200, json::object{{"session", json::object{}}});
  auto r = cli_.Run({"logout"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(console_.RequestsTo("POST", "/api/v1/session/logout").size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(cli_.credentials_path()));
  auto again = cli_.Run({"logout"});
  EXPECT_EQ(again.code, 0);
  EXPECT_NE(again.out.find("Not signed in"), std::string::npos);

  // An expired session is gone on the console already; logging out still clears the file.
  UseSession();
  console_.On("POST", "/api/v1/session/logout",
              [](const net::Request&) { return ErrorReply(401, "expired", "expired"); });
  EXPECT_EQ(cli_.Run({"logout"}).code, 0);
  EXPECT_FALSE(std::filesystem::exists(cli_.credentials_path()));
}

TEST_F(Commands, LogoutOfAStoredApiKeyOnlyForgetsIt) {
  cli_.StoreCredential(console_.url(), kKey, "api_key");
  auto r = cli_.Run({"logout"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(console_.requests().empty());
  EXPECT_NE(r.out.find("api-keys revoke"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(cli_.credentials_path()));
}

TEST_F(Commands, WhoamiShowsTheUserAndTheKindOfCredential) {
  UseSession();
  console_.OnJson(
      "GET", "/api/v1/me", 200,
      json::object{{"user", {{"id", "u1"}, {"email", "ada@example.com"}, {"role", "admin"}}},
                   {"credential",
                    {{"kind", "session"},
                     {"prefix", "skt_SSSS"},
                     {"expires_at", "2027-01-16T00:00:00Z"},
                     {"confirmed_until", nullptr}}}});
  auto r = cli_.Run({"whoami"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ada@example.com"), std::string::npos);
  EXPECT_NE(r.out.find("session skt_SSSS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("confirmed until"), std::string::npos);
  EXPECT_EQ(r.out.find(kSession), std::string::npos);
}

TEST_F(Commands, ASessionWithoutConfirmationAndNoTerminalIsForbidden) {
  UseSession();
  console_.On("POST", "/api/v1/connections", [](const net::Request&) {
    return ErrorReply(403, "confirmation_required",
                      "confirm your password first (POST /api/v1/session/confirm)");
  });
  auto r = cli_.Run({"connections", "create", "gpu-a"});
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("confirm your password first"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("uplink login --confirm"), std::string::npos) << r.err;
  EXPECT_TRUE(console_.RequestsTo("POST", "/api/v1/session/confirm").empty());
}

TEST_F(Commands, ASessionConfirmsOnTheTerminalAndRetriesOnce) {
  UseSession();
  bool confirmed = false;
  console_.On("POST", "/api/v1/connections", [&](const net::Request&) {
    if (!confirmed) return ErrorReply(403, "confirmation_required", "confirm first");
    return net::Response::Json(201, json::serialize(WithToken(ConnectionJson(kId, "gpu-a"))));
  });
  console_.On("POST", "/api/v1/session/confirm", [&](const net::Request& r) {
    if (Body(r)["password"] != "my passphrase") {
      return ErrorReply(401, "invalid_credentials", "wrong password");
    }
    confirmed = true;
    return net::Response::Json(200, R"({"session":{"confirmed_until":"2027-01-15T08:05:00Z"}})");
  });
  cli_.terminal.available = true;
  cli_.terminal.answers = {"wrong"};
  auto wrong = cli_.Run({"connections", "create", "gpu-a", "--read-namespaces", "ml"});
  EXPECT_EQ(wrong.code, 3) << wrong.err;

  cli_.terminal.prompts.clear();
  cli_.terminal.answers = {"my passphrase"};
  auto r = cli_.Run({"connections", "create", "gpu-a", "--read-namespaces", "ml"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(cli_.terminal.prompts,
            std::vector<std::string>{"Confirm your password to create/rotate agent tokens: "});
  EXPECT_EQ(Count(r.out, kToken), 1u) << r.out;
  EXPECT_EQ(console_.RequestsTo("POST", "/api/v1/connections").size(), 3u);
}

TEST_F(Commands, CreateSendsTheDefaultsAndShowsTheTokenOnce) {
  UseKey();
  console_.OnJson("POST", "/api/v1/connections", 201, WithToken(ConnectionJson(kId, "gpu-a")));
  auto r = Run({"connections", "create", "gpu-a", "--expires-in", "30d"});
  ASSERT_EQ(r.code, 0) << r.err;
  json::object body = Body(console_.requests().back());
  EXPECT_EQ(body["agent_name"], "uplink-agent");
  EXPECT_EQ(body["cluster_name"], "gpu-a");
  EXPECT_EQ(body["expires_at"].as_string(),
            FormatRfc3339(cli_.clock.Now() + std::chrono::hours(24 * 30)));
  EXPECT_FALSE(body.contains("handover"));
  EXPECT_EQ(Count(r.out, kToken), 1u);
  EXPECT_EQ(r.err.find(kToken), std::string::npos);
  EXPECT_NE(r.out.find("shown only this once"), std::string::npos);
  EXPECT_NE(r.out.find("read -rs UPLINK_AGENT_TOKEN"), std::string::npos);

  // The old spelling still works.
  auto old = Run({"connections", "create", "--agent-name", "a", "--cluster-name", "gpu-b",
                  "--expires-at", "2027-03-01T00:00:00Z"});
  ASSERT_EQ(old.code, 0) << old.err;
  body = Body(console_.requests().back());
  EXPECT_EQ(body["agent_name"], "a");
  EXPECT_EQ(body["cluster_name"], "gpu-b");
  EXPECT_EQ(body["expires_at"], "2027-03-01T00:00:00Z");

  const size_t before = console_.requests().size();
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"connections", "create"},
           {"connections", "create", "a", "--cluster-name", "b"},
           {"connections", "create", "a", "--expires-at", "tomorrow"},
           {"connections", "create", "a", "--expires-in", "soon"},
           {"connections", "create", "a", "--expires-in", "1d", "--expires-at",
            "2027-03-01T00:00:00Z"},
           {"connections", "create", "a", "--handover", "--token-out", "/tmp/x"}}) {
    EXPECT_EQ(Run(bad).code, 2) << bad.back();
  }
  EXPECT_EQ(console_.requests().size(), before) << "a usage error reached the console";
}

TEST_F(Commands, JsonOutputCarriesTheTokenForScriptsUnlessItGoesToAFile) {
  UseKey();
  console_.OnJson("POST", "/api/v1/connections", 201, WithToken(ConnectionJson(kId, "gpu-a")));
  auto r = Run({"connections", "create", "gpu-a", "--output", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto value = ParseJson(r.out);
  ASSERT_TRUE(value.ok()) << r.out;
  EXPECT_EQ(value->at("token"), kToken);

  const std::string file = cli_.home() + "/token";
  r = Run({"connections", "create", "gpu-a", "--output", "json", "--token-out", file});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find(kToken), std::string::npos);
  EXPECT_EQ(uplink::testing::ReadFileOrEmpty(file), kToken);
}

TEST_F(Commands, HandoverPrintsTheCodeAndHowToRedeemIt) {
  UseKey();
  json::object reply = ConnectionJson(kId, "gpu-a");
  reply["handover_code"] = kCode;
  reply["handover_expires_at"] = "2027-01-15T08:10:00Z";
  console_.OnJson("POST", "/api/v1/connections", 201, reply);
  auto r = Run({"connections", "create", "gpu-a", "--handover"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Body(console_.requests().back())["handover"], true);
  EXPECT_EQ(Count(r.out, kCode), 1u);
  EXPECT_NE(r.out.find("uplink connections redeem"), std::string::npos);
  EXPECT_NE(r.out.find("2027-01-15T08:10:00Z"), std::string::npos);

  console_.OnJson("POST", std::string("/api/v1/connections/") + kId + "/rotate", 200, reply);
  r = Run({"connections", "rotate", kId, "--handover"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Body(console_.requests().back())["handover"], true);
}

TEST_F(Commands, RedeemReadsTheCodeFromStdinOrTheTerminalNeverArgv) {
  console_.On("POST", "/api/v1/handovers/redeem", [](const net::Request& r) {
    if (r.headers.Get("Authorization")) return ErrorReply(400, "invalid_request", "no auth here");
    if (Body(r)["code"] != kCode) return ErrorReply(401, "invalid_token", "unknown code");
    json::object reply = ConnectionJson(kId, "gpu-a");
    reply["token"] = kToken;
    return net::Response::Json(200, json::serialize(reply));
  });
  UseKey();  // a credential in the environment is not sent with the code
  auto r = Run({"connections", "redeem", "--code-stdin"}, std::string(kCode) + "\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Count(r.out, kToken), 1u);

  cli_.terminal.available = true;
  cli_.terminal.answers = {std::string("  ") + kCode + " "};
  r = Run({"connections", "redeem"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(cli_.terminal.prompts, std::vector<std::string>{"Handover code: "});

  cli_.terminal.available = false;
  EXPECT_EQ(Run({"connections", "redeem"}).code, 2);
  EXPECT_EQ(Run({"connections", "redeem", "--code-stdin"}, "agt_notacode\n").code, 2);
  EXPECT_EQ(Run({"connections", "redeem", "--code-stdin"}, "").code, 2);
  EXPECT_EQ(Run({"connections", "redeem", kCode}).code, 2) << "a code on the command line";
  auto unknown = Run({"connections", "redeem", "--code-stdin"}, "hoc_unknownunknown\n");
  EXPECT_EQ(unknown.code, 3);
}

TEST_F(Commands, NamesResolveToTheLiveConnection) {
  UseKey();
  json::object revoked = ConnectionJson("aaaaaaaaaaaaaaaa", "gpu-a", "revoked");
  json::object live = ConnectionJson("bbbbbbbbbbbbbbbb", "gpu-a", "active");
  json::object other = ConnectionJson("cccccccccccccccc", "gpu-b", "never");
  json::object twin = ConnectionJson("dddddddddddddddd", "gpu-b", "stale");
  console_.OnJson("GET", "/api/v1/connections", 200,
                  json::object{{"connections", json::array{revoked, live, other, twin}}});
  console_.OnJson("GET", "/api/v1/connections/bbbbbbbbbbbbbbbb", 200, live);
  console_.OnJson("POST", "/api/v1/connections/bbbbbbbbbbbbbbbb/revoke", 200, live);

  auto show = Run({"connections", "show", "gpu-a"});
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_NE(show.out.find("bbbbbbbbbbbbbbbb"), std::string::npos);
  ASSERT_EQ(Run({"connections", "revoke", "gpu-a"}).code, 0);
  ASSERT_EQ(Run({"connections", "show", "BBBBBBBBBBBBBBBB"}).code, 0) << "ids are case-blind";
  EXPECT_EQ(console_.requests().back().target, "/api/v1/connections/bbbbbbbbbbbbbbbb");

  auto ambiguous = Run({"connections", "show", "gpu-b"});
  EXPECT_EQ(ambiguous.code, 5);
  EXPECT_NE(ambiguous.err.find("cccccccccccccccc"), std::string::npos) << ambiguous.err;
  EXPECT_NE(ambiguous.err.find("dddddddddddddddd"), std::string::npos) << ambiguous.err;
  auto missing = Run({"connections", "rotate", "nope"});
  EXPECT_EQ(missing.code, 5);
  EXPECT_NE(missing.err.find("uplink connections list"), std::string::npos) << missing.err;
  EXPECT_TRUE(console_.RequestsTo("POST", "/api/v1/connections/cccccccccccccccc/rotate").empty());
}

TEST_F(Commands, ListAndShowRenderWhatTheConsoleReports) {
  UseKey();
  json::object c = ConnectionJson(kId, "gpu-a", "active");
  c["liveness"] = "connected";
  c["agent_version"] = "0.1.0";
  c["totals"] = {{"nodes", 2},
                 {"nodes_ready", 2},
                 {"gpu_capacity", 16},
                 {"gpu_allocatable", 16},
                 {"gpus_ready", 8}};
  c["nodes"] = json::array{{{"name", "gpu-node-1"},
                            {"ready", true},
                            {"unschedulable", false},
                            {"gpu_product", "NVIDIA-H100-80GB-HBM3"},
                            {"gpu_capacity", 8},
                            {"gpu_allocatable", 8}},
                           {{"name", "gpu-node-2"},
                            {"ready", true},
                            {"unschedulable", true},
                            {"gpu_product", "NVIDIA-H100-80GB-HBM3"},
                            {"gpu_capacity", 8},
                            {"gpu_allocatable", 8},
                            {"error", "bad quantity"}}};
  c["agents"] = json::array{{{"role", "inventory"},
                             {"instance", "pod-1"},
                             {"version", "0.1.0"},
                             {"last_seen_at", "2027-01-15T08:00:00Z"}}};
  c["handover"] = {{"status", "redeemed"},
                   {"created_at", "2027-01-15T07:00:00Z"},
                   {"expires_at", "2027-01-15T07:10:00Z"},
                   {"redeemed_at", "2027-01-15T07:01:00Z"}};
  c["security_events"] = json::array{{{"at", "2027-01-15T07:30:00Z"},
                                      {"action", "connection.cluster_mismatch"},
                                      {"source_address", "203.0.113.9"},
                                      {"detail", "report from another cluster"}}};
  console_.OnJson("GET", "/api/v1/connections", 200, json::object{{"connections", json::array{c}}});
  console_.OnJson("GET", std::string("/api/v1/connections/") + kId, 200, c);

  auto list = Run({"connections", "list"});
  ASSERT_EQ(list.code, 0) << list.err;
  for (const char* expected : {"CLUSTER", "STATE", "TOKEN", "GPUS READY", "gpu-a", "connected",
                               "agt_AbCd", "8/16", "0.1.0", "2027-04-01T00:00:00Z"}) {
    EXPECT_NE(list.out.find(expected), std::string::npos) << expected << "\n" << list.out;
  }
  auto show = Run({"connections", "get", kId});
  ASSERT_EQ(show.code, 0) << show.err;
  for (const char* expected :
       {"gpu-node-2", "bad quantity", "NVIDIA-H100-80GB-HBM3", "inventory", "pod-1", "redeemed",
        "connection.cluster_mismatch", "203.0.113.9", "8 ready of 16"}) {
    EXPECT_NE(show.out.find(expected), std::string::npos) << expected << "\n" << show.out;
  }

  auto json_list = Run({"connections", "list", "--output", "json"});
  ASSERT_EQ(json_list.code, 0);
  auto parsed = ParseJson(json_list.out);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->at("connections").as_array().size(), 1u);
}

TEST_F(Commands, TokenOutFileIsCreatedBeforeTheCallAndRemovedWhenItFails) {
  UseKey();
  console_.On(
      "POST", std::string("/api/v1/connections/") + kId + "/rotate",
      [](const net::Request&) { return ErrorReply(409, "failed_precondition", "revoked"); });
  const std::string file = cli_.home() + "/token";
  auto r = Run({"connections", "rotate", kId, "--token-out", file});
  EXPECT_EQ(r.code, 6);
  EXPECT_FALSE(std::filesystem::exists(file));

  uplink::testing::WriteFileOrDie(file, "keep");
  r = Run({"connections", "rotate", kId, "--token-out", file});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("already exists"), std::string::npos);
  EXPECT_TRUE(
      console_.RequestsTo("POST", std::string("/api/v1/connections/") + kId + "/rotate").size() ==
      1u)
      << "the console was asked although the file could not be created";
}

TEST_F(Commands, UsersCommandsSendWhatTheApiExpects) {
  UseKey();
  json::object ada{{"id", "u2"},
                   {"email", "ada@example.com"},
                   {"role", "member"},
                   {"created_at", "2027-01-01T00:00:00Z"},
                   {"deactivated_at", nullptr},
                   {"has_password", true}};
  console_.OnJson("GET", "/api/v1/users", 200, json::object{{"users", json::array{ada}}});
  console_.OnJson("POST", "/api/v1/users", 201, ada);
  console_.OnJson("GET", "/api/v1/users/u2", 200, ada);
  console_.OnJson("POST", "/api/v1/users/u2/deactivate", 200, ada);
  console_.OnJson("POST", "/api/v1/users/u2/reactivate", 200, ada);

  auto created = Run({"users", "create", "ada@example.com", "--role", "admin", "--password-stdin"},
                     "a long passphrase\n");
  ASSERT_EQ(created.code, 0) << created.err;
  json::object body = Body(console_.requests().back());
  EXPECT_EQ(body["email"], "ada@example.com");
  EXPECT_EQ(body["role"], "admin");
  EXPECT_EQ(body["password"], "a long passphrase");

  ASSERT_EQ(Run({"users", "create", "bob@example.com"}).code, 0);
  body = Body(console_.requests().back());
  EXPECT_EQ(body["role"], "member");
  EXPECT_FALSE(body.contains("password")) << "no terminal: a user without a password";

  cli_.terminal.available = true;
  cli_.terminal.answers = {"one passphrase", "another passphrase"};
  EXPECT_EQ(Run({"users", "create", "eve@example.com"}).code, 2) << "passwords differ";
  cli_.terminal.answers = {"same passphrase", "same passphrase"};
  ASSERT_EQ(Run({"users", "create", "eve@example.com"}).code, 0);
  EXPECT_EQ(Body(console_.requests().back())["password"], "same passphrase");
  cli_.terminal.available = false;

  EXPECT_EQ(Run({"users", "create", "x@example.com", "--role", "root"}).code, 2);

  auto list = Run({"users", "list"});
  ASSERT_EQ(list.code, 0);
  EXPECT_NE(list.out.find("ada@example.com"), std::string::npos);
  EXPECT_NE(list.out.find("active"), std::string::npos);
  ASSERT_EQ(Run({"users", "show", "u2"}).code, 0);
  ASSERT_EQ(Run({"users", "deactivate", "ADA@example.com"}).code, 0);  // by email
  EXPECT_EQ(console_.requests().back().target, "/api/v1/users/u2/deactivate");
  ASSERT_EQ(Run({"users", "reactivate", "u2"}).code, 0);
  EXPECT_EQ(console_.requests().back().target, "/api/v1/users/u2/reactivate");
  EXPECT_EQ(Run({"users", "show", "../../etc"}).code, 2);
  EXPECT_EQ(Run({"users", "show", "nobody@example.com"}).code, 5);
}

TEST_F(Commands, SetPasswordAsksForTheCurrentOneWhenChangingYourOwn) {
  UseSession();
  console_.OnJson(
      "GET", "/api/v1/me", 200,
      json::object{{"user", {{"id", "u1"}, {"email", "me@example.com"}, {"has_password", true}}},
                   {"credential", {{"kind", "session"}}}});
  console_.OnJson("POST", "/api/v1/users/u1/password", 200,
                  json::object{{"id", "u1"}, {"email", "me@example.com"}});
  auto r =
      cli_.Run({"users", "set-password", "--password-stdin"}, "old passphrase\nnew passphrase\n");
  ASSERT_EQ(r.code, 0) << r.err;
  json::object body = Body(console_.requests().back());
  EXPECT_EQ(body["current_password"], "old passphrase");
  EXPECT_EQ(body["password"], "new passphrase");

  cli_.terminal.available = true;
  cli_.terminal.answers = {"old passphrase", "new passphrase", "new passphrase"};
  ASSERT_EQ(cli_.Run({"users", "set-password", "me"}).code, 0);
  EXPECT_EQ(
      cli_.terminal.prompts,
      (std::vector<std::string>{"Current password: ", "New password: ", "Repeat the password: "}));
  cli_.terminal.available = false;
  EXPECT_EQ(cli_.Run({"users", "set-password"}).code, 2);
}

TEST_F(Commands, SettingAnotherUsersPasswordIsSensitive) {
  UseSession();
  console_.OnJson("GET", "/api/v1/me", 200,
                  json::object{{"user", {{"id", "u1"}, {"has_password", true}}}});
  console_.On("POST", "/api/v1/users/u2/password", [](const net::Request& r) {
    if (Body(r).contains("current_password")) return ErrorReply(400, "invalid_request", "no");
    return ErrorReply(403, "confirmation_required", "confirm your password first");
  });
  auto r = cli_.Run({"users", "set-password", "u2", "--password-stdin"}, "new passphrase\n");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("confirm your password first"), std::string::npos);
}

TEST_F(Commands, ApiKeysCreateShowsTheKeyOnceOrWritesIt) {
  UseKey();
  json::object key{{"id", "k2"},
                   {"name", "ci"},
                   {"prefix", "uk_NNNN"},
                   {"status", "active"},
                   {"created_at", "2027-01-15T00:00:00Z"},
                   {"expires_at", nullptr},
                   {"revoked_at", nullptr}};
  json::object with_key = key;
  const std::string new_key = "uk_NNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNN";
  with_key["key"] = new_key;
  console_.OnJson("POST", "/api/v1/api-keys", 201, with_key);
  console_.OnJson("GET", "/api/v1/api-keys", 200, json::object{{"api_keys", json::array{key}}});
  console_.OnJson("POST", "/api/v1/api-keys/k2/revoke", 200, key);

  auto r = Run({"api-keys", "create", "ci", "--expires-at", "2027-06-01T00:00:00Z"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Count(r.out, new_key), 1u);
  json::object body = Body(console_.requests().back());
  EXPECT_EQ(body["name"], "ci");
  EXPECT_EQ(body["expires_at"], "2027-06-01T00:00:00Z");

  const std::string file = cli_.home() + "/ci.key";
  r = Run({"api-keys", "create", "ci", "--key-out", file});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find(new_key), std::string::npos);
  EXPECT_EQ(uplink::testing::ReadFileOrEmpty(file), new_key);

  auto list = Run({"api-keys", "list"});
  ASSERT_EQ(list.code, 0);
  EXPECT_NE(list.out.find("uk_NNNN"), std::string::npos);
  ASSERT_EQ(Run({"api-keys", "revoke", "k2"}).code, 0);
  EXPECT_EQ(Run({"api-keys", "create", "ci", "--expires-at", "never"}).code, 2);
}

TEST_F(Commands, AuditBuildsItsQueryAndShowsTheNextPage) {
  UseKey();
  console_.OnJson("GET", "/api/v1/connections", 200,
                  json::object{{"connections", json::array{ConnectionJson(kId, "gpu-a")}}});
  console_.OnJson(
      "GET", "/api/v1/audit", 200,
      json::object{
          {"events", json::array{{{"id", "e9"},
                                  {"at", "2027-01-15T08:00:00Z"},
                                  {"actor", {{"type", "user"}, {"label", "ada@example.com"}}},
                                  {"action", "connection.rotate"},
                                  {"target", {{"type", "connection"}, {"id", kId}}},
                                  {"source_address", "127.0.0.1"},
                                  {"outcome", "ok"},
                                  {"detail", nullptr}}}},
          {"next_before", "e9"}});
  auto r = Run({"audit", "--connection", "gpu-a", "--action", "connection.rotate", "--limit", "5",
                "--before", "e10"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto request = console_.requests().back();
  EXPECT_EQ(request.Query("connection_id"), kId);
  EXPECT_EQ(request.Query("action"), "connection.rotate");
  EXPECT_EQ(request.Query("limit"), "5");
  EXPECT_EQ(request.Query("before"), "e10");
  EXPECT_NE(r.out.find("ada@example.com"), std::string::npos);
  EXPECT_NE(r.out.find("--before e9"), std::string::npos);
  EXPECT_EQ(Run({"audit", "--limit", "0"}).code, 2);
  EXPECT_EQ(Run({"audit", "--limit", "many"}).code, 2);
  EXPECT_EQ(Run({"audit", "--action", "a&b=c"}).code, 0);
  EXPECT_EQ(console_.requests().back().Query("action"), "a&b=c") << "query values are encoded";
}

}  // namespace
}  // namespace uplink::cli
