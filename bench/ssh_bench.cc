// bench_ssh: what the SSH relay costs, beside the same sshd reached without it, in one run.
//
// Every part real, as in tests/e2e/workspace_ssh_e2e_test.cc: OpenSSH's ssh and scp, `uplink
// ssh proxy`, the console's relay, the controller's tunnel, uplink-kubesim's exec into a podman
// container of the workspace SSH image, `sshd -i` in it. The baseline is the same sshd, the
// same host key and authorized_keys, reached over a direct exec pipe: ProxyCommand `kubectl
// exec -i POD -- sshd -i` against the same kubesim, so what differs is the relay alone (the
// client channel, the console, the agent's data channel).
//
// 1. Throughput: `scp` of a 1 GiB file to /dev/null in the workspace, relay and direct
//    alternating, 3 rounds; the median of each and relay / direct (aim >= 0.5).
// 2. Keystroke latency: one byte at a time through `ssh HOST cat` (the byte's echo awaited
//    before the next is sent), 300 bytes each way; p50 and p99 of the round trip, relay and
//    direct, and the difference: the latency the relay adds per keystroke.
// 3. Memory: the console's and the controller's RSS before and with N idle sessions open
//    (`ssh HOST sleep`), per open channel.
//
// Flags: --file-mib N (1024), --rounds N (3), --keystrokes N (300), --idle N (100).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ssh_flow.h"

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

struct BenchOptions {
  int file_mib = 1024;
  int rounds = 3;
  int keystrokes = 300;
  int idle = 100;
};
BenchOptions g_options;

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t at = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(at, values.size() - 1)];
}

