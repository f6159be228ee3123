// The read-only kubectl guard: whatever argv it accepts must hold no refused verb, no
// refused flag in any spelling and no secrets spelling, as judged by a scan written here
// from kubectl's own flag lists (`kubectl options`, `kubectl VERB --help`), independent of
// the guard's tables. The input is one argument per line, after an implied "kubectl".
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "kubectl/guard.h"

namespace {

using Argv = std::vector<std::string>;

constexpr size_t kMaxProbedArguments = 12;

bool In(std::string_view word, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// A long flag's name as kubectl looks it up: without "--" and "=value", '_' read as '-'.
std::string LongName(std::string_view token) {
  std::string name(token.substr(2, token.find('=') == std::string_view::npos
                                       ? std::string_view::npos
                                       : token.find('=') - 2));
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// Root flags kubectl treats as booleans (`kubectl options`: the ones shown =false): only
// these leave the next word alone when cobra looks for the command.
bool RootBool(std::string_view name) {
  return In(name, {"insecure-skip-tls-verify", "match-server-version", "disable-compression",
                   "warnings-as-errors"});
}

// Boolean flags of kubectl get, describe, logs, top node|pod, api-resources, version,
// explain and the root command, from their --help.
bool AnyBool(std::string_view name) {
  return RootBool(name) ||
         In(name, {"all-namespaces", "allow-missing-template-keys", "ignore-not-found",
                   "no-headers", "output-watch-events", "recursive", "server-print", "show-kind",
                   "show-labels", "show-managed-fields", "watch", "watch-only", "all-containers",
                   "all-pods", "follow", "ignore-errors", "insecure-skip-tls-verify-backend",
                   "prefix", "previous", "timestamps", "show-events", "cached", "namespaced",
                   "client", "show-capacity", "use-protocol-buffers", "containers", "sum"});
}

bool RefusedLongFlag(const std::string& name) {
  const std::string lower = Lower(name);
  for (std::string_view prefix : {"as-", "client-", "insecure-", "log-", "profile"}) {
    if (lower.rfind(prefix, 0) == 0) return true;
  }
  return In(lower, {"kubeconfig", "server", "token", "user", "username", "password", "cluster",
                    "context", "as", "certificate-authority", "tls-server-name", "kuberc",
                    "cache-dir", "filename", "kustomize", "recursive", "raw", "watch",
                    "watch-only", "output-watch-events", "follow", "template", "vmodule"});
}

// Shorthands of the flags the guard may let through: value-taking n l o c L v, boolean A p.
bool ShortTakesValue(char c) {
  return c == 'n' || c == 'l' || c == 'o' || c == 'c' || c == 'L' || c == 'v';
}
bool ShortBool(char c) { return c == 'A' || c == 'p'; }

bool SpellsSecrets(std::string_view piece) {
  std::string head = Lower(piece.substr(0, piece.find('.')));
  return head == "secret" || head == "secrets";
}

void CheckOutputValue(std::string_view value) {
  const std::string lower = Lower(value.substr(0, value.find('=')));
  FUZZ_CHECK(lower.find("template") == std::string::npos);
  FUZZ_CHECK(lower.find("file") == std::string::npos);
}

void CheckVerbosity(std::string_view value) {
  FUZZ_CHECK(!value.empty() && value.size() <= 3);
  FUZZ_CHECK(std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }));
  FUZZ_CHECK(std::stoi(std::string(value)) <= 6);
}

// The command words cobra finds: non-flag words, skipping the value of every root flag that
// is not a boolean, up to "--".
std::vector<std::string> CommandWords(const Argv& argv) {
  std::vector<std::string> words;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& token = argv[i];
    if (token == "--") break;
    if (token.rfind("--", 0) == 0 && token.find('=') == std::string::npos) {
      if (!RootBool(LongName(token))) ++i;
    } else if (token.size() == 2 && token[0] == '-' && token[1] != '=') {
      ++i;  // no root shorthand is a boolean
    } else if (!token.empty() && token[0] != '-') {
      words.push_back(token);
    }
  }
  return words;
}

