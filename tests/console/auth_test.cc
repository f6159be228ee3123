#include <gtest/gtest.h>

#include <set>

#include "common/crypto.h"
#include "console/auth/credentials.h"

namespace uplink::console {
namespace {

TEST(Credentials, MintedTokensCarry256RandomBitsAndAShortNonSecretPrefix) {
  MintedCredential agent = MintCredential(kAgentTokenKind);
  EXPECT_TRUE(agent.token.Reveal().starts_with("agt_"));
  EXPECT_EQ(agent.token.Reveal().size(), 4u + 43u);
  EXPECT_EQ(agent.lookup_prefix, agent.token.Reveal().substr(0, 12));
  EXPECT_EQ(agent.token_hash, Sha256Hex(agent.token.Reveal()));

  MintedCredential user = MintCredential(kApiKeyKind);
  EXPECT_TRUE(user.token.Reveal().starts_with("uk_"));
  EXPECT_EQ(user.token.Reveal().size(), 3u + 43u);
  EXPECT_EQ(user.lookup_prefix.size(), 11u);
}

TEST(Credentials, MintedTokensDoNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(MintCredential(kAgentTokenKind).token.Reveal());
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(Credentials, LookupPrefixRefusesTheWrongKindLengthOrAlphabet) {
  MintedCredential agent = MintCredential(kAgentTokenKind);
  EXPECT_EQ(LookupPrefix(agent.token, kAgentTokenKind), agent.lookup_prefix);
  EXPECT_FALSE(LookupPrefix(agent.token, kApiKeyKind).has_value());
  EXPECT_FALSE(LookupPrefix(Secret(agent.token.Reveal() + "A"), kAgentTokenKind).has_value());
  std::string bad = agent.token.Reveal();
  bad[20] = '+';
  EXPECT_FALSE(LookupPrefix(Secret(bad), kAgentTokenKind).has_value());
  EXPECT_FALSE(LookupPrefix(Secret(""), kAgentTokenKind).has_value());
}

TEST(Credentials, OnlyTheExactTokenMatchesItsStoredHash) {
  MintedCredential agent = MintCredential(kAgentTokenKind);
  EXPECT_TRUE(MatchesHash(agent.token, agent.token_hash));
  std::string altered = agent.token.Reveal();
  altered.back() = altered.back() == 'A' ? 'B' : 'A';
  EXPECT_FALSE(MatchesHash(Secret(altered), agent.token_hash));
  EXPECT_FALSE(MatchesHash(agent.token, ""));
}

TEST(Credentials, BearerTokenReadsOnlyTheBearerScheme) {
  net::Request request;
  EXPECT_FALSE(BearerToken(request).has_value());
  request.headers.Set("Authorization", "Basic dXNlcjpwYXNz");
  EXPECT_FALSE(BearerToken(request).has_value());
  request.headers.Set("Authorization", "Bearer ");
  EXPECT_FALSE(BearerToken(request).has_value());
  request.headers.Set("Authorization", "bearer  agt_abc ");
  ASSERT_TRUE(BearerToken(request).has_value());
  EXPECT_EQ(BearerToken(request)->Reveal(), "agt_abc");
}

TEST(Credentials, EveryFailureHasItsProtocolCode) {
  EXPECT_EQ(AuthFailureCode(AuthFailure::kMissingToken), "missing_token");
  EXPECT_EQ(AuthFailureCode(AuthFailure::kInvalidToken), "invalid_token");
  EXPECT_EQ(AuthFailureCode(AuthFailure::kRevoked), "revoked");
  EXPECT_EQ(AuthFailureCode(AuthFailure::kExpired), "expired");
}

}  // namespace
}  // namespace uplink::console
