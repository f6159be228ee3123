// Package charttest checks the uplink-agent chart as rendered by helmlite: the objects, their
// permissions, network policies and security settings, the schema's refusals, and that the
// checked-in manifests and Dockerfiles are what they should be.
//
// Environment (set by tests/chart/CMakeLists.txt): UPLINK_SOURCE_DIR (the repository),
// UPLINK_NODE (the node binary), UPLINK_CHARTRENDER (the built chartrender).
package charttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"uplink/chart/helmlite"
)

func sourceDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("UPLINK_SOURCE_DIR")
	if dir == "" {
		t.Fatal("UPLINK_SOURCE_DIR is not set (run through ctest)")
	}
	return dir
}

func chartDir(t *testing.T) string { return filepath.Join(sourceDir(t), "charts", "uplink-agent") }

func loadChart(t *testing.T) *helmlite.Chart {
	t.Helper()
	chart, err := helmlite.LoadChart(chartDir(t))
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return chart
}

// renderCase is one combination of values.
type renderCase struct {
	name        string
	release     string
	namespace   string
	kubeVersion string // empty: helmlite's default
	values      string // YAML laid over the chart's values.yaml
}

// requiredValues are what every install must give (the console and the token).
const requiredValues = `
config:
  baseUrl: https://console.example.com
token:
  existingSecret: agent-connection-token
`

func (c renderCase) releaseName() string {
	if c.release == "" {
		return "uplink-agent"
	}
	return c.release
}

func (c renderCase) namespaceName() string {
	if c.namespace == "" {
		return "uplink"
	}
	return c.namespace
}

func userValues(t *testing.T, yamlTexts ...string) map[string]interface{} {
	t.Helper()
	merged := map[string]interface{}{}
	for _, text := range yamlTexts {
		values, err := helmlite.ReadValues([]byte(text))
		if err != nil {
			t.Fatalf("test values do not parse: %v\n%s", err, text)
		}
		merged = helmlite.MergeValues(merged, values)
	}
	return merged
}

func render(t *testing.T, chart *helmlite.Chart, c renderCase) *helmlite.Result {
	t.Helper()
	result, err := helmlite.Render(chart, helmlite.Options{
		ReleaseName: c.releaseName(), Namespace: c.namespaceName(), KubeVersion: c.kubeVersion,
		Values: userValues(t, requiredValues, c.values),
	})
	if err != nil {
		t.Fatalf("case %s: rendering failed: %v", c.name, err)
	}
	return result
}

// executionValues are what execution.json from the console holds, with a credential Secret.
const executionValues = `
execution:
  enabled: true
  cluster: {offerId: off_0123456789abcdef, name: prod-a}
  workspaceImage: registry.example/uplink-workspace@sha256:3333333333333333333333333333333333333333333333333333333333333333
  capacityGpus: 8
  maxLifetimeSeconds: 86400
  nodes: [gpu-node-0001, gpu-node-0002]
  namespace: uplink-workspaces
  resourcesPerGpu: {cpuMillis: 8000, memoryBytes: 68719476736, ephemeralStorageBytes: 107374182400}
  kubernetesApi: {cidrs: [10.0.0.1/32], port: 6443}
  console: {cidrs: [203.0.113.10/32], port: 443}
  credential: {existingSecret: uplink-execution}
`