void CheckAccepted(const Argv& argv) {
  FUZZ_CHECK(argv.size() <= uplink::kubectl::kMaxArguments);
  for (const std::string& token : argv) {
    FUZZ_CHECK(token.size() <= uplink::kubectl::kMaxArgumentBytes);
    for (char c : token) FUZZ_CHECK(c >= 0x20 && c < 0x7f);
  }

  // The verb, and top's subcommand, as cobra finds them.
  std::vector<std::string> words = CommandWords(argv);
  FUZZ_CHECK(!words.empty());
  FUZZ_CHECK(In(words[0], {"get", "logs", "top", "describe", "api-resources", "api-versions",
                           "version", "cluster-info", "explain"}));
  if (words[0] == "top") {
    FUZZ_CHECK(words.size() >= 2);
    FUZZ_CHECK(In(words[1], {"node", "nodes", "no", "pod", "pods", "po"}));
  }
  // cluster-info has one subcommand, dump; cobra would take any word after it as one.
  if (words[0] == "cluster-info") FUZZ_CHECK(words.size() == 1);

  // Every flag. The guard lets no argument that starts with '-' be a value, a name or
  // anything after "--", so every such word before "--" is a flag.
  bool after_dashes = false;
  std::vector<std::string> arguments;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& token = argv[i];
    if (after_dashes) {
      FUZZ_CHECK(token.empty() || token[0] != '-');
      arguments.push_back(token);
      continue;
    }
    if (token == "--") {
      after_dashes = true;
      continue;
    }
    if (token.size() > 2 && token.rfind("--", 0) == 0) {
      const std::string name = LongName(token);
      // explain's --recursive lists a schema's fields; every other --recursive reads files.
      FUZZ_CHECK(!RefusedLongFlag(name) || (name == "recursive" && words[0] == "explain"));
      const size_t equals = token.find('=');
      std::string_view value;
      if (equals != std::string::npos) {
        value = std::string_view(token).substr(equals + 1);
      } else if (!AnyBool(name)) {
        FUZZ_CHECK(i + 1 < argv.size());
        value = argv[++i];
        FUZZ_CHECK(value.empty() || value[0] != '-');
      }
      if (name == "output") CheckOutputValue(value);
      if (name == "v") CheckVerbosity(value);
      continue;
    }
    if (token.size() > 1 && token[0] == '-') {
      for (size_t k = 1; k < token.size(); ++k) {
        const char c = token[k];
        FUZZ_CHECK(c != 's' && c != 'f' && c != 'k' && c != 'R' && c != 'w');
        FUZZ_CHECK(ShortTakesValue(c) || ShortBool(c));
        std::string_view rest = std::string_view(token).substr(k + 1);
        const bool with_equals = !rest.empty() && rest[0] == '=';
        if (with_equals) {
          rest.remove_prefix(1);
        } else if (ShortBool(c)) {
          continue;
        } else if (rest.empty()) {
          FUZZ_CHECK(i + 1 < argv.size());
          rest = argv[++i];
          FUZZ_CHECK(rest.empty() || rest[0] != '-');
        }
        if (c == 'o') CheckOutputValue(rest);
        if (c == 'v') CheckVerbosity(rest);
        break;
      }
      continue;
    }
    arguments.push_back(token);
  }

  // No argument (type, TYPE/NAME, comma list or name) spells secrets.
  for (const std::string& argument : arguments) {
    size_t start = 0;
    while (true) {
      size_t end = argument.find_first_of(",/", start);
      FUZZ_CHECK(!SpellsSecrets(std::string_view(argument).substr(
          start, end == std::string::npos ? std::string::npos : end - start)));
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
}

// Runs the guard on argv and holds its answer to the scan; the command when accepted.
std::optional<uplink::kubectl::KubectlCommand> CheckAndJudge(const Argv& argv) {
  auto command = uplink::kubectl::CheckKubectlArgv(argv);
  if (!command.ok()) {
    // A refusal is PermissionDenied with a short reason on one line.
    FUZZ_CHECK(command.status().code() == uplink::StatusCode::kPermissionDenied);
    const std::string& reason = command.status().message();
    FUZZ_CHECK(!reason.empty() && reason.size() <= 300);
    FUZZ_CHECK(reason.find('\n') == std::string::npos);
    return std::nullopt;
  }
  CheckAccepted(argv);

  // Scope: before namespaces are chosen only cluster-scoped reads run, which read no
  // namespace; "*" allows everything allowed.
  FUZZ_CHECK(uplink::kubectl::CheckNamespaceScope(*command, std::nullopt).ok() ==
             command->cluster_scoped);
  FUZZ_CHECK(uplink::kubectl::CheckNamespaceScope(*command, std::vector<std::string>{"*"}).ok());
  if (command->all_namespaces && !command->cluster_scoped) {
    FUZZ_CHECK(
        !uplink::kubectl::CheckNamespaceScope(*command, std::vector<std::string>{"default"}).ok());
  }
  return *command;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Argv argv = {"kubectl"};
  std::string_view input(reinterpret_cast<const char*>(data), size);
  while (!input.empty()) {
    size_t newline = input.find('\n');
    argv.emplace_back(input.substr(0, newline));
    if (newline == std::string_view::npos) break;
    input.remove_prefix(newline + 1);
  }

  CheckAndJudge(argv);

  // Each probe word at each position must be refused or pass the same scan: random mutation
  // alone rarely lands a word right after the one flag whose arity it would exploit.
  if (argv.size() <= kMaxProbedArguments) {
    for (std::string_view probe : {"secrets", "dump", "exec", "--raw=/", "-s", "--as=x", "-w"}) {
      for (size_t at = 1; at <= argv.size(); ++at) {
        Argv probed = argv;
        probed.insert(probed.begin() + static_cast<std::ptrdiff_t>(at), std::string(probe));
        CheckAndJudge(probed);
      }
    }
  }
  return 0;
}