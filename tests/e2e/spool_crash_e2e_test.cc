// The spool and its shipper as real processes under SIGKILL, and the console going away and
// coming back: every record printed as durable arrives once, in order, and intact, and what
// the size cap forced out is exactly what the console reports as lost.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "cluster.h"

extern char** environ;

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;

std::string Agent() { return std::string(UPLINK_BIN_DIR) + "/uplink-agent"; }

// FNV-1a, 64 bits: enough to tell a damaged line from an intact one.
std::string Checksum(std::string_view text) {
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

// A record that carries its own checksum, as one line of JSON.
std::string Line(std::uint64_t id, std::mt19937_64& random) {
  std::string pad(random() % 200, 'x');
  for (char& c : pad) c = static_cast<char>('a' + random() % 26);
  std::string body = std::to_string(id) + ":" + pad;
  return ToJson(json::object{{"id", id}, {"pad", pad}, {"sum", Checksum(body)}});
}

// The id of an intact line; nullopt for anything damaged.
std::optional<std::uint64_t> IntactLineId(std::string_view text) {
  auto parsed = ParseJson(text);
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  const json::object& line = parsed->get_object();
  const json::value* id = line.if_contains("id");
  const json::value* pad = line.if_contains("pad");
  const json::value* sum = line.if_contains("sum");
  if (!id || !id->is_number() || !pad || !pad->is_string() || !sum || !sum->is_string()) {
    return std::nullopt;
  }
  std::uint64_t value = id->to_number<std::uint64_t>();
  if (sum->get_string() != Checksum(std::to_string(value) + ":" + std::string(pad->get_string()))) {
    return std::nullopt;
  }
  return value;
}

// The complete lines of a child's stdout as numbers: a line cut short by SIGKILL has no
// newline and was never printed as durable.
std::vector<std::uint64_t> PrintedSequences(const std::string& out) {
  std::vector<std::uint64_t> sequences;
  size_t start = 0;
  while (true) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) break;
    sequences.push_back(std::stoull(out.substr(start, end - start)));
    start = end + 1;
  }
  return sequences;
}

// `uplink-agent spool append` reading a file as stdin, writing stdout to a file: the test
// kills it at any moment and then reads what it had printed.
pid_t StartAppend(const std::vector<std::string>& args, const std::string& stdin_path,
                  const std::string& stdout_path, const std::string& stderr_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, stdin_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(rc, 0) << std::strerror(rc);
  return rc == 0 ? pid : -1;
}

// Waits until the process has printed something to `stdout_path`; false if it exits first.
bool WaitUntilPrinted(pid_t pid, const std::string& stdout_path) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat info {};
    if (::stat(stdout_path.c_str(), &info) == 0 && info.st_size > 0) return true;
    siginfo_t exited{};
    if (::waitid(P_PID, pid, &exited, WEXITED | WNOHANG | WNOWAIT) == 0 && exited.si_pid == pid) {
      return false;  // exited (still to be reaped)
    }
    std::this_thread::sleep_for(200us);
  }
  return false;
}

// SIGKILL (unless it has exited already), then reap.
void KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

struct DumpedRecord {
  std::uint64_t sequence = 0;
  std::string payload;
};

std::vector<DumpedRecord> ParseDump(const testing::CommandResult& result) {
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::vector<DumpedRecord> records;
  size_t start = 0;
  while (start < result.out.size()) {
    size_t end = result.out.find('\n', start);
    if (end == std::string::npos) end = result.out.size();
    auto line = ParseJson(std::string_view(result.out).substr(start, end - start));
    EXPECT_TRUE(line.ok()) << result.out.substr(start, end - start);
    if (line.ok()) {
      records.push_back({line->at("sequence").to_number<std::uint64_t>(),
                         std::string(line->at("payload_text").as_string())});
    }
    start = end + 1;
  }
  return records;
}

json::object Stat(const std::string& state_dir) {
  auto result = testing::RunCommand({Agent(), "spool", "stat", "--state-dir", state_dir}, 60s);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  auto parsed = ParseJson(result.out);
  EXPECT_TRUE(parsed.ok() && parsed->is_object()) << result.out;
  return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object();
}

