// What the workspace end-to-end tests share, whichever runtime runs the pods: uplink-kubesim
// with the guards the chart renders from the console's own execution.json, a real
// uplink-console, the inventory agent and `uplink-agent workspace`, and the steps a supplier,
// an admin and a user take through the console's API.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cluster.h"
#include "workspace_cluster.h"

namespace uplink::e2e {

// The string at `field` of a JSON object; "" when absent or not a string.
std::string String(const json::value& object, const char* field);

class WorkspaceFlow : public ::testing::Test {
 protected:
  // kubesim (two nodes of 4 GPUs) on `runtime`, and a console that pins `image`.
  void StartWith(const std::string& runtime, const std::string& image);
  void TearDown() override;

  // An offer of `gpus` GPUs, its inventory reported by the real agent: `connected`. Its id
  // and inventory token.
  std::pair<std::string, std::string> ConnectedOffer(int gpus);
  // The admin's review approving gpu-node-0001; every check true unless `all_checks` is false.
  net::Response Review(const std::string& offer_id, bool all_checks);
  net::Response Reserve(const std::string& offer_id, int gpus);

  // What a supplier and an admin do before anyone can reserve: a connected offer of 8 GPUs,
  // reviewed, its execution credential and execution.json issued, and the controller started
  // with them against kubesim.
  struct Qualified {
    std::string offer_id;
    std::string inventory_token;  // agt_
    std::string credential;       // exe_
  };
  void QualifyAndStartController(Qualified* qualified);
  // A reservation of `gpus` GPUs, waited for until `running`, its pod running on the approved
  // node with the pinned image and the GPUs. Its id and pod name.
  void ReserveUntilRunning(const std::string& offer_id, int gpus, std::string* id, std::string* pod);
  // Posts a command and waits for its end through the API's long poll.
  json::value RunCommand(const std::string& reservation, const std::string& kind,
                         const std::string& code);
  // Stops the reservation: `completed` only once the pod is gone, every transition stored.
  void StopUntilCompleted(const std::string& id, const std::string& pod);

  // What the review and the execution settings say; tests change them before qualifying.
  std::string memory_per_gpu_ = "256Mi";
  std::string transfer_budget_ = "1Ti";
  bool ssh_enabled_ = false;
  // Added to the console's and (with SSH on, after --ssh) the controller's flags.
  std::vector<std::string> console_flags_;
  std::vector<std::string> controller_flags_;

  // The console's serve flags StartWith used, for a restart.
  std::vector<std::string> ConsoleFlags() const;

  Deployment d_;
  std::string image_;
  std::unique_ptr<agent::workspace::testing::WorkspaceCluster> cluster_;
};

}  // namespace uplink::e2e
