package charttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The default install (console and token given, nothing else) is the inventory role alone,
// exactly these objects.
func TestDefaultRenderHasExactlyTheInventoryObjects(t *testing.T) {
	result := render(t, loadChart(t), renderCase{name: "defaults"})
	want := []string{
		"ClusterRole/uplink-uplink-agent-inventory",
		"ClusterRoleBinding/uplink-uplink-agent-inventory",
		"ConfigMap/uplink-agent-status",
		"Deployment/uplink-agent-inventory",
		"NetworkPolicy/uplink-agent-inventory",
		"Role/uplink-agent-inventory",
		"RoleBinding/uplink-agent-inventory",
		"ServiceAccount/uplink-agent-inventory",
	}
	if got := inventoryOf(result); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("objects:\n got %v\nwant %v", got, want)
	}
	for _, m := range result.Manifests {
		if ns := asString(get(m.Object, "metadata", "namespace")); ns != "" && ns != "uplink" {
			t.Errorf("%s/%s is in namespace %q, not the release's", m.Kind(), m.Name(), ns)
		}
	}
	container := asMap(asList(podSpec(find(t, result, "Deployment", "uplink-agent-inventory"))["containers"])[0])
	if !sameJSON(t, container["args"], `["inventory", "--console=https://console.example.com",
		"--token-file=/var/run/secrets/uplink/token", "--log-level=info",
		"--health-listen=0.0.0.0:8081", "--selector=nvidia.com/gpu.present=true",
		"--status-configmap=uplink-agent-status"]`) {
		t.Errorf("inventory args: %s", toJSON(container["args"]))
	}
	if image := asString(container["image"]); image != "ghcr.io/uplink/uplink-agent:0.1.0" {
		t.Errorf("default image %q: want the appVersion tag", image)
	}
}

// kubernetes.enabled adds the cluster Deployment and the node DaemonSet with their own
// service accounts, and the cluster role's RBAC.
func TestKubernetesEnabledAddsClusterAndNodeWorkloads(t *testing.T) {
	result := render(t, loadChart(t), renderCase{name: "kubernetes", values: "kubernetes: {enabled: true}"})
	for _, want := range [][2]string{
		{"Deployment", "uplink-agent-cluster"}, {"DaemonSet", "uplink-agent-node"},
		{"ServiceAccount", "uplink-agent-cluster"}, {"ServiceAccount", "uplink-agent-node"},
		{"ClusterRole", "uplink-uplink-agent-cluster"}, {"ClusterRoleBinding", "uplink-uplink-agent-cluster"},
		{"NetworkPolicy", "uplink-agent-cluster"}, {"NetworkPolicy", "uplink-agent-node"},
	} {
		find(t, result, want[0], want[1])
	}
	cluster := asMap(asList(podSpec(find(t, result, "Deployment", "uplink-agent-cluster"))["containers"])[0])
	if !sameJSON(t, cluster["args"], `["cluster", "--console=https://console.example.com",
		"--token-file=/var/run/secrets/uplink/token", "--log-level=info", "--listen=0.0.0.0:8081",
		"--state-dir=/var/lib/uplink-agent/cluster", "--max-bytes=536870912",
		"--stream=cluster/$(NODE_NAME)",
		"--kubectl=/usr/local/bin/kubectl", "--cache-dir=/tmp/uplink-kubectl"]`) {
		t.Errorf("cluster args: %s", toJSON(cluster["args"]))
	}
	if !sameJSON(t, cluster["env"], `[
		{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
		{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]`) {
		t.Errorf("cluster env: %s", toJSON(cluster["env"]))
	}
	// The spool outlives the pod: never two pods on it at once.
	if !sameJSON(t, get(find(t, result, "Deployment", "uplink-agent-cluster"), "spec", "strategy"),
		`{"type": "Recreate"}`) {
		t.Errorf("cluster strategy: %s", toJSON(get(find(t, result, "Deployment", "uplink-agent-cluster"), "spec", "strategy")))
	}
	if image := asString(cluster["image"]); image != "ghcr.io/uplink/uplink-agent-cluster:0.1.0" {
		t.Errorf("cluster image %q", image)
	}
	node := asMap(asList(podSpec(find(t, result, "DaemonSet", "uplink-agent-node"))["containers"])[0])
	if !sameJSON(t, node["args"], `["node", "--console=https://console.example.com",
		"--token-file=/var/run/secrets/uplink/token", "--log-level=info", "--listen=0.0.0.0:8081",
		"--state-dir=/var/lib/uplink-agent/node", "--host-proc=/host/proc", "--host-root=/host",
		"--cluster-uid-file=/var/run/uplink-cluster/clusterUID"]`) {
		t.Errorf("node args: %s", toJSON(node["args"]))
	}
	if !sameJSON(t, node["env"], `[
		{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
		{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]`) {
		t.Errorf("node env without a runtime class: %s", toJSON(node["env"]))
	}
	ds := find(t, result, "DaemonSet", "uplink-agent-node")
	if !sameJSON(t, get(ds, "spec", "updateStrategy"),
		`{"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "10%"}}`) {
		t.Errorf("node update strategy: %s", toJSON(get(ds, "spec", "updateStrategy")))
	}
	if !sameJSON(t, podSpec(ds)["tolerations"], `[{"operator": "Exists"}]`) {
		t.Errorf("default tolerations: %s", toJSON(podSpec(ds)["tolerations"]))
	}
	if _, set := podSpec(ds)["runtimeClassName"]; set {
		t.Error("runtimeClassName set although kubernetes.node.gpu.runtimeClassName is empty")
	}
}

