#include "bench/load/agents.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/gzip.h"

namespace uplink::bench {
namespace {

constexpr std::string_view kUserAgent = "uplink-agent/" UPLINK_VERSION " (load test)";

std::string NodeName(const SimulatedAgent& agent, int node) {
  char name[64];
  std::snprintf(name, sizeof(name), "load-%05d-gpu-%d", agent.index, node);
  return name;
}

// Appends printf-formatted text.
template <typename... Args>
void Append(std::string& out, const char* format, Args... args) {
  char buffer[1024];
  const int n = std::snprintf(buffer, sizeof(buffer), format, args...);
  out.append(buffer, static_cast<size_t>(std::min<int>(n, sizeof(buffer) - 1)));
}

// A node sample whose counters grow with the sequence, so that successive samples of one
// node read as a plausible node.
std::string NodeSample(const SimulatedAgent& agent, WallTime collected_at) {
  const auto s = static_cast<double>(agent.sequence);
  std::string payload;
  payload.reserve(2600);
  Append(payload,
         R"({"kind":"node_sample","version":1,"node":"%s","collected_at":"%s",)"
         R"("boot_time":1764400000,"cpu":{"count":64,"seconds":{"user":%.2f,"nice":0.2,)"
         R"("system":%.2f,"idle":%.2f,"iowait":%.2f,"irq":0,"softirq":%.2f,"steal":0}},)",
         NodeName(agent, 0).c_str(), FormatRfc3339Millis(collected_at).c_str(), 81234.5 + s * 900,
         9120.3 + s * 100, 7712345.9 + s * 960, 120.4 + s, 310.7 + s * 3);
  Append(payload,
         R"("memory":{"total_bytes":540000000000,"available_bytes":%.0f,)"
         R"("free_bytes":400000000000,"buffers_bytes":1000000,"cached_bytes":90000000000,)"
         R"("swap_total_bytes":0,"swap_free_bytes":0},)"
         R"("load":{"load1":%.2f,"load5":0.41,"load15":0.33},"uptime_seconds":%.2f,)"
         R"("pressure":{"cpu_some_seconds":%.2f,"memory_some_seconds":0.4,)"
         R"("memory_full_seconds":0.1,"io_some_seconds":3.2,"io_full_seconds":2.9},)",
         500000000000.0 - s * 1000, 0.52 + static_cast<double>(agent.sequence % 10) / 10,
         123456.78 + s * 30, 12.5 + s / 10);
  payload += R"("network":[)";
  for (int i = 0; i < 2; ++i) {
    Append(payload,
           R"(%s{"device":"eth%d","receive_bytes":%.0f,"transmit_bytes":%.0f,)"
           R"("receive_packets":%.0f,"transmit_packets":%.0f,"receive_errs":0,)"
           R"("transmit_errs":0,"receive_drop":0,"transmit_drop":0})",
           i == 0 ? "" : ",", i, 1e12 + s * 3e8, 8e11 + s * 2e8, 1e9 + s * 2e5, 8e8 + s * 1e5);
  }
  payload += R"(],"disks":[)";
  for (int i = 0; i < 2; ++i) {
    Append(payload,
           R"(%s{"device":"nvme%dn1","read_bytes":%.0f,"written_bytes":%.0f,)"
           R"("reads_completed":%.0f,"writes_completed":%.0f,"io_time_seconds":%.3f})",
           i == 0 ? "" : ",", i, 5e11 + s * 1e8, 3e11 + s * 5e7, 1e8 + s * 1e4, 6e7 + s * 5e3,
           1000.5 + s * 2);
  }
  payload += R"(],"filesystems":[)";
  const char* mounts[] = {"/", "/var/lib/kubelet", "/data"};
  for (int i = 0; i < 3; ++i) {
    Append(payload,
           R"(%s{"mountpoint":"%s","device":"/dev/nvme%dn1p1","fstype":"ext4",)"
           R"("size_bytes":1000000000000,"avail_bytes":%.0f,"free_bytes":%.0f,)"
           R"("files":65000000,"files_free":64000000,"readonly":false})",
           i == 0 ? "" : ",", mounts[i], i, 5e11 - s * 1e5, 5.5e11 - s * 1e5);
  }
  payload += R"(],"gpu_source":"nvml","gpus":[)";
  for (int i = 0; i < 8; ++i) {
    Append(payload,
           R"(%s{"index":%d,"uuid":"GPU-%08x-5d1f-4c2e-9a3b-%012x","name":"NVIDIA H100 80GB HBM3",)"
           R"("utilization_percent":%d,"memory_utilization_percent":41,)"
           R"("memory_used_bytes":61203283968,"memory_total_bytes":85520809984,)"
           R"("temperature_celsius":%d,"power_watts":%.1f,"power_limit_watts":700,)"
           R"("sm_clock_mhz":1980,"memory_clock_mhz":2619,"ecc_corrected":0,)"
           R"("ecc_uncorrected":0,"throttle_reasons":0,"pcie_generation":5,"pcie_width":16,)"
           R"("mig_mode":"disabled","mig_instances":0,"processes":1})",
           i == 0 ? "" : ",", i, static_cast<unsigned>(agent.index), static_cast<unsigned>(i),
           static_cast<int>((agent.sequence * 7 + i * 13) % 101), 55 + i,
           400.0 + static_cast<double>((agent.sequence + i) % 300));
  }
  payload += R"(],"gaps":[]})";
  return payload;
}

}  // namespace

SimulatedAgent MakeAgent(int index, std::string connection_id, std::string token) {
  SimulatedAgent agent;
  agent.index = index;
  agent.connection_id = std::move(connection_id);
  agent.token = std::move(token);
  char text[64];
  std::snprintf(text, sizeof(text), "9f2c4e0a-load-%05d-b7d4-1c3a8e6f0b1c", index);
  agent.cluster_uid = text;
  std::snprintf(text, sizeof(text), "%032x", static_cast<unsigned>(index) + 0x10000000u);
  agent.spool_id = text;
  return agent;
}

std::string NodeUploadBody(SimulatedAgent& agent, WallTime now) {
  std::int64_t at_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  at_ms = std::max(at_ms, agent.last_collected_ms + 1);
  agent.last_collected_ms = at_ms;
  ++agent.sequence;
  const WallTime collected_at{std::chrono::milliseconds(at_ms)};
  const std::string sequence = std::to_string(agent.sequence);
  std::string body;
  body.reserve(3000);
  Append(body,
         R"({"agent_version":"%s","agent_instance":"%s","stream":"node/%s","spool_id":"%s",)"
         R"("first_sequence":%s,"last_sequence":%s,"losses":{"dropped":{"records":0,"bytes":0},)"
         R"("corrupt":{"records":0,"bytes":0},"rejected":{"records":0,"bytes":0}},"records":[)"
         R"({"sequence":%s,"appended_at":"%s","payload":)",
         UPLINK_VERSION, NodeName(agent, 0).c_str(), NodeName(agent, 0).c_str(),
         agent.spool_id.c_str(), sequence.c_str(), sequence.c_str(), sequence.c_str(),
         FormatRfc3339Millis(collected_at).c_str());
  body += NodeSample(agent, collected_at);
  body += "}]}";
  return body;
}

std::string AgentRequests::Post(std::string_view path, std::string_view authorization,
                                std::string_view extra_headers, std::string_view body) const {
  std::string message;
  message.reserve(256 + body.size());
  message += "POST ";
  message += path;
  message += " HTTP/1.1\r\nHost: ";
  message += host_;
  message += "\r\nAuthorization: Bearer ";
  message += authorization;
  message += "\r\nUser-Agent: ";
  message += kUserAgent;
  message += "\r\nContent-Type: application/json\r\n";
  message += extra_headers;
  message += "Content-Length: ";
  message += std::to_string(body.size());
  message += "\r\n\r\n";
  message += body;
  return message;
}

std::shared_ptr<const std::string> AgentRequests::CreateConnection(const std::string& api_key,
                                                                   int index) const {
  char body[160];
  std::snprintf(body, sizeof(body),
                R"({"agent_name":"load-%05d","cluster_name":"load-cluster-%05d"})", index, index);
  return std::make_shared<const std::string>(Post("/api/v1/connections", api_key, "", body));
}

std::shared_ptr<const std::string> AgentRequests::Inventory(const SimulatedAgent& agent,
                                                            WallTime now) const {
  std::string body;
  Append(body,
         R"({"agent_version":"%s","agent_instance":"uplink-inventory-%05d","cluster_uid":"%s",)"
         R"("selector":"nvidia.com/gpu.present=true","collected_at":"%s","nodes":[)",
         UPLINK_VERSION, agent.index, agent.cluster_uid.c_str(), FormatRfc3339(now).c_str());
  for (int node = 0; node < 4; ++node) {
    Append(body,
           R"(%s{"name":"%s","uid":"%s-%d","ready":true,"unschedulable":false,)"
           R"("gpu_resource":"nvidia.com/gpu","gpu_capacity":8,"gpu_allocatable":8,)"
           R"("gpu_product":"NVIDIA-H100-80GB-HBM3"})",
           node == 0 ? "" : ",", NodeName(agent, node).c_str(), agent.cluster_uid.c_str(), node);
  }
  body += "]}";
  return std::make_shared<const std::string>(
      Post("/api/v1/agent/inventory", agent.token,
           "Uplink-Cluster-UID: " + agent.cluster_uid + "\r\n", body));
}

std::shared_ptr<const std::string> AgentRequests::Upload(SimulatedAgent& agent,
                                                         WallTime now) const {
  auto compressed = GzipCompress(NodeUploadBody(agent, now));
  if (!compressed.ok()) {
    std::fprintf(stderr, "gzip failed: %s\n", compressed.status().ToString().c_str());
    std::abort();
  }
  return std::make_shared<const std::string>(Post(
      "/api/v1/agent/uploads", agent.token,
      "Content-Encoding: gzip\r\nUplink-Cluster-UID: " + agent.cluster_uid + "\r\n", *compressed));
}

std::shared_ptr<const std::string> AgentRequests::Poll(const SimulatedAgent& agent) const {
  char body[128];
  std::snprintf(body, sizeof(body),
                R"({"agent_instance":"uplink-cluster-%05d","wait_seconds":50,"max_commands":4})",
                agent.index);
  return std::make_shared<const std::string>(
      Post("/api/v1/agent/commands/poll", agent.token,
           "Uplink-Cluster-UID: " + agent.cluster_uid + "\r\n", body));
}

std::shared_ptr<const std::string> AgentRequests::Metrics() const {
  return std::make_shared<const std::string>("GET /metrics HTTP/1.1\r\nHost: " + host_ +
                                             "\r\n\r\n");
}

}  // namespace uplink::bench