// Appends `lines` to completion with one writer, so that the i-th printed sequence is the
// i-th line's; returns the sequences.
std::vector<std::uint64_t> AppendAll(const std::string& state_dir,
                                     const std::vector<std::string>& lines,
                                     std::vector<std::string> extra = {}) {
  std::string input;
  for (const std::string& line : lines) input += line + "\n";
  std::vector<std::string> argv{Agent(), "spool", "append", "--state-dir", state_dir};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto result = testing::RunCommand(argv, 120s, std::nullopt, input);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::uint64_t> sequences = PrintedSequences(result.out);
  EXPECT_EQ(sequences.size(), lines.size());
  return sequences;
}

TEST(SpoolCrash, EveryRecordPrintedAsDurableSurvivesSigkillOnceInOrderAndIntact) {
  testing::TempDir dir;
  const std::string state_dir = dir.File("spool");
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 random(seed);

  std::map<std::uint64_t, std::string> lines_by_id;  // every line ever offered
  std::vector<std::uint64_t> durable;                 // every sequence printed
  std::uint64_t next_id = 1;
  for (int iteration = 0; iteration < 200; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    // More lines than one run can append before it is killed.
    std::string input;
    for (int k = 0; k < 2000; ++k) {
      std::string line = Line(next_id, random);
      lines_by_id[next_id++] = line;
      input += line + "\n";
    }
    testing::WriteFileOrDie(dir.File("input"), input);
    pid_t pid = StartAppend({Agent(), "spool", "append", "--state-dir", state_dir, "--writers", "4"},
                            dir.File("input"), dir.File("out"), dir.File("err"));
    ASSERT_GT(pid, 0);
    // Even iterations count from the start, so that some kills land while the spool opens
    // and recovers; odd ones from the first record printed, so that they land while records
    // are appended however slow the machine is.
    if (iteration % 2 == 1) {
      ASSERT_TRUE(WaitUntilPrinted(pid, dir.File("out"))) << "append never printed a sequence";
    }
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 30'000));
    KillAndReap(pid);
    std::string err = testing::ReadFileOrEmpty(dir.File("err"));
    ASSERT_EQ(err.find("uplink-agent:"), std::string::npos) << "append failed: " << err;
    for (std::uint64_t sequence : PrintedSequences(testing::ReadFileOrEmpty(dir.File("out")))) {
      durable.push_back(sequence);
    }

    // Reopened after the crash: every record intact and in order, each line at most once,
    // and every sequence printed as durable present.
    auto dumped = testing::RunCommand({Agent(), "spool", "dump", "--state-dir", state_dir}, 60s);
    if (durable.empty() && (dumped.err.find("holds no spool") != std::string::npos ||
                            dumped.err.find("is not a directory") != std::string::npos)) {
      continue;  // killed before the spool existed; nothing was promised
    }
    std::vector<DumpedRecord> records = ParseDump(dumped);
    std::set<std::uint64_t> present;
    std::set<std::uint64_t> ids;
    for (size_t i = 0; i < records.size(); ++i) {
      if (i > 0) {
        ASSERT_GT(records[i].sequence, records[i - 1].sequence);
      }
      present.insert(records[i].sequence);
      std::optional<std::uint64_t> id = IntactLineId(records[i].payload);
      ASSERT_TRUE(id.has_value()) << "damaged record " << records[i].sequence << ": "
                                  << records[i].payload;
      ASSERT_EQ(lines_by_id.at(*id), records[i].payload);
      ASSERT_TRUE(ids.insert(*id).second) << "line " << *id << " stored twice";
    }
    for (std::uint64_t sequence : durable) {
      ASSERT_TRUE(present.contains(sequence)) << "sequence " << sequence << " was printed as "
                                              << "durable and is gone";
    }
  }
  EXPECT_GE(durable.size(), 100u) << "each odd iteration printed at least one";
  json::object stat = Stat(state_dir);
  EXPECT_EQ(stat.at("corrupt").at("records"), 0);
  EXPECT_EQ(stat.at("dropped").at("records"), 0);
}

// The console's records of a stream, in order, by paging.
std::vector<json::value> ConsoleRecords(Deployment& d, const std::string& connection_id,
                                        const std::string& stream) {
  std::vector<json::value> records;
  std::string after = "0";
  while (true) {
    json::value page = d.ApiJson("GET", "/api/v1/connections/" + connection_id + "/records?stream=" +
                                            net::PercentEncode(stream) + "&limit=1000&after=" + after);
    if (!page.is_object()) break;
    for (const json::value& record : page.at("records").as_array()) records.push_back(record);
    if (page.at("next_after").is_null()) break;
    after = std::to_string(page.at("next_after").to_number<std::uint64_t>());
  }
  return records;
}

