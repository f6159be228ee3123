// TOTP and HOTP against the RFCs' published vectors, the ±1 step window and replays, base32,
// recovery codes, sealing secrets and their key file, and QR codes read back by a real
// decoder (zbarimg).
#include "console/auth/totp.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <set>

#include "common/crypto.h"
#include "common/files.h"
#include "console/auth/qr_code.h"
#include "console/auth/secret_box.h"
#include "support/process.h"
#include "test_util.h"

namespace uplink::console {
namespace {

using std::chrono::seconds;

// RFC 6238 Appendix B and RFC 4226 Appendix D: the SHA-1 seed is the 20 ASCII bytes
// "12345678901234567890".
const std::string kRfcSeed = "12345678901234567890";

WallTime At(std::int64_t unix_seconds) { return WallTime(seconds(unix_seconds)); }

TEST(Totp, MatchesTheRfc4226HotpVectors) {
  const char* expected[] = {"755224", "287082", "359152", "969429", "338314",
                            "254676", "287922", "162583", "399871", "520489"};
  for (std::uint64_t counter = 0; counter < 10; ++counter) {
    EXPECT_EQ(HotpCode(kRfcSeed, counter), expected[counter]) << "counter " << counter;
  }
}

TEST(Totp, MatchesTheRfc6238Sha1VectorsInEightAndSixDigits) {
  struct Vector {
    std::int64_t time;
    std::int64_t step;
    const char* totp8;
  };
  // Appendix B, SHA1 column; T is (time - 0) / 30 in hex in the RFC.
  const Vector vectors[] = {{59, 0x1, "94287082"},
                            {1111111109, 0x23523EC, "07081804"},
                            {1111111111, 0x23523ED, "14050471"},
                            {1234567890, 0x273EF07, "89005924"},
                            {2000000000, 0x3F940AA, "69279037"},
                            {20000000000, 0x27BC86AA, "65353130"}};
  Secret seed(kRfcSeed);
  for (const Vector& v : vectors) {
    EXPECT_EQ(HotpCode(kRfcSeed, static_cast<std::uint64_t>(v.step), 8), v.totp8) << v.time;
    // The last vector (the year 2603) is past what a nanosecond system_clock holds (2262): its
    // step is checked above, its time cannot be.
    if (v.time > 9'000'000'000) continue;
    EXPECT_EQ(TotpStep(At(v.time)), v.step) << v.time;
    // The 6-digit code is the same truncation modulo 10^6: the vector's last six digits.
    std::string six = std::string(v.totp8).substr(2);
    TotpCheck check = CheckTotpCode(seed, six, At(v.time), 0);
    EXPECT_EQ(check.verdict, TotpVerdict::kAccepted) << v.time;
    EXPECT_EQ(check.step, v.step) << v.time;
  }
}

TEST(Totp, AcceptsOneStepEitherSideAndNoFurther) {
  Secret seed(kRfcSeed);
  const std::int64_t now = 1234567890;
  const std::int64_t step = TotpStep(At(now));
  for (std::int64_t offset : {-1, 0, 1}) {
    std::string code = HotpCode(kRfcSeed, static_cast<std::uint64_t>(step + offset));
    TotpCheck check = CheckTotpCode(seed, code, At(now), 0);
    EXPECT_EQ(check.verdict, TotpVerdict::kAccepted) << offset;
    EXPECT_EQ(check.step, step + offset);
  }
  for (std::int64_t offset : {-3, -2, 2, 3}) {
    std::string code = HotpCode(kRfcSeed, static_cast<std::uint64_t>(step + offset));
    EXPECT_EQ(CheckTotpCode(seed, code, At(now), 0).verdict, TotpVerdict::kWrong) << offset;
  }
  // The window follows the clock: 29 s after the step began it is still the current step.
  std::int64_t step_start = step * 30;
  std::string current = HotpCode(kRfcSeed, static_cast<std::uint64_t>(step));
  EXPECT_EQ(CheckTotpCode(seed, current, At(step_start + 29), 0).verdict, TotpVerdict::kAccepted);
  EXPECT_EQ(CheckTotpCode(seed, current, At(step_start + 30 + 29), 0).verdict,
            TotpVerdict::kAccepted);
  EXPECT_EQ(CheckTotpCode(seed, current, At(step_start + 60), 0).verdict, TotpVerdict::kWrong);
}

TEST(Totp, RefusesACodeOfAStepAlreadyUsedOrEarlier) {
  Secret seed(kRfcSeed);
  const std::int64_t now = 2000000000;
  const std::int64_t step = TotpStep(At(now));
  std::string code = HotpCode(kRfcSeed, static_cast<std::uint64_t>(step));
  EXPECT_EQ(CheckTotpCode(seed, code, At(now), step - 1).verdict, TotpVerdict::kAccepted);
  TotpCheck replay = CheckTotpCode(seed, code, At(now), step);
  EXPECT_EQ(replay.verdict, TotpVerdict::kReused);
  EXPECT_EQ(replay.step, step);
  // After the next step's code was used (a fast clock), this step's code is stale too.
  EXPECT_EQ(CheckTotpCode(seed, code, At(now), step + 1).verdict, TotpVerdict::kReused);
  // A wrong code stays wrong, whatever was used.
  std::string wrong = code;
  wrong[0] = static_cast<char>('0' + (wrong[0] - '0' + 1) % 10);
  EXPECT_EQ(CheckTotpCode(seed, wrong, At(now), step).verdict, TotpVerdict::kWrong);
}

TEST(Totp, OnlySixAsciiDigitsAreACode) {
  EXPECT_TRUE(CheckTotpCodeFormat("012345").ok());
  for (const std::string& bad : std::vector<std::string>{"", "12345", "1234567", "12345a", "12 345", "123-45", " 12345",
                          "１２３４５６", std::string("12345\0", 6), "-12345", "+12345",
                          "0x1234", "123456\n"}) {
    Status status = CheckTotpCodeFormat(bad);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("6 digits"), std::string::npos) << status.message();
  }
  // A malformed code never matches, even if a caller skipped the format check.
  Secret seed(kRfcSeed);
  EXPECT_EQ(CheckTotpCode(seed, "28708", At(59), 0).verdict, TotpVerdict::kWrong);
}

TEST(Base32, RoundTripsAndMatchesRfc4648) {
  // RFC 4648 section 10 (padding dropped, as otpauth URIs do).
  EXPECT_EQ(Base32Encode(""), "");
  EXPECT_EQ(Base32Encode("f"), "MY");
  EXPECT_EQ(Base32Encode("fo"), "MZXQ");
  EXPECT_EQ(Base32Encode("foo"), "MZXW6");
  EXPECT_EQ(Base32Encode("foob"), "MZXW6YQ");
  EXPECT_EQ(Base32Encode("fooba"), "MZXW6YTB");
  EXPECT_EQ(Base32Encode("foobar"), "MZXW6YTBOI");
  EXPECT_EQ(Base32Encode(kRfcSeed), "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
  EXPECT_EQ(*Base32Decode("mzxw6ytboi======"), "foobar");
  EXPECT_EQ(*Base32Decode("GEZD GNBV GY3T QOJQ GEZD GNBV GY3T QOJQ"), kRfcSeed);
  std::string random = RandomBytes(kTotpSecretBytes);
  EXPECT_EQ(*Base32Decode(Base32Encode(random)), random);
  EXPECT_FALSE(Base32Decode("MZXW0").ok());  // 0 and 1 are not base32
  EXPECT_FALSE(Base32Decode("MZ-W6").ok());
}

TEST(Totp, OtpauthUriCarriesTheSecretAndEncodesTheLabel) {
  Secret seed(kRfcSeed);
  EXPECT_EQ(OtpauthUri("uplink", "alice+ops@example.com", seed),
            "otpauth://totp/uplink:alice%2Bops%40example.com?secret="
            "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=uplink&algorithm=SHA1&digits=6&period=30");
}

TEST(RecoveryCodes, AreTenDistinctEightyBitCodesStoredOnlyAsHashes) {
  std::vector<MintedRecoveryCode> codes = MintRecoveryCodes();
  ASSERT_EQ(codes.size(), 10u);
  std::set<std::string> seen;
  for (const MintedRecoveryCode& code : codes) {
    const std::string& shown = code.code.Reveal();
    ASSERT_EQ(shown.size(), 19u) << shown;  // xxxx-xxxx-xxxx-xxxx
    for (size_t i : {4u, 9u, 14u}) EXPECT_EQ(shown[i], '-') << shown;
    EXPECT_TRUE(seen.insert(shown).second);
    auto canonical = CanonicalRecoveryCode(shown);
    ASSERT_TRUE(canonical.ok()) << canonical.status().ToString();
    EXPECT_EQ(canonical->Reveal().size(), 16u);
    EXPECT_EQ(code.code_hash, Sha256Hex(canonical->Reveal()));
    EXPECT_EQ(code.code_hash.find(canonical->Reveal()), std::string::npos);
    EXPECT_TRUE(RecoveryCodeMatches(*canonical, code.code_hash));
    EXPECT_FALSE(RecoveryCodeMatches(*canonical, codes[(&code - &codes[0] + 1) % 10].code_hash));
  }
}

TEST(RecoveryCodes, AreReadWhateverTheCaseSpacesAndHyphensAndOtherwiseRefused) {
  std::string shown = MintRecoveryCodes(1)[0].code.Reveal();
  std::string upper = shown;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string spaced = shown;
  for (char& c : spaced) c = c == '-' ? ' ' : c;
  std::string bare = shown;
  std::erase(bare, '-');
  for (const std::string& typed : {upper, spaced, bare}) {
    auto canonical = CanonicalRecoveryCode(typed);
    ASSERT_TRUE(canonical.ok()) << typed;
    EXPECT_EQ(canonical->Reveal(), bare);
  }
  for (const std::string& bad : std::vector<std::string>{"", bare.substr(1), bare + "a", bare.substr(1) + "0",
                          bare.substr(1) + "!", std::string(10'000, 'a'),
                          bare.substr(1) + std::string("\0", 1), std::string("123456")}) {
    Status status = CanonicalRecoveryCode(bad).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad.size();
    EXPECT_NE(status.message().find("xxxx-xxxx-xxxx-xxxx"), std::string::npos);
  }
}

TEST(SecretBox, SealsSoThatOnlyTheSameKeyAndContextOpen) {
  SecretBox box{Secret(std::string(32, 'k'))};
  Secret secret(RandomBytes(kTotpSecretBytes));
  std::string sealed = box.Seal(secret, "user-1");
  EXPECT_TRUE(sealed.starts_with("v1."));
  EXPECT_EQ(sealed.find(Base32Encode(secret.Reveal())), std::string::npos);
  EXPECT_EQ(sealed.find(Base64UrlEncode(secret.Reveal())), std::string::npos);
  EXPECT_NE(box.Seal(secret, "user-1"), sealed);  // a fresh nonce each time
  auto opened = box.Open(sealed, "user-1");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->Reveal(), secret.Reveal());

  EXPECT_EQ(box.Open(sealed, "user-2").status().code(), StatusCode::kDataLoss);
  SecretBox other{Secret(std::string(32, 'q'))};
  EXPECT_EQ(other.Open(sealed, "user-1").status().code(), StatusCode::kDataLoss);
  std::string altered = sealed;
  altered[altered.size() / 2] = altered[altered.size() / 2] == 'A' ? 'B' : 'A';
  EXPECT_EQ(box.Open(altered, "user-1").status().code(), StatusCode::kDataLoss);
  for (const std::string& bad : std::vector<std::string>{"", "v1.", "v2." + sealed.substr(3),
                                                        "v1.!!!!", sealed.substr(0, 20)}) {
    EXPECT_EQ(box.Open(bad, "user-1").status().code(), StatusCode::kDataLoss) << bad;
  }
  // A process-only key (empty) is random: another one does not open what it sealed.
  SecretBox ephemeral{Secret()};
  EXPECT_FALSE(SecretBox(Secret()).Open(ephemeral.Seal(secret, "u"), "u").ok());
}

TEST(SecretBox, KeyFileIsCreatedOnceOwnerOnlyAndCheckedWhenRead) {
  testing::ScratchDir dir;
  std::string path = dir.File("two-factor.key");
  auto created = LoadOrCreateKeyFile(path);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->Reveal().size(), SecretBox::kKeyBytes);
  struct stat info;
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600);
  auto again = LoadOrCreateKeyFile(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->Reveal(), created->Reveal());

  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  Status shared = LoadOrCreateKeyFile(path).status();
  EXPECT_EQ(shared.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(shared.message().find("chmod 600"), std::string::npos) << shared.message();

  std::string short_path = dir.File("short.key");
  std::ofstream(short_path) << "too short";
  ASSERT_EQ(::chmod(short_path.c_str(), 0600), 0);
  EXPECT_EQ(LoadOrCreateKeyFile(short_path).status().code(), StatusCode::kFailedPrecondition);
  std::string link = dir.File("link.key");
  ASSERT_EQ(::symlink(path.c_str(), link.c_str()), 0);
  EXPECT_FALSE(LoadOrCreateKeyFile(link).ok());
}

// zbarimg, a real QR decoder, reads back what the module matrix says.
std::string DecodeQr(const std::vector<std::string>& rows, const std::string& dir) {
  // A plain PBM: 4 modules of quiet zone, 8 pixels per module.
  const int scale = 8;
  const int quiet = 4;
  const int size = static_cast<int>(rows.size());
  const int pixels = (size + 2 * quiet) * scale;
  std::string path = dir + "/qr.pbm";
  std::ofstream pbm(path);
  pbm << "P1\n" << pixels << " " << pixels << "\n";
  for (int y = 0; y < pixels; ++y) {
    for (int x = 0; x < pixels; ++x) {
      int row = y / scale - quiet;
      int column = x / scale - quiet;
      bool dark = row >= 0 && row < size && column >= 0 && column < size &&
                  rows[row][column] == '1';
      pbm << (dark ? "1 " : "0 ");
    }
    pbm << "\n";
  }
  pbm.close();
  auto decoded = uplink::testing::RunCommand({"/usr/bin/zbarimg", "--quiet", "--raw", path},
                                             std::chrono::seconds(30));
  EXPECT_EQ(decoded.exit_code, 0) << decoded.err;
  return std::string(TrimWhitespace(decoded.out));
}

TEST(QrCode, EncodesAnOtpauthUriThatAScannerReadsBack) {
  Secret secret(RandomBytes(kTotpSecretBytes));
  std::string uri = OtpauthUri("uplink", "someone.with.a.long.name@example.com", secret);
  auto rows = QrModules(uri);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_GE(rows->size(), 21u);
  for (const std::string& row : *rows) {
    ASSERT_EQ(row.size(), rows->size());
    EXPECT_EQ(row.find_first_not_of("01"), std::string::npos);
  }
  // The finder pattern's top-left corner: a dark 7x7 square's first row.
  EXPECT_EQ(rows->front().substr(0, 7), "1111111");
  testing::ScratchDir dir;
  EXPECT_EQ(DecodeQr(*rows, dir.path()), uri);
}

TEST(QrCode, RefusesTextNoQrCodeHolds) {
  EXPECT_EQ(QrModules(std::string(8000, 'x')).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace uplink::console
