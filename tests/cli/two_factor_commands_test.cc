// uplink two-factor ... and the second factor of uplink login, against a scripted console:
// what is sent, what a person sees (the QR code read back by a real scanner), what scripts get.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli_harness.h"
#include "common/files.h"
#include "console/auth/qr_code.h"

namespace uplink::cli {
namespace {

using testing::Cli;
using testing::ErrorReply;
using testing::FakeConsole;

constexpr char kSession[] = "skt_SSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSS";
constexpr char kSecret[] = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";
constexpr char kUri[] =
    "otpauth://totp/uplink:ada%40example.com?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer="
    "uplink&algorithm=SHA1&digits=6&period=30";

json::object Body(const net::Request& request) {
  auto parsed = ParseJson(request.body);
  return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object{};
}

net::Response Json(int status, const json::object& body) {
  return net::Response::Json(status, json::serialize(body));
}

json::object SessionReply() {
  return json::object{{"token", kSession},
                      {"session", {{"id", "s1"}, {"expires_at", "2027-01-16T00:00:00Z"}}},
                      {"user", {{"id", "u1"}, {"email", "ada@example.com"}}},
                      {"two_factor_enrollment_required", false}};
}

json::array RecoveryCodes() {
  json::array codes;
  for (int i = 0; i < 10; ++i) codes.emplace_back("aaaa-bbbb-cccc-dd" + std::to_string(10 + i));
  return codes;
}

class TwoFactorCommands : public ::testing::Test {
 protected:
  void SetUp() override { cli_.StoreCredential(console_.url(), kSession, "session"); }

  testing::CliResult Run(std::vector<std::string> args, const std::string& in = "") {
    args.insert(args.end(), {"--console", console_.url()});
    return cli_.Run(args, in);
  }

  void ScriptEnrolment() {
    json::array rows;
    // The code the console makes of the URI.
    auto qr = console::QrModules(kUri);
    ASSERT_TRUE(qr.ok());
    for (const std::string& row : *qr) rows.emplace_back(row);
    console_.OnJson("POST", "/api/v1/two-factor/enrollment", 201,
                    json::object{{"secret", kSecret},
                                 {"otpauth_uri", kUri},
                                 {"qr_code", rows},
                                 {"issuer", "uplink"},
                                 {"account", "ada@example.com"}});
    console_.On("POST", "/api/v1/two-factor/enrollment/confirm", [](const net::Request& r) {
      if (Body(r)["code"] != "287082") {
        return ErrorReply(401, "invalid_two_factor_code", "the two-factor code is wrong");
      }
      return Json(200, {{"two_factor", {{"enabled", true}}}, {"recovery_codes", RecoveryCodes()}});
    });
  }

  Cli cli_;
  FakeConsole console_;
};

// The terminal's block characters back to modules: each character is two module rows, the
// upper in front (30 dark, 97 light) and the lower behind (40 dark, 107 light).
std::vector<std::string> ModulesFromTerminal(const std::string& shown) {
  std::vector<std::string> rows;
  std::istringstream lines(shown);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("\u2580") == std::string::npos) continue;
    std::string top, bottom;
    bool front_dark = false;
    bool back_dark = false;
    for (size_t at = 0; at < line.size();) {
      if (line.compare(at, 2, "\x1b[") == 0) {
        size_t end = line.find('m', at);
        std::string codes = line.substr(at + 2, end - at - 2);
        if (codes != "0") {
          front_dark = codes.starts_with("30;");
          back_dark = codes.ends_with(";40");
        }
        at = end + 1;
      } else if (line.compare(at, 3, "\u2580") == 0) {
        top += front_dark ? '1' : '0';
        bottom += back_dark ? '1' : '0';
        at += 3;
      } else {
        ++at;
      }
    }
    rows.push_back(top);
    rows.push_back(bottom);
  }
  return rows;
}