func TestGPURuntimeClassNodeSelectorAndSpoolPath(t *testing.T) {
	var gpuCase renderCase
	for _, c := range matrix {
		if c.name == "kubernetes-gpu" {
			gpuCase = c
		}
	}
	result := render(t, loadChart(t), gpuCase)
	spec := podSpec(find(t, result, "DaemonSet", "uplink-agent-node"))
	if spec["runtimeClassName"] != "nvidia" {
		t.Errorf("runtimeClassName %v", spec["runtimeClassName"])
	}
	if !sameJSON(t, spec["nodeSelector"], `{"nvidia.com/gpu.present": "true"}`) ||
		!sameJSON(t, spec["tolerations"], `[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]`) {
		t.Errorf("placement: nodeSelector %s tolerations %s", toJSON(spec["nodeSelector"]), toJSON(spec["tolerations"]))
	}
	env := toJSON(asMap(asList(spec["containers"])[0])["env"])
	containsAll(t, "node env with a runtime class", env,
		`{"name":"NVIDIA_VISIBLE_DEVICES","value":"all"}`,
		`{"name":"NVIDIA_DRIVER_CAPABILITIES","value":"utility"}`)
	if resources := toJSON(asMap(asList(spec["containers"])[0])["resources"]); strings.Contains(resources, "gpu") {
		t.Errorf("the node pod must not request GPUs: %s", resources)
	}
	for _, v := range asList(spec["volumes"]) {
		if asMap(v)["name"] == "spool" && get(asMap(v), "hostPath", "path") != "/data/uplink/spool" {
			t.Errorf("spool volume %s", toJSON(v))
		}
	}
}

