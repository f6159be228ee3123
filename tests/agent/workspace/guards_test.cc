// The start-up checks: the Kubernetes versions the controller runs on, and each namespace
// guard, missing or too weak, named in the refusal.
#include "agent/workspace/guards.h"

#include <gtest/gtest.h>

namespace uplink::agent::workspace {
namespace {

const std::string kDigest = "sha256:" + std::string(64, 'd');

ExecutionConfig Config() {
  ExecutionConfig config;
  config.namespace_name = "uplink-workspaces";
  config.workspace_image = "localhost/uplink-workspace@" + kDigest;
  config.capacity_gpus = 8;
  config.max_lifetime_seconds = 3600;
  config.nodes = {"gpu-1"};
  return config;
}

json::object Object(const std::string& text) { return json::parse(text).as_object(); }

// What the chart makes (charts/uplink-agent/templates/execution-guards.yaml, in short).
GuardObjects Complete() {
  GuardObjects guards;
  guards.ns = Object(R"({"metadata": {"name": "uplink-workspaces", "labels":
      {"pod-security.kubernetes.io/enforce": "restricted"}}})");
  guards.resource_quotas = {Object(R"({"spec": {"hard": {"requests.nvidia.com/gpu": "8",
      "limits.cpu": "64", "limits.memory": "512Gi", "limits.ephemeral-storage": "2Ti",
      "pods": "8", "services": "0", "persistentvolumeclaims": "0",
      "services.loadbalancers": "0"}}})")};
  guards.limit_ranges = {Object(R"({"spec": {"limits": [{"type": "Container",
      "max": {"cpu": "64"}}]}})")};
  guards.network_policies = {Object(R"({"spec": {"podSelector": {},
      "policyTypes": ["Ingress", "Egress"]}})")};
  guards.priority_class = Object(R"({"value": -10, "preemptionPolicy": "Never"})");
  guards.admission_policy = Object(R"({"spec": {"failurePolicy": "Fail",
      "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
      "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
      "validations": [{"expression": "object.spec.containers.all(c, c.image == 'localhost/uplink-workspace@)" + kDigest + R"x(')"}]}})x");
  guards.admission_policy_bindings = {Object(R"({"spec": {"policyName": "uplink-workspace",
      "validationActions": ["Deny"]}})")};
  return guards;
}

// The single line MissingGuards gives for `guards`, or a note when there are none or more.
std::string OnlyMissing(const GuardObjects& guards) {
  std::vector<std::string> missing = MissingGuards(Config(), guards);
  if (missing.size() != 1) {
    std::string all = std::to_string(missing.size()) + " lines:";
    for (const std::string& line : missing) all += "\n" + line;
    return all;
  }
  return missing.front();
}

