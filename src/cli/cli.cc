#include "cli/cli.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <optional>
#include <sstream>
#include <utility>

#include "common/files.h"
#include "common/json.h"
#include "common/secret.h"
#include "common/text.h"
#include "net/client.h"
#include "net/server.h"

namespace uplink::cli {
namespace {

constexpr char kUsage[] = R"(usage: uplink [global flags] <command> [flags]

commands:
  connections list                       list connections with status, nodes and GPUs
  connections get ID                     show one connection and its nodes
  connections create --agent-name A --cluster-name C [--expires-at RFC3339] [--token-out F]
                                         create a connection; its agent token is shown once
                                         (or written to F with mode 0600)
  connections rotate ID [--token-out F]  issue a new token; the old one stops working at once
  connections revoke ID                  turn the token off; the agent is refused at once

global flags (each also read from its environment variable):
  --console URL       (UPLINK_CONSOLE) the console, https:// or http:// on loopback
  --api-key-file F    (UPLINK_API_KEY_FILE) file holding your uk_ API key;
                      or set UPLINK_API_KEY. Keys are never taken from the command line.
  --output table|json (UPLINK_OUTPUT)
)";

struct Globals {
  std::string console;
  std::string api_key_file;
  std::string output = "table";
  std::string agent_name;
  std::string cluster_name;
  std::string expires_at;
  std::string token_out;
  bool help = false;
};

class Api {
 public:
  Api(std::unique_ptr<net::HttpClient> client, Secret key)
      : client_(std::move(client)), key_(std::move(key)) {}

  Result<json::value> Call(const std::string& method, const std::string& path,
                           const std::string& body = "") {
    net::Request request;
    request.method = method;
    request.target = path;
    request.headers.Set("Authorization", "Bearer " + key_.Reveal());
    request.headers.Set("Accept", "application/json");
    if (!body.empty()) {
      request.headers.Set("Content-Type", "application/json");
      request.body = body;
    }
    UPLINK_ASSIGN_OR_RETURN(net::Response response, client_->Send(std::move(request)));
    if (response.status >= 300 && response.status < 400) {
      return UnavailableError("the console answered " + std::to_string(response.status) +
                              " (a redirect); uplink does not follow redirects with your key. "
                              "Use the console's final address in --console");
    }
    auto parsed = ParseJson(response.body);
    if (response.status >= 400) {
      std::string message = "the console answered " + std::to_string(response.status);
      if (parsed.ok() && parsed->is_object()) {
        if (const auto* error = parsed->as_object().if_contains("error");
            error && error->is_object()) {
          const auto& e = error->as_object();
          if (const auto* m = e.if_contains("message"); m && m->is_string()) {
            message += ": " + OneLineExcerpt(m->as_string(), 500);
          }
        }
      }
      return Status(net::StatusCodeForHttpStatus(response.status), message);
    }
    if (!parsed.ok()) return parsed.status().WithContext("the console's reply is not JSON");
    return parsed;
  }