// The token is used only as a mounted file: never an environment variable, never an
// argument; token.value becomes a Secret, and existingSecret takes precedence.
func TestTokenIsAMountedFileFromTheRightSecret(t *testing.T) {
	chart := loadChart(t)
	const token = "agt_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
	for _, c := range matrix {
		result := render(t, chart, c)
		wantSecret := "agent-connection-token"
		if c.name == "token-value" {
			wantSecret = "uplink-agent-token"
			secret := find(t, result, "Secret", "uplink-agent-token")
			if !sameJSON(t, secret["data"], `{"UPLINK_AGENT_TOKEN": "YWd0XzAxMjM0NTY3ODlhYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ekFCQ0RFRkc="}`) {
				t.Errorf("token Secret data %s", toJSON(secret["data"]))
			}
		} else if has(result, "Secret", "uplink-agent-token") {
			t.Errorf("case %s: the chart made a Secret although token.existingSecret is set", c.name)
		}
		for _, w := range workloads(result) {
			if componentOf(w) == "workspace" {
				continue // it presents the execution credential (TestExecutionCredential...)
			}
			spec := podSpec(w)
			text := toJSON(spec)
			if strings.Contains(text, token) || strings.Contains(text, "secretKeyRef") {
				t.Errorf("case %s: %s passes the token other than as a file", c.name, get(w, "metadata", "name"))
			}
			found := false
			for _, v := range asList(spec["volumes"]) {
				if asMap(v)["name"] == "token" {
					found = sameJSON(t, asMap(v)["secret"], `{"secretName": "`+wantSecret+`", "defaultMode": 288,
						"items": [{"key": "UPLINK_AGENT_TOKEN", "path": "token"}]}`)
				}
			}
			if !found {
				t.Errorf("case %s: %s has no token volume from Secret %s", c.name, get(w, "metadata", "name"), wantSecret)
			}
		}
	}
}

// The cluster role's spool on a volume claim: the chart makes one (kept on uninstall) with
// the storage class and size asked, or uses the claim named; no host path then, and no root
// init container.
func TestKubernetesEnabledClusterSpoolOnAClaim(t *testing.T) {
	chart := loadChart(t)
	for _, c := range matrix {
		if !strings.HasPrefix(c.name, "cluster-spool-") {
			continue
		}
		result := render(t, chart, c)
		deployment := find(t, result, "Deployment", "uplink-agent-cluster")
		var claim string
		for _, raw := range asList(podSpec(deployment)["volumes"]) {
			if v := asMap(raw); v["name"] == "spool" {
				claim = asString(get(v, "persistentVolumeClaim", "claimName"))
			}
		}
		container := asMap(asList(podSpec(deployment)["containers"])[0])
		args := toJSON(container["args"])
		if !strings.Contains(args, `"--stream=cluster/uplink-agent"`) || !strings.Contains(args, `"--max-bytes=536870912"`) {
			t.Errorf("case %s: args %s", c.name, args)
		}
		if c.name == "cluster-spool-existing-claim" {
			if claim != "uplink-spool" {
				t.Errorf("case %s: claim %q", c.name, claim)
			}
			if len(byKind(result, "PersistentVolumeClaim")) != 0 {
				t.Errorf("case %s: makes a claim though one is named", c.name)
			}
			continue
		}
		if claim != "uplink-agent-cluster-spool" {
			t.Errorf("case %s: claim %q", c.name, claim)
		}
		pvc := find(t, result, "PersistentVolumeClaim", "uplink-agent-cluster-spool")
		if !sameJSON(t, pvc["spec"], `{"accessModes": ["ReadWriteOnce"], "storageClassName": "fast-ssd",
			"resources": {"requests": {"storage": "2Gi"}}}`) {
			t.Errorf("case %s: claim spec %s", c.name, toJSON(pvc["spec"]))
		}
		if get(pvc, "metadata", "annotations", "helm.sh/resource-policy") != "keep" {
			t.Errorf("case %s: the claim is not kept on uninstall", c.name)
		}
	}
}

