#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <set>
#include <vector>

#include "common/crypto.h"
#include "common/secret.h"
#include "console/auth/credentials.h"

namespace uplink::console {
namespace {

TEST(Credentials, MintedTokensCarry256RandomBitsAndAShortNonSecretPrefix) {
  MintedCredential agent = MintCredential(protocol::kAgentTokenPrefix);
  EXPECT_TRUE(agent.token.Reveal().starts_with("agt_"));
  EXPECT_EQ(agent.token.Reveal().size(), 4u + 43u);
  EXPECT_EQ(agent.lookup_prefix, agent.token.Reveal().substr(0, 12));
  EXPECT_EQ(agent.token_hash, Sha256Hex(agent.token.Reveal()));

  MintedCredential user = MintCredential(protocol::kApiKeyPrefix);
  EXPECT_TRUE(user.token.Reveal().starts_with("uk_"));
  EXPECT_EQ(user.token.Reveal().size(), 3u + 43u);
  EXPECT_EQ(user.lookup_prefix.size(), 11u);
}

TEST(Credentials, MintedTokensDoNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    seen.insert(MintCredential(protocol::kAgentTokenPrefix).token.Reveal());
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(Credentials, LookupPrefixRefusesTheWrongKindLengthOrAlphabet) {
  MintedCredential agent = MintCredential(protocol::kAgentTokenPrefix);
  EXPECT_EQ(LookupPrefix(agent.token, protocol::kAgentTokenPrefix), agent.lookup_prefix);
  EXPECT_FALSE(LookupPrefix(agent.token, protocol::kApiKeyPrefix).has_value());
  EXPECT_FALSE(
      LookupPrefix(Secret(agent.token.Reveal() + "A"), protocol::kAgentTokenPrefix).has_value());
  std::string bad = agent.token.Reveal();
  bad[20] = '+';
  EXPECT_FALSE(LookupPrefix(Secret(bad), protocol::kAgentTokenPrefix).has_value());
  EXPECT_FALSE(LookupPrefix(Secret(""), protocol::kAgentTokenPrefix).has_value());
}

TEST(Credentials, OnlyTheExactTokenMatchesItsStoredHash) {
  MintedCredential agent = MintCredential(protocol::kAgentTokenPrefix);
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

TEST(Credentials, SessionTokensAndHandoverCodesHaveTheirOwnPrefixes) {
  MintedCredential session = MintCredential(protocol::kSessionPrefix);
  MintedCredential handover = MintCredential(protocol::kHandoverCodePrefix);
  EXPECT_TRUE(session.token.Reveal().starts_with("skt_"));
  EXPECT_TRUE(handover.token.Reveal().starts_with("hoc_"));
  EXPECT_EQ(session.token.Reveal().size(), 4u + 43u);
  EXPECT_EQ(handover.token.Reveal().size(), 4u + 43u);
  EXPECT_EQ(LookupPrefix(session.token, protocol::kSessionPrefix), session.lookup_prefix);
  EXPECT_EQ(LookupPrefix(handover.token, protocol::kHandoverCodePrefix), handover.lookup_prefix);
  EXPECT_EQ(session.lookup_prefix.size(), 12u);
  EXPECT_EQ(handover.lookup_prefix, handover.token.Reveal().substr(0, 12));
  EXPECT_TRUE(MatchesHash(session.token, session.token_hash));
  EXPECT_TRUE(MatchesHash(handover.token, handover.token_hash));
  EXPECT_FALSE(MatchesHash(session.token, handover.token_hash));
}

TEST(Credentials, LookupPrefixNeverTakesOneFourLetterKindForAnother) {
  // skt_, hoc_ and agt_ have the same length, so only the prefix itself tells them apart.
  MintedCredential session = MintCredential(protocol::kSessionPrefix);
  MintedCredential handover = MintCredential(protocol::kHandoverCodePrefix);
  MintedCredential agent = MintCredential(protocol::kAgentTokenPrefix);
  for (std::string_view kind : {protocol::kSessionPrefix, protocol::kHandoverCodePrefix,
                                protocol::kAgentTokenPrefix, protocol::kApiKeyPrefix}) {
    EXPECT_EQ(LookupPrefix(session.token, kind).has_value(), kind == protocol::kSessionPrefix)
        << kind;
    EXPECT_EQ(LookupPrefix(handover.token, kind).has_value(), kind == protocol::kHandoverCodePrefix)
        << kind;
    EXPECT_EQ(LookupPrefix(agent.token, kind).has_value(), kind == protocol::kAgentTokenPrefix)
        << kind;
  }
  std::string upper = session.token.Reveal();
  upper.replace(0, 4, "SKT_");
  EXPECT_FALSE(LookupPrefix(Secret(upper), protocol::kSessionPrefix).has_value());
  std::string spaced = " " + handover.token.Reveal().substr(0, 46);
  EXPECT_FALSE(LookupPrefix(Secret(spaced), protocol::kHandoverCodePrefix).has_value());
  std::string with_nul = handover.token.Reveal();
  with_nul[30] = '\0';
  EXPECT_FALSE(LookupPrefix(Secret(with_nul), protocol::kHandoverCodePrefix).has_value());
}

TEST(ConstantTimeEquals, StringsOfDifferentLengthsAreNeverEqual) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("abcd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("abc\0", 4), "abc"));
}

// Timing: a comparison that stops at the first differing byte answers sooner for a guess
// that is wrong early, which lets an attacker find a hash byte by byte. These tests time a
// mismatch in the first byte against one in the last. Rather than a wall-clock threshold
// they compare the fastest of many interleaved rounds on each side: a busy machine only ever
// adds time to a round, so the fastest rounds are the ones it left alone, and medians moved
// with the load (they failed on a loaded 2-core machine). A short-circuiting comparison is
// hundreds of times faster on the long inputs and several times on a hash.

// Keeps the compiler from dropping or hoisting a call whose result is otherwise unused.
void KeepResult(bool value) { asm volatile("" : : "r"(value) : "memory"); }

// The fastest time of `calls` calls of `differs_first` over that of `differs_last`, over
// `rounds` rounds that alternate which goes first. A machine busy with other work can still
// skew one measurement, so it is taken up to five times and the one nearest 1 is returned:
// a comparison that leaks where it stopped is off in every one, noise only in some.
double FastestTimeRatio(const std::function<bool()>& differs_first,
                       const std::function<bool()>& differs_last, int calls, int rounds) {
  auto time_calls = [calls](const std::function<bool()>& compare) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) KeepResult(compare());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double nearest = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<double> first_times;
    std::vector<double> last_times;
    for (int round = 0; round < rounds; ++round) {
      if (round % 2 == 0) {
        first_times.push_back(time_calls(differs_first));
        last_times.push_back(time_calls(differs_last));
      } else {
        last_times.push_back(time_calls(differs_last));
        first_times.push_back(time_calls(differs_first));
      }
    }
    const double ratio = *std::min_element(first_times.begin(), first_times.end()) /
                         *std::min_element(last_times.begin(), last_times.end());
    if (attempt == 0 || std::abs(std::log(ratio)) < std::abs(std::log(nearest))) nearest = ratio;
    if (nearest > 0.5 && nearest < 2.0) break;
  }
  return nearest;
}

// `text` with the byte at `index` changed.
std::string Altered(std::string text, std::size_t index) {
  text[index] = static_cast<char>(text[index] ^ 0x01);
  return text;
}

TEST(ConstantTimeEquals, TakesAsLongForAnEarlyMismatchAsForALateOne) {
  const std::string stored = RandomBytes(4096);
  const std::string differs_first = Altered(stored, 0);
  const std::string differs_last = Altered(stored, stored.size() - 1);
  ASSERT_FALSE(ConstantTimeEquals(stored, differs_first));
  ASSERT_FALSE(ConstantTimeEquals(stored, differs_last));
  double ratio = FastestTimeRatio([&] { return ConstantTimeEquals(stored, differs_first); },
                                 [&] { return ConstantTimeEquals(stored, differs_last); },
                                 /*calls=*/2'000, /*rounds=*/31);
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 2.0);
}

TEST(ConstantTimeEquals, TakesAsLongForAnEarlyMismatchOfAStoredHash) {
  const std::string stored = Sha256Hex("agt_stored");
  const std::string differs_first = Altered(stored, 0);
  const std::string differs_last = Altered(stored, stored.size() - 1);
  double ratio = FastestTimeRatio([&] { return ConstantTimeEquals(stored, differs_first); },
                                 [&] { return ConstantTimeEquals(stored, differs_last); },
                                 /*calls=*/200'000, /*rounds=*/31);
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 2.0);
}

TEST(Credentials, MatchesHashTakesAsLongForAnEarlyMismatchAsForALateOne) {
  MintedCredential agent = MintCredential(protocol::kAgentTokenPrefix);
  const std::string differs_first = Altered(agent.token_hash, 0);
  const std::string differs_last = Altered(agent.token_hash, agent.token_hash.size() - 1);
  ASSERT_FALSE(MatchesHash(agent.token, differs_first));
  ASSERT_FALSE(MatchesHash(agent.token, differs_last));
  double ratio = FastestTimeRatio([&] { return MatchesHash(agent.token, differs_first); },
                                 [&] { return MatchesHash(agent.token, differs_last); },
                                 /*calls=*/20'000, /*rounds=*/31);
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 2.0);
}

}  // namespace
}  // namespace uplink::console
