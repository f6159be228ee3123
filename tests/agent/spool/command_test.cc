// The spool commands of the real uplink-agent binary: append, stat and dump on real
// directories, and their usage errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "common/json.h"
#include "common/time.h"
#include "spool/spool.h"
#include "support/process.h"

namespace uplink::agent {
namespace {

using std::chrono::seconds;

const std::string kAgent = std::string(UPLINK_BIN_DIR) + "/uplink-agent";

class SpoolCommandTest : public ::testing::Test {
 protected:
  testing::CommandResult Spool(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), {kAgent, "spool"});
    return testing::RunCommand(args, seconds(60), testing::EnvWith({{"UPLINK_STATE_DIR", ""}}),
                               input);
  }

  testing::CommandResult Append(const std::string& input, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"append", "--state-dir", state_dir_};
    args.insert(args.end(), extra.begin(), extra.end());
    return Spool(args, input);
  }

  json::object Stat() {
    auto result = Spool({"stat", "--state-dir", state_dir_});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    auto parsed = ParseJson(result.out);
    EXPECT_TRUE(parsed.ok() && parsed->is_object()) << result.out;
    return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object();
  }

  std::vector<json::object> Dump() {
    auto result = Spool({"dump", "--state-dir", state_dir_});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    std::vector<json::object> lines;
    size_t start = 0;
    while (start < result.out.size()) {
      size_t end = result.out.find('\n', start);
      EXPECT_NE(end, std::string::npos) << "every line ends with a newline";
      if (end == std::string::npos) break;
      auto parsed = ParseJson(std::string_view(result.out).substr(start, end - start));
      EXPECT_TRUE(parsed.ok() && parsed->is_object()) << result.out.substr(start, end - start);
      if (parsed.ok() && parsed->is_object()) lines.push_back(parsed->get_object());
      start = end + 1;
    }
    return lines;
  }

  static std::string Lines(int first, int last) {
    std::string lines;
    for (int i = first; i <= last; ++i) lines += R"({"line":)" + std::to_string(i) + "}\n";
    return lines;
  }

  static std::string Sequences(int first, int last) {
    std::string out;
    for (int i = first; i <= last; ++i) out += std::to_string(i) + "\n";
    return out;
  }

  testing::TempDir dir_;
  std::string state_dir_ = dir_.File("spool");
};

TEST_F(SpoolCommandTest, AppendPrintsEachRecordsSequenceAndStatAndDumpShowThem) {
  auto appended = Append(Lines(1, 50));
  ASSERT_EQ(appended.exit_code, 0) << appended.err;
  EXPECT_EQ(appended.out, Sequences(1, 50));
  EXPECT_EQ(appended.err.find("uplink-agent:"), std::string::npos) << appended.err;

  json::object stat = Stat();
  const json::value& id = stat.at("spool_id");
  ASSERT_TRUE(id.is_string());
  EXPECT_EQ(id.as_string().size(), 32u);
  EXPECT_TRUE(std::all_of(id.as_string().begin(), id.as_string().end(),
                          [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }));
  EXPECT_EQ(stat.at("records"), 50);
  EXPECT_GT(stat.at("bytes").to_number<std::uint64_t>(), 50u * 10);
  EXPECT_GE(stat.at("segments").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(stat.at("first_sequence"), 1);
  EXPECT_EQ(stat.at("last_sequence"), 50);
  EXPECT_EQ(stat.at("consumed_through"), 0);
  ASSERT_TRUE(stat.at("oldest_age_seconds").is_number());
  EXPECT_GE(stat.at("oldest_age_seconds").to_number<std::int64_t>(), 0);
  for (const char* loss : {"dropped", "corrupt", "rejected"}) {
    EXPECT_EQ(stat.at(loss), (json::object{{"records", 0}, {"bytes", 0}})) << loss;
  }

  std::vector<json::object> records = Dump();
  ASSERT_EQ(records.size(), 50u);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(records[i].at("sequence"), i + 1);
    EXPECT_EQ(records[i].at("payload_text"), json::value(R"({"line":)" + std::to_string(i + 1) + "}"));
    EXPECT_TRUE(ParseRfc3339(records[i].at("appended_at").as_string()).ok()) << records[i];
  }
  // Dumping consumes nothing.
  EXPECT_EQ(Dump().size(), 50u);
  EXPECT_EQ(Stat().at("records"), 50);

  // Appending again continues the sequence.
  auto more = Append("last\n");
  ASSERT_EQ(more.exit_code, 0) << more.err;
  EXPECT_EQ(more.out, "51\n");
}

