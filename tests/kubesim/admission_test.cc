// What the API does to a create between decoding and storage: defaults, the ServiceAccount,
// Priority, DefaultTolerationSeconds and LimitRanger plugins, validation, Pod Security and
// ResourceQuota, each answering in kube-apiserver's words.
#include <gtest/gtest.h>

#include "api_fixture.h"
#include "kubesim/resource_admission.h"

namespace uplink::kubesim {
namespace {

class AdmissionTest : public testing::ApiFixture {
 protected:
  net::Response Create(const std::string& collection, const std::string& json) {
    return Call("POST", collection, json, "application/json");
  }
  json::object CreateOk(const std::string& collection, const std::string& json) {
    net::Response response = Create(collection, json);
    EXPECT_EQ(response.status, 201) << response.body;
    return Body(response);
  }
  void MakeNamespace(const std::string& name, const std::string& labels = "{}") {
    CreateOk("/api/v1/namespaces",
             R"({"metadata":{"name":")" + name + R"(","labels":)" + labels + "}}");
  }
  // A pod of one container; `container` and `spec` add fields to them.
  static std::string Pod(const std::string& name, const std::string& container = "",
                         const std::string& spec = "") {
    return R"({"metadata":{"name":")" + name + R"("},"spec":{)" + spec +
           (spec.empty() ? "" : ",") + R"("containers":[{"name":"main","image":"busybox:1.36")" +
           (container.empty() ? "" : "," + container) + "}]}}";
  }
};

TEST_F(AdmissionTest, ANewPodGetsTheDefaultsAndPendingStatusARealServerGivesIt) {
  json::object pod = CreateOk("/api/v1/namespaces/default/pods", Pod("plain"));
  const json::object& spec = pod["spec"].as_object();
  EXPECT_EQ(spec.at("restartPolicy"), "Always");
  EXPECT_EQ(spec.at("terminationGracePeriodSeconds"), 30);
  EXPECT_EQ(spec.at("dnsPolicy"), "ClusterFirst");
  EXPECT_EQ(spec.at("schedulerName"), "default-scheduler");
  EXPECT_EQ(spec.at("enableServiceLinks"), true);
  EXPECT_EQ(spec.at("serviceAccountName"), "default");
  EXPECT_EQ(spec.at("priority"), 0);
  EXPECT_EQ(spec.at("preemptionPolicy"), "PreemptLowerPriority");
  ASSERT_EQ(spec.at("tolerations").as_array().size(), 2u);
  EXPECT_EQ(spec.at("tolerations").at(0).at("tolerationSeconds"), 300);
  const json::object& container = spec.at("containers").at(0).as_object();
  EXPECT_EQ(container.at("imagePullPolicy"), "IfNotPresent");
  EXPECT_EQ(container.at("terminationMessagePath"), "/dev/termination-log");
  // The service account token is mounted unless the pod opts out.
  const json::object& volume = spec.at("volumes").at(0).as_object();
  EXPECT_TRUE(std::string(volume.at("name").as_string()).starts_with("kube-api-access-"));
  EXPECT_EQ(container.at("volumeMounts").at(0).at("mountPath"),
            "/var/run/secrets/kubernetes.io/serviceaccount");
  EXPECT_EQ(ToJson(pod["status"]), R"({"phase":"Pending","qosClass":"BestEffort"})");

  json::object opted_out = CreateOk("/api/v1/namespaces/default/pods",
                                    Pod("no-token", R"("image":"busybox")",
                                        R"("automountServiceAccountToken":false)"));
  EXPECT_FALSE(opted_out["spec"].as_object().contains("volumes"));
  EXPECT_EQ(opted_out["spec"].at("containers").at(0).at("imagePullPolicy"), "Always");
}

TEST_F(AdmissionTest, LimitsWithoutRequestsRequestTheLimitAndMakeTheQosClass) {
  json::object pod = CreateOk(
      "/api/v1/namespaces/default/pods",
      Pod("guaranteed", R"("resources":{"limits":{"cpu":"2","memory":"1Gi","nvidia.com/gpu":1}})"));
  EXPECT_EQ(ToJson(pod["spec"].at("containers").at(0).at("resources").at("requests")),
            R"({"cpu":"2","memory":"1Gi","nvidia.com/gpu":1})");
  EXPECT_EQ(pod["status"].at("qosClass"), "Guaranteed");
  json::object burstable = CreateOk("/api/v1/namespaces/default/pods",
                                    Pod("burstable", R"("resources":{"requests":{"cpu":"1"}})"));
  EXPECT_EQ(burstable["status"].at("qosClass"), "Burstable");
}

TEST_F(AdmissionTest, AnInvalidPodIsRefusedWith422AndEveryCause) {
  std::string message = ExpectStatus(
      Create("/api/v1/namespaces/default/pods",
             R"({"metadata":{"name":"bad"},"spec":{"restartPolicy":"Sometimes",
                 "activeDeadlineSeconds":0,
                 "containers":[{"name":"a"},{"name":"a","image":"x",
                   "resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}]}})"),
      422, "Invalid");
  EXPECT_EQ(message,
            "Pod \"bad\" is invalid: [spec.containers[0].image: Required value, "
            "spec.containers[1].name: Duplicate value: \"a\", "
            "spec.containers[1].resources.requests: Invalid value: \"2\": must be less than or "
            "equal to cpu limit of 1, "
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", "
            "\"OnFailure\", \"Never\", "
            "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, "
            "inclusive]");
  ExpectStatus(Create("/api/v1/namespaces/default/pods",
                      Pod("x", R"("resources":{"limits":{"cpu":"lots"}})")),
               400, "BadRequest");
}

TEST_F(AdmissionTest, QuotaRefusesWhatWouldExceedItInKubernetesWords) {
  MakeNamespace("work");
  CreateOk("/api/v1/namespaces/work/resourcequotas",
           R"({"metadata":{"name":"gpus"},"spec":{"hard":{"requests.nvidia.com/gpu":"8",
               "pods":"3","services":"0","services.loadbalancers":"0",
               "persistentvolumeclaims":"0"}}})");
  auto gpu_pod = [&](const std::string& name, int gpus) {
    return Pod(name, R"("resources":{"limits":{"nvidia.com/gpu":)" + std::to_string(gpus) + "}}");
  };
  CreateOk("/api/v1/namespaces/work/pods", gpu_pod("a", 6));
  EXPECT_EQ(ExpectStatus(Create("/api/v1/namespaces/work/pods", gpu_pod("b", 4)), 403,
                         "Forbidden"),
            "pods \"b\" is forbidden: exceeded quota: gpus, requested: "
            "requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=6, limited: "
            "requests.nvidia.com/gpu=8");
  EXPECT_EQ(ExpectStatus(Create("/api/v1/namespaces/work/services",
                                R"({"metadata":{"name":"web"},"spec":{"ports":[{"port":80}]}})"),
                         403, "Forbidden"),
            "services \"web\" is forbidden: exceeded quota: gpus, requested: services=1, used: "
            "services=0, limited: services=0");

