#include "cluster.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <deque>
#include <filesystem>

#include "common/files.h"
#include "net/certs.h"

namespace uplink::e2e {

Deployment::Deployment() = default;

Deployment::~Deployment() {
  StopConsole();
  for (auto& cluster : clusters_) cluster.process->Stop();
}

SimulatedCluster& Deployment::StartCluster(const std::string& kube_system_uid, int nodes,
                                           int gpus_per_node) {
  const std::string name = "cluster" + std::to_string(clusters_.size());
  const std::string objects = dir() + "/" + name + "-objects.yaml";
  testing::WriteFileOrDie(objects, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-system\n"
                                   "  uid: " + kube_system_uid + "\n");
  SimulatedCluster cluster;
  cluster.kubeconfig = dir() + "/" + name + ".kubeconfig";
  cluster.kube_system_uid = kube_system_uid;
  cluster.process = std::make_unique<testing::ChildProcess>(
      std::vector<std::string>{bin("uplink-kubesim"), "--listen", "127.0.0.1:0", "--nodes",
                               std::to_string(nodes), "--gpus-per-node", std::to_string(gpus_per_node),
                               "--objects", objects, "--workloads", "--kubeconfig-out",
                               cluster.kubeconfig},
      dir());
  const bool started = testing::WaitFor(
      [&] { return !testing::ReadFileOrEmpty(cluster.kubeconfig).empty(); }, std::chrono::seconds(30));
  EXPECT_TRUE(started) << "kubesim did not write its kubeconfig:\n" << cluster.process->Stderr();
  clusters_.push_back(std::move(cluster));
  return clusters_.back();
}

void Deployment::StartConsole(const std::vector<std::string>& serve_flags) {
  const std::string data_dir = dir() + "/console";
  if (admin_key_.empty()) {
    auto init = testing::RunCommand({bin("uplink-console"), "init", "--data-dir", data_dir});
    ASSERT_EQ(init.exit_code, 0) << init.err;
    admin_key_ = std::string(TrimWhitespace(init.out));
    ASSERT_EQ(admin_key_.rfind("uk_", 0), 0u) << "init printed: " << init.out;
    console_port_ = testing::FreePort();
    console_url_ = "http://127.0.0.1:" + std::to_string(console_port_);
    auto client = net::HttpClient::Create({.base_url = console_url_});
    ASSERT_TRUE(client.ok());
    client_ = std::move(*client);
  }
  std::vector<std::string> argv{bin("uplink-console"), "serve", "--data-dir", data_dir, "--listen",
                                "127.0.0.1:" + std::to_string(console_port_)};
  argv.insert(argv.end(), serve_flags.begin(), serve_flags.end());
  console_ = std::make_unique<testing::ChildProcess>(argv, dir());
  const bool healthy = testing::WaitFor([&] {
    net::Request request;
    request.target = "/healthz";
    auto response = client_->Send(request);
    return response.ok() && response->status == 200;
  });
  ASSERT_TRUE(healthy) << "console did not become healthy:\n" << console_->Stderr();
}

void Deployment::StartTlsConsole() {
  auto ca = net::CreateCertificateAuthority("uplink e2e CA", 1);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  auto leaf = net::IssueServerCertificate(*ca, {"127.0.0.1"}, 1);
  ASSERT_TRUE(leaf.ok()) << leaf.status().ToString();
  testing::WriteFileOrDie(ca_file(), ca->cert_pem);
  testing::WriteFileOrDie(dir() + "/console-cert.pem", leaf->cert_pem);
  testing::WriteFileOrDie(dir() + "/console-key.pem", leaf->key_pem);
  const std::string data_dir = dir() + "/console";
  auto init = testing::RunCommand({bin("uplink-console"), "init", "--data-dir", data_dir});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  admin_key_ = std::string(TrimWhitespace(init.out));
  console_port_ = testing::FreePort();
  console_url_ = "https://127.0.0.1:" + std::to_string(console_port_);
  auto client = net::HttpClient::Create({.base_url = console_url_, .ca_file = ca_file()});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  client_ = std::move(*client);
  StartConsole({"--tls-cert", dir() + "/console-cert.pem", "--tls-key", dir() + "/console-key.pem"});
}

void Deployment::StopConsole() {
  if (console_) console_->Stop();
  console_.reset();
}

net::Response Deployment::Api(const std::string& method, const std::string& path,
                              const std::string& body) {
  net::Request request;
  request.method = method;
  request.target = path;
  request.headers.Set("Authorization", "Bearer " + admin_key_);
  if (!body.empty()) {
    request.headers.Set("Content-Type", "application/json");
    request.body = body;
  }
  auto response = client_->Send(request);
  EXPECT_TRUE(response.ok()) << response.status().ToString();
  return response.ok() ? *response : net::Response{};
}

json::value Deployment::ApiJson(const std::string& method, const std::string& path,
                                const std::string& body) {
  net::Response response = Api(method, path, body);
  auto value = ParseJson(response.body);
  EXPECT_TRUE(value.ok()) << response.body;
  return value.ok() ? *value : json::value();
}

Connection Deployment::CreateConnection(const std::string& cluster_name) {
  net::Response response = Api("POST", "/api/v1/connections",
                               R"({"agent_name":"e2e-agent","cluster_name":")" + cluster_name + "\"}");
  EXPECT_EQ(response.status, 201) << response.body;
  auto value = ParseJson(response.body);
  if (!value.ok() || !value->is_object()) return {};
  return Connection{std::string(value->at("id").as_string()),
                    std::string(value->at("token").as_string())};
}

