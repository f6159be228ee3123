package charttest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func nodeBinary(t *testing.T) string {
	t.Helper()
	node := os.Getenv("UPLINK_NODE")
	if node == "" {
		t.Fatal("UPLINK_NODE is not set (run through ctest)")
	}
	return node
}

// writeRender writes manifests as chartrender --output json does.
func writeRender(t *testing.T, dir, name string, manifests []map[string]interface{}) string {
	t.Helper()
	data, err := json.Marshal(map[string]interface{}{"manifests": manifests, "notes": ""})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runValidator(t *testing.T, files ...string) (string, error) {
	t.Helper()
	script := filepath.Join(sourceDir(t), "tests", "chart", "validate", "validate.mjs")
	out, err := exec.Command(nodeBinary(t), append([]string{script}, files...)...).CombinedOutput()
	return string(out), err
}

// Every object of every combination validates against the Kubernetes schemas
// (kubernetes-models) and the strict TypeScript types (kubernetes-types: no unknown field).
func TestEveryRenderValidatesAgainstKubernetesSchemas(t *testing.T) {
	chart := loadChart(t)
	dir := t.TempDir()
	var files []string
	objects := 0
	for _, c := range matrix {
		result := render(t, chart, c)
		var manifests []map[string]interface{}
		for _, m := range result.Manifests {
			manifests = append(manifests, map[string]interface{}{"source": m.Source, "object": m.Object})
		}
		objects += len(manifests)
		files = append(files, writeRender(t, dir, c.name, manifests))
	}
	out, err := runValidator(t, files...)
	if err != nil {
		t.Fatalf("validation failed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "all valid") || !strings.Contains(out, " objects in ") {
		t.Errorf("unexpected validator output:\n%s", out)
	}
	t.Logf("%d objects in %d renders: %s", objects, len(matrix), strings.TrimSpace(out))
}

// The validator itself catches what it is there to catch: an unknown field (which only
// the strict types see), a wrong type, a missing required field, an unknown kind.
func TestValidatorCatchesDefects(t *testing.T) {
	dir := t.TempDir()
	pod := func(name string, container map[string]interface{}) map[string]interface{} {
		return map[string]interface{}{"source": "test", "object": map[string]interface{}{
			"apiVersion": "v1", "kind": "Pod", "metadata": map[string]interface{}{"name": name},
			"spec": map[string]interface{}{"containers": []interface{}{container}},
		}}
	}
	cases := []struct {
		name     string
		manifest map[string]interface{}
		want     string
	}{
		{"unknown-field", pod("typo", map[string]interface{}{"name": "c", "image": "x", "imagee": "y"}),
			`TS2353 Object literal may only specify known properties, and '"imagee"' does not exist in type 'Container'`},
		{"misspelt-security-setting", pod("security", map[string]interface{}{"name": "c", "image": "x",
			"securityContext": map[string]interface{}{"readOnlyRootFilesysten": true}}),
			`'"readOnlyRootFilesysten"' does not exist in type 'SecurityContext'`},
		{"wrong-type", pod("port", map[string]interface{}{"name": "c", "image": "x",
			"ports": []interface{}{map[string]interface{}{"containerPort": "http"}}}),
			"containerPort must be integer"},
		{"missing-required", pod("nameless", map[string]interface{}{"image": "x"}),
			"data/spec/containers/0 must have required property name"},
		{"unknown-kind", map[string]interface{}{"source": "test", "object": map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]interface{}{"name": "w"}}},
			"kubernetes-models has no example.com/v1 Widget"},
	}
	for _, c := range cases {
		out, err := runValidator(t, writeRender(t, dir, c.name, []map[string]interface{}{c.manifest}))
		if err == nil {
			t.Errorf("%s: accepted:\n%s", c.name, out)
			continue
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: output lacks %q:\n%s", c.name, c.want, out)
		}
	}
}
