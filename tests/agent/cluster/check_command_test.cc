// `uplink-agent check-kubectl`, run as the built binary: the guard's two tables through stdin,
// and lines that are not argv arrays.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "agent/cluster/check_command.h"
#include "common/json.h"
#include "support/process.h"

namespace uplink::agent::cluster {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kAgent = std::string(UPLINK_BIN_DIR) + "/uplink-agent";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos;
       start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  return lines;
}

uplink::testing::CommandResult Check(const std::string& input) {
  return uplink::testing::RunCommand({kAgent, "check-kubectl"}, std::chrono::seconds(60),
                                     uplink::testing::EnvWith({}), input);
}

struct TableRow {
  std::string argv_json;
  std::string reason;
};

std::vector<TableRow> Table(const std::string& name) {
  std::ifstream in(std::string(UPLINK_SOURCE_DIR) + "/tests/kubectl/" + name);
  std::vector<TableRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    auto parsed = ParseJson(line);
    EXPECT_TRUE(parsed.ok()) << line;
    if (!parsed.ok()) continue;
    const json::object& object = parsed->as_object();
    TableRow row{ToJson(object.at("argv")), ""};
    if (const json::value* reason = object.if_contains("reason")) {
      row.reason = std::string(reason->as_string());
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

TEST(CheckKubectlCommand, AnswersTheGuardTablesLineByLine) {
  std::vector<TableRow> allowed = Table("allowed_argv.jsonl");
  std::vector<TableRow> refused = Table("refused_argv.jsonl");
  ASSERT_GE(allowed.size(), 80u);
  ASSERT_GE(refused.size(), 150u);
  std::string input;
  for (const TableRow& row : allowed) input += row.argv_json + "\n";
  for (const TableRow& row : refused) input += row.argv_json + "\n";

  auto result = Check(input);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> answers = Lines(result.out);
  ASSERT_EQ(answers.size(), allowed.size() + refused.size());
  for (size_t i = 0; i < allowed.size(); ++i) {
    EXPECT_EQ(answers[i], "allow") << allowed[i].argv_json;
  }
  for (size_t i = 0; i < refused.size(); ++i) {
    const std::string& answer = answers[allowed.size() + i];
    EXPECT_THAT(answer, StartsWith("refuse: ")) << refused[i].argv_json;
    EXPECT_THAT(answer, HasSubstr(refused[i].reason)) << refused[i].argv_json;
  }
}

TEST(CheckKubectlCommand, ALineThatIsNotAnArgvIsRefusedAndTheNextIsRead) {
  const std::string input =
      "not json\n"
      "{\"argv\": [\"kubectl\", \"get\", \"pods\"]}\n"
      "[\"kubectl\", \"get\", 7]\n"
      "[\"kubectl\", null]\n"
      "[]\n"
      "\n"
      "[[[[[[\"kubectl\"]]]]]]\n"
      "[\"kubectl\", \"get\", \"pods\"\n"
      "[\"kubectl\", \"get\", \"pods\"]\r\n"
      "[\"kubectl\", \"get\", \"po\\u0000ds\"]\n"
      "[\"kubectl\", \"get\", \"pods\"]";  // the last line needs no newline
  auto result = Check(input);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> answers = Lines(result.out);
  ASSERT_EQ(answers.size(), 11u) << result.out;
  EXPECT_THAT(answers[0], StartsWith("refuse: not JSON"));
  EXPECT_EQ(answers[1], "refuse: not a JSON array of strings");
  EXPECT_EQ(answers[2], "refuse: element 2 is not a string");
  EXPECT_EQ(answers[3], "refuse: element 1 is not a string");
  EXPECT_EQ(answers[4], "refuse: the command is empty");
  EXPECT_THAT(answers[5], StartsWith("refuse: not JSON"));
  EXPECT_THAT(answers[6], StartsWith("refuse: "));
  EXPECT_THAT(answers[7], StartsWith("refuse: not JSON"));
  EXPECT_EQ(answers[8], "allow");
  EXPECT_THAT(answers[9], HasSubstr("NUL"));
  EXPECT_EQ(answers[10], "allow");
}

TEST(CheckKubectlCommand, AnOverlongLineIsRefusedWithoutBeingKept) {
  std::string huge = "[\"kubectl\", \"get\", \"" + std::string(kMaxLineBytes, 'x') + "\"]";
  std::string many = "[\"kubectl\"";
  for (int i = 0; i < 100; ++i) many += ", \"pods\"";
  many += "]";
  auto result = Check(huge + "\n" + many + "\n[\"kubectl\", \"version\"]\n");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> answers = Lines(result.out);
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0], "refuse: the line is longer than " + std::to_string(kMaxLineBytes) +
                            " bytes");
  EXPECT_EQ(answers[1], "refuse: more than 64 arguments");
  EXPECT_EQ(answers[2], "allow");
}

TEST(CheckKubectlCommand, EmptyInputPrintsNothing) {
  auto result = Check("");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out, "");
}

TEST(CheckKubectlCommand, HelpAndStrayArguments) {
  auto help = uplink::testing::RunCommand({kAgent, "check-kubectl", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("allow"));
  auto stray = uplink::testing::RunCommand({kAgent, "check-kubectl", "get", "pods"});
  EXPECT_EQ(stray.exit_code, 2);
  EXPECT_THAT(stray.err, HasSubstr("takes no arguments"));
  auto usage = uplink::testing::RunCommand({kAgent, "--help"});
  EXPECT_THAT(usage.err, HasSubstr("check-kubectl"));
}

}  // namespace
}  // namespace uplink::agent::cluster
