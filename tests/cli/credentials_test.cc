// The credentials file and the order in which credentials are found.
#include "cli/credentials.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "cli_harness.h"
#include "common/files.h"

namespace uplink::cli {
namespace {

using testing::Cli;
using testing::FakeConsole;

constexpr char kKeyA[] = "uk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
constexpr char kKeyB[] = "uk_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
constexpr char kKeyC[] = "uk_CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC";
constexpr char kSession[] = "skt_SSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSS";

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

void ServeMe(FakeConsole& console) {
  console.OnJson(
      "GET", "/api/v1/me", 200,
      json::object{{"user", {{"id", "u1"}, {"email", "a@example.com"}, {"role", "admin"}}},
                   {"credential", {{"kind", "api_key"}, {"prefix", "uk_AAAA"}}}});
}

std::string LastBearer(const FakeConsole& console) {
  auto requests = console.requests();
  if (requests.empty()) return "";
  return std::string(requests.back().headers.Get("Authorization").value_or(""));
}

TEST(CredentialsFile, SaveWritesAPrivateFileInAPrivateDirectoryAndLoadReadsItBack) {
  uplink::testing::TempDir dir;
  const std::string path = dir.path() + "/config/uplink/credentials.json";
  CredentialsFile file(path);
  StoredCredential stored;
  stored.console = "https://console.example";
  stored.credential = Secret(kSession);
  stored.kind = CredentialKind::kSession;
  stored.expires_at = "2027-01-01T12:00:00Z";
  stored.email = "a@example.com";
  ASSERT_TRUE(file.Save(stored).ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(dir.path() + "/config/uplink"), 0700u);
  EXPECT_EQ(ModeOf(dir.path() + "/config"), 0700u);

  auto loaded = file.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->console, "https://console.example");
  EXPECT_EQ((*loaded)->credential.Reveal(), kSession);
  EXPECT_EQ((*loaded)->kind, CredentialKind::kSession);
  EXPECT_EQ((*loaded)->expires_at, "2027-01-01T12:00:00Z");
  EXPECT_EQ((*loaded)->email, "a@example.com");
  auto file_json = ParseJson(uplink::testing::ReadFileOrEmpty(path));
  ASSERT_TRUE(file_json.ok());
  EXPECT_EQ(file_json->at("kind"), "session");
  EXPECT_EQ(file_json->at("credential"), kSession);
}

TEST(CredentialsFile, SaveReplacesTheFileAtomicallyAndLeavesNoTemporaryFiles) {
  uplink::testing::TempDir dir;
  const std::string path = dir.path() + "/uplink/credentials.json";
  CredentialsFile file(path);
  StoredCredential stored;
  stored.console = "https://a.example";
  stored.credential = Secret(kKeyA);
  ASSERT_TRUE(file.Save(stored).ok());
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  stored.credential = Secret(kKeyB);
  ASSERT_TRUE(file.Save(stored).ok());
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino) << "replaced by rename, not rewritten in place";
  EXPECT_EQ((*file.Load())->credential.Reveal(), kKeyB);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator(dir.path() + "/uplink")) {
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
}

