// uplink-kubesim: serves a simulated Kubernetes API over TLS for kubectl and the uplink agent.
//
//   uplink-kubesim --listen 127.0.0.1:0 --nodes 4 --gpus-per-node 8 --workloads
//                  --objects extra.yaml --kubeconfig-out /tmp/kubeconfig
//                  [--token-auth-file tokens.csv --authorization-mode RBAC]
//                  [--runtime simulated|process|podman --pod-start-delay 1s]
//
// Writes a kubeconfig (CA data, server URL with the bound port, the admin bearer token), logs
// one "ready" line with the URL, and serves until SIGINT or SIGTERM.
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "common/files.h"
#include "common/flags.h"
#include "common/log.h"
#include "kubesim/api.h"
#include "kubesim/authn.h"
#include "kubesim/cluster.h"
#include "kubesim/kubeconfig.h"
#include "kubesim/kubelet.h"
#include "kubesim/runtime.h"
#include "kubesim/store.h"
#include "net/certs.h"
#include "net/server.h"

namespace uplink::kubesim {
namespace {

const log::Logger kLog("kubesim");

struct Options {
  std::string listen = "127.0.0.1:0";
  std::int64_t nodes = 2;
  std::int64_t gpus_per_node = 8;
  std::int64_t cpu_nodes = 1;
  std::vector<std::string> object_files;
  std::string kubeconfig_out;
  std::string server_version = "v1.32.4";
  std::string token_file;
  std::string token_auth_file;
  std::string authorization_mode = "AlwaysAllow";
  bool workloads = false;
  std::string runtime = "simulated";
  std::chrono::milliseconds pod_start_delay{1000};
  std::string state_dir;
  std::string podman_storage;
  std::string log_level = "info";
  std::string help;  // set when --help asked for it: print it and exit
};

constexpr std::string_view kAbout =
    "uplink-kubesim serves a simulated Kubernetes API over TLS for real kubectl and the uplink\n"
    "agent: generated GPU nodes, optionally a GPU cluster's workloads, discovery, OpenAPI v3,\n"
    "server-side tables, pods/log, metrics.k8s.io and, with --authorization-mode RBAC, real\n"
    "RBAC for the identities of --token-auth-file. Pods created through the API are scheduled\n"
    "and run by --runtime (simulated, local processes, or podman containers), and pods/exec\n"
    "serves kubectl exec over WebSocket. It writes a kubeconfig for the admin (system:masters)\n"
    "and serves until SIGINT or SIGTERM.\n\n";

// FlagSet keeps the last value of a flag; --objects may be given several times, so its
// occurrences are taken out before the rest is parsed.
std::vector<std::string> TakeRepeatedFlag(std::vector<std::string>& args, std::string_view name,
                                          Status& error) {
  std::vector<std::string> values;
  std::vector<std::string> rest;
  std::string flag = "--" + std::string(name);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (args[i] == flag) {
      if (i + 1 >= args.size()) {
        error = InvalidArgumentError(flag + " needs a value (a JSON or YAML file)");
        return values;
      }
      values.push_back(args[++i]);
    } else if (args[i].starts_with(flag + "=")) {
      values.push_back(args[i].substr(flag.size() + 1));
    } else {
      rest.push_back(args[i]);
    }
  }
  args = std::move(rest);
  return values;
}

Result<Options> ParseOptions(int argc, char** argv) {
  Options options;
  std::vector<std::string> args(argv + 1, argv + argc);
  Status error;
  options.object_files = TakeRepeatedFlag(args, "objects", error);
  UPLINK_RETURN_IF_ERROR(error);
  std::string env_objects;
  FlagSet flags("uplink-kubesim");
  flags.String("listen", &options.listen, "HOST:PORT to serve on; port 0 picks a free port");
  flags.Int("nodes", &options.nodes, "number of GPU nodes (gpu-node-0001, ...)");
  flags.Int("gpus-per-node", &options.gpus_per_node, "GPUs on each GPU node (1-16)");
  flags.Int("cpu-nodes", &options.cpu_nodes,
            "nodes without GPUs; the first is the control plane");
  flags.String("objects", &env_objects,
               "JSON or YAML file of objects to load (a List, objects, or YAML documents; "
               "kubesim.uplink.dev/v1 ContainerLog documents give containers their logs); may "
               "be repeated");
  flags.String("kubeconfig-out", &options.kubeconfig_out, "where to write the kubeconfig (0600)");
  flags.String("server-version", &options.server_version,
               "version /version and the nodes report, e.g. v1.32.4 or 1.35.2 (kubectl picks its "
               "build by it; from 1.35 a WebSocket exec needs create on pods/exec too)");
  flags.String("token-file", &options.token_file,
               "file holding the admin bearer token, a member of system:masters (default: a "
               "random token)");
  flags.String("token-auth-file", &options.token_auth_file,
               "CSV file of further identities, kube-apiserver's format: token,user,uid[,\"group1,"
               "group2\"]; a user system:serviceaccount:NS:NAME is that service account");
  flags.String("authorization-mode", &options.authorization_mode,
               "AlwaysAllow (every authenticated request is allowed) or RBAC (requests outside "
               "system:masters are decided by the stored Roles, ClusterRoles and bindings)");
  flags.Bool("workloads", &options.workloads,
             "load the simulated GPU cluster's workloads: namespaces, pods (one crash-looping "
             "with logs), a Deployment, a StatefulSet, CoreDNS, events; needs --nodes 2 or more "
             "and --cpu-nodes 1 or more");
  flags.String("runtime", &options.runtime,
               "where created pods run: simulated (nothing runs; containers run until stopped), "
               "process (each container a local process in a directory per pod) or podman (each "
               "container a real OCI container through podman and runc)");
  flags.Duration("pod-start-delay", &options.pod_start_delay,
                 "from a pod's binding to its containers starting, as an image pull and sandbox "
                 "take on a real node");
  flags.String("state-dir", &options.state_dir,
               "--runtime process: where pod directories go (default: a temporary directory "
               "removed on exit)");
  flags.String("podman-storage", &options.podman_storage,
               "--runtime podman: a podman storage of its own (DIR/root and DIR/run) instead of "
               "the machine's");
  flags.String("log-level", &options.log_level, "debug, info, warn or error");
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h") {
      options.help = std::string(kAbout) + flags.Usage();
      return options;
    }
  }
  UPLINK_RETURN_IF_ERROR(flags.Parse(args));
  if (Status level = log::SetMinLevel(options.log_level); !level.ok()) {
    return InvalidArgumentError("--log-level: " + level.message());
  }
  if (!flags.positional().empty()) {
    return InvalidArgumentError("unexpected argument \"" + flags.positional().front() + "\"\n" +
                                flags.Usage());
  }
  if (options.object_files.empty() && !env_objects.empty()) {
    options.object_files.push_back(env_objects);
  }
  if (options.kubeconfig_out.empty()) {
    return InvalidArgumentError("--kubeconfig-out is required: where to write the kubeconfig");
  }
  if (!options.server_version.empty() && options.server_version.front() != 'v') {
    options.server_version = "v" + options.server_version;
  }
  UPLINK_RETURN_IF_ERROR(ParseServerVersion(options.server_version).status());
  if (options.authorization_mode != "AlwaysAllow" && options.authorization_mode != "RBAC") {
    return InvalidArgumentError("--authorization-mode must be AlwaysAllow or RBAC, not \"" +
                                options.authorization_mode.substr(0, 64) + "\"");
  }
  return options;
}

