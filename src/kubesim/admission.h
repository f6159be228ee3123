// What kube-apiserver does to an object between decoding and storage, for the kinds the
// workspace controller and its namespace guards create: defaulting, the mutating plugins
// (ServiceAccount, Priority, DefaultTolerationSeconds, LimitRanger), validation, and the
// validating plugins (PodSecurity, ResourceQuota), each with the real server's words.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "common/time.h"
#include "kubesim/messages.h"
#include "kubesim/store.h"

namespace uplink::kubesim {

class Admission {
 public:
  // `store` and `clock` must outlive this.
  Admission(const ObjectStore& store, Clock& clock) : store_(store), clock_(clock) {}

  // Admits `object` (a create in `namespace_name`), changing it as the mutating plugins do.
  // Refusals: PermissionDenied with the Forbidden message ("pods \"x\" is forbidden: exceeded
  // quota: ..."), NotFound for a missing namespace, InvalidArgument with `*invalid` filled
  // (422 Invalid) or not (400, a value that cannot be decoded). `warnings` receives what the
  // response's Warning headers say (PodSecurity's warn mode).
  //
  // Quota needs the create that follows to be atomic with this check: hold lock() across both.
  Status AdmitCreate(const ResourceType& type, const std::string& namespace_name,
                     json::object& object, std::vector<std::string>& warnings,
                     InvalidObject* invalid);

  // Serialises admitted creates, so two racing pods cannot both fit the last of a quota.
  std::mutex& lock() { return mutex_; }

 private:
  // The mutating plugins for a pod and its initial status.
  Status AdmitPod(const std::string& namespace_name, json::object& pod);
  Status CheckQuotas(const ResourceType& type, const std::string& namespace_name,
                     const json::object& object);
  std::vector<json::object> ListIn(std::string_view plural, std::string_view group,
                                   const std::string& namespace_name) const;

  const ObjectStore& store_;
  Clock& clock_;
  std::mutex mutex_;
};

// The field errors of validating the kinds added for workspaces (Pod, ResourceQuota,
// LimitRange, NetworkPolicy, PriorityClass, ValidatingAdmissionPolicy and its binding) after
// their defaults were applied; empty when valid.
std::vector<FieldError> ValidateWorkspaceKind(const ResourceType& type, const json::object& object);

// The defaults a real server fills in for those kinds (SetDefaults_*), the Pod's included.
void ApplyDefaults(const ResourceType& type, json::object& object);

}  // namespace uplink::kubesim