TEST(CredentialsFile, SaveNarrowsAnOpenDirectoryToTheOwnerOnly) {
  uplink::testing::TempDir dir;
  ASSERT_EQ(::mkdir((dir.path() + "/uplink").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((dir.path() + "/uplink").c_str(), 0755), 0);
  StoredCredential stored;
  stored.console = "https://a.example";
  stored.credential = Secret(kKeyA);
  ASSERT_TRUE(CredentialsFile(dir.path() + "/uplink/credentials.json").Save(stored).ok());
  EXPECT_EQ(ModeOf(dir.path() + "/uplink"), 0700u);
}

TEST(CredentialsFile, AFileOthersCanReadOrWriteIsRefusedWithTheChmodToRun) {
  for (mode_t mode : {0644, 0640, 0604, 0620, 0602, 0660}) {
    Cli cli;
    FakeConsole console;
    ServeMe(console);
    cli.StoreCredential(console.url(), kKeyA, "api_key");
    ASSERT_EQ(::chmod(cli.credentials_path().c_str(), mode), 0);
    auto r = cli.Run({"whoami"});
    EXPECT_EQ(r.code, 3) << std::oct << mode << ": " << r.err;
    EXPECT_NE(r.err.find("chmod 600 " + cli.credentials_path()), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(kKeyA), std::string::npos);
    EXPECT_TRUE(console.requests().empty()) << "the credential was sent anyway";
  }
}

TEST(CredentialsFile, CorruptOrForeignContentIsRefusedWithWhatToDo) {
  const std::vector<std::string> bad = {
      "",
      "not json",
      "[]",
      R"({"console":"https://a.example","credential":"uk_x","kind":"session"})",
      R"({"console":"https://a.example","credential":"agt_AAAA","kind":"api_key"})",
      R"({"console":"https://a.example","credential":"uk_a\r\nX-Evil: 1","kind":"api_key"})",
      R"({"credential":"uk_AAAA","kind":"api_key"})",
      R"({"console":"https://a.example","credential":7,"kind":"api_key"})",
      std::string(100 * 1024, '{'),
  };
  for (const std::string& content : bad) {
    Cli cli;
    std::filesystem::create_directories(cli.home() + "/.config/uplink");
    uplink::testing::WriteFileOrDie(cli.credentials_path(), content, 0600);
    auto r = cli.Run({"whoami"});
    EXPECT_EQ(r.code, 3) << content.substr(0, 80) << ": " << r.err;
    EXPECT_NE(r.err.find("uplink login"), std::string::npos) << r.err;
  }
}

TEST(Credentials, PrecedenceIsKeyFileThenEnvironmentThenTheStoredCredential) {
  Cli cli;
  FakeConsole console;
  ServeMe(console);
  cli.StoreCredential(console.url(), kKeyC, "api_key");
  const std::string key_file = cli.home() + "/key";
  uplink::testing::WriteFileOrDie(key_file, std::string(kKeyA) + "\n");

  cli.env["UPLINK_API_KEY"] = kKeyB;
  ASSERT_EQ(cli.Run({"whoami", "--console", console.url(), "--api-key-file", key_file}).code, 0);
  EXPECT_EQ(LastBearer(console), std::string("Bearer ") + kKeyA);

  cli.env["UPLINK_API_KEY_FILE"] = key_file;
  ASSERT_EQ(cli.Run({"whoami", "--console", console.url()}).code, 0);
  EXPECT_EQ(LastBearer(console), std::string("Bearer ") + kKeyA);
  cli.env.erase("UPLINK_API_KEY_FILE");

  ASSERT_EQ(cli.Run({"whoami", "--console", console.url()}).code, 0);
  EXPECT_EQ(LastBearer(console), std::string("Bearer ") + kKeyB);

  cli.env["UPLINK_API_KEY"] = "";     // empty is unset
  auto stored = cli.Run({"whoami"});  // the stored credential brings its console
  ASSERT_EQ(stored.code, 0) << stored.err;
  EXPECT_EQ(LastBearer(console), std::string("Bearer ") + kKeyC);
  EXPECT_NE(stored.out.find("the credentials file"), std::string::npos) << stored.out;
}

TEST(Credentials, XdgConfigHomeIsUsedWhenAbsolute) {
  std::map<std::string, std::string> vars{{"HOME", "/home/p"}, {"XDG_CONFIG_HOME", "/xdg"}};
  EnvLookup env = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(CredentialsFile::Default(env)->path(), "/xdg/uplink/credentials.json");
  vars["XDG_CONFIG_HOME"] = "relative/dir";
  EXPECT_EQ(CredentialsFile::Default(env)->path(), "/home/p/.config/uplink/credentials.json");
  vars.clear();
  EXPECT_FALSE(CredentialsFile::Default(env).ok());
}

TEST(Credentials, AStoredCredentialIsNeverSentToAnotherConsole) {
  Cli cli;
  FakeConsole mine, other;
  ServeMe(mine);
  ServeMe(other);
  cli.StoreCredential(mine.url(), kKeyA, "api_key");
  auto r = cli.Run({"whoami", "--console", other.url()});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("never sends it elsewhere"), std::string::npos) << r.err;
  EXPECT_TRUE(other.requests().empty());
  // The same console spelled with a trailing slash is the same console.
  EXPECT_EQ(cli.Run({"whoami", "--console", mine.url() + "/"}).code, 0);
}

TEST(Credentials, AnExpiredStoredSessionIsNotSent) {
  Cli cli;
  FakeConsole console;
  ServeMe(console);
  cli.StoreCredential(console.url(), kSession, "session", FormatRfc3339(cli.clock.Now()));
  auto r = cli.Run({"whoami"});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("expired"), std::string::npos) << r.err;
  EXPECT_TRUE(console.requests().empty());
}

TEST(Credentials, NoCredentialAtAllSaysWhereOneComesFrom) {
  Cli cli;
  auto r = cli.Run({"connections", "list", "--console", "http://127.0.0.1:9"});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("uplink login"), std::string::npos);
  EXPECT_NE(r.err.find("UPLINK_API_KEY"), std::string::npos);
}

TEST(Credentials, ValuesThatAreNotCredentialsAreRefusedWithoutBeingShown) {
  Cli cli;
  cli.env["UPLINK_API_KEY"] = "uk_abc\r\nX-Injected: yes";
  auto r = cli.Run({"connections", "list", "--console", "http://127.0.0.1:9"});
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.err.find("X-Injected"), std::string::npos) << r.err;
  EXPECT_FALSE(LooksLikeToken("uk_", "uk_"));
  EXPECT_FALSE(LooksLikeToken("uk_a b", "uk_"));
  EXPECT_FALSE(LooksLikeToken("skt_abc", "uk_"));
  EXPECT_FALSE(LooksLikeToken("uk_" + std::string(513, 'a'), "uk_"));
  EXPECT_TRUE(LooksLikeToken(kKeyA, "uk_"));
}

}  // namespace
}  // namespace uplink::cli