TEST(KubernetesVersionTest, RunsOn134To136Only) {
  for (const char* ok : {R"({"major": "1", "minor": "34", "gitVersion": "v1.34.0"})",
                         R"({"major": "1", "minor": "35+", "gitVersion": "v1.35.2-gke.1"})",
                         R"({"major": "1", "minor": "36"})"}) {
    EXPECT_TRUE(CheckKubernetesVersion(json::parse(ok)).ok()) << ok;
  }
  Status old = CheckKubernetesVersion(json::parse(R"({"major": "1", "minor": "33", "gitVersion": "v1.33.4"})"));
  EXPECT_EQ(old.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(old.message().find("the Kubernetes API server is v1.33.4; uplink-agent workspace "
                               "supports Kubernetes 1.34 to 1.36"),
            std::string::npos)
      << old.message();
  EXPECT_FALSE(CheckKubernetesVersion(json::parse(R"({"major": "1", "minor": "37"})")).ok());
  EXPECT_FALSE(CheckKubernetesVersion(json::parse(R"({"major": "2", "minor": "35"})")).ok());
  for (const char* hostile : {R"({})", R"([])", R"({"major": 1, "minor": 35})",
                              R"({"major": "1", "minor": "x35"})", R"({"major": "", "minor": ""})",
                              R"({"major": "1", "minor": "99999999999999999999"})"}) {
    EXPECT_FALSE(CheckKubernetesVersion(json::parse(hostile)).ok()) << hostile;
  }
}

TEST(NamespaceGuardsTest, TheChartsGuardsPass) {
  EXPECT_EQ(MissingGuards(Config(), Complete()), std::vector<std::string>{});
}

TEST(NamespaceGuardsTest, AMissingNamespaceIsTheOneThingSaid) {
  GuardObjects guards = Complete();
  guards.ns.reset();
  EXPECT_EQ(OnlyMissing(guards), "Namespace uplink-workspaces: not found");
}

TEST(NamespaceGuardsTest, PodSecurityRestricted) {
  GuardObjects guards = Complete();
  guards.ns->at("metadata").as_object()["labels"] =
      json::object{{"pod-security.kubernetes.io/enforce", "baseline"}};
  EXPECT_EQ(OnlyMissing(guards), "Namespace uplink-workspaces: label "
                                 "pod-security.kubernetes.io/enforce=restricted (Pod Security)");
}

TEST(NamespaceGuardsTest, ResourceQuotaOfTheCapacityLimitAndNoServicesOrVolumes) {
  GuardObjects guards = Complete();
  guards.resource_quotas.clear();
  EXPECT_NE(OnlyMissing(guards).find("ResourceQuota in namespace uplink-workspaces: none"),
            std::string::npos);
  const std::pair<std::string, std::string> weakened[] = {
      {"requests.nvidia.com/gpu", "none limits requests.nvidia.com/gpu to 8 (the capacity limit)"},
      {"limits.cpu", "none limits cpu"},
      {"limits.memory", "none limits memory"},
      {"limits.ephemeral-storage", "none limits ephemeral storage"},
      {"pods", "none limits pods"},
      {"services", "none sets services to 0"},
      {"persistentvolumeclaims", "none sets persistentvolumeclaims to 0"},
      {"services.loadbalancers", "none sets services.loadbalancers to 0"},
  };
  for (const auto& [resource, message] : weakened) {
    GuardObjects weak = Complete();
    weak.resource_quotas[0]["spec"].as_object()["hard"].as_object().erase(resource);
    EXPECT_EQ(OnlyMissing(weak), "ResourceQuota in namespace uplink-workspaces: " + message);
  }
  GuardObjects more_gpus = Complete();
  more_gpus.resource_quotas[0]["spec"].as_object()["hard"].as_object()["requests.nvidia.com/gpu"] = "16";
  EXPECT_NE(OnlyMissing(more_gpus).find("requests.nvidia.com/gpu to 8"), std::string::npos);
  GuardObjects one_service = Complete();
  one_service.resource_quotas[0]["spec"].as_object()["hard"].as_object()["services"] = "1";
  EXPECT_NE(OnlyMissing(one_service).find("services to 0"), std::string::npos);
}

TEST(NamespaceGuardsTest, LimitRange) {
  GuardObjects guards = Complete();
  guards.limit_ranges = {Object(R"({"spec": {"limits": []}})")};
  EXPECT_EQ(OnlyMissing(guards), "LimitRange in namespace uplink-workspaces: none with limits");
}

TEST(NamespaceGuardsTest, DefaultDenyIngressAndEgress) {
  GuardObjects guards = Complete();
  guards.network_policies = {Object(R"({"spec": {"podSelector": {}, "policyTypes": ["Ingress"]}})")};
  EXPECT_NE(OnlyMissing(guards).find("none denies all egress"), std::string::npos);
  guards.network_policies.push_back(
      Object(R"({"spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]}})"));
  EXPECT_NE(OnlyMissing(guards).find("none denies all egress"), std::string::npos)
      << "an egress rule {} allows everything";
  guards.network_policies.push_back(Object(
      R"({"spec": {"podSelector": {"matchLabels": {"a": "b"}}, "policyTypes": ["Egress"]}})"));
  EXPECT_NE(OnlyMissing(guards).find("none denies all egress"), std::string::npos)
      << "a policy for some pods only is not a default";
  guards.network_policies.push_back(Object(R"({"spec": {"podSelector": {}, "policyTypes": ["Egress"]}})"));
  EXPECT_EQ(MissingGuards(Config(), guards), std::vector<std::string>{});
}

TEST(NamespaceGuardsTest, ALowNonPreemptingPriorityClass) {
  GuardObjects guards = Complete();
  guards.priority_class.reset();
  EXPECT_EQ(OnlyMissing(guards), "PriorityClass uplink-workspace: not found");
  guards = Complete();
  (*guards.priority_class)["preemptionPolicy"] = "PreemptLowerPriority";
  EXPECT_EQ(OnlyMissing(guards), "PriorityClass uplink-workspace: preemptionPolicy must be Never");
  guards = Complete();
  (*guards.priority_class)["value"] = 1000;
  EXPECT_NE(OnlyMissing(guards).find("value must be 0 or less"), std::string::npos);
}

TEST(NamespaceGuardsTest, TheAdmissionPolicyAndItsBinding) {
  GuardObjects guards = Complete();
  guards.admission_policy.reset();
  EXPECT_EQ(OnlyMissing(guards), "ValidatingAdmissionPolicy uplink-workspace: not found");
  guards = Complete();
  guards.admission_policy->at("spec").as_object()["failurePolicy"] = "Ignore";
  EXPECT_NE(OnlyMissing(guards).find("failurePolicy must be Fail"), std::string::npos);
  guards = Complete();
  guards.admission_policy->at("spec").as_object()["validations"] =
      json::parse(R"([{"expression": "true"}])");
  EXPECT_NE(OnlyMissing(guards).find("admits only the pinned workspace image"), std::string::npos);
  guards = Complete();
  guards.admission_policy->at("spec").as_object()["matchConstraints"] =
      json::parse(R"({"resourceRules": [{"operations": ["CREATE"], "resources": ["services"]}]})");
  EXPECT_NE(OnlyMissing(guards).find("does not match the creation of pods"), std::string::npos);
  guards = Complete();
  guards.admission_policy_bindings.clear();
  EXPECT_EQ(OnlyMissing(guards), "ValidatingAdmissionPolicyBinding: none binds uplink-workspace "
                                 "with validationActions [Deny]");
  guards = Complete();
  guards.admission_policy_bindings[0]["spec"].as_object()["validationActions"] = json::array{"Audit"};
  EXPECT_NE(OnlyMissing(guards).find("validationActions [Deny]"), std::string::npos);
}

TEST(NamespaceGuardsTest, EveryMissingGuardIsNamedAtOnce) {
  GuardObjects guards;
  guards.ns = Complete().ns;
  EXPECT_GE(MissingGuards(Config(), guards).size(), 6u);
}

}  // namespace
}  // namespace uplink::agent::workspace
