// SSH and IDE access end to end, every part real: OpenSSH's ssh, scp and sftp on this machine,
// `uplink ssh setup` writing their config and `uplink ssh proxy` as their ProxyCommand, the
// console's relay, the controller's tunnel (`uplink-agent workspace --ssh`), uplink-kubesim's
// exec into a podman container of the workspace SSH image (deploy/workspace, built once per
// machine), and `sshd -i` inside it as UID 1000.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "common/files.h"
#include "net/client.h"
#include "ssh_flow.h"

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

constexpr size_t kFileBytes = 50 << 20;

class WorkspaceSshEndToEnd : public SshFlow {
 protected:
  // ssh without the setup's config, as a user who holds `identity` and the ProxyCommand of
  // `grant`: everything else as the config block says.
  testing::CommandResult SshAs(const std::string& identity, const std::string& grant,
                               const std::string& user = "workspace") {
    const std::string proxy =
        std::regex_replace(ProxyCommand(), std::regex("ssg_[0-9a-f]+"), grant);
    return d_.RunInCliEnvironment(
        {"/usr/bin/setsid", "--wait", "/usr/bin/ssh", "-F", "none", "-o", "BatchMode=yes", "-o",
         "IdentitiesOnly=yes", "-i", identity, "-o", "ProxyCommand=" + proxy, "-o",
         "StrictHostKeyChecking=yes", "-o",
         "UserKnownHostsFile=" + SshDir() + "/uplink/" + id_ + ".known_hosts", "-o",
         "HostKeyAlias=" + Host(), "-l", user, Host(), "id -u"},
        UserEnv(), "", 120s);
  }

  // The workspace's authorized_keys, as a console command reads it.
  std::string AuthorizedKeys() {
    return String(RunCommand(id_, "shell", "cat /scratch/.uplink-ssh/authorized_keys"), "output");
  }

  json::value Transfer() {
    return d_.ApiJson("GET", "/api/v1/reservations/" + id_).at("transfer");
  }
};

