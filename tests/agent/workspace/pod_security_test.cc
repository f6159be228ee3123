// The workspace pod against each Pod Security `restricted` rule, as kube-apiserver's admission
// checks it (uplink-kubesim's implementation, with the real messages): the controller's pod
// passes every one, and breaking just what a rule is about makes the admission refuse it for
// that rule first, so each pass below is a rule that was really looked at.
#include <gtest/gtest.h>

#include <functional>

#include "agent/workspace/pod_spec.h"
#include "kubesim/pod_security.h"

namespace uplink::agent::workspace {
namespace {

using namespace std::chrono_literals;

json::object WorkspacePod() {
  ExecutionConfig config;
  config.namespace_name = "uplink-workspaces";
  config.workspace_image = "localhost/uplink-workspace@sha256:" + std::string(64, 'e');
  config.capacity_gpus = 8;
  config.max_lifetime_seconds = 3600;
  config.nodes = {"gpu-node-0001"};
  const WallTime now = FromUnixSeconds(1'800'000'000);
  auto pod = BuildWorkspacePod(
      config,
      DesiredReservation{.id = "res_0123456789abcdef", .gpus = 1, .node = "gpu-node-0001",
                         .cpu_millis = 1000, .memory_bytes = 1 << 30,
                         .ephemeral_storage_bytes = 4ll << 30, .expires_at = now + 1h,
                         .desired = "running"},
      now);
  EXPECT_TRUE(pod.ok()) << pod.status().ToString();
  return pod.ok() ? *pod : json::object{};
}

std::string Violations(const json::object& pod) {
  return kubesim::PodSecurityViolations(
      kubesim::PodSecurityMode{.level = kubesim::PodSecurityLevel::kRestricted}, pod);
}

struct Rule {
  std::string name;
  std::string reason;  // how the admission names the rule
  std::function<void(json::object& pod, json::object& spec, json::object& container)> break_it;
};

json::object& Spec(json::object& pod) { return pod["spec"].as_object(); }
json::object& FirstContainer(json::object& pod) {
  return Spec(pod)["containers"].as_array()[0].as_object();
}
json::object& ContainerSecurity(json::object& container) {
  return container["securityContext"].as_object();
}

class RestrictedRuleTest : public ::testing::TestWithParam<Rule> {};

TEST(RestrictedPodSecurityTest, TheWorkspacePodPassesEveryRule) {
  EXPECT_EQ(Violations(WorkspacePod()), "");
}

TEST_P(RestrictedRuleTest, BreakingItIsRefusedForThatRule) {
  json::object pod = WorkspacePod();
  GetParam().break_it(pod, Spec(pod), FirstContainer(pod));
  std::string violations = Violations(pod);
  EXPECT_TRUE(violations.starts_with(GetParam().reason + " (")) << violations;
}

const Rule kRules[] = {
    {"allowPrivilegeEscalation", "allowPrivilegeEscalation != false",
     [](json::object&, json::object&, json::object& c) { ContainerSecurity(c)["allowPrivilegeEscalation"] = true; }},
    {"capabilities", "unrestricted capabilities",
     [](json::object&, json::object&, json::object& c) {
       ContainerSecurity(c)["capabilities"] = json::object{{"drop", json::array{"ALL"}}, {"add", json::array{"SYS_ADMIN"}}};
     }},
    {"capabilitiesNotDropped", "unrestricted capabilities",
     [](json::object&, json::object&, json::object& c) { ContainerSecurity(c).erase("capabilities"); }},
    {"hostNamespaces", "host namespaces",
     [](json::object&, json::object& s, json::object&) { s["hostNetwork"] = true; }},
    {"hostPathVolumes", "restricted volume types",
     [](json::object&, json::object& s, json::object&) {
       s["volumes"].as_array().push_back(json::object{{"name", "h"}, {"hostPath", json::object{{"path", "/"}}}});
     }},
    {"hostPorts", "hostPort",
     [](json::object&, json::object&, json::object& c) {
       c["ports"] = json::array{json::object{{"containerPort", 22}, {"hostPort", 22}}};
     }},
    {"privileged", "privileged",
     [](json::object&, json::object&, json::object& c) { ContainerSecurity(c)["privileged"] = true; }},
    {"procMount", "procMount",
     [](json::object&, json::object&, json::object& c) { ContainerSecurity(c)["procMount"] = "Unmasked"; }},
    {"restrictedVolumes", "restricted volume types",
     [](json::object&, json::object& s, json::object&) {
       s["volumes"].as_array().push_back(
           json::object{{"name", "n"}, {"nfs", json::object{{"server", "x"}, {"path", "/"}}}});
     }},
    {"runAsNonRoot", "runAsNonRoot != true",
     [](json::object&, json::object& s, json::object& c) {
       s["securityContext"].as_object()["runAsNonRoot"] = false;
       ContainerSecurity(c).erase("runAsNonRoot");
     }},
    {"runAsUser", "runAsUser=0",
     [](json::object&, json::object&, json::object& c) { ContainerSecurity(c)["runAsUser"] = 0; }},
    {"seLinuxOptions", "seLinuxOptions",
     [](json::object&, json::object&, json::object& c) {
       ContainerSecurity(c)["seLinuxOptions"] = json::object{{"type", "spc_t"}};
     }},
    {"seccompProfile", "seccompProfile",
     [](json::object&, json::object& s, json::object& c) {
       s["securityContext"].as_object().erase("seccompProfile");
       ContainerSecurity(c).erase("seccompProfile");
     }},
    {"sysctls", "forbidden sysctls",
     [](json::object&, json::object& s, json::object&) {
       s["securityContext"].as_object()["sysctls"] =
           json::array{json::object{{"name", "kernel.msgmax"}, {"value", "1"}}};
     }},
    {"appArmorProfile", "forbidden AppArmor profile",
     [](json::object&, json::object&, json::object& c) {
       ContainerSecurity(c)["appArmorProfile"] = json::object{{"type", "Unconfined"}};
     }},
    {"windowsHostProcess", "hostProcess",
     [](json::object&, json::object&, json::object& c) {
       ContainerSecurity(c)["windowsOptions"] = json::object{{"hostProcess", true}};
     }},
};

INSTANTIATE_TEST_SUITE_P(EachRule, RestrictedRuleTest, ::testing::ValuesIn(kRules),
                         [](const ::testing::TestParamInfo<Rule>& info) { return info.param.name; });

}  // namespace
}  // namespace uplink::agent::workspace