// A child with its stdin and stdout on pipes, for one-byte round trips.
class PipedChild {
 public:
  PipedChild(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      std::vector<char*> args, envp;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
      envp.push_back(nullptr);
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
  }
  ~PipedChild() {
    if (to_child_ >= 0) close(to_child_);
    if (from_child_ >= 0) close(from_child_);
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Sends one byte and waits up to `timeout` for one back; the round trip, or nothing.
  std::optional<SteadyClock::duration> RoundTrip(char byte, std::chrono::milliseconds timeout) {
    const auto start = SteadyClock::now();
    if (write(to_child_, &byte, 1) != 1) return std::nullopt;
    pollfd ready{from_child_, POLLIN, 0};
    if (poll(&ready, 1, static_cast<int>(timeout.count())) != 1) return std::nullopt;
    char echoed = 0;
    if (read(from_child_, &echoed, 1) != 1 || echoed != byte) return std::nullopt;
    return SteadyClock::now() - start;
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
};

class SshBench : public SshFlow {
 protected:
  // Room for the idle sessions: each is a channel of one grant and an sshd in the workspace.
  void SetUp() override {
    const std::string idle = std::to_string(g_options.idle + 8);
    console_flags_ = {"--ssh-channels-per-grant", idle};
    controller_flags_ = {"--ssh-max-channels", idle};
    SshFlow::SetUp();
    memory_per_gpu_ = "4Gi";
  }

  // ssh/scp options that reach the same sshd over a direct exec pipe instead of the relay.
  std::vector<std::string> Direct() const {
    const std::string proxy = "kubectl --kubeconfig " + cluster_->kubesim().kubeconfig() +
                              " exec -i -n " + cluster_->ns() + " " + pod_ +
                              " -- /usr/sbin/sshd -i -e -f /etc/ssh/sshd_config 2>/dev/null";
    return {"-o", "ProxyCommand=" + proxy};
  }

  double ScpSeconds(const std::string& file, bool direct) {
    std::vector<std::string> args = direct ? Direct() : std::vector<std::string>{};
    args.insert(args.end(), {"-q", file, Host() + ":/dev/null"});
    const auto start = SteadyClock::now();
    testing::CommandResult copied = Run("scp", args, "", 1800s);
    const double seconds = Seconds(SteadyClock::now() - start);
    EXPECT_EQ(copied.exit_code, 0) << copied.err;
    return copied.exit_code == 0 ? seconds : 0;
  }

  std::vector<double> KeystrokeMs(bool direct) {
    std::vector<std::string> args = direct ? Direct() : std::vector<std::string>{};
    args.insert(args.end(), {Host(), "cat"});
    PipedChild session(ClientArgv("ssh", args), d_.CliEnvironment(UserEnv()));
    std::vector<double> ms;
    // The first byte waits for the login; it is not a keystroke's latency.
    if (!session.RoundTrip('.', 120s)) {
      ADD_FAILURE() << "no echo through " << (direct ? "the direct pipe" : "the relay");
      return ms;
    }
    for (int i = 0; i < g_options.keystrokes; ++i) {
      auto trip = session.RoundTrip(static_cast<char>('a' + i % 26), 10s);
      if (!trip) {
        ADD_FAILURE() << "keystroke " << i << " was not echoed";
        break;
      }
      ms.push_back(std::chrono::duration<double, std::milli>(*trip).count());
    }
    return ms;
  }
};

TEST_F(SshBench, ThroughputKeystrokeLatencyAndMemory) {
  ASSERT_NO_FATAL_FAILURE(ReadyForSsh());
  ASSERT_EQ(Ssh("id -u").out, "1000\n");

  // 1. Throughput.
  const std::string file = d_.dir() + "/payload.bin";
  ASSERT_NO_FATAL_FAILURE(RandomFile(file, static_cast<size_t>(g_options.file_mib) << 20));
  std::vector<double> relay, direct;
  const pid_t console = d_.console_pid(), controller = cluster_->ControllerPid();
  double console_cpu = 0, controller_cpu = 0;
  for (int round = 0; round < g_options.rounds; ++round) {
    direct.push_back(ScpSeconds(file, true));
    const double console_at = uplink::testing::ProcessCpuSeconds(console);
    const double controller_at = uplink::testing::ProcessCpuSeconds(controller);
    relay.push_back(ScpSeconds(file, false));
    console_cpu += uplink::testing::ProcessCpuSeconds(console) - console_at;
    controller_cpu += uplink::testing::ProcessCpuSeconds(controller) - controller_at;
  }
  std::filesystem::remove(file);
  const double mib = g_options.file_mib;
  const double relay_rate = mib / Percentile(relay, 0.5), direct_rate = mib / Percentile(direct, 0.5);
  std::printf("ssh: scp %d MiB: relay %.1f MiB/s, direct exec pipe %.1f MiB/s (median of %d): "
              "%.2fx direct (aim >= 0.5)\n",
              g_options.file_mib, relay_rate, direct_rate, g_options.rounds, relay_rate / direct_rate);
  // What the relay's hops cost the CPU (the machine's cores are what bounds them here).
  const double gib = mib / 1024 * g_options.rounds;
  std::printf("ssh: relay CPU per GiB moved: console %.2f s, controller %.2f s\n",
              console_cpu / gib, controller_cpu / gib);

  // 2. Keystroke latency.
  std::vector<double> relay_ms = KeystrokeMs(false), direct_ms = KeystrokeMs(true);
  std::printf("ssh: keystroke round trip (%d): relay p50 %.2f ms p99 %.2f ms, direct p50 %.2f ms "
              "p99 %.2f ms: the relay adds %.2f ms (p50), %.2f ms (p99)\n",
              g_options.keystrokes, Percentile(relay_ms, 0.5), Percentile(relay_ms, 0.99),
              Percentile(direct_ms, 0.5), Percentile(direct_ms, 0.99),
              Percentile(relay_ms, 0.5) - Percentile(direct_ms, 0.5),
              Percentile(relay_ms, 0.99) - Percentile(direct_ms, 0.99));

  // 3. Memory with N idle sessions.
  auto rss = [](pid_t pid) { return uplink::testing::ProcessStatusKib(pid, "VmRSS"); };
  const long console_before = rss(console), controller_before = rss(controller);
  std::vector<std::unique_ptr<testing::ChildProcess>> sessions;
  for (int i = 0; i < g_options.idle; ++i) {
    const std::string logs = d_.dir() + "/idle-" + std::to_string(i);
    std::filesystem::create_directories(logs);
    sessions.push_back(std::make_unique<testing::ChildProcess>(
        ClientArgv("ssh", {Host(), "sleep 3600"}), logs, d_.CliEnvironment(UserEnv())));
  }
  std::int64_t open = 0;
  EXPECT_TRUE(testing::WaitFor([&] {
    json::value ssh = d_.ApiJson("GET", "/api/v1/reservations/" + id_ + "/ssh");
    const json::value* count = ssh.as_object().if_contains("open_channels");
    open = count != nullptr && count->is_int64() ? count->as_int64() : 0;
    return open >= g_options.idle;
  }, 300s)) << open << " channels open of " << g_options.idle;
  std::this_thread::sleep_for(2s);  // the logins' transient buffers released
  const long console_with = rss(console), controller_with = rss(controller);
  std::printf("ssh: %lld idle channels: console RSS %.1f -> %.1f MiB (%.0f KiB per channel), "
              "controller RSS %.1f -> %.1f MiB (%.0f KiB per channel)\n",
              static_cast<long long>(open), console_before / 1024.0, console_with / 1024.0,
              static_cast<double>(console_with - console_before) / std::max<double>(1, open),
              controller_before / 1024.0, controller_with / 1024.0,
              static_cast<double>(controller_with - controller_before) / std::max<double>(1, open));
  sessions.clear();
}

}  // namespace
}  // namespace uplink::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name, int* into) {
      const std::string prefix = std::string("--") + name + "=";
      if (arg.starts_with(prefix)) *into = std::atoi(arg.c_str() + prefix.size());
    };
    value("file-mib", &uplink::e2e::g_options.file_mib);
    value("rounds", &uplink::e2e::g_options.rounds);
    value("keystrokes", &uplink::e2e::g_options.keystrokes);
    value("idle", &uplink::e2e::g_options.idle);
  }
  const auto& o = uplink::e2e::g_options;
  if (o.file_mib < 1 || o.rounds < 1 || o.keystrokes < 1 || o.idle < 1) {
    std::fprintf(stderr, "bench_ssh: --file-mib, --rounds, --keystrokes and --idle take whole numbers >= 1\n");
    return 2;
  }
  return RUN_ALL_TESTS();
}