Result<Secret> LoadToken(const std::string& token_file) {
  if (token_file.empty()) return NewToken("kubesim_");
  UPLINK_ASSIGN_OR_RETURN(std::string text, ReadFileBounded(token_file, 4096));
  std::string_view token = TrimWhitespace(text);
  if (token.empty()) return InvalidArgumentError("token file " + token_file + " is empty");
  for (char c : token) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) {
      return InvalidArgumentError("token file " + token_file +
                                  " holds characters not allowed in a bearer token");
    }
  }
  return Secret(std::string(token));
}

Result<std::vector<TokenUser>> LoadTokenUsers(const std::string& path) {
  if (path.empty()) return std::vector<TokenUser>();
  UPLINK_ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, kMaxTokenFileBytes));
  Result<std::vector<TokenUser>> users = ParseTokenAuthFile(text);
  if (!users.ok()) return users.status().WithContext("--token-auth-file " + path);
  return users;
}

// Every node a workload pod runs on must exist, or `kubectl describe node` and `top` would
// disagree with the pods.
Status CheckWorkloadNodes(const std::vector<json::object>& workloads,
                          const std::vector<json::object>& nodes) {
  for (const json::object& object : workloads) {
    const json::value* spec = object.if_contains("spec");
    const json::value* node_name =
        spec && spec->is_object() ? spec->get_object().if_contains("nodeName") : nullptr;
    if (!node_name || !node_name->is_string()) continue;
    bool exists = std::any_of(nodes.begin(), nodes.end(), [&](const json::object& node) {
      return node.at("metadata").at("name") == *node_name;
    });
    if (!exists) {
      return InvalidArgumentError("--workloads places pods on " +
                                  std::string(node_name->get_string()) +
                                  ", which this cluster shape does not have: use --nodes 2 or "
                                  "more and --cpu-nodes 1 or more");
    }
  }
  return Status::Ok();
}