  // A finished pod no longer counts: its GPUs are free again.
  ASSERT_TRUE(store_
                  .ReplaceStatus(*FindResource("", "v1", "pods"), "work", "a",
                                 json::object{{"phase", "Succeeded"}})
                  .ok());
  CreateOk("/api/v1/namespaces/work/pods", gpu_pod("b", 4));
  CreateOk("/api/v1/namespaces/work/pods", gpu_pod("c", 4));
  CreateOk("/api/v1/namespaces/work/pods", gpu_pod("d", 0));
  EXPECT_EQ(ExpectStatus(Create("/api/v1/namespaces/work/pods", gpu_pod("e", 0)), 403,
                         "Forbidden"),
            "pods \"e\" is forbidden: exceeded quota: gpus, requested: pods=1, used: pods=3, "
            "limited: pods=3");

  // The quota controller's status: hard as asked, used as it stands.
  SyncQuotaStatuses(store_, clock_.Now());
  json::object quota = Body(Call("GET", "/api/v1/namespaces/work/resourcequotas/gpus"));
  EXPECT_EQ(ToJson(quota["status"]),
            R"({"hard":{"persistentvolumeclaims":"0","pods":"3","requests.nvidia.com/gpu":"8",)"
            R"("services":"0","services.loadbalancers":"0"},"used":{)"
            R"("persistentvolumeclaims":"0","pods":"3","requests.nvidia.com/gpu":"8",)"
            R"("services":"0","services.loadbalancers":"0"}})");
}

TEST_F(AdmissionTest, AComputeQuotaRequiresEveryContainerToStateWhatItCounts) {
  MakeNamespace("work");
  CreateOk("/api/v1/namespaces/work/resourcequotas",
           R"({"metadata":{"name":"compute"},"spec":{"hard":{"limits.cpu":"4",
               "requests.memory":"8Gi"}}})");
  EXPECT_EQ(ExpectStatus(Create("/api/v1/namespaces/work/pods",
                                Pod("p", R"("resources":{"requests":{"cpu":"1"}})")),
                         403, "Forbidden"),
            "pods \"p\" is forbidden: failed quota: compute: must specify limits.cpu for: main; "
            "requests.memory for: main");
  CreateOk("/api/v1/namespaces/work/pods",
           Pod("q", R"("resources":{"limits":{"cpu":"1500m","memory":"512Mi"}})"));
  EXPECT_EQ(ExpectStatus(Create("/api/v1/namespaces/work/pods",
                                Pod("r", R"("resources":{"limits":{"cpu":"3","memory":"7Gi"}})")),
                         403, "Forbidden"),
            "pods \"r\" is forbidden: exceeded quota: compute, requested: limits.cpu=3, used: "
            "limits.cpu=1500m, limited: limits.cpu=4");
}

