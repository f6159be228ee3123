#include "cli_harness.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "cli/credentials.h"
#include "common/files.h"

namespace uplink::cli::testing {

FakeConsole::FakeConsole() {
  auto server =
      net::HttpServer::Start(net::ServerOptions{}, [this](net::Request request, net::Reply reply) {
        Handler handler;
        {
          std::lock_guard lock(mutex_);
          requests_.push_back(request);
          auto it = routes_.find(request.method + " " + request.Path());
          if (it != routes_.end()) handler = it->second;
        }
        reply(handler ? handler(request)
                      : ErrorReply(404, "not_found",
                                   "no route " + request.method + " " + request.Path()));
      });
  if (!server.ok()) throw std::runtime_error(server.status().ToString());
  server_ = std::move(*server);
}

FakeConsole::~FakeConsole() { server_->Stop(); }

std::string FakeConsole::url() const {
  return "http://127.0.0.1:" + std::to_string(server_->port());
}

void FakeConsole::On(const std::string& method, const std::string& path, Handler handler) {
  std::lock_guard lock(mutex_);
  routes_[method + " " + path] = std::move(handler);
}

void FakeConsole::OnJson(const std::string& method, const std::string& path, int status,
                         std::string body) {
  On(method, path,
     [status, body](const net::Request&) { return net::Response::Json(status, body); });
}

void FakeConsole::OnJson(const std::string& method, const std::string& path, int status,
                         const json::object& body) {
  OnJson(method, path, status, json::serialize(body));
}

std::vector<net::Request> FakeConsole::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::vector<net::Request> FakeConsole::RequestsTo(const std::string& method,
                                                  const std::string& path) const {
  std::vector<net::Request> out;
  for (const auto& r : requests()) {
    if (r.method == method && r.Path() == path) out.push_back(r);
  }
  return out;
}

net::Response ErrorReply(int status, const std::string& code, const std::string& message) {
  return net::Response::Json(
      status, json::serialize(json::object{{"error", {{"code", code}, {"message", message}}}}));
}

json::object ConnectionJson(const std::string& id, const std::string& cluster,
                            const std::string& status) {
  return json::object{{"id", id},
                      {"agent_name", "uplink-agent"},
                      {"cluster_name", cluster},
                      {"status", status},
                      {"liveness", "offline"},
                      {"token_prefix", "agt_AbCd"},
                      {"created_at", "2027-01-01T00:00:00Z"},
                      {"expires_at", "2027-04-01T00:00:00Z"},
                      {"revoked_at", nullptr},
                      {"last_report_at", nullptr},
                      {"agent_version", nullptr},
                      {"agents", json::array{}},
                      {"handover", nullptr},
                      {"security_events", json::array{}},
                      {"nodes", json::array{}},
                      {"totals",
                       {{"nodes", 0},
                        {"nodes_ready", 0},
                        {"gpu_capacity", 0},
                        {"gpu_allocatable", 0},
                        {"gpus_ready", 0}}}};
}

Result<Secret> FakeTerminal::ReadSecret(std::string_view prompt) {
  prompts.emplace_back(prompt);
  if (!available) return FailedPreconditionError("there is no terminal to ask on");
  if (answers.empty()) return InvalidArgumentError("no answer: the terminal input ended");
  Secret answer(answers.front());
  answers.pop_front();
  return answer;
}

Result<std::string> FakeTerminal::ReadLine(std::string_view prompt) {
  auto secret = ReadSecret(prompt);
  if (!secret.ok()) return secret.status();
  return secret->Reveal();
}

Status FakeTerminal::Show(std::string_view text) {
  if (!available) return FailedPreconditionError("there is no terminal to show on");
  shown += text;
  return Status::Ok();
}

Cli::Cli() {
  env["HOME"] = home_.path();
  if (const char* path = std::getenv("PATH")) env["PATH"] = path;
}

void Cli::StoreCredential(const std::string& console, const std::string& credential,
                          const std::string& kind, const std::string& expires_at) {
  StoredCredential stored;
  stored.console = console;
  stored.credential = Secret(credential);
  stored.kind = kind == "session" ? CredentialKind::kSession : CredentialKind::kApiKey;
  stored.expires_at = expires_at;
  stored.email = "person@example.com";
  Status saved = CredentialsFile(credentials_path()).Save(stored);
  ASSERT_TRUE(saved.ok()) << saved.ToString();
}

CliResult Cli::Run(std::vector<std::string> args, const std::string& stdin_data) {
  return RunWith(std::move(args), stdin_data, 0, 1);
}

CliResult Cli::RunOnFds(std::vector<std::string> args, int in_fd, int out_fd) {
  return RunWith(std::move(args), "", in_fd, out_fd);
}

CliResult Cli::RunWith(std::vector<std::string> args, const std::string& stdin_data, int in_fd,
                       int out_fd) {
  std::istringstream in(stdin_data);
  std::ostringstream out, err;
  EnvLookup lookup = [this](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CliResult result;
  result.code =
      cli::Run(args, lookup, Streams{in, out, err, in_fd, out_fd}, terminal, clock);
  result.out = out.str();
  result.err = err.str();
  return result;
}

}  // namespace uplink::cli::testing
