// Private to the runtimes (runtime.cc, process_runtime.cc, podman_runtime.cc).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kubesim/runtime.h"

namespace uplink::kubesim {

std::unique_ptr<PodRuntime> MakeSimulatedRuntime();
Result<std::unique_ptr<PodRuntime>> MakeProcessRuntime(const std::string& state_directory);
Result<std::unique_ptr<PodRuntime>> MakePodmanRuntime(const std::string& podman,
                                                      const std::string& storage);

// The container's environment from its env list: literal values and the downward API fields
// a kubelet resolves (metadata.name, metadata.namespace, metadata.uid, spec.nodeName,
// spec.serviceAccountName, status.podIP, status.hostIP). Values from ConfigMaps, Secrets or
// resource fields are FailedPrecondition: the simulator does not resolve them.
Result<std::vector<std::pair<std::string, std::string>>> ContainerEnvironment(
    const json::object& pod, const json::object& container);

// "<namespace>_<name>_<uid>", how kubelets name a pod in paths and messages.
std::string PodDirectoryName(const json::object& pod);

// The value at a dotted path of strings ("metadata.name"), or "".
std::string StringAtPath(const json::object& object, std::string_view path);

}  // namespace uplink::kubesim