TEST_F(AdmissionTest, LimitRangesDefaultContainersAndRefuseWhatIsOutOfRange) {
  MakeNamespace("work");
  json::object limits = CreateOk(
      "/api/v1/namespaces/work/limitranges",
      R"({"metadata":{"name":"sizes"},"spec":{"limits":[{"type":"Container",
          "max":{"cpu":"2","memory":"2Gi"},"min":{"cpu":"100m"},
          "defaultRequest":{"cpu":"250m"},"maxLimitRequestRatio":{"cpu":"8"}}]}})");
  // The stored LimitRange has its defaults: the default limit is the max.
  EXPECT_EQ(ToJson(limits["spec"].at("limits").at(0).at("default")),
            R"({"cpu":"2","memory":"2Gi"})");
  json::object pod = CreateOk("/api/v1/namespaces/work/pods", Pod("defaulted"));
  EXPECT_EQ(ToJson(pod["spec"].at("containers").at(0).at("resources")),
            R"({"limits":{"cpu":"2","memory":"2Gi"},"requests":{"cpu":"250m","memory":"2Gi"}})");
  EXPECT_EQ(pod["metadata"].at("annotations").at("kubernetes.io/limit-ranger"),
            "LimitRanger plugin set: cpu, memory request for container main; cpu, memory limit "
            "for container main");
  EXPECT_EQ(ExpectStatus(Create("/api/v1/namespaces/work/pods",
                                Pod("big", R"("resources":{"limits":{"cpu":"4","memory":"1Gi"},
                                    "requests":{"cpu":"50m"}})")),
                         403, "Forbidden"),
            "pods \"big\" is forbidden: [minimum cpu usage per Container is 100m, but request is "
            "50m, maximum cpu usage per Container is 2, but limit is 4, cpu max limit to request "
            "ratio per Container is 8, but provided ratio is 80.000000]");
}

