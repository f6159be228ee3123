#include "common/crypto.h"

#include <gtest/gtest.h>

#include <cctype>
#include <set>

namespace uplink {
namespace {

TEST(NewToken, HasThePrefixAnd256BitsInUrlSafeText) {
  Secret token = NewToken("agt_");
  const std::string& text = token.Reveal();
  ASSERT_EQ(text.rfind("agt_", 0), 0u);
  EXPECT_EQ(text.size(), 4u + 43u);  // 32 bytes -> 43 base64url characters
  EXPECT_EQ(text.find_first_not_of(
                "agt_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
            std::string::npos);
  auto decoded = Base64UrlDecode(text.substr(4));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->size(), 32u);
}

TEST(NewToken, NeverRepeats) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(seen.insert(NewToken("uk_").Reveal()).second);
}

TEST(Sha256Hex, MatchesTheKnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Hex, EqualsComparesTheWholeDigestOnly) {
  const std::string abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  EXPECT_TRUE(Sha256HexEquals("abc", abc));
  EXPECT_FALSE(Sha256HexEquals("abd", abc));
  EXPECT_FALSE(Sha256HexEquals("abc", abc.substr(0, 63)));
  EXPECT_FALSE(Sha256HexEquals("abc", abc + "0"));
  EXPECT_FALSE(Sha256HexEquals("abc", ""));
  std::string upper = abc;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_FALSE(Sha256HexEquals("abc", upper));  // stored hashes are lower case
}

TEST(Base64, RoundTripsEveryLength) {
  std::string data;
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(*Base64Decode(Base64Encode(data)), data);
    EXPECT_EQ(*Base64UrlDecode(Base64UrlEncode(data)), data);
    data += static_cast<char>(i * 37);
  }
}

TEST(Base64, RefusesCharactersOutsideTheAlphabetAndImpossibleLengths) {
  EXPECT_FALSE(Base64Decode("ab$d").ok());
  EXPECT_FALSE(Base64UrlDecode("ab+d").ok());
  EXPECT_FALSE(Base64Decode("abcde").ok());
}

TEST(Secret, PrintsRedactedAndComparesInConstantTime) {
  Secret a("agt_secret"), b("agt_secret"), c("agt_other!");
  std::ostringstream out;
  out << a;
  EXPECT_EQ(out.str(), "[redacted]");
  EXPECT_TRUE(a.Equals(b));
  EXPECT_FALSE(a.Equals(c));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
}

TEST(ConstantTimeEquals, ADifferenceInAnyByteOrBitIsFound) {
  const std::string token = "agt_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG";
  EXPECT_TRUE(ConstantTimeEquals(token, token));
  for (size_t i = 0; i < token.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string other = token;
      other[i] = static_cast<char>(other[i] ^ (1 << bit));
      EXPECT_FALSE(ConstantTimeEquals(token, other)) << "byte " << i << " bit " << bit;
    }
  }
}

}  // namespace
}  // namespace uplink
