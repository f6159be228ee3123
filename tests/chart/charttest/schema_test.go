package charttest

import (
	"strings"
	"testing"

	"uplink/chart/helmlite"
)

const schemaPreamble = "values don't meet the specifications of the schema(s) in the following chart(s):\nuplink-agent:\n"

// Bad values are refused before anything renders, with a message naming the value and
// saying what is wrong with it.
func TestSchemaRefusesBadValuesReadably(t *testing.T) {
	chart := loadChart(t)
	cases := []struct {
		name, values string
		want         []string
	}{
		{"empty selector", `nodes: {selector: ""}`,
			[]string{"- nodes.selector: String length must be greater than or equal to 1"}},
		{"blank selector", `nodes: {selector: "   "}`,
			[]string{`- nodes.selector: Does not match pattern '\S'`}},
		{"http console", `config: {baseUrl: "http://console.example.com"}`,
			[]string{"- config.baseUrl: Does not match pattern '^(https://"}},
		{"console with a path", `config: {baseUrl: "https://console.example.com/api"}`,
			[]string{"- config.baseUrl: Does not match pattern '^(https://"}},
		{"console with credentials", `config: {baseUrl: "https://user:pw@console.example.com"}`,
			[]string{"- config.baseUrl: Does not match pattern"}},
		{"unknown top-level key", `replicas: 2`,
			[]string{"- (root): Additional property replicas is not allowed"}},
		{"unknown nested key", `token: {existingSecretName: x}`,
			[]string{"- token: Additional property existingSecretName is not allowed"}},
		{"misspelt kubernetes key", `kubernetes: {enable: true}`,
			[]string{"- kubernetes: Additional property enable is not allowed"}},
		{"misspelt node key", `kubernetes: {node: {runtimeClassName: nvidia}}`,
			[]string{"- kubernetes.node: Additional property runtimeClassName is not allowed"}},
		{"api server port out of range", `kubernetes: {apiServerPorts: [443, 70000]}`,
			[]string{"- kubernetes.apiServerPorts.1: Must be less than or equal to 65535"}},
		{"no api server port", `kubernetes: {apiServerPorts: []}`,
			[]string{"- kubernetes.apiServerPorts: Array must have at least 1 items"}},
		{"bad console CIDR", `networkPolicy: {consoleCIDRs: [console.example.com]}`,
			[]string{"- networkPolicy.consoleCIDRs.0: Does not match pattern"}},
		{"unknown cluster spool type", `kubernetes: {cluster: {spool: {type: emptyDir}}}`,
			[]string{"- kubernetes.cluster.spool.type: kubernetes.cluster.spool.type must be one of the following"}},
		{"cluster spool size without a unit", `kubernetes: {cluster: {spool: {persistentVolumeClaim: {size: "1000000"}}}}`,
			[]string{"- kubernetes.cluster.spool.persistentVolumeClaim.size: Does not match pattern"}},
		{"relative cluster spool path", `kubernetes: {cluster: {spool: {hostPath: data/spool}}}`,
			[]string{"- kubernetes.cluster.spool.hostPath: Does not match pattern"}},
		{"relative spool path", `kubernetes: {node: {spoolHostPath: var/lib/uplink}}`,
			[]string{"- kubernetes.node.spoolHostPath: Does not match pattern"}},
		{"spool path escaping upwards", `kubernetes: {node: {spoolHostPath: /var/lib/../../etc}}`,
			[]string{"- kubernetes.node.spoolHostPath: Does not match pattern"}},
		{"bad digest", `image: {digest: "sha256:abc"}`,
			[]string{"- image.digest: Does not match pattern '^(sha256:[a-f0-9]{64})?$'"}},
		{"repository with a tag", `image: {repository: "ghcr.io/uplink/uplink-agent:latest"}`,
			[]string{"- image.repository: Does not match pattern"}},
		{"workspace image by tag", `execution: {workspaceImage: "registry.example/workspace:latest"}`,
			[]string{"- execution.workspaceImage: Does not match pattern"}},
		{"an agt_ token as the execution credential", `execution: {credential: {value: agt_0123456789abcdef}}`,
			[]string{"- execution.credential.value: Does not match pattern"}},
		{"a preempting workspace priority", `execution: {priorityValue: 1000}`,
			[]string{"- execution.priorityValue: Must be less than or equal to 0"}},
		{"unknown execution value", `execution: {gpuSharing: mig}`,
			[]string{"- execution: Additional property gpuSharing is not allowed"}},
		{"no memory limit", `resources: {node: {limits: {memory: null}}}`,
			[]string{"- resources.node.limits: memory is required"}},
		{"bad quantity", `resources: {node: {requests: {cpu: lots, memory: 32Mi}, limits: {memory: 1Gi}}}`,
			[]string{"- resources.node.requests.cpu: Does not match pattern"}},
		{"string for a boolean", `kubernetes: {enabled: "yes"}`,
			[]string{"- kubernetes.enabled: Invalid type. Expected: boolean, given: string"}},
		{"unknown toleration field", `kubernetes: {node: {tolerations: [{operator: Exists, efect: NoSchedule}]}}`,
			[]string{"- kubernetes.node.tolerations.0: Additional property efect is not allowed"}},
	}
	for _, c := range cases {
		_, err := helmlite.Render(chart, helmlite.Options{
			ReleaseName: "uplink-agent", Namespace: "uplink", Values: userValues(t, requiredValues, c.values),
		})
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.HasPrefix(err.Error(), schemaPreamble) {
			t.Errorf("%s: not a schema refusal: %v", c.name, err)
		}
		containsAll(t, c.name, err.Error(), c.want...)
	}
}

