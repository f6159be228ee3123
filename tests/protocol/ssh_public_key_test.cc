// The SSH grant key parser against keys real ssh-keygen makes (fingerprints compared with
// ssh-keygen -l), and against hostile input: other key types, a type inside the blob unlike
// the one outside, bad lengths, points off the curve, non-canonical base64, control
// characters, long comments.
#include "protocol/ssh_public_key.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/crypto.h"
#include "common/files.h"
#include "support/process.h"

namespace uplink::protocol {
namespace {

using namespace std::chrono_literals;

struct GeneratedKey {
  std::string line;         // the .pub file's line
  std::string fingerprint;  // as ssh-keygen -l prints it
};

GeneratedKey Generate(const std::vector<std::string>& type_args, const std::string& comment) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("sshkey-" + HexEncode(RandomBytes(8)));
  std::filesystem::create_directories(dir);
  std::vector<std::string> argv = {"/usr/bin/ssh-keygen", "-q", "-N", "", "-C", comment, "-f",
                                   (dir / "key").string()};
  argv.insert(argv.end(), type_args.begin(), type_args.end());
  auto made = testing::RunCommand(argv, 60s);
  EXPECT_EQ(made.exit_code, 0) << made.err;
  auto listed = testing::RunCommand({"/usr/bin/ssh-keygen", "-l", "-f", (dir / "key.pub").string()}, 60s);
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  GeneratedKey key;
  key.line = ReadFileBounded((dir / "key.pub").string(), 4096).value();
  // "256 SHA256:… comment (ED25519)"
  const size_t start = listed.out.find(' ') + 1;
  key.fingerprint = listed.out.substr(start, listed.out.find(' ', start) - start);
  std::filesystem::remove_all(dir);
  return key;
}

std::string Wire(std::string_view bytes) {
  std::string out;
  for (int shift = 24; shift >= 0; shift -= 8) {
    out += static_cast<char>((bytes.size() >> shift) & 0xff);
  }
  return out + std::string(bytes);
}

std::string Line(std::string_view type, const std::string& blob, std::string_view comment = "") {
  std::string line = std::string(type) + " " + Base64Encode(blob);
  if (!comment.empty()) line += " " + std::string(comment);
  return line;
}

void ExpectRefused(const std::string& line, const std::string& why) {
  auto parsed = ParseSshPublicKey(line);
  ASSERT_FALSE(parsed.ok()) << line;
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find(why), std::string::npos) << parsed.status().message();
}

TEST(SshPublicKeyTest, AcceptsEveryKeyTypeSshKeygenMakesThatIsAllowed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> kinds = {
      {{"-t", "ed25519"}, "ssh-ed25519"},
      {{"-t", "ecdsa", "-b", "256"}, "ecdsa-sha2-nistp256"},
      {{"-t", "ecdsa", "-b", "384"}, "ecdsa-sha2-nistp384"},
      {{"-t", "ecdsa", "-b", "521"}, "ecdsa-sha2-nistp521"}};
  for (const auto& [args, type] : kinds) {
    GeneratedKey generated = Generate(args, "ana@laptop ünïcode");
    auto key = ParseSshPublicKey(generated.line);
    ASSERT_TRUE(key.ok()) << generated.line << ": " << key.status().message();
    EXPECT_EQ(key->type, type);
    EXPECT_EQ(key->comment, "ana@laptop ünïcode");
    EXPECT_EQ(key->fingerprint, generated.fingerprint);
    std::string line = generated.line;
    while (!line.empty() && line.back() == '\n') line.pop_back();
    EXPECT_EQ(key->Authorized() + " " + key->comment, line);
  }
}

TEST(SshPublicKeyTest, RefusesRsaAndDsaSayingWhatToUse) {
  GeneratedKey rsa = Generate({"-t", "rsa", "-b", "2048"}, "old");
  ExpectRefused(rsa.line, "ssh-keygen -t ed25519");
  // ssh-keygen's default RSA size makes a line longer than any accepted key: still named RSA.
  ExpectRefused(Generate({"-t", "rsa", "-b", "3072"}, "old").line, "ssh-keygen -t ed25519");
  ExpectRefused("ssh-dss AAAAB3NzaC1kc3M=", "RSA and DSA");
}

TEST(SshPublicKeyTest, RefusesJunkOptionsAndCertificates) {
  GeneratedKey good = Generate({"-t", "ed25519"}, "c");
  ExpectRefused("", "empty");
  ExpectRefused("hello", "key type");
  ExpectRefused("ssh-ed25519", "missing");
  ExpectRefused("ssh-ed25519 ", "missing");
  ExpectRefused("command=\"sh\" " + good.line, "key type");
  ExpectRefused("ssh-ed25519-cert-v01@openssh.com AAAA", "key type");
  ExpectRefused("ssh-ed25519 !!!!", "base64");
  ExpectRefused(good.line.substr(0, good.line.find(' ') + 20), "base64");
  // Two lines, NUL, escape sequences in the comment.
  ExpectRefused(good.line + "\nssh-ed25519 AAAA", "control character");
  ExpectRefused(std::string("ssh-ed25519 AAAA\0", 17), "control character");
  ExpectRefused("ssh-ed25519 " + good.line.substr(12, 68) + " \x1b[31mred", "control character");
  ExpectRefused("ssh-ed25519 " + good.line.substr(12, 68) + " \xff\xfe", "UTF-8");
  ExpectRefused(std::string(600, 'a'), "longer than");
  ExpectRefused(good.line + "\n\n", "control character");
}

