// Every kind of object uplink-kubesim writes itself (pods' statuses in every phase, quota
// statuses, defaulted LimitRanges, NetworkPolicies, PriorityClasses, ValidatingAdmissionPolicies
// and their bindings) validated against Kubernetes' own schemas from npm, as the chart's
// objects are (tests/chart/validate/validate.mjs: kubernetes-models, and kubernetes-types with
// tsc's excess-property checks).
#include <gtest/gtest.h>

#include <fstream>

#include "common/json.h"
#include "kubesim_process.h"

namespace uplink::kubesim {
namespace {

using testing::CommandResult;
using testing::KubesimProcess;
using namespace std::chrono_literals;

constexpr const char* kObjects = R"(apiVersion: v1
kind: Namespace
metadata:
  name: workspaces
  labels: {pod-security.kubernetes.io/enforce: restricted, pod-security.kubernetes.io/warn: restricted}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: guards, namespace: workspaces}
spec:
  hard: {requests.nvidia.com/gpu: "8", pods: "10", requests.cpu: "16", limits.memory: 64Gi, services: "0"}
---
apiVersion: v1
kind: LimitRange
metadata: {name: sizes, namespace: workspaces}
spec:
  limits: [{type: Container, max: {cpu: "4", memory: 8Gi}, defaultRequest: {cpu: 500m}}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: workspaces}
spec: {podSelector: {}, policyTypes: [Ingress, Egress]}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: workspace-low}
value: -10
preemptionPolicy: Never
description: workspaces never preempt
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: workspace-pods}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]
  validations:
  - expression: "object.spec.automountServiceAccountToken == false"
    message: pods may not mount a service account token
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: workspace-pods}
spec:
  policyName: workspace-pods
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: workspaces}}
)";

// A restricted pod running `script` in the workspaces namespace.
std::string Pod(const std::string& name, const std::string& script, const std::string& extra) {
  return R"(apiVersion: v1
kind: Pod
metadata: {name: )" + name + R"(, namespace: workspaces, labels: {app: workspace}}
spec:
  priorityClassName: workspace-low
  automountServiceAccountToken: false
  restartPolicy: Never
  )" + extra + R"(
  securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: main
    image: debian:12
    command: [sh, -c, ")" + script + R"("]
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
    resources: {limits: {cpu: "1", memory: 1Gi}}
)";
}

TEST(KubesimSchemas, EveryObjectKubesimWritesPassesTheKubernetesSchemas) {
  auto started = KubesimProcess::Start({"--runtime", "process", "--pod-start-delay", "0s"});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<KubesimProcess> kubesim = std::move(started).value();
  CommandResult applied = kubesim->Kubectl({"apply", "-f", "-"}, kObjects);
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  std::string pods = Pod("running", "sleep 3600", "") + "---\n" +
                     Pod("failed", "exit 3", "") + "---\n" +
                     Pod("deadline", "sleep 3600", "activeDeadlineSeconds: 1") + "---\n" +
                     Pod("unschedulable", "true",
                         "nodeSelector: {kubernetes.io/hostname: no-such-node}");
  CommandResult created = kubesim->Kubectl({"apply", "-f", "-"}, pods);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  auto jsonpath = [&](const std::string& kind, const std::string& name, const std::string& path) {
    return kubesim->Kubectl({"get", kind, name, "-n", "workspaces", "-o", "jsonpath=" + path}).out;
  };
  ASSERT_TRUE(uplink::testing::WaitFor([&] {
    return jsonpath("pod", "running", "{.status.phase}") == "Running" &&
           jsonpath("pod", "failed", "{.status.phase}") == "Failed" &&
           jsonpath("pod", "deadline", "{.status.reason}") == "DeadlineExceeded" &&
           jsonpath("pod", "unschedulable", "{.status.conditions[0].reason}") == "Unschedulable" &&
           !jsonpath("resourcequota", "guards", "{.status.used}").empty();
  }, 30s)) << kubesim->Logs();

  json::array manifests;
  // Two things real servers write that kubernetes-types 1.30 cannot type, taken out before the
  // check: a condition's `lastProbeTime: null` (typed as a string), and a policy rule's
  // `resources` and `scope` (lost from its NamedRuleWithOperations; kubernetes-models has them).
  auto comparable = [](json::value object) {
    json::object& top = object.as_object();
    json::value* status = top.if_contains("status");
    json::value* conditions = status && status->is_object()
                                  ? status->as_object().if_contains("conditions")
                                  : nullptr;
    if (conditions && conditions->is_array()) {
      for (json::value& condition : conditions->as_array()) {
        if (condition.is_object()) condition.as_object().erase("lastProbeTime");
      }
    }
    if (top.at("kind") == "ValidatingAdmissionPolicy") {
      json::object& match = top.at("spec").as_object().at("matchConstraints").as_object();
      for (json::value& rule : match.at("resourceRules").as_array()) {
        rule.as_object().erase("resources");
        rule.as_object().erase("scope");
      }
    }
    return object;
  };
  for (const char* kinds : {"namespaces", "priorityclasses", "validatingadmissionpolicies",
                            "validatingadmissionpolicybindings"}) {
    CommandResult listed = kubesim->Kubectl({"get", kinds, "-o", "json"});
    ASSERT_EQ(listed.exit_code, 0) << listed.err;
    Result<json::value> list = ParseJson(listed.out, JsonLimits{16 << 20, 64});
    ASSERT_TRUE(list.ok());
    for (const json::value& item : list->at("items").as_array()) {
      manifests.push_back(json::object{{"source", kinds}, {"object", comparable(item)}});
    }
  }
  for (const char* kinds : {"pods", "resourcequotas", "limitranges", "networkpolicies"}) {
    CommandResult listed = kubesim->Kubectl({"get", kinds, "-n", "workspaces", "-o", "json"});
    ASSERT_EQ(listed.exit_code, 0) << listed.err;
    Result<json::value> list = ParseJson(listed.out, JsonLimits{16 << 20, 64});
    ASSERT_TRUE(list.ok());
    for (const json::value& item : list->at("items").as_array()) {
      manifests.push_back(json::object{{"source", kinds}, {"object", comparable(item)}});
    }
  }
  ASSERT_GE(manifests.size(), 12u);
  uplink::testing::TempDir dir;
  std::ofstream(dir.File("kubesim.json")) << ToJson(json::object{{"manifests", manifests}});
  CommandResult validated = uplink::testing::RunCommand(
      {"/usr/bin/node", std::string(UPLINK_SOURCE_DIR) + "/tests/chart/validate/validate.mjs",
       dir.File("kubesim.json")},
      120s);
  EXPECT_EQ(validated.exit_code, 0) << validated.out << validated.err;
  EXPECT_NE(validated.out.find("all valid"), std::string::npos) << validated.out;
  EXPECT_EQ(kubesim->Stop(), 0) << kubesim->Logs();
}

}  // namespace
}  // namespace uplink::kubesim