TEST_F(WorkspaceSshEndToEnd, PlainSshScpSftpAndALocalForwardWorkAndEverythingElseIsRefused) {
  ASSERT_NO_FATAL_FAILURE(ReadyForSsh());
  EXPECT_EQ(String(ssh_, "user"), "workspace");
  const std::string host_key = String(ssh_, "host_key");
  ASSERT_TRUE(host_key.starts_with("ssh-ed25519 ")) << ToJson(ssh_);
  EXPECT_TRUE(String(ssh_, "host_key_fingerprint").starts_with("SHA256:")) << ToJson(ssh_);
  // The host key the console pinned is the one in the user's known_hosts, alone.
  const std::string known_hosts =
      uplink::testing::ReadFileOrEmpty(SshDir() + "/uplink/" + id_ + ".known_hosts");
  EXPECT_EQ(known_hosts, Host() + " " + host_key + "\n");
  EXPECT_EQ(uplink::testing::ReadFileOrEmpty(SshDir() + "/config").find("Include "), 0u);

  // A command, as UID 1000.
  testing::CommandResult id_u = Ssh("id -u");
  ASSERT_EQ(id_u.exit_code, 0) << id_u.err << cluster_->ControllerLogs();
  EXPECT_EQ(id_u.out, "1000\n");

  // scp both ways, 50 MiB, intact.
  const std::string up = d_.dir() + "/up.bin", down = d_.dir() + "/down.bin";
  ASSERT_NO_FATAL_FAILURE(RandomFile(up, kFileBytes));
  testing::CommandResult put = Run("scp", {"-q", up, Host() + ":/scratch/up.bin"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  testing::CommandResult sum = Ssh("sha256sum /scratch/up.bin");
  EXPECT_EQ(sum.out.substr(0, 64), Sha256OfFile(up)) << sum.err;
  testing::CommandResult get = Run("scp", {"-q", Host() + ":/scratch/up.bin", down});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(Sha256OfFile(down), Sha256OfFile(up));
  EXPECT_EQ(Ssh("rm /scratch/up.bin").exit_code, 0);

  // sftp both ways, 50 MiB, intact.
  const std::string back = d_.dir() + "/back.bin";
  testing::CommandResult sftp = Run(
      "sftp", {"-b", "-", Host()},
      "put " + up + " /scratch/sftp.bin\nget /scratch/sftp.bin " + back + "\nrm /scratch/sftp.bin\n");
  ASSERT_EQ(sftp.exit_code, 0) << sftp.out << sftp.err;
  EXPECT_EQ(Sha256OfFile(back), Sha256OfFile(up));
  // Every byte went through the relay, and was counted: four transfers of 50 MiB and more.
  EXPECT_GT(Transfer().at("used_bytes").to_number<std::int64_t>(), 4 * static_cast<std::int64_t>(kFileBytes))
      << ToJson(Transfer());

  // A local forward to a port on the workspace's loopback, as VS Code Remote-SSH uses.
  std::filesystem::create_directories(d_.dir() + "/forward");
  // One session serves HTTP on the workspace's loopback and forwards a local port to it.
  const int local_port = testing::FreePort();
  testing::ChildProcess forward(
      ClientArgv("ssh", {"-o", "ExitOnForwardFailure=yes", "-L",
                         "127.0.0.1:" + std::to_string(local_port) + ":127.0.0.1:8000", Host(),
                         "cd /scratch && exec python3 -m http.server --bind 127.0.0.1 8000"}),
      d_.dir() + "/forward", d_.CliEnvironment(UserEnv()));
  auto client = net::HttpClient::Create(
      {.base_url = "http://127.0.0.1:" + std::to_string(local_port)});
  ASSERT_TRUE(client.ok());
  int forwarded_status = 0;
  EXPECT_TRUE(testing::WaitFor([&] {
    net::Request request;
    request.target = "/";
    auto response = (*client)->Send(request);
    forwarded_status = response.ok() ? response->status : 0;
    return forwarded_status == 200;
  }, 60s)) << forward.Stderr();
  forward.Stop();

  // Refused: a remote forward, agent forwarding, root, and any password.
  testing::CommandResult remote = Run(
      "ssh", {"-o", "ExitOnForwardFailure=yes", "-R", "127.0.0.1:0:127.0.0.1:22", Host(), "true"});
  EXPECT_NE(remote.exit_code, 0) << "a remote forward was allowed";
  testing::CommandResult agent = testing::RunCommand({"/usr/bin/ssh-agent", "-s"});
  std::smatch socket_match, pid_match;
  ASSERT_TRUE(std::regex_search(agent.out, socket_match, std::regex("SSH_AUTH_SOCK=([^;]+);")));
  ASSERT_TRUE(std::regex_search(agent.out, pid_match, std::regex("SSH_AGENT_PID=([0-9]+);")));
  std::map<std::string, std::string> with_agent = UserEnv();
  with_agent["SSH_AUTH_SOCK"] = socket_match[1];
  testing::RunCommand({"/usr/bin/ssh-add", "-q", key_}, 30s, d_.CliEnvironment(with_agent));
  testing::CommandResult forwarded_agent = d_.RunInCliEnvironment(
      ClientArgv("ssh", {"-A", Host(), "echo ${SSH_AUTH_SOCK:-none}"}),
      with_agent, "", 120s);
  testing::RunCommand({"/usr/bin/kill", pid_match.str(1)});
  EXPECT_EQ(forwarded_agent.out, "none\n") << forwarded_agent.err;
  testing::CommandResult root = Run("ssh", {"-l", "root", Host(), "true"});
  EXPECT_NE(root.exit_code, 0);
  EXPECT_NE(root.err.find("Permission denied"), std::string::npos) << root.err;
  testing::CommandResult password = Run(
      "ssh", {"-o", "PreferredAuthentications=password,keyboard-interactive", Host(), "true"});
  EXPECT_NE(password.exit_code, 0) << "a login without a key succeeded";

  // A host key other than the pinned one is refused by the client.
  const std::string impostor = NewKey("impostor", "ed25519");
  const std::string wrong_hosts = d_.dir() + "/wrong_known_hosts";
  testing::WriteFileOrDie(wrong_hosts,
                          Host() + " " + uplink::testing::ReadFileOrEmpty(impostor + ".pub"));
  testing::CommandResult wrong =
      Run("ssh", {"-o", "UserKnownHostsFile=" + wrong_hosts, Host(), "true"});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("Host key verification failed"), std::string::npos) << wrong.err;
}

TEST_F(WorkspaceSshEndToEnd, GrantsAreAddedWithoutRemovingOthersAndARevokedOneOpensNothing) {
  ASSERT_NO_FATAL_FAILURE(ReadyForSsh());
  // A key without a grant is refused by sshd.
  const std::string stranger = NewKey("stranger", "ecdsa");
  testing::CommandResult refused = SshAs(stranger, grant_);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("Permission denied (publickey)"), std::string::npos) << refused.err;

  // Granted, it logs in through its own grant, and the first key stays.
  testing::CommandResult granted = Cli({"ssh", "grant", id_, "--public-key", stranger + ".pub"});
  ASSERT_EQ(granted.exit_code, 0) << granted.err;
  const std::string second = GrantIn(granted.out);
  ASSERT_TRUE(second.starts_with("ssg_") && second != grant_) << granted.out;
  testing::CommandResult as_second = SshAs(stranger, second);
  EXPECT_EQ(as_second.out, "1000\n") << as_second.err;
  const std::string first_key = uplink::testing::ReadFileOrEmpty(key_ + ".pub").substr(0, 60);
  const std::string second_key = uplink::testing::ReadFileOrEmpty(stranger + ".pub").substr(0, 60);
  std::string keys = AuthorizedKeys();
  EXPECT_NE(keys.find(first_key.substr(12)), std::string::npos) << keys;
  EXPECT_NE(keys.find(second_key.substr(20)), std::string::npos) << keys;
  EXPECT_EQ(Ssh("id -u").out, "1000\n");

  // Revoked: no new session through its grant, its key gone from the workspace, and the other
  // grant's sessions unaffected.
  testing::CommandResult revoked = Cli({"ssh", "revoke", id_, second});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  testing::CommandResult after = SshAs(stranger, second);
  EXPECT_NE(after.exit_code, 0);
  EXPECT_NE(after.err.find("uplink ssh proxy:"), std::string::npos) << after.err;
  EXPECT_NE(after.err.find("grant"), std::string::npos) << after.err;
  EXPECT_TRUE(testing::WaitFor([&] {
    return AuthorizedKeys().find(second_key.substr(20)) == std::string::npos;
  }, 30s)) << AuthorizedKeys();
  // Even through a valid grant's channel, sshd no longer knows the key.
  testing::CommandResult through_first = SshAs(stranger, grant_);
  EXPECT_NE(through_first.exit_code, 0);
  EXPECT_NE(through_first.err.find("Permission denied (publickey)"), std::string::npos)
      << through_first.err;
  EXPECT_EQ(Ssh("id -u").out, "1000\n");
  testing::CommandResult listed = Cli({"ssh", "grants", id_});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find(second), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("revoked"), std::string::npos) << listed.out;
}