TEST_F(SpoolCommandTest, ConcurrentWritersPrintEverySequenceOnceAndEveryLineIsStoredOnce) {
  auto appended = Append(Lines(1, 400), {"--writers", "4"});
  ASSERT_EQ(appended.exit_code, 0) << appended.err;
  std::multiset<std::string> printed;
  size_t start = 0;
  while (start < appended.out.size()) {
    size_t end = appended.out.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    printed.insert(appended.out.substr(start, end - start));
    start = end + 1;
  }
  std::multiset<std::string> expected;
  for (int i = 1; i <= 400; ++i) expected.insert(std::to_string(i));
  EXPECT_EQ(printed, expected);

  std::multiset<std::string> stored;
  for (const json::object& record : Dump()) {
    stored.insert(std::string(record.at("payload_text").as_string()));
  }
  std::multiset<std::string> lines;
  for (int i = 1; i <= 400; ++i) lines.insert(R"({"line":)" + std::to_string(i) + "}");
  EXPECT_EQ(stored, lines);
}

TEST_F(SpoolCommandTest, AnyBytesDumpAsValidJsonStrings) {
  std::string input = std::string("caf\xc3\xa9 \"quoted\" \\ tab\t") + "\n" +
                      "bad \xff\xfe utf8 \xc0\xaf overlong \xed\xa0\x80 surrogate" + "\n" +
                      "last line without a newline";
  auto appended = Append(input);
  ASSERT_EQ(appended.exit_code, 0) << appended.err;
  EXPECT_EQ(appended.out, Sequences(1, 3));
  std::vector<json::object> records = Dump();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].at("payload_text"), "caf\xc3\xa9 \"quoted\" \\ tab\t");
  const std::string replacement = "\xef\xbf\xbd";
  EXPECT_EQ(records[1].at("payload_text"),
            json::value("bad " + replacement + replacement + " utf8 " + replacement + replacement +
                        " overlong " + replacement + replacement + replacement + " surrogate"));
  EXPECT_EQ(records[2].at("payload_text"), "last line without a newline");
}

TEST_F(SpoolCommandTest, AtASmallCapTheOldestRecordsAreDroppedAndCounted) {
  std::string input;
  for (int i = 1; i <= 1000; ++i) input += std::to_string(i) + " " + std::string(1000, 'x') + "\n";
  auto appended = Append(input, {"--max-bytes", "262144", "--writers", "4"});
  ASSERT_EQ(appended.exit_code, 0) << appended.err;
  json::object stat = Stat();
  const auto dropped = stat.at("dropped").at("records").to_number<std::uint64_t>();
  EXPECT_GT(dropped, 0u);
  EXPECT_LE(stat.at("bytes").to_number<std::uint64_t>(), 262144u);
  EXPECT_EQ(stat.at("last_sequence"), 1000);
  EXPECT_EQ(stat.at("consumed_through").to_number<std::uint64_t>(), dropped);
  EXPECT_EQ(stat.at("records").to_number<std::uint64_t>() + dropped, 1000u);
  std::vector<json::object> records = Dump();
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.front().at("sequence").to_number<std::uint64_t>(), dropped + 1);
  EXPECT_EQ(records.back().at("sequence"), 1000);
}

TEST_F(SpoolCommandTest, ALineLongerThanARecordMayBeStopsTheAppendWithAClearError) {
  std::string input = "first\n" + std::string(70 << 10, 'y') + "\nnever appended\n";
  auto appended = Append(input, {"--max-bytes", "262144"});
  EXPECT_EQ(appended.exit_code, 1);
  EXPECT_EQ(appended.out, "1\n");
  EXPECT_NE(appended.err.find("line 2 of stdin is longer than the largest record (65536 bytes)"),
            std::string::npos) << appended.err;
  EXPECT_EQ(Stat().at("last_sequence"), 1);
}