 private:
  std::unique_ptr<net::HttpClient> client_;
  Secret key_;
};

std::string Str(const json::value& object, const char* key) {
  if (!object.is_object()) return "";
  const auto* v = object.as_object().if_contains(key);
  if (v == nullptr || v->is_null()) return "-";
  if (v->is_string()) return std::string(v->as_string());
  return json::serialize(*v);
}

std::int64_t Num(const json::value& object, const char* a, const char* b) {
  if (!object.is_object()) return 0;
  const auto* outer = object.as_object().if_contains(a);
  if (outer == nullptr || !outer->is_object()) return 0;
  const auto* v = outer->as_object().if_contains(b);
  return v != nullptr && v->is_int64() ? v->as_int64() : 0;
}

void PrintConnections(const json::array& connections, std::ostream& out) {
  out << std::left << std::setw(18) << "ID" << std::setw(22) << "CLUSTER" << std::setw(10)
      << "STATUS" << std::setw(8) << "NODES" << std::setw(12) << "GPUS READY"
      << "LAST REPORT\n";
  for (const auto& c : connections) {
    std::string gpus = std::to_string(Num(c, "totals", "gpus_ready")) + "/" +
                       std::to_string(Num(c, "totals", "gpu_capacity"));
    out << std::left << std::setw(18) << Str(c, "id") << std::setw(22) << Str(c, "cluster_name")
        << std::setw(10) << Str(c, "status") << std::setw(8)
        << std::to_string(Num(c, "totals", "nodes")) << std::setw(12) << gpus
        << Str(c, "last_report_at") << "\n";
  }
}

void PrintConnection(const json::value& c, std::ostream& out) {
  for (const char* key : {"id", "agent_name", "cluster_name", "status", "token_prefix",
                          "created_at", "expires_at", "revoked_at", "last_report_at",
                          "cluster_uid", "agent_version"}) {
    out << std::left << std::setw(16) << (std::string(key) + ":") << Str(c, key) << "\n";
  }
  const auto* nodes = c.as_object().if_contains("nodes");
  if (nodes == nullptr || !nodes->is_array() || nodes->as_array().empty()) {
    out << "nodes:          none reported yet\n";
    return;
  }
  out << "\n" << std::left << std::setw(28) << "NODE" << std::setw(8) << "READY" << std::setw(10)
      << "CORDONED" << std::setw(30) << "GPU PRODUCT" << "GPUS (ALLOC/CAP)\n";
  for (const auto& n : nodes->as_array()) {
    out << std::left << std::setw(28) << Str(n, "name") << std::setw(8) << Str(n, "ready")
        << std::setw(10) << Str(n, "unschedulable") << std::setw(30) << Str(n, "gpu_product")
        << Str(n, "gpu_allocatable") << "/" << Str(n, "gpu_capacity");
    if (n.is_object() && n.as_object().contains("error")) out << "  error: " << Str(n, "error");
    out << "\n";
  }
}

// The --token-out file, created before the console is asked for a token so that a file that
// cannot be written costs nothing; removed again unless the token was written into it.
class TokenFile {
 public:
  TokenFile() = default;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile() {
    if (fd_ < 0) return;
    ::close(fd_);
    ::unlink(path_.c_str());
  }

  // Refuses an existing path (O_EXCL) and a symlink (O_NOFOLLOW): the token must land in a
  // new file that only this user can read.
  Status Create(const std::string& path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ >= 0) return Status::Ok();
    int error = errno;
    if (error == EEXIST) {
      return AlreadyExistsError("--token-out " + path + " already exists; uplink writes a new " +
                                "token only to a new file. Remove it or choose another path");
    }
    return InvalidArgumentError("cannot create --token-out " + path + ": " +
                                std::strerror(error));
  }

