package charttest

import (
	"strings"
	"testing"

	"uplink/chart/helmlite"
)

// The workspace controller presents the offer's execution credential, never the connection
// token: a mounted file from execution.credential's Secret (the chart makes it from
// execution.credential.value), re-read on rotation; nothing else has it.
func TestExecutionCredentialIsAMountedFileOfTheControllerOnly(t *testing.T) {
	chart := loadChart(t)
	const credential = "exe_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
	for _, c := range matrix {
		if !strings.HasPrefix(c.name, "execution") {
			continue
		}
		result := render(t, chart, c)
		wantSecret := "uplink-execution"
		if c.name == "execution-runtime" {
			wantSecret = "uplink-agent-execution"
			secret := find(t, result, "Secret", wantSecret)
			if !sameJSON(t, secret["data"], `{"UPLINK_EXECUTION_CREDENTIAL": "ZXhlXzAxMjM0NTY3ODlhYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ekFCQ0RFRkc="}`) {
				t.Errorf("execution Secret data %s", toJSON(secret["data"]))
			}
		} else if has(result, "Secret", "uplink-agent-execution") {
			t.Errorf("case %s: the chart made an execution Secret although existingSecret is set", c.name)
		}
		for _, w := range workloads(result) {
			text := toJSON(podSpec(w))
			if strings.Contains(text, credential) || (componentOf(w) != "workspace" && strings.Contains(text, "execution")) {
				t.Errorf("case %s: %s sees the execution credential other than as the controller's file", c.name, get(w, "metadata", "name"))
			}
		}
		controller := find(t, result, "Deployment", "uplink-agent-workspace")
		found := false
		for _, v := range asList(podSpec(controller)["volumes"]) {
			if asMap(v)["name"] == "credential" {
				found = sameJSON(t, asMap(v)["secret"], `{"secretName": "`+wantSecret+`", "defaultMode": 288,
					"items": [{"key": "UPLINK_EXECUTION_CREDENTIAL", "path": "credential"}]}`)
			}
		}
		if !found {
			t.Errorf("case %s: the controller has no credential volume from Secret %s", c.name, wantSecret)
		}
		args := toJSON(asMap(asList(podSpec(controller)["containers"])[0])["args"])
		containsAll(t, "controller args", args, `"workspace"`, `"--config=/etc/uplink/execution/execution.json"`,
			`"--token-file=/var/run/secrets/uplink-execution/credential"`, `"--release=uplink-agent"`)
	}
}

// The workload namespace and its guards are kept when the release is uninstalled; the
// controller's own objects are not. The quota is the capacity limit and zero Services, claims
// and load balancers; the priority class never preempts.
func TestExecutionGuardsAreKeptAndSized(t *testing.T) {
	chart := loadChart(t)
	result := render(t, chart, renderCase{name: "execution", kubeVersion: "v1.35.0", values: executionValues})
	kept := map[string]bool{}
	for _, m := range result.Manifests {
		if get(m.Object, "metadata", "annotations", "helm.sh/resource-policy") == "keep" {
			kept[asString(m.Object["kind"])+"/"+asString(get(m.Object, "metadata", "name"))] = true
		}
	}
	want := []string{"Namespace/uplink-workspaces", "ResourceQuota/uplink-workspaces", "LimitRange/uplink-workspaces",
		"NetworkPolicy/default-deny", "PriorityClass/uplink-workspace", "ValidatingAdmissionPolicy/uplink-workspace",
		"ValidatingAdmissionPolicyBinding/uplink-workspace"}
	if len(kept) != len(want) {
		t.Errorf("kept on uninstall: %v, want %v", kept, want)
	}
	for _, name := range want {
		if !kept[name] {
			t.Errorf("%s is not kept on uninstall", name)
		}
	}
	namespace := find(t, result, "Namespace", "uplink-workspaces")
	if get(namespace, "metadata", "labels", "pod-security.kubernetes.io/enforce") != "restricted" {
		t.Errorf("namespace labels %s", toJSON(get(namespace, "metadata", "labels")))
	}
	quota := find(t, result, "ResourceQuota", "uplink-workspaces")
	sameJSON(t, get(quota, "spec", "hard"), `{"requests.nvidia.com/gpu": "8", "requests.cpu": "64000m",
		"limits.cpu": "64000m", "requests.memory": "549755813888", "limits.memory": "549755813888",
		"requests.ephemeral-storage": "858993459200", "limits.ephemeral-storage": "858993459200",
		"pods": "8", "services": "0", "services.loadbalancers": "0", "services.nodeports": "0",
		"persistentvolumeclaims": "0"}`)
	priority := find(t, result, "PriorityClass", "uplink-workspace")
	if priority["preemptionPolicy"] != "Never" || toJSON(priority["value"]) != "-100" {
		t.Errorf("priority class %s", toJSON(priority))
	}
	binding := find(t, result, "ValidatingAdmissionPolicyBinding", "uplink-workspace")
	sameJSON(t, binding["spec"], `{"policyName": "uplink-workspace", "validationActions": ["Deny"],
		"matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "uplink-workspaces"}}}}`)
}