TEST_F(AdmissionTest, PriorityComesFromTheNamedClassOrTheGlobalDefault) {
  json::object low = CreateOk("/apis/scheduling.k8s.io/v1/priorityclasses",
                              R"({"metadata":{"name":"workspace-low"},"value":-10,
                                  "preemptionPolicy":"Never"})");
  EXPECT_EQ(low["preemptionPolicy"], "Never");
  json::object pod = CreateOk("/api/v1/namespaces/default/pods",
                              Pod("low", "", R"("priorityClassName":"workspace-low")"));
  EXPECT_EQ(pod["spec"].at("priority"), -10);
  EXPECT_EQ(pod["spec"].at("preemptionPolicy"), "Never");
  EXPECT_EQ(ExpectStatus(Create("/api/v1/namespaces/default/pods",
                                Pod("lost", "", R"("priorityClassName":"nope")")),
                         403, "Forbidden"),
            "pods \"lost\" is forbidden: no PriorityClass with name nope was found");
  EXPECT_EQ(ExpectStatus(Create("/api/v1/namespaces/default/pods",
                                Pod("forced", "", R"("priority":5)")),
                         403, "Forbidden"),
            "pods \"forced\" is forbidden: the integer value of priority (5) must not be provided "
            "in pod spec; priority admission controller computed 0 from the given PriorityClass "
            "name");
  CreateOk("/apis/scheduling.k8s.io/v1/priorityclasses",
           R"({"metadata":{"name":"everyone"},"value":100,"globalDefault":true})");
  json::object defaulted = CreateOk("/api/v1/namespaces/default/pods", Pod("any"));
  EXPECT_EQ(defaulted["spec"].at("priority"), 100);
  EXPECT_EQ(defaulted["spec"].at("priorityClassName"), "everyone");
  EXPECT_EQ(ExpectStatus(Create("/apis/scheduling.k8s.io/v1/priorityclasses",
                                R"({"metadata":{"name":"huge"},"value":2000000000})"),
                         422, "Invalid"),
            "PriorityClass.scheduling.k8s.io \"huge\" is invalid: value: Invalid value: "
            "2000000000: maximum allowed value of a user defined priority is 1000000000");
}

// A pod that meets every rule of the restricted profile.
constexpr const char* kRestrictedSpec =
    R"("securityContext":{"runAsNonRoot":true,"runAsUser":1000,"seccompProfile":{"type":"RuntimeDefault"}})";
constexpr const char* kRestrictedContainer =
    R"("securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}})";

TEST_F(AdmissionTest, PodSecurityRestrictedRefusesAPlainPodWithEveryViolation) {
  MakeNamespace("locked", R"({"pod-security.kubernetes.io/enforce":"restricted"})");
  EXPECT_EQ(ExpectStatus(Create("/api/v1/namespaces/locked/pods", Pod("plain")), 403, "Forbidden"),
            "pods \"plain\" is forbidden: violates PodSecurity \"restricted:latest\": "
            "allowPrivilegeEscalation != false (container \"main\" must set "
            "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities "
            "(container \"main\" must set securityContext.capabilities.drop=[\"ALL\"]), "
            "runAsNonRoot != true (pod or container \"main\" must set "
            "securityContext.runAsNonRoot=true), seccompProfile (pod or container \"main\" must "
            "set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")");
  CreateOk("/api/v1/namespaces/locked/pods", Pod("compliant", kRestrictedContainer, kRestrictedSpec));
}

struct RuleCase {
  std::string name;
  std::string container;  // replaces kRestrictedContainer
  std::string spec;       // added to kRestrictedSpec's spec
  std::string violation;
};

