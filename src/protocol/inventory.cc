#include "protocol/inventory.h"

#include <algorithm>
#include <limits>

#include "common/json.h"
#include "protocol/field_reader.h"

namespace uplink::protocol {
namespace {

Result<const json::object*> AsObject(const json::value* value, const std::string& path) {
  if (!value || !value->is_object()) return InvalidArgumentError(path + " must be an object");
  return &value->get_object();
}

Result<const json::array*> AsArray(const json::value* value, const std::string& path,
                                   size_t max_items) {
  if (!value || !value->is_array()) return InvalidArgumentError(path + " must be an array");
  const json::array& array = value->get_array();
  if (array.size() > max_items) {
    return InvalidArgumentError(path + " has " + std::to_string(array.size()) +
                                " entries; the limit is " + std::to_string(max_items));
  }
  return &array;
}

Result<InventoryNode> ParseNode(const json::value& value, const std::string& path) {
  UPLINK_ASSIGN_OR_RETURN(const json::object* object, AsObject(&value, path));
  FieldReader fields(*object, path);
  UPLINK_RETURN_IF_ERROR(
      fields.OnlyFields({"name", "uid", "ready", "unschedulable", "gpu_resource", "gpu_capacity",
                         "gpu_allocatable", "gpu_product", "resources", "taints", "error"}));
  InventoryNode node;
  UPLINK_ASSIGN_OR_RETURN(node.name, fields.RequiredString("name", kMaxNodeNameBytes));
  if (node.name.empty()) return InvalidArgumentError(path + ".name must not be empty");
  UPLINK_ASSIGN_OR_RETURN(auto uid, fields.String("uid", kMaxNodeUidBytes));
  node.uid = uid.value_or("");
  UPLINK_ASSIGN_OR_RETURN(node.ready, fields.RequiredBool("ready"));
  UPLINK_ASSIGN_OR_RETURN(node.unschedulable, fields.RequiredBool("unschedulable"));
  UPLINK_ASSIGN_OR_RETURN(node.gpu_resource,
                          fields.RequiredString("gpu_resource", kMaxNodeNameBytes));
  UPLINK_ASSIGN_OR_RETURN(node.gpu_capacity, fields.RequiredInt("gpu_capacity", 0, kMaxGpuCount));
  UPLINK_ASSIGN_OR_RETURN(node.gpu_allocatable,
                          fields.RequiredInt("gpu_allocatable", 0, kMaxGpuCount));
  UPLINK_ASSIGN_OR_RETURN(auto product, fields.String("gpu_product", kMaxInventoryTextBytes));
  node.gpu_product = product.value_or("");
  UPLINK_ASSIGN_OR_RETURN(node.error, fields.String("error", kMaxNodeErrorBytes));

  if (const json::value* resources = fields.Find("resources")) {
    std::string resources_path = fields.FieldPath("resources");
    UPLINK_ASSIGN_OR_RETURN(const json::object* map, AsObject(resources, resources_path));
    if (map->size() > kMaxResourcesPerNode) {
      return InvalidArgumentError(resources_path + " has more than " +
                                  std::to_string(kMaxResourcesPerNode) + " entries");
    }
    for (const auto& entry : *map) {
      if (entry.key().empty() || entry.key().size() > kMaxNodeNameBytes) {
        return InvalidArgumentError(resources_path + " has a resource name that is empty or " +
                                    "longer than " + std::to_string(kMaxNodeNameBytes) + " bytes");
      }
      std::string entry_path = resources_path + "[\"" + std::string(entry.key()) + "\"]";
      UPLINK_ASSIGN_OR_RETURN(const json::object* counts, AsObject(&entry.value(), entry_path));
      FieldReader count_fields(*counts, entry_path);
      UPLINK_RETURN_IF_ERROR(count_fields.OnlyFields({"capacity", "allocatable"}));
      GpuResource resource{std::string(entry.key()), 0, 0};
      UPLINK_ASSIGN_OR_RETURN(resource.capacity,
                              count_fields.RequiredInt("capacity", 0, kMaxGpuCount));
      UPLINK_ASSIGN_OR_RETURN(resource.allocatable,
                              count_fields.RequiredInt("allocatable", 0, kMaxGpuCount));
      node.resources.push_back(std::move(resource));
    }
  }
  if (const json::value* taints = fields.Find("taints")) {
    std::string taints_path = fields.FieldPath("taints");
    UPLINK_ASSIGN_OR_RETURN(const json::array* list,
                            AsArray(taints, taints_path, kMaxTaintsPerNode));
    for (size_t i = 0; i < list->size(); ++i) {
      std::string taint_path = taints_path + "[" + std::to_string(i) + "]";
      UPLINK_ASSIGN_OR_RETURN(const json::object* taint_object, AsObject(&(*list)[i], taint_path));
      FieldReader taint_fields(*taint_object, taint_path);
      UPLINK_RETURN_IF_ERROR(taint_fields.OnlyFields({"key", "value", "effect"}));
      Taint taint;
      UPLINK_ASSIGN_OR_RETURN(taint.key,
                              taint_fields.RequiredString("key", kMaxInventoryTextBytes));
      UPLINK_ASSIGN_OR_RETURN(auto taint_value,
                              taint_fields.String("value", kMaxInventoryTextBytes));
      taint.value = taint_value.value_or("");
      UPLINK_ASSIGN_OR_RETURN(taint.effect,
                              taint_fields.RequiredString("effect", kMaxInventoryTextBytes));
      node.taints.push_back(std::move(taint));
    }
  }
  return node;
}

}  // namespace

json::object EncodeInventoryNode(const InventoryNode& node) {
  json::object resources;
  for (const GpuResource& resource : node.resources) {
    resources[resource.name] =
        json::object{{"capacity", resource.capacity}, {"allocatable", resource.allocatable}};
  }
  json::array taints;
  for (const Taint& taint : node.taints) {
    taints.push_back(
        json::object{{"key", taint.key}, {"value", taint.value}, {"effect", taint.effect}});
  }
  json::object entry{{"name", node.name},
                     {"uid", node.uid},
                     {"ready", node.ready},
                     {"unschedulable", node.unschedulable},
                     {"gpu_resource", node.gpu_resource},
                     {"gpu_capacity", node.gpu_capacity},
                     {"gpu_allocatable", node.gpu_allocatable},
                     {"gpu_product", node.gpu_product},
                     {"resources", std::move(resources)},
                     {"taints", std::move(taints)}};
  if (node.error) entry["error"] = *node.error;
  return entry;
}

json::object EncodeInventoryReport(const InventoryReport& report) {
  json::array nodes;
  nodes.reserve(report.nodes.size());
  for (const InventoryNode& node : report.nodes) nodes.push_back(EncodeInventoryNode(node));
  json::object body{{"agent_version", report.agent_version},
                    {"cluster_uid", report.cluster_uid},
                    {"selector", report.selector}};
  if (report.collected_at) body["collected_at"] = FormatRfc3339(*report.collected_at);
  body["nodes"] = std::move(nodes);
  if (!report.agent_instance.empty()) body["agent_instance"] = report.agent_instance;
  return body;
}

Result<InventoryReport> DecodeInventoryReport(const json::value& body) {
  UPLINK_ASSIGN_OR_RETURN(const json::object* object, AsObject(&body, "the request body"));
  FieldReader fields(*object, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields(
      {"agent_version", "agent_instance", "cluster_uid", "selector", "collected_at", "nodes"}));
  InventoryReport report;
  UPLINK_ASSIGN_OR_RETURN(report.agent_version,
                          fields.RequiredPlainString("agent_version", kMaxInventoryTextBytes));
  UPLINK_ASSIGN_OR_RETURN(auto instance, fields.PlainString("agent_instance", kMaxNodeNameBytes));
  report.agent_instance = instance.value_or("");
  UPLINK_ASSIGN_OR_RETURN(report.cluster_uid,
                          fields.RequiredString("cluster_uid", kMaxNodeUidBytes));
  if (report.cluster_uid.empty()) {
    return InvalidArgumentError(
        "cluster_uid must be the metadata.uid of the kube-system "
        "Namespace; it is empty");
  }
  UPLINK_ASSIGN_OR_RETURN(auto selector, fields.String("selector", kMaxSelectorBytes));
  report.selector = selector.value_or("");
  UPLINK_ASSIGN_OR_RETURN(auto collected_at, fields.String("collected_at", 64));
  if (collected_at) {
    auto parsed = ParseRfc3339(*collected_at);
    if (!parsed.ok()) return InvalidArgumentError("collected_at must be an RFC 3339 time");
    report.collected_at = *parsed;
  }
  UPLINK_ASSIGN_OR_RETURN(const json::array* nodes,
                          AsArray(fields.Find("nodes"), "nodes", kMaxReportNodes));
  report.nodes.reserve(nodes->size());
  size_t rows = 0;
  for (size_t i = 0; i < nodes->size(); ++i) {
    UPLINK_ASSIGN_OR_RETURN(InventoryNode node,
                            ParseNode((*nodes)[i], "nodes[" + std::to_string(i) + "]"));
    rows += node.resources.size() + node.taints.size();
    if (rows > kMaxReportRows) {
      return InvalidArgumentError("the report has more than " + std::to_string(kMaxReportRows) +
                                  " resources and taints over all nodes (counted through nodes[" +
                                  std::to_string(i) + "]); the limit is " +
                                  std::to_string(kMaxReportRows) + " per report");
    }
    report.nodes.push_back(std::move(node));
  }
  return report;
}

json::object EncodeInventoryReply(const InventoryReply& reply) {
  json::object body{{"accepted", reply.accepted}, {"connection_id", reply.connection_id}};
  if (reply.report_interval_seconds) {
    body["report_interval_seconds"] = *reply.report_interval_seconds;
  }
  if (reply.expires_at) body["expires_at"] = FormatRfc3339(*reply.expires_at);
  return body;
}

InventoryReply DecodeInventoryReply(const json::value& body) {
  InventoryReply reply;
  const json::object* object = body.if_object();
  if (object == nullptr) return reply;
  const json::value* accepted = object->if_contains("accepted");
  reply.accepted = accepted != nullptr && accepted->is_bool() && accepted->get_bool();
  reply.connection_id = StringAt(*object, "connection_id");
  if (const json::value* seconds = object->if_contains("report_interval_seconds");
      seconds != nullptr && seconds->is_number()) {
    // Saturated well inside int64, so that any number the reply holds converts.
    constexpr double kLimit = 1e15;
    reply.report_interval_seconds =
        static_cast<std::int64_t>(std::clamp(seconds->to_number<double>(), -kLimit, kLimit));
  }
  if (const json::value* expires = object->if_contains("expires_at");
      expires != nullptr && expires->is_string()) {
    if (auto at = ParseRfc3339(expires->get_string()); at.ok()) reply.expires_at = *at;
  }
  return reply;
}

}  // namespace uplink::protocol
