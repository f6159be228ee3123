// What `uplink connections list` and `show` say of a connection's state (docs/cli.md): the same
// states as the web console's badges, an empty inventory told apart from one never reported,
// the token's expiry from 14 days before it, and `rotate --renew`.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_harness.h"

namespace uplink::cli {
namespace {

using testing::Cli;
using testing::ConnectionJson;
using testing::FakeConsole;

constexpr char kKey[] = "uk_KKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKK";
constexpr char kToken[] = "agt_TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT";

// The CLI's clock is 2027-01-15T08:00:00Z.
json::object Connection(const std::string& id, const std::string& cluster,
                        const std::string& status, const std::string& liveness,
                        const char* last_seen_at) {
  json::object c = ConnectionJson(id, cluster, status);
  c["liveness"] = liveness;
  c["last_seen_at"] = last_seen_at ? json::value(last_seen_at) : json::value(nullptr);
  c["expires_in_days"] = nullptr;
  return c;
}

// The line of `text` that holds `needle`.
std::string LineWith(const std::string& text, const std::string& needle) {
  size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  size_t start = text.rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  return text.substr(start, text.find('\n', at) - start);
}

class ConnectionStates : public ::testing::Test {
 protected:
  void SetUp() override { cli_.env["UPLINK_API_KEY"] = kKey; }
  testing::CliResult Run(std::vector<std::string> args) {
    args.insert(args.end(), {"--console", console_.url()});
    return cli_.Run(args);
  }

  Cli cli_;
  FakeConsole console_;
};

TEST_F(ConnectionStates, TheListSaysOfflineWheneverLivenessIsOfflineWhateverTheTokenSays) {
  json::object expiring = Connection("5555555555555555", "expiring", "active", "connected",
                                     "2027-01-15T07:59:30Z");
  expiring["expires_at"] = "2027-01-18T00:00:00Z";
  expiring["expires_in_days"] = 3;
  json::array list{
      Connection("1111111111111111", "fresh", "never", "waiting", nullptr),
      Connection("2222222222222222", "healthy", "active", "connected", "2027-01-15T07:59:50Z"),
      Connection("3333333333333333", "quiet", "active", "stale", "2027-01-15T07:58:00Z"),
      // The token's status says stale (no call for 10 minutes): offline for days all the same.
      Connection("4444444444444444", "gone", "stale", "offline", "2027-01-12T08:00:00Z"),
      expiring,
      Connection("6666666666666666", "cut-off", "revoked", "offline", "2027-01-15T05:00:00Z"),
      Connection("7777777777777777", "never-ran", "revoked", "waiting", nullptr),
  };
  console_.OnJson("GET", "/api/v1/connections", 200, json::object{{"connections", list}});
  auto r = Run({"connections", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("STATE"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("LIVENESS"), std::string::npos) << "one state, not two that disagree";
  EXPECT_NE(LineWith(r.out, "fresh").find("waiting for agent"), std::string::npos) << r.out;
  EXPECT_NE(LineWith(r.out, "healthy").find("connected"), std::string::npos) << r.out;
  EXPECT_NE(LineWith(r.out, "quiet").find("stale 2 min"), std::string::npos) << r.out;
  EXPECT_NE(LineWith(r.out, "gone").find("offline 3 d"), std::string::npos) << r.out;
  EXPECT_EQ(LineWith(r.out, "gone").find("stale"), std::string::npos) << r.out;
  EXPECT_NE(LineWith(r.out, "expiring").find("in 3 days (2027-01-18T00:00:00Z)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(LineWith(r.out, "cut-off").find("offline 3 h, token revoked"), std::string::npos)
      << r.out;
  EXPECT_NE(LineWith(r.out, "never-ran").find("revoked"), std::string::npos) << r.out;
  EXPECT_EQ(LineWith(r.out, "never-ran").find("offline"), std::string::npos) << r.out;
}

TEST_F(ConnectionStates, ShowTellsAnEmptyInventoryFromOneNeverReported) {
  json::object reported = Connection("2222222222222222", "empty", "active", "connected",
                                     "2027-01-15T07:59:50Z");
  reported["last_report_at"] = "2027-01-15T07:59:50Z";
  reported["selector"] = "nvidia.com/gpu.present=true";
  console_.OnJson("GET", "/api/v1/connections/2222222222222222", 200, reported);
  auto r = Run({"connections", "show", "2222222222222222"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("nodes: 0 match selector nvidia.com/gpu.present=true"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Detection is not qualification"), std::string::npos);
  EXPECT_NE(r.out.find("it is not a successful GPU qualification"), std::string::npos);
  EXPECT_EQ(r.out.find("none reported yet"), std::string::npos);

  console_.OnJson("GET", "/api/v1/connections/1111111111111111", 200,
                  Connection("1111111111111111", "new", "never", "waiting", nullptr));
  r = Run({"connections", "show", "1111111111111111"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("nodes: none reported yet"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("qualification"), std::string::npos);
  EXPECT_NE(r.out.find("waiting for agent"), std::string::npos);
}

TEST_F(ConnectionStates, ShowSaysWhenTheTokenExpiresSoonAndHowToRenewIt) {
  json::object c = Connection("5555555555555555", "prod", "active", "connected",
                              "2027-01-15T07:59:30Z");
  c["expires_at"] = "2027-01-16T00:00:00Z";
  c["expires_in_days"] = 1;
  console_.OnJson("GET", "/api/v1/connections/5555555555555555", 200, c);
  auto r = Run({"connections", "show", "5555555555555555"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("in 1 day (2027-01-16T00:00:00Z)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("uplink connections rotate prod --renew"), std::string::npos) << r.out;

  c["expires_in_days"] = nullptr;
  c["expires_at"] = "2027-04-01T00:00:00Z";
  console_.OnJson("GET", "/api/v1/connections/5555555555555555", 200, c);
  r = Run({"connections", "show", "5555555555555555"});
  EXPECT_EQ(r.out.find("--renew"), std::string::npos) << r.out;
}

TEST_F(ConnectionStates, RotateRenewAsksForANewInstallationCode) {
  const std::string path = "/api/v1/connections/5555555555555555/rotate";
  json::object reply = Connection("5555555555555555", "prod", "active", "connected",
                                  "2027-01-15T07:59:30Z");
  reply["token"] = kToken;
  console_.OnJson("POST", path, 200, reply);
  ASSERT_EQ(Run({"connections", "rotate", "5555555555555555", "--renew"}).code, 0);
  ASSERT_EQ(Run({"connections", "rotate", "5555555555555555"}).code, 0);
  // The reply carries a token rather than a code: only what was sent matters here.
  (void)Run({"connections", "rotate", "5555555555555555", "--renew", "--handover"});
  auto sent = console_.RequestsTo("POST", path);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(ParseJson(sent[0].body).value(), (json::object{{"renew", true}}));
  EXPECT_TRUE(sent[1].body.empty() || sent[1].body == "{}") << sent[1].body;
  EXPECT_EQ(ParseJson(sent[2].body).value(), (json::object{{"handover", true}, {"renew", true}}));
}

}  // namespace
}  // namespace uplink::cli
