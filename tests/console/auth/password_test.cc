#include "console/auth/password.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <array>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace uplink::console {
namespace {

// libsodium's cheapest argon2id settings keep the tests fast; one test uses the defaults.
PasswordHashingOptions FastOptions(int max_concurrent = 2) {
  return PasswordHashingOptions{.opslimit = crypto_pwhash_OPSLIMIT_MIN,
                                .memlimit = crypto_pwhash_MEMLIMIT_MIN,
                                .max_concurrent = max_concurrent};
}

const Secret kPassword("correct horse battery staple");

TEST(PasswordHasher, TheDefaultsHashWithArgon2idAt64MiBAndTwoPasses) {
  PasswordHasher hasher;
  Result<std::string> hash = hasher.Hash(kPassword);
  ASSERT_TRUE(hash.ok()) << hash.status().ToString();
  EXPECT_TRUE(hash->starts_with("$argon2id$v=19$m=65536,t=2,p=1$")) << *hash;
  EXPECT_TRUE(hasher.Verify(kPassword, *hash));
  EXPECT_FALSE(hasher.Verify(Secret("correct horse battery stapler"), *hash));
}

TEST(PasswordHasher, OnlyTheRightPasswordMatches) {
  PasswordHasher hasher(FastOptions());
  Result<std::string> hash = hasher.Hash(kPassword);
  ASSERT_TRUE(hash.ok());
  EXPECT_TRUE(hash->starts_with("$argon2id$v=19$m=8,t=1,p=1$")) << *hash;
  EXPECT_TRUE(hasher.Verify(kPassword, *hash));
  EXPECT_FALSE(hasher.Verify(Secret("Correct horse battery staple"), *hash));
  EXPECT_FALSE(hasher.Verify(Secret(""), *hash));
  EXPECT_FALSE(hasher.Verify(Secret(kPassword.Reveal() + '\0'), *hash));
}

TEST(PasswordHasher, TheHashNeverContainsThePassword) {
  PasswordHasher hasher(FastOptions());
  Result<std::string> hash = hasher.Hash(kPassword);
  ASSERT_TRUE(hash.ok());
  EXPECT_EQ(hash->find("horse"), std::string::npos);
}

TEST(PasswordHasher, EachHashHasItsOwnSalt) {
  PasswordHasher hasher(FastOptions());
  Result<std::string> first = hasher.Hash(kPassword);
  Result<std::string> second = hasher.Hash(kPassword);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(*first, *second);
  EXPECT_TRUE(hasher.Verify(kPassword, *first));
  EXPECT_TRUE(hasher.Verify(kPassword, *second));
}

TEST(PasswordHasher, PasswordsWithAnyBytesRoundTrip) {
  PasswordHasher hasher(FastOptions());
  const Secret with_nul(std::string("before\0after-nul", 16));
  const Secret utf8("pässwörd-日本語-🔑");
  const Secret long_one(std::string(1000, 'x') + "y");
  for (const Secret* password : {&with_nul, &utf8, &long_one}) {
    Result<std::string> hash = hasher.Hash(*password);
    ASSERT_TRUE(hash.ok());
    EXPECT_TRUE(hasher.Verify(*password, *hash));
  }
  Result<std::string> hash = hasher.Hash(with_nul);
  ASSERT_TRUE(hash.ok());
  EXPECT_FALSE(hasher.Verify(Secret("before"), *hash)) << "the bytes after a NUL count";
}

TEST(PasswordHasher, MalformedOrTruncatedHashesNeverMatch) {
  PasswordHasher hasher(FastOptions());
  Result<std::string> hash = hasher.Hash(kPassword);
  ASSERT_TRUE(hash.ok());
  for (std::size_t length = 0; length < hash->size(); ++length) {
    EXPECT_FALSE(hasher.Verify(kPassword, hash->substr(0, length))) << "prefix of " << length;
  }
  std::string altered = *hash;
  altered.back() = altered.back() == 'A' ? 'B' : 'A';
  EXPECT_FALSE(hasher.Verify(kPassword, altered));

  std::string with_nul = *hash;
  with_nul.insert(with_nul.size() - 1, 1, '\0');
  EXPECT_FALSE(hasher.Verify(kPassword, with_nul));
  EXPECT_FALSE(hasher.Verify(kPassword, *hash + "AAAA"));
  EXPECT_FALSE(hasher.Verify(kPassword, *hash + std::string(200, 'A')));

  for (std::string_view garbage :
       {"", "$", "$argon2id$", "$argon2id$v=19$m=8,t=1,p=1$", "$argon2id$v=19$m=8,t=1,p=1$$",
        "$argon2id$v=19$m=,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaA", "$argon2id$v=19$m=-8,t=1,p=1$x$y",
        "$argon2id$v=18$m=8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=19$m=8,t=1,p=1$!!!!$????", "plaintext password",
        "correct horse battery staple",
        "$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW",
        "$argon2id$v=19$m=99999999999999999999999,t=1,p=1$c2FsdA$aGFzaA"}) {
    EXPECT_FALSE(hasher.Verify(kPassword, garbage)) << garbage;
  }
  std::string binary;
  for (int c = 255; c >= 0; --c) binary += static_cast<char>(c);
  EXPECT_FALSE(hasher.Verify(kPassword, binary));
  EXPECT_FALSE(hasher.Verify(kPassword, std::string(1 << 20, '$')));
}

TEST(PasswordHasher, OnlyArgon2idHashesAreAccepted) {
  PasswordHasher hasher(FastOptions());
  std::array<char, crypto_pwhash_STRBYTES> argon2i{};
  const std::string& text = kPassword.Reveal();
  ASSERT_EQ(crypto_pwhash_argon2i_str(argon2i.data(), text.data(), text.size(),
                                      crypto_pwhash_argon2i_OPSLIMIT_MIN,
                                      crypto_pwhash_argon2i_MEMLIMIT_MIN),
            0);
  ASSERT_TRUE(std::string_view(argon2i.data()).starts_with("$argon2i$"));
  EXPECT_FALSE(hasher.Verify(kPassword, argon2i.data()));
}

TEST(PasswordHasher, AHashCostlierThanTheOptionsIsRefused) {
  // A tampered row asking for 4 GiB or 2^32 passes must not tie up the console; a hash
  // within the options is verified even when cheaper than them.
  PasswordHasher fast(FastOptions());
  PasswordHasher three_passes(PasswordHashingOptions{
      .opslimit = 3, .memlimit = crypto_pwhash_MEMLIMIT_MIN, .max_concurrent = 1});
  Result<std::string> fast_hash = fast.Hash(kPassword);
  Result<std::string> costly_hash = three_passes.Hash(kPassword);
  ASSERT_TRUE(fast_hash.ok() && costly_hash.ok());
  ASSERT_TRUE(costly_hash->starts_with("$argon2id$v=19$m=8,t=3,p=1$")) << *costly_hash;
  EXPECT_FALSE(fast.Verify(kPassword, *costly_hash));
  EXPECT_TRUE(three_passes.Verify(kPassword, *costly_hash));
  EXPECT_TRUE(three_passes.Verify(kPassword, *fast_hash));

  std::string rest = fast_hash->substr(std::string_view("$argon2id$v=19$m=8,t=1,p=1$").size());
  EXPECT_FALSE(fast.Verify(kPassword, "$argon2id$v=19$m=4194304,t=1,p=1$" + rest));
  EXPECT_FALSE(fast.Verify(kPassword, "$argon2id$v=19$m=8,t=4294967295,p=1$" + rest));
  EXPECT_FALSE(fast.Verify(kPassword, "$argon2id$v=19$m=8,t=1,p=16777215$" + rest));
  EXPECT_TRUE(fast.Verify(kPassword, "$argon2id$v=19$m=8,t=1,p=1$" + rest));
}

TEST(PasswordHasher, VerifyDummyMatchesNothingAndReturns) {
  PasswordHasher hasher(FastOptions());
  hasher.VerifyDummy(kPassword);
  hasher.VerifyDummy(Secret(""));
  EXPECT_EQ(hasher.peak_concurrent(), 1);
}

TEST(PasswordHasher, AtMostMaxConcurrentHashesRunAtOnce) {
  // Big enough (4 MiB) that six threads overlap whenever the limit lets them.
  PasswordHashingOptions options = FastOptions(/*max_concurrent=*/2);
  options.memlimit = 4u << 20;
  PasswordHasher hasher(options);
  std::atomic<int> matched = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      Secret password("thread password " + std::to_string(t));
      for (int i = 0; i < 3; ++i) {
        Result<std::string> hash = hasher.Hash(password);
        if (hash.ok() && hasher.Verify(password, *hash) && !hasher.Verify(kPassword, *hash)) {
          ++matched;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(matched.load(), 18);
  EXPECT_EQ(hasher.peak_concurrent(), 2);
}

TEST(PasswordHasher, OneSlotSerialisesEveryHash) {
  PasswordHashingOptions options = FastOptions(/*max_concurrent=*/1);
  options.memlimit = 1u << 20;
  PasswordHasher hasher(options);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 3; ++i) {
        Result<std::string> hash = hasher.Hash(kPassword);
        if (hash.ok()) hasher.Verify(kPassword, *hash);
        hasher.Verify(kPassword, "malformed");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(hasher.peak_concurrent(), 1);
}

TEST(PasswordHasherDeathTest, OptionsOutsideLibsodiumsLimitsStopTheProcess) {
  auto make = [](PasswordHashingOptions options) { PasswordHasher hasher(options); };
  PasswordHashingOptions no_slot = FastOptions(/*max_concurrent=*/0);
  PasswordHashingOptions no_pass = FastOptions();
  no_pass.opslimit = 0;
  PasswordHashingOptions tiny_memory = FastOptions();
  tiny_memory.memlimit = 1024;
  EXPECT_DEATH(make(no_slot), "PasswordHashingOptions");
  EXPECT_DEATH(make(no_pass), "PasswordHashingOptions");
  EXPECT_DEATH(make(tiny_memory), "PasswordHashingOptions");
}

TEST(ValidateNewPassword, AcceptsTwelveToTwoHundredFiftySixBytes) {
  EXPECT_TRUE(ValidateNewPassword(Secret("abcdefghijk1"), "alice@example.com").ok());
  EXPECT_TRUE(ValidateNewPassword(Secret(std::string(255, 'a') + "b"), "alice@example.com").ok());
  EXPECT_TRUE(ValidateNewPassword(Secret("日本語のパス"), "alice@example.com").ok())
      << "18 bytes in 6 characters: the rule counts bytes";

  Status short_one = ValidateNewPassword(Secret("abcdefghij1"), "alice@example.com");
  EXPECT_EQ(short_one.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_one.message().find("at least 12 bytes"), std::string::npos);
  EXPECT_FALSE(ValidateNewPassword(Secret(""), "alice@example.com").ok());
  EXPECT_FALSE(ValidateNewPassword(Secret("日本語"), "alice@example.com").ok()) << "9 bytes";

  Status long_one = ValidateNewPassword(Secret(std::string(256, 'a') + "b"), "alice@example.com");
  EXPECT_EQ(long_one.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(long_one.message().find("at most 256 bytes"), std::string::npos);
}

TEST(ValidateNewPassword, RefusesOneRepeatedCharacter) {
  Status status = ValidateNewPassword(Secret(std::string(20, '*')), "alice@example.com");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("repeated"), std::string::npos);
  EXPECT_FALSE(ValidateNewPassword(Secret(std::string(12, '\0')), "alice@example.com").ok());
  EXPECT_TRUE(ValidateNewPassword(Secret(std::string(19, '*') + "+"), "alice@example.com").ok());
}

TEST(ValidateNewPassword, RefusesTheEmailInAnyCase) {
  Status status = ValidateNewPassword(Secret("Alice@Example.COM"), "alice@example.com");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("email"), std::string::npos);
  EXPECT_TRUE(ValidateNewPassword(Secret("alice@example.com!"), "alice@example.com").ok());
  EXPECT_TRUE(ValidateNewPassword(Secret("alice@example.com"), "").ok());
}

TEST(ValidateNewPassword, MessagesNeverContainThePassword) {
  for (const std::string& password :
       {std::string("s3cr3t-w0rd"), std::string(300, 'Q') + "s3cr3t-w0rd",
        std::string(30, 'Q'), std::string("bob@example.org-s3cr3t")}) {
    std::string email = password == "bob@example.org-s3cr3t" ? password : "bob@example.org";
    Status status = ValidateNewPassword(Secret(password), email);
    ASSERT_FALSE(status.ok()) << "case " << password.size();
    EXPECT_EQ(status.message().find("s3cr3t"), std::string::npos) << status.message();
    EXPECT_EQ(status.message().find("QQQ"), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace uplink::console
