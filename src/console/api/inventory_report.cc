#include "console/api/inventory_report.h"

#include "console/api/json_fields.h"

namespace uplink::console {
namespace {

constexpr size_t kMaxNameBytes = 253;      // a Kubernetes object name or resource name
constexpr size_t kMaxUidBytes = 128;
constexpr size_t kMaxShortBytes = 256;     // versions, products, taint parts
constexpr size_t kMaxSelectorBytes = 4096;
constexpr size_t kMaxErrorBytes = 1024;
constexpr size_t kMaxResourcesPerNode = 64;
constexpr size_t kMaxTaintsPerNode = 64;
constexpr std::int64_t kMaxGpuCount = 1'000'000;

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

Result<Node> ParseNode(const json::value& value, const std::string& path) {
  UPLINK_ASSIGN_OR_RETURN(const json::object* object, AsObject(&value, path));
  FieldReader fields(*object, path);
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"name", "uid", "ready", "unschedulable",
                                            "gpu_resource", "gpu_capacity", "gpu_allocatable",
                                            "gpu_product", "resources", "taints", "error"}));
  Node node;
  UPLINK_ASSIGN_OR_RETURN(node.name, fields.RequiredString("name", kMaxNameBytes));
  if (node.name.empty()) return InvalidArgumentError(path + ".name must not be empty");
  UPLINK_ASSIGN_OR_RETURN(auto uid, fields.String("uid", kMaxUidBytes));
  node.uid = uid.value_or("");
  UPLINK_ASSIGN_OR_RETURN(node.ready, fields.RequiredBool("ready"));
  UPLINK_ASSIGN_OR_RETURN(node.unschedulable, fields.RequiredBool("unschedulable"));
  UPLINK_ASSIGN_OR_RETURN(node.gpu_resource, fields.RequiredString("gpu_resource", kMaxNameBytes));
  UPLINK_ASSIGN_OR_RETURN(node.gpu_capacity, fields.RequiredInt("gpu_capacity", 0, kMaxGpuCount));
  UPLINK_ASSIGN_OR_RETURN(node.gpu_allocatable,
                          fields.RequiredInt("gpu_allocatable", 0, kMaxGpuCount));
  UPLINK_ASSIGN_OR_RETURN(auto product, fields.String("gpu_product", kMaxShortBytes));
  node.gpu_product = product.value_or("");
  UPLINK_ASSIGN_OR_RETURN(node.error, fields.String("error", kMaxErrorBytes));

  if (const json::value* resources = fields.Find("resources")) {
    std::string resources_path = fields.FieldPath("resources");
    UPLINK_ASSIGN_OR_RETURN(const json::object* map, AsObject(resources, resources_path));
    if (map->size() > kMaxResourcesPerNode) {
      return InvalidArgumentError(resources_path + " has more than " +
                                  std::to_string(kMaxResourcesPerNode) + " entries");
    }
    for (const auto& entry : *map) {
      if (entry.key().empty() || entry.key().size() > kMaxNameBytes) {
        return InvalidArgumentError(resources_path + " has a resource name that is empty or " +
                                    "longer than " + std::to_string(kMaxNameBytes) + " bytes");
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
      UPLINK_ASSIGN_OR_RETURN(const json::object* taint_object,
                              AsObject(&(*list)[i], taint_path));
      FieldReader taint_fields(*taint_object, taint_path);
      UPLINK_RETURN_IF_ERROR(taint_fields.OnlyFields({"key", "value", "effect"}));
      Taint taint;
      UPLINK_ASSIGN_OR_RETURN(taint.key, taint_fields.RequiredString("key", kMaxShortBytes));
      UPLINK_ASSIGN_OR_RETURN(auto taint_value, taint_fields.String("value", kMaxShortBytes));
      taint.value = taint_value.value_or("");
      UPLINK_ASSIGN_OR_RETURN(taint.effect, taint_fields.RequiredString("effect", kMaxShortBytes));
      node.taints.push_back(std::move(taint));
    }
  }
  return node;
}

}  // namespace

Result<InventoryReport> ParseInventoryReport(const json::value& body) {
  UPLINK_ASSIGN_OR_RETURN(const json::object* object, AsObject(&body, "the request body"));
  FieldReader fields(*object, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"agent_version", "agent_instance", "cluster_uid",
                                            "selector", "collected_at", "nodes"}));
  InventoryReport report;
  UPLINK_ASSIGN_OR_RETURN(report.agent_version,
                          fields.RequiredString("agent_version", kMaxShortBytes));
  UPLINK_ASSIGN_OR_RETURN(auto instance, fields.String("agent_instance", kMaxNameBytes));
  report.agent_instance = instance.value_or("");
  UPLINK_ASSIGN_OR_RETURN(report.cluster_uid, fields.RequiredString("cluster_uid", kMaxUidBytes));
  if (report.cluster_uid.empty()) {
    return InvalidArgumentError("cluster_uid must be the metadata.uid of the kube-system "
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
    UPLINK_ASSIGN_OR_RETURN(Node node, ParseNode((*nodes)[i], "nodes[" + std::to_string(i) + "]"));
    rows += node.resources.size() + node.taints.size();
    if (rows > kMaxReportRows) {
      return InvalidArgumentError(
          "the report has more than " + std::to_string(kMaxReportRows) +
          " resources and taints over all nodes (counted through nodes[" + std::to_string(i) +
          "]); the limit is " + std::to_string(kMaxReportRows) + " per report");
    }
    report.nodes.push_back(std::move(node));
  }
  return report;
}

}  // namespace uplink::console
