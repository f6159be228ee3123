package charttest

import (
	"fmt"
	"strings"
	"testing"
)

const agentContainerSecurity = `{"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
	"privileged": false, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
	"capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}`

// The one exception to "non-root": the node DaemonSet's init container that gives the
// kubelet-created spool directory to the agent's user, with CAP_CHOWN and CAP_FOWNER only.
const spoolOwnerSecurity = `{"runAsNonRoot": false, "runAsUser": 0, "runAsGroup": 0,
	"privileged": false, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
	"capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]},
	"seccompProfile": {"type": "RuntimeDefault"}}`

// Every pod: non-root, read-only root filesystem, no capabilities, no privilege escalation,
// seccomp RuntimeDefault, requests and limits, /healthz and /readyz probes, Prometheus
// annotations, no host namespaces or ports.
func TestEveryPodIsLockedDown(t *testing.T) {
	chart := loadChart(t)
	for _, c := range matrix {
		result := render(t, chart, c)
		for _, w := range workloads(result) {
			component := componentOf(w)
			where := fmt.Sprintf("case %s %s", c.name, get(w, "metadata", "name"))
			spec := podSpec(w)

			podSecurity := `{"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
				"fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}}`
			spoolOwner := spoolOwnerPath(c, component)
			if spoolOwner != "" {
				podSecurity = `{"runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
					"fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}}`
			}
			if component == "experiments" && c.name == "experiments-volumes" {
				// Groups it joins to read the scanned files, as experiments.supplementalGroups says.
				podSecurity = strings.Replace(podSecurity, `"fsGroup"`, `"supplementalGroups": [1000], "fsGroup"`, 1)
			}
			if !sameJSON(t, spec["securityContext"], podSecurity) {
				t.Errorf("%s: pod securityContext %s", where, toJSON(spec["securityContext"]))
			}
			for _, field := range []string{"hostNetwork", "hostPID", "hostIPC", "hostUsers", "shareProcessNamespace"} {
				if _, set := spec[field]; set {
					t.Errorf("%s: sets %s", where, field)
				}
			}
			if spec["enableServiceLinks"] != false {
				t.Errorf("%s: enableServiceLinks is not false", where)
			}

			containers := asList(spec["containers"])
			if len(containers) != 1 {
				t.Fatalf("%s: %d containers", where, len(containers))
			}
			container := asMap(containers[0])
			if container["name"] != component {
				t.Errorf("%s: container named %v", where, container["name"])
			}
			if !sameJSON(t, container["securityContext"], agentContainerSecurity) {
				t.Errorf("%s: container securityContext %s", where, toJSON(container["securityContext"]))
			}
			checkResources(t, where, c, container["resources"])
			if !sameJSON(t, container["ports"], `[{"name": "http-health", "containerPort": 8081, "protocol": "TCP"}]`) {
				t.Errorf("%s: ports %s", where, toJSON(container["ports"]))
			}
			if get(container, "livenessProbe", "httpGet", "path") != "/healthz" ||
				get(container, "livenessProbe", "httpGet", "port") != "http-health" ||
				get(container, "readinessProbe", "httpGet", "path") != "/readyz" ||
				get(container, "readinessProbe", "httpGet", "port") != "http-health" {
				t.Errorf("%s: probes %s %s", where, toJSON(container["livenessProbe"]), toJSON(container["readinessProbe"]))
			}
			annotations := asMap(get(w, "spec", "template", "metadata", "annotations"))
			if annotations["prometheus.io/scrape"] != "true" || annotations["prometheus.io/port"] != "8081" ||
				annotations["prometheus.io/path"] != "/metrics" {
				t.Errorf("%s: scrape annotations %s", where, toJSON(annotations))
			}
			checkMounts(t, where, component, container)

			initContainers := asList(spec["initContainers"])
			if spoolOwner == "" {
				if len(initContainers) != 0 {
					t.Errorf("%s: has init containers", where)
				}
				continue
			}
			if len(initContainers) != 1 {
				t.Fatalf("%s: %d init containers, want the spool-owner", where, len(initContainers))
			}
			init := asMap(initContainers[0])
			if init["name"] != "spool-owner" || !sameJSON(t, init["securityContext"], spoolOwnerSecurity) {
				t.Errorf("%s: init container %v securityContext %s", where, init["name"], toJSON(init["securityContext"]))
			}
			if !sameJSON(t, init["command"], `["/usr/bin/install", "-d", "-m", "0700", "-o", "65532", "-g", "65532",
				"`+spoolOwner+`"]`) {
				t.Errorf("%s: spool-owner command %s", where, toJSON(init["command"]))
			}
			mount := map[string]string{"node": "/var/lib/uplink-agent", "cluster": "/var/lib/uplink-agent/cluster"}[component]
			if !sameJSON(t, init["volumeMounts"], `[{"name": "spool", "mountPath": "`+mount+`"}]`) {
				t.Errorf("%s: spool-owner mounts %s", where, toJSON(init["volumeMounts"]))
			}
			if get(init, "resources", "limits", "memory") == nil || get(init, "resources", "requests", "cpu") == nil {
				t.Errorf("%s: spool-owner resources %s", where, toJSON(init["resources"]))
			}
		}
	}
}