TEST_F(AdmissionTest, PodSecurityRestrictedRefusesEachRuleOnItsOwn) {
  MakeNamespace("locked", R"({"pod-security.kubernetes.io/enforce":"restricted",
                              "pod-security.kubernetes.io/enforce-version":"latest"})");
  const std::string safe = kRestrictedContainer;
  std::vector<RuleCase> cases = {
      {"escalation", R"("securityContext":{"capabilities":{"drop":["ALL"]}})", "",
       "allowPrivilegeEscalation != false (container \"main\" must set "
       "securityContext.allowPrivilegeEscalation=false)"},
      {"capabilities", R"("securityContext":{"allowPrivilegeEscalation":false,
         "capabilities":{"drop":["ALL"],"add":["NET_ADMIN","SYS_TIME"]}})", "",
       "unrestricted capabilities (container \"main\" must not include \"NET_ADMIN\", "
       "\"SYS_TIME\" in securityContext.capabilities.add)"},
      {"privileged", R"("securityContext":{"allowPrivilegeEscalation":false,"privileged":true,
         "capabilities":{"drop":["ALL"]}})", "",
       "privileged (container \"main\" must not set securityContext.privileged=true)"},
      {"host namespaces", safe, R"("hostNetwork":true,"hostPID":true)",
       "host namespaces (hostNetwork, hostPID)"},
      {"host path", safe + R"(,"volumeMounts":[{"name":"root","mountPath":"/host"}])",
       R"("volumes":[{"name":"root","hostPath":{"path":"/"}}])",
       "restricted volume types (volume \"root\" uses restricted volume type \"hostPath\")"},
      {"host port", safe + R"(,"ports":[{"containerPort":80,"hostPort":8080}])", "",
       "hostPort (container \"main\" uses hostPort 8080)"},
      {"root user", R"("securityContext":{"allowPrivilegeEscalation":false,"runAsUser":0,
         "capabilities":{"drop":["ALL"]}})", "",
       "runAsUser=0 (container \"main\" must not set runAsUser=0)"},
      {"non-root off", R"("securityContext":{"allowPrivilegeEscalation":false,
         "runAsNonRoot":false,"capabilities":{"drop":["ALL"]}})", "",
       "runAsNonRoot != true (container \"main\" must not set securityContext.runAsNonRoot=false)"},
      {"seccomp unconfined", R"("securityContext":{"allowPrivilegeEscalation":false,
         "seccompProfile":{"type":"Unconfined"},"capabilities":{"drop":["ALL"]}})", "",
       "seccompProfile (container \"main\" must not set securityContext.seccompProfile.type to "
       "\"Unconfined\")"},
      {"sysctls", safe, R"("securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"},
         "sysctls":[{"name":"kernel.msgmax","value":"1"}]})",
       "forbidden sysctls (kernel.msgmax)"},
      {"selinux", R"("securityContext":{"allowPrivilegeEscalation":false,
         "seLinuxOptions":{"type":"spc_t"},"capabilities":{"drop":["ALL"]}})", "",
       "seLinuxOptions (container \"main\" set forbidden securityContext.seLinuxOptions: type "
       "\"spc_t\")"},
      {"proc mount", R"("securityContext":{"allowPrivilegeEscalation":false,
         "procMount":"Unmasked","capabilities":{"drop":["ALL"]}})", "",
       "procMount (container \"main\" must not set securityContext.procMount to \"Unmasked\")"},
      {"probe host", safe + R"(,"livenessProbe":{"httpGet":{"host":"10.0.0.1","port":80}})", "",
       "probe or lifecycle host (container \"main\" uses probe or lifecycle host \"10.0.0.1\")"},
  };
  for (const RuleCase& rule : cases) {
    SCOPED_TRACE(rule.name);
    std::string spec = rule.spec.empty() ? std::string(kRestrictedSpec)
                                         : rule.spec.find("securityContext") == std::string::npos
                                               ? std::string(kRestrictedSpec) + "," + rule.spec
                                               : rule.spec;
    std::string message = ExpectStatus(
        Create("/api/v1/namespaces/locked/pods", Pod("p", rule.container, spec)), 403, "Forbidden");
    EXPECT_EQ(message, "pods \"p\" is forbidden: violates PodSecurity \"restricted:latest\": " +
                           rule.violation);
  }
}

TEST_F(AdmissionTest, PodSecurityWarnModeAdmitsWithAWarningHeader) {
  MakeNamespace("watched", R"({"pod-security.kubernetes.io/warn":"baseline",
                               "pod-security.kubernetes.io/warn-version":"v1.33"})");
  net::Response response = Create("/api/v1/namespaces/watched/pods",
                                  Pod("loud", R"("securityContext":{"privileged":true})"));
  EXPECT_EQ(response.status, 201) << response.body;
  EXPECT_EQ(response.headers.Get("Warning"),
            "299 - \"would violate PodSecurity \\\"baseline:v1.33\\\": privileged (container "
            "\\\"main\\\" must not set securityContext.privileged=true)\"");
  // An unreadable level fails closed, to restricted.
  MakeNamespace("typo", R"({"pod-security.kubernetes.io/enforce":"restrictd"})");
  ExpectStatus(Create("/api/v1/namespaces/typo/pods", Pod("p")), 403, "Forbidden");
}