// A token that does not look like one is refused without being repeated.
func TestSchemaRefusalNeverEchoesTheToken(t *testing.T) {
	const badToken = "agt_short-but-secret!"
	_, err := helmlite.Render(loadChart(t), helmlite.Options{
		ReleaseName: "uplink-agent", Namespace: "uplink",
		Values: userValues(t, requiredValues, "token: {existingSecret: '', value: '"+badToken+"'}"),
	})
	if err == nil {
		t.Fatal("a malformed token was accepted")
	}
	containsAll(t, "token refusal", err.Error(), "- token.value: Does not match pattern")
	if strings.Contains(err.Error(), "short-but-secret") {
		t.Errorf("the refusal repeats the token: %v", err)
	}
}

// What the schema cannot say (a value that depends on another) the templates say.
func TestTemplatesRefuseMissingConsoleAndToken(t *testing.T) {
	chart := loadChart(t)
	cases := []struct {
		name, values, want string
	}{
		{"no console", `token: {existingSecret: s}`,
			"config.baseUrl is required: the console's address, https://HOST[:PORT]"},
		{"no token", `config: {baseUrl: "https://console.example.com"}`,
			"set token.existingSecret (a Secret holding the connection token under token.secretKey"},
		{"a spool claim too small", requiredValues + `
kubernetes:
  enabled: true
  cluster: {spool: {type: persistentVolumeClaim, persistentVolumeClaim: {size: 0.5Gi}}}`,
			"kubernetes.cluster.spool.persistentVolumeClaim.size 0.5Gi is too small: the cluster role's spool holds up to 512 MiB"},
	}
	for _, c := range cases {
		_, err := helmlite.Render(chart, helmlite.Options{
			ReleaseName: "uplink-agent", Namespace: "uplink", Values: userValues(t, c.values),
		})
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "execution error at (uplink-agent/templates/") {
			t.Errorf("%s: not a template refusal: %v", c.name, err)
		}
		containsAll(t, c.name, err.Error(), c.want)
	}
}

// The values every value in the schema takes are documented in the chart's README with
// their defaults, and the schema constrains every key of values.yaml.
func TestEveryValueIsDocumented(t *testing.T) {
	chart := loadChart(t)
	readme := readFile(t, chartDir(t), "README.md")
	for _, key := range leafKeys("", chart.Values) {
		if !strings.Contains(readme, "`"+key+"`") {
			t.Errorf("README.md does not document `%s`", key)
		}
	}
}

// leafKeys lists values.yaml's keys down to leaves; maps that hold user-chosen keys
// (nodeSelector, resources' contents) stop at the map.
func leafKeys(prefix string, values map[string]interface{}) []string {
	var out []string
	for key, value := range values {
		full := key
		if prefix != "" {
			full = prefix + "." + key
		}
		inner, isMap := value.(map[string]interface{})
		if !isMap || len(inner) == 0 || strings.HasPrefix(full, "resources.") {
			out = append(out, full)
			continue
		}
		out = append(out, leafKeys(full, inner)...)
	}
	return out
}

// kubernetes.enabled with an agent image older than the first with the cluster and node
// roles (0.1.0) is refused, saying which image and what to do; the inventory alone is not.
func TestTemplatesRefuseKubernetesWithAnAgentImageTooOld(t *testing.T) {
	chart := loadChart(t)
	render := func(values string) error {
		_, err := helmlite.Render(chart, helmlite.Options{
			ReleaseName: "uplink-agent", Namespace: "uplink", Values: userValues(t, requiredValues, values),
		})
		return err
	}
	refused := map[string]string{
		"kubernetes: {enabled: true}\nimage: {tag: 0.0.9}": "kubernetes.enabled needs uplink-agent 0.1.0 or later (the first with the " +
			"cluster and node roles), but image.tag 0.0.9 names an older agent image: install " +
			"ghcr.io/uplink/uplink-agent:0.1.0 or later",
		"kubernetes: {enabled: true}\nimage: {tag: v0.0.1, digest: \"sha256:" + strings.Repeat("1", 64) + "\"}": "image.tag v0.0.1 names an older agent image",
		"kubernetes: {enabled: true}\nimage: {tag: 0.0.10-rc.1}":                                                "image.tag 0.0.10-rc.1 names an older agent image",
		"kubernetes: {enabled: true}\nimage: {tag: latest}":                                                     `image.tag "latest" is not a version, so the chart cannot tell: set image.tag to the version`,
	}
	for values, want := range refused {
		err := render(values)
		if err == nil {
			t.Errorf("%s: accepted", values)
			continue
		}
		if !strings.HasPrefix(err.Error(), "execution error at (uplink-agent/templates/") {
			t.Errorf("%s: not a template refusal: %v", values, err)
		}
		containsAll(t, values, err.Error(), want)
	}
	for _, values := range []string{
		"kubernetes: {enabled: false}\nimage: {tag: 0.0.9}",
		"kubernetes: {enabled: false}\nimage: {tag: latest}",
		"kubernetes: {enabled: true}",
		"kubernetes: {enabled: true}\nimage: {tag: 0.1.0}",
		"kubernetes: {enabled: true}\nimage: {tag: 0.1.0-rc1}",
		"kubernetes: {enabled: true}\nimage: {tag: v0.2.0}",
		"kubernetes: {enabled: true}\nimage: {tag: 1.2.3}",
	} {
		if err := render(values); err != nil {
			t.Errorf("%s: refused: %v", values, err)
		}
	}
}
