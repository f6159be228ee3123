// The requests of simulated agents, as the real roles send them (docs/protocol.md): the
// inventory role's report, the node role's spool upload of one node sample (gzip, as the
// shipper always sends), and the cluster role's command long poll. Each agent is one
// connection (its own token) with one cluster, one reported node set and one node stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/time.h"

namespace uplink::bench {

struct SimulatedAgent {
  int index = 0;
  std::string connection_id;
  std::string token;                   // agt_...
  std::string cluster_uid;             // what the inventory report binds the connection to
  std::string spool_id;                // 32 hex digits
  std::int64_t sequence = 0;           // of the last upload built
  std::int64_t last_collected_ms = 0;  // collected_at of the last sample built
};

SimulatedAgent MakeAgent(int index, std::string connection_id, std::string token);

// The JSON body (uncompressed) of the agent's next node-stream upload: its next sequence, one
// node sample (eight GPUs, two network interfaces, two disks, three filesystems: about 2 KB)
// collected at `now` (or a millisecond after the last one). Advances the agent.
std::string NodeUploadBody(SimulatedAgent& agent, WallTime now);

class AgentRequests {
 public:
  // `host` is the Host header's value.
  explicit AgentRequests(std::string host) : host_(std::move(host)) {}

  // POST /api/v1/connections with the admin's API key: the agent's connection.
  std::shared_ptr<const std::string> CreateConnection(const std::string& api_key, int index) const;
  // POST /api/v1/agent/inventory: four GPU nodes of eight GPUs.
  std::shared_ptr<const std::string> Inventory(const SimulatedAgent& agent, WallTime now) const;
  // POST /api/v1/agent/uploads: NodeUploadBody, gzip-compressed.
  std::shared_ptr<const std::string> Upload(SimulatedAgent& agent, WallTime now) const;
  // POST /api/v1/agent/commands/poll, held up to 50 s by the console.
  std::shared_ptr<const std::string> Poll(const SimulatedAgent& agent) const;
  // GET /metrics.
  std::shared_ptr<const std::string> Metrics() const;

 private:
  std::string Post(std::string_view path, std::string_view authorization,
                   std::string_view extra_headers, std::string_view body) const;

  std::string host_;
};

}  // namespace uplink::bench
