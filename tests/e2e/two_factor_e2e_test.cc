// Two-factor sign-in end to end: a real console, a real inventory agent against uplink-kubesim,
// and the `uplink` CLI as people and scripts use it. When an admin requires two-factor
// sign-in, the running agent of a member without it is refused (owner_needs_two_factor) and
// goes unready; the member is held to enrolment, sets it up with the CLI, and the same agent,
// untouched, reports again.
#include <gtest/gtest.h>

#include "cluster.h"
#include "common/text.h"
#include "console/auth/totp.h"

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;

constexpr char kPassword[] = "correct horse battery staple";
constexpr char kMember[] = "alice@example.com";

// The key a `two-factor enroll` without a terminal printed: the otpauth URI's secret.
std::string SecretFrom(const std::string& out) {
  const std::string marker = "secret=";
  size_t at = out.find(marker);
  if (at == std::string::npos) return "";
  at += marker.size();
  return out.substr(at, out.find('&', at) - at);
}

// What the authenticator app shows `steps` steps from now.
std::string CodeFor(const std::string& secret, int steps = 0) {
  auto key = console::Base32Decode(secret);
  EXPECT_TRUE(key.ok()) << secret;
  return console::HotpCode(key.value_or(""), static_cast<std::uint64_t>(
                                                 console::TotpStep(SystemClock().Now()) + steps));
}

class TwoFactorEndToEnd : public ::testing::Test {
 protected:
  testing::CommandResult Admin(std::vector<std::string> args, const std::string& in = "") {
    return d_.Uplink(std::move(args), {{"UPLINK_API_KEY", d_.admin_key()}}, in);
  }
  // The member, with the session `uplink login` stored.
  testing::CommandResult Member(std::vector<std::string> args, const std::string& in = "") {
    return d_.Uplink(std::move(args), {}, in);
  }
  // Sets up two-factor as a script would: enroll prints the key, confirm proves a code.
  std::string Enroll(const std::function<testing::CommandResult(std::vector<std::string>,
                                                                const std::string&)>& as) {
    auto begun = as({"two-factor", "enroll"}, "");
    EXPECT_EQ(begun.exit_code, 0) << begun.out << begun.err;
    std::string secret = SecretFrom(begun.out);
    EXPECT_EQ(secret.size(), 32u) << begun.out;
    auto confirmed = as({"two-factor", "confirm", "--code-stdin"}, CodeFor(secret) + "\n");
    EXPECT_EQ(confirmed.exit_code, 0) << confirmed.out << confirmed.err;
    EXPECT_NE(confirmed.out.find("Two-factor sign-in is on"), std::string::npos);
    return secret;
  }
  // The connection as its owner reads it (even while held to enrolment).
  json::object Connection(const std::string& id) {
    auto shown = Member({"connections", "show", id, "--output", "json"});
    auto parsed = ParseJson(shown.out);
    EXPECT_TRUE(parsed.ok() && parsed->is_object()) << shown.out << shown.err;
    return parsed.ok() && parsed->is_object() ? parsed->as_object() : json::object();
  }

  Deployment d_;
};

TEST_F(TwoFactorEndToEnd, RequiringItStopsTheAgentsOfAMemberWithoutItUntilTheyEnrol) {
  SimulatedCluster& cluster = d_.StartCluster("22222222-2222-4222-8222-222222222222", 2, 8);
  d_.StartConsole({"--report-interval", "10s"});

  // A member with a password signs in with the CLI and connects their cluster.
  ASSERT_EQ(d_.Api("POST", "/api/v1/users",
                   ToJson(json::object{{"email", kMember}, {"role", "member"}, {"password", kPassword}}))
                .status,
            201);
  auto login = Member({"login", "--email", kMember, "--password-stdin"}, std::string(kPassword) + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  ASSERT_EQ(Member({"login", "--confirm", "--password-stdin"}, std::string(kPassword) + "\n").exit_code, 0);
  auto created = Member({"connections", "create", "alice-gpu", "--output", "json"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  auto connection = ParseJson(created.out);
  ASSERT_TRUE(connection.ok()) << created.out;
  const std::string id(connection->at("id").as_string());
  const std::string token(connection->at("token").as_string());

  const int health_port = testing::FreePort();
  auto agent = d_.StartAgent(cluster, d_.WriteToken(token), health_port);
  ASSERT_TRUE(testing::WaitFor([&] { return d_.AgentProbe(health_port, "/readyz") == 200; }, 60s))
      << agent->Stderr();

  // The admin sets up two-factor with the CLI, then requires it.
  auto refused_first = Admin({"two-factor", "require", "on"});
  EXPECT_EQ(refused_first.exit_code, 6) << refused_first.err;  // 409: not set up yourself
  EXPECT_NE(refused_first.err.find("for yourself first"), std::string::npos);
  Enroll([&](std::vector<std::string> args, const std::string& in) { return Admin(args, in); });
  auto required = Admin({"two-factor", "require", "on"});
  ASSERT_EQ(required.exit_code, 0) << required.err;
  EXPECT_NE(required.out.find("1 (alice@example.com)"), std::string::npos) << required.out;

  // The running agent is refused with the reason, goes unready, and the refusal is audited.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return agent->Stderr().find("owner_needs_two_factor") != std::string::npos; }, 90s))
      << agent->Stderr();
  EXPECT_TRUE(testing::WaitFor([&] { return d_.AgentProbe(health_port, "/readyz") != 200; }, 60s));
  auto audit = Admin({"audit", "--action", "connection.token_refused", "--output", "json"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  EXPECT_NE(audit.out.find(R"("reason":"owner_needs_two_factor")"), std::string::npos) << audit.out;

  // The member: held to enrolment, shown why their agent is refused.
  auto held = Member({"audit"});
  EXPECT_EQ(held.exit_code, 4);
  EXPECT_NE(held.err.find("two_factor_enrollment_required"), std::string::npos) << held.err;
  auto listed = Member({"connections", "list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("alice-gpu: agent refused (owner_needs_two_factor)"), std::string::npos)
      << listed.out;
  auto status = Member({"two-factor", "status"});
  EXPECT_NE(status.out.find("This console requires two-factor sign-in"), std::string::npos)
      << status.out;

  // They set it up; the same agent, untouched, is accepted again.
  json::object before = Connection(id);
  EXPECT_EQ(before["owner_needs_two_factor"], true);
  const json::value last_report = before["last_report_at"];
  std::string secret =
      Enroll([&](std::vector<std::string> args, const std::string& in) { return Member(args, in); });
  EXPECT_EQ(Member({"audit", "--limit", "1"}).exit_code, 0);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        json::object shown = Connection(id);
        return shown["owner_needs_two_factor"] == false && shown["last_report_at"] != last_report;
      },
      120s))
      << agent->Stderr();
  EXPECT_TRUE(testing::WaitFor([&] { return d_.AgentProbe(health_port, "/readyz") == 200; }, 60s));

  // And from now on their sign-in takes a code: the next one, since this step's is spent.
  auto without_code = Member({"login", "--email", kMember, "--password-stdin"}, std::string(kPassword) + "\n");
  EXPECT_EQ(without_code.exit_code, 2) << without_code.err;  // asks for --code-stdin
  auto with_code = Member({"login", "--email", kMember, "--password-stdin", "--code-stdin"},
                          std::string(kPassword) + "\n" + CodeFor(secret, 1) + "\n");
  EXPECT_EQ(with_code.exit_code, 0) << with_code.err;
}

}  // namespace
}  // namespace uplink::e2e
