#include "ssh_support.h"

#include "protocol/ssh.h"
#include "protocol/ssh_public_key.h"

namespace uplink::cli::testing {

ScriptedSshConsole::ScriptedSshConsole(FakeConsole& console, std::string host_key,
                                       std::string user)
    : console_(console), host_key_(std::move(host_key)), user_(std::move(user)) {
  const std::string reservation = std::string("/api/v1/reservations/") + kReservation;
  SetReadiness(ReadyReply());
  console_.On("GET", reservation + "/ssh-grants", [this](const net::Request&) {
    std::lock_guard lock(mutex_);
    json::array list;
    for (auto it = grants_.rbegin(); it != grants_.rend(); ++it) list.push_back(*it);
    return net::Response::Json(200, json::serialize(json::object{{"ssh_grants", list}}));
  });
  console_.On("POST", reservation + "/ssh-grants", [this](const net::Request& request) {
    auto body = ParseJson(request.body);
    const std::string text = std::string(body->as_object().at("public_key").as_string());
    auto key = protocol::ParseSshPublicKey(text);
    if (!key.ok()) return ErrorReply(400, "invalid_argument", key.status().message());
    std::lock_guard lock(mutex_);
    json::object grant{{"id", "ssg_00000000000000" + std::to_string(10 + created_)},
                       {"reservation_id", kReservation},
                       {"key_type", key->type},
                       {"public_key", key->Authorized()},
                       {"fingerprint", key->fingerprint},
                       {"comment", key->comment},
                       {"state", "active"},
                       {"created_at", "2027-01-01T10:00:00Z"},
                       {"expires_at", "2027-01-01T12:00:00Z"},
                       {"revoked_at", nullptr}};
    ++created_;
    grants_.push_back(grant);
    return net::Response::Json(201, json::serialize(grant));
  });
}

json::object ScriptedSshConsole::ReadyReply() const {
  auto key = protocol::ParseSshPublicKey(host_key_);
  return json::object{{"state", "ready"},
                      {"reason", ""},
                      {"user", user_},
                      {"host_key", host_key_},
                      {"host_key_fingerprint", key.ok() ? key->fingerprint : ""},
                      {"reported_at", "2027-01-01T10:00:00Z"},
                      {"handover_confirmed_at", "2027-01-01T10:00:01Z"},
                      {"transfer", {{"budget_bytes", 1 << 30}, {"used_bytes", 0}}},
                      {"open_channels", 0}};
}

void ScriptedSshConsole::SetReadiness(const json::object& reply) {
  console_.OnJson("GET", protocol::SshReadinessPath(kReservation), 200, reply);
}

std::vector<json::object> ScriptedSshConsole::grants() const {
  std::lock_guard lock(mutex_);
  return grants_;
}

int ScriptedSshConsole::created() const {
  std::lock_guard lock(mutex_);
  return created_;
}

}  // namespace uplink::cli::testing
