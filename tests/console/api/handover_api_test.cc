// Handovers end to end through the router: a code instead of a token, redeemed once within
// ten minutes, superseded by any later rotate or revoke.
#include <gtest/gtest.h>

#include "api_fixture.h"
#include "console/api/api_objects.h"

namespace uplink::console {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using testing::Body;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::Object;
using testing::Text;

class HandoverApiTest : public testing::ApiTest {
 protected:
  json::object CreateWithHandover(const std::string& cluster_name = "prod") {
    return CreateConnection(admin_key_, cluster_name, R"(,"handover":true)");
  }

  net::Response Redeem(const std::string& code,
                       const std::string& address = testing::kClientAddress) {
    return Send("POST", "/api/v1/handovers/redeem", "", ToJson(json::object{{"code", code}}),
                address);
  }

  std::string HandoverStatus(const std::string& id) {
    return Text(Object(ShowConnection(admin_key_, id), "handover"), "status");
  }

  void ExpectGone(const net::Response& response, const std::string& code) {
    EXPECT_EQ(response.status, 410) << response.body;
    EXPECT_EQ(ErrorCode(response), code);
    EXPECT_NE(ErrorMessage(response).find("rotate"), std::string::npos) << response.body;
    EXPECT_EQ(ErrorMessage(response).find(code + ":"), std::string::npos) << response.body;
  }
};

TEST_F(HandoverApiTest, ACodeIsRedeemedOnceForTheConnectionsToken) {
  json::object created = CreateWithHandover();
  std::string id = Text(created, "id");
  std::string code = Text(created, "handover_code");
  EXPECT_TRUE(code.starts_with("hoc_"));
  EXPECT_FALSE(created.contains("token"));
  EXPECT_EQ(Text(created, "handover_expires_at"), FormatRfc3339(clock_.Now() + minutes(10)));
  json::object handover = Object(created, "handover");
  EXPECT_EQ(Text(handover, "status"), "pending");
  EXPECT_EQ(Text(handover, "created_at"), FormatRfc3339(clock_.Now()));
  EXPECT_TRUE(handover.at("redeemed_at").is_null());
  EXPECT_EQ(Text(created, "status"), "never");

  clock_.Advance(minutes(3));
  net::Response redeemed = Redeem(code);
  ASSERT_EQ(redeemed.status, 200) << redeemed.body;
  EXPECT_EQ(redeemed.headers.Get("Cache-Control"), "no-store");
  json::object body = Body(redeemed);
  std::string token = Text(body, "token");
  EXPECT_TRUE(token.starts_with("agt_"));
  EXPECT_EQ(Text(body, "id"), id);
  EXPECT_EQ(Text(body, "token_prefix"), token.substr(0, 12));
  EXPECT_EQ(Text(body, "cluster_name"), "prod");
  EXPECT_EQ(Text(body, "expires_at"), Text(created, "expires_at"));
  // The code's holder gets what installing the token needs, not the cluster's inventory.
  for (const char* withheld : {"nodes", "security_events", "cluster_uid", "agents", "handover"}) {
    EXPECT_FALSE(body.contains(withheld)) << withheld;
  }
  json::object shown = Object(ShowConnection(admin_key_, id), "handover");
  EXPECT_EQ(Text(shown, "status"), "redeemed");
  EXPECT_EQ(Text(shown, "redeemed_at"), FormatRfc3339(clock_.Now()));
  EXPECT_EQ(ReportFrom(token, "uid-a").status, 200);

  ExpectGone(Redeem(code), "handover_redeemed");
  EXPECT_EQ(HandoverStatus(id), "redeemed");
  EXPECT_EQ(ReportFrom(token, "uid-a").status, 200) << "a refused second redeem changed the token";

  AuditEvent event = LastAudit("handover.redeem");
  EXPECT_EQ(event.actor_type, "anonymous");
  EXPECT_EQ(event.actor_label, code.substr(0, 12));
  EXPECT_EQ(event.credential, "handover_code");
  EXPECT_EQ(event.target_id, id);
  EXPECT_EQ(event.owner_id, AdminId());
  EXPECT_EQ(LastAudit("handover.refused").detail, R"({"reason":"handover_redeemed"})");
  json::object create_detail = DetailJson(LastAudit("connection.create").detail);
  EXPECT_EQ(create_detail.at("handover").as_bool(), true);
  EXPECT_EQ(Text(create_detail, "handover_prefix"), code.substr(0, 12));
}

TEST_F(HandoverApiTest, ACodeExpiresAfterTenMinutes) {
  json::object created = CreateWithHandover();
  clock_.Advance(minutes(10));
  ExpectGone(Redeem(Text(created, "handover_code")), "handover_expired");
  EXPECT_EQ(HandoverStatus(Text(created, "id")), "expired");
  EXPECT_EQ(LastAudit("handover.refused").detail, R"({"reason":"handover_expired"})");
}

TEST_F(HandoverApiTest, APlainRotateSupersedesThePendingCode) {
  json::object created = CreateWithHandover();
  std::string id = Text(created, "id");
  net::Response rotated = AsAdmin("POST", "/api/v1/connections/" + id + "/rotate");
  ASSERT_EQ(rotated.status, 200);
  EXPECT_EQ(HandoverStatus(id), "superseded");
  ExpectGone(Redeem(Text(created, "handover_code")), "handover_superseded");
  EXPECT_EQ(ReportFrom(Text(Body(rotated), "token"), "uid-a").status, 200);
}

TEST_F(HandoverApiTest, ARotateWithHandoverTurnsOffTheOldTokenAndTheOldCode) {
  json::object created = CreateConnection(admin_key_, "prod");
  std::string id = Text(created, "id");
  std::string old_token = Text(created, "token");
  ASSERT_EQ(ReportFrom(old_token, "uid-a").status, 200);

  json::object first =
      Body(AsAdmin("POST", "/api/v1/connections/" + id + "/rotate", R"({"handover":true})"));
  EXPECT_FALSE(first.contains("token"));
  EXPECT_EQ(ErrorCode(ReportFrom(old_token, "uid-a")), "invalid_token");
  EXPECT_EQ(Text(Object(first, "handover"), "status"), "pending");
  EXPECT_EQ(Text(first, "expires_at"), Text(created, "expires_at"));

  json::object second =
      Body(AsAdmin("POST", "/api/v1/connections/" + id + "/rotate", R"({"handover":true})"));
  ExpectGone(Redeem(Text(first, "handover_code")), "handover_superseded");
  net::Response redeemed = Redeem(Text(second, "handover_code"));
  ASSERT_EQ(redeemed.status, 200) << redeemed.body;
  std::string token = Text(Body(redeemed), "token");
  EXPECT_EQ(ReportFrom(token, "uid-a").status, 200) << "the cluster binding survives";
  EXPECT_EQ(Text(ShowConnection(admin_key_, id), "cluster_uid"), "uid-a");
}

TEST_F(HandoverApiTest, ARevokeSupersedesThePendingCode) {
  json::object created = CreateWithHandover();
  std::string id = Text(created, "id");
  ASSERT_EQ(AsAdmin("POST", "/api/v1/connections/" + id + "/revoke").status, 200);
  ExpectGone(Redeem(Text(created, "handover_code")), "handover_superseded");
  EXPECT_EQ(HandoverStatus(id), "superseded");
}

TEST_F(HandoverApiTest, UnknownAndMalformedCodesAre401InvalidToken) {
  json::object created = CreateWithHandover();
  std::string code = Text(created, "handover_code");
  std::string wrong_rest = code.substr(0, 12) + std::string(code.size() - 12, 'A');
  for (const std::string& bad :
       {wrong_rest, std::string("hoc_short"), "agt_" + code.substr(4), std::string("")}) {
    net::Response response = Redeem(bad);
    EXPECT_EQ(response.status, 401) << bad;
    EXPECT_EQ(ErrorCode(response), "invalid_token");
    EXPECT_EQ(response.headers.Get("WWW-Authenticate"), "Bearer");
  }
  EXPECT_EQ(Metric("uplink_console_auth_failures_total",
                   {{"kind", "handover_code"}, {"reason", "invalid_token"}}),
            4);
  EXPECT_EQ(Redeem(code).status, 200) << "failed guesses do not burn the real code";
  EXPECT_EQ(Send("POST", "/api/v1/handovers/redeem", "", R"({"code":1})").status, 400);
  EXPECT_EQ(Send("POST", "/api/v1/handovers/redeem", "", R"({})").status, 400);
}

TEST_F(HandoverApiTest, AHandoverOfADeactivatedOwnersConnectionIsRefused) {
  testing::TestUser member = AddUser("member@example.com");
  json::object created = CreateConnection(member.api_key, "prod", R"(,"handover":true)");
  ASSERT_EQ(AsAdmin("POST", "/api/v1/users/" + member.id + "/deactivate").status, 200);
  net::Response refused = Redeem(Text(created, "handover_code"));
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(ErrorCode(refused), "owner_deactivated");
  EXPECT_EQ(LastAudit("handover.refused").detail, R"({"reason":"owner_deactivated"})");
  ASSERT_EQ(AsAdmin("POST", "/api/v1/users/" + member.id + "/reactivate").status, 200);
  EXPECT_EQ(Redeem(Text(created, "handover_code")).status, 200);
}

TEST_F(HandoverApiTest, MakingACodeWithASessionNeedsConfirmation) {
  ASSERT_EQ(AsAdmin("POST", "/api/v1/users/" + AdminId() + "/password",
                    ToJson(json::object{{"password", testing::kPassword}}))
                .status,
            200);
  std::string session = SignIn("admin@example.com");
  net::Response refused = Send("POST", "/api/v1/connections", session,
                               R"({"agent_name":"a","cluster_name":"c","handover":true})");
  EXPECT_EQ(ErrorCode(refused), "confirmation_required");
  EXPECT_EQ(Send("POST", "/api/v1/connections", admin_key_,
                 R"({"agent_name":"a","cluster_name":"c","handover":"yes"})")
                .status,
            400);
}

}  // namespace
}  // namespace uplink::console
