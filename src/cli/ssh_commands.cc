// uplink ssh … (docs/cli.md, "SSH"): the grants of a reservation, `setup`, which makes plain
// `ssh uplink-RES` work (ssh_config.h), and `proxy`, the ProxyCommand that carries one SSH
// connection through the console's relay (ssh_proxy.h, docs/protocol.md "SSH relay").
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>

#include "cli/commands.h"
#include "cli/render.h"
#include "cli/ssh_config.h"
#include "cli/ssh_proxy.h"
#include "common/files.h"
#include "common/text.h"
#include "net/http.h"
#include "net/websocket.h"
#include "protocol/ssh.h"
#include "protocol/ssh_public_key.h"
#include "protocol/workspace.h"

namespace uplink::cli {
namespace {

// A .pub file is one line of at most kMaxSshPublicKeyLineBytes; a larger file is not one.
constexpr size_t kMaxPublicKeyFileBytes = 4096;
// The client channel's keepalive: pings after half of it, so a quiet session survives a load
// balancer's idle timeout (350 s), and a dead console is noticed.
constexpr std::chrono::seconds kProxyIdleTimeout{120};

std::string GrantsPath(const std::string& reservation_id) {
  return "/api/v1/reservations/" + net::PercentEncode(reservation_id) + "/ssh-grants";
}

Status CheckReservationId(const std::string& id) {
  if (protocol::IsReservationId(id)) return Status::Ok();
  return InvalidArgumentError("\"" + OneLineExcerpt(id, 40) +
                              "\" is not a reservation id (res_ and 16 hex digits); 'uplink "
                              "reservations list' shows yours");
}

// The one key line of a .pub file, parsed; `flag` names where the path came from.
Result<protocol::SshPublicKey> ReadPublicKeyFile(const std::string& path, std::string_view flag) {
  auto text = ReadFileBounded(path, kMaxPublicKeyFileBytes);
  if (!text.ok()) {
    return InvalidArgumentError(std::string(flag) + " " + path + ": " + text.status().message());
  }
  auto key = protocol::ParseSshPublicKey(TrimWhitespace(*text));
  if (!key.ok()) {
    return InvalidArgumentError(std::string(flag) + " " + path + ": " + key.status().message());
  }
  return key;
}

// The grant's key as the console sent it, or nullopt when it is not a key at all.
std::optional<protocol::SshPublicKey> GrantKey(const json::object& grant) {
  auto text = StringField(grant, "public_key");
  if (!text) return std::nullopt;
  auto key = protocol::ParseSshPublicKey(*text);
  if (!key.ok()) return std::nullopt;
  return std::move(*key);
}

void PrintGrant(std::ostream& out, const json::object& grant) {
  Fields fields;
  for (std::string_view key :
       {"id", "state", "key_type", "fingerprint", "comment", "created_at", "expires_at",
        "revoked_at"}) {
    fields.Add(std::string(key), Display(grant, key, 100));
  }
  fields.Render(out);
}

// The absolute path of the running uplink, for the ProxyCommand: ssh runs it from anywhere,
// with any PATH.
Result<std::string> ThisProgram() {
  char path[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return ErrnoError("find this program's path (/proc/self/exe)", errno);
  return std::string(path, static_cast<size_t>(n));
}

// `path` with a leading ~/ expanded and made absolute.
Result<std::string> AbsolutePath(const Invocation& inv, const std::string& path) {
  const char* home = inv.env("HOME");
  if (path.starts_with("~/")) {
    if (home == nullptr || *home == '\0') {
      return InvalidArgumentError("HOME is not set; give " + path + " as an absolute path");
    }
    return std::string(home) + path.substr(1);
  }
  if (path.starts_with('/')) return path;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return ErrnoError("getcwd", errno);
  return std::string(cwd) + "/" + path;
}

Result<std::string> SshDirectory(const Invocation& inv) {
  if (inv.line.Has("ssh-dir")) return AbsolutePath(inv, inv.line.Get("ssh-dir"));
  const char* home = inv.env("HOME");
  if (home == nullptr || *home == '\0') {
    return InvalidArgumentError("HOME is not set; name the ssh directory with --ssh-dir DIR");
  }
  return std::string(home) + "/.ssh";
}

// --identity (its .pub beside it), else the first of id_ed25519 and id_ecdsa with a .pub.
Result<std::string> IdentityFile(const Invocation& inv, const std::string& ssh_dir) {
  if (inv.line.Has("identity")) {
    std::string path = inv.line.Get("identity");
    if (path.ends_with(".pub")) path.resize(path.size() - 4);
    return AbsolutePath(inv, path);
  }
  for (const char* name : {"id_ed25519", "id_ecdsa"}) {
    std::string path = ssh_dir + "/" + name;
    if (::access((path + ".pub").c_str(), R_OK) == 0) return path;
  }
  return InvalidArgumentError("no " + ssh_dir + "/id_ed25519.pub or id_ecdsa.pub: make a key with "
                              "'ssh-keygen -t ed25519', or name yours with --identity FILE");
}

// A Unix user name as the console may name the workspace's: nothing that could break the
// config line it goes into.
bool IsUserName(std::string_view name) {
  if (name.empty() || name.size() > 32) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || c == '_' ||
                    (i > 0 && ((c >= '0' && c <= '9') || c == '-'));
    if (!ok) return false;
  }
  return true;
}

// What `setup` takes from GET /api/v1/reservations/{id}/ssh, checked.
struct SshReadiness {
  std::string user;
  protocol::SshPublicKey host_key;
};

Result<SshReadiness> ReadyForSsh(ApiClient& api, const std::string& reservation_id) {
  UPLINK_ASSIGN_OR_RETURN(json::object reply,
                          api.Get(protocol::SshReadinessPath(reservation_id)));
  const std::string state = StringField(reply, "state").value_or("");
  if (state != "ready") {
    const std::string reason = StringField(reply, "reason").value_or("");
    return ConflictError("reservation " + reservation_id + " is not ready for SSH" +
                         (reason.empty() ? std::string(" (the console gave no reason)")
                                         : ": " + OneLineExcerpt(reason, 300)) +
                         ". Nothing was written; try again once it is ('uplink reservations "
                         "show " + reservation_id + "')");
  }
  SshReadiness ready;
  ready.user = StringField(reply, "user").value_or("");
  if (!IsUserName(ready.user)) {
    return InternalError("the console's SSH details name no usable user (\"" +
                         OneLineExcerpt(ready.user, 40) + "\"); nothing was written");
  }
  auto host_key = protocol::ParseSshPublicKey(StringField(reply, "host_key").value_or(""));
  if (!host_key.ok()) {
    return InternalError("the console's SSH details carry no usable host key (" +
                         host_key.status().message() + "); nothing was written");
  }
  const auto fingerprint = StringField(reply, "host_key_fingerprint");
  if (fingerprint && *fingerprint != host_key->fingerprint) {
    return InternalError("the console's host key fingerprint " + OneLineExcerpt(*fingerprint, 60) +
                         " is not that of its host key (" + host_key->fingerprint +
                         "); nothing was written");
  }
  ready.host_key = std::move(*host_key);
  return ready;
}

struct ChosenGrant {
  std::string id;
  std::string expires_at;
  bool created = false;
};

// The active grant of `key`, or a new one.
Result<ChosenGrant> GrantFor(ApiClient& api, const std::string& reservation_id,
                             const protocol::SshPublicKey& key) {
  UPLINK_ASSIGN_OR_RETURN(json::object list, api.Get(GrantsPath(reservation_id)));
  if (const json::array* grants = ArrayField(list, "ssh_grants")) {
    for (const json::value& entry : *grants) {
      const json::object* grant = entry.if_object();
      if (grant == nullptr || StringField(*grant, "state") != "active") continue;
      auto granted = GrantKey(*grant);
      const std::string id = StringField(*grant, "id").value_or("");
      if (granted && granted->blob == key.blob && protocol::IsSshGrantId(id)) {
        return ChosenGrant{id, StringField(*grant, "expires_at").value_or(""), false};
      }
    }
  }
  json::object body{{"public_key", key.Authorized() +
                                       (key.comment.empty() ? "" : " " + key.comment)}};
  UPLINK_ASSIGN_OR_RETURN(json::object grant, api.Post(GrantsPath(reservation_id), body));
  auto granted = GrantKey(grant);
  const std::string id = StringField(grant, "id").value_or("");
  if (!protocol::IsSshGrantId(id) || !granted || granted->blob != key.blob) {
    return InternalError("the console's reply to the new grant is not a grant of your key; "
                         "nothing was written");
  }
  return ChosenGrant{id, StringField(grant, "expires_at").value_or(""), true};
}

// A different host key already pinned for the reservation is kept, not replaced: the console
// pins the first key a workspace reports, so a change is not something to accept quietly.
Status CheckPinUnchanged(const SshPaths& paths, const std::string& reservation_id,
                         const std::string& known_hosts) {
  auto pinned = ReadFileBounded(paths.known_hosts, 64 << 10);
  if (!pinned.ok() || *pinned == known_hosts) return Status::Ok();
  return ConflictError("the host key pinned for " + reservation_id + " in " + paths.known_hosts +
                       " is not the one the console reports now; nothing was written. If the "
                       "workspace was truly made anew, delete that file and run setup again");
}

void PrintSetup(Invocation& inv, const std::string& reservation_id, const SshPaths& paths,
                const std::string& identity, const SshReadiness& ready, const ChosenGrant& grant,
                const SshInstallResult& installed) {
  const std::string alias = SshHostAlias(reservation_id);
  if (inv.json()) {
    PrintJson(inv.out,
              json::object{{"reservation_id", reservation_id},
                           {"host", alias},
                           {"user", ready.user},
                           {"identity_file", identity},
                           {"grant_id", grant.id},
                           {"grant_created", grant.created},
                           {"grant_expires_at", grant.expires_at},
                           {"host_key_fingerprint", ready.host_key.fingerprint},
                           {"host_config", paths.host_config},
                           {"known_hosts", paths.known_hosts},
                           {"config", paths.config},
                           {"config_changed", installed.config_changed},
                           {"backup", installed.backup_made ? paths.backup : ""}});
    return;
  }
  std::string config_note = "unchanged: its first line includes uplink's Host blocks";
  if (installed.config_created) {
    config_note = "created, with the Include line";
  } else if (installed.config_changed) {
    config_note = "Include line added first; " +
                  std::string(installed.backup_made ? "the old file is in " : "backup: ") +
                  paths.backup;
  }
  inv.out << "SSH to " << reservation_id << " is set up: user " << ready.user << ", key "
          << identity << ".\n\n";
  Fields fields;
  fields.Add("grant", grant.id + (grant.created ? " (new)" : " (already there)") +
                          ", expires " + OneLineExcerpt(grant.expires_at, 40));
  fields.Add("host key", ready.host_key.fingerprint + " (" + ready.host_key.type + "), pinned");
  fields.Render(inv.out);
  inv.out << "\nFiles:\n";
  const std::pair<std::string, std::string> files[] = {
      {paths.host_config, "the Host block"},
      {paths.known_hosts, "the pinned host key"},
      {paths.config, config_note}};
  size_t width = 0;
  for (const auto& [path, what] : files) width = std::max(width, path.size());
  for (const auto& [path, what] : files) {
    inv.out << "  " << path << std::string(width + 2 - path.size(), ' ') << what << "\n";
  }
  inv.out << "\nConnect with:\n"
          << "  ssh " << alias << "\n"
          << "  scp FILE " << alias << ":\n"
          << "  sftp " << alias << "\n"
          << "  VS Code: Remote-SSH: Connect to Host... and pick " << alias << "\n";
}

// One proxied connection; a Status for what went wrong, printed by RunSshProxy.
Status ProxyOnce(Invocation& inv) {
  const std::string& reservation_id = inv.operand(0);
  UPLINK_RETURN_IF_ERROR(CheckReservationId(reservation_id));
  const std::string grant_id = inv.line.Get("grant");
  if (!protocol::IsSshGrantId(grant_id)) {
    return InvalidArgumentError("--grant must name the grant (ssg_ and 16 hex digits) that "
                                "'uplink ssh setup' wrote into the ssh config");
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  net::WebSocketConnectOptions options;
  options.client = ConsoleClientOptions(session.api->console(), inv.line.globals.ca_file, {});
  options.target = protocol::SshConnectPath(reservation_id, grant_id);
  options.headers.Set("Authorization", "Bearer " + session.credential.secret.Reveal());
  options.subprotocols = {std::string(protocol::kSshClientSubprotocol)};
  options.websocket.max_message_bytes = protocol::kSshDataMessageMaxBytes;
  options.websocket.idle_timeout = kProxyIdleTimeout;
  net::Response refusal;
  refusal.status = 0;  // stays 0 unless the console answered the upgrade with an error
  auto channel = net::ConnectWebSocket(options, &refusal);
  if (!channel.ok()) {
    if (refusal.status != 0) return session.api->ErrorFor(refusal);
    return UnavailableError("cannot reach the console: " + channel.status().message());
  }
  // ssh may go away at any moment; a write to its closed pipe must be an error, not a signal.
  ::signal(SIGPIPE, SIG_IGN);
  SshPumpResult pumped =
      PumpSshChannel(**channel, inv.in_fd, inv.out_fd, protocol::kSshDataMessageMaxBytes);
  switch (pumped.end) {
    case SshPumpResult::End::kInputClosed:
    case SshPumpResult::End::kOutputClosed:
      return Status::Ok();
    case SshPumpResult::End::kPeerClosed:
      return FailedPreconditionError(
          pumped.reason.empty()
              ? "the console closed the connection (code " + std::to_string(pumped.close_code) +
                    ")"
              : OneLineExcerpt(pumped.reason, 200));
    case SshPumpResult::End::kFailed:
      break;
  }
  return UnavailableError("lost the connection to the console: " + pumped.error.message());
}

}  // namespace

Status RunSshGrants(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::object reply, session.api->Get(GrantsPath(inv.operand(0))));
  if (inv.json()) {
    PrintJson(inv.out, reply);
    return Status::Ok();
  }
  Table table({"ID", "STATE", "FINGERPRINT", "TYPE", "EXPIRES", "COMMENT"});
  if (const json::array* grants = ArrayField(reply, "ssh_grants")) {
    for (const json::value& entry : *grants) {
      const json::object* g = entry.if_object();
      if (g == nullptr) continue;
      table.AddRow({Display(*g, "id", 24), Display(*g, "state", 12),
                    Display(*g, "fingerprint", 60), Display(*g, "key_type", 24),
                    Display(*g, "expires_at", 32), Display(*g, "comment", 40)});
    }
  }
  if (table.rows() == 0) {
    inv.out << "No SSH grants. 'uplink ssh setup " << OneLineExcerpt(inv.operand(0), 24)
            << "' grants your key and writes the ssh config.\n";
    return Status::Ok();
  }
  table.Render(inv.out);
  return Status::Ok();
}

Status RunSshGrant(Invocation& inv) {
  if (!inv.line.Has("public-key")) {
    return InvalidArgumentError("--public-key FILE is required, such as ~/.ssh/id_ed25519.pub");
  }
  if (inv.line.Has("expires-at") && inv.line.Has("expires-in")) {
    return InvalidArgumentError("give --expires-at or --expires-in, not both");
  }
  UPLINK_ASSIGN_OR_RETURN(std::string path, AbsolutePath(inv, inv.line.Get("public-key")));
  UPLINK_ASSIGN_OR_RETURN(protocol::SshPublicKey key, ReadPublicKeyFile(path, "--public-key"));
  json::object body{
      {"public_key", key.Authorized() + (key.comment.empty() ? "" : " " + key.comment)}};
  if (inv.line.Has("expires-at")) {
    if (!ParseRfc3339(inv.line.Get("expires-at")).ok()) {
      return InvalidArgumentError("--expires-at takes an RFC 3339 time, such as "
                                  "2027-01-31T18:00:00Z");
    }
    body["expires_at"] = inv.line.Get("expires-at");
  } else if (inv.line.Has("expires-in")) {
    auto duration = ParseDuration(inv.line.Get("expires-in"));
    if (!duration.ok() || duration->count() < 1000) {
      return InvalidArgumentError("--expires-in takes a duration such as 90m or 2h");
    }
    body["expires_at"] = FormatRfc3339(inv.clock.Now() + *duration);
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::object grant,
                          session.api->Post(GrantsPath(inv.operand(0)), body));
  if (inv.json()) {
    PrintJson(inv.out, grant);
    return Status::Ok();
  }
  PrintGrant(inv.out, grant);
  inv.out << "\nThe key opens SSH sessions into " << OneLineExcerpt(inv.operand(0), 24)
          << "'s workspace until it expires or you revoke it.\n";
  return Status::Ok();
}

Status RunSshRevoke(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(
      json::object grant,
      session.api->Call("DELETE",
                        GrantsPath(inv.operand(0)) + "/" + net::PercentEncode(inv.operand(1))));
  if (inv.json()) {
    PrintJson(inv.out, grant);
    return Status::Ok();
  }
  PrintGrant(inv.out, grant);
  inv.out << "\nNo new SSH session opens with this key; open ones go on until the reservation "
             "ends or they idle out.\n";
  return Status::Ok();
}

Status RunSshSetup(Invocation& inv) {
  const std::string& reservation_id = inv.operand(0);
  UPLINK_RETURN_IF_ERROR(CheckReservationId(reservation_id));
  UPLINK_ASSIGN_OR_RETURN(std::string ssh_dir, SshDirectory(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string identity, IdentityFile(inv, ssh_dir));
  UPLINK_ASSIGN_OR_RETURN(protocol::SshPublicKey key,
                          ReadPublicKeyFile(identity + ".pub", "--identity"));
  const SshPaths paths = SshPathsFor(ssh_dir, reservation_id);

  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(SshReadiness ready, ReadyForSsh(*session.api, reservation_id));
  const std::string known_hosts =
      RenderSshKnownHosts(reservation_id, ready.host_key.Authorized());
  UPLINK_RETURN_IF_ERROR(CheckPinUnchanged(paths, reservation_id, known_hosts));

  // The ProxyCommand runs under ssh, maybe without this shell's variables: it names the
  // console and the files the credential and the trust came from (never a credential).
  UPLINK_ASSIGN_OR_RETURN(std::string program, ThisProgram());
  std::vector<std::string> argv = {program, "ssh", "proxy", reservation_id, "--grant"};
  const size_t grant_index = argv.size();
  argv.push_back("");
  argv.insert(argv.end(), {"--console", session.api->console()});
  if (!inv.line.globals.ca_file.empty()) {
    UPLINK_ASSIGN_OR_RETURN(std::string ca_file, AbsolutePath(inv, inv.line.globals.ca_file));
    argv.insert(argv.end(), {"--ca-file", ca_file});
  }
  if (!inv.line.globals.api_key_file.empty()) {
    UPLINK_ASSIGN_OR_RETURN(std::string key_file,
                            AbsolutePath(inv, inv.line.globals.api_key_file));
    argv.insert(argv.end(), {"--api-key-file", key_file});
  }
  SshHostBlock block{reservation_id, ready.user, identity, ready.host_key.Authorized(), ""};
  // Checked with a placeholder grant id before a grant is made, so that a path uplink cannot
  // write costs no grant.
  argv[grant_index] = "ssg_0000000000000000";
  UPLINK_ASSIGN_OR_RETURN(block.proxy_command, SshProxyCommand(argv));
  UPLINK_RETURN_IF_ERROR(RenderSshHostConfig(block, paths).status());
  UPLINK_RETURN_IF_ERROR(SshIncludeLine(paths).status());

  UPLINK_ASSIGN_OR_RETURN(ChosenGrant grant, GrantFor(*session.api, reservation_id, key));
  argv[grant_index] = grant.id;
  UPLINK_ASSIGN_OR_RETURN(block.proxy_command, SshProxyCommand(argv));
  UPLINK_ASSIGN_OR_RETURN(std::string host_config, RenderSshHostConfig(block, paths));
  UPLINK_ASSIGN_OR_RETURN(SshInstallResult installed,
                          InstallSshFiles(paths, host_config, known_hosts));
  PrintSetup(inv, reservation_id, paths, identity, ready, grant, installed);
  return Status::Ok();
}

Status RunSshProxy(Invocation& inv) {
  Status status = ProxyOnce(inv);
  if (!status.ok()) {
    // ssh shows the ProxyCommand's stderr; stdout is the SSH stream and gets nothing else.
    inv.err << "uplink ssh proxy: " << status.message() << "\n";
    inv.err.flush();
    inv.success = ExitCodeFor(status);
  }
  return Status::Ok();
}

}  // namespace uplink::cli
