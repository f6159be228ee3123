// The fixed parts of the agent API (docs/protocol.md), written once for the agent, which
// sends, and the console, which receives: the paths, the headers, the names and ids a call
// carries, and the size limits both sides keep. The messages themselves are in the headers
// beside this one (inventory.h, upload.h, commands.h, ...), each with its encoder and decoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace uplink::protocol {

// ---- paths ----------------------------------------------------------------------------------
inline constexpr std::string_view kWhoAmIPath = "/api/v1/agent/whoami";
inline constexpr std::string_view kInventoryPath = "/api/v1/agent/inventory";
inline constexpr std::string_view kUploadsPath = "/api/v1/agent/uploads";
inline constexpr std::string_view kCommandPollPath = "/api/v1/agent/commands/poll";
// POST kCommandsPathPrefix + id + kCommandResultSuffix: one command's result.
inline constexpr std::string_view kCommandsPathPrefix = "/api/v1/agent/commands/";
inline constexpr std::string_view kCommandResultSuffix = "/result";
// The route pattern of the command result, as the console's router spells it.
inline constexpr std::string_view kCommandResultRoute = "/api/v1/agent/commands/{id}/result";
std::string CommandResultPath(std::string_view command_id);

// ---- headers --------------------------------------------------------------------------------
// The cluster's identity on every call (docs/protocol.md, "Cluster identity"): the
// metadata.uid of the kube-system Namespace, in a header, so that the same check covers every
// route without touching any body.
inline constexpr std::string_view kClusterUidHeader = "Uplink-Cluster-UID";
inline constexpr size_t kMaxClusterUidBytes = 128;
// 1-128 printable ASCII characters without spaces: what a Kubernetes UID is, and what a
// header can carry unchanged.
bool IsClusterUid(std::string_view uid);

// "uplink-agent/<version> (<role>)": the agent's User-Agent.
std::string AgentUserAgent(std::string_view version, std::string_view role);
// "0.1.0" from "uplink-agent/0.1.0 (cluster)"; empty for anything else, so that what is shown
// to users holds only what a version can (1-64 characters of [A-Za-z0-9.+_-]).
std::string_view AgentVersionFromUserAgent(std::optional<std::string_view> user_agent);

// ---- bodies ---------------------------------------------------------------------------------
// The agent compresses bodies above this with gzip (uploads and command results always).
inline constexpr size_t kGzipThreshold = 64 * 1024;
// What the agent reads of a reply.
inline constexpr size_t kMaxReplyBytes = 1 << 20;

// ---- names and ids --------------------------------------------------------------------------
// The streams of the roles that upload: "<role>/<instance>".
inline constexpr std::string_view kNodeStreamPrefix = "node/";                // + the node's name
inline constexpr std::string_view kClusterStreamPrefix = "cluster/";          // + the pod's name
inline constexpr std::string_view kExperimentsStreamPrefix = "experiments/";  // + the pod's name
inline constexpr size_t kMaxStreamBytes = 253;
// 1-253 characters of [A-Za-z0-9._/-], as "node/gpu-node-0001".
bool IsStreamName(std::string_view name);

// An agent's instance (its pod's name) and version as calls carry them.
inline constexpr size_t kMaxInstanceBytes = 253;
inline constexpr size_t kMaxAgentVersionBytes = 256;

// A spool's identity: 32 lower-case hexadecimal digits.
inline constexpr size_t kSpoolIdChars = 32;
bool IsSpoolId(std::string_view id);

// A console command's id as the console mints it: "cmd_" and 16 lower-case hexadecimal
// digits. Safe in a URL path; the agent skips a command whose id is anything else, and the
// console answers 404 to a result posted for one.
inline constexpr std::string_view kCommandIdPrefix = "cmd_";
inline constexpr size_t kCommandIdHexDigits = 16;
bool IsCommandId(std::string_view id);
// A new command id, from 64 random bits.
std::string NewCommandId();

// The form of every id the console mints: `prefix` and `hex_digits` lower-case hexadecimal
// digits; and a new one, from hex_digits × 4 random bits.
bool IsPrefixedHexId(std::string_view id, std::string_view prefix, size_t hex_digits);
std::string NewPrefixedHexId(std::string_view prefix, size_t hex_digits);

// The longest RFC 3339 time with nanoseconds and an offset is 35 bytes; a little headroom.
inline constexpr size_t kMaxTimeBytes = 64;

}  // namespace uplink::protocol