Status LoadObjects(ObjectStore& store, std::vector<json::object> objects,
                   const std::vector<std::string>& files) {
  for (const std::string& file : files) {
    UPLINK_ASSIGN_OR_RETURN(std::string text, ReadFileBounded(file, 64 << 20));
    Result<std::vector<json::object>> parsed = ParseObjects(text);
    if (!parsed.ok()) return parsed.status().WithContext("loading " + file);
    for (json::object& object : *parsed) objects.push_back(std::move(object));
  }
  // Namespaces first, so objects in them can be stored whatever the file order.
  std::stable_partition(objects.begin(), objects.end(), [](const json::object& object) {
    const json::value* kind = object.if_contains("kind");
    return kind && kind->is_string() && kind->get_string() == "Namespace";
  });
  for (json::object& object : objects) {
    Result<json::object> stored = store.Put(std::move(object));
    if (!stored.ok()) return stored.status().WithContext("loading --objects");
  }
  return Status::Ok();
}

// The host kubectl should dial: the listen host, or loopback for a wildcard address.
std::string UrlHost(const std::string& host) {
  if (host.empty() || host == "0.0.0.0") return "127.0.0.1";
  if (host == "::") return "[::1]";
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

Status Run(int argc, char** argv) {
  UPLINK_ASSIGN_OR_RETURN(Options options, ParseOptions(argc, argv));
  if (!options.help.empty()) {
    std::cout << options.help;
    return Status::Ok();
  }
  ClusterShape shape{static_cast<int>(options.nodes), static_cast<int>(options.gpus_per_node),
                     static_cast<int>(options.cpu_nodes), options.server_version};
  if (options.nodes > INT32_MAX || options.gpus_per_node > INT32_MAX ||
      options.cpu_nodes > INT32_MAX) {
    return InvalidArgumentError("--nodes, --gpus-per-node and --cpu-nodes are far too large");
  }
  UPLINK_RETURN_IF_ERROR(ValidateClusterShape(shape));
  std::string host;
  std::uint16_t port = 0;
  UPLINK_RETURN_IF_ERROR(net::SplitHostPort(options.listen, host, port));
  UPLINK_ASSIGN_OR_RETURN(Secret token, LoadToken(options.token_file));
  UPLINK_ASSIGN_OR_RETURN(std::vector<TokenUser> users, LoadTokenUsers(options.token_auth_file));
  UPLINK_RETURN_IF_ERROR(CheckAdminTokenUnique(token, users));

  WallTime now = SystemClock().Now();
  ObjectStore store(SystemClock());
  for (json::object& object : DefaultNamespaces()) UPLINK_RETURN_IF_ERROR(store.Put(object).status());
  // With workloads the cluster has been up for a while: its nodes predate its pods.
  WallTime nodes_created = options.workloads ? now - std::chrono::hours(24 * 15) : now;
  std::vector<json::object> nodes = GenerateNodes(shape, nodes_created);
  for (json::object& node : nodes) {
    UPLINK_ASSIGN_OR_RETURN(json::object stored, store.Put(node));
    UPLINK_RETURN_IF_ERROR(store.Put(NodeLease(stored, now)).status());
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<json::object> initial, BootstrapRbacObjects());
  for (json::object& priority_class : BuiltInPriorityClasses()) {
    initial.push_back(std::move(priority_class));
  }
  if (options.workloads) {
    UPLINK_ASSIGN_OR_RETURN(std::vector<json::object> workloads, WorkloadObjects(now));
    UPLINK_RETURN_IF_ERROR(CheckWorkloadNodes(workloads, nodes));
    for (json::object& object : workloads) initial.push_back(std::move(object));
  }
  UPLINK_RETURN_IF_ERROR(LoadObjects(store, std::move(initial), options.object_files));

  UPLINK_ASSIGN_OR_RETURN(net::CertificateAuthority ca,
                          net::CreateCertificateAuthority("uplink-kubesim CA", 365));
  std::vector<std::string> names = {"127.0.0.1", "localhost", "::1"};
  if (std::find(names.begin(), names.end(), host) == names.end() && !host.empty() &&
      host != "0.0.0.0" && host != "::") {
    names.push_back(host);
  }
  UPLINK_ASSIGN_OR_RETURN(net::IssuedCertificate certificate,
                          net::IssueServerCertificate(ca, names, 365));

  // Block the stop signals before any thread starts so only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // A temporary state directory lives as long as this process.
  struct RemoveOnExit {
    ~RemoveOnExit() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove_all(path, ignored);
    }
    std::string path;
  } temporary_state;
  if (options.runtime == "process" && options.state_dir.empty()) {
    std::string pattern = std::filesystem::temp_directory_path().string() + "/uplink-kubesim-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return InternalError("creating a state directory under " +
                           std::filesystem::temp_directory_path().string());
    }
    options.state_dir = temporary_state.path = pattern;
  }
  RuntimeOptions runtime_options;
  runtime_options.kind = options.runtime;
  runtime_options.state_directory = options.state_dir;
  runtime_options.podman_storage = options.podman_storage;
  UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<PodRuntime> runtime, MakeRuntime(runtime_options));
  KubeletOptions kubelet_options;
  kubelet_options.pod_start_delay = options.pod_start_delay;
  Kubelet kubelet(store, SystemClock(), *runtime, kubelet_options);

  ApiOptions api_options{token, options.server_version};
  api_options.users = std::move(users);
  api_options.rbac = options.authorization_mode == "RBAC";
  api_options.kubelet = &kubelet;
  ApiServer api(api_options, store, SystemClock());
  net::ServerOptions server_options;
  server_options.listen = options.listen;
  // Room above the API's limit, so that a body just over it reaches the API and gets the
  // real server's 413 Status rather than the transport's bare refusal.
  server_options.max_body_bytes = 2 * api_options.max_body_bytes;
  server_options.tls = net::TlsServerConfig{certificate.cert_pem + ca.cert_pem, certificate.key_pem};
  server_options.threads = 4;
  server_options.server_header = "uplink-kubesim";
  UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<net::HttpServer> server,
                          net::HttpServer::Start(server_options, api.AsHandler()));

  std::string url = "https://" + UrlHost(host) + ":" + std::to_string(server->port());
  Status written = WriteFileAtomic(options.kubeconfig_out, RenderKubeconfig(url, ca.cert_pem, token), 0600);
  if (!written.ok()) {
    server->Stop();
    return written.WithContext("writing --kubeconfig-out");
  }
  kubelet.Start();
  kLog.Info("ready", {{"url", url},
                      {"kubeconfig", options.kubeconfig_out},
                      {"gpu_nodes", options.nodes},
                      {"cpu_nodes", options.cpu_nodes},
                      {"server_version", options.server_version},
                      {"authorization_mode", options.authorization_mode},
                      {"runtime", options.runtime},
                      {"workloads", options.workloads}});
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  kLog.Info("stopping", {{"signal", signal_number}});
  server->Stop();
  kubelet.Stop();  // every container it started goes with it
  return Status::Ok();
}

}  // namespace
}  // namespace uplink::kubesim

int main(int argc, char** argv) {
  uplink::Status status = uplink::kubesim::Run(argc, argv);
  if (!status.ok()) {
    uplink::kubesim::kLog.Error("uplink-kubesim failed", {{"error", status}});
    std::cerr << "uplink-kubesim: " << status.message() << "\n";
    return 2;
  }
  return 0;
}