json::value ConsoleStream(Deployment& d, const std::string& connection_id,
                          const std::string& stream) {
  json::value connection = d.ApiJson("GET", "/api/v1/connections/" + connection_id);
  const json::value* streams =
      connection.is_object() ? connection.as_object().if_contains("streams") : nullptr;
  if (streams == nullptr || !streams->is_array()) return json::value();
  for (const json::value& entry : streams->as_array()) {
    if (entry.at("stream") == json::value(stream)) return entry;
  }
  return json::value();
}

std::uint64_t AckedThrough(Deployment& d, const std::string& connection_id,
                           const std::string& stream) {
  json::value entry = ConsoleStream(d, connection_id, stream);
  return entry.is_object() ? entry.at("acked_through").to_number<std::uint64_t>() : 0;
}

class ShipEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    d_.StartConsole();
    connection_ = d_.CreateConnection("spool-e2e");
    token_file_ = d_.WriteToken(connection_.token);
  }

  std::unique_ptr<testing::ChildProcess> StartShip(const std::string& state_dir,
                                                   const std::string& stream,
                                                   std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{Agent(), "spool", "ship", "--state-dir", state_dir,
                                  "--console", d_.console_url(), "--token-file", token_file_,
                                  "--stream", stream, "--instance", "e2e-node",
                                  "--health-listen", "127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<testing::ChildProcess>(argv, d_.dir());
  }

  // Runs the shipper until the console has acknowledged `last`, then stops it with SIGTERM.
  void ShipUntilAcked(const std::string& state_dir, const std::string& stream, std::uint64_t last,
                      std::vector<std::string> extra = {}) {
    auto ship = StartShip(state_dir, stream, extra);
    // Started (its stop signals handled) before it is asked to stop.
    EXPECT_TRUE(testing::WaitFor(
        [&] { return ship->Stderr().find("shipping the spool") != std::string::npos; }))
        << ship->Stderr();
    EXPECT_TRUE(testing::WaitFor(
        [&] { return AckedThrough(d_, connection_.id, stream) >= last; }, 60s))
        << ship->Stderr();
    EXPECT_EQ(ship->Stop(20s), 0) << ship->Stderr();
  }

  Deployment d_;
  Connection connection_;
  std::string token_file_;
};

TEST_F(ShipEndToEnd, AShipperKilledAtRandomMomentsDeliversEveryRecordOnceInOrder) {
  const std::string state_dir = d_.dir() + "/spool";
  const std::string stream = "e2e/crash";
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 random(seed);

  std::map<std::uint64_t, std::string> line_by_sequence;
  std::uint64_t next_id = 1;
  for (int iteration = 0; iteration < 50; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    std::vector<std::string> lines;
    for (int k = 0; k < 20; ++k) lines.push_back(Line(next_id++, random));
    std::vector<std::uint64_t> sequences = AppendAll(state_dir, lines);
    ASSERT_EQ(sequences.size(), lines.size());
    for (size_t k = 0; k < lines.size(); ++k) line_by_sequence[sequences[k]] = lines[k];

    auto ship = StartShip(state_dir, stream);
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 150'000));
    ::kill(ship->pid(), SIGKILL);
    ASSERT_TRUE(ship->Wait(10s).has_value());
  }
  const std::uint64_t last = line_by_sequence.rbegin()->first;
  ASSERT_EQ(last, line_by_sequence.size()) << "sequences run from 1 without a gap";
  ShipUntilAcked(state_dir, stream, last);

  std::vector<json::value> records = ConsoleRecords(d_, connection_.id, stream);
  ASSERT_EQ(records.size(), last);
  for (std::uint64_t i = 0; i < records.size(); ++i) {
    ASSERT_EQ(records[i].at("sequence").to_number<std::uint64_t>(), i + 1);
    ASSERT_EQ(records[i].at("payload"), ParseJson(line_by_sequence.at(i + 1)).value());
  }
  json::value entry = ConsoleStream(d_, connection_.id, stream);
  EXPECT_EQ(entry.at("records_stored"), json::value(last));
  EXPECT_EQ(entry.at("lost_records"), 0);
  EXPECT_EQ(Stat(state_dir).at("records"), 0);
}

