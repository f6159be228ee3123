#include "ssh_flow.h"

#include <filesystem>
#include <regex>

#include "common/crypto.h"
#include "kubesim_process.h"

namespace uplink::e2e {

using namespace std::chrono_literals;

std::string Sha256OfFile(const std::string& path) {
  return Sha256Hex(uplink::testing::ReadFileOrEmpty(path));
}

void RandomFile(const std::string& path, size_t bytes) {
  testing::CommandResult made = testing::RunCommand(
      {"/usr/bin/dd", "if=/dev/urandom", "of=" + path, "bs=1M", "count=" + std::to_string(bytes >> 20),
       "status=none"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
}

void SshFlow::SetUp() {
  Result<std::string> image = kubesim::testing::WorkspaceSshImage();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ssh_enabled_ = true;
  memory_per_gpu_ = "1Gi";  // scratch is a tmpfs, charged to the container's memory
  StartWith("podman", *image);
}

void SshFlow::ReadyForSsh() {
  Qualified qualified;
  ASSERT_NO_FATAL_FAILURE(QualifyAndStartController(&qualified));
  offer_id_ = qualified.offer_id;
  ASSERT_NO_FATAL_FAILURE(ReserveUntilRunning(offer_id_, 1, &id_, &pod_));
  ssh_ = WaitUntilReady();
  ASSERT_EQ(String(ssh_, "state"), "ready") << ToJson(ssh_);
  key_ = NewKey("id_ed25519", "ed25519");
  testing::CommandResult setup =
      Cli({"ssh", "setup", id_, "--identity", key_, "--ssh-dir", SshDir()});
  ASSERT_EQ(setup.exit_code, 0) << setup.out << setup.err;
  grant_ = GrantIn(ReadConf());
  ASSERT_TRUE(grant_.starts_with("ssg_")) << setup.out << ReadConf();
}

json::value SshFlow::WaitUntilReady() {
  json::value ssh;
  EXPECT_TRUE(testing::WaitFor([&] {
    ssh = d_.ApiJson("GET", "/api/v1/reservations/" + id_ + "/ssh");
    return String(ssh, "state") == "ready";
  }, 120s)) << ToJson(ssh) << cluster_->ControllerLogs();
  return ssh;
}

std::string SshFlow::NewKey(const std::string& name, const std::string& type) {
  std::filesystem::create_directories(d_.cli_home());
  const std::string path = d_.cli_home() + "/" + name;
  testing::CommandResult made =
      testing::RunCommand({"/usr/bin/ssh-keygen", "-q", "-t", type, "-N", "", "-C", name, "-f", path});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  return path;
}

testing::CommandResult SshFlow::Cli(std::vector<std::string> args) {
  return d_.Uplink(std::move(args), UserEnv());
}

std::string SshFlow::ReadConf() const {
  return uplink::testing::ReadFileOrEmpty(SshDir() + "/uplink/" + id_ + ".conf");
}

std::string SshFlow::GrantIn(const std::string& text) {
  std::smatch match;
  return std::regex_search(text, match, std::regex("ssg_[0-9a-f]+")) ? match.str() : "";
}

std::map<std::string, std::string> SshFlow::UserEnv() const {
  return {{"UPLINK_API_KEY", d_.admin_key()}};
}

std::vector<std::string> SshFlow::ClientArgv(const std::string& program,
                                             const std::vector<std::string>& args) const {
  std::vector<std::string> argv{"/usr/bin/setsid", "--wait", "/usr/bin/" + program, "-F",
                                SshDir() + "/config", "-o", "BatchMode=yes"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

testing::CommandResult SshFlow::Run(const std::string& program,
                                    const std::vector<std::string>& args,
                                    const std::string& stdin_data,
                                    std::chrono::milliseconds timeout) {
  return d_.RunInCliEnvironment(ClientArgv(program, args), UserEnv(), stdin_data, timeout);
}

testing::CommandResult SshFlow::Ssh(const std::string& command) {
  return Run("ssh", {Host(), command}, "", 120s);
}

std::string SshFlow::ProxyCommand() const {
  std::smatch match;
  const std::string conf = ReadConf();
  return std::regex_search(conf, match, std::regex("ProxyCommand ([^\n]+)")) ? match.str(1) : "";
}

}  // namespace uplink::e2e
