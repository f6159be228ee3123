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

// A console address no pod can reach gets a plain warning in NOTES; a reachable one none.
func TestNotesWarnOfAConsoleTheClusterCannotReach(t *testing.T) {
	chart := loadChart(t)
	unreachable := map[string]string{
		"https://localhost:8443":         "localhost is a loopback address",
		"https://LocalHost:8443":         "localhost is a loopback address",
		"https://gpu.localhost":          "gpu.localhost is a loopback address",
		"https://127.0.0.1:8443":         "127.0.0.1 is a loopback address",
		"https://127.10.0.3":             "127.10.0.3 is a loopback address",
		"https://[::1]:8443":             "::1 is a loopback address",
		"https://0.0.0.0:8443":           "0.0.0.0 is the unspecified address",
		"https://console.local":          "console.local is a multicast DNS (.local) name",
		"https://Studio.Local:9443/":     "studio.local is a multicast DNS (.local) name",
		"https://[::ffff:127.0.0.1]:443": "::ffff:127.0.0.1 is a loopback address",
	}
	for url, reason := range unreachable {
		c := renderCase{name: url, values: "config:\n  baseUrl: \"" + url + "\"\n"}
		notes := render(t, chart, c).Notes
		containsAll(t, url, notes, "WARNING: the agent cannot reach this console. "+reason,
			"Set config.baseUrl to an address of the console that the cluster's pods can reach")
	}
	for _, url := range []string{"https://console.example.com", "https://10.0.0.5:8443",
		"https://[2001:db8::10]:9443", "https://local.example.com", "https://localhost.example.com"} {
		c := renderCase{name: url, values: "config:\n  baseUrl: \"" + url + "\"\n"}
		if notes := render(t, chart, c).Notes; strings.Contains(notes, "WARNING") {
			t.Errorf("%s: warned although reachable:\n%s", url, notes)
		}
	}
}
