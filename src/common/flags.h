// Command-line flags with matching UPLINK_* environment variables.
//
// `--token-file F`, `--token-file=F` and UPLINK_TOKEN_FILE=F all set the same flag; a flag
// on the command line wins over the environment. Errors name the flag and say what to do.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace uplink {

// The environment, injectable so tests need not touch the real one.
using EnvLookup = std::function<const char*(const char* name)>;
EnvLookup ProcessEnv();

class FlagSet {
 public:
  // `program` is used in messages ("uplink-agent inventory").
  explicit FlagSet(std::string program);

  void String(std::string name, std::string* target, std::string help);
  void Int(std::string name, std::int64_t* target, std::string help);
  void Bool(std::string name, bool* target, std::string help);
  // Accepts "90s", "5m", "2h", "1h30m", "250ms" or a bare number of seconds.
  void Duration(std::string name, std::chrono::milliseconds* target, std::string help);

  // Targets keep the values they had unless a flag or variable sets them (so set defaults
  // before Parse). Unknown flags and missing values are errors. Arguments that are not
  // flags (and all after "--") are collected in positional().
  Status Parse(const std::vector<std::string>& args, const EnvLookup& env = ProcessEnv());

  const std::vector<std::string>& positional() const { return positional_; }
  // True if the flag was given on the command line or through its variable.
  bool WasSet(std::string_view name) const;
  std::string Usage() const;

  // UPLINK_ + upper-case name with '-' as '_': "token-file" -> "UPLINK_TOKEN_FILE".
  static std::string EnvName(std::string_view flag_name);

 private:
  enum class Kind { kString, kInt, kBool, kDuration };
  struct Flag {
    Kind kind;
    void* target;
    std::string help;
    std::string default_text;
  };
  Status Assign(const std::string& name, Flag& flag, const std::string& value,
                std::string_view source);

  std::string program_;
  std::map<std::string, Flag, std::less<>> flags_;
  std::vector<std::string> positional_;
  std::vector<std::string> set_;
};

Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

}  // namespace uplink