TEST_F(AdmissionTest, NamespaceGuardKindsAreStoredDefaultedValidatedAndListed) {
  MakeNamespace("work");
  json::object policy = CreateOk(
      "/apis/networking.k8s.io/v1/namespaces/work/networkpolicies",
      R"({"metadata":{"name":"deny-all"},"spec":{"podSelector":{},"policyTypes":["Ingress","Egress"]}})");
  EXPECT_EQ(ToJson(policy["spec"]), R"({"podSelector":{},"policyTypes":["Ingress","Egress"]})");
  json::object egress = CreateOk("/apis/networking.k8s.io/v1/namespaces/work/networkpolicies",
                                 R"({"metadata":{"name":"dns"},"spec":{"egress":[{}]}})");
  EXPECT_EQ(ToJson(egress["spec"].at("policyTypes")), R"(["Ingress","Egress"])");
  EXPECT_EQ(ExpectStatus(Create("/apis/networking.k8s.io/v1/namespaces/work/networkpolicies",
                                R"({"metadata":{"name":"x"},"spec":{"policyTypes":["Sideways"]}})"),
                         422, "Invalid"),
            "NetworkPolicy.networking.k8s.io \"x\" is invalid: spec.policyTypes[0]: Unsupported "
            "value: \"Sideways\": supported values: \"Egress\", \"Ingress\"");

  json::object vap = CreateOk(
      "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
      R"({"metadata":{"name":"workspace-pods"},"spec":{"matchConstraints":{"resourceRules":[
          {"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],"resources":["pods"]}]},
          "validations":[{"expression":"object.spec.automountServiceAccountToken == false"}]}})");
  EXPECT_EQ(vap["spec"].at("failurePolicy"), "Fail");
  EXPECT_EQ(vap["spec"].at("matchConstraints").at("matchPolicy"), "Equivalent");
  EXPECT_EQ(vap["spec"].at("matchConstraints").at("resourceRules").at(0).at("scope"), "*");
  CreateOk("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
           R"({"metadata":{"name":"workspace-pods"},"spec":{"policyName":"workspace-pods",
               "validationActions":["Deny"]}})");
  EXPECT_EQ(ExpectStatus(Create("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
                                R"({"metadata":{"name":"empty"},"spec":{}})"),
                         422, "Invalid"),
            "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"empty\" is invalid: "
            "[spec.policyName: Required value, spec.validationActions: Required value: at least "
            "one validation action is required]");

  json::object table = Body(Call("GET", "/apis/networking.k8s.io/v1/namespaces/work/networkpolicies",
                                 "", "", testing::kTableAccept));
  ASSERT_EQ(table["rows"].as_array().size(), 2u);
  EXPECT_EQ(ToJson(table["rows"].at(0).at("cells").at(1)), R"("<none>")");
  json::object list = Body(Call("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"));
  EXPECT_EQ(list["kind"], "ValidatingAdmissionPolicyList");
  ASSERT_EQ(list["items"].as_array().size(), 1u);
}

TEST_F(AdmissionTest, DiscoveryServesTheNewKindsAndPodsExec) {
  json::object groups = Body(Call("GET", "/apis"));
  std::string text = ToJson(groups);
  for (const char* group : {"networking.k8s.io", "scheduling.k8s.io", "admissionregistration.k8s.io"}) {
    EXPECT_NE(text.find(std::string("\"name\":\"") + group + "\""), std::string::npos) << group;
  }
  std::string core = ToJson(Body(Call("GET", "/api/v1")));
  EXPECT_NE(core.find(R"({"name":"resourcequotas","singularName":"resourcequota","namespaced":true,"kind":"ResourceQuota")"),
            std::string::npos);
  EXPECT_NE(core.find(R"({"name":"pods/exec","singularName":"","namespaced":true,"kind":"PodExecOptions","verbs":["create","get"]})"),
            std::string::npos);
}

TEST_F(AdmissionTest, ExecOptionsAreCheckedFirst) {
  CreateOk("/api/v1/namespaces/default/pods", Pod("p"));
  EXPECT_EQ(ExpectStatus(Call("GET", "/api/v1/namespaces/default/pods/p/exec?stdout=1"), 400,
                         "BadRequest"),
            "you must specify at least one command for the container");
  EXPECT_EQ(ExpectStatus(Call("GET", "/api/v1/namespaces/default/pods/p/exec?command=id"), 400,
                         "BadRequest"),
            "you must specify at least 1 of stdin, stdout, stderr");
}

}  // namespace
}  // namespace uplink::kubesim