TEST_F(ShipEndToEnd, WhileTheConsoleIsDownRecordsWaitAndThenArriveOnceWithoutAGap) {
  const std::string state_dir = d_.dir() + "/spool";
  const std::string stream = "e2e/outage";
  std::mt19937_64 random(7);
  std::vector<std::string> lines;
  for (int i = 1; i <= 200; ++i) lines.push_back(Line(i, random));

  d_.StopConsole();
  AppendAll(state_dir, {lines.begin(), lines.begin() + 100}, {"--writers", "4"});
  // The shipper cannot reach the console: it keeps everything, and a stop is still prompt.
  auto ship = StartShip(state_dir, stream);
  ASSERT_TRUE(testing::WaitFor([&] {
    return ship->Stderr().find("records not delivered") != std::string::npos;
  })) << ship->Stderr();
  EXPECT_EQ(ship->Stop(20s), 0) << ship->Stderr();
  EXPECT_NE(ship->Stderr().find("what was not delivered stays in the spool"), std::string::npos)
      << ship->Stderr();
  AppendAll(state_dir, {lines.begin() + 100, lines.end()}, {"--writers", "4"});
  EXPECT_EQ(Stat(state_dir).at("records"), 200);

  d_.StartConsole();
  ShipUntilAcked(state_dir, stream, 200);
  std::vector<json::value> records = ConsoleRecords(d_, connection_.id, stream);
  ASSERT_EQ(records.size(), 200u);
  std::set<std::string> expected(lines.begin(), lines.end());
  std::set<std::string> stored;
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].at("sequence"), i + 1);
    stored.insert(ToJson(records[i].at("payload")));
  }
  std::set<std::string> expected_compact;
  for (const std::string& line : expected) expected_compact.insert(ToJson(ParseJson(line).value()));
  EXPECT_EQ(stored, expected_compact);
  json::value entry = ConsoleStream(d_, connection_.id, stream);
  EXPECT_EQ(entry.at("lost_records"), 0);
  EXPECT_EQ(entry.at("records_stored"), 200);
  EXPECT_EQ(entry.at("agent_instance"), "e2e-node");
  EXPECT_EQ(Stat(state_dir).at("records"), 0);
}

TEST_F(ShipEndToEnd, WhatTheCapDroppedDuringAnOutageIsExactlyWhatTheConsoleReportsLost) {
  const std::string state_dir = d_.dir() + "/small-spool";
  const std::string stream = "e2e/capped";
  const std::vector<std::string> cap{"--max-bytes", "262144"};
  d_.StopConsole();
  std::mt19937_64 random(11);
  std::vector<std::string> lines;
  for (int i = 1; i <= 1000; ++i) {
    std::string pad(1000, 'z');
    std::string body = std::to_string(i) + ":" + pad;
    lines.push_back(ToJson(json::object{{"id", i}, {"pad", pad}, {"sum", Checksum(body)}}));
  }
  std::vector<std::string> append_flags = cap;
  append_flags.insert(append_flags.end(), {"--writers", "4"});
  AppendAll(state_dir, lines, append_flags);
  json::object before = Stat(state_dir);
  const auto dropped = before.at("dropped").at("records").to_number<std::uint64_t>();
  ASSERT_GT(dropped, 0u) << "1 MB appended under a 256 KiB cap";
  EXPECT_EQ(before.at("records").to_number<std::uint64_t>() + dropped, 1000u);

  d_.StartConsole();
  ShipUntilAcked(state_dir, stream, 1000, cap);
  json::value entry = ConsoleStream(d_, connection_.id, stream);
  EXPECT_EQ(entry.at("agent_losses").at("dropped").at("records").to_number<std::uint64_t>(),
            dropped);
  EXPECT_EQ(entry.at("agent_losses").at("dropped").at("bytes"), before.at("dropped").at("bytes"));
  EXPECT_EQ(entry.at("lost_records").to_number<std::uint64_t>(), dropped);
  EXPECT_EQ(entry.at("records_stored").to_number<std::uint64_t>(), 1000 - dropped);
  std::vector<json::value> records = ConsoleRecords(d_, connection_.id, stream);
  ASSERT_EQ(records.size(), 1000 - dropped);
  EXPECT_EQ(records.front().at("sequence").to_number<std::uint64_t>(), dropped + 1);
  EXPECT_EQ(records.back().at("sequence"), 1000);
}

}  // namespace
}  // namespace uplink::e2e