TEST(SshPublicKeyTest, RefusesBlobsThatDoNotMatchTheirType) {
  auto real = ParseSshPublicKey(Generate({"-t", "ed25519"}, "").line);
  ASSERT_TRUE(real.ok()) << real.status().message();
  const std::string point32 = real->blob.substr(real->blob.size() - 32);
  ASSERT_TRUE(ParseSshPublicKey(Line("ssh-ed25519", Wire("ssh-ed25519") + Wire(point32))).ok());
  // The type inside says something else.
  ExpectRefused(Line("ssh-ed25519", Wire("ssh-rsa") + Wire(point32)), "not ssh-ed25519");
  // Lengths: short, long, trailing bytes, a length past the end, nothing at all.
  ExpectRefused(Line("ssh-ed25519", Wire("ssh-ed25519") + Wire(std::string(31, 'k'))), "32 bytes");
  ExpectRefused(Line("ssh-ed25519", Wire("ssh-ed25519") + Wire(std::string(33, 'k'))), "32 bytes");
  ExpectRefused(Line("ssh-ed25519", Wire("ssh-ed25519") + Wire(point32) + "x"), "32 bytes");
  ExpectRefused(Line("ssh-ed25519", std::string("\xff\xff\xff\xff", 4) + "ssh-ed25519"), "cut short");
  ExpectRefused(Line("ssh-ed25519", "ab"), "cut short");
}

TEST(SshPublicKeyTest, RefusesBase64NotAsSshKeygenWritesIt) {
  // An ECDSA P-256 blob is 104 bytes: its base64 ends in one '='.
  GeneratedKey real = Generate({"-t", "ecdsa", "-b", "256"}, "");
  auto key = ParseSshPublicKey(real.line);
  ASSERT_TRUE(key.ok()) << key.status().message();
  const std::string data = Base64Encode(key->blob);
  ASSERT_EQ(data.back(), '=');
  ExpectRefused("ecdsa-sha2-nistp256 " + data.substr(0, data.size() - 1), "base64");
  ExpectRefused("ecdsa-sha2-nistp256 " + data + "==", "base64");
  ExpectRefused("ecdsa-sha2-nistp256 " + Base64UrlEncode(key->blob), "base64");
}

TEST(SshPublicKeyTest, ReadsFieldsSeparatedAsOpenSshDoes) {
  GeneratedKey real = Generate({"-t", "ed25519"}, "");
  auto key = ParseSshPublicKey(real.line);
  ASSERT_TRUE(key.ok()) << key.status().message();
  auto spaced = ParseSshPublicKey("ssh-ed25519 \t " + Base64Encode(key->blob) + "\t two  words \r\n");
  ASSERT_TRUE(spaced.ok()) << spaced.status().message();
  EXPECT_EQ(spaced->blob, key->blob);
  EXPECT_EQ(spaced->comment, "two  words");
  EXPECT_EQ(key->comment, "");  // ssh-keygen -C "" writes a trailing space
}

TEST(SshPublicKeyTest, RefusesEd25519KeysThatAreNoValidPoint) {
  // The identity (small order), and a y with no x on the curve.
  std::string identity(32, '\0');
  identity[0] = 1;
  ExpectRefused(Line("ssh-ed25519", Wire("ssh-ed25519") + Wire(identity)), "not a valid Ed25519");
  std::string off(32, '\0');
  off[0] = 2;
  ExpectRefused(Line("ssh-ed25519", Wire("ssh-ed25519") + Wire(off)), "not a valid Ed25519");
}

TEST(SshPublicKeyTest, RefusesEcdsaPointsOffTheirCurve) {
  GeneratedKey real = Generate({"-t", "ecdsa", "-b", "256"}, "");
  auto key = ParseSshPublicKey(real.line);
  ASSERT_TRUE(key.ok()) << key.status().message();
  const std::string prefix = Wire("ecdsa-sha2-nistp256") + Wire("nistp256");
  const std::string point = key->blob.substr(prefix.size() + 4);
  ASSERT_EQ(point.size(), 65u);
  ASSERT_TRUE(ParseSshPublicKey(Line("ecdsa-sha2-nistp256", prefix + Wire(point))).ok());
  std::string moved = point;
  moved[64] = static_cast<char>(moved[64] ^ 1);  // y changed: off the curve
  ExpectRefused(Line("ecdsa-sha2-nistp256", prefix + Wire(moved)), "not a point of nistp256");
  std::string compressed = point.substr(0, 33);
  compressed[0] = 0x02;
  ExpectRefused(Line("ecdsa-sha2-nistp256", prefix + Wire(compressed)), "not a point");
  ExpectRefused(Line("ecdsa-sha2-nistp256", prefix + Wire(std::string(65, '\0'))), "not a point");
  // The curve named inside is not the type's.
  ExpectRefused(Line("ecdsa-sha2-nistp256", Wire("ecdsa-sha2-nistp256") + Wire("nistp384") +
                                                Wire(point)),
                "not an ECDSA nistp256 key");
  // A P-256 key presented as P-384.
  ExpectRefused(Line("ecdsa-sha2-nistp384", key->blob), "not ecdsa-sha2-nistp384");
}

TEST(SshPublicKeyTest, BoundsTheComment) {
  GeneratedKey good = Generate({"-t", "ed25519"}, "");
  std::string line = good.line;
  while (line.back() == '\n') line.pop_back();
  EXPECT_TRUE(ParseSshPublicKey(line + " " + std::string(kMaxSshKeyCommentBytes, 'c')).ok());
  ExpectRefused(line + " " + std::string(kMaxSshKeyCommentBytes + 1, 'c'), "comment is longer");
}

}  // namespace
}  // namespace uplink::protocol
