// The simulator's object store: Kubernetes objects in memory, keyed like etcd keys, with one
// global resourceVersion counter as kube-apiserver has.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/labels.h"
#include "common/status.h"
#include "common/time.h"
#include "kubesim/logs.h"
#include "kubesim/messages.h"

namespace uplink::kubesim {

// A resource type the simulator serves, with what discovery advertises for it.
struct ResourceType {
  std::string group;  // "" for the core group
  std::string version;
  std::string plural;  // "nodes"
  std::string singular;
  std::string kind;
  bool namespaced = false;
  std::vector<std::string> short_names;
  std::vector<std::string> verbs;
  // Field selector paths beyond metadata.name and metadata.namespace, as the real server
  // supports them for this type (pods: spec.nodeName, ...).
  std::vector<std::string> field_paths;
  std::vector<std::string> categories;  // "all" for what `kubectl get all` lists
  // Subresources served with GET ("log" for pods/log); discovery lists them as "pods/log".
  std::vector<std::string> subresources;
  // False for types computed on request (metrics.k8s.io) rather than kept in the store.
  bool stored = true;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  // "deployments.apps", or "pods" for the core group: how API errors name the type.
  std::string GroupResource() const { return group.empty() ? plural : plural + "." + group; }
};

// Every type served, core group first.
const std::vector<ResourceType>& ResourceTypes();
const ResourceType* FindResource(std::string_view group, std::string_view version,
                                 std::string_view plural);
const ResourceType* FindResourceByKind(std::string_view api_version, std::string_view kind);

// One "path=value", "path==value" or "path!=value" term of a field selector, its value
// unescaped (`\,`, `\=` and `\\` stand for ',', '=' and '\').
struct FieldRequirement {
  std::string path;
  std::string value;
  bool negated = false;
};

// The label and field selectors of a list request, parsed once and matched per object as
// kube-apiserver does. Fields the type does not support are InvalidArgument ("field label not
// supported: spec.bogus"), as are malformed terms and escapes.
class ObjectFilter {
 public:
  static Result<ObjectFilter> Parse(const ResourceType& type, std::string_view label_selector,
                                    std::string_view field_selector);
  bool Matches(const json::object& object) const;
  bool empty() const { return labels_.empty() && fields_.empty(); }
  const std::vector<FieldRequirement>& fields() const { return fields_; }

 private:
  labels::Selector labels_;
  std::vector<FieldRequirement> fields_;
};

// The string form of a field for selection: absent fields read as "", booleans as
// "true"/"false", like the real field label conversion.
std::string FieldValue(const json::object& object, const std::string& path);

struct ListOptions {
  std::optional<std::string> namespace_name;  // absent: all namespaces (or cluster-scoped)
  std::string label_selector;
  std::string field_selector;
  std::int64_t limit = 0;  // 0: everything
  std::string continue_token;
};

struct ListPage {
  std::vector<json::object> items;
  std::int64_t resource_version = 0;
  std::string continue_token;                          // empty on the last page
  std::optional<std::int64_t> remaining_item_count;    // only for unfiltered paged lists
};

// kube-apiserver's continue token: base64url (no padding) of
// {"v":"meta.k8s.io/v1","rv":RV,"start":"<last key>\u0000"}.
std::string EncodeContinueToken(std::int64_t resource_version, const std::string& last_key);
struct ContinuePosition {
  std::int64_t resource_version = 0;
  std::string start_key;
};
// InvalidArgument ("continue key is not valid: ...") for anything a real server rejects.
Result<ContinuePosition> DecodeContinueToken(std::string_view token);

// The message create gives for an object that carries metadata.resourceVersion; the real
// server's storage layer refuses it with a 500 Status that has no reason.
inline constexpr std::string_view kResourceVersionSetOnCreate =
    "resourceVersion should not be set on objects to be created";

// apimachinery's message for a name that is not a DNS label (`label`) or subdomain.
std::string DnsNameProblem(bool label, std::string_view name);
// path.IsValidPathSegmentName, the rule for RBAC object names: why `name` is not one
// ("may not contain '/'"), or nothing when it is.
std::optional<std::string> PathSegmentNameProblem(std::string_view name);

// `prefix` and five random characters, as generateName names objects ("train-x7k2p").
std::string GeneratedName(std::string_view prefix);

// A random RFC 4122 version 4 UUID.
std::string NewUuid();

// One change as a watch reports it.
struct WatchEvent {
  std::string type;  // ADDED, MODIFIED or DELETED
  std::string group_resource;
  std::string namespace_name;
  json::object object;  // as it was after the change (for DELETED, as it was last)
  std::int64_t resource_version = 0;
};

class ObjectStore {
 public:
  explicit ObjectStore(Clock& clock) : clock_(clock) {}