TEST_F(WorkspaceSshEndToEnd, AConsoleRestartDisablingSshAndTheReservationsEnd) {
  ASSERT_NO_FATAL_FAILURE(ReadyForSsh());
  ASSERT_EQ(Ssh("id -u").out, "1000\n");

  // The console restarts: the controller's tunnel comes back on its own, and a new session
  // works within seconds of the console answering again.
  d_.StopConsole();
  ASSERT_NO_FATAL_FAILURE(
      d_.StartConsole(ConsoleFlags()));
  const auto back = SteadyClock::now();
  std::string last_error;
  EXPECT_TRUE(testing::WaitFor([&] {
    testing::CommandResult attempt = Ssh("id -u");
    last_error = attempt.err;
    return attempt.out == "1000\n";
  }, 90s)) << last_error << cluster_->ControllerLogs();
  std::printf("a new session after the console restart: %.1f s after it answered\n",
              std::chrono::duration<double>(SteadyClock::now() - back).count());

  // SSH disabled (the supplier's helm upgrade with sshEnabled false): no session, and the
  // console says why; commands go on working.
  cluster_->StartController();
  EXPECT_TRUE(testing::WaitFor([&] { return Ssh("true").exit_code != 0; }, 90s));
  json::value ssh = d_.ApiJson("GET", "/api/v1/reservations/" + id_ + "/ssh");
  EXPECT_EQ(String(ssh, "state"), "unavailable") << ToJson(ssh);
  EXPECT_FALSE(String(ssh, "reason").empty()) << ToJson(ssh);
  json::value command = RunCommand(id_, "shell", "id -u");
  EXPECT_EQ(String(command, "output"), "1000\n") << ToJson(command);

  // On again: a session works.
  cluster_->StartController({"--ssh"});
  EXPECT_TRUE(testing::WaitFor([&] { return Ssh("id -u").out == "1000\n"; }, 90s))
      << cluster_->ControllerLogs();

  // The reservation's end closes the session that is open, and ssh is told why.
  const std::string session_logs = d_.dir() + "/session";
  std::filesystem::create_directories(session_logs);
  testing::ChildProcess session(ClientArgv("ssh", {Host(), "echo logged-in; sleep 600"}),
                                session_logs, d_.CliEnvironment(UserEnv()));
  ASSERT_TRUE(testing::WaitFor([&] { return session.Stdout() == "logged-in\n"; }, 60s))
      << session.Stderr();
  json::value open_now = d_.ApiJson("GET", "/api/v1/reservations/" + id_ + "/ssh");
  EXPECT_EQ(open_now.at("open_channels").to_number<std::int64_t>(), 1) << ToJson(open_now);
  net::Response stopped = d_.Api("POST", "/api/v1/reservations/" + id_ + "/stop", "{}");
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  std::optional<int> ended = session.Wait(60s);
  ASSERT_TRUE(ended.has_value()) << "the session outlived its reservation";
  EXPECT_NE(*ended, 0);
  EXPECT_NE(session.Stderr().find("the reservation ended"), std::string::npos) << session.Stderr();
}