  // Writes and fsyncs the token; on failure the file is removed.
  Status Write(std::string_view token) {
    Status status = Status::Ok();
    for (size_t done = 0; status.ok() && done < token.size();) {
      ssize_t n = ::write(fd_, token.data() + done, token.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) status = UnavailableError(std::string("writing: ") + std::strerror(errno));
      if (n > 0) done += static_cast<size_t>(n);
    }
    if (status.ok() && ::fsync(fd_) != 0) {
      status = UnavailableError(std::string("fsync: ") + std::strerror(errno));
    }
    if (status.ok() && ::close(std::exchange(fd_, -1)) != 0) {
      status = UnavailableError(std::string("close: ") + std::strerror(errno));
      ::unlink(path_.c_str());
    }
    return status;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

void PrintTokenOnce(const Secret& token, std::ostream& out) {
  out << "\nAgent token (shown only this once; store it in a Kubernetes Secret):\n\n  "
      << token.Reveal() << "\n\nCreate the Secret without leaving the token in your shell "
      << "history:\n\n  read -rs AGT   # paste the token\n"
      << "  printf '%s' \"$AGT\" | kubectl -n uplink-system create secret generic "
         "uplink-agent-token --from-file=UPLINK_AGENT_TOKEN=/dev/stdin\n  unset AGT\n";
}

// Shows the new token once, or stores it in the 0600 --token-out file so it never reaches the
// screen. The console has already replaced the old token, so if the file cannot be written
// the token is shown instead of being lost.
Status EmitToken(const Secret& token, TokenFile* token_file, const Globals& g, std::ostream& out,
                 std::ostream& err) {
  if (token_file == nullptr) {
    PrintTokenOnce(token, out);
    return Status::Ok();
  }
  if (Status written = token_file->Write(token.Reveal()); !written.ok()) {
    err << "uplink: could not write the new token to " << g.token_out << " ("
        << written.message() << "); the console has already issued it, so it is shown here "
        << "instead:\n";
    PrintTokenOnce(token, err);
    return written.WithContext("--token-out " + g.token_out);
  }
  out << "The agent token was written to " << g.token_out << " (mode 0600). Create the "
      << "Kubernetes Secret from that file, then delete it.\n";
  return Status::Ok();
}

// A 2xx reply that is JSON but not what the console sends (a proxy's `[]`, say) is refused
// here, so the printers below may rely on its shape.
Status CheckReplyShape(const json::value& reply, bool is_list, bool issues_token) {
  Status wrong = UnavailableError(
      "the console's reply is not the JSON object uplink expects; check that --console is the "
      "console's address and not a proxy or another service");
  if (!reply.is_object()) return wrong;
  if (is_list) {
    const auto* list = reply.as_object().if_contains("connections");
    if (list == nullptr || !list->is_array()) return wrong;
  }
  if (issues_token) {
    const auto* token = reply.as_object().if_contains("token");
    if (token == nullptr || !token->is_string() || token->as_string().empty()) {
      return UnavailableError("the console's reply carries no token; the connection may have "
                              "been changed: check it with \"uplink connections get\"");
    }
  }
  return Status::Ok();
}

Result<Secret> LoadApiKey(const Globals& g, const EnvLookup& env) {
  if (!g.api_key_file.empty()) {
    UPLINK_ASSIGN_OR_RETURN(std::string text, ReadFileBounded(g.api_key_file, 4096));
    std::string_view key = TrimWhitespace(text);
    if (key.empty()) return InvalidArgumentError("the API key file " + g.api_key_file + " is empty");
    return Secret(std::string(key));
  }
  if (const char* key = env("UPLINK_API_KEY"); key != nullptr && *key != '\0') {
    return Secret(std::string(TrimWhitespace(key)));
  }
  return InvalidArgumentError(
      "no API key: set UPLINK_API_KEY or pass --api-key-file F (keys are never taken from the "
      "command line)");
}

Result<std::unique_ptr<net::HttpClient>> ConnectConsole(const Globals& g) {
  if (g.console.empty()) {
    return InvalidArgumentError("no console address: pass --console URL or set UPLINK_CONSOLE");
  }
  UPLINK_ASSIGN_OR_RETURN(net::ParsedUrl url, net::ParseBaseUrl(g.console));
  if (url.scheme != "https" && !net::IsLoopbackHost(url.host)) {
    return InvalidArgumentError("--console must be https:// (plain http only to a loopback "
                                "address); got " + g.console);
  }
  net::ClientOptions options;
  options.base_url = g.console;
  options.user_agent = "uplink-cli/" UPLINK_VERSION;
  return net::HttpClient::Create(std::move(options));
}

bool ValidId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

}  // namespace

int Run(const std::vector<std::string>& args, const EnvLookup& env, std::ostream& out,
        std::ostream& err) {
  Globals g;
  FlagSet flags("uplink");
  flags.String("console", &g.console, "console URL");
  flags.String("api-key-file", &g.api_key_file, "file holding your API key");
  flags.String("output", &g.output, "table or json");
  flags.String("agent-name", &g.agent_name, "agent name (connections create)");
  flags.String("cluster-name", &g.cluster_name, "cluster name (connections create)");
  flags.String("expires-at", &g.expires_at, "token expiry, RFC 3339 (connections create)");
  flags.String("token-out", &g.token_out, "write a new token to this file instead of showing it");
  flags.Bool("help", &g.help, "show usage");
  if (Status status = flags.Parse(args, env); !status.ok()) {
    err << "uplink: " << status.message() << "\n";
    return 2;
  }
  const auto& words = flags.positional();
  if (g.help || words.empty()) {
    (words.empty() && !g.help ? err : out) << kUsage;
    return g.help ? 0 : 2;
  }
  if (g.output != "table" && g.output != "json") {
    err << "uplink: --output must be table or json\n";
    return 2;
  }
  if (words[0] != "connections" || words.size() < 2) {
    err << "uplink: unknown command '" << words[0] << "'\n\n" << kUsage;
    return 2;
  }
  const std::string& verb = words[1];
  const bool needs_id = verb == "get" || verb == "rotate" || verb == "revoke";
  if (needs_id && (words.size() != 3 || !ValidId(words[2]))) {
    err << "uplink: connections " << verb << " takes one connection ID\n";
    return 2;
  }
  if (!needs_id && verb != "list" && verb != "create") {
    err << "uplink: unknown command 'connections " << verb << "'\n\n" << kUsage;
    return 2;
  }
  if (verb == "create" && (g.agent_name.empty() || g.cluster_name.empty())) {
    err << "uplink: connections create needs --agent-name and --cluster-name\n";
    return 2;
  }

  auto key = LoadApiKey(g, env);
  if (!key.ok()) {
    err << "uplink: " << key.status().message() << "\n";
    return 2;
  }
  auto client = ConnectConsole(g);
  if (!client.ok()) {
    err << "uplink: " << client.status().message() << "\n";
    return 2;
  }
  Api api(std::move(*client), std::move(*key));

  const bool issues_token = verb == "create" || verb == "rotate";
  std::optional<TokenFile> token_file;
  if (issues_token && !g.token_out.empty()) {
    if (Status created = token_file.emplace().Create(g.token_out); !created.ok()) {
      err << "uplink: " << created.message() << "\n";
      return 1;
    }
  }

  Result<json::value> reply = InternalError("no command ran");
  if (verb == "list") {
    reply = api.Call("GET", "/api/v1/connections");
  } else if (verb == "get") {
    reply = api.Call("GET", "/api/v1/connections/" + words[2]);
  } else if (verb == "create") {
    json::object body{{"agent_name", g.agent_name}, {"cluster_name", g.cluster_name}};
    if (!g.expires_at.empty()) body["expires_at"] = g.expires_at;
    reply = api.Call("POST", "/api/v1/connections", json::serialize(body));
  } else {
    reply = api.Call("POST", "/api/v1/connections/" + words[2] + "/" + verb);
  }
  if (reply.ok()) {
    if (Status shape = CheckReplyShape(*reply, verb == "list", issues_token); !shape.ok()) {
      reply = shape;
    }
  }
  if (!reply.ok()) {
    err << "uplink: " << reply.status().message() << "\n";
    return 1;  // an unused --token-out file is removed by ~TokenFile
  }

  json::value shown = *reply;
  // Table output shows the token in its own framed block; a --token-out file keeps it off the
  // screen entirely. Only JSON output without --token-out carries it inline, for scripts.
  if (g.output == "table" || token_file) shown.as_object().erase("token");
  if (g.output == "json") {
    out << json::serialize(shown) << "\n";
  } else if (verb == "list") {
    PrintConnections(shown.as_object().at("connections").as_array(), out);
  } else {
    PrintConnection(shown, out);
  }
  if (issues_token && (g.output == "table" || token_file)) {
    Secret token(std::string(reply->as_object().at("token").as_string()));
    TokenFile* file = token_file ? &*token_file : nullptr;
    if (Status status = EmitToken(token, file, g, g.output == "json" ? err : out, err);
        !status.ok()) {
      err << "uplink: " << status.message() << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace uplink::cli