func TestImagesByTagOrDigest(t *testing.T) {
	chart := loadChart(t)
	for _, c := range matrix {
		result := render(t, chart, c)
		for _, w := range workloads(result) {
			spec := podSpec(w)
			for _, list := range []string{"initContainers", "containers"} {
				for _, raw := range asList(spec[list]) {
					image := asString(asMap(raw)["image"])
					var pattern string
					switch {
					case c.name == "digests" && componentOf(w) == "cluster":
						pattern = `^ghcr\.io/uplink/uplink-agent-cluster@sha256:2{64}$`
					case c.name == "digests":
						pattern = `^ghcr\.io/uplink/uplink-agent@sha256:1{64}$`
					case componentOf(w) == "cluster":
						pattern = `^ghcr\.io/uplink/uplink-agent-cluster:0\.1\.0$`
					default:
						pattern = `^ghcr\.io/uplink/uplink-agent:0\.1\.0$`
					}
					if !regexp.MustCompile(pattern).MatchString(image) {
						t.Errorf("case %s: %s image %q, want %s", c.name, get(w, "metadata", "name"), image, pattern)
					}
				}
			}
		}
	}
}

// The chart's version and appVersion follow the project's version.
func TestChartVersionFollowsTheProject(t *testing.T) {
	cmake, err := os.ReadFile(filepath.Join(sourceDir(t), "CMakeLists.txt"))
	if err != nil {
		t.Fatal(err)
	}
	match := regexp.MustCompile(`project\(uplink VERSION ([0-9.]+)`).FindSubmatch(cmake)
	if match == nil {
		t.Fatal("no project(uplink VERSION ...) in CMakeLists.txt")
	}
	meta := loadChart(t).Metadata
	if meta.AppVersion != string(match[1]) || meta.Version != string(match[1]) {
		t.Errorf("Chart.yaml version %s appVersion %s; the project is %s", meta.Version, meta.AppVersion, match[1])
	}
	if meta.KubeVersion == "" {
		t.Error("Chart.yaml has no kubeVersion")
	}
}

// The chart's kubeVersion is enforced as Helm enforces it.
func TestKubeVersionGate(t *testing.T) {
	chart := loadChart(t)
	out, err := runChartrender(t, "--kube-version", "v1.29.9", "--set", "config.baseUrl=https://c.example",
		"--set", "token.existingSecret=s", chart.Dir)
	if err == nil || !strings.Contains(out, "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.9") {
		t.Errorf("1.29 accepted or unclear: %v\n%s", err, out)
	}
	if out, err := runChartrender(t, "--kube-version", "v1.36.1", "--set", "config.baseUrl=https://c.example",
		"--set", "token.existingSecret=s", chart.Dir); err != nil {
		t.Errorf("1.36 refused: %v\n%s", err, out)
	}
}

func runChartrender(t *testing.T, args ...string) (string, error) {
	t.Helper()
	binary := os.Getenv("UPLINK_CHARTRENDER")
	if binary == "" {
		t.Fatal("UPLINK_CHARTRENDER is not set (run through ctest)")
	}
	out, err := exec.Command(binary, args...).CombinedOutput()
	return string(out), err
}

// Every spool holds its cap on disk unless spool.reserveDisk is false: then the node, cluster
// and experiments roles are each told so, and by default none is.
func TestSpoolsReserveTheirDiskUnlessToldNot(t *testing.T) {
	chart := loadChart(t)
	for _, m := range matrix {
		if m.name != "spool-not-reserved" && m.name != "kubernetes" && m.name != "experiments-volumes" {
			continue
		}
		result := render(t, chart, m)
		for _, workload := range [][2]string{
			{"DaemonSet", "uplink-agent-node"}, {"Deployment", "uplink-agent-cluster"},
			{"Deployment", "uplink-agent"},
		} {
			if m.name != "spool-not-reserved" && !has(result, workload[0], workload[1]) {
				continue
			}
			args := toJSON(asMap(asList(podSpec(find(t, result, workload[0], workload[1]))["containers"])[0])["args"])
			told := strings.Contains(args, `"--reserve-disk=false"`)
			if told != (m.name == "spool-not-reserved") {
				t.Errorf("%s: %s %s args %s", m.name, workload[0], workload[1], args)
			}
		}
	}
}
