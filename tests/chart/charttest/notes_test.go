package charttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readFile(t *testing.T, parts ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// NOTES.txt says how to check the connection, what "Waiting for agent" means, why the
// namespace needs privileged pods, and plainly when HTTPS egress is not restricted.
func TestNotesExplainTheInstall(t *testing.T) {
	chart := loadChart(t)
	for _, c := range matrix {
		notes := render(t, chart, c).Notes
		full := fullname(c)
		ns := c.namespaceName()
		containsAll(t, c.name+" NOTES", notes,
			"kubectl -n "+ns+" get pods -o wide",
			`"Waiting for agent"`, "until the\nfirst report arrives",
			"one "+full+"-inventory pod")
		kubernetes := strings.Contains(c.values, "kubernetes:\n  enabled: true") || c.name == "kubernetes"
		if kubernetes {
			containsAll(t, c.name+" NOTES", notes,
				"one "+full+"-cluster pod and one\n"+full+"-node pod per node",
				"The namespace must allow privileged pods: the node DaemonSet mounts host paths",
				"kubectl label namespace "+ns+" pod-security.kubernetes.io/enforce=privileged")
		} else if strings.Contains(notes, "privileged") {
			t.Errorf("%s: NOTES asks for privileged pods without the node DaemonSet", c.name)
		}
		restricted := strings.Contains(c.values, "consoleCIDRs")
		disabled := strings.Contains(c.values, "enabled: false")
		switch {
		case disabled:
			containsAll(t, c.name+" NOTES", notes, "networkPolicy.enabled is false")
		case restricted:
			containsAll(t, c.name+" NOTES", notes, "(port 8443 at 203.0.113.10/32 only)")
			if strings.Contains(notes, "NOT restricted") {
				t.Errorf("%s: NOTES says HTTPS egress is unrestricted although consoleCIDRs is set", c.name)
			}
		default:
			containsAll(t, c.name+" NOTES", notes,
				"HTTPS egress is NOT restricted to one destination",
				"set networkPolicy.consoleCIDRs to the console's\naddresses")
		}
	}
}
