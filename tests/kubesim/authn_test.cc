// The token file (kube-apiserver's --token-auth-file CSV) and bearer-token authentication.
#include "kubesim/authn.h"

#include <gtest/gtest.h>

namespace uplink::kubesim {
namespace {

TEST(TokenAuthFile, ReadsUsersUidsAndGroupsAsKubeApiserverDoes) {
  Result<std::vector<TokenUser>> users = ParseTokenAuthFile(
      "admin-ish,jane,1001,\"dev,ops\"\r\n"
      "\n"
      "  sa-token, system:serviceaccount:uplink-system:cluster-agent,2002\n"
      "\"quoted,token\",\"o\"\"brien\",3003,\n");
  ASSERT_TRUE(users.ok()) << users.status().ToString();
  ASSERT_EQ(users->size(), 3u);
  EXPECT_EQ((*users)[0].token.Reveal(), "admin-ish");
  EXPECT_EQ((*users)[0].user.name, "jane");
  EXPECT_EQ((*users)[0].uid, "1001");
  EXPECT_EQ((*users)[0].user.groups,
            (std::vector<std::string>{"dev", "ops", "system:authenticated"}));
  // Leading spaces go (TrimLeadingSpace); trailing ones would stay, and be refused.
  EXPECT_EQ((*users)[1].token.Reveal(), "sa-token");
  EXPECT_EQ((*users)[1].user.name, "system:serviceaccount:uplink-system:cluster-agent");
  EXPECT_EQ((*users)[1].user.groups,
            (std::vector<std::string>{"system:serviceaccounts",
                                      "system:serviceaccounts:uplink-system",
                                      "system:authenticated"}));
  EXPECT_EQ((*users)[2].token.Reveal(), "quoted,token");
  EXPECT_EQ((*users)[2].user.name, "o\"brien");
  EXPECT_EQ((*users)[2].user.groups, std::vector<std::string>{"system:authenticated"});
}

TEST(TokenAuthFile, HostileFilesAreRefusedNamingTheLineAndNeverTheToken) {
  struct Bad {
    std::string text;
    std::string message;
  };
  const Bad cases[] = {
      {"only-token\n", "token file line 1: must have at least 3 columns (token, user name, user "
                       "uid), found 1"},
      {"ok,u,1\ntok,user\n", "token file line 2: must have at least 3 columns (token, user name, "
                             "user uid), found 2"},
      {",user,1\n", "token file line 1: the token is empty"},
      {"tok,,1\n", "token file line 1: the user name is empty"},
      {"secret-one,a,1\nsecret-one,b,2\n", "token file line 2: the token repeats an earlier line's"},
      {"secret two,a,1\n", "token file line 1: the token holds characters a bearer token cannot"},
      {"secret-three ,a,1\n",
       "token file line 1: the token holds characters a bearer token cannot"},
      {"\"unterminated,a,1\n", "token file line 1: a quoted field is not closed"},
      {"\"tok\"x,a,1\n", "token file line 1: extraneous or missing \" in quoted-field"},
      {"to\"k,a,1\n", "token file line 1: bare \" in non-quoted-field"},
      {std::string("tok,a\0b,1\n", 10), "token file line 1: holds a NUL byte"},
      {"tok,a\x01,1\n", "token file line 1: the user name or uid holds control characters"},
      {"tok,a,1,\"g\x7f\"\n", "token file line 1: a group holds control characters"},
      {"tok,system:serviceaccount:ns,1\n",
       "token file line 1: a service account user must be system:serviceaccount:<namespace>:<name>"},
      {"tok,system:serviceaccount::name,1\n",
       "token file line 1: a service account user must be system:serviceaccount:<namespace>:<name>"},
      {"tok,system:serviceaccount:a:b:c,1\n",
       "token file line 1: a service account user must be system:serviceaccount:<namespace>:<name>"},
      {std::string(5000, 't') + ",a,1\n", "token file line 1: the token is longer than 4096 bytes"},
      {std::string(kMaxTokenFileBytes + 1, '\n'), "the token file is larger than 1048576 bytes"},
  };
  for (const Bad& bad : cases) {
    Result<std::vector<TokenUser>> users = ParseTokenAuthFile(bad.text);
    ASSERT_FALSE(users.ok()) << bad.text.substr(0, 80);
    EXPECT_EQ(users.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(users.status().message(), bad.message) << bad.text.substr(0, 80);
    EXPECT_EQ(users.status().message().find("secret"), std::string::npos);
  }
  std::string many;
  for (size_t i = 0; i <= kMaxTokenFileEntries; ++i) many += "t" + std::to_string(i) + ",u,1\n";
  EXPECT_EQ(ParseTokenAuthFile(many).status().message(),
            "the token file has more than 10000 entries");
  // Truncated at every byte, a valid file parses or fails cleanly.
  const std::string valid = "tok-a,jane,1,\"dev,ops\"\n\"tok,b\",bob,2\n";
  for (size_t length = 0; length <= valid.size(); ++length) {
    Result<std::vector<TokenUser>> users = ParseTokenAuthFile(valid.substr(0, length));
    if (users.ok()) {
      EXPECT_LE(users->size(), 2u) << length;
    } else {
      EXPECT_EQ(users.status().code(), StatusCode::kInvalidArgument) << length;
    }
  }
}

TEST(TokenAuthenticator, MapsBearerTokensToTheirUsers) {
  Result<std::vector<TokenUser>> users =
      ParseTokenAuthFile("sa-token,system:serviceaccount:ns:agent,1\n");
  ASSERT_TRUE(users.ok());
  ASSERT_TRUE(CheckAdminTokenUnique(Secret("admin-token"), *users).ok());
  TokenAuthenticator authenticator(Secret("admin-token"), std::move(*users));
  std::optional<UserInfo> admin = authenticator.Authenticate("Bearer admin-token");
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin->name, "kubesim-admin");
  EXPECT_TRUE(admin->InGroup("system:masters"));
  std::optional<UserInfo> agent = authenticator.Authenticate("Bearer sa-token");
  ASSERT_TRUE(agent);
  EXPECT_EQ(agent->name, "system:serviceaccount:ns:agent");
  EXPECT_FALSE(agent->InGroup("system:masters"));
  for (const char* refused : {"", "Bearer", "Bearer ", "bearer sa-token", "Basic sa-token",
                              "Bearer sa-token ", "Bearer sa-tokenx", "Bearer  sa-token"}) {
    EXPECT_FALSE(authenticator.Authenticate(refused)) << refused;
  }
}

TEST(TokenAuthenticator, AFileTokenMayNotBeTheAdminToken) {
  Result<std::vector<TokenUser>> users = ParseTokenAuthFile("same,jane,1\n");
  ASSERT_TRUE(users.ok());
  EXPECT_EQ(CheckAdminTokenUnique(Secret("same"), *users).message(),
            "the token of user \"jane\" in the token file is the admin token");
}

}  // namespace
}  // namespace uplink::kubesim
