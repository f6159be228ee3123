package charttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var manifestFiles = []string{"uplink-agent.yaml", "uplink-agent-kubernetes.yaml"}

// deploy/manifests/ is exactly what `make manifests` renders from the chart now.
func TestManifestsAreCurrent(t *testing.T) {
	renderer := os.Getenv("UPLINK_CHARTRENDER")
	if renderer == "" {
		t.Fatal("UPLINK_CHARTRENDER is not set (run through ctest)")
	}
	fresh := t.TempDir()
	script := filepath.Join(sourceDir(t), "deploy", "manifests", "render.sh")
	if out, err := exec.Command(script, renderer, fresh).CombinedOutput(); err != nil {
		t.Fatalf("render.sh: %v\n%s", err, out)
	}
	for _, name := range manifestFiles {
		committed := readFile(t, sourceDir(t), "deploy", "manifests", name)
		rendered := readFile(t, fresh, name)
		if committed != rendered {
			t.Errorf("deploy/manifests/%s is out of date with charts/uplink-agent: run `make manifests`\n%s",
				name, firstDifference(committed, rendered))
		}
	}
}

// The checked-in manifests validate like every render, and hold what their README says.
func TestManifestsValidate(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, name := range manifestFiles {
		text := readFile(t, sourceDir(t), "deploy", "manifests", name)
		var manifests []map[string]interface{}
		kinds := map[string]int{}
		for _, doc := range strings.Split(text, "\n---\n") {
			var o map[string]interface{}
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if o == nil {
				continue
			}
			kinds[asString(o["kind"])]++
			manifests = append(manifests, map[string]interface{}{"source": name, "object": o})
		}
		wantDaemonSets := 0
		if name == "uplink-agent-kubernetes.yaml" {
			wantDaemonSets = 1
		}
		if kinds["DaemonSet"] != wantDaemonSets || kinds["Deployment"] != 1+wantDaemonSets {
			t.Errorf("%s: kinds %v", name, kinds)
		}
		if !strings.Contains(text, "--console=https://console.example.invalid") {
			t.Errorf("%s: no console placeholder", name)
		}
		files = append(files, writeRender(t, dir, strings.TrimSuffix(name, ".yaml"), manifests))
	}
	if out, err := runValidator(t, files...); err != nil {
		t.Fatalf("deploy/manifests does not validate: %v\n%s", err, out)
	}
}

func firstDifference(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return "first difference at line " + strconv.Itoa(i+1) + ":\n  committed: " + x + "\n  rendered:  " + y
		}
	}
	return ""
}