std::string Deployment::WriteToken(const std::string& token) {
  std::string path = dir() + "/token-" + std::to_string(++token_files_);
  testing::WriteFileOrDie(path, token + "\n");
  return path;
}

std::vector<std::string> Deployment::AgentArgs(const SimulatedCluster& cluster,
                                               const std::string& token_file, int health_port) const {
  return {bin("uplink-agent"), "inventory", "--console", console_url_, "--token-file", token_file,
          "--kubeconfig", cluster.kubeconfig, "--health-listen",
          "127.0.0.1:" + std::to_string(health_port)};
}

testing::CommandResult Deployment::RunAgentOnce(const SimulatedCluster& cluster,
                                                const std::string& token_file) {
  auto argv = AgentArgs(cluster, token_file, 0);
  argv.push_back("--once");
  return testing::RunCommand(argv, std::chrono::seconds(60));
}

std::unique_ptr<testing::ChildProcess> Deployment::StartAgent(const SimulatedCluster& cluster,
                                                              const std::string& token_file,
                                                              int health_port) {
  return std::make_unique<testing::ChildProcess>(AgentArgs(cluster, token_file, health_port), dir());
}

testing::CommandResult Deployment::Kubectl(const SimulatedCluster& cluster,
                                           std::vector<std::string> args) {
  std::vector<std::string> argv{"/usr/bin/kubectl", "--kubeconfig", cluster.kubeconfig,
                                "--cache-dir", dir() + "/kube-cache"};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::RunCommand(argv, std::chrono::seconds(60),
                             testing::EnvWith({{"HOME", dir()}, {"KUBECONFIG", ""}}));
}

int Deployment::AgentProbe(int health_port, const std::string& path) {
  auto client = net::HttpClient::Create(
      {.base_url = "http://127.0.0.1:" + std::to_string(health_port),
       .connect_timeout = std::chrono::seconds(2),
       .request_timeout = std::chrono::seconds(5)});
  if (!client.ok()) return -1;
  net::Request request;
  request.target = path;
  auto response = (*client)->Send(request);
  return response.ok() ? response->status : -1;
}

std::vector<std::string> Deployment::CliEnvironment(
    const std::map<std::string, std::string>& env) {
  std::filesystem::create_directories(cli_home());
  std::map<std::string, std::string> vars{{"HOME", cli_home()},
                                          {"XDG_CONFIG_HOME", cli_home() + "/.config"},
                                          {"UPLINK_API_KEY", ""},
                                          {"UPLINK_API_KEY_FILE", ""},
                                          {"UPLINK_CONSOLE", ""},
                                          {"UPLINK_OUTPUT", ""},
                                          {"KUBECONFIG", ""}};
  for (const auto& [name, value] : env) vars[name] = value;
  return testing::EnvWith(vars);
}

testing::CommandResult Deployment::Uplink(std::vector<std::string> args,
                                          const std::map<std::string, std::string>& env,
                                          const std::string& stdin_data) {
  args.insert(args.begin(),
              {"/usr/bin/setsid", "--wait", bin("uplink"), "--console", console_url_});
  return testing::RunCommand(args, std::chrono::seconds(120), CliEnvironment(env), stdin_data);
}

testing::CommandResult Deployment::RunInCliEnvironment(
    std::vector<std::string> argv, const std::map<std::string, std::string>& env,
    const std::string& stdin_data, std::chrono::milliseconds timeout) {
  return testing::RunCommand(argv, timeout, CliEnvironment(env), stdin_data);
}

pid_t Deployment::console_pid() const { return console_ ? console_->pid() : -1; }

testing::CommandResult Deployment::UplinkInTerminal(
    std::vector<std::string> args, const std::map<std::string, std::string>& env,
    const std::vector<std::pair<std::string, std::string>>& dialogue) {
  args.insert(args.begin(), {bin("uplink"), "--console", console_url_});
  std::vector<std::string> env_strings = CliEnvironment(env);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  testing::CommandResult result;
  int master = -1;
  pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) {
    ADD_FAILURE() << "forkpty failed";
    return result;
  }
  if (pid == 0) {  // the child: a new session whose controlling terminal is the pty
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  size_t next = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  char buf[4096];
  while (true) {
    if (next < dialogue.size() && result.out.size() >= dialogue[next].first.size() &&
        result.out.compare(result.out.size() - dialogue[next].first.size(),
                           dialogue[next].first.size(), dialogue[next].first) == 0) {
      const std::string& typed = dialogue[next++].second;
      EXPECT_EQ(::write(master, typed.data(), typed.size()), static_cast<ssize_t>(typed.size()));
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fd{master, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0 && errno != EINTR && errno != EAGAIN) break;  // EIO: the terminal's last user left
    if (n > 0) result.out.append(buf, static_cast<size_t>(n));
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = result.timed_out || !WIFEXITED(status) ? -1 : WEXITSTATUS(status);
  EXPECT_EQ(next, dialogue.size()) << "the terminal never showed: " << dialogue[next].first
                                   << "\nit showed:\n" << result.out;
  return result;
}

int Deployment::AgentWhoami(const std::string& token) {
  net::Request request;
  request.target = "/api/v1/agent/whoami";
  request.headers.Set("Authorization", "Bearer " + token);
  auto response = client_->Send(request);
  return response.ok() ? response->status : -1;
}

}  // namespace uplink::e2e