// matrix is the set of value combinations every structural test runs over.
var matrix = []renderCase{
	{name: "defaults"},
	{name: "token-value", values: `
token:
  existingSecret: ""
  value: agt_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG
`},
	{name: "existing-secret-wins", values: `
token:
  value: agt_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG
`},
	{name: "kubernetes", values: `
kubernetes:
  enabled: true
`},
	{name: "kubernetes-gpu", values: `
kubernetes:
  enabled: true
  node:
    gpu:
      runtimeClassName: nvidia
    nodeSelector:
      nvidia.com/gpu.present: "true"
    tolerations:
      - key: nvidia.com/gpu
        operator: Exists
        effect: NoSchedule
    spoolHostPath: /data/uplink/spool
  cluster:
    spool:
      hostPath: /data/uplink/spool
`},
	{name: "cluster-spool-claim", values: `
kubernetes:
  enabled: true
  cluster:
    spool:
      type: persistentVolumeClaim
      persistentVolumeClaim:
        storageClassName: fast-ssd
        size: 2Gi
`},
	{name: "cluster-spool-existing-claim", values: `
kubernetes:
  enabled: true
  cluster:
    spool:
      type: persistentVolumeClaim
      persistentVolumeClaim:
        existingClaim: uplink-spool
`},
	{name: "digests", values: `
kubernetes:
  enabled: true
image:
  tag: 0.1.0-rc1
  digest: sha256:1111111111111111111111111111111111111111111111111111111111111111
  clusterDigest: sha256:2222222222222222222222222222222222222222222222222222222222222222
`},
	{name: "network-cidrs", values: `
config:
  baseUrl: https://console.example.com:8443/
kubernetes:
  enabled: true
  apiServerPorts: [6443]
networkPolicy:
  apiServerCIDRs: [10.0.0.1/32, "fd00::1/128"]
  consoleCIDRs: [203.0.113.10/32]
  metricsFrom:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: monitoring
`},
	{name: "no-network-policy", values: `
kubernetes:
  enabled: true
networkPolicy:
  enabled: false
`},
	{name: "ca-bundle", values: `
kubernetes:
  enabled: true
config:
  caBundle: |
    -----BEGIN CERTIFICATE-----
    MIIBszCCAVmgAwIBAgIUexample
    -----END CERTIFICATE-----
`},
	{name: "custom-names", release: "prod", namespace: "gpu-agents", values: `
fullnameOverride: gpu-reporter
nodes:
  selector: "nvidia.com/gpu.present=true,node-role.kubernetes.io/worker in (a, b)"
config:
  enableWandb: false
  enableMlflow: false
  logLevel: debug
imagePullSecrets:
  - name: registry-login
resources:
  inventory:
    requests: {cpu: 5m, memory: 24Mi}
    limits: {memory: 64Mi}
kubernetes:
  enabled: true
`},
	{name: "ipv6-console", values: `
config:
  baseUrl: "https://[2001:db8::10]:9443"
`},
	{name: "spool-not-reserved", values: `
kubernetes:
  enabled: true
spool:
  reserveDisk: false
experiments:
  mlflow:
    volume: {persistentVolumeClaim: training-runs}
`},
	{name: "experiments-volumes", values: `
experiments:
  mlflow:
    volume: {persistentVolumeClaim: training-runs, subPath: mlruns}
  wandb:
    volume: {hostPath: /data/wandb}
  nodeSelector:
    kubernetes.io/hostname: gpu-node-7
  supplementalGroups: [1000]
`},
	{name: "experiments-server", values: `
experiments:
  mlflow:
    trackingUri: https://mlflow.ml.svc:5443/tracking
    credentialSecret: mlflow-credential
    tokenKey: token
    caBundle: |
      -----BEGIN CERTIFICATE-----
      MIIBszCCAVmgAwIBAgIUexample
      -----END CERTIFICATE-----
  wandb:
    volume: {persistentVolumeClaim: wandb-runs}
    staleAfter: 30m
  interval: 1m
  statePersistentVolumeClaim: experiments-state
networkPolicy:
  mlflowCIDRs: [10.20.0.0/16]
`},
	{name: "execution", kubeVersion: "v1.35.0", values: executionValues},
	{name: "execution-runtime", kubeVersion: "v1.34.2", values: executionValues + `
  runtimeClassName: nvidia
  hostUsers: false
  credential: {value: exe_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG}
networkPolicy:
  enabled: false
`},
	{name: "experiments-off", values: `
config:
  enableWandb: false
  enableMlflow: false
experiments:
  mlflow:
    trackingUri: http://mlflow.ml.svc:5000
  wandb:
    volume: {persistentVolumeClaim: wandb-runs}
`},
}

// --- helpers over rendered objects ---

type object = map[string]interface{}

func asMap(v interface{}) object         { m, _ := v.(map[string]interface{}); return m }
func asList(v interface{}) []interface{} { l, _ := v.([]interface{}); return l }
func asString(v interface{}) string      { s, _ := v.(string); return s }
func get(o object, path ...string) interface{} {
	var current interface{} = o
	for _, key := range path {
		current = asMap(current)[key]
	}
	return current
}

func byKind(result *helmlite.Result, kind string) []object {
	var out []object
	for _, m := range result.Manifests {
		if m.Kind() == kind {
			out = append(out, m.Object)
		}
	}
	return out
}

func find(t *testing.T, result *helmlite.Result, kind, name string) object {
	t.Helper()
	for _, m := range result.Manifests {
		if m.Kind() == kind && m.Name() == name {
			return m.Object
		}
	}
	t.Fatalf("no %s %s in the render; have %v", kind, name, inventoryOf(result))
	return nil
}

func has(result *helmlite.Result, kind, name string) bool {
	for _, m := range result.Manifests {
		if m.Kind() == kind && m.Name() == name {
			return true
		}
	}
	return false
}

func inventoryOf(result *helmlite.Result) []string {
	var out []string
	for _, m := range result.Manifests {
		out = append(out, m.Kind()+"/"+m.Name())
	}
	sort.Strings(out)
	return out
}

// workloads are the Deployments and DaemonSets of a render.
func workloads(result *helmlite.Result) []object {
	return append(byKind(result, "Deployment"), byKind(result, "DaemonSet")...)
}

func podSpec(workload object) object { return asMap(get(workload, "spec", "template", "spec")) }

func componentOf(o object) string {
	return asString(get(o, "metadata", "labels", "app.kubernetes.io/component"))
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(data)
}

// sameJSON compares two values by their JSON form (numbers from YAML are float64).
func sameJSON(t *testing.T, got interface{}, wantJSON string) bool {
	t.Helper()
	var want interface{}
	if err := json.Unmarshal([]byte(wantJSON), &want); err != nil {
		t.Fatalf("bad expectation %s: %v", wantJSON, err)
	}
	var gotNormal interface{}
	if err := json.Unmarshal([]byte(toJSON(got)), &gotNormal); err != nil {
		t.Fatal(err)
	}
	return toJSON(gotNormal) == toJSON(want)
}

func containsAll(t *testing.T, what, text string, parts ...string) {
	t.Helper()
	for _, part := range parts {
		if !strings.Contains(text, part) {
			t.Errorf("%s does not contain %q:\n%s", what, part, text)
		}
	}
}