std::string Scan(const std::vector<std::string>& rows, const std::string& dir) {
  const int scale = 6;
  const int size = static_cast<int>(rows.size());
  const int width = static_cast<int>(rows.empty() ? 0 : rows[0].size());
  std::string path = dir + "/terminal-qr.pbm";
  std::ofstream pbm(path);
  pbm << "P1\n" << width * scale << " " << size * scale << "\n";
  for (int y = 0; y < size * scale; ++y) {
    for (int x = 0; x < width * scale; ++x) pbm << (rows[y / scale][x / scale] == '1' ? "1 " : "0 ");
    pbm << "\n";
  }
  pbm.close();
  auto scanned = uplink::testing::RunCommand({"/usr/bin/zbarimg", "--quiet", "--raw", path});
  EXPECT_EQ(scanned.exit_code, 0) << scanned.err;
  return std::string(TrimWhitespace(scanned.out));
}

TEST_F(TwoFactorCommands, EnrollOnATerminalShowsAScannableQrCodeAndTheKeyThenProvesACode) {
  ScriptEnrolment();
  cli_.terminal.available = true;
  cli_.terminal.answers = {"123 456", "287 082"};  // a wrong code first, then the right one
  auto r = Run({"two-factor", "enroll"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The QR code went to the terminal, and a scanner reads the URI from it.
  uplink::testing::TempDir dir;
  EXPECT_EQ(Scan(ModulesFromTerminal(cli_.terminal.shown), dir.path()), kUri);
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos) << "no colour codes on stdout";
  EXPECT_NE(r.out.find("GEZD GNBV GY3T QOJQ GEZD GNBV GY3T QOJQ"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Two-factor sign-in is on"), std::string::npos);
  EXPECT_NE(r.out.find("aaaa-bbbb-cccc-dd19"), std::string::npos);
  EXPECT_NE(r.err.find("the two-factor code is wrong"), std::string::npos);
  auto confirms = console_.RequestsTo("POST", "/api/v1/two-factor/enrollment/confirm");
  ASSERT_EQ(confirms.size(), 2u);
  EXPECT_EQ(Body(confirms[0])["code"], "123456");  // spaces as apps show them are dropped
  EXPECT_EQ(Body(confirms[1])["code"], "287082");
}

TEST_F(TwoFactorCommands, EnrollGivesUpAfterThreeWrongCodes) {
  ScriptEnrolment();
  cli_.terminal.available = true;
  cli_.terminal.answers = {"111111", "222222", "333333", "287082"};
  auto r = Run({"two-factor", "enroll"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(console_.RequestsTo("POST", "/api/v1/two-factor/enrollment/confirm").size(), 3u);
}

TEST_F(TwoFactorCommands, EnrollWithoutATerminalPrintsTheKeyAndUriAndConfirmTakesTheCodeFromStdin) {
  ScriptEnrolment();
  auto begun = Run({"two-factor", "enroll"});
  ASSERT_EQ(begun.code, 0) << begun.err;
  EXPECT_NE(begun.out.find(kUri), std::string::npos);
  EXPECT_NE(begun.out.find("uplink two-factor confirm --code-stdin"), std::string::npos);
  EXPECT_TRUE(console_.RequestsTo("POST", "/api/v1/two-factor/enrollment/confirm").empty());

  uplink::testing::TempDir dir;
  std::string codes_file = dir.path() + "/codes.txt";
  auto confirmed = Run({"two-factor", "confirm", "--code-stdin", "--recovery-codes-out", codes_file},
                       "287082\n");
  ASSERT_EQ(confirmed.code, 0) << confirmed.err;
  EXPECT_EQ(confirmed.out.find("aaaa-bbbb"), std::string::npos) << "written, not shown";
  std::string written = uplink::testing::ReadFileOrEmpty(codes_file);
  EXPECT_EQ(std::count(written.begin(), written.end(), '\n'), 10);
  struct stat st {};
  ASSERT_EQ(::stat(codes_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A wrong code from stdin is not asked again: scripts fail at once.
  auto wrong = Run({"two-factor", "confirm", "--code-stdin"}, "111111\n");
  EXPECT_EQ(wrong.code, 3);
}

TEST_F(TwoFactorCommands, LoginAsksForTheCodeOnlyWhenTheConsoleWantsOne) {
  console_.On("POST", "/api/v1/sessions", [](const net::Request& r) {
    json::object body = Body(r);
    if (!body.contains("code") && !body.contains("recovery_code")) {
      return ErrorReply(401, "two_factor_required", "send the code");
    }
    if (body["code"] != "287082" && body["recovery_code"] != "aaaa-bbbb-cccc-dddd") {
      return ErrorReply(401, "invalid_two_factor_code", "wrong code");
    }
    return Json(201, SessionReply());
  });
  // Password and code from stdin, as a script would.
  auto scripted = Run({"login", "--email", "ada@example.com", "--password-stdin", "--code-stdin"},
                      "a long passphrase\n287 082\n");
  ASSERT_EQ(scripted.code, 0) << scripted.err;
  auto sent = console_.RequestsTo("POST", "/api/v1/sessions");
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_FALSE(Body(sent[0]).contains("code"));
  EXPECT_EQ(Body(sent[1])["code"], "287082");
  EXPECT_EQ(Body(sent[1])["password"], "a long passphrase");

  // A recovery code typed on the terminal, without echo.
  cli_.terminal.available = true;
  cli_.terminal.answers = {"a long passphrase", "aaaa-bbbb-cccc-dddd"};
  auto typed = Run({"login", "--email", "ada@example.com"});
  ASSERT_EQ(typed.code, 0) << typed.err;
  EXPECT_EQ(cli_.terminal.prompts.back(),
            "Two-factor code for ada@example.com (or a recovery code): ");
  EXPECT_EQ(Body(console_.RequestsTo("POST", "/api/v1/sessions").back())["recovery_code"],
            "aaaa-bbbb-cccc-dddd");

  // Without a terminal or --code-stdin the command says how to give the code.
  cli_.terminal.available = false;
  auto stuck = Run({"login", "--email", "ada@example.com", "--password-stdin"}, "a long passphrase\n");
  EXPECT_EQ(stuck.code, 2);
  EXPECT_NE(stuck.err.find("--code-stdin"), std::string::npos) << stuck.err;
}

TEST_F(TwoFactorCommands, LoginToAConsoleThatRequiresItSaysHowToEnrol) {
  json::object reply = SessionReply();
  reply["two_factor_enrollment_required"] = true;
  console_.OnJson("POST", "/api/v1/sessions", 201, reply);
  auto r = Run({"login", "--email", "ada@example.com", "--password-stdin"}, "a long passphrase\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("uplink two-factor enroll"), std::string::npos) << r.err;
}

TEST_F(TwoFactorCommands, DisableSendsThePasswordAndTheCodeFromStdin) {
  console_.OnJson("GET", "/api/v1/two-factor", 200, json::object{{"enabled", true}});
  console_.OnJson("GET", "/api/v1/me", 200,
                  json::object{{"user", {{"id", "u1"}, {"has_password", true}}}});
  console_.OnJson("POST", "/api/v1/two-factor/disable", 200,
                  json::object{{"enabled", false}, {"enrollment_required", true}});
  auto r = Run({"two-factor", "disable", "--password-stdin", "--code-stdin"},
               "a long passphrase\n287082\n");
  ASSERT_EQ(r.code, 0) << r.err;
  json::object sent = Body(console_.RequestsTo("POST", "/api/v1/two-factor/disable").at(0));
  EXPECT_EQ(sent, (json::object{{"password", "a long passphrase"}, {"code", "287082"}}));
  EXPECT_NE(r.out.find("This console requires two-factor sign-in"), std::string::npos);
}

TEST_F(TwoFactorCommands, RequireTakesOnOrOffAndShowsWhoItShutsOut) {
  console_.On("PUT", "/api/v1/settings", [](const net::Request& r) {
    return Json(200, {{"require_two_factor", Body(r)["require_two_factor"]},
                      {"updated_at", "2027-01-15T08:00:00Z"},
                      {"without_two_factor",
                       {{"users", 1}, {"emails", {"bob@example.com"}}, {"connections", 2}}}});
  });
  auto on = Run({"two-factor", "require", "on"});
  ASSERT_EQ(on.code, 0) << on.err;
  EXPECT_EQ(Body(console_.RequestsTo("PUT", "/api/v1/settings").at(0))["require_two_factor"], true);
  EXPECT_NE(on.out.find("two-factor required:  yes"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("1 (bob@example.com)"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("agents refused:       2 connection(s)"), std::string::npos) << on.out;
  EXPECT_EQ(Run({"two-factor", "require", "maybe"}).code, 2);
}

}  // namespace
}  // namespace uplink::cli