TEST_F(SpoolCommandTest, UsageErrorsExitTwoAndSayWhatIsMissing) {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::string dir = state_dir_;
  for (const Case& c : std::vector<Case>{
           {{}, "spool needs a command"},
           {{"frobnicate"}, "unknown spool command 'frobnicate'"},
           {{"stat"}, "--state-dir is required"},
           {{"dump"}, "--state-dir is required"},
           {{"append"}, "--state-dir is required"},
           {{"ship"}, "--state-dir is required"},
           {{"stat", "--state-dir", dir, "--bogus"}, "unknown flag --bogus"},
           {{"stat", "--state-dir", dir, "extra"}, "unexpected argument 'extra'"},
           {{"stat", "--state-dir"}, "needs a value"},
           {{"append", "--state-dir", dir, "--writers", "0"}, "--writers must be between 1 and 64"},
           {{"append", "--state-dir", dir, "--writers", "many"}, "not a whole number"},
           {{"append", "--state-dir", dir, "--max-bytes", "1000"},
            "--max-bytes must be at least 65536 (64 KiB)"},
           {{"ship", "--state-dir", dir}, "--console is required"},
           {{"ship", "--state-dir", dir, "--console", "http://console.example", "--token-file",
             "/nonexistent"},
            "use https"},
           {{"ship", "--state-dir", dir, "--console", "http://127.0.0.1:1", "--token-file",
             dir + "/absent"},
            "--token-file"},
       }) {
    auto result = Spool(c.args);
    std::string shown;
    for (const auto& a : c.args) shown += a + " ";
    EXPECT_EQ(result.exit_code, 2) << shown << result.err;
    EXPECT_NE(result.err.find(c.expected), std::string::npos) << shown << "\n" << result.err;
  }
  EXPECT_FALSE(std::filesystem::exists(state_dir_)) << "a usage error creates nothing";

  testing::WriteFileOrDie(dir_.File("token"), "agt_x\n");
  auto bad_stream = Spool({"ship", "--state-dir", dir, "--console", "http://127.0.0.1:1",
                           "--token-file", dir_.File("token"), "--stream", "no spaces allowed"});
  EXPECT_EQ(bad_stream.exit_code, 2);
  EXPECT_NE(bad_stream.err.find("--stream 'no spaces allowed': a stream name may hold only"),
            std::string::npos) << bad_stream.err;
  auto bad_instance = Spool({"ship", "--state-dir", dir, "--console", "http://127.0.0.1:1",
                             "--token-file", dir_.File("token"), "--instance", "pod name"});
  EXPECT_EQ(bad_instance.exit_code, 2);
  EXPECT_NE(bad_instance.err.find("pass --stream"), std::string::npos) << bad_instance.err;
}

TEST_F(SpoolCommandTest, HelpListsACommandsFlagsAndExitsZero) {
  for (const char* command : {"stat", "dump", "append", "ship"}) {
    auto help = Spool({command, "--help"});
    EXPECT_EQ(help.exit_code, 0) << command << ": " << help.err;
    EXPECT_NE(help.out.find(std::string("usage: uplink-agent spool ") + command), std::string::npos)
        << help.out;
    EXPECT_NE(help.out.find("--state-dir"), std::string::npos) << help.out;
  }
  EXPECT_NE(Spool({"append", "-h"}).out.find("--writers"), std::string::npos);
  EXPECT_NE(Spool({"ship", "--help"}).out.find("--stream"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(state_dir_));
}

TEST_F(SpoolCommandTest, StatAndDumpNeverCreateASpool) {
  for (const char* command : {"stat", "dump"}) {
    auto missing = Spool({command, "--state-dir", dir_.File("absent")});
    EXPECT_EQ(missing.exit_code, 1) << missing.err;
    EXPECT_NE(missing.err.find("is not a directory"), std::string::npos) << missing.err;
    auto empty = Spool({command, "--state-dir", dir_.path()});
    EXPECT_EQ(empty.exit_code, 1) << empty.err;
    EXPECT_NE(empty.err.find("holds no spool"), std::string::npos) << empty.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.File("absent")));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("STATE")));
}

TEST_F(SpoolCommandTest, ASpoolInUseByAnotherProcessIsRefusedWithTheReason) {
  ASSERT_EQ(Append(Lines(1, 3)).exit_code, 0);
  {
    auto held = spool::Spool::Open(spool::PosixFileSystem(), state_dir_, {}, SystemClock());
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    for (const char* command : {"stat", "dump", "append"}) {
      auto refused = Spool({command, "--state-dir", state_dir_}, "x\n");
      EXPECT_EQ(refused.exit_code, 1) << command;
      EXPECT_EQ(refused.out, "") << command;
      EXPECT_NE(refused.err.find("is in use by another process"), std::string::npos)
          << command << ": " << refused.err;
    }
  }
  // Once it is free again, everything is as it was.
  EXPECT_EQ(Stat().at("records"), 3);
}

}  // namespace
}  // namespace uplink::agent
