// Where the simulated kubelet runs containers. Three runtimes:
//   simulated  nothing runs; containers are running until stopped (the default, for the API
//              alone and for large clusters);
//   process    each container is a local process in a directory of its own per pod
//              (command, args, env, working directory; exit codes become container statuses);
//   podman     each container is a real OCI container (podman with runc) with the pod's
//              security context, limits, volumes and network isolation.
// Exec runs a local process in every runtime that can exec: the command itself for
// `process`, `podman exec` for `podman`.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::kubesim {

struct ContainerStart {
  json::object pod;        // the whole pod as stored (metadata, spec)
  json::object container;  // one entry of spec.containers
  // Whether a NetworkPolicy of the pod's namespace denies the pod all egress (it selects the
  // pod, lists Egress and allows nothing): the pod then gets no network at all.
  bool egress_denied = false;
};

struct ContainerExit {
  int exit_code = 0;
  std::string reason;  // "Completed", "Error", "OOMKilled"
  WallTime finished_at;
};

// A local process that is the far end of an exec session.
struct ExecCommand {
  std::vector<std::string> argv;  // argv[0] is a path
  std::vector<std::string> environment;
  std::string working_directory;
};

class PodRuntime {
 public:
  virtual ~PodRuntime() = default;

  virtual std::string_view name() const = 0;

  // Starts one container and returns its id, or why it cannot start: FailedPrecondition for a
  // configuration it refuses (the kubelet's CreateContainerConfigError), Unavailable for an
  // image it does not have (ErrImagePull), anything else for a start that failed (StartError).
  // May block; called off the kubelet's loop.
  virtual Result<std::string> Start(const ContainerStart& start) = 0;

  // The container's exit, once it has exited; never blocks.
  virtual std::optional<ContainerExit> Exited(const std::string& id) = 0;

  // SIGTERM now and SIGKILL once `grace` has passed. May block until it has stopped.
  virtual void Stop(const std::string& id, std::chrono::seconds grace) = 0;

  // Frees everything of the pod (containers, volumes, directories) once its containers are
  // stopped. May block.
  virtual void RemovePod(const std::string& pod_uid) = 0;

  // How to run `command` in a running container. FailedPrecondition when this runtime cannot.
  virtual Result<ExecCommand> Exec(const std::string& id, const std::vector<std::string>& command,
                                   bool stdin) = 0;

  // containerStatuses[].containerID: "podman://<id>".
  virtual std::string ContainerId(const std::string& id) const = 0;
  // containerStatuses[].imageID for the image a container of this runtime runs.
  virtual std::string ImageId(const std::string& image) = 0;
};

struct RuntimeOptions {
  std::string kind = "simulated";  // simulated, process or podman
  // process: where pod directories are made (created if missing).
  std::string state_directory;
  // podman: the podman binary, and its own storage when set (--root/--runroot).
  std::string podman = "/usr/bin/podman";
  std::string podman_storage;
};

Result<std::unique_ptr<PodRuntime>> MakeRuntime(const RuntimeOptions& options);

}  // namespace uplink::kubesim
