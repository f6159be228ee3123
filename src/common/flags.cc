#include "common/flags.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <optional>

namespace uplink {

EnvLookup ProcessEnv() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

FlagSet::FlagSet(std::string program) : program_(std::move(program)) {}

void FlagSet::String(std::string name, std::string* target, std::string help) {
  flags_[std::move(name)] = Flag{Kind::kString, target, std::move(help), *target};
}

void FlagSet::Int(std::string name, std::int64_t* target, std::string help) {
  flags_[std::move(name)] = Flag{Kind::kInt, target, std::move(help), std::to_string(*target)};
}

void FlagSet::Bool(std::string name, bool* target, std::string help) {
  flags_[std::move(name)] = Flag{Kind::kBool, target, std::move(help), *target ? "true" : "false"};
}

void FlagSet::Duration(std::string name, std::chrono::milliseconds* target, std::string help) {
  flags_[std::move(name)] =
      Flag{Kind::kDuration, target, std::move(help), std::to_string(target->count()) + "ms"};
}

std::string FlagSet::EnvName(std::string_view flag_name) {
  std::string env = "UPLINK_";
  for (char c : flag_name) {
    env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return env;
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError("'" + std::string(text) +
                                "' is not a duration; use forms like 30s, 5m, 1h30m or 250ms");
  };
  if (text.empty()) return bad();
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    std::int64_t seconds = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (ec != std::errc() || seconds > 10'000'000'000LL) return bad();
    return std::chrono::milliseconds(seconds * 1000);
  }
  std::int64_t total_ms = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
    if (pos == start || pos - start > 10) return bad();
    std::int64_t number = 0;
    std::from_chars(text.data() + start, text.data() + pos, number);
    std::int64_t unit_ms;
    if (text.substr(pos, 2) == "ms") {
      unit_ms = 1;
      pos += 2;
    } else if (pos < text.size() && text[pos] == 's') {
      unit_ms = 1000;
      ++pos;
    } else if (pos < text.size() && text[pos] == 'm') {
      unit_ms = 60'000;
      ++pos;
    } else if (pos < text.size() && text[pos] == 'h') {
      unit_ms = 3'600'000;
      ++pos;
    } else if (pos < text.size() && text[pos] == 'd') {
      unit_ms = 86'400'000;
      ++pos;
    } else {
      return bad();
    }
    total_ms += number * unit_ms;
    if (total_ms > 100LL * 365 * 86'400'000) return bad();
  }
  return std::chrono::milliseconds(total_ms);
}

Status FlagSet::Assign(const std::string& name, Flag& flag, const std::string& value,
                       std::string_view source) {
  auto invalid = [&](std::string_view why) {
    return InvalidArgumentError(std::string(source) + " --" + name + ": " + std::string(why));
  };
  switch (flag.kind) {
    case Kind::kString:
      *static_cast<std::string*>(flag.target) = value;
      break;
    case Kind::kInt: {
      std::int64_t parsed = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
      if (ec != std::errc() || ptr != value.data() + value.size()) {
        return invalid("'" + value + "' is not a whole number");
      }
      *static_cast<std::int64_t*>(flag.target) = parsed;
      break;
    }
    case Kind::kBool:
      if (value == "true" || value == "1" || value == "yes") {
        *static_cast<bool*>(flag.target) = true;
      } else if (value == "false" || value == "0" || value == "no") {
        *static_cast<bool*>(flag.target) = false;
      } else {
        return invalid("'" + value + "' is not true or false");
      }
      break;
    case Kind::kDuration: {
      auto parsed = ParseDuration(value);
      if (!parsed.ok()) return invalid(parsed.status().message());
      *static_cast<std::chrono::milliseconds*>(flag.target) = *parsed;
      break;
    }
  }
  set_.push_back(name);
  return Status::Ok();
}

Status FlagSet::Parse(const std::vector<std::string>& args, const EnvLookup& env) {
  // Environment first, so that the command line overrides it.
  for (auto& [name, flag] : flags_) {
    std::string env_name = EnvName(name);
    if (const char* value = env(env_name.c_str()); value != nullptr) {
      UPLINK_RETURN_IF_ERROR(Assign(name, flag, value, "environment variable " + env_name + " for"));
    }
  }
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-') {
      positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string name = body;
    std::optional<std::string> value;
    if (auto eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      return InvalidArgumentError(program_ + ": unknown flag --" + name + "; run '" + program_ +
                                  " --help' for the flags it takes");
    }
    Flag& flag = it->second;
    if (!value) {
      if (flag.kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return InvalidArgumentError(program_ + ": flag --" + name + " needs a value");
      }
    }
    UPLINK_RETURN_IF_ERROR(Assign(name, flag, *value, "flag"));
  }
  return Status::Ok();
}

bool FlagSet::WasSet(std::string_view name) const {
  return std::find(set_.begin(), set_.end(), name) != set_.end();
}

std::string FlagSet::Usage() const {
  std::string out = "usage: " + program_ + " [flags]\n\nflags (each also read from its " +
                    "environment variable):\n";
  for (const auto& [name, flag] : flags_) {
    out += "  --" + name;
    if (flag.kind != Kind::kBool) out += " VALUE";
    out += "  (" + EnvName(name) + ")\n      " + flag.help;
    if (!flag.default_text.empty()) out += " [default: " + flag.default_text + "]";
    out += "\n";
  }
  return out;
}

}  // namespace uplink
