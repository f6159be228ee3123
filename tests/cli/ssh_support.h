// What the SSH command tests share: real keys from ssh-keygen, and a scripted console that
// answers the SSH readiness and grant calls as the real one does.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "common/json.h"
#include "support/sshd.h"

namespace uplink::cli::testing {

inline constexpr char kReservation[] = "res_0123456789abcdef";
inline constexpr char kApiKey[] = "uk_sshTestKey0123456789";

using uplink::testing::MakeSshKeyPair;

// The grants of one reservation, kept as the console keeps them: GET lists, POST adds (and
// answers the grant), DELETE revokes.
class ScriptedSshConsole {
 public:
  ScriptedSshConsole(FakeConsole& console, std::string host_key, std::string user = "workspace");

  // Replaces the readiness reply.
  void SetReadiness(const json::object& reply);
  json::object ReadyReply() const;
  std::vector<json::object> grants() const;
  // How many grants were created.
  int created() const;

 private:
  FakeConsole& console_;
  std::string host_key_;
  std::string user_;
  mutable std::mutex mutex_;
  std::vector<json::object> grants_;
  int created_ = 0;
};

}  // namespace uplink::cli::testing