  // Validates and stores a new object, filling uid, creationTimestamp and resourceVersion.
  // `namespace_name` is the namespace from the URL (empty for cluster-scoped types).
  // An object that validation refuses is InvalidArgument, described in `*invalid` when given;
  // one that cannot be decoded (a Secret's data that is not base64) is InvalidArgument with
  // `*invalid` left alone; a resourceVersion set in the object is Internal
  // (kResourceVersionSetOnCreate).
  Result<json::object> Create(const ResourceType& type, const std::string& namespace_name,
                              json::object object, InvalidObject* invalid = nullptr);
  // Stores an object as given (from --objects, the workloads or generated nodes), replacing
  // one with the same name and keeping its uid and creationTimestamp when it has them. A
  // ContainerLog document goes to logs() instead.
  Result<json::object> Put(json::object object);

  Result<json::object> Get(const ResourceType& type, const std::string& namespace_name,
                           const std::string& name) const;
  Result<ListPage> List(const ResourceType& type, const ListOptions& options) const;
  // RFC 7386 JSON merge patch; name, namespace, uid, kind and apiVersion cannot change. A
  // result that cannot be decoded or fails validation is InvalidArgument, described in
  // `*invalid` when given (as the real server's 422 Invalid, never quoting Secret data).
  Result<json::object> MergePatch(const ResourceType& type, const std::string& namespace_name,
                                  const std::string& name, const json::value& patch,
                                  InvalidObject* invalid = nullptr);
  // Removes an object and returns it. Deleting a namespace removes everything in it at once
  // (the namespace controller's work, done instantly) and returns it as the real server does,
  // Terminating with a deletionTimestamp; default, kube-system and kube-public are
  // PermissionDenied, as NamespaceLifecycle admission refuses them.
  Result<json::object> Delete(const ResourceType& type, const std::string& namespace_name,
                              const std::string& name);

  // Replaces an object's whole status, as a kubelet or controller writes it through the
  // status subresource. With `uid`, an object of that name but another uid (deleted and made
  // again) is NotFound, so a late write never lands on its successor.
  Result<json::object> ReplaceStatus(const ResourceType& type, const std::string& namespace_name,
                                     const std::string& name, json::value status,
                                     const std::string& uid = "");
  // A graceful delete's first step: the object stays, with metadata.deletionTimestamp (now)
  // and deletionGracePeriodSeconds, until RemoveIfUid takes it away.
  Result<json::object> MarkDeleting(const ResourceType& type, const std::string& namespace_name,
                                    const std::string& name, std::int64_t grace_seconds);
  // Removes the object if it is still the one with `uid`; false when it is already gone.
  bool RemoveIfUid(const ResourceType& type, const std::string& namespace_name,
                   const std::string& name, const std::string& uid);

  // The changes to objects of `type` (in `namespace_name` when given) after resourceVersion
  // `since`, oldest first. FailedPrecondition when `since` is older than the changes kept (a
  // watch then answers 410 Gone, and its client lists again).
  Result<std::vector<WatchEvent>> EventsSince(const ResourceType& type,
                                              const std::optional<std::string>& namespace_name,
                                              std::int64_t since) const;

  // Waits until the resourceVersion passes `seen` or `timeout` passes; the current one.
  std::int64_t WaitForChange(std::int64_t seen, std::chrono::milliseconds timeout) const;

  std::int64_t resource_version() const;
  const LogStore& logs() const { return logs_; }

 private:
  static std::string Key(const ResourceType& type, const std::string& namespace_name,
                          const std::string& name);
  Status CheckNamespaceExists(const std::string& namespace_name) const;
  void Stamp(json::object& object, bool keep_identity);
  // Keeps a change for watches (under mutex_), dropping the oldest past kMaxEvents.
  void Record(std::string_view event, const std::string& group_resource, const json::object& object);

  Clock& clock_;
  LogStore logs_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;  // notified whenever resource_version_ moves
  std::int64_t resource_version_ = 0;
  // group resource ("pods", "deployments.apps") -> "namespace/name" (or "name") -> object,
  // ordered like etcd keys.
  std::map<std::string, std::map<std::string, json::object>> objects_;
  std::deque<WatchEvent> events_;
  std::int64_t events_dropped_up_to_ = 0;  // watches from before this are too old
};

// RFC 7386: objects merge recursively, null deletes, anything else replaces.
json::value ApplyMergePatch(const json::value& target, const json::value& patch);

}  // namespace uplink::kubesim