// Execution is refused, saying why, outside Kubernetes 1.34-1.36, without a pinned image or
// the review's figures, and in the release's own namespace.
func TestExecutionRefusals(t *testing.T) {
	chart := loadChart(t)
	cases := []struct {
		name, kubeVersion, values, want string
	}{
		{"old cluster", "v1.33.4", executionValues, "execution.enabled needs Kubernetes 1.34 to 1.36 (the workspace controller refuses others), and this cluster is v1.33.4"},
		{"new cluster", "v1.37.0", executionValues, "needs Kubernetes 1.34 to 1.36"},
		{"no image", "v1.35.0", executionValues + "  workspaceImage: \"\"\n", "execution.workspaceImage must be pinned by digest"},
		{"no nodes", "v1.35.0", executionValues + "  nodes: []\n", "execution.nodes must name the approved nodes"},
		{"no figures", "v1.35.0", executionValues + "  resourcesPerGpu: {cpuMillis: 0, memoryBytes: 0, ephemeralStorageBytes: 0}\n", "execution.resourcesPerGpu"},
		{"release namespace", "v1.35.0", executionValues + "  namespace: uplink\n", "must be a namespace of its own"},
		{"no credential", "v1.35.0", executionValues + "  credential: {existingSecret: \"\"}\n", "set execution.credential.existingSecret"},
	}
	for _, c := range cases {
		_, err := helmlite.Render(chart, helmlite.Options{ReleaseName: "uplink-agent", Namespace: "uplink",
			KubeVersion: c.kubeVersion, Values: userValues(t, requiredValues, c.values)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// execution.sshEnabled turns the controller's SSH tunnel on (--ssh) and changes nothing else
// of its pod: the tunnel is one outbound WebSocket to the console origin the network policy
// already allows, and sshd runs through the exec API the controller already has.
func TestExecutionSshEnabledAddsTheFlagOnly(t *testing.T) {
	chart := loadChart(t)
	argsOf := func(values string) (string, object) {
		result := render(t, chart, renderCase{name: "execution", kubeVersion: "v1.35.0", values: values})
		controller := find(t, result, "Deployment", "uplink-agent-workspace")
		return toJSON(asMap(asList(podSpec(controller)["containers"])[0])["args"]), podSpec(controller)
	}
	off, offSpec := argsOf(executionValues)
	if strings.Contains(off, "--ssh") {
		t.Errorf("SSH is off by default, yet the controller args are %s", off)
	}
	on, onSpec := argsOf(executionValues + "\n  sshEnabled: true\n")
	containsAll(t, "controller args with sshEnabled", on, `"--ssh"`)
	delete(asMap(asList(onSpec["containers"])[0]), "args")
	delete(asMap(asList(offSpec["containers"])[0]), "args")
	if toJSON(onSpec) != toJSON(offSpec) {
		t.Errorf("sshEnabled changed more of the controller's pod than its args:\n%s\n%s", toJSON(onSpec), toJSON(offSpec))
	}
}
