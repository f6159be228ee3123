// `uplink ssh setup`, `grants`, `grant` and `revoke` against a scripted console with real
// keys from ssh-keygen: the files setup writes (fresh home, a user's config kept byte for byte,
// the Include line first and once, the backup once, modes, the pinned key), what it refuses
// (not ready, no .pub, hostile replies, a changed pin) and that a refusal writes nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "cli/ssh_config.h"
#include "common/files.h"
#include "protocol/ssh.h"
#include "protocol/ssh_public_key.h"
#include "ssh_support.h"
#include "support/process.h"

namespace uplink::cli::testing {
namespace {

using uplink::testing::ReadFileOrEmpty;
using uplink::testing::TempDir;
using uplink::testing::WriteFileOrDie;

unsigned ModeOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::string ThisProgram() {
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

class SshSetupTest : public ::testing::Test {
 protected:
  SshSetupTest()
      : workspace_key_(MakeSshKeyPair(keys_.File("host_key"))),
        ssh_(console_, workspace_key_) {
    cli_.StoreCredential(console_.url(), kApiKey, "api_key");
    ssh_dir_ = cli_.home() + "/.ssh";
    std::filesystem::create_directory(ssh_dir_);
    ::chmod(ssh_dir_.c_str(), 0700);
    identity_pub_ = MakeSshKeyPair(ssh_dir_ + "/id_ed25519");
    paths_ = SshPathsFor(ssh_dir_, kReservation);
  }

  CliResult Setup(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"ssh", "setup", kReservation};
    args.insert(args.end(), extra.begin(), extra.end());
    return cli_.Run(args);
  }

  // "TYPE BASE64" of the workspace's host key.
  std::string PinnedKey() const {
    return protocol::ParseSshPublicKey(workspace_key_)->Authorized();
  }
  std::string Include() const { return "Include " + paths_.uplink_dir + "/*.conf"; }
  size_t Posts() const {
    return console_.RequestsTo("POST", std::string("/api/v1/reservations/") + kReservation +
                                           "/ssh-grants")
        .size();
  }

  TempDir keys_;
  FakeConsole console_;
  Cli cli_;
  std::string workspace_key_;
  ScriptedSshConsole ssh_;
  std::string ssh_dir_;
  std::string identity_pub_;
  SshPaths paths_;
};

TEST_F(SshSetupTest, FreshHomeGetsTheHostBlockThePinAndOneIncludeLine) {
  auto r = Setup();
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string alias = std::string("uplink-") + kReservation;

  // The grant is of the identity's key.
  ASSERT_EQ(ssh_.created(), 1);
  const json::object grant = ssh_.grants().at(0);
  EXPECT_EQ(grant.at("public_key").as_string(),
            protocol::ParseSshPublicKey(identity_pub_)->Authorized());

  const std::string conf = ReadFileOrEmpty(paths_.host_config);
  const std::string expected_proxy = "ProxyCommand " + ThisProgram() + " ssh proxy " +
                                     kReservation + " --grant " +
                                     std::string(grant.at("id").as_string()) + " --console " +
                                     console_.url() + "\n";
  for (const std::string& line :
       {"Host " + alias + " " + kReservation + "\n", "  HostName " + std::string(kReservation) + "\n",
        std::string("  User workspace\n"), "  IdentityFile " + ssh_dir_ + "/id_ed25519\n",
        std::string("  IdentitiesOnly yes\n"),
        "  UserKnownHostsFile " + paths_.known_hosts + "\n",
        std::string("  StrictHostKeyChecking yes\n"), "  HostKeyAlias " + alias + "\n",
        "  " + expected_proxy}) {
    EXPECT_NE(conf.find(line), std::string::npos) << "missing: " << line << "in:\n" << conf;
  }
  EXPECT_EQ(ReadFileOrEmpty(paths_.known_hosts), alias + " " + PinnedKey() + "\n");
  EXPECT_EQ(ReadFileOrEmpty(paths_.config), Include() + "\n");
  EXPECT_FALSE(Exists(paths_.backup)) << "nothing to back up";

  EXPECT_EQ(ModeOf(paths_.uplink_dir), 0700u);
  EXPECT_EQ(ModeOf(paths_.host_config), 0600u);
  EXPECT_EQ(ModeOf(paths_.known_hosts), 0600u);
  EXPECT_EQ(ModeOf(paths_.config), 0600u);

  // It says what it wrote and how to use it; the credential appears nowhere.
  for (const std::string& text :
       {paths_.host_config, paths_.known_hosts, paths_.config, "ssh " + alias,
        "scp FILE " + alias + ":", std::string("VS Code")}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  EXPECT_EQ(conf.find(kApiKey), std::string::npos);
  EXPECT_EQ(r.out.find(kApiKey), std::string::npos);
}

TEST_F(SshSetupTest, ExistingConfigIsKeptByteForByteWithTheIncludeFirstAndOneBackup) {
  // Comments, Host blocks, a Match, odd spacing, tabs, no newline at the end.
  const std::string original =
      "# my config\n\nHost work\n\tHostName work.example\n  User me   \n\nMatch host *.lab\n"
      "  ForwardAgent yes\nHost *\n  ServerAliveInterval 30";
  WriteFileOrDie(paths_.config, original, 0640);

  auto first = Setup();
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(ReadFileOrEmpty(paths_.config), Include() + "\n" + original);
  EXPECT_EQ(ModeOf(paths_.config), 0640u) << "the config keeps its mode";
  EXPECT_EQ(ReadFileOrEmpty(paths_.backup), original);
  EXPECT_EQ(ModeOf(paths_.backup), 0600u);

  // Again: nothing changes, no second grant, the backup stays.
  auto second = Setup();
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(ReadFileOrEmpty(paths_.config), Include() + "\n" + original);
  EXPECT_EQ(ssh_.created(), 1) << "the grant of the same key is found and kept";
  EXPECT_EQ(Posts(), 1u);
  EXPECT_NE(second.out.find("already there"), std::string::npos) << second.out;

  // The user moved the line under a Host block (where it would belong to that block) and
  // edited the file: setup puts it first again, once, and leaves the first backup alone.
  const std::string edited = "Host work\n  User me\n" + Include() + "\nHost new\n  User you\n";
  WriteFileOrDie(paths_.config, edited, 0640);
  auto third = Setup();
  ASSERT_EQ(third.code, 0) << third.err;
  EXPECT_EQ(ReadFileOrEmpty(paths_.config),
            Include() + "\nHost work\n  User me\nHost new\n  User you\n");
  EXPECT_EQ(ReadFileOrEmpty(paths_.backup), original) << "the backup is made once";
}

TEST_F(SshSetupTest, AConfigThatIsASymlinkIsWrittenWhereItPoints) {
  const std::string target = cli_.home() + "/dotfiles-ssh-config";
  WriteFileOrDie(target, "Host a\n  User b\n", 0600);
  std::filesystem::create_symlink(target, paths_.config);
  auto r = Setup();
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(paths_.config));
  EXPECT_EQ(ReadFileOrEmpty(target), Include() + "\nHost a\n  User b\n");
}

TEST_F(SshSetupTest, NotReadyIsRefusedWithTheConsolesReasonAndWritesNothing) {
  ssh_.SetReadiness(json::object{{"state", "unavailable"},
                                 {"reason", "no capability report in the last 60 s"},
                                 {"transfer", {{"budget_bytes", 10}, {"used_bytes", 0}}}});
  auto r = Setup();
  EXPECT_EQ(r.code, 6) << r.err;
  EXPECT_NE(r.err.find("not ready for SSH: no capability report in the last 60 s"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(Exists(paths_.uplink_dir));
  EXPECT_FALSE(Exists(paths_.config));
  EXPECT_EQ(Posts(), 0u) << "no grant for a workspace that cannot be reached";
}

TEST_F(SshSetupTest, AnIdentityWithoutItsPubFileIsRefusedBeforeAnyCall) {
  WriteFileOrDie(ssh_dir_ + "/lonely", "not a key", 0600);
  auto r = Setup({"--identity", ssh_dir_ + "/lonely"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(ssh_dir_ + "/lonely.pub"), std::string::npos) << r.err;
  EXPECT_TRUE(console_.requests().empty());

  // An RSA key is named as such, with what to do.
  MakeSshKeyPair(ssh_dir_ + "/id_rsa", "rsa");
  r = Setup({"--identity", ssh_dir_ + "/id_rsa"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("ssh-keygen -t ed25519"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(paths_.uplink_dir));
}

TEST_F(SshSetupTest, AnotherIdentityIsGrantedItsOwnKey) {
  const std::string other = MakeSshKeyPair(ssh_dir_ + "/work_ecdsa", "ecdsa");
  auto r = Setup({"--identity", ssh_dir_ + "/work_ecdsa.pub"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ssh_.grants().at(0).at("public_key").as_string(),
            protocol::ParseSshPublicKey(other)->Authorized());
  EXPECT_NE(ReadFileOrEmpty(paths_.host_config).find("  IdentityFile " + ssh_dir_ + "/work_ecdsa\n"),
            std::string::npos);
}

TEST_F(SshSetupTest, HostileReadinessRepliesAreRefusedAndWriteNothing) {
  const std::string rsa = MakeSshKeyPair(keys_.File("rsa"), "rsa");
  struct Case {
    std::string what;
    std::function<void(json::object&)> spoil;
  };
  const std::vector<Case> cases = {
      {"no host key", [](json::object& r) { r.erase("host_key"); }},
      {"an RSA host key", [&](json::object& r) { r["host_key"] = rsa; }},
      {"a host key with a line break and a second option",
       [&](json::object& r) {
         r["host_key"] = PinnedKey() + "\n  ProxyCommand sh -c evil";
       }},
      {"a host key of garbage", [](json::object& r) { r["host_key"] = "ssh-ed25519 AAAA!!"; }},
      {"a host key that is a number", [](json::object& r) { r["host_key"] = 7; }},
      {"a fingerprint of another key",
       [](json::object& r) { r["host_key_fingerprint"] = "SHA256:AAAAAAAAAAAAAAAAAAAAAA"; }},
      {"no user", [](json::object& r) { r.erase("user"); }},
      {"a user with a line break", [](json::object& r) { r["user"] = "root\n  ProxyCommand x"; }},
      {"a user with a space", [](json::object& r) { r["user"] = "work space"; }},
      {"a state that is not a string", [](json::object& r) { r["state"] = true; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    json::object reply = ssh_.ReadyReply();
    c.spoil(reply);
    ssh_.SetReadiness(reply);
    auto r = Setup();
    EXPECT_NE(r.code, 0);
    EXPECT_TRUE(r.err.starts_with("uplink: ")) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
    EXPECT_FALSE(Exists(paths_.uplink_dir));
    EXPECT_FALSE(Exists(paths_.config));
    EXPECT_EQ(Posts(), 0u);
  }
  // A reply that is not JSON at all.
  console_.OnJson("GET", protocol::SshReadinessPath(kReservation), 200, "<html>proxy</html>");
  auto r = Setup();
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_FALSE(Exists(paths_.uplink_dir));
}

TEST_F(SshSetupTest, AGrantReplyOfAnotherKeyOrABadIdIsRefused) {
  const std::string stranger = MakeSshKeyPair(keys_.File("stranger"));
  const std::string path = std::string("/api/v1/reservations/") + kReservation + "/ssh-grants";
  for (const json::object& grant :
       {json::object{{"id", "ssg_0000000000000001"}, {"public_key", stranger}, {"state", "active"}},
        json::object{{"id", "ssg_../../etc"}, {"public_key", identity_pub_}, {"state", "active"}},
        json::object{{"id", "ssg_0000000000000001 --console http://evil"},
                     {"public_key", identity_pub_},
                     {"state", "active"}}}) {
    console_.OnJson("POST", path, 201, grant);
    auto r = Setup();
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("not a grant of your key"), std::string::npos) << r.err;
    EXPECT_FALSE(Exists(paths_.host_config));
  }
}

TEST_F(SshSetupTest, AChangedHostKeyIsNotPinnedOverTheOldOne) {
  ASSERT_EQ(Setup().code, 0);
  const std::string pinned = ReadFileOrEmpty(paths_.known_hosts);
  json::object reply = ssh_.ReadyReply();
  const std::string other = MakeSshKeyPair(keys_.File("other_host"));
  reply["host_key"] = other;
  reply["host_key_fingerprint"] = protocol::ParseSshPublicKey(other)->fingerprint;
  ssh_.SetReadiness(reply);
  auto r = Setup();
  EXPECT_EQ(r.code, 6) << r.err;
  EXPECT_NE(r.err.find("not the one the console reports now"), std::string::npos) << r.err;
  EXPECT_EQ(ReadFileOrEmpty(paths_.known_hosts), pinned);
}

TEST_F(SshSetupTest, PathsSshCannotReadSafelyAreRefused) {
  const std::string odd = ssh_dir_ + "/100%key";
  MakeSshKeyPair(odd);
  auto r = Setup({"--identity", odd});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("has a character ssh would not read"), std::string::npos) << r.err;
  EXPECT_EQ(Posts(), 0u) << "checked before a grant is made";
  EXPECT_FALSE(Exists(paths_.uplink_dir));

  for (const std::string& bad : {std::string("../etc"), std::string("res_0123456789abcdeF"),
                                 std::string("res_0123456789abcdef\nHost *")}) {
    auto refused = cli_.Run({"ssh", "setup", bad});
    EXPECT_EQ(refused.code, 2) << refused.err;
    EXPECT_NE(refused.err.find("is not a reservation id"), std::string::npos) << refused.err;
  }
}

TEST_F(SshSetupTest, ASshDirWithABlankIsQuoted) {
  const std::string dir = cli_.home() + "/my ssh";
  std::filesystem::create_directory(dir);
  MakeSshKeyPair(dir + "/id_ed25519");
  auto r = Setup({"--ssh-dir", dir});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFileOrEmpty(dir + "/config"), "Include \"" + dir + "/uplink\"/*.conf\n");
  EXPECT_NE(ReadFileOrEmpty(dir + "/uplink/" + kReservation + ".conf")
                .find("  IdentityFile \"" + dir + "/id_ed25519\"\n"),
            std::string::npos);
}

TEST(SshConfigTest, WithIncludeFirstKeepsEveryOtherByte) {
  const std::string inc = "Include /h/.ssh/uplink/*.conf";
  EXPECT_EQ(WithIncludeFirst("", inc), inc + "\n");
  EXPECT_EQ(WithIncludeFirst("Host a\r\n  User b", inc), inc + "\nHost a\r\n  User b");
  EXPECT_EQ(WithIncludeFirst(inc + "\nHost a\n", inc), inc + "\nHost a\n");
  EXPECT_EQ(WithIncludeFirst("Host a\n" + inc + "\n" + inc, inc), inc + "\nHost a\n");
  // A similar line of the user's is not ours.
  EXPECT_EQ(WithIncludeFirst("#" + inc + "\n", inc), inc + "\n#" + inc + "\n");
}

TEST(SshConfigTest, ProxyCommandWordsAreQuotedForTheShellAndPercentDoubled) {
  EXPECT_EQ(SshProxyCommand({"/usr/bin/uplink", "ssh", "proxy", "res_1", "--console",
                             "https://c.example:8443"})
                .value(),
            "/usr/bin/uplink ssh proxy res_1 --console https://c.example:8443");
  EXPECT_EQ(SshProxyCommand({"/opt/my tools/uplink", "--ca-file", "/a/b;c$(x)%h"}).value(),
            "'/opt/my tools/uplink' --ca-file '/a/b;c$(x)%%h'");
  EXPECT_FALSE(SshProxyCommand({"/a/it's"}).ok());
  EXPECT_FALSE(SshProxyCommand({"/a/b\nc"}).ok());
  EXPECT_FALSE(SshProxyCommand({"/a/b\\c"}).ok());
}

class SshGrantCommandsTest : public SshSetupTest {};

TEST_F(SshGrantCommandsTest, GrantListAndRevoke) {
  auto none = cli_.Run({"ssh", "grants", kReservation});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_NE(none.out.find("No SSH grants"), std::string::npos) << none.out;

  auto granted = cli_.Run({"ssh", "grant", kReservation, "--public-key",
                           ssh_dir_ + "/id_ed25519.pub", "--expires-in", "2h"});
  ASSERT_EQ(granted.code, 0) << granted.err;
  auto posts = console_.RequestsTo(
      "POST", std::string("/api/v1/reservations/") + kReservation + "/ssh-grants");
  ASSERT_EQ(posts.size(), 1u);
  auto body = ParseJson(posts[0].body)->as_object();
  EXPECT_EQ(body.at("public_key").as_string(), identity_pub_);
  EXPECT_EQ(body.at("expires_at").as_string(),
            FormatRfc3339(WallTime(std::chrono::seconds(1'800'000'000 + 7200))));
  const std::string id(ssh_.grants().at(0).at("id").as_string());
  EXPECT_NE(granted.out.find(id), std::string::npos) << granted.out;

  auto listed = cli_.Run({"ssh", "grants", kReservation});
  ASSERT_EQ(listed.code, 0) << listed.err;
  for (const std::string& text :
       {std::string("ID"), std::string("FINGERPRINT"), std::string("EXPIRES"), id,
        std::string(ssh_.grants().at(0).at("fingerprint").as_string()), std::string("active")}) {
    EXPECT_NE(listed.out.find(text), std::string::npos) << text << "\n" << listed.out;
  }

  const std::string revoke_path =
      std::string("/api/v1/reservations/") + kReservation + "/ssh-grants/" + id;
  json::object revoked = ssh_.grants().at(0);
  revoked["state"] = "revoked";
  console_.OnJson("DELETE", revoke_path, 200, revoked);
  auto r = cli_.Run({"ssh", "revoke", kReservation, id});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(console_.RequestsTo("DELETE", revoke_path).size(), 1u);
  EXPECT_NE(r.out.find("revoked"), std::string::npos) << r.out;

  // A key file that is not a key is refused locally, saying which file.
  WriteFileOrDie(cli_.home() + "/bad.pub", "ssh-rsa AAAAB3Nza", 0600);
  auto bad = cli_.Run({"ssh", "grant", kReservation, "--public-key", cli_.home() + "/bad.pub"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find(cli_.home() + "/bad.pub"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace uplink::cli::testing