func checkResources(t *testing.T, where string, c renderCase, resources interface{}) {
	t.Helper()
	r := asMap(resources)
	for _, path := range [][]string{{"requests", "cpu"}, {"requests", "memory"}, {"limits", "memory"}} {
		if get(r, path...) == nil {
			t.Errorf("%s: no resources.%s", where, strings.Join(path, "."))
		}
	}
	if c.name != "custom-names" && get(r, "limits", "cpu") == nil {
		t.Errorf("%s: no CPU limit by default", where)
	}
}

// Host paths only in the node DaemonSet (exactly /proc and / read-only and the spool) and,
// read-only, the folders the experiments role is told to scan; every other mount read-only
// except the scratch and state directories.
func checkMounts(t *testing.T, where, component string, container map[string]interface{}) {
	t.Helper()
	writable := map[string]bool{}
	for _, raw := range asList(container["volumeMounts"]) {
		m := asMap(raw)
		if m["readOnly"] != true {
			writable[asString(m["name"])] = true
		}
		if _, sub := m["subPath"]; sub {
			t.Errorf("%s: mount %s uses subPath (a rotated Secret would not reach the pod)", where, m["name"])
		}
	}
	want := map[string]map[string]bool{
		"inventory": {},
		"cluster":   {"spool": true, "tmp": true},
		"node":      {"spool": true},
		// Its cursor and spool; what it scans is read-only.
		"experiments": {"state": true},
		// The workspace controller keeps nothing: its state is in the cluster and the console.
		"workspace": {},
	}[component]
	if toJSON(writable) != toJSON(want) {
		t.Errorf("%s: writable mounts %v, want %v", where, writable, want)
	}
	if component != "node" {
		return
	}
	var hostMounts []string
	for _, raw := range asList(container["volumeMounts"]) {
		m := asMap(raw)
		if strings.HasPrefix(asString(m["name"]), "host-") {
			hostMounts = append(hostMounts, toJSON(m))
		}
	}
	wantHost := []string{
		`{"mountPath":"/host/proc","name":"host-proc","readOnly":true,"recursiveReadOnly":"IfPossible"}`,
		`{"mountPath":"/host","mountPropagation":"HostToContainer","name":"host-root","readOnly":true}`,
	}
	if strings.Join(hostMounts, " ") != strings.Join(wantHost, " ") {
		t.Errorf("%s: host mounts\n got %v\nwant %v", where, hostMounts, wantHost)
	}
}

func TestHostPathsOnlyForTheNodeRoleTheSpoolsAndScannedFolders(t *testing.T) {
	chart := loadChart(t)
	for _, c := range matrix {
		result := render(t, chart, c)
		for _, w := range workloads(result) {
			var hostPaths []string
			var emptyDirs []string
			for _, raw := range asList(podSpec(w)["volumes"]) {
				v := asMap(raw)
				if hp := asMap(v["hostPath"]); hp != nil {
					hostPaths = append(hostPaths, fmt.Sprintf("%s=%s(%s)", v["name"], hp["path"], hp["type"]))
				}
				if ed, ok := v["emptyDir"]; ok {
					if get(asMap(ed), "sizeLimit") == nil {
						t.Errorf("case %s: emptyDir %s has no sizeLimit", c.name, v["name"])
					}
					emptyDirs = append(emptyDirs, asString(v["name"]))
				}
			}
			component := componentOf(w)
			want := ""
			spool := "/var/lib/uplink-agent"
			if c.name == "kubernetes-gpu" {
				spool = "/data/uplink/spool"
			}
			if component == "node" {
				want = "spool=" + spool + "(DirectoryOrCreate) host-proc=/proc(Directory) host-root=/(Directory)"
			}
			// The cluster role's spool: its own directory under the same host path, unless
			// it is on a volume claim.
			if spoolOwnerPath(c, component) != "" && component == "cluster" {
				want = "spool=" + spool + "/cluster(DirectoryOrCreate)"
			}
			if component == "experiments" && c.name == "experiments-volumes" {
				want = "scan-wandb=/data/wandb(Directory)"
			}
			if got := strings.Join(hostPaths, " "); got != want {
				t.Errorf("case %s: %s host paths %q, want %q", c.name, component, got, want)
			}
			wantEmpty := map[string]string{"cluster": "tmp", "experiments": "state"}[component]
			if component == "experiments" && c.name == "experiments-server" {
				wantEmpty = "" // its state is on a PVC
			}
			if got := strings.Join(emptyDirs, " "); got != wantEmpty {
				t.Errorf("case %s: %s emptyDirs %q, want %q", c.name, component, got, wantEmpty)
			}
		}
	}
}

// The directory the spool-owner init container makes, or "" for a pod that has none: the
// node role's spool, and the cluster role's when it is on a host path.
func spoolOwnerPath(c renderCase, component string) string {
	switch {
	case component == "node":
		return "/var/lib/uplink-agent/node"
	case component == "cluster" && !strings.HasPrefix(c.name, "cluster-spool-"):
		return "/var/lib/uplink-agent/cluster"
	}
	return ""
}