TEST_F(WorkspaceSshEndToEnd, TheTransferBudgetCutsATransferAtTheBudgetAndSaysWhy) {
  transfer_budget_ = "16Mi";
  ASSERT_NO_FATAL_FAILURE(ReadyForSsh());
  const std::int64_t budget = Transfer().at("budget_bytes").to_number<std::int64_t>();
  ASSERT_EQ(budget, 16 << 20);
  const std::string up = d_.dir() + "/up.bin";
  ASSERT_NO_FATAL_FAILURE(RandomFile(up, 32 << 20));
  testing::CommandResult cut = Run("scp", {"-q", up, Host() + ":/scratch/up.bin"});
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_NE(cut.err.find("uplink ssh proxy: transfer budget used up"), std::string::npos) << cut.err;
  // Counted to the budget and not past it: the message that would have crossed it was held.
  std::int64_t used = 0;
  EXPECT_TRUE(testing::WaitFor([&] {
    used = Transfer().at("used_bytes").to_number<std::int64_t>();
    return used >= budget - (64 << 10);
  }, 30s)) << used;
  EXPECT_LE(used, budget);
  // No more than what is left gets through, and the user is told why.
  const std::string small = d_.dir() + "/small.bin";
  ASSERT_NO_FATAL_FAILURE(RandomFile(small, 1 << 20));
  testing::CommandResult more = Run("scp", {"-q", small, Host() + ":/scratch/small.bin"});
  EXPECT_NE(more.exit_code, 0);
  EXPECT_NE(more.err.find("transfer budget"), std::string::npos) << more.err;
  // Commands are not SSH transfer: they still run.
  EXPECT_EQ(String(RunCommand(id_, "shell", "id -u"), "output"), "1000\n");
}

}  // namespace
}  // namespace uplink::e2e
