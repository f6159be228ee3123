// Prompts on a real pseudo-terminal: a secret is read without echo and the terminal's
// settings come back afterwards.
#include "cli/terminal.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <termios.h>
#include <unistd.h>

#include <sstream>
#include <thread>

namespace uplink::cli {
namespace {

// Reads from `fd` until `marker` has arrived; returns everything before it.
std::string ReadUntil(int fd, const std::string& marker) {
  std::string seen;
  char buf[256];
  while (seen.find(marker) == std::string::npos) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<size_t>(n));
  }
  return seen.substr(0, seen.find(marker));
}

class PseudoTerminal : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[256];
    ASSERT_EQ(::openpty(&master_, &slave_, name, nullptr, nullptr), 0);
    name_ = name;
  }
  void TearDown() override {
    ::close(master_);
    ::close(slave_);
  }
  // What the terminal has shown since the last call: everything written to the slave side
  // before a marker we send after it.
  std::string Shown() {
    const std::string marker = "<end-of-output>";
    EXPECT_EQ(::write(slave_, marker.data(), marker.size()), static_cast<ssize_t>(marker.size()));
    return ReadUntil(master_, marker);
  }
  void Type(const std::string& text) {
    ASSERT_EQ(::write(master_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  bool EchoOn() {
    termios t{};
    EXPECT_EQ(::tcgetattr(slave_, &t), 0);
    return (t.c_lflag & ECHO) != 0;
  }

  int master_ = -1;
  int slave_ = -1;
  std::string name_;
};

TEST_F(PseudoTerminal, ASecretIsReadWithoutEchoAndEchoComesBack) {
  auto terminal = OpenTerminal(name_);
  ASSERT_TRUE(terminal->Available());
  ASSERT_TRUE(EchoOn());
  Result<Secret> answer = InternalError("not read");
  std::thread reader([&] { answer = terminal->ReadSecret("Password: "); });
  // The prompt is written once echo is off.
  EXPECT_EQ(ReadUntil(master_, "Password: "), "");
  Type("correct horse battery\n");
  reader.join();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->Reveal(), "correct horse battery");
  EXPECT_EQ(Shown().find("correct horse"), std::string::npos) << "the secret was echoed";
  EXPECT_TRUE(EchoOn()) << "echo was not turned back on";
}

TEST_F(PseudoTerminal, AnAnswerIsReadWithEcho) {
  auto terminal = OpenTerminal(name_);
  Result<std::string> answer = InternalError("not read");
  std::thread reader([&] { answer = terminal->ReadLine("Continue? [y/N] "); });
  ReadUntil(master_, "Continue? [y/N] ");
  Type("yes\r\n");
  reader.join();
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(*answer, "yes");
  EXPECT_NE(Shown().find("yes"), std::string::npos);
}

TEST_F(PseudoTerminal, EndOfInputIsNoAnswer) {
  auto terminal = OpenTerminal(name_);
  Result<Secret> answer = InternalError("not read");
  std::thread reader([&] { answer = terminal->ReadSecret("Code: "); });
  ReadUntil(master_, "Code: ");
  Type("\x04");  // Ctrl-D on an empty line
  reader.join();
  EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(EchoOn());
}

TEST(Terminal, WithoutATerminalNothingIsAsked) {
  auto terminal = OpenTerminal("/nonexistent/tty");
  EXPECT_FALSE(terminal->Available());
  EXPECT_EQ(terminal->ReadSecret("Password: ").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(terminal->ReadLine("Email: ").status().code(), StatusCode::kFailedPrecondition);
}

TEST(Terminal, ReadLineFromTakesOneLineWithoutItsEnding) {
  std::istringstream in("first\r\nsecond\nthird");
  EXPECT_EQ(*ReadLineFrom(in, "x"), "first");
  EXPECT_EQ(*ReadLineFrom(in, "x"), "second");
  EXPECT_EQ(*ReadLineFrom(in, "x"), "third");
  auto none = ReadLineFrom(in, "the password on stdin");
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("the password on stdin"), std::string::npos);

  std::istringstream empty_line("\n");
  EXPECT_EQ(*ReadLineFrom(empty_line, "x"), "");
  std::istringstream long_line(std::string(5000, 'a'));
  EXPECT_EQ(ReadLineFrom(long_line, "x", 4096).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace uplink::cli
